"""The duality gap of the L1 estimators' ``passes='auto'`` stop (``varopt.estimators.l1_auto.dual_lower_bound``):
the dual value must bound the optimum from below at any point (checked against Clarabel on the same problem) and be
tight at the optimum (so the bound is not vacuous)."""
import numpy as np
import cvxpy as cp
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from varopt.estimators.l1_auto import dual_lower_bound


def _problem(loss, X, y, alpha, c, fit_intercept):
    n, d = X.shape
    w, b = cp.Variable(d), cp.Variable()
    t = X @ w + (b if fit_intercept else 0)
    fit = cp.sum_squares(y - t) / (2 * n) if loss == "squared" else cp.sum(cp.logistic(-cp.multiply(y, t))) / n
    prob = cp.Problem(cp.Minimize(fit + alpha * c @ cp.abs(w)))
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return prob.value, w.value, (float(b.value) if fit_intercept else 0.0)


def _F(loss, X, y, alpha, c, w, b):
    t = np.asarray(X @ w).ravel() + b
    fit = 0.5 * np.mean((y - t) ** 2) if loss == "squared" else np.mean(np.logaddexp(0.0, -y * t))
    return fit + alpha * c @ np.abs(w)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), loss=st.sampled_from(["squared", "logistic"]), fit_intercept=st.booleans(),
       sparse=st.booleans(), log_alpha=st.floats(-3, 0), scale=st.floats(0.0, 1.0))
def test_dual_value_bounds_the_optimum_and_is_tight_there(seed, loss, fit_intercept, sparse, log_alpha, scale):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(5, 40)), int(rng.integers(1, 8))
    X = rng.normal(size=(n, d)) * rng.choice([0.1, 1.0, 10.0], size=d) + rng.normal(size=d)
    if sparse:
        X[rng.random(X.shape) < 0.5] = 0.0
    t = X @ (rng.normal(size=d) * (rng.random(d) < 0.6)) + rng.normal(size=n)
    y = t if loss == "squared" else np.where(t > 0, 1.0, -1.0)
    if loss == "logistic" and fit_intercept and abs(y.sum()) == n:
        y[0] = -y[0]                                    # both classes: the intercept has a finite optimum
    alpha, c = 10.0 ** log_alpha, rng.uniform(0.5, 2.0, size=d)
    opt, w_opt, b_opt = _problem(loss, X, y, alpha, c, fit_intercept)
    Xd = sp.csr_matrix(X) if sparse else X
    tol = 1e-7 * max(1.0, abs(opt))
    # any point: the dual value is below the optimum
    w = w_opt + scale * rng.normal(size=d) * rng.choice([0.0, 1.0, 10.0], size=d)
    b = b_opt + scale * rng.normal() if fit_intercept else 0.0
    assert dual_lower_bound(loss, Xd, y, alpha, c, w, b, fit_intercept) <= opt + tol
    # at the optimum: the gap closes (to Clarabel's accuracy)
    gap = _F(loss, X, y, alpha, c, w_opt, b_opt) - dual_lower_bound(loss, Xd, y, alpha, c, w_opt, b_opt,
                                                                   fit_intercept)
    assert gap <= 1e-4 * max(1.0, abs(opt))


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_zero_weights_and_zero_penalty_give_valid_bounds(loss):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    y = X @ [1.0, 0, -1, 0] + rng.normal(size=30)
    y = y if loss == "squared" else np.sign(y)
    for alpha in (0.0, 0.1, 100.0):
        opt, w_opt, b_opt = _problem(loss, X, y, alpha, np.ones(4), True)
        D = dual_lower_bound(loss, X, y, alpha, np.ones(4), np.zeros(4), 0.0, True)
        assert D <= opt + 1e-7
        if alpha == 100.0:        # w = 0 is optimal: the bound is the optimum
            assert D == pytest.approx(opt, abs=1e-6)
