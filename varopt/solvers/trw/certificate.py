"""A certified TRW upper bound from messages that are only approximately a fixed point.

The TRW bound (Wainwright, Jaakkola & Willsky 2005) is ``log Z <= max_{tau in LOCAL} B(tau)``
with the concave (for ``rho`` in the spanning-tree or forest polytope)

    B(tau) = const + h.m + sum_e w_e m_e + sum_s c_s H(tau_s) + sum_e rho_e H(tau_e),   c_s = 1 - sum_{e ∋ s} rho_e,

in spin moments ``m_s = E s_s``, ``m_e = E s_i s_j``. The value at the messages' pseudo-marginals is that
maximum only at an exact fixed point: stopped at ``tol`` it can lie below ``max B`` — and below log Z — by
O(tol) (a chain: 5.5e-9 below log Z at ``tol = 1e-8``; 41 of 272 converged random models below log Z,
docs/energy.md, held-out review). This module bounds ``max B`` from any messages:

1. **A point of LOCAL.** Node beliefs ``tau_s ∝ exp(H_s s)`` (H the messages' node fields) and, per edge,
   ``tau_e ∝ exp(a s_i + b s_j + K s_i s_j)`` with the coupling ``K = w_e / rho_e`` of the messages' edge
   table and (a, b) re-fitted so that its marginals are exactly the node beliefs (iterative proportional
   fitting in closed form: the marginal field of s_i is ``a + f(b, K)``, f the message function of
   :mod:`varopt.solvers.lbp.messages`, so ``a = H_i - f(b, K)`` and b solves the monotone equation
   ``b + f(H_i - f(b, K), K) = H_j``, by bisection on ``[H_j - |K|, H_j + |K|]``). At a fixed point these
   are the messages' own cavities.
2. **Its gradient.** By conjugate duality ``dH(tau_s)/dm_s = -H_s`` and ``dH(tau_e)/d(m_i, m_j, m_e) =
   -(a, b, K)``, so ``dB/dm_e = w_e - rho_e K = 0`` and ``g_s = dB/dm_s = h_s - c_s H_s - sum_{e ∋ s}
   rho_e a_{e,s}`` (zero at a fixed point).
3. **First-order bound.** B is concave on LOCAL and LOCAL lies in ``{m_s ∈ [-1, 1]}`` (the m_e directions have
   zero slope), so ``max B <= B(tau') + sum_s max_{m ∈ [-1, 1]} g_s (m - m_s) = B(tau') + sum_s (|g_s| -
   g_s m_s)``, with ``1 ∓ tanh H = 2 expit(∓2H)`` evaluated without cancellation.

Everything is in log-odds (``logcosh``), so couplings of any size stay finite. A rounding allowance of
``1e-13 (1 + |const| + |h|_1 + |w|_1 + (n + m) ln 2)`` is added (the terms of B are summed in floating point).
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from ..lbp.messages import logcosh, message_fn

_LOG2 = float(np.log(2.0))


def _fit_edges(Hi, Hj, K, iters=80):
    """(a, b) with ``a + f(b, K) = Hi`` and ``b + f(a, K) = Hj`` (step 1 of the module docstring)."""
    lo, hi = Hj - np.abs(K), Hj + np.abs(K)
    for _ in range(iters):                       # phi(b) = b + f(Hi - f(b, K), K) - Hj is nondecreasing
        mid = 0.5 * (lo + hi)
        up = mid + message_fn(Hi - message_fn(mid, K), K) - Hj > 0
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    b = 0.5 * (lo + hi)
    return Hi - message_fn(b, K), b


def _edge_moments(a, b, K):
    """log-normaliser A, E[s_i], E[s_j], E[s_i s_j] of ``exp(a s_i + b s_j + K s_i s_j)`` (log space)."""
    sv = np.array([-1.0, 1.0])
    L = (a[:, None, None] * sv[None, :, None] + b[:, None, None] * sv[None, None, :]
         + K[:, None, None] * (sv[:, None] * sv[None, :])[None])
    flat = L.reshape(-1, 4)
    mx = flat.max(axis=1)
    A = mx + np.log(np.exp(flat - mx[:, None]).sum(axis=1))
    P = np.exp(L - A[:, None, None])
    mi = P[:, 1, :].sum(axis=1) - P[:, 0, :].sum(axis=1)
    mj = P[:, :, 1].sum(axis=1) - P[:, :, 0].sum(axis=1)
    me = P[:, 0, 0] + P[:, 1, 1] - P[:, 0, 1] - P[:, 1, 0]
    return A, mi, mj, me


def certified_upper_bound(msgs):
    """``(bound, details)``: an upper bound on ``max_LOCAL B`` (hence on log Z when ``msgs.rho`` lies in the
    forest polytope) from the current messages of ``msgs`` (:class:`~varopt.solvers.lbp.messages.Messages`),
    whether or not they are a fixed point; ``details`` has ``value`` B(tau'), ``slack`` (step 3), ``rounding``
    and ``max_gradient`` (max |g_s|)."""
    model, rho = msgs.model, msgs.rho
    n, m = model.n, model.m
    H = msgs.fields()
    K = model.w / rho
    a, b = _fit_edges(H[model.i], H[model.j], K)
    A, _, _, me = _edge_moments(a, b, K)
    mu = np.tanh(H)
    c = 1.0 - np.bincount(model.i, rho, n) - np.bincount(model.j, rho, n)
    Hn = (logcosh(H) + _LOG2) - H * mu                     # H(tau_s) = log 2cosh H - H tanh H
    He = A - a * mu[model.i] - b * mu[model.j] - K * me    # H(tau_e) with tau_e's marginals = mu (fitted)
    value = float(model.const + model.h @ mu + model.w @ me + c @ Hn + rho @ He)
    g = model.h - c * H - np.bincount(model.i, rho * a, n) - np.bincount(model.j, rho * b, n)
    room = 2.0 * expit(-2.0 * np.sign(g) * H)              # 1 - sign(g) tanh H, without cancellation
    slack = float(np.abs(g) @ room)
    rounding = 1e-13 * (1.0 + abs(model.const) + np.abs(model.h).sum() + np.abs(model.w).sum() + (n + m) * _LOG2)
    # With strong couplings (|w/rho| >~ 5) the re-fit moves the edge fields by the residual times
    # cosh^2(w/rho), the gradient grows and the slack with it (a tree with |w| = 30: +81 over log Z). Any
    # valid bound may be taken, so the certificate is capped by the term-wise one,
    # log Z <= n ln 2 + max_s t(s) <= n ln 2 + const + |h|_1 + |w|_1.
    termwise = float(model.const + np.abs(model.h).sum() + np.abs(model.w).sum() + n * _LOG2)
    bound = min(value + slack, termwise) + rounding
    return bound, {"value": value, "slack": slack, "rounding": float(rounding), "termwise": termwise,
                   "max_gradient": float(np.abs(g).max()) if n else 0.0}
