"""``proxsg``: (biased) stochastic proximal gradient for ``min g(x) + h(x)`` (Honorio 2012).

``g`` is the smooth part of the model's objective (exact, finite-sum minibatches) or comes from
an oracle of :mod:`varopt.oracles` (e.g. Gibbs estimates of an Ising model's moments, biased);
``h`` is the separable penalty read off the model (:mod:`.penalty`: ``abs``/``norm1`` terms on
single variables, elastic-net squares, bounds). Methods PB, PA, FB, FR, FL (:mod:`.methods`),
sample sizes ``S_k`` from a schedule (:mod:`.schedules`).
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputDataError, InvalidOptionError
from ...options import Option, OptionSet, limit_options, nonnegative, positive, progress_options, start_options
from ...oracles import Oracle
from ...registry import Solver, register_solver
from .methods import ProxRun
from .newton import certificate, proximal_newton
from .penalty import split_objective
from .schedules import schedule_domain
from .source import GradientSource

METHODS = ("auto", "PB", "PA", "PN", "FB", "FR", "FL", "FU")


def _oracle_domain(v):
    if v is None or isinstance(v, Oracle) or callable(v) or callable(getattr(v, "gradient", None)):
        return v
    raise InvalidOptionError("option 'oracle' must be a varopt.oracles.Oracle, a callable gradient(x, rng) or an "
                             "object with a gradient(x, rng) method")


OPTIONS = OptionSet(limit_options(max_iter=1000) + progress_options() + start_options(
    x0_doc="starting point; default: the model's initial values where given, else 0 (Honorio 2012 starts at "
           "theta = 0), projected on the bounds") + [
    Option("variant", "auto", "PB basic proximal gradient, PA accelerated (FISTA), PN proximal Newton (exact "
           "gradients and Hessian: the program's smooth part or an oracle with one), FB forward-backward "
           "splitting (average), FR robust FBS (step-weighted average), FL FBS last point, FU FBS uniformly random "
           "visited point (Theorem 8; sparse like FL); auto: PA with exact gradients, FB with sampled ones", METHODS),
    Option("sparsify", "none", "FB/FR: a sparse answer from the averaged point a (docs/proxsg.md). 'prox': "
           "prox_{eta_{K+1} h}(a), one proximal step of the last step size (objective at most eta_{K+1} G^2/2 "
           "= O(K^-r) above a's, the order of Theorems 6-7); 'gradient': prox_{eta_1 h}(a - eta_1 gbar) with gbar "
           "the mean of the sampled gradients over the last half of the run, a proximal-gradient step whose "
           "fixed point is the optimum and whose support test |a/eta_1 - gbar| > l1 uses averaged gradients "
           "(dual averaging, Xiao 2010); 'none': a itself (Honorio 2012, Theorems 6-7)",
           ("none", "prox", "gradient")),
    Option("step", None, "PB/PA: constant step (default 1/L); FB/FR/FL: eta_0 in eta_k = eta_0/k^r "
           "(default beta/G)", float, positive, "must be positive"),
    Option("beta", 1.0, "FBS step factor beta in eta_k = beta/(G k^r) (Honorio 2012, Theorems 6-8)", float,
           positive, "must be positive"),
    Option("r", 0.5, "FBS step exponent r in eta_k = eta_0/k^r, 0 <= r < 1", float, lambda v: 0 <= v < 1,
           "must be in [0, 1)"),
    Option("lipschitz", None, "Lipschitz constant L of grad g for PB/PA (default: the oracle's bound, or a "
           "Hessian estimate raised by backtracking)", float, positive, "must be positive"),
    Option("grad_bound", None, "bound G on |grad g| and |subgradient h| for the FBS step (default: the "
           "oracle's bound, else max(|grad g(x0)|, |l1 weights|))", float, positive, "must be positive"),
    Option("backtrack", True, "PB/PA with exact gradients and values: raise L until the descent lemma holds",
           bool),
    Option("restart", False, "PA: adaptive restart of the momentum when it points uphill", bool),
    Option("schedule", "constant", "sample sizes S_k: constant, log (s0(1 + log k)), linear (s0 k), quadratic "
           "(s0 k^2), or a callable k -> S_k", schedule_domain),
    Option("samples", None, "s0 of the schedule (None: finite sums use every row, i.e. exact gradients; "
           "sampling oracles their own default)", int, positive, "must be positive"),
    Option("max_samples", None, "cap on S_k", int, positive, "must be positive"),
    Option("sampling", "permutation", "rows of a finite-sum minibatch", ("permutation", "uniform", "cyclic")),
    Option("oracle", None, "gradient oracle for the smooth part (replaces the program's smooth part unless "
           "oracle_adds_objective)", _oracle_domain),
    Option("oracle_adds_objective", False, "add the gradient of the program's smooth part to the oracle's "
           "(e.g. the data term -theta.m written in the model, grad log Z from the oracle)", bool),
    Option("average", "all", "FB/FR: average all visited points (the paper) or at least the last half "
           "('suffix')", ("all", "suffix")),
    Option("kkt_tol", 1e-10, "with exact gradients (PB, PA, FL): stop when the prox-gradient mapping is below "
           "kkt_tol (relative to max(1, |grad|_inf)); PN: the least-norm subgradient", float, nonnegative,
           "must be >= 0"),
    Option("check_attained", True, "with the program's exact gradients, before reporting 'converged' (or at the "
           "iteration limit): one LP for a direction along which the objective decreases strictly from every point "
           "(e.g. separable data in a logistic regression without penalty; majorize's check, docs/majorize.md): then "
           "no minimizer exists and the status is 'numerical' ('unbounded' for a ray of linear decrease) with the last "
           "point; result.info['attainment'] says what was found and its cost", bool),
    Option("history_objective", True, "evaluate the exact objective at history records when available", bool),
])


def start_point(program, x0, pen):
    if x0 is not None:
        x = np.asarray(x0, dtype=float).ravel()
        if x.size != program.n:
            raise InvalidOptionError(f"option 'x0' has {x.size} entries, the model has {program.n} variables")
    else:
        x = np.nan_to_num(program.x0, nan=0.0)
    return np.clip(x, pen.lb, pen.ub)


@register_solver
class ProxSG(Solver):
    name = "proxsg"
    summary = ("biased stochastic proximal gradient / forward-backward splitting for smooth + separable "
               "penalty (L1, elastic net, bounds) with exact, minibatch or sampled gradients (Honorio 2012)")
    options = OPTIONS

    def _solve(self, program, opts, run):
        program.require_no_aux("proxsg")
        # a constraint on one variable is a bound (CVXPY writes `x <= 0.8` on a vector as rows)
        program = program.fold_bound_rows()
        empty = np.flatnonzero(program.lb > program.ub)
        if empty.size:
            j = int(empty[0])
            raise InputDataError(f"variable '{program.names[j]}': its bounds and one-variable constraints leave "
                                 f"no feasible value ([{program.lb[j]:g}, {program.ub[j]:g}])")
        smooth, pen = split_objective(program, self.name)
        rng = np.random.default_rng(opts.seed)
        src = GradientSource(smooth, opts, rng)
        x0 = start_point(program, opts.x0, pen)
        method = opts.variant if opts.variant != "auto" else ("PA" if src.exact else "FB")
        if opts.sparsify != "none" and method not in ("FB", "FR"):
            raise InvalidOptionError(f"option 'sparsify' applies to the averaged outputs of variants FB and FR; "
                                     f"variant {method} already outputs a proximal point (sparse)")
        pr = ProxRun(src, pen, opts, run, x0, method)
        run.progress_keys += ("samples", "step", "nonzeros")
        if method == "PN":
            status, msg, last = proximal_newton(pr)
            out = last
            info = {}
        elif method in ("PB", "PA"):
            status, msg, last = pr.proximal_gradient(method == "PA")
            out = last
            info = {}
        else:
            status, msg, last = pr.splitting()
            uni, wtd = pr.avg
            avg, wavg = uni.value(), wtd.value()
            out = {"FB": avg, "FR": wavg, "FU": pr.random_point}.get(method, last)
            info = {"average": avg, "weighted_average": wavg, "random": pr.random_point,
                    "random_index": pr.random_index}
            if opts.sparsify == "prox":
                eta = pr.info["step0"] / (pr.iterations + 1) ** opts.r
                dense = out
                out = pen.prox(dense, eta)
                # h(p) <= h(avg) - |p - avg|^2/(2 eta) (p minimises |p - avg|^2/2 + eta h(p)), and
                # g(p) <= g(avg) + G |p - avg|: f(p) - f(avg) <= max_d G d - d^2/(2 eta) = eta G^2/2
                info.update(unsparsified=dense, sparsify_step=eta, sparsify_shift=float(np.linalg.norm(out - dense)),
                            sparsify_bound=0.5 * eta * pr.info["grad_bound"] ** 2)
            elif opts.sparsify == "gradient":
                eta = pr.info["step0"]
                gbar = pr.grad_average.value()
                dense = out
                out = pen.prox(dense - eta * gbar, eta)
                info.update(unsparsified=dense, sparsify_step=eta, average_gradient=gbar,
                            sparsify_shift=float(np.linalg.norm(out - dense)))
        info.update(pr.info)
        obj = pr.objective(out) if pr.can_value else None
        if src.exact:
            # the optimality certificate (docs/proxsg.md): least-norm subgradient, and the gap estimate, whose
            # Hessian is formed for PN (it forms one per iteration anyway) and for the program's own smooth part,
            # not for an oracle's (an enumerated Ising Hessian costs hundreds of gradients)
            g_out = getattr(pr, "last_grad", None) if status == "converged" and out is last else None
            info.update(certificate(src, pen, out, g=g_out, hessian=method == "PN" or opts.oracle is None))
        supp = pen.support(out)
        info.update(last=last, support=[program.names[j] for j in supp], support_size=int(supp.size),
                    samples_total=src.samples_total, exact_gradients=src.exact,
                    samples_capped=bool(src.schedule.capped) if src.schedule is not None else False)
        if obj is not None and not math.isfinite(obj) and status != "numerical":
            # a non-finite objective at the output is no answer, whatever stopped the run (the residual test
            # passes on a NaN iterate; an iteration limit reached with NaN is not a best point)
            status, msg = "numerical", (f"the objective at the returned point is not finite ({obj:.6g}): the "
                                        "iterates diverged or started where the objective overflows (is the smooth "
                                        "part convex and bounded below?)")
        if (opts.check_attained and src.exact and opts.oracle is None and obj is not None and math.isfinite(obj)
                and status in (None, "converged", "iteration_limit")):
            status, msg = _check_attained(program, status, msg, out, obj, info, smooth, pen)
        if status is None:
            return run.finish(x=out, objective=obj, info=info)
        return run.finish(status, msg, x=out, objective=obj, info=info)


def _check_attained(program, status, msg, x, obj, info, smooth=None, pen=None):
    """Is the infimum attained? (:func:`varopt.solvers.majorize.recession.program_recession`: one LP on the
    program's log-sum-exp terms, L1 and ridge penalties and bounds; the verdict as majorize's,
    :func:`~varopt.solvers.majorize.recession.checked_outcome`.) ``(status, message)``."""
    from ..majorize.recession import checked_outcome, program_recession
    status, msg, info["attainment"] = checked_outcome(lambda z: program_recession(program, z, smooth, pen), x,
                                                      program.names, obj, status, msg)
    if status == "unbounded":
        info["unbounded_ray"] = info["attainment"]["direction"]
    return status, msg
