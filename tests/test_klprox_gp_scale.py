"""GP estimators at larger N: the quadratic rows' dense Gram, the Woodbury state's probe, grids solved to
GRID_GTOL with the selected point continued to gtol, verbose progress and the long-grid warning
(docs/klprox.md, section 7, "GP estimators at N = 500-4000")."""
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import varopt.estimators.klprox_grid as grid_module
import varopt.solvers.klprox.posterior as posterior
from varopt.errors import InputDataError
from varopt.estimators.klprox import GPClassifier, GPRegressor
from varopt.formulations.bayes_glm import gp_program
from varopt.registry import get_solver
from varopt.solvers.klprox.expectations import family_table
from varopt.solvers.klprox.view import _square_gram, likelihood_view


def _reg_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) - 0.5 * X[:, 1] + 0.1 * rng.laplace(size=n)


def _clf_data(n=60, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)


def test_square_rows_gram_is_the_sparse_product():
    """The Gaussian likelihood's rows (a filled lower triangle, a filled rectangle, a sparse block) give the same
    A^T diag(w) A as scipy's sparse product to rounding, symmetric to the last bit; and a Gaussian GP's view holds
    P = I + L^T L / noise^2 (before: the sparse product of the filled triangle, 2.1 s of a 3.1 s fit at N = 2000)."""
    rng = np.random.default_rng(0)
    for A in (np.tril(rng.normal(size=(40, 40))), rng.normal(size=(50, 12)),
              sp.random(80, 30, density=0.03, random_state=1).toarray()):
        A = sp.csr_matrix(A)
        w = rng.uniform(0.1, 2.0, size=A.shape[0])
        ref = (A.T @ sp.diags(w) @ A).toarray()
        got = _square_gram(A, w)
        assert A.nnz < 0.1 * 80 * 30 or np.array_equal(got, got.T)     # the dense path: symmetric to the last bit
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    X, y = _reg_data(50)
    prog, L, _ = gp_program(X, y, "gaussian", 0.0, 0.0, 0.3)
    view = likelihood_view(prog, family_table())
    np.testing.assert_allclose(view.P, np.eye(50) + L.T @ L / 0.09, rtol=0, atol=1e-12 * np.abs(view.P).max())


def test_woodbury_probe_changes_the_time_not_the_numbers(monkeypatch):
    """A Laplace GP whose Woodbury states fail the second form's rounding bound: with the probe no failing state pays
    the triangular product of all its flagged rows, and the fit is bit-identical to the one without the probe."""
    X, y = _reg_data(150)
    kw = dict(log_ell=0.0, log_sf=1.0, log_noise=-2.0)
    calls = {"full": 0, "declined": 0}
    wide = 2 * posterior.WOODBURY_PROBE
    orig_state = posterior.FullGaussian._woodbury_state
    orig_dtrmm = posterior.dtrmm

    def dtrmm(alpha, a, b, **k):
        if b.ndim == 2 and b.shape[1] > wide and a.shape[0] == X.shape[0]:
            calls["full"] += 1          # the product of every flagged row
        return orig_dtrmm(alpha, a, b, **k)

    def state(self, m, gt):
        before = calls["full"]
        st = orig_state(self, m, gt)
        if st is None and calls["full"] > before:
            calls["declined"] += 1      # a declined state that paid the full product
        return st

    monkeypatch.setattr(posterior, "dtrmm", dtrmm)
    monkeypatch.setattr(posterior.FullGaussian, "_woodbury_state", state)
    a = GPRegressor("laplace", **kw).fit(X, y)
    assert calls["declined"] == 0
    monkeypatch.setattr(posterior, "WOODBURY_PROBE", 10 ** 6)   # no probe: every check as before
    calls["full"] = calls["declined"] = 0
    b = GPRegressor("laplace", **kw).fit(X, y)
    assert calls["declined"] > 0                             # the states the probe declines early
    assert a.result_.iterations == b.result_.iterations and a.neg_elbo_ == b.neg_elbo_
    assert np.array_equal(a.mean_, b.mean_) and np.array_equal(a.covariance_, b.covariance_)


