"""Compile a Pyomo model into a :class:`~varopt.program.Program`.

The compiler walks the expression trees of the (single) active objective and of every
active constraint with its own recursive walker and recognises the term catalogue of
:mod:`varopt.program.terms`. It does *not* expand nonlinear structure (Pyomo's
``generate_standard_repn`` would turn ``(x - mu)**2`` into ``x**2 - 2 mu x + mu**2`` and
lose the per-sample rows that finite-sum solvers sample and that GOP needs to see as
``phi * (x - mu)**2``).

Recognised patterns (``aff`` is any affine expression of the unfixed variables, ``c``
a constant: numbers, Params, fixed variables, and any expression of those):

================================================ ========================================
Pyomo expression                                  compiled to
================================================ ========================================
``c``, ``c*x``, sums, ``-e``, ``c*e``, ``e/c``     constant, linear part, scaling
``aff * aff``                                     ``QuadraticTerms`` (bilinear and squares)
``aff**2``                                        ``square`` atom row (not expanded)
``aff**1``, ``aff**0``, ``c**aff`` (``c > 0``)     affine, ``1``, ``exp`` atom of ``log(c)*aff``
``exp(aff)``                                      ``exp`` atom row
``log(aff)``, ``log10(aff)``                      ``neglog`` row with coef ``-1`` (``-1/ln 10``)
``log(sum_k c_k exp(aff_k) [+ c0])``, c_k,c0 >= 0 one ``LseGroup`` group, ``b_k += log c_k``,
                                                  a constant row ``log c0`` when ``c0 > 0``;
                                                  ``log(c exp(aff))`` is simplified to
                                                  ``aff + log c``
``sum_k aff_k**2 / aff``                          ``quad_over_lin`` rows ``aff_k**2 / aff``
``v * log(a*v)``, ``log(a*v) * v``                 ``xlogx`` row of ``u = a*v`` (exact identity
                                                  ``v log(a v) = (a v) log(a v) / a``)
``(sum_j a_j x_j + c) * G``                        for every ``j`` the rows of ``G`` with
                                                  multiplier ``x_j`` (coef times ``a_j``), plus
                                                  ``c*G``; ``G`` is a sum of multiplier-free
                                                  atom/lse rows, constants and linear terms
                                                  (``x_j * linear`` becomes bilinear terms)
================================================ ========================================

Everything else (``sin``, ``sqrt``, ``abs``, ``x**3``, ``x**0.5``, ``x**y``, ``1/x``,
``x/y``, ``log`` of a non-affine argument that is not a positive sum of exponentials,
``exp`` of a non-affine argument, products of three variables, products of two
nonlinear terms, ...) raises :class:`~varopt.errors.ModelStructureError` whose message
names the objective or constraint (``objective 'obj'``, ``constraint 'c[2]'``), prints the
offending sub-expression as Pyomo prints it and lists what is supported.
Non-finite data (NaN/inf Params, bounds, fixed values) raises
:class:`~varopt.errors.InputDataError` naming the objective/constraint/variable.

Rows of one kind in one expression are grouped into one :class:`AtomGroup` (and all
log-sum-exp rows into one :class:`LseGroup`) built from COO lists, so evaluation is
vectorized and compilation is linear in the size of the expression trees.

Variables: the unfixed variables that appear in the active objective and constraints,
in component declaration order and then index order (``model.component_data_objects``
order); fixed variables are constants. Names are ``var.name`` (``x[1,2]``, ``mu[0]``).
"""
from __future__ import annotations

import math
import sys

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, ModelStructureError
from ..program.atoms import ATOM_KINDS, ATOMS
from ..program import AtomGroup, Constraint, Expression, LseGroup, Program, QuadraticTerms

SUPPORTED = (
    "supported terms are sums of: constants, linear terms, products of two affine expressions, "
    "(affine)**2, exp(affine), log(affine), v*log(v), log(sum_k c_k*exp(affine_k) [+ c0]) with "
    "c_k, c0 > 0, sum_k (affine_k)**2/affine, and any of these atoms multiplied by a variable "
    "(e.g. w*(x - mu)**2, w*log(v), w*exp(x))")


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


