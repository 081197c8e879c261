"""CVXPY tracer, part 3: recognition of the nonlinear atoms.

Each handler takes an affine argument ``u = A x + b`` and returns a node of atom rows or
log-sum-exp groups (catalogue kinds of :mod:`varopt.program.terms`):

* ``square``/``power(., 2)`` -> ``square`` rows; ``power(., 1)`` and ``power(., 0)`` are
  folded; ``quad_over_lin(u, y)`` -> ``square`` rows with weight ``1/y`` for a positive
  constant ``y``, ``quad_over_lin`` rows for an affine scalar ``y``;
* ``quad_form(u, P)`` with constant ``P`` -> ``u^T P_s u`` with ``P_s = (P + P^T)/2``,
  i.e. quadratic terms ``x^T A^T P_s A x``, linear ``2 b^T P_s A x`` and constant ``b^T P b``;
* ``abs`` -> ``abs`` rows (elementwise); ``norm1(u, axis)`` -> the sums of ``abs`` rows;
* ``norm(u, 2)**2``/``square(norm(u))`` -> ``sum_squares(u)``'s ``square`` rows (per output entry with ``axis``);
* ``norm(u, 2)``/``norm2``/``norm(U, 'fro')`` (``pnorm``, ``p = 2``) -> an auxiliary ``t = sqrt(sum u^2)``
  per output entry, ``power(e, 0.5)``/``sqrt(e)`` -> ``t = sqrt(e)`` (:mod:`varopt.program.lifting`);
* a square, ``abs``, ``norm1``, 2-norm or ``sum_squares`` argument with products of variables
  (``A - W @ H``) gets an auxiliary ``q == products`` per entry (the atom then applies to ``a + q``);
* ``power(u, p)`` for other ``p`` (``inv_pos(u) = power(u, -1)``) -> ``power(p)`` rows
  (:mod:`varopt.program.powers`), on CVXPY's domain;
* ``exp`` -> ``exp`` rows; ``log(u)`` and ``log1p(u) = log(1 + u)`` -> ``neglog`` rows with
  coefficient ``-1``; ``entr(u) = -u log u`` -> ``xlogx`` rows with coefficient ``-1``;
* ``rel_entr(x, y) = x log x - x log y``, ``kl_div(x, y) = rel_entr(x, y) - x + y``;
* ``log_sum_exp(u, axis)`` -> one group per output entry; ``logistic(z) = log(exp 0 + exp z)``.
* ``log(c + sum_r w_r exp(u_r))`` (``c, w_r >= 0``: ``log(1 + exp(z))``, ``log1p(exp(z))``, ``log(sum(exp(u)))``
  written from the formula, as in Pyomo models) -> one log-sum-exp group per entry, ``log c`` its constant entry.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..core.csr import take_rows
from ..errors import InputDataError
from ..program.atoms import ATOMS
from ..program.powers import power_kind
from .cvxpy_affine import _public
from .cvxpy_epigraph import _EpigraphTracer
from .cvxpy_hinge import _HingeTracer
from .cvxpy_nodes import (_Lse, _Node, _QTerms, _Rows, _add, _axis_groups, _broadcast_matrix, _csr_raw, _diagonal,
                          _first_index, _group_matrix)
from .cvxpy_products import _ProductTracer
from .cvxpy_ratios import _RatioTracer


class NeedAux(Exception):
    """Raised when the reserved auxiliary columns run out; carries the number needed so far."""

    def __init__(self, needed):
        super().__init__(needed)
        self.needed = needed


class _Tracer(_HingeTracer, _RatioTracer, _EpigraphTracer, _ProductTracer):
    """The complete CVXPY tracer: tree walk, linear atoms, products, nonlinear atoms and epigraph atoms."""

    # --- auxiliary variables (varopt.program.lifting) ---------------------------------
    def _aux_columns(self, k, kind, definition, expr):
        cols = self.n_user + self.n_aux + np.arange(k, dtype=np.int64)
        self.n_aux += k
        if self.n_user + self.n_aux > self.n:
            raise NeedAux(self.n_aux)
        self.aux.append((cols, kind, definition, _public(str(expr))))
        return cols

    def lifted_arg(self, expr, arg):
        """The argument as an affine node; entries with products of variables (``A - W @ H``) get an
        auxiliary ``q_e == quadratic part of entry e``, and the node uses ``q_e`` instead."""
        z = self.trace_unsplit(arg)
        if z.is_affine:
            return z
        if z.has_nonlinear:
            self.fail(expr, f"the argument `{arg}` of `{type(expr).__name__}` must be affine or affine plus "
                      "products of variables")
        return self.lift_quadratic(expr, z)

    def lift_quadratic(self, expr, z, bounded=False):
        """``z`` (affine plus products of variables) as an affine node: each entry with products gets an auxiliary
        ``q_e == quadratic part of entry e``. ``bounded``: the columns get the interval of their products over the
        box (:mod:`varopt.program.aux_bounds`), which the spatial tree needs when ``q_e`` is itself a factor of a
        product (``x * y * z`` as ``q * z``)."""
        WQ = sp.hstack([W for _, W in z.Q], format="csr")
        WQ.eliminate_zeros()
        ent = np.flatnonzero(np.diff(WQ.indptr) > 0)
        if ent.size == 0:
            return _Node(z.shape, self.n, z.A, z.c)
        sel = sp.csr_matrix((np.ones(ent.size), (np.arange(ent.size), ent)), shape=(ent.size, z.m))
        qdef = _Node(z.shape, self.n, Q=z.Q).apply(sel, (ent.size,))
        cols = (self._bounded_columns if bounded else self._aux_columns)(ent.size, "product", qdef, expr)
        E = sp.csr_matrix((np.ones(ent.size), (ent, cols)), shape=(z.m, self.n))
        return _Node(z.shape, self.n, z.A + E, z.c)

    def sqrt_node(self, expr, z, shape):
        """One auxiliary ``t_e = sqrt(z_e) >= 0`` per entry of ``z`` (row ``z_e - t_e^2 == 0``)."""
        cols = self._aux_columns(z.m, "sqrt", z, expr)
        return _Node(shape, self.n, sp.csr_matrix((np.ones(z.m), (np.arange(z.m), cols)), shape=(z.m, self.n)))

    def affine_arg(self, expr, arg):
        z = self.trace_unsplit(arg)
        if not z.is_affine:
            self.fail(expr, f"the argument `{arg}` of `{type(expr).__name__}` must be affine")
        return z

    def atom_node(self, kind, z, coef, shape, A2=None, b2=None):
        """Node with one ``kind`` row per entry of affine ``z`` and weights ``coef``."""
        rows = _Rows(kind, z.A, z.c, None, A2, b2, _first_index(z.shape))
        if np.ndim(coef) == 0:
            W = _diagonal(coef, z.m)
        else:
            W = _diagonal(np.broadcast_to(np.asarray(coef, dtype=float), (z.m,)))
        return _Node(shape, self.n, rows=[(rows, W)])

    def _power(self, expr, shape, p=None):
        if p is None:
            p = float(np.asarray(expr.p.value if hasattr(expr.p, "value") else expr.p))
        if p == 1:
            return self.trace(expr.args[0])
        if p == 0:
            return self.const_node(shape, 1.0)
        if type(expr.args[0]).__name__ in ("GeoMean", "GeoMeanApprox"):
            # geo_mean(x)^p is the root column of the mean's tree to one combined power (cp.inv_prod(x) is
            # CVXPY's power(geo_mean(x), -n)): no column for the mean itself
            return self._geo_mean(expr.args[0], shape, outer=p)
        if p == 0.5:
            return self.sqrt_node(expr, self.trace(expr.args[0]), shape)
        if p != 2:
            return self.power_node(expr, p, shape)
        arg = expr.args[0]
        hinge = self.sqpos_node(arg, shape) if self.native_atoms else None
        if hinge is not None:   # square(pos(u)): sqpos rows for a solver that takes them (.cvxpy_hinge)
            return hinge
        if type(arg).__name__ in ("Pnorm", "PnormApprox") and float(arg.p) == 2:
            # norm(u, 2)**2 = sum_k u_k^2 (the usual way to write an L2 penalty or a Gaussian prior): square rows,
            # as sum_squares, instead of an auxiliary t = sqrt(sum u^2) that only gop handles
            inner = arg.args[0]
            hinge = self.sqpos_node(inner, inner.shape) if self.native_atoms else None
            if hinge is not None:   # norm(pos(u), 2)**2 = sum_squares(pos(u)): sqpos rows (.cvxpy_hinge)
                return hinge.reduce(getattr(arg, "axis", None), shape)
            z = self.lifted_arg(arg, inner)
            return self.atom_node("square", z, 1.0, z.shape).reduce(getattr(arg, "axis", None), shape)
        return self.atom_node("square", self.lifted_arg(expr, arg), 1.0, shape)

    def power_node(self, expr, p, shape):
        """``power(u, p)`` -> ``power(p)`` atom rows ``s u^p`` with coefficient ``s`` (:mod:`varopt.program.powers`:
        ``s = -1`` for ``0 < p < 1``, where ``-u^p`` is the convex kernel). The kernel's domain is CVXPY's
        (``u >= 0`` for ``p`` in ``(0, 1)`` or ``p > 1`` not a power of 2; ``u > 0`` for ``p < 0``; ``inv_pos(u)`` is
        ``power(u, -1)``), except for even exponents that are not powers of 2, where CVXPY restricts to ``u >= 0``
        a function that is convex on all ``u``: refused rather than solved with another domain."""
        if float(p).is_integer() and p > 2 and int(p) % 2 == 0 and int(p) & (int(p) - 1):
            self.fail(expr, f"power with the even exponent {p:g}, which is not a power of 2: CVXPY defines it for "
                            f"u >= 0 only; write cp.power(cp.power(u, 2), {p / 2:g}) or add u >= 0 explicitly with "
                            "a power of 2")
        kern = ATOMS[power_kind(p)]
        return self.atom_node(kern.kind, self.lifted_arg(expr, expr.args[0]), kern.sign, shape)

    _Power = _power
    _PowerApprox = _power

    def _square(self, expr, shape):
        return self._power(expr, shape, 2.0)

    def _exp(self, expr, shape):
        return self.atom_node("exp", self.affine_arg(expr, expr.args[0]), 1.0, shape)

    def _abs(self, expr, shape):
        return self.abs_node(self.lifted_arg(expr, expr.args[0]), shape)

    def abs_node(self, z, shape):
        """``|z|`` per entry: ``abs`` rows, except for the entries of 2-norms' columns (``|t| = t`` for ``t >= 0``:
        ``norm1`` of row norms, as ``mixed_norm(X, 2, 1)`` writes it, where an ``abs`` row of the column sent gop's
        tree after a sign the column cannot take). The user's own variables keep their ``abs`` rows even when declared
        ``>= 0``: the L1 solvers (proxsg's working set, majorize's lift) read the penalty from them."""
        nonneg = self._nonneg_entries(z, user_bounds=False) if z.m else np.zeros(0, dtype=bool)
        if not nonneg.any():
            return self.atom_node("abs", z, 1.0, shape)
        if nonneg.all():
            return _Node(shape, self.n, z.A, z.c)
        keep = _diagonal(nonneg.astype(float))
        return _add([z.apply(keep, shape), self.atom_node("abs", z, (~nonneg).astype(float), shape)], shape)

    def _norm1(self, expr, shape):
        z = self.lifted_arg(expr, expr.args[0])
        return self.abs_node(z, z.shape).reduce(getattr(expr, "axis", None), shape)

    def _pnorm(self, expr, shape):
        """``norm(u, 2)``, ``norm2``, ``norm(U, 'fro')`` (``pnorm`` with ``p = 2``, any axis):
        ``t = sqrt(sum_k u_k^2)`` per output entry; ``p = 1`` is ``norm1``."""
        p = float(expr.p)
        if p == 1:
            return self._norm1(expr, shape)
        if not np.isfinite(p):
            self.fail(expr, f"the {p:g}-norm here (norm_inf is recognised as an epigraph where it is minimised)")
        if p != 2:
            return self.general_pnorm(expr, p, shape)
        z = self.lifted_arg(expr, expr.args[0])
        S = _group_matrix(*_axis_groups(z.shape, getattr(expr, "axis", None)))
        return self.sqrt_node(expr, self.atom_node("square", z, 1.0, z.shape).apply(S, (S.shape[0],)), shape)

    _Pnorm = _pnorm
    _PnormApprox = _pnorm

    def _log(self, expr, shape, shift=0.0):
        """``log(u + shift)``: ``neglog`` rows for an affine ``u``, log-sum-exp groups for a sum of exponentials."""
        z = self.trace(expr.args[0])
        if shift:
            z = _Node(z.shape, self.n, z.A, z.c + shift, z.Q, z.rows, z.lse)
        if z.is_affine:
            return self.atom_node("neglog", z, -1.0, shape)
        grp = _exp_sum_groups(z)
        if grp is None:
            self.fail(expr, f"the argument `{expr.args[0]}` of `{type(expr).__name__}` must be affine, or a constant "
                      f">= {0.0 - shift:g} plus nonnegative multiples of exp(affine) (a log-sum-exp, as cp.logistic(z) = "
                      "log(1 + exp(z)) and cp.log_sum_exp(u))")
        return _Node(shape, self.n, lse=[(grp, _diagonal(1.0, z.m))])

    def _log1p(self, expr, shape):
        return self._log(expr, shape, 1.0)

    def _entr(self, expr, shape):
        return self.atom_node("xlogx", self.affine_arg(expr, expr.args[0]), -1.0, shape)

    def _rel_entr(self, expr, shape):
        """``x log x - x log y``; a constant ``y > 0`` makes ``-x log y`` linear and a constant ``x >= 0`` makes
        ``x log x`` a constant (no atom rows of a constant argument: as a product those became rows with a
        multiplier, ``x_j * -log(2)``, which gop refused and ipsa solved wrongly)."""
        xa, ya = expr.args
        zx, zy = self.affine_arg(expr, xa), self.affine_arg(expr, ya)
        zx = zx.apply(_broadcast_matrix(zx.shape, shape), shape) if zx.shape != shape else zx
        zy = zy.apply(_broadcast_matrix(zy.shape, shape), shape) if zy.shape != shape else zy
        for z, side, closed in ((zx, "first", True), (zy, "second", False)):
            if z.is_constant and not ((z.c >= 0) if closed else (z.c > 0)).all():
                raise InputDataError(f"{self.where}: `{_public(str(expr))}` needs a {'nonnegative' if closed else 'positive'}"
                                     f" {side} argument, got the constant {z.c[(z.c < 0) if closed else (z.c <= 0)][0]:g}")
        if zx.is_constant:
            with np.errstate(divide="ignore", invalid="ignore"):
                xlogx = self.const_node(shape, np.where(zx.c > 0, zx.c * np.log(np.where(zx.c > 0, zx.c, 1.0)), 0.0
                                                        ).reshape(shape, order="F"))
        else:
            xlogx = self.atom_node("xlogx", zx, 1.0, shape)
        if zy.is_constant:
            return _add([xlogx, zx.scale(-np.log(zy.c))], shape)
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
        axis = getattr(expr, "axis", None)
        if self.native_atoms and not self.has_vars(ya):
            y = float(np.asarray(self.const_value(ya)).ravel()[0])
            # sum_squares(pos(u)) = quad_over_lin(pos(u), 1): sqpos rows for a solver that takes them (.cvxpy_hinge)
            hinge = self.sqpos_node(xa, xa.shape, 1.0 / y) if y > 0 else None
            if hinge is not None:
                return hinge.reduce(axis, shape)
        z = self.lifted_arg(expr, xa)
        if not self.has_vars(ya):
            y = float(np.asarray(self.const_value(ya)).ravel()[0])
            if y <= 0:
                raise InputDataError(f"{self.where}: `{expr}` needs a positive denominator, got {y!r}")
            return self.atom_node("square", z, 1.0 / y, z.shape).reduce(axis, shape)
        zy = self.affine_arg(expr, ya)
        if zy.m != 1:
            self.fail(expr, "quad_over_lin with a non-scalar denominator")
        A2 = sp.csr_matrix(sp.vstack([zy.A] * z.m)) if z.m > 1 else zy.A
        return self.atom_node("quad_over_lin", z, 1.0, z.shape, A2, np.full(z.m, zy.c[0])).reduce(axis, shape)

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
        grp = _Lse(take_rows(z.A, order), z.c[order], pos[order], None, _first_index(shape)[:m_out])
        return _Node(shape, self.n, lse=[(grp, _diagonal(1.0, m_out))])

    def _logistic(self, expr, shape):
        z = self.affine_arg(expr, expr.args[0])
        m = z.m
        # rows 2e (zero) and 2e+1 (z_e) form group e: log(exp(0) + exp(z_e)); row 2e is empty, row 2e+1 is
        # row e of z.A (indptr p_0, p_0, p_1, p_1, ..., p_m)
        k = z.A.indptr[-1]
        A = _csr_raw(z.A.data[:k], z.A.indices[:k], np.repeat(z.A.indptr, 2)[:-1], (2 * m, self.n))
        b = np.zeros(2 * m)
        b[1::2] = z.c
        grp = _Lse(A, b, np.repeat(np.arange(m), 2), None, _first_index(z.shape))
        return _Node(shape, self.n, lse=[(grp, _diagonal(1.0, m))])


def _exp_sum_groups(z):
    """``log(c_e + sum_r w_er exp(a_r x + b_r))`` per entry ``e`` of ``z`` (``c_e >= 0``, ``w_er >= 0``: the way a
    user writes ``log(1 + exp(u))`` or ``log(sum(exp(u)))`` from the formula, as Pyomo models do) as log-sum-exp
    groups ``log sum exp(a_r x + b_r + log w_er)`` with one constant entry ``log c_e`` when ``c_e > 0``; None when
    ``z`` has another form (linear or quadratic parts, other atoms, negative weights, an entry that is a constant
    <= 0)."""
    if z.A.count_nonzero() or any(W.nnz for _, W in z.Q) or any(V.nnz for _, V in z.lse):
        return None
    if not np.all(z.c >= 0):
        return None
    A_parts, b_parts, seg_parts = [], [], []
    cpos = np.flatnonzero(z.c > 0)
    A_parts.append(sp.csr_matrix((cpos.size, z.n)))
    b_parts.append(np.log(z.c[cpos]))
    seg_parts.append(cpos)
    for rows, W in z.rows:
        if not W.nnz:
            continue
        if rows.kind != "exp" or rows.A2 is not None or np.any(rows.mult[np.unique(W.indices)] >= 0):
            return None
        Wc = W.tocoo()
        if np.any(Wc.data < 0):
            return None
        keep = Wc.data > 0
        e, r, w = Wc.row[keep], Wc.col[keep], Wc.data[keep]
        A_parts.append(take_rows(rows.A, r))
        b_parts.append(rows.b[r] + np.log(w))
        seg_parts.append(e)
    seg = np.concatenate(seg_parts).astype(np.int64)
    if np.unique(seg).size != z.m:          # an entry with nothing inside the log: log(0)
        return None
    order = np.argsort(seg, kind="stable")  # the constant entry first in its group (klprox's base entry)
    A = take_rows(sp.vstack(A_parts, format="csr"), order)
    return _Lse(A, np.concatenate(b_parts)[order], seg[order], None, _first_index(z.shape))

