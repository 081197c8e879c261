r"""Powers ``(affine)**p`` and divisions by non-constant expressions in the Pyomo walker.

Exact rewrites (Floudas & Visweswaran 1990 certify bilinear programs; every rewrite here ends in
that class or in a convex atom of :mod:`varopt.program.powers`), with ``u`` affine and its interval
``[lo, hi]`` from the declared bounds (interval arithmetic over the variables and earlier auxiliary
columns):

===================================  ==========================================================
term                                 compiled as
===================================  ==========================================================
``u**n``, integer ``n >= 3``         ``q_2 = u^2`` (an auxiliary column and its defining row),
                                     ``q_{2k} = q_k^2``, ``q_{k+1} = u q_k``; even ``n``:
                                     the ``square`` atom of ``q_{n/2}``, odd ``n``: ``u q_{n-1}``
``u**(k + 1/2)``, ``k >= 1``         ``s = sqrt(u)`` (needs ``lo >= 0``), then ``u^k s``
``u**-n``, ``u**-(k + 1/2)``         ``r = 1/u`` (a ``ratio`` column, ``r u == 1``; needs ``u``
                                     sign-definite), then ``r**n`` / ``r**(k + 1/2)`` as above
other real ``p``                     the convex ``power(p)`` atom ``s u^p`` (needs ``lo >= 0``,
                                     ``lo > 0`` for ``p < 0``)
``c / u``, ``v / u`` (``v`` affine)  ``t`` with ``t u - v == 0`` (a ``ratio`` column; needs
                                     ``u`` sign-definite on its bounds)
``e / u`` (``e`` nonlinear)          ``e * r`` with ``r = 1/u``
``e / d`` (``d`` nonlinear: ``x*y``,  ``d`` lifted whole to a column ``q == d`` with ``d``'s interval
``y**0.67``, ``y**0.71 * z``)         (:meth:`PowerRules.form_interval`), then ``e / q`` as above
``abs(u)**p``, ``p > 0``             ``u**p`` for an even integer ``p``; else the ``power(p)`` atom of
                                     ``a = |u|`` (``+-u`` where the bounds fix the sign of ``u``, else a
                                     ``sqrt`` column ``a = sqrt(u^2)``)
===================================  ==========================================================

Every auxiliary column gets the interval bounds of the quantity it stands for, so the lifted
program is bounded where the user's is. A domain the bounds do not imply is refused with a
message that names the term and the bound to declare.
"""
from __future__ import annotations

import math

import numpy as np

from ..program.atoms import ATOMS
from ..program.aux_bounds import mul_interval as _mul_interval, ratio_interval as _ratio_interval
from ..program.powers import Power, power_kind
from .pyomo_terms import _add_into, _Form, _prune, _Unsupported


def _key(f):
    """A hashable key of the affine form ``f``."""
    return f.const, tuple(sorted(f.lin.items()))


def _power_interval(lo, hi, n):
    """Interval of ``u^n`` (integer ``n >= 2``) over ``[lo, hi]``."""
    if n % 2 == 0:
        a, b = abs(lo), abs(hi)
        top = max(a, b) ** n if math.isfinite(max(a, b)) else math.inf
        bottom = 0.0 if lo <= 0 <= hi else min(a, b) ** n
        return bottom, top
    f = (lambda v: v ** n if math.isfinite(v) else v)
    return f(lo), f(hi)


