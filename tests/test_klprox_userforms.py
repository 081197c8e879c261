"""klprox on models written the way users write them (issue 16; docs/klprox.md, section 6b).

Every CVXPY / Pyomo / CLI / estimator form below is checked against an independent reference written in plain
numpy/scipy (tests/klprox_reference.py): the full-Gaussian VI optimum of the user's negative log joint, its
expectations by Gauss-Hermite / Gauss-Legendre rules and closed forms, maximised by scipy's L-BFGS over a Cholesky
factor and polished by natural-gradient steps, or the exact conjugate posterior for Gaussian likelihoods. The model
``F(w)`` of each reference is written out here from the user's arrays, not read from varopt's compiled program.
Bad inputs must raise an error that names the offending thing.
"""
from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest
import scipy.sparse as sp
from scipy import integrate
from scipy.special import expit

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import InputDataError, InvalidOptionError, ModelStructureError
from klprox_reference import Model, conjugate

RNG = np.random.default_rng(20261124)
N, D = 40, 3
X = RNG.normal(size=(N, D))
Y01 = (RNG.random(N) < expit(X @ np.array([1.0, -0.5, 0.3]))).astype(float)
YPM = 2.0 * Y01 - 1.0
YC = RNG.poisson(np.exp(0.3 * X @ np.array([1.0, -0.5, 0.3]))).astype(float)
YR = X @ np.array([1.0, -0.5, 0.3]) + 0.5 * RNG.laplace(size=N)
SW = RNG.uniform(0.5, 2.0, N)
DELTA = 2.0
PINV = (lambda Q: Q @ Q.T + 0.5 * np.eye(D))(RNG.normal(size=(D, D)))
TOL = 1e-7            # posterior mean and covariance, relative to their largest entry (the solver's gtol is 1e-8)
FTOL = 1e-10          # -ELBO, relative


def _check(m, V, f, ref, tol=TOL, ftol=FTOL):
    rm, rV, rf = ref
    m, V = np.asarray(m, float).ravel(), np.asarray(V)
    assert V.shape == rV.shape
    assert np.max(np.abs(m - rm)) <= tol * max(1.0, np.max(np.abs(rm))), (m, rm)
    assert np.max(np.abs(V - rV)) <= tol * np.max(np.abs(rV)), (V, rV)
    assert abs(f - rf) <= ftol * max(1.0, abs(rf)), (f, rf)


def _logistic_model(F, s, P, c=None, k=0.0, coef=None, offset=None):
    """``sum coef_n softplus(-s_n (F_n w + offset_n)) + 1/2 w^T P w + c^T w + k``."""
    M = Model(P, c, k)
    M.add("softplus", -s[:, None] * F, None if offset is None else -s * offset, coef)
    return M


@functools.lru_cache(maxsize=None)
def ref_logit():
    """The reference posterior of the basic model: +-1 labels YPM, features X, prior N(0, DELTA I)."""
    return _logistic_model(X, YPM, np.eye(D) / DELTA).fit()


def _cvx(objective, *variables, **opts):
    prob = cp.Problem(objective)
    f = prob.solve(method="klprox", **opts)
    m = np.concatenate([np.atleast_1d(np.asarray(v.value, float)).ravel() for v in variables])
    return m, prob.varopt_result.info["covariance"], f, prob


# --- CVXPY: one logistic posterior, many ways of writing it --------------------------------------------------

def _prior(w):
    return cp.sum_squares(w) / (2 * DELTA)


LOGISTIC_FORMS = {
    "pm1 labels": lambda w: cp.sum(cp.logistic(-cp.multiply(YPM, X @ w))) + _prior(w),
    "0/1 labels, -y @ (X @ w)": lambda w: cp.sum(cp.logistic(X @ w)) - Y01 @ (X @ w) + _prior(w),
    "y @ logistic(-z) + (1 - y) @ logistic(z)":
        lambda w: Y01 @ cp.logistic(-(X @ w)) + (1 - Y01) @ cp.logistic(X @ w) + _prior(w),
    "int 0/1 labels": lambda w: cp.sum(cp.logistic(X @ w)) - Y01.astype(int) @ (X @ w) + _prior(w),
    "norm(w, 2)**2 prior": lambda w: cp.sum(cp.logistic(-cp.multiply(YPM, X @ w))) + cp.norm(w, 2) ** 2 / (2 * DELTA),
    "sum(square), power, **2 priors split": lambda w: (cp.sum(cp.logistic(-cp.multiply(YPM, X @ w)))
                                                       + cp.sum(cp.square(w[:1])) / (2 * DELTA)
                                                       + cp.sum(cp.power(w[1:2], 2)) / (2 * DELTA)
                                                       + w[2] ** 2 / (2 * DELTA)),
    "terms split across sums": lambda w: (cp.sum(cp.logistic(-cp.multiply(YPM[:15], X[:15] @ w)))
                                          + cp.sum(cp.logistic(-cp.multiply(YPM[15:], X[15:] @ w))) + _prior(w)),
    "python sum of scalar terms": lambda w: sum(cp.logistic(-YPM[n] * (X[n] @ w)) for n in range(N)) + _prior(w),
    "X scipy.sparse CSR": lambda w: cp.sum(cp.logistic(-cp.multiply(YPM, sp.csr_matrix(X) @ w))) + _prior(w),
    "X scipy.sparse CSC": lambda w: cp.sum(cp.logistic(-cp.multiply(YPM, sp.csc_matrix(X) @ w))) + _prior(w),
    "X cp.Constant": lambda w: cp.sum(cp.logistic(-cp.multiply(YPM, cp.Constant(X) @ w))) + _prior(w),
    "logistic(.) @ ones": lambda w: cp.logistic(-cp.multiply(YPM, X @ w)) @ np.ones(N) + _prior(w),
    "log_sum_exp(vstack(0, z), axis=0)":
        lambda w: cp.sum(cp.log_sum_exp(cp.vstack([np.zeros(N), -cp.multiply(YPM, X @ w)]), axis=0)) + _prior(w),
    "prior sum_squares(L^T w)": lambda w: (cp.sum(cp.logistic(-cp.multiply(YPM, X @ w)))
                                           + 0.5 * cp.sum_squares(np.eye(D) / math.sqrt(DELTA) @ w)),
    "prior quad_form(w, sparse)": lambda w: (cp.sum(cp.logistic(-cp.multiply(YPM, X @ w)))
                                             + 0.5 * cp.quad_form(w, sp.csr_matrix(np.eye(D) / DELTA))),
    "N * mean(logistic)": lambda w: N * cp.mean(cp.logistic(-cp.multiply(YPM, X @ w))) + _prior(w),
    "float32 data": lambda w: (cp.sum(cp.logistic(-cp.multiply(YPM.astype(np.float32), X.astype(np.float64) @ w)))
                               + _prior(w)),
}


@pytest.mark.parametrize("form", sorted(LOGISTIC_FORMS))
def test_cvxpy_logistic_forms_give_the_reference_posterior(form):
    w = cp.Variable(D, name="w")
    m, V, f, prob = _cvx(cp.Minimize(LOGISTIC_FORMS[form](w)), w)
    _check(m, V, f, ref_logit())
    assert prob.varopt_result.names == [f"w[{j}]" for j in range(D)]


def test_cvxpy_column_variable_and_sum_over_an_axis():
    w = cp.Variable((D, 1))
    z = cp.multiply(YPM[:, None], X @ w)
    _check(*_cvx(cp.Minimize(cp.sum(cp.logistic(-z), axis=0)[0] + _prior(w)), w)[:3], ref_logit())


