"""Recognised term groups of a compiled program, each evaluated in a vectorized way.

Every group holds many rows of one kind as arrays, so evaluating, differentiating or
taking the Hessian of a group is a handful of sparse matrix products (no per-term
Python loop). ``n`` below is the number of program variables and ``x`` a point.

Catalogue (value of one row ``r``; ``w_r = x[mult[r]]`` when ``mult[r] >= 0``, else 1):

============== ===================================== ===========================
group / kind    row value                             convex when
============== ===================================== ===========================
QuadraticTerms  ``v_k x_i x_j`` (``i <= j``)           ``Q + Q^T`` is PSD
AtomGroup       ``c_r w_r g(u_r)``, ``u_r = A_r x+b_r`` ``c_r >= 0`` and no ``w``
  ``xlogx``     ``g(u) = u log u`` (``0 log 0 = 0``)
  ``neglog``    ``g(u) = -log u``
  ``exp``       ``g(u) = exp u``
  ``square``    ``g(u) = u^2``
  ``quad_over_lin`` ``g(u, v) = u^2 / v`` with ``v = A2_r x + b2_r > 0``
LseGroup        ``c_g w_g log sum_{k in g} exp(A_k x + b_k)``  ``c_g >= 0``, no ``w``
============== ===================================== ===========================

The math of each atom ``g`` (value, derivatives, domain, interval bounds) is the kernel
table :data:`varopt.program.atoms.ATOMS`; the groups here only apply it to ``A x + b``.

A row with a multiplier ``w`` is the product of a variable with a convex atom of other
variables (``phi * (x - mu)**2``, ``-phi * log(pi)``); GOP needs to see these products.
Positive weights ``h_k`` of a log-sum-exp (base measures) are stored as ``log h_k`` in
``b``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .atoms import ATOM_KINDS, ATOMS
from .gram import WeightedGram


def _csr(A, n: int) -> sp.csr_matrix:
    if not (type(A) is sp.csr_matrix and A.dtype == np.float64):  # a float csr is used as it is (no format checks)
        A = sp.csr_matrix(A, dtype=float)
    if A.shape[1] != n:
        raise ValueError(f"affine map has {A.shape[1]} columns, program has {n} variables")
    if not A.has_canonical_format:  # (an O(nnz) check)
        _sort_rows(A)
        A.sum_duplicates()
    return A


#: nonzeros from which unsorted rows are sorted by :func:`_sort_rows` instead of scipy's per-row sort
SORT_ROWS_MIN = 50_000


def _sort_rows(A):
    """Sort the column indices of every row of the CSR ``A`` in place (duplicates kept).

    Modelling layers often emit each row's columns in reverse or in a few sorted runs (CVXPY's ``X @ w + b`` on a
    dense ``X``: every row reversed); scipy's per-row comparison sort costs ~50 ns per nonzero there (40 ms for a
    dense 2000 x 400 design). Reversed rows are flipped by index arithmetic, anything else by a stable sort of
    ``(row, column)`` keys (timsort: linear on a few sorted runs)."""
    nnz = A.nnz
    if nnz < SORT_ROWS_MIN:
        A.sort_indices()
        return
    m, n = A.shape
    counts = np.diff(A.indptr)
    rows = np.repeat(np.arange(m, dtype=np.int64), counts)
    idx = A.indices
    step = np.diff(idx)
    inner = rows[1:] == rows[:-1]
    if not (step[inner] >= 0).all():
        if (step[inner] < 0).all():
            pos = np.arange(nnz, dtype=np.int64)
            order = A.indptr[rows].astype(np.int64) + A.indptr[rows + 1] - 1 - pos
        else:
            order = np.argsort(rows * n + idx, kind="stable")
        A.indices = idx[order]
        A.data = A.data[order]
    A.has_sorted_indices = True


def _mult_values(mult: np.ndarray, x: np.ndarray) -> np.ndarray:
    w = np.ones(mult.shape[0])
    has = mult >= 0
    w[has] = x[mult[has]]
    return w


def _mult_matrix(mult: np.ndarray, n: int) -> sp.csr_matrix:
    """E (n x m) with E[mult_r, r] = 1 for rows that have a multiplier."""
    has = np.flatnonzero(mult >= 0)
    return sp.csr_matrix((np.ones(has.size), (mult[has], has)), shape=(n, mult.shape[0]))


def _add_cross(H, C, dense, idx):
    """``H + C + C^T`` (the multiplier cross terms) in the form of ``H``: csr, dense, or the dense
    principal submatrix on ``idx``."""
    C = sp.csr_matrix(C + C.T)
    if idx is not None:
        return H + C[idx][:, idx].toarray()
    return H + C.toarray() if dense else sp.csr_matrix(H + C)


@dataclass
class QuadraticTerms:
    """Sum of ``v_k x_{i_k} x_{j_k}``: bilinear products (``i != j``) and squares (``i == j``)."""

    i: np.ndarray
    j: np.ndarray
    v: np.ndarray
    n: int

    def __post_init__(self):
        i = np.asarray(self.i, dtype=np.int64)
        j = np.asarray(self.j, dtype=np.int64)
        v = np.asarray(self.v, dtype=float)
        if v.size == 0:  # most constraint rows: skip building an empty n x n matrix
            self.i, self.j, self.v = i, j, v
            return
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        key = lo * self.n + hi
        if np.all(key[1:] > key[:-1]) and np.all(v != 0):
            # already canonical (upper pairs in row-major order, no duplicates, no zeros: e.g. a diagonal prior's
            # squares): what the sparse round trip below returns, without it (0.1 ms of a 0.5 ms GP model)
            self.i, self.j, self.v = lo, hi, v
            return
        M = sp.coo_matrix((v, (lo, hi)), shape=(self.n, self.n)).tocsr()
        M.sum_duplicates()
        M.eliminate_zeros()
        M = M.tocoo()
        self.i, self.j, self.v = M.row.astype(np.int64), M.col.astype(np.int64), M.data

    @property
    def upper(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.v, (self.i, self.j)), shape=(self.n, self.n))

    @property
    def hessian_matrix(self) -> sp.csr_matrix:
        """Constant Hessian ``Q + Q^T`` of the sum (so the sum is ``x^T H x / 2``)."""
        U = self.upper
        return (U + U.T).tocsr()

    def value(self, x):
        return float(np.dot(self.v, x[self.i] * x[self.j])) if self.v.size else 0.0

    def gradient(self, x):
        if not self.v.size:  # (building the empty n x n matrix costs a millisecond)
            return np.zeros(self.n)
        return self.hessian_matrix @ x

    def hessian(self, x):
        return self.hessian_matrix

    def __len__(self):
        return self.v.size


@dataclass
class AtomGroup:
    """Rows ``c_r * w_r * g(A_r x + b_r[, A2_r x + b2_r])`` of one convex atom ``kind``."""

    kind: str
    coef: np.ndarray
    A: sp.csr_matrix
    b: np.ndarray
    mult: np.ndarray = None
    A2: sp.csr_matrix = None
    b2: np.ndarray = None
    #: optional label per row (e.g. the sample index), used by finite-sum samplers
    label: np.ndarray = None

    def __post_init__(self):
        if self.kind not in ATOMS:
            raise ValueError(f"unknown atom kind {self.kind!r}; known: {ATOM_KINDS} and power(p)")
        self.coef = np.asarray(self.coef, dtype=float).ravel()
        m = self.coef.size
        n = self.A.shape[1]
        self.A = _csr(self.A, n)
        self.b = np.asarray(self.b, dtype=float).ravel()
        self.mult = (np.full(m, -1, dtype=np.int64) if self.mult is None
                     else np.asarray(self.mult, dtype=np.int64).ravel())
        if ATOMS[self.kind].arity == 2:
            if self.A2 is None:
                raise ValueError("quad_over_lin needs a second affine map A2, b2")
            self.A2 = _csr(self.A2, n)
            self.b2 = np.asarray(self.b2, dtype=float).ravel()
        if not (self.A.shape[0] == self.b.size == self.mult.size == m):
            raise ValueError("atom group arrays disagree in length")

    @property
    def n(self):
        return self.A.shape[1]

    def __len__(self):
        return self.coef.size

    # --- the scalar atom and its derivatives, vectorized over rows -------------------
    @property
    def kernel(self):
        """The :class:`~.atoms.AtomKernel` of this group's kind."""
        return ATOMS[self.kind]

    def _g(self, x, order: int):
        """``(u, g, dg/du, d2g/du2)`` at every row (derivatives above ``order`` are None);
        ``(u, v, g)`` for two-argument atoms."""
        u = self.A @ x + self.b
        kern = ATOMS[self.kind]
        if kern.arity == 2:
            v = self.A2 @ x + self.b2
            return u, v, kern.value(u, v)
        return (u,) + kern.derivs(u, order)

    def row_values(self, x):
        """Per-row value ``c_r w_r g(u_r)`` (length m)."""
        w = _mult_values(self.mult, x)
        out = self._g(x, 0)
        g = out[2] if len(out) == 3 else out[1]
        return self.coef * w * g

    def value(self, x):
        return float(np.sum(self.row_values(x)))

    def gradient(self, x):
        w = _mult_values(self.mult, x)
        if self.kernel.arity == 2:
            u, v, g = self._g(x, 1)
            du, dv = self.kernel.grad(u, v)
            grad = self.A.T @ (self.coef * w * du) + self.A2.T @ (self.coef * w * dv)
        else:
            u, g, d1, _ = self._g(x, 1)
            grad = self.A.T @ (self.coef * w * d1)
        has = self.mult >= 0
        if has.any():
            grad = grad + np.bincount(self.mult[has], weights=(self.coef * g)[has], minlength=self.n)
        return np.asarray(grad).ravel()

    def _gram(self) -> WeightedGram:
        """The weighted Gram of this group's rows (:mod:`.gram`), built on first use and kept while
        ``A`` and ``A2`` are the same objects."""
        c = self.__dict__.get("_gram_cache")
        if c is None or c[0] is not self.A or c[1] is not self.A2:
            m = len(self)
            r = np.arange(m)
            if self.kernel.arity == 2:  # blocks (a_r, a2_r): pairs (r, r), (r, m + r), (m + r, m + r)
                S = sp.vstack([self.A, self.A2], format="csr")
                gram = WeightedGram(S, np.concatenate([r, r, r + m]), np.concatenate([r, r + m, r + m]))
            else:
                gram = WeightedGram(self.A, r, r)
            c = self._gram_cache = (self.A, self.A2, gram)
        return c[2]

    def hessian_rank_bound(self) -> int:
        """An upper bound on the rank of the Hessian at every ``x`` (the used rows of the weighted
        Gram; ``n`` with multiplier rows, whose cross terms are not bounded here)."""
        return self.n if np.any(self.mult >= 0) else min(self.n, self._gram().rank_bound)

    def hessian(self, x, dense: bool = False, idx=None):
        """Hessian at ``x``: ``A^T diag(c w g'') A`` (two-argument atoms: the 2 x 2 blocks of
        ``(A, A2)``) by :class:`~.gram.WeightedGram`, plus the multiplier cross terms ``C + C^T``;
        csr, or a dense array when ``dense`` (with ``idx``: the dense principal submatrix on the
        variables ``idx``)."""
        w = _mult_values(self.mult, x)
        cw = self.coef * w
        if self.kernel.arity == 2:
            u, v, g = self._g(x, 2)
            huu, huv, hvv = self.kernel.hess(u, v)
            H = self._gram()(np.concatenate([cw * huu, cw * huv, cw * hvv]), dense, idx)
        else:
            u, g, d1, d2 = self._g(x, 2)
            H = self._gram()(cw * d2, dense, idx)
        has = self.mult >= 0
        if not has.any():
            return H
        E = _mult_matrix(self.mult, self.n)
        # the multiplier w enters linearly: cross terms c * dg/du * (e_w A_r + A_r^T e_w^T)
        if self.kernel.arity == 2:
            du, dv = self.kernel.grad(u, v)
            C = E @ sp.diags(self.coef * du) @ self.A + E @ sp.diags(self.coef * dv) @ self.A2
        else:
            C = E @ sp.diags(self.coef * d1) @ self.A
        return _add_cross(H, C, dense, idx)

    def is_convex(self) -> bool:
        """True when every row is a convex function of x on the atom's domain."""
        return bool(ATOMS[self.kind].convex and (self.mult < 0).all() and (self.coef >= 0).all())


