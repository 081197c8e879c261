"""klprox full form: the structure-specific products of a posterior state (sparse row pairs, the triangular Gram of
a whitened GP, the triangular inverse) against plain dense linear algebra; the predictor variances of a wide-prior
GP state against an independent computation in extended precision."""
import math

import numpy as np
import pytest
import scipy.sparse as sp

import varopt  # noqa: F401
from varopt.formulations.bayes_glm import glm_program, gp_program
from varopt.solvers.klprox import family_table, likelihood_view
from varopt.solvers.klprox.posterior import FullGaussian, _RowPairs

FAMS = family_table()


def _dense_state(post, gt):
    """``(V^-1, V, vt)`` by dense algebra: ``V^-1 = P + A^T diag(gt) A``, ``vt_n = a_n^T V a_n``."""
    A = post.view.A.toarray()
    Lam = post.P + A.T @ (gt[:, None] * A)
    V = np.linalg.inv(Lam)
    return Lam, V, np.einsum("ij,jk,ik->i", A, V, A)


@pytest.mark.parametrize("seed", [0, 1])
def test_row_pairs_give_the_dense_gram_and_quadratic_forms(seed):
    rng = np.random.default_rng(seed)
    N, D = 300, 60
    A = sp.random(N, D, density=0.06, random_state=seed, format="lil")
    A[5] = 0.0                          # an empty row
    A[7, 3] = 2.0
    A = A.tocsr()
    A.eliminate_zeros()
    A.indices[A.indptr[7]:A.indptr[8]] = A.indices[A.indptr[7]:A.indptr[8]][::-1].copy()   # unsorted columns
    A.data[A.indptr[7]:A.indptr[8]] = A.data[A.indptr[7]:A.indptr[8]][::-1].copy()
    A.has_sorted_indices = False
    rp = _RowPairs(A, D)
    g = rng.uniform(-0.5, 2.0, N)       # also negative weights
    Ad = A.toarray()
    np.testing.assert_allclose(rp.gram(g), Ad.T @ (g[:, None] * Ad), rtol=0, atol=1e-12)
    M = rng.normal(size=(D, D))
    V = M @ M.T
    np.testing.assert_allclose(rp.quad(V), np.einsum("ij,jk,ik->i", Ad, V, Ad), rtol=1e-12, atol=1e-12)
    assert rp.quad(V)[5] == 0.0


