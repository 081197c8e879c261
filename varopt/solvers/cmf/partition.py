"""Graph partitions for conditional mean field (Carbonetto 2009, §4.3, Fig. 4.4).

A schedule is a sequence ``R_0 = {V}, R_1, ..., R_K`` of partitions of the vertices in which every
block of ``R_k`` lies inside one block of ``R_{k-1}`` (nested) and, for ``k >= 1``, induces a
connected subgraph (the thesis' footnote 2); ``R_K`` is the partition into singletons, where the
conditional mean field distribution is the target. Partitions are arrays of block labels.

**Automatic schedule** (``bisect``): every block is split into two connected halves at once, so
that ``K = O(log n)`` on graphs that admit balanced connected bisections. A block is split along
an edge of a depth-first spanning tree of its induced subgraph: removing a tree edge leaves two
subtrees, each connected through tree edges (hence through graph edges), and the edge whose
subtree is closest to half the block is taken. A depth-first tree of a complete graph is a path
(exact halves); a star admits no connected bisection and is peeled one leaf at a time. A block
whose induced subgraph is disconnected (only ``{V}`` of a disconnected graph, or a graph without
edges) is split into its connected components.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, depth_first_order

from ...errors import InvalidOptionError


def adjacency(model):
    """0/1 symmetric adjacency (csr) of the model's coupling graph."""
    n = model.n
    A = sp.csr_matrix((np.ones(2 * model.m), (np.r_[model.i, model.j], np.r_[model.j, model.i])), shape=(n, n))
    A.sum_duplicates()
    return A


def _bisect(A, block):
    """Two connected halves of the connected ``block`` (its induced subgraph ``A[block][:, block]``)."""
    m = block.size
    sub = A[block][:, block]
    order, pred = depth_first_order(sub, 0, directed=False, return_predecessors=True)
    size = np.ones(m, dtype=np.int64)
    for v in order[::-1][:-1]:  # children before parents; the root (order[0]) has no parent
        size[pred[v]] += size[v]
    cand = order[1:]
    v = int(cand[np.argmin(np.abs(size[cand] - m / 2.0))])
    inside = np.zeros(m, dtype=bool)
    inside[v] = True
    for u in order:  # a parent precedes its children in the traversal order
        if u != v and pred[u] >= 0 and inside[pred[u]]:
            inside[u] = True
    return block[inside], block[~inside]


def refine(A, labels):
    """The next partition of the automatic schedule (module docstring), as labels."""
    out = np.empty_like(labels)
    nxt = 0
    for b in np.unique(labels):
        block = np.flatnonzero(labels == b)
        if block.size == 1:
            parts = [block]
        else:
            k, comp = connected_components(A[block][:, block], directed=False)
            parts = [block[comp == c] for c in range(k)] if k > 1 else list(_bisect(A, block))
        for p in parts:
            out[p] = nxt
            nxt += 1
    return out


def bisection_schedule(model):
    """``[R_0 = {V}, R_1, ..., R_K = singletons]`` by repeated connected bisection (labels)."""
    n = model.n
    A = adjacency(model)
    labels = np.zeros(n, dtype=np.int64)
    out = [labels]
    while n and np.unique(labels).size < n:
        labels = refine(A, labels)
        out.append(labels)
    return out


def _blocks(part, k, n, names):
    """Labels of the user's partition ``part`` (a list of blocks of indices or names)."""
    lookup = {nm: t for t, nm in enumerate(names)}
    if isinstance(part, (str, bytes)) or not hasattr(part, "__iter__"):
        raise InvalidOptionError(f"option 'schedule': partition {k} must be a list of blocks (lists of vertices), "
                                 f"got {part!r}")
    labels = np.full(n, -1, dtype=np.int64)
    for b, block in enumerate(part):
        if isinstance(block, (str, bytes, int, np.integer)) or not hasattr(block, "__iter__"):
            raise InvalidOptionError(f"option 'schedule': partition {k}, block {b} must be a list of vertices, "
                                     f"got {block!r}")
        block = list(block)
        if not block:
            raise InvalidOptionError(f"option 'schedule': partition {k}, block {b} is empty")
        for v in block:
            if isinstance(v, str):
                if v not in lookup:
                    raise InvalidOptionError(f"option 'schedule': partition {k}, block {block!r}: no variable "
                                             f"named {v!r}")
                t = lookup[v]
            elif isinstance(v, (int, np.integer)) and 0 <= int(v) < n:
                t = int(v)
            else:
                raise InvalidOptionError(f"option 'schedule': partition {k}, block {block!r}: vertex {v!r} is "
                                         f"not an index in 0..{n - 1} or a variable name")
            if labels[t] >= 0:
                raise InvalidOptionError(f"option 'schedule': partition {k}: vertex {names[t]!r} is in two "
                                         f"blocks (block {block!r} and an earlier one)")
            labels[t] = b
    missing = np.flatnonzero(labels < 0)
    if missing.size:
        raise InvalidOptionError(f"option 'schedule': partition {k} does not cover the vertices: "
                                 f"{[names[t] for t in missing[:5]]} are in no block")
    return labels


def user_schedule(model, schedule):
    """Validated ``[R_0 = {V}, R_1, ..., singletons]`` (labels) from the user's list of partitions.

    ``{V}`` is prepended when the first partition is not the whole vertex set and the singletons
    are appended when the last is not; blocks must be connected and nested, else
    :class:`InvalidOptionError` naming the partition and the block."""
    n, names = model.n, model.names
    A = adjacency(model)
    parts = [_blocks(p, k, n, names) for k, p in enumerate(schedule)]
    off = 0
    if not parts or np.unique(parts[0]).size != 1:
        parts.insert(0, np.zeros(n, dtype=np.int64))
        off = 1
    if np.unique(parts[-1]).size < n:
        parts.append(np.arange(n, dtype=np.int64))
    for k in range(1, len(parts)):
        prev, cur = parts[k - 1], parts[k]
        for b in np.unique(cur):
            block = np.flatnonzero(cur == b)
            shown = [names[t] for t in block[:8]] + (["..."] if block.size > 8 else [])
            where = f"partition {k - off}" if k - off < len(schedule) else "the final singletons"
            if np.unique(prev[block]).size > 1:
                raise InvalidOptionError(f"option 'schedule': {where}: block {shown} is not nested in one block "
                                         f"of the previous partition (partitions must refine each other)")
            if block.size > 1 and connected_components(A[block][:, block], directed=False)[0] > 1:
                raise InvalidOptionError(f"option 'schedule': {where}: block {shown} is not connected in the "
                                         "model's graph (each block must induce a connected subgraph)")
    return parts

