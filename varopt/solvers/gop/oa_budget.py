r"""Which convex atoms a node LP cuts: the outer-approximation error measured in the objective (docs/gop.md §13j).

A node LP relaxes each convex atom column ``T_t = g(u_t)`` by tangent cuts (Kelley 1960; :mod:`.relax`), so at the
LP's point ``T_t`` may lie ``v_t = g(u_t) - T_t >= 0`` below the atom. The tree cuts until the *node's bound* is
within ``oa`` (a quarter of the gap tolerance) of what exact atoms would give. Asking ``v_t <= oa`` of every atom
does not do that: the bound moves by roughly ``pi_t v_t`` per atom, ``pi_t`` the LP's price of raising ``T_t``, and
lifted chains amplify it. MINLPLib ex4_1_2, a degree-50 polynomial lifted to ``q_2 = x^2``, ``q_3 = x q_2``,
``q_6 = q_3^2``, ..., ``x^50 = q_25^2``, has 25 square atoms whose prices reach 10-20 near the optimum: with every
``v_t`` below ``oa = 1.6e-4`` a node of width 4e-6 around the optimum kept its bound 6.6e-3 under the optimum (ten
times the gap tolerance), and the tree split such nodes until its time limit.

**Price of an atom.** For the LP ``min c^T Z`` s.t. ``r_lo <= A Z <= r_hi``, ``L <= Z <= U`` with row multipliers
``y`` and reduced costs ``d``, stationarity is ``c_j = sum_r A_rj y_r + d_j`` for every column ``j``. The terms
``A_rj y_r`` (and ``d_j``) are the forces of the rows (bounds) on column ``j``; those pushing ``T_t`` up sum to
``(S_t + c_j)/2`` and those pushing it down to ``(S_t - c_j)/2``, ``S_t = sum_r |A_rj y_r| + |d_j|``. The larger,
``pi_t = (S_t + |c_j|) / 2``, is an upper estimate of the rate at which the LP value rises with ``T_t``'s lower
envelope while the basis stays: each tangent row holding ``T_t`` down carries at most that force, and the LP value
moves with a row's side at the rate of its multiplier (Chvatal 1983, ch. 10; tested against finite differences).

**Budget rule.** With ``e_t = max(1, pi_t) v_t`` the atoms are cut from the largest ``e_t`` down until the ones left
sum to at most ``oa``: the estimated error of the bound left uncut is then ``<= oa``. Since ``max(1, pi_t) >= 1``,
every atom with ``v_t > oa`` is still cut (the rule before this one), so a node never gets fewer cuts than before.
Only *which* valid tangent cuts are added depends on the multipliers; any set of tangents keeps the relaxation
valid, so a wrong or missing multiplier can cost time, never a wrong bound.
"""
from __future__ import annotations

import numpy as np


def atom_prices(c, A, y, d, cols):
    """``pi_t`` of the module docstring for the columns ``cols`` (the atoms' ``T`` columns) of the LP
    ``min c^T Z, r_lo <= A Z <= r_hi``; row multipliers ``y``, reduced costs ``d`` (None: 0). Ones where ``y`` is
    missing, of another length than ``A``'s rows, or not finite (no multipliers: the per-atom rule)."""
    cols = np.asarray(cols, dtype=np.int64)
    if y is None or len(y) != A.shape[0] or not np.all(np.isfinite(y)):
        return np.ones(cols.size)
    At = A[:, cols].tocsc()
    S = np.asarray(abs(At).T @ np.abs(np.asarray(y, dtype=float))).ravel()
    if d is not None and len(d) == A.shape[1] and np.all(np.isfinite(d)):
        S = S + np.abs(np.asarray(d, dtype=float)[cols])
    return 0.5 * (S + np.abs(np.asarray(c, dtype=float)[cols]))


def atoms_to_cut(violation, price, budget):
    """Indices of the atoms to cut: ``violation`` ``v_t`` (``> 0`` where ``T_t`` lies under its atom), ``price``
    ``pi_t``; all but the smallest weighted violations ``max(1, pi_t) v_t`` whose sum stays within ``budget``."""
    v = np.asarray(violation, dtype=float)
    e = np.where(v > 0, np.maximum(1.0, np.asarray(price, dtype=float)) * v, 0.0)
    e = np.where(np.isfinite(e), e, np.inf)   # (an infinite violation: always cut)
    order = np.argsort(e, kind="stable")
    kept = np.cumsum(e[order]) <= budget     # the smallest errors that fit in the budget stay uncut
    cut = order[~kept]
    return np.sort(cut[e[cut] > 0])
