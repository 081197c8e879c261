"""klprox at the sizes users bring (docs/klprox.md, section 8b).

* A diagonal prior (GLM estimators: N(0, prior_var I)) is held by its diagonal in the likelihood view: the dual form of
  update (19) never forms the D x D prior matrix, its factor or the D^2 N triangular solve (N = 200, D = 20,000 took
  9.3 GB and 33 s before).
* The set-up's normal equations A^T A of a large filled A (dense data stored as CSR by the program) are a BLAS product
  of the dense copy, not scipy's sparse product (N = 50,000, D = 201: 2.7 s of a 3.6 s set-up before)."""

import numpy as np
from memory_peak import traced_peak
import pytest

import varopt  # noqa: F401
from varopt import get_solver
from varopt.formulations.bayes_glm import glm_program
import varopt.solvers.klprox.view as view_module
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
    res, peak = traced_peak(get_solver("klprox").solve, prog, max_dense_covariance=0)
    assert res.status == "converged" and res.info["parameterization"] == "dual"
    assert peak < 30e6, f"{peak / 1e6:.0f} MB"


def test_large_filled_rows_take_their_gram_matrix_from_a_dense_product(monkeypatch):
    """The minimum-norm split of the linear terms (view._rows_take_linear_terms) gets A^T A from the dense copy for a
    large filled A (here with the size threshold lowered), from scipy's sparse product below the threshold (the numbers
    small models have always had) and for sparse rows; the split equals the sparse computation's to rounding."""
    seen = []
    real = view_module._min_norm_normal

    def spy(A, c, gram=None, AT=None):
        seen.append(gram is not None)
        return real(A, c, gram, AT)

    monkeypatch.setattr(view_module, "_min_norm_normal", spy)
    prog = _wide(5, 400, 12)                       # N > D, every entry stored
    v0 = likelihood_view(prog, FAMS)               # N D^2 = 6.8e4: below the threshold
    monkeypatch.setattr(view_module, "DENSE_GRAM_FLOPS", 1e4)
    v = likelihood_view(prog, FAMS)
    assert seen == [False, True]
    np.testing.assert_allclose(v.lin, v0.lin, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(v.c, v0.c, rtol=0, atol=1e-12 * np.abs(prog.objective.linear).max())
    rng = np.random.default_rng(6)
    X = (rng.uniform(size=(300, 40)) < 0.03) * rng.normal(size=(300, 40))
    y = (rng.uniform(size=300) < 0.5).astype(float)
    v2 = likelihood_view(glm_program(X, y, "logistic", prior_var=0.7), FAMS)
    assert "_dense_A" not in v2.__dict__       # sparse rows: no dense copy (their Gram from the row pairs)
