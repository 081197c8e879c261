"""Algorithm 3 (JunctionTreeBound) for chain and tree CRFs, batched over sentences, without enumerating Omega.

A chain ``y_0 - y_1 - ... - y_{T-1}`` with ``K`` labels has the junction tree of cliques
``{y_{t-1}, y_t}`` (separator ``y_{t-1}`` with the parent) rooted at ``y_0``. The score of a
labelling is ``sum_t S[t, y_t] + sum_{t>0} Tr[y_{t-1}, y_t]`` (``S`` node scores
``W_{y_t}^T phi(x_t)``, ``Tr`` transition weights). Processing cliques leaves-first
(``t = T-1, ..., 1``) and, for each separator value ``u = y_{t-1}``, running Algorithm 1 over the
solo variable ``v = y_t`` with

    log alpha(u, v) = S[t, v] + Tr[u, v] + log z_{t+1}(v),
    f(u, v)         = e_node(t, v) + e_trans(u, v) + mu_{t+1}(v)

(children's bound parameters enter exactly as in Algorithm 3 / Algorithm 5 of the supplement)
gives ``z_t(u)`` (the exact backward partition sums), ``mu_t(u)`` (exact conditional expected
features) and rank-one curvature rows. Every child curvature ``Sigma_{t+1}(v)`` is the common
part ``C_{t+1}`` plus its own rows ``R_{t+1}(v)``; the single matrix
``C_{t+1} + sum_v R_{t+1}(v)`` dominates all of them, so it is factored out of the sum over ``v``
(Lemma A of the supplement with a common quadratic term). By induction the root curvature is the
sum of *all* rows ``omega l l^T`` of all cliques and separator values, i.e. ``O(sum_c |Y_c|)``
terms, as the paper states. (Reading Algorithm 5 literally — adding the children's full
``Sigma`` once per parent configuration — is also a valid bound but multiplies deep rows by
``K^{depth}``.) ``z`` and ``mu`` equal Algorithm 1 on the enumerated chain exactly; ``Sigma`` is a
different valid bound of the same family (Algorithm 1's depends on the enumeration order too).

Coordinates: the bound is computed in a per-sentence *coefficient space* of dimension
``D = T K + K^2`` — node coordinate ``t K + k`` stands for ``phi(x_t)`` placed in the weights of
label ``k``, transition coordinate ``T K + u K + v`` for ``Tr[u, v]`` — and mapped to the
parameters by the CRF (``Sigma_theta = B^T M B``, ``mu_theta = B^T mu``).
"""
from __future__ import annotations

import numpy as np

from .bound import omega


def _alg1_last_axis(logalpha, F, want_rows=True):
    """Algorithm 1 along the second-to-last axis: ``logalpha (..., n)``, ``F (..., n, D)``.

    Returns ``logz (...)``, ``mu (..., D)`` and the rows ``sqrt(omega) l`` ``(..., n, D)``
    (decreasing-alpha enumeration, as in :func:`~varopt.solvers.majorize.bound.compute_bound`).
    """
    order = np.argsort(-logalpha, axis=-1, kind="stable")
    la = np.take_along_axis(logalpha, order, axis=-1)
    Fs = np.take_along_axis(F, order[..., None], axis=-2)
    mx = la[..., :1]
    w = np.exp(la - mx)
    cum = np.cumsum(w, axis=-1)
    logz = mx[..., 0] + np.log(cum[..., -1])
    wF = np.cumsum(w[..., None] * Fs, axis=-2)
    mu = wF[..., -1, :] / cum[..., -1, None]
    if not want_rows:
        return logz, mu, None
    prefix = np.zeros_like(Fs)
    prefix[..., 1:, :] = wF[..., :-1, :] / cum[..., :-1, None]
    r = np.full(la.shape, np.inf)
    r[..., 1:] = (la[..., 1:] - mx) - np.log(cum[..., :-1])
    rows = np.sqrt(omega(r))[..., None] * (Fs - prefix)
    return logz, mu, rows