def test_cvxpy_parameters_for_the_data_are_read_at_each_solve():
    w = cp.Variable(D)
    yp, Xp = cp.Parameter(N), cp.Parameter((N, D))
    yp.value, Xp.value = YPM, X
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(yp, Xp @ w))) + _prior(w)))
    f = prob.solve(method="klprox")
    _check(w.value, prob.varopt_result.info["covariance"], f, ref_logit())
    yp.value = -YPM
    f = prob.solve(method="klprox")
    _check(w.value, prob.varopt_result.info["covariance"], f,
           _logistic_model(X, -YPM, np.eye(D) / DELTA).fit())


def test_cvxpy_maximize_the_log_joint_returns_the_elbo():
    """``Maximize(-nlj)``: the same posterior; ``prob.solve`` returns the ELBO (the user's sense), ``prob.value`` the
    user's objective at the posterior mean."""
    w = cp.Variable(D)
    m, V, f, prob = _cvx(cp.Maximize(-LOGISTIC_FORMS["pm1 labels"](w)), w)
    _check(m, V, -f, ref_logit())
    assert prob.varopt_result.objective == f
    own = -(np.sum(np.logaddexp(0, -YPM * (X @ m))) + m @ m / (2 * DELTA))
    assert abs(prob.value - own) <= 1e-12 * abs(own)


# --- CVXPY: other priors, weights, scalings -------------------------------------------------------------------

def test_cvxpy_intercept_variable_with_its_own_prior():
    w, b = cp.Variable(D), cp.Variable()
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(YPM, X @ w + b))) + _prior(w) + cp.square(b) / 20),
                      w, b)
    F = np.hstack([X, np.ones((N, 1))])
    _check(m, V, f, _logistic_model(F, YPM, np.diag([1 / DELTA] * D + [0.1])).fit())


def test_cvxpy_intercept_by_hstack_and_a_weighted_prior():
    w, b = cp.Variable(D), cp.Variable()
    th = cp.hstack([w, b])
    pw = np.array([1 / DELTA] * D + [0.01])
    F = np.hstack([X, np.ones((N, 1))])
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(YPM, F @ th)))
                                  + 0.5 * cp.sum(cp.multiply(pw, cp.square(th)))), w, b)
    _check(m, V, f, _logistic_model(F, YPM, np.diag(pw)).fit())


def test_cvxpy_dense_quad_form_prior_and_a_joint_prior_over_two_variables():
    w = cp.Variable(D)
    _check(*_cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(YPM, X @ w))) + 0.5 * cp.quad_form(w, PINV)), w)[:3],
           _logistic_model(X, YPM, PINV).fit())
    u, v = cp.Variable(2), cp.Variable()
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(YPM, X[:, :2] @ u + X[:, 2] * v)))
                                  + 0.5 * cp.quad_form(cp.hstack([u, v]), PINV)), u, v)
    _check(m, V, f, _logistic_model(X, YPM, PINV).fit())


def test_cvxpy_prior_with_a_mean():
    mu0 = np.array([0.5, 0.0, -1.0])
    w = cp.Variable(D)
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(YPM, X @ w))) + cp.sum_squares(w - mu0) / (2 * DELTA)), w)
    _check(m, V, f, _logistic_model(X, YPM, np.eye(D) / DELTA, -mu0 / DELTA, mu0 @ mu0 / (2 * DELTA)).fit())


def test_cvxpy_parameter_prior_and_temperature_resolved():
    w = cp.Variable(D)
    lam, al = cp.Parameter(nonneg=True), cp.Parameter(nonneg=True)
    prob = cp.Problem(cp.Minimize(al * cp.sum(cp.logistic(-cp.multiply(YPM, X @ w))) + lam * cp.sum_squares(w)))
    for lv, av in ((0.3, 1.0), (2.0, 0.5)):
        lam.value, al.value = lv, av
        f = prob.solve(method="klprox")
        _check(w.value, prob.varopt_result.info["covariance"], f,
               _logistic_model(X, YPM, 2 * lv * np.eye(D), coef=np.full(N, av)).fit())
    f = prob.solve(method="klprox", warm_start=True)          # CVXPY's own warm-start keyword
    _check(w.value, prob.varopt_result.info["covariance"], f,
           _logistic_model(X, YPM, 4.0 * np.eye(D), coef=np.full(N, 0.5)).fit())


def test_cvxpy_sample_weights_with_zeros_and_a_scaled_objective():
    w = cp.Variable(D)
    s0 = np.where(np.arange(N) % 5 == 0, 0, 1 + np.arange(N) % 3)        # integer weights, some 0
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.multiply(s0, cp.logistic(-cp.multiply(YPM, X @ w)))) + _prior(w)), w)
    _check(m, V, f, _logistic_model(X, YPM, np.eye(D) / DELTA, coef=s0.astype(float)).fit())
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.multiply(SW, cp.logistic(-cp.multiply(YPM, X @ w)))) + _prior(w)), w)
    _check(m, V, f, _logistic_model(X, YPM, np.eye(D) / DELTA, coef=SW).fit())
    # the whole negative log joint divided by N is another (tempered) model: the reference divides it too
    m, V, f, _ = _cvx(cp.Minimize(LOGISTIC_FORMS["pm1 labels"](w) / N), w)
    _check(m, V, f, _logistic_model(X, YPM, np.eye(D) / DELTA / N, coef=np.full(N, 1 / N)).fit())


def test_cvxpy_more_variables_than_rows_duplicated_columns_and_empty_feature_rows():
    rng = np.random.default_rng(5)
    Xw, yw = rng.normal(size=(8, 20)), np.where(rng.random(8) < 0.5, 1.0, -1.0)
    w = cp.Variable(20)
    m, V, f, prob = _cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(yw, Xw @ w))) + cp.sum_squares(w) / 2), w)
    assert prob.varopt_result.info["parameterization"] == "dual"
    _check(m, V, f, _logistic_model(Xw, yw, np.eye(20)).fit())
    Xd = np.hstack([X, X[:, :1]])                      # rank-deficient design
    w4 = cp.Variable(D + 1)
    _check(*_cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(YPM, Xd @ w4))) + _prior(w4)), w4)[:3],
           _logistic_model(Xd, YPM, np.eye(D + 1) / DELTA).fit())
    Xz = X.copy()
    Xz[[3, 7, 11]] = 0.0                               # rows without any feature (constant terms)
    w = cp.Variable(D)
    _check(*_cvx(cp.Minimize(cp.sum(cp.logistic(Xz @ w + 0.3)) - Y01 @ (Xz @ w + 0.3) + _prior(w)), w)[:3],
           _logistic_model(Xz, YPM, np.eye(D) / DELTA, offset=np.full(N, 0.3)).fit())


# --- CVXPY: Poisson, Laplace, Gaussian, mixed -------------------------------------------------------------------

def test_cvxpy_poisson_with_and_without_exposure():
    w = cp.Variable(D)
    M = Model(np.eye(D) / DELTA, -X.T @ YC)
    M.add("exp", X)
    _check(*_cvx(cp.Minimize(cp.sum(cp.exp(X @ w) - cp.multiply(YC, X @ w)) + _prior(w)), w)[:3], M.fit())
    off = np.log(np.linspace(0.5, 2.0, N))
    eta = X @ w + off
    M = Model(np.eye(D) / DELTA, -X.T @ YC, -YC @ off)
    M.add("exp", X, off)
    _check(*_cvx(cp.Minimize(cp.sum(cp.exp(eta)) - YC @ eta + _prior(w)), w)[:3], M.fit())


