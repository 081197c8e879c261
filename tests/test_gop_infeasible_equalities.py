"""Inconsistent linear equalities on a convex program (no relaxed-dual variables) are reported infeasible.

gop stopped eliminating the equalities of such programs (docs/gop.md: elimination only serves the relaxed duals);
the elimination had been what found ``x + y = 1, 2x + 2y = 2.5`` inconsistent. Without it, a primal problem with
no inequality started its interior-point iterations at the least-squares point and returned it as optimal: the
search repeated that primal problem forever (a quadratic or ``exp`` + square objective), or read the model as
unbounded (``sum(exp(x))``). Reference: the rows themselves (``2 (x + y) = 2`` contradicts ``2.5``).
"""
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402,F401


@pytest.mark.parametrize("objective", ["exp", "exp_square", "square"])
def test_inconsistent_equalities_over_free_variables_are_infeasible(objective):
    x = cp.Variable(2, name="x")
    f = {"exp": cp.sum(cp.exp(x)), "exp_square": cp.sum(cp.exp(x)) + cp.sum_squares(x),
         "square": cp.sum_squares(x)}[objective]
    prob = cp.Problem(cp.Minimize(f), [x[0] + x[1] == 1, 2 * x[0] + 2 * x[1] == 2.5])
    prob.solve(method="gop", time_limit=10)  # (a limit: without the fix the search repeated forever)
    assert prob.status == "infeasible", prob.status


def test_consistent_dependent_equalities_over_free_variables_still_solve():
    """The same rows made consistent (``2x + 2y = 2``): the least-squares point is on them, no false 'infeasible'."""
    x = cp.Variable(2, name="x")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(x)) + cp.sum_squares(x)), [x[0] + x[1] == 1, 2 * x[0] + 2 * x[1] == 2])
    got = prob.solve(method="gop")
    assert prob.status == "optimal" and abs(got - (2 * 2.718281828459045 ** 0.5 + 0.5)) <= 1e-8, (prob.status, got)
