"""The shortcuts that cut per-solve fixed costs of small ``prob.solve(method="majorize")`` calls (docs/majorize.md
section 6.0i) give what the general code gives: the tracer's unit-weight selection product against scipy's product,
the CVXPY ``Variable`` test by class against ``isinstance`` (subclasses included), the carried ``||x||^2`` against
the relative steps recomputed from the iterates, the per-model count of bounded variables against a recount, and a
shortened trial's point against the program's own evaluation."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import varopt  # noqa: F401  (registers the solvers)
from varopt.registry import get_solver


def test_selection_product_with_unit_weights_is_scipys_and_owns_its_arrays():
    """``_matmul(L, M)`` for ``M`` with one entry per row in distinct columns (a variable's rows): with unit weights
    (L's weights copied) and other weights (gathered), against scipy's ``L @ M`` array by array; the result never
    shares its weights with ``L`` (nodes are never modified in place, but the program sorts matrices in place)."""
    from varopt.frontends.cvxpy_nodes import _matmul
    rng = np.random.default_rng(3)
    for trial in range(30):
        p, q, n = int(rng.integers(4, 30)), int(rng.integers(1, 6)), int(rng.integers(6, 12))
        L = sp.random(p, q, density=0.7, format="csr", random_state=int(rng.integers(1 << 30)))
        L.data[:] = rng.normal(size=L.nnz)
        cols = rng.choice(n, size=q, replace=False)
        w = np.ones(q) if trial % 2 == 0 else rng.choice([1.0, -2.0, 0.5], size=q)
        if trial % 6 == 1:
            w[:] = 1.0
            w[-1] = 3.0  # one weight not 1: the gather
        M = sp.csr_matrix((w, cols, np.arange(q + 1)), shape=(q, n))
        got, ref = _matmul(L, M), (L @ M).tocsr()
        got.check_format(full_check=True)
        ref.sort_indices()
        g = got.copy()
        g.sort_indices()
        np.testing.assert_array_equal(g.indptr, ref.indptr)
        np.testing.assert_array_equal(g.indices, ref.indices)
        np.testing.assert_array_equal(g.data, ref.data)
        assert not np.shares_memory(got.data, L.data)


def test_variable_test_by_class_follows_isinstance():
    """The tracer decides ``isinstance(expr, cvxpy.Variable)`` once per class: a subclass of ``Variable`` is a
    variable, a parameter and a constant are not; the compiled objective of a subclass variable is the plain
    variable's (values by CVXPY)."""
    cp = pytest.importorskip("cvxpy")
    from varopt.frontends.cvxpy_affine import _cvxpy_classes, _AffineTracer

    class Weights(cp.Variable):
        pass

    tracer = _AffineTracer({}, 0)
    Variable = _cvxpy_classes()[0]
    v, s, c, par = Weights(3, name="v"), cp.Variable(2), cp.Constant(np.ones(2)), cp.Parameter(2, value=np.ones(2))
    for e in (v, s, c, par, v + 1, cp.sum(s)):
        for _ in range(2):  # the second answer comes from the per-class table
            assert tracer.is_variable(e) == isinstance(e, Variable)
    X = np.arange(12.0).reshape(4, 3) / 7.0
    y = np.array([1.0, -1.0, 1.0, 1.0])
    vals = []
    for var in (Weights(3, name="w"), cp.Variable(3, name="w")):
        prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ var))) + cp.sum_squares(var)),
                          [var[0] >= 0.1])
        vals.append(prob.solve(method="majorize", tol=1e-12))
        assert var.value[0] >= 0.1 - 1e-12 and abs(prob.value - vals[-1]) <= 1e-12 * abs(vals[-1])
    assert vals[0] == vals[1]


def test_relative_steps_in_the_history_are_recomputed_from_the_iterates():
    """The loop carries ``||x||^2`` from one iteration to the next: the history's relative step of every iteration is
    ``||x_k - x_{k-1}|| / max(1, ||x_{k-1}||)`` recomputed from the iterates the callback saw (with and without
    bounds and a row)."""
    from varopt.formulations.logistic import logistic_program
    from varopt.program import Program
    from varopt.program.expression import Expression
    from varopt.program.program import Constraint
    rng = np.random.default_rng(11)
    X = 3.0 * rng.normal(size=(60, 5))
    y = (X @ rng.normal(size=5) + rng.logistic(size=60) > 0).astype(int)
    prog = logistic_program(X, y, 0.2)
    n = prog.n
    cprog = Program(prog.names, np.full(n, -0.8), np.full(n, np.inf), prog.objective,
                    [Constraint("sum", Expression(n, linear=np.ones(n)), -np.inf, 0.5)])
    for p in (prog, cprog):
        for reuse in ("auto", 0):
            xs = []
            res = get_solver("majorize").solve(p, tol=1e-12, bound_reuse=reuse,
                                               callback=lambda it, x, f: xs.append(np.array(x)) and False)
            x0 = res.history[0]
            assert x0["iteration"] == 0
            prev = np.zeros(n) if p is prog else np.clip(np.zeros(n), p.lb, p.ub)
            steps = [h["step"] for h in res.history[1:]]
            assert len(steps) == len(xs) >= 3
            for x, st in zip(xs, steps):
                want = float(np.linalg.norm(x - prev)) / max(1.0, float(np.linalg.norm(prev)))
                assert abs(st - want) <= 1e-13  # (a trial's step a D against x_new - x: rounding of x)
                prev = x


