"""ipsa on programs with linear equalities (a probability simplex ``sum w = 1``): they are eliminated,
``x = T z + t`` (varopt.program.eliminate), and the interior-point iteration runs on the reduced
inequalities. References: CVXPY + Clarabel for the optimum; the user's own evaluation (CVXPY ``.value``,
Pyomo ``value()``) for the equality and the strict interior of every iterate.
"""
import numpy as np
import pytest

import varopt  # noqa: F401
from varopt.program import Constraint, Expression, Program, QuadraticTerms

cp = pytest.importorskip("cvxpy")
pyo = pytest.importorskip("pyomo.environ")


def _data(seed=5, N=60, D=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = X @ np.r_[0.6, 0.4, np.zeros(D - 2)] + 0.1 * rng.normal(size=N)
    return X, y


def _reference(X, y):
    w = cp.Variable(X.shape[1])
    pr = cp.Problem(cp.Minimize(cp.sum_squares(X @ w - y) / len(y)), [w >= 0, cp.sum(w) == 1])
    pr.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return pr.value, w.value


def test_cvxpy_simplex_least_squares_matches_clarabel_and_stays_interior():
    X, y = _data()
    ref, wref = _reference(X, y)
    w = cp.Variable(X.shape[1])
    obj = cp.sum_squares(X @ w - y) / len(y)
    pr = cp.Problem(cp.Minimize(obj), [w >= 0, cp.sum(w) == 1])
    seen = []
    pr.solve(method="ipsa", batch_size=len(y), hessian="exact", step_power=0, max_iter=300, kkt_tol=1e-10,
             callback=lambda it, x, z, s: seen.append(np.array(x)))
    r = pr.varopt_result
    assert r.status == "converged", r.message
    assert any("by" in e for e in r.info["eliminated"])
    assert abs(float(obj.value) - ref) <= 1e-7 * max(1.0, ref)
    assert np.max(np.abs(w.value - wref)) <= 1e-4
    assert abs(float(np.sum(w.value)) - 1.0) <= 1e-12
    # every iterate, as the callback sees it: full length, on the simplex, strictly inside w > 0
    assert seen and all(x.size == X.shape[1] for x in seen)
    assert max(abs(x.sum() - 1.0) for x in seen) <= 1e-12
    assert min(x.min() for x in seen) > 0


def test_pyomo_simplex_stochastic_run_is_feasible_and_close():
    X, y = _data(seed=2, N=200)
    ref, _ = _reference(X, y)
    N, D = X.shape
    m = pyo.ConcreteModel()
    m.D = pyo.RangeSet(0, D - 1)
    m.w = pyo.Var(m.D, bounds=(0, None))
    m.obj = pyo.Objective(expr=sum((sum(X[i, d] * m.w[d] for d in m.D) - y[i]) ** 2 for i in range(N)) / N)
    m.s = pyo.Constraint(expr=sum(m.w[d] for d in m.D) == 1)
    r = pyo.SolverFactory("ipsa").solve(m, passes=100, sampling="permutation", seed=0)
    w = np.array([pyo.value(m.w[d]) for d in m.D])
    assert abs(pyo.value(m.s.body) - 1.0) <= 1e-12
    assert w.min() > 0
    assert pyo.value(m.obj) <= ref * 1.15, (pyo.value(m.obj), ref)
    assert r.varopt_result.info["eliminated"]


def test_user_oracle_and_x0_are_mapped_through_the_elimination():
    # f(x) = |x - c|^2 / 2 over {x >= 0, x0 + x1 + x2 = 1}: the projection of c onto the simplex
    c = np.array([0.9, 0.5, -0.2])
    n = 3
    P = Program([f"x[{i}]" for i in range(n)], np.zeros(n), np.full(n, np.inf), Expression(n),
                [Constraint("simplex", Expression(n, linear=np.ones(n)), 1.0, 1.0)])
    u = np.sort(c)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.flatnonzero(u - css / np.arange(1, n + 1) > 0)[-1]
    proj = np.maximum(c - css[k] / (k + 1), 0.0)
    grads = []

    def grad(x, rng):
        grads.append(np.array(x))
        return x - c

    r = varopt.get_solver("ipsa").solve(P, oracle=grad, x0=np.array([0.2, 0.3, 0.5]), max_iter=3000,
                                        step_power=0.6, seed=1)
    assert abs(r.x.sum() - 1.0) <= 1e-12 and r.x.min() > 0
    assert np.max(np.abs(r.x - proj)) < 2e-2, (r.x, proj)
    # the oracle was called with full-length points on the simplex, the first at the given x0
    assert all(g.size == n for g in grads)
    np.testing.assert_allclose(grads[0], [0.2, 0.3, 0.5], atol=1e-12)


def test_equality_with_one_variable_fixes_it():
    n = 3
    H = Expression(n, quadratic=QuadraticTerms(np.arange(n), np.arange(n), np.full(n, 0.5), n),
                   linear=-np.array([1.0, 2.0, 3.0]))
    P = Program([f"x[{i}]" for i in range(n)], np.zeros(n), np.full(n, 10.0), H,
                [Constraint("fix", Expression(n, linear=np.array([0.0, 2.0, 0.0])), 1.0, 1.0)])
    r = varopt.get_solver("ipsa").solve(P, hessian="exact", step_power=0, max_iter=300, kkt_tol=1e-10)
    assert r.status == "converged", r.message
    np.testing.assert_allclose(r.x, [1.0, 0.5, 3.0], atol=1e-5)


def test_bounds_that_pin_a_variable_are_eliminated_like_an_equality():
    """A Pyomo ``Var(bounds=(2, 2))`` (or ``setlb``/``setub`` to one value) is a fixed value, as
    ``fix(2)`` is: the optimum of the rest matches Clarabel's with ``w[1] == 2``, and the model
    evaluates at the loaded point (it used to be rejected: no strict interior)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 3))
    y = rng.normal(size=30)
    m = pyo.ConcreteModel()
    m.w = pyo.Var(range(3), bounds=(0, 10))
    m.w[1].setlb(2.0)
    m.w[1].setub(2.0)
    m.obj = pyo.Objective(expr=sum((y[i] - sum(X[i, j] * m.w[j] for j in range(3))) ** 2 for i in range(30))
                          + pyo.log(1 + pyo.exp(m.w[1] - m.w[2])))
    r = pyo.SolverFactory("ipsa").solve(m, batch_size=31, hessian="exact", step_power=0, max_iter=300,
                                        kkt_tol=1e-10).varopt_result
    assert r.status == "converged", r.message
    w = cp.Variable(3)
    pr = cp.Problem(cp.Minimize(cp.sum_squares(y - X @ w) + cp.logistic(w[1] - w[2])),
                    [w >= 0, w <= 10, w[1] == 2])
    pr.solve(solver="CLARABEL")
    assert m.w[1].value == 2.0
    np.testing.assert_allclose([m.w[j].value for j in range(3)], w.value, atol=1e-5)
    assert pyo.value(m.obj) == pytest.approx(pr.value, rel=1e-7)
    assert r.objective == pytest.approx(pyo.value(m.obj), rel=1e-12)


@pytest.mark.parametrize("copy_rhs, status", [(2.0, "user_limit"), (2.5, "infeasible")])
def test_a_copied_equality_is_a_constant_row_after_the_elimination(copy_rhs, status):
    """``2 sum(w) = 2`` after ``sum(w) = 1`` is left without variables by the elimination: dropped when it holds (it
    was refused as 'a nonlinear equality'), infeasible when it does not (``= 2.5``)."""
    X, y = _data()
    w = cp.Variable(X.shape[1], name="w")
    prob = cp.Problem(cp.Minimize(cp.sum_squares(X @ w - y) / len(y)),
                      [w >= 0, cp.sum(w) == 1, 2 * cp.sum(w) == copy_rhs])
    prob.solve(method="ipsa", seed=0)
    if status == "infeasible":
        assert prob.status == "infeasible", prob.status
    else:
        ref, _ = _reference(X, y)
        assert prob.status in ("optimal", "optimal_inaccurate", "user_limit"), prob.status
        assert abs(float(np.sum(w.value)) - 1.0) <= 1e-9 and float(w.value.min()) > 0
        assert prob.value >= ref - 1e-9, (prob.value, ref)
