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
    n = u.size
    D = np.zeros(n)
    Qd = np.zeros(n)
    q = 0.0
    scale = 1.0 + float(np.abs(u).max(initial=0.0))
    for it in range(1, max_iter + 1):
        g = u + Qd
        pg = D - np.clip(D - g, lo, hi)
        res = float(np.abs(pg).max(initial=0.0))
        if res <= tol * max(scale, 1.0 + float(np.abs(Qd).max(initial=0.0))):
            return D, q, it
        # the binding set (at a bound, the gradient pointing out of the box), not Bertsekas' epsilon-active set: held
        # at a distance eps from its bound, a variable kept the projected gradient at eps (SRBCT, W >= 0); the
        # projected arc below moves variables onto their bounds instead
        fixed = ((D <= lo) & (g > 0)) | ((D >= hi) & (g < 0))
        d = -make_op(fixed).solve(g)
        d[fixed] = 0.0
        if not np.all(np.isfinite(d)):
            return None
        a = 1.0
        while True:
            Dn = np.clip(D + a * d, lo, hi)
            Qn = matvec(Dn)
            qn = float(u @ Dn + 0.5 * Dn @ Qn)
            if qn <= q + ARMIJO * float(g @ (Dn - D)) or a < 1e-12:
                break
            a *= SHRINK
        if a < 1e-12 and not qn <= q:
            return None
        D, Qd, q = Dn, Qn, qn
    return None
