"""The variance safeguard of Carbonetto (2009), §3.3.8, along a search direction.

Normalised weights ``w`` (sum 1) at ``theta_{k-1}``; the naive update (3.59) along ``dtheta``
with step ``a`` gives ``W_s(a) ∝ w_s exp(a d_s)``, ``d_s = <a(x_s), dtheta>``. With
``S(a) = sum (W_s - 1/n)^2 = sum W_s^2 - 1/n`` (3.55) and ``d̄ = sum W d``:

    S'(0)  = 2 sum w_s^2 (d_s - d̄)                                   (3.62, directional;
                                                                        the W̄ term sums to 0)
    S''(0) = 2 sum w_s (2 w_s - W̄) (d_s - d̄)^2,   W̄ = sum w_s^2      (3.63)-(3.64)

* variance condition (3.54)/(3.56): ``beta S(a) <= S(0)``, i.e. ``S(a) - S(0) <= (1-beta)/beta S(0)``;
* ESS condition (3.65): ``xi sum W_s(a)^2 <= 1/n``, i.e. ``S(a) - S(0) <= 1/(n xi) - sum w^2``;

both are ``S(a) - S(0) <= c``. ``quadratic``: the first upward crossing of the model
``S'(0) a + S''(0) a^2 / 2 = c`` (3.57); ``exact``: bisection on the exact ``S(a)`` (the returned
step satisfies the condition). The step is ``min(a_hat, max(a_var, a_ess))``.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp


def derivatives(w, d):
    """``(S(0), S'(0), S''(0))`` of the module docstring."""
    w = np.asarray(w, dtype=float)
    dc = np.asarray(d, dtype=float) - w @ d
    wbar = float(w @ w)
    return wbar - 1.0 / w.size, 2.0 * float((w * w) @ dc), 2.0 * float((w * (2.0 * w - wbar)) @ (dc * dc))


def sum_sq(w, d, a):
    """``sum_s W_s(a)^2`` for the naive update along ``d`` (in log space: finite at any ``a``)."""
    lw = np.log(np.maximum(w, 1e-300)) + a * np.asarray(d, dtype=float)
    lw = lw - logsumexp(lw)
    return float(np.exp(logsumexp(2.0 * lw)))


def quadratic_root(q1, q2, c):
    """First ``a > 0`` where ``q1 a + q2 a^2 / 2`` crosses ``c`` upwards (``inf``: never; 0: at once)."""
    h = 0.5 * q2
    if c < 0:
        return 0.0
    if c == 0:
        if q1 < 0 or (q1 == 0 and h < 0):
            return -q1 / h if h > 0 else math.inf
        return 0.0
    disc = q1 * q1 + 4.0 * h * c
    if disc < 0:
        return math.inf
    den = q1 + math.sqrt(disc)
    return 2.0 * c / den if den > 0 else math.inf


def exact_root(w, d, limit, a_hat, iters=60):
    """Largest step in ``[0, a_hat]`` found by bisection with ``sum W(a)^2 <= limit`` at the step."""
    if sum_sq(w, d, a_hat) <= limit:
        return a_hat
    if not sum_sq(w, d, 0.0) <= limit:
        return 0.0
    lo, hi = 0.0, a_hat
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if sum_sq(w, d, mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo


def safeguarded_step(w, d, a_hat, beta, xi, method="quadratic"):
    """``(a, a_var, a_ess)``: ``a = min(a_hat, max(a_var, a_ess))`` (module docstring)."""
    n = len(w)
    S0, g1, g2 = derivatives(w, d)
    c_var = (1.0 - beta) / beta * max(S0, 0.0)
    c_ess = 1.0 / (n * xi) - (S0 + 1.0 / n)
    if method == "quadratic":
        a_var, a_ess = quadratic_root(g1, g2, c_var), quadratic_root(g1, g2, c_ess)
    else:
        wbar = S0 + 1.0 / n
        # the variance condition holds at a = 0 with equality only: accept round-off there
        a_var = exact_root(w, d, wbar + c_var + 1e-15 * wbar, a_hat)
        a_ess = exact_root(w, d, 1.0 / (n * xi), a_hat)
    return min(a_hat, max(a_var, a_ess)), a_var, a_ess
