"""The KKT polish: active-set identification and a Newton/least-squares solve of the KKT
system that moves an almost-optimal HiGHS answer onto the KKT conditions (used when HiGHS
reports optimal but the independent KKT residual is too large).
"""
from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from ..core.threads import one_thread_above
from .result import LPResult


def _kkt_scale(res, d):
    """Scale of the KKT residual: 1 + the largest term of the stationarity equation."""
    Q, A, c = d["Q"], d["A"], d["c"]
    s = 1.0 + float(np.abs(c).max(initial=0.0))
    if res.x is not None and Q is not None:
        s = max(s, 1.0 + float(np.abs(Q @ res.x).max(initial=0.0)))
    if res.row_duals is not None and A.shape[0]:
        s = max(s, 1.0 + float(np.abs(A.T @ res.row_duals).max(initial=0.0)))
    return s


def _active_sets(res, d, tol):
    """Active rows/columns as (index, bound value, side): at a bound within ``tol``
    (relative) with a dual of the right sign, or with a clearly nonzero dual. ``side`` is
    +1 for a lower bound, -1 for an upper bound, 0 for an equality (lo == hi)."""
    x, act, y, z = res.x, res.row_activity, res.row_duals, res.col_duals
    rlo, rhi, lb, ub = d["row_lo"], d["row_hi"], d["lb"], d["ub"]

    def pick(v, lo, hi, dual):
        with np.errstate(invalid="ignore"):
            near_lo = np.isfinite(lo) & (np.abs(v - lo) <= tol * np.maximum(1.0, np.abs(lo)))
            near_hi = np.isfinite(hi) & (np.abs(v - hi) <= tol * np.maximum(1.0, np.abs(hi)))
        big = 1e3 * tol
        at_lo = np.isfinite(lo) & ((near_lo & (dual >= -tol)) | (dual > big))
        at_hi = np.isfinite(hi) & ~at_lo & ((near_hi & (dual <= tol)) | (dual < -big))
        idx = np.flatnonzero(at_lo | at_hi)
        val = np.where(at_lo, lo, hi)[idx]
        side = np.where(at_lo, 1, -1)[idx]
        side[lo[idx] == hi[idx]] = 0
        return idx, val, side

    return pick(act, rlo, rhi, y) + pick(x, lb, ub, z)


def _solve_kkt(K, rhs):
    """Solve the (possibly singular but consistent) KKT system ``K s = rhs``: sparse LU,
    falling back to least squares (dense SVD when small, LSMR otherwise) when singular."""
    import scipy.sparse.linalg as spla
    k = rhs.size
    tol = 1e-10 * max(1.0, float(np.abs(rhs).max(initial=0.0)))
    try:
        with np.errstate(all="ignore"):
            sol = spla.splu(K.tocsc()).solve(rhs)
        if np.isfinite(sol).all() and float(np.abs(K @ sol - rhs).max(initial=0.0)) <= tol:
            return sol
    except RuntimeError:  # exactly singular
        pass
    if k <= 800:
        with one_thread_above(k):
            sol, *_ = np.linalg.lstsq(K.toarray(), rhs, rcond=None)
        return sol
    return spla.lsmr(K, rhs, atol=1e-15, btol=1e-15, maxiter=20 * k)[0]


