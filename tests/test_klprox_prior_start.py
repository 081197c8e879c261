"""klprox's start from the prior (``PRIOR_STEP``; docs/klprox.md, section 4): near the prior (every prior predictor's
standard deviation at most ``PRIOR_SD``) the prior is evaluated from its predictive moments without a factorization and
the undamped natural step from it is the start when its -ELBO is lower; it replaces the gamma0 start and, within
``FIRST_SD``, the first optimistic step. Checked: the prior's moments and Gaussian part against the factored prior state, the start's -ELBO
against an independent 200-node evaluation and below the prior's, fewer iterations and the same optimum, the previous
trajectory bit for bit wherever the rule does not apply, and the gamma0 start when the step is not better."""
import math

import numpy as np
import pytest
from klprox_checks import (assert_same_trajectory, history_objectives, logistic_neg_elbo_200, logistic_program,
                           solve_with)

import varopt  # noqa: F401  (registers the solvers)
from varopt.formulations.bayes_glm import glm_program, gp_program
from varopt.registry import get_solver
from varopt.solvers.klprox import solver as KS
from varopt.solvers.klprox.expectations import family_table
from varopt.solvers.klprox.posterior import FullGaussian
from varopt.solvers.klprox.view import likelihood_view

S = get_solver("klprox")




def _gp(log_sf, seed=0, n=40):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(float)
    return gp_program(X, y, "logistic", 0.0, log_sf)[0]


def _softmax(prior_var, seed=0, n=60):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = rng.integers(0, 3, size=n).astype(float)
    return glm_program(X, y, "multinomial", prior_var=prior_var)


def _sparse_logistic(prior_var, seed=0, n=400, d=60):
    # sparse 0/1 features (a1a's kind: the row-pair path of the full form)
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.05, format="csr", random_state=seed)
    X.data[:] = 1.0
    y = (rng.uniform(size=n) < 0.4).astype(float)
    return glm_program(X, y, "logistic", prior_var=prior_var)


@pytest.mark.parametrize("make", [lambda: logistic_program(0.3), lambda: _gp(1.0), lambda: _softmax(0.5),
                                  lambda: _sparse_logistic(0.5)])
@pytest.mark.parametrize("woodbury", [False, True])
def test_prior_moments_and_gaussian_part_equal_the_factored_prior_state(make, woodbury):
    # the prior's state without a factorization against the state of pseudo-precisions 0, factored as every state is
    view = likelihood_view(make(), family_table())
    post = FullGaussian(view, woodbury=woodbury)
    vt = post.prior_var()
    _, mt, gp = post.prior(vt)
    st = post.state_of(view.mu.copy(), np.zeros(view.npat))
    mt2, vt2 = post.predictors(st)
    assert np.allclose(mt, mt2, rtol=0, atol=1e-12)
    assert np.allclose(vt, vt2, rtol=1e-12, atol=1e-12 * np.abs(vt2).max())
    assert abs(gp - post.gauss_part(st)) <= 1e-12 * max(1.0, post.magnitude)


def _prior_neg_elbo_200(view):
    """-ELBO of q = the prior N(mu, P^-1) of a logistic model (mu = 0 here): its likelihood by a 200-node Gauss-Hermite
    rule on the prior's predictive moments; the KL part is 0 (q is the prior)."""
    x, w = np.polynomial.hermite.hermgauss(200)
    A = view.A.toarray()
    Sigma = np.linalg.inv(view.P)
    mt, vt = A @ view.mu + view.b, np.einsum("ij,jk,ik->i", A, Sigma, A)
    u = mt[:, None] + np.sqrt(2 * vt)[:, None] * x[None, :]
    lik = float(np.sum(view.coef * (np.logaddexp(0, u) @ w)) / math.sqrt(math.pi)) + float(view.lin @ mt)
    quad = 0.5 * view.mu @ view.P @ view.mu + 0.5 * np.sum(view.P * Sigma) + view.c @ view.mu + view.k
    return quad + lik - 0.5 * (view.D * (1 + math.log(2 * math.pi)) + np.linalg.slogdet(Sigma)[1])


def _start_neg_elbo_200(view, mean, V):
    x, w = np.polynomial.hermite.hermgauss(200)
    A = view.A.toarray()
    mt, vt = A @ mean + view.b, np.einsum("ij,jk,ik->i", A, V, A)
    u = mt[:, None] + np.sqrt(2 * vt)[:, None] * x[None, :]
    lik = float(np.sum(view.coef * (np.logaddexp(0, u) @ w)) / math.sqrt(math.pi)) + float(view.lin @ mt)
    quad = 0.5 * mean @ view.P @ mean + 0.5 * np.sum(view.P * V) + view.c @ mean + view.k
    return quad + lik - 0.5 * (view.D * (1 + math.log(2 * math.pi)) + np.linalg.slogdet(V)[1])


