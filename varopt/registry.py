"""The public solver registry and the base class of every varopt solver.

A solver is a subclass of :class:`Solver` with a ``name``, a one-line ``summary``, an
:class:`~varopt.options.OptionSet` and a ``_solve(program, opts, run) -> Result`` that works on
the internal (minimised) program; ``run`` is the per-solve :class:`~varopt.core.run.Run`
(clock, limits, history, progress, callback, incumbent). :func:`register_solver` adds it to the
registry.

The registry knows solvers only. Front-ends (the Pyomo and CVXPY adapters, or any other) call
:func:`subscribe` with a function that makes a solver class reachable from their library; the
registry calls it for every solver registered before and after, so registration works in either
import order and nothing here imports a front-end.
"""
from __future__ import annotations

import inspect
import time

import numpy as np

from .core import second_order
from .core.run import Run
from .options import Options, OptionSet
from .program import Program
from .program.atoms import ATOMS
from .result import Result

#: atom kinds the CVXPY front-end can emit in place of an epigraph form (``AtomKernel.hinge_forms``): a solver that
#: needs every term to be a function of one affine predictor (ipsa, klprox) lists them all in ``native_atoms``
PREDICTOR_ATOMS = frozenset(k for k, a in ATOMS.items() if a.hinge_forms)

_REGISTRY: dict = {}
_SUBSCRIBERS: list = []


def _trivial(program, run):
    """No free variable (all fixed, or none): the objective is a constant and the constraints are
    constants that hold or not; every solver answers the same, without running."""
    import math

    import numpy as np
    x = np.zeros(0)
    viol = program.max_violation(x)
    if viol > 1e-9:
        return run.finish("infeasible", f"no free variable and a constant constraint is violated by {viol:.3g}",
                          lower=math.inf, upper=math.inf)
    f = float(program.objective.value(x))
    return run.finish("optimal", "no free variable: the objective is a constant", x=x, objective=f,
                      lower=f, upper=f)


