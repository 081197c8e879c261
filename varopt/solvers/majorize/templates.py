"""Class-template structure of padded log-sum-exp groups (multinomial logistic regression and any
features whose rows are copies of one vector ``x_g`` in per-row column blocks), and the dense
``Sigma`` assembled by blocks ``X^T diag(M_ab) X`` (docs/majorize.md §1b): ``c - 1`` times fewer flops
than the generic ``R^T R``.

The shared feature matrix ``X`` is kept as the features gave it: dense when at least
:data:`DENSE_FRACTION` of its entries are nonzero (or it is small), else CSR. A sparse ``X``
(bag-of-words data such as rcv1 or news20: under 1 % nonzero) densified would cost ``G d'`` memory and make every
product ``X z`` cost ``G d'`` flops instead of ``nnz(X)`` (20,000 x 5,000 at 0.5 %: 800 MB and 200 times the
flops); its products then take the padded features' sparse path (:meth:`.groups.PaddedGroups._template_fast`), and
the blocks of ``Sigma``, the Gram blocks and the Kronecker constants are formed by sparse products.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: the template features ``X`` are stored dense when at least this fraction of its entries are nonzero ...
DENSE_FRACTION = 0.25
#: ... or when it has at most this many entries (small problems: dense BLAS is faster whatever the density)
DENSE_ENTRIES = 2 ** 20


def detect_template(Apad, c, d, G):
    """``(rows, cols, X)`` when row ``y`` of every group equals ``x_g`` on the columns ``cols[y]``.

    ``rows`` are the padded positions that are not identically zero, ``cols[y]`` the (disjoint,
    equally long) column sets, ``X`` (G x d') the shared feature vectors (an ndarray, or CSR when sparse: see
    :data:`DENSE_FRACTION`). ``None`` otherwise.
    Linear in the number of nonzeros: with sorted indices and no stored zeros, row ``y`` of group ``g``
    equals ``x_g`` on ``cols[y]`` iff all positions share one ``indptr``, the same positions of their
    indices within ``cols[y]`` and the same values.
    """
    if c < 2:
        return None
    if not (Apad.has_sorted_indices and Apad.data.all()):
        # (a copy only when needed: copying and checking the nonzeros of a large feature matrix cost more than the
        # detection itself)
        Apad = Apad.copy()
        Apad.eliminate_zeros()
        Apad.sort_indices()
    rows, cols, parts = [], [], []
    for y in range(c):
        Ay = Apad[y::c]
        if Ay.nnz == 0:
            continue
        cy = np.flatnonzero(np.bincount(Ay.indices, minlength=d))
        where = np.empty(d, dtype=np.int64)
        where[cy] = np.arange(cy.size)
        rows.append(y)
        cols.append(cy)
        parts.append((Ay.indptr, where[Ay.indices], Ay.data))
    if not rows or len({cy.size for cy in cols}) != 1:
        return None
    allc = np.concatenate(cols)
    if np.unique(allc).size != allc.size:
        return None
    ip0, pos0, v0 = parts[0]
    for ip, pos, v in parts[1:]:
        if not (np.array_equal(ip, ip0) and np.array_equal(pos, pos0) and np.array_equal(v, v0)):
            return None
    X = sp.csr_matrix((v0, pos0, ip0), shape=(G, cols[0].size))
    entries = G * cols[0].size
    if entries <= DENSE_ENTRIES or X.nnz >= DENSE_FRACTION * entries:
        X = X.toarray()
    return rows, cols, X


def sigma_template(grp, T):
    """Dense ``sum_g c_g Sigma_g`` of a class-template :class:`~.groups.PaddedGroups` from its factors ``T``."""
    rows, cols, X = grp.template
    G, dp = X.shape
    r = len(rows)
    if r == 1:
        t = T[:, :, rows[0]]
        m = t[:, 0] * t[:, 0] if t.shape[1] == 1 else np.einsum("gi,gi->g", t, t)
        B = (X.T @ (sp.diags(m) @ X)).toarray() if sp.issparse(X) else X.T @ (X * m[:, None])
    elif sp.issparse(X):
        # sparse features: block (a, b) = X^T diag(M[:, a, b]) X by one sparse product per block a <= b
        Tr = T[:, :, rows]
        M = np.matmul(Tr.transpose(0, 2, 1), Tr)  # (G, r, r)
        B = np.empty((r * dp, r * dp))
        XT = X.T.tocsr()
        for a in range(r):
            for b in range(a, r):
                blk = (XT @ (sp.diags(M[:, a, b]) @ X)).toarray()
                B[a * dp:(a + 1) * dp, b * dp:(b + 1) * dp] = blk
                if b != a:
                    B[b * dp:(b + 1) * dp, a * dp:(a + 1) * dp] = blk.T
    else:
        Tr = T[:, :, rows]
        M = np.matmul(Tr.transpose(0, 2, 1), Tr)  # (G, r, r)
        XX = packed_products(grp, X)
        if XX is not None:
            # block (a, b) entry (i, j) = sum_g M_g[a, b] x_gi x_gj: symmetric in (a, b) and in (i, j), so one
            # GEMM over the packed pairs a <= b, i <= j (4x fewer flops than all blocks, no 4-D temporary)
            ka, kb = np.triu_indices(r)
            iu, ju = grp._packed_index
            Z = M[:, ka, kb].T @ XX  # (r (r+1)/2, d' (d'+1)/2)
            blk = np.empty((ka.size, dp, dp))
            blk[:, iu, ju] = Z
            blk[:, ju, iu] = Z
            B4 = np.empty((r, r, dp, dp))
            B4[ka, kb] = blk
            B4[kb, ka] = blk
            B = B4.transpose(0, 2, 1, 3).reshape(r * dp, r * dp)
        else:
            # block (a, b) = X^T diag(M[:, a, b]) X, all blocks in one GEMM
            Y = (M[:, :, :, None] * X[:, None, None, :]).reshape(G, r * r * dp)
            B = (X.T @ Y).reshape(dp, r, r, dp).transpose(1, 0, 2, 3).reshape(r * dp, r * dp)
    if grp._template_identity:
        return B
    allc = np.concatenate(cols)
    out = np.zeros((grp.d, grp.d))
    out[np.ix_(allc, allc)] = B
    return out


def packed_products(grp, X):
    """``(G, d'(d'+1)/2)`` products ``x_gi x_gj`` (``i <= j``), cached on ``grp``; None when too large or ``X`` is
    sparse."""
    if getattr(grp, "_packed", None) is None:
        G, dp = X.shape
        if G * dp * (dp + 1) / 2 > grp.PACKED_LIMIT or sp.issparse(X):
            grp._packed = False
        else:
            grp._packed_index = np.triu_indices(dp)
            iu, ju = grp._packed_index
            grp._packed = X[:, iu] * X[:, ju]
    return None if grp._packed is False else grp._packed
