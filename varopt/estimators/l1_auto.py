"""``passes='auto'`` of the L1 estimators: an exact change of variables and a per-pass convergence test.

The change of variables (what scikit-learn's linear models do in ``fit`` with ``_preprocess_data``, here without
changing the objective): with column centres ``c`` (the means when an intercept absorbs them and ``X`` is dense,
else 0), scales ``s_j = sqrt(mean((x_j - c_j)^2))`` and, for least squares with an intercept, the target mean
``ybar``::

    z_i = (x_i - c) / s,   y'_i = y_i - ybar,   w' = s * w,   b' = b - ybar + c^T w,
    F(w, b) = loss(y - X w - b) + alpha sum_j |w_j|  =  loss(y' - Z w' - b') + alpha sum_j |w'_j| / s_j,

so the program on ``Z`` with penalty weights ``1 / s_j`` has the same value at corresponding points and the same
minimiser. It matters for IPSA with the harmonic step ``1/(k0 + k)`` (Carbonetto 2009, Fig. 2.1): the distance a
coordinate can travel grows like ``log k`` times its gradient scale, so a coefficient of size 300 on a column of
norm 1 (scikit-learn's ``load_diabetes``) or an intercept of 150 is not reached in any practical number of passes,
while on standardized columns it is.

The test (scikit-learn's SGD rule on the objective evaluated exactly on the training set after every pass): the run
stops when ``n_iter_no_change`` consecutive passes fail to lower the best objective so far by ``tol * F0``, with
``F0`` the objective of the model without features (``w = 0``, best intercept): ``var(y)/2`` for least squares,
the entropy of the class proportions for logistic regression (``mean(y^2)/2`` and ``log 2`` without an intercept),
so ``tol`` does not depend on the units of ``y``.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError


class ColumnScaling:
    """The exact change of variables above for data ``X`` (dense or CSR), target ``y`` and the program layout
    ``form`` (split: ``wp, wm, [b]``; box: ``w, u, [b]``)."""

    def __init__(self, X, y, fit_intercept, center_y):
        n, m = X.shape
        dense = not sp.issparse(X)
        self.c = X.mean(axis=0) if (fit_intercept and dense) else np.zeros(m)
        if dense:
            ms = np.mean((X - self.c) ** 2, axis=0)
        else:
            ms = np.asarray(X.multiply(X).mean(axis=0)).ravel()
        s = np.sqrt(ms)
        big = np.abs(X).max(axis=0)
        big = np.asarray(big.toarray() if sp.issparse(big) else big).ravel()
        # a constant column (zero after centring) keeps scale 1: it carries no information to rescale
        self.s = np.where(s > 1e-12 * np.maximum(big, 1.0), s, 1.0)
        self.ybar = float(np.mean(y)) if (fit_intercept and center_y) else 0.0
        self.fit_intercept = fit_intercept
        self.Z = (X - self.c) / self.s if dense else (X @ sp.diags(1.0 / self.s)).tocsr()
        self.y = y - self.ybar

    @property
    def penalty_weights(self):
        return 1.0 / self.s

    def weights(self, w_scaled, b_scaled):
        """``(w, b)`` of the original problem from the scaled program's."""
        w = w_scaled / self.s
        return w, (b_scaled + self.ybar - float(self.c @ w) if self.fit_intercept else 0.0)

    def state(self, x, z, form):
        """The IPSA state ``(x, z)`` of the scaled program as the state of the original one (``partial_fit``
        continues from it): weights divided by ``s``, their duals multiplied by ``s`` (the constraint rows of
        feature ``j`` are those of the original divided by ``s_j``, so ``x_j z_j`` is unchanged)."""
        m = self.s.size
        x = np.array(x, dtype=float)
        x[:2 * m] /= np.tile(self.s, 2)
        if self.fit_intercept:
            w = x[:m] - x[m:2 * m] if form == "split" else x[:m]
            x[2 * m] = x[2 * m] + self.ybar - float(self.c @ w)
        z = np.asarray(z, dtype=float) * (np.tile(self.s, 2) if form == "split" else np.repeat(self.s, 2))
        return x, z