@dataclass
class LseGroup:
    """Rows ``c_g w_g log sum_{k in g} exp(A_k x + b_k)``; ``seg[k]`` is the group of row k.

    ``seg`` is sorted and takes every value ``0 .. G-1``. ``log`` of positive weights
    (base measures ``h(y)``) is folded into ``b``.
    """

    A: sp.csr_matrix
    b: np.ndarray
    seg: np.ndarray
    coef: np.ndarray
    mult: np.ndarray = None
    label: np.ndarray = None

    def __post_init__(self):
        self.A = _csr(self.A, self.A.shape[1])
        self.b = np.asarray(self.b, dtype=float).ravel()
        self.seg = np.asarray(self.seg, dtype=np.int64).ravel()
        self.coef = np.asarray(self.coef, dtype=float).ravel()
        G = self.coef.size
        if self.seg.size != self.A.shape[0] or self.b.size != self.A.shape[0]:
            raise ValueError("log-sum-exp arrays disagree in length")
        # sorted from 0 to G - 1 in steps of 0 or 1 (a negative step wraps around as uint64): every id occurs
        if self.seg.size and (self.seg[0] != 0 or self.seg[-1] != G - 1
                              or not ((self.seg[1:] - self.seg[:-1]).astype(np.uint64) <= 1).all()):
            raise ValueError("seg must be sorted and cover 0..G-1")
        self.mult = (np.full(G, -1, dtype=np.int64) if self.mult is None
                     else np.asarray(self.mult, dtype=np.int64).ravel())
        self.starts = np.searchsorted(self.seg, np.arange(G))

    @property
    def n(self):
        return self.A.shape[1]

    def __len__(self):
        return self.coef.size

    def _softmax(self, x):
        s = self.A @ x + self.b
        if self.__dict__.get("_pairs") is None:  # every group of two rows (a logistic loss): no reduceat
            st = self.starts
            self._pairs = bool(self.seg.size == 2 * self.coef.size and ((st[1:] - st[:-1]) == 2).all())
        if self._pairs:
            a, c = s[0::2], s[1::2]
            mx = np.maximum(a, c)
            e = np.exp(s - np.repeat(mx, 2))
            tot = e[0::2] + e[1::2]
            return mx + np.log(tot), e / np.repeat(tot, 2)
        mx = np.maximum.reduceat(s, self.starts) if s.size else s
        e = np.exp(s - mx[self.seg])
        tot = np.add.reduceat(e, self.starts) if s.size else e
        lse = mx + np.log(tot)
        p = e / tot[self.seg]
        return lse, p

    def group_values(self, x):
        """Per-group log-sum-exp values (without coefficient and multiplier)."""
        return self._softmax(x)[0]

    def row_values(self, x):
        return self.coef * _mult_values(self.mult, x) * self.group_values(x)

    def value(self, x):
        return float(np.sum(self.row_values(x)))

    def gradient(self, x):
        lse, p = self._softmax(x)
        s = self.coef * _mult_values(self.mult, x)
        grad = self.A.T @ (p * s[self.seg])
        has = self.mult >= 0
        if has.any():
            grad = grad + np.bincount(self.mult[has], weights=(self.coef * lse)[has], minlength=self.n)
        return np.asarray(grad).ravel()

    def _gram(self) -> WeightedGram:
        """The weighted Gram over the row pairs ``k <= l`` of each group (:mod:`.gram`), built on first
        use and kept while ``A`` and ``seg`` are the same objects."""
        c = self.__dict__.get("_gram_cache")
        if c is None or c[0] is not self.A or c[1] is not self.seg:
            size = np.diff(np.append(self.starts, self.seg.size))
            pk, pl = [], []
            for m in np.unique(size):  # groups of one size at a time: their pairs are triu offsets
                a, b = np.triu_indices(int(m))
                st = self.starts[size == m][:, None]
                pk.append((st + a).ravel())
                pl.append((st + b).ravel())
            pk = np.concatenate(pk) if pk else np.zeros(0, dtype=np.int64)
            pl = np.concatenate(pl) if pl else np.zeros(0, dtype=np.int64)
            c = self._gram_cache = (self.A, self.seg, WeightedGram(self.A, pk, pl), pk, pl)
        return c[2:]

    def hessian_rank_bound(self) -> int:
        """An upper bound on the rank of the Hessian at every ``x`` (see :class:`AtomGroup`)."""
        return self.n if np.any(self.mult >= 0) else min(self.n, self._gram()[0].rank_bound)

    def hessian(self, x, dense: bool = False, idx=None):
        """Hessian at ``x``: ``A^T M A`` with ``M_g = s_g (diag(p) - p p^T)`` on each group
        (``s = c w``, ``p`` its softmax) by :class:`~.gram.WeightedGram`, plus the multiplier cross
        terms ``C + C^T``, ``C = E diag(c) P A``; csr, or a dense array when ``dense`` (with ``idx``:
        the dense principal submatrix on the variables ``idx``)."""
        lse, p = self._softmax(x)
        s = self.coef * _mult_values(self.mult, x)
        gram, pk, pl = self._gram()
        M = s[self.seg[pk]] * p[pk] * (np.where(pk == pl, 1.0, 0.0) - p[pl])
        H = gram(M, dense, idx)
        if not (self.mult >= 0).any():
            return H
        G, K = self.coef.size, self.seg.size
        P = sp.csr_matrix((p, (self.seg, np.arange(K))), shape=(G, K))
        C = _mult_matrix(self.mult, self.n) @ sp.diags(self.coef) @ (P @ self.A)
        return _add_cross(H, C, dense, idx)

    def is_convex(self) -> bool:
        return bool((self.mult < 0).all() and (self.coef >= 0).all())
