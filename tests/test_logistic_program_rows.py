"""logistic_program builds its log-sum-exp rows from the CSR arrays of X directly; they equal the rows scipy's
stack, per-class sum and row permutation made (the construction it replaced), entry for entry."""
import numpy as np
import pytest
import scipy.sparse as sp

from varopt.formulations.logistic import logistic_program


def _reference_rows(X, C, fit_intercept):
    """The padded rows as stacked blocks permuted to sample-major order (the former construction)."""
    X = sp.csr_matrix(X, dtype=float)
    t, d = X.shape
    if C == 2:
        Xa = sp.hstack([X, np.ones((t, 1))]).tocsr() if fit_intercept else X
        A = sp.vstack([sp.csr_matrix((t, Xa.shape[1])), Xa]).tocsr()
        perm = np.empty(2 * t, dtype=np.int64)
        perm[0::2], perm[1::2] = np.arange(t), t + np.arange(t)
        return A[perm]
    n = C * (d + (1 if fit_intercept else 0))
    blocks = []
    for c in range(C):
        M = sp.csr_matrix((X.data, (np.arange(d) + c * d)[X.indices], X.indptr), shape=(t, n))
        if fit_intercept:
            M = M + sp.csr_matrix((np.ones(t), (np.arange(t), np.full(t, C * d + c))), shape=(t, n))
        blocks.append(M)
    return sp.vstack(blocks).tocsr()[(np.arange(C)[None, :] * t + np.arange(t)[:, None]).ravel()]


@pytest.mark.parametrize("C", [2, 3, 5])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("kind", ["dense", "sparse", "unsorted"])
def test_rows_equal_the_stacked_construction(C, fit_intercept, kind):
    rng = np.random.default_rng(C)
    X = rng.normal(size=(60, 9))
    X[rng.random(X.shape) < 0.4] = 0.0
    X[3] = 0.0      # a sample without features
    if kind != "dense":
        X = sp.csr_matrix(X)
        if kind == "unsorted":   # every row's entries reversed
            for i in range(X.shape[0]):
                a, b = X.indptr[i], X.indptr[i + 1]
                X.indices[a:b], X.data[a:b] = X.indices[a:b][::-1].copy(), X.data[a:b][::-1].copy()
            X.has_sorted_indices = False
    y = np.arange(60) % C
    A = logistic_program(X, y, 0.5, fit_intercept=fit_intercept).objective.lse[0].A
    ref = _reference_rows(X, C, fit_intercept)
    ref.sort_indices()
    assert A.shape == ref.shape
    np.testing.assert_array_equal(A.indptr, ref.indptr)
    np.testing.assert_array_equal(A.indices, ref.indices)
    np.testing.assert_array_equal(A.data, ref.data)
