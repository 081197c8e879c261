"""Pyomo front-end: every registered varopt solver is a Pyomo ``SolverFactory`` solver.

:func:`register` (called by :func:`varopt.register_solver`) registers a Pyomo solver class
under the varopt solver's ``name`` with ``doc = summary``, so after ``import varopt``::

    opt = pyo.SolverFactory('gop')
    opt.options['max_iter'] = 200            # or SolverFactory('gop', options={...})
    results = opt.solve(model, tee=True, time_limit=60)
    pyo.assert_optimal_termination(results)
    results.varopt_result                     # the full varopt.Result (user's sense)
    results.varopt_mapping                    # PyomoMapping: names, vars, load(x)

Pyomo's ``timelimit`` keyword is the solver's ``time_limit`` option (``None``: no limit).
``solve(model, **options)`` compiles the model (:func:`varopt.frontends.pyomo_compile.compile_pyomo`),
runs ``varopt.registry.get_solver(name).solve(program, **options)``, writes the solution into
the model's variables (unless ``load_solutions=False`` or there is no solution, e.g. an
infeasible problem, in which case the values are left untouched) and returns a standard
:class:`pyomo.opt.SolverResults`:

* ``results.solver.status`` / ``termination_condition`` from the varopt status:

  ================ ======== =================
  varopt status     status   termination
  ================ ======== =================
  optimal           ok       optimal
  converged         ok       locallyOptimal
  iteration_limit   aborted  maxIterations
  pass_limit        aborted  maxIterations
  time_limit        aborted  maxTimeLimit
  infeasible        warning  infeasible
  unbounded         warning  unbounded
  numerical         warning  other
  error             error    error
  interrupted       aborted  userInterrupt
  ================ ======== =================

  so ``pyomo.environ.check_optimal_termination(results)`` is True exactly for
  ``optimal``/``converged``.
* ``results.problem.lower_bound`` / ``upper_bound``: the bounds the solver proved, in the
  user's objective sense; left at Pyomo's defaults (``-inf``/``inf``) when not proven.
* ``results.problem.sense``, ``name``, ``number_of_variables``, ``number_of_constraints``;
  ``results.solver.name``, ``wallclock_time`` (Pyomo's field; also as ``wall_time``), ``message``,
  ``termination_message``.
* Energy-model solvers (``accepts_binary``: ``exact``, ``meanfield``, ``lbp``, ``trw``, ``ais``):
  the binary variables keep their values; ``results.varopt_marginals`` is
  ``{variable name: P(x = 1)}`` and an import ``Suffix`` named ``marginal`` on the model
  (``model.marginal = Suffix(direction=Suffix.IMPORT)``) receives the same numbers per variable.
* Import suffixes (``model.dual = Suffix(direction=Suffix.IMPORT)``, ``rc``, ...) are emptied when a solution is
  written, as Pyomo's ``model.solutions.load_from`` does: varopt solvers return no multipliers, so ``dual`` is
  empty after the solve rather than holding an earlier solver's values.
* ``results.varopt_result``: the :class:`varopt.result.Result` (objective, bounds, gap,
  history, solver info); ``results.varopt_mapping``: the variable mapping. These are plain
  attributes of the results object (not results sections), so they are not printed by
  ``results.write()``.

Options: the solver's :class:`~varopt.options.OptionSet` becomes the class attribute
``CONFIG`` (a ``pyomo.common.config.ConfigDict``, one ``ConfigValue`` per option whose
domain calls ``Option.validate``), plus Pyomo's usual ``tee`` (sets ``verbose``) and
``load_solutions`` (default True) and ``warmstart`` (default True: the solvers start from the variables' current
values, as they always did; ``False`` ignores them). Unknown options raise
:class:`~varopt.errors.InvalidOptionError` naming the option and listing the valid ones.
Options are merged in this order (later wins): ``SolverFactory(name, **kw)`` /
``options=`` at construction, ``opt.options[...]``, ``solve(..., options={...})``,
``solve(..., **kw)``.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidOptionError

#: varopt status -> (pyomo SolverStatus name, pyomo TerminationCondition name)
STATUS_MAP = {
    "optimal": ("ok", "optimal"),
    "converged": ("ok", "locallyOptimal"),
    "stationary": ("warning", "other"),
    "iteration_limit": ("aborted", "maxIterations"),
    "pass_limit": ("aborted", "maxIterations"),
    "time_limit": ("aborted", "maxTimeLimit"),
    "infeasible": ("warning", "infeasible"),
    "unbounded": ("warning", "unbounded"),
    "numerical": ("warning", "other"),
    "error": ("error", "error"),
    "interrupted": ("aborted", "userInterrupt"),
}

#: statuses whose point is written back into the model
_LOADABLE = ("optimal", "converged", "stationary", "iteration_limit", "pass_limit", "time_limit", "interrupted",
             "numerical")

#: Pyomo-level options accepted besides the solver's own (``keepfiles``, ``symbolic_solver_labels``
#: and ``report_timing`` are generic Pyomo arguments with no effect here: varopt writes no files)
PYOMO_OPTIONS = ("tee", "load_solutions", "warmstart", "keepfiles", "symbolic_solver_labels", "report_timing")


class _OptionDomain:
    """ConfigValue domain that validates through :meth:`varopt.options.Option.validate`."""

    def __init__(self, option):
        self.option = option
        self.__name__ = f"varopt option {option.name!r}"

    def __call__(self, value):
        return self.option.validate(value)

    def domain_name(self):
        d = self.option.domain
        if isinstance(d, tuple):
            return "one of " + ", ".join(map(str, d))
        return getattr(d, "__name__", str(d))


def build_config(solver_cls):
    """The ``ConfigDict`` of a varopt solver class (its OptionSet plus ``tee``/``load_solutions``)."""
    from pyomo.common.config import ConfigDict, ConfigValue

    cfg = ConfigDict(description=f"{solver_cls.name}: {solver_cls.summary}")
    for opt in solver_cls.options:
        cfg.declare(opt.name, ConfigValue(default=opt.default, domain=_OptionDomain(opt),
                                           description=opt.doc, doc=f"{opt.doc} (default {opt.default!r})"))
    cfg.declare("tee", ConfigValue(default=False, domain=bool,
                                   description="stream solver progress to the terminal (sets verbose)"))
    cfg.declare("load_solutions", ConfigValue(default=True, domain=bool,
                                              description="write the solution into the model's variables"))
    cfg.declare("warmstart", ConfigValue(default=True, domain=bool,
                                         description="start from the variables' current values (the default; False: "
                                                     "the solver's own start, as if no variable had a value)"))
    for name in ("keepfiles", "symbolic_solver_labels", "report_timing"):
        cfg.declare(name, ConfigValue(default=False, domain=bool,
                                      description="accepted for compatibility; varopt writes no files"))
    return cfg


class VaroptPyomoSolver:
    """Base of the Pyomo solver classes generated by :func:`register` (see module docstring)."""

    varopt_class = None
    CONFIG = None
    name = ""

    def __init__(self, **kwds):
        from pyomo.common.collections import Bunch

        kwds.pop("solver", None)  # SolverFactory('name:sub') convention; no sub-solvers here
        self.options = Bunch()
        self.options.update(kwds.pop("options", None) or {})
        self.options.update(kwds)
        self.config = self.CONFIG()

    # --- legacy Pyomo solver API --------------------------------------------------------
    def available(self, exception_flag=True):
        return True

    def license_is_valid(self):
        return True

    def version(self):
        from .. import __version__
        return tuple(int(p) for p in __version__.split(".")[:3] if p.isdigit())

    def warm_start_capable(self):
        # the solvers with a starting point start from the variables' current values (warmstart=True, the default)
        return "x0" in self.varopt_class.options.names()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return False

    # --- options ----------------------------------------------------------------------
    def _merged_options(self, kwds):
        opts = dict(self.options)
        opts.update(kwds.pop("options", None) or {})
        opts.update(kwds)
        oset = self.varopt_class.options
        if "timelimit" in opts and "time_limit" in oset.options:
            # Pyomo's own solve() keyword (OptSolver.solve(timelimit=...), honoured by CBC, CPLEX, GLPK); None there
            # means no limit
            if "time_limit" in opts:
                raise InvalidOptionError("options 'timelimit' (Pyomo's name) and 'time_limit' are the same option; "
                                         "pass only one")
            limit = opts.pop("timelimit")
            if limit is not None:
                opts["time_limit"] = limit
        opts = oset.canonical(opts)
        valid = set(oset.names()) | set(PYOMO_OPTIONS)
        unknown = [k for k in opts if k not in valid]
        if unknown:
            raise InvalidOptionError(
                f"unknown option {unknown[0]!r} for solver '{self.name}'; valid options are: "
                f"{', '.join(sorted(valid))}")
        pyomo_level = {k: opts.pop(k) for k in PYOMO_OPTIONS if k in opts}
        config = self.CONFIG(pyomo_level)
        if config.tee and "verbose" in oset.options and "verbose" not in opts:
            opts["verbose"] = True
        validated = oset.validate(opts)  # once per solve; raises InvalidOptionError naming the option
        for k in validated.given:
            config[k] = getattr(validated, k)
        return config, validated

    # --- solve ------------------------------------------------------------------------
    def solve(self, model, **kwds):
        from ..registry import get_solver
        from .pyomo_compile import compile_pyomo

        config, opts = self._merged_options(kwds)
        self.config = config
        if self.varopt_class.accepts_binary:
            from .pyomo_energy import compile_pyomo_energy
            program, mapping = compile_pyomo_energy(model, self.name)
        else:
            program, mapping = compile_pyomo(model)
        if not config.warmstart:
            program.x0 = np.full(program.n, np.nan)   # no variable has a value: the solver's own start
        import sys

        from ..core.run import PROGRESS_STREAM
        # tee and verbose both print where Pyomo's solvers print: stdout (the option text and
        # docs/conventions.md say so; verbose alone used to go to stderr)
        token = PROGRESS_STREAM.set(sys.stdout if config.tee or getattr(opts, "verbose", False) else None)
        try:
            res = get_solver(self.name).solve(program, opts)
        finally:
            PROGRESS_STREAM.reset(token)
        loaded = False
        if config.load_solutions and res.status in _LOADABLE and res.x is not None:
            x = np.asarray(res.x, dtype=float).ravel()
            if x.size == program.n_user and np.all(np.isfinite(x)):
                _clear_import_suffixes(model)
                mapping.load(x)
                loaded = True
        results = self._results(model, program, mapping, res, loaded)
        marg = res.info.get("marginals") if isinstance(res.info, dict) else None
        results.varopt_marginals = marg
        if marg is not None:
            _clear_import_suffixes(model)
            _fill_marginal_suffix(model, mapping, marg)
        return results

    def _results(self, model, program, mapping, res, loaded):
        from pyomo.opt import ProblemSense, SolverResults, SolverStatus, TerminationCondition

        results = SolverResults()
        st, tc = STATUS_MAP[res.status]
        results.solver.name = self.name
        results.solver.status = getattr(SolverStatus, st)
        results.solver.termination_condition = getattr(TerminationCondition, tc)
        results.solver.wall_time = res.wall_time
        results.solver.wallclock_time = res.wall_time   # Pyomo's declared field (the direct interfaces set it)
        results.solver.message = res.message or res.status
        results.solver.termination_message = res.message or res.status
        prob = results.problem
        prob.name = model.name
        prob.sense = ProblemSense.maximize if program.maximize else ProblemSense.minimize
        prob.number_of_objectives = 1
        prob.number_of_variables = program.n_user
        prob.number_of_constraints = len(program.constraints)
        if res.lower_bound is not None and not math.isnan(res.lower_bound):
            prob.lower_bound = float(res.lower_bound)
        if res.upper_bound is not None and not math.isnan(res.upper_bound):
            prob.upper_bound = float(res.upper_bound)
        _fill_solution(results, model, mapping, res, program)
        results.varopt_result = res
        results.varopt_mapping = mapping
        results.varopt_loaded = loaded
        return results


def _fill_solution(results, model, mapping, res, program):
    """``results.solution``: the point (and objective) under a symbol map, so that
    ``load_solutions=False`` followed by ``model.solutions.load_from(results)`` loads it."""
    from pyomo.core.base.label import NumericLabeler
    from pyomo.core.expr.symbol_map import SymbolMap
    from pyomo.environ import Objective
    from pyomo.opt import Solution, SolutionStatus

    if res.status not in _LOADABLE or res.x is None:
        return
    x = np.asarray(res.x, dtype=float).ravel()
    if x.size != program.n_user or not np.all(np.isfinite(x)):
        return
    smap = SymbolMap()
    labeler = NumericLabeler("x")
    soln = Solution()
    soln.status = SolutionStatus.optimal if res.status == "optimal" else SolutionStatus.feasible
    soln.gap = res.gap if res.gap is not None and math.isfinite(res.gap) else None
    for v, val in zip(mapping.vars, x):
        soln.variable[smap.getSymbol(v, labeler)] = {"Value": float(val)}
    objs = list(model.component_data_objects(Objective, active=True))
    if len(objs) == 1 and res.objective is not None:
        soln.objective[smap.getSymbol(objs[0], labeler)] = {"Value": float(res.objective)}
    results.solution.insert(soln)
    results._smap = smap


def _clear_import_suffixes(model):
    """Empty the model's active import suffixes (``dual``, ``rc``, ``slack``, ...) before a solution is written, as
    Pyomo's own ``model.solutions.load_from`` does: varopt returns no multipliers, and a ``dual`` suffix still
    holding another solver's values from an earlier solve would read as this solve's."""
    from pyomo.core.base.suffix import active_import_suffix_generator

    for _, suffix in active_import_suffix_generator(model):
        suffix.clear_all_values()


def _fill_marginal_suffix(model, mapping, marginals):
    """Energy models: P(x = 1) of every variable into the model's import Suffix named ``marginal``
    (declared by the user as ``model.marginal = Suffix(direction=Suffix.IMPORT)``), if any; the
    variables' own values are left as they were (a marginal is not a state)."""
    from pyomo.environ import Suffix

    suf = getattr(model, "marginal", None)
    if isinstance(suf, Suffix) and suf.import_enabled():
        for v, name in zip(mapping.vars, mapping.names):
            if name in marginals:
                suf[v] = marginals[name]


def register(cls):
    """Register the varopt solver class ``cls`` with ``pyomo.environ.SolverFactory`` as ``cls.name``."""
    from pyomo.opt import SolverFactory

    pyomo_cls = type(f"VaroptPyomo_{cls.name}", (VaroptPyomoSolver,), {
        "varopt_class": cls,
        "name": cls.name,
        "CONFIG": build_config(cls),
        "__doc__": f"{cls.summary}\n\nvaropt solver '{cls.name}' through Pyomo.\n\nOptions:\n"
                   + cls.options.doc(),
    })
    SolverFactory.register(cls.name, doc=cls.summary)(pyomo_cls)
    return pyomo_cls