def _lse(a, axis):
    """``log sum exp`` along ``axis`` (max-shifted; an all ``-inf`` slice gives ``-inf``)."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(a - m), axis=axis)) + np.squeeze(m, axis=axis)


def chain_marginals(S, Tr):
    """Forward-backward (log space) for a batch of chains: ``log Z`` and ``mu = grad log Z`` without ``Sigma``.

    ``S`` (B, T, K), ``Tr`` (K, K). With ``a_0 = S_0``, ``a_t(v) = S_t(v) + lse_u(a_{t-1}(u) + Tr(u, v))`` and
    ``b_{T-1} = 0``, ``b_t(u) = lse_v(Tr(u, v) + S_{t+1}(v) + b_{t+1}(v))``: ``log Z = lse(a_{T-1})``, the node
    marginals ``p_t(k) = exp(a_t + b_t - log Z)`` and the pair marginals
    ``p_t(u, v) = exp(a_{t-1}(u) + Tr(u, v) + S_t(v) + b_t(v) - log Z)``; ``mu`` in the coefficient space of
    :func:`chain_bound` is ``(p_t(k))`` on the node block and ``sum_t p_t(u, v)`` on the transitions. These are
    the ``z`` and ``mu`` the junction-tree recursion returns (Algorithm 3 computes them exactly), in
    ``O(T K^2)`` per chain instead of carrying ``D``-dimensional ``mu_t(u)`` through it (``O(T K^2 D)``).
    """
    S = np.asarray(S, dtype=float)
    Bn, T, K = S.shape
    Tr = np.asarray(Tr, dtype=float)
    a = np.empty((Bn, T, K))
    b = np.zeros((Bn, T, K))
    a[:, 0] = S[:, 0]
    for t in range(1, T):
        a[:, t] = S[:, t] + _lse(a[:, t - 1, :, None] + Tr[None], axis=1)
    for t in range(T - 2, -1, -1):
        b[:, t] = _lse(Tr[None] + (S[:, t + 1] + b[:, t + 1])[:, None, :], axis=2)
    logz = _lse(a[:, T - 1], axis=1)
    mu = np.empty((Bn, T * K + K * K))
    mu[:, :T * K] = np.exp(a + b - logz[:, None, None]).reshape(Bn, T * K)
    if T > 1:
        pair = np.exp(a[:, :-1, :, None] + Tr[None, None] + (S[:, 1:] + b[:, 1:])[:, :, None, :]
                      - logz[:, None, None, None])
        mu[:, T * K:] = pair.sum(1).reshape(Bn, K * K)
    else:
        mu[:, T * K:] = 0.0
    return logz, mu


def chain_bound(S, Tr, want_sigma: bool = True):
    """Junction-tree bound of a batch of chains of equal length.

    ``S`` (B, T, K) node scores, ``Tr`` (K, K) transition weights. Returns ``logZ (B,)``,
    ``mu (B, D)`` (gradient of ``log Z`` in coefficient space) and ``M (B, D, D)`` (the bound's
    curvature in coefficient space) or ``None``. Without ``Sigma`` the value and gradient come from
    forward-backward (:func:`chain_marginals`, the same numbers).
    """
    S = np.asarray(S, dtype=float)
    if not want_sigma:
        logz, mu = chain_marginals(S, Tr)
        return logz, mu, None
    Bn, T, K = S.shape
    D = T * K + K * K
    node = lambda t: t * K  # noqa: E731
    tr0 = T * K
    M = np.zeros((Bn, D, D)) if want_sigma else None
    logz_next = np.zeros((Bn, K))
    mu_next = np.zeros((Bn, K, D))
    eye_tr = np.zeros((K, K, D))
    eye_tr[np.arange(K)[:, None], np.arange(K)[None, :], tr0 + np.arange(K)[:, None] * K + np.arange(K)[None, :]] = 1.0
    for t in range(T - 1, 0, -1):
        la = S[:, t, None, :] + Tr[None] + logz_next[:, None, :]  # (B, u, v)
        F = np.broadcast_to(eye_tr, (Bn, K, K, D)).copy()
        F += mu_next[:, None, :, :]
        F[:, :, np.arange(K), node(t) + np.arange(K)] += 1.0
        # rows at position t live on node coordinates >= t and on the transitions
        F = F[..., node(t):]
        logz, mu_s, rows = _alg1_last_axis(la, F, want_sigma)
        if want_sigma:
            Rr = rows.reshape(Bn, K * K, D - node(t))
            M[:, node(t):, node(t):] += np.matmul(Rr.transpose(0, 2, 1), Rr)
        mu = np.zeros((Bn, K, D))
        mu[..., node(t):] = mu_s
        logz_next, mu_next = logz, mu
    la = S[:, 0, :] + logz_next  # root: y_0
    F = mu_next.copy()
    F[:, np.arange(K), node(0) + np.arange(K)] += 1.0
    logz, mu, rows = _alg1_last_axis(la, F, want_sigma)
    if want_sigma:
        M += np.matmul(rows.transpose(0, 2, 1), rows)
    return logz, mu, M


def chain_curvature(S, Tr, W):
    """The junction-tree curvature of :func:`chain_bound` on a few directions, without forming it: ``W_b^T M_b W_b``.

    ``S`` (B, T, K), ``Tr`` (K, K), ``W`` (B, D, m): ``m`` coefficient-space directions per chain
    (``D = T K + K^2``). Every row ``sqrt(omega) l`` of :func:`chain_bound` is a combination of the
    clique features ``f(u, v) = e_node(t, v) + e_trans(u, v) + mu_{t+1}(v)`` with coefficients that depend on
    the scores only, and ``mu_{t+1}(v)`` is itself a combination of the deeper cliques' features, so the
    same recursion run on the projections ``f(u, v)^T W`` (``m`` numbers instead of ``D``) gives the
    projected rows ``l^T W`` and ``W^T M W = sum (W^T l)(l^T W)``: ``O(T K^2 m)`` per chain instead of
    ``O(T K^2 D^2)`` for ``M``. Restricted to the span of ``W`` this is the same bound,
    ``log Z(theta + W a) <= log z + a^T W^T mu + 1/2 a^T (W^T M W) a`` (Theorem 1 / Algorithm 3).
    Returns ``(B, m, m)``.
    """
    S = np.asarray(S, dtype=float)
    Bn, T, K = S.shape
    W = np.asarray(W, dtype=float)
    m = W.shape[-1]
    if W.shape != (Bn, T * K + K * K, m):
        raise ValueError(f"W has shape {W.shape}, expected ({Bn}, {T * K + K * K}, m)")
    Wn = W[:, :T * K].reshape(Bn, T, K, m)
    Wt = W[:, T * K:].reshape(Bn, K, K, m)
    out = np.zeros((Bn, m, m))
    logz_next = np.zeros((Bn, K))
    mu_next = np.zeros((Bn, K, m))
    for t in range(T - 1, 0, -1):
        la = S[:, t, None, :] + Tr[None] + logz_next[:, None, :]  # (B, u, v)
        F = Wn[:, t, None, :, :] + Wt + mu_next[:, None, :, :]  # projections of f(u, v): (B, u, v, m)
        logz_next, mu_next, rows = _alg1_last_axis(la, F)
        Rr = rows.reshape(Bn, K * K, m)
        out += np.matmul(Rr.transpose(0, 2, 1), Rr)
    la = S[:, 0, :] + logz_next
    _, _, rows = _alg1_last_axis(la, Wn[:, 0] + mu_next)
    out += np.matmul(rows.transpose(0, 2, 1), rows)
    return out


def chain_features(T: int, K: int, path) -> np.ndarray:
    """Coefficient-space feature vector of one labelling (used to enumerate small chains in tests)."""
    f = np.zeros(T * K + K * K)
    for t, k in enumerate(path):
        f[t * K + k] += 1.0
        if t:
            f[T * K + path[t - 1] * K + k] += 1.0
    return f


def chain_enumerate(S, Tr):
    """All ``K^T`` labellings of one chain: features ``(K^T, D)`` and scores — for Algorithm 1 checks."""
    import itertools
    T, K = S.shape
    paths = list(itertools.product(range(K), repeat=T))
    F = np.array([chain_features(T, K, p) for p in paths])
    theta = np.concatenate([S.ravel(), np.asarray(Tr).ravel()])
    return F, theta


def tree_bound(S, Tr, parent, want_sigma: bool = True):
    """Junction-tree bound (Algorithm 3) of a batch of tree-structured CRFs with one topology.

    ``S`` (B, n, K) node scores, ``Tr`` (K, K) edge weights ``Tr[y_parent, y_child]`` shared by all
    edges, ``parent`` (n,) with ``parent[root] = -1``. The cliques are the edges ``{y_p(t), y_t}``
    (separator ``y_p(t)`` with the parent clique); processed children-first, node ``t`` runs
    Algorithm 1 over ``v = y_t`` for every separator value ``u = y_p(t)`` with

        log alpha(u, v) = S[t, v] + Tr[u, v] + sum_{b in ch(t)} log z_b(v),
        f(u, v)         = e_node(t, v) + e_edge(u, v) + sum_{b in ch(t)} mu_b(v),

    exactly as the chain (:func:`chain_bound`, the special case ``parent[t] = t - 1``): ``z`` and
    ``mu`` are exact, the curvature is the sum of every clique's rows (see the module docstring).
    Coordinates: ``D = n K + K^2`` (node ``t K + k``, edge ``n K + u K + v``). Returns
    ``logZ (B,)``, ``mu (B, D)``, ``M (B, D, D)`` or ``None``.
    """
    S = np.asarray(S, dtype=float)
    parent = np.asarray(parent, dtype=np.int64).ravel()
    Bn, n, K = S.shape
    if parent.size != n:
        raise ValueError(f"parent has {parent.size} entries, the trees have {n} nodes")
    roots = np.flatnonzero(parent < 0)
    if roots.size != 1:
        raise ValueError(f"a tree needs exactly one root (parent -1); got {roots.size}")
    children = [[] for _ in range(n)]
    for t, p in enumerate(parent):
        if p >= 0:
            children[p].append(t)
    # children-first order (reverse BFS from the root); also detects cycles / unreachable nodes
    order, stack = [], [int(roots[0])]
    while stack:
        t = stack.pop()
        order.append(t)
        stack.extend(children[t])
    if len(order) != n:
        raise ValueError("parent does not describe a tree (cycle or unreachable nodes)")
    D = n * K + K * K
    e0 = n * K
    ar = np.arange(K)
    edge = np.zeros((K, K, D))
    edge[ar[:, None], ar[None, :], e0 + ar[:, None] * K + ar[None, :]] = 1.0
    M = np.zeros((Bn, D, D)) if want_sigma else None
    logz_of = {}  # node -> (B, K): log z of its subtree given the parent's label
    mu_of = {}  # node -> (B, K, D)
    for t in reversed(order):
        lz_in = np.zeros((Bn, K))
        mu_in = np.zeros((Bn, K, D))
        for b in children[t]:
            lz_in += logz_of.pop(b)
            mu_in += mu_of.pop(b)
        if parent[t] >= 0:
            la = S[:, t, None, :] + Tr[None] + lz_in[:, None, :]  # (B, u, v)
            F = np.broadcast_to(edge, (Bn, K, K, D)).copy()
            F += mu_in[:, None, :, :]
            F[:, :, ar, t * K + ar] += 1.0
        else:
            la = S[:, t, :] + lz_in
            F = mu_in.copy()
            F[:, ar, t * K + ar] += 1.0
        logz, mu, rows = _alg1_last_axis(la, F, want_sigma)
        if want_sigma:
            Rr = rows.reshape(Bn, -1, D)
            M += np.matmul(Rr.transpose(0, 2, 1), Rr)
        logz_of[t], mu_of[t] = logz, mu
    r = int(roots[0])
    return logz_of[r], mu_of[r], M


def tree_enumerate(S, Tr, parent):
    """All ``K^n`` labellings of one tree: features ``(K^n, D)`` and ``theta`` — for Algorithm 1 checks."""
    import itertools
    n, K = S.shape
    parent = np.asarray(parent)
    D = n * K + K * K
    F = []
    for lab in itertools.product(range(K), repeat=n):
        f = np.zeros(D)
        for t, k in enumerate(lab):
            f[t * K + k] += 1.0
            if parent[t] >= 0:
                f[n * K + lab[parent[t]] * K + k] += 1.0
        F.append(f)
    return np.array(F), np.concatenate([S.ravel(), np.asarray(Tr).ravel()])
