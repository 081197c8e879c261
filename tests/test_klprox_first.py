"""klprox's optimistic first steps (``FIRST_STEPS`` natural steps at ``FIRST_BETA`` from a cold start whose predictor
standard deviations are all at most ``FIRST_SD``; docs/klprox.md, section 4): fewer steps to the optimum where the
posterior is near the prior, the same optimum, a monotone ELBO, the previous trajectory elsewhere (gate, a given
``beta``), and one wasted trial when the first step is rejected."""
import numpy as np
import pytest

import varopt  # noqa: F401  (registers the solvers)
from varopt.formulations.bayes_glm import glm_program
from varopt.registry import get_solver
from varopt.solvers.klprox import solver as KS

from klprox_checks import assert_same_trajectory, history_objectives, logistic_program, solve_with

S = get_solver("klprox")


def _logistic(prior_var, seed=0, N=300, D=8):
    return logistic_program(prior_var, seed, N, D)


def _poisson(seed=0, N=60, D=4):
    # large counts: the undamped first step from the prior overshoots the log-rate (rejected by the ELBO test)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / 2
    y = rng.poisson(np.exp(3.0 + X @ rng.normal(size=D))).astype(float)
    return glm_program(X, y, "poisson", prior_var=0.05)



def _to(r, rel=1e-6):
    return next(i + 1 for i, f in enumerate(history_objectives(r)) if abs(f - r.objective) <= rel * abs(r.objective))


@pytest.fixture(autouse=True)
def _no_prior_step(monkeypatch):
    # the optimistic first steps alone: with PRIOR_STEP the undamped step from the prior is the start, in place of the
    # first of them (tests/test_klprox_prior_start.py)
    monkeypatch.setattr(KS, "PRIOR_STEP", 0)



@pytest.mark.parametrize("seed", [0, 1])
def test_near_the_prior_fewer_steps_same_optimum_monotone_elbo(monkeypatch, seed):
    p = _logistic(1e-3, seed)
    r, old = S.solve(p), solve_with(monkeypatch, S, p, {"FIRST_STEPS": 0})
    assert r.status == "converged" and old.status == "converged"
    assert r.history[0]["beta"] == KS.FIRST_BETA                 # the first step taken at FIRST_BETA, kept for the second
    assert _to(r) < _to(old) and r.iterations <= old.iterations
    assert abs(r.objective - old.objective) <= 1e-12 * abs(old.objective)
    assert np.allclose(r.x, old.x, rtol=0, atol=1e-8)
    assert np.all(np.diff(history_objectives(r)) <= r.info["rounding"])


@pytest.mark.parametrize("opts", [{"prior_var": 100.0}, {"prior_var": 1e-3, "beta": 1.0},
                                  {"prior_var": 1e-3, "beta_max": 10.0}, {"prior_var": 1e-3, "mean_step": "paper"}])
def test_the_previous_trajectory_outside_the_gate(monkeypatch, opts):
    # a wide prior (predictor sd > FIRST_SD at the start), a given beta or cap, the paper's step: no optimistic steps
    opts = dict(opts)
    p = _logistic(opts.pop("prior_var"))
    r, old = S.solve(p, **opts), solve_with(monkeypatch, S, p, {"FIRST_STEPS": 0}, **opts)
    assert_same_trajectory(r, old)


def test_a_warm_start_takes_its_own_step_size(monkeypatch):
    p = _logistic(1e-3)
    prev = S.solve(_logistic(2e-3))
    r, old = S.solve(p, warm_start=prev), solve_with(monkeypatch, S, p, {"FIRST_STEPS": 0}, warm_start=prev)
    assert_same_trajectory(r, old, rejected=False)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_rejected_first_trial_costs_one_evaluation(monkeypatch, seed):
    p = _poisson(seed)
    r, old = S.solve(p), solve_with(monkeypatch, S, p, {"FIRST_STEPS": 0})
    assert r.status == "converged" and old.status == "converged"
    # the trial at FIRST_BETA is rejected, then the run is the one without optimistic steps (from the beta option)
    assert r.info["rejected_steps"] == old.info["rejected_steps"] + 1
    assert_same_trajectory(r, old, rejected=False)
