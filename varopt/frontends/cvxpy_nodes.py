"""Traced CVXPY nodes: the array-valued pieces the CVXPY compiler builds and combines.

Every traced CVXPY sub-expression becomes a :class:`_Node`: an array-valued function of
the program variables ``x`` (``n`` entries) with ``m`` entries, stored in CVXPY's
column-major (``'F'``) flattening order, of the form

``node(x)_e = c_e + A_e x + sum_k Q_{e,k} x_{i_k} x_{j_k}
             + sum_r W_{e,r} w_r g_r(u_r(x)) + sum_g V_{e,g} w_g lse_g(x)``

* ``A`` (``m x n``) sparse; quadratic terms ``x_{i_k} x_{j_k}`` (:class:`_QTerms`) mixed
  into the entries by sparse weights ``Q`` (``m x T``);
* atom rows ``w_r g(u_r)``, ``u_r = A^{row}_r x + b_r`` (:class:`_Rows`, one of the
  catalogue kinds of :mod:`varopt.program.terms`, optional multiplier ``w_r = x[mult_r]``),
  mixed into the entries by the sparse weights ``W`` (``m x R``);
* log-sum-exp groups (:class:`_Lse`), mixed in by ``V`` (``m x G``).

A linear map ``L`` (``m' x m``) acts on every part at once (``L A``, ``L c``, ``L Q``,
``L W``, ``L V``) without touching the rows (:meth:`_Node.apply`). This module also holds
the sparse index helpers (broadcast/selection matrices, axis reductions, the bilinear
product ``(A1_e x)(A2_e x)``) that the tracer (:mod:`.cvxpy_affine`, :mod:`.cvxpy_products`,
:mod:`.cvxpy_atoms`) uses. It imports nothing from CVXPY.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import scipy.sparse as sp

from ..core import csr as _csrmod

#: ``np.count_nonzero``: the tracer's tests of tiny arrays (``not _count(a != b)`` for ``(a == b).all()``) cost
#: ~0.5 us where numpy's ``all``/``any`` reductions cost ~2 us; a small compile makes dozens of them
_count = np.count_nonzero


def _shape(expr):
    return tuple(map(int, expr.shape))  # (map: a generator costs twice as much, and these run ~60 times a compile)


def _size(shape):
    return math.prod(map(int, shape))


class _Rows:
    """Atom rows ``w_r g(A_r x + b_r)`` of one kind, shared by nodes (immutable)."""

    __slots__ = ("kind", "A", "b", "mult", "A2", "b2", "label")

    def __init__(self, kind, A, b, mult=None, A2=None, b2=None, label=None):
        self.kind = kind
        self.A = _csr(A)
        self.b = np.asarray(b, dtype=float).ravel()
        R = self.A.shape[0]
        self.mult = np.full(R, -1, dtype=np.int64) if mult is None else np.asarray(mult, dtype=np.int64)
        self.A2 = None if A2 is None else _csr(A2)
        self.b2 = None if b2 is None else np.asarray(b2, dtype=float).ravel()
        self.label = np.zeros(R, dtype=np.int64) if label is None else np.asarray(label, dtype=np.int64)

    def take(self, idx, mult=None, label=None):
        idx = np.asarray(idx, dtype=np.int64)
        if mult is None and label is None and _is_range(idx, self.b.size):
            return self  # all rows in order (an entry that holds every row): immutable, shared
        take = _csrmod.take_rows
        return _Rows(self.kind, take(self.A, idx), self.b[idx], self.mult[idx] if mult is None else mult,
                     None if self.A2 is None else take(self.A2, idx), None if self.b2 is None else self.b2[idx],
                     self.label[idx] if label is None else label)


class _Lse:
    """Log-sum-exp groups ``w_g log sum_{k: seg_k = g} exp(A_k x + b_k)`` (immutable)."""

    __slots__ = ("A", "b", "seg", "mult", "starts", "label")

    def __init__(self, A, b, seg, mult=None, label=None):
        self.A = _csr(A)
        self.b = np.asarray(b, dtype=float).ravel()
        self.seg = np.asarray(seg, dtype=np.int64)
        G = int(self.seg[-1]) + 1 if self.seg.size else 0
        self.mult = np.full(G, -1, dtype=np.int64) if mult is None else np.asarray(mult, dtype=np.int64)
        self.starts = np.searchsorted(self.seg, np.arange(G + 1))
        self.label = np.zeros(G, dtype=np.int64) if label is None else np.asarray(label, dtype=np.int64)

    @property
    def G(self):
        return self.mult.size

    def take_groups(self, groups, mult=None, label=None):
        """New group set made of copies of ``groups`` (may repeat), in that order."""
        groups = np.asarray(groups, dtype=np.int64)
        if mult is None and label is None and _is_range(groups, self.G):
            return self  # all groups in order (the objective's single entry): immutable, shared
        cnt = self.starts[groups + 1] - self.starts[groups]
        rows = _ranges(self.starts[groups], cnt)
        seg = np.arange(groups.size).repeat(cnt)
        return _Lse(_csrmod.take_rows(self.A, rows), self.b[rows], seg, self.mult[groups] if mult is None else mult,
                    self.label[groups] if label is None else label)


def _is_range(idx, size):
    """Whether the index array ``idx`` is ``0, 1, ..., size - 1``."""
    return idx.size == size and (size == 0 or (idx[0] == 0 and idx[-1] == size - 1
                                               and not _count((idx[1:] - idx[:-1]) != 1)))


def _first_index(shape):
    """Index along the first axis of every (F-order) entry of ``shape``: the row's sample label."""
    m = _size(shape)
    return np.arange(m, dtype=np.int64) % shape[0] if shape else np.zeros(m, dtype=np.int64)


