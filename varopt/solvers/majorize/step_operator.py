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

from .bound import min_norm_solve


class RowSpaceCurvature:
    """``Q = diag(Dg) + R^T R`` with ``R = blockdiag(T_g) F`` of the padded groups ``grp`` (never formed)."""

    def __init__(self, grp, T, Dg):
        G, c = grp.G, grp.c
        self.grp, self.T, self.Dg, self.n = grp, T, Dg, Dg.size
        a = Dg > 0
        self.cols = np.flatnonzero(a)
        Gm = grp.gram(self.cols, 1.0 / Dg[self.cols])
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

    def rows_times(self, v):
        """``R v`` (``G (c-1)``)."""
        return np.matmul(self.T, self.grp.fmul(v)[:, :, None]).ravel()

    def rows_transpose_times(self, w):
        """``R^T w``."""
        G, c = self.grp.G, self.grp.c
        return self.grp.ftmul(np.matmul(w.reshape(G, 1, c - 1), self.T).reshape(G, c))

    def matvec(self, v):
        return self.Dg * v + self.rows_transpose_times(self.rows_times(v))

    def _solve1(self, u):
        a, Dg = self.cols, self.Dg
        z = np.zeros(self.n)
        z[a] = u[a] / Dg[a]
        r0 = self.rows_times(z)
        x = np.empty(self.n)
        if self.b.size:
            xb = min_norm_solve(self.lam, self.U, u[self.b] - self.CiRb.T @ r0)
            x[self.b] = xb
            w = sla.cho_solve(self.cf, r0 + self.Rb @ xb, check_finite=False)
        else:
            w = sla.cho_solve(self.cf, r0, check_finite=False)
        x[a] = (u[a] - self.rows_transpose_times(w)[a]) / Dg[a]
        return x

    def solve(self, V):
        """``Q^{-1} V`` (a vector or the columns of a matrix)."""
        V = np.asarray(V, dtype=float)
        if V.ndim == 1:
            return self._solve1(V)
        return np.column_stack([self._solve1(V[:, k]) for k in range(V.shape[1])]) if V.shape[1] else V.copy()

    def dense(self):
        """``Q`` as a dense matrix (the general QP layer's fallback only)."""
        from .step import gram
        grp = self.grp
        R = grp.rows(self.T) if grp.dense_fits(grp.G, grp.c, grp.d) else grp.rows_sparse(self.T)
        Q = gram(R)
        Q.flat[::self.n + 1] += self.Dg
        return Q


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
