"""The oracle protocol: every source of (sampled or exact) gradients, values and curvature.

Every oracle has the same small interface (used by ipsa's solver loop)::

    oracle.n_samples            # terms of a finite sum (None: not a finite sum)
    oracle.exact                # True when gradient() is the exact gradient of f
    oracle.start(rng, batch_size, sampling)
    batch = oracle.next_batch() # None when a stream is exhausted
    g = oracle.gradient(x, batch)           # unbiased estimate of grad f(x), shape (n,)
    oracle.hessian_diag(x, batch)           # optional: estimate of diag Hess f(x)
    oracle.hessian(x, batch)                # optional: estimate of Hess f(x)
    oracle.value(x)                         # optional: f(x) (history), None if unknown

Calling ``gradient`` twice with the same ``batch`` at two points uses the same sample (common
random numbers); the quasi-Newton secant pairs of ipsa (Carbonetto 2009, §2.4) rely on it.
``batch`` is whatever ``next_batch`` returned: an index array for finite sums, a 62-bit seed
for user/sampling oracles (a fresh ``numpy.random.default_rng(batch)`` draws the sample), a
mini-batch object for streams. The same ``batch`` must always identify the same sample.

**Finite sums** (:class:`FiniteSumOracle`): the objective ``f(x) = d(x) + sum_{i=1}^N f_i(x)``
where ``d`` is the deterministic linear + quadratic part of the program objective and the
samples ``f_i`` are the rows of its atom groups and log-sum-exp groups (rows sharing a
``label`` form one sample; without labels every row is its own sample), except a group of squares of
single coordinates, ``lam * sum_j w_j^2`` (a penalty, not data), which joins ``d``. The estimate is

    g = grad d(x) + (N / |B|) sum_{i in B} grad f_i(x),

unbiased for ``grad f(x)`` when ``B`` is a uniform batch (with replacement, ``uniform``) or a
uniformly random subset (``permutation``); ``cyclic`` visits the samples in order (the
on-line setting of §2.5). With ``batch_size >= N`` the batch is the whole sum and ``g`` is exact.
Thus, for ``f = (1/2n) sum (y_i - a_i^T w)^2 + (lambda/n) 1^T x`` and one sample per step,
``g = -a_i (y_i - a_i^T w) + lambda/n`` is the regularised delta rule (2.59)/(2.62).
All batch evaluations are vectorized gathers of the sampled rows (no per-term Python loop).

**User oracle** (:class:`UserOracle`): ``gradient(x, rng) -> g``; ``rng`` is a
``numpy.random.Generator`` seeded per iteration from the solver's seed (so re-evaluation at
another point reuses the same random numbers). Optional attributes ``hessian_diag(x, rng)`` and
``n_terms`` (iterations per pass).

**Streams** (:class:`StreamOracle`): ``StreamOracle(iterable, grad_fn, hess_diag_fn=None,
n_total=None)`` pulls one mini-batch per iteration from ``iterable`` (e.g. chunks read from
disk) and calls ``grad_fn(x, batch)``; the solver stops when the stream is exhausted.
"""
from __future__ import annotations


class Oracle:
    n_samples = None
    exact = False

    def start(self, rng, batch_size, sampling):
        self.rng = rng

    def next_batch(self):
        return int(self.rng.integers(2 ** 62))

    def gradient(self, x, batch):  # pragma: no cover - abstract
        raise NotImplementedError

    def hessian_diag(self, x, batch):
        raise NotImplementedError(f"{type(self).__name__} has no Hessian diagonal")

    def hessian(self, x, batch):
        raise NotImplementedError(f"{type(self).__name__} has no Hessian")

    @property
    def has_hessian_diag(self):
        return False

    @property
    def has_hessian(self):
        return False

    def value(self, x):
        return None
