"""The sparse helpers of the CVXPY tracer (varopt.frontends.cvxpy_nodes) against scipy's own constructions.

The tracer builds its csr matrices from their arrays without scipy's constructor checks and skips sparse
products whose result has a simple form; every such shortcut must give exactly the matrix scipy gives.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from varopt.frontends import cvxpy_nodes as nodes


def _random_csr(rng, m, n, density=0.3, dup=False):
    M = sp.random(m, n, density=density, format="coo", random_state=rng)
    if dup and M.nnz:  # repeated (row, col) pairs and unsorted rows, as CVXPY's sums leave them
        r = np.concatenate([M.row, M.row[::-1]])
        c = np.concatenate([M.col, M.col[::-1]])
        d = np.concatenate([M.data, -0.5 * M.data[::-1]])
        order = rng.permutation(r.size)
        r, c, d = r[order], c[order], d[order]
        srt = np.argsort(r, kind="stable")
        r, c, d = r[srt], c[srt], d[srt]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=m))])
        return sp.csr_matrix((d, c, indptr), shape=(m, n))
    return M.tocsr()


def test_unchecked_constructor_is_scipys_matrix():
    assert nodes._unchecked_works()  # this scipy: the fast constructor is in use
    assert nodes._csr_raw is nodes._csr_unchecked
    rng = np.random.default_rng(0)
    for m, n in [(0, 3), (3, 0), (1, 1), (7, 5), (40, 90)]:
        M = _random_csr(rng, m, n, dup=True) if m and n else sp.csr_matrix((m, n))
        F = nodes._csr_unchecked(M.data, M.indices.astype(np.int64), M.indptr.astype(np.int64), M.shape)
        assert type(F) is sp.csr_matrix and F.shape == M.shape and F.nnz == M.nnz
        assert F.indices.dtype == F.indptr.dtype == np.int32  # what scipy's constructor chooses
        F.check_format(full_check=True)
        np.testing.assert_array_equal(F.toarray(), M.toarray())
        v = rng.standard_normal(n)
        np.testing.assert_array_equal(F @ v, M @ v)
        if m and n:
            np.testing.assert_allclose((F.T @ F + M.T @ M).toarray(), 2 * (M.T @ M).toarray(), rtol=1e-14,
                                       atol=1e-14)


def test_unchecked_constructor_falls_back_when_the_self_test_fails(monkeypatch):
    def broken(data, indices, indptr, shape):
        M = sp.csr_matrix((data, indices, indptr), shape=shape)
        M._shape = (shape[1], shape[0])  # a scipy whose layout the fast constructor gets wrong
        return M
    monkeypatch.setattr(nodes, "_csr_unchecked", broken)
    assert not nodes._unchecked_works()


def test_matmul_matches_scipy_for_every_operand_kind():
    rng = np.random.default_rng(1)
    m, k, n = 6, 9, 11
    L = _random_csr(rng, m, k, density=0.5)
    sel = sp.csr_matrix((rng.standard_normal(k), rng.permutation(n)[:k], np.arange(k + 1)), shape=(k, n))
    repeated = sp.csr_matrix((np.ones(k), np.zeros(k, int), np.arange(k + 1)), shape=(k, n))  # one column
    cases = {"general": _random_csr(rng, k, n), "duplicates": _random_csr(rng, k, n, dup=True),
             "empty": sp.csr_matrix((k, n)), "selection": sel, "repeated column": repeated,
             "diagonal": nodes._diagonal(rng.standard_normal(k))[:, :k].tocsr()}
    for name, M in cases.items():
        if M.shape[0] != k:
            continue
        got = nodes._matmul(L, M)
        assert got.shape == (m, M.shape[1]), name
        np.testing.assert_allclose(got.toarray(), (L @ M).toarray(), rtol=1e-15, atol=1e-15, err_msg=name)
    # the selection answer is remembered on the matrix and right
    assert sel._varopt_selection is True and repeated._varopt_selection is False


def test_structural_matrices_match_scipy_constructions():
    rng = np.random.default_rng(2)
    d = rng.standard_normal(8)
    d[[1, 5]] = 0.0
    D = nodes._diagonal(d)
    np.testing.assert_array_equal(D.toarray(), np.diag(d))
    assert D.nnz == 6  # zeros are not stored (as sp.diags(...).tocsr() drops them)
    pos = rng.integers(0, 4, size=13)
    G = nodes._group_matrix(pos, 5)
    ref = sp.csr_matrix((np.ones(13), (pos, np.arange(13))), shape=(5, 13))
    np.testing.assert_array_equal(G.toarray(), ref.toarray())
    assert G.has_canonical_format
    G1 = nodes._group_matrix(np.zeros(7, dtype=np.int64), 1)  # the sum of everything
    np.testing.assert_array_equal(G1.toarray(), np.ones((1, 7)))
    G1.check_format(full_check=True)
    W = _random_csr(rng, 4, 6, dup=True)
    (_, P), = nodes._pad([("x", W)], 3, 10)
    np.testing.assert_array_equal(P.toarray(), np.vstack([np.zeros((3, 6)), W.toarray(), np.zeros((3, 6))]))
    A1, A2 = _random_csr(rng, 5, 7), _random_csr(rng, 5, 7)
    ((terms, Wq),) = nodes._bilinear(A1, A2, 7)
    x = rng.standard_normal(7)
    np.testing.assert_allclose(Wq @ (x[terms.i] * x[terms.j]), (A1 @ x) * (A2 @ x), rtol=1e-13, atol=1e-13)


def test_scaling_and_canonical_copies_leave_shared_arrays_alone():
    """A scaled node owns its index arrays (an in-place sort of one matrix must not permute another's indices
    under its unchanged data); putting a matrix into canonical form (sorting, summing duplicates, done in place by
    scipy) copies first and leaves the others unchanged."""
    rng = np.random.default_rng(3)
    A = _random_csr(rng, 5, 8, dup=True)
    assert not A.has_canonical_format
    z = nodes._Node((5,), 8, A, np.zeros(5))
    before = z.A.toarray().copy(), z.A.indices.copy(), z.A.data.copy()
    d = rng.uniform(1.0, 2.0, 5)
    s = z.scale(d)
    assert not np.shares_memory(s.A.indices, z.A.indices) and not np.shares_memory(s.A.indptr, z.A.indptr)
    np.testing.assert_allclose(s.A.toarray(), d[:, None] * before[0], rtol=1e-15)
    C = nodes._canonical(s.A)
    assert C.has_canonical_format and C is not s.A
    np.testing.assert_allclose(C.toarray(), d[:, None] * before[0], rtol=1e-15)
    np.testing.assert_array_equal(z.A.indices, before[1])
    np.testing.assert_array_equal(z.A.data, before[2])
    np.testing.assert_allclose(s.A.toarray(), d[:, None] * before[0], rtol=1e-15)
    canon = A.copy()
    canon.sum_duplicates()
    assert nodes._canonical(canon) is canon


@pytest.mark.parametrize("rows_per_entry", [1, 3])
def test_whole_sets_are_shared_and_partial_ones_copied(rows_per_entry):
    rng = np.random.default_rng(4)
    G = 4
    seg = np.repeat(np.arange(G), rows_per_entry)
    lse = nodes._Lse(_random_csr(rng, seg.size, 5), rng.standard_normal(seg.size), seg)
    assert lse.take_groups(np.arange(G)) is lse
    part = lse.take_groups(np.array([2, 0]))
    assert part is not lse and part.G == 2
    np.testing.assert_array_equal(part.A.toarray(), np.vstack([lse.A.toarray()[seg == 2], lse.A.toarray()[seg == 0]]))
    rows = nodes._Rows("square", _random_csr(rng, 6, 5), rng.standard_normal(6))
    assert rows.take(np.arange(6)) is rows
    back = rows.take(np.arange(6)[::-1])
    np.testing.assert_array_equal(back.A.toarray(), rows.A.toarray()[::-1])
    np.testing.assert_array_equal(back.b, rows.b[::-1])


def test_shared_unsorted_rows_survive_program_construction():
    """``C @ x[::-1]`` has rows with decreasing column indices; its node is shared by the objective's square
    atoms (the Program sorts atom rows into canonical form) and by a scaled constraint body (which shares index
    arrays with it). Every constraint row and the objective must still equal CVXPY's values at random points."""
    import cvxpy as cp

    from varopt.frontends.cvxpy_compile import compile_cvxpy
    rng = np.random.default_rng(6)
    x = cp.Variable(6, name="x")
    C = rng.standard_normal((4, 6))
    Z = C @ x[::-1]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(Z) + cp.sum(cp.exp(Z))), [cp.multiply(2.0, Z) <= 1.0, Z >= -3.0])
    program, mapping = compile_cvxpy(prob)
    for _ in range(5):
        pt = rng.standard_normal(6)
        x.value = pt
        assert abs(program.objective.value(pt) - prob.objective.value) <= 1e-12 * max(1.0, abs(prob.objective.value))
        body = np.array([c.body.value(pt) for c in program.constraints])
        z = C @ pt[::-1]
        np.testing.assert_allclose(body[:4], 2.0 * z - 1.0 if program.constraints[0].hi == 0 else 2.0 * z,
                                   rtol=1e-13, atol=1e-13)


