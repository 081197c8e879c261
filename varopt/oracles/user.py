"""User callables ``gradient(x, rng)``; the seed in ``batch`` gives common random numbers."""
from __future__ import annotations

import numpy as np

from .protocol import Oracle


class UserOracle(Oracle):
    """Wrap ``gradient(x, rng) -> g`` (a callable or an object with a ``gradient`` method)."""

    def __init__(self, fn):
        self.fn = fn
        self.grad = fn.gradient if hasattr(fn, "gradient") else fn
        if not callable(self.grad):
            raise TypeError("oracle must be callable as gradient(x, rng) or have a gradient(x, rng) method")
        self.hd = getattr(fn, "hessian_diag", None)
        nt = getattr(fn, "n_terms", None)
        self.n_samples = int(nt) if nt is not None else None

    @property
    def has_hessian_diag(self):
        return self.hd is not None

    def gradient(self, x, seed):
        return self.grad(x, np.random.default_rng(seed))

    def hessian_diag(self, x, seed):
        return self.hd(x, np.random.default_rng(seed))
