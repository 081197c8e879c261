"""KL-proximal variational inference (Khan, Baque, Fleuret & Fua 2015): importing registers ``klprox``.

:func:`likelihood_view` splits a compiled negative log joint into a Gaussian prior and likelihood
terms of 1-D predictors; :mod:`.expectations` holds their Gaussian expectations.
"""
from . import solver  # noqa: F401
from .expectations import family_table
from .view import likelihood_view

__all__ = ["family_table", "likelihood_view"]
