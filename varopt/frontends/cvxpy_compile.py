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
  affine ``x``, ``y``.

Every atom row and log-sum-exp group carries a ``label`` (the finite-sum sample it belongs
to): the index along the first axis of the atom's argument entry, or, for a product
with a variable array, of the product entry (so in ``cp.multiply(phi, cp.square(y[:, None]
- mu[None, :]))`` with ``phi`` of shape ``(N, K)`` the rows of data point ``n`` share label
``n``); for ``log_sum_exp(., axis)`` and ``logistic`` the first-axis index of the output entry.

Constraints ``<=``, ``>=``, ``==`` (and ``Zero``/``NonNeg``/``NonPos``) become one
:class:`~varopt.program.Constraint` per entry (named ``c{k}`` or ``c{k}[i,j]``, C-style
index), with the body's constant moved to the bounds: ``g(x) <= h(x)`` becomes
``g - h <= 0``, ``c <= g(x)`` (also written ``g >= c``) with constant ``c`` stays
``c <= g(x)``. Cone constraints are rejected.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, ModelStructureError
from ..program.atoms import ATOMS
from ..program import AtomGroup, Constraint, Expression, LseGroup, Program, QuadraticTerms

# classes whose ``numeric`` only selects / copies / zero-fills entries of its arguments
_SELECTION = {"index", "special_index", "transpose", "reshape", "Promote", "broadcast_to", "diag_vec",
              "diag_mat", "upper_tri", "Hstack", "Vstack", "Concatenate", "Stack", "Squeeze", "conj",
              "real", "psd_wrap", "symmetric_wrap", "hermitian_wrap", "skew_symmetric_wrap", "vec",
              "permute_dims", "moveaxis", "swapaxes"}
# other linear atoms whose matrix is probed column by column (small inputs only)
_PROBE_LIMIT = 4000


def _shape(expr):
    return tuple(int(s) for s in expr.shape)


def _size(shape):
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


class _Rows:
    """Atom rows ``w_r g(A_r x + b_r)`` of one kind, shared by nodes (immutable)."""

    __slots__ = ("kind", "A", "b", "mult", "A2", "b2", "label")

    def __init__(self, kind, A, b, mult=None, A2=None, b2=None, label=None):
        self.kind = kind
        self.A = sp.csr_matrix(A)
        self.b = np.asarray(b, dtype=float).ravel()
        R = self.A.shape[0]
        self.mult = np.full(R, -1, dtype=np.int64) if mult is None else np.asarray(mult, dtype=np.int64)
        self.A2 = None if A2 is None else sp.csr_matrix(A2)
        self.b2 = None if b2 is None else np.asarray(b2, dtype=float).ravel()
        self.label = np.zeros(R, dtype=np.int64) if label is None else np.asarray(label, dtype=np.int64)

    def take(self, idx, mult=None, label=None):
        idx = np.asarray(idx, dtype=np.int64)
        return _Rows(self.kind, self.A[idx], self.b[idx], self.mult[idx] if mult is None else mult,
                     None if self.A2 is None else self.A2[idx], None if self.b2 is None else self.b2[idx],
                     self.label[idx] if label is None else label)


class _Lse:
    """Log-sum-exp groups ``w_g log sum_{k: seg_k = g} exp(A_k x + b_k)`` (immutable)."""

    __slots__ = ("A", "b", "seg", "mult", "starts", "label")

    def __init__(self, A, b, seg, mult=None, label=None):
        self.A = sp.csr_matrix(A)
        self.b = np.asarray(b, dtype=float).ravel()
        self.seg = np.asarray(seg, dtype=np.int64)
        G = int(self.seg[-1]) + 1 if self.seg.size else 0
        self.mult = np.full(G, -1, dtype=np.int64) if mult is None else np.asarray(mult, dtype=np.int64)
        self.starts = np.searchsorted(self.seg, np.arange(G + 1))
        self.label = np.zeros(G, dtype=np.int64) if label is None else np.asarray(label, dtype=np.int64)

    @property
    def G(self):
        return self.mult.size

    def take_groups(self, groups, mult=None, label=None):
        """New group set made of copies of ``groups`` (may repeat), in that order."""
        groups = np.asarray(groups, dtype=np.int64)
        cnt = self.starts[groups + 1] - self.starts[groups]
        rows = _ranges(self.starts[groups], cnt)
        seg = np.repeat(np.arange(groups.size), cnt)
        return _Lse(self.A[rows], self.b[rows], seg, self.mult[groups] if mult is None else mult,
                    self.label[groups] if label is None else label)


def _first_index(shape):
    """Index along the first axis of every (F-order) entry of ``shape``: the row's sample label."""
    m = _size(shape)
    return np.arange(m, dtype=np.int64) % shape[0] if shape else np.zeros(m, dtype=np.int64)


def _entries(sets, e, take):
    """``(group, W, slice, take(group, columns))`` for the groups whose CSR weight row ``e`` is nonempty."""
    for grp, W in sets:
        sl = slice(W.indptr[e], W.indptr[e + 1])
        if sl.stop > sl.start:
            yield grp, W, sl, take(grp, W.indices[sl])


