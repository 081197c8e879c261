"""Exact log Z and marginals of a pairwise binary model: enumeration and variable elimination.

The model is the log-potential ``t(s) = const + h.s + sum_e w_e s_i s_j`` (spins), and
``log Z = log sum_s exp t(s)``.

**Enumeration** (small n): all ``2^n`` states in blocks, ``log Z`` by ``logsumexp``, marginals
and pair correlations as exact weighted averages.

**Variable elimination** (Zhang & Poole 1994; Dechter 1999, "bucket elimination") in log
space: every factor is a table of log-values over ``2^k`` states of its scope. Eliminating
``v`` adds the tables of its bucket over their joint scope ``U`` and sums ``v`` out,
``m(U \\ v) = logaddexp(T[s_v=-1], T[s_v=+1])`` (never exponentiating: finite at any
temperature), and puts the message into the bucket of the next variable of ``U`` to be
eliminated. A message with empty scope is a factor of ``Z`` (one per connected component).
On a lattice eliminated row by row this *is* the transfer-matrix method with single-site
updates (Baxter 1982), which is why a cylinder of circumference ``W`` has width ``W``.

**Marginals** by the downward pass of the bucket tree: with the cavity ``down_v`` sent by
``v``'s parent, the belief of bucket ``v`` is ``T_v + down_v`` (its normalised exponential is the
exact marginal of ``U_v``), and the message down to child ``c`` is the belief minus ``c``'s
own upward message, summed over ``U_v \\ U_c``. The upward messages are kept for that pass;
when they would exceed ``memory_limit`` entries only log Z is computed.
"""
from __future__ import annotations


import numpy as np
from scipy.special import logsumexp

from ...program.energy import spin_states
from .order import adjacency, best_order

_SPIN = np.array([-1.0, 1.0])


