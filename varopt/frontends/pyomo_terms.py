"""Intermediate form of a Pyomo sub-expression for the Pyomo compiler, and its errors.

A :class:`_Form` is the sum

``const + sum_j lin_j x_j + sum_{(i,j)} quad_ij x_i x_j + sum_r coef_r w_r g_r(u_r[, v_r])
+ sum_g coef_g w_g log sum_k exp(u_gk)``

over temporary variable indices (encounter order of the walk, :mod:`.pyomo_walk`), with
``u = lin . x + b`` affine and ``w`` an optional variable multiplier. Forms are added
(:func:`_add_into`) and scaled (:meth:`_Form.scaled`); rows are shared, never mutated.
:class:`_Unsupported` and :class:`_BadData` carry the offending node up to
:func:`varopt.frontends.pyomo_compile.compile_pyomo`, which names the objective or
constraint in the error it raises.
"""
from __future__ import annotations

import math

SUPPORTED = (
    "supported terms are sums of: constants, linear terms, products of two affine expressions, "
    "(affine)**2, exp(affine), abs(affine), log(affine), squares and abs of affine expressions plus products of "
    "variables ((a - w*h)**2), sqrt(expression), v*log(v), log(sum_k c_k*exp(affine_k) [+ c0]) with "
    "c_k, c0 > 0, sum_k (affine_k)**2/affine, (affine)**p for a constant p (a base >= 0 on its declared bounds "
    "for non-integer p), expression/(denominator) with an affine denominator, or a product, power or atom of affine "
    "expressions, that is sign-definite on its declared bounds, and "
    "any of these atoms multiplied by a variable (e.g. w*(x - mu)**2, w*log(v), w*exp(x))")


class _Unsupported(Exception):
    def __init__(self, node, reason):
        super().__init__(reason)
        self.node = node
        self.reason = reason


class _BadData(Exception):
    def __init__(self, node, reason):
        super().__init__(reason)
        self.node = node
        self.reason = reason


class LazyText:
    """Text computed when first shown: the term text of a lifted column (``str`` of a Pyomo expression, ~0.5 ms
    each) is only read by error messages, and 3,000 of them took 1 s of the compile of a 50 x 60 factorisation's
    objective (docs/gop.md, "Time limits on larger models")."""

    __slots__ = ("_fn", "_s")

    def __init__(self, fn):
        self._fn, self._s = fn, None

    def __str__(self):
        if self._s is None:
            self._s = str(self._fn())
            self._fn = None
        return self._s

    def __format__(self, spec):
        return format(str(self), spec)

    def __repr__(self):
        return repr(str(self))

    def __eq__(self, other):
        return str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def __len__(self):
        return len(str(self))

    def __contains__(self, item):
        return item in str(self)

    def __add__(self, other):
        return str(self) + other

    def __radd__(self, other):
        return other + str(self)


def _expr_str(node) -> str:
    try:
        s = str(node)
    except Exception:  # pragma: no cover - printing must never hide the real error
        s = repr(node)
    return s if len(s) <= 300 else s[:300] + " ..."


# --------------------------------------------------------------------------------------
# intermediate form of a sub-expression
# --------------------------------------------------------------------------------------
# An atom row is a tuple (kind, coef, u_lin: dict, u_b, mult, v_lin: dict|None, v_b)
# meaning coef * w * g(u) (or g(u, v) for quad_over_lin); an lse row is a tuple
# (coef, mult, terms) with terms a tuple of (lin dict, b). Dicts inside rows are never
# mutated after creation, so rows can be shared between forms.

class _Form:
    __slots__ = ("const", "lin", "quad", "atoms", "lse")

    def __init__(self, const=0.0, lin=None, quad=None, atoms=None, lse=None):
        self.const = const
        self.lin = {} if lin is None else lin
        self.quad = {} if quad is None else quad
        self.atoms = [] if atoms is None else atoms
        self.lse = [] if lse is None else lse

    @property
    def is_const(self):
        return not (self.lin or self.quad or self.atoms or self.lse)

    @property
    def is_affine(self):
        return not (self.quad or self.atoms or self.lse)

    def scaled(self, s):
        if s == 0.0:
            return _Form(0.0)
        if s == 1.0:
            return self
        return _Form(self.const * s,
                     {k: v * s for k, v in self.lin.items()},
                     {k: v * s for k, v in self.quad.items()},
                     [(r[0], r[1] * s) + r[2:] for r in self.atoms],
                     [(r[0] * s,) + r[1:] for r in self.lse])


def _prune(d):
    return {k: v for k, v in d.items() if v != 0.0}


def _scaled_exp(f: _Form):
    """``(c, lin, b)`` when ``f`` is exactly ``c exp(lin^T x + b)`` (one ``exp`` row, no multiplier), else None."""
    if f.const or f.lin or f.quad or f.lse or len(f.atoms) != 1:
        return None
    r = f.atoms[0]
    if r[0] != "exp" or r[4] >= 0 or r[5] is not None:
        return None
    return r[1], r[2], r[3]


def _add_into(acc: _Form, f: _Form):
    acc.const += f.const
    lin = acc.lin
    for k, v in f.lin.items():
        lin[k] = lin.get(k, 0.0) + v
    if f.quad:
        q = acc.quad
        for k, v in f.quad.items():
            q[k] = q.get(k, 0.0) + v
    if f.atoms:
        acc.atoms.extend(f.atoms)
    if f.lse:
        acc.lse.extend(f.lse)


_MATH = {"exp": math.exp, "log": math.log, "log10": math.log10, "sqrt": math.sqrt, "sin": math.sin,
         "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
         "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh, "asinh": math.asinh,
         "acosh": math.acosh, "atanh": math.atanh, "ceil": math.ceil, "floor": math.floor}
