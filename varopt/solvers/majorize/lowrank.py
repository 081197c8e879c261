"""Algorithm 4 (LowRankBound): ``Sigma <= V^T S V + D`` with rank ``k`` and diagonal absorption.

The rank-one updates ``r r^T`` of Algorithm 1 (``r = sqrt(omega) l``, the rows of
:class:`~varopt.solvers.majorize.bound.BoundParts`) are accumulated in an orthonormal basis
``V`` (k x d) with diagonal ``S`` (k x k). Each update projects ``r`` on ``V``
(``p = V r``, residual ``g = r - V^T p``), forms the exact rank ``k + 1`` system in the basis
``[V; g/||g||]`` and drops its smallest eigen-direction (section 6: "discard its smallest
singular value"). The supplement's case analysis (drop ``g g^T`` or the smallest eigenvalue of
``S + p p^T``) forgets the cross terms ``V^T p g^T + g p^T V`` of ``r r^T`` and can fail to
dominate ``Sigma`` (found by the property test); the eigen-decomposition of the full
``(k+1) x (k+1)`` core is the correct version. The dropped ``c v v^T`` is *absorbed* into the
diagonal with supplement Lemma 3,

    c (x^T v)^2 <= sum_i x_i^2 F_i,    F_i = c |v_i| sum_j |v_j|,

so the result always dominates the exact ``Sigma`` (``x^T (V^T S V + D) x >= x^T Sigma x``).
``D`` starts at the diagonal of the regularizer (``t lambda I`` in the paper; here any PSD
quadratic part ``H``, bounded by the Gershgorin-type diagonal ``sum_j |H_ij|``, which is exact
for a diagonal ``H``). Solves use the Woodbury formula (section 6):

    Sigma^{-1} = D^{-1} - D^{-1} V^T (S^{-1} + V D^{-1} V^T)^{-1} V D^{-1}.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


class LowRankSigma:
    """``V^T diag(S) V + diag(D)`` built row by row as in Algorithm 4."""

    def __init__(self, d: int, k: int, D0=None):
        self.d, self.k = int(d), int(k)
        self.V = np.zeros((0, self.d))  # grows to k rows, then stays at k
        self.S = np.zeros(0)
        self.D = np.zeros(self.d) if D0 is None else np.array(D0, dtype=float)

    def _absorb(self, c, v):
        av = np.abs(v)
        self.D += c * av * av.sum()

    def add(self, r):
        """Add ``r r^T`` (one iteration of the inner loop of Algorithm 4).

        ``r = V^T p + g`` with ``p = V r`` and ``g`` orthogonal to ``V``. Note
        ``r r^T = V^T p p^T V + V^T p g^T + g p^T V + g g^T``: the supplement's derivation omits the
        cross terms, so (as in the main text) we form the exact rank ``k + 1`` system in the basis
        ``[V; g / ||g||]`` with core ``[[S + p p^T, ||g|| p], [||g|| p^T, ||g||^2]]``, rotate it to its
        eigenbasis and absorb the smallest eigen-direction into ``D`` (Lemma 3).
        """
        r = np.asarray(r, dtype=float).ravel()
        if not np.any(r):
            return
        V = self.V
        p = V @ r
        g = r - V.T @ p
        if V.shape[0]:
            # re-orthogonalize once so V stays orthonormal to rounding
            corr = V @ g
            g = g - V.T @ corr
            p = p + corr
        gn2 = float(g @ g)
        M = np.diag(self.S) + np.outer(p, p)
        rn2 = float(r @ r)
        if gn2 > 1e-24 * rn2:
            gn = np.sqrt(gn2)
            Vx = np.vstack([V, g / gn])
            Mx = np.zeros((M.shape[0] + 1, M.shape[0] + 1))
            Mx[:-1, :-1] = M
            Mx[:-1, -1] = Mx[-1, :-1] = p * gn
            Mx[-1, -1] = gn2
            M, V = Mx, Vx
        elif gn2 > 0:
            # residual at rounding level: absorb it exactly (g g^T <= diag(|g| sum|g|))
            self._absorb(1.0, g)
        lam, Q = np.linalg.eigh(M)
        lam = np.maximum(lam, 0.0)
        V = Q.T @ V
        if lam.size > self.k:
            j = int(np.argmin(lam))
            self._absorb(lam[j], V[j])
            keep = np.arange(lam.size) != j
            lam, V = lam[keep], V[keep]
        self.S, self.V = lam, V

    def add_rows(self, R):
        R = R.tocsr() if sp.issparse(R) else np.asarray(R)
        for i in range(R.shape[0]):
            row = R.getrow(i).toarray().ravel() if sp.issparse(R) else R[i]
            self.add(row)
        return self

    def dense(self) -> np.ndarray:
        return self.V.T @ (self.S[:, None] * self.V) + np.diag(self.D)

    def matvec(self, x):
        return self.V.T @ (self.S * (self.V @ x)) + self.D * x

    def solve(self, u, ridge: float = 0.0):
        """``(V^T S V + D + ridge I)^{-1} u`` by Woodbury (D + ridge must be positive)."""
        Dd = self.D + ridge
        if np.any(Dd <= 0):
            raise np.linalg.LinAlgError("the diagonal part of the low-rank bound is not positive")
        Dinv_u = u / Dd
        keep = self.S > 0
        if not np.any(keep):
            return Dinv_u
        V, S = self.V[keep], self.S[keep]
        VD = V / Dd  # V D^{-1}
        C = np.diag(1.0 / S) + VD @ V.T
        return Dinv_u - VD.T @ np.linalg.solve(C, VD @ u)


def lowrank_bound(R, k: int, D0) -> LowRankSigma:
    """Algorithm 4 over the rows of ``R`` (``sum_i r_i r_i^T`` is the exact Algorithm 1 ``Sigma``)."""
    return LowRankSigma(R.shape[1], k, D0).add_rows(R)


def diagonal_dominance(H) -> np.ndarray:
    """``F_i = sum_j |H_ij|`` so that ``x^T H x <= sum_i F_i x_i^2`` for symmetric ``H`` (Lemma 3 type)."""
    H = sp.csr_matrix(H)
    return np.asarray(abs(H).sum(axis=1)).ravel()