class _Walker:
    """Recursive walker from a Pyomo expression to a :class:`_Form`."""

    def __init__(self):
        import pyomo.core.expr as E
        from pyomo.core.expr.numvalue import native_numeric_types
        from pyomo.environ import value

        self.E = E
        self.native = native_numeric_types
        self.value = value
        self.index = {}   # id(VarData) -> temporary index (encounter order)
        self.vars = []
        self._handlers = {}

    # --- leaves ---------------------------------------------------------------------
    def _const(self, node, val):
        try:
            val = float(val)
        except (TypeError, ValueError) as exc:
            raise _BadData(node, f"is not a number ({exc})") from None
        if not math.isfinite(val):
            raise _BadData(node, f"has the non-finite value {val}")
        return _Form(val)

    def _eval(self, node):
        try:
            return self._const(node, self.value(node))
        except _BadData:
            raise
        except Exception as exc:  # uninitialised Param, math domain error, ...
            raise _BadData(node, f"cannot be evaluated ({exc})") from None

    def var(self, v):
        if v.fixed:
            if v.value is None:
                raise _BadData(v, "is fixed but has no value")
            return self._const(v, v.value)
        k = self.index.get(id(v))
        if k is None:
            k = self.index[id(v)] = len(self.vars)
            self.vars.append(v)
        return _Form(0.0, {k: 1.0})

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
            (E.AbsExpression, self.unsupported),
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
        name = node.getname() if hasattr(node, "getname") else type(node).__name__
        raise _Unsupported(node, f"the operation '{name}' of variables is not supported")

    # --- operations -----------------------------------------------------------------
    def sum(self, node):
        acc = _Form(0.0)
        for a in node.args:
            if type(a) in self.native:
                acc.const += self._const(a, a).const
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
        if f.is_affine:
            return self._times_affine(f, g, node)
        if g.is_affine:
            return self._times_affine(g, f, node)
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
            raise _Unsupported(node, "a variable times a quadratic expression is a cubic term, which is "
                                     "not supported")
        if any(r[4] >= 0 for r in g.atoms) or any(r[1] >= 0 for r in g.lse):
            raise _Unsupported(node, "a product of three or more nonlinear factors (a variable times a "
                                     "term that already has a variable multiplier) is not supported")
        out = _Form(0.0)
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
        raise _Unsupported(node, "division by a non-constant expression is only supported as "
                                 "(affine)**2 / affine")

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
        if p == 2.0 and b.is_affine:
            return _Form(0.0, atoms=[("square", 1.0, b.lin, b.const, -1, None, 0.0)])
        if p == 2.0:
            raise _Unsupported(node, "only the square of an affine expression is supported")
        raise _Unsupported(node, f"the exponent {p:g} is not supported (only (affine)**2, **1 and **0)")

    def unary(self, node):
        name = node.getname()
        f = self.walk(node.args[0])
        if f.is_const:
            fn = _MATH.get(name)
            if fn is None:
                return self._eval(node)
            try:
                return self._const(node, fn(f.const))
            except (ValueError, OverflowError) as exc:
                raise _BadData(node, f"cannot be evaluated ({exc})") from None
        if name == "exp":
            if f.is_affine:
                return _Form(0.0, atoms=[("exp", 1.0, f.lin, f.const, -1, None, 0.0)])
            raise _Unsupported(node, "exp of a non-affine argument is not supported")
        if name in ("log", "log10"):
            scale = 1.0 if name == "log" else 1.0 / math.log(10.0)
            if f.is_affine:
                return _Form(0.0, atoms=[("neglog", -scale, f.lin, f.const, -1, None, 0.0)])
            lse = self._lse_row(f)
            if lse is not None:
                return lse.scaled(scale)
            raise _Unsupported(node, f"{name} of an expression that is neither affine nor a positive sum "
                                     "of exponentials of affine expressions is not supported")
        raise _Unsupported(node, f"the function '{name}' of variables is not supported")

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
# --------------------------------------------------------------------------------------
def _build_expression(f: _Form, perm: np.ndarray, n: int, where: str) -> Expression:
    lin = np.zeros(n)
    if f.lin:
        keys = np.fromiter(f.lin.keys(), dtype=np.int64, count=len(f.lin))
        vals = np.fromiter(f.lin.values(), dtype=float, count=len(f.lin))
        np.add.at(lin, perm[keys], vals)
    quad = None
    if f.quad:
        ij = np.array(list(f.quad.keys()), dtype=np.int64).reshape(-1, 2)
        v = np.fromiter(f.quad.values(), dtype=float, count=len(f.quad))
        quad = QuadraticTerms(perm[ij[:, 0]], perm[ij[:, 1]], v, n)

    def affine_rows(dicts):
        rows, cols, vals = [], [], []
        for r, d in enumerate(dicts):
            if d:
                rows.extend([r] * len(d))
                cols.extend(d.keys())
                vals.extend(d.values())
        cols = perm[np.asarray(cols, dtype=np.int64)] if cols else np.zeros(0, dtype=np.int64)
        return sp.csr_matrix((np.asarray(vals, dtype=float), (np.asarray(rows, dtype=np.int64), cols)),
                             shape=(len(dicts), n))

    by_kind = {}
    for r in f.atoms:
        by_kind.setdefault(r[0], []).append(r)
    atoms = []
    for kind in ATOM_KINDS:
        rows = by_kind.get(kind)
        if not rows:
            continue
        coef = np.array([r[1] for r in rows], dtype=float)
        b = np.array([r[3] for r in rows], dtype=float)
        mult = np.array([r[4] for r in rows], dtype=np.int64)
        mult = np.where(mult >= 0, perm[np.maximum(mult, 0)], -1)
        A = affine_rows([r[2] for r in rows])
        A2 = b2 = None
        if ATOMS[kind].arity == 2:
            A2 = affine_rows([r[5] for r in rows])
            b2 = np.array([r[6] for r in rows], dtype=float)
        atoms.append(AtomGroup(kind, coef, A, b, mult, A2, b2))
    lse = []
    if f.lse:
        terms = [t for r in f.lse for t in r[2]]
        seg = np.repeat(np.arange(len(f.lse)), [len(r[2]) for r in f.lse])
        A = affine_rows([t[0] for t in terms])
        b = np.array([t[1] for t in terms], dtype=float)
        coef = np.array([r[0] for r in f.lse], dtype=float)
        mult = np.array([r[1] for r in f.lse], dtype=np.int64)
        mult = np.where(mult >= 0, perm[np.maximum(mult, 0)], -1)
        lse.append(LseGroup(A, b, seg, coef, mult))
    expr = Expression(n, f.const, lin, quad, atoms, lse)
    _check_finite(expr, where)
    return expr


