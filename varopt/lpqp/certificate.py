"""The independent check of an answer: the KKT residual (primal and dual feasibility,
sign conditions and complementarity in the convention of :mod:`varopt.lpqp`).
"""
from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from .errors import INF


def kkt_residual(res, c, A=None, row_lo=None, row_hi=None, lb=None, ub=None, Q=None, *, parts=False):
    """Max KKT violation of ``res`` for the problem data (absolute, infinity norm).

    Components (sign convention of :mod:`varopt.lpqp`):
    ``stationarity = ||Q x + c - A'y - z||_inf``;
    ``primal = max violation of row_lo <= A x <= row_hi and lb <= x <= ub`` (A x recomputed from x);
    ``dual_sign = max of y_i > 0 on rows without a finite lower bound, y_i < 0 on rows without
    a finite upper bound`` (same for z and the columns);
    ``complementarity = max of y_i^+ (a_i x - lo_i)`` and ``y_i^- (hi_i - a_i x)`` (finite bounds).
    Returns the max of these, or the dict of components if ``parts``.
    """
    if res.x is None or res.row_duals is None or res.col_duals is None:
        raise ValueError(f"kkt_residual needs x and duals (status {res.status!r})")
    x = np.asarray(res.x, dtype=float)
    n = x.size
    c = np.asarray(c, dtype=float).reshape(-1)
    # a dense A (small QPs, e.g. the active-set fast path) is used as it is: converting it costs more than the check
    A = sp.csr_matrix((0, n)) if A is None else (A if isinstance(A, np.ndarray) and A.ndim == 2 else sp.csr_matrix(A))
    m = A.shape[0]
    rlo = np.full(m, -INF) if row_lo is None else np.broadcast_to(np.asarray(row_lo, float), (m,))
    rhi = np.full(m, INF) if row_hi is None else np.broadcast_to(np.asarray(row_hi, float), (m,))
    lo = np.full(n, -INF) if lb is None else np.broadcast_to(np.asarray(lb, float), (n,))
    hi = np.full(n, INF) if ub is None else np.broadcast_to(np.asarray(ub, float), (n,))
    y = np.asarray(res.row_duals, dtype=float)
    z = np.asarray(res.col_duals, dtype=float)
    ax = A @ x
    g = c - A.T @ y - z
    if Q is not None:
        g = g + (sp.csr_matrix(Q) @ x if sp.issparse(Q) else np.asarray(Q, float) @ x)

    def viol(v, l, h):
        with np.errstate(invalid="ignore"):
            return np.maximum(0.0, np.maximum(l - v, v - h)) if v.size else np.zeros(0)

    def sign(d, l, h):
        return np.where(np.isfinite(l), 0.0, np.maximum(d, 0.0)) + np.where(np.isfinite(h), 0.0, np.maximum(-d, 0.0))

    def comp(d, v, l, h):
        with np.errstate(invalid="ignore"):
            a = np.where(np.isfinite(l) & (d > 0), d * np.abs(v - l), 0.0)
            b = np.where(np.isfinite(h) & (d < 0), -d * np.abs(h - v), 0.0)
        return np.maximum(a, b)

    def mx(a):
        return float(np.max(a)) if np.size(a) else 0.0

    out = dict(
        stationarity=mx(np.abs(g)),
        primal=max(mx(viol(ax, rlo, rhi)), mx(viol(x, lo, hi))),
        dual_sign=max(mx(sign(y, rlo, rhi)), mx(sign(z, lo, hi))),
        complementarity=max(mx(comp(y, ax, rlo, rhi)), mx(comp(z, x, lo, hi))),
    )
    return out if parts else max(out.values())
