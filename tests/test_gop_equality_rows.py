"""Linear equality rows that depend on others: inconsistent ones are infeasible, consistent ones are no pivots.

Inconsistent linear equalities on a convex program (no relaxed-dual variables) are reported infeasible.

gop stopped eliminating the equalities of such programs (docs/gop.md: elimination only serves the relaxed duals);
the elimination had been what found ``x + y = 1, 2x + 2y = 2.5`` inconsistent. Without it, a primal problem with
no inequality started its interior-point iterations at the least-squares point and returned it as optimal: the
search repeated that primal problem forever (a quadratic or ``exp`` + square objective), or read the model as
unbounded (``sum(exp(x))``). Reference: the rows themselves (``2 (x + y) = 2`` contradicts ``2.5``).
"""
import numpy as np
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


def _dependent_rows_problem():
    """``min sum(exp(x)) - c.x + y x_0 + y/2`` over ``B x = b`` and the copies ``2 B_0 x = 2 b_0``,
    ``2 B_1 x = 2 b_1`` (12 columns, rank 5), ``y in [-1, 1]``: linear in ``y``, so the optimum is the smaller of the
    two convex programs at ``y = -1`` and ``y = 1``."""
    rng = np.random.default_rng(0)
    B = rng.normal(size=(5, 12))
    A = np.vstack([B, 2.0 * B[:2]])
    b = A @ rng.uniform(-0.5, 0.5, 12)
    c = rng.normal(size=12)
    refs = []
    for yv in (-1.0, 1.0):
        x = cp.Variable(12)
        refs.append(cp.Problem(cp.Minimize(cp.sum(cp.exp(x)) - c @ x + yv * x[0] + 0.5 * yv),
                               [A @ x == b, x >= -3, x <= 3]).solve(solver="CLARABEL", tol_gap_abs=1e-10,
                                                                      tol_gap_rel=1e-10, tol_feas=1e-10))
    x, y = cp.Variable(12, name="x"), cp.Variable(name="y")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(x)) - c @ x + y * x[0] + 0.5 * y),
                      [A @ x == b, x >= -3, x <= 3, y >= -1, y <= 1])
    return prob, min(refs)


def test_elimination_leaves_rows_that_depend_on_the_eliminated_ones_without_variables():
    """The copies map to coefficients of rounding size (~1e-16); the presolve took one as the pivot of a sixth
    elimination, ``x_v = (e - ...) / 1e-16``, and the GOP iteration certified a lower bound 3.8e-6 above the optimum
    (4.6834282 against 4.6834243). Rank 5: five eliminations, the copies left as constant rows."""
    from varopt.program.eliminate import eliminate_equalities
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    prob, ref = _dependent_rows_problem()
    program = compile_cvxpy(prob)[0]
    elim = eliminate_equalities(program, set(range(12)))
    assert len(elim.eliminated) == 5, elim.eliminated
    prob.solve(method="gop", mode="gop")
    res = prob.varopt_result
    assert prob.status == "optimal" and abs(res.objective - ref) <= 1e-6 * abs(ref), (res.objective, ref)
    assert res.lower_bound <= ref + 1e-9, (res.lower_bound, ref)


def test_equalities_that_pin_every_variable_under_an_epigraph_objective():
    """Two independent equalities in two variables pin ``x``; bound tightening through them left intervals ~1e-9
    wide around the point, and the primal problem (kept with its equalities since gop stopped eliminating them on
    convex programs) found no strict interior between those bounds: "Slater's condition fails" where 8626aa4
    solved it. Reference: Clarabel."""
    def build():
        x = cp.Variable(2, name="x")
        A1, b1 = np.array([[0.39, 1.37], [-2.58, 0.28], [0.22, -2.07]]), np.array([0.96, -1.84, 0.0])
        A2, b2 = np.array([[0.77, -0.99], [1.15, -0.87], [-0.70, -1.07]]), np.array([-1.4, -1.23, 0.02])
        E, e = np.array([[-0.06, 0.52], [-1.43, -1.00]]), np.array([0.28449559, -0.5069278])
        return cp.Problem(cp.Minimize(cp.sum(cp.exp(A1 @ x + b1)) + cp.max(A2 @ x + b2) + np.array([0.8, -0.9]) @ x),
                          [x >= -3, E @ x == e])
    ref = build().solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    prob = build()
    got = prob.solve(method="gop")
    assert prob.status == "optimal" and abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (prob.status, got, ref)
    assert max(float(np.max(c.violation())) for c in prob.constraints) <= 1e-6
