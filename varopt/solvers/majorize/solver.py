"""The ``majorize`` solver: Algorithm 2 of Jebara & Choromanska (2012) on a compiled program.

The program is split once into the pieces Algorithm 2 needs (:class:`.model.MajorizeModel`:
linear and PSD quadratic parts, partition functions bounded by Algorithm 1, latent numerators
bounded by the Jensen tangent of section 4, linear constraints and bounds); the loop of
:mod:`.loop` then runs Algorithm 2 over it, each step solving the majorizer's QP (:mod:`.step`).
The same loop and options serve any other bound oracle through
:func:`varopt.solvers.majorize.bound_oracle.minimize` (e.g. the junction-tree bound of a chain CRF).
docs/majorize.md states the math.
"""
from __future__ import annotations

import warnings

import numpy as np

from ... import lpqp as highs  # the one LP/QP layer
from ...errors import InputDataError, InvalidOptionError
from ...core.threads import blas_threads, option_threads
from ...program.abs_lift import lift_abs_sums
from ...options import (Option, OptionSet, common_options, nonnegative, positive, progress_options,
                        start_options, thread_options)
from ...registry import Solver, register_solver
from ...result import Result
from .line_metric import line_applies, line_pays
from .loop import Majorization
from .model import MajorizeModel
from .step_qp import StepQP
from .step_rows import project_start
from .structured import check_step_solver, choose_step_solver, kron_preconditioner_fits
from .step import woodbury_solve as _woodbury_solve  # noqa: F401  (import path used by tests)

__all__ = ["MajorizeSolver", "MajorizeModel"]

#: bound_reuse='auto' on a compiled program where it pays (:func:`reuse_pays`)
AUTO_REUSE = 100


def _reuse_value(v):
    """Option ``bound_reuse``: ``'auto'`` or an integer ``>= 0``."""
    if isinstance(v, str) and v == "auto":
        return v
    if isinstance(v, bool) or not float(v).is_integer() or v < 0:
        raise ValueError("must be 'auto' or an integer >= 0")
    return int(v)


def check_reuse_options(opts):
    """``reuse_metric`` only with quasi-Newton trials; neither with the low-rank bound."""
    given = getattr(opts, "given", ())
    for name in ("reuse_metric", "reuse_pairs"):
        if name in given and opts.bound_reuse == 0:
            raise InvalidOptionError(f"option {name!r} needs bound_reuse >= 1 (it sets bound_reuse's quasi-Newton "
                                     "steps)")
    if opts.bound == "lowrank":
        if opts.bound_reuse not in (0, "auto"):
            raise InvalidOptionError("bound_reuse scales the full bound's Sigma; it cannot be combined with "
                                     "bound='lowrank' (use bound_reuse=0 or bound='full')")
        opts.bound_reuse = 0


def resolve_reuse_metric(model, opts):
    """``reuse_metric='auto'`` on a compiled program: ``'line'`` by the predicted-cost rule of :mod:`.line_metric`,
    else ``'bound'``; an explicit ``'line'`` the program cannot use is refused."""
    if opts.reuse_metric == "auto":
        opts.reuse_metric = "line" if opts.bound_reuse != 0 and line_pays(model, opts) else "bound"
    elif opts.reuse_metric == "line" and not line_applies(model, opts):
        raise InvalidOptionError("reuse_metric='line' needs a convex program whose partition functions have at "
                                 f"most {model.PADDED_MAX_ROWS} configurations each, the full bound, and (without "
                                 "ridge) curvature along every coordinate")


def reuse_pays(model, opts):
    """The rule of ``bound_reuse='auto'`` on a compiled program (measured, docs/majorize.md section 6): trials on
    the last bound when the program is convex and the bound's metric is cheap to apply: the dense Cholesky
    (with or without constraints: the step QP needs the dense curvature anyway) or, unconstrained, the
    Kronecker approximation of the CG step; or on the line metric (``reuse_metric='line'``, also the constrained
    row-space Woodbury step's choice). Not on the Woodbury operator itself (each solve costs a capacitance
    factorization) nor with the low-rank bound."""
    if model.pos is None or not model.convex or not opts.extrapolate:
        return False  # extrapolate=False runs Algorithm 2 exactly
    if opts.reuse_metric == "line":
        return True  # matrix-free trials (.line_metric): the fallback is the bound step on the gradient's line
    path = choose_step_solver(model, opts)
    if path == "dense":
        return True
    grp = model.groups
    return path == "cg" and grp is not None and not model.constrained and kron_preconditioner_fits(grp)


