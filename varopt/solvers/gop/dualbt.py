r"""Reduced-cost (duality-based) bound tightening from a node LP (docs/gop.md §8d).

Ryoo & Sahinidis (1996, "A branch-and-reduce approach to global optimization", Theorem 2):
for the LP ``min c^T x  s.t.  r_lo <= A x <= r_hi,  L <= x <= U`` and *any* row multipliers
``y`` let ``d = c - A^T y`` (the reduced costs of ``y``). For every feasible ``x``::

    c^T x = y^T (A x) + d^T x >= sum_i min(y_i r_lo_i, y_i r_hi_i) + sum_k min(d_k L_k, d_k U_k) =: D

(each term is minimised over its own interval; a zero multiplier contributes 0 even when its
bound is infinite). A point with ``c^T x <= cutoff`` therefore has, for every column ``j``,
``d_j x_j <= cutoff - (D - min(d_j L_j, d_j U_j))``: an upper bound on ``x_j`` when ``d_j > 0``,
a lower one when ``d_j < 0``. With the node LP's optimal duals this is the classical
reduced-cost fixing (``x_j <= L_j + (cutoff - v) / d_j`` for a column at its lower bound);
recomputing ``d`` from ``y`` and bounding every term over its interval (Neumaier & Shcherbina
2004) makes the bound valid for whatever ``y`` HiGHS returns, exactly or not: only the sign
rule ``y_i > 0`` needs a finite ``r_lo_i`` (``y_i < 0`` a finite ``r_hi_i``), and multipliers
that break it are set to 0 (still a valid ``y``).

The node LP is the McCormick relaxation of the node's box (:mod:`.relax`), which contains the
lift of every feasible point of the box, so the bounds hold for every feasible point of the box
whose objective is at most ``cutoff`` (the incumbent value): no such point is lost.
"""
from __future__ import annotations

import numpy as np


def _terms(c, A, r_lo, r_hi, L, U, y):
    """``(row_term, col_term, d)`` of the module docstring for the multipliers ``y`` (those that break the sign rule
    set to 0); a column term is ``-inf`` where ``d`` selects an infinite bound."""
    y = np.asarray(y, dtype=float).copy()
    y[~np.isfinite(y)] = 0.0
    # a multiplier whose row bound is infinite on its side would make D = -inf: drop it
    y[(y > 0) & ~np.isfinite(r_lo)] = 0.0
    y[(y < 0) & ~np.isfinite(r_hi)] = 0.0
    row_term = np.where(y > 0, y * np.where(np.isfinite(r_lo), r_lo, 0.0),
                        np.where(y < 0, y * np.where(np.isfinite(r_hi), r_hi, 0.0), 0.0))
    d = np.asarray(c, dtype=float) - A.T @ y
    with np.errstate(invalid="ignore"):
        col_term = np.where(d > 0, d * L, np.where(d < 0, d * U, 0.0))
    col_term = np.where(np.isnan(col_term), -np.inf, col_term)
    return row_term, col_term, d


def weak_dual_bound(c, A, r_lo, r_hi, L, U, y, eps=1e-9, rounding=1e-12):
    """``D`` of the module docstring, less ``rounding`` times the sum of its terms' magnitudes: a lower bound on the
    LP's value that holds for whatever multipliers ``y`` the LP solver returned (Neumaier & Shcherbina 2004), ``-inf``
    when a term is infinite (reduced costs within ``eps`` of 0 count as 0 against an infinite bound). With cost 0 and
    a dual ray ``y``, ``D > 0`` proves the LP infeasible (Farkas): the tree's check of HiGHS's "infeasible" nodes
    (docs/gop.md §13i)."""
    if y is None:
        return -np.inf
    row_term, col_term, d = _terms(c, A, r_lo, r_hi, L, U, y)
    # reduced costs within HiGHS's dual feasibility tolerance of 0 count as 0 against an infinite bound (the rule of
    # the relaxed duals' bound, relaxed_dual._row_term): a free column's term is otherwise -inf for any rounding
    col_term = np.where(~np.isfinite(col_term) & (np.abs(d) <= eps), 0.0, col_term)
    if not np.all(np.isfinite(col_term)):
        return -np.inf
    D = float(row_term.sum() + col_term.sum())
    return D - rounding * (float(np.abs(row_term).sum() + np.abs(col_term).sum()) + 1.0)


def reduced_cost_bounds(c, A, r_lo, r_hi, L, U, y, cutoff, eps=1e-9):
    """New column bounds ``(L', U')`` (never looser than ``(L, U)``) for the points of the LP with
    ``c^T x <= cutoff``; ``None`` when the multipliers give nothing (an infinite term)."""
    if y is None or not np.isfinite(cutoff):
        return None
    row_term, col_term, d = _terms(c, A, r_lo, r_hi, L, U, y)
    inf_cols = np.flatnonzero(~np.isfinite(col_term))
    if inf_cols.size > 1:
        return None
    fin = np.isfinite(col_term)
    D_fin = float(row_term.sum() + col_term[fin].sum())
    # floating-point slack of the sums (every term is rounded once or twice)
    slack = eps * (float(np.abs(row_term).sum() + np.abs(col_term[fin]).sum()) + abs(cutoff) + 1.0)
    # D without column j: the finite sum minus j's own term (j's term may be the one infinite term)
    rest = np.where(fin, D_fin - np.where(fin, col_term, 0.0), D_fin)
    if inf_cols.size == 1:
        mask = np.zeros(d.size, dtype=bool)
        mask[inf_cols] = True
    else:
        mask = np.ones(d.size, dtype=bool)
    big = np.abs(d) > 1e-9
    mask &= big
    L2, U2 = np.array(L, dtype=float), np.array(U, dtype=float)
    if not mask.any():
        return L2, U2
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (cutoff - rest + slack) / np.where(big, d, 1.0)
    # the division itself rounds: widen by a relative hair
    b = b + np.where(d > 0, 1.0, -1.0) * eps * np.maximum(1.0, np.abs(b))
    up = mask & (d > 0) & np.isfinite(b)
    dn = mask & (d < 0) & np.isfinite(b)
    U2[up] = np.minimum(U2[up], b[up])
    L2[dn] = np.maximum(L2[dn], b[dn])
    return L2, U2
