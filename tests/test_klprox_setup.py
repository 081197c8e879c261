"""klprox set-up shortcuts against the general construction they replace, entry for entry: the likelihood view's rows
when the log-sum-exp base rows are empty (logistic rows: no sparse difference), one row block (no stack), the dense
prior Hessian; the sparse row pairs built from a canonical matrix without a copy. The shortcuts change no number,
so the iterates stay the same."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit

import varopt  # noqa: F401
from varopt.formulations.bayes_glm import glm_program, gp_program
from varopt.program.terms import QuadraticTerms
from varopt.solvers.klprox import family_table, likelihood_view
from varopt.solvers.klprox.posterior import _RowPairs
from varopt.solvers.klprox.view import _dense_hessian

FAMS = family_table()


def _same_csr(A, B):
    assert A.shape == B.shape
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)       # bit for bit


def _reference_rows(program):
    """The logistic rows as the general construction forms them: ``A[other] - A[base]`` of every two-entry
    log-sum-exp group, ``b`` likewise, and ``c`` plus ``A[base]^T coef`` (the base entries' linear parts)."""
    e = program.objective
    c = e.linear.copy()
    As, bs = [], []
    for grp in e.lse:
        sizes = np.diff(np.append(grp.starts, grp.seg.size))
        assert np.all(sizes == 2)
        base, other = grp.starts.copy(), grp.starts + 1
        nnz = np.diff(grp.A.indptr)
        swap = (nnz[other] == 0) & (nnz[base] > 0)
        base[swap], other[swap] = other[swap], base[swap]
        c = c + np.asarray(grp.A[base].T @ grp.coef).ravel()
        As.append(grp.A[other] - grp.A[base])
        bs.append(grp.b[other] - grp.b[base])
    return sp.vstack(As).tocsr(), np.concatenate(bs), c


def _gp(seed, N=40):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    y = (rng.uniform(size=N) < expit(X[:, 0] - X[:, 1])).astype(float)
    return gp_program(X, y, "logistic", 0.3, 1.0)[0]


def _glm(seed, N=120, D=30, dense=False):
    rng = np.random.default_rng(seed)
    X = (rng.uniform(size=(N, D)) < 0.15).astype(float) * (1.0 if dense else rng.choice([1.0, 2.5], size=(N, D)))
    y = (rng.uniform(size=N) < 0.4).astype(float)
    return glm_program(X, y, "logistic", prior_var=0.7)


@pytest.mark.parametrize("make", [lambda: _gp(0), lambda: _gp(1), lambda: _glm(0), lambda: _glm(1, dense=True)])
def test_view_rows_equal_the_general_construction(make):
    p = make()
    view = likelihood_view(p, FAMS)
    A, b, c = _reference_rows(p)
    _same_csr(view.A, A)
    np.testing.assert_array_equal(view.b, b)
    # c is then split into the rows' linear parts (view.lin) and the rest: the same joint, c = c0 + A^T lin
    np.testing.assert_allclose(view.c + np.asarray(view.A.T @ view.lin).ravel(), c, rtol=0,
                               atol=1e-12 * max(1.0, np.abs(c).max()))
    np.testing.assert_array_equal(view.P, p.objective.quadratic.hessian_matrix.toarray())


def test_view_rows_with_a_linear_part_in_the_base_entry():
    # log(exp(a^T w) + exp(u)): the base entry has variables, so the rows are differences (the general path)
    import cvxpy as cp
    rng = np.random.default_rng(3)
    N, D = 30, 4
    F, G = rng.normal(size=(N, D)), rng.normal(size=(N, D))
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(sum(cp.log_sum_exp(cp.hstack([F[n] @ w, G[n] @ w])) for n in range(N))
                                  + cp.sum_squares(w) / 2))
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    p = compile_cvxpy(prob)[0]
    view = likelihood_view(p, FAMS)
    A, b, c = _reference_rows(p)
    _same_csr(view.A, A)
    np.testing.assert_array_equal(view.b, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dense_hessian_equals_the_sparse_sum(seed):
    rng = np.random.default_rng(seed)
    n, k = 12, 40
    q = QuadraticTerms(rng.integers(0, n, k), rng.integers(0, n, k), rng.normal(size=k), n)
    np.testing.assert_array_equal(_dense_hessian(q, n), q.hessian_matrix.toarray())
    assert not np.any(_dense_hessian(QuadraticTerms(np.zeros(0), np.zeros(0), np.zeros(0), n), n))
    sq = QuadraticTerms(np.arange(0, n, 2), np.arange(0, n, 2), rng.normal(size=n // 2), n)   # squares only
    np.testing.assert_array_equal(_dense_hessian(sq, n), sq.hessian_matrix.toarray())


@pytest.mark.parametrize("canonical", [True, False])
def test_row_pairs_from_a_canonical_matrix_leave_it_untouched_and_equal_a_sorted_copy(canonical):
    rng = np.random.default_rng(5)
    N, D = 60, 25
    M = sp.random(N, D, density=0.2, random_state=rng, format="csr")
    if not canonical:                          # every row's entries in reverse column order, a duplicate in the last
        ind = np.concatenate([M.indices[a:b][::-1] for a, b in zip(M.indptr[:-1], M.indptr[1:])] + [M.indices[-1:]])
        val = np.concatenate([M.data[a:b][::-1] for a, b in zip(M.indptr[:-1], M.indptr[1:])] + [[0.5]])
        ptr = M.indptr.copy()
        ptr[-1] += 1
        M = sp.csr_matrix((val, ind, ptr), shape=(N, D))
        assert not M.has_canonical_format
    before = (M.indptr.copy(), M.indices.copy(), M.data.copy())
    pairs = _RowPairs(M, D)
    ref = M.copy()
    ref.sum_duplicates()
    ref.sort_indices()
    g = rng.uniform(size=N)
    dense = ref.toarray()
    np.testing.assert_allclose(pairs.gram(g), dense.T @ (g[:, None] * dense), rtol=1e-13, atol=1e-13)
    V = rng.normal(size=(D, D))
    V = V @ V.T
    np.testing.assert_allclose(pairs.quad(V), np.einsum("ij,jk,ik->i", dense, V, dense), rtol=1e-12)
    if canonical:
        for a, b in zip(before, (M.indptr, M.indices, M.data)):
            np.testing.assert_array_equal(a, b)



def test_upper_entries_read_from_the_sparse_structure():
    from varopt.solvers.klprox.view import upper_entries
    rng = np.random.default_rng(7)
    low = np.tril(rng.normal(size=(9, 9)))
    assert not upper_entries(sp.csr_matrix(low))
    up = low.copy()
    up[2, 5] = 1e-300
    assert upper_entries(sp.csr_matrix(up))
    # a stored zero above the diagonal is no entry (as in the dense triangle the structure replaced)
    Z = sp.csr_matrix(up)
    Z.data[Z.indices == 5] = np.where(np.repeat(np.arange(9), np.diff(Z.indptr))[Z.indices == 5] == 2, 0.0,
                                      Z.data[Z.indices == 5])
    assert Z.nnz == np.count_nonzero(low) + 1 and np.array_equal(Z.toarray(), low)
    assert not upper_entries(Z)
    rect = sp.csr_matrix(np.triu(rng.normal(size=(4, 6)), 1))
    assert upper_entries(rect)


def test_full_state_set_up_of_a_whitened_gp_and_a_correlated_prior():
    from varopt.solvers.klprox.posterior import FullGaussian
    post = FullGaussian(likelihood_view(_gp(2), FAMS))
    assert post.lower_square and post.P_diag is not None
    np.testing.assert_array_equal(post.P_diag, np.diag(post.P))
    np.testing.assert_array_equal(post.ATf, post.view.A.T.toarray())
    assert post.ATf.flags.f_contiguous
    # a prior with off-diagonal entries, and rows that are not lower triangular
    view = likelihood_view(_glm(2, N=8, D=8, dense=True), FAMS)
    view.P = view.P + 0.1 * (np.eye(view.D, k=1) + np.eye(view.D, k=-1))
    post2 = FullGaussian(view)
    assert post2.P_diag is None
    assert not post2.lower_square and np.any(np.triu(post2.A, 1))


@pytest.mark.parametrize("seed", [0, 1])
def test_prior_with_folded_square_terms_is_symmetric(seed):
    # Gaussian rows (u^2 terms) join the quadratic part through a sparse product A^T D A, whose mirrored entries may
    # be summed in different orders: the view symmetrizes it; a pure prior Hessian is symmetric as it is
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, 12)) * rng.uniform(0.1, 10.0, size=12)
    p = glm_program(X, rng.normal(size=200), "gaussian", prior_var=0.3, noise=0.7)
    P = likelihood_view(p, FAMS).P
    np.testing.assert_array_equal(P, P.T)
    H = p.objective.quadratic.hessian_matrix.toarray()
    np.testing.assert_allclose(P, H + sum((g.A.T @ sp.diags(2.0 * g.coef) @ g.A).toarray()
                                          for g in p.objective.atoms if g.kernel.quadratic), rtol=1e-13, atol=1e-12)


def test_row_selection_of_two_entry_groups_equals_scipy_indexing():
    # the contiguous-block selection of the feature rows (every other row empty) and its fallback
    from varopt.solvers.klprox.view import _rows
    rng = np.random.default_rng(7)
    dense = (rng.uniform(size=(30, 9)) < 0.4) * rng.normal(size=(30, 9))
    dense[::2] = 0.0                                   # the constant base rows of log(1 + exp(u))
    dense[1, :] = 0.0                                  # an empty feature row among the selected ones
    A = sp.csr_matrix(dense)
    nnz = np.diff(A.indptr)
    for sel in (np.arange(1, 30, 2), np.arange(3, 30, 2)[::-1], np.array([5, 9, 9, 13])):
        B = _rows(A, sel, nnz)
        _same_csr(B, A[sel])
        assert not np.shares_memory(B.data, A.data) and not np.shares_memory(B.indices, A.indices)
    dense[4, 2] = 1.5                                  # a nonzero outside the selection: scipy's indexing
    A = sp.csr_matrix(dense)
    _same_csr(_rows(A, np.arange(1, 30, 2), np.diff(A.indptr)), A[np.arange(1, 30, 2)])


def test_dense_rows_and_upper_test_follow_the_view_matrix():
    view = likelihood_view(_gp(0), FAMS)
    D0 = view.dense_A()
    np.testing.assert_array_equal(D0, view.A.toarray())
    assert view.dense_A() is D0 and not view.upper()
    view.A = sp.csr_matrix(np.triu(np.ones((view.N, view.D))))     # a new A: both formed again
    np.testing.assert_array_equal(view.dense_A(), np.triu(np.ones((view.N, view.D))))
    assert view.upper()


def test_uniform_start_from_the_views_gram_equals_the_direct_state():
    from varopt.solvers.klprox.posterior import FullGaussian
    rng = np.random.default_rng(3)
    X = (rng.uniform(size=(400, 80)) < 0.08).astype(float)      # binary features, as a1a: the row pairs
    y = (rng.uniform(size=400) < 0.4).astype(float)
    post = FullGaussian(likelihood_view(glm_program(X, y, "logistic", prior_var=2.0), FAMS))
    assert post.pairs is not None and post.pairs._unit is not None      # A^T A formed by the view's split
    for g0 in (1e-3, 0.7):
        st = post.start(g0, at_prior_mean=False)
        ref = post._direct_state(np.zeros(post.D), g0 * post.view.eye())
        np.testing.assert_allclose(st.Lam, ref.Lam, rtol=1e-13, atol=1e-15)   # the same sums, rounded once more or less
        np.testing.assert_allclose(st.vt, ref.vt, rtol=1e-13)



def test_reflection_signs_follow_the_views_linear_parts():
    # the rows' t = -lin/coef and their 0/1 signs are formed once per lin and coef, again when either is replaced
    view = likelihood_view(_gp(0), FAMS)
    sl = view.blocks[0][1]
    t, sgn = view._reflect_t(sl)
    np.testing.assert_array_equal(t, -view.lin[sl] / view.coef[sl])
    assert sgn is not None and set(np.unique(sgn)) <= {-1.0, 1.0}
    view.lin = 0.5 * view.lin                                      # fractional labels: no signs
    t2, sgn2 = view._reflect_t(sl)
    np.testing.assert_array_equal(t2, 0.5 * t)
    assert sgn2 is None


@pytest.mark.parametrize("shape", [(7, 4), (40, 40), (3, 2), (0, 3), (5, 0)])
def test_model_rows_built_directly_equal_scipys_construction(shape):
    # bayes_glm._csr (a dense design's CSR matrix from its nonzeros) and _interleave_empty_rows (the logistic
    # log-sum-exp rows 0, F_0, 0, F_1, ...) against scipy's csr_matrix and stack + row selection, array for array
    from varopt.formulations.bayes_glm import _csr, _interleave_empty_rows
    rng = np.random.default_rng(shape[0])
    F = rng.normal(size=shape) * (rng.uniform(size=shape) < 0.5)
    if F.size:
        F[0, 0] = -0.0                                   # a signed zero is no entry, as in scipy
        F[-1, -1] = np.nan                               # a NaN is one (the program's finiteness check names it)
    Fs, ref = _csr(F), sp.csr_matrix(F)
    _same_csr(Fs, ref)
    assert Fs.indices.dtype == ref.indices.dtype and Fs.indptr.dtype == ref.indptr.dtype
    N, D = shape
    order = np.ravel(np.column_stack([np.arange(N), N + np.arange(N)])).astype(int)
    ref2 = sp.vstack([sp.csr_matrix((N, D)), ref]).tocsr()[order]
    _same_csr(_interleave_empty_rows(Fs), ref2)


def test_known_diagonal_prior_follows_the_view_matrix_and_gives_the_general_factor():
    # likelihood_view reads a diagonal P from the program's squares (GLM and GP priors); the posterior's set-up and the
    # prior factor then skip their passes over P, with the numbers of the general checks. A replaced P, a correlated
    # prior or folded u^2 rows: unknown (None)
    from varopt.solvers.klprox.posterior import FullGaussian
    from varopt.solvers.klprox.view import _prior_cholesky
    for prog in (_gp(3), _glm(3)):
        view = likelihood_view(prog, FAMS)
        d = view.known_diagonal()
        assert d is not None
        np.testing.assert_array_equal(np.diag(d), view.P)
        np.testing.assert_array_equal(view.P_chol, _prior_cholesky(view.P, view.names, "objective"))
        np.testing.assert_array_equal(FullGaussian(view).P_diag, d)
        view.P = view.P + 0.1 * (np.eye(view.D, k=1) + np.eye(view.D, k=-1))
        assert view.known_diagonal() is None and FullGaussian(view).P_diag is None
    rng = np.random.default_rng(4)
    gauss = glm_program(rng.normal(size=(30, 4)), rng.normal(size=30), "gaussian", prior_var=0.3)
    assert likelihood_view(gauss, FAMS).known_diagonal() is None
    corr = _glm(3)
    q = corr.objective.quadratic
    corr.objective.quadratic = QuadraticTerms(np.append(q.i, 0), np.append(q.j, 1), np.append(q.v, 0.1), q.n)
    view = likelihood_view(corr, FAMS)
    assert view.known_diagonal() is None and view.P[0, 1] == 0.1 and FullGaussian(view).P_diag is None


@pytest.mark.parametrize("stored_zero", [False, True])
def test_view_rows_drop_stored_zeros_of_the_program(stored_zero):
    # the feature rows are copied from the program's arrays; a stored zero there is dropped (as the general
    # construction's sparse difference drops it), and the zero-free case skips eliminate_zeros with the same result
    p = _glm(5)
    grp = p.objective.lse[0]
    if stored_zero:
        k = int(grp.A.indptr[1])                          # the first entry of the first feature row (row 1)
        grp.A.data[k] = 0.0
    A = _reference_rows(p)[0]
    view = likelihood_view(p, FAMS)
    _same_csr(view.A, A)
    assert np.all(view.A.data != 0) and view.A.nnz == grp.A.nnz - stored_zero