@pytest.mark.parametrize("form", ["sum(abs)", "norm1", "norm(., 1)"])
def test_cvxpy_laplace_forms(form):
    w = cp.Variable(D)
    loss = {"sum(abs)": cp.sum(cp.abs(YR - X @ w)), "norm1": cp.norm1(YR - X @ w), "norm(., 1)": cp.norm(X @ w - YR, 1)}
    M = Model(np.eye(D) / DELTA)
    M.add("abs", -X, YR, np.full(N, 1 / 0.7))
    _check(*_cvx(cp.Minimize(loss[form] / 0.7 + _prior(w)), w)[:3], M.fit())


@pytest.mark.parametrize("form", ["sum_squares(y - Xw)", "norm(Xw - y, 2)**2", "quad_over_lin"])
def test_cvxpy_gaussian_forms_are_the_exact_conjugate_posterior(form):
    s2 = 0.3
    w = cp.Variable(D)
    loss = {"sum_squares(y - Xw)": cp.sum_squares(YR - X @ w), "norm(Xw - y, 2)**2": cp.norm(X @ w - YR, 2) ** 2,
            "quad_over_lin": cp.quad_over_lin(X @ w - YR, 1.0)}
    m, V, f, _ = _cvx(cp.Minimize(loss[form] / (2 * s2) + _prior(w)), w)
    # the exact posterior, and -ELBO = -log of the integral of exp(-F): the exact evidence of the model as written
    _check(m, V, f, conjugate(X.T @ X / s2 + np.eye(D) / DELTA, -X.T @ YR / s2, YR @ YR / (2 * s2)),
           tol=1e-10, ftol=1e-12)


def test_cvxpy_mixed_families_in_one_model():
    s2 = 0.5
    w = cp.Variable(D)
    obj = (cp.sum(cp.logistic(-cp.multiply(YPM[:10], X[:10] @ w)))
           + cp.sum(cp.exp(X[10:20] @ w) - cp.multiply(YC[10:20], X[10:20] @ w))
           + cp.sum(cp.abs(YR[20:30] - X[20:30] @ w)) + cp.sum_squares(YR[30:] - X[30:] @ w) / (2 * s2) + _prior(w))
    M = Model(X[30:].T @ X[30:] / s2 + np.eye(D) / DELTA, -X[30:].T @ YR[30:] / s2 - X[10:20].T @ YC[10:20],
              YR[30:] @ YR[30:] / (2 * s2))
    M.add("softplus", -YPM[:10, None] * X[:10]).add("exp", X[10:20]).add("abs", -X[20:30], YR[20:30])
    _check(*_cvx(cp.Minimize(obj), w)[:3], M.fit())


def test_cvxpy_gaussian_process_forms():
    """GP classification and Laplace GP regression written with the latent values as variables and the prior
    ``quad_form(f, Kinv)``, and the whitened form ``f = L v``."""
    n = 15
    rng = np.random.default_rng(8)
    z = np.sort(rng.uniform(-3, 3, n))
    K = np.exp(-0.5 * (z[:, None] - z[None, :]) ** 2) + 1e-3 * np.eye(n)     # condition number ~1e4
    Kinv = np.linalg.inv(K)
    Kinv = 0.5 * (Kinv + Kinv.T)
    yy = np.where(np.sin(z) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    yl = np.sin(z) + 0.2 * rng.laplace(size=n)
    f = cp.Variable(n)
    M = Model(Kinv)
    _check(*_cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(yy, f))) + 0.5 * cp.quad_form(f, Kinv)), f)[:3],
           M.add("softplus", -np.diag(yy)).fit(), tol=1e-6)
    M = Model(Kinv)
    _check(*_cvx(cp.Minimize(cp.sum(cp.abs(yl - f)) / 0.3 + 0.5 * cp.quad_form(f, Kinv)), f)[:3],
           M.add("abs", -np.eye(n), yl, np.full(n, 1 / 0.3)).fit(), tol=1e-6)
    L = np.linalg.cholesky(K)
    v = cp.Variable(n)
    M = Model(np.eye(n))
    _check(*_cvx(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(yy, L @ v))) + cp.sum_squares(v) / 2), v)[:3],
           M.add("softplus", -yy[:, None] * L).fit())


# --- multinomial ----------------------------------------------------------------------------------------------

K3, NM = 3, 30
FM = RNG.normal(size=(NM, 2))
LAB = RNG.integers(0, K3, NM)
Y1H = np.eye(K3)[LAB]


def _softmax_rows(F, K, cols):
    """``A[n, k]``: the row of ``u_nk = F_n W[:, k]`` over the variables in the result's (row-major) order;
    ``cols[i][k]`` is the position of ``W[i, k]``."""
    A = np.zeros((F.shape[0], K, max(c for r in cols for c in r if c is not None) + 1))
    for i in range(F.shape[1]):
        for k in range(K):
            if cols[i][k] is not None:
                A[:, k, cols[i][k]] = F[:, i]
    return A


def _multinomial_model(A, Y, P, coef=None, nodes=28):
    M = Model(P, -np.einsum("nk,nkd->d", Y * (1.0 if coef is None else coef[:, None]), A), nodes_soft=nodes)
    return M.add("softmax", A, None, coef)


@functools.lru_cache(maxsize=None)
def ref_multinomial():
    A = _softmax_rows(FM, K3, [[i * K3 + k for k in range(K3)] for i in range(2)])
    return _multinomial_model(A, Y1H, np.eye(2 * K3) / DELTA).fit()


def _at_optimum(M, m, V, f, tol=1e-6, ftol=1e-9):
    """The solver's ``q`` is the reference's optimum: the optimum's conditions hold there under the reference's
    quadrature (the ELBO is concave in the mean and the Cholesky factor: stationary = optimal), and the reported
    -ELBO is the reference's -ELBO at that ``q``."""
    gm, gV = M.stationarity(np.ravel(m), V)
    assert gm <= tol and gV <= tol * np.max(np.abs(np.linalg.inv(V))), (gm, gV)
    ref = M.neg_elbo(np.ravel(m), V)
    assert abs(f - ref) <= ftol * abs(ref), (f, ref)


def test_cvxpy_multinomial_log_sum_exp_rows():
    W = cp.Variable((2, K3))
    m, V, f, prob = _cvx(cp.Minimize(cp.sum(cp.log_sum_exp(FM @ W, axis=1)) - cp.sum(cp.multiply(Y1H, FM @ W))
                                     + cp.sum_squares(W) / (2 * DELTA)), W)
    # the covariance follows the result's names: W's entries in row-major order, as W.value.ravel()
    assert prob.varopt_result.names[:2] == [f"{W.name()}[0,0]", f"{W.name()}[0,1]"]
    _check(m, V, f, ref_multinomial(), tol=1e-6, ftol=1e-9)


