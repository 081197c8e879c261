"""Statuses and the exceptions of the LP/QP layer (``LPResult.raise_for_status``).
"""
from __future__ import annotations



from ..errors import VaroptError


STATUSES = ("optimal", "infeasible", "unbounded", "error")

INF = float("inf")


class InfeasibleError(VaroptError):
    """The LP/QP has no feasible point."""


class UnboundedError(VaroptError):
    """The LP/QP is feasible but its objective is unbounded below."""


class HighsError(VaroptError, RuntimeError):
    """HiGHS stopped without a decision (time/iteration limit, numerical failure)."""