def _entries(sets, e, take):
    """``(group, W, slice, take(group, columns))`` for the groups whose CSR weight row ``e`` is nonempty."""
    for grp, W in sets:
        sl = slice(W.indptr[e], W.indptr[e + 1])
        if sl.stop > sl.start:
            yield grp, W, sl, take(grp, W.indices[sl])


_ranges = _csrmod.ranges


class _QTerms:
    """Products ``x_i x_j`` (one per column of a node's weight matrix; immutable)."""

    __slots__ = ("i", "j")

    def __init__(self, i, j):
        self.i = np.asarray(i, dtype=np.int64)
        self.j = np.asarray(j, dtype=np.int64)


def _pad(pairs, off, M):
    """Move the weight rows of ``(object, W)`` pairs down by ``off`` into ``M`` rows."""
    out = []
    for obj, W in pairs:
        W = _csr(W)
        k = W.indptr[-1]
        indptr = np.concatenate([np.zeros(off, np.int64), W.indptr, np.full(M - off - W.shape[0], k, np.int64)])
        out.append((obj, _csr_raw(W.data[:k], W.indices[:k], indptr, (M, W.shape[1]))))
    return out


def _csr(M):
    """``M`` as a csr matrix; one already of that type is used as it is (every ``sp.csr_matrix(M)`` re-runs
    scipy's format checks, a large part of compiling a small problem)."""
    return M if type(M) is sp.csr_matrix else sp.csr_matrix(M)


# csr matrices from known-valid arrays without scipy's constructor (varopt.core.csr; shared with the Program and
# the solvers); the names stay here for the tracer and its tests
_csr_checked = _csrmod.csr_checked
_csr_unchecked = _csrmod.csr_unchecked
_csr_raw = _csrmod.csr_raw


def _unchecked_works():
    """Whether this scipy's csr matrices work when built by :func:`_csr_unchecked` (see
    :func:`varopt.core.csr.unchecked_works`)."""
    return _csrmod.unchecked_works(_csr_unchecked, _csr_checked)


def _empty(m, n):
    """The empty ``m x n`` csr matrix; small ones are shared (traced matrices are never modified in place, and the
    in-place canonicalizations of the Program leave an empty matrix as it is)."""
    if m <= _EMPTY_SHARED_ROWS:
        return _empty_shared(int(m), int(n))
    return _csr_raw(np.zeros(0), np.zeros(0, np.int32), np.zeros(m + 1, np.int32), (m, n))


