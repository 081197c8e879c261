"""The last resort: the same LP/QP solved by Clarabel (interior point) when HiGHS cannot
decide it; the duals are mapped to the convention of :mod:`varopt.lpqp`.
"""
from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from .errors import INF
from .result import LPResult


def _clarabel_solve(d, time_limit=INF):
    """Fallback convex QP solve with Clarabel (interior point) in the layer's sign convention.

    Clarabel solves ``min 1/2 x'Px + q'x s.t. G x + s = h, s in K`` with stationarity
    ``P x + q + G' w = 0`` and ``w in K*``; rows ``a x <= hi`` become ``a x + s = hi``
    (y = -w), rows ``a x >= lo`` become ``-a x + s = -lo`` (y = +w), equalities go to the
    zero cone (y = -w). Returns None when clarabel is not importable."""
    try:
        import clarabel
    except ImportError:
        return None
    A, Q, c = d["A"], d["Q"], d["c"]
    n = c.size
    I = sp.identity(n, format="csr")

    def add(M, lo, hi, target):
        """Row blocks (matrix, rhs, target, index, sign y = sign * w, cone kind) of lo <= M x <= hi."""
        eq = np.isfinite(lo) & np.isfinite(hi) & (lo == hi)
        up = np.isfinite(hi) & ~eq
        dn = np.isfinite(lo) & ~eq
        return [(M[np.flatnonzero(eq)], hi[eq], target, np.flatnonzero(eq), -1.0, "eq"),
                (M[np.flatnonzero(up)], hi[up], target, np.flatnonzero(up), -1.0, "ineq"),
                (-M[np.flatnonzero(dn)], -lo[dn], target, np.flatnonzero(dn), 1.0, "ineq")]
    parts = add(A.tocsr(), d["row_lo"], d["row_hi"], "row") + add(I, d["lb"], d["ub"], "col")
    eqs = [p for p in parts if p[5] == "eq"]
    ins = [p for p in parts if p[5] == "ineq"]
    ordered = eqs + ins
    G = sp.vstack([p[0] for p in ordered] + [sp.csr_matrix((0, n))], format="csc")
    h = np.concatenate([p[1] for p in ordered] + [np.zeros(0)])
    neq = sum(p[0].shape[0] for p in eqs)
    nin = G.shape[0] - neq
    cones = []
    if neq:
        cones.append(clarabel.ZeroConeT(neq))
    if nin:
        cones.append(clarabel.NonnegativeConeT(nin))
    P = sp.triu(Q if Q is not None else sp.csc_matrix((n, n)), format="csc")
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.tol_gap_abs = st.tol_gap_rel = st.tol_feas = 1e-10
    st.tol_ktratio = 1e-8
    st.max_iter = 500
    if np.isfinite(time_limit):
        st.time_limit = float(time_limit)
    sol = clarabel.DefaultSolver(P, c, G, h, cones, st).solve()
    status = str(sol.status)
    if "PrimalInfeasible" in status:
        return LPResult("infeasible", message=f"clarabel: {status}", model_status=status)
    if "DualInfeasible" in status:
        return LPResult("unbounded", message=f"clarabel: {status}", model_status=status)
    if "Solved" not in status:
        ms = "Time limit reached" if "MaxTime" in status else status
        return LPResult("error", message=f"clarabel: {status}", model_status=ms)
    x = np.array(sol.x, dtype=float)
    w = np.array(sol.z, dtype=float)
    y = np.zeros(A.shape[0])
    z = np.zeros(n)
    pos = 0
    for M, _h, target, idx, sgn, _k in ordered:
        k = M.shape[0]
        (y if target == "row" else z)[idx] += sgn * w[pos:pos + k]
        pos += k
    obj = 0.5 * float(x @ (Q @ x)) + float(c @ x) + d["const"] if Q is not None else float(c @ x) + d["const"]
    return LPResult("optimal", x=x, objective=obj, row_duals=y, col_duals=z, row_activity=A @ x,
                    message=f"clarabel: {status}", model_status=status)
