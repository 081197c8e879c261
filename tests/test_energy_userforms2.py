"""Energy-model inference on models written the way users write them (bug hunt, branch huntb), against
enumeration of every state."""
from __future__ import annotations

import math

import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401  (registers the solvers)


@pytest.mark.parametrize("method", ["exact", "meanfield", "lbp", "trw", "ais", "sasmc", "cmf"])
def test_a_model_with_every_binary_fixed_is_answered_exactly_as_optimal(method):
    """Every binary fixed at 1: ``f = x0 x1 + 0.5 = 1.5`` is a constant, ``log Z = -1.5`` exactly. The
    conventions (docs/conventions.md) answer a model without free variables as ``optimal`` with the constant;
    the approximate methods said ``converged`` (Pyomo ``locallyOptimal``) and certified no bound."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), domain=pyo.Binary, initialize=1)
    m.o = pyo.Objective(expr=m.x[0] * m.x[1] + 0.5)
    m.x.fix()
    res = pyo.SolverFactory(method).solve(m)
    r = res.varopt_result
    assert res.solver.termination_condition == pyo.TerminationCondition.optimal
    assert r.info["log_partition"] == -1.5 and math.isclose(r.objective, 1.5)
    assert r.lower_bound == r.upper_bound == 1.5