def test_unchecked_constructor_falls_back_when_scipy_sets_another_attribute(monkeypatch):
    """A scipy whose constructor sets an instance attribute the fast constructor does not: fall back."""
    real = nodes._csr_checked

    def with_extra(data, indices, indptr, shape):
        M = real(data, indices, indptr, shape)
        M._new_private_state = 1
        return M
    monkeypatch.setattr(nodes, "_csr_checked", with_extra)
    assert not nodes._unchecked_works()


def test_csr_sum_of_column_disjoint_operands_matches_scipy():
    """``_csr_sum`` merges the rows of operands whose columns do not interleave (``X @ w + b``) from their arrays;
    any other pair goes through scipy. Either way: scipy's sum, canonical, stored zeros dropped as scipy drops
    them."""
    rng = np.random.default_rng(7)
    for trial in range(200):
        m = int(rng.integers(1, 7))
        na, nb = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        n = na + nb
        left = _random_csr(rng, m, na, density=0.6)
        right = _random_csr(rng, m, nb, density=0.6)
        A = sp.hstack([left, sp.csr_matrix((m, nb))], format="csr")
        B = sp.hstack([sp.csr_matrix((m, na)), right], format="csr")
        if trial % 3 == 1:
            A, B = B, A  # the later columns first
        elif trial % 3 == 2:
            B = _random_csr(rng, m, n, density=0.6)  # interleaved columns: scipy's sum
        if trial % 4 == 0 and A.nnz:
            A = A.copy()
            A.data[0] = 0.0  # a stored zero
        if not (A.nnz and B.nnz):
            continue
        A, B = nodes._csr(A), nodes._csr(B)
        S = nodes._csr_sum(A, B)
        ref = A + B
        S.check_format(full_check=True)
        assert S.has_canonical_format and S.shape == ref.shape and S.nnz == ref.nnz, trial
        np.testing.assert_array_equal(S.toarray(), ref.toarray())


