"""CVXPY tracer, part 1: the tree walk, constants and the affine (linear) atoms.

:class:`_AffineTracer` walks a CVXPY expression tree and turns every sub-expression into
a :class:`~varopt.frontends.cvxpy_nodes._Node`. It dispatches on the CVXPY class name
(``_<ClassName>`` handler methods, some defined by the subclasses in
:mod:`.cvxpy_products` and :mod:`.cvxpy_atoms`). Affine atoms are linear maps ``L`` on
the node: ``+ -``, sums over axes, trace, division and products with constants
(``vec(C Y) = (I kron C) vec(Y)``, ``vec(Y C) = (C^T kron I) vec(Y)``), selection-like
atoms (matrix read off the atom's ``numeric`` applied to 1-based entry indices), and any
other affine atom on at most ``_PROBE_LIMIT`` input entries (matrix probed column by
column on unit vectors). Constants and parameters are checked for NaN/inf here.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, ModelStructureError
from ..core.csr import dense_to_csr
from .cvxpy_nodes import (_Node, _add, _broadcast_matrix, _csr_raw, _empty, _label_terms, _repeat_diag,
                          _selection_matrix, _shape, _size, _stack)

# classes whose ``numeric`` only selects / copies / zero-fills entries of its arguments
_SELECTION = {"index", "special_index", "transpose", "reshape", "Promote", "broadcast_to", "diag_vec",
              "diag_mat", "upper_tri", "Hstack", "Vstack", "Concatenate", "Stack", "Squeeze", "conj",
              "real", "psd_wrap", "symmetric_wrap", "hermitian_wrap", "skew_symmetric_wrap", "vec",
              "permute_dims", "moveaxis", "swapaxes"}
# other linear atoms whose matrix is probed column by column (small inputs only)
_PROBE_LIMIT = 4000



# CVXPY rewrites some functions into internal classes (``cp.sqrt(x)`` is ``PowerApprox(x, 0.5)``,
# ``cp.norm(x, 2)`` ``PnormApprox``, ``cp.geo_mean`` ``GeoMeanApprox``); messages show the
# public function the user can look up instead (CVXPY < 1.9 also prints ``cp.norm(x, 3)`` as ``Pnorm(x, 3)``).
_INTERNAL = re.compile(r"\b([A-Z][A-Za-z]*)Approx\b|\b(Pnorm)(?=\()")


def _public(text: str) -> str:
    """``text`` with CVXPY's internal ``...Approx`` class names replaced by the public function names."""
    return _INTERNAL.sub(lambda m: re.sub(r"(?<!^)([A-Z])", r"_\1", m.group(1) or m.group(2)).lower(), text)


def _shorten(text: str, keep: int = 160) -> str:
    """``text`` cut in the middle when longer than ``keep`` characters (an expression with constant data
    prints every entry)."""
    text = " ".join(text.split())
    if len(text) <= keep:
        return text
    return f"{text[:keep * 2 // 3]} ... {text[-(keep // 3):]}"


#: ``isinstance(expr, Variable)`` by ``type(expr)`` (CVXPY's classes are ABCs: an isinstance test costs several
#: times a dictionary look-up, and the walk makes one or two per node)
_IS_VARIABLE = {}


@functools.cache
def _cvxpy_classes():
    """CVXPY's ``Variable``, ``Constant``, ``Parameter`` and ``AffAtom``, imported once (four import statements per
    compile cost ~10 us; CVXPY is imported only when the user's program imports it)."""
    from cvxpy.atoms.affine.affine_atom import AffAtom
    from cvxpy.expressions.constants.constant import Constant
    from cvxpy.expressions.constants.parameter import Parameter
    from cvxpy.expressions.variable import Variable
    return Variable, Constant, Parameter, AffAtom


#: CVXPY atoms that its public functions build (the name a user looks for)
_WRITTEN_BY = {"one_minus_pos": "cp.diff_pos", "eye_minus_inv": "cp.resolvent", "Prod": "cp.prod",
               "MatrixFrac": "cp.matrix_frac", "lambda_max": "cp.lambda_max or cp.lambda_min",
               "lambda_sum_largest": "cp.lambda_sum_largest or cp.lambda_sum_smallest",
               "quantum_rel_entr": "cp.quantum_rel_entr or cp.quantum_cond_entr"}


