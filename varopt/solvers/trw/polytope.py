"""Is a user's vector of edge appearance probabilities good for a TRW bound?

The TRW bound ``log Z <= max_tau B_rho(tau)`` (Wainwright, Jaakkola & Willsky 2005) holds for
``rho`` in the spanning-tree polytope, and for every ``rho`` below such a point: since
``I_e(tau_e) >= 0``, lowering ``rho_e`` raises ``B_rho`` at every ``tau``. Below the polytope is
the *forest polytope* (Edmonds 1971)

    F = { rho >= 0 : rho(E(S)) <= |S| - 1 for every non-empty vertex set S },

and on F the reweighted entropy ``sum_i H_i - sum_e rho_e I_e`` is concave: Hakimi's theorem gives a
fractional orientation of the edges with in-weight at most 1 at every node (``rho(E(S)) < |S|``),
and the entropy is then a non-negative combination of conditional entropies ``H(j | i)`` and
single-node entropies, all concave (Heskes 2006). So a converged fixed point maximises ``B_rho``.

**Test** (Padberg & Wolsey 1983; Cunningham 1985). ``rho(E(S)) <= |S| - 1`` for all S iff
``min_{S != {}} f(S) >= 1`` with ``f(S) = |S| - rho(E(S)) = sum_{v in S} (1 - d_v/2) + rho(delta(S))/2``
(``d_v`` the weighted degree, ``delta(S)`` the cut), a node-weighted cut function. For each node
``v`` in turn, ``min_{S ni v} f(S)`` over the nodes not yet processed is one minimum s-t cut with
source ``v`` (earlier nodes are outside S: their edges to S are cut). Capacities are scaled to
integers and rounded down, so the computed minimum is at most the true one (never a false pass).

**Slack.** If ``min f >= 1 - eps``, then ``rho/(1 + eps)`` lies in F (``rho(E(S)) <= |S| - 1 + eps
<= (|S| - 1)(1 + eps)`` for ``|S| >= 2``), and ``B_{rho/(1+eps)} <= B_rho + eps ln 2 sum_e rho_e``
(``I_e <= ln 2``): ``max B_rho + eps ln 2 sum rho`` is a bound.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

#: largest total capacity of one cut problem, as int32 (scipy's maximum_flow)
_CAP = 2 ** 30
#: the check is skipped above this many nodes (one max-flow per node)
MAX_NODES = 3000


def forest_excess(n, i, j, rho):
    """``(eps, v)``: an upper estimate of ``max(0, max_S rho(E(S)) - |S| + 1)`` and a node of a set
    attaining it (None when ``eps`` is 0), or ``(None, None)`` when the graph is too large to check."""
    i, j, rho = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64), np.asarray(rho, dtype=float)
    if rho.size == 0:
        return 0.0, None
    if n > MAX_NODES:
        return None, None
    deg = np.bincount(i, rho, n) + np.bincount(j, rho, n)
    w = 1.0 - deg / 2.0
    total = float(np.abs(w).sum() + rho.sum())
    # no capacity and no flow exceeds total; the second round of _max_flow_lower refines the first
    # (its error is about nnz^2 total / 2^60: 1e-10 on a 20 x 20 grid, 1e-7 at 3000 nodes)
    scale = math.floor((_CAP - 1) / (total + 1.0))
    if scale < 1:
        return None, None
    worst, arg = -math.inf, None
    alive = np.ones(n, dtype=bool)
    for v in range(n):
        g = _min_f_containing(n, i, j, rho, w, alive, v, scale)
        if 1.0 - g > worst:
            worst, arg = 1.0 - g, v
        alive[v] = False  # sets with v are done: later sets exclude it
    # each minimum is a lower estimate (capacities rounded down), so 1 - min is an upper estimate
    return max(0.0, worst), (arg if worst > 1e-9 else None)


def _min_f_containing(n, i, j, rho, w, alive, v, scale):
    """``min f(S)`` over ``S`` containing ``v`` inside the alive nodes (a lower estimate)."""
    t = n  # the sink
    const = w[v]
    src, dst, cap = [], [], []
    inside = alive[i] & alive[j]
    # coupling edges among the alive nodes: rho/2 each way
    src += [i[inside], j[inside]]
    dst += [j[inside], i[inside]]
    cap += [rho[inside] / 2.0, rho[inside] / 2.0]
    # an edge to a dead node is cut when its alive end is in S: that end pays rho/2 to the sink
    for a, b in ((i, j), (j, i)):
        out = alive[a] & ~alive[b]
        src.append(a[out])
        dst.append(np.full(int(out.sum()), t))
        cap.append(rho[out] / 2.0)
    # node weights: w_x >= 0 is paid when x is in S (x -> t), w_x < 0 when x is not (v -> x)
    others = np.flatnonzero(alive)
    others = others[others != v]
    pos = others[w[others] >= 0]
    neg = others[w[others] < 0]
    src += [pos, np.full(neg.size, v)]
    dst += [np.full(pos.size, t), neg]
    cap += [w[pos], -w[neg]]
    const += float(w[neg].sum())
    s_all, d_all, c_all = np.concatenate(src), np.concatenate(dst), np.concatenate(cap)
    keep = s_all != d_all
    s_all, d_all, c_all = s_all[keep], d_all[keep], c_all[keep]
    # v -> t edges are constants (v is always in S)
    to_t_from_v = d_all == t
    to_t_from_v &= s_all == v
    const += float(c_all[to_t_from_v].sum())
    s_all, d_all, c_all = s_all[~to_t_from_v], d_all[~to_t_from_v], c_all[~to_t_from_v]
    C = sp.csr_matrix((c_all, (s_all, d_all)), shape=(n + 1, n + 1))
    C.sum_duplicates()
    return const + _max_flow_lower(C, v, t, scale)


def _max_flow_lower(C, s, t, scale):
    """A feasible flow value from ``s`` to ``t`` under the float capacities ``C`` (a lower estimate of
    the maximum flow, hence of the minimum cut), by two integer max-flows: capacities rounded down at
    ``scale``, then the residual capacities, capped at the most the first rounding can have lost
    (an acyclic maximum flow carries at most its value on any edge) and rounded at a finer scale."""
    if C.nnz == 0:
        return 0.0
    pattern = (C + C.T).tocsr()  # residual arcs both ways
    pattern.data[:] = 0.0
    Cf = (C + pattern).tocsr()
    Cf.sort_indices()
    F1 = maximum_flow(_int32(np.floor(Cf.data * scale), Cf), s, t, method="dinic")
    f1 = F1.flow.tocsr().astype(float) / scale
    lost = C.nnz / scale   # each rounded capacity lost less than 1/scale
    R = (Cf - f1).tocsr()
    R.data = np.clip(R.data * (1.0 - 1e-15), 0.0, lost)
    scale2 = math.floor((_CAP - 1) / (lost * (1.0 + 1e-9)))
    F2 = maximum_flow(_int32(np.floor(R.data * scale2), R), s, t, method="dinic")
    return F1.flow_value / scale + F2.flow_value / scale2


def _int32(data, like):
    M = sp.csr_matrix((data.astype(np.int32), like.indices.copy(), like.indptr.copy()), shape=like.shape)
    M.eliminate_zeros()
    return M
