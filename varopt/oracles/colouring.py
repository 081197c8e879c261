"""Colour classes of a graph: sets of pairwise non-adjacent vertices.

Sites of one class are conditionally independent given the others in a pairwise model, so a
Gibbs sweep or a mean-field coordinate-ascent sweep updates a whole class at once (one
vectorized step) and is still an exact systematic-scan sweep. A bipartite graph gets its two
sides (the checkerboard of a lattice with even periodic sides or open boundaries, the visible
and hidden layers of a restricted Boltzmann machine: the two-stage block Gibbs sampler);
otherwise a greedy colouring, largest degree first (Welsh & Powell 1967), gives at most
``max degree + 1`` classes.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _csr(n, i, j):
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    A = sp.csr_matrix((np.ones(2 * i.size), (np.concatenate([i, j]), np.concatenate([j, i]))), shape=(n, n))
    A.sum_duplicates()
    return A


def two_colouring(n, i, j):
    """Labels 0/1 of a proper 2-colouring, or None when the graph is not bipartite."""
    A = _csr(n, i, j)
    lab = np.full(n, -1, dtype=np.int64)
    for s in range(n):
        if lab[s] >= 0:
            continue
        lab[s] = 0
        stack = [s]
        while stack:
            v = stack.pop()
            for u in A.indices[A.indptr[v]:A.indptr[v + 1]]:
                if lab[u] < 0:
                    lab[u] = 1 - lab[v]
                    stack.append(u)
                elif lab[u] == lab[v]:
                    return None
    return lab


def greedy_colouring(n, i, j):
    """Labels of a greedy colouring, vertices by decreasing degree."""
    A = _csr(n, i, j)
    deg = np.diff(A.indptr)
    lab = np.full(n, -1, dtype=np.int64)
    for v in np.argsort(-deg, kind="stable"):
        used = set(lab[A.indices[A.indptr[v]:A.indptr[v + 1]]].tolist())
        c = 0
        while c in used:
            c += 1
        lab[v] = c
    return lab


def colour_classes(n, i, j):
    """List of index arrays (the colour classes, each sorted); two classes when bipartite."""
    lab = two_colouring(n, i, j)
    if lab is None:
        lab = greedy_colouring(n, i, j)
    return [np.flatnonzero(lab == c) for c in range(int(lab.max()) + 1 if n else 0) if (lab == c).any()]