def test_cvxpy_multinomial_other_layouts():
    A = _softmax_rows(FM, K3, [[i * K3 + k for k in range(K3)] for i in range(2)])
    M = _multinomial_model(A, Y1H, np.eye(2 * K3) / DELTA)
    W = cp.Variable((2, K3))
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.log_sum_exp(FM @ W, axis=1)) - cp.trace(Y1H.T @ (FM @ W))
                                  + cp.sum_squares(W) / (2 * DELTA)), W)
    _at_optimum(M, m, V, f)
    Wt = cp.Variable((K3, 2))                          # classes by rows, log-sum-exp over axis 0
    At = _softmax_rows(FM, K3, [[k * 2 + i for k in range(K3)] for i in range(2)])
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.log_sum_exp(Wt @ FM.T, axis=0)) - cp.sum(cp.multiply(Y1H.T, Wt @ FM.T))
                                  + cp.sum_squares(Wt) / (2 * DELTA)), Wt)
    _at_optimum(_multinomial_model(At, Y1H, np.eye(2 * K3) / DELTA), m, V, f)
    W2 = cp.Variable((2, K3 - 1))                     # class 0 the reference: its predictor fixed at 0
    Z = cp.hstack([np.zeros((NM, 1)), FM @ W2])
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.log_sum_exp(Z, axis=1)) - cp.sum(cp.multiply(Y1H, Z))
                                  + cp.sum_squares(W2) / (2 * DELTA)), W2)
    A2 = _softmax_rows(FM, K3, [[None] + [i * (K3 - 1) + k - 1 for k in range(1, K3)] for i in range(2)])
    _at_optimum(_multinomial_model(A2, Y1H, np.eye(2 * (K3 - 1)) / DELTA), m, V, f)
    sw = np.linspace(0.5, 2.0, NM)                   # sample weights
    m, V, f, _ = _cvx(cp.Minimize(sw @ cp.log_sum_exp(FM @ W, axis=1) - cp.sum(cp.multiply(sw[:, None] * Y1H, FM @ W))
                                  + cp.sum_squares(W) / (2 * DELTA)), W)
    _at_optimum(_multinomial_model(A, Y1H, np.eye(2 * K3) / DELTA, coef=sw), m, V, f)


def test_cvxpy_multinomial_four_classes_with_intercepts():
    K, n = 4, 25
    rng = np.random.default_rng(3)
    F, Y = rng.normal(size=(n, 2)), np.eye(K)[rng.integers(0, K, n)]
    W, b = cp.Variable((2, K)), cp.Variable(K)
    U = F @ W + np.ones((n, 1)) @ cp.reshape(b, (1, K), order="C")
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.log_sum_exp(U, axis=1)) - cp.sum(cp.multiply(Y, U))
                                  + cp.sum_squares(W) / (2 * DELTA) + cp.sum_squares(b) / 20), W, b)
    A = _softmax_rows(np.hstack([F, np.ones((n, 1))]), K, [[i * K + k for k in range(K)] for i in range(3)])
    _at_optimum(_multinomial_model(A, Y, np.diag([1 / DELTA] * 2 * K + [0.1] * K), nodes=32), m, V, f)


# --- Pyomo --------------------------------------------------------------------------------------------------

SF = pyo.SolverFactory("klprox")


def _values(var):
    return np.array([pyo.value(var[j]) for j in var.index_set()])


def test_pyomo_rangeset_params_and_log1pexp():
    m = pyo.ConcreteModel()
    m.J, m.I = pyo.RangeSet(0, D - 1), pyo.RangeSet(0, N - 1)
    m.X = pyo.Param(m.I, m.J, initialize={(i, j): X[i, j] for i in range(N) for j in range(D)})
    m.y = pyo.Param(m.I, initialize={i: YPM[i] for i in range(N)})
    m.w = pyo.Var(m.J)
    m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-m.y[i] * sum(m.X[i, j] * m.w[j] for j in m.J))) for i in m.I)
                          + sum(m.w[j] ** 2 for j in m.J) / (2 * DELTA))
    res = SF.solve(m)
    r = res.varopt_result
    assert res.solver.status == pyo.SolverStatus.ok
    assert res.solver.termination_condition == pyo.TerminationCondition.locallyOptimal and r.status == "converged"
    _check(_values(m.w), r.info["covariance"], r.objective, ref_logit())
    mean = _values(m.w)        # the loaded point is the posterior mean, and the model evaluates there
    own = np.sum(np.logaddexp(0, -YPM * (X @ mean))) + mean @ mean / (2 * DELTA)
    assert abs(pyo.value(m.obj) - own) <= 1e-12 * own


def test_pyomo_named_set_mutable_params_expressions_and_maximize():
    names = ["a", "b", "c"]
    m = pyo.ConcreteModel()
    m.F = pyo.Set(initialize=names, ordered=True)
    m.I = pyo.Set(initialize=list(range(N)))
    m.X = pyo.Param(m.I, m.F, initialize={(i, f): X[i, k] for i in range(N) for k, f in enumerate(names)}, mutable=True)
    m.y = pyo.Param(m.I, initialize={i: Y01[i] for i in range(N)}, mutable=True)
    m.delta = pyo.Param(initialize=DELTA, mutable=True)
    m.w = pyo.Var(m.F, initialize=0.1)
    m.eta = pyo.Expression(m.I, rule=lambda m, i: sum(m.X[i, f] * m.w[f] for f in m.F))
    m.loglik = pyo.Expression(expr=sum(m.y[i] * m.eta[i] - pyo.log(1 + pyo.exp(m.eta[i])) for i in m.I))
    m.logprior = pyo.Expression(expr=-sum(m.w[f] ** 2 for f in m.F) / (2 * m.delta))
    m.obj = pyo.Objective(expr=m.loglik + m.logprior, sense=pyo.maximize)
    r = SF.solve(m).varopt_result
    assert r.names == [f"w[{f}]" for f in names]
    _check(_values(m.w), r.info["covariance"], -r.objective, ref_logit())     # maximized: the objective is the ELBO
    m.delta = 0.5                                      # a mutable parameter changed: the next solve reads it
    r = SF.solve(m).varopt_result
    _check(_values(m.w), r.info["covariance"], -r.objective, _logistic_model(X, YPM, 2.0 * np.eye(D)).fit())


def test_pyomo_fixed_variable_and_initialize():
    m = pyo.ConcreteModel()
    m.J = pyo.RangeSet(0, D - 1)
    m.w = pyo.Var(m.J, initialize=lambda m, j: 0.2 * j)
    m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-YPM[i] * sum(X[i, j] * m.w[j] for j in m.J))) for i in range(N))
                          + sum(m.w[j] ** 2 for j in m.J) / (2 * DELTA))
    m.w[0].fix(0.3)
    r = SF.solve(m).varopt_result
    assert r.names == ["w[1]", "w[2]"] and pyo.value(m.w[0]) == 0.3 and m.w[0].fixed
    ref = _logistic_model(X[:, 1:], YPM, np.eye(D - 1) / DELTA, k=0.09 / (2 * DELTA), offset=0.3 * X[:, 0]).fit()
    _check(_values(m.w)[1:], r.info["covariance"], r.objective, ref)


def test_pyomo_poisson_laplace_and_gaussian_terms():
    m = pyo.ConcreteModel()
    m.J = pyo.RangeSet(0, D - 1)
    m.w = pyo.Var(m.J)
    eta = [sum(X[i, j] * m.w[j] for j in m.J) for i in range(N)]
    prior = sum(m.w[j] ** 2 for j in m.J) / (2 * DELTA)
    m.pois = pyo.Objective(expr=sum(pyo.exp(eta[i]) - YC[i] * eta[i] for i in range(N)) + prior)
    r = SF.solve(m).varopt_result
    M = Model(np.eye(D) / DELTA, -X.T @ YC)
    _check(_values(m.w), r.info["covariance"], r.objective, M.add("exp", X).fit())
    m.pois.deactivate()
    m.lap = pyo.Objective(expr=sum(abs(YR[i] - eta[i]) for i in range(N)) / 0.7 + prior)
    r = SF.solve(m).varopt_result
    M = Model(np.eye(D) / DELTA)
    _check(_values(m.w), r.info["covariance"], r.objective, M.add("abs", -X, YR, np.full(N, 1 / 0.7)).fit())
    m.lap.deactivate()
    m.gauss = pyo.Objective(expr=sum((YR[i] - eta[i]) ** 2 for i in range(N)) / (2 * 0.3) + prior)
    r = SF.solve(m).varopt_result
    _check(_values(m.w), r.info["covariance"], r.objective,
           conjugate(X.T @ X / 0.3 + np.eye(D) / DELTA, -X.T @ YR / 0.3, YR @ YR / 0.6), tol=1e-10, ftol=1e-12)


