"""Solve an instance with SCIP through Pyomo's ``scip_direct`` (the anchor of the collection)."""
from __future__ import annotations

import math
import time

import pyomo.environ as pyo


def scip_available():
    try:
        return bool(pyo.SolverFactory("scip_direct").available(exception_flag=False))
    except Exception:
        return False


def solve_scip(model, time_limit=30.0, gap=1e-9):
    """SCIP, silent, relative gap ``gap``; returns status, value, lower/upper bound (user's sense) and time."""
    s = pyo.SolverFactory("scip_direct")
    t0 = time.perf_counter()
    res = s.solve(model, tee=False, load_solutions=False,
                  options={"limits/time": float(time_limit), "limits/gap": gap, "limits/absgap": 1e-9,
                           # no SCIP log at all: Pyomo captures it through a pipe whose reader thread
                           # needs the GIL, which a long solve holds (a full pipe deadlocks the solve)
                           "display/verblevel": 0})
    dt = time.perf_counter() - t0
    tc = res.solver.termination_condition
    status = {pyo.TerminationCondition.optimal: "optimal",
              pyo.TerminationCondition.maxTimeLimit: "time_limit",
              pyo.TerminationCondition.infeasible: "infeasible",
              pyo.TerminationCondition.unbounded: "unbounded"}.get(tc, str(tc))
    value = None
    if len(res.solution) > 0:
        model.solutions.load_from(res)
        obj = next(model.component_data_objects(pyo.Objective, active=True))
        value = pyo.value(obj)
    lo, up = res.problem.lower_bound, res.problem.upper_bound
    lo = float(lo) if lo is not None and math.isfinite(float(lo)) else None
    up = float(up) if up is not None and math.isfinite(float(up)) else None
    return {"status": status, "value": value, "lower": lo, "upper": up, "time": dt}