def test_shared_empty_matrices_cannot_be_written():
    """Small empty matrices are shared by the nodes that hold them: a write into one must fail loudly instead of
    changing every node."""
    a, b = nodes._Node((3,), 5).A, nodes._Node((3,), 5).A
    assert a is b and a.shape == (3, 5) and a.nnz == 0
    with pytest.raises(ValueError):
        a.indptr[1] = 1
    big = nodes._empty(nodes._EMPTY_SHARED_ROWS + 1, 2)
    assert big is not nodes._empty(nodes._EMPTY_SHARED_ROWS + 1, 2) and big.nnz == 0


def test_scalar_scale_matches_the_vector_scale():
    rng = np.random.default_rng(8)
    A = _random_csr(rng, 5, 7, dup=True)
    rows = nodes._Rows("square", _random_csr(rng, 4, 7), rng.standard_normal(4))
    z = nodes._Node((5,), 7, A, rng.standard_normal(5), rows=[(rows, _random_csr(rng, 5, 4))])
    for d in (-1.0, 2.5, np.array([0.75]), np.float64(-3.0)):
        s, v = z.scale(d), z.scale(np.full(5, float(np.ravel(d)[0])))
        np.testing.assert_array_equal(s.A.toarray(), v.A.toarray())
        np.testing.assert_array_equal(s.c, v.c)
        np.testing.assert_array_equal(s.rows[0][1].toarray(), v.rows[0][1].toarray())
        assert not np.shares_memory(s.A.indices, z.A.indices)


