"""Bound majorization (Jebara & Choromanska, NIPS 2012): importing registers the ``majorize`` solver."""
from . import solver  # noqa: F401
