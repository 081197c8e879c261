"""Finite sums read off a program objective; math in :mod:`varopt.oracles.protocol`."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..program import AtomGroup, Expression
from ..program.atoms import ATOMS
from .protocol import Oracle
from .rows import _AtomRows, _LseRows, _ranges
from .sampling import Sampler


class FiniteSumOracle(Oracle):
    """Finite sum read off a program objective (see module docstring for the scaling)."""

    def __init__(self, expr: Expression):
        self.expr = expr
        self.n = expr.n
        self.lin = expr.linear
        self.Q = expr.quadratic.hessian_matrix if len(expr.quadratic) else None
        self.parts = []  # (rows helper, ptr over samples, rows sorted by sample)
        groups = []
        for g in expr.groups():
            D = _coordinate_squares(g)
            if D is None:
                groups.append(g)
            else:   # a penalty on coordinates: part of the deterministic d (see protocol)
                self.Q = D if self.Q is None else (self.Q + D).tocsr()
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


def _coordinate_squares(g):
    """The Hessian ``sum_r 2 c_r a_r^2 e_j e_j^T`` (csr) of an atom group made only of nonnegatively weighted squares
    of single scaled coordinates, ``c_r (a_r x_j)^2`` (an L2 penalty: ``lam * cp.sum_squares(w)``, Pyomo's
    ``sum(w[j]**2 ...)``, which both front-ends emit as ``square`` rows), else None. Such a group is a penalty, not data:
    the finite sum takes it into the deterministic part ``d`` (exact at every step, as scikit-learn's SGD applies its
    penalty) instead of drawing its rows as samples (CVXPY labels them 0..m-1, so they joined data points 0..m-1; Pyomo
    rows are samples of their own, so the penalty added m samples to the sum)."""
    if not isinstance(g, AtomGroup) or not ATOMS[g.kind].quadratic or g.A2 is not None or not len(g):
        return None
    A = g.A.tocsr()
    if (np.diff(A.indptr) != 1).any() or np.any(g.b != 0.0) or np.any(g.mult >= 0) or np.any(g.coef < 0):
        return None
    n = A.shape[1]
    d = np.bincount(A.indices, weights=2.0 * g.coef * A.data * A.data, minlength=n)
    return sp.diags(d, format="csr")
