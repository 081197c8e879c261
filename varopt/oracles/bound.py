r"""Bound oracles: log-partition functions with a quadratic upper bound (curvature sources).

**Protocol.** A *bound oracle* is a callable, or an object with a method ``partition_bound``,

    oracle(theta, want_sigma) -> (log_z, mu, Sigma)

returning ``log Z(theta)`` (a float; a positively weighted sum of log-partition functions is fine),
its gradient ``mu = grad log Z(theta)`` (length ``n``) and, when ``want_sigma``, a symmetric PSD
``Sigma`` (``n x n``, dense or scipy sparse; may be None otherwise) such that for every ``D``

    log Z(theta + D) <= log_z + D^T mu + 1/2 D^T Sigma D

(Jebara & Choromanska 2012, Theorem 1, after taking logs). The ``majorize`` solver runs
Algorithm 2 over any bound oracle (:func:`varopt.solvers.majorize.bound_oracle.minimize`); the
junction-tree bound of :class:`varopt.estimators.crf.ChainCRF` is one.

:class:`BoundOracle` checks what an oracle returns (:meth:`BoundOracle.bound`) and makes it a
gradient oracle of the common protocol (:mod:`.protocol`) as well: ``gradient(theta, batch)`` is the
exact ``mu`` (``exact = True``, the batch is ignored) and ``value(theta)`` is ``log Z(theta)``, so the
same object serves the majorizer and the gradient-driven solvers.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, InvalidOptionError
from .protocol import Oracle


class BoundOracle(Oracle):
    """``BoundOracle(oracle, n)``: a checked view of a bound oracle (see the module docstring)."""

    exact = True

    def __init__(self, oracle, n: int):
        self.fn = getattr(oracle, "partition_bound", oracle)
        if not callable(self.fn):
            raise InvalidOptionError("the bound oracle must be callable as oracle(theta, want_sigma) or have a "
                                     "method partition_bound(theta, want_sigma)")
        self.n = int(n)

    def bound(self, theta, want_sigma: bool):
        """``(log_z, mu, Sigma or None)`` at ``theta``, checked: finite, the right sizes, ``Sigma`` dense."""
        n = self.n
        logz, mu, sig = self.fn(theta, want_sigma)
        mu = np.asarray(mu, dtype=float).ravel()
        if mu.size != n:
            raise InputDataError(f"the bound oracle returned mu of length {mu.size}, theta has {n}")
        if not np.isfinite(logz) or not np.all(np.isfinite(mu)):
            raise InputDataError(f"the bound oracle returned a non-finite log z or mu at theta (log z = {logz})")
        if want_sigma:
            sig = sig.toarray() if sp.issparse(sig) else np.asarray(sig, dtype=float)
            if sig.shape != (n, n) or not np.all(np.isfinite(sig)):
                raise InputDataError(f"the bound oracle's Sigma must be a finite {n} x {n} matrix")
        return float(logz), mu, sig if want_sigma else None

    def gradient(self, x, batch=None):
        return self.bound(x, False)[1]

    def value(self, x):
        return self.bound(x, False)[0]
