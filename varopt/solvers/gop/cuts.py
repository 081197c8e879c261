r"""Outer approximation of the convex ``y``-only parts of the relaxed dual.

The objective part ``f_yy(y) = 1/2 y'Q y + sum_r c_r g_r(u_r(y))`` is shared by every
Lagrangian (see :mod:`.lagrangian`). The quadratic term goes to HiGHS exactly; every atom
row ``r`` (and every log-sum-exp group) gets an epigraph column ``eta_r`` with tangent cuts

.. math::  \eta_r \ge c_r \big(g(u_0) + g'(u_0)(a_r^T y + b_r - u_0)\big)

(for ``u^2/v`` and log-sum-exp the tangent plane of the multivariate function). A tangent of
a convex function underestimates it everywhere on its domain, so replacing ``c_r g_r`` by
``eta_r`` (which the relaxed dual minimises) can only lower the relaxed-dual value: every
bound stays valid whatever cuts are present. Cuts are added at the initial points, at the
primal points and at relaxed-dual solutions where the approximation error exceeds the
tolerance (Kelley's cutting planes), so the relaxed-dual values converge to the exact ones.

Constraints of ``y`` alone, ``g(y) <= hi`` with ``g`` convex, are outer-approximated the same
way (``g(y_0) + grad g(y_0)^T (y - y_0) <= hi``), which relaxes the feasible set.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...program.terms import AtomGroup, LseGroup

def _interval(A, b, lb, ub):
    """Range of ``A y + b`` over the box (rows)."""
    Ap = A.maximum(0)
    An = A.minimum(0)
    with np.errstate(invalid="ignore"):
        lbz = np.where(np.isfinite(lb), lb, 0.0)
        ubz = np.where(np.isfinite(ub), ub, 0.0)
        lo = Ap @ lbz + An @ ubz + b
        hi = Ap @ ubz + An @ lbz + b
    # rows touching an infinite bound in the unfavourable direction
    inf_lo = (Ap @ (~np.isfinite(lb)).astype(float) + (-An) @ (~np.isfinite(ub)).astype(float)) > 0
    inf_hi = (Ap @ (~np.isfinite(ub)).astype(float) + (-An) @ (~np.isfinite(lb)).astype(float)) > 0
    lo[inf_lo] = -np.inf
    hi[inf_hi] = np.inf
    return lo, hi


class ConvexPieces:
    """Epigraph rows of ``f_yy`` over the relaxed-dual columns ``[y (ny), eta (n_eta), t]``."""

    def __init__(self, e_y, ny, ylb, yub):
        """``e_y``: Expression over y alone (the objective's y-only nonlinear part)."""
        self.ny = ny
        self.Q = None  # the quadratic part is outer-approximated too, so every relaxed dual is an LP
        atoms = list(e_y.atoms)
        if len(e_y.quadratic):
            atoms.append(_squares(e_y.quadratic.hessian_matrix, ny))
        self.groups = []  # (group, eta offset)
        off = 0
        eta_lb = []
        for g in atoms:
            self.groups.append((g, off))
            off += len(g)
            if g.kernel.arity == 2:  # u^2/v >= 0 (no tighter bound: v is not bounded above here)
                eta_lb.append(np.zeros(len(g)))
            else:
                lo, hi = _interval(g.A, g.b, ylb, yub)
                eta_lb.append(g.coef * g.kernel.interval_min(lo, hi))
        for g in e_y.lse:
            self.groups.append((g, off))
            off += len(g)
            lo, _ = _interval(g.A, g.b, ylb, yub)
            mx = np.maximum.reduceat(lo, g.starts) if lo.size else lo
            eta_lb.append(g.coef * mx)
        self.n_eta = off
        # univariate rows (one y per argument, e.g. phi log phi): cuts are built from flat arrays
        self.unit = {}
        for g, o in self.groups:
            if isinstance(g, LseGroup) or g.kernel.arity == 2:
                continue
            A = sp.csr_matrix(g.A)
            if np.all(np.diff(A.indptr) == 1):
                self.unit[o] = (A.indices.astype(np.int64), A.data.astype(float))
        self.eta_lb = np.concatenate(eta_lb) if eta_lb else np.zeros(0)
        self.eta_lb = np.where(np.isnan(self.eta_lb), -np.inf, self.eta_lb)
        self.ylb, self.yub = ylb, yub

    @property
    def ncol(self):
        return self.ny + self.n_eta + 1

    def values(self, y):
        """Per-epigraph-row values ``c_r g_r(u_r(y))``."""
        out = np.zeros(self.n_eta)
        for g, off in self.groups:
            if isinstance(g, LseGroup):
                out[off:off + len(g)] = g.coef * g.group_values(y)
            else:
                out[off:off + len(g)] = g.row_values(y)
        return out

    def cuts(self, y, rows=None):
        """Tangent cuts at ``y`` for the epigraph rows ``rows`` (all when None): (A csr, lo)."""
        blocks, los = [], []
        for g, off in self.groups:
            m = len(g)
            sel = np.arange(m) if rows is None else rows[(rows >= off) & (rows < off + m)] - off
            if sel.size == 0:
                continue
            if off in self.unit:
                blocks.append(self._unit_cuts(g, off, y, sel, los))
                continue
            A, lo = self._group_cuts(g, y, sel)
            blocks.append(_with_eta(A, self.ny + off + sel, self.ncol))
            los.append(lo)
        if not blocks:
            return sp.csr_matrix((0, self.ncol)), np.zeros(0)
        return sp.vstack(blocks, format="csr"), np.concatenate(los)

    def _unit_cuts(self, g, off, y, sel, los):
        """Tangent rows ``eta_r - c g'(u0) a_r y_j >= c (g(u0) - g'(u0) u0) + c g'(u0) b_r`` (one y each)."""
        cols, vals = self.unit[off]
        j, a = cols[sel], vals[sel]
        u0 = g.kernel.tangent_point(a * y[j] + g.b[sel])
        val, d1, _ = g.kernel.derivs(u0, 1)
        c = g.coef[sel]
        los.append(c * (val + d1 * (g.b[sel] - u0)))
        m = sel.size
        indices = np.empty(2 * m, dtype=np.int64)
        indices[0::2] = j  # y columns come before the eta columns: sorted rows
        indices[1::2] = self.ny + off + sel
        data = np.empty(2 * m)
        data[0::2] = -c * d1 * a
        data[1::2] = 1.0
        return sp.csr_matrix((data, indices, np.arange(0, 2 * m + 1, 2)), shape=(m, self.ncol))

    def cuts_at_u(self, u_points):
        """Tangent cuts of the 1-D atom rows at given argument values (one cut per row per point)."""
        blocks, los = [], []
        for g, off in self.groups:
            if isinstance(g, LseGroup) or g.kernel.arity == 2:
                continue
            lo_u, hi_u = _interval(g.A, g.b, self.ylb, self.yub)
            fin = np.isfinite(lo_u) & np.isfinite(hi_u)
            # rows with an infinite end get no initial cuts (their arguments enter through 0 * inf otherwise)
            lo_f, w_f = np.where(fin, lo_u, 0.0), np.where(fin, hi_u - lo_u, 0.0)
            for t in u_points:
                u0 = np.where(fin, lo_f + t * w_f, np.nan)
                ok = fin
                u0 = g.kernel.tangent_point(u0)
                sel = np.flatnonzero(ok)
                if sel.size == 0:
                    continue
                A, lo = self._tangent(g, sel, u0[sel])
                E = sp.csr_matrix((np.ones(sel.size), (np.arange(sel.size), self.ny + off + sel)),
                                  shape=(sel.size, self.ncol))
                blocks.append(E - _pad(A, self.ncol))
                los.append(lo)
        if not blocks:
            return sp.csr_matrix((0, self.ncol)), np.zeros(0)
        return sp.vstack(blocks, format="csr"), np.concatenate(los)

    def _tangent(self, g, sel, u0):
        val, d1, _ = g.kernel.derivs(u0, 1)
        c = g.coef[sel]
        lo = c * (val + d1 * (g.b[sel] - u0))
        return _scaled_rows(g.A, sel, c * d1), lo

    def _group_cuts(self, g, y, sel):
        if isinstance(g, LseGroup):
            s = g.A @ y + g.b
            lse, p = g._softmax(y)
            G = g.coef.size
            P = sp.csr_matrix((p, (g.seg, np.arange(g.seg.size))), shape=(G, g.seg.size))
            PA = (P @ g.A)[sel]
            ps = np.asarray(P @ (s - g.b)).ravel()[sel]  # p . (A y) at y
            A = sp.diags(g.coef[sel]) @ PA
            lo = g.coef[sel] * (lse[sel] - ps)
            return sp.csr_matrix(A), lo
        if g.kernel.arity == 2:
            u = (g.A @ y + g.b)[sel]
            v = np.maximum((g.A2 @ y + g.b2)[sel], 1e-12)
            du, dv = g.kernel.grad(u, v)
            c = g.coef[sel]
            A = sp.diags(c * du) @ g.A[sel] + sp.diags(c * dv) @ g.A2[sel]
            lo = c * (du * g.b[sel] + dv * g.b2[sel])
            return sp.csr_matrix(A), lo
        return self._tangent(g, sel, g.kernel.tangent_point((g.A @ y + g.b)[sel]))


def _squares(H, ny):
    """``1/2 y^T H y`` (H PSD) as square atoms ``sum_j c_j (l_j^T y)^2``."""
    H = sp.csr_matrix(H)
    off = H - sp.diags(H.diagonal())
    if off.nnz == 0:
        d = H.diagonal()
        idx = np.flatnonzero(d)
        A = sp.csr_matrix((np.ones(idx.size), (np.arange(idx.size), idx)), shape=(idx.size, ny))
        return AtomGroup("square", 0.5 * d[idx], A, np.zeros(idx.size))
    w, V = np.linalg.eigh(H.toarray())
    keep = w > 1e-12 * max(1.0, float(np.abs(w).max()))
    return AtomGroup("square", 0.5 * w[keep], sp.csr_matrix(V[:, keep].T), np.zeros(int(keep.sum())))


def _scaled_rows(A, sel, scale):
    """``diag(scale) @ A[sel]`` built from the CSR arrays (no scipy slicing overhead)."""
    ip = A.indptr
    nnz = ip[sel + 1] - ip[sel]
    tot = int(nnz.sum())
    starts = np.repeat(ip[sel] - np.concatenate([[0], np.cumsum(nnz)[:-1]]), nnz)
    idx = starts + np.arange(tot)
    data = A.data[idx] * np.repeat(scale, nnz)
    indptr = np.concatenate([[0], np.cumsum(nnz)])
    return sp.csr_matrix((data, A.indices[idx], indptr), shape=(sel.size, A.shape[1]))


def _with_eta(A, eta_cols, ncol):
    """Rows ``eta_col - A`` (A over the y columns) as one CSR matrix."""
    A = sp.csr_matrix(A)
    nnz = np.diff(A.indptr)
    m = A.shape[0]
    indptr = np.concatenate([[0], np.cumsum(nnz + 1)])
    indices = np.empty(indptr[-1], dtype=np.int64)
    data = np.empty(indptr[-1])
    first = indptr[:-1]
    indices[first] = eta_cols
    data[first] = 1.0
    mask = np.ones(indptr[-1], dtype=bool)
    mask[first] = False
    indices[mask] = A.indices
    data[mask] = -A.data
    out = sp.csr_matrix((data, indices, indptr), shape=(m, ncol))
    out.sort_indices()
    return out


def _pad(A, ncol):
    A = sp.csr_matrix(A)
    return sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.shape[0], ncol))


class ConvexConstraints:
    """Outer approximation of ``g_c(y) <= hi_c`` (constraints of y alone)."""

    def __init__(self, exprs, his, ncol):
        self.exprs = exprs
        self.his = np.asarray(his, dtype=float)
        self.ncol = ncol

    def __len__(self):
        return len(self.exprs)

    def violations(self, y):
        return np.array([e.value(y) - h for e, h in zip(self.exprs, self.his)])

    def cuts(self, y, which=None):
        which = range(len(self.exprs)) if which is None else which
        rows, his = [], []
        for k in which:
            e = self.exprs[k]
            gr = e.gradient(y)
            rows.append(np.concatenate([gr, np.zeros(self.ncol - gr.size)]))
            his.append(self.his[k] - e.value(y) + gr @ y)
        if not rows:
            return sp.csr_matrix((0, self.ncol)), np.zeros(0)
        return sp.csr_matrix(np.vstack(rows)), np.array(his)
