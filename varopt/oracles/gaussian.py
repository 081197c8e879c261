"""Monte Carlo over a Gaussian q = N(m, S) by the reparameterisation trick.

With S = L L^T (Cholesky) and draws x_k = m + L z_k, z_k ~ N(0, I) (k = 1..K),

    E_q[f]          ~ (1/K) sum_k f(x_k),
    d E_q[f] / d m  ~ (1/K) sum_k grad f(x_k),
    d E_q[f] / d S  ~ (1/K) sum_k sym(L^{-T} z_k grad f(x_k)^T) / 2,

the last by Stein's lemma, E[grad^2 f] = E[S^{-1}(x - m) grad f(x)^T], with Price's theorem
d E_q[f]/dS = E[grad^2 f]/2 (Opper & Archambeau 2009); the gradients used by KL-proximal
variational inference (Khan et al. 2015). The standard-normal draws come from
``numpy.random.default_rng(batch)``: the same ``batch`` at two (m, S) gives the same z_k
(common random numbers).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from ..core.checks import require_finite
from .protocol import Oracle


def _finite(name, a):
    require_finite(name, a, error=ValueError)
    return np.asarray(a, dtype=float)


class GaussianOracle(Oracle):
    """``GaussianOracle(fn, n, n_draws=64, S=None)``; ``fn(X) -> (values (K,), grads (K, n))``
    for draws X (K, n). ``S`` (optional) fixes the covariance for the protocol's ``gradient``."""

    def __init__(self, fn, n, n_draws=64, S=None):
        if not callable(fn):
            raise TypeError("fn must be callable as fn(X) -> (values, grads)")
        if int(n) < 1 or int(n_draws) < 1:
            raise ValueError("n and n_draws must be positive")
        self.fn, self.n, self.K, self.S = fn, int(n), int(n_draws), S

    def draws(self, batch):
        return np.random.default_rng(batch).standard_normal((self.K, self.n))

    def estimate(self, m, S, batch):
        """Return (E_q f, grad wrt m, grad wrt S) from the draws identified by ``batch``."""
        m, S = _finite("m", m), _finite("S", S)
        if m.shape != (self.n,) or S.shape != (self.n, self.n):
            raise ValueError(f"m must have shape ({self.n},) and S ({self.n}, {self.n})")
        if not np.allclose(S, S.T):
            raise ValueError("S must be symmetric")
        try:
            L = np.linalg.cholesky(S)
        except np.linalg.LinAlgError:
            raise ValueError("S must be positive definite") from None
        Z = self.draws(batch)
        vals, grads = self.fn(m + Z @ L.T)
        vals, grads = _finite("fn values", vals), _finite("fn gradients", grads)
        if vals.shape != (self.K,) or grads.shape != (self.K, self.n):
            raise ValueError("fn must return values of shape (K,) and gradients of shape (K, n)")
        W = sla.solve_triangular(L, Z.T, lower=True, trans="T")  # L^{-T} z_k as columns
        GS = W @ grads / self.K
        return vals.mean(), grads.mean(axis=0), (GS + GS.T) / 4.0

    def gradient(self, x, batch):
        """Protocol view with S fixed at ``self.S``: the gradient of E_q[f] in the mean x."""
        if self.S is None:
            raise ValueError("GaussianOracle.gradient needs the covariance S given to the constructor")
        return self.estimate(x, self.S, batch)[1]

    def value(self, x):
        return None