#: empty matrices with at most this many rows are shared (most nodes of a small problem have no linear part)
_EMPTY_SHARED_ROWS = 4096


@functools.lru_cache(maxsize=256)
def _empty_shared(m, n):
    M = _csr_raw(np.zeros(0), np.zeros(0, np.int32), np.zeros(m + 1, np.int32), (m, n))
    for a in (M.data, M.indices, M.indptr):
        a.flags.writeable = False  # shared: a write would change every node holding it
    return M


def _diagonal(d, m=None):
    """``diag(d)`` as csr without its zero entries (a selection, :func:`_one_per_row_distinct`, when none is zero);
    a scalar ``d`` with ``m`` is ``d I_m``."""
    if m is not None and np.ndim(d) == 0:
        d = float(d)
        if d != 0:
            M = _csr_raw(np.full(m, d), np.arange(m), np.arange(m + 1), (m, m))
            M._varopt_selection = True
            return M
        return _empty(m, m)
    d = np.asarray(d, dtype=float)
    keep = d != 0
    indptr = np.zeros(d.size + 1, dtype=np.int64)
    keep.cumsum(out=indptr[1:])
    M = _csr_raw(d[keep], np.flatnonzero(keep), indptr, (d.size, d.size))
    if indptr[-1] == d.size:  # no zero on the diagonal
        M._varopt_selection = True
    return M


def _group_matrix(pos, m_out):
    """The ``m_out x m`` 0/1 matrix summing input entry ``k`` into output entry ``pos[k]``."""
    pos = np.asarray(pos, dtype=np.int64)
    if m_out == 1:  # a sum of everything (cp.sum(x))
        return _csr_raw(np.ones(pos.size), np.arange(pos.size), np.array([0, pos.size]), (1, pos.size))
    order = np.argsort(pos, kind="stable")
    indptr = np.zeros(m_out + 1, dtype=np.int64)
    np.bincount(pos, minlength=m_out).cumsum(out=indptr[1:])
    return _csr_raw(np.ones(pos.size), order, indptr, (m_out, pos.size))


def _one_per_row_distinct(M):
    """Whether every row of csr ``M`` holds exactly one stored entry, in distinct columns (a selection). The answer
    is kept on ``M`` (traced matrices are never modified in place; a variable's rows are tested at every use)."""
    got = getattr(M, "_varopt_selection", None)
    if got is None:
        k = M.indptr[-1]
        # (count_nonzero instead of .all(): a ufunc reduction costs ~2 us on a handful of entries)
        got = k == M.shape[0] and not _count(M.indptr[1:] - M.indptr[:-1] - 1)
        if got and k > 1:  # distinct columns: no two equal neighbours once sorted
            srt = np.sort(M.indices[:k])
            got = not _count(srt[1:] == srt[:-1])
        M._varopt_selection = got
    return got


def _matmul(L, M):
    """``L @ M`` for csr matrices, without scipy's sparse product where the result has a simple form: an empty
    ``M`` gives an empty product; ``M`` with one entry per row in distinct columns (a variable, an index of one,
    a diagonal weight matrix) gives ``L``'s pattern with the columns renamed (``X @ W`` with a large data
    matrix ``X``)."""
    rows, cols = L.shape[0], M.shape[1]
    if M.indptr[-1] == 0:
        return _empty(rows, cols)
    if _one_per_row_distinct(M):
        k = L.indptr[-1]
        Li = L.indices[:k]
        # M's weights are mostly ones (a variable's rows, an index of them): then L's weights as they are (x * 1.0 is
        # x), copied instead of gathered; the test is over M's few entries, made only when L has many more
        unit = k >= 4 * M.shape[0] and not _count(M.data[:M.indptr[-1]] != 1.0)
        return _csr_raw(L.data[:k].copy() if unit else L.data[:k] * M.data[Li], M.indices[Li], L.indptr, (rows, cols))
    if M.has_canonical_format and _at_most_one_per_row(L):
        return _scaled_rows(L, M)
    if rows == 1 and L.has_canonical_format:
        return _row_product(L, M)
    return _csr(L @ M)