def _check_finite(e: Expression, where: str):
    arrays = [np.atleast_1d(e.constant), e.linear, e.quadratic.v]
    for g in e.groups():
        arrays += [g.coef, g.A.data, g.b]
        if getattr(g, "A2", None) is not None:
            arrays += [g.A2.data, g.b2]
    for a in arrays:
        if not np.all(np.isfinite(a)):
            raise InputDataError(f"{where}: a coefficient is NaN or infinite after compilation "
                                 "(check the Params/data it is built from)")


# --------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------
class PyomoMapping:
    """Links program variable ``k`` to the Pyomo ``VarData`` ``vars[k]`` (name ``names[k]``)."""

    def __init__(self, model, vars, objective, constraints, names=None):
        self.model = model
        self.vars = list(vars)
        self.names = [v.name for v in self.vars] if names is None else list(names)
        self.objective = objective
        self.constraints = list(constraints)

    def __len__(self):
        return len(self.vars)

    def load(self, x):
        """Write ``x`` (program variable order) into the model's variables."""
        x = np.asarray(x, dtype=float).ravel()
        if x.size != len(self.vars):
            raise ValueError(f"solution has length {x.size}, the model has {len(self.vars)} variables")
        for v, val in zip(self.vars, x.tolist()):
            v.set_value(val, skip_validation=True)

    def values(self) -> np.ndarray:
        """Current values of the model's variables (NaN where unset)."""
        return np.array([np.nan if v.value is None else float(v.value) for v in self.vars])


def _context(kind, comp):
    return f"{kind} '{comp.name}'"


