r"""The convex part of a nonconvex quadratic objective, kept whole in the tree's relaxation.

For a quadratic objective ``f(x) = x^T H x / 2 + c^T x + k`` with an indefinite ``H``, McCormick's envelopes
relax each product ``x_i x_j`` on its own, and on dense forms (the BoxQPs of Vandenbussche & Nemhauser 2005) their
errors add up: on a 30-variable BoxQP at 50 % density the McCormick bound of the root box is -1406.8 where the
optimum is -735.5. The diagonal perturbation of the d.c. / alpha-BB underestimators (Adjiman, Dallwig, Floudas &
Neumaier 1998) splits ``f`` exactly as

    f(x) = phi(x) - 1/2 sum_i d_i x_i^2 + c^T x + k,      phi(x) = x^T (H + D) x / 2,   D = diag(d) >= 0,

with ``H + D`` positive semidefinite (here ``d_i = -lambda_min`` on the variables of ``H``). On a box
``[l, u]`` the concave part is bounded by its secants, ``x_i^2 <= (l_i + u_i) x_i - l_i u_i``, and the convex
part by its gradient cuts at any point ``p``, ``phi(x) >= p^T M x - p^T M p / 2`` (``M = H + D``). The lifted
objective row ``r_0^T Z + k_0``, which equals ``f`` at the lift of every point, therefore satisfies

    r_0^T Z + k_0 >= p^T M x - p^T M p / 2 - 1/2 sum_i d_i ((l_i + u_i) x_i - l_i u_i) + c^T x + k

for every point of the box. The row is added to the node LP next to McCormick's (it only removes lifted points
no feasible point lifts to), one per cut point; the cut points are the relaxation points where the row is
violated (a pool shared by all nodes, as the tangents of :mod:`.relax`). The secants shrink with the box
(error ``d_i (u_i - l_i)^2 / 8`` per variable), so the row closes as the tree branches. On the BoxQP above the
root bound with the row is -970.9 (docs/gop.md §12e).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


class ConvexPart:
    """``phi``'s data and a pool of cut points; :meth:`rows` gives the node rows, :meth:`violation` how far a
    lifted point lies below its own row."""

    #: largest number of variables of ``H`` whose eigenvalues are computed (dense ``eigvalsh``)
    max_vars = 600
    #: cut points kept (the newest); every node LP gets one row per point
    max_points = 40
    #: nonzeros of a node's rows that bound :attr:`max_points` on dense objectives
    max_entries = 60000

    def __init__(self, idx, M, d, c, k, r0, k0, N):
        self.idx, self.M, self.d, self.c, self.k = idx, M, d, c, k
        self.r0, self.k0, self.N = r0, k0, N
        self.points = []

    @classmethod
    def build(cls, program, lifted):
        """The split of ``program``'s objective, or None when it is not a quadratic form with an indefinite
        Hessian (a convex one is relaxed exactly by its tangents already; a linear one has nothing to split)."""
        obj = program.objective
        if not obj.is_quadratic_form or (not len(obj.quadratic) and not obj.atoms):
            return None
        try:
            H, c, k = obj.as_quadratic()
        except ValueError:
            return None
        H = H.tocsr()
        idx = np.unique(H.nonzero()[0])
        if idx.size < 2 or idx.size > cls.max_vars:
            return None
        Hs = H[idx][:, idx].toarray()
        Hs = 0.5 * (Hs + Hs.T)
        lam = float(np.linalg.eigvalsh(Hs)[0])
        scale = float(np.abs(Hs).max())
        if lam >= -1e-9 * scale:
            return None
        # a margin for the rounding of eigvalsh (errors ~1e-15 ||H||): M must be PSD for the gradient cuts
        delta = -lam + 1e-9 * scale
        d = np.full(idx.size, delta)
        cz = np.zeros(lifted.N)    # the linear part of f (all variables) over the lifted columns
        cz[:program.n] = np.asarray(c, dtype=float)
        out = cls(idx, Hs + np.diag(d), d, cz, float(k), lifted.R[0].tocsr(), float(lifted.const[0]), lifted.N)
        # each row repeats the objective row (all its products): on dense forms fewer points, so the rows of a
        # node stay within ~max_entries nonzeros
        out.max_points = int(min(cls.max_points, max(4, cls.max_entries // max(1, out.r0.nnz + idx.size))))
        return out

    def add(self, p):
        """Add the cut point ``p`` (values of the variables of ``H``); the oldest is dropped past :attr:`max_points`."""
        self.points.append(np.asarray(p, dtype=float).copy())
        if len(self.points) > self.max_points:
            self.points.pop(0)

    def _ok(self, l, u):
        return bool(np.all(np.isfinite(l[self.idx])) and np.all(np.isfinite(u[self.idx])))

    def rows(self, l, u, points=None):
        """``(A, lo, hi)``: ``A Z >= lo`` for every cut point on the box ``[l, u]`` (empty when a variable of
        ``H`` is unbounded there: its secant needs both ends)."""
        pts = self.points if points is None else points
        if not pts or not self._ok(l, u):
            return sp.csr_matrix((0, self.N)), np.zeros(0), np.zeros(0)
        li, ui = l[self.idx], u[self.idx]
        P = np.array(pts)                                   # (K, m)
        G = P @ self.M                                      # gradients of phi at the points
        # r0^T Z - (G + c - d (l + u) / 2)^T x >= k - k0 - p^T M p / 2 + sum d l u / 2
        X = G - 0.5 * self.d * (li + ui)                    # the part over the variables of H (besides c)
        lo = self.k - self.k0 - 0.5 * np.einsum("ij,ij->i", G, P) + 0.5 * float(np.sum(self.d * li * ui))
        K = P.shape[0]
        A = sp.vstack([self.r0] * K, format="csr") - sp.csr_matrix(np.tile(self.c, (K, 1))) - sp.csr_matrix(
            (X.ravel(), (np.repeat(np.arange(K), self.idx.size), np.tile(self.idx, K))), shape=(K, self.N))
        A = A.tocsr()
        A.eliminate_zeros()
        return A, lo, np.full(K, np.inf)

    def violation(self, Z, l, u):
        """How far the lifted point ``Z`` is below the row at the cut point ``x`` itself (0 when it is not)."""
        if not self._ok(l, u):
            return 0.0
        x = Z[self.idx]
        A, lo, _ = self.rows(l, u, [x])
        return float(max(0.0, lo[0] - (A @ Z)[0]))