def _select_rows(M, src, ip):
    """``L @ M`` for the unit selection ``L`` (row ``e``: a one in column ``src[e]``; ``ip = arange(len(src) + 1)``,
    its indptr) by the path :func:`_matmul` takes for it, without ``L``: an empty ``M`` gives an empty product, ``M``
    with one entry per row in distinct columns the gathered entries, a canonical ``M`` its rows ``src`` without
    stored zeros (:func:`_scaled_rows` with unit weights); anything else ``L`` and :func:`_matmul`."""
    m = src.size
    if M.indptr[-1] == 0:
        return _empty(m, M.shape[1])
    if _one_per_row_distinct(M):
        return _csr_raw(M.data[src], M.indices[src], ip, (m, M.shape[1]))
    if M.has_canonical_format:
        T = _csrmod.take_rows(M, src)
        if _count(T.data) == T.data.size:
            return T
        keep = T.data != 0
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(np.arange(m).repeat(T.indptr[1:] - T.indptr[:-1])[keep], minlength=m), out=indptr[1:])
        return _csr_raw(T.data[keep], T.indices[keep], indptr, (m, M.shape[1]))
    return _matmul(_csr_raw(np.ones(m), src, ip, (m, M.shape[0])), M)


def _sum_rows(M):
    """``1^T M`` (the sum of the rows of csr ``M``, at least two) by the path :func:`_matmul` takes for the row of
    ones, without it: an empty ``M`` gives an empty row, ``M`` with one entry per row in distinct columns its
    entries in their order, anything else the column sums by ``bincount`` in storage order (:func:`_row_product`;
    zero sums dropped)."""
    cols = M.shape[1]
    k = M.indptr[-1]
    if k == 0:
        return _empty(1, cols)
    if _one_per_row_distinct(M):
        return _csr_raw(M.data[:k] * 1.0, M.indices[:k].copy(), np.array([0, k]), (1, cols))
    out = np.bincount(M.indices[:k], weights=M.data[:k], minlength=cols)
    nz = np.flatnonzero(out)
    return _csr_raw(out[nz], nz, np.array([0, nz.size]), (1, cols))


def _row_product(L, M):
    """``L @ M`` for a one-row canonical ``L`` (a sum over all entries, ``sum(multiply(Y, Z))``): the rows of ``M``
    that ``L`` uses, weighted, summed per column by ``bincount`` in the order scipy's product sums them (``L``'s
    entries in column order, each row of ``M`` in storage order), so the result is the same to the last bit; zero
    sums dropped as scipy drops them."""
    k = L.indptr[-1]
    T = _csrmod.take_rows(M, L.indices[:k])
    w = L.data[:k].repeat(T.indptr[1:] - T.indptr[:-1]) * T.data
    out = np.bincount(T.indices, weights=w, minlength=M.shape[1]) if w.size else np.zeros(M.shape[1])
    nz = np.flatnonzero(out)
    return _csr_raw(out[nz], nz, np.array([0, nz.size]), (1, M.shape[1]))


def _at_most_one_per_row(L):
    """Whether every row of csr ``L`` holds at most one stored entry (selections, broadcasts, partial diagonals)."""
    return L.indptr[-1] <= L.shape[0] and not _count((L.indptr[1:] - L.indptr[:-1]) > 1)


