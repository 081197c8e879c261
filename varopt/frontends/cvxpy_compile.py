"""Compile a CVXPY problem into a :class:`~varopt.program.Program` (vectorized tracer).

The compiler walks the CVXPY expression tree once. Every node becomes a :class:`_Node`:
an array-valued function of the program variables ``x`` (``n`` entries) with ``m``
entries, stored in CVXPY's column-major (``'F'``) flattening order, of the form

``node(x)_e = c_e + A_e x + sum_k Q_{e,k} x_{i_k} x_{j_k}
             + sum_r W_{e,r} w_r g_r(u_r(x)) + sum_g V_{e,g} w_g lse_g(x)``

* ``A`` (``m x n``) sparse; quadratic terms ``x_{i_k} x_{j_k}`` mixed into the entries by
  sparse weights ``Q`` (``m x T``);
* atom rows ``w_r g(u_r)``, ``u_r = A^{row}_r x + b_r`` (one of the catalogue kinds of
  :mod:`varopt.program.terms`, optional multiplier ``w_r = x[mult_r]``), mixed into the
  entries by the sparse weights ``W`` (``m x R``);
* log-sum-exp groups, mixed in by ``V`` (``m x G``).

A linear map ``L`` (``m' x m``: sum with axis, indexing, reshape, transpose, broadcasting,
stacking, matmul with a constant, scaling, trace, diag, ...) acts on every part at once
(``L A``, ``L c``, ``L Q``, ``L W``, ``L V``) without touching the rows, so compiling
``cp.sum_squares(X @ w - y)`` with ``10^4`` rows is a few sparse products. Selection-like
atoms get their matrix by applying the atom's own ``numeric`` to an array of (1-based)
entry indices.

Recognised (anything else raises :class:`~varopt.errors.ModelStructureError` naming the
objective/constraint and the CVXPY sub-expression):

* affine atoms listed above, ``+ - *`` by constants, ``/`` by constants, ``@`` with a
  constant on either side, parameters (as constants); any other affine CVXPY atom
  (``cumsum``, ``diff``, ``convolve``/``kron`` with a constant, ...) on at most
  ``4000`` input entries, whose matrix is read off its ``numeric`` on unit vectors;
* ``square``/``power(., 2)``/``sum_squares``/``quad_over_lin(., const)`` of an affine
  argument -> ``square`` rows (one per entry, not expanded);
* ``quad_over_lin(affine, affine scalar)`` -> ``quad_over_lin`` rows;
* ``quad_form(affine, constant P)`` -> quadratic terms ``x^T A^T P_s A x`` (+ linear);
* ``exp`` -> ``exp`` rows; ``log`` (and ``log1p(u) = log(1 + u)``) -> ``neglog`` rows with
  coefficient ``-1``;
  ``entr`` -> ``xlogx`` rows with coefficient ``-1``;
* ``log_sum_exp(., axis)`` -> a log-sum-exp group per output entry; ``logistic(z)`` ->
  the group ``log(exp 0 + exp z)``;
* products of two non-constant expressions (``multiply``, ``*``, ``@``): affine times
  affine -> bilinear/quadratic terms; an affine expression ``c + sum_j a_j x_j`` (e.g. one
  variable per entry, possibly broadcast) times an expression made of multiplier-free
  atom rows -> ``c`` times the rows plus, for each ``j``, the rows with multiplier ``x_j``
  (``phi * (x - mu)**2``, ``-phi * log(pi)``); ``x_v * log(alpha x_v)`` -> ``xlogx``;
* ``rel_entr(x, y) = x log x - x log y`` and ``kl_div(x, y) = rel_entr - x + y`` for
  affine ``x``, ``y`` (a constant argument folded);
* ``max``, ``maximum``, ``pos``, ``neg``, ``norm_inf``, ``sum_largest``, ``huber`` and the concave ``min``,
  ``minimum``, ``sum_smallest`` -> epigraph columns with linear rows (:mod:`.cvxpy_epigraph`,
  :mod:`varopt.program.epigraph_lift`), checked to be in the convex position once the problem is traced;
* for a solver whose ``native_atoms`` hold ``sqpos``: ``square``/``power(., 2)``/``**2``/``sum_squares``/
  ``quad_over_lin(., c)`` of ``pos(u)``, ``maximum(u, 0)``, ``neg(u)`` (``= pos(-u)``), constant multiples of them,
  for an affine ``u`` (also the squares inside ``log_normcdf``) -> ``sqpos`` rows (:mod:`.cvxpy_hinge`).

Every atom row and log-sum-exp group carries a ``label`` (the finite-sum sample it belongs
to): the index along the first axis of the atom's argument entry, or, for a product
with a variable array, of the product entry (so in ``cp.multiply(phi, cp.square(y[:, None]
- mu[None, :]))`` with ``phi`` of shape ``(N, K)`` the rows of data point ``n`` share label
``n``); for ``log_sum_exp(., axis)`` and ``logistic`` the first-axis index of the output entry. A scalar sum of
terms that each hold one label (a Python loop over data points) labels term ``k`` with ``k``
(:func:`.cvxpy_nodes._label_terms`).

Constraints ``<=``, ``>=``, ``==`` (and ``Zero``/``NonNeg``/``NonPos``) become one
:class:`~varopt.program.Constraint` per entry (named ``c{k}`` or ``c{k}[i,j]``, C-style
index), with the body's constant moved to the bounds: ``g(x) <= h(x)`` becomes
``g - h <= 0``, ``c <= g(x)`` (also written ``g >= c``) with constant ``c`` stays
``c <= g(x)``. A scalar bound on a maximum, ``norm_inf(e) <= r`` or ``max(e) <= r``, is written as its
rows ``abs(e) <= r`` or ``e <= r`` (the same set). Cone constraints are rejected.

Layout: :mod:`.cvxpy_nodes` (traced nodes and sparse index helpers), :mod:`.cvxpy_affine`
(tree walk, constants, linear atoms), :mod:`.cvxpy_products` (products of two nodes),
:mod:`.cvxpy_atoms` (nonlinear atoms), :mod:`.cvxpy_epigraph` (piecewise-linear atoms); this module
holds :func:`compile_cvxpy`, the variable bounds, the split of the traced nodes into
:class:`~varopt.program.Expression` objects and :class:`CvxpyMapping`.
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, ModelStructureError
from . import energy_hint
from ..program.atoms import ATOMS
from ..program import AtomGroup, Constraint, Expression, LseGroup, Program, QuadraticTerms
from ..program.aux_bounds import aux_intervals, row_box
from ..program.lifting import AuxVariable, defining_body, start_values
from ..program.epigraph_lift import Part, check_positions
from .cvxpy_affine import _public, _shorten
from .cvxpy_atoms import NeedAux, _Tracer
from .cvxpy_epigraph import epigraph_parts
from .cvxpy_nodes import _Node, _Rows, _add, _canonical, _csr, _entries, _shape, _size


def _index_names(name, shape):
    """``name[i,j,...]`` for every entry of ``shape`` in C order (``name`` for a scalar)."""
    if not shape:
        return [name]
    if len(shape) == 1:
        return [f"{name}[{i}]" for i in range(shape[0])]
    # the prefixes "name[i,j," of the leading axes, then one concatenation per entry with the last axis' "k]"
    # (a join of the index tuple per entry costs twice as much: ~2 ms for a 2308 x 4 weight matrix)
    heads = [name + "["]
    for d in shape[:-1]:
        heads = [f"{h}{i}," for h in heads for i in range(int(d))]
    tails = [f"{k}]" for k in range(int(shape[-1]))]
    return [h + t for h in heads for t in tails]


class CvxpyMapping:
    """Links program variables to CVXPY variables.

    ``names`` are the program variable names (``t``, ``x[0]``, ``phi[0,1]``; entries of a
    variable in C order), ``variables`` the CVXPY variables, ``offsets`` their first
    program column. :meth:`load` writes a solution vector back into ``variable.value``.
    """

    def __init__(self, variables, offsets, names):
        self.variables = list(variables)
        self.offsets = list(offsets)
        self.names = list(names)

    def primal(self, x) -> dict:
        """``{variable id: value}`` of a solution vector, each value of its variable's shape (a view of ``x``;
        a scalar variable gets a numpy float), as :meth:`cvxpy.Problem.unpack_results` takes them."""
        x = np.asarray(x, dtype=float).ravel()
        if x.size != len(self.names):
            raise ValueError(f"solution has {x.size} entries, the problem has {len(self.names)} variables")
        out = {}
        for var, off in zip(self.variables, self.offsets):
            shape = var.shape
            out[var.id] = x[off:off + _size(shape)].reshape(shape, order="C") if shape else x[off]
        return out

    def load(self, x):
        """Write a solution vector into the variables' ``value``. Stored without CVXPY's attribute check (its
        ``value`` setter refuses a solver's tiny bound violation; the shapes are right by construction)."""
        for var, val in zip(self.variables, self.primal(x).values()):
            var.save_value(val)

    def values(self, x) -> dict:
        """``{variable name: array}`` for a solution vector."""
        x = np.asarray(x, dtype=float).ravel()
        return {var.name(): (x[off:off + _size(_shape(var))].reshape(_shape(var), order="C")
                             if _shape(var) else float(x[off]))
                for var, off in zip(self.variables, self.offsets)}


_REJECTED_ATTRS = ("boolean", "integer", "symmetric", "diag", "PSD", "NSD", "hermitian", "complex", "imag",
                   "sparsity")


def _variable_bounds(var, where):
    shape = _shape(var)
    m = _size(shape)
    lb, ub = np.full(m, -np.inf), np.full(m, np.inf)
    attrs = getattr(var, "attributes", {})
    for a in _REJECTED_ATTRS:
        if attrs.get(a):
            hint = energy_hint() if a in ("boolean", "integer") else ""
            raise ModelStructureError(f"variable `{var.name()}` has the attribute {a}=True, which this solver does "
                                      f"not support (continuous unstructured variables only){hint}")
    if attrs.get("nonneg") or attrs.get("pos"):
        lb[:] = 0.0
    if attrs.get("nonpos") or attrs.get("neg"):
        ub[:] = 0.0
    bounds = attrs.get("bounds")
    if bounds is not None:
        for k, (arr, side) in enumerate(zip(bounds, ("lower", "upper"))):
            if arr is None:
                continue
            if hasattr(arr, "value") and not isinstance(arr, np.ndarray):
                arr = arr.value
            v = np.broadcast_to(np.asarray(arr, dtype=float), shape).ravel(order="C")
            if np.isnan(v).any():
                raise InputDataError(f"variable `{var.name()}`: {side} bound contains NaN")
            if k == 0:
                lb = np.maximum(lb, v)
            else:
                ub = np.minimum(ub, v)
    return lb, ub


def layout_variable(var, off, used):
    """``(size, names, program columns, start values)`` of a CVXPY variable placed at column ``off``;
    ``used`` collects the base names (a repeated name gets the variable's id)."""
    shape = _shape(var)
    m = _size(shape)
    base = var.name() if var.name() not in used else f"{var.name()}_{var.id}"
    used.add(base)
    val = var.value
    x0 = np.full(m, np.nan) if val is None else np.broadcast_to(np.asarray(val, dtype=float), shape).ravel(order="C")
    # F-order entry -> C-order program column
    cols = off + (np.arange(m).reshape(shape, order="C").ravel(order="F") if shape else np.zeros(1, dtype=np.int64))
    return m, _index_names(base, shape), cols, x0


def compile_cvxpy(problem, native_atoms=()):
    """Compile ``problem`` (a ``cvxpy.Problem``) into ``(Program, CvxpyMapping)``.

    ``native_atoms``: atom kinds the target solver takes in place of their lifted form
    (:attr:`varopt.registry.Solver.native_atoms`); with ``"sqpos"`` a square of ``pos``/``maximum(., 0)``/``neg``
    of an affine argument becomes ``sqpos`` rows (:mod:`.cvxpy_hinge`), without it epigraph columns as before.

    Program variables are the entries of ``problem.variables()`` (each in C order),
    named like Pyomo (``t``, ``x[0]``, ``phi[0,1]``). A maximisation is stored negated
    with ``program.maximize = True``. Raises :class:`ModelStructureError` for anything
    outside the recognised catalogue (module docstring) and :class:`InputDataError` for
    NaN/inf data or parameters without value.
    """
    variables = problem.variables()
    offsets, names, lbs, ubs, x0s = [], [], [], [], []
    var_cols = {}
    used = set()
    off = 0
    for var in variables:
        # the attributes first: a diag=True variable solved by another solver holds a sparse value, which the start
        # values cannot read (a TypeError instead of the error naming the attribute)
        lb, ub = _variable_bounds(var, "variable")
        m, vnames, cols, x0 = layout_variable(var, off, used)
        names += vnames
        lbs.append(lb)
        ubs.append(ub)
        x0s.append(x0)
        var_cols[id(var)] = cols
        offsets.append(off)
        off += m
    n_user = off
    # products inside squares/norms need auxiliary columns (varopt.program.lifting): trace again with
    # room for them when they run out, then once more with exactly as many as were used
    cap, exact = 0, False
    while True:
        try:
            tracer, z, cons = _trace(problem, var_cols, n_user, cap, np.concatenate(lbs) if lbs else np.zeros(0),
                                     native_atoms)
        except NeedAux as exc:
            cap, exact = max(2 * cap, exc.needed + 16), False
            continue
        if tracer.n_aux == cap or exact:
            break
        cap, exact = tracer.n_aux, True
    n = tracer.n
    maximize = isinstance(problem.objective, _constraint_classes()[5])
    # one empty quadratic part shared by every expression of this program (never mutated)
    empty_q = _empty_quadratic(n)
    objective = _to_expressions(z, n, empty_q=empty_q)[0]

    epi_aux, epi_rows, epi_roles = epigraph_parts(tracer, n, lambda z: _to_expressions(z, n, empty_q=empty_q))
    aux = list(epi_aux)
    ratio_dens = getattr(tracer, "ratio_dens", {})
    for cols, kind, node, text in tracer.aux:
        if kind == "epigraph":
            continue
        dens = _to_expressions(ratio_dens[int(cols[0])], n, empty_q=empty_q) if kind == "ratio" else [None] * cols.size
        for col, e, d in zip(cols.tolist(), _to_expressions(node, n, empty_q=empty_q), dens):
            j = len(aux)
            aux.append(AuxVariable(col, kind, e, text, f"_aux_{kind}[{j}]_def", denominator=d))
    aux.sort(key=lambda a: a.index)
    constraints = []
    parts = [Part("objective", objective, 1.0)] if epi_roles else None
    for k, con, body, lo_inf, hi_inf in cons:
        shape = body.shape
        exprs = _to_expressions(body, n, order_c=True, empty_q=empty_q)
        labels = _index_names(f"c{k}", shape)
        for lab, e in zip(labels, exprs):
            const = e.constant
            e.constant = 0.0
            lo = -np.inf if lo_inf else -const
            hi = np.inf if hi_inf else -const
            constraints.append(Constraint(lab, e, lo, hi))
            if parts is not None:
                parts.append(Part(f"constraint {k} ({_shorten(_public(str(con)))})", e, 0.0 if lo_inf == hi_inf else (1.0 if lo_inf else -1.0)))
    for k, (node, lo) in enumerate(getattr(tracer, "domain_rows", [])):
        for e in _to_expressions(node, n, empty_q=empty_q):
            constraints.append(Constraint(f"_domain[{k}]", e, lo, np.inf))
    # divisions, means and p-norms: the interval of each column's quantity (a ratio's denominator checked here)
    bounded = getattr(tracer, "bounded_aux", {})
    aux_box = aux_intervals(aux, *row_box(np.concatenate(lbs + [np.full(n - n_user, -np.inf)]),
                                          np.concatenate(ubs + [np.full(n - n_user, np.inf)]), constraints, n_user),
                            bounded, bounded) if bounded else {}
    for a in aux:
        if a.kind != "epigraph":
            constraints.append(Constraint(a.constraint, defining_body(a.index, a.kind, a.definition, a.denominator),
                                          0.0, 0.0))
            if parts is not None:
                parts.append(Part(f"the defining row of the {a.kind} in the term '{a.term}'", constraints[-1].body,
                                  0.0))
        names.append(a.constraint[:-4])
        lo, hi = aux_box.get(a.index, (0.0 if a.kind == "sqrt" else -np.inf, np.inf))
        lbs.append(np.array([lo]))
        ubs.append(np.array([hi]))
        x0s.append(np.array([np.nan]))
    for con, exempt in epi_rows:
        constraints.append(con)
        parts.append(Part(f"the epigraph row {con.name}", con.body, 1.0, exempt))
    if parts is not None:
        # a max/huber/... column is exact only where it is minimised (varopt.program.epigraph_lift)
        check_positions(parts, epi_roles, n)
    lb = np.concatenate(lbs) if lbs else np.zeros(0)
    x0 = np.concatenate(x0s) if x0s else np.zeros(0)
    program = Program(names, lb, np.concatenate(ubs) if ubs else np.zeros(0), objective, constraints, maximize,
                      x0=start_values(aux, x0, n_user), aux=aux)
    return program, CvxpyMapping(variables, offsets, names[:n_user])


@functools.cache
def _constraint_classes():
    """CVXPY's ``Equality``, ``Inequality``, ``NonNeg``, ``NonPos``, ``Zero`` and ``Maximize``, imported once (an import
    statement per compile costs ~3 us)."""
    from cvxpy.constraints import Equality, Inequality, NonNeg, NonPos, Zero
    from cvxpy.problems.objective import Maximize
    return Equality, Inequality, NonNeg, NonPos, Zero, Maximize


def _trace(problem, var_cols, n_user, cap, user_lb=None, native_atoms=()):
    """Trace the objective and the constraints: ``(tracer, objective node, [(k, constraint, body,
    lo_inf, hi_inf)])``."""
    Equality, Inequality, NonNeg, NonPos, Zero, Maximize = _constraint_classes()

    tracer = _Tracer(var_cols, n_user, cap)
    tracer.native_atoms = frozenset(native_atoms or ())
    tracer.user_lb = user_lb   # declared lower bounds: |x_i| of a p-norm needs no column where x_i >= 0
    obj = problem.objective
    tracer.where = "objective"
    z = tracer.trace(obj.args[0])
    if z.m != 1:
        raise ModelStructureError(f"objective: `{obj.args[0]}` is not scalar (shape {z.shape})")
    if isinstance(obj, Maximize):
        z = z.scale(-1.0)
    cons = []
    for k, con in enumerate(problem.constraints):
        tracer.where = (k, con)  # formatted as "constraint k (text)" when a message needs it
        if isinstance(con, (Inequality, Equality)):
            lhs, rhs = con.args
            if isinstance(con, Inequality):
                lhs = _max_bound_rows(lhs, rhs)
            sl, sr = _shape(lhs), _shape(rhs)
            # (a scalar side broadcasts to the other's shape: np.broadcast_shapes costs ~4 us per constraint)
            shape = sl if sl == sr or not sr else (sr if not sl else np.broadcast_shapes(sl, sr))
            # ``c <= g`` (e.g. ``x >= 0``) is kept as ``c <= g(x)``, anything else as ``lhs - rhs <= 0``
            flip = not tracer.has_vars(lhs) and tracer.has_vars(rhs)
            g, c = (rhs, lhs) if flip else (lhs, rhs)
            body = _minus_constant(tracer, g, c, shape) if not tracer.has_vars(c) else None
            if body is None:
                body = _add([tracer.trace(g), tracer.trace(c).scale(-1.0)], shape)
            lo_inf = not flip and isinstance(con, Inequality)
            hi_inf = flip and isinstance(con, Inequality)
        elif isinstance(con, (Zero, NonNeg, NonPos)):
            body = tracer.trace(con.args[0])
            lo_inf, hi_inf = isinstance(con, NonPos), isinstance(con, NonNeg)
        else:
            raise ModelStructureError(f"{tracer.where}: constraints of type {type(con).__name__} are not "
                                      "supported (only <=, >= and == between expressions)")
        cons.append((k, con, body, lo_inf, hi_inf))
    return tracer, z, cons


def _minus_constant(tracer, g, c, shape):
    """The body ``g - c`` of a constraint between an expression ``g`` of the constraint's shape and a constant
    ``c`` (``x[:5] >= 0``, ``sum(x) <= 1``): ``g``'s node with ``c`` (broadcast) subtracted from its constant
    part -- the node :func:`_add` builds from ``g`` and the negated constant node, without tracing the constant
    as a node of its own, broadcasting it by a sparse product and summing (``c`` is validated as every traced
    constant is). None when ``g`` needs broadcasting (the general sum then)."""
    z = tracer.trace(g)
    if z.shape != tuple(shape):
        return None
    val = np.asarray(tracer.const_value(c), dtype=float)
    if val.shape == z.shape:
        neg = -1.0 * val.ravel(order="F")
    elif val.size == 1:  # a scalar bound (x >= 0, sum(x) <= 1): its negation in every entry (np.broadcast_to: ~5 us)
        neg = np.full(z.m, -1.0 * float(val.reshape(-1)[0]))
    else:
        neg = -1.0 * np.broadcast_to(val, z.shape).ravel(order="F")
    return _Node._make(z.shape, z.m, z.n, z.A, z.c + neg, list(z.Q), list(z.rows), list(z.lse))


_MAX_ATOMS = []  # CVXPY's norm_inf and max classes (imported on first use)


def _max_bound_rows(lhs, rhs):
    """``lhs`` of ``lhs <= rhs``, with a scalar bound on a maximum written as its rows, the same set:
    ``norm_inf(e) <= r`` as ``abs(vec(e)) <= r`` and ``max(e) <= r`` as ``vec(e) <= r`` (``r`` scalar; a
    maximum can only be bounded above, so ``r <= norm_inf(e)``, not convex, is left as written). This is
    how a CVXPY user writes a box ``-r <= e <= r`` in one constraint."""
    if not _MAX_ATOMS:  # imported once: the import statements cost more than this whole test
        from cvxpy.atoms.max import max as max_atom
        from cvxpy.atoms.norm_inf import norm_inf
        _MAX_ATOMS.extend((norm_inf, max_atom))
    norm_inf, max_atom = _MAX_ATOMS
    if not isinstance(lhs, (norm_inf, max_atom)) or lhs.axis is not None or _shape(rhs) not in ((), (1,)):
        return lhs
    import cvxpy as cp
    e = cp.vec(lhs.args[0], order="F")
    return cp.abs(e) if isinstance(lhs, norm_inf) else e


def _empty_quadratic(n):
    return QuadraticTerms(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), n)


