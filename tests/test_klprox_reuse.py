"""Work the klprox solver forms once and reuses (branch ``klheart2``, docs/klprox.md section 7): each shortcut against
the computation it replaces, to the last bit."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import scipy.sparse as sp

import varopt  # noqa: F401
from varopt.formulations.bayes_glm import glm_program, gp_program
from varopt.solvers.klprox import family_table, likelihood_view
from varopt.solvers.klprox import expectations as E
from varopt.solvers.klprox.posterior import FullGaussian, _RowPairs

FAMS = family_table()


def _gp_view(N=30, seed=0, log_sf=1.8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    y = (X[:, 0] + rng.normal(size=N) > 0).astype(float)
    return likelihood_view(gp_program(X, y, "logistic", 1.0, log_sf, 1.0)[0], FAMS)


def test_natural_step_reuses_sigma_g_of_the_residuals_only_for_the_same_gradient():
    # the residuals at st form Sigma g and A Sigma g of st's gradient; the next natural step starts from them. The same
    # step from a copy of st without them is the same to the last bit; a step with another alpha (another gradient)
    # must not pick up the stale products
    view = _gp_view()
    post = FullGaussian(view, woodbury=True)
    rng = np.random.default_rng(1)
    st = post._state(rng.normal(size=view.D), rng.uniform(0.05, 0.3, view.N))
    assert st.LB is not None and post.unit_prior
    alpha, alpha2, gamma = rng.normal(size=view.N), rng.normal(size=view.N), rng.uniform(0.0, 0.25, view.N)
    fresh = copy.copy(st)
    post.residuals(st, alpha, gamma, st.vt)
    assert st.sigma_g[0] is post.gradient(st, alpha)
    for r in (0.1, 0.7):
        np.testing.assert_array_equal(post.step(st, alpha, gamma, r, natural=True).m,
                                      post.step(copy.copy(fresh), alpha, gamma, r, natural=True).m)
        np.testing.assert_array_equal(post.step(st, alpha2, gamma, r, natural=True).m,
                                      post.step(copy.copy(fresh), alpha2, gamma, r, natural=True).m)


def test_scaled_prior_woodbury_step_and_residuals_use_sigma():
    # a GLM with N <= D and prior variance 3 (Sigma = 3 I): the Woodbury mean step and residuals equal the direct ones
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6, 9))
    view = likelihood_view(glm_program(X, (rng.uniform(size=6) < 0.5).astype(float), "logistic", prior_var=3.0),
                           FAMS)
    wood, direct = FullGaussian(view, woodbury=True), FullGaussian(view)
    assert wood.woodbury and not wood.unit_prior
    m, gt = rng.normal(size=view.D), rng.uniform(0.05, 0.3, view.N)
    alpha, gamma = rng.normal(size=view.N), rng.uniform(0.0, 0.25, view.N)
    sw, sd = wood._state(m, gt), direct._state(m, gt)
    assert sw.LB is not None
    rw, rd = wood.residuals(sw, alpha, gamma, sw.vt), direct.residuals(sd, alpha, gamma, sd.vt)
    assert abs(rw[0] - rd[0]) <= 1e-10 * rd[0]
    nw, nd = wood.step(sw, alpha, gamma, 0.4, natural=True), direct.step(sd, alpha, gamma, 0.4, natural=True)
    np.testing.assert_allclose(nw.m, nd.m, rtol=1e-10, atol=1e-12)


def test_gauss_hermite_grade_of_rows_at_the_bounds_and_nan():
    # the merged call's node count from the smallest and largest variance equals the largest per-row grade of
    # searchsorted (side='left': a variance exactly at a bound belongs to that bound's grade; NaN to the widest)
    fam = E.LogisticFamily()
    bounds = np.array([b for b, _ in fam.grades])
    calls = []

    def rule(m, v, x, w):
        calls.append(x.size)
        return m, m, m                        # (outputs: placeholders of the right size)

    finite = bounds[np.isfinite(bounds)]
    cases = [np.array([b]) for b in finite] + [np.array([b, b * (1 + 1e-15)]) for b in finite]
    cases += [np.array([1e-300, 0.02, 0.05]), np.array([0.3, np.nan]), np.array([np.nan]), np.array([5.0, 0.01])]
    # many rows (beyond MERGE_NODES): one call per grade present, unless a single grade holds them all
    cases += [np.repeat([1.0, 1.5], 100), np.repeat([0.5, 1.0], 200), np.full(300, 2.0), np.append(np.full(200, 0.5),
                                                                                                 np.nan)]
    for v in cases:
        g = np.minimum(np.searchsorted(bounds, v, side="left"), len(bounds) - 1)
        nodes = [fam.grades[int(j)][1] for j in np.unique(g)]
        want = nodes[-1:] if len(nodes) == 1 or v.size * nodes[-1] <= E.MERGE_NODES else nodes
        calls.clear()
        E._by_grade(fam.grades, rule, np.zeros(v.size), v, 3)
        assert calls == want, (v, calls)


@pytest.mark.parametrize("seed", range(6))
def test_row_pair_test_decided_from_nnz_alone_equals_the_full_rule(seed):
    rng = np.random.default_rng(seed)
    for N, D in ((40, 30), (200, 50), (7, 90)):
        for fill in (0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.6, 1.0):
            A = sp.random(N, D, density=fill, format="csr", random_state=rng)
            nnz = np.diff(A.indptr).astype(float)
            want = float(np.sum(nnz * (nnz + 1) / 2)) * 50 <= N * float(D) ** 2
            assert _RowPairs.worth(A, D) == want, (N, D, fill)
            # a COO matrix with every entry stored twice: its nnz counts the duplicates, the rule counts the rows' entries
            coo = A.tocoo()
            dup = sp.coo_matrix((np.r_[coo.data, coo.data] / 2, (np.r_[coo.row, coo.row], np.r_[coo.col, coo.col])),
                                shape=A.shape)
            assert _RowPairs.worth(dup, D) == want, (N, D, fill)


def test_row_pair_test_at_the_cauchy_schwarz_boundary():
    # equal row counts: sum nnz_n^2 = nnz^2 / N exactly; the shortcut must still leave the boundary to the full rule
    N, D = 10, 10
    for k in range(D + 1):
        A = sp.csr_matrix(np.hstack([np.ones((N, k)), np.zeros((N, D - k))]))
        want = N * k * (k + 1) / 2 * 50 <= N * D ** 2
        assert _RowPairs.worth(A, D) == want, k


def test_transpose_of_the_view_follows_its_matrix():
    rng = np.random.default_rng(5)
    X = (rng.uniform(size=(300, 40)) < 0.1).astype(float)
    view = likelihood_view(glm_program(X, (rng.uniform(size=300) < 0.5).astype(float), "logistic", prior_var=1.0),
                           FAMS)
    T0 = view.A_T()
    assert view.A_T() is T0 and (T0 != view.A.T).nnz == 0
    view.A = sp.csr_matrix(view.A.toarray() * 2.0)                 # a new A: a new transpose
    assert (view.A_T() != view.A.T).nnz == 0 and view.A_T() is not T0


def test_terms_of_one_block_equal_the_same_rows_in_two_blocks():
    # one block of every row writes alpha and gamma directly; the same rows split into two blocks go through the
    # slices: the same numbers (the sums added in another grouping; variances above 2 only: the split rule, row by row)
    view = _gp_view(N=25, seed=2)
    rng = np.random.default_rng(3)
    mt, vt = rng.normal(scale=3.0, size=view.N), np.exp(rng.uniform(0.7, 3.0, view.N))
    kind, sl = view.blocks[0]
    assert len(view.blocks) == 1 and sl == slice(0, view.N)
    one = view.terms(FAMS, mt, vt)
    view.blocks = [(kind, slice(0, 11)), (kind, slice(11, view.N))]
    two = view.terms(FAMS, mt, vt)
    assert abs(one[0] - two[0]) <= 1e-14 * one[1] and abs(one[1] - two[1]) <= 1e-14 * one[1]
    np.testing.assert_allclose(one[2], two[2], rtol=1e-15, atol=0)
    np.testing.assert_allclose(one[3], two[3], rtol=1e-15, atol=0)


def test_covariance_residual_of_one_dimensional_rows():
    view = _gp_view(N=20, seed=4)
    rng = np.random.default_rng(6)
    gamma, gt, vt = rng.normal(size=view.N), rng.normal(size=view.N), rng.uniform(0.1, 2.0, view.N)
    want = math.fsum(abs(g - t) * v for g, t, v in zip(gamma, gt, vt))
    assert abs(view.curvature_residual(gamma, gt, vt) - want) <= 1e-14 * want
