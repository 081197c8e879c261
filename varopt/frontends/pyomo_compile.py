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
``abs(aff)``                                      ``abs`` atom row
``log(aff)``, ``log10(aff)``                      ``neglog`` row with coef ``-1`` (``-1/ln 10``)
``log(sum_k c_k exp(aff_k) [+ c0])``, c_k,c0 >= 0 one ``LseGroup`` group, ``b_k += log c_k``,
                                                  a constant row ``log c0`` when ``c0 > 0``;
                                                  ``log(c exp(aff))`` is simplified to
                                                  ``aff + log c``
``sum_k aff_k**2 / aff``                          ``quad_over_lin`` rows ``aff_k**2 / aff``
``(aff + products)**2``, ``abs(aff + products)`` the atom of ``aff + q`` with an auxiliary
                                                  ``q == products`` (``(a - w*h)**2``)
``sqrt(e)``, ``e**0.5``                           an auxiliary ``t >= 0`` with ``e - t^2 == 0``
                                                  (``sqrt(sum_k (a_k - w*h_k)**2)``: a norm)
``v * log(a*v)``, ``log(a*v) * v``                 ``xlogx`` row of ``u = a*v`` (exact identity
                                                  ``v log(a v) = (a v) log(a v) / a``)
``(sum_j a_j x_j + c) * G``                        for every ``j`` the rows of ``G`` with
                                                  multiplier ``x_j`` (coef times ``a_j``), plus
                                                  ``c*G``; ``G`` is a sum of multiplier-free
                                                  atom/lse rows, constants and linear terms
                                                  (``x_j * linear`` becomes bilinear terms)
================================================ ========================================