def _scaled_rows(L, M):
    """``L @ M`` for ``L`` with at most one entry per row: row ``i`` is ``L_ij M_j`` (an empty row where ``L``'s is),
    gathered from ``M``'s arrays; zeros are dropped as scipy's product drops them."""
    k = L.indptr[-1]
    T = _csrmod.take_rows(M, L.indices[:k])
    cnt = T.indptr[1:] - T.indptr[:-1]
    data = T.data * L.data[:k].repeat(cnt)
    indices = T.indices
    if _count(data) != data.size:
        keep = data != 0
        cnt = np.bincount(np.arange(k).repeat(cnt)[keep], minlength=k)
        data, indices = data[keep], indices[keep]
    rowcnt = np.zeros(L.shape[0], dtype=np.int64)
    rowcnt[(L.indptr[1:] - L.indptr[:-1]) == 1] = cnt
    indptr = np.zeros(L.shape[0] + 1, dtype=np.int64)
    np.cumsum(rowcnt, out=indptr[1:])
    return _csr_raw(data, indices, indptr, (L.shape[0], M.shape[1]))


def _canonical(M):
    """``M`` with sorted, summed duplicate indices; a copy when ``M`` is not already so (scipy's
    ``sum_duplicates`` works in place, and traced matrices share their arrays)."""
    if M.has_canonical_format:
        return M
    M = M.copy()
    M.sum_duplicates()
    return M


