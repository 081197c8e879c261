"""Gradient oracles for IPSA: where the noisy gradient ``g_k`` of Fig. 2.1 step 3 comes from.

Every oracle has the same small interface (used by :mod:`.solver`)::

    oracle.n_samples            # terms of a finite sum (None: not a finite sum)
    oracle.exact                # True when gradient() is the exact gradient of f
    oracle.start(rng, batch_size, sampling)
    batch = oracle.next_batch() # None when a stream is exhausted
    g = oracle.gradient(x, batch)           # unbiased estimate of grad f(x), shape (n,)
    oracle.hessian_diag(x, batch)           # optional: estimate of diag Hess f(x)
    oracle.hessian(x, batch)                # optional: estimate of Hess f(x)
    oracle.value(x)                         # optional: f(x) (history), None if unknown

Calling ``gradient`` twice with the same ``batch`` at two points uses the same sample (common
random numbers); the quasi-Newton secant pairs of :mod:`.hessian` rely on it.

**Finite sums** (:class:`FiniteSumOracle`): the objective ``f(x) = d(x) + sum_{i=1}^N f_i(x)``
where ``d`` is the deterministic linear + quadratic part of the program objective and the
samples ``f_i`` are the rows of its atom groups and log-sum-exp groups (rows sharing a
``label`` form one sample; without labels every row is its own sample). The estimate is

    g = grad d(x) + (N / |B|) sum_{i in B} grad f_i(x),

unbiased for ``grad f(x)`` when ``B`` is a uniform batch (with replacement, ``uniform``) or a
uniformly random subset (``permutation``); ``cyclic`` visits the samples in order (the
on-line setting of §2.5). With ``batch_size >= N`` the batch is the whole sum and ``g`` is exact.
Thus, for ``f = (1/2n) sum (y_i - a_i^T w)^2 + (lambda/n) 1^T x`` and one sample per step,
``g = -a_i (y_i - a_i^T w) + lambda/n`` is the regularised delta rule (2.59)/(2.62).
All batch evaluations are vectorized gathers of the sampled rows (no per-term Python loop).

**User oracle** (:class:`UserOracle`): ``gradient(x, rng) -> g``; ``rng`` is a
``numpy.random.Generator`` seeded per iteration from the solver's seed (so re-evaluation at
another point reuses the same random numbers). Optional attributes ``hessian_diag(x, rng)`` and
``n_terms`` (iterations per pass).

**Streams** (:class:`StreamOracle`): ``StreamOracle(iterable, grad_fn, hess_diag_fn=None,
n_total=None)`` pulls one mini-batch per iteration from ``iterable`` (e.g. chunks read from
disk) and calls ``grad_fn(x, batch)``; the solver stops when the stream is exhausted.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...program import AtomGroup, Expression, LseGroup


class Oracle:
    n_samples = None
    exact = False

    def start(self, rng, batch_size, sampling):
        self.rng = rng

    def next_batch(self):
        return int(self.rng.integers(2 ** 62))

    def gradient(self, x, batch):  # pragma: no cover - abstract
        raise NotImplementedError

    def hessian_diag(self, x, batch):
        raise NotImplementedError(f"{type(self).__name__} has no Hessian diagonal")

    def hessian(self, x, batch):
        raise NotImplementedError(f"{type(self).__name__} has no Hessian")

    @property
    def has_hessian_diag(self):
        return False

    @property
    def has_hessian(self):
        return False

    def value(self, x):
        return None


class RowMatrix:
    """Rows of a sparse matrix gathered fast (dense copy when it is dense enough)."""

    def __init__(self, A: sp.csr_matrix):
        A = sp.csr_matrix(A)
        self.n = A.shape[1]
        self.csr = A
        m = A.shape[0]
        self.dense = None
        if m * self.n <= 2e7 and A.nnz >= 0.25 * m * self.n:
            self.dense = A.toarray()
        self.indptr, self.indices, self.data = A.indptr, A.indices, A.data

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
        self.A = RowMatrix(g.A)
        self.A2 = RowMatrix(g.A2) if g.A2 is not None else None
        self.has_mult = bool(np.any(g.mult >= 0))
        self.simple = not self.has_mult and g.kind != "quad_over_lin"

    def _d(self, u, order):
        k = self.g.kind
        if k == "square":  # the common least-squares case: no errstate context (it costs microseconds)
            return (None, 2.0 * u, None)[order] if order == 1 else (u * u, None, np.full_like(u, 2.0))[order]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if k == "square":
                return (u * u, 2.0 * u, np.full_like(u, 2.0))[order]
            if k == "exp":
                return np.exp(u)
            if k == "xlogx":
                return (u * np.log(u), np.log(u) + 1.0, 1.0 / u)[order]
            if k == "neglog":
                return (-np.log(u), -1.0 / u, 1.0 / (u * u))[order]
        raise AssertionError(k)

    def gradient(self, x, R, weight):
        g = self.g
        u = self.A.dot(R, x) + g.b[R]
        cw = g.coef[R] * weight
        if self.simple:
            return self.A.tdot(R, cw * self._d(u, 1))
        mult = g.mult[R]
        w = np.where(mult >= 0, x[np.maximum(mult, 0)], 1.0)
        if g.kind == "quad_over_lin":
            v = self.A2.dot(R, x) + g.b2[R]
            with np.errstate(divide="ignore", invalid="ignore"):
                out = self.A.tdot(R, cw * w * 2.0 * u / v) + self.A2.tdot(R, cw * w * -(u / v) ** 2)
                val = u * u / v
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


class Sampler:
    """Batches of sample indices: ``cyclic`` (in order, wrapping), ``permutation`` (a fresh
    random order every pass) or ``uniform`` (independent, with replacement)."""

    def __init__(self, N, batch_size, sampling, rng):
        self.N, self.b, self.mode, self.rng = N, min(batch_size, N), sampling, rng
        self.pos = 0
        self.order = np.arange(N) if sampling != "permutation" else rng.permutation(N)
        self.full = batch_size >= N
        self.all = np.arange(N)

    def next(self):
        if self.full:
            return self.all
        if self.mode == "uniform":
            return self.rng.integers(0, self.N, size=self.b)
        end = self.pos + self.b
        if end <= self.N:
            out = self.order[self.pos:end]
            self.pos = end if end < self.N else 0
            if self.pos == 0 and self.mode == "permutation":
                self.order = self.rng.permutation(self.N)
            return out
        head = self.order[self.pos:]
        if self.mode == "permutation":
            self.order = self.rng.permutation(self.N)
        rest = end - self.N
        self.pos = rest
        return np.concatenate([head, self.order[:rest]])


class FiniteSumOracle(Oracle):
    """Finite sum read off a program objective (see module docstring for the scaling)."""

    def __init__(self, expr: Expression):
        self.expr = expr
        self.n = expr.n
        self.lin = expr.linear
        self.Q = expr.quadratic.hessian_matrix if len(expr.quadratic) else None
        self.parts = []  # (rows helper, ptr over samples, rows sorted by sample)
        groups = list(expr.groups())
        labels = [getattr(g, "label", None) for g in groups]
        if groups and all(lb is not None for lb in labels):
            allv = np.concatenate([np.asarray(lb) for lb in labels])
            uniq, inv = np.unique(allv, return_inverse=True)
            N = uniq.size
            off = 0
            sample_of = []
            for g in groups:
                sample_of.append(inv[off:off + len(g)])
                off += len(g)
        else:
            N = 0
            sample_of = []
            for g in groups:
                sample_of.append(np.arange(N, N + len(g)))
                N += len(g)
        self.n_samples = N if N else None
        self.exact = N == 0
        for g, smp in zip(groups, sample_of):
            order = np.argsort(smp, kind="stable")
            ptr = np.searchsorted(smp[order], np.arange(N + 1))
            helper = _AtomRows(g) if isinstance(g, AtomGroup) else _LseRows(g)
            self.parts.append((helper, ptr.astype(np.int64), order.astype(np.int64)))
        self._unit = {id(ptr): bool(np.all(np.diff(ptr) == 1)) for _, ptr, _ in self.parts}
        self.batch_size = 1

    @property
    def has_hessian_diag(self):
        return True

    @property
    def has_hessian(self):
        return True

    def start(self, rng, batch_size, sampling):
        self.rng = rng
        if self.n_samples:
            self.sampler = Sampler(self.n_samples, batch_size, sampling, rng)
            self.exact = self.sampler.full

    def next_batch(self):
        return self.sampler.next() if self.n_samples else None

    def _rows(self, ptr, order, B):
        if ptr.size == self.n_samples + 1 and self._unit[id(ptr)]:
            return order[B]  # one row per sample in this group
        pos, _ = _ranges(ptr, B)
        return order[pos]

    def deterministic_gradient(self, x):
        g = self.lin.copy()
        if self.Q is not None:
            g += self.Q @ x
        return g

    def _sampled(self, x, B, total, method):
        """``total`` plus the ``N/|B|``-scaled ``method`` (gradient, hessian_diag, hessian) of the batch rows."""
        if B is None:
            return total
        w = self.n_samples / B.size
        for helper, ptr, order in self.parts:
            R = self._rows(ptr, order, B)
            if R.size:
                total = total + getattr(helper, method)(x, R, w)
        return total

    def gradient(self, x, B):
        return self._sampled(x, B, self.deterministic_gradient(x), "gradient")

    def hessian_diag(self, x, B):
        h = np.zeros(self.n) if self.Q is None else self.Q.diagonal().copy()
        return self._sampled(x, B, h, "hessian_diag")

    def hessian(self, x, B):
        H = sp.csr_matrix((self.n, self.n)) if self.Q is None else self.Q.copy()
        return sp.csr_matrix(self._sampled(x, B, H, "hessian"))

    def value(self, x):
        return self.expr.value(x)


class UserOracle(Oracle):
    """Wrap ``gradient(x, rng) -> g`` (a callable or an object with a ``gradient`` method)."""

    def __init__(self, fn):
        self.fn = fn
        self.grad = fn.gradient if hasattr(fn, "gradient") else fn
        if not callable(self.grad):
            raise TypeError("oracle must be callable as gradient(x, rng) or have a gradient(x, rng) method")
        self.hd = getattr(fn, "hessian_diag", None)
        nt = getattr(fn, "n_terms", None)
        self.n_samples = int(nt) if nt is not None else None

    @property
    def has_hessian_diag(self):
        return self.hd is not None

    def gradient(self, x, seed):
        return self.grad(x, np.random.default_rng(seed))

    def hessian_diag(self, x, seed):
        return self.hd(x, np.random.default_rng(seed))


class StreamOracle(Oracle):
    """Mini-batches from an iterable; ``grad_fn(x, batch)`` returns the gradient estimate.

    ``grad_fn`` must return an unbiased estimate of the gradient of the objective being
    minimised (scale it yourself, e.g. ``(N/|batch|) sum`` for a finite sum of ``N`` terms, or
    the per-example gradient for an on-line average loss). ``hess_diag_fn(x, batch)`` (optional)
    estimates the Hessian diagonal (for ``hessian='diagonal'``). ``n_total`` (optional) is the
    number of batches in one pass, so that the ``passes`` option is meaningful.
    """

    def __init__(self, iterable, grad_fn, hess_diag_fn=None, n_total=None):
        self.iterable = iterable
        self.grad_fn = grad_fn
        self.hd = hess_diag_fn
        self.n_samples = n_total
        self.it = None
        self.exhausted = False

    def start(self, rng, batch_size, sampling):
        self.rng = rng
        self.it = iter(self.iterable)

    @property
    def has_hessian_diag(self):
        return self.hd is not None

    def next_batch(self):
        try:
            return next(self.it)
        except StopIteration:
            self.exhausted = True
            return None

    def gradient(self, x, batch):
        return self.grad_fn(x, batch)

    def hessian_diag(self, x, batch):
        return self.hd(x, batch)