@pytest.mark.parametrize("seed", [0, 1])
def test_the_start_is_exact_below_the_prior_and_ends_at_the_same_optimum_in_fewer_steps(monkeypatch, seed):
    p = logistic_program(1e-3, seed)
    starts = []
    orig = KS.KLProx._prior_start

    def spy(self):
        cur = orig(self)
        starts.append((self.post, cur))
        return cur

    monkeypatch.setattr(KS.KLProx, "_prior_start", spy)
    r = S.solve(p)
    monkeypatch.undo()
    old = solve_with(monkeypatch, S, p, {"PRIOR_STEP": 0})
    assert r.status == "converged" and old.status == "converged"
    assert r.info["prior_evaluations"] == 1 and old.info["prior_evaluations"] == 0
    post, cur = starts[0]
    assert cur is not None
    view = likelihood_view(p, family_table())
    # the start's -ELBO is exact (an independent 200-node evaluation at its mean and covariance) and below the prior's
    ref = _start_neg_elbo_200(view, post.mean(cur.st), post.covariance(cur.st))
    assert abs(cur.f - ref) <= 1e-9 * abs(ref)
    assert cur.f < _prior_neg_elbo_200(view)
    # a monotone ELBO from the start on, the same optimum, fewer steps (the start replaces the first optimistic step)
    f = np.concatenate([[cur.f], history_objectives(r)])
    assert np.all(np.diff(f) <= r.info["rounding"])
    assert r.iterations < old.iterations
    assert abs(r.objective - old.objective) <= 1e-12 * abs(old.objective)
    assert np.allclose(r.x, old.x, rtol=0, atol=1e-8)
    ref, _ = logistic_neg_elbo_200(view, r)                        # the reported -ELBO: a 200-node re-evaluation
    assert abs(r.objective - ref) <= 1e-9 * abs(ref)


@pytest.mark.parametrize("seed", [0, 1])
def test_between_the_two_gates_the_start_is_taken_without_optimistic_steps(monkeypatch, seed):
    # prior predictor sd in (FIRST_SD, PRIOR_SD] (1.5-2.2 here): T(prior) is the start, the run goes on from the cap
    # (no step at FIRST_BETA: those overshoot there, e.g. a Poisson log-rate), fewer evaluations, the same optimum
    p = logistic_program(0.2, seed)
    r, old = S.solve(p), solve_with(monkeypatch, S, p, {"PRIOR_STEP": 0})
    assert r.info["prior_evaluations"] == 1
    assert KS.NATURAL_BETA_MAX <= r.history[0]["beta"] < KS.FIRST_BETA
    assert r.iterations + r.info["rejected_steps"] < old.iterations + old.info["rejected_steps"]
    assert np.all(np.diff(history_objectives(r)) <= r.info["rounding"])
    assert abs(r.objective - old.objective) <= 1e-12 * abs(old.objective)


@pytest.mark.parametrize("prior_var", [0.01, 0.05])
def test_a_sparse_model_near_its_prior_starts_there_too(monkeypatch, prior_var):
    p = _sparse_logistic(prior_var)
    r, old = S.solve(p), solve_with(monkeypatch, S, p, {"PRIOR_STEP": 0})
    assert r.status == "converged" and old.status == "converged"
    assert r.info["prior_evaluations"] == 1 and r.iterations < old.iterations
    assert abs(r.objective - old.objective) <= 1e-12 * abs(old.objective)


@pytest.mark.parametrize("make,opts", [
    (lambda: logistic_program(100.0), {}),                      # wide prior: outside the gate
    (lambda: _gp(2.0), {}),                                     # a GP prior with sd e^2 > PRIOR_SD
    (lambda: logistic_program(1e-3), {"beta": 1.0}),
    (lambda: logistic_program(1e-3), {"beta_max": 10.0}),
    (lambda: logistic_program(1e-3), {"gamma0": 1e-3}),
    (lambda: logistic_program(1e-3), {"mean_step": "paper"}),
    (lambda: logistic_program(1e-3), {"parameterization": "dual"}),
])
def test_the_previous_trajectory_where_the_rule_does_not_apply(monkeypatch, make, opts):
    p = make()
    r, old = S.solve(p, **opts), solve_with(monkeypatch, S, p, {"PRIOR_STEP": 0}, **opts)
    assert r.info["prior_evaluations"] == 0
    assert_same_trajectory(r, old)


def test_a_warm_start_keeps_its_trajectory(monkeypatch):
    p = logistic_program(1e-3)
    prev = S.solve(logistic_program(2e-3))
    r, old = S.solve(p, warm_start=prev), solve_with(monkeypatch, S, p, {"PRIOR_STEP": 0}, warm_start=prev)
    assert r.info["prior_evaluations"] == 0
    assert_same_trajectory(r, old, rejected=False)


def test_a_step_no_better_than_the_prior_falls_back_to_the_gamma0_start(monkeypatch):
    # the natural step from the prior made useless (its mean sent far out): its -ELBO is above the prior's, so the run
    # is the one from the gamma0 start, bit for bit, with the prior's one evaluation wasted
    p = logistic_program(1e-3)
    step = FullGaussian.step

    def far(self, st, alpha, gamma, r, natural=False, mean_dir=None):
        new = step(self, st, alpha, gamma, r, natural=natural, mean_dir=mean_dir)
        if r == 0.0:
            new.m = new.m + 50.0
        return new

    monkeypatch.setattr(FullGaussian, "step", far)
    r = S.solve(p)
    old = solve_with(monkeypatch, S, p, {"PRIOR_STEP": 0})
    assert r.info["prior_evaluations"] == 1
    assert_same_trajectory(r, old, rejected=False)
    assert r.objective == old.objective