Everything else (``sin``, ``abs`` of a term other than products, ``x**3``, ``x**0.5``, ``x**y``, ``1/x``,
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

Layout: :mod:`.pyomo_terms` (the intermediate form and its errors), :mod:`.pyomo_walk`
(the recursive walker recognising the catalogue); this module builds the program
expressions from the forms and holds :func:`compile_pyomo` and :class:`PyomoMapping`.
"""
from __future__ import annotations

import math
import sys

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, ModelStructureError
from . import energy_hint
from ..program.atoms import ATOM_KINDS, ATOMS
from ..program import AtomGroup, Constraint, Expression, LseGroup, Program, QuadraticTerms
from ..program.lifting import AuxVariable, defining_body, start_values
from .pyomo_terms import SUPPORTED, _BadData, _expr_str, _Form, _Unsupported, LazyText
from .pyomo_walk import _Walker


# --------------------------------------------------------------------------------------
# building program expressions from forms
# --------------------------------------------------------------------------------------
def _build_expression(f: _Form, perm: np.ndarray, n: int, where: str) -> Expression:
    lin = None
    if f.lin:
        keys = np.fromiter(f.lin.keys(), dtype=np.int64, count=len(f.lin))
        vals = np.fromiter(f.lin.values(), dtype=float, count=len(f.lin))
        lin = (perm[keys], vals)
        if 4 * keys.size > n:  # dense storage costs less than index + value arrays
            lin = np.zeros(n)
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
    # the fixed kinds in table order, then the power family by exponent (a deterministic order)
    for kind in ATOM_KINDS + tuple(sorted(k for k in by_kind if k not in ATOM_KINDS)):
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
    expr.check_finite(where)
    return expr


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


def the_objective(model):
    """The one active objective of ``model`` (a constructed Pyomo model), else ModelStructureError."""
    import pyomo.environ as pyo

    if not isinstance(model, pyo.Block):
        raise ModelStructureError(f"expected a Pyomo model (ConcreteModel or a constructed instance), got "
                                  f"{type(model).__name__}")
    if not model.is_constructed():
        # an AbstractModel has no components' data until create_instance(): it would read as 'no objective'
        raise ModelStructureError(f"model '{model.name}' is an abstract model that has not been constructed: solve "
                                  "model.create_instance(data) (or use a ConcreteModel)")
    objs = list(model.component_data_objects(pyo.Objective, active=True, descend_into=True))
    if len(objs) != 1:
        names = ", ".join(repr(o.name) for o in objs) or "none"
        raise ModelStructureError(f"model '{model.name}' must have exactly one active objective, found "
                                  f"{len(objs)} ({names})")
    return objs[0]


def _refuse_dropped_components(model):
    """Refuse the active components that are constraints but not ``Constraint`` objects: SOS constraints (Pyomo's
    ``Piecewise`` writes SOS2 sets with its default ``pw_repn``) and GDP disjunctions (their constraints sit in
    ``Disjunct`` blocks, which a walk over ``Constraint`` data never enters). Dropping either would solve a
    relaxation of the user's model and report it as the optimum."""
    import pyomo.environ as pyo
    from pyomo.core.base.block import Block

    for sos in model.component_data_objects(pyo.SOSConstraint, active=True, descend_into=True):
        raise ModelStructureError(
            f"model '{model.name}': SOS constraint '{sos.name}' is not supported (Pyomo's Piecewise writes SOS2 "
            "constraints with its default pw_repn='SOS2'; no varopt solver takes them, and dropping it would solve a "
            "relaxation): write the function as an expression (x**2, exp(x), abs(x), ...) or use a MINLP solver")
    try:
        from pyomo.gdp import Disjunct, Disjunction
    except ImportError:  # pragma: no cover - pyomo.gdp ships with Pyomo
        return
    for ctype in (Disjunction, Disjunct):
        for d in model.component_data_objects(ctype, active=True, descend_into=(Block, Disjunct)):
            if ctype is Disjunct and d.indicator_var.fixed and not d.indicator_var.value:
                continue   # a disjunct fixed off (a transformed or deactivated alternative)
            raise ModelStructureError(
                f"model '{model.name}': GDP {ctype.__name__} '{d.name}' is not supported: no varopt solver takes "
                "logical disjunctions (their constraints would be dropped, solving a relaxation), and the "
                "gdp.bigm/gdp.hull transformations introduce binary variables, which the continuous solvers refuse; "
                "use a MINLP solver, or fix the choice and solve each alternative")


def compile_pyomo(model):
    """Compile the active objective and constraints of ``model``; return ``(Program, PyomoMapping)``.

    See the module docstring for the recognised term patterns. The objective is stored
    minimised (negated when the model maximises, with ``program.maximize = True``).
    """
    import pyomo.environ as pyo

    obj = the_objective(model)
    _refuse_dropped_components(model)
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
        fobj = walker.relocate_quad_over_lin(fobj, -np.inf, 0.0, obj.expr)  # minimised: as a <= row
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
            f = walker.relocate_quad_over_lin(_compile_expr(walker, c.body, where_c), lo, hi, c.body)
            fcons.append((c, f, lo, hi))
    finally:
        sys.setrecursionlimit(old_limit)

    # final variable order: declaration order of the model's Var components, then index order
    used = walker.index
    aux_idx = [a[0] for a in walker.aux]
    order = []
    seen = set()
    for v in model.component_data_objects(pyo.Var, descend_into=True):
        k = used.get(id(v))
        if k is not None and id(v) not in seen:
            seen.add(id(v))
            order.append(k)
    if len(order) + len(aux_idx) < len(walker.vars):  # variables declared outside this model: encounter order
        placed = set(order) | set(aux_idx)
        order += [k for k in range(len(walker.vars)) if k not in placed]
    n_user = len(order)
    order = np.asarray(order + aux_idx, dtype=np.int64)  # auxiliary columns last
    n = order.size
    perm = np.empty(n, dtype=np.int64)
    perm[order] = np.arange(n)
    vars_ = [walker.vars[k] for k in order[:n_user].tolist()]

    lb, ub, x0 = np.full(n, -np.inf), np.full(n, np.inf), np.full(n, np.nan)
    for k, v in enumerate(vars_):
        if not v.is_continuous():
            raise ModelStructureError(
                f"variable '{v.name}' has the discrete domain {v.domain}; this solver takes continuous "
                f"variables only (fix the variable or relax its domain){energy_hint()}")
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
    aux = []
    for j, (k, kind, form, text) in enumerate(walker.aux):
        col = int(perm[k])
        where_a = LazyText(lambda kind=kind, text=text: f"{kind} auxiliary variable for '{text}'")
        den = walker.aux_den.get(k)
        den = None if den is None else _build_expression(den, perm, n, where_a)
        aux.append(AuxVariable(col, kind, _build_expression(form, perm, n, where_a), text, f"_aux_{kind}[{j}]_def",
                               den))
        names.append(f"_aux_{kind}[{j}]")
        if kind == "sqrt":
            lb[col] = 0.0
        # interval bounds of the lifted quantity (pyomo_powers): the lifted program is bounded where the user's is
        alo, ahi = walker.aux_bounds.get(k, (-np.inf, np.inf))
        lb[col], ub[col] = max(lb[col], alo), min(ub[col], ahi)
        constraints.append(Constraint(aux[-1].constraint, defining_body(col, kind, aux[-1].definition, den), 0.0, 0.0))
    program = Program(names, lb, ub, objective, constraints, maximize=maximize,
                      objective_name=obj.name, x0=start_values(aux, x0, n_user), aux=aux)
    return program, PyomoMapping(model, vars_, obj, [c for c, *_ in fcons], names[:n_user])
