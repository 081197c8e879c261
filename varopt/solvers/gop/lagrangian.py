r"""Block views of a program and the linearised Lagrangian of GOP (Saddiki, Trapp & Flaherty 2017, eqs. (7), (12)-(14)).

For a partition ``z = (x, y)`` every expression ``e`` (objective or constraint body) is split
into

* ``e_yy(y)``: the rows that depend on ``y`` only and are nonlinear (``y``-``y`` quadratic
  terms, atoms and log-sum-exp rows of ``y`` alone) -- convex in ``y``, shared by every
  Lagrangian and handled by the relaxed dual as a QP term / outer approximation;
* ``e_r(x, y)``: everything else. By the partition conditions ``e_r`` is *affine in y for
  fixed x* and convex in ``x``.

The Lagrangian of the primal problem at iteration ``k`` (multipliers ``lambda^k`` of the
constraints that involve ``x``; constraints of ``y`` alone stay in the relaxed dual) is

.. math::  L_k(x, y) = f(x, y) + \sum_c \lambda^k_c (g_c(x, y) - r_c),
           \qquad r_c = hi_c \text{ if } \lambda_c > 0 \text{ else } lo_c .

Its linearisation in ``x`` around the primal solution ``x^k`` is

.. math::  L_k(x^k, y) + \sum_i g^k_i(y) (x_i - x^k_i),\qquad g^k(y) = g_0 + G_1 y

(``g^k_i`` are the qualifying-constraint functions, Saddiki et al. 2017, eq. (13)). Because ``e_r`` is affine in
``y``, ``L_k(x^k, y) - f_{yy}(y) = const_k + a_k^T y`` exactly, and ``G_1`` is the mixed
Hessian block ``\partial^2 L / \partial x \partial y`` at ``x^k`` (constant in ``y``).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError
from ...program import Expression
from ...program.terms import AtomGroup, LseGroup, QuadraticTerms


def _sub_atom(g: AtomGroup, rows) -> AtomGroup:
    rows = np.asarray(rows, dtype=np.int64)
    return AtomGroup(g.kind, g.coef[rows], g.A[rows], g.b[rows], g.mult[rows],
                     None if g.A2 is None else g.A2[rows], None if g.b2 is None else g.b2[rows],
                     None if g.label is None else np.asarray(g.label)[rows])


def _lse_rows(g: LseGroup, groups):
    """``(rows, seg)``: the rows of the log-sum-exp ``groups`` of ``g`` (ordered by group) and their new
    group numbers ``0..len(groups)-1``."""
    ks = np.flatnonzero(np.isin(g.seg, groups))
    newid = np.full(g.coef.size, -1)
    newid[groups] = np.arange(groups.size)
    seg = newid[g.seg[ks]]
    order = np.argsort(seg, kind="stable")
    return ks[order], seg[order]


def _sub_lse(g: LseGroup, groups) -> LseGroup:
    groups = np.asarray(groups, dtype=np.int64)
    ks, seg = _lse_rows(g, groups)
    return LseGroup(g.A[ks], g.b[ks], seg, g.coef[groups], g.mult[groups])


def split_expression(e: Expression, is_x: np.ndarray):
    """Return ``(e_yy, e_r)`` (see the module docstring); both are Expressions over all variables."""
    n = e.n
    q = e.quadratic
    yy = (~is_x[q.i]) & (~is_x[q.j])
    Qyy = QuadraticTerms(q.i[yy], q.j[yy], q.v[yy], n)
    Qr = QuadraticTerms(q.i[~yy], q.j[~yy], q.v[~yy], n)
    atoms_yy, atoms_r, lse_yy, lse_r = [], [], [], []

    def split(g, row_vars, sub, yy_out, r_out):
        """Rows without a multiplier whose variables are all in the y block go to ``yy_out``."""
        rows_y = np.asarray([r for r in range(len(g))
                             if g.mult[r] < 0 and (vs := row_vars(r)).size and not is_x[vs].any()],
                            dtype=np.int64)
        rest = np.setdiff1d(np.arange(len(g)), rows_y)
        if rows_y.size:
            yy_out.append(sub(g, rows_y))
        if rest.size:
            r_out.append(sub(g, rest))

    for g in e.atoms:
        split(g, lambda r, g=g: (g.A[r].indices if g.A2 is None else np.union1d(g.A[r].indices, g.A2[r].indices)),
              _sub_atom, atoms_yy, atoms_r)
    for g in e.lse:
        ends = np.append(g.starts[1:], g.seg.size)
        split(g, lambda r, g=g, ends=ends: np.unique(g.A[g.starts[r]:ends[r]].indices), _sub_lse, lse_yy, lse_r)
    e_yy = Expression(n, 0.0, np.zeros(n), Qyy, atoms_yy, lse_yy)
    e_r = Expression(n, e.constant, e.linear.copy(), Qr, atoms_r, lse_r)
    return e_yy, e_r


def restrict(e: Expression, keep: np.ndarray, fixed: np.ndarray, vals: np.ndarray) -> Expression:
    """Substitute ``z[fixed] = vals`` into ``e``; return an Expression over ``z[keep]`` (in that order).

    Atom rows whose argument becomes constant turn into constants (or linear terms when their
    multiplier is kept); multipliers that are fixed scale the coefficient. A row whose
    coefficient becomes zero (a fixed multiplier at 0) is dropped.

    GOP restricts the same expression to the same block at every iteration with new values, so
    everything that depends only on ``(keep, fixed)`` (column selections, constant rows, index
    maps) is computed once and kept on ``e`` (:class:`_RestrictPlan`); only the values are
    substituted per call. ``tests/test_gop_restrict.py`` checks the result against a direct
    substitution.
    """
    keep = np.asarray(keep, dtype=np.int64)
    fixed = np.asarray(fixed, dtype=np.int64)
    if fixed.size == 0 and keep.size == e.n and np.array_equal(keep, np.arange(e.n)):
        # nothing fixed, the same order (a program without relaxed-dual variables): ``e`` itself (expressions are
        # not modified in place); a plan per row cost 0.65 s on a 2,000-row LP
        return e
    if keep.size == 0 and fixed.size == e.n:
        # everything fixed (the Lagrangian's y-part of a program without relaxed-dual variables): a constant
        z = np.zeros(e.n)
        z[fixed] = vals
        return Expression(0, e.value(z))
    plans = e.__dict__.setdefault("_restrict_plans", {})
    key = (keep.tobytes(), fixed.tobytes())
    plan = plans.get(key)
    if plan is None:
        if len(plans) > 64:  # a bounded cache: one entry per block/side in GOP
            plans.clear()
        plan = plans[key] = _RestrictPlan(e, keep, fixed)
    return plan(e, np.asarray(vals, dtype=float))


def _fast_atom_group(kind, coef, A, b, mult, A2, b2) -> AtomGroup:
    """An :class:`AtomGroup` from parts that are already validated (csr, float, aligned)."""
    g = object.__new__(AtomGroup)
    g.__dict__.update(kind=kind, coef=coef, A=A, b=b, mult=mult, A2=A2, b2=b2, label=None)
    return g


class _RestrictPlan:
    """The parts of :func:`restrict` that depend on ``(keep, fixed)`` only."""

    def __init__(self, e: Expression, keep: np.ndarray, fixed: np.ndarray):
        n = e.n
        m = keep.size
        self.n, self.m, self.fixed = n, m, fixed
        pos = np.full(n, -1, dtype=np.int64)
        pos[keep] = np.arange(m)
        isk = pos >= 0
        self.keep = keep
        q = e.quadratic
        ki, kj = isk[q.i], isk[q.j]
        both = ki & kj
        self.Q = QuadraticTerms(pos[q.i[both]], pos[q.j[both]], q.v[both], m)
        one_i = ki & ~kj  # x_i kept, x_j fixed
        one_j = kj & ~ki
        none = ~ki & ~kj
        self.q_lin = (np.concatenate([pos[q.i[one_i]], pos[q.j[one_j]]]),
                      np.concatenate([q.v[one_i], q.v[one_j]]),
                      np.concatenate([q.j[one_i], q.i[one_j]]))
        self.q_const = (q.v[none], q.i[none], q.j[none])
        Akeep = sp.csr_matrix((np.ones(m), (keep, np.arange(m))), shape=(n, m))
        self.atoms = []
        for g in e.atoms:
            A = (g.A @ Akeep).tocsr()
            A2 = None if g.A2 is None else (g.A2 @ Akeep).tocsr()
            has = g.mult >= 0
            mult0 = np.where(has, g.mult, 0)
            wfix = has & ~isk[mult0]
            newmult = np.where(has & ~wfix, pos[mult0], -1)
            nnz = np.diff(A.indptr) + (np.diff(A2.indptr) if A2 is not None else 0)
            crow = np.flatnonzero(nnz == 0)
            ccg = None
            if crow.size:
                ccg = AtomGroup(g.kind, np.zeros(crow.size), sp.csr_matrix((crow.size, m)), np.zeros(crow.size),
                                None, None if A2 is None else sp.csr_matrix((crow.size, m)),
                                None if A2 is None else np.zeros(crow.size))
            rows = np.flatnonzero(nnz != 0)
            self.atoms.append((g, np.flatnonzero(wfix), g.mult[wfix], newmult, crow, ccg, rows,
                               A[rows], None if A2 is None else A2[rows], newmult[rows], A, A2))
        self.lses = []
        for g in e.lse:
            A = (g.A @ Akeep).tocsr()
            has = g.mult >= 0
            mult0 = np.where(has, g.mult, 0)
            wfix = has & ~isk[mult0]
            newmult = np.where(has & ~wfix, pos[mult0], -1)
            rownnz = np.diff(A.indptr)
            starts = np.searchsorted(g.seg, np.arange(g.coef.size))
            gnnz = np.add.reduceat(rownnz, starts) if rownnz.size else rownnz
            cgroups = np.flatnonzero(gnnz == 0)
            kg = np.setdiff1d(np.arange(g.coef.size), cgroups)
            crows = np.flatnonzero(np.isin(g.seg, cgroups)) if cgroups.size else cgroups
            clg = None
            if cgroups.size:
                newid = np.full(g.coef.size, -1)
                newid[cgroups] = np.arange(cgroups.size)
                clg = LseGroup(sp.csr_matrix((crows.size, m)), np.zeros(crows.size), newid[g.seg[crows]],
                               np.ones(cgroups.size))
            ks = seg = None
            if kg.size:
                ks, seg = _lse_rows(g, kg)
            self.lses.append((g, np.flatnonzero(wfix), g.mult[wfix], newmult, cgroups, crows, clg, kg, ks, seg,
                              None if ks is None else A[ks]))

    def __call__(self, e: Expression, vals: np.ndarray) -> Expression:
        m = self.m
        full = np.zeros(self.n)
        full[self.fixed] = vals
        const = e.constant + float(e.linear[self.fixed] @ vals)
        lin = e.linear[self.keep].copy()
        li, lv, lj = self.q_lin
        if li.size:
            np.add.at(lin, li, lv * full[lj])
        cv, ci, cj = self.q_const
        if cv.size:
            const += float(np.sum(cv * full[ci] * full[cj]))
        atoms, lses = [], []
        for g, wfix, wmult, newmult, crow, ccg, rows, A_r, A2_r, nm_r, A, A2 in self.atoms:
            b = g.b + g.A @ full
            b2 = None if g.A2 is None else g.b2 + g.A2 @ full
            coef = g.coef.copy()
            if wfix.size:
                coef[wfix] *= full[wmult]
            if crow.size:
                ccg.coef = coef[crow]
                ccg.b = b[crow]
                if b2 is not None:
                    ccg.b2 = b2[crow]
                vals_r = ccg.row_values(np.zeros(m))
                cm = newmult[crow]
                const += float(np.sum(vals_r[cm < 0]))
                np.add.at(lin, cm[cm >= 0], vals_r[cm >= 0])
            if rows.size:
                c = coef[rows]
                nz = c != 0
                if nz.all():
                    atoms.append(_fast_atom_group(g.kind, c, A_r, b[rows], nm_r, A2_r,
                                                  None if b2 is None else b2[rows]))
                elif nz.any():
                    kr = rows[nz]
                    atoms.append(_fast_atom_group(g.kind, c[nz], A[kr], b[kr], newmult[kr],
                                                  None if A2 is None else A2[kr], None if b2 is None else b2[kr]))
        for g, wfix, wmult, newmult, cgroups, crows, clg, kg, ks, seg, A_k in self.lses:
            b = g.b + g.A @ full
            coef = g.coef.copy()
            if wfix.size:
                coef[wfix] *= full[wmult]
            if cgroups.size:
                clg.b = b[crows]
                vals_g = coef[cgroups] * clg.group_values(np.zeros(m))
                cm = newmult[cgroups]
                const += float(np.sum(vals_g[cm < 0]))
                np.add.at(lin, cm[cm >= 0], vals_g[cm >= 0])
            if kg.size:
                lses.append(LseGroup(A_k, b[ks], seg, coef[kg], newmult[kg]))
        return Expression(m, const, lin, self.Q, atoms, lses)


class MixedHessian:
    r"""``d^2 e / dx dy`` at ``z`` (dense ``nx x ny``) with the block slices precomputed.

    For an atom row ``c_r w_r g(u_r)``, ``u_r = A_r z + b_r`` (``w_r = z_{m_r}`` or 1) the Hessian is
    ``A^T diag(c w g'') A + E diag(c g') A + (E diag(c g') A)^T`` with ``E[m_r, r] = 1``; its
    ``(x, y)`` block is ``A_x^T diag(c w g'') A_y + E_x diag(c g') A_y + A_x^T diag(c g') E_y^T``.
    Quadratic terms contribute their constant block. Log-sum-exp and ``u^2/v`` groups use the
    general :meth:`hessian` of the group (rare in the relaxed-dual coupling).
    """

    def __init__(self, e: Expression, xi, yi, n):
        self.xi, self.yi = xi, yi
        nx, ny = xi.size, yi.size
        self.Hq = sp.csr_matrix(e.quadratic.hessian_matrix)[xi][:, yi].toarray()
        xpos = np.full(n, -1, dtype=np.int64)
        xpos[xi] = np.arange(nx)
        ypos = np.full(n, -1, dtype=np.int64)
        ypos[yi] = np.arange(ny)
        self.fast, self.slow = [], []
        for g in e.groups():
            if isinstance(g, LseGroup) or g.kernel.arity == 2:
                self.slow.append(g)
                continue
            A = sp.csr_matrix(g.A)
            Ax, Ay = A[:, xi].tocsr(), A[:, yi].tocsr()
            has = g.mult >= 0
            mx = np.where(has, xpos[np.where(has, g.mult, 0)], -1)  # local x index of the multiplier
            my = np.where(has, ypos[np.where(has, g.mult, 0)], -1)
            rx, ry = np.flatnonzero(mx >= 0), np.flatnonzero(my >= 0)
            self.fast.append((g, Ax, Ay, rx, mx[rx], ry, my[ry],
                              Ay[rx].tocsr() if rx.size else None, Ax[ry].tocsr() if ry.size else None))

    def __call__(self, z):
        nx, ny = self.xi.size, self.yi.size
        H = self.Hq.copy()
        for g, Ax, Ay, rx, mx, ry, my, Ay_rx, Ax_ry in self.fast:
            u, gv, d1, d2 = g._g(z, 2)
            w = np.ones(len(g))
            has = g.mult >= 0
            w[has] = z[g.mult[has]]
            s2 = g.coef * w * d2
            nz = np.flatnonzero((s2 != 0) & (np.diff(Ax.indptr) > 0) & (np.diff(Ay.indptr) > 0))
            if nz.size:
                H += (Ax[nz].T @ (Ay[nz].multiply(s2[nz][:, None]))).toarray()
            if rx.size:  # E_x diag(c g') A_y: multiplier in x, argument in y
                M = sp.csr_matrix((g.coef[rx] * d1[rx], (mx, np.arange(rx.size))), shape=(nx, rx.size))
                H += (M @ Ay_rx).toarray()
            if ry.size:  # A_x^T diag(c g') E_y^T: argument in x, multiplier in y
                M = sp.csr_matrix((g.coef[ry] * d1[ry], (np.arange(ry.size), my)), shape=(ry.size, ny))
                H += (Ax_ry.T @ M).toarray()
        for g in self.slow:
            H += sp.csr_matrix(g.hessian(z))[self.xi][:, self.yi].toarray()
        return H


def primal_row_error(program, is_x) -> str | None:
    """Why GOP's primal problems cannot take a constraint of ``program`` with the primal block ``is_x``, or None.

    A row that involves the primal block is dualised in the Lagrangian: it may not hold a nonlinear term of the
    relaxed-dual block alone, and it must be linear in the primal variables for fixed relaxed-dual ones (bilinear
    across the blocks is fine): no atom row, no product of two primal variables."""
    dual = []
    for c in program.constraints:
        if not (len(c.body.quadratic) or any(g for g in c.body.groups())):
            continue   # (a linear row: nothing to check, and most rows are)
        sup = c.body.support()
        if sup.size and is_x[sup].any():
            cyy = split_expression(c.body, is_x)[0]
            if len(cyy.quadratic) or cyy.atoms or cyy.lse:
                return (f"constraint {c.name}: mixes the primal block with a nonlinear term of the relaxed-dual "
                        f"block alone; varopt's GOP supports such terms only in the objective or in constraints "
                        f"of the relaxed-dual variables alone")
            dual.append(c)
    for c in dual:
        q = c.body.quadratic
        if any(g for g in c.body.groups()) or np.any(is_x[q.i] & is_x[q.j]):
            return (f"constraint {c.name}: nonlinear in the primal block; varopt's GOP primal supports "
                    f"constraints that are linear in the primal variables for fixed relaxed-dual variables "
                    f"(bilinear across the blocks is fine)")
    return None


class BlockModel:
    """Precomputed block structure of a program for a :class:`~.partition.Partition`.

    ``dual_cons``: indices of the constraints that involve ``x`` (dualised in the Lagrangian);
    ``y_cons``: constraints of ``y`` alone (kept in the relaxed dual, linear ones as rows and
    nonlinear convex ones through outer approximation).
    """

    def __init__(self, program, part):
        self.program = program
        self.part = part
        n = program.n
        self.n = n
        self.is_x = np.zeros(n, dtype=bool)
        self.is_x[part.x] = True
        msg = primal_row_error(program, self.is_x)
        if msg is not None:
            raise ModelStructureError(msg)
        self.xi, self.yi = part.x, part.y
        self.nx, self.ny = part.x.size, part.y.size
        self.conn = part.connected
        xpos = np.full(n, -1, dtype=np.int64)
        xpos[self.xi] = np.arange(self.nx)
        self.xpos = xpos
        self.conn_local = xpos[self.conn]
        self._mixed = {}  # id(expression) -> (expression, MixedHessian); the expression keeps the id alive
        self.obj_yy, self.obj_r = split_expression(program.objective, self.is_x)
        self.dual_cons, self.y_cons = [], []
        self.con_r = []
        for k, c in enumerate(program.constraints):
            sup = c.body.support()
            if sup.size and self.is_x[sup].any():
                _, cr = split_expression(c.body, self.is_x)
                self.dual_cons.append(k)
                self.con_r.append(cr)
            else:
                self.y_cons.append(k)
        self.dual_cons = np.asarray(self.dual_cons, dtype=np.int64)
        cons = program.constraints
        self.dual_lo = np.array([cons[k].lo for k in self.dual_cons], dtype=float)
        self.dual_hi = np.array([cons[k].hi for k in self.dual_cons], dtype=float)

    # ------------------------------------------------------------------ primal views
    def primal_expressions(self, yval):
        """Objective and dualised constraint bodies restricted to x for ``y = yval``."""
        f = restrict(self.program.objective, self.xi, self.yi, yval)
        cons = [restrict(self.program.constraints[k].body, self.xi, self.yi, yval) for k in self.dual_cons]
        return f, cons

    # ------------------------------------------------------------------ Lagrangian pieces
    def lagrangian(self, xk, yk, lam, feasibility=False):
        """Affine data of the linearised Lagrangian at ``x^k`` with multipliers ``lam``.

        Returns ``(const, a, g0, G1)``: ``L_k(x^k, y) = f_yy(y) + const + a^T y`` (without
        ``f_yy`` when ``feasibility``: the Lagrangian of the feasibility problem has no
        objective) and ``grad_x L_k(x^k, y) = g0 + G1 y`` (local x order, ``G1`` dense nx x ny).
        """
        z = np.zeros(self.n)
        z[self.xi] = xk
        exprs = [] if feasibility else [(1.0, self.obj_r, 0.0)]
        for lam_c, cr, lo, hi in zip(lam, self.con_r, self.dual_lo, self.dual_hi):
            if lam_c == 0.0:
                continue
            rc = hi if lam_c > 0 else lo
            if not np.isfinite(rc):
                # the sign projection of section 4 (docs/gop.md): a multiplier of the wrong sign for a one-sided row
                # (rounding: an equality written as two inequalities, x0 <= x1 and x0 >= x1, both active, got
                # multipliers of +-1e-23) is 0; its infinite side made the constant -inf (SolverBugError)
                continue
            exprs.append((float(lam_c), cr, rc))
        const = 0.0
        a = np.zeros(self.ny)
        g0 = np.zeros(self.nx)
        G1 = np.zeros((self.nx, self.ny))
        for w, e, rc in exprs:
            er = restrict(e, self.yi, self.xi, xk)
            if not er.is_linear:
                raise ModelStructureError("internal: the Lagrangian is not affine in the relaxed-dual block")
            const += w * (er.constant - rc)
            a += w * er.linear
            g0 += w * e.gradient(z)[self.xi]
            if len(e.quadratic) or e.atoms or e.lse:
                key = id(e)
                mh = self._mixed.get(key)
                if mh is None:
                    mh = self._mixed[key] = (e, MixedHessian(e, self.xi, self.yi, self.n))
                G1 += w * mh[1](z)
        return const, a, g0, G1
