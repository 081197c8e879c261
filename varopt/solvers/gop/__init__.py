"""GOP: certified global optimization of biconvex programs (Saddiki, Trapp & Flaherty 2017). Importing registers ``gop``."""
from . import solver  # noqa: F401  (registers the solver)
from .partition import analyze  # noqa: F401
