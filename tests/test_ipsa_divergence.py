"""ipsa stops a run whose iterates run away (``varopt/solvers/ipsa/divergence.py``): status ``error`` with a
message saying so and a :class:`DivergedWarning`, instead of an ordinary ``iteration_limit`` / ``pass_limit``
(or an error blaming the gradient oracle) at a point far worse than the start. Stable runs are left alone:
their iterates are unchanged (the watch only reads the state; the §2.5.7 tables and tests/test_ipsa*.py pin
them), a minimum far from the start and an objective decreasing without bound are not called divergence by
the growth rules."""
from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt
from varopt.core.backend import numba_available
from varopt.frontends.cvxpy_compile import compile_cvxpy
from varopt.solvers.ipsa import DivergedWarning

UNSTABLE = dict(step_power=0, hessian="identity")   # a_k = 1 with B = I: too long a step for ||A||^2 >> 1


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((40, 8)), rng.standard_normal(40)


def _solve(prob, **kw):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = varopt.get_solver("ipsa").solve(compile_cvxpy(prob)[0], **kw)
    return res, [w.category for w in seen]


def _forms():
    A, b = _data()
    w = cp.Variable(8)
    return {
        "free least squares": cp.Problem(cp.Minimize(cp.sum_squares(A @ w - b))),
        "least squares with a far bound": cp.Problem(cp.Minimize(cp.sum_squares(A @ w - b)), [w >= -1e9]),
        "ridge logistic": cp.Problem(cp.Minimize(cp.sum(cp.logistic(A @ w)) + 5 * cp.sum_squares(w))),
    }


CASES = [(form, backend, bs) for form in ("free least squares", "least squares with a far bound", "ridge logistic")
         for backend, bs in (("numpy", 1), ("numba", 1), ("numpy", 40))
         if not (backend == "numba" and form == "ridge logistic")]   # two row groups: not compiled


@pytest.mark.parametrize("form, backend, batch_size", CASES)
def test_runaway_iterates_stop_with_an_error_and_a_warning(form, backend, batch_size):
    """Before: the free least squares raised IpsaOracleError ('the gradient oracle returned a non-finite value')
    after 150 iterations, the others ran to max_iter=2000 and reported 'iteration_limit' at objective 1e24 and
    more."""
    if backend == "numba" and not numba_available():
        pytest.skip("numba is not installed")
    res, cats = _solve(_forms()[form], backend=backend, batch_size=batch_size, max_iter=2000, **UNSTABLE)
    assert res.status == "error" and res.message.startswith("diverging iterates"), (res.status, res.message)
    assert "step_power" in res.message and res.iterations < 2000
    assert DivergedWarning in cats


def test_cvxpy_lasso_split_form_raises_a_solver_error_naming_the_divergence():
    """The L1 split form of the Lasso (the ipsa form of Carbonetto 2009, §2.5) with a constant step: the iterates
    (x+ and x- both growing) used to reach an objective 1e9 after 100 passes, reported as 'pass_limit'."""
    A, b = _data(1)
    xp, xm = cp.Variable(8, nonneg=True), cp.Variable(8, nonneg=True)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(A @ (xp - xm) - b) + 0.5 * cp.sum(xp + xm)))
    with pytest.warns(DivergedWarning), pytest.raises(cp.error.SolverError, match="diverging iterates"):
        prob.solve(method="ipsa", passes=100, backend="numpy", **UNSTABLE)


def test_pyomo_divergence_is_an_error_and_leaves_the_values_alone():
    A, b = _data()
    m = pyo.ConcreteModel()
    m.w = pyo.Var(range(8), initialize=0.25)
    m.o = pyo.Objective(expr=sum((sum(A[i, j] * m.w[j] for j in range(8)) - b[i]) ** 2 for i in range(40)))
    with pytest.warns(DivergedWarning):
        results = pyo.SolverFactory("ipsa").solve(m, max_iter=500, **UNSTABLE)
    assert results.solver.termination_condition == pyo.TerminationCondition.error
    assert "diverging iterates" in results.solver.message
    assert all(m.w[j].value == 0.25 for j in range(8))


def test_a_far_minimum_and_an_objective_unbounded_below_are_not_divergence():
    """``min (x - 1e8)^2``: the iterate moves 1e8 times past the start's scale, to a lower objective (converged);
    ``min -x``: x grows without bound while the objective falls (no growth rule; the limit stops it)."""
    x = cp.Variable()
    res, cats = _solve(cp.Problem(cp.Minimize(cp.square(x - 1e8)), [x >= -1]), step_power=0, hessian="exact",
                       max_iter=100)
    assert res.status == "converged" and abs(res.x[0] - 1e8) < 1e-3 and DivergedWarning not in cats
    res, cats = _solve(cp.Problem(cp.Minimize(-1e3 * x), [x >= -1]), max_iter=300, **UNSTABLE)
    assert res.status == "iteration_limit" and res.x[0] > 1e4 and DivergedWarning not in cats


