"""Independent checks of klprox results shared by the klprox tests."""
from __future__ import annotations

import math

import numpy as np


def logistic_neg_elbo_200(view, r):
    """The -ELBO of a logistic model at the returned ``q`` (``r.x``, ``info['covariance']``), its likelihood by a
    200-node Gauss-Hermite rule on the returned predictor means and variances, and those variances recomputed from
    the covariance: ``(reference -ELBO, predictor variances A V A^T)``."""
    x, w = np.polynomial.hermite.hermgauss(200)
    mt, vt = r.info["predictor_mean"], r.info["predictor_var"]
    u = mt[:, None] + np.sqrt(2 * vt)[:, None] * x[None, :]
    lik = float(np.sum(np.logaddexp(0, u) @ w) / math.sqrt(math.pi)) + float(view.lin @ mt)
    V = r.info["covariance"]
    quad = 0.5 * r.x @ view.P @ r.x + 0.5 * np.sum(view.P * V) + view.c @ r.x + view.k
    ref = quad + lik - 0.5 * (view.D * (1 + math.log(2 * math.pi)) + np.linalg.slogdet(V)[1])
    A = view.A.toarray()
    return ref, np.einsum("ij,jk,ik->i", A, V, A)


def logistic_program(prior_var, seed=0, N=300, D=8):
    """A random Bayesian logistic regression (labels drawn from the model), prior ``N(0, prior_var I)``."""
    from scipy.special import expit
    from varopt.formulations.bayes_glm import glm_program
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = (rng.uniform(size=N) < expit(X @ rng.normal(size=D))).astype(float)
    return glm_program(X, y, "logistic", prior_var=prior_var)


def history_objectives(r):
    """The -ELBO of every recorded iterate of a klprox result."""
    return np.array([h["objective"] for h in r.history])


def solve_with(monkeypatch, solver, p, constants, **opts):
    """``solver.solve(p, **opts)`` with module constants of ``varopt.solvers.klprox.solver`` set for this solve only
    (``constants``: name -> value, e.g. a step rule switched off), for the trajectory the rule replaces."""
    from varopt.solvers.klprox import solver as KS
    with monkeypatch.context() as m:
        for name, value in constants.items():
            m.setattr(KS, name, value)
        return solver.solve(p, **opts)


def assert_same_trajectory(r, old, rejected=True):
    """Two klprox runs took the same iterates: equal -ELBO histories bit for bit (and equal rejected-step counts)."""
    assert np.array_equal(history_objectives(r), history_objectives(old))
    if rejected:
        assert r.info["rejected_steps"] == old.info["rejected_steps"]