def enumerate_model(model, block=1 << 22):
    """``(log Z, E[s], E[s_i s_j] on model's edges)`` by summing over all ``2^n`` states.

    Meet in the middle: with the spins split into halves A and B (all ``2^|A|`` and ``2^|B|``
    states listed once), the log-weights of a block of A-states against every B-state form the
    matrix ``t_A[:, None] + t_B[None, :] + S_A W_AB S_B^T`` (one matrix product), so memory is
    ``block`` entries and the work ``2^n`` entries whatever the density (26 spins: ~1 s)."""
    n = model.n
    nA = n // 2
    A, B = np.arange(nA), np.arange(nA, n)
    SA, SB = spin_states(nA), spin_states(n - nA)
    inA = (model.i < nA) & (model.j < nA)
    inB = (model.i >= nA) & (model.j >= nA)
    cross = ~(inA | inB)
    ea, eb = model.subset(A), model.subset(B)
    tA = model.const + ea.value(SA) if nA else np.full(1, model.const)
    tB = eb.value(SB)
    W = np.zeros((nA, n - nA))
    np.add.at(W, (model.i[cross], model.j[cross] - nA), model.w[cross])
    SBW = SB @ W.T  # (2^|B|, nA)
    rows = max(1, block // SB.shape[0])
    parts = []
    for s in range(0, SA.shape[0], rows):
        sa = SA[s:s + rows]
        M = tA[s:s + rows, None] + tB[None, :] + sa @ SBW.T
        lz = logsumexp(M)
        P = np.exp(M - lz)
        pa, pb = P.sum(axis=1), P.sum(axis=0)
        m = np.concatenate([pa @ sa, pb @ SB])
        c = np.zeros(model.m)
        c[inA] = pa @ (sa[:, model.i[inA]] * sa[:, model.j[inA]])
        c[inB] = pb @ (SB[:, model.i[inB] - nA] * SB[:, model.j[inB] - nA])
        if cross.any():
            C = sa.T @ P @ SB
            c[cross] = C[model.i[cross], model.j[cross] - nA]
        parts.append((lz, m, c))
    logs = np.array([p[0] for p in parts])
    log_z = float(logsumexp(logs))
    wts = np.exp(logs - log_z)
    return log_z, wts @ np.array([p[1] for p in parts]), wts @ np.array([p[2] for p in parts])


def _expand(scope, table, U, pos):
    """``table`` (axes in ``scope`` order) reshaped to broadcast over the axes of ``U``."""
    shape = [1] * len(U)
    where = {v: k for k, v in enumerate(U)}
    for v in scope:
        shape[where[v]] = 2
    return table.reshape(shape)


class Elimination:
    """Bucket elimination of one model along the least-width heuristic order (see module doc)."""

    def __init__(self, model, order=None, max_width=None):
        """``max_width``: give up on orders once wider (``order`` and ``width`` are then None)."""
        self.model = model
        n = model.n
        adj = adjacency(n, model.i, model.j)
        if order is None:
            order, width = best_order(adj, stop_above=max_width)
            if order is None:
                self.order = self.width = None
                return
        else:
            from .order import induced_width
            width = induced_width(adj, order)[0]
        self.order, self.width = list(order), int(width)
        self.pos = np.empty(n, dtype=np.int64)
        self.pos[self.order] = np.arange(n)

    def _sorted(self, vs):
        return tuple(sorted(vs, key=lambda v: self.pos[v]))

    def run(self, marginals=True, memory_limit=1 << 27, check=None):
        """``(log Z, E[s] or None, E[s_i s_j] or None)``. ``check()`` is called after every
        elimination (the run loop's limits; it raises to stop)."""
        model, n = self.model, self.model.n
        buckets = [[] for _ in range(n)]  # (kind, key, scope, table); kind 'f' factor, 'm' message
        for v in range(n):
            buckets[v].append(("f", ("h", v), (v,), np.array([-model.h[v], model.h[v]])))
        for e, (a, b, w) in enumerate(zip(model.i.tolist(), model.j.tolist(), model.w.tolist())):
            scope = self._sorted((a, b))
            buckets[scope[0]].append(("f", ("e", e), scope, np.array([[w, -w], [-w, w]])))
        log_z = model.const
        scopes, parent, msgs = [None] * n, [-1] * n, {}
        stored = 0
        keep = marginals
        for v in self.order:
            U = self._sorted(set().union(*[f[2] for f in buckets[v]]))
            T = self._table(buckets[v], U)
            m = np.logaddexp(T[0], T[1])
            scopes[v] = U
            if len(U) == 1:
                log_z += float(m)
            else:
                parent[v] = U[1]
                buckets[U[1]].append(("m", v, U[1:], m))
                if keep:
                    stored += m.size
                    keep = stored <= memory_limit
                    msgs[v] = m
            if check is not None:
                check()
        if not keep:
            return log_z, None, None
        return (log_z, *self._downward(buckets, scopes, parent, log_z, check))

    def _table(self, bucket, U):
        T = np.zeros((2,) * len(U))
        for _, _, scope, table in bucket:
            T = T + _expand(scope, table, U, self.pos)
        return T

    def _downward(self, buckets, scopes, parent, log_z, check):
        model, n = self.model, self.model.n
        means, corr = np.zeros(n), np.zeros(model.m)
        down = {}
        for v in reversed(self.order):
            U = scopes[v]
            T = self._table(buckets[v], U)
            if v in down:
                T = T + _expand(U[1:], down.pop(v), U, self.pos)
            lz = logsumexp(T)
            P = np.exp(T - lz)
            P1 = P.reshape(2, -1).sum(axis=1)
            means[v] = P1[1] - P1[0]
            for kind, key, scope, table in buckets[v]:
                if kind == "f" and key[0] == "e":
                    k = U.index(scope[1])
                    other = tuple(a for a in range(1, len(U)) if a != k)
                    P2 = P.sum(axis=other) if other else P
                    corr[key[1]] = P2[0, 0] + P2[1, 1] - P2[0, 1] - P2[1, 0]
                elif kind == "m":
                    c = key
                    cs = scopes[c][1:]  # the child's separator, a subset of U
                    cav = T - _expand(cs, table, U, self.pos)
                    axes = tuple(a for a, u in enumerate(U) if u not in cs)
                    dm = logsumexp(cav, axis=axes)
                    # dm's axes are the remaining axes of U in U order == cs order (both sorted by pos)
                    down[c] = dm
            if check is not None:
                check()
        return means, corr


def exact_log_partition(model, method="auto", marginals=True, max_width=22, memory_limit=1 << 27,
                        check=None, enumerate_below=17):
    """``(log Z, E[s], E[s_i s_j], info)`` of the log-potential ``model``.

    ``method``: ``'enumerate'``, ``'eliminate'`` or ``'auto'`` (enumeration below
    ``enumerate_below`` spins, elimination otherwise, and enumeration again for up to 28 spins
    when the elimination width exceeds ``max_width``, e.g. complete graphs). Raises ``OverflowError``
    with the width when the best order found is wider than ``max_width`` (None when every heuristic
    gave up past it).
    """
    if method == "enumerate" or (method == "auto" and model.n < enumerate_below):
        if model.n > 30:
            raise OverflowError(f"enumeration of 2^{model.n} states")
        lz, m, c = enumerate_model(model)
        return lz, m, c, {"method": "enumerate", "width": None}
    # the width of a model refused anyway is not worth finding; below 29 spins auto enumerates
    # and reports the width, which is cheap to find there
    elim = Elimination(model, max_width=None if method == "auto" and model.n <= 28 else max_width)
    if elim.width is None:
        raise OverflowError(None)
    if elim.width > max_width:
        if method == "auto" and model.n <= 28:  # dense but small: enumerate (2^n work, bounded memory)
            lz, m, c = enumerate_model(model)
            return lz, m, c, {"method": "enumerate", "width": elim.width}
        raise OverflowError(elim.width)
    lz, m, c = elim.run(marginals, memory_limit, check)
    info = {"method": "eliminate", "width": elim.width, "order": elim.order}
    if marginals and m is None:
        info["marginals_skipped"] = (f"the downward pass would keep more than {memory_limit} table entries "
                                     f"({memory_limit * 8 / 2 ** 20:.0f} MiB)")
    return lz, m, c, info
