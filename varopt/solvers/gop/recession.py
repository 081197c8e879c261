r"""Rays along which a convex program of gop's direct path (:mod:`.convex_direct`) is unbounded.

For a closed convex ``f`` and a point ``z`` of its domain, ``(f(z + t d) - f(z)) / t`` is nondecreasing in ``t > 0``
with limit ``f_inf(d)``, the recession function (Rockafellar 1970, Theorem 8.5), so

.. math::  f(z + t d) \le f(z) + t f_\infty(d) \qquad (t \ge 0).

A row ``r(x) <= hi`` holding at ``z`` therefore holds along ``z + t d`` when ``r_inf(d) <= 0`` (the recession cone of a
sublevel set, Theorem 8.7), and the objective tends to ``-inf`` along a feasible ray when ``f_inf(d) < 0``. The
recession functions of the terms the convex path takes:

* linear ``l^T x``: ``l^T d``; a PSD quadratic form ``x^T Q x``: 0 on ``Q d = 0``, ``+inf`` elsewhere;
* an atom ``c g(a^T x + b)``, ``c >= 0``: 0 where the kernel's ``recession`` attribute says ``g_inf(a^T d)`` vanishes
  (``exp``: ``a^T d <= 0``; ``-log``, ``-u^p`` with ``0 < p < 1``, ``u^p`` with ``p < 0``: ``a^T d >= 0``; the other
  kernels only ``a^T d = 0``), ``+inf`` elsewhere. For ``|u|`` and ``u^2 / v`` it is finite off that set too: the
  description is an inner one, so rays are sought in a subcone of the recession cone and stay valid;
* a log-sum-exp ``c log sum_i exp(A_i x + b_i)``: ``c max_i A_i d`` (an epigraph column ``w >= A_i d``);
* a second-order cone ``||F x + f|| <= x_s``: ``||F d|| <= d_s``; linear rows and bounds: their homogeneous sides.

:func:`recession_ray` minimises ``f_inf(d)`` over that cone cut by ``-1 <= d <= 1`` (an LP for HiGHS; gop's barrier
method when there are second-order cones) and accepts ``d`` only after evaluating every recession function at it
(to rounding: ``1e-12`` of each row's scale, after projecting ``d`` on its active homogeneous rows) and finding
``f_inf(d) < 0``.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ...program.expression import Expression
from .clock import timed_lp

#: rounding allowance of a homogeneous row ``a^T d`` at the accepted ray, relative to ``max(1, |a|_1)`` (``|d| <= 1``)
ROUNDING = 1e-12
#: ``f_inf(d)`` must be below ``-DESCENT max(1, |objective's linear part|_inf)``
DESCENT = 1e-7


class RecessionCone:
    """The homogeneous rows of a convex program's recession cone over ``z = (d, w)``: ``d`` the direction (``n``
    columns), ``w`` one epigraph column per log-sum-exp group (``w_k >= max_i A_ki d``)."""

    def __init__(self, n):
        self.n = n
        self.sides = []     # (a, sign): a^T d >= 0 (+1), <= 0 (-1), == 0 (0)
        self.lse = []       # A_k (rows of the k-th log-sum-exp group)

    def function(self, e: Expression):
        """``(l, wc)``: ``e``'s recession function ``l^T d + sum_k wc[k] w_k`` (``w_k`` at ``max_i A_ki d``), its
        restrictions recorded in :attr:`sides`; None when a term has a multiplier (not a convex function of ``x``)."""
        for g in e.groups():
            if np.any(g.mult >= 0):
                return None
        for g in e.atoms:
            k = g.kernel
            A = g.A.toarray()
            self.sides.extend((a, k.recession) for a in A)
            if k.arity == 2:
                self.sides.extend((a, k.recession_v) for a in g.A2.toarray())
        if len(e.quadratic):
            # Q PSD (the convex path checked it): x^T Q x has a finite recession function only on Q d = 0
            w, V = np.linalg.eigh(e.quadratic.hessian_matrix.toarray())
            big = np.abs(w) > 1e-12 * max(1.0, float(np.abs(w).max()))
            self.sides.extend((V[:, t], 0) for t in np.flatnonzero(big))
        wc = {}
        for g in e.lse:
            A = g.A.toarray()
            for s in range(g.coef.size):
                wc[len(self.lse)] = float(g.coef[s])
                self.lse.append(A[g.seg == s])
        return np.array(e.linear, dtype=float), wc

    def value(self, fn, d):
        """The recession function ``fn = (l, wc)`` at ``d`` (``+inf`` for a multiplied term)."""
        if fn is None:
            return math.inf
        l, wc = fn
        return float(l @ d) + sum(c * float(np.max(self.lse[k] @ d)) for k, c in wc.items())

    def scale(self, fn):
        l, wc = fn
        return max(1.0, float(np.abs(l).sum()) + sum(abs(c) * float(np.abs(self.lse[k]).sum(axis=1).max())
                                                      for k, c in wc.items()))


def _side_rows(sign):
    return (0.0 if sign >= 0 else -math.inf), (0.0 if sign <= 0 else math.inf)


def recession_ray(form, n, solve_cones=None):
    """A direction ``d`` (``n`` entries) with ``f_inf(d) < 0`` and every row's recession function ``<= 0`` at it
    (module docstring), or None. ``form``: a :class:`.convex_direct.ConvexForm` without an outer objective atom;
    ``solve_cones(objective, linear, cones, lb, ub, N)``: the barrier solve of the ray program when ``form`` has
    second-order cones (``(z, ok)``)."""
    from .convex_direct import Cone  # (convex_direct imports this module)
    cone = RecessionCone(n)
    fobj = cone.function(form.objective)
    if fobj is None:
        return None
    fns, cones = [], []
    for r in form.rows:
        if isinstance(r, Cone):
            cones.append(r)
            continue
        fn = cone.function(r[0])
        if fn is None:
            return None
        fns.append(fn)
    K = len(cone.lse)
    N = n + K
    rows, lo, hi = [], [], []

    def add(a_d, a_w, l, h):
        rows.append(np.concatenate([a_d, a_w]))
        lo.append(l)
        hi.append(h)
    zw = np.zeros(K)
    for a, sign in cone.sides:
        add(a, zw, *_side_rows(sign))
    for e, l, h in form.linear:
        add(np.asarray(e.linear, dtype=float), zw, 0.0 if np.isfinite(l) else -math.inf,
            0.0 if np.isfinite(h) else math.inf)
    for l, wc in fns:
        aw = np.zeros(K)
        for k, c in wc.items():
            aw[k] = c
        add(l, aw, -math.inf, 0.0)
    for k, A in enumerate(cone.lse):
        ew = np.zeros(K)
        ew[k] = -1.0
        for a in A:
            add(a, ew, -math.inf, 0.0)
    cost = np.concatenate([fobj[0], np.zeros(K)])
    for k, c in fobj[1].items():
        cost[n + k] = c
    dlb = np.where(np.isfinite(form.lb), 0.0, -1.0)
    dub = np.where(np.isfinite(form.ub), 0.0, 1.0)
    # |A_k d| <= |A_k|_1 for |d| <= 1: a box that holds every w_k = max_i A_ki d
    R = np.array([float(np.abs(A).sum(axis=1).max()) + 1.0 for A in cone.lse])
    lb, ub = np.concatenate([dlb, -R]), np.concatenate([dub, R])
    if cones:
        z = solve_cones(cost, [(r, l, h) for r, l, h in zip(rows, lo, hi)],
                        [c.padded(K, homogeneous=True) for c in cones], lb, ub, N)
    else:
        A = sp.csr_matrix(np.array(rows)) if rows else None
        # stopped by the time limit: OutOfTime, not "no ray" (a verdict the LP did not reach)
        out = timed_lp(cost, A, np.array(lo) if rows else None, np.array(hi) if rows else None, lb, ub)
        z = out.x if out.status == "optimal" else None
    if z is None:
        return None
    d = _projected(np.clip(np.asarray(z[:n], dtype=float), dlb, dub), cone, form, dlb, dub)
    return d if _is_ray(d, cone, fobj, fns, cones, form, dlb, dub) else None


def _active(d, cone, form, dlb, dub):
    """The homogeneous rows of ``d``'s pieces that hold with equality (to ``1e-9`` of their scale)."""
    act = [a for a, sign in cone.sides if sign == 0 or abs(a @ d) <= 1e-9 * max(1.0, float(np.abs(a).sum()))]
    for e, l, h in form.linear:
        a = np.asarray(e.linear, dtype=float)
        if (np.isfinite(l) or np.isfinite(h)) and abs(a @ d) <= 1e-9 * max(1.0, float(np.abs(a).sum())):
            act.append(a)
    for j in np.flatnonzero((dlb == 0.0) & (dub == 0.0) | (d == 0.0)):
        a = np.zeros(d.size)
        a[j] = 1.0
        act.append(a)
    return act


