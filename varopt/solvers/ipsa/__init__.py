"""Interior-point stochastic approximation (solver ``ipsa``), Carbonetto (2009) ch. 2.

See :mod:`.solver` for the algorithm, :mod:`varopt.oracles` for gradient oracles (finite sums of
program rows, user oracles, :class:`StreamOracle`) and ``docs/ipsa.md`` for the derivations.
"""
from ...oracles import FiniteSumOracle, Oracle, StreamOracle, UserOracle
from .divergence import DivergedWarning
from .solver import IpsaOracleError, IpsaSolver, run_ipsa

__all__ = ["IpsaSolver", "IpsaOracleError", "DivergedWarning", "run_ipsa", "Oracle", "FiniteSumOracle", "StreamOracle", "UserOracle"]