def test_pyomo_block_tuple_index_quicksum_sum_product_and_sparse_param():
    keys = [("x", 1), ("x", 2), ("z", 1)]
    Xz = np.where(X > -0.5, X, 0.0)
    m = pyo.ConcreteModel()
    m.J = pyo.Set(initialize=keys, dimen=2)
    m.b = pyo.Block()
    m.b.w = pyo.Var(m.J, domain=pyo.Reals, bounds=(None, None))
    m.unused = pyo.Var()
    m.X = pyo.Param(range(N), m.J, default=0.0,
                    initialize={(i, k): X[i, j] for i in range(N) for j, k in enumerate(keys) if X[i, j] > -0.5})
    z = {i: pyo.quicksum(m.X[i, k] * m.b.w[k] for k in m.J) for i in range(N)}
    m.obj = pyo.Objective(expr=pyo.quicksum(pyo.log(pyo.exp(0) + pyo.exp(-YPM[i] * z[i])) for i in range(N))
                          + pyo.sum_product(m.b.w, m.b.w) / (2 * DELTA))
    r = SF.solve(m).varopt_result
    assert r.names == ["b.w[x,1]", "b.w[x,2]", "b.w[z,1]"]
    _check(_values(m.b.w), r.info["covariance"], r.objective, _logistic_model(Xz, YPM, np.eye(D) / DELTA).fit())
    m.obj.deactivate()                  # log(2 + 2 exp(z)) = log 2 + softplus(z)
    m.obj2 = pyo.Objective(expr=sum(pyo.log(2 + 2 * pyo.exp(-YPM[i] * z[i])) for i in range(N))
                           + sum(m.b.w[k] ** 2 for k in m.J) / (2 * DELTA))
    r = SF.solve(m).varopt_result
    _check(_values(m.b.w), r.info["covariance"], r.objective,
           _logistic_model(Xz, YPM, np.eye(D) / DELTA, k=N * math.log(2)).fit())


def test_pyomo_param_matrix_prior_and_a_fixed_variable_inside_exp():
    m = pyo.ConcreteModel()
    m.J = pyo.RangeSet(0, D - 1)
    m.P = pyo.Param(m.J, m.J, initialize={(i, j): PINV[i, j] for i in range(D) for j in range(D)})
    m.w = pyo.Var(m.J, initialize={0: 0.1, 1: -0.2, 2: 0.3})
    m.t = pyo.Var(initialize=0.2)
    m.t.fix()
    eta = [sum(X[i, j] * m.w[j] for j in m.J) + m.t for i in range(N)]
    m.obj = pyo.Objective(expr=sum(pyo.exp(eta[i]) - YC[i] * eta[i] for i in range(N))
                          + 0.5 * sum(m.w[i] * m.P[i, j] * m.w[j] for i in m.J for j in m.J))
    r = SF.solve(m).varopt_result
    M = Model(PINV, -X.T @ YC, -0.2 * YC.sum())
    _check(_values(m.w), r.info["covariance"], r.objective, M.add("exp", X, 0.2).fit())


def test_pyomo_and_cvxpy_give_the_same_posterior():
    """Issue 16's acceptance: one model (sample weights, an intercept with its own prior) in both front ends."""
    m = pyo.ConcreteModel()
    m.J = pyo.RangeSet(0, D - 1)
    m.w, m.b = pyo.Var(m.J), pyo.Var(initialize=0.0)
    m.obj = pyo.Objective(expr=sum(SW[i] * pyo.log(1 + pyo.exp(-YPM[i] * (sum(X[i, j] * m.w[j] for j in m.J) + m.b)))
                                   for i in range(N)) + sum(m.w[j] ** 2 for j in m.J) / (2 * DELTA) + m.b ** 2 / 20)
    r = SF.solve(m).varopt_result
    w, b = cp.Variable(D), cp.Variable()
    mc, Vc, fc, _ = _cvx(cp.Minimize(cp.sum(cp.multiply(SW, cp.logistic(-cp.multiply(YPM, X @ w + b))))
                                     + _prior(w) + cp.square(b) / 20), w, b)
    mp = np.append(_values(m.w), pyo.value(m.b))
    _check(mp, r.info["covariance"], r.objective, (mc, Vc, fc), tol=1e-9, ftol=1e-12)
    F = np.hstack([X, np.ones((N, 1))])
    _check(mp, r.info["covariance"], r.objective,
           _logistic_model(F, YPM, np.diag([1 / DELTA] * D + [0.1]), coef=SW).fit())


def test_pyomo_multinomial():
    m = pyo.ConcreteModel()
    m.I, m.K = pyo.RangeSet(0, 1), pyo.RangeSet(0, K3 - 1)
    m.W = pyo.Var(m.I, m.K)
    f = {(n, k): sum(FM[n, i] * m.W[i, k] for i in m.I) for n in range(NM) for k in m.K}
    m.obj = pyo.Objective(expr=sum(pyo.log(sum(pyo.exp(f[n, k]) for k in m.K)) - f[n, int(LAB[n])] for n in range(NM))
                          + sum(m.W[i, k] ** 2 for i in m.I for k in m.K) / (2 * DELTA))
    r = SF.solve(m).varopt_result
    _check(_values(m.W), r.info["covariance"], r.objective, ref_multinomial(), tol=1e-6, ftol=1e-9)


# --- the result object --------------------------------------------------------------------------------------

def test_cvxpy_result_object():
    w = cp.Variable(D)
    m, V, f, prob = _cvx(cp.Minimize(LOGISTIC_FORMS["pm1 labels"](w)), w)
    r = prob.varopt_result
    assert r.status == "converged" and prob.status in ("optimal", "optimal_inaccurate")
    assert V.shape == (D, D) and np.array_equal(V, V.T) and np.linalg.eigvalsh(V).min() > 0
    assert r.objective == f == r.info["neg_elbo"]
    Xn = np.random.default_rng(9).normal(size=(5, D))
    rm, rV, _ = ref_logit()
    for A, b in ((Xn, None), (sp.csr_matrix(Xn), np.ones(5))):
        mt, vt = r.info["predict"](A) if b is None else r.info["predict"](A, b)
        off = 0.0 if b is None else 1.0
        np.testing.assert_allclose(mt, Xn @ rm + off, rtol=0, atol=1e-7)
        np.testing.assert_allclose(vt, np.einsum("nd,de,ne->n", Xn, rV, Xn), rtol=1e-7)
    own = np.sum(np.logaddexp(0, -YPM * (X @ m))) + m @ m / (2 * DELTA)   # prob.value: the model at the mean
    assert abs(prob.value - own) <= 1e-12 * own and prob.value < f
    with pytest.warns(UserWarning, match="inaccurate"):        # CVXPY's warning for a stopped solve
        prob.solve(method="klprox", max_iter=2)
    assert prob.varopt_result.status == "iteration_limit" and prob.status == "user_limit"
    assert w.value is not None and np.all(np.isfinite(w.value))


