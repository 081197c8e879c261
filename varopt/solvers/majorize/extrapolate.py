"""Secant extrapolation along a majorization step (beyond the paper; option ``extrapolate``).

After Algorithm 2's step ``D`` from ``x`` (``f(x + D) <= m(D) <= f(x)``), ``phi(a) = f(x + a D)``
has ``phi'(0) = u^T D < 0`` (``u = grad f(x)``). The bound's curvature ``Sigma`` dominates the
objective's, so the step usually stops short: ``phi'(1) = grad f(x + D)^T D < 0``. The secant model
of ``phi'`` through ``a = 0, 1`` vanishes at ``a* = phi'(0) / (phi'(0) - phi'(1)) > 1``; the point
``x + a* D`` is tried, then up to a few more secant steps on ``phi'(a) = 0``. A trial is kept only
when it lowers ``f`` below the best point so far, so every iteration is at least as good as
Algorithm 2's and the sequence stays monotone. Convex ``phi`` is not required: acceptance is by
value only.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from ...errors import InputDataError

#: largest extrapolation factor tried along one majorization step
MAX_FACTOR = 1000.0
#: secant steps along one majorization direction
SECANTS = 3
#: previous (step, gradient change) pairs spanning the subspace trial with the current step
MEMORY = 4


def secant_extrapolate(evaluate, x, u, step, x_new, f_new, g_new, aux_new=None, prev=None, lin=None,
                       max_factor=MAX_FACTOR):
    """Return ``(x, f, g, aux, a)``: the best point found along ``x + a step`` (``a = 1`` is ``x_new``).

    ``evaluate(x) -> (f, grad, aux)`` evaluates the objective; ``aux`` is passed through (e.g. cached
    scores). ``g_new`` is ``grad f(x_new)``. Evaluations that fail with ``InputDataError`` (scores
    overflowing far along ``step``) end the search. ``prev``, a list of ``(s, y)`` pairs (earlier accepted
    steps and their gradient changes, most recent first; the callers keep :data:`MEMORY`), enables
    the subspace trial of :func:`_subspace_trial` first.

    ``lin(a, b)``, when given, returns the (affine) scores of ``x + a step + sum_j b_j s_j`` combined
    from known images (or None when too inexact); they are passed as ``evaluate(x, scores)`` (no
    feature product; ``scores`` is whatever ``lin`` returned). ``max_factor`` caps ``a`` (with constraints:
    the largest feasible factor, so secant points stay feasible).
    """
    best = (x_new, f_new, g_new, aux_new, 1.0)
    d0 = float(u @ step)
    d1 = float(g_new @ step)
    if prev:
        trial = _subspace_trial(evaluate, x, u, step, g_new, prev, f_new, lin)
        if trial is not None:
            return trial
    if not (d0 < 0 and d1 < 0):
        return best
    # phi' not increasing (phi affine or concave along the step): the secant has no root, go as far as allowed
    cap = min(MAX_FACTOR, max_factor)
    alpha = min(d0 / (d0 - d1), cap) if d1 > d0 else cap
    if alpha <= 1.05:
        return best
    a_prev, d_prev = 1.0, d1
    for _ in range(SECANTS):
        x_try = x + alpha * step
        try:
            sc = None if lin is None else lin(alpha, ())
            f_try, g_try, aux_try = evaluate(x_try) if sc is None else evaluate(x_try, sc)
        except InputDataError:
            break
        if not f_try < best[1]:
            break
        best = (x_try, f_try, g_try, aux_try, alpha)
        d_try = float(g_try @ step)
        if not (d_prev < d_try < 0):
            break
        a_next = alpha + d_try * (alpha - a_prev) / (d_prev - d_try)
        a_prev, d_prev = alpha, d_try
        alpha = min(a_next, cap)
        if alpha <= a_prev * 1.02:
            break
    return best


def _subspace_trial(evaluate, x, u, step, g_new, prev, f_new, lin=None):
    """One secant-Newton trial in the subspace ``x + a D + sum_j b_j s_j`` (``s_j``: previous steps).

    The curvature of ``f`` on ``V = [D, s_1, .., s_m]`` is estimated from gradient differences only,
    ``B = sym(V^T [g(x + D) - g(x), y_1, .., y_m])`` with ``y_j`` the gradient change of step ``s_j``
    (exact for a quadratic: ``V^T A V``); from ``(a, b) = (1, 0)`` the Newton step
    ``-B^{-1} V^T g(x + D)`` gives the trial point, kept only if it lowers ``f`` below ``f(x + D)``.
    ``None`` when ``B`` is not safely positive definite or the trial is not better (the caller then
    runs the one-dimensional secant).
    """
    V = np.column_stack([step] + [s for s, _ in prev])
    Y = np.column_stack([g_new - u] + [y for _, y in prev])
    B = V.T @ Y
    B = 0.5 * (B + B.T)
    h = V.T @ g_new
    if not np.all(np.isfinite(B)):
        return None
    # positive definite and not nearly singular: Cholesky pivots against the largest diagonal
    # (LAPACK directly: numpy's eigvalsh/solve overhead dominates on these k x k systems)
    L, info = lapack.dpotrf(B, lower=True, clean=False)
    piv = np.diagonal(L)
    if info != 0 or not piv.min() ** 2 > 1e-10 * B.diagonal().max() > 0:
        return None
    delta, info = lapack.dpotrs(L, -h, lower=True)
    if info != 0:
        return None
    a, b = 1.0 + delta[0], delta[1:]
    if not np.all(np.isfinite(delta)) or a <= 0 or a > MAX_FACTOR or np.any(np.abs(b) > MAX_FACTOR):
        return None
    x_try = x + a * step + V[:, 1:] @ b
    try:
        sc = None if lin is None else lin(a, b)
        f_try, g_try, aux_try = evaluate(x_try) if sc is None else evaluate(x_try, sc)
    except InputDataError:
        return None
    if not f_try < f_new:
        return None
    return x_try, f_try, g_try, aux_try, a
