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

from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp

from ...errors import InputDataError, InvalidOptionError
from ...options import Option, OptionSet, common_options, nonnegative, positive
from ...registry import Solver, register_solver
from ...result import Result
from .loop import Majorization
from .model import MajorizeModel
from .step import woodbury_solve as _woodbury_solve  # noqa: F401  (import path used by tests)

__all__ = ["MajorizeSolver", "MajorizeModel"]

_CTL = []


def _threadpool_controller():
    """One cached threadpoolctl controller (building it scans the loaded libraries: ~5 ms)."""
    if not _CTL:
        try:
            from threadpoolctl import ThreadpoolController
            _CTL.append(ThreadpoolController())
        except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
            _CTL.append(None)
    return _CTL[0]


@contextmanager
def blas_limit(n, blas_threads):
    """BLAS threads during a solve: ``blas_threads``, or 1 when it is 0 and ``n <= 2000`` (oversubscribed
    threads are very slow on small matrices), else the library default."""
    threads = blas_threads or (1 if n <= 2000 else None)
    ctl = _threadpool_controller()
    if ctl is None or threads is None or all(
            lc.num_threads <= threads for lc in ctl.lib_controllers if lc.user_api == "blas"):
        # nothing to limit (e.g. OPENBLAS_NUM_THREADS=1): entering ctl.limit costs ~15 us, a tenth of
        # the smallest solves' first iteration
        yield
        return
    with ctl.limit(limits=threads, user_api="blas"):
        yield


def _callable(v):
    if not callable(v):
        raise InvalidOptionError("option 'callback' must be callable")
    return v


@register_solver
class MajorizeSolver(Solver):
    name = "majorize"
    summary = "Quadratic bound majorization of log-partition objectives (Jebara & Choromanska 2012)"
    options = OptionSet(common_options(max_iter=1000) + [
        Option("tol", 1e-8, "stop when the relative objective change and its extrapolated remainder "
               "(df * rate / (1 - rate), linear convergence) are <= tol and the relative parameter change is <= sqrt(tol)", float, positive, "must be positive"),
        Option("bound", "full", "curvature of the bound: 'full' (Algorithm 1 Sigma, exact) or 'lowrank' "
               "(Algorithm 4, V^T S V + D with diagonal absorption)", ("full", "lowrank")),
        Option("rank", 8, "rank k of the low-rank bound (bound='lowrank')", int, positive, "must be positive"),
        Option("ridge", 0.0, "proximal term rho/2 ||theta - theta~||^2 added to the majorizer (keeps it a "
               "majorizer; use when the bound is singular, e.g. no regularization)", float, nonnegative,
               "must be >= 0"),
        Option("extrapolate", True, "after each majorization step D, try a secant-Newton point in the plane of D "
               "and the previous step, then secant points x + a D (a > 1), keeping one only if it lowers f "
               "(monotone; unconstrained problems; beyond the paper). False runs Algorithm 2 exactly", bool),
        Option("check_bound", True, "check f(theta_new) <= majorizer every iteration (SolverBugError otherwise)",
               bool),
        Option("blas_threads", 0, "BLAS threads during the solve (0: 1 thread when n <= 2000, else the library "
               "default; oversubscribed threads are very slow on a busy machine for small matrices)", int,
               nonnegative, "must be >= 0"),
        Option("x0", None, "starting point (array of length n); default: the program's x0 or 0",
               lambda v: np.asarray(v, dtype=float).ravel()),
        Option("callback", None, "called as callback(iteration, x, f) after every iteration (f in the internal, "
               "minimised sense); returning True stops the run", _callable),
    ])

    def _solve(self, program, opts, run) -> Result:
        with blas_limit(program.n, opts.blas_threads):
            model = MajorizeModel(program)
            qp = None
            if model.constrained:
                from ... import highs  # the one HiGHS layer
                qp = highs
            x = _start(program, model, opts, qp)
            if isinstance(x, tuple):
                return run.finish(*x)
            res = Majorization(model, opts, run, qp).solve(x)
        res.info = {"bound": opts.bound, "constrained": bool(model.constrained), "convex": bool(model.convex)}
        return res


def _start(program, model, opts, qp):
    """The starting point (option ``x0``, the program's, or 0; NaN entries -> 0), projected onto the linear
    constraints and bounds when it violates them; ``(status, message)`` when that fails."""
    n = program.n
    x = program.x0.copy() if opts.x0 is None else np.array(opts.x0, dtype=float)
    if x.size != n:
        raise InvalidOptionError(f"option 'x0' has length {x.size}, the program has {n} variables")
    x = np.where(np.isnan(x), 0.0, x)
    if not np.all(np.isfinite(x)):
        raise InputDataError("starting point x0 contains inf")
    if not model.constrained:
        return x
    x = np.clip(x, model.lb, model.ub)
    if program.max_violation(x) <= 1e-9:
        return x
    m = model.A.shape[0]
    res = qp.solve_lp(-x, A=model.A if m else None, row_lo=model.lo if m else None,
                      row_hi=model.hi if m else None, lb=model.lb, ub=model.ub, Q=sp.identity(n, format="csr"),
                      const=0.5 * float(x @ x))
    if res.status == "infeasible":
        return "infeasible", "the linear constraints and bounds are infeasible"
    if res.status != "optimal":
        return "error", f"projection of x0 onto the constraints: {res.status}"
    return np.asarray(res.x, dtype=float)