def _projected(d, cone, form, dlb, dub):
    """``d`` projected on the null space of its active homogeneous rows: an LP's vertex holds them to its feasibility
    tolerance (1e-9 or so), the projection to rounding."""
    act = _active(d, cone, form, dlb, dub)
    if not act:
        return d
    M = np.array(act)
    step = np.linalg.lstsq(M, M @ d, rcond=None)[0]
    return np.clip(d - step, dlb, dub)


def _is_ray(d, cone, fobj, fns, cones, form, dlb, dub):
    """Every recession function evaluated at ``d``: the sides, the linear rows, the convex rows and the cones within
    rounding of 0 on their side, and the objective's strictly negative."""
    if not (np.all(np.isfinite(d)) and np.all(d >= dlb) and np.all(d <= dub)):
        return False
    for a, sign in cone.sides:
        v, tol = float(a @ d), ROUNDING * max(1.0, float(np.abs(a).sum()))
        if (sign <= 0 and v > tol) or (sign >= 0 and v < -tol):
            return False
    for e, l, h in form.linear:
        a = np.asarray(e.linear, dtype=float)
        v, tol = float(a @ d), ROUNDING * max(1.0, float(np.abs(a).sum()))
        if (np.isfinite(h) and v > tol) or (np.isfinite(l) and v < -tol):
            return False
    for fn in fns:
        if cone.value(fn, d) > ROUNDING * cone.scale(fn):
            return False
    for c in cones:
        if c.ray_excess(d) > ROUNDING * c.scale():
            return False
    return cone.value(fobj, d) < -DESCENT * max(1.0, float(np.abs(fobj[0]).max(initial=0.0)))
