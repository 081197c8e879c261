r"""The step QP of Algorithm 2 (Jebara & Choromanska 2012, step 3) with bounds **and** a few general linear rows,
when the curvature is the row-space operator ``Q = diag(Dg) + R^T R``: projected Newton on the box (Bertsekas 1982,
:mod:`.step_bounds`) inside a semismooth Newton method on the rows' multipliers (the dual of the rows only).

Problem, in ``D = theta - theta~`` (``D = 0`` feasible)::

    min  q(D) = u'D + 1/2 D'QD    s.t.  r_lo <= A D <= r_hi  (m rows, m small),   l <= D <= h.

**Dual of the rows.** With one multiplier ``y_i`` per row (``y_i > 0``: the upper side pushes, ``y_i < 0``: the
lower side; ``y_i > 0`` needs a finite ``r_hi,i``, ``y_i < 0`` a finite ``r_lo,i``), the support function
``sigma(y) = sum_i max(y_i r_hi,i, y_i r_lo,i)`` of the rows' interval gives the concave dual

    psi(y) = min_{l <= D <= h} [ q(D) + y'A D ] - sigma(y),

whose inner problem is a box QP with the linear term ``u + A'y``: :func:`.step_bounds.box_newton` solves it (many
bounds enter or leave per iteration). Strong duality holds (a feasible convex QP); ``D(y*)`` at a maximizer ``y*`` is
the step. ``psi`` is piecewise quadratic and ``C^1`` where ``D(y)`` is unique: its (projected) gradient is
``r = A D(y) - s(y)``, ``s_i = r_hi,i`` if ``y_i > 0``, ``r_lo,i`` if ``y_i < 0``, and at ``y_i = 0`` the point of
``[r_lo,i, r_hi,i]`` nearest ``(A D)_i`` (so ``r_i = 0`` when the row holds). On the piece of the current binding set
``B`` (free variables ``F``), ``D_F(y) = -(Q_FF)^{-1}(u + A'y + Q_FB D_B)_F`` is affine in ``y``, so the generalized
Hessian is ``-M``, ``M = A_F (Q_FF)^{-1} A_F'`` (``m x m``; ``(Q_FF)^{-1}`` on the ``m`` columns of ``A_F'`` by one
row-space solve of the free block, :class:`.step_operator.RowSpaceCurvature` with the bound variables eliminated).

**Iteration** (semismooth Newton on the rows that move: ``y_i != 0``, or ``y_i = 0`` with the row violated and the
Newton step pushing ``y_i`` towards the violated side; equality rows always): ``dy = (M + mu I)^{-1} r`` (``mu`` a
1e-12 relative proximal term: a row whose support is all bound has ``M_ii = 0``). Along ``y + t dy`` the dual stays
the quadratic of the current piece until the first breakpoint ``t_b``: a bound variable's gradient
``g_B + t (A'dy - Q dD)_B`` changing sign (``dD = -(Q_FF)^{-1} A_F' dy``), a free variable reaching its bound, or a
multiplier reaching zero. Up to ``t_b``, ``psi(y + t dy) >= psi(y) + t r'dy (1 - t/2)`` (``r'dy >= dy'M dy``), so
the step ``min(1, t_b)`` always increases ``psi``; the full step ``t = 1`` (which may cross many breakpoints: many
bounds enter or leave at once) is tried first and kept when it passes Armijo's test, otherwise ``t`` is halved down to
``t_b``. Each trial is one warm-started box solve from the predicted ``D + t dD``: inside the piece that prediction is
exact and the box solve only certifies it.

**Acceptance.** ``(D, y)`` is returned only when the KKT residual of the whole QP in the convention of
:mod:`varopt.lpqp` (:func:`varopt.lpqp.certificate.kkt_residual` with row duals ``-y`` and column duals the gradient
``u + QD + A'y`` on the variables at a bound: stationarity on the free variables, row and box feasibility, dual
signs, complementarity) is at most ``tol`` (``1e-9``, the projected-Newton path's) times the QP's scale
``1 + max(|u|, |QD|, |A'y|)``; otherwise None, and the caller takes the active-set path unchanged.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .step_bounds import ARMIJO, box_newton

#: the dual method applies to at most this many general rows (an m x m Hessian and m columns of (Q_FF)^{-1})
MAX_ROWS = 20
#: outer (dual Newton) iterations and box solves allowed before the active-set path is asked
MAX_OUTER, MAX_BOX_SOLVES = 40, 120
#: the full dual step is tried first only when the model's curvature along it, dy'M dy, is at least this fraction of
#: r'dy (1 for a Newton step on a nonsingular M); else the step goes to the first breakpoint
FULL_STEP_CURVATURE = 1e-6


def _support(y, rlo, rhi):
    """``sigma(y) = sum_i max(y_i r_hi,i, y_i r_lo,i)`` on the domain (``y_i`` of a sign with a finite side)."""
    with np.errstate(invalid="ignore"):
        return float(np.sum(np.where(y > 0, y * rhi, np.where(y < 0, y * rlo, 0.0))))


def _domain(y, rlo, rhi):
    """``y`` with the multipliers of a sign whose side is infinite set to zero."""
    return np.where(((y > 0) & ~np.isfinite(rhi)) | ((y < 0) & ~np.isfinite(rlo)), 0.0, y)


class _Point:
    """The dual at ``y``: the box answer ``box``, ``AD``, the gradient ``r`` and ``psi``."""

    def __init__(self, y, box, A, rlo, rhi):
        self.y, self.box, self.rlo, self.rhi = y, box, rlo, rhi
        self.AD = A @ box.D
        side = np.where(y > 0, rhi, np.where(y < 0, rlo, np.clip(self.AD, rlo, rhi)))
        self.r = self.AD - side
        self.psi = box.q - _support(y, rlo, rhi)


def bounds_and_rows(make_op, matvec, u, A, rlo, rhi, lo, hi, y0=None, tol=1e-9):
    """``(D, q(D), y, stats)`` of the step QP with rows and bounds, or None (see module doc). ``A``: the ``m x n``
    rows (dense or sparse), ``rlo <= 0 <= rhi`` and ``lo <= 0 <= hi`` their shifted sides, ``y0`` a warm start of the
    multipliers (this module's sign: ``y_i > 0`` at the upper side), ``make_op``/``matvec`` as
    :func:`.step_bounds.box_newton`. ``stats``: ``outer`` iterations, ``box`` solves and their ``box_iterations``."""
    from ...lpqp.certificate import kkt_residual
    from ...lpqp.result import LPResult
    m = A.shape[0]
    At = A.T
    eq = rlo == rhi
    y = np.zeros(m) if y0 is None else _domain(np.asarray(y0, dtype=float), rlo, rhi)
    stats = {"outer": 0, "box": 0, "box_iterations": 0}

    def evaluate(yv, D0):
        box = box_newton(make_op, matvec, u + At @ yv, lo, hi, D0=D0, tol=tol)
        stats["box"] += 1
        if box is None:
            return None
        stats["box_iterations"] += box.iterations
        return _Point(yv, box, A, rlo, rhi)

    pt = evaluate(y, None)
    while pt is not None and stats["outer"] < MAX_OUTER and stats["box"] < MAX_BOX_SOLVES:
        box, y = pt.box, pt.y
        D = box.D
        # the certificate of the whole QP (varopt.lpqp's convention: row duals -y, column duals at the bounds)
        at_bound = (D <= lo) | (D >= hi)
        Aty = At @ y
        z = np.where(at_bound, box.g, 0.0)  # box.g = u + A'y + Q D
        res = LPResult("optimal", x=D, objective=box.q - float(y @ pt.AD), row_duals=-y, col_duals=z)
        kkt = kkt_residual(res, u + box.Qd, A, rlo, rhi, lo, hi)
        scale = 1.0 + max(float(np.abs(u).max(initial=0.0)), float(np.abs(box.Qd).max(initial=0.0)),
                          float(np.abs(Aty).max(initial=0.0)))
        if kkt <= tol * scale:
            return _polish(pt, A, eq, matvec, u, lo, hi, tol * scale) + (stats,)
        stats["outer"] += 1
        step = _newton_direction(pt, A, eq, matvec, lo, hi, tol * scale)
        if step is None:
            return None
        dy, dD, t_b = step
        ry = float(pt.r @ dy)
        if not ry > 0:
            return None
        # the full step where the quadratic model sees the curvature along dy; a row whose support is all bound has
        # none (dy'M dy << r'dy: the proximal term made the step, of no meaning beyond the first breakpoint)
        curv = -float(dy @ (A @ dD))   # dy'M dy (M dy = -A dD)
        t, nxt = (1.0 if curv >= FULL_STEP_CURVATURE * ry else t_b), None
        while True:
            t = max(t, t_b)
            yn = y + t * dy
            # a multiplier the step takes to or across zero stops at zero (the dual's kink there: sigma switches
            # sides), the projected arc on the orthant of the current signs. Across zero, Newton's model of the piece
            # overshoots and the iterates zig-zag around an inactive two-sided row's y_i = 0; left at +-1e-17 by
            # rounding, it would escape the rule that holds rows at zero (next step: a breakpoint at t ~ 1e-17)
            yn[(y * dy < 0) & ((y * yn <= 0) | (np.abs(yn) <= 1e-12 * np.abs(y)))] = 0.0
            yn = _domain(yn, rlo, rhi)
            cand = evaluate(yn, D + t * dD)
            if cand is None:
                return None
            if cand.psi >= pt.psi + ARMIJO * float(pt.r @ (yn - y)):
                nxt = cand
                break
            if t <= t_b:
                # inside the first piece the increase is guaranteed up to the inner solves' rounding
                if not cand.psi >= pt.psi - tol * (1.0 + abs(pt.psi)) or not t > 0:
                    return None
                nxt = cand
                break
            if stats["box"] >= MAX_BOX_SOLVES:
                return None
            t = max(0.5 * t, t_b)
        pt = nxt
    return None


def _newton_direction(pt, A, eq, matvec, lo, hi, gtol):
    """``(dy, dD, t_b)``: the dual Newton step on the moving rows, the primal change along it and the first breakpoint
    (module doc); None when it cannot be formed. A bound variable whose gradient is below ``gtol`` (the certificate's
    tolerance) counts as free: held, it would put a breakpoint at ``t = 0`` and, when it is a row's whole support,
    leave ``M`` no curvature along that row."""
    y, r, box = pt.y, pt.r, pt.box
    m, n = A.shape
    fixed = box.fixed & (np.abs(box.g) > gtol)
    op = box.op if np.array_equal(fixed, box.fixed) else box._make_op(fixed)
    moving = (y != 0) | (r != 0) | eq
    for _ in range(m + 1):
        Fr = np.flatnonzero(moving)
        if not Fr.size:
            return None
        Ar = A[Fr]
        V = (Ar.toarray() if sp.issparse(Ar) else np.asarray(Ar)).T.copy()  # n x k
        V[fixed] = 0.0
        X = op.solve(V)
        X = X.reshape(n, -1)
        X[fixed] = 0.0
        M = np.asarray(Ar @ X).reshape(Fr.size, Fr.size)
        M = 0.5 * (M + M.T)
        mu = 1e-12 * max(1.0, float(np.abs(M.diagonal()).max(initial=0.0)))
        try:
            dyF = np.linalg.solve(M + mu * np.eye(Fr.size), r[Fr])
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(dyF)):
            return None
        # a row held at zero that the step would push away from its violated side stays at zero (Bertsekas' rule)
        wrong = (y[Fr] == 0) & ~eq[Fr] & (dyF * r[Fr] < 0)
        if not wrong.any():
            break
        moving[Fr[wrong]] = False
    else:
        return None
    dy = np.zeros(m)
    dy[Fr] = dyF
    dD = -(X @ dyF)
    dD[fixed] = 0.0
    return dy, dD, _first_breakpoint(pt, fixed, A, dy, dD, matvec, lo, hi)


def _first_breakpoint(pt, fixed, A, dy, dD, matvec, lo, hi):
    """The largest ``t <= 1`` up to which ``y + t dy`` stays on the dual's current quadratic piece (module doc)."""
    box = pt.box
    D, g = box.D, box.g
    t = 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        if fixed.any():
            # the bound variables' gradient along the step: A'dy + Q dD (zero on the free ones)
            dg = np.asarray(A.T @ dy).ravel() + matvec(dD)
            gf, dgf = g[fixed], dg[fixed]
            cross = gf * dgf < 0
            if cross.any():
                t = min(t, float((-gf[cross] / dgf[cross]).min()))
        # free variables strictly inside the box (one on its bound with a gradient of the inner tolerance's size
        # would put the breakpoint at 0; Armijo's test and the last trial's non-decrease check cover it)
        free = ~fixed & (D > lo) & (D < hi)
        Df, dDf, lf, hf = D[free], dD[free], lo[free], hi[free]
        dn, up = dDf < 0, dDf > 0
        if dn.any():
            t = min(t, float(((lf[dn] - Df[dn]) / dDf[dn]).min()))
        if up.any():
            t = min(t, float(((hf[up] - Df[up]) / dDf[up]).min()))
        y = pt.y
        flip = y * dy < 0
        if flip.any():
            t = min(t, float((-y[flip] / dy[flip]).min()))
    return max(t, 0.0)


def _polish(pt, A, eq, matvec, u, lo, hi, gtol):
    """``(D, q(D), y)`` of a certified point, with the rows' residual ``r`` (of the inner solves' tolerance, up to
    1e-9 of the scale) removed by one more Newton step on the same piece: ``D + dD``, ``y + dy`` are exact there (no
    box solve) when no breakpoint is crossed (``t_b >= 1``) and the step keeps ``D`` in the box; else the point as it
    is. The rows then hold to rounding, as the active set's answers do."""
    D, y = pt.box.D, pt.y
    if np.any(pt.r):
        step = _newton_direction(pt, A, eq, matvec, lo, hi, gtol)
        if step is not None and step[2] >= 1.0:
            dy, dD, _ = step
            Dn = D + dD
            if np.all(Dn >= lo) and np.all(Dn <= hi) and np.all(np.isfinite(Dn)):
                qn = float(u @ Dn + 0.5 * Dn @ matvec(Dn))
                return Dn, qn, _domain(y + dy, pt.rlo, pt.rhi)
    return D, pt.box.q - float(y @ pt.AD), y


class _IdentityFree:
    """``Q = I`` with the variables ``fixed`` eliminated: ``solve(V)`` is ``V`` on the free rows, 0 on the fixed."""
    __slots__ = ("fixed",)

    def __init__(self, fixed):
        self.fixed = fixed

    def solve(self, V):
        X = np.array(V, dtype=float)
        X[self.fixed] = 0.0
        return X


def project_start(x, A, lo, hi, lb, ub, tol=1e-9):
    r"""The Euclidean projection ``argmin ||z - x||^2 / 2`` over ``{lo <= A z <= hi, lb <= z <= ub}`` of a point
    ``x`` inside the bounds, by the method of this module with ``Q = I`` (the inner box problem is a clip): in
    ``D = z - x`` the QP ``min 1/2 D'D`` s.t. ``lo - Ax <= A D <= hi - Ax``, ``lb - x <= D <= ub - x``. Returns ``z``
    (certified by the whole QP's KKT residual, as every answer of :func:`bounds_and_rows`), or None: more than
    :data:`MAX_ROWS` rows, an empty polyhedron (the dual is then unbounded) or no certificate -- the caller asks the
    general QP layer, which also decides infeasibility. (HiGHS' QP method takes minutes on this problem with
    thousands of free variables: one row on 2,000 variables 2.3 s, on 9,236 over 300 s.)"""
    m, n = A.shape
    if m > MAX_ROWS:
        return None
    Ax = np.asarray(A @ x).ravel()
    got = bounds_and_rows(_IdentityFree, lambda v: np.array(v, dtype=float), np.zeros(n), A, lo - Ax, hi - Ax,
                          lb - x, ub - x, tol=tol)
    if got is None:
        return None
    return np.clip(x + got[0], lb, ub)