def test_bounded_variables_are_counted_once_per_model():
    """``MajorizeModel.n_bounded`` is the number of variables with a finite bound (singleton rows folded in), and the
    step cost model's active-set price reads it."""
    from varopt.formulations.logistic import logistic_program
    from varopt.program import Program
    from varopt.program.expression import Expression
    from varopt.program.program import Constraint
    from varopt.solvers.majorize.model import MajorizeModel
    from varopt.solvers.majorize.structured import woodbury_step_qp_costs
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 6))
    y = (rng.random(40) < 0.5).astype(int)
    prog = logistic_program(X, y, 1.0)
    n = prog.n
    lb, ub = np.full(n, -np.inf), np.full(n, np.inf)
    lb[1], ub[3], lb[4], ub[4] = -1.0, 2.0, -0.5, 0.5
    row = np.zeros(n)
    row[5] = 2.0  # a singleton row: a bound on x_5
    cons = [Constraint("single", Expression(n, linear=row), -np.inf, 1.0),
            Constraint("sum", Expression(n, linear=np.ones(n)), -np.inf, 3.0)]
    model = MajorizeModel(Program(prog.names, lb, ub, prog.objective, cons))
    assert model.n_bounded == int(np.count_nonzero(np.isfinite(model.lb) | np.isfinite(model.ub))) == 4
    # the active set's price counts every bounded variable without a hint, and at most hint + margin with one
    model.working_set_hint = None
    wide = woodbury_step_qp_costs(model, 40, 2, n)["active_set"]
    model.working_set_hint = 0
    assert woodbury_step_qp_costs(model, 40, 2, n)["active_set"] == wide   # min(4, 0 + 32) = 4
    model.n_bounded = 1
    model.working_set_hint = None
    assert woodbury_step_qp_costs(model, 40, 2, n)["active_set"] < wide


@pytest.mark.parametrize("bounded", [False, True])
def test_shortened_trial_returns_the_point_it_evaluated(bounded):
    """A quasi-Newton trial on a metric far below the curvature overshoots and is shortened twice (quadratic
    interpolation) before it is accepted: the point returned is ``x + a D`` with the step returned, and its objective
    is the program's own value there (the trial forms its point once per factor; without and with bounds, which
    take the ratio and feasibility tests)."""
    from varopt import lpqp
    from varopt.program import Program
    from varopt.program.expression import Expression
    from varopt.program.terms import LseGroup, QuadraticTerms
    from varopt.solvers.majorize.model import MajorizeModel
    from varopt.solvers.majorize.reuse import ScaledCurvature
    from varopt.solvers.majorize.reuse_metric import DenseMetric
    from varopt.solvers.majorize.step_qp import StepQP
    rng = np.random.default_rng(20)
    n = 4
    g = LseGroup(sp.csr_matrix(rng.standard_normal((6, n))), np.zeros(6), np.array([0, 0, 1, 1, 2, 2]), np.ones(3))
    obj = Expression(n, 0.0, rng.standard_normal(n), QuadraticTerms(np.arange(n), np.arange(n), 0.5 * np.ones(n), n),
                     lse=[g])
    prog = Program([f"x{j}" for j in range(n)], np.full(n, -50.0 if bounded else -np.inf), np.full(n, np.inf), obj)
    model = MajorizeModel(prog)
    qp = StepQP(model, lpqp) if bounded else None
    for L in (0.3, 0.1):
        sc = ScaledCurvature(3, "bound")
        sc.ref, sc.age, sc.c = DenseMetric(np.eye(n) * L), 1, 1.0
        x = np.zeros(n)
        f, _, S = model.evaluate(x)
        u = model.gradient_at(x, S)
        x_new, f_new, _, step, _, info = sc.trial(model, x, u, f, None, S, qp)
        assert sc.stats["backtracks"] == info["backtracks"] == 2 and sc.stats["accepted"] == 1
        np.testing.assert_array_equal(x_new, x + step)
        full = -np.linalg.solve(np.eye(n) * L, u)  # the unshortened trial: x_new lies on it, well short of it
        a = float(step @ full) / float(full @ full)
        np.testing.assert_allclose(step, a * full, rtol=1e-12, atol=0)
        assert 0 < a < 0.5
        assert abs(f_new - prog.objective.value(x_new)) <= 1e-12 * max(1.0, abs(f_new)) and f_new < f