class TrainingObjective:
    """``x -> F(w, b)`` of a program vector ``x`` for data ``(X, y)`` (``y`` in {-1, +1} for ``logistic``) and the
    penalty ``alpha sum_j weights_j |w_j|``. Not the program's value: at an interior point of the split form
    ``w+_j + w-_j > |w_j|``, so the program's value overstates F by ``alpha sum_j weights_j 2 min(w+_j, w-_j)``.
    (A class, not a closure: the fitted estimator, whose result keeps its solver options, must pickle.)"""

    def __init__(self, loss, X, y, alpha, weights, form, fit_intercept):
        self.loss, self.X, self.y, self.alpha, self.weights = loss, X, y, alpha, weights
        self.form, self.fit_intercept = form, fit_intercept

    def __call__(self, x):
        from ..formulations.l1 import weights_from_x

        w, b = weights_from_x(x, self.X.shape[1], self.form, self.fit_intercept)
        t = np.asarray(self.X @ w).ravel() + b
        if self.loss == "squared":
            fit = 0.5 * np.mean((self.y - t) ** 2)
        else:
            fit = np.mean(np.logaddexp(0.0, -self.y * t))
        return float(fit + self.alpha * np.abs(w) @ self.weights)


def null_objective(loss, y, fit_intercept):
    """Objective of the model with ``w = 0`` and the best intercept (``y`` in {-1, +1} for ``logistic``)."""
    if loss == "squared":
        return 0.5 * float(np.var(y) if fit_intercept else np.mean(y ** 2))
    if not fit_intercept:
        return float(np.log(2.0))
    p = float(np.mean(y > 0))
    return float(-sum(q * np.log(q) for q in (p, 1.0 - p) if q > 0))


def check_auto_options(max_passes, tol, n_iter_no_change):
    """The stopping options of ``passes='auto'``, validated with errors naming them."""
    def _int(name, v):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputDataError(f"{name} must be a positive integer, got {v!r}")
        return int(v)
    try:
        tol_f = float(tol)
    except (TypeError, ValueError):
        tol_f = np.nan
    if isinstance(tol, (bool, np.bool_)) or not np.isfinite(tol_f) or tol_f < 0:
        raise InputDataError(f"tol must be a finite number >= 0, got {tol!r}")
    return _int("max_passes", max_passes), tol_f, _int("n_iter_no_change", n_iter_no_change)


class PassMonitor:
    """IPSA callback (``callback_every`` = iterations per pass): the objective after every pass, and the stop of
    scikit-learn's SGD (``n_iter_no_change`` passes without an improvement of the best value by ``threshold``)."""

    def __init__(self, objective, threshold, n_iter_no_change, user_callback=None):
        self.objective, self.threshold, self.patience = objective, threshold, n_iter_no_change
        self.user_callback = user_callback
        self.best, self.no_change, self.values, self.converged = np.inf, 0, [], False

    def __call__(self, iteration, x, *extra):
        f = float(self.objective(x))
        self.values.append(f)
        self.no_change = self.no_change + 1 if f > self.best - self.threshold else 0
        self.best = min(self.best, f)
        if self.user_callback is not None and self.user_callback(iteration, x, *extra):
            return True
        self.converged = self.no_change >= self.patience
        return self.converged


