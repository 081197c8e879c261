"""Gram matrices ``F_a diag(w) F_a^T`` ((G c) x (G c)) of the padded groups over the penalized columns: the
capacitance of the row-space Woodbury step (:meth:`.groups.PaddedGroups.woodbury_solve`, docs/majorize.md section 2),
computed once per solve and returned as a ``(G, c, G, c)`` array."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def gram_template(grp, w):
    """The Gram blocks of class-template features: row ``y`` of group ``g`` is ``x_g`` on the columns ``cols[y]``,
    so block ``(y, y')`` vanishes for ``y != y'`` and block ``(y, y)`` is ``X diag(w[cols[y]]) X^T`` -- one
    symmetric product (SYRK on ``X diag(sqrt(w))``) per distinct weight vector, usually one for all ``y``."""
    G, c = grp.G, grp.c
    rows, cols, X = grp._template
    Gm = np.zeros((G, c, G, c))
    done = []
    for y, cy in zip(rows, cols):
        wy = w[cy]
        for wz, blk in done:
            if np.array_equal(wz, wy):
                break
        else:
            if sp.issparse(X):
                Xs = X @ sp.diags(np.sqrt(wy))
                blk = (Xs @ Xs.T).toarray()
            else:
                Xs = X * np.sqrt(wy)
                blk = Xs @ Xs.T
            done.append((wy, blk))
        Gm[:, y, :, y] = blk
    return Gm


def gram_generic(grp, w):
    """The Gram blocks per pair of padded row positions on the columns both use (:meth:`.groups.PaddedGroups.gram`)."""
    G, c, d = grp.G, grp.c, grp.d
    Fy = [grp.Apad[y::c] for y in range(c)]
    supp = [(np.bincount(F.indices, minlength=d) > 0) & (w != 0) for F in Fy]
    Gm = np.zeros((G, c, G, c))
    for y in range(c):
        for z in range(y, c):
            S = np.flatnonzero(supp[y] & supp[z])
            if S.size == 0:
                continue
            A = Fy[y][:, S]
            B = A if z == y else Fy[z][:, S]
            if A.nnz > 0.05 * A.shape[0] * S.size:
                A = A.toarray()
                B = A if z == y else B.toarray()
                blk = (A * w[S]) @ B.T
            else:
                blk = np.asarray((A @ sp.diags(w[S]) @ B.T).toarray())
            Gm[:, y, :, z] = blk
            if z != y:
                Gm[:, z, :, y] = blk.T
    return Gm
