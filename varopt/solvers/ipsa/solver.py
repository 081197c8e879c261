"""Interior-point stochastic approximation (IPSA), Carbonetto (2009) ch. 2, Fig. 2.1.

For ``min f(x) s.t. c(x) <= 0`` (convex ``c``, Slater's condition) with noisy gradients
``g_k ~ grad f(x_k)``, iteration ``k`` does:

1. maximum step ``a_k = 1/(k0 + k)^step_power`` and centring ``sigma_k = sigma (k0'/(k0'+k))^sigma_power``
   with ``k0' = max(k0, 1)``;
2. barrier ``mu_k = max(mu_min, sigma_k eta_k / m)`` with duality measure ``eta_k = -c(x)^T z`` (2.13, 2.18);
3. gradient observation ``g_k`` from the oracle (:mod:`.oracles`);
4. primal-dual direction from the reduced system (2.20)-(2.21) with ``g_k`` in place of
   ``grad f`` and a Hessian approximation ``B`` (:mod:`.hessian`, :mod:`.direction`);
5. step ``a = min(a_k, 0.995 * max step to z >= 0, 0.995 * max step to the linear boundary)``,
   halved until the constraints hold strictly (``c(x + a dx) < 0``) by more than the rounding
   margin of each row (:meth:`.ConstraintSet.interior`: the user's own evaluation of the
   constraint in another order must agree); with
   ``dual_step='separate'`` the primal and dual variables get their own fractions to the boundary;
6-7. ``x <- x + a dx``, ``z <- z + a dz``.

Every iterate is strictly feasible: ``c(x) < 0`` and ``z > 0``, also when the user re-evaluates
their own constraint expressions in another order.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputDataError, InvalidOptionError, SolverBugError
from ...core.threads import blas_threads, option_threads
from ...options import (Alias, Option, OptionSet, limit_options, nonnegative, positive, progress_options,
                        start_options, thread_options)
from ...program import Program
from ...core.run import Run
from ...registry import Solver, register_solver
from ...result import Result
from . import hessian as hs
from .constraints import ConstraintSet
from .direction import ReducedSystem
from ...oracles import FiniteSumOracle, Oracle, UserOracle
from .start import strictly_feasible_start


class IpsaOracleError(InputDataError):
    """The gradient oracle returned NaN/inf. ``iteration``, ``x`` (last good iterate), ``z`` and
    ``result`` (a :class:`Result` with status ``error`` holding the last good iterate) are attached."""

    def __init__(self, msg, iteration, x, z, result):
        super().__init__(msg)
        self.iteration, self.x, self.z, self.result = iteration, x, z, result


def _oracle_domain(v):
    if v is None or isinstance(v, Oracle) or callable(v) or callable(getattr(v, "gradient", None)):
        return v
    raise InvalidOptionError("option 'oracle' must be a callable gradient(x, rng), an object with a "
                             "gradient(x, rng) method, or a varopt.solvers.ipsa.StreamOracle")


def _float_or_array(v):
    a = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise InvalidOptionError("z0 must be positive and finite")
    return float(a) if a.ndim == 0 else a


OPTIONS = OptionSet(limit_options(max_iter=None) + progress_options(
    callback_doc="called as callback(iteration, x, z, slack) after every iteration (monitoring, tests); returning "
                 "True stops the run (status 'converged' is NOT claimed: status 'iteration_limit')") + start_options(
    x0_doc="strictly feasible starting point (default: automatic, see start.py)",
    seed_doc="seed of the sampling / user-oracle random stream") + thread_options(
    "1 thread: the per-step vectors are small") + [
    Option("passes", None, "number of passes over the terms of a finite sum (one pass = N/batch_size "
           "iterations); default when no stopping rule is given: 10 passes (finite sums), 1000 "
           "iterations otherwise", float, positive, "must be positive"),
    Option("batch_size", 1, "samples per gradient estimate (>= N: exact full gradient)", int, positive,
           "must be positive"),
    Option("k0", 50.0, "step-size offset: maximum step a_k = 1/(k0 + k)^step_power", float, nonnegative,
           "must be >= 0"),
    Option("step_power", 1.0, "step-size exponent (1: harmonic, Robbins-Monro; 0: constant a_k = 1, "
           "the deterministic interior-point method)", float, lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    Option("sampling", "cyclic", "order of the samples of a finite sum", ("cyclic", "uniform", "permutation")),
    Option("hessian", "identity", "Hessian approximation B in (2.20): identity, bb (damped Barzilai-Borwein "
           "2.45), bfgs (damped BFGS §2.4.2), diagonal (running diagonal §2.5.8), exact (Hessian of the "
           "sampled objective)", ("identity", "bb", "bfgs", "diagonal", "exact")),
    Option("oracle", None, "gradient oracle replacing the program objective's gradient: gradient(x, rng) "
           "callable/object, or a StreamOracle", _oracle_domain),
    Option("oracle_adds_objective", False, "add the exact gradient of the program objective to the oracle's "
           "(e.g. a stream of losses plus the L1 penalty written in the model)", bool),
    Option("sigma", 0.5, "initial centring parameter sigma_0 in mu = sigma_k eta / m (2.18)", float,
           lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    Option("sigma_power", 1.0, "centring schedule sigma_k = sigma_0 (k0'/(k0'+k))^sigma_power -> 0, "
           "k0' = max(k0, 1)", float,
           nonnegative, "must be >= 0"),
    Option("mu_min", 1e-9, "floor of the barrier parameter", float, nonnegative, "must be >= 0"),
    Option("z0", 1.0, "initial dual variables (positive scalar or array of length m)", _float_or_array),
    Option("iteration_offset", 0, "start the step-size counter at k = offset + 1 (warm restarts)", int,
           nonnegative, "must be >= 0"),
    Option("dual_step", "same", "same: one step length for x and z (Fig. 2.1); separate: primal and dual "
           "fractions to the boundary apart", ("same", "separate")),
    Option("step_fraction", 0.995, "fraction of the distance to the boundary (Fig. 2.1 step 5)", float,
           lambda v: 0 < v < 1, "must be in (0, 1)"),
    Option("kkt_tol", 1e-9, "with exact gradients: stop when the KKT residual and eta/m are below kkt_tol "
           "(relative)", float, nonnegative, "must be >= 0"),
    Option("bfgs_gamma", 0.8, "damping factor gamma of the damped BFGS update (2.51)", float,
           lambda v: 0 < v < 1, "must be in (0, 1)"),
    Option("diag_min", 1e-6, "floor of the running diagonal Hessian", float, positive, "must be positive"),
    Option("history_objective", True, "evaluate the full objective at history records", bool),
], aliases=[Alias("tol", "kkt_tol", "ipsa's tolerance is a relative KKT residual")])


def _make_hessian(kind, n, oracle, opts):
    if kind == "identity":
        return hs.Identity(n)
    if kind == "bb":
        return hs.DampedBB(n)
    if kind == "bfgs":
        return hs.DampedBFGS(n, gamma=opts.bfgs_gamma)
    if kind == "diagonal":
        return hs.RunningDiagonal(n, d_min=opts.diag_min, has_oracle_diag=oracle.has_hessian_diag)
    if not oracle.has_hessian:
        raise InvalidOptionError("hessian='exact' needs the program's objective as the oracle "
                                 "(a user or stream oracle provides no Hessian)")
    return hs.Exact(n)


@register_solver
class IpsaSolver(Solver):
    name = "ipsa"
    summary = "interior-point stochastic approximation for constrained problems with noisy gradients (Carbonetto 2009)"
    options = OPTIONS

    def _solve(self, program: Program, opts, run: Run) -> Result:
        return run_ipsa(program, opts, run)


def run_ipsa(program: Program, opts, run: Run = None) -> Result:
    """Run IPSA; BLAS is limited to ``opts.blas_threads`` threads for the run (the per-step
    vectors are small, and multithreaded BLAS on length-n dot products costs far more in thread
    wake-ups than it saves: measured 15x slower on a loaded 2-core machine at n = 20000)."""
    run = run or Run("ipsa", opts)
    with blas_threads(option_threads(opts.blas_threads, auto=1)):
        return _run_ipsa(program, opts, run)


def _run_ipsa(program: Program, opts, run: Run) -> Result:
    n = program.n
    cons = ConstraintSet(program)
    m = cons.m
    if opts.oracle is None:
        oracle = FiniteSumOracle(program.objective)
    elif isinstance(opts.oracle, Oracle):
        oracle = opts.oracle
    else:
        oracle = UserOracle(opts.oracle)
    rng = np.random.default_rng(opts.seed)
    oracle.start(rng, opts.batch_size, opts.sampling)
    add_prog = opts.oracle is not None and opts.oracle_adds_objective
    N = oracle.n_samples
    stream = getattr(oracle, "next_batch", None) is not None and hasattr(oracle, "exhausted")

    # --- stopping rules -------------------------------------------------------------------
    max_iter, passes = opts.max_iter, opts.passes
    if max_iter is None and passes is None and opts.time_limit is None and not stream:
        if N:
            passes = 10.0
        else:
            max_iter = 1000
    it_per_pass = math.ceil(N / opts.batch_size) if N else None
    limit_pass = math.ceil(passes * it_per_pass - 1e-9) if (passes is not None and N) else None
    if passes is not None and not N and max_iter is None and opts.time_limit is None and not stream:
        max_iter = 1000  # passes are meaningless without a finite sum
    caps = [v for v in (max_iter, limit_pass) if v is not None]
    total = min(caps) if caps else None

    # --- start ---------------------------------------------------------------------------
    x = strictly_feasible_start(cons, program, opts.x0)
    s = cons.slack(x)
    z0 = opts.z0
    if np.ndim(z0) == 0:
        z = np.full(m, float(z0))
    else:
        z = np.asarray(z0, dtype=float).ravel().copy()
        if z.size != m:
            raise InvalidOptionError(f"z0 has length {z.size}, ipsa has m = {m} inequality constraints "
                                     f"({cons.n_lb} lower bounds, {cons.n_ub} upper bounds, {cons.n_lin} linear "
                                     f"rows, {cons.n_nl} nonlinear)")
    hess = _make_hessian(opts.hessian, n, oracle, opts)
    system = ReducedSystem(cons, diagonal_hessian=hess.diagonal)
    exact = bool(oracle.exact)

    k0, p, frac = opts.k0, opts.step_power, opts.step_fraction
    sig0, sigp = opts.sigma, opts.sigma_power
    ks = max(k0, 1.0)  # sigma_k = sigma_0 (ks/(ks + k))^q; ks >= 1 keeps the schedule alive for k0 = 0
    run.history_every = opts.history_every or max(1, (total or 1000) // 200)
    stats = {"steps": 0, "boundary_limited": 0, "backtracks": 0, "sum_step_ratio": 0.0}
    it = 0
    k = opts.iteration_offset
    ap = ad = 0.0
    a_prim = a_dual = np.inf
    mu = 0.0
    n_bt = 0

    def objective(xv):
        try:
            return float(program.objective.value(xv))
        except Exception:  # noqa: BLE001 - a user-oracle program may have no evaluable objective
            return None

    def record(force=False):
        if not (force or run.due()):
            return
        eta = float(s @ z)
        run.record(force, objective=objective(x) if opts.history_objective else None,
                   mu=mu, eta=eta, duality_measure=eta / m if m else 0.0,
                   sigma=sig0 * (ks / (ks + k)) ** sigp,
                   step=ap, step_dual=ad, step_max=(k0 + k) ** -p if k0 + k > 0 else 1.0,
                   ftb_primal=a_prim, ftb_dual=a_dual, backtracks=n_bt,
                   passes=(it / it_per_pass) if it_per_pass else None)

    def result(status_=None, message_=None):
        return run.finish(status_, message_, x=x.copy(), objective=objective(x),
                          info={"z": z.copy(), "slack": s.copy(), "constraint_names": cons.names, "mu": mu,
                            "eta": float(s @ z), "k": k, "n_samples": N,
                            "passes": (it / it_per_pass) if it_per_pass else None,
                            "hessian": opts.hessian, "system": system.mode,
                            "mean_step_ratio": stats["sum_step_ratio"] / max(1, stats["steps"]),
                            "boundary_limited_steps": stats["boundary_limited"],
                            "backtracks": stats["backtracks"],
                            "bb_beta": getattr(hess, "beta", None)})

    run.incumbent(x)
    record()
    inv_m = 1.0 / m if m else 0.0
    while True:
        if total is not None and it >= total:
            run.stop("pass_limit" if (limit_pass is not None and it >= limit_pass) else "iteration_limit")
            break
        if opts.time_limit is not None and (it & 15) == 0 and run.elapsed() > opts.time_limit:
            run.stop("time_limit", f"time limit {opts.time_limit:g} s")
            break
        batch = oracle.next_batch()
        if stream and oracle.exhausted:
            run.stop("pass_limit", "stream exhausted")
            break
        k += 1
        ahat = (k0 + k) ** -p
        sig = sig0 * (ks / (ks + k)) ** sigp
        eta = float(s @ z)
        mu = max(opts.mu_min, sig * eta * inv_m) if m else 0.0

        g = oracle.gradient(x, batch)
        g = np.asarray(g, dtype=float)
        if g.shape != (n,):
            g = g.ravel() if g.size == n else g
            if g.shape != (n,):
                raise InputDataError(f"ipsa iteration {it + 1}: the gradient oracle returned shape {np.shape(g)}, "
                                     f"expected ({n},)")
        if add_prog:
            g = g + program.objective.gradient(x)
        if not np.isfinite(g).all():
            bad = int(np.flatnonzero(~np.isfinite(g))[0])
            msg = (f"ipsa iteration {it + 1}: the gradient oracle returned a non-finite value "
                   f"(component {bad}, {program.names[bad]!r}); the last good iterate is kept in the error's "
                   "x / result")
            res = result("error", msg)
            raise IpsaOracleError(msg, it + 1, x.copy(), z.copy(), res)
        B = hess.matrix(x, oracle, batch, ahat)
        Jnl = Wnl = None
        if cons.n_nl:
            Jnl = cons.nonlinear_jacobian(x)
            Wnl = cons.nonlinear_hessian(x, z[cons.sl_nl])
        d = z / s
        rhs = -g
        if m:
            rhs = rhs - mu * cons.JT_dot(1.0 / s, Jnl)
        dx = system.solve(B, d, rhs, Wnl, Jnl)
        if not np.isfinite(dx).all():
            raise SolverBugError(f"ipsa iteration {it + 1}: non-finite search direction")
        if m:
            Jdx = cons.J_dot(dx, Jnl)
            dz = mu / s - z + d * Jdx  # (2.21)
            # largest step to z >= 0: 1 / max_i(-dz_i / z_i) (one reduction, no boolean indexing)
            tmin = float((dz / z).min())
            a_dual = frac / -tmin if tmin < 0 else np.inf
            a_prim = cons.max_primal_step(s, Jdx, frac)
        else:
            dz = z
            a_dual = a_prim = np.inf
        if opts.dual_step == "same":
            ap = ad = min(ahat, a_dual, a_prim)
        else:
            ap, ad = min(ahat, a_prim), min(ahat, a_dual)
        n_bt = 0
        while True:
            x_new = x + ap * dx
            s_new = cons.slack(x_new) if m else s
            if not m or cons.interior(x_new, s_new):
                break
            # backtracking (Fig. 2.1 step 5): nonlinear constraints, or round-off at a linear boundary
            ap *= 0.5
            if opts.dual_step == "same":
                ad = ap
            n_bt += 1
            if n_bt > 60:
                ap = ad = 0.0
                x_new, s_new = x, s
                break
        stats["backtracks"] += n_bt
        stats["steps"] += 1
        stats["sum_step_ratio"] += ap / ahat
        if ap < ahat * (1 - 1e-12):
            stats["boundary_limited"] += 1
        if m:
            z = z + ad * dz
            if not z.min() > 0:
                raise SolverBugError(f"ipsa iteration {it + 1}: a dual variable left z > 0")
        if hess.needs_secant and ap > 0:
            g2 = np.asarray(oracle.gradient(x_new, batch), dtype=float).ravel()
            if add_prog:
                g2 = g2 + program.objective.gradient(x_new)
            if np.all(np.isfinite(g2)):
                hess.update(x_new - x, g2 - g, ahat)
        else:
            hess.update(x_new - x, None, ahat)
        x, s = x_new, s_new
        it = run.iteration = it + 1
        run.incumbent(x)
        if run.callback(x, z, s):
            break
        record()
        if exact and opts.kkt_tol > 0:
            # KKT check with exact gradients: ||grad f + J^T z|| and eta/m relative
            gx = np.asarray(oracle.gradient(x, batch), dtype=float).ravel()
            if add_prog:
                gx = gx + program.objective.gradient(x)
            Jnl2 = cons.nonlinear_jacobian(x) if cons.n_nl else None
            r = gx + (cons.JT_dot(z, Jnl2) if m else 0.0)
            scale = 1.0 + float(np.max(np.abs(gx)))
            fx = objective(x)
            if (np.max(np.abs(r)) <= opts.kkt_tol * scale
                    and (not m or float(s @ z) <= max(opts.kkt_tol * (1.0 + abs(fx if fx is not None else 0.0)),
                                                      1.5 * m * opts.mu_min))):
                run.stop("converged", "KKT conditions hold to tol with exact gradients")
                break
    record(force=True)
    return result()
