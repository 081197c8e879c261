"""Quasi-Newton trials of ``bound_reuse`` on the null space of the linear rows held at the iterate.

Beyond the paper. The trial of :class:`.reuse.ScaledCurvature` minimises ``q(D) = u^T D + 1/2 D^T B D`` on the free
set of the box and is then cut to the feasible set by the ratio test. When a row ``a_i^T theta <= hi_i`` is active
at the iterate and ``D`` crosses it, the largest feasible factor is 0 and the trial is blocked at every iteration
(docs/majorize.md section 2b); when a column has no curvature (``t`` of ``norm1(w) <= t``, the columns of the
``abs`` lift) ``B`` is singular and the trial is not even formed. Here the held rows ``W`` (active at ``theta``)
are kept as equalities: the equality-constrained QP (Nocedal & Wright 2006, section 16.1)

    min_D u^T D + 1/2 D^T B D   s.t.  A_W D = 0,  D_j = 0 off the free set,

by its KKT system ``[[B, A_W^T], [A_W, 0]] [D; lam] = [-u; 0]`` (LU; ``B`` formed densely from ``c P`` and the
L-BFGS pairs by the BFGS update, Nocedal & Wright eq. 6.19). ``B`` needs curvature only on the null space of
``A_W``, which the held rows give the flat columns. A held inequality whose multiplier has the wrong sign
(``lam_i < 0`` at its upper side: the QP would leave the row inwards) is released and the system solved again,
as in a primal active-set method (at most ``len(W)`` times). The guaranteed decrease of the acceptance test (*)
of :mod:`.reuse` is that of the same QP on ``P`` (``B = P``, no pairs): ``-1/2 u^T D_P``, zero exactly at a
KKT point of the rows held, as the free-set guarantee is on a face of the box. The trial is then cut by the
ratio test on the rows not held and the bounds, and accepted by the same test (the objective decreases).
"""
from __future__ import annotations

import math

import numpy as np

from ...lpqp.active_set import independent_rows, kkt_solve

#: a row is held when its value is within this (relative) of a finite side
HELD_TOL = 1e-9
#: the dense KKT system is formed only for at most this many free variables
MAX_FREE = 1500
#: relative KKT residual beyond which a solve (singular system: a flat direction left free) is refused
KKT_RESIDUAL = 1e-8
#: held rows whose pivot in the QR of the held rows is below this (relative) are dependent on the others
DEPENDENT = 1e-10


def held_rows(A, x, lo, hi):
    """``(idx, side)``: the rows active at ``x`` (``side`` +1 at ``hi``, -1 at ``lo``, 0 for an equality)."""
    if not A.shape[0]:
        return np.zeros(0, dtype=int), np.zeros(0)
    Ax = A @ x
    with np.errstate(invalid="ignore"):
        # (an infinite side is never held: its tolerance is infinite too, so it is excluded by name)
        at_hi = np.isfinite(hi) & (np.abs(hi - Ax) <= HELD_TOL * np.maximum(1.0, np.abs(hi)))
        at_lo = np.isfinite(lo) & (np.abs(Ax - lo) <= HELD_TOL * np.maximum(1.0, np.abs(lo)))
    eq = at_hi & at_lo & (lo == hi)
    idx = np.flatnonzero(at_hi | at_lo)
    side = np.where(eq[idx], 0.0, np.where(at_hi[idx], 1.0, -1.0))
    return idx, side


def bfgs_matrix(P, c, pairs):
    """``B``: the BFGS updates of ``B_0 = c P`` by the ``pairs`` ``(s, y, 1/s^T y)`` (most recent first), oldest
    first (the matrix whose inverse the two-loop recursion applies)."""
    B = c * P
    for s, y, rho in reversed(pairs):
        Bs = B @ s
        sBs = float(s @ Bs)
        if not sBs > 0:
            continue
        B = B - np.outer(Bs, Bs) / sBs + rho * np.outer(y, y)
    return B