def dual_lower_bound(loss, X, y, alpha, weights, w, b, fit_intercept):
    """A lower bound on ``min F`` (Fenchel duality) built from the residuals of the point ``(w, b)``; ``F(w, b)``
    minus it bounds how far ``(w, b)`` is above the optimum (what scikit-learn's Lasso reports as its gap).

    Least squares, ``F = (1/2n)||y - X w - b||^2 + alpha sum_j c_j |w_j|``: the dual is
    ``max theta^T y - (n/2)||theta||^2`` subject to ``|x_j^T theta| <= alpha c_j`` (and ``1^T theta = 0`` with an
    intercept); at the optimum ``theta = r / n`` with ``r`` the residuals.
    Logistic, ``F = (1/n) sum log(1 + exp(-y_i t_i)) + alpha sum_j c_j |w_j|``, ``t = X w + b``: the dual is
    ``max (1/n) sum_i H(lambda_i)`` (``H`` the binary entropy in nats) over ``lambda in [0, 1]^n`` with
    ``|(1/n) sum_i lambda_i y_i x_ij| <= alpha c_j`` (and ``sum_i lambda_i y_i = 0`` with an intercept); at the
    optimum ``lambda_i = sigmoid(-y_i t_i)``.
    The dual point is the optimum's formula at ``(w, b)`` (the intercept first re-fitted so its equality holds),
    scaled by the ``s in [0, s_max]`` that maximises the dual value along that ray, ``s_max`` the largest scale
    satisfying the ``|x_j^T .|`` rows. Valid for any ``(w, b)``; tight at the optimum."""
    w = np.asarray(w, dtype=float)
    a = np.asarray(X @ w).ravel()
    if loss == "squared":
        r = y - a - b
        if fit_intercept:
            r = r - r.mean()
        theta = r / r.size
        s_max = _largest_scale(X, theta, alpha, weights)
        den = r.size * float(theta @ theta)
        s = 0.0 if den == 0.0 else min(max(float(theta @ y) / den, 0.0), s_max)
        return float(s * (theta @ y) - 0.5 * r.size * s * s * (theta @ theta))
    if fit_intercept:
        b = _best_intercept(a, y)
    lam = 0.5 * (1.0 - np.tanh(0.5 * y * (a + b)))      # sigmoid(-y t), without overflow
    s_max = min(1.0, _largest_scale(X, lam * y / y.size, alpha, weights))

    pos = lam[lam > 0]                                  # terms with lam_i = 0 add nothing to H or its slope

    def slope(s):                                       # n/|pos| d/ds mean H(s lam), decreasing in s
        with np.errstate(divide="ignore"):
            return float(np.mean(pos * (np.log1p(-s * pos) - np.log(s * pos))))

    lo, hi = 0.0, s_max
    if pos.size == 0:
        return 0.0
    if s_max > 0.0 and slope(s_max) >= 0.0:
        lo = s_max
    else:
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if slope(mid) > 0.0 else (lo, mid)
    q = lo * lam
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(np.where(q > 0, q * np.log(q), 0.0) + np.where(q < 1, (1 - q) * np.log1p(-q), 0.0))
    return float(np.mean(h))


def _largest_scale(X, theta, alpha, weights):
    """The largest ``s >= 0`` with ``|x_j^T (s theta)| <= alpha c_j`` for every column ``j``."""
    g = np.abs(np.asarray(X.T @ theta).ravel())
    bound = alpha * np.broadcast_to(np.asarray(weights, dtype=float), g.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(g > 0, bound / g, np.inf)
    return float(np.min(ratios, initial=np.inf))


def _best_intercept(a, y):
    """The intercept minimising ``sum log(1 + exp(-y_i (a_i + b)))`` for fixed ``a`` (both classes present): the
    root of ``sum_i y_i sigmoid(-y_i (a_i + b))``, decreasing in ``b``."""
    from scipy.optimize import brentq

    def g(b):
        return float(np.sum(y * 0.5 * (1.0 - np.tanh(0.5 * y * (a + b)))))
    lo, hi = -1.0, 1.0
    while g(lo) < 0.0:
        lo *= 2.0
    while g(hi) > 0.0:
        hi *= 2.0
    return brentq(g, lo, hi, xtol=1e-14, rtol=1e-14)