class _Node:
    """Array-valued traced expression (see the module docstring)."""

    __slots__ = ("shape", "m", "n", "A", "c", "Q", "rows", "lse")

    def __init__(self, shape, n, A=None, c=None, Q=None, rows=None, lse=None):
        self.shape = tuple(shape)
        self.m = _size(self.shape)
        self.n = n
        self.A = _empty(self.m, n) if A is None else _csr(A)
        self.c = np.zeros(self.m) if c is None else np.asarray(c, dtype=float).ravel()
        self.Q = Q or []  # list of (_QTerms, W m x T csr)
        self.rows = rows or []  # list of (_Rows, W m x R csr)
        self.lse = lse or []  # list of (_Lse, V m x G csr)

    @classmethod
    def _make(cls, shape, m, n, A, c, Q, rows, lse):
        """The node of these parts as they are: ``shape`` a tuple of ints with ``m`` entries, ``A`` a csr matrix,
        ``c`` a float array of ``m`` entries, the lists owned by the new node (the tracer's own results; the
        constructor's conversions cost ~1.5 us a node)."""
        z = cls.__new__(cls)
        z.shape, z.m, z.n, z.A, z.c, z.Q, z.rows, z.lse = shape, m, n, A, c, Q, rows, lse
        return z

    # --- classification --------------------------------------------------------------
    @property
    def has_quad(self):
        return any(W.nnz for _, W in self.Q)

    @property
    def has_nonlinear(self):
        return any(W.nnz for _, W in self.rows) or any(V.nnz for _, V in self.lse)

    @property
    def is_affine(self):
        return not self.has_quad and not self.has_nonlinear

    @property
    def is_constant(self):
        return self.is_affine and self.A.nnz == 0

    def single_variable(self):
        """``(coef, var)`` per entry when every entry is ``coef_e * x_{var_e}`` (no constant)."""
        if not self.is_affine or (self.c != 0).any():
            return None
        A = self.A.copy()
        A.eliminate_zeros()
        if not ((A.indptr[1:] - A.indptr[:-1]) == 1).all():
            return None
        return A.data.copy(), A.indices.astype(np.int64)

    # --- linear maps ------------------------------------------------------------------
    def apply(self, L, shape):
        """The node ``L @ self`` (``L``: m' x m sparse) with the given output shape."""
        L = _csr(L)
        c = L @ self.c if _count(self.c) else np.zeros(L.shape[0])
        return _Node._make(tuple(shape), L.shape[0], self.n, _matmul(L, self.A), c,
                           [(q, _matmul(L, W)) for q, W in self.Q] if self.Q else [],
                           [(r, _matmul(L, W)) for r, W in self.rows] if self.rows else [],
                           [(g, _matmul(L, V)) for g, V in self.lse] if self.lse else [])

    def take(self, src, shape):
        """The node ``L @ self`` for the selection ``L`` whose row ``e`` is the unit row of entry ``src[e]``
        (``src``: int64 entry numbers, repeats allowed: an index, a transpose, a broadcast), without building
        ``L``: row ``e`` of every part is row ``src[e]`` of the argument's (:func:`_select_rows`), ``c[src]``.
        The same arrays :meth:`apply` gives (its products with unit weights are the gathers; ``+ 0.0`` is the
        product's sum from ``0.0``, which turns a ``-0.0`` constant into ``0.0``)."""
        m = src.size
        c = self.c[src] + 0.0 if _count(self.c) else np.zeros(m)
        ip = np.arange(m + 1)
        sel = lambda M: _select_rows(M, src, ip)  # noqa: E731
        return _Node._make(tuple(shape), m, self.n, sel(self.A), c,
                           [(q, sel(W)) for q, W in self.Q] if self.Q else [],
                           [(r, sel(W)) for r, W in self.rows] if self.rows else [],
                           [(g, sel(V)) for g, V in self.lse] if self.lse else [])

    def reduce(self, axis, shape):
        """The sums over ``axis`` (CVXPY's ``axis``; None: all entries) as the node of ``shape``: :meth:`sum_all`
        for a sum of everything, else the 0/1 matrix of :func:`_group_matrix` applied."""
        if axis is None and self.m > 1:
            return self.sum_all(shape)
        return self.apply(_group_matrix(*_axis_groups(self.shape, axis)), shape)

    def sum_all(self, shape):
        """The node ``1^T self`` (``cp.sum(x)`` without an axis) of a node of at least two entries, without the row
        of ones: the arrays :meth:`apply` gives with it (:func:`_sum_rows`; the constant by ``cumsum``, the same
        sequential sum as the product's, which starts from ``0.0`` -- equal once an entry is nonzero)."""
        c = self.c.cumsum()[-1:] if _count(self.c) else np.zeros(1)
        return _Node._make(tuple(shape), 1, self.n, _sum_rows(self.A), c,
                           [(q, _sum_rows(W)) for q, W in self.Q] if self.Q else [],
                           [(r, _sum_rows(W)) for r, W in self.rows] if self.rows else [],
                           [(g, _sum_rows(V)) for g, V in self.lse] if self.lse else [])

    def scale(self, d):
        """``diag(d) @ self``. Rows are scaled in place of a sparse product (the compile of a GLM scales
        its rows two or three times); a zero in ``d`` takes the product, which drops the entries."""
        if not isinstance(d, float) and np.size(d) == 1:  # a scalar constant's one entry (lam / 2 * sum_squares(w))
            d = float(np.asarray(d).ravel()[0])
        scalar = isinstance(d, float) and d != 0  # -x, 2 * x: one factor for every entry, no per-row repeat
        if not scalar:
            d = np.asarray(d, dtype=float)
            if d.shape != (self.m,):
                d = np.broadcast_to(d, (self.m,))
            if _count(d) != d.size:
                return self.apply(_diagonal(d), self.shape)

        def rs(M):
            # own index arrays: a matrix sharing M's indices but not its data would be corrupted by an in-place
            # sort of either (scipy's sum_duplicates / sort_indices)
            k = M.indptr[-1]
            f = d if scalar else d.repeat(M.indptr[1:] - M.indptr[:-1])
            return _csr_raw(M.data[:k] * f, M.indices[:k].copy(),
                            M.indptr.copy(), M.shape)

        return _Node._make(self.shape, self.m, self.n, rs(self.A), d * self.c, [(q, rs(W)) for q, W in self.Q],
                           [(r, rs(W)) for r, W in self.rows], [(g, rs(V)) for g, V in self.lse])


def _repeat_diag(C, r):
    """``kron(I_r, C)`` (csr): ``r`` copies of ``C`` down the diagonal, built from its arrays."""
    C = _csr(C)
    if r == 1:
        return C
    p, q = C.shape
    nnz = C.indptr[-1]
    off = np.arange(r)
    indptr = np.concatenate([(C.indptr[:-1][None, :] + nnz * off[:, None]).ravel(), [r * nnz]])
    indices = (C.indices[:nnz][None, :] + q * off[:, None]).ravel()
    # (np.tile(data, r) by a 2-D repeat: the same array, without np.tile's wrapper)
    return _csr_raw(C.data[:nnz][None, :].repeat(r, axis=0).ravel(), indices, indptr, (r * p, r * q))


