"""Classical on-line baselines for L1-regularised learning (thesis §2.5.5-2.5.7).

All minimise ``(1/n) sum_i loss_i(w) + alpha ||w||_1`` (``alpha = lambda/n`` of eq. 2.56; squared
loss ``loss_i = (y_i - a_i^T w)^2 / 2`` or logistic ``loss_i = log(1 + exp(-y_i a_i^T w))``,
``y_i in {-1, +1}``) visiting one example per step, with steps ``a_k = 1/(k0 + k)`` (k = 1, 2, ...)
and the per-example gradient ``grad loss_i`` (2.59) as the noisy gradient. Each step costs O(m).

* :func:`projected_gradient` -- split form ``w = w+ - w-``, ``x = (w+, w-) >= 0`` (2.61):
  ``x <- max(0, x - a_k (grad_x loss_i + alpha))`` (§2.5.5, Fig. 2.4); starts at ``x = x0`` (1).
* :func:`subgradient` -- ``w <- w - a_k (grad loss_i + alpha sign(w))`` (§2.5.6, 2.71).
* :func:`smoothed_l1` -- Schmidt, Fung & Rosales (2007): ``|w| ~ (1/gamma)(log(1+e^{-gamma w}) +
  log(1+e^{gamma w}))``, whose gradient is ``tanh(gamma w / 2)``; plain stochastic gradient.
* :func:`augmented_lagrangian` -- Wang & Spall (2003) on the split form with the
  Hestenes-Powell-Rockafellar penalty for ``c(x) = -x <= 0``:
  ``P_r(x, l) = (1/(2 r)) sum (max(0, l + r c(x))^2 - l^2)``, stochastic gradient steps on
  ``f + P_{r_k}`` and multiplier steps ``l <- max(0, l + r_k c(x))``, with the thesis' penalty
  sequence ``r_k = 50/(k0 + k)^0.1`` (§2.5.7). Iterates are not feasible in general.

They return the final ``w`` (and optionally the iterates). scikit-learn's ``SGDRegressor`` /
``SGDClassifier`` with ``penalty='l1'`` are used directly in the benchmarks.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputDataError


def _check(A, y):
    A = np.asarray(A, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    if A.ndim != 2 or A.shape[0] != y.size:
        raise InputDataError(f"A must be (n, m) and y of length n; got {A.shape} and {y.shape}")
    if not np.all(np.isfinite(A)):
        raise InputDataError("A contains NaN or inf")
    if not np.all(np.isfinite(y)):
        raise InputDataError("y contains NaN or inf")
    return A, y


def sample_gradient(loss, a, yi, w):
    """Gradient of one example's loss at w (2.59 for the squared loss, 2.75 for the logistic)."""
    t = a @ w
    if loss == "squared":
        return -a * (yi - t)
    if loss == "logistic":
        return -yi * a / (1.0 + np.exp(yi * t))
    raise ValueError(f"unknown loss {loss!r}")


def _steps(n, passes, k0, order):
    for k in range(1, int(round(passes * n)) + 1):
        yield k, (k - 1) % n if order is None else order[(k - 1) % n], 1.0 / (k0 + k)


def projected_gradient(A, y, alpha, k0=50.0, passes=1, loss="squared", x0=1.0, order=None, return_split=False):
    """Returns w (or the split iterate x = (w+, w-) with ``return_split``)."""
    A, y = _check(A, y)
    n, m = A.shape
    x = np.full(2 * m, float(x0))
    for k, i, a in _steps(n, passes, k0, order):
        g = sample_gradient(loss, A[i], y[i], x[:m] - x[m:])
        x = np.maximum(0.0, x - a * (np.concatenate([g, -g]) + alpha))
    return x if return_split else x[:m] - x[m:]


def subgradient(A, y, alpha, k0=50.0, passes=1, loss="squared", order=None):
    A, y = _check(A, y)
    n, m = A.shape
    w = np.zeros(m)
    for k, i, a in _steps(n, passes, k0, order):
        w = w - a * (sample_gradient(loss, A[i], y[i], w) + alpha * np.sign(w))
    return w


def smoothed_l1(A, y, alpha, k0=50.0, passes=1, loss="squared", gamma=100.0, order=None):
    A, y = _check(A, y)
    n, m = A.shape
    w = np.zeros(m)
    for k, i, a in _steps(n, passes, k0, order):
        w = w - a * (sample_gradient(loss, A[i], y[i], w) + alpha * np.tanh(0.5 * gamma * w))
    return w


def augmented_lagrangian(A, y, alpha, k0=50.0, passes=1, loss="squared", x0=1.0, r0=50.0, r_power=0.1,
                         order=None):
    A, y = _check(A, y)
    n, m = A.shape
    x = np.full(2 * m, float(x0))
    lam = np.zeros(2 * m)
    for k, i, a in _steps(n, passes, k0, order):
        r = r0 / (k0 + k) ** r_power
        g = sample_gradient(loss, A[i], y[i], x[:m] - x[m:])
        # grad_x P_r = max(0, l + r c(x)) * grad c = -max(0, l - r x)
        gp = -np.maximum(0.0, lam - r * x)
        x = x - a * (np.concatenate([g, -g]) + alpha + gp)
        lam = np.maximum(0.0, lam - r * x)
    return x[:m] - x[m:]
