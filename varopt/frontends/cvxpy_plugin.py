"""CVXPY front-end: every registered varopt solver is a ``prob.solve(method=NAME)`` method.

Usage::

    import cvxpy as cp
    import varopt                      # registers every varopt solver (and any plugin)
    prob = cp.Problem(cp.Minimize(...), [...])
    value = prob.solve(method="gop", time_limit=60, verbose=True)
    prob.status                       # cvxpy status string (see below)
    prob.value                        # objective value in the user's sense
    x.value                           # variable values are set
    res = prob.varopt_result          # the full varopt.Result (bounds, gap, history, ...)
    res = varopt.frontends.cvxpy_plugin.result_of(prob)   # same, or None if not solved by varopt
    prob.varopt_program               # the compiled varopt.Program that was solved
    prob.varopt_marginals             # energy-model solvers: {variable name: P(x = 1) array}

Energy-model solvers (``exact``, ``meanfield``, ``lbp``, ``trw``, ``ais``, ``sasmc``, ``cmf``) take problems over
``boolean=True`` variables (:mod:`varopt.frontends.cvxpy_energy`); they leave the variables'
values untouched, ``prob.solve`` returns the free energy (also ``prob.varopt_result.objective``),
and ``prob.value`` stays None (CVXPY evaluates the objective at the variables, which hold no state).

``prob.solve(method=...)`` bypasses CVXPY's DCP analysis: the problem is compiled by
:func:`varopt.frontends.cvxpy_compile.compile_cvxpy`, so non-convex products such as
``cp.multiply(phi, cp.square(x - mu))`` are accepted. Keyword arguments are the solver's
options (unknown names raise :class:`~varopt.errors.InvalidOptionError` listing the valid
ones); ``verbose`` is accepted by every solver, and so is CVXPY's ``warm_start=True`` (start from
this problem's previous solve by the same solver: klprox's ``warm_start`` Result, else the starting point, as a
hint that ipsa replaces when it is not strictly feasible).

Status mapping (varopt -> CVXPY): ``optimal`` -> ``OPTIMAL``; ``converged`` (a local or
stochastic method stopped by its convergence test, no optimality proof) ->
``OPTIMAL_INACCURATE`` (without CVXPY's "Solution may be inaccurate" warning: the solver's
convergence test passed); ``iteration_limit``/``time_limit``/``pass_limit``/``interrupted`` (Ctrl-C)/``numerical`` (stopped by
numerical difficulties with a feasible incumbent) -> ``USER_LIMIT`` (variables hold the best point found); ``infeasible`` -> ``INFEASIBLE`` (value ``+inf`` for
a minimisation, ``-inf`` for a maximisation); ``unbounded`` -> ``UNBOUNDED`` (value
``-inf``/``+inf``); ``error`` -> ``SOLVER_ERROR`` (value ``None``). The return value of
``prob.solve`` is ``prob.value``. Constraints' ``dual_value`` is None after a varopt solve (no
solver returns multipliers; duals of an earlier solve by another solver are cleared).
"""
from __future__ import annotations

import functools
import math
import sys
import warnings

import numpy as np

from ..core.run import PROGRESS_STREAM
from ..errors import InvalidOptionError, ModelStructureError
from .. import registry
from ..program.lifting import start_values
from .cvxpy_compile import compile_cvxpy

STATUS_MAP = {
    "optimal": "optimal",
    "converged": "optimal_inaccurate",
    "stationary": "user_limit",
    "iteration_limit": "user_limit",
    "time_limit": "user_limit",
    "pass_limit": "user_limit",
    "infeasible": "infeasible",
    "unbounded": "unbounded",
    "error": "solver_error",
    "interrupted": "user_limit",
    "numerical": "user_limit",
}


def result_of(prob):
    """The :class:`varopt.Result` of the last ``prob.solve(method=<varopt solver>)`` (or None)."""
    return getattr(prob, "varopt_result", None)