def _to_expressions(z, n, order_c=False, empty_q=None):
    """One :class:`Expression` per entry of node ``z`` (F order, or C order if asked).

    Every weight matrix is split by entry in one vectorized pass (stacked columns), so
    the per-entry work is only building the small :class:`Expression` objects. ``empty_q``: the empty
    quadratic part of entries without one (shared; built here when not given).
    """
    m = z.m
    entries = range(m)
    if order_c and len(z.shape) > 1:  # (a vector's F and C orders agree)
        entries = np.arange(m).reshape(z.shape, order="F").ravel(order="C").tolist()
    A = _canonical(z.A)
    k = A.indptr[-1]
    if np.count_nonzero(A.data[:k]) != k:  # stored zeros (x - x): dropped once here, not per row
        A = A.copy()
        A.eliminate_zeros()
    cols64 = A.indices.astype(np.int64)  # every row's columns as views of one conversion

    def stacked(pairs, get):
        """Concatenate the objects' per-column arrays and hstack the weights (csr m x total)."""
        pairs = [(o, W) for o, W in pairs if W.indptr[-1]]
        if not pairs:
            return None, None
        if len(pairs) == 1:  # one object: its weights as they are (no hstack), canonical and without stored zeros
            W = _canonical(pairs[0][1])
            if np.count_nonzero(W.data[:W.indptr[-1]]) != W.indptr[-1]:
                W = W.copy()
                W.eliminate_zeros()
            return [get(pairs[0][0])], W
        W = sp.hstack([w for _, w in pairs], format="csr")
        W.sum_duplicates()
        W.eliminate_zeros()
        return [get(o) for o, _ in pairs], W

    qparts, WQ = stacked(z.Q, lambda q: (q.i, q.j))
    if WQ is not None:
        qi = np.concatenate([a for a, _ in qparts])
        qj = np.concatenate([b for _, b in qparts])
    kinds = {}
    for r, W in z.rows:
        kinds.setdefault(r.kind, []).append((r, W))
    rowsets = []
    for kind, pairs in kinds.items():
        objs, W = stacked(pairs, lambda r: r)
        if W is None:
            continue
        allrows = objs[0] if len(objs) == 1 else _Rows(
            kind, sp.vstack([o.A for o in objs], format="csr"), np.concatenate([o.b for o in objs]),
            np.concatenate([o.mult for o in objs]),
            None if ATOMS[kind].arity == 1 else sp.vstack([o.A2 for o in objs], format="csr"),
            None if ATOMS[kind].arity == 1 else np.concatenate([o.b2 for o in objs]),
            np.concatenate([o.label for o in objs]))
        rowsets.append((allrows, W))
    lsesets = [(g, _csr(V)) for g, V in z.lse if V.indptr[-1]]
    # one shared (never mutated) empty term set: building one per constraint costs ~0.1 ms each
    if empty_q is None:
        empty_q = _empty_quadratic(n)

    out = []
    # row bounds and constants as Python numbers (numpy's scalar indexing costs ~0.1 us a read; the same values)
    ip, cvals = A.indptr.tolist(), z.c.tolist()
    for e in entries:
        lo, hi = ip[e], ip[e + 1]
        lin = None
        if 4 * (hi - lo) > n:  # dense storage costs less than index + value arrays
            lin = np.zeros(n)
            lin[A.indices[lo:hi]] = A.data[lo:hi]
        quad = empty_q
        if WQ is not None and WQ.indptr[e + 1] > WQ.indptr[e]:
            sl = slice(WQ.indptr[e], WQ.indptr[e + 1])
            t = WQ.indices[sl]
            quad = QuadraticTerms(qi[t], qj[t], WQ.data[sl], n)
        # the Program puts its matrices into canonical form in place; traced matrices share arrays with other
        # nodes, so a non-canonical one is copied first (_canonical)
        # (no term groups, e.g. a linear row: no generator per entry)
        atoms = [AtomGroup(r.kind, W.data[sl], _canonical(sub.A), sub.b, sub.mult,
                           None if sub.A2 is None else _canonical(sub.A2), sub.b2, sub.label)
                 for r, W, sl, sub in _entries(rowsets, e, lambda r, idx: r.take(idx))] if rowsets else ()
        lses = [LseGroup(_canonical(sub.A), sub.b, sub.seg, V.data[sl], sub.mult, sub.label)
                for g, V, sl, sub in _entries(lsesets, e, lambda g, idx: g.take_groups(idx))] if lsesets else ()
        # a canonical csr row without stored zeros is a valid sparse linear part as it is
        out.append(Expression(n, cvals[e], lin, quad, atoms, lses) if lin is not None else
                   Expression.from_sorted_row(n, cvals[e], cols64[lo:hi], A.data[lo:hi], quad, atoms, lses))
    return out
