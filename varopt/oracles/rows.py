"""Per-row kernels of a program's atom groups and log-sum-exp groups, gathered by sample.

:class:`RowMatrix` gathers rows of a sparse matrix; :class:`_AtomRows` / :class:`_LseRows`
evaluate the gradient, Hessian diagonal and Hessian of the sampled rows of an atom group
``sum_i mult_i coef_i phi(a_i^T x + b_i)`` or of a log-sum-exp group, weighted by ``N/|B|``
(see :mod:`varopt.oracles.finite_sum`).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..program import AtomGroup, LseGroup
from ..program.atoms import ATOMS


class RowMatrix:
    """Rows of a sparse matrix gathered fast (dense copy when it is dense enough)."""

    def __init__(self, A: sp.csr_matrix):
        A = sp.csr_matrix(A)
        self.n = A.shape[1]
        self.csr = A
        m = A.shape[0]
        self._want_dense = m * self.n <= 2e7 and A.nnz >= 0.25 * m * self.n
        self._dense = None
        self.indptr, self.indices, self.data = A.indptr, A.indices, A.data

    @property
    def dense(self):
        """Dense copy of the rows when dense enough (made at first use: a solver that reads the
        CSR arrays only, such as the compiled IPSA loop, never pays for it)."""
        if self._want_dense and self._dense is None:
            self._dense = self.csr.toarray()
        return self._dense

    def gather(self, R):
        """(rowloc, cols, vals) of the rows R (CSR gather, vectorized)."""
        r0 = int(R[0])
        if R.size == 1 or (int(R[-1]) - r0 + 1 == R.size and R.size == 2):
            # one row, or a contiguous pair (a logistic group {0, -y a^T x}): plain slices
            p0, p1 = self.indptr[r0], self.indptr[r0 + R.size]
            if R.size == 1:
                return np.zeros(p1 - p0, dtype=np.int64), self.indices[p0:p1], self.data[p0:p1]
            mid = self.indptr[r0 + 1]
            rowloc = np.zeros(p1 - p0, dtype=np.int64)
            rowloc[mid - p0:] = 1
            return rowloc, self.indices[p0:p1], self.data[p0:p1]
        starts = self.indptr[R]
        lens = self.indptr[R + 1] - starts
        total = int(lens.sum())
        rowloc = np.repeat(np.arange(R.size), lens)
        pos = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(starts, lens)
        return rowloc, self.indices[pos], self.data[pos]

    def dot(self, R, x):
        if self.dense is not None:
            return self.dense[R] @ x
        rl, c, v = self.gather(R)
        return np.bincount(rl, weights=v * x[c], minlength=R.size)

    def tdot(self, R, w):
        if self.dense is not None:
            return w @ self.dense[R]
        rl, c, v = self.gather(R)
        return np.bincount(c, weights=v * w[rl], minlength=self.n)

    def sq_tdot(self, R, w):
        if self.dense is not None:
            A = self.dense[R]
            return w @ (A * A)
        rl, c, v = self.gather(R)
        return np.bincount(c, weights=v * v * w[rl], minlength=self.n)


def _ranges(ptr, B):
    """Concatenation of ``arange(ptr[b], ptr[b+1])`` for b in B, and the local batch index."""
    if B.size == 1:
        b = int(B[0])
        return np.arange(ptr[b], ptr[b + 1]), np.zeros(ptr[b + 1] - ptr[b], dtype=np.int64)
    starts = ptr[B]
    lens = ptr[B + 1] - starts
    if np.all(lens == 1):
        return starts, np.arange(B.size)
    loc = np.repeat(np.arange(B.size), lens)
    pos = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(starts, lens)
    return pos, loc


class _AtomRows:
    def __init__(self, g: AtomGroup):
        self.g = g
        self.kern = ATOMS[g.kind]
        self.A = RowMatrix(g.A)
        self.A2 = RowMatrix(g.A2) if g.A2 is not None else None
        self.has_mult = bool(np.any(g.mult >= 0))
        self.simple = not self.has_mult and self.kern.arity == 1

    def _d(self, u, order):
        return self.kern.deriv(u, order)

    def gradient(self, x, R, weight):
        g = self.g
        u = self.A.dot(R, x) + g.b[R]
        cw = g.coef[R] * weight
        if self.simple:
            return self.A.tdot(R, cw * self._d(u, 1))
        mult = g.mult[R]
        w = np.where(mult >= 0, x[np.maximum(mult, 0)], 1.0)
        if self.kern.arity == 2:
            v = self.A2.dot(R, x) + g.b2[R]
            du, dv = self.kern.grad(u, v)
            out = self.A.tdot(R, cw * w * du) + self.A2.tdot(R, cw * w * dv)
            val = self.kern.value(u, v)
        else:
            out = self.A.tdot(R, cw * w * self._d(u, 1))
            val = self._d(u, 0)
        has = mult >= 0
        if has.any():
            out = out + np.bincount(mult[has], weights=(cw * val)[has], minlength=x.size)
        return out

    def subgroup(self, R):
        g = self.g
        return AtomGroup(g.kind, g.coef[R], g.A[R], g.b[R], g.mult[R],
                         None if g.A2 is None else g.A2[R], None if g.b2 is None else g.b2[R])

    def hessian_diag(self, x, R, weight):
        g = self.g
        if self.simple:
            u = self.A.dot(R, x) + g.b[R]
            return self.A.sq_tdot(R, g.coef[R] * weight * self._d(u, 2))
        return weight * self.subgroup(R).hessian(x).diagonal()

    def hessian(self, x, R, weight):
        return weight * self.subgroup(R).hessian(x)


class _LseRows:
    def __init__(self, g: LseGroup):
        self.g = g
        self.A = RowMatrix(g.A)
        self.ptr = np.append(g.starts, g.seg.size).astype(np.int64)
        self.has_mult = bool(np.any(g.mult >= 0))

    def _softmax(self, x, R):
        K, loc = _ranges(self.ptr, R)
        s = self.A.dot(K, x) + self.g.b[K]
        if R.size == 1:
            mx = s.max()
            e = np.exp(s - mx)
            tot = e.sum()
            return K, loc, np.array([mx + np.log(tot)]), e / tot
        starts = np.searchsorted(loc, np.arange(R.size))
        mx = np.maximum.reduceat(s, starts)
        e = np.exp(s - mx[loc])
        tot = np.add.reduceat(e, starts)
        return K, loc, mx + np.log(tot), e / tot[loc]

    def gradient(self, x, R, weight):
        g = self.g
        K, loc, lse, p = self._softmax(x, R)
        mult = g.mult[R]
        cw = g.coef[R] * weight * np.where(mult >= 0, x[np.maximum(mult, 0)], 1.0)
        out = self.A.tdot(K, p * cw[loc])
        has = mult >= 0
        if has.any():
            out = out + np.bincount(mult[has], weights=(g.coef[R] * weight * lse)[has], minlength=x.size)
        return out

    def subgroup(self, R):
        g = self.g
        K, loc = _ranges(self.ptr, R)
        return LseGroup(g.A[K], g.b[K], loc, g.coef[R], g.mult[R])

    def hessian_diag(self, x, R, weight):
        g = self.g
        if self.has_mult:
            return weight * self.subgroup(R).hessian(x).diagonal()
        K, loc, lse, p = self._softmax(x, R)
        cw = g.coef[R] * weight
        d1 = self.A.sq_tdot(K, p * cw[loc])
        # B_r = sum_k p_k A_k per group: diag(B^T diag(cw) B)
        n = x.size
        if self.A.dense is not None:
            Bm = np.zeros((R.size, n))
            np.add.at(Bm, loc, p[:, None] * self.A.dense[K])
        else:
            rl, c, v = self.A.gather(K)
            Bm = np.bincount(loc[rl] * n + c, weights=p[rl] * v, minlength=R.size * n).reshape(R.size, n)
        return d1 - cw @ (Bm * Bm)

    def hessian(self, x, R, weight):
        return weight * self.subgroup(R).hessian(x)
