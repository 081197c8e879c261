"""Elimination orders for variable elimination and their induced width.

The width of an order is the largest number of not-yet-eliminated neighbours a variable has
when it is eliminated (in the graph with the fill edges of the earlier eliminations); variable
elimination then handles tables of ``2^(width + 1)`` entries. Finding the best order is NP-hard,
so several heuristics are tried and the order of least width kept (ties: least total table size):

* greedy **min-fill** (Kjaerulff 1990; the eliminated variable adds the fewest fill edges), with
  scores updated only around the eliminated variable;
* greedy **min-degree** (Rose 1972);
* the model's own variable order and its reverse (row by row on a lattice declared row by row:
  single-site transfer matrices, Baxter 1982);
* a breadth-first sweep from a pseudo-peripheral variable (Gibbs, Poole & Stockmeyer 1976),
  which finds the long axis of a lattice or cylinder whatever the variable order.

With ``stop_above`` every heuristic and every width evaluation gives up as soon as the width
passes it: a model too wide for elimination is refused after O(n stop_above^2) work per
heuristic instead of eliminating a wide random graph to the end (a random 3-regular graph on
5000 nodes took 100 s to be refused, its fill sets growing to a thousand variables).
"""
from __future__ import annotations

import heapq

import numpy as np


def adjacency(n, i, j):
    adj = [set() for _ in range(n)]
    for a, b in zip(i.tolist(), j.tolist()):
        adj[a].add(b)
        adj[b].add(a)
    return adj


def induced_width(adj, order, stop_above=None):
    """``(width, total table entries)`` of eliminating in ``order`` (stops early, returning
    ``(inf, inf)``, once the width exceeds ``stop_above``)."""
    g = [set(s) for s in adj]
    width, total = 0, 0
    for v in order:
        nb = g[v]
        d = len(nb)
        width = max(width, d)
        if stop_above is not None and width > stop_above:
            return float("inf"), float("inf")
        total += 2 ** (d + 1)
        for u in nb:
            g[u].discard(v)
            g[u] |= nb
            g[u].discard(u)
        g[v] = set()
    return width, total


def _fill(g, v):
    nb = list(g[v])
    missing = 0
    for a in range(len(nb)):
        ga = g[nb[a]]
        for b in range(a + 1, len(nb)):
            if nb[b] not in ga:
                missing += 1
    return missing


def min_fill_order(adj, stop_above=None):
    """Greedy min-fill order, or None once a variable of more than ``stop_above`` neighbours is
    eliminated (the order's width then exceeds it)."""
    g = [set(s) for s in adj]
    n = len(g)
    score = [_fill(g, v) for v in range(n)]
    heap = [(score[v], len(g[v]), v) for v in range(n)]
    heapq.heapify(heap)
    done = np.zeros(n, dtype=bool)
    order = []
    while heap:
        s, d, v = heapq.heappop(heap)
        if done[v] or s != score[v] or d != len(g[v]):
            continue
        if stop_above is not None and d > stop_above:
            return None
        done[v] = True
        order.append(v)
        nb = g[v]
        touched = set(nb)
        for u in nb:
            g[u].discard(v)
            g[u] |= nb
            g[u].discard(u)
        for u in nb:
            touched |= g[u]
        g[v] = set()
        for u in touched:
            if not done[u]:
                score[u] = _fill(g, u)
                heapq.heappush(heap, (score[u], len(g[u]), u))
    return order


def min_degree_order(adj, stop_above=None):
    """Greedy min-degree order, or None once the least degree exceeds ``stop_above``."""
    g = [set(s) for s in adj]
    n = len(g)
    heap = [(len(g[v]), v) for v in range(n)]
    heapq.heapify(heap)
    done = np.zeros(n, dtype=bool)
    order = []
    while heap:
        d, v = heapq.heappop(heap)
        if done[v] or d != len(g[v]):
            continue
        if stop_above is not None and d > stop_above:
            return None
        done[v] = True
        order.append(v)
        nb = g[v]
        for u in nb:
            g[u].discard(v)
            g[u] |= nb
            g[u].discard(u)
            heapq.heappush(heap, (len(g[u]), u))
        g[v] = set()
    return order


def _bfs(adj, start, seen):
    order, frontier = [start], [start]
    seen[start] = True
    while frontier:
        nxt = []
        for v in frontier:
            for u in sorted(adj[v]):
                if not seen[u]:
                    seen[u] = True
                    nxt.append(u)
        order += nxt
        frontier = nxt
    return order


def bfs_order(adj):
    """Breadth-first sweeps, one per component, each from a pseudo-peripheral variable."""
    n = len(adj)
    seen = np.zeros(n, dtype=bool)
    order = []
    for s in range(n):
        if seen[s]:
            continue
        comp_seen = seen.copy()
        comp = _bfs(adj, s, comp_seen)
        start = comp[-1]
        for _ in range(2):  # two sweeps find a far end (the long axis of a lattice)
            tmp = seen.copy()
            start = _bfs(adj, start, tmp)[-1]
        order += _bfs(adj, start, seen)
    return order


def best_order(adj, min_fill_limit=400, stop_above=None):
    """``(order, width)``: the least-width order among the heuristics of the module docstring;
    ``(None, None)`` when ``stop_above`` is given and every order found is wider than it."""
    n = len(adj)
    # each heuristic takes the width it must not pass (None: no limit) and may give up (None)
    heuristics = [lambda lim: list(range(n)), lambda lim: list(range(n - 1, -1, -1)), lambda lim: bfs_order(adj),
                  lambda lim: min_degree_order(adj, lim)]
    if n <= min_fill_limit:
        heuristics.append(lambda lim: min_fill_order(adj, lim))
    best, best_key = None, None
    for heuristic in heuristics:
        limits = [w for w in (stop_above, None if best_key is None else best_key[0]) if w is not None]
        limit = min(limits) if limits else None
        order = heuristic(limit)
        if order is None:
            continue
        key = induced_width(adj, order, limit)
        if key[0] != float("inf") and (best_key is None or key < best_key):
            best, best_key = order, key
    if best is None:
        return None, None
    return best, int(best_key[0])
