"""One-shot LP and QP solves.
"""
from __future__ import annotations



from .result import LPResult
from .model import HighsModel


def solve_lp(c, A=None, row_lo=None, row_hi=None, lb=None, ub=None, Q=None, const=0.0,
             options=None, time_limit=None) -> LPResult:
    """One-shot ``min 1/2 x'Qx + c'x + const s.t. row_lo <= A x <= row_hi, lb <= x <= ub``."""
    return HighsModel(c, A, row_lo, row_hi, lb, ub, Q=Q, const=const, options=options,
                      time_limit=time_limit).solve()


def solve_qp(Q, c, A=None, row_lo=None, row_hi=None, lb=None, ub=None, const=0.0,
             options=None, time_limit=None) -> LPResult:
    """One-shot convex QP; same as :func:`solve_lp` with ``Q`` first."""
    return HighsModel(c, A, row_lo, row_hi, lb, ub, Q=Q, const=const, options=options,
                      time_limit=time_limit).solve()
