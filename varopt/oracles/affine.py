"""An oracle seen through an affine change of variables ``x = T z + t``.

When a reduction replaces the variables (ipsa eliminates linear equalities: ``x = T z + t`` with
``T`` of full column rank, :mod:`varopt.program.eliminate`), an oracle written for ``x`` serves
the reduced variables by the chain rule:

    grad_z f(T z + t) = T^T grad_x f(x),      Hess_z = T^T H T,
    diag(T^T diag(h) T)_j = sum_i T_ij^2 h_i   (exact when the x-Hessian estimate is diagonal).

The batch protocol (``start``, ``next_batch``, common random numbers per batch) is the inner
oracle's, so the sample drawn at an iteration is the same sample in either parametrisation.
"""
from __future__ import annotations

import numpy as np

from .protocol import Oracle


class AffineOracle(Oracle):
    def __init__(self, inner: Oracle, T, t):
        self.inner, self.T, self.t = inner, T, np.asarray(t, dtype=float)
        self.TT = T.T.tocsr() if hasattr(T, "tocsr") else np.asarray(T).T
        T2 = T.multiply(T) if hasattr(T, "multiply") else np.asarray(T) ** 2
        self.T2T = T2.T.tocsr() if hasattr(T2, "tocsr") else np.asarray(T2).T
        self.n_samples = inner.n_samples
        self.exact = inner.exact

    def _x(self, z):
        return np.asarray(self.T @ z).ravel() + self.t

    # the batch protocol is the inner oracle's
    def start(self, rng, batch_size, sampling):
        return self.inner.start(rng, batch_size, sampling)

    def next_batch(self):
        return self.inner.next_batch()

    def __getattr__(self, name):  # e.g. a stream's ``exhausted``
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def has_hessian_diag(self):
        return self.inner.has_hessian_diag

    @property
    def has_hessian(self):
        return self.inner.has_hessian

    def gradient(self, z, batch):
        return np.asarray(self.TT @ self.inner.gradient(self._x(z), batch)).ravel()

    def hessian_diag(self, z, batch):
        return np.asarray(self.T2T @ self.inner.hessian_diag(self._x(z), batch)).ravel()

    def hessian(self, z, batch):
        H = self.inner.hessian(self._x(z), batch)
        return self.TT @ H @ self.T

    def value(self, z):
        return self.inner.value(self._x(z))
