"""A stateful SMC particle oracle for exponential families of pairwise binary models
(Carbonetto 2009, ch. 3; Del Moral, Doucet & Jasra 2006).

**Family.** Spins ``x in {-1, +1}^n``; *terms* are couplings ``x_i x_j`` (edges ``ei, ej``) and
fields ``x_i`` (sites ``fi``); each term ``t`` belongs to a parameter group ``g(t)``, so with
the 0/1 matrix ``G`` (terms x groups) the statistic is ``a(x) = G^T a_term(x)`` and

    p(x; theta) = exp(<a(x), theta> - c(theta)),   coefficients of the terms  G theta.   (3.8)

``theta = 0`` is the uniform distribution, sampled directly, ``c(0) = n ln 2``.

**Population.** N particles (full states ``X``) with weights (:class:`.particles.Particles`)
targeting ``p(.; theta_pop)``. :meth:`SMCOracle.move_to` does Fig. 3.4 steps 7-9 for a new
``theta``: reweight (log incremental weights ``log f_theta(x) - log f_pop(x)``), resample
(stratified) when ESS < threshold * N, one or more Gibbs sweeps at ``theta`` (colour classes,
:class:`.gibbs_kernel.ColourGibbs`). The incremental weights are

* **Rao-Blackwellised** (3.43) when the coupling graph has a proper 2-colouring (A, B): the
  particle's A-part is used, ``log f_theta(x_A) = sum_A h_i x_i + sum_{j in B} log 2cosh(phi_j)``,
  ``phi_j = h_j + sum_{i~j} w_ij x_i`` (B summed out), and the Gibbs sweep draws B | A then A | B;
* **naive** (3.59) otherwise: ``<a(x), theta - theta_pop>``.

Either way ``sum_p W_p exp(inc_p)`` estimates ``Z_theta / Z_pop`` and the log normaliser is the
running sum (3.39)/(3.46). Both components of a particle stay a joint sample of ``p_pop``
(``x_B`` is drawn from its conditional before ``x_A``), so the naive statistics are available
for the variance safeguard in both modes.

**Oracle protocol** (:mod:`.protocol`). ``gradient(theta, batch)`` with a *new* batch first moves
the population to ``theta``; with the batch of the last move it only reweights a copy of the
weights to ``theta`` (common random numbers: ipsa's secant pairs). The gradient of
``F(theta) = KL(p_theta || p_theta*)`` is (3.25)-(3.27)

    grad F = Var_theta[a(X)] (theta - theta*)  ~  G^T [Cov_W(m) + sum_s W_s C_s] G (theta - theta*),

with ``m_s = E[a_term | x_A^(s)]`` and ``C_s = Cov[a_term | x_A^(s)]`` (3.30)-(3.32) in the RB case
(``m_s = a_term(x^(s))``, ``C_s = 0`` otherwise). Given x_A the B spins are independent: the terms
touching ``j in B`` are ``c_t x_j`` (``c_t = x_i`` for an edge, 1 for the field) so
``(C_s v)_t = c_t (1 - tanh^2 phi_j) u_j`` with ``u_j = v_{field j} + sum_{t=(i,j)} x_i v_t``: O(n + m)
per particle.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from .colouring import colour_classes, two_colouring
from .gibbs_kernel import ColourGibbs
from .particles import Particles
from .protocol import Oracle


def _log2cosh(u):
    return np.logaddexp(u, -u)


class SMCOracle(Oracle):
    """``SMCOracle(n, ei, ej, fi, group, theta_star, particles, rao_blackwell=None, ...)`` (module doc).

    ``group`` has one entry per term, edges first then fields; ``theta_star`` one per group.
    ``rao_blackwell``: None (when two-colourable), True (error otherwise) or False."""

    exact = False

    def __init__(self, n, ei, ej, fi, group, theta_star, particles=100, rao_blackwell=None,
                 ess_threshold=0.5, resampling="stratified", sweeps=1):
        self.n = int(n)
        self.ei = np.asarray(ei, dtype=np.int64)
        self.ej = np.asarray(ej, dtype=np.int64)
        self.fi = np.asarray(fi, dtype=np.int64)
        self.me, self.mf = self.ei.size, self.fi.size
        self.group = np.asarray(group, dtype=np.int64)
        self.theta_star = np.asarray(theta_star, dtype=float)
        self.d = self.theta_star.size
        dt = self.me + self.mf
        self.G = sp.csr_matrix((np.ones(dt), (np.arange(dt), self.group)), shape=(dt, self.d))
        self.N, self.ess_threshold, self.resampling, self.sweeps = int(particles), ess_threshold, resampling, sweeps
        lab = two_colouring(self.n, self.ei, self.ej)
        if rao_blackwell and lab is None:
            raise ValueError("Rao-Blackwellisation needs a two-colourable coupling graph")
        self.rb = lab is not None and rao_blackwell is not False
        if self.rb:
            self._setup_rb(lab)
        else:
            self.classes = colour_classes(self.n, self.ei, self.ej)
        self._pattern = (np.concatenate([self.ei, self.ej]), np.concatenate([self.ej, self.ei]))

    def _setup_rb(self, lab):
        self.A, self.B = np.flatnonzero(lab == 0), np.flatnonzero(lab == 1)
        bpos = np.full(self.n, -1, dtype=np.int64)
        bpos[self.B] = np.arange(self.B.size)
        swap = lab[self.ei] == 1
        self.ea = np.where(swap, self.ej, self.ei)  # the A end of each edge
        self.eb = bpos[np.where(swap, self.ei, self.ej)]  # the B end, as a position in B
        self.EB = sp.csr_matrix((np.ones(self.me), (np.arange(self.me), self.eb)), shape=(self.me, self.B.size))
        inB = lab[self.fi] == 1
        self.fB, self.fbpos = np.flatnonzero(inB), bpos[self.fi[inB]]
        self.fA = np.flatnonzero(~inB)
        self.classes = [self.B, self.A]  # draw x_B | x_A, then x_A | x_B (Fig. 3.4 step 8)

    # --- the family -------------------------------------------------------------------------
    def coefficients(self, theta):
        """``(h, w)``: fields per site and coupling per edge of ``p(.; theta)``."""
        c = np.asarray(theta, dtype=float)[self.group]
        h = np.zeros(self.n)
        np.add.at(h, self.fi, c[self.me:])
        return h, c[:self.me]

    def term_stats(self, X):
        """``a_term(x)`` per particle (N x terms): edges, then fields."""
        return np.hstack([X[:, self.ei] * X[:, self.ej], X[:, self.fi]])

    def _phi(self, X, h, w):
        return h[self.B] + (self.EB.T @ (X[:, self.ea] * w).T).T

    def log_f(self, X, theta):
        """Log unnormalised density of the population's state at ``theta``: the A-marginal (RB)
        or the joint (naive)."""
        h, w = self.coefficients(theta)
        if not self.rb:
            return self.term_stats(X) @ (self.G @ np.asarray(theta, dtype=float))
        return X[:, self.A] @ h[self.A] + _log2cosh(self._phi(X, h, w)).sum(axis=1)

    def rb_stats(self, X, theta):
        """``(m, tau)``: E[a_term | x_A] per particle and tanh(phi_B) (RB), or ``(a_term, None)``."""
        if not self.rb:
            return self.term_stats(X), None
        h, w = self.coefficients(theta)
        tau = np.tanh(self._phi(X, h, w))
        m = np.empty((X.shape[0], self.me + self.mf))
        m[:, :self.me] = X[:, self.ea] * tau[:, self.eb]
        f = m[:, self.me:]
        f[:, self.fA] = X[:, self.fi[self.fA]]
        f[:, self.fB] = tau[:, self.fbpos]
        return m, tau

    def _cond_cov_dot(self, X, tau, W, v):
        """``sum_s W_s C_s v`` for the conditional covariances of the RB case (module docstring)."""
        u = (self.EB.T @ (X[:, self.ea] * v[:self.me]).T).T
        if self.fB.size:
            u[:, self.fbpos] += v[self.me:][self.fB]
        r = W[:, None] * (1.0 - tau * tau) * u  # N x |B|
        out = np.zeros(self.me + self.mf)
        out[:self.me] = np.einsum("st,st->t", X[:, self.ea], r[:, self.eb])
        out[self.me:][self.fB] = r[:, self.fbpos].sum(axis=0)
        return out

    # --- the oracle protocol ------------------------------------------------------------------
    def start(self, rng, batch_size=None, sampling=None):
        self.rng = rng
        self.X = rng.integers(0, 2, size=(self.N, self.n)).astype(float) * 2.0 - 1.0
        self.pop = Particles(self.N, rng, self.resampling)
        self.theta_pop = np.zeros(self.d)
        self.log_c = self.n * np.log(2.0)  # c(0); the running estimate of c(theta_pop) is log_c + pop.log_z
        self._batches = 0
        self._batch = None
        self.moves = 0
        self.path = []  # every theta the population was moved to, in order

    def next_batch(self):
        self._batches += 1
        return self._batches

    def log_normalizer(self):
        """Running estimate of ``c(theta_pop)`` (3.39)/(3.46)."""
        return self.log_c + self.pop.log_z

    def move_to(self, theta):
        """Fig. 3.4 steps 7-9 at ``theta``: reweight, resample below the ESS threshold, Gibbs."""
        theta = np.asarray(theta, dtype=float).copy()
        inc = self.log_f(self.X, theta) - self.log_f(self.X, self.theta_pop)
        if not np.isfinite(inc).all():
            raise FloatingPointError("non-finite incremental SMC weight")
        self.pop.reweight(inc)
        idx = self.pop.resample(self.ess_threshold)
        if idx is not None:
            self.X = self.X[idx]
        h, w = self.coefficients(theta)
        J = sp.csr_matrix((np.concatenate([w, w]), self._pattern), shape=(self.n, self.n))
        kernel = ColourGibbs(h, J, classes=self.classes)
        for _ in range(self.sweeps):
            kernel.sweep(self.X, self.rng)
        self.kernel = kernel
        self.theta_pop = theta
        self.moves += 1
        self.path.append(theta)

    def replay(self, rng, path=None, resampling=None):
        """A fresh population (same family and settings; ``resampling`` overrides the scheme) moved
        along ``path`` (default: this one's): its Zhat is unbiased for the fixed path, which no
        longer depends on its particles."""
        o = SMCOracle.__new__(SMCOracle)
        o.__dict__.update({k: v for k, v in self.__dict__.items()
                           if k not in ("X", "pop", "theta_pop", "log_c", "path", "kernel", "rng")})
        if resampling is not None:
            o.resampling = resampling
        o.start(rng)
        for theta in (self.path if path is None else path):
            o.move_to(theta)
        return o

    def weights_at(self, theta):
        """Normalised weights of the current particles reweighted (not moved) to ``theta``."""
        if np.array_equal(theta, self.theta_pop):
            return self.pop.weights()
        lw = self.pop.logw + self.log_f(self.X, theta) - self.log_f(self.X, self.theta_pop)
        return np.exp(lw - logsumexp(lw))

    def gradient(self, theta, batch):
        theta = np.asarray(theta, dtype=float)
        if batch != self._batch:
            self.move_to(theta)
            self._batch = batch
        return self.gradient_at(theta, self.weights_at(theta))

    def gradient_at(self, theta, W):
        """(3.26)/(3.30): ``G^T [Cov_W(m) + sum W C] G (theta - theta*)`` with the weights ``W``."""
        m, tau = self.rb_stats(self.X, theta)
        v = self.G @ (np.asarray(theta, dtype=float) - self.theta_star)
        mc = m - W @ m
        g = (W * (mc @ v)) @ mc
        if tau is not None:
            g = g + self._cond_cov_dot(self.X, tau, W, v)
        return self.G.T @ g

    def mean_stats(self, W=None):
        """RB (or plain) estimate of ``E[a_term]`` at ``theta_pop`` and the per-particle values."""
        W = self.pop.weights() if W is None else W
        m, _ = self.rb_stats(self.X, self.theta_pop)
        return W @ m, m

    def directional(self, dtheta):
        """Naive statistics along a direction: ``<a(x_s), dtheta>`` per particle (3.59)."""
        return self.term_stats(self.X) @ (self.G @ np.asarray(dtheta, dtype=float))

    def site_means(self):
        """Weighted Rao-Blackwellised ``E[x_i]`` at ``theta_pop`` (E[x_i | rest] averaged)."""
        return self.pop.weights() @ self.kernel.conditional_means(self.X)

    def clustered_se(self, y, W=None):
        """Standard error of the weighted mean of ``y`` with particles grouped by Eve index."""
        W = self.pop.weights() if W is None else W
        r = W * (y - W @ y)
        s = np.bincount(self.pop.eve, weights=r, minlength=self.N)
        return float(np.sqrt(s @ s))
