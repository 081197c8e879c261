"""The public solver registry and the base class of every varopt solver.

A solver is a subclass of :class:`Solver` with a ``name``, a one-line ``summary``, an
:class:`~varopt.options.OptionSet` and a ``_solve(program, opts) -> Result`` that works on
the internal (minimised) program. :func:`register_solver` adds it to the registry, to
Pyomo's ``SolverFactory`` and to ``cvxpy.Problem.register_solve`` in one call, so a
plugin is reachable from every front-end and the CLI.
"""
from __future__ import annotations

import sys
import time

from .options import OptionSet
from .program import Program
from .result import Result

_REGISTRY: dict = {}


class Solver:
    name: str = ""
    summary: str = ""
    options: OptionSet = OptionSet([])

    def solve(self, program: Program, **options) -> Result:
        """Validate ``options``, solve ``program`` and return a :class:`Result` in the user's sense."""
        opts = self.options.validate(options)
        t0 = time.perf_counter()
        res = self._solve(program, opts)
        res.wall_time = time.perf_counter() - t0
        res.solver = self.name
        res.names = list(program.names)
        res.maximize = program.maximize
        res.options = {k: v for k, v in vars(opts).items() if k in options}
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

    def _solve(self, program: Program, opts) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError


def register_solver(cls):
    """Class decorator: register a :class:`Solver` subclass under ``cls.name`` everywhere."""
    if not cls.name:
        raise ValueError("a solver needs a name")
    _REGISTRY[cls.name] = cls
    from .frontends import plugins
    plugins.register_everywhere(cls)
    return cls


def get_solver(name: str) -> Solver:
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown varopt solver {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def registered_solvers() -> dict:
    """Registered solvers: ``{name: Solver subclass}``."""
    return dict(_REGISTRY)


class Progress:
    """Prints progress lines to stderr when ``verbose`` or when stderr is a terminal and the run is long."""

    def __init__(self, verbose: bool, every_s: float = 1.0):
        self.verbose = verbose
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.last = -1e9
        self.every = every_s

    def __call__(self, line: str, force: bool = False):
        now = time.perf_counter()
        if self.verbose or (self.tty and now - self.t0 > 2.0 and (force or now - self.last >= self.every)):
            print(line, file=sys.stderr, flush=True)
            self.last = now


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