def _polish_kkt(res, d, tol, max_iter=12):
    """KKT points on the active set read off ``res`` and on shrunken sets.

    Solves  [Q_FF  -A_WF'; A_WF  0] [x_F; y_W] = [-c_F - Q_FC l_C; b_W - A_WC l_C]
    where C are the columns fixed at an active bound l_C, F the others and W the active
    rows; then z = Q x + c - A'y on C, 0 on F. Weakly active constraints (zero dual at the
    HiGHS point) can get a multiplier of the wrong sign; they are dropped from the set, and
    constraints the new point violates are added, as in a primal-dual active-set method
    (at most ``max_iter`` systems, stopping on a repeated set). Returns the candidates.
    """
    ri, rv, rs, ci, cv, cs = _active_sets(res, d, tol)
    rlo, rhi, lb, ub = d["row_lo"], d["row_hi"], d["lb"], d["ub"]
    out, seen = [], set()
    for _ in range(max_iter):
        key = (ri.tobytes(), rs.tobytes(), ci.tobytes(), cs.tobytes())
        if key in seen:  # the set update cycles
            break
        seen.add(key)
        cand = _kkt_point(res.x, res.row_duals, d, ri, rv, ci, cv)
        if cand is None:
            break
        out.append(cand)
        sc = _kkt_scale(cand, d)
        eps = 1e-12 * sc
        yw, zw = cand.row_duals[ri], cand.col_duals[ci]
        bad_r = ((rs > 0) & (yw < -eps)) | ((rs < 0) & (yw > eps))
        bad_c = ((cs > 0) & (zw < -eps)) | ((cs < 0) & (zw > eps))
        if bad_r.any() or bad_c.any():
            # weakly active constraints with a wrong-sign multiplier: release them
            ri, rv, rs = ri[~bad_r], rv[~bad_r], rs[~bad_r]
            ci, cv, cs = ci[~bad_c], cv[~bad_c], cs[~bad_c]
            continue
        # multipliers fine: fix the constraints the new point violates at the violated bound
        ptol = 1e-9 * sc
        add = False
        for v, lo, hi, which in ((cand.row_activity, rlo, rhi, "r"), (cand.x, lb, ub, "c")):
            idx_in = ri if which == "r" else ci
            with np.errstate(invalid="ignore"):
                low = np.flatnonzero(v < lo - ptol)
                high = np.flatnonzero(v > hi + ptol)
            low = np.setdiff1d(low, idx_in)
            high = np.setdiff1d(high, idx_in)
            if low.size + high.size == 0:
                continue
            add = True
            new_i = np.concatenate([low, high])
            new_v = np.concatenate([lo[low], hi[high]])
            new_s = np.concatenate([np.ones(low.size, int), -np.ones(high.size, int)])
            o = np.argsort(np.concatenate([idx_in, new_i]), kind="stable")
            if which == "r":
                ri, rv, rs = (np.concatenate([ri, new_i])[o], np.concatenate([rv, new_v])[o],
                              np.concatenate([rs, new_s])[o])
            else:
                ci, cv, cs = (np.concatenate([ci, new_i])[o], np.concatenate([cv, new_v])[o],
                              np.concatenate([cs, new_s])[o])
        if not add:
            break
    return out


def _kkt_point(x0, y0, d, ri, rv, ci, cv):
    A, Q, c = d["A"], d["Q"], d["c"]
    n = c.size
    free = np.ones(n, dtype=bool)
    free[ci] = False
    fi = np.flatnonzero(free)
    x = x0.copy()
    x[ci] = cv
    Qc = Q.tocsc()
    Qff = Qc[fi][:, fi]
    AW = A[ri]
    AWF = AW[:, fi]
    rhs_top = -(c[fi] + (Qc[fi][:, ci] @ cv if ci.size else 0.0))
    rhs_bot = rv - (AW[:, ci] @ cv if (ri.size and ci.size) else 0.0)
    K = sp.bmat([[Qff, -AWF.T], [AWF, None]], format="csc") if ri.size else sp.csc_matrix(Qff)
    rhs = np.concatenate([rhs_top, rhs_bot])
    # solve for the correction to the solver's (x, y): when the system is singular (Q_FF
    # singular, or degenerate active rows) the minimum-norm correction keeps x near the
    # solver's point instead of jumping along the null space through inactive constraints,
    # and keeps y near the solver's sign-feasible multipliers
    base = np.concatenate([x[fi], y0[ri]])
    sol = base + _solve_kkt(K, rhs - K @ base) if base.size else base  # empty: every column fixed
    if not np.isfinite(sol).all():
        return None
    x[fi] = sol[:fi.size]
    y = np.zeros(A.shape[0])
    y[ri] = sol[fi.size:]
    g = Q @ x + c - A.T @ y
    z = np.zeros(n)
    z[ci] = g[ci]
    obj = 0.5 * float(x @ (Q @ x)) + float(c @ x) + d["const"]
    return LPResult("optimal", x=x, objective=obj, row_duals=y, col_duals=z, row_activity=A @ x)