def _unsupported(expr, name):
    """The refusal of an atom no varopt solver takes: its name, the CVXPY function that builds it, and why (its class
    in CVXPY's own rules: a semidefinite-cone atom, a log-log (DGP) or quasiconvex (DQCP) one)."""
    from cvxpy.atoms import PSD_ATOMS

    def atom_is(test):
        try:
            return bool(getattr(expr, test)())
        except Exception:  # an atom without the test (or one that needs its arguments' signs)
            return False
    shown = f"`{name}`" + (f" (built by {_WRITTEN_BY[name]})" if name in _WRITTEN_BY else "")
    if isinstance(expr, tuple(PSD_ATOMS)):
        why = "it needs a semidefinite cone, which no varopt solver handles"
    elif not (atom_is("is_atom_convex") or atom_is("is_atom_concave")) and (
            atom_is("is_atom_log_log_convex") or atom_is("is_atom_log_log_concave")):
        why = "it is a log-log (DGP, gp=True) atom, not a function varopt compiles"
    elif not (atom_is("is_atom_convex") or atom_is("is_atom_concave")) and (
            atom_is("is_atom_quasiconvex") or atom_is("is_atom_quasiconcave")):
        why = "it is a quasiconvex/quasiconcave (DQCP, qcp=True) atom, not a function varopt compiles"
    else:
        why = "varopt has no rule for it"
    return (f"the atom {shown} is not supported by any varopt solver: {why}; solve this problem with one of CVXPY's "
            "solvers (prob.solve()), or write it with the atoms varopt.frontends.cvxpy_compile lists")


