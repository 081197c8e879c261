"""Proximal Newton (``proxsg`` variant ``PN``; Lee, Sun & Saunders 2014) for ``min g(x) + h(x)`` with
an exact gradient and Hessian of the smooth part, and the optimality certificate of every exact run.

Iteration ``k`` (``H = Hess g(x_k)``, exact):

1. search direction from the quadratic model with the penalty kept exact,
   ``z = argmin_z  grad.(z - x) + 1/2 (z - x)^T H (z - x) + h(z)``  (Lee et al. 2014, eq. (2.3)),
   over the *working set* ``W``: every variable except those held at a kink of ``h`` or at a bound
   whose least-norm subgradient entry ``v_j`` (below) is 0, which keep ``z_j = x_j`` (the shrinking
   of newGLMNET, Yuan, Ho & Lin 2012, §3.4, with no margin). Only ``H_WW`` is formed
   (:meth:`Expression.hessian` with ``idx``: ``K |W|^2`` work instead of ``K n^2``; an L1 fit
   has ``|W|`` near the support size, a1a 13-20 of 119). No stalling: if the restricted model's
   step is 0, ``x`` is optimal on ``W`` and ``v_j = 0`` off it, so ``v = 0``; near a solution with
   strict complementarity the settled set is the optimum's zero set, where the full model's step is
   0 anyway, so the local rate is the full method's. The model is solved by FISTA with adaptive
   restart (step ``1/lambda_max(H_WW)``, the model's exact Lipschitz constant: :func:`lambda_max`)
   to the inner tolerance ``min(res/4, res^2)`` (``res`` the outer residual below; the forcing
   sequence that keeps the outer rate superlinear, ibid. §3.3), with a *polish* tried every
   ``POLISH_EVERY`` FISTA steps and at the end: the model restricted to the free variables with
   their signs fixed is a linear system, solved exactly and accepted when its solution keeps the
   signs and bounds (at the end: when it lowers the model's residual; during FISTA: when its
   residual is below the inner tolerance, which ends the model solve);
2. ``d = z - x``, ``Delta = grad.d + h(z) - h(x)`` (``< 0`` unless ``x`` is optimal), backtracking
   ``x + a d`` with ``a = 1, 1/2, ...`` until ``f(x + a d) <= f(x) + 1e-4 a Delta`` (ibid. eq. (2.6);
   ``x + a d`` stays in the box, a convex set). Once ``|Delta|`` is below the rounding of ``f`` the
   unit step is taken (the quadratic-convergence region, where ``f`` cannot resolve the decrease).

**Certificate.** Stop when the least-norm subgradient ``v`` of ``g + h`` at ``x``
(:meth:`SeparablePenalty.min_norm_subgradient`; ``v = 0`` iff ``x`` is optimal) has
``|v|_inf <= kkt_tol max(1, |grad|_inf)``. Reported for every exact run: ``subgradient_norm``
``|v|_2`` and ``gap_estimate = |v|_2^2 / (2 lambda_min(H))``: if ``g + h`` is ``mu``-strongly convex
then ``f(x) - f* <= |v|^2 / (2 mu)`` (from ``f(y) >= f(x) + v.(y - x) + mu/2 |y - x|^2`` minimised
over ``y``); ``mu`` is taken as ``lambda_min`` of the Hessian at ``x`` (local strong convexity, so an
estimate, not a global bound; None when the Hessian is singular or unavailable, or beyond 2000
variables). A Hessian singular everywhere (rank bound of :meth:`Expression.hessian_rank_bound` below
``n``, e.g. fewer samples than features, and no elastic-net term) is recognised without forming it.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InvalidOptionError


#: above this many variables ``lambda_max(H)`` comes from Lanczos iterations (``O(n^2)`` each)
#: instead of a full eigendecomposition (``O(n^3)``: 0.8 s at n = 2000 against 2000 FISTA steps'
#: worth of matrix-vector products)
LANCZOS_N = 300
#: FISTA tries the polish every this many inner iterations
POLISH_EVERY = 10


def _eig_range(H):
    w = np.linalg.eigvalsh(H)
    return float(w[0]), float(w[-1])


def lambda_max(H) -> float:
    """An upper bound, tight to ~1e-8 relative, on the largest eigenvalue of the symmetric ``H``.

    Small ``H``: ``eigvalsh``. Large: the Lanczos Ritz pair ``(theta, v)`` (ARPACK, ``|v| = 1``)
    plus its residual ``|H v - theta v|``, which bounds ``|theta - lambda|`` for some eigenvalue
    ``lambda`` (Parlett 1998, Theorem 4.5.1); the largest Ritz value of a converged run is that of
    ``lambda_max``, so ``theta + |r|`` (times ``1 + 1e-8``) is a safe FISTA Lipschitz constant
    (a step ``1/L`` with ``L`` below ``lambda_max`` could diverge). ARPACK failures fall back to
    ``eigvalsh``."""
    n = H.shape[0]
    if n <= LANCZOS_N:
        return _eig_range(H)[1]
    from scipy.sparse.linalg import ArpackError, eigsh
    try:
        w, V = eigsh(H, k=1, which="LA", tol=1e-10, v0=np.ones(n))
    except ArpackError:
        return _eig_range(H)[1]
    v = V[:, 0]
    r = float(np.linalg.norm(H @ v - w[0] * v))
    return (float(w[0]) + r) * (1.0 + 1e-8)


def solve_model(pen, x, g, H, L, tol, max_iter=20000):
    """``argmin_z g.(z - x) + 1/2 (z - x)^T H (z - x) + h(z)`` (module docstring, step 1); returns
    ``(z, inner iterations, inner residual)``. Every ``POLISH_EVERY`` iterations the polish is
    tried at the current point and FISTA stops as soon as the polished point's model residual
    (the least-norm subgradient of the model, a stricter measure than the prox-gradient step) is
    below ``tol``: near the solution the signs settle long before FISTA's linear rate reaches
    ``tol``."""
    z, y, t = x.copy(), x.copy(), 1.0
    res = math.inf
    it = 0
    for it in range(1, max_iter + 1):
        gy = g + H @ (y - x)
        p = pen.prox(y - gy / L, 1.0 / L)
        res = L * float(np.max(np.abs(y - p))) if p.size else 0.0
        if res <= tol:
            z = p
            break
        if it % POLISH_EVERY == 0:
            zp = _polish(pen, x, g, H, p)
            if zp is not None:
                rp = _model_residual(pen, x, g, H, zp)
                if rp <= tol:
                    return zp, it, rp
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        if (y - p) @ (p - z) > 0:  # momentum points uphill: restart (O'Donoghue & Candes 2015)
            t, t_new = 1.0, 1.0
        y = p + ((t - 1.0) / t_new) * (p - z)
        z, t = p, t_new
    zp = _polish(pen, x, g, H, z)
    if zp is not None:
        rp = _model_residual(pen, x, g, H, zp)
        if rp < _model_residual(pen, x, g, H, z):
            return zp, it, rp
    return z, it, res


def _model_residual(pen, x, g, H, z):
    v = pen.min_norm_subgradient(z, g + H @ (z - x))
    return float(np.max(np.abs(v))) if v.size else 0.0


def _polish(pen, x, g, H, z):
    """Exact minimiser of the model with the variables at a kink or bound held there and the signs
    of the others fixed (a linear system), or None when it changes a sign or leaves the box."""
    u = z - pen.center
    free = ~(((u == 0) & (pen.l1 > 0)) | (z <= pen.lb) | (z >= pen.ub))
    if not free.any():
        return None
    F = np.flatnonzero(free)
    s = np.sign(u[F])
    d = z - x
    dF = d.copy()
    dF[F] = 0.0
    rhs = -(g[F] + H[F] @ dF + pen.l1[F] * s + 2.0 * pen.l2[F] * x[F])
    A = H[np.ix_(F, F)] + np.diag(2.0 * pen.l2[F])
    try:
        step = np.linalg.solve(A, rhs)
    except np.linalg.LinAlgError:
        return None
    if not np.isfinite(step).all():
        return None
    zn = z.copy()
    zn[F] = x[F] + step
    un = zn[F] - pen.center[F]
    if np.any((np.sign(un) != s) & (pen.l1[F] > 0)) or np.any(zn < pen.lb) or np.any(zn > pen.ub):
        return None
    return zn


def certificate(src, pen, x, g=None, hessian=True):
    """``{'subgradient_norm', 'subgradient_inf', 'gap_estimate'}`` at ``x`` (module docstring)."""
    if g is None:
        g, _ = src.grad(x, 0)
    v = pen.min_norm_subgradient(x, g)
    out = {"subgradient_norm": float(np.linalg.norm(v)), "subgradient_inf": float(np.max(np.abs(v))) if v.size
           else 0.0, "gap_estimate": None}
    rank = src.hessian_rank_bound() if hessian and src.has_hessian else None
    if rank is not None and rank < x.size and not np.any(pen.l2):
        out["hessian_singular"] = True  # at every x (e.g. fewer samples than features): no estimate
    elif hessian and src.has_hessian and x.size <= 2000:  # a dense eigenvalue problem: skipped when large
        H = src.hessian(x) + np.diag(2.0 * pen.l2)
        lo = _eig_range(H)[0]
        if lo > 1e-12 * max(1.0, float(np.abs(H).max())):
            out["gap_estimate"] = float(v @ v) / (2.0 * lo)
            out["hessian_lambda_min"] = lo
    return out


def proximal_newton(pr):
    """The ``PN`` loop on a :class:`~.methods.ProxRun` ``pr``; returns ``(status, message, x)``."""
    run, src, pen, o = pr.run, pr.src, pr.pen, pr.opts
    if not (src.exact and pr.can_value and src.has_hessian):
        raise InvalidOptionError(
            "proxsg variant 'PN' (proximal Newton) needs exact gradients, values and the Hessian of the smooth "
            "part (the program's own smooth part, or an oracle with a hessian such as IsingExactOracle); "
            "use PB/PA/FB for sampled gradients")
    if src.n > 5000:
        raise InvalidOptionError(f"proxsg variant 'PN' forms the dense {src.n} x {src.n} Hessian; use PA for more "
                                 "than 5000 variables")
    x = pr.x
    F = pr.objective(x)
    inner_total = 0
    working = []  # working-set sizes
    pr.info["working_set_sizes"] = working
    for k in run.iterations():
        g, _ = src.grad(x, k)
        v = pen.min_norm_subgradient(x, g)
        res = float(np.max(np.abs(v))) if v.size else 0.0
        if res <= o.kkt_tol * max(1.0, float(np.max(np.abs(g))) if g.size else 1.0):
            pr.info.update(inner_iterations=inner_total)
            pr.last_grad = g
            pr._report(x, x, k, objective=F, step=0.0, residual=res)
            return "converged", f"least-norm subgradient below kkt_tol={o.kkt_tol:g}", x
        tol = max(0.1 * o.kkt_tol, min(0.25 * res, res * res))
        W = np.flatnonzero(~pen.settled(x, v))  # the working set (module docstring, step 1)
        working.append(int(W.size))
        if W.size == x.size:
            H = src.hessian(x)
            z, inner, _ = solve_model(pen, x, g, H, max(lambda_max(H), 1e-12), tol)
        else:
            H = src.hessian(x, W)
            zW, inner, _ = solve_model(pen.subset(W), x[W], g[W], H, max(lambda_max(H), 1e-12), tol)
            z = x.copy()
            z[W] = zW
        inner_total += inner
        d = z - x
        delta = float(g @ d) + pen.value(z) - pen.value(x)
        a, Fn = 1.0, pr.objective(z)
        if abs(delta) > 1e-14 * max(1.0, abs(F)):
            while Fn > F + 1e-4 * a * delta and a > 1e-10:
                a *= 0.5
                Fn = pr.objective(x + a * d)
        x = x + a * d if a != 1.0 else z
        F = Fn
        pr._report(x, x, k, objective=F, step=a, residual=res, inner=inner)
        if run.callback(x):
            break
    pr.info.update(inner_iterations=inner_total)
    return None, None, x
