"""varopt: variational inference problems as optimization models.

``import varopt`` registers every implemented solver with Pyomo's ``SolverFactory``
and with ``cvxpy.Problem.register_solve``.
"""
from .errors import InputDataError, InvalidOptionError, ModelStructureError, SolverBugError, VaroptError
from .program import Program
from .registry import Solver, get_solver, register_solver, solvers
from .result import Result
from .frontends import compile_model

import importlib as _importlib

# ``from . import solvers`` would return the registry function of the same name without importing
# the subpackage, so import it explicitly (registers the built-in solvers) and re-bind the function.
_importlib.import_module(f"{__name__}.solvers")
from .registry import solvers  # noqa: E402,F811
from .registry import load_plugins as _load_plugins

_load_plugins()

__version__ = "0.1.0"

__all__ = ["ModelStructureError", "InvalidOptionError", "InputDataError", "SolverBugError", "VaroptError",
           "Program", "Result", "Solver", "register_solver", "get_solver", "solvers", "compile_model"]
