"""Gibbs-sampling gradients for pairwise binary models (Ising models, Boltzmann machines).

**Model.** For a graph with nodes 1..n and edge list E (pairs i != j, in a fixed order),

    p_theta(x) = exp( sum_i h_i x_i + sum_{(i,j) in E} J_ij x_i x_j ) / Z(theta),

with states either spins x in {-1, +1}^n (``states="spin"``, the Ising model) or bits
x in {0, 1}^n (``states="binary"``, the Boltzmann machine; Ackley, Hinton & Sejnowski 1985).
The parameters are theta = (h_1..h_n, J_e for e in the edge order), of length p = n + |E|, and
the model is the exponential family with sufficient statistics

    phi(x) = (x_1, ..., x_n, x_i x_j for (i, j) in E),    log p_theta(x) = theta^T phi(x) - log Z(theta),

so that

    grad log Z(theta)   = E_theta[phi(x)],
    Hess log Z(theta)   = Cov_theta[phi(x)]   (the Fisher information; positive semidefinite).

Given data with mean statistics ``data_mean`` (the average of phi over the observations), the
average negative log-likelihood is f(theta) = log Z(theta) - theta^T data_mean, convex, with
grad f = E_theta[phi] - data_mean and the same Hessian. Without ``data_mean`` the oracle's
gradient is grad log Z = E_theta[phi].

**Sampler.** E_theta[phi] is a sum over 2^n states, so it is estimated by systematic-scan
Gibbs sampling (Geman & Geman 1984): each sweep updates the sites i = 1..n in order from the
conditional given the current values of the others. With the local field
a_i = h_i + sum_{j ~ i} J_ij x_j,

    spins:  P(x_i = +1 | rest) = sigma(2 a_i)      (log-odds of +1 against -1),
    bits:   P(x_i =  1 | rest) = sigma(a_i),

sigma the logistic function, evaluated by ``scipy.special.expit`` (no overflow for any finite
field, however large |theta|). All chains run together: per site the field is one vectorized
expression over the chains (neighbour lists built once in the constructor). After ``burn_in``
sweeps, the statistics phi of every chain at the end of each of the next ``n_sweeps`` sweeps
are averaged; ``hessian_diag`` is their sampled variance (the diagonal of Cov_theta[phi]).

**Bias.** A chain run for finitely many sweeps from an arbitrary start is not at stationarity,
so the estimate is *biased* for E_theta[phi] (the bias decays geometrically with the burn-in
for this finite ergodic chain, but slowly for strong couplings, where chains stick in one
mode). This is the perturbed, biased-gradient setting of stochastic proximal gradient for
sparse (l1-penalised) Ising model learning, analysed by Atchadé, Fort & Moulines 2017: the
iterates still converge when the Monte Carlo effort grows along the iterations (more chains
or sweeps) or the step sizes decrease suitably.

**Colour-class kernel.** With ``kernel="colour"`` each sweep updates whole colour classes at
once (:class:`varopt.oracles.gibbs_kernel.ColourGibbs`, shared with the ``ais`` solver): the same
systematic-scan chain up to the order of the sites, far faster on large sparse graphs (one sparse
product per class instead of a Python loop over sites). Its random numbers are drawn per class,
so it does not reproduce the site-by-site stream below (it keeps common random numbers).

**Common random numbers.** A ``batch`` is a 62-bit seed; ``numpy.random.default_rng(batch)``
draws the uniform random initial states of the chains and then, sweep by sweep, one uniform per
(chain, site) update. Nothing else is random, and the number of draws does not depend on theta,
so the same batch gives bit-identical results at the same theta and the same random numbers at
two parameter values (the quasi-Newton secants of ipsa rely on that).
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from ..core.checks import require_finite
from .protocol import Oracle

_STATES = ("spin", "binary")


def _count(name, v, lo):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < lo:
        raise ValueError(f"{name} must be an integer >= {lo} (got {v!r})")
    return int(v)


def _edges(n, edges):
    try:
        E = np.asarray(edges if edges is not None else [], dtype=float)
    except (TypeError, ValueError):
        raise ValueError("edges must be an array-like of integer pairs, shape (m, 2)") from None
    if E.size == 0:
        E = E.reshape(0, 2)
    if E.ndim != 2 or E.shape[1] != 2:
        raise ValueError(f"edges must have shape (m, 2) (got shape {E.shape})")
    if not np.isfinite(E).all() or (E != np.round(E)).any():
        raise ValueError("edges must hold integer node indices")
    E = E.astype(np.intp)
    bad = (E < 0) | (E >= n)
    if bad.any():
        k = int(np.argwhere(bad)[0, 0])
        raise ValueError(f"edge {k} = {tuple(E[k])} has a node outside 0..{n - 1}")
    loops = np.flatnonzero(E[:, 0] == E[:, 1])
    if loops.size:
        k = int(loops[0])
        raise ValueError(f"edge {k} = {tuple(E[k])} is a self loop (i == j)")
    key = np.sort(E, axis=1)
    _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        u = key[first[counts > 1][0]]
        dup = np.flatnonzero((key == u).all(axis=1))
        raise ValueError(f"edges {int(dup[0])} and {int(dup[1])} are the same pair "
                         f"{{{int(u[0])}, {int(u[1])}}} (duplicates, including (j, i) after (i, j), are not allowed)")
    return E


#: entries of one block of edge statistics in :meth:`GibbsOracle._column_blocks` (8 MB of float64; a block and its temporaries are about five of them)
_BLOCK_ENTRIES = 1 << 20


class GibbsOracle(Oracle):
    """``GibbsOracle(n, edges, *, states="spin", n_chains=16, n_sweeps=50, burn_in=20,
    data_mean=None)``: sampled gradients of log Z (or of the average negative log-likelihood
    log Z - theta^T data_mean) for the pairwise binary model with parameters
    theta = (h, J) of length n + len(edges).

    Each estimate runs ``n_chains`` chains for ``burn_in`` + ``n_sweeps`` systematic-scan
    sweeps and averages phi over the chains and the last ``n_sweeps`` sweeps."""

    n_samples = None
    exact = False

    def __init__(self, n, edges, *, states="spin", n_chains=16, n_sweeps=50, burn_in=20, data_mean=None,
                 kernel="site"):
        self.n = _count("n", n, 1)
        if kernel not in ("site", "colour"):
            raise ValueError(f"kernel must be 'site' or 'colour' (got {kernel!r})")
        self.kernel = kernel
        if states not in _STATES:
            raise ValueError(f"states must be one of {_STATES} (got {states!r})")
        self.states = states
        self.n_chains = _count("n_chains", n_chains, 1)
        self.n_sweeps = _count("n_sweeps", n_sweeps, 1)
        self.burn_in = _count("burn_in", burn_in, 0)
        self.edges = _edges(self.n, edges)
        self.n_edges = len(self.edges)
        self.n_params = self.n + self.n_edges
        # neighbour lists: for site i, the other end of each incident edge and the edge's index
        ends = np.concatenate([self.edges, self.edges[:, ::-1]])          # (2m, 2): (i, j) both ways
        eidx = np.concatenate([np.arange(self.n_edges)] * 2)
        order = np.argsort(ends[:, 0], kind="stable")
        ptr = np.searchsorted(ends[order, 0], np.arange(self.n + 1))
        self._nbr = [ends[order[ptr[i]:ptr[i + 1]], 1] for i in range(self.n)]
        self._nbr_edge = [eidx[order[ptr[i]:ptr[i + 1]]] for i in range(self.n)]
        if data_mean is not None:
            require_finite("data_mean", data_mean, error=ValueError)
            data_mean = np.asarray(data_mean, dtype=float)
            if data_mean.shape != (self.n_params,):
                raise ValueError(f"data_mean must have shape ({self.n_params},) = (n + |E|,) "
                                 f"(got {data_mean.shape})")
        self.data_mean = data_mean

    # -- parameters and statistics -------------------------------------------------------
    def _theta(self, theta):
        require_finite("theta", theta, error=ValueError)
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},) = (n + |E|,) = "
                             f"({self.n} + {self.n_edges},) (got {theta.shape})")
        return theta

    def split(self, theta):
        """``(h, J)`` from theta (validated)."""
        theta = self._theta(theta)
        return theta[:self.n], theta[self.n:]

    def statistics(self, X):
        """phi(x) for states X (..., n): (x_1..x_n, x_i x_j for (i, j) in edges), shape (..., n + |E|)."""
        X = np.asarray(X, dtype=float)
        a, b = self.edges[:, 0], self.edges[:, 1]
        return np.concatenate([X, X[..., a] * X[..., b]], axis=-1)

    # -- the sampler -----------------------------------------------------------------------
    def sample(self, theta, batch):
        """The recorded states, shape (n_sweeps, n_chains, n) (values in {-1, 1} or {0, 1}):
        chain c at the end of post-burn-in sweep t. Random numbers from ``default_rng(batch)``."""
        h, J = self.split(theta)
        rng = np.random.default_rng(batch)
        C, n = self.n_chains, self.n
        spin = self.states == "spin"
        X = rng.integers(0, 2, size=(C, n)).astype(float)
        if spin:
            X = 2.0 * X - 1.0
        lo = -1.0 if spin else 0.0
        Jn = [J[e] for e in self._nbr_edge]
        out = np.empty((self.n_sweeps, C, n), dtype=np.int8)
        if self.kernel == "colour":
            import scipy.sparse as sp

            from .colouring import colour_classes
            from .gibbs_kernel import ColourGibbs
            a, b = self.edges[:, 0], self.edges[:, 1]
            Jm = sp.csr_matrix((np.concatenate([J, J]), (np.concatenate([a, b]), np.concatenate([b, a]))),
                               shape=(n, n))
            if not hasattr(self, "_classes"):
                self._classes = colour_classes(n, a, b)
            kern = ColourGibbs(h, Jm, self._classes, self.states)
            for sweep in range(self.burn_in + self.n_sweeps):
                kern.sweep(X, rng)
                if sweep >= self.burn_in:
                    out[sweep - self.burn_in] = X
            return out
        for sweep in range(self.burn_in + self.n_sweeps):
            U = rng.random((C, n))
            for i in range(n):
                a = h[i] + X[:, self._nbr[i]] @ Jn[i] if Jn[i].size else np.full(C, h[i])
                p = expit(2.0 * a if spin else a)
                X[:, i] = np.where(U[:, i] < p, 1.0, lo)
            t = sweep - self.burn_in
            if t >= 0:
                out[t] = X
        return out

    def samples(self, theta, batch):
        """Per-sample statistics phi, shape (n_sweeps, n_chains, n + |E|)."""
        return self.statistics(self.sample(theta, batch))

    def _column_blocks(self, X, reduce):
        """``reduce`` of the per-sample statistics' columns (axis 0 of a ``(samples, k)`` block), computed in
        blocks of edges: the full ``samples x (n + |E|)`` matrix of :meth:`samples` is 128 MB at n = 200 with
        all pairs. Each block is C-ordered and at least two columns wide (the spins ride with the first), so
        numpy reduces every column row by row as on the full matrix: the same numbers, bit for bit (a single
        column or an F-ordered block would be summed pairwise)."""
        X = np.asarray(X, dtype=float).reshape(-1, self.n)
        a, b = self.edges[:, 0], self.edges[:, 1]
        step = max(2, _BLOCK_ENTRIES // max(1, X.shape[0]))
        cuts = np.linspace(0, self.n_edges, max(1, self.n_edges // step) + 1).astype(int)
        parts = []
        for k, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])):
            block = X[:, a[lo:hi]] * X[:, b[lo:hi]]
            parts.append(reduce(np.hstack([X, block]) if k == 0 else np.ascontiguousarray(block)))
        return np.concatenate(parts) if parts else reduce(X)

    def estimate(self, theta, batch):
        """Monte Carlo estimate of E_theta[phi] (= grad log Z(theta)), shape (n + |E|,)."""
        return self._column_blocks(self.sample(theta, batch), lambda M: M.mean(axis=0))

    # -- the protocol ------------------------------------------------------------------------
    def gradient(self, x, batch):
        """Estimate of grad f(x): E_x[phi] - data_mean (or E_x[phi] = grad log Z without data)."""
        g = self.estimate(x, batch)
        return g - self.data_mean if self.data_mean is not None else g

    @property
    def has_hessian_diag(self):
        return True

    def hessian_diag(self, x, batch):
        """Sampled variance of each statistic over all recorded samples (the diagonal of
        Cov_x[phi] = Hess log Z(x); ``data_mean`` does not change the Hessian)."""
        return self._column_blocks(self.sample(x, batch), lambda M: M.var(axis=0))

    def value(self, x):
        return None