def test_cli_json_posterior(tmp_path):
    model = tmp_path / "blr.py"
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", YPM)
    model.write_text(
        "import numpy as np, cvxpy as cp\n"
        "from pathlib import Path\n"
        "def build():\n"
        "    here = Path(__file__).parent\n"
        "    X, y = np.load(here / 'X.npy'), np.load(here / 'y.npy')\n"
        "    w, b = cp.Variable(3, name='w'), cp.Variable(name='b')\n"
        f"    return cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w + b))) + cp.sum_squares(w) / {2 * DELTA}"
        " + cp.square(b) / 20))\n")
    F = np.hstack([X, np.ones((N, 1))])
    rm, rV, rf = _logistic_model(F, YPM, np.diag([1 / DELTA] * D + [0.1])).fit()
    names = [f"w[{j}]" for j in range(D)] + ["b"]
    # without a dense covariance (max_dense_covariance, D > 5000 by default) posterior_sd was left out of the JSON
    for extra in ([], ["--option", "max_dense_covariance=0"]):
        out = subprocess.run([sys.executable, "-m", "varopt", "solve", str(model), "--solver", "klprox", "--json"]
                             + extra, capture_output=True, text=True, cwd=Path(__file__).parent.parent, timeout=120)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        assert got["status"] == "converged" and list(got["variables"]) == names
        np.testing.assert_allclose([got["variables"][k] for k in names], rm, rtol=0, atol=1e-7)
        np.testing.assert_allclose([got["posterior_sd"][k] for k in names], np.sqrt(np.diag(rV)), rtol=1e-7)
        assert abs(got["objective"] - rf) <= 1e-10 * abs(rf)


def test_cli_posterior_sd_in_blocks_without_a_dense_covariance():
    """The CLI's standard deviations from ``info['predict']`` in blocks of unit rows equal the covariance's diagonal
    (more variables than one block; full and dual parameterizations)."""
    from varopt.cli import _posterior_sd
    rng = np.random.default_rng(4)
    n, d = 30, 40
    Xw, yw = rng.normal(size=(n, d)), np.where(rng.random(n) < 0.5, 1.0, -1.0)
    w = cp.Variable(d)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(yw, Xw @ w))) + cp.sum_squares(w) / 2))
    for par in ("full", "dual"):
        prob.solve(method="klprox", parameterization=par)
        r = prob.varopt_result
        sd = np.sqrt(np.diag(r.info["covariance"]))
        r.info["covariance"] = None
        got = _posterior_sd(r, block=7)
        np.testing.assert_allclose([got[k] for k in r.names], sd, rtol=1e-12)


# --- estimators -----------------------------------------------------------------------------------------------

def _blr_ref(Xd, y01, prior_var):
    """The estimator's model: an intercept column, prior N(0, prior_var I) on all weights (its -ELBO adds the prior's
    normalisation, D/2 log(2 pi prior_var))."""
    F = np.hstack([Xd, np.ones((len(Xd), 1))])
    rm, rV, rf = _logistic_model(F, 2.0 * np.asarray(y01, float) - 1, np.eye(F.shape[1]) / prior_var).fit()
    return rm, rV, rf + 0.5 * F.shape[1] * math.log(2 * math.pi * prior_var)


def _predictive(mt, vt):
    """``E[sigmoid(f)]``, ``f ~ N(mt, vt)``, by adaptive quadrature."""
    out = []
    for a, v in zip(mt, vt):
        s = math.sqrt(v)
        out.append(integrate.quad(lambda u: expit(u) * math.exp(-0.5 * ((u - a) / s) ** 2) / (s * math.sqrt(2 * math.pi)),
                                  a - 40 * s, a + 40 * s, points=[0.0], epsabs=1e-14, limit=200)[0])
    return np.array(out)


def test_estimator_label_and_container_forms():
    from sklearn.base import clone
    from varopt.estimators import BayesianLogisticRegression
    ref = _blr_ref(X, Y01, 2.0)
    labels = {"0/1 ints": Y01.astype(int), "bools": Y01.astype(bool), "strings": np.where(Y01 == 1, "spam", "ham"),
              "ints 7/-3": np.where(Y01 == 1, 7, -3), "list": Y01.astype(int).tolist()}
    for name, y in labels.items():
        est = BayesianLogisticRegression(prior_var=2.0).fit(X.tolist() if name == "list" else X, y)
        _check(est.mean_, est.covariance_, est.neg_elbo_, ref)
        assert list(est.classes_) == sorted(set(np.asarray(y).tolist())), name
        assert np.array_equal(est.predict(X[:6]), np.asarray(est.classes_)[(est.predict_proba(X[:6])[:, 1] > 0.5) * 1])
    # the first class in sorted order is the negative one: 'a' for 1, 'b' for 0
    est = BayesianLogisticRegression(prior_var=2.0).fit(X, np.where(Y01 == 1, "a", "b"))
    _check(est.mean_, est.covariance_, est.neg_elbo_, _blr_ref(X, 1 - Y01, 2.0))
    c = clone(est)
    assert c.get_params() == {"fit_intercept": True, "prior_var": 2.0, "solver_options": None}
    c.set_params(prior_var=0.5, fit_intercept=False).fit(X, Y01)
    rm, rV, rf = _logistic_model(X, YPM, np.eye(D) / 0.5).fit()
    _check(c.mean_, c.covariance_, c.neg_elbo_, (rm, rV, rf + 0.5 * D * math.log(2 * math.pi * 0.5)))


def test_estimator_pipeline_and_predictive_probabilities():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from varopt.estimators import BayesianLogisticRegression
    Xs = X * [1.0, 10.0, 0.1] + [0.0, 5.0, 0.0]        # badly scaled features
    pipe = make_pipeline(StandardScaler(), BayesianLogisticRegression(prior_var=1.0)).fit(Xs, Y01)
    Z = StandardScaler().fit(Xs).transform(Xs)
    rm, rV, rf = _blr_ref(Z, Y01, 1.0)
    est = pipe[-1]
    _check(est.mean_, est.covariance_, est.neg_elbo_, (rm, rV, rf))
    Xn = np.random.default_rng(2).normal(size=(6, D)) * [1.0, 10.0, 0.1]
    p = pipe.predict_proba(Xn)
    assert p.shape == (6, 2) and np.allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    Fn = np.hstack([pipe[0].transform(Xn), np.ones((6, 1))])
    np.testing.assert_allclose(p[:, 1], _predictive(Fn @ rm, np.einsum("nd,de,ne->n", Fn, rV, Fn)), rtol=0, atol=1e-7)


