"""klprox on user-style models, third round (branch klout): what a demanding user checks from the outside.

Each test reproduces a failure found with a user-style model (scripts under the branch's scratch notes) and checks
the fixed behaviour against an independent computation.
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import varopt  # noqa: F401  (registers the solvers)


def _gaussian_only(seed=7):
    """A Gaussian likelihood only: every term is conjugate, the view has no likelihood rows (N = 0 < D: the dual
    parameterization's path), the posterior covariance is (P + X^T X / s2)^-1 exactly."""
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(75, 5)) * 12, rng.normal(size=75)
    w = cp.Variable(5)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(X @ w - y) / 2 + cp.sum_squares(w) / 128))
    return prob, np.linalg.inv(X.T @ X + np.eye(5) / 64)


def _few_rows():
    """Fewer likelihood rows than weights (the dual parameterization, update (19)) under a correlated prior
    ``0.5 * cp.quad_form(w, P)`` (the prior covariance from a Cholesky solve)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(3, 6)), np.sign(rng.normal(size=3))
    A = rng.normal(size=(6, 6))
    w = cp.Variable(6)
    return cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w))) + 0.5 * cp.quad_form(w, A @ A.T + 0.1 * np.eye(6)))), None


@pytest.mark.parametrize("build", [_gaussian_only, _few_rows], ids=["conjugate", "dual"])
def test_covariance_is_exactly_symmetric(build):
    """``info['covariance']`` was symmetric only to rounding (|V - V^T| up to 1e-15 relative) on the dual
    parameterization's path (``Sigma - F^T F``): users pass it to Cholesky factorizations and samplers that test
    symmetry exactly (``np.array_equal(V, V.T)``, ``scipy.linalg.cholesky(..., check_finite)`` on a symmetrized copy
    is the workaround they should not need)."""
    prob, exact = build()
    prob.solve(method="klprox")
    r = prob.varopt_result
    V = r.info["covariance"]
    assert np.array_equal(V, V.T)
    assert np.all(np.linalg.eigvalsh(V) > 0)
    if exact is not None:
        assert np.max(np.abs(V - exact)) <= 1e-12 * np.max(np.abs(exact))


_X = np.random.default_rng(1).normal(size=(12, 2))
_Y = (_X[:, 0] > 0).astype(float)


@pytest.mark.parametrize("builder", ["glm_program", "build_cvxpy", "build_pyomo"])
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "2", True])
def test_model_builders_name_a_bad_prior_variance(builder, bad):
    """``build_cvxpy``/``build_pyomo`` did not check ``prior_var``: 0 and -1 failed deep inside (``math domain error``,
    ``ZeroDivisionError``), NaN built a model of NaN constants, a string a TypeError; ``glm_program`` took ``True``."""
    from varopt.errors import InputDataError
    from varopt.formulations import bayes_glm
    if builder == "build_pyomo":
        pytest.importorskip("pyomo.environ")
    with pytest.raises(InputDataError, match="prior_var must be a positive finite number"):
        getattr(bayes_glm, builder)(_X, _Y, "logistic", prior_var=bad)


@pytest.mark.parametrize("builder", ["glm_program", "build_cvxpy"])
def test_model_builders_take_numpy_integers(builder):
    """``glm_program(prior_var=np.int64(2))`` (a grid from ``np.arange``) was rejected as not a number; the posterior
    equals the one at ``prior_var=2.0``."""
    from varopt.formulations import bayes_glm
    from varopt.registry import get_solver

    def posterior(pv):
        out = getattr(bayes_glm, builder)(_X, _Y, "logistic", prior_var=pv)
        if builder == "glm_program":
            r = get_solver("klprox").solve(out)
            return r.x, r.objective
        prob, w = out
        prob.solve(method="klprox")
        return np.ravel(w.value), prob.varopt_result.objective

    (m1, f1), (m2, f2) = posterior(np.int64(2)), posterior(2.0)
    assert np.array_equal(m1, m2) and f1 == f2


def _wide_prior_logistic():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) * 3
    y = np.sign(X[:, 0] + rng.normal(size=40))
    w = cp.Variable(3)
    return cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w))) + cp.sum_squares(w) / 200)), w


def test_a_diverging_fixed_step_says_so():
    """``step_rule='fixed', beta=1`` on a wide prior (the paper's divergence at large delta) ran to max_iter and
    returned a -ELBO 50 times the optimum's with the message 'max_iter=50 reached' only; the message now says the
    ELBO fell under the constant step, from which value, and what to use. The adaptive default converges."""
    prob, w = _wide_prior_logistic()
    best = prob.solve(method="klprox")
    assert prob.varopt_result.status == "converged"
    prob.solve(method="klprox", step_rule="fixed", beta=1.0, max_iter=50)
    r = prob.varopt_result
    assert r.status == "iteration_limit" and prob.status == "user_limit"
    assert r.objective > 10 * best
    assert "the ELBO decreased under the fixed step beta=1" in r.message and "step_rule='adaptive'" in r.message
    lowest = min(h["objective"] for h in r.history)
    assert f"{lowest:.10g}" in r.message


def test_a_converging_fixed_step_has_no_note():
    prob, w = _wide_prior_logistic()
    best = prob.solve(method="klprox")
    prob.solve(method="klprox", step_rule="fixed", beta=0.05, max_iter=20)   # too few steps, but no divergence
    r = prob.varopt_result
    assert r.status == "iteration_limit" and r.message == "max_iter=20 reached" and r.objective >= best


def _view(likelihood, y, prior_var, X=None):
    from varopt.formulations.bayes_glm import glm_program
    from varopt.solvers.klprox.expectations import family_table
    from varopt.solvers.klprox.view import likelihood_view
    X = np.random.default_rng(1).normal(size=(50, 2)) if X is None else X
    return likelihood_view(glm_program(X, y, likelihood, prior_var=prior_var), family_table())


def test_a_failed_baseline_says_so():
    """The Cholesky and mean-field baselines started where E[exp u] overflows (all-zero Poisson counts under a wide
    prior: -ELBO 7.6e17 at the start) stopped after 2 L-BFGS iterations and returned that point as their answer, with
    nothing to tell it from an optimum (klprox itself converges there: -ELBO -6.99). They now warn and return
    ``success=False`` with L-BFGS-B's message; a converged run returns ``success=True`` without a warning."""
    import warnings
    from varopt.baselines.klprox import cholesky_vi, mean_field_vi
    bad = _view("poisson", np.zeros(50), 1e3)
    for baseline in (cholesky_vi, mean_field_vi):
        with pytest.warns(RuntimeWarning, match="stopped far from a stationary point"):
            out = baseline(bad)
        assert out["success"] is False and out["neg_elbo"] > 1e10 and out["message"]
    good = _view("logistic", (np.random.default_rng(2).random(50) < 0.5).astype(float), 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = cholesky_vi(good)
    assert out["success"] is True
