"""Convexity of one GOP block: the constant Hessian of an expression and the PSD test on a block.

A block is convex in an expression when the expression's Hessian restricted to the block is
positive semidefinite. Every term of the expression counts:

* bilinear and square terms ``v z_i z_j`` (the Hessian of :class:`~varopt.program.terms.QuadraticTerms`);
* atom rows whose kernel is exactly quadratic (``c (a^T z + b)^2`` without multiplier,
  contributing ``2 c a a^T``; the table's ``quadratic`` flag says which kinds);
* the other convex atom rows without multiplier (``x log x``, ``-log x``, ``exp``, log-sum-exp)
  have PSD Hessians that depend on the point; leaving them out only makes the test stricter
  (a sum with a PSD matrix stays PSD), so the test never accepts a non-convex block;
* rows with a multiplier ``c w g(u)`` (``w`` in the other block, ``w >= 0`` checked by the
  partition conditions) are convex in their block for every ``w``: left out for the same reason.

This is the check that lets ``(x0 - 1)^2 + 2 (x1 + .5)^2 + 0.5 x0 x1`` keep ``x0`` and ``x1`` in
one block (its Hessian ``[[2, .5], [.5, 4]]`` is PSD) while ``x0 x1`` alone (``[[0, 1], [1, 0]]``)
must be split.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components


def constant_hessian(e) -> sp.csr_matrix:
    """Hessian of the quadratic terms plus the multiplier-free quadratic atoms of ``e`` (``n x n``)."""
    H = sp.csr_matrix(e.quadratic.hessian_matrix)
    for g in e.atoms:
        if not g.kernel.quadratic:
            continue
        free = np.flatnonzero(g.mult < 0)
        if free.size:
            A = g.A[free]
            H = H + A.T @ sp.diags(2.0 * g.coef[free]) @ A
    return sp.csr_matrix(H)


def block_psd(H: sp.csr_matrix, idx, tol: float = 1e-9) -> bool:
    """True when ``H[idx][:, idx]`` is positive semidefinite (relative tolerance ``tol``)."""
    idx = np.asarray(sorted(idx), dtype=np.int64)
    if idx.size == 0:
        return True
    S = H[idx][:, idx].toarray()
    if not S.any():
        return True
    scale = max(1.0, float(np.abs(S).max()))
    d = np.diag(S)
    if np.any(d < -tol * scale):
        return False
    # a zero diagonal entry with a nonzero off-diagonal entry in its row is indefinite (quick
    # reject of plain bilinear products without the eigen-decomposition)
    zero = np.abs(d) <= tol * scale
    if np.any(np.abs(S[zero]).max(axis=1, initial=0.0) > tol * scale):
        return False
    keep = ~zero
    if not keep.any():
        return True
    S = S[np.ix_(keep, keep)]
    # the eigenvalues of a block-diagonal matrix are those of its blocks: one eigen-decomposition per connected
    # component of the nonzero pattern (a sum of 3,000 squared residuals of a factorisation is a diagonal Hessian
    # whose one 3,000 x 3,000 eigvalsh took 1-2 s of the presolve, docs/gop.md "Time limits on larger models")
    ncomp, lab = connected_components(sp.csr_matrix(S), directed=False)
    if ncomp == 1:
        return bool(np.linalg.eigvalsh(S).min() >= -tol * scale)
    for c in range(ncomp):
        ix = np.flatnonzero(lab == c)
        if ix.size == 1:
            if S[ix[0], ix[0]] < -tol * scale:
                return False
        elif np.linalg.eigvalsh(S[np.ix_(ix, ix)]).min() < -tol * scale:
            return False
    return True


class BlockConvexity:
    """The constant Hessians of a program's objective and ``<=`` constraints, for repeated block tests.

    Constraints with a finite lower side (``==``, ``>=``, ranges) must be affine in each block, so
    their products can never lie inside one block (:attr:`split_products`)."""

    #: largest block whose PSD test is attempted when deciding to keep a product inside a block
    MAX_MERGE = 400

    def __init__(self, program):
        self.hessians = [constant_hessian(program.objective)]
        self.split_products = set()
        for c in program.constraints:
            q = c.body.quadratic
            if np.isfinite(c.lo):
                self.split_products.update((min(a, b), max(a, b)) for a, b in zip(q.i.tolist(), q.j.tolist()))
            elif len(q) or c.body.atoms:
                self.hessians.append(constant_hessian(c.body))
        self.hessians = [H for H in self.hessians if H.nnz]
        # (diagonal, entries, threshold) per Hessian for the quick reject of :meth:`may_merge`
        self._quick = [(H.diagonal(), H.todok(), 1e-9 * max(1.0, float(np.abs(H.data).max()))) for H in self.hessians]

    def convex(self, idx) -> bool:
        """Every expression is convex in the variables ``idx`` (their constant Hessian block is PSD)."""
        return all(block_psd(H, idx) for H in self.hessians)

    def may_merge(self, a: int, b: int, same, other) -> bool:
        """May the product ``z_a z_b`` stay inside one block whose variables would be ``same`` (the
        other block of the merged component: ``other``)? Both blocks must stay convex."""
        if (min(a, b), max(a, b)) in self.split_products:
            return False
        if len(same) > self.MAX_MERGE or len(other) > self.MAX_MERGE:
            return False
        for d, H, thr in self._quick:
            # the block holds a and b: a zero diagonal entry of one of them next to a nonzero H_ab makes it
            # indefinite, as block_psd finds (its threshold, 1e-9 max(1, max |entry of the block|), is at most thr)
            # after slicing the block out of H; this skips that slicing (0.5 ms per product: 4 s of the presolve
            # of a 400-variable random bilinear program with 8,000 products)
            if (d[a] == 0 or d[b] == 0) and abs(H.get((a, b), 0.0)) > thr:
                return False
        return self.convex(same) and self.convex(other)


def merge_convex_products(program, uf, quad_pending):
    """Keep every free product ``z_a z_b`` (no block relation yet) inside one block when both blocks
    of the merged component stay convex; ``uf`` is the parity union-find of :mod:`.partition`
    (virtual nodes ``n``, ``n + 1``), ``quad_pending`` its ``(a, b, text)`` products."""
    n = program.n
    conv = BlockConvexity(program)
    comps = defaultdict(list)
    for i in range(n + 2):
        comps[uf.find(i)].append(i)
    for a, b, txt in quad_pending:
        if uf.relation(a, b) is not None:
            continue
        ra, rb = uf.find(a), uf.find(b)
        pa, pb = uf.parity(a), uf.parity(b)
        same = [v for v in comps[ra] if v < n and uf.parity(v) == pa] + \
               [v for v in comps[rb] if v < n and uf.parity(v) == pb]
        in_same = set(same)
        other = [v for v in comps[ra] + comps[rb] if v < n and v not in in_same]
        if conv.may_merge(a, b, same, other):
            uf.union(a, b, 0, f"{txt} (kept in one block: convex)")
            root = uf.find(a)
            comps[root] = comps.pop(ra) + comps.pop(rb)
