"""The tracer's linear maps without their matrices (varopt.frontends.cvxpy_nodes): ``_Node.take`` (indexing,
permutations, broadcasts of one entry), ``_Node.sum_all`` / ``_Node.reduce`` (sums), against ``_Node.apply`` with
the explicit matrices, to the last bit of every array; and the index helpers they use (``core.csr.ranges``, the
groups of a matrix's row and column sums, ``_repeat_diag``) against their plain numpy / scipy definitions.

``apply`` takes different paths for different operands (an empty matrix, one entry per row in distinct columns,
a canonical matrix with stored zeros, duplicates and unsorted rows), so the nodes below hold every kind in every
part, and constants with ``-0.0`` (a product with unit weights sums from ``0.0`` and returns ``0.0``)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from varopt.core.csr import ranges
from varopt.frontends import cvxpy_nodes as nodes


def _arrays_equal(P, Q):
    """Two csr matrices with the same shape and the same stored arrays, bit for bit."""
    k = P.indptr[-1]
    return (P.shape == Q.shape and k == Q.indptr[-1] and np.array_equal(P.indptr, Q.indptr)
            and np.array_equal(P.indices[:k], Q.indices[:k]) and P.data[:k].tobytes() == Q.data[:k].tobytes())


def _nodes_equal(a, b):
    parts = [(a.A, b.A)] + [(W, V) for (_, W), (_, V) in zip(a.Q + a.rows + a.lse, b.Q + b.rows + b.lse)]
    return (a.shape == b.shape and a.m == b.m and a.c.tobytes() == b.c.tobytes()
            and len(a.Q) == len(b.Q) and len(a.rows) == len(b.rows) and len(a.lse) == len(b.lse)
            and all(_arrays_equal(P, Q) for P, Q in parts))


def _kinds(rng, m, n):
    """csr matrices with ``m`` rows of every kind ``apply`` distinguishes."""
    perm = rng.permutation(n)[:m] if m <= n else rng.integers(0, n, m)
    selection = nodes._csr_raw(rng.standard_normal(m), perm, np.arange(m + 1), (m, n))
    unit = nodes._csr_raw(np.ones(m), perm, np.arange(m + 1), (m, n))
    general = sp.random(m, n, density=0.4, format="csr", random_state=rng)
    zeros = general.copy()
    if zeros.nnz:
        zeros.data[::3] = 0.0  # canonical, with stored zeros (x - x before the zeros are dropped)
    # duplicates and unsorted rows (a sum left by CVXPY's own matrices)
    r = rng.integers(0, m, 3 * m)
    c = rng.integers(0, n, 3 * m)
    srt = np.argsort(r, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=m))])
    dup = sp.csr_matrix((rng.standard_normal(3 * m)[srt], c[srt], indptr), shape=(m, n))
    dup.has_canonical_format = False
    return {"empty": nodes._empty(m, n), "selection": selection, "unit": unit, "general": general,
            "stored zeros": zeros, "duplicates": dup}


def _node(rng, shape, n, kind_A, kind_W):
    m = int(np.prod(shape)) if shape else 1
    mats = _kinds(rng, m, n)
    c = rng.standard_normal(m)
    c[::4] = -0.0
    c[1::5] = 0.0
    rows = nodes._Rows("square", sp.random(n, 6, density=0.5, format="csr", random_state=rng), rng.standard_normal(n))
    W = _kinds(rng, m, n)[kind_W]
    return nodes._Node(shape, 6, mats[kind_A][:, :6].tocsr() if kind_A != "empty" else nodes._empty(m, 6), c,
                       Q=[(nodes._QTerms(np.arange(n), np.arange(n)), W)], rows=[(rows, W)],
                       lse=[(nodes._Lse(sp.random(n, 6, density=0.5, format="csr", random_state=rng),
                                        np.zeros(n), np.arange(n)), W)])


KINDS = ["empty", "selection", "unit", "general", "stored zeros", "duplicates"]


@pytest.mark.parametrize("kind", KINDS)
def test_take_is_apply_with_the_selection_matrix(kind):
    rng = np.random.default_rng(KINDS.index(kind))
    for shape in [(7,), (4, 3), (1,)]:
        z = _node(rng, shape, 12, kind, kind)
        m = z.m
        for src in [np.arange(m), rng.permutation(m), rng.integers(0, m, 9), np.zeros(5, np.int64),
                    np.arange(m)[1:-1], np.arange(0)]:
            src = np.asarray(src, dtype=np.int64)
            L = nodes._csr_raw(np.ones(src.size), src, np.arange(src.size + 1), (src.size, m))
            want = z.apply(L, (src.size,))
            got = z.take(src, (src.size,))
            assert _nodes_equal(got, want), (shape, src)


@pytest.mark.parametrize("kind", KINDS)
def test_sum_all_is_apply_with_the_row_of_ones(kind):
    rng = np.random.default_rng(10 + KINDS.index(kind))
    for shape in [(7,), (4, 3), (2,)]:
        z = _node(rng, shape, 12, kind, kind)
        want = z.apply(nodes._group_matrix(np.zeros(z.m, np.int64), 1), ())
        assert _nodes_equal(z.sum_all(()), want), shape
        assert _nodes_equal(z.reduce(None, ()), want), shape
    # the constant: a sequential sum (the product's order), not numpy's pairwise one
    c = np.array([1e16, 1.0, -1e16, 1.0] * 5 + [0.1] * 20)
    z = nodes._Node((c.size,), 3, c=c)
    want = z.apply(nodes._group_matrix(np.zeros(c.size, np.int64), 1), ())
    assert z.sum_all(()).c.tobytes() == want.c.tobytes()
    for c in (np.array([-0.0, -0.0]), np.array([-0.0, 2.0, -2.0])):
        z = nodes._Node((c.size,), 3, c=c)
        want = z.apply(nodes._group_matrix(np.zeros(c.size, np.int64), 1), ())
        assert z.sum_all(()).c.tobytes() == want.c.tobytes()


def test_reduce_over_axes_is_the_group_matrix():
    rng = np.random.default_rng(3)
    z = _node(rng, (4, 3), 12, "general", "stored zeros")
    for axis in (0, 1, -1, (0,), (1,), (0, 1)):
        pos, m_out = nodes._axis_groups(z.shape, axis)
        want = z.apply(nodes._group_matrix(pos, m_out), (m_out,))
        assert _nodes_equal(z.reduce(axis, (m_out,)), want)


@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (1, 4), (6, 3), (3, 6)])
def test_row_and_column_groups_are_numpys_multi_index(shape):
    idx = np.indices(shape).reshape(len(shape), -1, order="F")
    for axis, keep in ((1, 0), (0, 1), (-1, 0), (-2, 1), ((1,), 0)):
        pos, m_out = nodes._axis_groups(shape, axis)
        assert pos.dtype == np.int64 and m_out == shape[keep]
        np.testing.assert_array_equal(pos, idx[keep])
    pos3, m3 = nodes._axis_groups((2, 3, 4), 1)  # other dimensions keep the general construction
    idx3 = np.indices((2, 3, 4)).reshape(3, -1, order="F")
    np.testing.assert_array_equal(pos3, np.ravel_multi_index((idx3[0], idx3[2]), (2, 4), order="F"))
    assert m3 == 8


def test_ranges_are_concatenated_aranges():
    rng = np.random.default_rng(4)
    for _ in range(50):
        k = int(rng.integers(0, 12))
        starts = rng.integers(0, 100, k)
        counts = rng.integers(0, 5, k)
        want = np.concatenate([np.zeros(0, np.int64)] + [np.arange(s, s + c) for s, c in zip(starts, counts)])
        got = ranges(starts, counts)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


def test_repeat_diag_is_scipys_kron():
    rng = np.random.default_rng(5)
    for p, q, r in [(3, 4, 1), (3, 4, 3), (1, 5, 4), (6, 1, 2)]:
        C = sp.random(p, q, density=0.6, format="csr", random_state=rng)
        got = nodes._repeat_diag(C, r)
        want = sp.kron(sp.identity(r), C, format="csr")
        want.sort_indices()
        assert _arrays_equal(got, want)


def test_take_rows_is_scipys_row_indexing():
    from varopt.core.csr import take_rows
    rng = np.random.default_rng(6)
    for _ in range(30):
        m, n = int(rng.integers(1, 9)), int(rng.integers(1, 7))
        M = sp.random(m, n, density=0.5, format="csr", random_state=rng)
        for rows in (rng.integers(0, m, int(rng.integers(0, 12))), rng.permutation(m), np.arange(m)[::-1],
                     np.arange(1, m)):
            got = take_rows(M, rows)
            want = M[np.asarray(rows, dtype=np.int64)]
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.indptr, want.indptr)
            np.testing.assert_array_equal(got.indices, want.indices)
            assert got.data.tobytes() == want.data.tobytes()
