r"""CVXPY tracer, part 4: divisions by variables, means and p-norms as exact auxiliary columns.

These are the nonlinear forms users write that are neither an atom of an affine argument nor a product
(:mod:`.cvxpy_products`). Each is compiled into auxiliary columns with *equality* defining rows
(:mod:`varopt.program.lifting`), so the lifted program has the same feasible set and objective as the user's
model in every position -- minimised or maximised, either side of a constraint, DCP or not -- and gop's spatial
tree certifies it (McCormick relaxations of the bilinear rows, tangents and secants of the power atoms):

=================================  ==========================================================================
CVXPY                              columns and rows
=================================  ==========================================================================
``v / d``, ``d`` non-constant      ``t`` with ``t d - v == 0`` (a ``ratio`` column, one per entry; the
                                   Pyomo front-end's rule, :mod:`.pyomo_powers`); ``d`` must be sign-definite
                                   on the box the variables' bounds and single-variable constraints give
                                   (:mod:`varopt.program.aux_bounds`), else refused
``geo_mean(x, p)``                 weights ``w_i = k_i / D`` (CVXPY's own rational weights ``expr.w``): the
                                   ``2^m >= D`` leaves ``x_i`` (``k_i`` times) and ``1`` (``2^m - D`` times)
                                   paired up a balanced binary tree of ``sqrt`` columns ``s = sqrt(a b)``
                                   (``a b - s^2 == 0``, ``s >= 0``), so the root is ``r = prod x_i^(k_i/2^m)``
                                   and ``geo_mean = r^(2^m / D)`` (a ``power`` atom row, none when ``D = 2^m``);
                                   rows ``x_i >= 0`` (CVXPY's domain)
``pnorm(x, p)``, ``p > 1``         ``a_i = sqrt(x_i^2) = |x_i|`` (a ``sqrt`` column; ``x_i`` itself when its
                                   bounds keep it >= 0), ``q == sum_i a_i^p`` (a ``product`` column defined by
                                   ``power(p)`` rows), ``||x||_p = q^(1/p)``
``pnorm(x, p)``, ``p < 1``         ``q == sum_i x_i^p`` and ``q^(1/p)`` (``x >= 0`` for ``0 < p < 1``, ``x > 0``
                                   for ``p < 0``: the power atoms' domains, CVXPY's)
``harmonic_mean(x)``               CVXPY's ``n * pnorm(x, -1)``
``xexp(x)``                        ``x * exp(x)`` (a product row, no column) and the rows ``x >= 0``
=================================  ==========================================================================

Why equality columns and not CVXPY's hypograph cones (``t <= sqrt(x y)``): those are exact only where the mean
is maximised, and gop is a global solver that users call on non-DCP models too; the equalities cost the tree
nothing more than the cones' bilinear rows, and the means' values stay recomputable from the user's variables
(:func:`varopt.program.lifting.complete`).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from ..program.atoms import ATOMS
from ..program.powers import power_kind
from .cvxpy_nodes import _add, _axis_groups, _broadcast_matrix, _group_matrix, _Node

#: largest common denominator of geo_mean weights compiled as a tree of square roots: CVXPY's own (its weights are
#: rationals with denominators up to ``max_denom = 1024``). The leaves are sorted by entry, so a pair of equal leaves
#: collapses (``sqrt(a a) = a``) and each level has at most one mixed pair per entry: about ``n log2(D)`` columns
MAX_GEO_DENOMINATOR = 1024


class _RatioTracer:
    """Mixin of the complete tracer (:class:`~.cvxpy_atoms._Tracer`): the rules of the module docstring."""

    def _ratio_init(self):
        if not hasattr(self, "ratio_dens"):
            #: first column of a ratio block -> the denominator node
            self.ratio_dens = {}
            #: auxiliary columns that get interval bounds (varopt.program.aux_bounds) and the part they are in
            self.bounded_aux = {}
            #: domain rows ``(node, lo)``: ``node >= lo`` entrywise
            self.domain_rows = []

    def _columns_node(self, cols, shape):
        m = cols.size
        return _Node(shape, self.n, sp.csr_matrix((np.ones(m), (np.arange(m), cols)), shape=(m, self.n)))

    def _bounded_columns(self, k, kind, definition, expr):
        self._ratio_init()
        cols = self._aux_columns(k, kind, definition, expr)
        for c in cols.tolist():
            self.bounded_aux[c] = self.where
        return cols

    def _broadcast(self, z, shape):
        return z.apply(_broadcast_matrix(z.shape, shape), shape) if z.shape != shape else z

    # --- divisions ------------------------------------------------------------------
    def _DivExpression(self, expr, shape):
        num, den = expr.args
        if not self.has_vars(den):
            return super()._DivExpression(expr, shape)
        zd = self._broadcast(self.lifted_arg(expr, den), shape)
        zn = self._broadcast(self.trace(num), shape)
        return self.ratio_node(expr, zn, zd, shape)

    def ratio_node(self, expr, zn, zd, shape):
        """``t_e = zn_e / zd_e`` per entry: a ``ratio`` column with the row ``t_e zd_e - zn_e == 0``."""
        cols = self._bounded_columns(zd.m, "ratio", zn, expr)
        self.ratio_dens[int(cols[0])] = zd
        return self._columns_node(cols, shape)

    # --- geometric means --------------------------------------------------------------
    def _geo_mean(self, expr, shape, outer=1.0):
        """``geo_mean(x, p)`` as a balanced tree of ``sqrt`` columns (module docstring); ``geo_mean(x, p)^outer``
        (``inv_prod(x) = geo_mean(x)^(-n)``) as one power ``r^(outer 2^m / D)`` of the tree's root ``r >= 0``."""
        if getattr(expr, "axis", None) is not None:
            self.fail(expr, "geo_mean with an axis (write one geo_mean per slice)")
        z = self.affine_arg(expr, expr.args[0])
        keep = np.flatnonzero(np.broadcast_to(np.asarray(getattr(expr, "_keep", True)), (z.m,)))
        w = [wi if isinstance(wi, Fraction) else Fraction(float(wi)).limit_denominator(MAX_GEO_DENOMINATOR)
             for wi in expr.w]
        if any(abs(float(a) - float(b)) > 1e-12 for a, b in zip(w, expr.w)) or len(w) != keep.size:
            self.fail(expr, f"geo_mean with the weights {tuple(float(b) for b in expr.w)}, which are not ratios of "
                            f"integers with a denominator up to {MAX_GEO_DENOMINATOR}")
        D = math.lcm(*[f.denominator for f in w])
        if D > MAX_GEO_DENOMINATOR:
            self.fail(expr, f"geo_mean whose weights have the common denominator {D} (more than "
                            f"{MAX_GEO_DENOMINATOR}: the exact tree of square roots would need up to {D} columns); "
                            "round the weights p to small integers")
        self._ratio_init()
        sel = sp.csr_matrix((np.ones(keep.size), (np.arange(keep.size), keep)), shape=(keep.size, z.m))
        zk = z.apply(sel, (keep.size,))
        self.domain_rows.append((zk, 0.0))   # CVXPY's domain x >= 0 (a sqrt row alone allows x_a, x_b < 0)
        leaves = [("x", i) for i, f in enumerate(w) for _ in range(int(f * D))]
        size = 1 << max(0, (D - 1).bit_length())
        leaves += [("one",)] * (size - D)
        nodes = {("one",): self.const_node((1,), 1.0)}
        for i in range(keep.size):
            nodes[("x", i)] = zk.apply(sp.csr_matrix(([1.0], ([0], [i])), shape=(1, keep.size)), (1,))
        while len(leaves) > 1:
            nxt = []
            for a, b in zip(leaves[::2], leaves[1::2]):
                if a == b:                  # sqrt(a a) = a for a >= 0
                    nxt.append(a)
                    continue
                e = nodes[b] if a == ("one",) else nodes[a] if b == ("one",) else self.product(expr, nodes[a],
                                                                                               nodes[b], (1,))
                cols = self._bounded_columns(1, "sqrt", e, expr)
                key = ("col", int(cols[0]))
                nodes[key] = self._columns_node(cols, (1,))
                nxt.append(key)
            leaves = nxt
        root = nodes[leaves[0]]
        p = outer * size / D
        if p == 1:
            return _Node(shape, self.n, root.A, root.c, root.Q, root.rows, root.lse)
        if p == 2:
            return self.atom_node("square", root, 1.0, shape)
        kern = ATOMS[power_kind(p)]
        return self.atom_node(kern.kind, root, kern.sign, shape)

    _GeoMean = _geo_mean
    _GeoMeanApprox = _geo_mean

    # --- p-norms other than 1, 2, inf -------------------------------------------------
    def general_pnorm(self, expr, p, shape):
        """``(sum_i |x_i|^p)^(1/p)`` per output entry: ``q == sum_i a_i^p`` (``a_i = |x_i|`` for ``p > 1``,
        ``x_i`` on the power atoms' domain otherwise) and the power ``q^(1/p)``."""
        z = self.lifted_arg(expr, expr.args[0])
        if p > 1 and not (float(p).is_integer() and int(p) % 2 == 0):
            nonneg = self._nonneg_entries(z)
            if not nonneg.all():
                # |x_i| = sqrt(x_i^2), a column >= 0, for the entries not kept >= 0 by their bounds
                idx = np.flatnonzero(~nonneg)
                sel = sp.csr_matrix((np.ones(idx.size), (np.arange(idx.size), idx)), shape=(idx.size, z.m))
                sq = self.atom_node("square", z.apply(sel, (idx.size,)), 1.0, (idx.size,))
                cols = self._bounded_columns(idx.size, "sqrt", sq, expr)
                keepsel = sp.diags(nonneg.astype(float), format="csr")
                put = sp.csr_matrix((np.ones(idx.size), (idx, np.arange(idx.size))), shape=(z.m, idx.size))
                z = _add([z.apply(keepsel, z.shape), self._columns_node(cols, (idx.size,)).apply(put, z.shape)],
                         z.shape)
        kern = ATOMS[power_kind(p)]
        S = _group_matrix(*_axis_groups(z.shape, getattr(expr, "axis", None)))
        qdef = self.atom_node(kern.kind, z, kern.sign, z.shape).apply(S, (S.shape[0],))
        cols = self._bounded_columns(S.shape[0], "product", qdef, expr)
        q = self._columns_node(cols, (cols.size,))
        if p == 0.5:                        # q^2, the square atom (q >= 0: a sum of square roots)
            return self.atom_node("square", q, 1.0, shape)
        outer = ATOMS[power_kind(1.0 / p)]
        return self.atom_node(outer.kind, q, outer.sign, shape)

    def _nonneg_entries(self, z, user_bounds=True):
        """Entries of the affine node ``z`` that the lower bounds keep >= 0 (nonnegative coefficients on columns with
        finite lower bounds: user columns with declared bounds unless ``user_bounds`` is False, and the ``sqrt``
        columns of 2-norms, which are >= 0 by construction)."""
        lb = getattr(self, "user_lb", None)
        out = np.zeros(z.m, dtype=bool)
        if lb is None:
            return out
        lb = np.concatenate([lb if user_bounds else np.full(lb.size, -np.inf), np.full(self.n - lb.size, -np.inf)])
        for cols, kind, _, _ in self.aux:
            if kind == "sqrt":
                lb[cols] = 0.0
        A = z.A.tocsr()
        for e in range(z.m):
            js, vs = A.indices[A.indptr[e]:A.indptr[e + 1]], A.data[A.indptr[e]:A.indptr[e + 1]]
            if (vs >= 0).all() and np.isfinite(lb[js]).all():
                out[e] = float(vs @ lb[js]) + z.c[e] >= 0 if js.size else z.c[e] >= 0
        return out

    # --- x exp(x) ---------------------------------------------------------------------
    def _xexp(self, expr, shape):
        """``xexp(u) = u exp(u)``: the product of ``u`` with an ``exp`` row of ``u`` (a multiplier inside its own atom,
        which gop's spatial tree relaxes; not GOP's biconvex class), on CVXPY's domain ``u >= 0`` (a row)."""
        z = self.affine_arg(expr, expr.args[0])
        self._ratio_init()
        self.domain_rows.append((z, 0.0))
        return self.product(expr, z, self.atom_node("exp", z, 1.0, z.shape), shape)