def test_grid_points_coarse_and_the_selected_point_continued_to_gtol(monkeypatch):
    """Every grid point is solved to GRID_GTOL, the selected one is continued from its own solution (its summary as
    the warm start) to the solver's gtol; the posterior is the single-point fit's to 1e-8, and every grid value the
    value of a cold fit at gtol to 1e-7 (the -ELBO gap at residuals 1e-4 is about res^2 / 2)."""
    X, y = _clf_data(70)
    seen = []
    orig = grid_module.solve_point

    def spy(build, args, options, warm):
        r = orig(build, args, options, warm)
        seen.append(((options or {}).get("gtol"), len(warm), r))
        return r

    monkeypatch.setattr(grid_module, "solve_point", spy)
    est = GPClassifier(log_ell=[-0.5, 0.5], log_sf=[0.5, 1.5]).fit(X, y)
    assert [g for g, _, _ in seen[:4]] == [grid_module.GRID_GTOL] * 4 and len(seen) == 5
    gtol, nwarm, last = seen[4]
    assert gtol is None and nwarm == 1 and last is est.result_
    assert last.status == "converged" and "<= gtol" in last.message      # the solver's gtol, 1e-8
    # the continuation starts at the grid's solution: a few iterations, not a cold solve's
    cold_best = GPClassifier(log_ell=est.log_ell_, log_sf=est.log_sf_).fit(X, y)
    assert last.iterations < cold_best.result_.iterations
    np.testing.assert_allclose(est.mean_, cold_best.mean_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(est.covariance_, cold_best.covariance_, rtol=0, atol=1e-8)
    assert est.neg_elbo_ == min(v for _, v in est.grid_)
    monkeypatch.setattr(grid_module, "solve_point", orig)
    for (le, ls, _), v in est.grid_:
        cold = GPClassifier(log_ell=le, log_sf=ls).fit(X, y)
        assert abs(cold.neg_elbo_ - v) <= 1e-7


def test_single_point_and_stochastic_fits_keep_the_solver_gtol(monkeypatch):
    """One point (numbers instead of lists) is solved once at the solver's gtol; a user's gtol looser than GRID_GTOL
    applies to every point with no continuation."""
    X, y = _reg_data(40)
    seen = []
    orig = grid_module.solve_point
    monkeypatch.setattr(grid_module, "solve_point",
                        lambda b, a, o, w: seen.append((o or {}).get("gtol")) or orig(b, a, o, w))
    GPRegressor("laplace", log_ell=0.0, log_sf=0.0, log_noise=-1.0).fit(X, y)
    assert seen == [None]
    seen.clear()
    GPRegressor("laplace", log_ell=[0.0, 0.5], log_sf=0.0, log_noise=-1.0, solver_options={"gtol": 1e-3}).fit(X, y)
    assert seen == [1e-3, 1e-3]


def test_verbose_prints_a_line_per_grid_point(capsys):
    X, y = _reg_data(40)
    GPRegressor("gaussian", log_ell=[0.0, 0.5], log_sf=[0.0, 1.0], log_noise=-1.0, verbose=True).fit(X, y)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 5
    assert all(f"grid point {k}/4" in line and "-ELBO" in line and "iterations" in line
               for k, line in enumerate(err[:4], 1))
    assert "about" in err[0] and "left" in err[0] and "left" not in err[3]
    assert err[4].startswith("GPRegressor(N=40): selected log_ell=")
    GPClassifier(log_ell=[0.0, 0.5], log_sf=1.0, verbose=True, n_jobs=2).fit(*_clf_data(40))
    assert capsys.readouterr().err.count("GPClassifier(N=40): grid point") == 2
    GPRegressor("gaussian", log_ell=[0.0, 0.5], log_sf=0.0, log_noise=-1.0).fit(X, y)
    assert capsys.readouterr().err == ""
    with pytest.raises(InputDataError, match="verbose"):
        GPRegressor(verbose="yes").fit(X, y)


def test_long_grid_warns_with_an_estimate(monkeypatch):
    X, y = _reg_data(40)
    monkeypatch.setattr(grid_module, "LONG_GRID_SECONDS", 0.0)
    with pytest.warns(grid_module.LongGridWarning, match=r"grid has 4 points and its first took .*n_jobs"):
        GPRegressor("gaussian", log_ell=[0.0, 0.5], log_sf=[0.0, 1.0], log_noise=-1.0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # one point: no grid, no warning
        GPRegressor("gaussian", log_ell=0.0, log_sf=0.0, log_noise=math.log(0.1)).fit(X, y)
    monkeypatch.setattr(grid_module, "LONG_GRID_SECONDS", 1e9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GPRegressor("gaussian", log_ell=[0.0, 0.5], log_sf=[0.0, 1.0], log_noise=-1.0).fit(X, y)


def test_gaussian_gp_is_the_closed_form_posterior():
    """The Gaussian GP after the Gram change: the posterior of f = L v is the textbook one,
    mean K (K + s^2 I)^-1 y, to 1e-9 (an independent check of the dense Gram)."""
    X, y = _reg_data(60)
    s = 0.2
    est = GPRegressor("gaussian", log_ell=0.0, log_sf=0.0, log_noise=math.log(s)).fit(X, y)
    L = est.L_
    K = L @ L.T
    f = K @ np.linalg.solve(K + s * s * np.eye(60), y)
    np.testing.assert_allclose(est.f_mean_, f, rtol=0, atol=1e-9)
    assert est.result_.iterations <= 1


def test_declined_woodbury_states_back_off_and_change_rounding_only(monkeypatch):
    """A Laplace GP whose Woodbury states are declined: after k declines in a row the next 2^k - 1 states are direct
    without an attempt (before: an attempt, a Cholesky factor and trtri of B, at every state), and the fit equals the
    one with an attempt at every state to rounding (both forms exact to 1e-12)."""
    X, y = _reg_data(150)
    kw = dict(log_ell=0.0, log_sf=1.0, log_noise=-2.0)
    count = {"attempts": 0, "states": 0}
    orig_wb, orig_state = posterior.FullGaussian._woodbury_state, posterior.FullGaussian._state

    def wb(self, m, gt):
        count["attempts"] += 1
        return orig_wb(self, m, gt)

    def state(self, m, gt):
        count["states"] += 1
        return orig_state(self, m, gt)

    monkeypatch.setattr(posterior.FullGaussian, "_woodbury_state", wb)
    monkeypatch.setattr(posterior.FullGaussian, "_state", state)
    a = GPRegressor("laplace", **kw).fit(X, y)
    assert count["states"] >= 20 and count["attempts"] <= 2 + count["states"] // posterior.WOODBURY_BACKOFF + 4
    monkeypatch.setattr(posterior, "WOODBURY_BACKOFF", 0)
    count.update(attempts=0, states=0)
    b = GPRegressor("laplace", **kw).fit(X, y)
    assert count["attempts"] == count["states"]
    assert abs(a.neg_elbo_ - b.neg_elbo_) <= 1e-10 * abs(b.neg_elbo_)
    np.testing.assert_allclose(a.f_mean_, b.f_mean_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(a.covariance_, b.covariance_, rtol=0, atol=1e-8)


def test_warm_start_factors_each_neighbour_once(monkeypatch):
    """A warm start's two starts (its mean as it is, its Gaussian sites under the new prior) share one precision
    P + A^T G A: one factorization per summary (before: two of the same matrix), the same optimum as a cold solve."""
    X, y = _clf_data(80)
    solve = get_solver("klprox").solve
    first = solve(gp_program(X, y, "logistic", 0.0, 1.0)[0])
    prog = gp_program(X, y, "logistic", 0.5, 1.5)[0]
    count = {"states": 0, "in_warm": 0}
    orig_state, orig_warm = posterior.FullGaussian._state, posterior.FullGaussian.warm

    def state(self, m, gt):
        count["states"] += 1
        return orig_state(self, m, gt)

    def warm(self, *a, **k):
        before = count["states"]
        out = orig_warm(self, *a, **k)
        count["in_warm"] += count["states"] - before
        assert len(out) == 2 and out[0].m is not out[1].m and not np.array_equal(out[0].m, out[1].m)
        return out

    monkeypatch.setattr(posterior.FullGaussian, "_state", state)
    monkeypatch.setattr(posterior.FullGaussian, "warm", warm)
    summary = grid_module.warm_summary(first)
    r = solve(prog, warm_start=[summary, summary])
    assert count["in_warm"] == 2
    cold = solve(prog)
    assert r.status == cold.status == "converged" and abs(r.objective - cold.objective) <= 1e-9 * abs(cold.objective)
