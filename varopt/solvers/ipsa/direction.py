"""The primal-dual search direction of IPSA via the reduced system (thesis eqs. 2.20-2.21).

With slacks ``s = -c(x) > 0``, duals ``z > 0`` and ``Sigma = C^{-1} Z = -diag(z / s)``,
block elimination of the primal-dual Newton system (2.16) gives

    (W + J^T diag(z/s) J) dx = -(g + mu J^T (1/s))                 (2.20)
    dz = mu/s - z + diag(z/s) J dx                                   (2.21)

where ``g`` is the (noisy) gradient, ``W = B + sum_j z_j Hess c_j`` (``B`` the Hessian
approximation of :mod:`.hessian`) and ``J`` the Jacobian of ``c``. The right-hand side of
(2.20) is minus the gradient of the barrier function ``f_mu = f - mu sum log s`` (2.4) with
``g`` in place of ``grad f``.

The matrix ``M = W + J^T diag(z/s) J`` is assembled according to its structure:

* ``diag``: only bounds and a diagonal ``B`` -> ``M`` is diagonal, ``dx = rhs / M`` in O(n)
  (the L1 split form 2.61/2.62);
* ``blocks``: linear rows whose sparsity graph splits the variables into small connected
  components (e.g. the 2x2 blocks of the L1 box form 2.64/2.65) and a diagonal ``B`` ->
  batched dense solves of the small blocks, O(n) for bounded block size;
* ``general``: anything else -> dense Cholesky (n <= 1500) or a sparse LU.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ...errors import SolverBugError
from .constraints import block_bases

MAX_BLOCK = 16


def solve_blocks(groups, flat, rhs, n):
    """``dx`` solving the block-diagonal system stored in ``flat`` (layout of :func:`.block_layout`) for ``rhs``:
    1x1 blocks by a division, 2x2 in closed form, larger ones by batched LU (``np.linalg.solve``)."""
    dx = np.empty(n)
    for sz, idx, off in groups:
        nc = idx.shape[0]
        Mb = flat[off:off + nc * sz * sz]
        if sz == 1:
            dx[idx[:, 0]] = rhs[idx[:, 0]] / Mb
        elif sz == 2:
            Mb = Mb.reshape(nc, 4)
            a, b, c, e = Mb[:, 0], Mb[:, 1], Mb[:, 2], Mb[:, 3]
            r0, r1 = rhs[idx[:, 0]], rhs[idx[:, 1]]
            det = a * e - b * c
            dx[idx[:, 0]] = (e * r0 - b * r1) / det
            dx[idx[:, 1]] = (a * r1 - c * r0) / det
        else:
            dx[idx] = np.linalg.solve(Mb.reshape(nc, sz, sz), rhs[idx][..., None])[..., 0]
    return dx


class ReducedSystem:
    def __init__(self, cons, diagonal_hessian: bool):
        self.cons = cons
        n = cons.n
        self.n = n
        if diagonal_hessian and cons.n_nl == 0 and cons.n_lin == 0:
            self.mode = "diag"
            return
        if diagonal_hessian and cons.n_nl == 0:
            groups, local, flat_size = cons.blocks()
            if max(sz for sz, _, _ in groups) <= MAX_BLOCK:
                self.mode = "blocks"
                self.groups, self._local, self.flat_size = groups, local, flat_size
                self._T = self._diag_pos = None  # built on first use (_block_map): the numpy path and compiled.run_chunk
                return
        self.mode = "general"

    # --- block-diagonal structure ---------------------------------------------------------
    @property
    def T(self):
        """Sparse map from the row weights ``d`` (length n_lin) to the flat block entries of ``G^T diag(d) G``."""
        if self._T is None:
            self._block_map()
        return self._T

    @property
    def diag_pos(self):
        """Position of each variable's diagonal entry in the flat block storage."""
        if self._diag_pos is None:
            self._block_map()
        return self._diag_pos

    def _block_map(self):
        n, local = self.n, self._local
        # T maps the row weights d (length n_lin) to the entries of G^T diag(d) G inside the blocks:
        # row r puts G_ri G_rj at entry (local i, local j) of its block, for every pair (i, j) of
        # its nonzeros (all pairs of all rows at once, in row order, i-major)
        G = self.cons.G.tocsr()
        base, bsz = block_bases(self.groups, n)
        cnt = np.diff(G.indptr)
        row_of = np.repeat(np.arange(G.shape[0]), cnt)  # row of each nonzero
        P = np.repeat(np.arange(G.nnz), cnt[row_of])  # nonzero i, once per partner j in its row
        first = np.repeat(np.cumsum(cnt[row_of]) - cnt[row_of], cnt[row_of])
        Q = G.indptr[row_of[P]] + (np.arange(P.size) - first)
        ci, cj = G.indices[P], G.indices[Q]
        pos = base[ci] + local[ci] * bsz[ci] + local[cj]
        T = sp.csr_matrix((G.data[P] * G.data[Q], (pos, row_of[P])), shape=(self.flat_size, G.shape[0]))
        T.sum_duplicates()
        self._T = T
        self._diag_pos = np.empty(n, dtype=np.int64)
        for sz, idx, off in self.groups:
            nc = idx.shape[0]
            self._diag_pos[idx.ravel()] = (off + (np.arange(nc)[:, None] * sz * sz)
                                           + np.arange(sz)[None, :] * (sz + 1)).ravel()

    # --- solve ---------------------------------------------------------------------------------
    def solve(self, B, d, rhs, Wnl=None, Jnl=None):
        """Solve ``M dx = rhs`` with ``M = B + Wnl + J^T diag(d) J``.

        ``B`` is a vector (diagonal approximation) or an (n, n) dense/sparse matrix.
        """
        cons = self.cons
        bd = cons.bound_diagonal(d)
        if self.mode == "diag":
            return rhs / (B + bd)
        if self.mode == "blocks":
            flat = self.T @ d[cons.sl_lin] if cons.n_lin else np.zeros(self.flat_size)
            flat[self.diag_pos] += B + bd
            return solve_blocks(self.groups, flat, rhs, self.n)
        # general
        n = self.n
        dense = n <= 1500
        if np.ndim(B) == 1:
            M = np.diag(B + bd) if dense else sp.diags(B + bd)
        else:
            M = (B.toarray() if sp.issparse(B) else np.array(B, dtype=float)) if dense else sp.csr_matrix(B)
            M = M + (np.diag(bd) if dense else sp.diags(bd))
        if cons.n_lin:
            dl = d[cons.sl_lin]
            GtDG = cons.GT @ sp.diags(dl) @ cons.G
            M = M + (GtDG.toarray() if dense else GtDG)
        if cons.n_nl:
            dn = d[cons.sl_nl]
            extra = Wnl + (Jnl.T * dn) @ Jnl
            M = M + (extra if dense else sp.csr_matrix(extra))
        if dense:
            try:
                return sla.cho_solve(sla.cho_factor(M, lower=False, check_finite=False), rhs, check_finite=False)
            except (np.linalg.LinAlgError, ValueError):
                try:
                    return np.linalg.solve(M, rhs)
                except np.linalg.LinAlgError as exc:
                    raise SolverBugError(f"reduced system (2.20) is singular: {exc}") from None
        # M is symmetric: a minimum-degree ordering of M + M^T (SuperLU's default COLAMD orders for M^T M, and on
        # the arrow matrix of per-sample abs columns (hinge or absolute losses, n = N + d) it filled the N x N
        # block: 0.39 s against 0.046 s a solve on a1a's hinge loss, N = 1605, d = 124; docs/ipsa.md)
        return spla.spsolve(sp.csc_matrix(M), rhs, permc_spec="MMD_AT_PLUS_A")
