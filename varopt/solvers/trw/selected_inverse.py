"""Entries of the inverse of a sparse symmetric positive definite matrix on the pattern of its Cholesky factor
(selected inversion; Takahashi, Fagan & Chen 1973; Erisman & Tinney 1975), in numba (imported only when numba is
installed; :func:`.solver.spanning_tree_probabilities` keeps the per-edge solves as the reference path).

With ``A = L D L^T`` (``L`` unit lower triangular) the inverse ``Z = A^{-1}`` satisfies
``Z = D^{-1} L^{-1} + (I - L^T) Z``; column ``j`` below the diagonal and the diagonal entry are

    Z_ij = - sum_{k in S_j} Z_ik L_kj   (i in S_j),        Z_jj = 1/D_j - sum_{k in S_j} L_kj Z_kj,

``S_j`` the rows of column j of L below the diagonal. For ``i, k`` in ``S_j`` the entry ``Z_ik`` lies in the
pattern of L (the rows of S_j above k are rows of column k: the filled graph's cliques), so sweeping the columns
from the last to the first needs no entry outside the pattern; the cost is that of the numeric factorisation.
The factorisation is the up-looking LDL^T of Davis (2005, "Algorithm 849: a concise sparse Cholesky
factorization package"): elimination tree and column counts, then row ``k`` of L from a sparse triangular solve
along the tree. Both work on the symmetric permutation ``A[perm][:, perm]`` of a fill-reducing order.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def ldl_symbolic(n, Ap, Ai):
    """Elimination tree ``parent`` and column pointers ``Lp`` of L for the CSC matrix ``(Ap, Ai)`` (its
    entries above the diagonal are used)."""
    parent = np.full(n, -1, dtype=np.int64)
    flag = np.empty(n, dtype=np.int64)
    lnz = np.zeros(n, dtype=np.int64)
    for k in range(n):
        flag[k] = k
        for p in range(Ap[k], Ap[k + 1]):
            i = Ai[p]
            if i < k:
                while flag[i] != k:
                    if parent[i] == -1:
                        parent[i] = k
                    lnz[i] += 1
                    flag[i] = k
                    i = parent[i]
    Lp = np.zeros(n + 1, dtype=np.int64)
    for k in range(n):
        Lp[k + 1] = Lp[k] + lnz[k]
    return parent, Lp


@njit(cache=True)
def ldl_numeric(n, Ap, Ai, Ax, Lp, parent):
    """``(Li, Lx, D, ok)``: L (unit lower, CSC, rows sorted in each column) and D of ``A = L D L^T``; ``ok`` is
    False when a pivot is not positive (the matrix is not positive definite)."""
    Li = np.empty(Lp[n], dtype=np.int64)
    Lx = np.empty(Lp[n])
    D = np.empty(n)
    Y = np.zeros(n)
    pattern = np.empty(n, dtype=np.int64)
    flag = np.empty(n, dtype=np.int64)
    lnz = np.zeros(n, dtype=np.int64)
    for k in range(n):
        top = n
        flag[k] = k
        for p in range(Ap[k], Ap[k + 1]):
            i = Ai[p]
            if i <= k:
                Y[i] += Ax[p]
                ln = 0
                while flag[i] != k:
                    pattern[ln] = i
                    ln += 1
                    flag[i] = k
                    i = parent[i]
                while ln > 0:
                    top -= 1
                    ln -= 1
                    pattern[top] = pattern[ln]
        D[k] = Y[k]
        Y[k] = 0.0
        while top < n:
            i = pattern[top]
            yi = Y[i]
            Y[i] = 0.0
            p2 = Lp[i] + lnz[i]
            for p in range(Lp[i], p2):
                Y[Li[p]] -= Lx[p] * yi
            lki = yi / D[i]
            D[k] -= lki * yi
            Li[p2] = k
            Lx[p2] = lki
            lnz[i] += 1
            top += 1
        if not D[k] > 0.0:
            return Li, Lx, D, False
    return Li, Lx, D, True


@njit(cache=True)
def selected_inverse(n, Lp, Li, Lx, D):
    """``(Zd, Zx, ok)``: the diagonal of ``Z = A^{-1}`` and its entries on the pattern of L (module docstring);
    ``ok`` is False if an entry the recurrence needs is missing from the pattern (not a filled pattern)."""
    Zd = np.empty(n)
    Zx = np.empty(Lp[n])
    z = np.empty(n)
    for j in range(n - 1, -1, -1):
        s, e = Lp[j], Lp[j + 1]
        m = e - s
        for a in range(m):
            z[a] = 0.0
        for a in range(m):
            k = Li[s + a]
            lk = Lx[s + a]
            z[a] += Zd[k] * lk
            q, qe = Lp[k], Lp[k + 1]
            for b in range(a + 1, m):
                r = Li[s + b]
                while q < qe and Li[q] < r:
                    q += 1
                if q == qe or Li[q] != r:  # row r of column k: present in a filled pattern (a clique)
                    return Zd, Zx, False
                zv = Zx[q]  # Z_rk
                z[b] += zv * lk
                z[a] += zv * Lx[s + b]
        d = 1.0 / D[j]
        for a in range(m):
            Zx[s + a] = -z[a]
            d += Lx[s + a] * z[a]
        Zd[j] = d
    return Zd, Zx, True


@njit(cache=True)
def entries(Lp, Li, Zd, Zx, u, v):
    """``Z_uv`` for each pair (``u``/``v`` positions in the factor's order; -1 for a grounded node, whose
    row and column of Z are 0): the effective resistance needs ``Z_uu + Z_vv - 2 Z_uv``."""
    out = np.empty(u.size)
    for t in range(u.size):
        a, b = u[t], v[t]
        if a < 0 or b < 0:
            out[t] = 0.0
            continue
        if a == b:
            out[t] = Zd[a]
            continue
        if a > b:
            a, b = b, a
        lo, hi = Lp[a], Lp[a + 1]
        while lo < hi:  # binary search of row b in column a
            mid = (lo + hi) // 2
            if Li[mid] < b:
                lo = mid + 1
            else:
                hi = mid
        out[t] = Zx[lo] if lo < Lp[a + 1] and Li[lo] == b else np.nan
    return out


def resistances(K, pi, pj, order):
    """Effective resistances ``Z_ii + Z_jj - 2 Z_ij`` of the grounded Laplacian ``K`` (csc, symmetric positive
    definite) for the pairs of positions ``pi``, ``pj`` (-1: grounded), factorising ``K[order][:, order]``.
    Returns None when the factorisation meets a non-positive pivot (or the pattern is not closed)."""
    n = K.shape[0]
    inv = np.empty(n, dtype=np.int64)
    inv[order] = np.arange(n)
    P = K[order][:, order].tocsc()
    P.sort_indices()
    Ap, Ai, Ax = P.indptr.astype(np.int64), P.indices.astype(np.int64), P.data.astype(float)
    parent, Lp = ldl_symbolic(n, Ap, Ai)
    Li, Lx, D, ok = ldl_numeric(n, Ap, Ai, Ax, Lp, parent)
    if not ok:
        return None
    Zd, Zx, ok = selected_inverse(n, Lp, Li, Lx, D)
    if not ok:
        return None
    a = np.where(pi >= 0, inv[np.maximum(pi, 0)], -1)
    b = np.where(pj >= 0, inv[np.maximum(pj, 0)], -1)
    za = np.where(a >= 0, Zd[np.maximum(a, 0)], 0.0)
    zb = np.where(b >= 0, Zd[np.maximum(b, 0)], 0.0)
    return za + zb - 2.0 * entries(Lp, Li, Zd, Zx, a, b)