def test_gp_classifier_against_the_gp_written_out():
    """``GPClassifier`` at fixed hyperparameters with string labels: the -ELBO of the latent posterior under
    ``K = sf^2 exp(-|x - x'|^2 / (2 ell^2)) + jitter sf^2 I`` (prior normalisation included), and ``predict_proba`` =
    ``E[sigmoid(f*)]`` of ``f* | f`` (``mt = k*^T K^-1 m``, ``vt = k** - k*^T K^-1 k* + k*^T K^-1 V K^-1 k*``)."""
    from varopt.estimators import GPClassifier
    rng = np.random.default_rng(6)
    n, le, ls, jit = 25, 0.3, 0.5, 1e-6
    Xg = rng.uniform(-3, 3, (n, 2))
    yg = np.where(np.sin(Xg[:, 0]) + 0.5 * Xg[:, 1] + 0.3 * rng.normal(size=n) > 0, "pos", "neg")
    g = GPClassifier(log_ell=le, log_sf=ls, jitter=jit).fit(Xg, yg)

    def k(A, B):
        return math.exp(2 * ls) * np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1) / math.exp(le) ** 2)

    K = k(Xg, Xg) + jit * math.exp(2 * ls) * np.eye(n)
    Kinv = np.linalg.inv(K)
    rm, rV, rf = Model(0.5 * (Kinv + Kinv.T)).add("softplus", -np.diag(np.where(yg == "pos", 1.0, -1.0))).fit()
    rf += 0.5 * np.linalg.slogdet(2 * math.pi * K)[1]
    assert list(g.classes_) == ["neg", "pos"] and abs(g.neg_elbo_ - rf) <= 1e-10 * abs(rf)
    Xn = rng.uniform(-3, 3, (6, 2))
    ks = k(Xn, Xg)
    a = np.linalg.solve(K, ks.T)
    vt = math.exp(2 * ls) - np.einsum("ij,ij->j", ks.T, a) + np.einsum("ji,jk,ki->i", a, rV, a)
    p = g.predict_proba(Xn)
    np.testing.assert_allclose(p[:, 1], _predictive(a.T @ rm, vt), rtol=0, atol=1e-8)
    assert np.allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-15)


def test_estimator_sample_weight():
    """``fit(X, y, sample_weight=s)``: each sample's -log likelihood times ``s_n`` (zeros drop a sample), against the
    reference with those coefficients; integer weights equal repeated rows; bad weights are named. Before, ``fit``
    took no ``sample_weight`` (a TypeError for scikit-learn's usual keyword)."""
    from varopt.estimators import BayesianLogisticRegression, BayesianMultinomialRegression, BayesianPoissonRegression
    s = np.where(np.arange(N) % 4 == 0, 0.0, SW)
    F = np.hstack([X, np.ones((N, 1))])
    est = BayesianLogisticRegression(prior_var=2.0).fit(X, np.where(Y01 == 1, "y", "n"), sample_weight=s)
    rm, rV, rf = _logistic_model(F, YPM, np.eye(D + 1) / 2.0, coef=s).fit()
    _check(est.mean_, est.covariance_, est.neg_elbo_, (rm, rV, rf + 0.5 * (D + 1) * math.log(2 * math.pi * 2.0)))
    M = Model(np.eye(D + 1), -F.T @ (s * YC), float(np.sum(s * __import__("scipy.special").special.gammaln(YC + 1))))
    M.k += 0.5 * (D + 1) * math.log(2 * math.pi)
    est = BayesianPoissonRegression(prior_var=1.0).fit(X, YC.astype(int), sample_weight=s)
    _check(est.mean_, est.covariance_, est.neg_elbo_, M.add("exp", F, None, s).fit())
    reps = 1 + np.arange(NM) % 3                        # integer weights = repeated samples
    a = BayesianMultinomialRegression(prior_var=1.0).fit(FM, LAB, sample_weight=reps)
    b = BayesianMultinomialRegression(prior_var=1.0).fit(np.repeat(FM, reps, axis=0), np.repeat(LAB, reps))
    np.testing.assert_allclose(a.mean_, b.mean_, rtol=0, atol=1e-7)
    np.testing.assert_allclose(a.covariance_, b.covariance_, rtol=0, atol=1e-7)
    assert abs(a.neg_elbo_ - b.neg_elbo_) <= 1e-9 * abs(b.neg_elbo_)
    for bad, match in ((-s, "sample_weight must be >= 0"), (s[:5], r"sample_weight has shape \(5,\)"),
                       (np.where(s > 1, np.nan, s), "sample_weight contains NaN"), (0 * s, "zero for every sample")):
        with pytest.raises(InputDataError, match=match):
            BayesianLogisticRegression().fit(X, Y01, sample_weight=bad)


def test_estimator_pandas_inputs():
    pd = pytest.importorskip("pandas")
    from varopt.estimators import BayesianLogisticRegression
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    est = BayesianLogisticRegression(prior_var=2.0).fit(df, pd.Series(np.where(Y01 == 1, "yes", "no")))
    _check(est.mean_, est.covariance_, est.neg_elbo_, _blr_ref(X, Y01, 2.0))
    assert list(est.feature_names_in_) == ["a", "b", "c"] and list(est.classes_) == ["no", "yes"]
    assert np.allclose(est.predict_proba(df.iloc[:5]).sum(axis=1), 1.0)


# --- bad inputs: a clear error naming the thing ---------------------------------------------------------------

def _lg(w, Xd=X, y=YPM):
    return cp.sum(cp.logistic(-cp.multiply(y, Xd @ w)))


def _with(a, idx, val):
    a = a.copy()
    a[idx] = val
    return a


def _cvx_bad(obj, cons=(), **opts):
    return lambda: cp.Problem(obj, list(cons)).solve(method="klprox", **opts)


def _pyo_bad(extra=None, bounds=None, prior=(0, 1, 2), cons=False, **opts):
    def run():
        m = pyo.ConcreteModel()
        m.J = pyo.RangeSet(0, D - 1)
        m.w = pyo.Var(m.J, bounds=bounds)
        e = sum(pyo.log(1 + pyo.exp(-YPM[i] * sum(X[i, j] * m.w[j] for j in m.J))) for i in range(N))
        e = e + sum(m.w[j] ** 2 for j in prior) / 2 + (extra(m) if extra is not None else 0)
        m.obj = pyo.Objective(expr=e)
        if cons:
            m.budget = pyo.Constraint(expr=m.w[0] + m.w[1] <= 1)
        return SF.solve(m, options=opts)
    return run


