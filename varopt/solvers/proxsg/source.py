"""Where the smooth part's gradient comes from at iteration ``k``: the program (exact or finite-sum
minibatches of ``S_k`` samples) or an oracle of :mod:`varopt.oracles` asked for ``S_k`` samples.

An oracle that can change its sample size implements ``set_sample_size(S)`` (the Ising oracles
of :mod:`varopt.oracles.ising`: ``S`` chains); finite sums draw batches of ``S`` rows without
replacement (``S >= N``: the exact gradient).
"""
from __future__ import annotations

import numpy as np

from ...errors import InputDataError, InvalidOptionError
from ...oracles import FiniteSumOracle, Oracle, UserOracle
from .schedules import Schedule


class GradientSource:
    """``grad(x, k)``: the smooth part's gradient estimate with ``S_k`` samples (module docstring);
    ``value(x)``: the smooth part's exact value, or None."""

    def __init__(self, smooth, opts, rng):
        self.smooth = smooth
        self.n = smooth.n
        user = opts.oracle
        if user is None:
            self.oracle, self.add = FiniteSumOracle(smooth), None
        else:
            self.oracle = user if isinstance(user, Oracle) else UserOracle(user)
            self.add = smooth if opts.oracle_adds_objective else None
        o = self.oracle
        self.finite = isinstance(o, FiniteSumOracle) and o.n_samples is not None
        self.sampling = opts.sampling
        self.rng = rng
        sized = opts.samples is not None or callable(opts.schedule)
        self.schedule = Schedule(opts.schedule, opts.samples or 1, opts.max_samples) if sized else None
        if self.schedule is not None and not self.finite and not hasattr(o, "set_sample_size"):
            raise InvalidOptionError(
                f"options 'samples'/'schedule': the oracle {type(o).__name__} cannot change its sample size "
                "(it has no set_sample_size(S) method); leave 'samples' unset")
        self._size = None
        if self.finite and self.schedule is None:
            o.start(rng, o.n_samples, "permutation")  # full batch: the exact gradient
        else:
            o.start(rng, 1, self.sampling)
        self.samples_total = 0

    @property
    def exact(self) -> bool:
        """True when every gradient is exact (no sampling at any iteration)."""
        if self.schedule is not None:
            return False
        return bool(self.oracle.exact)

    def size(self, k):
        return None if self.schedule is None else self.schedule.size(k)

    def grad(self, x, k, batch=None):
        """Gradient estimate at ``x`` for iteration ``k``; returns ``(g, batch)`` (the batch can be
        reused at another point: common random numbers)."""
        o = self.oracle
        if batch is None and self.finite and self.schedule is None:
            # every row, weight 1: the smooth part's own gradient (the oracle would gather rows)
            g = self.smooth.gradient(x)
            if not np.isfinite(g).all():
                raise InputDataError(f"proxsg iteration {k}: the gradient of the smooth part is NaN or inf")
            return g, None
        if batch is None:
            S = self.size(k)
            if S is not None:
                if self.finite:
                    if S != self._size:
                        o.start(self.rng, S, self.sampling)
                else:
                    o.set_sample_size(S)
                self._size = S
                self.samples_total += S
            batch = o.next_batch()
        g = np.asarray(o.gradient(x, batch), dtype=float).ravel()
        if g.shape != (self.n,):
            raise InputDataError(f"proxsg iteration {k}: the gradient oracle returned shape {g.shape}, "
                                 f"expected ({self.n},)")
        if not np.isfinite(g).all():
            raise InputDataError(f"proxsg iteration {k}: the gradient oracle returned NaN or inf")
        if self.add is not None:
            g = g + self.add.gradient(x)
        return g, batch

    def value(self, x):
        """The smooth part's value at ``x`` (None when the oracle cannot evaluate it)."""
        if not isinstance(self.oracle, FiniteSumOracle):
            v = self.oracle.value(x)
            if v is None:
                return None
            return float(v) + (self.add.value(x) if self.add is not None else 0.0)
        return float(self.smooth.value(x))

    @property
    def has_hessian(self) -> bool:
        """True when the exact Hessian of the smooth part is available (:meth:`hessian`)."""
        if isinstance(self.oracle, FiniteSumOracle):
            return True
        return bool(getattr(self.oracle, "has_hessian", False))

    def hessian(self, x, idx=None):
        """The smooth part's Hessian at ``x`` as a dense array (proximal Newton, certificates); with
        ``idx`` only its principal submatrix on the variables ``idx`` (formed from those columns
        for the program's own smooth part)."""
        if isinstance(self.oracle, FiniteSumOracle):
            H = self.smooth.hessian(x, dense=True, idx=idx)
        else:
            H = self.oracle.hessian(x, None)
            H = H.toarray() if hasattr(H, "toarray") else np.asarray(H, dtype=float)
            if idx is not None:
                H = H[np.ix_(idx, idx)]
            if self.add is not None:
                H = H + self.smooth.hessian(x, dense=True, idx=idx)
        return 0.5 * (H + H.T)

    def hessian_rank_bound(self):
        """An upper bound on the rank of :meth:`hessian` at every ``x`` (None for an oracle's)."""
        if isinstance(self.oracle, FiniteSumOracle):
            return self.smooth.hessian_rank_bound()
        return None

    def lipschitz_hint(self, x):
        """A Lipschitz estimate of the smooth gradient: the oracle's ``lipschitz`` attribute, else
        the largest Hessian eigenvalue of the program's smooth part at ``x`` (a local estimate, raised
        by backtracking when values are available)."""
        L = getattr(self.oracle, "lipschitz", None)
        if L is not None:
            return float(L)
        if isinstance(self.oracle, FiniteSumOracle) or self.add is not None:
            H = self.smooth.hessian(x)
            if H.nnz and not np.isfinite(H.data).all():
                return None  # overflow at x (a far start): LAPACK would print an error; the gradient check names it
            if H.nnz:
                from scipy.sparse.linalg import eigsh
                try:
                    return float(abs(eigsh(H, k=1, which="LA", return_eigenvectors=False, tol=1e-3)[0])) \
                        if self.n > 2 else float(np.linalg.eigvalsh(H.toarray())[-1])
                except Exception:  # noqa: BLE001 - ARPACK non-convergence: fall back to a norm bound
                    return float(abs(H).sum(axis=1).max())
        return None
