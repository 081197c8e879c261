"""klprox's step-size cap of the natural mean step (docs/klprox.md, section 4, damping-limited steps): raised only
while accepted steps are limited by the damping, never beyond a user's ``beta_max``, the ELBO never decreasing,
and the same optimum as the fixed cap of 10."""
import numpy as np
import pytest

import varopt  # noqa: F401  (registers the solvers)
from varopt.registry import get_solver

from klprox_checks import logistic_program

S = get_solver("klprox")


def _program(prior_var, seed=0, N=200, D=6):
    return logistic_program(prior_var, seed, N, D)


def _betas(r):
    return np.array([h["beta"] for h in r.history])


def _objectives(r):
    return np.array([h["objective"] for h in r.history])


@pytest.mark.parametrize("prior_var", [1e-3, 1e-2, 1.0, 100.0])
def test_raised_cap_keeps_the_optimum_and_a_monotone_elbo(prior_var):
    p = _program(prior_var)
    r = S.solve(p)
    ref = S.solve(p, beta_max=10.0)            # the fixed cap of the natural step: the rule before
    assert r.status == "converged" and ref.status == "converged"
    assert abs(r.objective - ref.objective) <= 1e-12 * abs(ref.objective)
    assert np.allclose(r.x, ref.x, rtol=0, atol=1e-7)
    assert np.all(np.diff(_objectives(r)) <= r.info["rounding"])
    assert np.all(_betas(ref) <= 10.0)


def test_cap_is_raised_where_the_posterior_is_near_the_prior():
    # a tight prior: the fixed-point iteration of the natural step contracts much faster than r = 1/(1 + 10)
    p = _program(1e-3)
    r, ref = S.solve(p), S.solve(p, beta_max=10.0)
    assert _betas(r).max() > 10.0
    assert r.iterations < ref.iterations


@pytest.mark.parametrize("opts", [dict(beta_max=5.0), dict(beta_max=10.0), dict(mean_step="paper"),
                                  dict(mean_step="natural", beta_max=3.0)])
def test_a_given_cap_or_the_paper_step_is_not_raised(opts):
    r = S.solve(_program(1e-3), **opts)
    assert r.status == "converged"
    cap = opts.get("beta_max", 1.0)
    assert _betas(r).max() <= cap