_W = cp.Variable(D, name="w")
_B = cp.Variable(name="b")
_PRIOR = cp.sum_squares(_W) / 2
BAD = {
    "logistic of a square": (_cvx_bad(cp.Minimize(_lg(_W) + cp.logistic(cp.square(_W[0])) + _PRIOR)),
                             ModelStructureError, r"logistic\(power\(w\[0\], 2.0\)\).*must be affine"),
    "pyomo exp of a product": (_pyo_bad(lambda m: pyo.exp(m.w[0] * m.w[1])), ModelStructureError,
                               r"exp\(w\[0\]\*w\[1\]\).*non-affine"),
    "no prior": (_cvx_bad(cp.Minimize(_lg(_W))), ModelStructureError, r"no Gaussian prior on 'w\[0\]', 'w\[1\]'"),
    "prior missing on one entry": (_cvx_bad(cp.Minimize(_lg(_W) + cp.sum_squares(_W[:2]))), ModelStructureError,
                                   r"no Gaussian prior on 'w\[2\]'"),
    "pyomo prior missing on one entry": (_pyo_bad(prior=(0, 1)), ModelStructureError, r"no Gaussian prior on 'w\[2\]'"),
    "unpenalized intercept": (_cvx_bad(cp.Minimize(_lg(_W + 0) + cp.sum(cp.logistic(-cp.multiply(YPM, X @ _W + _B)))
                                                   + _PRIOR)), ModelStructureError, r"no Gaussian prior on 'b'"),
    "indefinite prior": (_cvx_bad(cp.Minimize(_lg(_W) + cp.quad_form(_W, cp.psd_wrap(np.diag([1.0, 1.0, -0.5]))))),
                         ModelStructureError, r"not positive definite: smallest eigenvalue -1"),
    "pyomo indefinite prior": (_pyo_bad(lambda m: -6 * m.w[0] * m.w[1]), ModelStructureError, "not positive definite"),
    "NaN in X": (_cvx_bad(cp.Minimize(_lg(_W, _with(X, (3, 1), np.nan)) + _PRIOR)), InputDataError,
                 r"contains NaN \(first at index \(3, 1\)\)"),
    "inf in X": (_cvx_bad(cp.Minimize(_lg(_W, _with(X, (3, 1), np.inf)) + _PRIOR)), InputDataError,
                 r"contains inf \(first at index \(3, 1\)\)"),
    "NaN in y": (_cvx_bad(cp.Minimize(cp.sum(cp.logistic(X @ _W)) - _with(Y01, 2, np.nan) @ (X @ _W) + _PRIOR)),
                 InputDataError, r"contains NaN \(first at index \(2,\)\)"),
    "pyomo NaN parameter": (_pyo_bad(lambda m: (setattr(m, "y", pyo.Param(initialize=float("nan"), mutable=True,
                                                                          within=pyo.Any)), m.y * m.w[0])[1]),
                            InputDataError, r"'y' has the non-finite value nan"),
    "beta = 0": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), beta=0.0), InvalidOptionError, r"'beta': must be positive"),
    "beta < 0 (pyomo)": (_pyo_bad(beta=-1.0), InvalidOptionError, r"'beta': must be positive"),
    "beta = inf": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), beta=math.inf), InvalidOptionError, r"'beta'.*finite"),
    "gtol = inf": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), gtol=math.inf), InvalidOptionError, r"'gtol'.*finite"),
    "gamma0 = inf": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), gamma0=math.inf), InvalidOptionError, r"'gamma0'.*finite"),
    "beta a string": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), beta="big"), InvalidOptionError, r"'beta': invalid value 'big'"),
    "max_iter a fraction": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), max_iter=10.5), InvalidOptionError,
                            r"'max_iter' must be an integer"),
    "max_iter a boolean": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), max_iter=True), InvalidOptionError, "boolean"),
    "unknown option": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), betta=0.5), InvalidOptionError, r"unknown option 'betta'"),
    "pyomo unknown option": (_pyo_bad(betta=0.5), InvalidOptionError, r"unknown option 'betta'"),
    "constraint": (_cvx_bad(cp.Minimize(_lg(_W) + _PRIOR), [cp.sum(_W) == 1]), ModelStructureError, "has constraints"),
    "pyomo constraint": (_pyo_bad(cons=True), ModelStructureError, r"has constraints \(first: 'budget'\)"),
    "nonneg variable": (_cvx_bad(cp.Minimize(_lg(cp.Variable(D, nonneg=True, name="v"))
                                             + cp.sum_squares(cp.Variable(D, name="u")))),
                        ModelStructureError, r"'v\[0\]' has a finite bound"),
    "pyomo bounds": (_pyo_bad(bounds=(-5, 5)), ModelStructureError, r"'w\[0\]' has a finite bound"),
    "negative likelihood coefficient": (_cvx_bad(cp.Minimize(_lg(_W) - 0.5 * cp.sum(cp.exp(X @ _W)) + _PRIOR)),
                                        ModelStructureError, r"exp\(a\^T w \+ b\).*negative coefficient -0.5"),
    "maximize the negative log joint": (_cvx_bad(cp.Maximize(_lg(_W) + _PRIOR)), ModelStructureError,
                                        r"negative coefficient.*maximized.*Maximize\(log joint\)"),
    "pyomo log of an affine map": (_pyo_bad(lambda m: -pyo.log(m.w[0] + 3)), ModelStructureError,
                                   "no Gaussian expectation"),
    "five classes": (_cvx_bad(cp.Minimize(cp.sum(cp.log_sum_exp(FM[:10] @ (W5 := cp.Variable((2, 5))), axis=1))
                                          + cp.sum_squares(W5))), ModelStructureError, r"has 5 entries.*softmax='bound'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inputs_name_the_fault(case):
    run, exc, match = BAD[case]
    with pytest.raises(exc, match=match):
        run()


@pytest.mark.parametrize("kw, exc, match", [
    (dict(X=np.zeros((0, D)), y=np.zeros(0)), InputDataError, "0 sample"),
    (dict(X=_with(X, (1, 1), np.nan), y=Y01), InputDataError, "X contains NaN"),
    (dict(X=X, y=np.arange(N) % 3), InputDataError, "binary"),
    (dict(X=X, y=np.zeros(N, int)), InputDataError, "two classes"),
    (dict(X=X, y=Y01, prior_var=0.0), InputDataError, "prior_var must be a positive"),
    (dict(X=X, y=Y01, prior_var=[1.0, np.nan]), InputDataError, "prior_var must be"),
    (dict(X=X, y=Y01, solver_options={"betta": 1}), InvalidOptionError, "unknown option 'betta'"),
])
def test_estimator_bad_inputs(kw, exc, match):
    from varopt.estimators import BayesianLogisticRegression
    kw = dict(kw)
    Xd, y = kw.pop("X"), kw.pop("y")
    with pytest.raises(exc, match=match):
        BayesianLogisticRegression(**kw).fit(Xd, y)


def test_likelihood_over_an_empty_data_set_leaves_the_prior():
    """A sum over zero rows is 0 (CVXPY's empty sum): the model is its Gaussian prior, and the posterior is that prior
    exactly (accepted, not an error: a model may be Gaussian throughout, with no likelihood row at all)."""
    if tuple(int(p) for p in cp.__version__.split(".")[:2]) < (1, 9):
        pytest.skip("CVXPY < 1.9 refuses the (0, D) data matrix itself (ValueError: Invalid dimensions)")
    w = cp.Variable(D)
    m, V, f, _ = _cvx(cp.Minimize(cp.sum(cp.logistic(np.zeros((0, D)) @ w)) + _prior(w)), w)
    _check(m, V, f, conjugate(np.eye(D) / DELTA, np.zeros(D)), tol=1e-14, ftol=1e-14)


# --- the reference itself ---------------------------------------------------------------------------------------

def test_reference_expectations_and_optimizer():
    """The reference's softplus expectations against adaptive quadrature on both of its rules (sd <= 2 and wider), and
    its optimizer on a Gaussian likelihood (u**2 rows) against the conjugate posterior."""
    from klprox_reference import _e_softplus
    from scipy.special import expit as sig
    fns = (lambda u: np.logaddexp(0, u), sig, lambda u: sig(u) * sig(-u))
    for mu in (-20.0, -1.3, 0.0, 4.0):
        for v in (0.01, 3.9, 4.1, 400.0):
            got = _e_softplus(np.array([mu]), np.array([v]))
            s = math.sqrt(v)
            for j, fn in enumerate(fns):
                ref = integrate.quad(lambda u: fn(u) * math.exp(-0.5 * ((u - mu) / s) ** 2) / (s * math.sqrt(2 * math.pi)),
                                     mu - 40 * s, mu + 40 * s, points=[0.0] if abs(mu) < 40 * s else None,
                                     epsabs=1e-300, epsrel=1e-13, limit=500)[0]
                assert abs(got[j][0] - ref) <= 1e-11 * abs(ref), (mu, v, j)
    M = Model(np.eye(D) / DELTA, -X.T @ YR / 0.3, YR @ YR / 0.6)
    M.add("square", X, None, np.full(N, 1 / 0.6))
    _check(*M.fit(), conjugate(X.T @ X / 0.3 + np.eye(D) / DELTA, -X.T @ YR / 0.3, YR @ YR / 0.6), tol=1e-9, ftol=1e-12)
