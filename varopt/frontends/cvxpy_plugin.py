"""CVXPY front-end: every registered varopt solver is a ``prob.solve(method=NAME)`` method.

Usage::

    import cvxpy as cp
    import varopt                      # registers gop, ipsa, majorize (and any plugin)
    prob = cp.Problem(cp.Minimize(...), [...])
    value = prob.solve(method="gop", time_limit=60, verbose=True)
    prob.status                       # cvxpy status string (see below)
    prob.value                        # objective value in the user's sense
    x.value                           # variable values are set
    res = prob.varopt_result          # the full varopt.Result (bounds, gap, history, ...)
    res = varopt.frontends.cvxpy_plugin.result_of(prob)   # same, or None if not solved by varopt
    prob.varopt_program               # the compiled varopt.Program that was solved
    prob.varopt_marginals             # energy-model solvers: {variable name: P(x = 1) array}

Energy-model solvers (``exact``, ``meanfield``, ``lbp``, ``trw``, ``ais``) take problems over
``boolean=True`` variables (:mod:`varopt.frontends.cvxpy_energy`); they leave the variables'
values untouched and return the free energy as ``prob.value``.

``prob.solve(method=...)`` bypasses CVXPY's DCP analysis: the problem is compiled by
:func:`varopt.frontends.cvxpy_compile.compile_cvxpy`, so non-convex products such as
``cp.multiply(phi, cp.square(x - mu))`` are accepted. Keyword arguments are the solver's
options (unknown names raise :class:`~varopt.errors.InvalidOptionError` listing the valid
ones); ``verbose`` is accepted by every solver.

Status mapping (varopt -> CVXPY): ``optimal`` -> ``OPTIMAL``; ``converged`` (a local or
stochastic method stopped by its convergence test, no optimality proof) ->
``OPTIMAL_INACCURATE``; ``iteration_limit``/``time_limit``/``pass_limit``/``interrupted`` (Ctrl-C) -> ``USER_LIMIT``
(variables hold the best point found); ``infeasible`` -> ``INFEASIBLE`` (value ``+inf`` for
a minimisation, ``-inf`` for a maximisation); ``unbounded`` -> ``UNBOUNDED`` (value
``-inf``/``+inf``); ``error`` -> ``SOLVER_ERROR`` (value ``None``). The return value of
``prob.solve`` is ``prob.value``.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidOptionError

STATUS_MAP = {
    "optimal": "optimal",
    "converged": "optimal_inaccurate",
    "iteration_limit": "user_limit",
    "time_limit": "user_limit",
    "pass_limit": "user_limit",
    "infeasible": "infeasible",
    "unbounded": "unbounded",
    "error": "solver_error",
    "interrupted": "user_limit",
}


def result_of(prob):
    """The :class:`varopt.Result` of the last ``prob.solve(method=<varopt solver>)`` (or None)."""
    return getattr(prob, "varopt_result", None)


def solve_problem(prob, name, *args, **options):
    """Solve the CVXPY problem ``prob`` with the varopt solver ``name`` (see module docstring)."""
    from cvxpy.problems.problem import SolverStats
    from cvxpy.reductions.solution import Solution

    from ..registry import get_solver
    from .cvxpy_compile import compile_cvxpy

    if args:
        raise InvalidOptionError(f"varopt solver {name!r} takes keyword options only, got positional {args!r}")
    if "solver" in options:
        raise InvalidOptionError(f"method={name!r} selects the varopt solver; do not also pass solver=")
    solver = get_solver(name)
    if "verbose" in options and "verbose" not in solver.options.names():
        options.pop("verbose")
    opts = solver.options.validate(options)  # fail on unknown/invalid options before compiling
    if getattr(solver, "accepts_binary", False):
        from .cvxpy_energy import compile_cvxpy_energy
        program, mapping = compile_cvxpy_energy(prob, name)
    else:
        program, mapping = compile_cvxpy(prob)
    res = solver.solve(program, opts)
    prob.varopt_result = res
    prob.varopt_program = program

    status = STATUS_MAP.get(res.status, "solver_error")
    has_x = res.x is not None and res.status not in ("infeasible", "unbounded", "error")
    marg = res.info.get("marginals") if isinstance(res.info, dict) else None
    if marg is not None:  # energy model: marginals by variable, the boolean values left untouched
        prob.varopt_marginals = {
            v.name(): np.array([marg[nm] for nm in mapping.names[off:off + (int(np.prod(v.shape)) or 1)]]
                               ).reshape(v.shape) for v, off in zip(mapping.variables, mapping.offsets)}
    if has_x:
        mapping.load(res.x)
    elif marg is not None:
        pass
    else:
        for v in prob.variables():
            v.save_value(None)
    if status == "infeasible":
        value = -math.inf if program.maximize else math.inf
    elif status == "unbounded":
        value = math.inf if program.maximize else -math.inf
    elif status == "solver_error":
        value = None
    else:
        value = res.objective
        if value is None and has_x:
            value = prob.objective.value
    prob._status = status
    prob._value = None if value is None else float(value)
    primal = {v.id: v.value for v in prob.variables()} if has_x else {}
    prob._solution = Solution(status, prob._value, primal, {}, {"varopt_result": res})
    prob._solver_stats = SolverStats(solver_name=name, solve_time=res.wall_time,
                                     num_iters=int(res.iterations or 0))
    return prob.value


def register(cls):
    """Make the varopt solver class ``cls`` available as ``prob.solve(method=cls.name)``."""
    import cvxpy as cp

    name = cls.name

    def _solve(prob, *args, **options):
        return solve_problem(prob, name, *args, **options)

    _solve.__name__ = f"varopt_{name}"
    _solve.__doc__ = f"varopt solver {name!r}: {cls.summary}\n\nOptions:\n{cls.options.doc()}"
    cp.Problem.register_solve(name, _solve)