@pytest.mark.parametrize("history_objective", [False, True])
def test_start_objective_is_evaluated_only_when_a_rule_needs_it(history_objective, monkeypatch):
    """The watch evaluates the start's objective lazily: a stable run without recorded objectives evaluates the
    objective once (the result's), not also at the start; with recorded objectives the history rule gets the
    start's value (the objective at x0, evaluated on a copy of it)."""
    from varopt.solvers.ipsa import iteration
    A, b = _data()
    w = cp.Variable(8)
    P = compile_cvxpy(cp.Problem(cp.Minimize(cp.sum_squares(A @ w - b)), [w >= -5]))[0]
    seen, watches = [], []
    orig = iteration.IpsaRun.objective
    init = iteration.DivergenceWatch.__init__

    def counted(self, xv):
        seen.append(np.array(xv, copy=True))
        return orig(self, xv)

    def keep(self, r):
        init(self, r)
        watches.append((self, r.x.copy()))

    monkeypatch.setattr(iteration.IpsaRun, "objective", counted)
    monkeypatch.setattr(iteration.DivergenceWatch, "__init__", keep)
    res = varopt.get_solver("ipsa").solve(P, max_iter=50, history_objective=history_objective, backend="numpy")
    assert res.status == "iteration_limit"
    watch, x0 = watches[0]
    if not history_objective:
        assert len(seen) == 1 and not watch._f0_known
    else:
        assert watch._f0_known and watch.f0 == orig(watch.r, x0)
        assert any(np.array_equal(x, x0) for x in seen)


@pytest.mark.parametrize("kw, advised, not_advised", [
    (dict(step_power=0, hessian="identity"), ["step_power > 0", "larger k0 (now 50)", "a scaled Hessian"], []),
    (dict(step_power=1, k0=1, hessian="identity"), ["larger k0 (now 1)", "a scaled Hessian"],
     ["step_power > 0", "unbounded below"]),
    (dict(step_power=1, k0=1, hessian="bb"), ["larger k0 (now 1)"], ["step_power > 0", "a scaled Hessian", "unbounded"]),
])
def test_divergence_advice_names_only_options_not_already_set(kw, advised, not_advised):
    """The advice after a divergence: a decreasing step only when the step is constant (it used to advise
    'step_power > 0, e.g. the default 1' at step_power=1), a scaled Hessian only with hessian='identity', and the
    model's unboundedness only when the rule that fired did not see the objective grow."""
    rng = np.random.default_rng(0)
    A, b = 100 * rng.standard_normal((40, 8)), rng.standard_normal(40)
    w = cp.Variable(8)
    res, cats = _solve(cp.Problem(cp.Minimize(cp.sum_squares(A @ w - b))), backend="numpy", max_iter=2000, **kw)
    assert res.status == "error" and res.message.startswith("diverging iterates") and DivergedWarning in cats
    for text in advised:
        assert text in res.message, (text, res.message)
    for text in not_advised:
        assert text not in res.message, (text, res.message)


def test_divergence_advice_names_an_unbounded_model_when_the_objective_was_not_seen_growing():
    """A huge or non-finite iterate without a growing objective may be a model unbounded below (no step size helps):
    the advice says so; after the growth rules (the objective above the start or the best) it does not."""
    from types import SimpleNamespace
    from varopt.solvers.ipsa.divergence import divergence_hint
    opts = SimpleNamespace(step_power=1.0, k0=50.0, hessian="exact")
    for why in ("||x||_inf = 1e+21 > 1e+20", "a non-finite iterate ('w[0]' = inf)"):
        hint = divergence_hint(opts, why)
        assert "unbounded below" in hint and "step_power > 0" not in hint and "scaled Hessian" not in hint
    for why in ("||x||_inf = 1e+09, 1e+06 times past the start's scale 1, at objective 5 above the start's 1",
                "objective 1e+12 at iteration 10, orders of magnitude above the best 3 (start 3)"):
        assert "unbounded" not in divergence_hint(opts, why)


def test_an_overflow_of_the_programs_own_terms_is_not_blamed_on_a_gradient_oracle():
    """``min -sum(exp(x))`` (unbounded below): the iterates run until exp overflows. The error used to say 'the
    gradient oracle returned a non-finite value' although no oracle was given; it now says the model's terms
    overflow, with the divergence advice when the iterates ran far (here), and names the data when they did not."""
    from varopt.solvers.ipsa import IpsaOracleError
    x = cp.Variable(2)
    P = compile_cvxpy(cp.Problem(cp.Minimize(-cp.sum(cp.exp(x))), [x >= -1]))[0]
    with pytest.raises(IpsaOracleError) as ei:
        varopt.get_solver("ipsa").solve(P, max_iter=3000, backend="numpy")
    msg = str(ei.value)
    assert "gradient oracle" not in msg and "terms overflow" in msg and "unbounded below" in msg, msg
    assert np.isfinite(ei.value.x).all()
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 8))
    A[17] *= 1e200
    w = cp.Variable(8)
    P = compile_cvxpy(cp.Problem(cp.Minimize(cp.sum_squares(A @ w - 1)), [w >= -1]))[0]
    with pytest.raises(IpsaOracleError) as ei, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        varopt.get_solver("ipsa").solve(P, passes=2, backend="numpy", history_objective=False)
    msg = str(ei.value)
    assert "too large for double precision" in msg and "unbounded" not in msg, msg
