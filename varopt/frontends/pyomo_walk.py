"""Recursive walk from a Pyomo expression tree to a :class:`~.pyomo_terms._Form`.

:class:`_Walker` recognises the term catalogue listed in :mod:`varopt.frontends.pyomo_compile`
without expanding nonlinear structure: sums, negation and scaling; products (affine times
affine -> bilinear/quadratic terms; ``(sum_j a_j x_j + c) * G`` -> the rows of ``G`` with
multiplier ``x_j`` and ``c G``; ``v log(a v) = (a v) log(a v) / a`` -> ``xlogx``); division by
constants and ``sum_k aff_k**2 / aff`` -> ``quad_over_lin``; powers (``aff**2`` -> ``square``,
``c**aff = exp(log(c) aff)``); and unary functions (``exp``, ``log``/``log10`` -> ``neglog``,
``log(c0 + sum_k c_k exp(u_k))`` -> one log-sum-exp group with ``b_k += log c_k``;
``abs(aff)`` -> ``abs``). Squares and ``abs`` of an affine-plus-products expression (a bilinear
residual ``a - w*h``) and ``sqrt(e)`` (``e**0.5``) are lifted with auxiliary variables
(:mod:`varopt.program.lifting`).
Constant sub-expressions (numbers, Params, fixed variables) are evaluated and checked
for NaN/inf.
"""
from __future__ import annotations

import math

from .pyomo_powers import PowerRules
from .pyomo_terms import _MATH, _add_into, _BadData, _expr_str, _Form, _prune, _scaled_exp, _Unsupported, LazyText


class _Leaves:
    """What both Pyomo walkers (this one and the energy-model walker) do at the leaves: numbers
    checked for NaN/inf, constant sub-expressions evaluated, variables given encounter indices.
    Subclasses wrap a number with :meth:`_wrap`."""

    def __init__(self):
        import pyomo.core.expr as E
        from pyomo.core.expr.numvalue import native_numeric_types
        from pyomo.environ import value

        self.E = E
        self.native = native_numeric_types
        self.value = value
        self.index = {}   # id(VarData) -> temporary index (encounter order)
        self.vars = []

    def _wrap(self, val):  # pragma: no cover - abstract
        raise NotImplementedError

    def _const(self, node, val):
        try:
            val = float(val)
        except (TypeError, ValueError) as exc:
            raise _BadData(node, f"is not a number ({exc})") from None
        if not math.isfinite(val):
            raise _BadData(node, f"has the non-finite value {val}")
        return self._wrap(val)

    def _eval(self, node):
        try:
            return self._const(node, self.value(node))
        except _BadData:
            raise
        except Exception as exc:  # uninitialised Param, math domain error, ...
            raise _BadData(node, f"cannot be evaluated ({exc})") from None

    def _var_index(self, v):
        """The index of the unfixed variable ``v``, or None for a fixed one (checked to have a value)."""
        if v.fixed:
            if v.value is None:
                raise _BadData(v, "is fixed but has no value")
            return None
        k = self.index.get(id(v))
        if k is None:
            k = self.index[id(v)] = len(self.vars)
            self.vars.append(v)
        return k


