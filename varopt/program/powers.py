r"""The power atom family ``g(u) = s u^p`` of the atom table (:data:`varopt.program.atoms.ATOMS`).

One kernel per exponent ``p`` (kind ``"power(p)"``, :func:`power_kind`), signed so that ``g`` is
convex on its domain (the table's convention for every atom):

==========================  ====================  =================  =========================
exponent                    ``g``                 domain             monotone on the domain
==========================  ====================  =================  =========================
even integer ``p >= 4``     ``u^p``               all ``u``          no (min 0 at ``u = 0``)
other ``p > 1``             ``u^p``               ``u >= 0``         increasing
``0 < p < 1``               ``-u^p``              ``u >= 0``         decreasing
``p < 0``                   ``u^p``               ``u > 0``          decreasing
==========================  ====================  =================  =========================

Derivatives ``g' = s p u^(p-1)``, ``g'' = s p (p-1) u^(p-2)``; ``p (p-1) >= 0`` outside
``(0, 1)`` and ``s = -1`` inside it, so ``g'' >= 0`` on the domain. An odd integer power is convex
only on ``u >= 0`` (and concave on ``u <= 0``: ``u^p = -(-u)^p``), so the front-ends use this
kernel for it only where the declared bounds keep the argument on one side of 0; across 0 they
lift it exactly (:mod:`varopt.frontends.pyomo_powers`). Interval bounds of a convex ``g`` on
``[lo, hi]``: the maximum at an end point, the minimum at the clipped stationary point (``u = 0``
for even ``p``) or the end point given by the monotonicity. Tangent points of the open or singular
domains (``p < 1``: ``g'`` is infinite at 0) are lifted to ``tangent_floor`` (``1e-8``; for ``p < 0`` the point
where ``|g'| = 1e8``, so a tangent stays a row an LP solver takes).
"""
from __future__ import annotations

import re

import numpy as np

from .atoms import AtomKernel

_KIND = re.compile(r"^power\((.+)\)$")


def power_kind(p: float) -> str:
    """The atom kind of ``s u^p`` (``repr`` of the float exponent: ``power(3.0)``, ``power(-1.0)``)."""
    return f"power({float(p)!r})"


def is_even_integer(p: float) -> bool:
    return float(p).is_integer() and int(p) % 2 == 0


def _fmt(p: float) -> str:
    return f"{p:g}"


class Power(AtomKernel):
    """``g(u) = s u^p`` with the sign ``s`` that makes it convex on its domain (module docstring)."""

    def __init__(self, p: float):
        p = float(p)
        if not np.isfinite(p) or p in (0.0, 1.0, 2.0):
            raise ValueError(f"the power atom needs a finite exponent other than 0, 1 and 2 (got {p}); "
                             "u^2 is the 'square' atom")
        self.p = p
        self.kind = power_kind(p)
        self.sign = -1.0 if 0.0 < p < 1.0 else 1.0
        self.even = p > 2.0 and is_even_integer(p)
        if self.even:
            self.domain, self.monotone = (-np.inf, np.inf, False), 0
        elif p > 1.0:
            self.domain, self.monotone = (0.0, np.inf, True), 1
        elif p > 0.0:
            self.domain, self.monotone, self.tangent_floor = (0.0, np.inf, True), -1, 1e-8
        else:
            # g' = p u^(p-1) is -1e16 at u = 1e-8 for p = -1: a tangent there is a row HiGHS rejects (coefficients
            # >= 1e15). The floor is where |g'| = 1e8, the slope of neglog's floor (u = 1e-4 for p = -1)
            self.domain, self.monotone = (0.0, np.inf, False), -1
            self.tangent_floor = max(1e-8, (1e8 / abs(p)) ** (1.0 / (p - 1.0)))
            self.user_open = True  # u**-1 raises at u = 0 in Pyomo
        # -u^p (0 < p < 1) grows sublinearly and u^p (p < 0) decreases along s > 0; the others grow superlinearly
        # or leave the domain on both sides
        self.recession = 1 if p < 1.0 else 0
        self.text = ("-" if self.sign < 0 else "") + "({u})^" + (f"({_fmt(p)})" if p < 0 else _fmt(p))

    def _pow(self, u, q):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.even or q == int(q):
                return np.power(u, q)
            return np.power(np.where(u >= 0, u, np.nan), q)

    def value(self, u):
        u = np.asarray(u, dtype=float)
        out = self.sign * self._pow(u, self.p)
        if not self.even:
            out = np.where(self.in_domain(u), out, np.where(u == 0, np.inf, np.nan))
        return out

    def d1(self, u):
        return self.sign * self.p * self._pow(np.asarray(u, dtype=float), self.p - 1.0)

    def d2(self, u):
        return self.sign * self.p * (self.p - 1.0) * self._pow(np.asarray(u, dtype=float), self.p - 2.0)

    def interval_min(self, lo, hi):
        lo = np.maximum(lo, self.domain[0])
        if self.even:
            m = np.clip(0.0, lo, hi)
        else:
            m = lo if self.monotone > 0 else hi
        with np.errstate(invalid="ignore"):
            v = self.value(m)
        # the decreasing kernels tend to their infimum as u -> inf (0 for p < 0, -inf for 0 < p < 1)
        if self.monotone < 0:
            v = np.where(np.isinf(hi), 0.0 if self.p < 0 else -np.inf, v)
        return v

    def interval_max(self, lo, hi):
        lo = np.maximum(lo, self.domain[0])
        with np.errstate(invalid="ignore"):
            a, b = self.value(lo), self.value(hi)
        if self.monotone < 0:
            return np.where(np.isinf(lo), np.inf, a)
        return np.where(np.isinf(hi) | np.isinf(lo), np.inf, np.maximum(a, b))


    def sublevel(self, th):
        # s u^p <= th on the domain, s u^p convex: |u| <= th^(1/p) (even p), u <= th^(1/p) (p > 1),
        # u >= (-th)^(1/p) (0 < p < 1, s = -1, th < 0), u >= th^(1/p) (p < 0, th > 0)
        from .atoms import _outward
        if not np.isfinite(th):
            return None
        if self.even:
            r = _outward(th ** (1.0 / self.p), 1) if th >= 0 else None
            return None if r is None else (-r, r)
        if self.p > 1.0:
            return (0.0, _outward(th ** (1.0 / self.p), 1)) if th >= 0 else None
        if self.p > 0.0:
            return (_outward((-th) ** (1.0 / self.p), -1), np.inf) if th < 0 else (0.0, np.inf)
        return (_outward(th ** (1.0 / self.p), -1), np.inf) if th > 0 else None


_CACHE: dict = {}


def power_kernel(kind: str):
    """The :class:`Power` kernel of ``kind`` (``"power(p)"``), or None when ``kind`` is not a power."""
    k = _CACHE.get(kind)
    if k is None:
        mo = _KIND.match(kind) if isinstance(kind, str) else None
        if mo is None:
            return None
        try:
            k = Power(float(mo.group(1)))
        except ValueError:
            return None
        if k.kind != kind:  # one spelling per exponent
            return None
        _CACHE[kind] = k
    return k
