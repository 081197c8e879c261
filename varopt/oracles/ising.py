"""Gradient oracles of the Ising log-likelihood: exact by enumeration, and the sampler of Honorio 2012.

**Model** (spins ``x in {-1, +1}^n``, all pairs ``e = (i, j)``, ``i < j``, in ``numpy.triu_indices``
order unless ``edges`` are given)::

    p_theta(x) = exp(b.x + sum_e J_e x_i x_j) / Z(theta),    theta = (b_1..b_n, J_e ...),

the parameterisation of :class:`~varopt.oracles.GibbsOracle`. Honorio 2012, eq. (1), writes
``x^T W x + b^T x`` with W symmetric, zero diagonal, so ``J_e = 2 W_ij`` and
``rho ||W||_1`` (both triangles) ``= rho sum_e |J_e|``. With data moments ``m`` (the average of
``phi(x) = (x, x_i x_j)``), the average negative log-likelihood (eq. 2) is

    L(theta) = log Z(theta) - theta.m,    grad L = E_theta[phi] - m    (eq. 4),

``|E phi - m|_k <= 1 + |m_k|`` (Lemma 3), hence ``gradient_bound = |1 + |m||_2`` (G of the FBS
step), and ``Hess L = Cov phi`` with ``lambda_max <= |phi|^2 = n + |E|`` (``lipschitz``).

* :class:`IsingExactOracle` — ``E phi``, ``log Z`` and ``Cov phi`` by enumeration of the ``2^(n-1)``
  spin-flip pairs of states in chunks (streaming log-sum-exp; the features kept when they fit in
  128 MB, e.g. ``n <= 17``); ``n <= 26``.
* :class:`IsingGibbsOracle` — the sampler of Honorio 2012, §4: ``S`` chains started from the
  mean-field distribution (``init='meanfield'``; or uniform, or persistent chains carried over
  between calls), ``n_sweeps`` colour-class Gibbs sweeps (:class:`ColourGibbs`), the estimate the
  average of ``phi`` over the chains' final states, clipped to ``[-1, 1]`` (Assumption 5). A
  ``(B, V, S, D)``-sampler (Definition 4): biased for finitely many sweeps. ``set_sample_size(S)``
  sets the number of chains (the schedules of ``proxsg``). Common random numbers: the batch seed
  draws the initial states and every sweep (not with ``persistent``, whose chains carry state).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..core.checks import require_finite
from ..program.energy import spin_states
from .colouring import colour_classes
from .gibbs_kernel import ColourGibbs
from .protocol import Oracle

_CHUNK = 1 << 16


class _IsingBase(Oracle):
    def __init__(self, n, edges=None, data_mean=None):
        self.n = int(n)
        if edges is None:
            a, b = np.triu_indices(self.n, 1)
        else:
            E = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
            a, b = E[:, 0], E[:, 1]
        self.a, self.b = a, b
        self.n_params = self.n + a.size
        if data_mean is not None:
            require_finite("data_mean", data_mean, error=ValueError)
            data_mean = np.asarray(data_mean, dtype=float).ravel()
            if data_mean.shape != (self.n_params,):
                raise ValueError(f"data_mean must have shape ({self.n_params},) (got {data_mean.shape})")
        self.data_mean = data_mean
        m = np.zeros(self.n_params) if data_mean is None else np.abs(data_mean)
        self.gradient_bound = float(np.linalg.norm(1.0 + m))
        self.lipschitz = None if self.exact else float(self.n_params)

    def split(self, theta):
        theta = np.asarray(theta, dtype=float).ravel()
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},) (got {theta.shape})")
        require_finite("theta", theta, error=ValueError)
        return theta[:self.n], theta[self.n:]

    def coupling_matrix(self, J):
        n = self.n
        return sp.csr_matrix((np.r_[J, J], (np.r_[self.a, self.b], np.r_[self.b, self.a])), shape=(n, n))

    def statistics(self, X):
        X = np.asarray(X, dtype=float)
        return np.concatenate([X, X[..., self.a] * X[..., self.b]], axis=-1)

    def moments_from(self, Ex, Exx):
        """``E phi`` from ``E x`` and the matrix ``E x x^T``."""
        return np.r_[Ex, Exx[self.a, self.b]]

    def gradient(self, x, batch):
        g = self.estimate(x, batch)
        return g - self.data_mean if self.data_mean is not None else g


def _gram(A):
    """``A^T A`` by a symmetric rank-k update (BLAS ``dsyrk``: half the work of a product)."""
    from scipy.linalg.blas import dsyrk
    if A.shape[1] == 0:  # no pairs (n = 1, or no edges): BLAS rejects a zero dimension
        return np.zeros((0, 0))
    C = dsyrk(1.0, A.T, trans=0)  # A (C order) is A^T in Fortran order: no copy
    return np.triu(C) + np.triu(C, 1).T


class IsingExactOracle(_IsingBase):
    """``IsingExactOracle(n, edges=None, data_mean=None, chunk_rows=None, cache_bytes=2**27)``: exact
    ``E phi``, ``log Z`` and ``Hess log Z = Cov phi`` by enumeration (module docstring).

    **Spin-flip pairing.** ``phi(-x) = (-x, x_i x_j)``: the single-spin features change sign and the
    pair features do not. So only the ``2^(n-1)`` states with ``x_(n-1) = -1`` are visited, each
    standing for itself and its flip: with ``u = X b`` and ``v = Q J`` (``X`` the spins, ``Q`` the
    pair products of a chunk of those states), the two log-weights are ``v + u`` and ``v - u``;
    with ``w+ = exp(v + u - M)``, ``w- = exp(v - u - M)``, ``ws = w+ + w-``, ``wd = w+ - w-``::

        Z e^-M = sum ws,   E x ~ X^T wd,   E q ~ Q^T ws,
        E x x^T ~ X^T diag(ws) X,   E q q^T ~ Q^T diag(ws) Q,   E x q^T ~ X^T diag(wd) Q

    (the diagonal blocks by a symmetric rank-k update). The chunks (``chunk_rows`` states; default
    ``2^16``, fewer when a feature block would exceed 32 MB) are summed with a streaming
    log-sum-exp (the running maximum ``M`` rescales the partial sums). When the features of all
    ``2^(n-1)`` states fit in ``cache_bytes`` they are built once and kept. Results for the last
    ``theta`` are cached.
    """

    exact = True

    def __init__(self, n, edges=None, data_mean=None, chunk_rows=None, cache_bytes=1 << 27):
        super().__init__(n, edges, data_mean)
        if self.n > 26:
            raise ValueError(f"exact enumeration of 2^{self.n} states is too large (n <= 26)")
        half = 1 << (self.n - 1)
        if chunk_rows is None:
            chunk_rows = max(1, min(_CHUNK, (1 << 25) // (8 * self.n_params)))
        if isinstance(chunk_rows, bool) or int(chunk_rows) != chunk_rows or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a positive integer (got {chunk_rows!r})")
        self.half = half
        self.cache = half * self.n_params * 8 <= cache_bytes
        self.chunk_rows = half if self.cache else int(chunk_rows)
        self._key = None
        self._hkey = None
        self._feat = None

    @property
    def has_hessian(self):
        return True

    def _features(self, lo, hi):
        if self.cache and self._feat is not None:
            return self._feat
        X = spin_states(self.n, lo, hi)
        f = (np.ascontiguousarray(X), X[:, self.a] * X[:, self.b])
        if self.cache:
            self._feat = f
        return f

    def _chunks(self):
        for lo in range(0, self.half, self.chunk_rows):
            yield self._features(lo, min(self.half, lo + self.chunk_rows))

    def _enumerate(self, theta, hessian=False):
        theta = np.asarray(theta, dtype=float).ravel()
        if self._key is not None and np.array_equal(self._key, theta) and (not hessian or self._hkey is not None):
            return self._cache
        h, J = self.split(theta)
        n, q = self.n, self.a.size
        M, s, Sx, Sq = -np.inf, 0.0, np.zeros(n), np.zeros(q)
        if hessian:
            Sxx, Sqq, Sxq = np.zeros((n, n)), np.zeros((q, q)), np.zeros((n, q))
        for X, Q in self._chunks():
            u, v = X @ h, Q @ J
            m = max(M, float(np.max(v + np.abs(u))))
            r = np.exp(M - m) if np.isfinite(M) else 0.0
            wp, wm = np.exp(v + u - m), np.exp(v - u - m)
            ws, wd = wp + wm, wp - wm
            s = s * r + ws.sum()
            Sx = Sx * r + wd @ X
            Sq = Sq * r + ws @ Q
            if hessian:
                rt = np.sqrt(ws)[:, None]
                Sxx = Sxx * r + _gram(X * rt)
                Sqq = Sqq * r + _gram(Q * rt)
                Sxq = Sxq * r + (X * wd[:, None]).T @ Q
            M = m
        logZ = M + np.log(s)
        Ephi = np.r_[Sx, Sq] / s
        H = None
        if hessian:
            H = np.block([[Sxx, Sxq], [Sxq.T, Sqq]]) / s - np.outer(Ephi, Ephi)
        self._key, self._hkey = theta.copy(), (True if hessian else None)
        self._cache = (logZ, np.clip(Ephi, -1.0, 1.0), H)
        return self._cache

    def log_partition(self, theta):
        return self._enumerate(theta)[0]

    def estimate(self, theta, batch=None):
        return self._enumerate(theta)[1].copy()

    def hessian(self, theta, batch=None):
        """``Hess L = Cov_theta[phi]`` (p x p, dense): the Fisher information."""
        return self._enumerate(theta, hessian=True)[2].copy()

    def correlations(self, theta):
        """``E x x^T`` (n x n, ones on the diagonal; zero off the ``edges`` when they are given)."""
        E = self._enumerate(theta)[1]
        C = np.eye(self.n)
        C[self.a, self.b] = C[self.b, self.a] = E[self.n:]
        return C

    def next_batch(self):
        return None

    def value(self, x):
        v = self.log_partition(x)
        return v - float(np.asarray(x, dtype=float) @ self.data_mean) if self.data_mean is not None else v

    def log_likelihood(self, theta, X):
        """Average log-likelihood of spin data ``X`` (rows) under ``theta``: ``theta . mean phi(X) - log Z``,
        the mean of ``phi`` from ``E x`` and ``X^T X`` (``n x n`` memory, not ``T x (n + |E|)``)."""
        X = np.asarray(X, dtype=float)
        m = self.moments_from(X.mean(axis=0), X.T @ X / X.shape[0])
        return float(m @ np.asarray(theta, dtype=float)) - self.log_partition(theta)


def mean_field(h, Jm, iters=200, damping=0.5, tol=1e-10):
    """Naive mean-field magnetisations ``mu = tanh(h + J mu)`` by damped parallel updates from 0."""
    mu = np.zeros(h.size)
    for _ in range(iters):
        new = damping * mu + (1.0 - damping) * np.tanh(h + Jm @ mu)
        if np.max(np.abs(new - mu)) < tol:
            return new
        mu = new
    return mu


class IsingGibbsOracle(_IsingBase):
    """``IsingGibbsOracle(n, edges=None, data_mean=None, n_chains=100, n_sweeps=5, init='meanfield',
    exact_values=None)``: the sampler of Honorio 2012, §4 (module docstring). ``exact_values``: an
    :class:`IsingExactOracle` used only by ``value`` (exact objective history for small n)."""

    exact = False

    def __init__(self, n, edges=None, data_mean=None, n_chains=100, n_sweeps=5, init="meanfield",
                 exact_values=None):
        super().__init__(n, edges, data_mean)
        if init not in ("meanfield", "uniform", "persistent"):
            raise ValueError(f"init must be 'meanfield', 'uniform' or 'persistent' (got {init!r})")
        self.init = init
        self.set_sample_size(n_chains)
        if isinstance(n_sweeps, bool) or int(n_sweeps) != n_sweeps or n_sweeps < 1:
            raise ValueError(f"n_sweeps must be an integer >= 1 (got {n_sweeps!r})")
        self.n_sweeps = int(n_sweeps)
        self.classes = colour_classes(self.n, self.a, self.b)
        self.exact_values = exact_values
        self._chains = None

    def set_sample_size(self, S):
        if isinstance(S, bool) or int(S) != S or S < 1:
            raise ValueError(f"the number of chains must be an integer >= 1 (got {S!r})")
        self.n_chains = int(S)

    def sample(self, theta, batch):
        """Final states of the chains, shape (n_chains, n)."""
        h, J = self.split(theta)
        Jm = self.coupling_matrix(J)
        rng = np.random.default_rng(batch)
        C, n = self.n_chains, self.n
        if self.init == "persistent" and self._chains is not None:
            X = self._chains
            if X.shape[0] < C:
                X = np.vstack([X, X[rng.integers(0, X.shape[0], C - X.shape[0])]])
            X = X[:C].copy()
        elif self.init == "uniform" or self.init == "persistent":
            X = 2.0 * rng.integers(0, 2, size=(C, n)) - 1.0
        else:
            # the iterates of a proximal method are sparse (40-60 % zeros at n = 100-500): the zeros kept by
            # coupling_matrix cost up to 200 mean-field products (22 % of a call at n = 500, 400 chains);
            # dropping them leaves every sum, hence mu, bitwise the same
            Jnz = Jm.copy()
            Jnz.eliminate_zeros()
            mu = mean_field(h, Jnz)
            X = np.where(rng.random((C, n)) < 0.5 * (1.0 + mu), 1.0, -1.0)
        kern = ColourGibbs(h, Jm, self.classes, "spin")
        for _ in range(self.n_sweeps):
            kern.sweep(X, rng)
        if self.init == "persistent":
            self._chains = X.copy()
        return X

    def estimate(self, theta, batch):
        """The chains' average of ``phi`` from ``E x`` and the Gram ``X^T X / S`` (one BLAS product,
        ``O(S n^2)`` work and ``n x n`` memory; the ``S x (n + |E|)`` feature matrix of
        :meth:`statistics` took 1 GB at n = 500, S = 800). The sums of +-1 products are integers, exact
        in floating point, so the result is bitwise the features' mean."""
        X = self.sample(theta, batch)
        return np.clip(self.moments_from(X.mean(axis=0), X.T @ X / X.shape[0]), -1.0, 1.0)

    def value(self, x):
        return None if self.exact_values is None else self.exact_values.value(x)