def _bcast(z, shape):
    """``z`` broadcast (numpy rules) to ``shape``."""
    shape = tuple(shape)
    if z.shape == shape:
        return z
    return z.apply(_broadcast_matrix(z.shape, shape), shape)


def _csr_sum(A, B):
    """``A + B`` for csr matrices of one shape. When every column of ``A`` comes before every column of ``B`` (or
    after: different variables, ``X @ w + b``) no entry is added to another: each row is ``A``'s entries followed by
    ``B``'s, built from the arrays; else scipy's sum. Stored zeros are dropped as scipy's sum drops them."""
    ka, kb = A.indptr[-1], B.indptr[-1]
    if ka == 0 or kb == 0 or not (A.has_canonical_format and B.has_canonical_format):
        return _csr(A + B)
    ai, bi = A.indices[:ka], B.indices[:kb]
    if ai.max() >= bi.min():
        if bi.max() >= ai.min():
            return _csr(A + B)
        A, B, ka, kb, ai, bi = B, A, kb, ka, bi, ai
    ca, cb = A.indptr[1:] - A.indptr[:-1], B.indptr[1:] - B.indptr[:-1]
    indptr = np.zeros(ca.size + 1, dtype=np.int64)
    np.cumsum(ca + cb, out=indptr[1:])
    # position of every entry of A and of B in the merged rows
    pa = np.arange(ka) + B.indptr[:-1].repeat(ca)
    pb = np.arange(kb) + A.indptr[1:].repeat(cb)
    data = np.empty(ka + kb)
    idx = np.empty(ka + kb, dtype=np.int64)
    data[pa], data[pb] = A.data[:ka], B.data[:kb]
    idx[pa], idx[pb] = ai, bi
    if _count(data) != data.size:
        keep = data != 0
        data, idx = data[keep], idx[keep]
        rows = np.arange(ca.size).repeat(ca + cb)
        np.cumsum(np.bincount(rows[keep], minlength=ca.size), out=indptr[1:])
    return _csr_raw(data, idx, indptr, A.shape)


def _label_terms(nodes):
    """Finite-sum labels of a scalar sum written term by term (a Python loop, ``sum(cp.logistic(y[i] * (X[i] @ w))
    for i in range(n))``): every term's rows carry the first-axis index of a scalar, 0, so the whole loop would be
    one sample (ipsa's and klprox's ``batch_size`` then take the full sum at every step). When every term that holds
    atom rows or log-sum-exp groups has one label value, term ``k`` gets label ``k``: the samples are the terms, as
    the entries of the vectorized sum are (the rows of one term, e.g. ``log_normcdf``'s seven pieces, stay together).
    A term with several labels (a vectorized sum ``cp.sum(cp.logistic(X @ w))`` beside a penalty) leaves every label
    as traced. Nodes and rows are never modified (memoized, shared): the result is a new list with relabelled
    copies."""
    holders = [i for i, z in enumerate(nodes) if z.rows or z.lse]
    if len(holders) < 2:
        return nodes
    for i in holders:
        for R, _ in nodes[i].rows:
            if R.label.size and np.any(R.label != R.label[0]):
                return nodes
        for L, _ in nodes[i].lse:
            if L.label.size and np.any(L.label != L.label[0]):
                return nodes
    out = list(nodes)
    for k, i in enumerate(holders):
        z = nodes[i]
        rows = [(R.take(np.arange(R.b.size), label=np.full(R.b.size, k, dtype=np.int64)), W) for R, W in z.rows]
        lse = [(L.take_groups(np.arange(L.G), label=np.full(L.G, k, dtype=np.int64)), V) for L, V in z.lse]
        out[i] = _Node._make(z.shape, z.m, z.n, z.A, z.c, z.Q, rows, lse)
    return out