class _AffineTracer:
    """Tree walk over CVXPY expressions; subclasses add products and nonlinear atoms."""

    def __init__(self, var_cols, n, aux_capacity=0):
        self.var_cols = var_cols  # id(variable) -> (F-order entry -> program column)
        self.n_user = n
        # columns n .. n + aux_capacity - 1 are reserved for auxiliary variables (lifted products and
        # norms, varopt.program.lifting); the compiler re-traces with more room when they run out
        self.n = n + aux_capacity
        self.aux = []  # (columns, kind, definition node, term text)
        self.n_aux = 0
        self.where = "objective"
        self._const_cache = {}
        self._var_rows = {}
        self._memo = {}
        # the CVXPY classes the walk tests nodes against (imported on the first compile)
        self._Variable, self._Constant, self._Parameter, self._AffAtom = _cvxpy_classes()

    # --- errors -----------------------------------------------------------------------
    @property
    def where(self):
        """The part being traced, for error messages: ``objective`` or ``constraint k (text)``. A constraint is
        set as ``(k, constraint)`` and its text formatted only when a message needs it (CVXPY's ``str`` of a
        constraint walks its expression tree: ~15 us each, more than tracing a small constraint)."""
        w = self._where
        return w if isinstance(w, str) else f"constraint {w[0]} ({w[1]})"

    @where.setter
    def where(self, value):
        self._where = value

    def fail(self, expr, reason):
        raise ModelStructureError(f"{self.where}: cannot compile `{_shorten(_public(str(expr)))}`: {_public(reason)}")

    # --- helpers ----------------------------------------------------------------------
    def has_vars(self, expr):
        key = id(expr)
        v = self._const_cache.get(key)
        if v is None:
            v = self.is_variable(expr)
            if not v:
                for a in expr.args:  # (a loop, not any() over a generator: this runs for every node)
                    if self.has_vars(a):
                        v = True
                        break
            self._const_cache[key] = v
        return v

    def is_variable(self, expr):
        """``isinstance(expr, cvxpy.Variable)``, decided once per class."""
        t = type(expr)
        v = _IS_VARIABLE.get(t)
        if v is None:
            v = _IS_VARIABLE[t] = isinstance(expr, self._Variable)
        return v

    def const_value(self, expr):
        Parameter = self._Parameter
        val = expr.value
        if val is None:
            params = [p for p in expr.parameters()] if hasattr(expr, "parameters") else []
            missing = [p.name() for p in params if p.value is None] or [str(expr)]
            raise InputDataError(f"{self.where}: parameter {missing[0]!r} has no value")
        if type(val) is not np.ndarray:  # (CVXPY's constants are float arrays: no further test for them)
            if sp.issparse(val):
                val = val.toarray()
            val = np.asarray(val)
        if val.dtype.kind == "c":
            self.fail(expr, "complex data is not supported")
        val = val.astype(float, copy=False)  # never written to: CVXPY's own float array is used as it is
        if np.count_nonzero(np.isfinite(val)) != val.size:
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
        if isinstance(expr, self._Constant) and sp.issparse(expr.value):
            M = sp.csr_matrix(expr.value, dtype=float)
            if not np.all(np.isfinite(M.data)):
                bad = "NaN" if np.isnan(M.data).any() else "inf"
                raise InputDataError(f"{self.where}: sparse constant of shape {M.shape} contains {bad}")
            return M.reshape(shape2d) if M.shape != shape2d else M
        val = self.const_value(expr)
        shape = _shape(expr)
        # (np.broadcast_to only when CVXPY's value has another shape: it costs ~5 us)
        return dense_to_csr((val if val.shape == shape else np.broadcast_to(val, shape)).reshape(shape2d))

    def const_node(self, shape, val):
        val = np.asarray(val, dtype=float)
        # the node's own entries (never a view of the user's constant), broadcast when the shapes differ
        shape = tuple(shape)
        m = _size(shape)
        if val.shape == shape:
            c = val.flatten(order="F")
        elif val.size == 1:  # a scalar repeated (np.broadcast_to costs ~5 us)
            c = np.full(m, float(val.reshape(-1)[0]))
        else:
            c = np.broadcast_to(val, shape).ravel(order="F")
        return _Node._make(shape, m, self.n, _empty(m, self.n), c, [], [], [])

    # --- the tree walk ------------------------------------------------------------------
    def trace(self, expr):
        """The node of ``expr``. A sub-expression used twice (``Z`` in ``log_sum_exp(Z) - sum(multiply(Y, Z))``) is
        traced once: nodes are never modified after they are built. The memo holds ``expr`` itself, so its id
        cannot be reused by a temporary; subtrees that allocated auxiliary columns are not memoized."""
        hit = self._memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        n_aux = len(self.aux)
        node = self._trace_new(expr)
        if len(self.aux) == n_aux:
            self._memo[id(expr)] = (expr, node)
        return node

    def _trace_new(self, expr):
        shape = _shape(expr)
        if self.is_variable(expr):
            A = self._var_rows.get(id(expr))
            if A is None:
                # one entry per row: the csr arrays directly (no coo conversion); shared by every occurrence
                # of the variable (nodes never modify their matrices in place)
                cols = self.var_cols[id(expr)]
                A = _csr_raw(np.ones(cols.size), cols, np.arange(cols.size + 1), (cols.size, self.n))
                A._varopt_selection = True  # distinct columns: a variable's entries are distinct program columns
                self._var_rows[id(expr)] = A
            return _Node._make(shape, A.shape[0], self.n, A, np.zeros(A.shape[0]), [], [], [])
        if not self.has_vars(expr):
            return self.const_node(shape, self.const_value(expr))
        name = type(expr).__name__
        handler = getattr(self, "_" + name, None)
        if handler is not None:
            return handler(expr, shape)
        if name in _SELECTION:
            return self._selection(expr, shape)
        if isinstance(expr, self._AffAtom) and expr.is_atom_affine():
            return self._probe(expr, shape)
        self.fail(expr, _unsupported(expr, name))

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

    def _index(self, expr, shape):
        """``x[key]`` with integers and slices only (``theta[:5]``): numpy's basic indexing of the entry numbers by
        the user's key (what CVXPY's ``index.numeric`` applies, ``get_data()[1]``), distinct entries (a selection),
        without the 1-based float arrays of :meth:`_selection`, which takes every other key."""
        data = expr.get_data()
        key = data[1] if isinstance(data, (list, tuple)) and len(data) == 2 else None
        parts = key if isinstance(key, tuple) else (key,)
        if key is None or not all(type(k) is slice or isinstance(k, (int, np.integer)) for k in parts):
            return self._selection(expr, shape)
        z = self.trace(expr.args[0])
        src = np.asarray(np.arange(z.m).reshape(_shape(expr.args[0]), order="F")[key]).ravel(order="F")
        if src.size != _size(shape):
            return self._selection(expr, shape)
        return z.take(src, shape)  # the unit selection, without its matrix

    def _reshape(self, expr, shape):
        """``reshape(x, shape, order)`` (also ``vec``): output entry ``e`` (column-major, as nodes store entries) is
        input entry ``src[e]`` of numpy's reshape of the entry numbers (what CVXPY's ``numeric`` applies) -- no
        1-based float arrays through CVXPY. In column-major order, and whenever ``src`` is the identity (a row or
        column vector in either order), the node is the argument's with the new shape: its matrices are shared
        (nodes are never modified in place), no product."""
        data = expr.get_data()
        order = data[1] if isinstance(data, (list, tuple)) and len(data) == 2 else None
        z = self.trace(expr.args[0])
        m = z.m
        if order not in ("F", "C") or m != _size(shape):
            return self._selection(expr, shape)
        src = np.arange(m).reshape(z.shape, order="F").reshape(shape, order=order).ravel(order="F")
        if order == "F" or np.array_equal(src, np.arange(m)):
            return _Node(shape, self.n, z.A, z.c, list(z.Q), list(z.rows), list(z.lse))
        return z.take(src, shape)  # a permutation

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
        if len(nodes) > 1 and not any(d != 1 for d in shape):
            nodes = _label_terms(nodes)
        return _add(nodes, shape)

    def _Promote(self, expr, shape):
        """A scalar repeated to ``shape`` (CVXPY's ``b`` in ``X @ w + b``): one column of ones."""
        z = self.trace(expr.args[0])
        if z.m != 1:
            return self._selection(expr, shape)
        return z.take(np.zeros(_size(shape), np.int64), shape)

    def _NegExpression(self, expr, shape):
        return self.trace(expr.args[0]).scale(-1.0)

    def _Sum(self, expr, shape):
        return self.trace(expr.args[0]).reduce(expr.axis, shape)

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
            L = _repeat_diag(Ca, r)  # vec(C Y) = (I kron C) vec(Y)
            return self.trace(b).apply(L, shape)
        if not self.has_vars(b):
            Cb = self.const_matrix(b, pb)
            L = Cb.T.tocsr() if p == 1 else sp.kron(Cb.T, sp.identity(p), format="csr")  # vec(Y C) = (C^T kron I) vec(Y)
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