class PowerRules:
    """Mixin of :class:`~.pyomo_walk._Walker`: the rules of the module docstring."""

    def _bounds_init(self):
        #: auxiliary index -> (lo, hi) interval of the quantity it stands for
        self.aux_bounds = {}
        #: ratio auxiliary index -> its denominator form
        self.aux_den = {}
        #: (kind, operands) -> the lifted form: ``x**3`` and ``x**4`` share ``q = x**2``, a ratio written in
        #: several rows (``x1/(x1 + 0.48 x2)``) is one column
        self._memo = {}

    def interval(self, f):
        """Interval of the affine form ``f`` over the declared bounds (``-inf``/``inf`` ends)."""
        lo = hi = f.const
        for k, c in f.lin.items():
            v = self.vars[k]
            if v is None:
                a, b = self.aux_bounds.get(k, (-math.inf, math.inf))
            else:
                a = -math.inf if v.lb is None else float(v.lb)
                b = math.inf if v.ub is None else float(v.ub)
            if c < 0:
                a, b = b, a
            lo += c * a
            hi += c * b
        return lo, hi

    def quad_interval(self, quad):
        """Interval of ``sum v_ij x_i x_j`` over the declared bounds (term by term)."""
        lo = hi = 0.0
        for (i, j), v in quad.items():
            il, ih = self.interval(_Form(0.0, {i: 1.0}))
            if i == j:
                tl, th = _power_interval(il, ih, 2)
            else:
                tl, th = _mul_interval(il, ih, *self.interval(_Form(0.0, {j: 1.0})))
            tl, th = (v * tl, v * th) if v > 0 else (v * th, v * tl)
            lo, hi = lo + tl, hi + th
        return lo, hi

    def lift_products(self, g, node):
        """``g`` with its products of variables replaced by one bounded auxiliary column ``q == products``, so a
        variable times ``g`` (``x1 * x2**3``) stays bilinear."""
        if not g.quad:
            return g
        q = self._bounded_lift("product", _Form(0.0, quad=dict(g.quad)), node, *self.quad_interval(g.quad))
        lin = dict(g.lin)
        (k, c), = q.lin.items()
        lin[k] = c
        return _Form(g.const, lin, None, list(g.atoms), list(g.lse))

    def polynomial_factor(self, f, node):
        """An affine form equal to the polynomial factor ``f`` of a product (``x2**2`` in ``x2**2 * x3**3``):
        ``f`` itself when affine, its products of variables (squares expanded) lifted to one bounded column
        otherwise; None when ``f`` holds other nonlinear terms."""
        if f.is_affine:
            return f
        if f.lse or any(r[0] != "square" for r in f.atoms):
            return None
        g = _Form(f.const, dict(f.lin), dict(f.quad))
        for r in f.atoms:
            u = _Form(r[3], r[2])
            if r[4] >= 0:  # c w (a^T x + b)^2 = c w q with q == (a^T x + b)^2
                _add_into(g, self._affine_product(_Form(0.0, {r[4]: 1.0}), self.lift_power(u, 2, node)).scaled(r[1]))
            else:  # c (a^T x + b)^2 = c (a^T x)^2 + 2 c b a^T x + c b^2
                _add_into(g, self._affine_product(u, u).scaled(r[1]))
        g.lin, g.quad = _prune(g.lin), _prune(g.quad)
        return self.lift_products(g, node)

    def _bounded_lift(self, kind, form, node, lo, hi, den=None):
        k = self._lift(kind, form, node)
        self.aux_bounds[k] = (lo, hi)
        if den is not None:
            self.aux_den[k] = den
        return _Form(0.0, {k: 1.0})

    # ------------------------------------------------------------------ powers
    def lift_power(self, u, n, node):
        """An affine form (one auxiliary column, or ``u`` itself for ``n = 1``) equal to ``u^n``."""
        if n == 1:
            return u
        key = ("power", _key(u), n)
        if key not in self._memo:
            self._memo[key] = self._lift_power(u, n, node)
        return self._memo[key]

    def _lift_power(self, u, n, node):
        lo, hi = self.interval(u)
        if n % 2 == 0:
            w = self.lift_power(u, n // 2, node)
            definition = self._affine_product(w, w)
        else:
            definition = self._affine_product(u, self.lift_power(u, n - 1, node))
        return self._bounded_lift("product", definition, node, *_power_interval(lo, hi, n))

    def integer_power(self, u, n, node):
        """The form of ``u^n`` for an integer ``n >= 2``."""
        if n % 2 == 0:
            w = self.lift_power(u, n // 2, node)
            return _Form(0.0, atoms=[("square", 1.0, w.lin, w.const, -1, None, 0.0)])
        return self._affine_product(u, self.lift_power(u, n - 1, node))

    def reciprocal(self, u, node):
        return self.ratio(_Form(1.0), u, node)

    def power(self, b, p, node):
        """``b**p`` for a constant ``p`` other than 0, 1, 2 and 0.5 (those keep their own rules)."""
        # (a fractional or negative power needs the base's interval: a bounded column for products in it)
        u = self._affine_or_lift(b, node, "the power", bounded=not (float(p).is_integer() and p > 0))
        lo = self.interval(u)[0]
        if float(p).is_integer():
            n = int(p)
            if n > 0:
                return self.integer_power(u, n, node)
            r = self.reciprocal(u, node)
            return r if n == -1 else self.integer_power(r, -n, node)
        twice = 2.0 * p
        if twice.is_integer():
            k = int(abs(twice)) // 2  # |p| = k + 1/2
            # a half-integer power needs a base >= 0 (> 0 for p < 0: u < 0 makes 1/u sign-definite but its
            # square root undefined)
            self._require_lower(node, p, lo, strict=p < 0)
            base = self.reciprocal(u, node) if p < 0 else u
            blo, bhi = self.interval(base)
            s = self._bounded_lift("sqrt", base, node, math.sqrt(max(blo, 0.0)),
                                   math.sqrt(bhi) if math.isfinite(bhi) else math.inf)
            return s if k == 0 else self._affine_product(self.lift_power(base, k, node), s)
        self._require_lower(node, p, lo, strict=p < 0)
        kern = Power(p)
        return _Form(0.0, atoms=[(power_kind(p), kern.sign, u.lin, u.const, -1, None, 0.0)])

    def abs_power(self, b, p, node):
        """``c |u|**p`` (``b`` one ``abs`` atom ``c |u|``, ``c > 0``, ``p > 0``) as the power atom of ``a = |u|`` (``u`` or
        ``-u`` where the bounds give ``u`` one sign, else a ``sqrt`` column ``a = sqrt(u^2)``, CVXPY's p-norm
        entries): ``c^p a^p`` is exact, and convex for ``p >= 1`` (an even integer ``p`` is the atom ``u^p`` itself).
        None when ``b`` is not of that form."""
        if not (len(b.atoms) == 1 and not (b.lin or b.quad or b.lse) and b.const == 0.0 and p > 0):
            return None
        kind, c, lin, const, mult = b.atoms[0][:5]
        if kind != "abs" or mult >= 0 or not c > 0:
            return None
        u = _Form(const, dict(lin))
        lo, hi = self.interval(u)
        if float(p).is_integer() and int(p) % 2 == 0:
            # |u|^p = u^p: the square, or the even power atom (convex on every u; not the tree of product columns)
            kind = "square" if p == 2 else power_kind(p)
            return _Form(0.0, atoms=[(kind, c ** p, u.lin, u.const, -1, None, 0.0)])
        if lo >= 0 or hi <= 0:
            a = u if lo >= 0 else u.scaled(-1.0)
        else:
            square = _Form(0.0, atoms=[("square", 1.0, u.lin, u.const, -1, None, 0.0)])
            a = self._bounded_lift("sqrt", square, node, 0.0, max(-lo, hi))
        if p == 1.0:
            return a.scaled(c)
        kern = Power(p)
        return _Form(0.0, atoms=[(power_kind(p), kern.sign * c ** p, a.lin, a.const, -1, None, 0.0)])

    def _require_lower(self, node, p, lo, strict):
        if lo > 0 or (lo == 0 and not strict):
            return
        need = "> 0" if strict else ">= 0"
        raise _Unsupported(node, f"the power with exponent {p:g} is defined (and convex) for a base {need}, but the "
                                 f"declared bounds give the base the lower end {lo:g}; declare bounds that keep the "
                                 f"base {need} (a lower bound on its variables)")

    # ------------------------------------------------------------------ terms in a nonconvex position
    def relocate_quad_over_lin(self, f, lo, hi, node):
        """``f`` with every ``c u^2/v`` row that is not convex in its position (a negative coefficient in the
        objective or a ``<=`` row, a positive one in a ``>=`` row, any in an equality or range row: ex7_2_1's
        ``... - 0.03762 x6^2/x5 <= 1``) replaced by ``c t`` with the ratio column ``t v == q``, ``q == u^2``
        (the spatial tree has no ``quad_over_lin`` relaxation; the bilinear rows it has). Rows whose ``v`` the
        bounds do not keep positive stay as they are (and are refused downstream, as before)."""
        if not any(r[0] == "quad_over_lin" for r in f.atoms):
            return f
        keep, out = [], _Form(f.const, dict(f.lin), dict(f.quad), None, list(f.lse))
        for r in f.atoms:
            c = r[1]
            convex = (c > 0 and not math.isfinite(lo)) or (c < 0 and not math.isfinite(hi))
            if r[0] != "quad_over_lin" or convex:
                keep.append(r)
                continue
            v = _Form(r[6], r[5])
            if not self.interval(v)[0] > 0:
                keep.append(r)
                continue
            t = self.ratio(self.lift_power(_Form(r[3], r[2]), 2, node), v, node)
            if r[4] >= 0:
                t = self._affine_product(_Form(0.0, {r[4]: 1.0}), t)
            _add_into(out, t.scaled(c))
        out.atoms = keep
        out.lin, out.quad = _prune(out.lin), _prune(out.quad)
        return out

    # ------------------------------------------------------------------ divisions
    def ratio(self, num, den, node):
        """``t = num / den`` (both affine) as a ``ratio`` column with ``t den - num == 0``."""
        dlo, dhi = self.interval(den)
        if not (dlo > 0 or dhi < 0):
            raise _Unsupported(node, f"division by an expression that may be 0 or change sign: its declared bounds "
                                     f"give it the range [{dlo:g}, {dhi:g}]; declare bounds that keep the "
                                     "denominator > 0 (or < 0)")
        key = ("ratio", _key(num), _key(den))
        if key not in self._memo:
            nlo, nhi = self.interval(num)
            self._memo[key] = self._bounded_lift("ratio", num, node, *_ratio_interval(nlo, nhi, dlo, dhi), den=den)
        return self._memo[key]

    def form_interval(self, f):
        """Interval of the form ``f`` over the declared bounds and the intervals of earlier auxiliary columns
        (term by term; products, atom rows through their kernels' extremes, a multiplier's interval times its
        row's); ``(-inf, inf)`` for log-sum-exp and two-argument rows."""
        if f.lse or any(r[5] is not None for r in f.atoms):
            return -math.inf, math.inf
        lo, hi = self.interval(_Form(f.const, f.lin))
        ql, qh = self.quad_interval(f.quad)
        lo, hi = lo + ql, hi + qh
        for kind, c, u, b, mult, _, _ in f.atoms:
            ul, uh = self.interval(_Form(b, u))
            kern = ATOMS[kind]
            gl = float(kern.interval_min(np.array(ul), np.array(uh)))
            gh = float(kern.interval_max(np.array(ul), np.array(uh)))
            if mult >= 0:
                gl, gh = _mul_interval(*self.interval(_Form(0.0, {mult: 1.0})), gl, gh)
            tl, th = (c * gl, c * gh) if c > 0 else (c * gh, c * gl)
            lo, hi = lo + tl, hi + th
        return (lo, hi) if lo == lo and hi == hi else (-math.inf, math.inf)

    def divide(self, f, d, node):
        """``f / d`` for a non-constant ``d`` (the ``quad_over_lin`` rule has been tried first). A nonlinear ``d`` is
        first lifted whole to one auxiliary column with ``d``'s interval over the declared bounds, so the ratio's sign
        test sees the range the bounds give ``d``: products and polynomials (``x1*x6``, ``x**2 + 1``) by
        :meth:`_affine_or_lift`, atoms and powers (``x7**0.67``, ``x3**0.71 * x5``) by :meth:`form_interval`."""
        if not d.is_affine and d.atoms:
            if d.lse or any(r[5] is not None for r in d.atoms):
                raise _Unsupported(node, "the denominator of an expression with nonlinear terms other than "
                                         "products of variables, atoms and powers is not supported")
            d = self._bounded_lift("product", d, node, *self.form_interval(d))
        d = self._affine_or_lift(d, node, "the denominator", bounded=True)
        if f.is_affine:
            return self.ratio(f, d, node)
        if not (f.atoms or f.lse):
            return self.ratio(self._affine_or_lift(f, node, "the numerator"), d, node)
        return self._times_affine(self.reciprocal(d, node), f, node)