def _add(nodes, shape):
    shape = tuple(shape)
    nodes = [_bcast(z, shape) for z in nodes]
    n = nodes[0].n
    A, c = nodes[0].A, nodes[0].c
    for z in nodes[1:]:
        # an empty side (a constant, atom rows) adds nothing: no sparse sum
        if A.indptr[-1] == 0:
            A = z.A
        elif z.A.indptr[-1] != 0:
            A = _csr_sum(A, z.A)
        c = c + z.c
    Q, rows, lse = [], [], []
    for z in nodes:
        Q += z.Q
        rows += z.rows
        lse += z.lse
    return _Node._make(shape, nodes[0].m, n, A, c, Q, rows, lse)


def _stack(nodes):
    """Vertical concatenation of flattened nodes (shape ``(sum m,)``)."""
    n = nodes[0].n
    M = sum(z.m for z in nodes)
    A = sp.vstack([z.A for z in nodes], format="csr")
    c = np.concatenate([z.c for z in nodes])
    Q, rows, lse = [], [], []
    off = 0
    for z in nodes:
        Q += _pad(z.Q, off, M)
        rows += _pad(z.rows, off, M)
        lse += _pad(z.lse, off, M)
        off += z.m
    return _Node((M,), n, A, c, Q, rows, lse)


def _selection_matrix(src, m_in):
    """Sparse ``L`` from 1-based source indices (0 = structural zero)."""
    src = np.asarray(src).ravel(order="F")
    s = np.rint(np.real(src)).astype(np.int64)
    has = s > 0
    # at most one entry per row, rows in order: the csr arrays directly (no coo conversion)
    indptr = np.concatenate([[0], np.cumsum(has)])
    return _csr_raw(np.ones(int(indptr[-1])), s[has] - 1, indptr, (src.size, m_in))


def _broadcast_matrix(shape_in, shape_out):
    m_in = _size(shape_in)
    idx = (np.arange(m_in, dtype=float) + 1).reshape(shape_in, order="F")
    return _selection_matrix(np.broadcast_to(idx, shape_out), m_in)


def _axis_groups(shape, axis):
    """Output (F-order) position of every input entry for a reduction over ``axis``."""
    if axis is None or not shape:
        return np.zeros(_size(shape), dtype=np.int64), 1
    axes = (axis,) if np.isscalar(axis) else tuple(axis)
    axes = tuple(int(a) % len(shape) for a in axes)
    keep = [d for d in range(len(shape)) if d not in axes]
    out_shape = tuple(shape[d] for d in keep)
    if not keep:
        return np.zeros(_size(shape), dtype=np.int64), 1
    if len(shape) == 2 and len(keep) == 1:  # a matrix's row sums (entry i + p j -> i) or column sums (-> j)
        p, r = shape
        pos = np.arange(p, dtype=np.int64)[None, :].repeat(r, axis=0).ravel() if keep[0] == 0 else \
            np.arange(r, dtype=np.int64).repeat(p)
        return pos, _size(out_shape)
    idx = np.indices(shape).reshape(len(shape), -1, order="F")
    pos = np.ravel_multi_index(tuple(idx[d] for d in keep), out_shape, order="F")
    return pos.astype(np.int64), _size(out_shape)


def _bilinear(A1, A2, n):
    """Quadratic part ``[(terms, W)]`` whose entry e is ``(A1_e x) (A2_e x)``."""
    A1 = _csr(A1)
    A2 = _csr(A2)
    m = A1.shape[0]
    cnt1 = A1.indptr[1:] - A1.indptr[:-1]
    cnt2 = A2.indptr[1:] - A2.indptr[:-1]
    e1 = np.repeat(np.arange(m), cnt1)  # entry of every nonzero of A1
    rep = cnt2[e1]
    P = np.repeat(np.arange(A1.nnz), rep)
    Q2 = _ranges(A2.indptr[:-1][e1], rep)
    rows = e1[P]
    vals = A1.data[P] * A2.data[Q2]
    T = rows.size
    terms = _QTerms(A1.indices[P], A2.indices[Q2])
    # rows is nondecreasing (entry by entry), one column per term: the csr arrays directly
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
    return [(terms, _csr_raw(vals, np.arange(T), indptr, (m, T)))]