class _Walker(PowerRules, _Leaves):
    """Recursive walker from a Pyomo expression to a :class:`_Form` (powers and divisions:
    :mod:`.pyomo_powers`)."""

    def __init__(self):
        super().__init__()
        self._bounds_init()
        self._handlers = {}
        #: lifted quantities ``(index, kind, defining form, term text)`` (:mod:`varopt.program.lifting`)
        self.aux = []

    def _lift(self, kind, form, node):
        """A new auxiliary index for ``q = form`` (``kind='product'``) or ``t = sqrt(form)``."""
        k = len(self.vars)
        self.vars.append(None)
        self.aux.append((k, kind, form, LazyText(lambda: _expr_str(node))))
        return k

    def _affine_or_lift(self, f, node, what, bounded=False):
        """``f`` as an affine form: its quadratic part (products of variables) replaced by an
        auxiliary variable ``q`` with ``q == quadratic part`` (a bilinear residual ``a - w*h``).

        ``bounded``: the caller needs the interval of ``f`` (a denominator, the base of a fractional or
        negative power, the argument of ``exp``/``log``): ``q`` gets the interval of the products over the
        declared bounds. A polynomial ``f`` with squares (``x**2 + 1``, ``x**3``) is lifted the same way
        (:meth:`polynomial_factor`)."""
        if f.is_affine:
            return f
        if bounded or f.atoms or f.lse:
            g = self.polynomial_factor(f, node)
            if g is not None:
                return g
        if f.atoms or f.lse:
            raise _Unsupported(node, f"{what} of an expression with nonlinear terms other than products "
                                     "of variables and powers of affine expressions is not supported")
        k = self._lift("product", _Form(0.0, quad=dict(f.quad)), node)
        lin = dict(f.lin)
        lin[k] = 1.0
        return _Form(f.const, lin)

    def _wrap(self, val):
        return _Form(val)

    def var(self, v):
        k = self._var_index(v)
        return self._const(v, v.value) if k is None else _Form(0.0, {k: 1.0})

    # --- dispatch -------------------------------------------------------------------
    def walk(self, node):
        if type(node) in self.native:
            return self._const(node, node)
        if not node.is_expression_type():
            if node.is_variable_type():
                return self.var(node)
            return self._eval(node)  # Params, numeric constants
        if node.is_named_expression_type():
            return self.walk(node.expr)
        if not node.is_potentially_variable():
            return self._eval(node)
        h = self._handlers.get(type(node))
        if h is None:
            h = self._handlers[type(node)] = self._lookup(type(node))
        return h(node)

    def _lookup(self, t):
        E = self.E
        table = [
            (E.SumExpression, self.sum),
            (E.NegationExpression, self.neg),
            (E.DivisionExpression, self.div),
            (E.ProductExpression, self.prod),  # includes MonomialTermExpression
            (E.PowExpression, self.pow),
            (E.AbsExpression, self.abs),
            (E.UnaryFunctionExpression, self.unary),
        ]
        for cls, h in table:
            if issubclass(t, cls):
                return h
        return self.unsupported

    def unsupported(self, node):
        # an unsupported operation of constants only (e.g. abs of a fixed variable) is a constant
        args = getattr(node, "args", ())
        try:
            all_const = bool(args) and all(self.walk(a).is_const for a in args)
        except _Unsupported:
            all_const = False
        if all_const:
            return self._eval(node)
        try:
            name = node.getname()
        except (AttributeError, NotImplementedError):  # relational expressions (Expr_if's IF) have no getname()
            name = type(node).__name__
        raise _Unsupported(node, f"the operation '{name}' of variables is not supported")

    # --- operations -----------------------------------------------------------------
    def sum(self, node):
        acc = _Form(0.0)
        native, mono, lin = self.native, self.E.MonomialTermExpression, acc.lin
        for a in node.args:
            ta = type(a)
            if ta in native:
                acc.const += self._const(a, a).const
                continue
            if ta is mono:  # c * x with a number c and a free x: the bulk of large linear rows
                c, v = a.args
                if type(c) in native and not v.fixed and math.isfinite(c):
                    k = self._var_index(v)
                    lin[k] = lin.get(k, 0.0) + float(c)
                    continue
            _add_into(acc, self.walk(a))
        acc.lin = _prune(acc.lin)
        acc.quad = _prune(acc.quad)
        return acc

    def neg(self, node):
        return self.walk(node.args[0]).scaled(-1.0)

    def prod(self, node):
        a0, a1 = node.args
        f, g = self.walk(a0), self.walk(a1)
        if f.is_const:
            return g.scaled(f.const)
        if g.is_const:
            return f.scaled(g.const)
        if f.is_affine and g.is_affine:
            return self._affine_product(f, g)
        ef, eg = _scaled_exp(f), _scaled_exp(g)
        if ef is not None and eg is not None:  # c1 exp(u1) * c2 exp(u2) = c1 c2 exp(u1 + u2)
            lin = dict(ef[1])
            for k, v in eg[1].items():
                lin[k] = lin.get(k, 0.0) + v
            return _Form(0.0, atoms=[("exp", ef[0] * eg[0], _prune(lin), ef[2] + eg[2], -1, None, 0.0)])
        w, h = (f, g) if f.is_affine else (g, f)
        # an auxiliary multiplier (x1/x3 * x6**2: a ratio column times a square) is not a user's block variable:
        # the product is lifted to the bilinear class below, not kept as a weighted convex term
        lifted_w = any(self.vars[k] is None for k in w.lin)
        if w.is_affine and not any(r[4] >= 0 for r in h.atoms) and not (lifted_w and h.atoms):
            return self._times_affine(w, h, node)
        # polynomial factors (x2**2 * x3**3, (x*y) * z**2): each lifted to a bounded column, then bilinear
        pf, pg = self.polynomial_factor(f, node), self.polynomial_factor(g, node)
        if pf is not None and pg is not None:
            return self._affine_product(pf, pg)
        raise _Unsupported(node, "a product of two nonlinear factors is not supported")

    @staticmethod
    def _affine_product(f, g):
        q = {}
        for i, ci in f.lin.items():
            for j, cj in g.lin.items():
                key = (i, j) if i <= j else (j, i)
                q[key] = q.get(key, 0.0) + ci * cj
        lin = {}
        if g.const:
            for k, v in f.lin.items():
                lin[k] = v * g.const
        if f.const:
            for k, v in g.lin.items():
                lin[k] = lin.get(k, 0.0) + v * f.const
        return _Form(f.const * g.const, _prune(lin), _prune(q))

    def _times_affine(self, w, g, node):
        """``w * g`` with ``w`` affine and ``g`` a sum of multiplier-free rows, constants and linear terms."""
        if g.quad:
            if g.atoms or g.lse:
                raise _Unsupported(node, "a variable times a quadratic expression with other nonlinear terms is "
                                         "not supported")
            g = self.lift_products(g, node)  # x1 * x2**3 = x1 * q, q == x2 * (x2**2)
            if g.is_affine:
                return self._affine_product(w, g)
        if any(r[4] >= 0 for r in g.atoms) or any(r[1] >= 0 for r in g.lse):
            raise _Unsupported(node, "a product of three or more nonlinear factors (a variable times a "
                                     "term that already has a variable multiplier) is not supported")
        out = _Form(0.0)
        ent = [(r, lam) for r in g.atoms for lam in (_proportion(w, r),) if lam is not None]
        if ent:
            # (lam u) * (-c log u) = -c lam * u log u: one convex xlogx row of the whole affine u (the entropy
            # (a.x) log(a.x) of Gibbs free energies), not a product of log(u) with every variable of w
            for r, lam in ent:
                out.atoms.append(("xlogx", -r[1] * lam, r[2], r[3], -1, None, 0.0))
            taken = {id(r) for r, _ in ent}
            g = _Form(g.const, g.lin, g.quad, [r for r in g.atoms if id(r) not in taken], g.lse)
        if w.const:
            _add_into(out, g.scaled(w.const))
        lin, quad, atoms, lse = out.lin, out.quad, out.atoms, out.lse
        for j, a in w.lin.items():
            if g.const:
                lin[j] = lin.get(j, 0.0) + a * g.const
            for k, c in g.lin.items():
                key = (j, k) if j <= k else (k, j)
                quad[key] = quad.get(key, 0.0) + a * c
            for r in g.atoms:
                kind, coef, u, ub = r[0], r[1], r[2], r[3]
                if kind == "neglog" and ub == 0.0 and len(u) == 1 and j in u:
                    # x_j * (-log(c x_j)) = -(1/c) * (c x_j) log(c x_j): an xlogx row
                    atoms.append(("xlogx", -coef * a / u[j], u, 0.0, -1, None, 0.0))
                else:
                    atoms.append((kind, coef * a, u, ub, j, r[5], r[6]))
            for r in g.lse:
                lse.append((r[0] * a, j, r[2]))
        out.lin = _prune(lin)
        out.quad = _prune(quad)
        return out

    def div(self, node):
        num, den = node.args
        d = self.walk(den)
        if d.is_const:
            if d.const == 0.0:
                raise _BadData(node, "divides by zero")
            return self.walk(num).scaled(1.0 / d.const)
        f = self.walk(num)
        if f.is_const and f.const == 0.0:  # e.g. (0*x)**2 / y from zero data: exactly 0 where defined
            return _Form(0.0)
        if d.is_affine and f.atoms and not (f.const or f.lin or f.quad or f.lse) \
                and all(r[0] == "square" for r in f.atoms):
            # sum_k c_k w_k u_k^2 / v  ->  quad_over_lin rows sharing the denominator v
            dl, db = d.lin, d.const
            return _Form(0.0, atoms=[("quad_over_lin", r[1], r[2], r[3], r[4], dl, db) for r in f.atoms])
        return self.divide(f, d, node)

    def pow(self, node):
        base, expo = node.args
        e = self.walk(expo)
        if not e.is_const:
            b = self.walk(base)
            if b.is_const and e.is_affine:
                if b.const <= 0.0:
                    raise _Unsupported(node, "c**(expression) needs a positive base c")
                lc = math.log(b.const)
                return _Form(0.0, atoms=[("exp", 1.0, {k: v * lc for k, v in e.lin.items()},
                                          e.const * lc, -1, None, 0.0)])
            raise _Unsupported(node, "powers with a variable exponent are not supported")
        p = e.const
        b = self.walk(base)
        if b.is_const:
            try:
                val = b.const ** p
            except (OverflowError, ZeroDivisionError) as exc:
                raise _BadData(node, f"cannot be evaluated ({exc})") from None
            if isinstance(val, complex):
                raise _BadData(node, "is a complex number")
            return self._const(node, val)
        if p == 0.0:
            return _Form(1.0)
        if p == 1.0:
            return b
        f = self.abs_power(b, p, node)
        if f is not None:
            return f
        if p == 2.0:
            b = self._affine_or_lift(b, node, "the square")
            return _Form(0.0, atoms=[("square", 1.0, b.lin, b.const, -1, None, 0.0)])
        if p == 0.5:
            return self.sqrt(b, node)
        return self.power(b, p, node)

    def sqrt(self, f, node):
        """``sqrt(e)`` -> an auxiliary ``t >= 0`` with ``e - t^2 == 0`` (a norm when ``e`` is a sum
        of squares); ``e`` may hold any supported term."""
        return _Form(0.0, {self._lift("sqrt", f, node): 1.0})

    def abs(self, node):
        """``abs(aff)`` -> an ``abs`` atom row (e.g. a Laplace likelihood); constants are evaluated."""
        f = self.walk(node.args[0])
        if f.is_const:
            return self._eval(node)
        f = self._affine_or_lift(f, node, "abs")
        return _Form(0.0, atoms=[("abs", 1.0, f.lin, f.const, -1, None, 0.0)])

    def unary(self, node):
        name = node.getname()
        if name in ("log", "log10"):
            arg = node.args[0]
            while type(arg) not in self.native and arg.is_expression_type() and arg.is_named_expression_type():
                arg = arg.expr
            if isinstance(arg, (self.E.DivisionExpression, self.E.ProductExpression)) \
                    and not isinstance(arg, self.E.MonomialTermExpression):
                f = self._log_positive(arg)
                if f is not None:
                    return f.scaled(1.0 if name == "log" else 1.0 / math.log(10.0))
        f = self.walk(node.args[0])
        if f.is_const:
            fn = _MATH.get(name)
            if fn is None:
                return self._eval(node)
            try:
                return self._const(node, fn(f.const))
            except (ValueError, OverflowError) as exc:
                raise _BadData(node, f"cannot be evaluated ({exc})") from None
        if name == "sqrt":
            return self.sqrt(f, node)
        if name == "exp":
            # exp(x*y), exp(-x**2): the polynomial argument lifted to one bounded column
            f = self._affine_or_lift(f, node, "exp", bounded=True)
            return _Form(0.0, atoms=[("exp", 1.0, f.lin, f.const, -1, None, 0.0)])
        if name in ("log", "log10"):
            scale = 1.0 if name == "log" else 1.0 / math.log(10.0)
            if f.is_affine:
                return _Form(0.0, atoms=[("neglog", -scale, f.lin, f.const, -1, None, 0.0)])
            lse = self._lse_row(f)
            if lse is not None:
                return lse.scaled(scale)
            g = self.polynomial_factor(f, node)  # log(x**2 + 1): the polynomial lifted to one bounded column
            if g is not None:
                return _Form(0.0, atoms=[("neglog", -scale, g.lin, g.const, -1, None, 0.0)])
            raise _Unsupported(node, f"{name} of an expression that is neither affine nor a positive sum "
                                     "of exponentials of affine expressions is not supported")
        raise _Unsupported(node, f"the function '{name}' of variables is not supported")

    def _log_positive(self, node):
        """``log(node)`` as a form when ``node`` is a product or quotient of factors that are positive wherever
        they are defined: positive constants, ``exp`` of affine expressions and positive sums of them
        (``log(1/(1 + exp(-z)))``, the log-sigmoid, is ``-log(1 + exp(-z))``), and affine factors whose declared
        bounds keep them ``>= 0`` (``log(p*q)`` with ``p, q >= 0`` is ``log p + log q``); None otherwise, so the
        caller's rules and messages apply. Other affine factors are not split: ``log(x*y)`` is defined where
        ``log x + log y`` is not (``x, y < 0``)."""
        if type(node) not in self.native and node.is_expression_type():
            while node.is_named_expression_type():
                node = node.expr
            E = self.E
            if isinstance(node, (E.DivisionExpression, E.ProductExpression)) \
                    and not isinstance(node, E.MonomialTermExpression):
                a, b = (self._log_positive(x) for x in node.args)
                if a is None or b is None:
                    return None
                out = _Form(0.0)
                _add_into(out, a)
                _add_into(out, b.scaled(-1.0) if isinstance(node, E.DivisionExpression) else b)
                out.lin = _prune(out.lin)
                return out
        f = self.walk(node)
        if f.is_const:
            return _Form(math.log(f.const)) if f.const > 0.0 else None
        if f.is_affine and self.interval(f)[0] >= 0.0:
            return _Form(0.0, atoms=[("neglog", -1.0, f.lin, f.const, -1, None, 0.0)])
        return self._lse_row(f)

    @staticmethod
    def _lse_row(f):
        """``log(c0 + sum_k c_k exp(u_k))`` as a form, or None when ``f`` does not have that shape."""
        if f.lin or f.quad or f.lse or f.const < 0.0:
            return None
        if not all(r[0] == "exp" and r[4] < 0 and r[1] >= 0.0 for r in f.atoms):
            return None
        rows = [r for r in f.atoms if r[1] > 0.0]
        if not rows:
            return None
        terms = [(r[2], r[3] + math.log(r[1])) for r in rows]
        if f.const > 0.0:
            terms.append(({}, math.log(f.const)))
        if len(terms) == 1:  # log(c exp(u)) = u + log c
            lin, b = terms[0]
            return _Form(b, dict(lin))
        return _Form(0.0, lse=[(1.0, -1, tuple(terms))])


