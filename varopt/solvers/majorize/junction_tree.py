"""Algorithm 3 (JunctionTreeBound) for chain CRFs, batched over sentences, without enumerating Omega.

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


def chain_bound(S, Tr, want_sigma: bool = True):
    """Junction-tree bound of a batch of chains of equal length.

    ``S`` (B, T, K) node scores, ``Tr`` (K, K) transition weights. Returns ``logZ (B,)``,
    ``mu (B, D)`` (gradient of ``log Z`` in coefficient space) and ``M (B, D, D)`` (the bound's
    curvature in coefficient space) or ``None``.
    """
    S = np.asarray(S, dtype=float)
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