def test_sparse_glm_state_uses_row_pairs_and_equals_dense_algebra():
    rng = np.random.default_rng(3)
    X = (rng.uniform(size=(400, 80)) < 0.08).astype(float)      # binary features, as a1a
    y = (rng.uniform(size=400) < 0.4).astype(float)
    post = FullGaussian(likelihood_view(glm_program(X, y, "logistic", prior_var=2.0), FAMS))
    assert post.pairs is not None and post.P_diag is not None
    gt = rng.uniform(0.0, 0.25, post.N)
    st = post._state(np.zeros(post.D), gt)
    Lam, V, vt = _dense_state(post, gt)
    np.testing.assert_allclose(st.Lam, Lam, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(st.V, V, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(st.vt, vt, rtol=1e-10)
    # the Gaussian part with the diagonal-prior trace equals the general formula
    gp_ = post.gauss_part(st)
    post.P_diag = None
    assert abs(post.gauss_part(st) - gp_) <= 1e-12 * abs(gp_)


@pytest.mark.parametrize("log_sf", [0.0, 4.0])
def test_whitened_gp_state_uses_the_triangular_gram(log_sf):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(70, 2))
    p = gp_program(X, np.sin(X[:, 0]) + 0.1 * rng.laplace(size=70), "laplace", 0.5, log_sf, math.exp(-2))[0]
    post = FullGaussian(likelihood_view(p, FAMS))
    assert post.lower_square and post.pairs is None
    gt = rng.uniform(0.0, 50.0, post.N)
    st = post._state(np.zeros(post.D), gt)
    Lam, V, vt = _dense_state(post, gt)
    np.testing.assert_allclose(st.Lam, Lam, rtol=1e-12, atol=1e-12 * np.abs(Lam).max())
    np.testing.assert_allclose(post.covariance(st), V, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(st.Linv @ st.L, np.eye(post.D), atol=1e-10)
    # vt in extended precision: A V A^T = A (Lam^-1) A^T with Lam^-1 from the same factor, summed in longdouble
    A = np.asarray(post.view.A.toarray(), dtype=np.longdouble)
    W = np.asarray(st.Linv, dtype=np.longdouble) @ A.T
    ref = np.asarray(np.sum(W * W, axis=0), dtype=float)
    np.testing.assert_allclose(st.vt, ref, rtol=1e-12)
    assert np.all(st.vt > 0)
    # a negative weight (not a pseudo-precision of a convex term) takes the general product
    g2 = gt.copy()
    g2[0] = -1e-3
    np.testing.assert_allclose(post._AtGA(g2), Lam - post.P + (g2 - gt)[0] * np.outer(A[0], A[0]).astype(float),
                               rtol=1e-10, atol=1e-10 * np.abs(Lam).max())


def test_dense_glm_state_uses_the_symmetric_rank_k_update():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, 12))
    y = (rng.uniform(size=150) < 0.5).astype(float)
    post = FullGaussian(likelihood_view(glm_program(X, y, "logistic", prior_var=3.0), FAMS))
    assert post.pairs is None and not post.lower_square and not sp.issparse(post.A)
    gt = rng.uniform(0.0, 0.25, post.N)
    st = post._state(np.zeros(post.D), gt)
    Lam, V, vt = _dense_state(post, gt)
    np.testing.assert_allclose(st.Lam, Lam, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(st.vt, vt, rtol=1e-10)
    np.testing.assert_allclose(post.covariance(st), V, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("seed", [0, 1])
def test_min_norm_split_of_the_linear_terms_by_normal_equations(seed):
    # one-hot blocks that each sum to the intercept column (as a1a's): A^T A is rank deficient
    from varopt.solvers.klprox.view import _min_norm_normal
    rng = np.random.default_rng(seed)
    N, blocks, k = 300, 4, 5
    cols = [np.ones((N, 1))] + [np.eye(k)[rng.integers(0, k, N)] for _ in range(blocks)]
    A = sp.csr_matrix(np.hstack(cols))
    s = rng.uniform(-1, 1, N)
    c = A.T @ s
    t = _min_norm_normal(A, c)
    ref = np.linalg.lstsq(A.toarray().T, c, rcond=None)[0]          # SVD: the minimum-norm solution
    assert np.linalg.matrix_rank(A.toarray()) < A.shape[1]
    np.testing.assert_allclose(t, ref, rtol=0, atol=1e-12)
    # c outside the range of A^T (a column of zeros with a nonzero c entry): no solution, the caller falls back
    A0 = sp.hstack([A, sp.csr_matrix((N, 1))]).tocsr()
    assert _min_norm_normal(A0, np.append(c, 1.0)) is None
    # the view's split: the same joint (c = c0 + A^T t), rows -y u as the minimum-norm t
    X = np.hstack(cols[1:])
    y = (rng.uniform(size=N) < 0.4).astype(float)
    view = likelihood_view(glm_program(X, y, "logistic", prior_var=1.0), FAMS)
    Ad = view.A.toarray()
    np.testing.assert_allclose(view.lin, np.linalg.lstsq(Ad.T, -Ad.T @ y, rcond=None)[0], rtol=0, atol=1e-12)
    assert not np.any(view.c)


def test_view_row_pairs_give_the_split_gram_and_serve_the_full_form(monkeypatch):
    # sparse rows, N > D: the view forms the row pairs, takes A^T A for the split of section 1 from them (the same
    # integers for 0/1 features, equal to 1e-15 otherwise) and the full form reuses the same object
    from varopt.solvers.klprox import view as view_mod
    rng = np.random.default_rng(3)
    N, k = 400, 8
    X = np.hstack([np.eye(k)[rng.integers(0, k, N)] for _ in range(10)])     # 11 of 81 entries per row
    y = (rng.uniform(size=N) < 0.4).astype(float)
    grams = []
    orig = view_mod._min_norm_normal

    def spy(A, c, gram=None, *rest):
        grams.append(gram)
        return orig(A, c, gram, *rest)

    monkeypatch.setattr(view_mod, "_min_norm_normal", spy)
    for scale in (None, rng.uniform(0.5, 2.0, X.shape[1])):
        Xs = X if scale is None else X * scale
        v = likelihood_view(glm_program(Xs, y, "logistic", prior_var=2.0), FAMS)
        assert v.row_pairs is not None and grams[-1] is not None
        ref = (v.A.T @ v.A).toarray()
        if scale is None:
            np.testing.assert_array_equal(grams[-1], ref)
        else:
            np.testing.assert_allclose(grams[-1], ref, rtol=1e-15, atol=1e-15 * np.abs(ref).max())
        post = FullGaussian(v)
        assert post.pairs is v.row_pairs
        # the split is the minimum-norm one: t = A z
        np.testing.assert_allclose(v.A.T @ v.lin + v.c, -np.append(Xs.T @ y, y.sum()), rtol=1e-12, atol=1e-12)


def test_row_pairs_read_a_lower_triangle_from_lapack_in_place():
    # the sparse-row state hands the row pairs LAPACK's lower triangle of V (Fortran order, zeros above)
    from scipy.linalg import lapack

    from varopt.solvers.klprox.posterior import _RowPairs
    rng = np.random.default_rng(11)
    N, D = 90, 14
    A = sp.csr_matrix((rng.uniform(size=(N, D)) < 0.3) * rng.normal(size=(N, D)))
    M = rng.normal(size=(D, 2 * D))
    L = np.linalg.cholesky(M @ M.T + np.eye(D))
    Linv = np.asfortranarray(np.linalg.inv(L))
    Linv[np.triu_indices(D, 1)] = 0.0
    low = lapack.dlauum(Linv, lower=1)[0]
    assert low.flags.f_contiguous and not np.any(np.triu(low, 1))
    V = Linv.T @ Linv
    Ad = A.toarray()
    ref = np.einsum("ij,jk,ik->i", Ad, V, Ad)
    rp = _RowPairs(A, D)
    np.testing.assert_allclose(rp.quad(low), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rp.quad(V), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rp.quad(np.ascontiguousarray(V)), ref, rtol=1e-12, atol=1e-14)



def test_gaussian_part_sums_equal_numpys_to_the_last_bit():
    # the few terms of the Gaussian part are added without forming an array, in numpy's order
    from varopt.solvers.klprox.posterior import _sum
    rng = np.random.default_rng(12)
    for n in (4, 5, 7):
        for _ in range(2000):
            p = tuple(rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, n))
            assert _sum(p) == float(np.sum(p))
            assert _sum(abs(x) for x in p) == float(np.sum(np.abs(p)))


def test_lapack_helpers_equal_scipy_and_raise_on_indefinite_matrices():
    # the step rule catches LinAlgError from a factorization (a trial that left the positive definite cone)
    import scipy.linalg as sla

    from varopt.solvers.klprox.posterior import _cho_solve, _chol, _tri
    rng = np.random.default_rng(13)
    M = rng.normal(size=(7, 12))
    A = M @ M.T
    L = _chol(A)
    np.testing.assert_array_equal(L, sla.cholesky(A, lower=True))
    for b in (rng.normal(size=7), rng.normal(size=(7, 3))):
        np.testing.assert_allclose(_tri(L, b), sla.solve_triangular(L, b, lower=True), rtol=1e-14)
        np.testing.assert_allclose(_cho_solve(L, b), np.linalg.solve(A, b), rtol=1e-10)
    with pytest.raises(np.linalg.LinAlgError):
        _chol(A - 2 * np.linalg.eigvalsh(A)[-1] * np.eye(7))
    with pytest.raises(np.linalg.LinAlgError):
        _tri(np.tril(np.ones((3, 3))) - np.diag([0.0, 1.0, 1.0]), np.ones(3))
    assert _chol(np.zeros((0, 0))).shape == (0, 0) and _cho_solve(np.zeros((0, 0)), np.zeros(0)).shape == (0,)


@pytest.mark.parametrize("n", [5, 96, 97, 135, 253])
def test_blocked_triangular_inverse_equals_lapack_and_raises_on_a_singular_factor(n):
    # _tri_inv: LAPACK trtri up to TRI_INV_BLOCK rows, the 2 x 2 block form above (recursively at 253); the strict upper
    # part is zero (covariance() reads the result's lower triangle by lauum, _direct_state's row pairs too)
    import scipy.linalg as sla

    from varopt.solvers.klprox.posterior import TRI_INV_BLOCK, _chol, _tri_inv
    assert 96 <= TRI_INV_BLOCK < 135
    rng = np.random.default_rng(n)
    M = rng.normal(size=(n, n + 5))
    L = _chol(M @ M.T / n + 0.1 * np.eye(n))
    Linv = _tri_inv(L)
    np.testing.assert_array_equal(np.triu(Linv, 1), 0.0)
    ref = sla.solve_triangular(L, np.eye(n), lower=True)
    np.testing.assert_allclose(Linv, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    np.testing.assert_allclose(Linv @ L, np.eye(n), rtol=0, atol=1e-12)
    S = L.copy()
    S[n - 2, n - 2] = 0.0                                  # singular: a zero on the diagonal (in the second block)
    with pytest.raises(np.linalg.LinAlgError):
        _tri_inv(S)
