"""An independent reference for the QP tests: CVXPY + Clarabel (an interior point) on the QP of :mod:`varopt.lpqp`."""
import numpy as np


def clarabel_qp(Q, c, A, lo, hi, lb, ub, jitter=0.0):
    """``(value, x)`` of ``min 1/2 x'Qx + c'x`` s.t. ``lo <= A x <= hi``, ``lb <= x <= ub`` (dense ``A``, infinite
    sides skipped) by CVXPY + Clarabel at tolerances 1e-10; ``jitter`` is added to ``Q``'s diagonal for its Cholesky
    factor (a semidefinite ``Q``)."""
    import cvxpy as cp
    n = c.size
    x = cp.Variable(n)
    cons = []
    for M, l, h in ((A, lo, hi), (np.eye(n), lb, ub)):
        for v, s in ((l, 1), (h, -1)):
            k = np.isfinite(v)
            if k.any():
                cons.append(s * (M[k] @ x) >= s * v[k])
    Lf = np.linalg.cholesky(Q + jitter * np.eye(n))
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(Lf.T @ x) + c @ x), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return prob.value, x.value