def solve_problem(prob, name, *args, **options):
    """Solve the CVXPY problem ``prob`` with the varopt solver ``name`` (see module docstring)."""
    cp_error, s, Solution = _cvxpy_parts()
    if args:
        raise InvalidOptionError(f"varopt solver {name!r} takes keyword options only, got positional {args!r}")
    if "solver" in options:
        raise InvalidOptionError(f"method={name!r} selects the varopt solver; do not also pass solver=")
    _cvxpy_transform_flags(name, options)
    solver = registry.get_solver(name)
    if "verbose" in options and "verbose" not in solver.options.names():
        options.pop("verbose")
    ws = options.get("warm_start")
    cold = isinstance(ws, (bool, np.bool_)) and not ws   # CVXPY's warm_start=False: a cold start
    hint = _cvxpy_warm_start(prob, name, solver, options)
    opts = solver.options.validate(options)  # fail on unknown/invalid options before compiling
    if getattr(solver, "accepts_binary", False):
        from .cvxpy_energy import compile_cvxpy_energy
        program, mapping = compile_cvxpy_energy(prob, name)
    else:
        # sqpos rows for a solver that takes them (Solver.native_atoms), today's epigraph form for the others
        program, mapping = compile_cvxpy(prob, native_atoms=getattr(solver, "native_atoms", ()))
    if cold:
        # the variables' values (left by the previous solve) are the compiled start; a cold start ignores
        # them, as Pyomo's warmstart=False does (before, warm_start=False still started from them)
        program.x0 = np.full(program.n, np.nan)
    elif hint is not None and hint.size == program.n_user:
        # auxiliary columns (epigraph of a max, lifted norms) at their definitions from the hint
        program.x0 = start_values(program.aux, np.concatenate([hint, np.full(program.n - program.n_user, np.nan)]),
                                  program.n_user)
    token = PROGRESS_STREAM.set(sys.stdout if options.get("verbose") else None)
    try:
        res = solver.solve(program, opts)
    finally:
        PROGRESS_STREAM.reset(token)
    prob.varopt_result = res
    prob.varopt_program = program

    status = STATUS_MAP.get(res.status, "solver_error")
    has_x = res.x is not None and res.status not in ("infeasible", "unbounded", "error")
    marg = res.info.get("marginals") if isinstance(res.info, dict) else None
    if marg is not None:  # energy model: marginals by variable, the boolean values left untouched
        prob.varopt_marginals = {
            v.name(): np.array([marg[nm] for nm in mapping.names[off:off + (int(np.prod(v.shape)) or 1)]]
                               ).reshape(v.shape) for v, off in zip(mapping.variables, mapping.offsets)}
    if status == "infeasible":
        value = -math.inf if program.maximize else math.inf
    elif status == "unbounded":
        value = math.inf if program.maximize else -math.inf
    else:
        value = res.objective
    # the point goes in through CVXPY's public Problem.unpack_results: status, value (CVXPY
    # evaluates the objective at the loaded variables), variable values (stored once, by unpack_results; the
    # mapping's variables are problem.variables()) and solver_stats
    primal = mapping.primal(res.x) if has_x else {v.id: None for v in mapping.variables}
    attr = {s.SOLVE_TIME: res.wall_time, s.NUM_ITERS: int(res.iterations or 0),
            s.EXTRA_STATS: {"varopt_result": res, "message": res.message}}
    solution = Solution(status, None if value is None else float(value), primal, {}, attr)
    try:
        if res.status == "converged":
            with warnings.catch_warnings():
                # CVXPY warns "Solution may be inaccurate. Try another solver" for every *_INACCURATE status; for
                # 'converged' the solver's own convergence test passed (klprox: stationarity to gtol), the status
                # already says there is no optimality proof, and the advice is wrong
                warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
                prob.unpack_results(solution, _Chain(name), None)
        else:  # (no filter to set: catch_warnings copies the filter list and resets the warnings caches)
            prob.unpack_results(solution, _Chain(name), None)
    except cp_error.SolverError as exc:
        raise cp_error.SolverError(f"varopt solver {name!r} failed: {res.message or res.status}; the "
                                   f"varopt.Result is prob.varopt_result") from exc
    # varopt's solvers return no multipliers, and unpack_results only writes the duals it is given: without this a
    # constraint's dual_value would still hold another solver's duals from an earlier solve of the same problem
    for constraint in prob.constraints:
        for dual in constraint.dual_variables:
            dual.save_value(None)
    # the return value is the solver's objective in the user's sense; prob.value is CVXPY's
    # objective at the loaded point. They agree for gop, ipsa, majorize; they differ where the
    # solver's objective is not the model at a point: klprox (-ELBO at the posterior, the model at
    # its mean) and the energy solvers (free energy; the variables stay unassigned, prob.value None)
    return value


