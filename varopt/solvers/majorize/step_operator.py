"""The majorizer's curvature ``Q = diag(Dg) + R^T R`` as a factored operator: the constrained Woodbury step.

Algorithm 2 step 3 (Jebara & Choromanska 2012) with linear constraints is the QP ``min u'D + 1/2 D'QD`` over
``Lambda``. When the bound has few rows (``K = G (c-1) << n``, e.g. SRBCT: 249 rows, 9236 parameters) the
unconstrained step never forms ``Q`` (row-space Woodbury, docs/majorize.md section 2); the constrained one must not
either. The active-set method of :meth:`varopt.lpqp.active_set.ActiveSetQP.solve_operator` needs only ``Q^{-1} v``
for the gradient and for the normals of the constraints in its working set (a Schur complement of size
``|W|``) and ``Q v`` for its certificate. This module gives both from one factorization per step:

* :class:`RowSpaceCurvature` (padded groups): ``C = I + T (F_a Da^{-1} F_a^T) T^T`` (``K x K``, the capacitance
  of :meth:`.groups.PaddedGroups.woodbury_solve`), the unpenalized coordinates ``b`` (``Dg = 0``) by the
  minimum-norm Schur complement ``Sb = Rb^T C^{-1} Rb``; every solve is then two feature products;
* :class:`DenseRowCurvature`: ``R`` an explicit (sparse) ``K x n`` matrix (:func:`.step.woodbury_solve`).

``Q`` may be singular along flat directions of the bound (e.g. the common shift of a softmax's intercepts); the
solves then return a solution of ``Q x = v`` for ``v`` in the range (minimum norm on ``b``), and the active set's
certificate (computed with :meth:`matvec`) rejects answers where that matters.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp


class RowSpaceCurvature:
    """``Q = diag(Dg) + R^T R`` with ``R = blockdiag(T_g) F`` of the padded groups ``grp`` (never formed)."""

    def __init__(self, grp, T, Dg, fixed=None):
        """``fixed`` (bool mask, optional): variables eliminated (held at a bound, :mod:`.step_bounds`): ``solve`` then
        gives ``(Q_FF)^{-1} v_F`` on the others and 0 on them; ``matvec`` stays the whole ``Q``."""
        G, c = grp.G, grp.c
        self.grp, self.T, self.Dg, self.n = grp, T, Dg, Dg.size
        a = Dg > 0 if fixed is None else (Dg > 0) & ~fixed
        self.cols = np.flatnonzero(a)
        self.dinv = np.where(a, 1.0 / np.where(a, Dg, 1.0), 0.0)
        Gm = grp.gram(self.cols, 1.0 / Dg[self.cols], fixed)
        C = grp.congruence(T, Gm)
        C[np.diag_indices_from(C)] += 1.0
        self.cf = sla.cho_factor(C, check_finite=False)
        b, Fb = grp._gram_b
        self.b = b
        if b.size:
            self.Rb = np.matmul(T, Fb).reshape(G * (c - 1), b.size)
            self.CiRb = sla.cho_solve(self.cf, self.Rb, check_finite=False)
            Sb = self.Rb.T @ self.CiRb
            self.lam, self.U = np.linalg.eigh(0.5 * (Sb + Sb.T))

    def rows_times(self, V):
        """``R V`` (``(G (c-1), k)``; a vector gives a vector)."""
        one = V.ndim == 1
        V = V[:, None] if one else V
        grp = self.grp
        out = np.matmul(self.T, _fmul_many(grp, V)).reshape(grp.G * (grp.c - 1), V.shape[1])
        return out[:, 0] if one else out

    def rows_transpose_times(self, Wr):
        """``R^T Wr``."""
        one = Wr.ndim == 1
        grp = self.grp
        k = 1 if one else Wr.shape[1]
        out = _ftmul_many(grp, np.matmul(self.T.transpose(0, 2, 1), Wr.reshape(grp.G, grp.c - 1, k)))
        return out[:, 0] if one else out

    def matvec(self, v):
        return self.Dg * v + self.rows_transpose_times(self.rows_times(v))

    def solve(self, V):
        """``Q^{-1} V`` (a vector or the columns of a matrix, all columns by one feature product each way)."""
        V = np.asarray(V, dtype=float)
        one = V.ndim == 1
        V = V[:, None] if one else V
        dinv = self.dinv[:, None]
        r0 = self.rows_times(V * dinv)
        xb = None
        if self.b.size:
            rhs = V[self.b] - self.CiRb.T @ r0
            keep = self.lam > 1e-12 * max(self.lam[-1], 1e-300)  # as bound.min_norm_solve
            Uk = self.U[:, keep]
            xb = Uk @ ((Uk.T @ rhs) / self.lam[keep, None])
            w = sla.cho_solve(self.cf, r0 + self.Rb @ xb, check_finite=False)
        else:
            w = sla.cho_solve(self.cf, r0, check_finite=False)
        X = (V - self.rows_transpose_times(w)) * dinv
        if xb is not None:
            X[self.b] = xb
        return X[:, 0] if one else X

    def inner(self, Nt):
        """``Nt^T Q^{-1} Nt`` for constraint normals ``Nt`` (``n x k``, few nonzero rows), in the row space: with
        ``P = Da^{-1}``, ``r0 = Ra P Nt_a`` (feature columns on the normals' support only), ``x_b`` and ``w`` as in
        :meth:`solve`,

            Nt^T Q^{-1} Nt = (P Nt_a)^T Nt_a - r0^T w + Nt_b^T x_b,

        so a working set of bounds and sparse rows costs no full feature product (``k`` columns of ``Q^{-1}`` would
        cost ``k`` of them)."""
        Nt = np.asarray(Nt, dtype=float)
        J = np.flatnonzero(np.any(Nt != 0, axis=1))
        NJ = Nt[J]
        PN = self.dinv[J, None] * NJ
        FJ = _feature_columns(self.grp, J)  # (G, c, |J|)
        r0 = np.matmul(self.T, np.matmul(FJ, PN)).reshape(-1, Nt.shape[1])
        S = PN.T @ NJ
        if self.b.size:
            Nb = Nt[self.b]
            rhs = Nb - self.CiRb.T @ r0
            keep = self.lam > 1e-12 * max(self.lam[-1], 1e-300)
            Uk = self.U[:, keep]
            xb = Uk @ ((Uk.T @ rhs) / self.lam[keep, None])
            w = sla.cho_solve(self.cf, r0 + self.Rb @ xb, check_finite=False)
            S += Nb.T @ xb
        else:
            w = sla.cho_solve(self.cf, r0, check_finite=False)
        S -= r0.T @ w
        return 0.5 * (S + S.T)

    def dense(self):
        """``Q`` as a dense matrix (the general QP layer's fallback only)."""
        from .step import gram
        grp = self.grp
        R = grp.rows(self.T) if grp.dense_fits(grp.G, grp.c, grp.d) else grp.rows_sparse(self.T)
        Q = gram(R)
        Q.flat[::self.n + 1] += self.Dg
        return Q


def _fmul_many(grp, Z):
    """``(G, c, k)`` products ``F_g Z`` of the padded features (:meth:`.groups.PaddedGroups.fmul` on ``k`` columns)."""
    G, c, k = grp.G, grp.c, Z.shape[1]
    F2 = grp._dense2
    if F2 is None and grp._template_fast():
        S = np.zeros((G, c, k))
        S[:, grp._rows, :] = np.matmul(grp._template[2], Z[grp._cmat]).transpose(1, 0, 2)
        return S
    return np.asarray(F2 @ Z if F2 is not None else grp.Apad @ Z).reshape(G, c, k)


def _feature_columns(grp, J):
    """The padded features' columns ``J`` as a dense ``(G, c, |J|)`` array (class templates: columns of ``X`` placed at
    their class; otherwise from a column-compressed copy of the padded features made once per solve)."""
    G, c = grp.G, grp.c
    out = np.zeros((G, c, J.size))
    if not J.size:
        return out
    if grp._dense2 is None and grp._template_fast():
        owner = getattr(grp, "_column_owner", None)
        if owner is None:
            allc = grp._cmat.ravel()
            owner = False  # a column shared by two classes: the generic path below
            if np.unique(allc).size == allc.size:
                cls, pos = np.full(grp.d, -1), np.zeros(grp.d, dtype=np.int64)
                for y, cols in zip(grp._rows, grp._cmat):
                    cls[cols], pos[cols] = y, np.arange(cols.size)
                owner = (cls, pos)
            grp._column_owner = owner
        if owner is not False:
            cls, pos = owner
            y, p = cls[J], pos[J]
            on = np.flatnonzero(y >= 0)
            out[:, y[on], on] = grp._template[2][:, p[on]]
            return out
    F2 = grp._dense2
    if F2 is not None:
        return F2[:, J].reshape(G, c, J.size)
    csc = getattr(grp, "_Apad_csc", None)
    if csc is None:
        csc = grp._Apad_csc = grp.Apad.tocsc()
    return csc[:, J].toarray().reshape(G, c, J.size)


def _ftmul_many(grp, Wm):
    """``sum_g F_g^T W_g`` on ``k`` columns (``Wm`` of shape ``(G, c, k)``; :meth:`.groups.PaddedGroups.ftmul`)."""
    G, c, k = Wm.shape
    F2 = grp._dense2
    if F2 is None and grp._template_fast():
        out = np.zeros((grp.d, k))
        out[grp._cmat] = np.matmul(grp._template[2].T, Wm[:, grp._rows, :].transpose(1, 0, 2))
        return out
    W2 = Wm.reshape(G * c, k)
    return np.asarray(F2.T @ W2 if F2 is not None else grp.AT @ W2)


class DenseRowCurvature:
    """``Q = diag(Dg) + R^T R`` with an explicit ``K x n`` matrix ``R`` (:func:`.step.woodbury_solve` per column)."""

    def __init__(self, Dg, R):
        self.Dg, self.n = Dg, Dg.size
        self.R = R.toarray() if sp.issparse(R) else np.asarray(R)

    def matvec(self, v):
        return self.Dg * v + self.R.T @ (self.R @ v)

    def solve(self, V):
        from .step import woodbury_solve
        V = np.asarray(V, dtype=float)
        if V.ndim == 1:
            return woodbury_solve(self.Dg, self.R, V)
        return np.column_stack([woodbury_solve(self.Dg, self.R, V[:, k]) for k in range(V.shape[1])]) \
            if V.shape[1] else V.copy()

    def dense(self):
        Q = self.R.T @ self.R
        Q.flat[::self.n + 1] += self.Dg
        return Q
