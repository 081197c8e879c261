r"""The step QP of Algorithm 2 (Jebara & Choromanska 2012, step 3) when the only constraints are bounds and the
curvature is the row-space operator ``Q = diag(Dg) + R^T R`` (few bound rows, many parameters: SRBCT's 249 rows and
9,236 parameters): projected Newton (Bertsekas 1982, "Projected Newton methods for optimization problems with simple
constraints", SIAM J. Control Optim. 20(2)).

Problem, in ``D = theta - theta~``::

    min  u'D + 1/2 D'QD    s.t.  l <= D <= h        (l <= 0 <= h: D = 0 is feasible)

Iteration: ``g = u + QD``; the binding set ``A`` holds the variables at a bound whose gradient points out of the box
(``g_j > 0`` at ``l_j``, ``g_j < 0`` at ``h_j``); the direction is the Newton step on the free variables,
``d_F = -(Q_FF)^{-1} g_F``, ``d_A = 0``, and the step is the projected arc ``P[D + a d]`` with Armijo's test
on ``q``. ``(Q_FF)^{-1}`` is the row-space Woodbury solve with the fixed variables eliminated
(:class:`.step_operator.RowSpaceCurvature` with ``fixed``: ``1/Dg_j = 0`` there, as if their curvature were infinite,
so the solve vanishes on ``A`` and equals ``(Q_FF)^{-1} v_F`` on ``F``): one K x K capacitance per iteration and never
an n x n matrix. Many bounds enter or leave per iteration (the primal active-set method of
:mod:`varopt.lpqp.active_set` moves one at a time: thousands of iterations when thousands of bounds are active, e.g.
``theta >= 0`` on every weight).

The answer is accepted only when its projected gradient ``D - P[D - g]`` (the KKT residual of a box QP: stationarity
on the free variables, a multiplier of the right sign at each bound) is at most ``tol`` times the QP's scale;
otherwise the caller falls back to the active-set path.
"""
from __future__ import annotations

import numpy as np

#: Armijo's sufficient-decrease fraction and step shrink factor of the projected arc
ARMIJO, SHRINK = 1e-4, 0.5


def projected_newton(make_op, matvec, u, lo, hi, tol=1e-9, max_iter=60):
    """``(D, q(D), iterations)`` of the bound-constrained step QP, or None when it does not converge.

    ``make_op(fixed)``: the curvature operator with the variables ``fixed`` (bool mask) eliminated (``solve(v)``
    returning ``(Q_FF)^{-1} v_F`` on the free variables and 0 on the fixed); ``matvec(v) = Q v``."""
    got = box_newton(make_op, matvec, u, lo, hi, tol=tol, max_iter=max_iter)
    return None if got is None else (got.D, got.q, got.iterations)


class BoxAnswer:
    """The answer of :func:`box_newton`: ``D``, ``Qd = Q D``, ``q = c'D + 1/2 D'QD``, ``g = c + Q D``, the
    ``iterations``, and the binding set ``fixed`` at ``D`` with ``op = make_op(fixed)`` (its free block's solve, for
    the dual Hessian of :mod:`.step_rows`; built only when asked for)."""
    __slots__ = ("D", "Qd", "_make_op", "_op", "fixed", "g", "iterations", "q")

    def __init__(self, D, Qd, q, g, iterations, fixed, op, make_op):
        self.D, self.Qd, self.q, self.g, self.iterations = D, Qd, q, g, iterations
        self.fixed, self._op, self._make_op = fixed, op, make_op

    @property
    def op(self):
        if self._op is None:
            self._op = self._make_op(self.fixed)
        return self._op


def binding(D, g, lo, hi):
    """The binding set: at a bound with the gradient pointing out of the box."""
    return ((D <= lo) & (g > 0)) | ((D >= hi) & (g < 0))


def box_newton(make_op, matvec, c, lo, hi, D0=None, tol=1e-9, max_iter=60):
    """Projected Newton on ``min c'D + 1/2 D'QD`` over ``lo <= D <= hi`` from ``D0`` (clipped to the box; default 0):
    a :class:`BoxAnswer`, or None when it does not converge."""
    n = c.size
    if D0 is None:
        D, Qd, q = np.zeros(n), np.zeros(n), 0.0
    else:
        D = np.clip(D0, lo, hi)
        Qd = matvec(D)
        q = float(c @ D + 0.5 * D @ Qd)
    scale = 1.0 + float(np.abs(c).max(initial=0.0))
    last = (None, None)  # (fixed, make_op(fixed)) of the last direction
    for it in range(1, max_iter + 1):
        g = c + Qd
        pg = D - np.clip(D - g, lo, hi)
        res = float(np.abs(pg).max(initial=0.0))
        fixed = binding(D, g, lo, hi)
        if res <= tol * max(scale, 1.0 + float(np.abs(Qd).max(initial=0.0))):
            op = last[1] if last[0] is not None and np.array_equal(last[0], fixed) else None
            return BoxAnswer(D, Qd, q, g, it, fixed, op, make_op)
        # the binding set (at a bound, the gradient pointing out of the box), not Bertsekas' epsilon-active set: held
        # at a distance eps from its bound, a variable kept the projected gradient at eps (SRBCT, W >= 0); the
        # projected arc below moves variables onto their bounds instead
        op = make_op(fixed)
        last = (fixed, op)
        d = -op.solve(g)
        d[fixed] = 0.0
        if not np.all(np.isfinite(d)):
            return None
        a = 1.0
        while True:
            Dn = np.clip(D + a * d, lo, hi)
            Qn = matvec(Dn)
            qn = float(c @ Dn + 0.5 * Dn @ Qn)
            if qn <= q + ARMIJO * float(g @ (Dn - D)) or a < 1e-12:
                break
            a *= SHRINK
        if a < 1e-12 and not qn <= q:
            return None
        D, Qd, q = Dn, Qn, qn
    return None
