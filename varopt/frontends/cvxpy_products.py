"""CVXPY tracer, part 2: elementwise products of two traced nodes.

:meth:`_ProductTracer.product` multiplies two nodes of the same shape entry by entry:

* constant times anything scales the other node;
* affine times affine, ``(c1_e + A1_e x)(c2_e + A2_e x)``, gives bilinear/quadratic terms
  ``(A1_e x)(A2_e x)`` plus the linear and constant parts;
* ``(c_e + sum_j a_ej x_j) * G_e`` with ``G`` made of multiplier-free atom rows and
  log-sum-exp groups gives ``c_e G_e`` plus, for every ``j``, the rows of ``G_e`` with
  multiplier ``x_j`` and weight ``a_ej`` (``phi * (x - mu)**2``, ``-phi * log(pi)``);
* ``x_j * (-log(alpha x_j))`` is rewritten exactly as the ``xlogx`` row
  ``-(1/alpha) (alpha x_j) log(alpha x_j)``.

A variable times a quadratic (``x * y * z``) lifts the quadratic's products into bounded auxiliary columns
``q == x * y`` and multiplies them bilinearly; a multiplier on a term that already has one (degree three in
atoms) raises :class:`~varopt.errors.ModelStructureError`.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .cvxpy_affine import _AffineTracer
from .cvxpy_nodes import _Node, _bilinear, _first_index, _ranges


class _ProductTracer(_AffineTracer):
    """The tree walk plus :meth:`product` (used by ``*``, ``multiply``, ``@`` and the atoms)."""

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
            if other.has_nonlinear:
                self.fail(expr, "product of a variable with a quadratic expression and other nonlinear terms")
            # x * y * z (degree 3): the products of the quadratic factor become bounded auxiliary columns
            # q == x * y, and q * z is bilinear (as the Pyomo front-end lifts x * y * z; the tree branches on q)
            return self.product(expr, F, self.lift_quadratic(expr, other, bounded=True), shape)
        m = F.m
        AF = F.A.copy()  # sum_duplicates and eliminate_zeros work in place; F.A shares its arrays
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
