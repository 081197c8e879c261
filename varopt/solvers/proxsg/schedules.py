"""Sample-size schedules ``S_k`` of the biased stochastic proximal methods (Honorio 2012, §3.3).

At iteration ``k = 1, 2, ...`` the gradient oracle is asked for ``S_k`` samples:

=============  =================================  ==========================================
name           ``S_k``                            Honorio 2012, Table 2
=============  =================================  ==========================================
``constant``   ``s0``                             no method converges (the bias stays O(1))
``log``        ``ceil(s0 (1 + log k))``           FBS (basic/robust, r = 1/2) converges
``linear``     ``s0 k``                           PB converges (needs O(k^(1/2+eps)))
``quadratic``  ``s0 k^2``                         PB at rate O(1/K); PA has no guarantee
callable       ``schedule(k)`` (an integer >= 1)  checked at every call
=============  =================================  ==========================================

``max_samples`` caps ``S_k`` (the cap is reported in the result's info).
"""
from __future__ import annotations

import math
import numbers

from ...errors import InvalidOptionError

NAMES = ("constant", "log", "linear", "quadratic")


def schedule_domain(v):
    """Option validator: a schedule name or a callable ``k -> S_k``."""
    if callable(v) or v in NAMES:
        return v
    raise InvalidOptionError(f"option 'schedule' must be one of {list(NAMES)} or a callable k -> S_k "
                             f"(a positive integer), got {v!r}")


class Schedule:
    """``Schedule(kind, s0, cap=None)``; ``size(k)`` is ``S_k`` (validated for callables)."""

    def __init__(self, kind, s0=1, cap=None):
        self.kind, self.s0, self.cap = kind, int(s0), cap
        self.capped = False

    def _raw(self, k):
        if callable(self.kind):
            s = self.kind(k)
            if isinstance(s, bool) or not isinstance(s, numbers.Real) or not math.isfinite(s) \
                    or s != int(s) or s <= 0:
                raise InvalidOptionError(f"option 'schedule': the callable returned {s!r} samples at iteration "
                                         f"{k}; it must return a positive integer")
            return int(s)
        f = {"constant": 1.0, "log": 1.0 + math.log(k), "linear": float(k), "quadratic": float(k) * k}[self.kind]
        return max(1, math.ceil(self.s0 * f - 1e-9))

    def size(self, k: int) -> int:
        s = self._raw(k)
        if self.cap is not None and s > self.cap:
            self.capped = True
            return int(self.cap)
        return s