def blas_limit(n, opts):
    """The shared ``blas_threads`` option (:mod:`varopt.core.threads`); automatic: 1 thread when
    ``n <= 2000`` (oversubscribed threads are very slow on small matrices), else the library's setting.

    Before the shared option groups, majorize's ``blas_threads=0`` meant automatic; an explicit 0 keeps
    that meaning for now, with a DeprecationWarning (0 means "leave the library's setting" elsewhere).
    """
    v = opts.blas_threads
    if v == 0 and "blas_threads" in getattr(opts, "given", ()):
        warnings.warn("majorize: blas_threads=0 meant 'automatic' and is deprecated: automatic is now "
                      "blas_threads=None (the default); 0 will mean 'leave the BLAS library's setting unchanged' "
                      "as in the other solvers", DeprecationWarning, stacklevel=4)
        v = None
    return blas_threads(option_threads(v, auto=1 if n <= 2000 else None))


@register_solver
class MajorizeSolver(Solver):
    name = "majorize"
    summary = "Quadratic bound majorization of log-partition objectives (Jebara & Choromanska 2012)"
    checks_second_order = True
    options = OptionSet(common_options(max_iter=1000) + [
        Option("tol", 1e-8, "stop when the relative objective change and its extrapolated remainder "
               "(df * rate / (1 - rate), linear convergence) are <= tol and the relative parameter change is <= sqrt(tol)", float, positive, "must be positive"),
        Option("bound", "full", "curvature of the bound: 'full' (Algorithm 1 Sigma, exact), 'lowrank' "
               "(Algorithm 4, V^T S V + D with diagonal absorption) or 'auto' (the full or the low-rank bound, "
               "whichever step is predicted cheaper)", ("full", "lowrank", "auto")),
        Option("step_solver", "auto", "how the full bound's step (H + Sigma) D = -u is solved: 'dense' (form Sigma, "
               "Cholesky), 'woodbury' (row space of the bound, few configurations and many parameters), 'cg' "
               "(matrix-free preconditioned CG; Kronecker structure of class-template features such as "
               "multinomial logistic regression) or 'auto' (the one with the least predicted cost, every step)",
               ("auto", "dense", "woodbury", "cg")),
        Option("cg_tol", 1e-13, "relative residual ||(H + Sigma) D + u|| / ||u|| at which a CG step stops; the default "
               "solves each step to rounding (the dense path's iterates); larger values give inexact steps, still "
               "monotone (every CG iterate lowers the majorizer)", float, positive, "must be positive"),
        Option("rank", 8, "rank k of the low-rank bound (bound='lowrank')", int, positive, "must be positive"),
        Option("ridge", 0.0, "proximal term rho/2 ||theta - theta~||^2 added to the majorizer (keeps it a "
               "majorizer; use when the bound is singular, e.g. no regularization)", float, nonnegative,
               "must be >= 0"),
        Option("extrapolate", True, "after each majorization step D, try a secant-Newton point in the plane of D "
               "and the previous step, then secant points x + a D (a > 1), keeping one only if it lowers f "
               "(monotone; with constraints only feasible trials; beyond the paper). False runs Algorithm 2 exactly", bool),
        Option("bound_reuse", "auto", "0 runs Algorithm 2 (a fresh bound Sigma every iteration); k >= 1 first tries a "
               "quasi-Newton step (L-BFGS pairs of earlier iterates on the last bound, at most k moves old, scaled; on compiled "
               "programs the first one on the Hessian at the start: a Newton step), kept only if the exact objective "
               "decreases by 1% of what a step on that matrix predicts, else the bound step on a "
               "fresh Sigma (monotone, convergent; beyond the paper). 'auto': for a compiled program "
               f"{AUTO_REUSE} when it is convex, extrapolate is on and its step solver is dense (also with constraints: trials then move on "
               "the face of the active bounds) or Kronecker-preconditioned CG, or reuse_metric resolves to 'line', "
               "else 0; for bound oracles (minimize) 0",
               _reuse_value),
        Option("reuse_metric", "auto", "initial matrix of bound_reuse's quasi-Newton steps: 'bound' (c (H + Sigma), c "
               "from the last step's secant), 'scalar' (L-BFGS's (y^T y / s^T y) I; the bound then only tests and "
               "falls back), 'line' (compiled programs: L-BFGS's matrix, tested with the bound's "
               "curvature along the gradient, and the bound step on the gradient's line as fallback, with constraints "
               "Algorithm 2's step QP: no n x n matrix is formed) or 'auto' ('line' when forming the matrix is "
               "predicted to cost more than about 1.5 gradient evaluations, or always when the step solver has none "
               "(row-space Woodbury, CG without class templates; with constraints only then); else 'bound'; bound "
               "oracles: 'bound')",
               ("auto", "bound", "scalar", "line")),
        Option("reuse_pairs", 10, "L-BFGS pairs (s, y) kept by bound_reuse's quasi-Newton trials (scipy L-BFGS-B's "
               "maxcor); more pairs cost O(pairs * n) per trial and pay when an evaluation is expensive", int,
               positive, "must be a positive integer"),
        Option("backend", "numpy", "small-array work of each iteration on small programs: numpy (the reference "
               "path; the default, because loading the compiled kernels costs about 0.3 s once per process, far more "
               "than one small solve), numba (compiled log-sum-exp values and weights up to 1024 scores, and "
               "bound_reuse's quasi-Newton trials on a dense metric up to 100 variables: free set, two-loop "
               "recursion, ratio and feasibility tests; about 25 % less time per solve on programs of a few dozen "
               "variables, which pays from a few thousand solves in one process; needs pip install 'varopt[fast]'; "
               "larger programs keep numpy), auto (numba when installed, else numpy); result.info['backend'] says "
               "which ran",
               ("auto", "numpy", "numba")),
        Option("check_attained", True, "before reporting 'optimal' on a convex program with directions free of "
               "curvature (no quadratic term, no bounds), test for a direction along which the objective "
               "decreases strictly from every point, e.g. separable data without penalty (exact tests for free "
               "intercepts, a dual certificate at the converged point, else one LP): then no minimizer exists "
               "and the status is 'numerical' ('unbounded' for a ray of linear decrease) with the last iterate; "
               "result.info['attainment'] says what was found and its cost", bool),
        Option("check_bound", True, "check f(theta_new) <= majorizer every iteration (SolverBugError otherwise)",
               bool),
    ] + progress_options("called as callback(iteration, x, f) after every iteration (f in the internal, "
                         "minimised sense); returning True stops the run")[1:]
      + start_options("starting point (array of length n); default: the program's x0 or 0")[:1]
      + thread_options("1 thread when n <= 2000, else the library's setting"))

    def _solve(self, program, opts, run) -> Result:
        program = program.split_abs_rows()   # |a'x + b| <= r is the pair of linear rows +-(a'x + b) <= r
        program.require_no_aux("majorize", epigraph_ok=True)
        n_user = program.n_user              # the front-end's epigraph columns (max, huber, ...) are not the user's
        user = program
        # norm1(e) <= t and an L1 penalty lam * norm1(e): linear rows on new columns s >= |e| (.abs_lift)
        lift = lift_abs_sums(program, objective=True)
        if lift is not None:
            program = lift.program
        if program.n > n_user:
            _users_view(run, n_user)
        program.require_smooth("majorize", "use proxsg (L1 penalties) or klprox (Laplace likelihoods)",
                                 epigraph_ok=True)
        check_reuse_options(opts)
        with blas_limit(program.n, opts):
            model = MajorizeModel(program)
            check_step_solver(model, opts)
            qp = highs if model.constrained else None
            x = _start(program, model, opts, qp, lift, user)
            if isinstance(x, tuple):
                return run.finish(*x)
            if model.constrained:
                # the step solver's cost model counts the bounds the step QP's working set may hold: those active at
                # the start (then those of the last step QP, .step_qp.StepQP)
                model.working_set_hint = int(np.count_nonzero((x <= model.lb) | (x >= model.ub)))
            resolve_reuse_metric(model, opts)
            if opts.bound_reuse == "auto":
                opts.bound_reuse = AUTO_REUSE if reuse_pays(model, opts) else 0
            step_qp = StepQP(model, qp) if model.constrained else None
            maj = Majorization(model, opts, run, step_qp)
            res = maj.solve(x)
        res.info = {"backend": maj.backend,
                    "bound": opts.bound, "constrained": bool(model.constrained), "convex": bool(model.convex),
                    "step_solver": {k: v for k, v in model.step_stats.items() if k != "cg_last"}}
        if maj.reuse is not None:
            # trials made / accepted / shortened / rejected (each rejection is followed by a bound step), bounds
            res.info["bound_reuse"] = dict(maj.reuse.stats, k=opts.bound_reuse)
            res.info["reuse_metric"] = opts.reuse_metric  # 'auto' resolved (.line_metric.line_pays)
        if step_qp is not None:
            res.info["step_qp"] = dict(step_qp.stats)  # steps by the active-set fast path / the general layer
        if maj.attainment is not None:
            att = dict(maj.attainment)
            if "direction" in att:
                v = att.pop("direction")
                v = lift.restrict(v) if lift is not None else v
                att["direction"] = v[:n_user]
                if res.status == "unbounded":
                    res.info["unbounded_ray"] = att["direction"]   # as gop's (docs/conventions.md)
            res.info["attainment"] = att
        if lift is not None:
            res.x = lift.restrict(res.x)   # the user's variables; the columns s >= |e| are the lift's
            res.info["abs_columns"] = program.n - lift.n_user
        return res


