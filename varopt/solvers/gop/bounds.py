r"""Bounds of the GOP blocks: feasibility- and optimization-based bound tightening.

GOP sets the connected variables at their bounds (Saddiki, Trapp & Flaherty 2017, eq. (16)), so they need finite
bounds; the tighter they are the stronger the relaxed duals.

* FBBT (interval propagation) over the linear constraints ``lo <= a^T z <= hi``: for every
  row and variable ``j``, ``a_j z_j`` lies in ``[lo, hi] - sum_{k != j} a_k [l_k, u_k]``.
* OBBT with HiGHS: ``min / max z_j`` over the linear constraints and the box (an LP whose
  feasible set contains every feasible point of the program).

The node-wise search-space reduction of GOP is in :mod:`.solver` (docs/gop.md §6).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...lpqp import HighsModel


def fbbt(A, lo, hi, lb, ub, rounds=20, tol=1e-9):
    """Interval propagation, vectorized over all nonzeros (Jacobi sweeps); returns (lb, ub, infeasible).

    For row ``r`` and its nonzero ``a_j``: ``a_j z_j in [lo_r - max others, hi_r - min others]``
    where the others' range sums the finite term bounds and counts the infinite ones (a range
    with an infinite term is unbounded on that side)."""
    lb = np.asarray(lb, dtype=float).copy()
    ub = np.asarray(ub, dtype=float).copy()
    A = sp.csr_matrix(A)
    if A.nnz and not np.all(A.data):
        # a copy: csr_matrix(A) shares A's arrays, and eliminate_zeros compacts them in place (the caller's
        # matrix may be a cache, e.g. Program.linear_constraints')
        A = A.copy()
        A.eliminate_zeros()
    m = A.shape[0]
    if m == 0 or A.nnz == 0:
        return lb, ub, bool(np.any(lb > ub + tol))
    rows = np.repeat(np.arange(m), np.diff(A.indptr))
    cols, a = A.indices, A.data
    pos = a > 0
    rlo, rhi = np.asarray(lo, dtype=float)[rows], np.asarray(hi, dtype=float)[rows]
    n = lb.size
    for _ in range(rounds):
        l, u = lb[cols], ub[cols]
        # a > 0 or a < 0 and a finite: the products are +-inf or finite, never NaN
        tlo = np.where(pos, a * l, a * u)
        thi = np.where(pos, a * u, a * l)
        ilo, ihi = np.isinf(tlo), np.isinf(thi)
        flo, fhi = np.where(ilo, 0.0, tlo), np.where(ihi, 0.0, thi)
        slo, shi = np.bincount(rows, flo, m)[rows], np.bincount(rows, fhi, m)[rows]
        clo, chi = np.bincount(rows, ilo, m)[rows] - ilo, np.bincount(rows, ihi, m)[rows] - ihi
        olo = np.where(clo > 0, -np.inf, slo - flo)
        ohi = np.where(chi > 0, np.inf, shi - fhi)
        vlo = np.where(np.isfinite(rlo) & np.isfinite(ohi), rlo - np.where(np.isfinite(ohi), ohi, 0.0), -np.inf)
        vhi = np.where(np.isfinite(rhi) & np.isfinite(olo), rhi - np.where(np.isfinite(olo), olo, 0.0), np.inf)
        nlo = np.where(pos, vlo, vhi) / a
        nhi = np.where(pos, vhi, vlo) / a
        clb = np.full(n, -np.inf)
        cub = np.full(n, np.inf)
        np.maximum.at(clb, cols, np.where(np.isfinite(nlo), nlo, -np.inf))
        np.minimum.at(cub, cols, np.where(np.isfinite(nhi), nhi, np.inf))
        # bounds move only to finite values, and only by more than the tolerance
        up = np.isfinite(clb) & (clb > lb + tol * np.maximum(1.0, np.abs(np.where(np.isfinite(clb), clb, 0.0))))
        dn = np.isfinite(cub) & (cub < ub - tol * np.maximum(1.0, np.abs(np.where(np.isfinite(cub), cub, 0.0))))
        lb = np.where(up, clb, lb)
        ub = np.where(dn, cub, ub)
        if np.any(lb > ub + 1e-7 * np.maximum(1.0, np.abs(np.where(np.isfinite(lb), lb, 0.0)))):
            return lb, ub, True
        if not (up.any() or dn.any()):
            break
    return lb, np.maximum(ub, lb), False


def obbt(A, lo, hi, lb, ub, idx, run=None):
    """Tighten the bounds of ``idx`` by LPs over the linear constraints; returns (lb, ub, infeasible).

    ``run`` (None: no clock): under its time limit every LP gets the time left and no LP starts after it; the
    bounds tightened so far are kept (each is an LP optimum over a relaxation, valid on its own), an LP stopped by
    the limit moves nothing."""
    from .clock import limit_lp, seconds_left
    lb = lb.copy()
    ub = ub.copy()
    n = lb.size
    if A.shape[0] == 0 or len(idx) == 0:
        return lb, ub, False
    left = seconds_left(run)
    if left is not None and left <= 0:
        return lb, ub, False
    hm = HighsModel(np.zeros(n), A, lo, hi, lb, ub)
    for j in idx:
        for sgn in (1.0, -1.0):
            left = seconds_left(run)
            if left is not None:
                if left <= 0:
                    return lb, ub, False
                limit_lp(hm, run)
            c = np.zeros(n)
            c[j] = sgn
            hm.set_cost(c)
            r = hm.solve()
            if r.status == "infeasible":
                return lb, ub, True
            if r.status != "optimal":
                continue
            v = sgn * r.objective
            if sgn > 0:
                # a safety margin keeps the bound valid under LP tolerances
                lb[j] = max(lb[j], v - 1e-9 * max(1.0, abs(v)))
            else:
                ub[j] = min(ub[j], v + 1e-9 * max(1.0, abs(v)))
    return lb, ub, False
