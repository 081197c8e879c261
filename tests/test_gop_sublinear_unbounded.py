"""GOP on convex programs unbounded with sublinear growth (``max sum(log x)`` over an unbounded set): the primal
problems stop far out where the gradient looks like rounding, and the run must not certify that point. Bounded
neighbours of the same models still certify (docs/gop.md §13g)."""
import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401  (registers the solvers)


def _certified(r):
    return r.status == "optimal" and r.lower_bound is not None and r.upper_bound is not None


def test_max_sum_log_over_unbounded_set_is_not_certified():
    x = cp.Variable(2, name="x")
    p = cp.Problem(cp.Maximize(cp.sum(cp.log(x))), [x[0] - x[1] <= 1])
    with pytest.warns(UserWarning):
        p.solve(method="gop")
    r = p.varopt_result
    # sum(log x) is unbounded above on the set (x0 = x1 -> inf), so no finite upper bound is valid
    assert not _certified(r)
    assert r.upper_bound is None or r.upper_bound == np.inf
    assert r.status == "numerical" and "not valid" in r.message


def test_pyomo_min_neg_log_sum_over_unbounded_set_is_not_certified():
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1], bounds=(1e-9, None), initialize=1.0)
    m.c = pyo.Constraint(expr=m.x[0] - m.x[1] <= 1)
    m.o = pyo.Objective(expr=-pyo.log(m.x[0]) - pyo.log(m.x[1]))
    res = pyo.SolverFactory("gop").solve(m)
    r = res.varopt_result
    assert not _certified(r)
    assert str(res.solver.termination_condition) != "optimal"


@pytest.mark.parametrize("rhs", [2.0, 5.0])
def test_bounded_neighbour_still_certified(rhs):
    x = cp.Variable(2, name="x")
    p = cp.Problem(cp.Maximize(cp.sum(cp.log(x))), [x[0] + x[1] <= rhs])
    p.solve(method="gop")
    r = p.varopt_result
    assert _certified(r)
    assert abs(p.value - 2 * np.log(rhs / 2)) <= 1e-6
    assert r.lower_bound <= p.value + 1e-9 and r.upper_bound >= 2 * np.log(rhs / 2) - 1e-6


def test_free_variables_with_attained_optimum_still_certified():
    x = cp.Variable(3, name="x")
    c = np.array([1.0, -2.0, 0.5])
    p = cp.Problem(cp.Minimize(cp.sum(cp.exp(x)) - c[:2] @ x[:2] + cp.sum_squares(x - 3)), [cp.sum(x) >= -1])
    p.solve(method="gop")
    r = p.varopt_result
    q = cp.Problem(cp.Minimize(cp.sum(cp.exp(x)) - c[:2] @ x[:2] + cp.sum_squares(x - 3)), [cp.sum(x) >= -1])
    ref = q.solve(solver=cp.CLARABEL)
    assert _certified(r)
    assert abs(r.objective - ref) <= 1e-6 * max(1.0, abs(ref))
