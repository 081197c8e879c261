"""varopt: variational inference problems as optimization models.

``import varopt`` registers every implemented solver with Pyomo's ``SolverFactory``
and with ``cvxpy.Problem.register_solve``.
"""
from .errors import InputDataError, InvalidOptionError, ModelStructureError, SolverBugError, VaroptError
from .program import Program
from .registry import Solver, get_solver, register_solver, registered_solvers
from .result import Result
from .frontends import compile_model
from .frontends import plugins as _frontend_plugins

_frontend_plugins.install()  # the Pyomo and CVXPY adapters subscribe to the registry
from . import solvers  # noqa: E402,F401  (the subpackage: importing it registers the built-in solvers)
from .registry import load_plugins as _load_plugins

_load_plugins()

__version__ = "0.1.0"

__all__ = ["ModelStructureError", "InvalidOptionError", "InputDataError", "SolverBugError", "VaroptError",
           "Program", "Result", "Solver", "register_solver", "get_solver", "registered_solvers", "compile_model"]
