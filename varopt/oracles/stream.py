"""Mini-batches pulled from an iterable (one per iteration), e.g. chunks read from disk."""
from __future__ import annotations

from .protocol import Oracle


class StreamOracle(Oracle):
    """Mini-batches from an iterable; ``grad_fn(x, batch)`` returns the gradient estimate.

    ``grad_fn`` must return an unbiased estimate of the gradient of the objective being
    minimised (scale it yourself, e.g. ``(N/|batch|) sum`` for a finite sum of ``N`` terms, or
    the per-example gradient for an on-line average loss). ``hess_diag_fn(x, batch)`` (optional)
    estimates the Hessian diagonal (for ``hessian='diagonal'``). ``n_total`` (optional) is the
    number of batches in one pass, so that the ``passes`` option is meaningful.
    """

    def __init__(self, iterable, grad_fn, hess_diag_fn=None, n_total=None):
        self.iterable = iterable
        self.grad_fn = grad_fn
        self.hd = hess_diag_fn
        self.n_samples = n_total
        self.it = None
        self.exhausted = False

    def start(self, rng, batch_size, sampling):
        self.rng = rng
        self.it = iter(self.iterable)

    @property
    def has_hessian_diag(self):
        return self.hd is not None

    def next_batch(self):
        try:
            return next(self.it)
        except StopIteration:
            self.exhausted = True
            return None

    def gradient(self, x, batch):
        return self.grad_fn(x, batch)

    def hessian_diag(self, x, batch):
        return self.hd(x, batch)
