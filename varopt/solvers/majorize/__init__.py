"""Bound majorization (Jebara & Choromanska, NIPS 2012): importing registers the ``majorize`` solver.

:func:`minimize` runs the same Algorithm 2 over any bound oracle (``theta -> (log z, mu, Sigma)``,
see :mod:`.bound_oracle`), e.g. the junction-tree bound of a chain CRF.
"""
from . import solver  # noqa: F401
from .bound_oracle import minimize

__all__ = ["minimize"]
