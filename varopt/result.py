"""The one result type every varopt solver returns (in the user's objective sense).

Gap definitions (in the user's sense, ``lower <= upper``):
``abs_gap = upper - lower`` and ``rel_gap = abs_gap / max(|incumbent|, 1e-10)`` where the
incumbent is ``upper`` for a minimisation and ``lower`` for a maximisation (the value of
the best feasible point found), as in most MIP/global solvers.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

#: status values; ``optimal`` means proven optimal (convex convergence or closed gap)
#: ``interrupted``: stopped by the user (Ctrl-C); the best point so far, no optimality claim
#: ``stationary``: first-order conditions hold but the point is not a local minimum (a feasible
#: direction of negative curvature exists, ``info['descent_direction']``): a saddle or a maximum
#: ``numerical``: stopped by numerical difficulties with a feasible incumbent (gop: node relaxations the LP
#: layer could not solve left the gap open); the point and the proved bounds are valid, the gap is not closed
STATUSES = ("optimal", "converged", "stationary", "iteration_limit", "time_limit", "pass_limit",
            "infeasible", "unbounded", "numerical", "error", "interrupted")


def _plain(v):
    """Turn numpy scalars/arrays and non-finite floats into JSON-safe values."""
    if isinstance(v, dict):
        return {str(k): _plain(u) for k, u in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(u) for u in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, (np.floating, float)):
        f = float(v)
        # JSON has no infinities: every non-finite number is null, and the status says why
        # (an infeasible minimisation has objective null and status "infeasible")
        return f if math.isfinite(f) else None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return repr(v)


@dataclass
class Result:
    solver: str
    status: str
    x: np.ndarray = None  #: solution in program variable order
    objective: float = None
    lower_bound: float = None
    upper_bound: float = None
    iterations: int = 0
    wall_time: float = 0.0
    history: list = field(default_factory=list)  #: per-iteration dicts (iteration, time, lower, upper, objective, ...)
    options: dict = field(default_factory=dict)
    message: str = ""
    maximize: bool = False
    names: list = None  #: variable names, set by the front-end
    info: dict = field(default_factory=dict)  #: solver-specific extras (duals, statistics)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; valid: {STATUSES}")

    @property
    def abs_gap(self):
        if self.lower_bound is None or self.upper_bound is None:
            return None
        return float(self.upper_bound - self.lower_bound)

    @property
    def rel_gap(self):
        g = self.abs_gap
        if g is None:
            return None
        inc = self.lower_bound if self.maximize else self.upper_bound
        if not math.isfinite(g):
            return math.inf
        return g / max(abs(inc), 1e-10)

    @property
    def gap(self):
        """Relative gap (see module docstring)."""
        return self.rel_gap

    @property
    def success(self) -> bool:
        return self.status in ("optimal", "converged")

    def variables(self) -> dict:
        if self.x is None or self.names is None:
            return {}
        return {name: float(v) for name, v in zip(self.names, np.asarray(self.x).ravel())}

    def to_dict(self) -> dict:
        return _plain({
            "solver": self.solver, "status": self.status, "objective": self.objective,
            "lower_bound": self.lower_bound, "upper_bound": self.upper_bound,
            "abs_gap": self.abs_gap, "rel_gap": self.rel_gap, "gap": self.gap,
            "iterations": self.iterations, "wall_time": self.wall_time,
            "message": self.message, "options": {k: v for k, v in self.options.items()},
            "history": self.history, "variables": self.variables(),
        })

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def summary(self) -> str:
        def f(v):
            return "-" if v is None else f"{v:.10g}"
        lines = [
            f"varopt solver '{self.solver}': {self.status}" + (f" ({self.message})" if self.message else ""),
            f"  objective   {f(self.objective)}  ({'maximize' if self.maximize else 'minimize'})",
            f"  lower bound {f(self.lower_bound)}",
            f"  upper bound {f(self.upper_bound)}",
            f"  gap         abs {f(self.abs_gap)}  rel {f(self.rel_gap)}",
            f"  iterations  {self.iterations}",
            f"  wall time   {self.wall_time:.4g} s",
        ]
        return "\n".join(lines)

    def __str__(self):
        return self.summary()