@pytest.mark.parametrize("key", [np.s_[:5], np.s_[5:10], np.s_[::3], np.s_[-4:], np.s_[7:2:-2], np.s_[3],
                                 np.s_[1:, 2], np.s_[::-1, 1:3], np.s_[2, ::2]])
def test_sliced_index_compiles_to_cvxpys_entries(key, monkeypatch):
    """``x[slices]`` takes the tracer's own selection (no CVXPY ``numeric``); the compiled objective and
    constraint rows must equal CVXPY's values of the same expressions at random points."""
    import cvxpy as cp

    from varopt.frontends.cvxpy_affine import _AffineTracer
    from varopt.frontends.cvxpy_compile import compile_cvxpy

    def no_numeric(self, expr, shape):
        raise AssertionError(f"{type(expr).__name__} took the generic selection")
    monkeypatch.setattr(_AffineTracer, "_selection", no_numeric)
    rng = np.random.default_rng(9)
    shape = (12,) if not isinstance(key, tuple) else (4, 5)
    x = cp.Variable(shape, name="x")
    e = x[key]
    c = rng.standard_normal(e.shape)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(e - 1.0) + cp.sum(cp.multiply(c, e))), [e <= 2.0])
    program, _ = compile_cvxpy(prob)
    for _ in range(4):
        pt = rng.standard_normal(int(np.prod(shape)))
        x.value = pt.reshape(shape)  # program columns are the entries in C order
        assert abs(program.objective.value(pt) - prob.objective.value) <= 1e-12 * max(1.0, abs(prob.objective.value))
        body = np.array([k.body.value(pt) for k in program.constraints])
        want = np.asarray(e.value, dtype=float).ravel(order="C") - 2.0
        np.testing.assert_allclose(body - np.array([k.hi for k in program.constraints]), want, rtol=1e-13,
                                   atol=1e-13)


def test_products_with_at_most_one_entry_per_row_match_scipy():
    """``L @ M`` with ``L`` a partial diagonal, a selection with repeats or a broadcast gathers ``M``'s rows; the
    result equals scipy's product, stored zeros dropped as scipy drops them; row indexing by arrays as scipy's."""
    from varopt.core.csr import take_rows
    rng = np.random.default_rng(10)
    for trial in range(100):
        m, k, n = int(rng.integers(1, 8)), int(rng.integers(1, 8)), int(rng.integers(1, 8))
        M = _random_csr(rng, k, n, density=0.5)
        if trial % 3 == 0 and M.nnz:
            M.data[rng.integers(M.nnz)] = 0.0  # a stored zero
        has = rng.random(m) < 0.7
        cols = rng.integers(0, k, m)[has]
        vals = rng.choice([-2.0, 0.5, 1.0, 0.0], cols.size)
        L = sp.csr_matrix((vals, cols, np.concatenate([[0], np.cumsum(has)])), shape=(m, k))
        assert nodes._at_most_one_per_row(L)
        got = nodes._scaled_rows(L, nodes._csr(M))
        ref = (L @ M).tocsr()
        got.check_format(full_check=True)
        np.testing.assert_array_equal(got.toarray(), ref.toarray())
        assert got.nnz == ref.nnz, trial
        np.testing.assert_array_equal(nodes._matmul(nodes._csr(L), nodes._csr(M)).toarray(), ref.toarray())
        rows = rng.integers(0, k, int(rng.integers(0, 6)))
        T = take_rows(nodes._csr(M), rows)
        T.check_format(full_check=True)
        np.testing.assert_array_equal(T.toarray(), M[rows].toarray())
    two = sp.csr_matrix(np.array([[1.0, 1.0], [0.0, 1.0]]))
    assert not nodes._at_most_one_per_row(two)