# --------------------------------------------------------------------------------------
# building program expressions from forms



#: relative mismatch below which ``w`` counts as proportional to ``u`` in ``w log u``: MINLPLib's Gibbs free
#: energies print ``(6.858 * 3.9235 x2 + ...) * log(3.9235 x2 + ...)`` with 15 digits, so the ratios agree to
#: ~1e-15; the term left out, ``(w - lam u) log u``, is below ``1e-12 max|w_k| sum_k |x_k| |log u|``
PROPORTIONAL_RTOL = 1e-12


def _proportion(w, row):
    """``lam`` with ``w == lam * u`` (linear part and constant, to :data:`PROPORTIONAL_RTOL` of the largest
    coefficient of ``w``) when ``row`` is a multiplier-free ``neglog`` row of ``u`` (``-log u``), else None."""
    kind, _, u, ub, mult = row[:5]
    if kind != "neglog" or mult >= 0 or not u or set(w.lin) != set(u):
        return None
    k0 = max(u, key=lambda k: abs(u[k]))
    lam = w.lin[k0] / u[k0]
    scale = max(abs(v) for v in w.lin.values())
    tol = PROPORTIONAL_RTOL * scale
    if any(abs(w.lin[k] - lam * u[k]) > tol for k in u) or abs(w.const - lam * ub) > tol:
        return None
    return lam
