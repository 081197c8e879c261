"""The matrix-free line metric of option bound_reuse (reuse_metric='line', chosen by 'auto' by predicted cost;
varopt/solvers/majorize/line_metric.py, docs/majorize.md section 2; issue 12 item 3)."""
import numpy as np
import pytest
from scipy.optimize import minimize as sp_minimize

import varopt.solvers.majorize  # noqa: F401  (registers 'majorize')
import varopt.solvers.majorize.reuse as reuse
from varopt import get_solver
from varopt.errors import InvalidOptionError
from varopt.formulations.logistic import logistic_program
from varopt.solvers.majorize.line_metric import line_curvature, line_pays
from varopt.solvers.majorize.model import MajorizeModel


def _program(rng, t, d, C, lam=1.0):
    X = rng.normal(size=(t, d))
    W = rng.normal(size=(d, C)) / np.sqrt(d) * 3.0
    y = np.argmax(X @ W + rng.gumbel(size=(t, C)), axis=1)
    return logistic_program(X, y, lam)


def _opts(**kw):
    return get_solver("majorize").options.validate(kw)


def _hessian_fd(model, x, h=1e-5):
    """The objective's Hessian by central differences of the gradient (independent of the groups' algebra)."""
    n = x.size
    Hm = np.empty((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = h
        Hm[:, j] = (model.gradient(x + e) - model.gradient(x - e)) / (2 * h)
    return 0.5 * (Hm + Hm.T)


@pytest.mark.parametrize("C", [2, 4])
def test_line_curvature_is_the_hessian_and_the_bound_along_u(rng, C):
    prog = _program(rng, 40, 3, C)
    model = MajorizeModel(prog)
    x = rng.normal(size=prog.n) * 0.5
    u = rng.normal(size=prog.n)
    opts = _opts(ridge=0.25)
    S = model.evaluate(x)[2]
    Hf = _hessian_fd(model, x)
    want = u @ Hf @ u / (u @ u) + 0.25
    assert line_curvature(model, x, u, S, opts, hessian=True) == pytest.approx(want, rel=1e-6)
    # the bound: u^T (H + Sigma(x)) u with Algorithm 1's dense Sigma (model.sigma_at), and it dominates the Hessian
    Q = model.add_H(model.sigma_at(x), 0.25)
    Lb = line_curvature(model, x, u, S, opts)
    assert Lb == pytest.approx(u @ Q @ u / (u @ u), rel=1e-10)
    assert Lb >= want * (1 - 1e-9)


def _reference(prog):
    model = MajorizeModel(prog)
    r = sp_minimize(model.value_and_gradient, np.zeros(prog.n), jac=True, method="L-BFGS-B",
                    options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 10000})
    return r.fun


@pytest.mark.parametrize("shape", [(120, 8, 2), (90, 5, 4)])
def test_line_metric_reaches_the_optimum_monotonically(rng, shape):
    prog = _program(rng, *shape)
    res = get_solver("majorize").solve(prog, tol=1e-12, reuse_metric="line")
    assert res.status == "optimal"
    f = [h["objective"] for h in res.history]
    assert all(b <= a + 1e-12 * abs(a) for a, b in zip(f, f[1:]))
    fstar = _reference(prog)
    assert res.objective <= fstar + 1e-8 * abs(fstar)
    assert res.info["reuse_metric"] == "line"
    # matrix-free: no dense, Woodbury or CG step, no Hessian matrix
    assert set(res.info["step_solver"]) <= {"line"}


def test_rejected_trials_fall_back_to_the_line_bound_step(rng, monkeypatch):
    """Every trial rejected (an unreachable acceptance fraction): each iteration is Algorithm 2's step on the
    gradient's line, checked against its majorizer (check_bound) and still converging."""
    monkeypatch.setattr(reuse, "ETA", 1e6)
    prog = _program(rng, 80, 4, 3, lam=5.0)
    res = get_solver("majorize").solve(prog, tol=1e-10, max_iter=5000, reuse_metric="line", check_bound=True)
    assert res.status == "optimal"
    st = res.info["bound_reuse"]
    assert st["accepted"] == 0 and st["rejected"] > 0
    assert res.info["step_solver"]["line"] == st["bounds"] >= st["rejected"]
    f = [h["objective"] for h in res.history]
    assert all(b <= a + 1e-12 * abs(a) for a, b in zip(f, f[1:]))
    fstar = _reference(prog)
    assert res.objective <= fstar + 1e-7 * abs(fstar)


def test_auto_chooses_by_predicted_cost(rng):
    small = _program(rng, 200, 6, 2)  # the dense Hessian costs a few gradients: the matrix metric
    res = get_solver("majorize").solve(small, tol=1e-10)
    assert res.info["reuse_metric"] == "bound"
    assert not line_pays(MajorizeModel(small), _opts())
    big = _program(rng, 1200, 300, 2)  # dense features, n = 301: the matrix costs ~50 gradients
    assert line_pays(MajorizeModel(big), _opts())
    res = get_solver("majorize").solve(big, tol=1e-10)
    assert res.info["reuse_metric"] == "line" and res.status == "optimal"
    ref = get_solver("majorize").solve(big, tol=1e-10, reuse_metric="bound")
    assert res.objective == pytest.approx(ref.objective, rel=1e-8)
    # an explicit step solver keeps the matrix metric
    assert not line_pays(MajorizeModel(big), _opts(step_solver="dense"))


def test_line_option_errors(rng):
    import scipy.sparse as sp

    from varopt.program import Expression, LseGroup, Program, QuadraticTerms
    n = 2  # one partition function of 65 configurations: no padded groups, no line metric
    g = LseGroup(sp.csr_matrix(rng.normal(size=(65, n))), np.zeros(65), np.zeros(65, dtype=np.int64), np.ones(1))
    obj = Expression(n, 0.0, np.zeros(n), QuadraticTerms(np.arange(n), np.arange(n), np.ones(n), n), lse=[g])
    prog = Program(["a", "b"], np.full(n, -np.inf), np.full(n, np.inf), obj)
    with pytest.raises(InvalidOptionError, match="reuse_metric='line'"):
        get_solver("majorize").solve(prog, reuse_metric="line")
    from varopt.solvers.majorize.bound_oracle import minimize

    class Oracle:
        def __call__(self, theta, want_sigma=True):
            raise AssertionError("not reached")
    with pytest.raises(InvalidOptionError, match="reuse_metric='line'"):
        minimize(Oracle(), np.zeros(2), bound_reuse=2, reuse_metric="line")


def _constrained_wide(rng, t=30, d=300):
    """Few samples, many features (the row-space Woodbury step's shape, as SRBCT), bounds on five weights and one
    inactive-or-active linear row."""
    from varopt.program import Constraint, Expression
    prog = _program(rng, t, d, 2, lam=1.0)
    prog.lb[:5] = 0.0
    a = np.zeros(prog.n)
    a[5:10] = 1.0
    prog.constraints.append(Constraint("row", Expression(prog.n, 0.0, a), -np.inf, 0.05))
    return prog


def _violation(prog, x):
    return max(float(np.max(prog.lb - x)), float(np.max(x - prog.ub)), prog.max_violation(x))


def test_constrained_woodbury_programs_take_line_trials_to_the_same_optimum(rng):
    """With constraints and the row-space Woodbury step (no matrix metric) 'auto' runs line-metric trials on the
    face of the active bounds, Algorithm 2's step QP as fallback; same optimum as Algorithm 2 itself
    (bound_reuse=0), feasible, monotone."""
    from varopt.solvers.majorize.structured import choose_step_solver
    prog = _constrained_wide(rng)
    model = MajorizeModel(prog)
    assert choose_step_solver(model, _opts()) == "woodbury" and line_pays(model, _opts())
    solver = get_solver("majorize")
    res = solver.solve(prog, tol=1e-12, max_iter=5000)
    assert res.status == "optimal" and res.info["reuse_metric"] == "line"
    st = res.info["bound_reuse"]
    assert st["accepted"] > 0 and set(res.info["step_solver"]) <= {"woodbury"}
    ref = solver.solve(prog, tol=1e-12, max_iter=5000, bound_reuse=0)
    assert set(ref.info["step_solver"]) == {"woodbury"}
    assert res.objective == pytest.approx(ref.objective, rel=1e-10)
    assert _violation(prog, res.x) <= 1e-9
    assert np.all(res.x >= prog.lb)  # the bounds exactly
    f = [h["objective"] for h in res.history]
    assert all(b <= a + 1e-12 * abs(a) for a, b in zip(f, f[1:]))
    # some bounds are active at the optimum: the trials moved on a face
    assert np.any(res.x[:5] == 0.0)


def test_constrained_rejected_line_trials_fall_back_to_the_step_qp(rng, monkeypatch):
    """Every trial rejected: each iteration is Algorithm 2's constrained step (the step QP, checked against its
    majorizer), never the unconstrained step on the gradient's line, and the run still converges feasibly."""
    monkeypatch.setattr(reuse, "ETA", 1e6)
    prog = _constrained_wide(rng, t=25, d=120)
    res = get_solver("majorize").solve(prog, tol=1e-10, max_iter=5000, reuse_metric="line", check_bound=True)
    assert res.status == "optimal"
    st = res.info["bound_reuse"]
    assert st["accepted"] == 0 and st["rejected"] > 0
    assert "line" not in res.info["step_solver"] and sum(res.info["step_solver"].values()) == st["bounds"]
    assert _violation(prog, res.x) <= 1e-9 and np.all(res.x >= prog.lb)
    ref = get_solver("majorize").solve(prog, tol=1e-10, max_iter=5000, bound_reuse=0)
    assert res.objective == pytest.approx(ref.objective, rel=1e-9)


def test_constrained_programs_with_an_equality_row_keep_the_step_qp(rng):
    """An equality row blocks every quasi-Newton trial: 'auto' runs Algorithm 2's step QPs without trials there."""
    from varopt.program import Constraint, Expression
    prog = _constrained_wide(rng)
    model = MajorizeModel(prog)
    assert line_pays(model, _opts())
    a = np.zeros(prog.n)
    a[10:20] = 1.0
    prog.constraints.append(Constraint("eq", Expression(prog.n, 0.0, a), 0.1, 0.1))
    assert not line_pays(MajorizeModel(prog), _opts())
    res = get_solver("majorize").solve(prog, tol=1e-10, max_iter=5000)
    assert res.status == "optimal" and "bound_reuse" not in res.info
    assert abs(float(a @ res.x) - 0.1) <= 1e-9


def test_constrained_dense_programs_keep_the_matrix_metric(rng):
    """With constraints and the dense step QP (its curvature is the trials' metric anyway) 'auto' keeps 'bound'."""
    prog = _program(rng, 1200, 300, 2)
    prog.lb[:5] = 0.0
    model = MajorizeModel(prog)
    from varopt.solvers.majorize.structured import choose_step_solver
    assert choose_step_solver(model, _opts()) == "dense"
    assert not line_pays(model, _opts())
