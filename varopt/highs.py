"""Moved to :mod:`varopt.lpqp` (the one LP/QP layer); kept so existing imports work.

The problem form, the dual sign convention and the statuses are documented in
:mod:`varopt.lpqp`.
"""
from .lpqp import (STATUSES, HighsError, HighsModel, InfeasibleError, LPResult, UnboundedError, kkt_residual,
                   solve_lp, solve_qp)

__all__ = ["HighsModel", "LPResult", "solve_lp", "solve_qp", "kkt_residual",
           "InfeasibleError", "UnboundedError", "HighsError", "STATUSES"]