def _compile_expr(walker, expr, where):
    try:
        return walker.walk(expr)
    except _Unsupported as exc:
        raise ModelStructureError(
            f"{where}: unsupported term '{_expr_str(exc.node)}': {exc.reason}; {SUPPORTED}") from None
    except _BadData as exc:
        raise InputDataError(f"{where}: the data '{_expr_str(exc.node)}' {exc.reason}") from None
    except RecursionError:
        raise ModelStructureError(f"{where}: the expression is nested too deeply to compile") from None


def compile_pyomo(model):
    """Compile the active objective and constraints of ``model``; return ``(Program, PyomoMapping)``.

    See the module docstring for the recognised term patterns. The objective is stored
    minimised (negated when the model maximises, with ``program.maximize = True``).
    """
    import pyomo.environ as pyo

    objs = list(model.component_data_objects(pyo.Objective, active=True, descend_into=True))
    if len(objs) != 1:
        names = ", ".join(repr(o.name) for o in objs) or "none"
        raise ModelStructureError(f"model '{model.name}' must have exactly one active objective, found "
                                  f"{len(objs)} ({names})")
    obj = objs[0]
    cons = list(model.component_data_objects(pyo.Constraint, active=True, descend_into=True))

    walker = _Walker()
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20000))
    try:
        where = _context("objective", obj)
        fobj = _compile_expr(walker, obj.expr, where)
        maximize = obj.sense == pyo.maximize
        if maximize:
            fobj = fobj.scaled(-1.0)
        fcons = []
        for c in cons:
            where_c = _context("constraint", c)
            try:
                lo, hi = c.lb, c.ub
            except ValueError as exc:
                raise InputDataError(f"{where_c}: invalid bound ({exc})") from None
            lo = -np.inf if lo is None else float(lo)
            hi = np.inf if hi is None else float(hi)
            if math.isnan(lo) or math.isnan(hi) or lo == np.inf or hi == -np.inf:
                raise InputDataError(f"{where_c}: invalid bounds ({lo}, {hi})")
            fcons.append((c, _compile_expr(walker, c.body, where_c), lo, hi))
    finally:
        sys.setrecursionlimit(old_limit)

    # final variable order: declaration order of the model's Var components, then index order
    used = walker.index
    order = []
    seen = set()
    for v in model.component_data_objects(pyo.Var, descend_into=True):
        k = used.get(id(v))
        if k is not None and id(v) not in seen:
            seen.add(id(v))
            order.append(k)
    if len(order) < len(walker.vars):  # variables declared outside this model: encounter order
        placed = set(order)
        order += [k for k in range(len(walker.vars)) if k not in placed]
    order = np.asarray(order, dtype=np.int64)
    n = order.size
    perm = np.empty(n, dtype=np.int64)
    perm[order] = np.arange(n)
    vars_ = [walker.vars[k] for k in order.tolist()]

    lb, ub, x0 = np.empty(n), np.empty(n), np.empty(n)
    for k, v in enumerate(vars_):
        if not v.is_continuous():
            raise ModelStructureError(
                f"variable '{v.name}' has the discrete domain {v.domain}; varopt solves continuous "
                "problems only (fix the variable or relax its domain)")
        try:
            a, b = v.lb, v.ub
        except ValueError as exc:
            raise InputDataError(f"variable '{v.name}': invalid bound ({exc})") from None
        lb[k] = -np.inf if a is None else float(a)
        ub[k] = np.inf if b is None else float(b)
        if lb[k] > ub[k]:
            raise InputDataError(f"variable '{v.name}': lower bound {lb[k]} exceeds upper bound {ub[k]}")
        val = v.value
        x0[k] = np.nan if val is None else float(val)

    objective = _build_expression(fobj, perm, n, _context("objective", obj))
    constraints = [Constraint(c.name, _build_expression(f, perm, n, _context("constraint", c)), lo, hi)
                   for c, f, lo, hi in fcons]
    names = [v.name for v in vars_]
    program = Program(names, lb, ub, objective, constraints, maximize=maximize,
                      objective_name=obj.name, x0=x0)
    return program, PyomoMapping(model, vars_, obj, [c for c, *_ in fcons], names)
