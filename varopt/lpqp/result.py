"""The one result type of the LP/QP layer (duals in the convention of :mod:`varopt.lpqp`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import STATUSES, HighsError, InfeasibleError, UnboundedError


@dataclass
class LPResult:
    """Solution of one LP/QP solve in the sign convention of :mod:`varopt.lpqp`.

    ``x``, ``row_duals`` (y), ``col_duals`` (z) and ``row_activity`` (A x) are numpy
    arrays when ``status == "optimal"``; they are ``None`` for "infeasible"/"unbounded", and
    for "error" they hold HiGHS's last point when it has one. ``objective`` includes
    ``const``. ``info`` holds QP diagnostics (``attempts``, ``kkt``, ``polished``,
    ``fallback``, ``unverified``).
    """
    status: str
    x: np.ndarray = None
    objective: float = None
    row_duals: np.ndarray = None
    col_duals: np.ndarray = None
    row_activity: np.ndarray = None
    iterations: int = 0
    message: str = ""
    model_status: str = ""  #: HiGHS's model status string, for diagnostics
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown LP status {self.status!r}; valid: {STATUSES}")

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    def raise_for_status(self) -> "LPResult":
        """Return ``self`` if optimal, else raise the matching :class:`VaroptError` subclass."""
        if self.status == "optimal":
            return self
        if self.status == "infeasible":
            raise InfeasibleError(f"LP/QP is infeasible ({self.message})")
        if self.status == "unbounded":
            raise UnboundedError(f"LP/QP is unbounded below ({self.message})")
        raise HighsError(f"HiGHS failed: {self.message}")