def test_take_rows_of_consecutive_rows_is_scipys_indexing_with_own_arrays():
    """Consecutive rows (a block, the rows kept after singleton rows leave) are sliced from the arrays: the same
    matrix as scipy's ``M[rows]`` in canonical form, for every block of random matrices (empty rows, a stored zero,
    int32 and int64 indices), and arrays the result owns (writing to them leaves ``M`` unchanged)."""
    from varopt.core.csr import take_rows
    rng = np.random.default_rng(11)
    for trial in range(60):
        k, n = int(rng.integers(1, 9)), int(rng.integers(1, 7))
        M = nodes._csr(_random_csr(rng, k, n, density=0.4))
        if trial % 4 == 0 and M.nnz:
            M.data[rng.integers(M.nnz)] = 0.0
        if trial % 2:
            M = sp.csr_matrix((M.data, M.indices.astype(np.int64), M.indptr.astype(np.int64)), shape=M.shape)
        before = M.toarray()
        for r0 in range(k):
            for r1 in range(r0 + 1, k + 1):
                rows = np.arange(r0, r1)
                T = take_rows(M, rows)
                T.check_format(full_check=True)
                ref = M[rows]
                np.testing.assert_array_equal(T.toarray(), ref.toarray())
                np.testing.assert_array_equal(T.indptr, ref.indptr)
                np.testing.assert_array_equal(T.indices, ref.indices)
                np.testing.assert_array_equal(T.data, ref.data)
                T.data[:] = 7.0
                T.indices[:] = 0
                np.testing.assert_array_equal(M.toarray(), before)
        for rows in (np.array([0, 0]), np.array([1, 0]), np.zeros(0, dtype=np.int64)):  # not a block: gathered
            rows = rows[rows < k]
            np.testing.assert_array_equal(take_rows(M, rows).toarray(), M[rows].toarray())


def test_scalar_diagonal_is_a_scaled_identity():
    for d in (1.0, -2.5, np.float64(3.0)):
        D = nodes._diagonal(d, 4)
        D.check_format(full_check=True)
        np.testing.assert_array_equal(D.toarray(), d * np.eye(4))
        assert nodes._one_per_row_distinct(D)
    Z = nodes._diagonal(0.0, 3)
    assert Z.shape == (3, 3) and Z.nnz == 0
    np.testing.assert_array_equal(nodes._diagonal(np.array([1.0, 0.0, 2.0])).toarray(), np.diag([1.0, 0.0, 2.0]))


def test_constant_nodes_own_their_entries():
    """A traced constant never shares memory with the user's array (the node's entries feed the Program's offsets)."""
    import cvxpy as cp

    from varopt.frontends.cvxpy_affine import _AffineTracer
    c = np.arange(6.0)
    tracer = _AffineTracer({}, 0)
    for val, shape in ((c, (6,)), (c.reshape(2, 3), (2, 3)), (np.float64(2.0), (3,))):
        k = cp.Constant(val)
        z = tracer.trace(k) if np.shape(val) == shape else tracer.const_node(shape, val)
        assert not np.shares_memory(z.c, c) and not np.shares_memory(z.c, k.value)
        np.testing.assert_array_equal(z.c, np.broadcast_to(val, shape).ravel(order="F"))


