"""GOP: certified global optimization of biconvex programs (seed 004). Importing registers ``gop``."""
from . import solver  # noqa: F401  (registers the solver)
from .partition import analyze  # noqa: F401
