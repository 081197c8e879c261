"""The ``ais`` solver: annealed importance sampling with resampling (tempered SMC; Neal 2001,
Del Moral, Doucet & Jasra 2006) for an energy model.

Target ``p(s) ∝ exp(t(s))``, ``t = const + l(s)``, ``l(s) = h.s + sum_e w_e s_i s_j`` (spins). The
tempered path ``pi_k ∝ exp(lambda_k l(s))``, ``0 = lambda_0 < ... < lambda_K = 1`` (``steps = K``),
starts at the uniform distribution (exact samples, ``Z_0 = 2^n``). Step k:

1. reweight by ``exp((lambda_k - lambda_{k-1}) l(s_p))`` (the AIS weight with the backward kernel
   of the reversal, eq. 3.43/4.10 of Carbonetto 2009) and add the log weighted-average increment
   to log Zhat (:class:`varopt.oracles.particles.Particles`);
2. resample when ESS < ``ess_threshold`` * ``particles`` (stratified by default);
3. move every particle by ``sweeps`` Gibbs sweeps over the colour classes at ``lambda_k``
   (:class:`varopt.oracles.gibbs_kernel.ColourGibbs`: checkerboard on lattices, two-stage block
   Gibbs on bipartite graphs).

Schedule (``schedule='auto'``): what matters for the weights is how fast the local fields
``lambda (h_i + (J s)_i)`` grow; with ``c = max_i (|h_i| + sum_j |J_ij|)`` they are below 4 (a site
flips with probability > e^-8) for ``lambda <= lambda* = min(1, 4/c)``. ``auto`` is linear in lambda
on ``[0, lambda*]`` (all of ``[0, 1]`` at ordinary temperatures, the ``linear`` schedule) and
geometric on ``[lambda*, 1]``, the steps split in proportion ``1 : ln(1/lambda*)``. At very low
temperature a linear schedule would cross the whole critical region in its first step (a 4 x 4
ferromagnet at T = 1e-3: coupling 0 to 1 in one step); ``auto`` spends a fixed share of the steps
there and the rest on the frozen phase, where the weights hardly change.

``log Z ≈ const + n ln 2 + log Zhat``. Zhat is an unbiased estimate of Z, so by Markov's
inequality ``P(Zhat >= Z / delta) <= delta``: ``log Zhat - ln(1/delta)`` is a lower bound on
log Z with probability ``>= 1 - delta`` (``info['log_partition_markov_lower']``; Gomes, Sabharwal &
Selman 2007), reported in ``info`` only, never as a certificate. ``info['log_partition_se']`` is
the standard error of log Zhat from the particles (Lee & Whiteley 2018). Marginals are the
Rao-Blackwellised weighted averages of ``E[s_i | rest]``; pair correlations are weighted averages.
"""
from __future__ import annotations

import math

import numpy as np

from ...options import Option, OptionSet, limit_options, positive, progress_options, start_options
from ...oracles.gibbs_kernel import ColourGibbs
from ...oracles.particles import RESAMPLING, Particles
from ...registry import Solver, register_solver
from ..energy_result import beta_option, finish, fraction_option, log_potential


def tempering_schedule(K, model, kind="auto"):
    """``lambda_0 = 0 < ... < lambda_K = 1`` (module docstring)."""
    lin = np.arange(K + 1) / K
    if kind == "linear":
        return lin
    c = float(np.max(np.abs(model.h) + np.asarray(abs(model.J).sum(axis=1)).ravel(), initial=0.0))
    lam_star = 1.0 if c <= 4.0 else 4.0 / c
    if lam_star >= 1.0 or K < 4:
        return lin
    share = math.log(1.0 / lam_star)
    K1 = min(K - 1, max(1, int(round(K / (1.0 + share)))))
    out = np.empty(K + 1)
    out[:K1 + 1] = lam_star * np.arange(K1 + 1) / K1
    out[K1:] = lam_star ** (1.0 - np.arange(K - K1 + 1) / (K - K1))
    out[-1] = 1.0
    return out


def _at_least_two(v):
    return v is not None and v >= 2


@register_solver
class AnnealedIS(Solver):
    name = "ais"
    summary = ("annealed importance sampling with resampling (tempered SMC, colour-class Gibbs moves) for "
               "energy models: unbiased estimate of Z")
    accepts_binary = True
    options = OptionSet(limit_options(max_iter=None)[1:] + progress_options() + start_options()[1:] + [
        beta_option(),
        Option("steps", 1000, "number of tempering steps (linear in the inverse temperature)", int, positive,
               "must be a positive integer"),
        Option("particles", 100, "number of particles", int, _at_least_two, "must be an integer >= 2"),
        fraction_option("ess_threshold", 0.5, "resample when the effective sample size falls below this "
                        "fraction of the particles, in (0, 1]"),
        Option("resampling", "multinomial", "resampling scheme; the standard error of Lee & Whiteley (2018) is unbiased "
               "under multinomial resampling and about halved where stratified resampling acts (both keep Zhat "
               "unbiased)", RESAMPLING),
        Option("schedule", "auto", "inverse-temperature path: 'linear' or 'auto' (linear while the local "
               "fields are moderate, then geometric; see the solver's documentation)", ("auto", "linear")),
        Option("sweeps", 1, "Gibbs sweeps per tempering step", int, positive, "must be a positive integer"),
        fraction_option("delta", 0.05, "the Markov lower bound log Zhat - ln(1/delta) holds with probability "
                        ">= 1 - delta, in (0, 1]"),
    ])

    def _solve(self, program, opts, run):
        model = log_potential(program, opts, self.name)
        n, N, K = model.n, opts.particles, opts.steps
        rng = np.random.default_rng(opts.seed)
        kernel = ColourGibbs(model.h, model.J)
        pop = Particles(N, rng, opts.resampling)
        X = rng.integers(0, 2, size=(N, n)).astype(float) * 2.0 - 1.0
        base = model.const + n * math.log(2.0)
        lam_prev = 0.0
        run.max_iter = K
        if opts.history_every is None:  # about 100 history entries per run
            run.history_every = max(1, K // 100)
        lams = tempering_schedule(K, model, opts.schedule)
        for k in run.iterations():
            lam = lams[k]
            ell = X @ model.h + (X[:, model.i] * X[:, model.j]) @ model.w
            pop.reweight((lam - lam_prev) * ell)
            idx = pop.resample(opts.ess_threshold)
            if idx is not None:
                X = X[idx]
            for _ in range(opts.sweeps):
                kernel.sweep(X, rng, lam)
            lam_prev = lam
            if run.due() or run.progress.active:
                est = base + pop.log_z
                run.record(objective=-est / opts.beta, ess=pop.ess(), temperature=lam)
            if run.callback(X.copy()):
                break
        if k < K or lam_prev < 1.0:  # stopped early (time limit, callback, Ctrl-C is handled by the run loop)
            return run.finish(message=(run.message or "stopped") + f" at inverse temperature {lam_prev:.3g} of 1; "
                              "no estimate of log Z")
        W = pop.weights()
        log_z = base + pop.log_z
        means = W @ kernel.conditional_means(X)
        corr = W @ (X[:, model.i] * X[:, model.j])
        se = math.sqrt(pop.relative_variance())
        info = {"log_partition_markov_lower": log_z - math.log(1.0 / opts.delta), "markov_delta": opts.delta,
                "resamples": pop.resamples, "final_ess": pop.ess(), "colour_classes": len(kernel.classes)}
        return finish(run, program, opts, model, log_z, means, corr, se=se, status="converged",
                      message=f"{K} tempering steps, {N} particles, {pop.resamples} resampling events", info=info)