def test_one_row_products_are_scipys_to_the_last_bit():
    """``sum(...)`` of a node is a one-row ``L`` times its matrices; the bincount path must give scipy's product
    exactly (same summation order), zero sums dropped, and a non-canonical ``L`` goes to scipy."""
    rng = np.random.default_rng(12)
    for trial in range(60):
        m, n = int(rng.integers(1, 30)), int(rng.integers(1, 9))
        M = _random_csr(rng, m, n, density=0.6, dup=trial % 4 == 0)
        M.data *= 10.0 ** rng.integers(-8, 8, M.nnz)  # magnitudes that make the summation order visible
        L = _random_csr(rng, 1, m, density=rng.uniform(0.2, 1.0))
        if trial % 5 == 0 and M.nnz:  # a column whose entries cancel exactly
            M = M.tolil()
            M[:, 0] = 0.0
            rows = np.flatnonzero(L.toarray()[0])
            if rows.size >= 2:
                M[rows[0], 0] = 1.0 / L[0, rows[0]]
                M[rows[1], 0] = -1.0 / L[0, rows[1]]
            M = M.tocsr()
        got = nodes._matmul(nodes._csr(L), nodes._csr(M))
        ref = (L @ M).tocsr()
        ref.sort_indices()
        got.check_format(full_check=True)
        assert got.nnz == ref.nnz, trial
        np.testing.assert_array_equal(got.indices, ref.indices)
        np.testing.assert_array_equal(got.data, ref.data)  # bitwise


@pytest.mark.parametrize("seed", range(4))
def test_expressions_from_traced_rows_equal_the_checked_construction(seed):
    """``_to_expressions`` hands canonical csr rows to ``Expression.from_sorted_row`` (no per-row checks): the same
    expressions as ``Expression(n, c, (idx, val))``, including rows with stored zeros (dropped), empty rows and rows
    dense enough for dense storage; ``from_sorted_row`` itself equals the checked constructor."""
    from varopt.frontends.cvxpy_compile import _to_expressions
    from varopt.program import Expression
    rng = np.random.default_rng(seed)
    m, n = 7, 30
    D = rng.standard_normal((m, n)) * (rng.random((m, n)) < 0.08)
    D[3] = 0.0  # an empty row
    D[5] = rng.standard_normal(n)  # dense storage
    # a stored zero in row 0, next to real entries (canonical: sorted, no duplicates)
    r0 = sorted(set(np.flatnonzero(D[0]).tolist()) | {1, 2})
    data = [D[0, j] if j not in (1, 2) or D[0, j] else 0.0 for j in r0]
    rows = [np.array(r0)] + [np.flatnonzero(D[i]) for i in range(1, m)]
    vals = [np.array(data)] + [D[i, np.flatnonzero(D[i])] for i in range(1, m)]
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])])
    Z = sp.csr_matrix((np.concatenate(vals), np.concatenate(rows), indptr), shape=(m, n))
    assert Z.has_canonical_format and not np.all(Z.data)
    c = rng.standard_normal(m)
    node = nodes._Node((m,), n, Z, c)
    got = _to_expressions(node, n)
    for i, e in enumerate(got):
        ref = Expression(n, c[i], (Z.indices[Z.indptr[i]:Z.indptr[i + 1]], Z.data[Z.indptr[i]:Z.indptr[i + 1]]))
        gi, gv = e.linear_items()
        ri, rv = ref.linear_items()
        np.testing.assert_array_equal(gi, ri)
        np.testing.assert_array_equal(gv, rv)
        assert np.all(gv != 0) and gi.dtype == np.int64
        assert e.constant == ref.constant and e.n == n and e.is_linear
        x = rng.standard_normal(n)
        assert e.value(x) == pytest.approx(ref.value(x), rel=1e-15, abs=1e-15)
    # the caller's node is untouched (its stored zero stays: traced matrices share arrays)
    assert not np.all(node.A.data)
    idx, val = np.array([2, 5, 9]), np.array([1.5, -2.0, 0.25])
    a, b = Expression.from_sorted_row(n, 0.5, idx, val, Expression(n).quadratic), Expression(n, 0.5, (idx, val))
    assert vars(a).keys() == vars(b).keys()
    for k in vars(b):
        va, vb = getattr(a, k), getattr(b, k)
        if isinstance(vb, np.ndarray):
            np.testing.assert_array_equal(va, vb)
        elif k != "quadratic":
            assert va == vb


