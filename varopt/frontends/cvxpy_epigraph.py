"""CVXPY tracer, part 4: piecewise-linear convex atoms as epigraph columns (:mod:`varopt.program.epigraph_lift`).

* ``max(u, axis)``, ``maximum(a, b, ...)`` (elementwise, broadcast), ``pos(u) = maximum(u, 0)``: one column
  ``t >= piece`` per output entry; ``min``, ``minimum``, ``neg(u) = -minimum(u, 0)`` as ``-max`` of the negated
  pieces;
* ``norm_inf(u, axis)`` (also ``norm(u, 'inf')``): ``t >= u_i``, ``t >= -u_i``;
* ``sum_largest(u, k, axis)``: ``k t + sum_i s_i`` with ``s_i >= u_i - t``, ``s_i >= 0``; ``sum_smallest`` as its
  negative; ``k >= `` the entry count is the plain sum;
* ``huber(u, M)``: ``s^2 + 2 M r`` with ``r >= |u - s|`` (``s`` free);
* ``cummax(u, axis)``: one column per entry, the maximum of its prefix along ``axis``;
* ``dotsort(u, w)`` (constant ``w``): ``sum_k (w_k - w_{k+1}) sum_largest(u, k) + w_n sum(u)`` over the sorted ``w``.

The pieces are traced nodes (any recognised expression; the rows ``piece - t <= 0`` are then what the solver sees).
Each column's rows are recorded in :attr:`epi_rows` for the compiler, which checks the convex position of every
column once the whole problem is traced (:func:`varopt.program.epigraph_lift.check_positions`).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError
from ..program import Constraint
from ..program.epigraph_lift import EpigraphRule
from ..program.lifting import AuxVariable
from .cvxpy_affine import _public, _shorten
from .cvxpy_nodes import _Node, _add, _axis_groups, _broadcast_matrix, _group_matrix, _stack


class _EpigraphTracer:
    """Handlers of the piecewise-linear atoms; mixed into the complete tracer (it provides :meth:`trace`,
    :meth:`_aux_columns` and :meth:`atom_node`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.epi_rows = []   # (rows node: every entry <= 0, columns the rows define, term text)
        self.epi_rules = []  # (columns, rule kind, pieces node, piece -> column position, k, M, role, term text)
        self._no_split = False  # True while trace_unsplit re-traces an atom's argument

    def _epi_columns(self, k, rule, pieces, expr, pos, kth=None, M=None, role="epi", floor=-np.inf):
        """``k`` new epigraph columns; column ``g`` is ``rule`` (:class:`~varopt.program.epigraph_lift.EpigraphRule`)
        of the pieces ``pieces_i`` with ``pos_i = g`` (resolved into expressions by the compiler); ``floor``: a lower
        bound the rows imply beyond their constant pieces (``norm_inf >= 0``)."""
        cols = self._aux_columns(k, "epigraph", None, expr)
        self.epi_rules.append((cols, rule, pieces, np.asarray(pos, dtype=np.int64), kth, M, role,
                               _shorten(_public(str(expr))), floor))
        return cols

    def _columns_node(self, cols, shape):
        m = cols.size
        return _Node(shape, self.n, sp.csr_matrix((np.ones(m), (np.arange(m), cols)), shape=(m, self.n)))

    def epi_max(self, expr, pieces, pos, m_out, shape, exempt=(), floor=-np.inf):
        """Node of ``t_g = max_{k: pos_k = g} pieces_k`` (``m_out`` new columns, F order of ``shape``) with the rows
        ``pieces_k - t_{pos_k} <= 0``."""
        pieces = _reshaped(pieces, (pieces.m,))
        pos = np.asarray(pos, dtype=np.int64)
        cols = self._epi_columns(m_out, "max", pieces, expr, pos, floor=floor)
        T = sp.csr_matrix((-np.ones(pos.size), (np.arange(pos.size), cols[pos])), shape=(pos.size, self.n))
        rows = _add([pieces, _Node((pos.size,), self.n, T)], (pos.size,))
        self.epi_rows.append((rows, frozenset(cols.tolist()) | frozenset(exempt), _shorten(_public(str(expr)))))
        return self._columns_node(cols, shape)

    def _flat(self, expr, arg, shape=None):
        z = self.trace(arg)
        if shape is not None and z.shape != tuple(shape):
            z = z.apply(_broadcast_matrix(z.shape, shape), shape)
        return z

    def _max(self, expr, shape, sign=1.0):
        z = self._flat(expr, expr.args[0])
        pos, m_out = _axis_groups(z.shape, getattr(expr, "axis", None))
        return self.epi_max(expr, z.scale(sign), pos, m_out, shape).scale(sign)

    def _min(self, expr, shape):
        return self._max(expr, shape, -1.0)

    def _maximum(self, expr, shape, sign=1.0):
        nodes = [self._flat(expr, a, shape) for a in expr.args]
        if "abs" in self.native_atoms and len(nodes) == 2 and not self._no_split:
            split = self.abs_split(nodes[0].scale(sign), nodes[1].scale(sign), shape)
            if split is not None:
                return split.scale(sign)
        m = nodes[0].m
        pos = np.tile(np.arange(m), len(nodes))
        return self.epi_max(expr, _stack([z.scale(sign) for z in nodes]), pos, m, shape).scale(sign)

    def _minimum(self, expr, shape):
        return self._maximum(expr, shape, -1.0)

    def trace_unsplit(self, arg):
        """The node of ``arg`` where an atom needs an affine argument: a hinge inside it that :meth:`abs_split` made
        nonlinear is traced again as its epigraph column (an affine node), with a memo of its own so that the split
        nodes memoized elsewhere are not reused; the solver then judges the columns as it would without the split."""
        z = self.trace(arg)
        if z.is_affine or self._no_split:
            return z
        memo, self._memo, self._no_split = self._memo, {}, True
        try:
            return self.trace(arg)
        finally:
            self._memo, self._no_split = memo, False

    def abs_split(self, a, b, shape):
        """``max(a, b) = (a + b)/2 + |a - b|/2`` per entry, for a solver that lists ``abs`` in its
        :attr:`~varopt.registry.Solver.native_atoms` (ipsa, klprox): a hinge ``pos(u) = maximum(u, 0)`` of an affine
        ``u`` is then a linear term and one ``abs`` row of ``u`` (a function of one affine predictor, which those
        solvers need; the epigraph column ``t >= u, t >= 0`` is not), exactly. None (the epigraph form) unless both
        are affine and every entry of ``a - b`` depends on a variable (a constant entry has no ``abs`` row)."""
        if not (a.is_affine and b.is_affine):
            return None
        d = _add([a, b.scale(-1.0)], shape)
        if d.m == 0 or not np.all(np.diff(d.A.indptr) > 0):
            return None
        return _add([_add([a, b], shape).scale(0.5), self.abs_node(d, shape).scale(0.5)], shape)

    def _norm_inf(self, expr, shape):
        z = self._flat(expr, expr.args[0])
        pos, m_out = _axis_groups(z.shape, getattr(expr, "axis", None))
        return self.epi_max(expr, _stack([z, z.scale(-1.0)]), np.concatenate([pos, pos]), m_out, shape, floor=0.0)

    def _cummax(self, expr, shape):
        """``cummax(u, axis)_k = max(u_0, ..., u_k)`` along ``axis``: one epigraph column per entry, the maximum of its
        prefix (rows ``u_j - t_k <= 0``, ``j <= k``)."""
        z = self._flat(expr, expr.args[0])
        if not z.shape:
            return z
        idx = np.moveaxis(np.arange(z.m).reshape(z.shape, order="F"), int(expr.axis or 0), 0)
        src = np.concatenate([idx[j].ravel() for k in range(idx.shape[0]) for j in range(k + 1)])
        pos = np.concatenate([idx[k].ravel() for k in range(idx.shape[0]) for j in range(k + 1)])
        sel = sp.csr_matrix((np.ones(src.size), (np.arange(src.size), src)), shape=(src.size, z.m))
        return self.epi_max(expr, z.apply(sel, (src.size,)), pos, z.m, shape)

    def _dotsort(self, expr, shape):
        """``dotsort(u, w) = <sort(u), sort(w)>`` (both descending, ``w`` padded with zeros) as the nonnegative
        combination ``sum_k (w_k - w_{k+1}) sum_largest(u, k) + w_n sum(u)`` (Abel summation of the sorted sums), each
        ``sum_largest`` the epigraph columns above: exact where it is minimised, as every convex epigraph atom."""
        ua, wa = expr.args
        if self.has_vars(wa):
            self.fail(expr, "dotsort with a non-constant second argument")
        z = self._flat(expr, ua)
        n = z.m
        w = np.asarray(self.const_value(wa), dtype=float).ravel()
        if w.size > n:
            self.fail(expr, f"dotsort with more weights ({w.size}) than entries ({n})")
        # padded with zeros first (CVXPY's definition), then sorted: a negative weight sorts below the zeros
        w = np.sort(np.concatenate([w, np.zeros(n - w.size)]))[::-1]
        one = np.zeros(n, dtype=np.int64)
        terms = [self.sum_largest_node(expr, z, float(k), one, 1).scale(w[k - 1] - w[k])
                 for k in range(1, n) if w[k - 1] > w[k]]
        if w[-1] != 0:
            terms.append(z.apply(_group_matrix(one, 1), (1,)).scale(w[-1]))
        return _reshaped(_add(terms, (1,)) if terms else self.const_node((1,), 0.0), shape)

    def _sum_largest(self, expr, shape, sign=1.0):
        z = self._flat(expr, expr.args[0])
        k = float(np.asarray(expr.k.value if hasattr(expr.k, "value") else expr.k))
        pos, m_out = _axis_groups(z.shape, getattr(expr, "axis", None))
        S = _group_matrix(pos, m_out)
        size = int(np.bincount(pos, minlength=m_out).min()) if pos.size else 0
        if not np.isfinite(k) or k <= 0:
            raise InputDataError(f"{self.where}: `{_public(str(expr))}` needs a positive k, got {k!r}")
        if k >= size:  # every entry counts: the sum (the LP below would be unbounded in t for k > size)
            return z.apply(S, shape).scale(sign)
        return _reshaped(self.sum_largest_node(expr, z.scale(sign), k, pos, m_out), shape).scale(sign)

    def sum_largest_node(self, expr, u, k, pos, m_out):
        """``sum_largest`` of the entries ``u_i`` with ``pos_i = g``, per output entry ``g`` (``k`` below the group
        size): ``k t_g + sum_i s_i`` with the epigraph columns ``t``, ``s``."""
        u = _reshaped(u, (u.m,))
        cols = self._epi_columns(m_out, "kth", u, expr, pos, kth=k)
        t = self._columns_node(cols, (m_out,))
        # s_i >= u_i - t_{pos_i} and s_i >= 0 (the rows of s exempt t: there t is the threshold, not a maximum)
        tp = t.apply(sp.csr_matrix((np.ones(pos.size), (np.arange(pos.size), pos)), shape=(pos.size, m_out)),
                     (pos.size,))
        pieces = _stack([_add([u, tp.scale(-1.0)], (u.m,)), _Node((u.m,), self.n)])
        s = self.epi_max(expr, pieces, np.tile(np.arange(u.m), 2), u.m, (u.m,), exempt=cols.tolist())
        return _add([t.scale(k), s.apply(_group_matrix(pos, m_out), (m_out,))], (m_out,))

    def _huber(self, expr, shape):
        z = self._flat(expr, expr.args[0])
        if self.has_vars(expr.M):
            self.fail(expr, "huber with a variable threshold M")
        M = float(np.asarray(self.const_value(expr.M)).ravel()[0])
        if not np.isfinite(M) or M < 0:
            raise InputDataError(f"{self.where}: `{_public(str(expr))}` needs a finite threshold M >= 0, got {M!r}")
        u = _reshaped(z, (z.m,))
        scols = self._epi_columns(z.m, "clip", u, expr, np.arange(z.m), M=M, role="free")
        s = self._columns_node(scols, (z.m,))
        d = _add([u, s.scale(-1.0)], (z.m,))
        r = self.epi_max(expr, _stack([d, d.scale(-1.0)]), np.tile(np.arange(z.m), 2), z.m, (z.m,),
                         exempt=scols.tolist())
        return _reshaped(_add([self.atom_node("square", s, 1.0, (z.m,)), r.scale(2.0 * M)], (z.m,)), shape)


def _reshaped(z, shape):
    """The node ``z`` (flattened, F order) with the output ``shape`` (same entry count; parts shared)."""
    return _Node(shape, z.n, z.A, z.c, list(z.Q), list(z.rows), list(z.lse))


def epigraph_parts(tracer, n, to_expressions):
    """``(aux, rows, roles)`` of the traced epigraph atoms: the :class:`~varopt.program.lifting.AuxVariable` of every
    epigraph column (with its :class:`~varopt.program.epigraph_lift.EpigraphRule`), the rows ``piece - t <= 0`` as
    ``(Constraint, columns they define)`` and ``{column: (role, term)}`` for the position check.
    ``to_expressions(node)`` splits a node into one expression per entry."""
    aux, roles = [], {}
    for cols, rule, pieces, pos, k, M, role, text, floor in tracer.epi_rules:
        exprs = to_expressions(pieces)
        order = np.argsort(pos, kind="stable")
        bounds = np.searchsorted(pos[order], np.arange(cols.size + 1))
        for g, col in enumerate(cols.tolist()):
            mine = [exprs[i] for i in order[bounds[g]:bounds[g + 1]].tolist()]
            aux.append(AuxVariable(col, "epigraph", None, text, f"_aux_epigraph[{col - tracer.n_user}]_def",
                                   rule=EpigraphRule(rule, mine, k, M)))
            # t >= every constant piece (pos: t >= 0)
            consts = [e.constant for e in mine if rule == "max" and e.is_linear and not e.linear_items()[0].size]
            roles[col] = (role, text, max([floor] + consts))
    rows = []
    for node, exempt, text in tracer.epi_rows:
        for e in to_expressions(node):
            const = e.constant
            e.constant = 0.0
            rows.append((Constraint(f"_epigraph[{len(rows)}] ({text[:60]})", e, -np.inf, -const), exempt))
    return aux, rows, roles
