"""A random-scan block Gibbs kernel over the blocks of a partition, on many particles at once.

For a pairwise spin model whose couplings vanish inside every block B of a partition R, the
sites of B are conditionally independent given the rest, each with ``P(x_i = +1 | rest) =
sigma(2 a_i)``, ``a_i`` the local field (Carbonetto 2009, (4.24)). The random-scan kernel (4.11)

    K(x' | x) = sum_B rho_B p(x'_B | x_-B) delta_{x_-B}(x'_-B),     rho_B = |B| / n,

picks one block per particle (a uniformly random site's block has probability |B|/n) and redraws
it from its conditional. With the backward kernel of Del Moral, Doucet & Jasra (2006, their
(3.41) in the thesis) the incremental weight of a move from pi_{t-1} to pi_t needs
``log sum_B rho_B prod_{i in B} p_t(x'_i | .) / p_{t-1}(x'_i | .)``: :meth:`log_mixture`.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_expit, logsumexp


def log_conditional(X, A):
    """``log p(x_i | rest) = log sigma(2 x_i a_i)`` for spins ``X`` and local fields ``A``."""
    return log_expit(2.0 * X * A)


class RandomScanBlocks:
    """``RandomScanBlocks(labels)``: the kernel (4.11) for the partition with these block labels."""

    def __init__(self, labels):
        labels = np.asarray(labels, dtype=np.int64).ravel()
        self.n = labels.size
        _, self.labels = np.unique(labels, return_inverse=True)
        nb = int(self.labels.max()) + 1 if self.n else 0
        self.sizes = np.bincount(self.labels, minlength=nb)
        self.log_rho = np.log(self.sizes / max(self.n, 1))
        self.indicator = sp.csr_matrix((np.ones(self.n), (np.arange(self.n), self.labels)), shape=(self.n, nb))

    def move(self, X, A, rng):
        """Redraw one block per particle (rows of ``X``, in place) given the local fields ``A``
        computed from ``X`` (valid for the block's sites: they do not interact)."""
        N = X.shape[0]
        site = rng.integers(0, self.n, size=N)
        mask = self.labels[None, :] == self.labels[site][:, None]
        new = np.where(rng.random(X.shape) < expit(2.0 * A), 1.0, -1.0)
        np.copyto(X, new, where=mask)
        return X

    def log_mixture(self, D):
        """``log sum_B rho_B exp(sum_{i in B} D_i)`` per row of ``D`` (N x n log-ratios)."""
        per_block = np.asarray(self.indicator.T @ D.T).T
        return logsumexp(per_block + self.log_rho, axis=1)