def _users_view(run, n_user):
    """The user's callback, and the point of a run interrupted by Ctrl-C (returned by the registry, past this
    solver), hold the user's ``n_user`` variables, not the lifted columns (abs sums, the front-end's epigraph
    columns)."""
    fn = run.callback_fn
    if fn is not None:
        run.callback_fn = lambda k, x, *extra: fn(k, None if x is None else np.asarray(x)[:n_user], *extra)
    interrupted = run.interrupted

    def restricted():
        res = interrupted()
        res.x = None if res.x is None else np.asarray(res.x, dtype=float).ravel()[:n_user]
        return res
    run.interrupted = restricted


def _start(program, model, opts, qp, lift=None, user=None):
    """The starting point (option ``x0``, the program's, or 0; NaN entries -> 0), projected onto the linear
    constraints and bounds when it violates them (few rows: :func:`.step_rows.project_start`, else or when that is
    not certified the QP layer's projection); ``(status, message)`` when that fails. ``x0`` (or the program's start)
    is the user's point (``user``: the program before the lift, whose epigraph columns are completed at their definitions,
    :mod:`varopt.program.epigraph_lift`); with sums of absolute values lifted (``lift``,
    :mod:`varopt.program.abs_lift`) it is completed by ``s = |e(x0)|``."""
    n = user.n_user if user is not None else (program.n if lift is None else lift.n_user)
    x = program.x0.copy() if opts.x0 is None else np.array(opts.x0, dtype=float).ravel()
    if opts.x0 is not None and x.size != n:
        raise InvalidOptionError(f"option 'x0' has length {x.size}, the program has {n} variables")
    if user is not None and user.aux:
        # also the program's own start: epigraph columns at their definitions (t = max(r, 0) for pos(r)) satisfy
        # their rows, so no projection is needed for them (a 2,000-row pinball regression spent 69 s in HiGHS's
        # QP projecting a start with t = 0 onto t >= r)
        base = x if opts.x0 is not None else x[:n]
        with np.errstate(all="ignore"):
            x = user.complete_aux(np.concatenate([np.where(np.isnan(base), 0.0, base), np.zeros(user.n - n)]))
    if lift is not None and (opts.x0 is not None or (user is not None and user.aux)):
        x = lift.extend(x)
    x = np.where(np.isnan(x), 0.0, x)
    if not np.isfinite(x).all():
        # only the program's start can get here (option x0 is checked finite by its validator): the user's variables
        # hold an infinite value, so name the variable rather than an option the user did not pass
        j = int(np.flatnonzero(~np.isfinite(x))[0])
        name = program.names[j] if j < len(program.names) else f"entry {j}"
        raise InputDataError(f"the starting point (the variables' current values) is {x[j]} at {name!r}; set a "
                             "finite value (or None) or pass option x0")
    if not model.constrained:
        return x
    x = np.clip(x, model.lb, model.ub)
    if program.max_violation(x) <= 1e-9:
        return x
    z = project_start(x, model.A, model.lo, model.hi, model.lb, model.ub)
    if z is not None and program.max_violation(z) <= 1e-9:
        return z
    res = qp.project(x, model.A, model.lo, model.hi, model.lb, model.ub, norm="l2")
    if res.status == "infeasible":
        return "infeasible", "the linear constraints and bounds are infeasible"
    if res.status != "optimal":
        return "error", f"projection of x0 onto the constraints: {res.status}"
    return np.asarray(res.x, dtype=float)
