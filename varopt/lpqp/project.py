r"""Projection of a point onto a polyhedron, the start-point repair the solvers share.

``project(x, A, lo, hi, lb, ub, norm)`` returns the nearest point ``z`` to ``x`` in
``{lo <= A z <= hi, lb <= z <= ub}``:

* ``norm="l2"``: :math:`\min_z \tfrac12\|z - x\|^2`, a QP with ``Q = I`` and ``c = -x``;
* ``norm="l1"``: :math:`\min_z \|z - x\|_1`, the LP
  :math:`\min 1^\top(p + q)` s.t. :math:`z - p + q = x`, :math:`p, q \ge 0` (moves as few
  coordinates as it can, which keeps a user's start where it already satisfies the rows).

The result is an :class:`~.result.LPResult` whose ``x`` is ``z`` (status ``infeasible`` when the
polyhedron is empty).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .solve import solve_lp


def project(x, A=None, lo=None, hi=None, lb=None, ub=None, *, norm: str = "l2", time_limit=None):
    """See the module docstring; ``time_limit``: HiGHS's, in seconds (None: none)."""
    x = np.asarray(x, dtype=float).ravel()
    n = x.size
    lb = np.full(n, -np.inf) if lb is None else np.asarray(lb, dtype=float)
    ub = np.full(n, np.inf) if ub is None else np.asarray(ub, dtype=float)
    has_rows = A is not None and A.shape[0] > 0
    if norm == "l2":
        return solve_lp(-x, A=A if has_rows else None, row_lo=lo if has_rows else None,
                        row_hi=hi if has_rows else None, lb=lb, ub=ub, Q=sp.identity(n, format="csr"),
                        const=0.5 * float(x @ x), time_limit=time_limit)
    if norm != "l1":
        raise ValueError(f"norm must be 'l2' or 'l1', got {norm!r}")
    I = sp.identity(n, format="csr")
    blocks = [sp.hstack([I, -I, I])]
    rlo, rhi = [x], [x]
    if has_rows:
        blocks.insert(0, sp.hstack([sp.csr_matrix(A), sp.csr_matrix((A.shape[0], 2 * n))]))
        rlo.insert(0, np.asarray(lo, dtype=float))
        rhi.insert(0, np.asarray(hi, dtype=float))
    res = solve_lp(np.concatenate([np.zeros(n), np.ones(2 * n)]), sp.vstack(blocks, format="csr"),
                   np.concatenate(rlo), np.concatenate(rhi), np.concatenate([lb, np.zeros(2 * n)]),
                   np.concatenate([ub, np.full(2 * n, np.inf)]), time_limit=time_limit)
    if res.x is not None:
        res.x = np.asarray(res.x[:n], dtype=float)
    return res