#: CVXPY's ``prob.solve`` flags that ask for a transformation of the problem before a cone solver sees it
_TRANSFORMS = {
    "gp": "CVXPY's log-log transformation of a geometric program (DGP, Agrawal, Xu & Boyd 2019)",
    "qcp": "CVXPY's bisection over a quasiconvex program (DQCP, Agrawal & Boyd 2020)",
}


def _cvxpy_transform_flags(name, options):
    """Refuse ``gp=True`` and ``qcp=True`` by name (``False``, CVXPY's default, is dropped): varopt compiles the
    problem as written, and its products, ratios and powers of variables are solved as such (gop globally), which is
    not what a user who asked for the transformation expects to be told silently."""
    for flag, what in _TRANSFORMS.items():
        if flag in options and not bool(options[flag]):
            options.pop(flag)
        elif flag in options:
            raise ModelStructureError(
                f"method={name!r} with {flag}=True: varopt's solvers do not apply {what}; they compile the problem "
                f"as written. Solve it with a CVXPY solver (prob.solve({flag}=True)), or drop {flag}=True to solve "
                "the problem as written (gop takes products, ratios and powers of variables)")


@functools.cache
def _cvxpy_parts():
    """``(cvxpy.error, cvxpy.settings, Solution)``, imported once: CVXPY is only imported when the user's program
    does (these import statements cost ~8 us per solve, a share of a sub-millisecond ``prob.solve``)."""
    from cvxpy import error as cp_error
    from cvxpy import settings as s
    from cvxpy.reductions.solution import Solution
    return cp_error, s, Solution


def _cvxpy_warm_start(prob, name, solver, options):
    """CVXPY's own ``warm_start=True/False`` keyword (a boolean, unlike a varopt ``warm_start`` option's value):
    True starts from this problem's previous solve by the same solver, passed as the solver's ``warm_start`` option
    (its Result: klprox), or returned as the starting point's hint (the program's start, as the variables' values
    are) when the solver takes an ``x0`` and none is given: a hint, as in CVXPY, that a solver needing a strictly
    feasible start (ipsa) replaces when a changed Parameter has made it infeasible (as option ``x0`` it was an
    error naming an option the user had not given). False, or no previous solve, is a cold start. Solvers without
    either option ignore it, as CVXPY's solvers do."""
    ws = options.get("warm_start")
    if not isinstance(ws, (bool, np.bool_)):
        return
    names = solver.options.names()
    prev = getattr(prob, "varopt_result", None)
    prev = prev if bool(ws) and prev is not None and prev.solver == name and prev.x is not None else None
    if "warm_start" in names:
        # a hint, as CVXPY's warm starts are: the previous solve's model may differ from this one in more than values
        # (a sample weight set to 0 drops its likelihood row); the solver ignores a hint that does not fit
        options["warm_start"] = None if prev is None else dict(prev.info, x=prev.x, hint=True)
        return
    options.pop("warm_start")
    if prev is not None and "x0" in names and options.get("x0") is None:
        return np.asarray(prev.x, dtype=float).ravel().copy()
    return None


class _Chain:
    """The one-step chain :meth:`cvxpy.Problem.unpack_results` expects: varopt solved the problem
    directly, so inverting is the identity."""

    class _Name:
        def __init__(self, name):
            self._name = name

        def name(self):
            return self._name

    def __init__(self, name):
        self.solver = self._Name(name)

    def invert(self, solution, inverse_data):
        return solution


def register(cls):
    """Make the varopt solver class ``cls`` available as ``prob.solve(method=cls.name)``."""
    import cvxpy as cp

    name = cls.name

    def _solve(prob, *args, **options):
        return solve_problem(prob, name, *args, **options)

    _solve.__name__ = f"varopt_{name}"
    _solve.__doc__ = f"varopt solver {name!r}: {cls.summary}\n\nOptions:\n{cls.options.doc()}"
    cp.Problem.register_solve(name, _solve)