def _ranges(starts, counts):
    """Concatenation of ``arange(s, s + c)`` for every (s, c), vectorized."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(np.asarray(starts, dtype=np.int64), counts) + offs


class _QTerms:
    """Products ``x_i x_j`` (one per column of a node's weight matrix; immutable)."""

    __slots__ = ("i", "j")

    def __init__(self, i, j):
        self.i = np.asarray(i, dtype=np.int64)
        self.j = np.asarray(j, dtype=np.int64)


def _pad(pairs, off, M):
    """Move the weight rows of ``(object, W)`` pairs down by ``off`` into ``M`` rows."""
    out = []
    for obj, W in pairs:
        Wc = W.tocoo()
        out.append((obj, sp.csr_matrix((Wc.data, (Wc.row + off, Wc.col)), shape=(M, W.shape[1]))))
    return out


class _Node:
    """Array-valued traced expression (see the module docstring)."""

    __slots__ = ("shape", "m", "n", "A", "c", "Q", "rows", "lse")

    def __init__(self, shape, n, A=None, c=None, Q=None, rows=None, lse=None):
        self.shape = tuple(shape)
        self.m = _size(self.shape)
        self.n = n
        self.A = sp.csr_matrix((self.m, n)) if A is None else sp.csr_matrix(A)
        self.c = np.zeros(self.m) if c is None else np.asarray(c, dtype=float).ravel()
        self.Q = Q or []  # list of (_QTerms, W m x T csr)
        self.rows = rows or []  # list of (_Rows, W m x R csr)
        self.lse = lse or []  # list of (_Lse, V m x G csr)

    # --- classification --------------------------------------------------------------
    @property
    def has_quad(self):
        return any(W.nnz for _, W in self.Q)

    @property
    def has_nonlinear(self):
        return any(W.nnz for _, W in self.rows) or any(V.nnz for _, V in self.lse)

    @property
    def is_affine(self):
        return not self.has_quad and not self.has_nonlinear

    @property
    def is_constant(self):
        return self.is_affine and self.A.nnz == 0

    def single_variable(self):
        """``(coef, var)`` per entry when every entry is ``coef_e * x_{var_e}`` (no constant)."""
        if not self.is_affine or np.any(self.c != 0):
            return None
        A = self.A.copy()
        A.eliminate_zeros()
        if not np.all(np.diff(A.indptr) == 1):
            return None
        return A.data.copy(), A.indices.astype(np.int64)

    # --- linear maps ------------------------------------------------------------------
    def apply(self, L, shape):
        """The node ``L @ self`` (``L``: m' x m sparse) with the given output shape."""
        L = sp.csr_matrix(L)
        return _Node(shape, self.n, L @ self.A, L @ self.c, [(q, sp.csr_matrix(L @ W)) for q, W in self.Q],
                     [(r, sp.csr_matrix(L @ W)) for r, W in self.rows],
                     [(g, sp.csr_matrix(L @ V)) for g, V in self.lse])

    def scale(self, d):
        return self.apply(sp.diags(np.broadcast_to(np.asarray(d, dtype=float), (self.m,))), self.shape)


def _bcast(z, shape):
    """``z`` broadcast (numpy rules) to ``shape``."""
    shape = tuple(shape)
    if z.shape == shape:
        return z
    return z.apply(_broadcast_matrix(z.shape, shape), shape)


def _add(nodes, shape):
    shape = tuple(shape)
    nodes = [_bcast(z, shape) for z in nodes]
    n = nodes[0].n
    m = _size(shape)
    A = sp.csr_matrix((m, n))
    c = np.zeros(m)
    Q, rows, lse = [], [], []
    for z in nodes:
        A = A + z.A
        c = c + z.c
        Q += z.Q
        rows += z.rows
        lse += z.lse
    return _Node(shape, n, A, c, Q, rows, lse)


def _stack(nodes):
    """Vertical concatenation of flattened nodes (shape ``(sum m,)``)."""
    n = nodes[0].n
    M = sum(z.m for z in nodes)
    A = sp.vstack([z.A for z in nodes], format="csr")
    c = np.concatenate([z.c for z in nodes])
    Q, rows, lse = [], [], []
    off = 0
    for z in nodes:
        Q += _pad(z.Q, off, M)
        rows += _pad(z.rows, off, M)
        lse += _pad(z.lse, off, M)
        off += z.m
    return _Node((M,), n, A, c, Q, rows, lse)


def _selection_matrix(src, m_in):
    """Sparse ``L`` from 1-based source indices (0 = structural zero)."""
    src = np.asarray(src).ravel(order="F")
    s = np.rint(np.real(src)).astype(np.int64)
    keep = np.flatnonzero(s > 0)
    return sp.csr_matrix((np.ones(keep.size), (keep, s[keep] - 1)), shape=(src.size, m_in))


def _broadcast_matrix(shape_in, shape_out):
    m_in = _size(shape_in)
    idx = (np.arange(m_in, dtype=float) + 1).reshape(shape_in, order="F")
    return _selection_matrix(np.broadcast_to(idx, shape_out), m_in)


def _axis_groups(shape, axis):
    """Output (F-order) position of every input entry for a reduction over ``axis``."""
    if axis is None or not shape:
        return np.zeros(_size(shape), dtype=np.int64), 1
    axes = (axis,) if np.isscalar(axis) else tuple(axis)
    axes = tuple(int(a) % len(shape) for a in axes)
    keep = [d for d in range(len(shape)) if d not in axes]
    out_shape = tuple(shape[d] for d in keep)
    idx = np.indices(shape).reshape(len(shape), -1, order="F")
    if not keep:
        return np.zeros(_size(shape), dtype=np.int64), 1
    pos = np.ravel_multi_index(tuple(idx[d] for d in keep), out_shape, order="F")
    return pos.astype(np.int64), _size(out_shape)


def _bilinear(A1, A2, n):
    """Quadratic part ``[(terms, W)]`` whose entry e is ``(A1_e x) (A2_e x)``."""
    A1 = sp.csr_matrix(A1)
    A2 = sp.csr_matrix(A2)
    m = A1.shape[0]
    cnt1 = np.diff(A1.indptr)
    cnt2 = np.diff(A2.indptr)
    e1 = np.repeat(np.arange(m), cnt1)  # entry of every nonzero of A1
    rep = cnt2[e1]
    P = np.repeat(np.arange(A1.nnz), rep)
    Q2 = _ranges(A2.indptr[:-1][e1], rep)
    rows = e1[P]
    vals = A1.data[P] * A2.data[Q2]
    T = rows.size
    terms = _QTerms(A1.indices[P], A2.indices[Q2])
    return [(terms, sp.csr_matrix((vals, (rows, np.arange(T))), shape=(m, T)))]


class _Tracer:
    def __init__(self, var_cols, n):
        self.var_cols = var_cols  # id(variable) -> (F-order entry -> program column)
        self.n = n
        self.where = "objective"
        self._const_cache = {}

    # --- errors -----------------------------------------------------------------------
    def fail(self, expr, reason):
        raise ModelStructureError(f"{self.where}: cannot compile `{expr}`: {reason}")

    # --- helpers ----------------------------------------------------------------------
    def has_vars(self, expr):
        key = id(expr)
        v = self._const_cache.get(key)
        if v is None:
            from cvxpy.expressions.variable import Variable
            if isinstance(expr, Variable):
                v = True
            else:
                v = any(self.has_vars(a) for a in expr.args)
            self._const_cache[key] = v
        return v

    def const_value(self, expr):
        from cvxpy.expressions.constants.parameter import Parameter
        val = expr.value
        if val is None:
            params = [p for p in expr.parameters()] if hasattr(expr, "parameters") else []
            missing = [p.name() for p in params if p.value is None] or [str(expr)]
            raise InputDataError(f"{self.where}: parameter {missing[0]!r} has no value")
        if sp.issparse(val):
            val = val.toarray()
        val = np.asarray(val)
        if np.iscomplexobj(val):
            self.fail(expr, "complex data is not supported")
        val = val.astype(float)
        if not np.all(np.isfinite(val)):
            if isinstance(expr, Parameter):
                what = f"parameter {expr.name()!r}"
            else:
                text = " ".join(str(expr).split())
                what = f"constant `{text[:60] + ('...' if len(text) > 60 else '')}`"
            bad_mask = ~np.isfinite(val)
            bad = "NaN" if np.isnan(val).any() else "inf"
            where_idx = tuple(int(i) for i in np.argwhere(bad_mask)[0]) if val.ndim else ()
            raise InputDataError(f"{self.where}: {what} of shape {val.shape} contains {bad} "
                                 f"(first at index {where_idx})")
        return val

    def const_matrix(self, expr, shape2d):
        """A constant operand of ``@`` as a csr matrix of ``shape2d`` (sparse data kept sparse)."""
        from cvxpy.expressions.constants.constant import Constant
        if isinstance(expr, Constant) and sp.issparse(expr.value):
            M = sp.csr_matrix(expr.value, dtype=float)
            if not np.all(np.isfinite(M.data)):
                bad = "NaN" if np.isnan(M.data).any() else "inf"
                raise InputDataError(f"{self.where}: sparse constant of shape {M.shape} contains {bad}")
            return M.reshape(shape2d) if M.shape != shape2d else M
        val = np.broadcast_to(self.const_value(expr), _shape(expr)).reshape(shape2d)
        return sp.csr_matrix(val)

    def const_node(self, shape, val):
        val = np.broadcast_to(np.asarray(val, dtype=float), shape)
        return _Node(shape, self.n, c=np.asarray(val).ravel(order="F"))

    # --- the tree walk ------------------------------------------------------------------
    def trace(self, expr):
        from cvxpy.expressions.variable import Variable
        shape = _shape(expr)
        if isinstance(expr, Variable):
            cols = self.var_cols[id(expr)]
            A = sp.csr_matrix((np.ones(cols.size), (np.arange(cols.size), cols)), shape=(cols.size, self.n))
            return _Node(shape, self.n, A)
        if not self.has_vars(expr):
            return self.const_node(shape, self.const_value(expr))
        name = type(expr).__name__
        handler = getattr(self, "_" + name, None)
        if handler is not None:
            return handler(expr, shape)
        if name in _SELECTION:
            return self._selection(expr, shape)
        from cvxpy.atoms.affine.affine_atom import AffAtom
        if isinstance(expr, AffAtom) and expr.is_atom_affine():
            return self._probe(expr, shape)
        self.fail(expr, f"the atom `{name}` is not supported by varopt "
                  "(see varopt.frontends.cvxpy_compile for the recognised atoms)")

    def args(self, expr):
        return [self.trace(a) for a in expr.args]

    # --- linear atoms -------------------------------------------------------------------
    def _selection(self, expr, shape):
        nodes = self.args(expr)
        vals, off = [], 0
        for a, z in zip(expr.args, nodes):
            vals.append((np.arange(z.m, dtype=float) + 1 + off).reshape(_shape(a), order="F"))
            off += z.m
        out = np.asarray(expr.numeric(vals))
        if _size(out.shape) != _size(shape):
            self.fail(expr, "unexpected output of a selection atom")
        L = _selection_matrix(out, off)
        base = nodes[0] if len(nodes) == 1 else _stack(nodes)
        return base.apply(L, shape)

    def _probe(self, expr, shape):
        """Other affine atoms (cumsum, diff, kron/conv with a constant, ...): probe ``numeric``.

        Constant arguments are fixed at their values; the map is affine in the others, so
        its matrix is read column by column from unit vectors (small inputs only).
        """
        var_args = [k for k, a in enumerate(expr.args) if self.has_vars(a)]
        vals = [None if k in var_args else np.broadcast_to(self.const_value(a), _shape(a))
                for k, a in enumerate(expr.args)]
        nodes = [self.trace(expr.args[k]) for k in var_args]
        total = sum(z.m for z in nodes)
        if total > _PROBE_LIMIT:
            self.fail(expr, f"linear atom `{type(expr).__name__}` on more than {_PROBE_LIMIT} entries")
        shapes = {k: _shape(expr.args[k]) for k in var_args}

        def evaluate(free):
            v = list(vals)
            for k in var_args:
                v[k] = free[k]
            return np.asarray(expr.numeric(v), dtype=float).reshape(-1, order="F")

        zero = {k: np.zeros(shapes[k]) for k in var_args}
        base = evaluate(zero)
        cols = []
        for k in var_args:
            for j in range(_size(shapes[k])):
                free = dict(zero)
                e = np.zeros(_size(shapes[k]))
                e[j] = 1.0
                free[k] = e.reshape(shapes[k], order="F")
                cols.append(evaluate(free) - base)
        L = sp.csr_matrix(np.column_stack(cols))
        stacked = nodes[0] if len(nodes) == 1 else _stack(nodes)
        out = stacked.apply(L, shape)
        out.c = out.c + base
        return out

    def _AddExpression(self, expr, shape):
        nodes = []
        for a in expr.args:
            z = self.trace(a)
            if z.shape != shape:
                z = z.apply(_broadcast_matrix(z.shape, shape), shape)
            nodes.append(z)
        return _add(nodes, shape)

    def _NegExpression(self, expr, shape):
        return self.trace(expr.args[0]).scale(-1.0)

    def _Sum(self, expr, shape):
        z = self.trace(expr.args[0])
        pos, m_out = _axis_groups(z.shape, expr.axis)
        L = sp.csr_matrix((np.ones(z.m), (pos, np.arange(z.m))), shape=(m_out, z.m))
        return z.apply(L, shape)

    def _Trace(self, expr, shape):
        z = self.trace(expr.args[0])
        k = min(z.shape)
        diag = np.arange(k) * (z.shape[0] + 1)
        return z.apply(sp.csr_matrix((np.ones(k), (np.zeros(k, int), diag)), shape=(1, z.m)), shape)

    def _DivExpression(self, expr, shape):
        num, den = expr.args
        if self.has_vars(den):
            self.fail(expr, f"division by the non-constant expression `{den}`")
        d = self.const_value(den)
        z = self.trace(num)
        if z.shape != shape:
            z = z.apply(_broadcast_matrix(z.shape, shape), shape)
        dd = np.broadcast_to(d, shape).ravel(order="F")
        if np.any(dd == 0):
            raise InputDataError(f"{self.where}: division by zero in `{expr}`")
        return z.scale(1.0 / dd)

    def _multiply(self, expr, shape):
        z1, z2 = [self.trace(a) for a in expr.args]
        if z1.shape != shape:
            z1 = z1.apply(_broadcast_matrix(z1.shape, shape), shape)
        if z2.shape != shape:
            z2 = z2.apply(_broadcast_matrix(z2.shape, shape), shape)
        return self.product(expr, z1, z2, shape)

    def _MulExpression(self, expr, shape):
        a, b = expr.args
        sa, sb = _shape(a), _shape(b)
        if len(sa) > 2 or len(sb) > 2:
            self.fail(expr, "matrix products of arrays with more than 2 dimensions")
        if not sa or not sb:  # scalar times array: elementwise
            za, zb = self.trace(a), self.trace(b)
            za = za.apply(_broadcast_matrix(za.shape, shape), shape)
            zb = zb.apply(_broadcast_matrix(zb.shape, shape), shape)
            return self.product(expr, za, zb, shape)
        # as 2-D: a (p x q), b (q x r); 1-D left operand is a row, right operand a column
        pa = (1, sa[0]) if len(sa) == 1 else sa
        pb = (sb[0], 1) if len(sb) == 1 else sb
        p, q = pa
        r = pb[1]
        if not self.has_vars(a):
            Ca = self.const_matrix(a, pa)
            L = sp.kron(sp.identity(r), Ca, format="csr")  # vec(C Y) = (I kron C) vec(Y)
            return self.trace(b).apply(L, shape)
        if not self.has_vars(b):
            Cb = self.const_matrix(b, pb)
            L = sp.kron(Cb.T, sp.identity(p), format="csr")  # vec(Y C) = (C^T kron I) vec(Y)
            return self.trace(a).apply(L, shape)
        # both non-constant: T[i,k,j] = a[i,j] * b[j,k], summed over j
        za, zb = self.trace(a), self.trace(b)
        i, k, j = np.meshgrid(np.arange(p), np.arange(r), np.arange(q), indexing="ij")
        i, k, j = i.ravel(), k.ravel(), j.ravel()
        T = i.size
        Sa = sp.csr_matrix((np.ones(T), (np.arange(T), i + p * j)), shape=(T, p * q))
        Sb = sp.csr_matrix((np.ones(T), (np.arange(T), j + q * k)), shape=(T, q * r))
        prod = self.product(expr, za.apply(Sa, (T,)), zb.apply(Sb, (T,)), (T,))
        Lsum = sp.csr_matrix((np.ones(T), (i + p * k, np.arange(T))), shape=(p * r, T))
        return prod.apply(Lsum, shape)

    # --- products of two traced nodes ---------------------------------------------------
    def product(self, expr, z1, z2, shape):
        """Elementwise product of two traced nodes of the same shape.

        ``aff * aff`` gives bilinear terms; ``(c_e + sum_j a_ej x_j) * G_e`` with ``G`` made
        of multiplier-free atom/lse rows gives ``c_e G_e`` plus, for every ``j``, the rows
        of ``G_e`` with multiplier ``x_j`` and weight ``a_ej`` (a single variable per entry
        is the common case ``phi * (x - mu)**2``). ``x_j * (-log(alpha x_j))`` is rewritten
        exactly as the ``xlogx`` row ``-(1/alpha) (alpha x_j) log(alpha x_j)``.
        """
        n = self.n
        if z1.is_constant:
            return z2.scale(z1.c)
        if z2.is_constant:
            return z1.scale(z2.c)
        if z1.is_affine and z2.is_affine:
            Q = _bilinear(z1.A, z2.A, n)
            A = sp.diags(z1.c) @ z2.A + sp.diags(z2.c) @ z1.A
            return _Node(shape, n, A, z1.c * z2.c, Q)
        if z1.is_affine:
            F, other = z1, z2
        elif z2.is_affine:
            F, other = z2, z1
        else:
            self.fail(expr, "product of two nonlinear expressions (only an affine expression times "
                      "recognised atoms is supported)")
        if other.has_quad:
            self.fail(expr, "product of a variable with a quadratic expression (degree 3)")
        m = F.m
        AF = F.A.tocsr()
        AF.sum_duplicates()
        AF.eliminate_zeros()
        cnt = np.diff(AF.indptr)
        out = _Node(shape, n, sp.diags(other.c) @ AF + sp.diags(F.c) @ other.A, F.c * other.c,
                    _bilinear(AF, other.A, n))
        # constant part of the affine factor scales the nonlinear rows as they are
        out.rows += [(r, sp.csr_matrix(sp.diags(F.c) @ W)) for r, W in other.rows]
        out.lse += [(g, sp.csr_matrix(sp.diags(F.c) @ V)) for g, V in other.lse]

        def join(Wc):
            """Pair every weight (e, r, w) with every nonzero (e, j, a) of the affine factor."""
            e0 = Wc.row.astype(np.int64)
            k = np.repeat(np.arange(e0.size), cnt[e0])
            pos = _ranges(AF.indptr[:-1][e0], cnt[e0])
            return e0[k], Wc.col[k].astype(np.int64), Wc.data[k] * AF.data[pos], AF.indices[pos].astype(np.int64)

        def joined(items):
            """``(group, e, index, w, mult)`` per term group with nonzero weights (degree 3 rejected)."""
            for grp, W in items:
                Wc = W.tocoo()
                if Wc.nnz == 0:
                    continue
                if np.any(grp.mult[Wc.col] >= 0):
                    self.fail(expr, "product of a variable with a term that already has a multiplier (degree 3)")
                e, r, w, mult = join(Wc)
                if e.size:
                    yield grp, e, r, w, mult

        for rows, e, r, w, mult in joined(other.rows):
            new = rows.take(r, mult, _first_index(shape)[e])
            K = r.size
            keep = np.arange(K)
            if rows.kind == "neglog":
                # x_j * (-log(alpha x_j)) = -(1/alpha) (alpha x_j) log(alpha x_j): an xlogx row
                Ar = new.A.copy()
                Ar.sum_duplicates()
                Ar.eliminate_zeros()
                idx = np.flatnonzero(np.diff(Ar.indptr) == 1)
                first = Ar.indptr[idx]
                ok = (Ar.indices[first] == mult[idx]) & (new.b[idx] == 0) & (Ar.data[first] > 0)
                s_idx, alpha = idx[ok], Ar.data[first][ok]
                if s_idx.size:
                    xr = new.take(s_idx, np.full(s_idx.size, -1))
                    xr.kind = "xlogx"
                    out.rows.append((xr, sp.csr_matrix((-w[s_idx] / alpha, (e[s_idx], np.arange(s_idx.size))),
                                                       shape=(m, s_idx.size))))
                    keep = np.setdiff1d(keep, s_idx)
                    new = new.take(keep)
            if keep.size:
                out.rows.append((new, sp.csr_matrix((w[keep], (e[keep], np.arange(keep.size))),
                                                    shape=(m, keep.size))))
        for grp, e, g, w, mult in joined(other.lse):
            out.lse.append((grp.take_groups(g, mult, _first_index(shape)[e]), sp.csr_matrix((w, (e, np.arange(g.size))),
                                                                     shape=(m, g.size))))
        return out

    # --- nonlinear atoms -----------------------------------------------------------------
    def affine_arg(self, expr, arg):
        z = self.trace(arg)
        if not z.is_affine:
            self.fail(expr, f"the argument `{arg}` of `{type(expr).__name__}` must be affine")
        return z

    def atom_node(self, kind, z, coef, shape, A2=None, b2=None):
        """Node with one ``kind`` row per entry of affine ``z`` and weights ``coef``."""
        rows = _Rows(kind, z.A, z.c, None, A2, b2, _first_index(z.shape))
        W = sp.diags(np.broadcast_to(np.asarray(coef, dtype=float), (z.m,))).tocsr()
        return _Node(shape, self.n, rows=[(rows, W)])

    def _power(self, expr, shape, p=None):
        if p is None:
            p = float(np.asarray(expr.p.value if hasattr(expr.p, "value") else expr.p))
        if p == 1:
            return self.trace(expr.args[0])
        if p == 0:
            return self.const_node(shape, 1.0)
        if p != 2:
            self.fail(expr, f"power with exponent {p:g} (only 2 is recognised)")
        return self.atom_node("square", self.affine_arg(expr, expr.args[0]), 1.0, shape)

    _Power = _power
    _PowerApprox = _power

    def _square(self, expr, shape):
        return self._power(expr, shape, 2.0)

    def _exp(self, expr, shape):
        return self.atom_node("exp", self.affine_arg(expr, expr.args[0]), 1.0, shape)

    def _log(self, expr, shape):
        return self.atom_node("neglog", self.affine_arg(expr, expr.args[0]), -1.0, shape)

    def _log1p(self, expr, shape):
        z = self.affine_arg(expr, expr.args[0])
        return self.atom_node("neglog", _Node(z.shape, self.n, z.A, z.c + 1.0), -1.0, shape)

    def _entr(self, expr, shape):
        return self.atom_node("xlogx", self.affine_arg(expr, expr.args[0]), -1.0, shape)

    def _rel_entr(self, expr, shape):
        xa, ya = expr.args
        zx, zy = self.affine_arg(expr, xa), self.affine_arg(expr, ya)
        zx = zx.apply(_broadcast_matrix(zx.shape, shape), shape) if zx.shape != shape else zx
        zy = zy.apply(_broadcast_matrix(zy.shape, shape), shape) if zy.shape != shape else zy
        xlogx = self.atom_node("xlogx", zx, 1.0, shape)
        logy = self.atom_node("neglog", zy, -1.0, shape)
        return _add([xlogx, self.product(expr, zx, logy, shape).scale(-1.0)], shape)

    def _kl_div(self, expr, shape):
        rel = self._rel_entr(expr, shape)
        zx, zy = [self.trace(a) for a in expr.args]
        zx = zx.apply(_broadcast_matrix(zx.shape, shape), shape) if zx.shape != shape else zx
        zy = zy.apply(_broadcast_matrix(zy.shape, shape), shape) if zy.shape != shape else zy
        return _add([rel, zx.scale(-1.0), zy], shape)

    def _quad_over_lin(self, expr, shape):
        xa, ya = expr.args
        z = self.affine_arg(expr, xa)
        pos, m_out = _axis_groups(z.shape, getattr(expr, "axis", None))
        S = sp.csr_matrix((np.ones(z.m), (pos, np.arange(z.m))), shape=(m_out, z.m))
        if not self.has_vars(ya):
            y = float(np.asarray(self.const_value(ya)).ravel()[0])
            if y <= 0:
                raise InputDataError(f"{self.where}: `{expr}` needs a positive denominator, got {y!r}")
            node = self.atom_node("square", z, 1.0 / y, z.shape)
            return node.apply(S, shape)
        zy = self.affine_arg(expr, ya)
        if zy.m != 1:
            self.fail(expr, "quad_over_lin with a non-scalar denominator")
        A2 = sp.csr_matrix(sp.vstack([zy.A] * z.m)) if z.m > 1 else zy.A
        node = self.atom_node("quad_over_lin", z, 1.0, z.shape, A2, np.full(z.m, zy.c[0]))
        return node.apply(S, shape)

    def _QuadForm(self, expr, shape):
        xa, Pa = expr.args
        if self.has_vars(Pa):
            self.fail(expr, "quad_form with a non-constant matrix")
        P = self.const_value(Pa)
        P = 0.5 * (P + P.T)
        z = self.affine_arg(expr, xa)
        n = self.n
        Ps = sp.csr_matrix(P)
        M = (z.A.T @ Ps @ z.A).tocoo()
        Q = [(_QTerms(M.row, M.col), sp.csr_matrix((M.data, (np.zeros(M.nnz, int), np.arange(M.nnz))),
                                                   shape=(1, M.nnz)))]
        lin = sp.csr_matrix(2.0 * (Ps @ z.c)[None, :]) @ z.A
        return _Node(shape, n, lin, np.array([z.c @ (P @ z.c)]), Q)

    def _log_sum_exp(self, expr, shape):
        z = self.affine_arg(expr, expr.args[0])
        pos, m_out = _axis_groups(z.shape, expr.axis)
        order = np.argsort(pos, kind="stable")
        grp = _Lse(z.A[order], z.c[order], pos[order], None, _first_index(shape)[:m_out])
        return _Node(shape, self.n, lse=[(grp, sp.identity(m_out, format="csr"))])

    def _logistic(self, expr, shape):
        z = self.affine_arg(expr, expr.args[0])
        m = z.m
        # rows 2e (zero) and 2e+1 (z_e) form group e: log(exp(0) + exp(z_e))
        perm = sp.csr_matrix((np.ones(m), (2 * np.arange(m) + 1, np.arange(m))), shape=(2 * m, m))
        A = perm @ z.A
        b = perm @ z.c
        grp = _Lse(A, b, np.repeat(np.arange(m), 2), None, _first_index(z.shape))
        return _Node(shape, self.n, lse=[(grp, sp.identity(m, format="csr"))])


def _index_names(name, shape):
    if not shape:
        return [name]
    idx = np.indices(shape).reshape(len(shape), -1)  # C order
    return [f"{name}[{','.join(str(int(t)) for t in col)}]" for col in idx.T]


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

    def load(self, x):
        x = np.asarray(x, dtype=float).ravel()
        if x.size != len(self.names):
            raise ValueError(f"solution has {x.size} entries, the problem has {len(self.names)} variables")
        for var, off in zip(self.variables, self.offsets):
            shape = _shape(var)
            vals = x[off:off + _size(shape)].reshape(shape, order="C") if shape else x[off]
            try:
                var.value = vals
            except ValueError:  # a solver's tiny bound violation: store without cvxpy's check
                var.save_value(np.asarray(vals, dtype=float))

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
            raise ModelStructureError(f"variable `{var.name()}` has the attribute {a}=True, which varopt does "
                                      "not support (continuous unstructured variables only)")
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


def compile_cvxpy(problem):
    """Compile ``problem`` (a ``cvxpy.Problem``) into ``(Program, CvxpyMapping)``.

    Program variables are the entries of ``problem.variables()`` (each in C order),
    named like Pyomo (``t``, ``x[0]``, ``phi[0,1]``). A maximisation is stored negated
    with ``program.maximize = True``. Raises :class:`ModelStructureError` for anything
    outside the recognised catalogue (module docstring) and :class:`InputDataError` for
    NaN/inf data or parameters without value.
    """
    import cvxpy as cp
    from cvxpy.constraints import Equality, Inequality, NonNeg, NonPos, Zero

    variables = problem.variables()
    offsets, names, lbs, ubs, x0s = [], [], [], [], []
    var_cols = {}
    used = set()
    off = 0
    for var in variables:
        shape = _shape(var)
        m = _size(shape)
        base = var.name()
        if base in used:
            base = f"{base}_{var.id}"
        used.add(base)
        names += _index_names(base, shape)
        lb, ub = _variable_bounds(var, "variable")
        lbs.append(lb)
        ubs.append(ub)
        val = var.value
        if val is None:
            x0s.append(np.full(m, np.nan))
        else:
            x0s.append(np.broadcast_to(np.asarray(val, dtype=float), shape).ravel(order="C"))
        # F-order entry -> C-order program column
        var_cols[id(var)] = off + (np.arange(m).reshape(shape, order="C").ravel(order="F") if shape
                                   else np.zeros(1, dtype=np.int64))
        offsets.append(off)
        off += m
    n = off
    tracer = _Tracer(var_cols, n)

    obj = problem.objective
    maximize = isinstance(obj, cp.Maximize)
    tracer.where = "objective"
    z = tracer.trace(obj.args[0])
    if z.m != 1:
        raise ModelStructureError(f"objective: `{obj.args[0]}` is not scalar (shape {z.shape})")
    if maximize:
        z = z.scale(-1.0)
    objective = _to_expressions(z, n)[0]

    constraints = []
    for k, con in enumerate(problem.constraints):
        tracer.where = f"constraint {k} ({con})"
        if isinstance(con, (Inequality, Equality)):
            lhs, rhs = con.args
            shape = np.broadcast_shapes(_shape(lhs), _shape(rhs))
            # ``c <= g`` (e.g. ``x >= 0``) is kept as ``c <= g(x)``, anything else as ``lhs - rhs <= 0``
            flip = not tracer.has_vars(lhs) and tracer.has_vars(rhs)
            if flip:
                body = _add([tracer.trace(rhs), tracer.trace(lhs).scale(-1.0)], shape)
            else:
                body = _add([tracer.trace(lhs), tracer.trace(rhs).scale(-1.0)], shape)
            lo_inf = not flip and isinstance(con, Inequality)
            hi_inf = flip and isinstance(con, Inequality)
        elif isinstance(con, (Zero, NonNeg, NonPos)):
            body = tracer.trace(con.args[0])
            lo_inf, hi_inf = isinstance(con, NonPos), isinstance(con, NonNeg)
        else:
            raise ModelStructureError(f"{tracer.where}: constraints of type {type(con).__name__} are not "
                                      "supported (only <=, >= and == between expressions)")
        shape = body.shape
        exprs = _to_expressions(body, n, order_c=True)
        labels = _index_names(f"c{k}", shape)
        for lab, e in zip(labels, exprs):
            const = e.constant
            e.constant = 0.0
            lo = -np.inf if lo_inf else -const
            hi = np.inf if hi_inf else -const
            constraints.append(Constraint(lab, e, lo, hi))

    program = Program(names, np.concatenate(lbs) if lbs else np.zeros(0),
                      np.concatenate(ubs) if ubs else np.zeros(0), objective, constraints, maximize,
                      x0=np.concatenate(x0s) if x0s else np.zeros(0))
    return program, CvxpyMapping(variables, offsets, names)


def _to_expressions(z, n, order_c=False):
    """One :class:`Expression` per entry of node ``z`` (F order, or C order if asked).

    Every weight matrix is split by entry in one vectorized pass (stacked columns), so
    the per-entry work is only building the small :class:`Expression` objects.
    """
    m = z.m
    entries = np.arange(m)
    if order_c and z.shape:
        entries = np.arange(m).reshape(z.shape, order="F").ravel(order="C")
    A = sp.csr_matrix(z.A)
    A.sum_duplicates()

    def stacked(pairs, get):
        """Concatenate the objects' per-column arrays and hstack the weights (csr m x total)."""
        pairs = [(o, W) for o, W in pairs if W.nnz]
        if not pairs:
            return None, None
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
    lsesets = [(g, sp.csr_matrix(V)) for g, V in z.lse if V.nnz]
    # one shared (never mutated) empty term set: building one per constraint costs ~0.1 ms each
    empty_q = QuadraticTerms(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), n)

    out = []
    for e in entries:
        lin = np.zeros(n)
        lo, hi = A.indptr[e], A.indptr[e + 1]
        lin[A.indices[lo:hi]] = A.data[lo:hi]
        quad = empty_q
        if WQ is not None and WQ.indptr[e + 1] > WQ.indptr[e]:
            sl = slice(WQ.indptr[e], WQ.indptr[e + 1])
            t = WQ.indices[sl]
            quad = QuadraticTerms(qi[t], qj[t], WQ.data[sl], n)
        atoms = [AtomGroup(r.kind, W.data[sl], sub.A, sub.b, sub.mult, sub.A2, sub.b2, sub.label)
                 for r, W, sl, sub in _entries(rowsets, e, lambda r, idx: r.take(idx))]
        lses = [LseGroup(sub.A, sub.b, sub.seg, V.data[sl], sub.mult, sub.label)
                for g, V, sl, sub in _entries(lsesets, e, lambda g, idx: g.take_groups(idx))]
        out.append(Expression(n, float(z.c[e]), lin, quad, atoms, lses))
    return out
