"""A diagonal prior (GLM estimators: N(0, prior_var I)) is held by its diagonal in the likelihood view: the dual form of
update (19) never forms the D x D prior matrix, its factor or the D^2 N triangular solve (N = 200, D = 20,000 took
9.3 GB and 33 s before; docs/klprox.md section 8)."""
import tracemalloc

import numpy as np
import pytest

import varopt  # noqa: F401
from varopt import get_solver
from varopt.formulations.bayes_glm import glm_program
from varopt.solvers.klprox import family_table, likelihood_view
from varopt.solvers.klprox.posterior import DualGaussian, FullGaussian
from varopt.solvers.klprox.view import _prior_cholesky

FAMS = family_table()


def _wide(seed, N, D, likelihood="logistic", prior_var=0.7):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / np.sqrt(D)
    z = X @ rng.normal(size=D)
    y = (rng.uniform(size=N) < 1 / (1 + np.exp(-z))).astype(float) if likelihood == "logistic" else \
        rng.poisson(np.exp(np.clip(z, -3, 3))).astype(float)
    return glm_program(X, y, likelihood, prior_var=prior_var)


def _dense_prior_view(prog):
    """The view with the prior as a dense matrix and its dense Cholesky factor (what likelihood_view built before)."""
    view = likelihood_view(prog, FAMS)
    P = view.P
    view.P_chol = _prior_cholesky(P + 0.0, view.names, "objective")
    assert view.prior_sqrt() is None
    return view


def test_view_holds_a_diagonal_prior_by_its_diagonal():
    view = likelihood_view(_wide(0, 30, 50), FAMS)
    assert "P" not in view.__dict__ and "P_chol" not in view.__dict__
    d = view.known_diagonal()
    assert d is not None and view.D == 51      # 50 weights and the intercept
    np.testing.assert_array_equal(view.prior_sqrt(), np.sqrt(d))
    assert "P" not in view.__dict__                      # the dual form's reads form nothing
    np.testing.assert_array_equal(view.P, np.diag(d))    # formed on first read, with the same numbers
    np.testing.assert_array_equal(view.P_chol, _prior_cholesky(view.P, view.names, "objective"))
    np.testing.assert_array_equal(view.known_diagonal(), d)
    view.P = view.P + 0.1 * (np.eye(view.D, k=1) + np.eye(view.D, k=-1))   # replaced: no longer known diagonal
    assert view.known_diagonal() is None and FullGaussian(view).P_diag is None


@pytest.mark.parametrize("likelihood", ["logistic", "poisson"])
def test_dual_form_with_the_diagonal_equals_the_dense_factor(likelihood):
    """Every quantity of the dual posterior from the diagonal prior equals the dense-factor computation."""
    prog = _wide(1, 25, 60, likelihood)
    lazy, dense = DualGaussian(likelihood_view(prog, FAMS)), DualGaussian(_dense_prior_view(prog))
    np.testing.assert_allclose(lazy.Y, dense.Y, rtol=1e-15, atol=0)
    np.testing.assert_allclose(lazy.St, dense.St, rtol=1e-14, atol=1e-16)
    assert lazy.C0 == pytest.approx(dense.C0, rel=1e-15)
    st_l, st_d = lazy.start(1e-3), dense.start(1e-3)
    rng = np.random.default_rng(2)
    st_l.z = st_d.z = rng.normal(size=lazy.N)
    np.testing.assert_allclose(lazy.mean(st_l), dense.mean(st_d), rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(lazy.covariance(st_l), dense.covariance(st_d), rtol=1e-13, atol=1e-15)
    An = rng.normal(size=(4, lazy.D))
    for a, b in zip(lazy.predict(st_l, An), dense.predict(st_d, An)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    assert "P" not in lazy.view.__dict__ and "P_chol" not in lazy.view.__dict__


def test_wide_dual_solve_allocates_no_d_by_d_matrix():
    """N = 20 rows, D = 4,000 weights: the dense prior, its Hessian copy and factor were 3 x 128 MB."""
    prog = _wide(3, 20, 4000)
    tracemalloc.start()
    try:
        res = get_solver("klprox").solve(prog, max_dense_covariance=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.status == "converged" and res.info["parameterization"] == "dual"
    assert peak < 30e6, f"{peak / 1e6:.0f} MB"