def test_dense_to_csr_is_scipys_construction_and_owns_its_arrays():
    """Dense constants of ``@`` become csr from their arrays: scipy's ``csr_matrix(val)`` array by array (data,
    indices, indptr) for arrays with and without zeros, all zeros, empty dimensions, broadcast and Fortran-ordered
    views; the result never shares memory with ``val`` (the program sorts its matrices in place)."""
    from varopt.core.csr import dense_to_csr
    rng = np.random.default_rng(12)
    cases = [np.zeros((0, 3)), np.zeros((3, 0)), np.zeros((2, 3)), np.ones((1, 1)),
             np.broadcast_to(np.arange(1.0, 4.0), (5, 3)), np.asfortranarray(rng.normal(size=(4, 6)))]
    for trial in range(40):
        p, q = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        val = rng.normal(size=(p, q))
        if trial % 2:
            val[rng.random((p, q)) < 0.4] = 0.0
        cases.append(val)
    for val in cases:
        M = dense_to_csr(val)
        ref = sp.csr_matrix(val)
        M.check_format(full_check=True)
        assert M.shape == ref.shape
        np.testing.assert_array_equal(M.indptr, ref.indptr)
        np.testing.assert_array_equal(M.indices, ref.indices)
        np.testing.assert_array_equal(M.data, ref.data)
        assert M.indices.dtype == ref.indices.dtype and M.indptr.dtype == ref.indptr.dtype
        assert not np.shares_memory(M.data, val)


@pytest.mark.parametrize("case", [((2, 3), (3, 2), "F"), ((2, 3), (3, 2), "C"), ((6,), (2, 3), "C"),
                                  ((6,), (2, 3), "F"), ((2, 3), (6,), "C"), ((3,), (1, 3), "C"),
                                  ((4, 1), (2, 2), "C"), ((1,), (), "C")])
def test_reshape_compiles_to_cvxpys_entries(case, monkeypatch):
    """``reshape`` (and ``vec``) take the tracer's own permutation (no CVXPY ``numeric``; column-major and identity
    permutations share the argument's matrices): the compiled objective -- linear, square and log-sum-exp entries
    of reshaped expressions, each with its own weight -- and the rows of a reshaped constraint equal CVXPY's values
    at random points."""
    import cvxpy as cp

    from varopt.frontends.cvxpy_affine import _AffineTracer
    from varopt.frontends.cvxpy_compile import compile_cvxpy

    generic = _AffineTracer._selection

    def no_numeric(self, expr, shape):
        assert type(expr).__name__ != "reshape", "reshape took the generic selection"
        return generic(self, expr, shape)
    monkeypatch.setattr(_AffineTracer, "_selection", no_numeric)
    src, dst, order = case
    rng = np.random.default_rng(13)
    x = cp.Variable(src, name="x")
    y = cp.Variable(3, name="y")
    aff = 2.0 * x + rng.standard_normal(src)
    Z = cp.reshape(cp.hstack([cp.vec(x, order="F"), y]), (int(np.prod(src)) + 3, 1), order="F") @ np.ones((1, 2))
    lse = cp.log_sum_exp(Z, axis=1)  # one group per entry of x and y
    k = int(np.prod(src))
    sizes = int(np.prod(dst))
    w1, w2, w3 = rng.standard_normal(dst), rng.random(dst) + 0.5, rng.random(dst) + 0.5
    r = cp.reshape(aff, dst, order=order)
    obj = (cp.sum(cp.multiply(w1, r)) + cp.sum(cp.multiply(w2, cp.square(cp.reshape(x, dst, order=order))))
           + cp.sum(cp.multiply(w3, cp.reshape(lse[:k], dst, order=order))))
    prob = cp.Problem(cp.Minimize(obj), [cp.reshape(x, dst, order=order) <= np.arange(sizes).reshape(dst)])
    program, _ = compile_cvxpy(prob)
    for _ in range(4):
        px, py = rng.standard_normal(k), rng.standard_normal(3)
        x.value, y.value = px.reshape(src), py
        pt = np.concatenate([px, py])  # program columns: x's entries in C order, then y
        assert abs(program.objective.value(pt) - prob.objective.value) <= 1e-12 * max(1.0, abs(prob.objective.value))
        body = np.array([c.body.value(pt) - c.hi for c in program.constraints])
        want = (np.reshape(px.reshape(src), dst, order=order) - np.arange(sizes).reshape(dst)).ravel(order="C")
        np.testing.assert_allclose(body, want, rtol=1e-13, atol=1e-13)