class Solver:
    name: str = ""
    summary: str = ""
    options: OptionSet = OptionSet([])
    #: True for solvers of energy models (p(x) ∝ exp(-beta f(x)) over binary variables): the
    #: front-ends then compile binary variables (Pyomo ``domain=Binary``, CVXPY ``boolean=True``)
    #: into ``program.energy`` (:mod:`varopt.program.energy`); every other solver keeps rejecting
    #: binary and integer variables
    accepts_binary: bool = False
    #: True for local solvers whose ``converged`` means "first-order conditions hold": on a
    #: nonconvex program the point is then checked for negative curvature on the active face
    #: (:mod:`varopt.core.second_order`) and reported as ``stationary`` when it is not a local minimum
    checks_second_order: bool = False
    #: atom kinds (:data:`varopt.program.atoms.ATOMS`) that the front-ends emit for this solver in place of the form
    #: other solvers receive: ``sqpos`` (``max(u, 0)^2``, CVXPY's ``square(pos(u))`` and ``log_normcdf``) reaches a
    #: solver listing it as one atom row of an affine ``u``, any other solver as today's epigraph columns and rows
    #: (:mod:`varopt.program.epigraph_lift`); ``abs``: ``maximum``/``minimum`` of two affine expressions (hinges
    #: ``pos(u)``, ``neg(u)``) reach the solver as ``(a + b)/2 ± |a - b|/2``, a linear term and one ``abs`` row
    #: (:meth:`varopt.frontends.cvxpy_epigraph._EpigraphTracer.abs_split`), not as epigraph columns. The forms are
    #: the table's ``AtomKernel.hinge_forms``; :data:`PREDICTOR_ATOMS` holds every kind that has some
    native_atoms: frozenset = frozenset()

    def second_order_skip(self, opts) -> str | None:
        """Why the second-order check cannot apply to this solve (e.g. the gradient came from a
        user oracle, not from the program), or None."""
        return None

    def solve(self, program: Program, opts: Options = None, /, **options) -> Result:
        """Validate ``options`` (or take ``opts`` already validated by ``self.options.validate``, as
        the front-ends do), solve ``program`` and return a :class:`Result` in the user's sense.

        ``KeyboardInterrupt`` during the solve returns the best point so far with status
        ``interrupted`` (see :meth:`varopt.core.run.Run.interrupted`).
        """
        if opts is None:
            opts = self.options.validate(options)
        elif options or not isinstance(opts, Options):
            raise TypeError("solve(program, opts) takes the Options of self.options.validate(...) and "
                            "no keyword options, or keyword options only")
        run = Run(self.name, opts)
        run.maximize = bool(program.maximize)
        t0 = run.t0
        try:
            if program.n == 0 and getattr(program, "energy", None) is None:
                res = _trivial(program, run)
            else:
                res = self._call(program, opts, run)
                if self.checks_second_order:
                    res = second_order.apply(program, res, self.second_order_skip(opts))
        except KeyboardInterrupt:
            res = run.interrupted()
        res.wall_time = time.perf_counter() - t0
        res.solver = self.name
        res.names = list(program.names[:program.n_user])
        if program.aux and res.x is not None:
            x = np.asarray(res.x, dtype=float).ravel()
            if x.size == program.n and res.objective is not None and any(a.kind == "epigraph" for a in program.aux):
                # epigraph columns (max, huber, ...) at their optimum: the objective at the user's point, never above
                # the solver's (a column is only ever lowered onto its maximum, varopt.program.epigraph_lift)
                with np.errstate(all="ignore"):
                    f = float(program.objective.value(program.complete_aux(x)))
                if np.isfinite(f) and f <= res.objective:
                    res.objective = f
            # auxiliary columns (lifted squares/norms of bilinear terms) never reach the user's model
            res.x = x[:program.n_user]
            if "descent_direction" in res.info:
                res.info["descent_direction"] = np.asarray(res.info["descent_direction"])[:program.n_user]
        res.maximize = program.maximize
        res.options = {k: getattr(opts, k) for k in opts.given}
        # convert the internal minimisation to the user's sense
        res.objective = program.user_value(res.objective)
        res.lower_bound, res.upper_bound = program.user_bounds(res.lower_bound, res.upper_bound)
        if program.maximize:
            for h in res.history:
                lo, up = h.get("lower"), h.get("upper")
                h["lower"], h["upper"] = program.user_bounds(lo, up)
                if h.get("objective") is not None:
                    h["objective"] = -h["objective"]
        return res

    def _call(self, program, opts, run):
        # plugins written before the run loop existed define _solve(program, opts); the arity is
        # cached per class (inspect.signature costs ~20 us, a noticeable share of sub-ms solves)
        cls = type(self)
        takes_run = cls.__dict__.get("_takes_run_")
        if takes_run is None:
            takes_run = len(inspect.signature(self._solve).parameters) >= 3
            cls._takes_run_ = takes_run
        return self._solve(program, opts, run) if takes_run else self._solve(program, opts)

    def _solve(self, program: Program, opts, run: Run) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError


def register_solver(cls):
    """Class decorator: register a :class:`Solver` subclass under ``cls.name`` everywhere."""
    if not cls.name:
        raise ValueError("a solver needs a name")
    _REGISTRY[cls.name] = cls
    for fn in _SUBSCRIBERS:
        fn(cls)
    return cls


def subscribe(fn):
    """Call ``fn(solver_class)`` for every registered solver, now and whenever one is registered
    later (how a front-end makes solvers reachable from its library)."""
    _SUBSCRIBERS.append(fn)
    for cls in list(_REGISTRY.values()):
        fn(cls)
    return fn


def get_solver(name: str) -> Solver:
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown varopt solver {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def registered_solvers() -> dict:
    """Registered solvers: ``{name: Solver subclass}``."""
    return dict(_REGISTRY)


def load_plugins():
    """Import third-party solver plugins so they register themselves.

    Two discovery mechanisms, run at ``import varopt``:

    * installed packages that declare an entry point in the group ``varopt.solvers``
      (``[project.entry-points."varopt.solvers"] name = "pkg.module"``);
    * the environment variable ``VAROPT_PLUGINS``: a comma-separated list of importable
      module names (handy for scripts, the CLI and tests).

    A plugin that fails to import raises, naming the plugin: a silently missing solver is
    worse than a loud error.
    """
    import importlib
    import os
    from importlib.metadata import entry_points

    for ep in entry_points(group="varopt.solvers"):
        try:
            ep.load()
        except Exception as exc:
            raise ImportError(f"varopt plugin entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
    for mod in filter(None, (m.strip() for m in os.environ.get("VAROPT_PLUGINS", "").split(","))):
        try:
            importlib.import_module(mod)
        except Exception as exc:
            raise ImportError(f"varopt plugin module {mod!r} from VAROPT_PLUGINS failed to import: {exc}") from exc
