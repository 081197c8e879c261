"""Combining independent cmf runs, and the checks that tell when an SMC standard error is not honest.

**Why one run's standard error is too small.** Lee & Whiteley's (2018) estimate of Var(Zhat)/Zhat^2
is computed from the run's own particle genealogy: it measures the spread the run's particles could
produce, conditionally on the region they explored. A mode that no particle visits contributes
nothing to it, so a run that misses a mode reports a small error (3 x 3 +-J glass at T = 0.3:
error -ln 2, standard error 6e-8). It is also at most 1 by construction (``1 - c * cross`` with
``cross >= 0``): the standard error of log Zhat it implies never exceeds 1, whatever the error.

**Replicates.** R runs from different mean-field starts (the best one; coordinate ascent from its
mirror image -mu, the global spin flip, which is the commonest bimodality of Ising models; then from
uniform random means, which on a multimodal model land in different modes), with independent random
streams. Each Zhat_r is unbiased for Z (any start: c(theta_0) is its exact normaliser), so

    Zbar = (1/R) sum_r Zhat_r,     a_r = Zhat_r / sum_s Zhat_s,
    Var(Zbar)/Zbar^2 ≈ max( sum_r a_r^2 v_r ,  sum_r (R a_r - 1)^2 / (R (R - 1)) )

(within-run estimates v_r, and the between-run sample variance of the R independent estimates); the
marginals are the a_r-weighted average of the runs' (each run's particle approximation weighted by
its evidence estimate). Runs that end in different modes reveal it through their marginals: the
largest spread of a marginal P(x_i = 1) across runs above max(0.25, 2/sqrt(N_r)) (N_r particles per
run: beyond Monte Carlo noise), and pairs of log Zhat_r further apart than 4 standard errors, raise ``info['replicates_disagree']`` and a warning.

**Visited-states bound.** Any set U of distinct states gives ``log Z >= log sum_{x in U} p~(x)``
(certified: the terms left out are positive). U = the particles after every refinement of every
run. When the estimate falls below this bound (or below the mean-field bound F) the estimate is
provably too low; the bound is reported instead, without a standard error (it is a bound, not an
estimate) — unless the particles visited all 2^n states, when it is log Z itself (standard error 0). On small low-temperature models whose runs visit both modes this bound is close to log Z.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

DISAGREE_MARGINAL = 0.25   # spread of a marginal P(x_i = 1) across runs that flags different modes
DISAGREE_Z = 4.0           # |log Zhat_r - log Zhat_s| / sqrt(se_r^2 + se_s^2) that flags disagreement


def visited_bound(model, snapshots):
    """``(log sum_{x in U} exp(t(x)), U)`` over the distinct rows U of the ±1 arrays ``snapshots``: a
    certified lower bound on log Z of the log-potential ``model`` (-inf without states), exact when U holds
    all ``2^n`` states."""
    if not snapshots:
        return -math.inf, np.zeros((0, model.n))
    U = np.unique(np.concatenate(snapshots).astype(np.int8), axis=0).astype(float)
    return float(logsumexp(model.value(U))), U


def combine(log_z, rel_var, means, corr, particles):
    """``(log Zbar, relative variance of Zbar, means, corr, diagnostics)`` of R runs (module docstring)."""
    log_z = np.asarray(log_z, dtype=float)
    R = log_z.size
    a = np.exp(log_z - logsumexp(log_z))
    lzbar = float(logsumexp(log_z) - math.log(R))
    within = float(np.sum(a * a * np.asarray(rel_var)))
    between = float(np.sum((R * a - 1.0) ** 2) / (R * (R - 1))) if R > 1 else 0.0
    M, C = np.asarray(means), np.asarray(corr)
    diag = {"replicate_log_partition": log_z.tolist(), "replicate_weights": a.tolist(),
            "replicate_within_rel_var": within, "replicate_between_rel_var": between}
    disagree = False
    if R > 1:
        spread = float(((M.max(axis=0) - M.min(axis=0)) / 2.0).max()) if M.shape[1] else 0.0   # in P(x = 1)
        se = np.sqrt(np.asarray(rel_var, dtype=float))
        gap = np.abs(log_z[:, None] - log_z[None, :])
        z = np.where(gap > 1e-9, gap / np.maximum(np.sqrt(se[:, None] ** 2 + se[None, :] ** 2), 1e-12), 0.0)
        z_max = float(z[~np.eye(R, dtype=bool)].max())
        # with few particles the runs' marginals differ by Monte Carlo noise alone (~1/sqrt(N) in P(x = 1))
        disagree = spread > max(DISAGREE_MARGINAL, 2.0 / math.sqrt(min(particles))) or z_max > DISAGREE_Z
        diag.update(replicate_marginal_spread=spread, replicate_log_partition_z=z_max)
    diag["replicates_disagree"] = bool(disagree)
    return lzbar, max(within, between), a @ M, a @ C, diag
