"""The ``cmf`` solver: conditional mean field (Carbonetto & de Freitas 2007; Carbonetto 2009, ch. 4,
Fig. 4.4) for an energy model.

1. theta_0: naive mean field, (4.13) with R_0 = {V} (a modified Newton solve started at the
   target fields); particles drawn exactly from it; ``log Z_0 = c(theta_0) = sum log 2cosh theta_i``
   (4.22).
2. For each finer partition R_k of the schedule (connected bisection, or the user's): lambda =
   the current weighted particles (4.21); theta_k maximises (4.13) (:mod:`.objective`), the
   connecting edges fixed at the target (default) or optimised; at the last partition
   (singletons) theta_k = theta* exactly. Particles move along the tempered path with the
   random-scan block kernel and weights (4.23), resampled below the ESS threshold
   (:mod:`.smc`); the log-normaliser estimate is updated by the weighted mean increments (3.46).
3. log Z, the Rao-Blackwellised marginals, pair correlations, the standard error of log Z
   (Lee & Whiteley 2018) and the sequence c(theta_k) are returned in the energy-result convention.
4. ``replicates`` runs share the particles (the first from the best mean-field start, the second
   from its mirror image, the others from random mean-field starts) and are combined by :mod:`.replicates`: mean Zhat, a standard
   error from their spread, a warning when they sample different modes, and the certified bound
   of the distinct states visited (reported instead of an estimate that falls below it).

``particles='exact'`` replaces the particles by all 2^n states weighted by their probabilities
(n <= 20): the sequence theta_k, c(theta_k) is then deterministic (the §4.3 example). An
optimiser failure in a block keeps that block's previous fields and is recorded in
``info['optimizer_failures']`` and the history.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ...core.backend import missing_numba, numba_available
from ...errors import InvalidOptionError
from ...options import Option, OptionSet, limit_options, positive, progress_options, start_options
from ...oracles.particles import RESAMPLING, Particles
from ...program.energy import spin_states
from ...registry import Solver, register_solver
from ..energy_result import beta_option, finish, fraction_option, log_potential
from ..meanfield import MeanField, colour_blocks, mean_field_bound, sweep
from .objective import ConditionalObjective, log2cosh
from .partition import bisection_schedule, user_schedule
from .replicates import combine, visited_bound
from .smc import coupling_matrix, exact_weights, log_f, move_along_path

MAX_EXACT = 20
AUTO_REPLICATES = 4   # measured in docs/cmf.md ("Honest standard errors"): same particle budget, ~1.3x the time


def _int_or_word(v, name, word, lo):
    """``v`` as an integer >= ``lo``, or the string ``word``; otherwise an error naming option ``name``."""
    msg = f"option {name!r} must be {word!r} or an integer >= {lo}, got {v!r}"
    if isinstance(v, str):
        if v != word:
            raise InvalidOptionError(msg)
        return v
    if isinstance(v, bool) or not float(v).is_integer() or int(v) < lo:
        raise InvalidOptionError(msg)
    return int(v)


def _particles(v):
    return _int_or_word(v, "particles", "exact", 2)


def _replicates(v):
    return _int_or_word(v, "replicates", "auto", 1)


def _schedule(v):
    if isinstance(v, str):
        if v != "bisect":
            raise InvalidOptionError(f"option 'schedule' must be 'bisect' or a list of partitions, got {v!r}")
        return v
    if not hasattr(v, "__iter__"):
        raise InvalidOptionError(f"option 'schedule' must be 'bisect' or a list of partitions, got {v!r}")
    return [list(p) if hasattr(p, "__iter__") and not isinstance(p, str) else p for p in v]


def _compiled(opts):
    """Whether option ``backend`` selects the numba kernels (same results as numpy: only the time differs;
    'auto' also checks that the kernels' exp-based formulas give scipy's numbers on this platform)."""
    if opts.backend == "numba" and not numba_available():
        raise missing_numba()
    if opts.backend != "auto":
        return opts.backend == "numba"
    if not numba_available():
        return False
    from .compiled import matches_scipy
    return matches_scipy()


@register_solver
class ConditionalMeanField(Solver):
    name = "cmf"
    summary = ("conditional mean field (Carbonetto & de Freitas 2007): SMC from naive mean field to the "
               "target through finer graph partitions; log Z estimate and marginals of energy models")
    accepts_binary = True
    options = OptionSet(limit_options(max_iter=None)[1:] + progress_options() + start_options()[1:] + [
        beta_option(),
        Option("particles", 1000, "number of particles (>= 2), or 'exact' to enumerate all states (at most "
               f"{MAX_EXACT} variables)", _particles),
        Option("temper_steps", 100, "tempering steps between successive distributions", int, positive,
               "must be a positive integer"),
        Option("moves", 10, "random-scan block moves per tempering step (the first is weighted by (4.23), the "
               "others leave the tempered distribution invariant; the thesis uses 1)", int, positive, "must be a positive integer"),
        fraction_option("ess_threshold", 0.5, "resample when the effective sample size falls below this "
                        "fraction of the particles, in (0, 1]"),
        Option("resampling", "stratified", "resampling scheme", RESAMPLING),
        Option("schedule", "bisect", "'bisect' (split every block into two connected halves) or a list of "
               "partitions, each a list of blocks of variable indices or names, nested and connected", _schedule),
        Option("edges", "fixed", "connecting edges: 'fixed' at the target or 'optimize'd with the fields",
               ("fixed", "optimize")),
        Option("mf_restarts", 4, "starts of the mean-field coordinate ascent competing with the Newton solve "
               "from the target fields for theta_0 (0: Newton only, as in the thesis)", int,
               lambda v: v is not None and v >= 0, "must be an integer >= 0"),
        Option("inner_max_iter", 200, "iterations of the (4.13) solve per block", int, positive,
               "must be a positive integer"),
        Option("inner_tol", 1e-9, "gradient tolerance of the (4.13) solve", float, positive, "must be positive"),
        Option("replicates", "auto", "independent runs sharing the particles equally, the first from the best "
               "mean-field start, the second from its mirror image, the others from random starts; log Z from "
               "their mean Zhat, its standard error from their spread, a warning when they disagree ('auto': "
               f"{AUTO_REPLICATES} with sampled particles, 1 with particles='exact')", _replicates),
        Option("backend", "auto", "tempered block moves: 'numpy' (the reference path), 'numba' (compiled kernels, "
               "bit-identical results; an error without numba) or 'auto' (numba when installed)",
               ("auto", "numpy", "numba")),
    ])

    def _solve(self, program, opts, run):
        program.require_no_aux("cmf")
        model = log_potential(program, opts, self.name)
        n = model.n
        rng = np.random.default_rng(opts.seed)
        exact = opts.particles == "exact"
        if exact and n > MAX_EXACT:
            raise InvalidOptionError(f"option 'particles'='exact' enumerates 2^n states; the model has n={n} > "
                                     f"{MAX_EXACT} variables (use a number of particles)")
        R = (1 if exact else AUTO_REPLICATES) if opts.replicates == "auto" else opts.replicates
        if exact and R > 1:
            raise InvalidOptionError("option 'replicates' > 1 needs sampled particles: with particles='exact' "
                                     "every run is the same deterministic computation")
        if not exact and opts.particles < 2 * R:
            raise InvalidOptionError(f"option 'particles'={opts.particles} is shared by {R} replicates and leaves "
                                     "fewer than 2 per run; raise particles or lower replicates")
        compiled = _compiled(opts)
        sched = bisection_schedule(model) if opts.schedule == "bisect" else user_schedule(model, opts.schedule)
        # step 0: naive mean field = (4.13) with R_0 = {V}
        theta, failed, iters, mf_bound = self._mean_field(model, opts)
        # certified from here on: a run stopped or interrupted before any estimate still reports it
        run.incumbent(upper=-mf_bound / opts.beta)
        K = len(sched) - 1
        run.max_iter = max(K, 1) * R
        streams = np.random.SeedSequence(opts.seed).spawn(R)
        mirror = -np.tanh(theta)
        runs = []
        for r in range(R):
            if r:
                # a different start per replicate: mean field's coordinate ascent from the mirror image of the
                # best start (the global spin flip, the commonest bimodality of Ising models), then from
                # uniform random means, which on a multimodal model end in different modes; own random streams
                rng = np.random.default_rng(streams[r])
                start = mirror if r == 1 else rng.uniform(-1.0, 1.0, size=model.n)
                theta, failed = self._ascend(model, start), []
            N = opts.particles if exact else opts.particles // R + (r < opts.particles % R)
            out = self._replicate(model, opts, run, sched, theta, failed, rng, exact, N, start=r * max(K, 1),
                                  compiled=compiled)
            if out is None:
                done = sum(len(o["cs"]) - 1 for o in runs)
                stopped = (run.message or "stopped") + f" after {done} of {K * R} refinements ({len(runs)} of {R} " \
                    "replicates complete)"
                if runs:  # the complete replicates are an estimate of their own (fewer particles)
                    return self._result(run, program, opts, model, runs, iters, mf_bound,
                                        status=run.status, prefix=stopped + "; estimate of the complete replicates: ")
                return run.finish(message=stopped + "; no estimate of log Z, only the mean-field lower bound "
                                  f"{mf_bound:.6g}", upper=-mf_bound / opts.beta,
                                  info={"mean_field_bound": mf_bound, "log_partition_lower": mf_bound})
            runs.append(out)
            iters += out["iters"]
        return self._result(run, program, opts, model, runs, iters, mf_bound)

    def _ascend(self, model, mu, max_sweeps=1000, tol=1e-10):
        """theta_0 of a replicate: mean field's coordinate ascent from the means ``mu``."""
        M = np.array(mu, dtype=float).reshape(1, model.n)
        blocks = colour_blocks(model)
        for _ in range(max_sweeps):
            if sweep(model, M, blocks) <= tol:
                break
        with np.errstate(divide="ignore"):
            return np.clip(np.arctanh(np.clip(M[0], -1.0, 1.0)), -30.0, 30.0)

    def _replicate(self, model, opts, run, sched, theta, failed, rng, exact, N, start, compiled=False):
        """One SMC run of Fig. 4.4 from ``theta`` (= theta_0); ``None`` when stopped before the end."""
        n = model.n
        v = np.zeros(model.m)
        c0 = float(log2cosh(theta).sum())
        failures = [(0, failed)] if failed else []
        thetas, cs, blocks, iters = [theta.copy()], [c0], [1], 0
        if exact:
            X = spin_states(n)
            lam, _ = exact_weights(X, theta, coupling_matrix(model, v))
            pop = None
        else:
            X = np.where(rng.random((N, n)) < (1.0 + np.tanh(theta)) / 2.0, 1.0, -1.0)
            pop = Particles(N, rng, opts.resampling)
        snapshots = [] if exact else [X.copy()]
        K = len(sched) - 1
        run.record(force=True, objective=-(model.const + c0) / opts.beta, c=c0, blocks=1, ess=None)
        completed = K == 0
        for k in run.iterations(start):
            k -= start
            if k > K:
                break
            labels = sched[k]
            weights = lam if exact else pop.weights()
            last = k == K
            conn_w = None
            if last:
                new_theta, failed, it = model.h.copy(), [], 0
                new_v = model.w.copy()
            else:
                obj = ConditionalObjective(model, labels, X, weights)
                if opts.edges == "fixed":
                    new_theta, failed, it = obj.solve_fields(model.h, theta, opts.inner_max_iter, opts.inner_tol)
                else:
                    new_theta, conn_w, ok, it = obj.solve_joint(model.h, theta, opts.inner_max_iter,
                                                                opts.inner_tol)
                    failed = [] if ok else ["joint"]
                new_v = np.where(labels[model.i] == labels[model.j], 0.0, model.w)
                if conn_w is not None:
                    new_v[obj.conn] = conn_w
            iters += it
            if failed:
                failures.append((k, failed))
            prev = (theta, coupling_matrix(model, v))
            new = (new_theta, coupling_matrix(model, new_v))
            if exact:
                lam, c = exact_weights(X, *new)
                ess = None
            else:
                X, done = move_along_path(X, pop, labels, prev, new, opts.temper_steps, opts.moves,
                                          opts.ess_threshold, rng, check=run.out_of_time,
                                           compiled=compiled)
                if not done:
                    break
                c, ess = c0 + pop.log_z, pop.ess()
                snapshots.append(X.copy())
            theta, v = new_theta, new_v
            thetas.append(theta.copy())
            cs.append(float(c))
            blocks.append(int(np.unique(labels).size))
            run.record(force=True, objective=-(model.const + c) / opts.beta, c=float(c), blocks=blocks[-1],
                       ess=ess, optimizer_failed=failed or None)
            completed = last
            if run.callback(theta.copy()) or last:
                break
        if not completed:
            return None
        W = lam if exact else pop.weights()
        _, A = log_f(X, model.h, model.J)
        return {"means": W @ np.tanh(A), "corr": W @ (X[:, model.i] * X[:, model.j]), "cs": cs,
                "thetas": thetas, "blocks": blocks, "failures": failures, "iters": iters, "pop": pop,
                "snapshots": snapshots, "rel_var": 0.0 if pop is None else pop.relative_variance()}

    def _mean_field(self, model, opts):
        """theta_0: the best (largest lower bound F) of the (4.13) Newton solve from theta* and the
        ``meanfield`` solver's damped coordinate ascent from ``mf_restarts`` starts. Mean field has
        many local optima on dense frustrated graphs; the Newton solve from theta* alone ends on poor
        ones (complete graphs of §4.4: F 44.9 against 58.5 from coordinate ascent, log Z 58.7)."""
        n = model.n
        obj = ConditionalObjective(model, np.zeros(n, dtype=np.int64), np.zeros((1, n)), np.ones(1))
        theta, failed, iters = obj.solve_fields(model.h, model.h, opts.inner_max_iter, opts.inner_tol)
        best = mean_field_bound(model, np.tanh(theta))[0]
        if opts.mf_restarts and n:
            mf = MeanField().solve(model.scaled(-1.0).to_program(), restarts=opts.mf_restarts, seed=opts.seed)
            cand = np.clip(mf.info["mf_parameters"], -30.0, 30.0)
            F = mean_field_bound(model, np.tanh(cand))[0]
            if np.isfinite(F) and F > best:
                theta, best, failed = cand, F, []
        return theta, failed, iters, float(best)

    def _result(self, run, program, opts, model, runs, iters, mf_bound, status="converged", prefix=""):
        first = runs[0]
        pop = first["pop"]
        log_z, rel_var, means, corr, diag = combine([model.const + o["cs"][-1] for o in runs],
                                                    [o["rel_var"] for o in runs], [o["means"] for o in runs],
                                                    [o["corr"] for o in runs],
                                                    [1 if o["pop"] is None else o["pop"].N for o in runs])
        se = math.sqrt(rel_var)
        failures = [f for o in runs for f in o["failures"]]
        info = {"mean_field_bound": mf_bound, "c_sequence": first["cs"], "theta_sequence": first["thetas"],
                "blocks": first["blocks"], "optimizer_failures": failures,
                "optimizer_iterations": iters, "schedule_length": len(first["cs"]) - 1,
                "backend": "numba" if _compiled(opts) else "numpy"}
        if pop is not None:
            info.update(resamples=sum(o["pop"].resamples for o in runs), final_ess=min(o["pop"].ess() for o in runs))
        msg = prefix + (f"{len(first['cs']) - 1} refinements, " + ("exact enumeration" if pop is None else
               f"{sum(o['pop'].N for o in runs)} particles, {sum(o['pop'].resamples for o in runs)} resampling "
               "events"))
        if failures:
            msg += f"; the (4.13) solve failed in {sum(len(f) for _, f in failures)} block(s) (previous fields kept)"
        lower, source, U = mf_bound, "mean-field", None
        if pop is not None:
            seen, U = visited_bound(model, [X for o in runs for X in o["snapshots"]])
            info["visited_states_bound"], info["visited_states"] = seen, U.shape[0]
            if seen > lower:
                lower, source = seen, "visited-states"
            if model.n < 63 and U.shape[0] == 1 << model.n:
                # every state was visited: sums over them are log Z and the moments themselves, not estimates
                info["log_partition_smc"], info["log_partition_smc_se"] = log_z, se
                p = np.exp(model.value(U) - seen)
                msg += "; the particles visited all 2^n states: log Z and the marginals are their exact sums"
                return finish(run, program, opts, model, seen, p @ U, p @ (U[:, model.i] * U[:, model.j]),
                              lower=seen, upper=seen, se=0.0, status="converged", message=msg, info=info)
        if len(runs) > 1:
            info.update(diag)
            msg += f", {len(runs)} replicates"
            if diag["replicates_disagree"]:
                note = (f"the {len(runs)} replicates disagree (marginal spread "
                        f"{diag['replicate_marginal_spread']:.3g}, log Z gap {diag['replicate_log_partition_z']:.3g} "
                        "standard errors): they sample different modes, so modes are missed and the standard "
                        "error understates the error")
                warnings.warn("cmf: " + note, RuntimeWarning, stacklevel=2)
                msg += "; " + note
        # the raw SMC estimate (unbiased for Z, as is its replicate mean) is kept whatever is reported
        info["log_partition_smc"], info["log_partition_smc_se"] = log_z, se
        if log_z < lower:
            # the bound is certified, so an estimate below it is further from log Z than the bound itself:
            # a collapsed population (low temperatures: every particle from one ancestor) or a missed mode
            # that other particles (replicates) visited. The bound is reported, without a standard error.
            info["log_partition_is_bound"] = True
            msg += (f"; the SMC estimate {log_z:.6g} was below the certified {source} lower bound {lower:.6g} "
                    "(degenerate particles or a missed mode: raise particles, temper_steps or replicates), "
                    "log Z is reported as that bound, without a standard error")
            log_z, se = lower, None
            if source == "visited-states":
                # The moments must describe the distribution whose log-normaliser is reported: p restricted to
                # the visited set U. Its total-variation distance to p is 1 - Z_U/Z = 1 - exp(-(log Z - bound)),
                # which bounds the error of every marginal and correlation by the (reported) log Z gap; the
                # degenerate population's moments have no such bound (a 4 x 4 frustrated grid: bound 8e-4
                # below log Z, particle marginals 0.83 off; held-out review, docs/energy.md).
                p = np.exp(model.value(U) - lower)
                means, corr = p @ U, p @ (U[:, model.i] * U[:, model.j])
                info["marginals_source"] = "visited-states"
                msg += "; the marginals are those of the visited states (the distribution of that bound)"
        return finish(run, program, opts, model, log_z, means, corr, lower=lower, se=se, status=status,
                      message=msg, info=info)
