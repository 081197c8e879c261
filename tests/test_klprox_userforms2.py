"""klprox on more models written the way users write them (bug hunt, branch hunta; docs/klprox.md).

Each test reproduces a failure found with a user-style model and checks the fixed behaviour against the independent
full-Gaussian VI reference of tests/klprox_reference.py (the model written out from the user's arrays).
"""
from __future__ import annotations

import functools

import cvxpy as cp
import numpy as np
import pytest
from scipy.special import expit

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import ModelStructureError
from klprox_reference import Model

RNG = np.random.default_rng(20261125)
N, D = 30, 3
X = RNG.normal(size=(N, D))
Y01 = (RNG.random(N) < expit(X @ np.array([1.0, -0.5, 0.3]))).astype(float)
YPM = 2.0 * Y01 - 1.0
DELTA = 2.0
TOL, FTOL = 1e-7, 1e-10


@functools.cache
def _ref_logit():
    return Model(np.eye(D) / DELTA).add("softplus", -YPM[:, None] * X).fit()


LOG_EXP_FORMS = {   # cp.log of a sum of exponentials, written from the formula (CVXPY's DCP rules reject them)
    "log(1 + exp(z))": lambda z: cp.sum(cp.log(1 + cp.exp(z))),
    "log(exp(0) + exp(z))": lambda z: cp.sum(cp.log(np.exp(0.0) + cp.exp(z))),
    "log(2 + 2 exp(z)) - N log 2": lambda z: cp.sum(cp.log(2 + 2 * cp.exp(z))) - N * np.log(2.0),
    "log(sum(exp([0, z_i]))) per row": lambda z: sum(cp.log(cp.sum(cp.exp(cp.hstack([0.0, z[i]])))) for i in range(N)),
}


@pytest.mark.parametrize("form", sorted(LOG_EXP_FORMS))
def test_cvxpy_log_of_a_sum_of_exponentials_is_the_logistic_likelihood(form):
    """``cp.log(1 + cp.exp(z))`` (the Pyomo form ``log(1 + exp(z))`` is accepted) was 'the argument of log must be
    affine'; it is the log-sum-exp group of ``cp.logistic(z)``."""
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(LOG_EXP_FORMS[form](-cp.multiply(YPM, X @ w)) + cp.sum_squares(w) / (2 * DELTA)))
    f = prob.solve(method="klprox")
    rm, rV, rf = _ref_logit()
    V = prob.varopt_result.info["covariance"]
    assert np.max(np.abs(w.value - rm)) <= TOL * max(1.0, np.max(np.abs(rm)))
    assert np.max(np.abs(V - rV)) <= TOL * np.max(np.abs(rV))
    assert abs(f - rf) <= FTOL * abs(rf)


@pytest.mark.parametrize("arg", [lambda w: w[0] + cp.exp(w[1]), lambda w: -1 + cp.exp(w[1]),
                                 lambda w: 1 - cp.exp(w[1]), lambda w: cp.square(w[0]) + 1],
                         ids=["linear part", "negative constant", "negative weight", "square"])
def test_cvxpy_log_of_other_forms_is_named(arg):
    w = cp.Variable(D, name="w")
    with pytest.raises(ModelStructureError, match=r"of `log` must be affine, or a constant >= 0 plus nonnegative"):
        cp.Problem(cp.Minimize(cp.log(arg(w)) + cp.sum_squares(w))).solve(method="klprox")


def test_entropy_term_is_printed_with_its_argument_in_parentheses():
    """``-cp.sum(cp.entr(w))`` was reported as "the term a^T w + b*log(a^T w + b)", which reads as
    ``a^T w + (b log(...))``; the argument of ``x log x`` is parenthesized."""
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) + cp.sum_squares(w) - cp.sum(cp.entr(w))))
    with pytest.raises(ModelStructureError, match=r"the term \(a\^T w \+ b\)\*log\(a\^T w \+ b\) has no Gaussian"):
        prob.solve(method="klprox")


def test_cvxpy_log1p_of_exp_and_a_vectorized_log_of_row_sums():
    """``cp.log1p(cp.exp(z))`` and ``cp.log(cp.sum(cp.exp(X @ W), axis=1))`` were refused like ``cp.log(1 + exp)``;
    they are the logistic and the softmax likelihoods (the same -ELBO and posterior as cp.logistic / log_sum_exp)."""
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.log1p(cp.exp(-cp.multiply(YPM, X @ w)))) + cp.sum_squares(w) / (2 * DELTA)))
    f = prob.solve(method="klprox")
    rm, rV, rf = _ref_logit()
    assert np.max(np.abs(w.value - rm)) <= TOL * max(1.0, np.max(np.abs(rm))) and abs(f - rf) <= FTOL * abs(rf)
    Y = np.eye(3)[np.arange(N) % 3]
    W = cp.Variable((D, 3))
    got = []
    for lse in (cp.sum(cp.log_sum_exp(X @ W, axis=1)), cp.sum(cp.log(cp.sum(cp.exp(X @ W), axis=1)))):
        p = cp.Problem(cp.Minimize(lse - cp.sum(cp.multiply(Y, X @ W)) + cp.sum_squares(W) / (2 * DELTA)))
        got.append((p.solve(method="klprox"), W.value.copy(), p.varopt_result.info["covariance"]))
    assert abs(got[0][0] - got[1][0]) <= 1e-12 * abs(got[0][0])
    assert np.max(np.abs(got[0][1] - got[1][1])) <= 1e-9 and np.max(np.abs(got[0][2] - got[1][2])) <= 1e-9