def _kkt(B, u, Aw):
    """``(D, lam)`` of the equality QP ``min u'D + 1/2 D'BD, Aw D = 0`` (the QP layer's saddle-point solve, whose
    multipliers are ``-lam``; no condition-number test: the residual below is the test), or None (singular,
    non-finite, or no positive curvature along ``D``)."""
    k = Aw.shape[0]
    got = kkt_solve(B, Aw, u, np.zeros(k), rcond_min=0.0)
    if got is None:
        return None
    D, lam = got[0], -got[1]
    res = np.concatenate((B @ D + Aw.T @ lam + u, Aw @ D))
    if float(np.abs(res).max()) > KKT_RESIDUAL * max(1.0, float(np.abs(u).max())):
        return None
    if not float(D @ (B @ D)) > 0:
        return None
    return D, lam


def null_space_direction(P, c, pairs, u, A, x, lo, hi, F):
    """The trial direction on the null space of the rows held at ``x`` (module docstring):
    ``(D, slope u^T D, guaranteed, held rows)`` in the full space, or None. ``P`` the dense metric, ``c`` the scale,
    ``pairs`` the L-BFGS pairs (full space), ``F`` the free set (boolean) of the box."""
    idx, side = held_rows(A, x, lo, hi)
    if not idx.size:
        return None
    Fi = np.flatnonzero(F)
    if not Fi.size or Fi.size > MAX_FREE:
        return None
    full = Fi.size == u.size
    PF = P if full else P[np.ix_(Fi, Fi)]
    uf = u if full else u[Fi]
    Aw = A[idx] if full else A[idx][:, Fi]
    # dependent held rows (a row written twice, a scaled copy) make the KKT system singular: an independent subset
    # (QR with column pivoting of Aw^T, as the step QP's active set does); x satisfies every held row, so D in the
    # subset's null space keeps the rest too
    sub = independent_rows(Aw, DEPENDENT)
    if sub.size < idx.size:
        idx, side, Aw = idx[sub], side[sub], Aw[sub]
    pf = []
    for s, y, _ in pairs:
        sf, yf = (s, y) if full else (s[Fi], y[Fi])
        sy = float(sf @ yf)
        if sy > 1e-12 * math.sqrt(float(sf @ sf) * float(yf @ yf)):
            pf.append((sf, yf, 1.0 / sy))
    B = bfgs_matrix(PF, c, pf)
    keep = np.ones(idx.size, dtype=bool)
    for _ in range(idx.size + 1):
        got = _kkt(B, uf, Aw[keep])
        if got is None:
            return None
        D, lam = got
        # a held inequality wants lam * side >= 0 (the multiplier of a_i'D <= 0 at hi, of -a_i'D <= 0 at lo)
        wrong = lam * side[keep]
        worst = int(np.argmin(wrong)) if wrong.size else -1
        if worst < 0 or wrong[worst] >= 0:
            break
        keep[np.flatnonzero(keep)[worst]] = False
    else:
        return None
    gotP = _kkt(PF, uf, Aw[keep])
    if gotP is None:
        return None
    guaranteed = -0.5 * float(uf @ gotP[0])
    slope = float(uf @ D)
    if not (guaranteed > 0 and slope < 0 and math.isfinite(slope)):
        return None
    if not full:
        Dfull = np.zeros(u.size)
        Dfull[Fi] = D
        D = Dfull
    return D, slope, guaranteed, idx[keep]


def max_factor_off(A, x, D, lo, hi, lb, ub, held):
    """The largest ``a`` with ``x + a D`` in the bounds and the rows other than ``held`` and those ``D`` moves by
    rounding only (``D`` lies in the null space of the held rows and of the rows dependent on them; the point is
    checked by :meth:`.step_qp.StepQP.feasible`)."""
    a = np.inf
    Ad = A @ D
    Ax = A @ x
    # rows D does not move beyond rounding (the held rows, rows dependent on them) never block
    mask = np.abs(Ad) > 1e-12 * (np.abs(A) @ np.abs(D))
    mask[held] = False
    v = np.concatenate((x, Ax[mask]))
    dv = np.concatenate((D, Ad[mask]))
    L = np.concatenate((lb, lo[mask]))
    U = np.concatenate((ub, hi[mask]))
    down, up = dv < 0, dv > 0
    with np.errstate(invalid="ignore"):
        if down.any():
            a = min(a, float(((L[down] - v[down]) / dv[down]).min()))
        if up.any():
            a = min(a, float(((U[up] - v[up]) / dv[up]).min()))
    return max(a, 0.0)
