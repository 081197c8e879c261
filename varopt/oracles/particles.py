"""Weighted particle populations for sequential Monte Carlo: weights, effective sample size,
resampling, the running estimate of log Z and its variance.

A population of N particles carries log-weights ``logw``. :meth:`Particles.reweight` multiplies
the weights by incremental weights ``exp(inc)`` and adds

    log( sum_p W_p exp(inc_p) ),    W the normalised weights before the step,

to ``log_z``, so that after the last step ``exp(log_z)`` is the usual SMC estimate of the ratio
of normalising constants (the product over steps of the weighted average incremental weight;
Del Moral, Doucet & Jasra 2006, eq. 14). It is unbiased when the resampling is unbiased
(E[#copies of p] = N W_p: multinomial, stratified) at fixed times; with resampling triggered by
the ESS the bias is negligible in practice (Del Moral, Doucet & Jasra 2012).

Resampling (when ESS = 1 / sum W^2 < threshold N): ``stratified`` (Kitagawa 1996; Fearnhead 1998)
draws one uniform per stratum ``[(k-1)/N, k/N)``; ``multinomial`` draws N independent indices.
After resampling the weights are equal.

Variance (Lee & Whiteley 2018): with the *Eve index* of each particle (its ancestor at time 0)
and R resampling events,

    Var(Zhat) / Zhat^2  ≈  1 - (N / (N - 1))^(R + 1) * sum_{p, q: E_p != E_q} W_p W_q,

an unbiased estimate of Var(Zhat)/Z^2 (scaled by Zhat^2) for multinomial resampling; with no
resampling it is the sample variance of the weights over N (plain importance sampling). With
stratified resampling it is biased low: stratified offspring counts are nearly deterministic, so the
(N / (N - 1)) factor, which undoes the share of pairs that multinomial resampling gives one
ancestor, adds back about 1/N of relative variance per event that was never lost (a complete
graph on 7 spins, one event, N = 100: half the variance; docs/sasmc.md, "Standard errors"). Use
multinomial resampling where the standard error matters. ``sqrt`` of it is the standard error of
log Zhat (delta method).
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

RESAMPLING = ("stratified", "multinomial")


def stratified_indices(W, rng):
    N = W.size
    u = (np.arange(N) + rng.random(N)) / N
    c = np.cumsum(W)
    c[-1] = 1.0
    return np.searchsorted(c, u, side="right").clip(0, N - 1)


def multinomial_indices(W, rng):
    N = W.size
    c = np.cumsum(W)
    c[-1] = 1.0
    return np.searchsorted(c, np.sort(rng.random(N)), side="right").clip(0, N - 1)


class Particles:
    """Log-weights, log Z increments, resampling and Eve indices of N particles (module doc)."""

    def __init__(self, N, rng, resampling="stratified"):
        if N < 2:
            raise ValueError(f"at least 2 particles are needed (got {N})")
        if resampling not in RESAMPLING:
            raise ValueError(f"resampling must be one of {RESAMPLING} (got {resampling!r})")
        self.N = int(N)
        self.rng = rng
        self.resampling = resampling
        self.logw = np.zeros(self.N)
        self.log_z = 0.0
        self.eve = np.arange(self.N)
        self.resamples = 0

    def weights(self):
        w = np.exp(self.logw - self.logw.max())
        return w / w.sum()

    def ess(self):
        W = self.weights()
        return 1.0 / float(W @ W)

    def reweight(self, inc):
        inc = np.asarray(inc, dtype=float)
        new = self.logw + inc
        self.log_z += float(logsumexp(new) - logsumexp(self.logw))
        self.logw = new - new.max()

    def resample(self, threshold):
        """Resample when ESS < threshold * N; returns the ancestor indices (or None)."""
        if self.ess() >= threshold * self.N:
            return None
        W = self.weights()
        idx = (stratified_indices if self.resampling == "stratified" else multinomial_indices)(W, self.rng)
        self.logw = np.zeros(self.N)
        self.eve = self.eve[idx]
        self.resamples += 1
        return idx

    def relative_variance(self):
        """Lee & Whiteley's estimate of Var(Zhat)/Zhat^2 (module docstring; clipped at 0)."""
        W = self.weights()
        same = np.bincount(self.eve, weights=W, minlength=self.N)
        cross = 1.0 - float(same @ same)
        N = self.N
        v = 1.0 - (N / (N - 1.0)) ** (self.resamples + 1) * cross
        return max(v, 0.0)