def test_constraints_against_constants_compile_to_cvxpys_residuals(monkeypatch):
    """A constraint between an expression and a constant (``x[:5] >= 0``, ``sum(x) <= 1``, ``M <= X``) takes the
    body ``g - c`` without a node for the constant (the general sum is not called); expressions that need
    broadcasting to the constant's shape take the general sum. Every compiled row equals CVXPY's residual of
    the same constraint at random points (each side's sign, scalar/vector/matrix constants in column-major
    broadcast, equality, a nonlinear side), and a NaN constant is still named."""
    import cvxpy as cp

    from varopt.errors import InputDataError
    from varopt.frontends import cvxpy_compile
    from varopt.frontends.cvxpy_compile import compile_cvxpy

    rng = np.random.default_rng(14)
    x = cp.Variable(6, name="x")
    X = cp.Variable((2, 3), name="X")
    t = cp.Variable(name="t")
    M = rng.standard_normal((2, 3))
    v = rng.standard_normal(6)
    cons = [x[:5] >= 0, cp.sum(x[2:5]) <= 0.5, X <= M, M >= 2 * X + 1, 0 <= X[:, 1], x == v,
            cp.square(x[1:3]) <= np.array([1.0, 2.0]), X >= 0.25, 1.5 >= cp.sum(X, axis=0),
            t <= v]  # the last broadcasts the expression: the general sum
    calls = []
    general = cvxpy_compile._add

    def counted(nodes, shape):
        calls.append(shape)
        return general(nodes, shape)
    monkeypatch.setattr(cvxpy_compile, "_add", counted)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x) + cp.sum_squares(X) + t ** 2), cons)
    program, _ = compile_cvxpy(prob)
    assert calls == [(6,)]  # only t <= v
    for _ in range(4):
        px, pX, pt = rng.standard_normal(6), rng.standard_normal((2, 3)), rng.standard_normal()
        x.value, X.value, t.value = px, pX, pt
        point = np.concatenate([px, pX.ravel(order="C"), [pt]])
        got = {}
        for c in program.constraints:
            k = int(c.name[1:].split("[")[0])
            side = c.hi if np.isfinite(c.hi) else c.lo
            got.setdefault(k, []).append(c.body.value(point) - side)
        for k, con in enumerate(cons):
            lhs, rhs = con.args
            flip = not lhs.variables() and rhs.variables()
            res = (rhs.value - lhs.value) if flip else (lhs.value - rhs.value)
            want = np.broadcast_to(res, np.broadcast_shapes(lhs.shape, rhs.shape)).ravel(order="C")
            np.testing.assert_allclose(got[k], want, rtol=1e-13, atol=1e-13, err_msg=str(con))
    bad = cp.Problem(cp.Minimize(cp.sum_squares(x)), [x <= np.array([1.0, np.nan, 0, 0, 0, 0])])
    with pytest.raises(InputDataError, match="NaN"):
        compile_cvxpy(bad)
