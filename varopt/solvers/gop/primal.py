r"""The GOP primal problem (Saddiki, Trapp & Flaherty 2017, eq. (3)/(9)): ``y`` fixed at ``y^k``, convex in ``x``.

.. math::  \min_{x \in X} f(x, y^k) \quad \text{s.t.}\quad lo_c \le g_c(x, y^k) \le hi_c

over the constraints that involve ``x`` (``X`` is the box of the primal block). By the
partition conditions these constraints are linear in ``x`` once ``y`` is fixed.

Two paths, both returning the multipliers ``lambda_c`` in the convention of
:mod:`.lagrangian` (``lambda_c > 0`` when the upper side is active):

* LP/QP (objective a quadratic form in ``x``): HiGHS through :mod:`varopt.lpqp`
  (multipliers ``lambda = -row_duals``).
* general convex objective (``x log x``, ``-log x``, ``exp``, ...): a primal-dual
  interior-point method (Boyd & Vandenberghe, *Convex Optimization*, §11.7) on the small
  problem with exact gradients and Hessians, started from a strictly interior point found
  by an LP; it stops at KKT residuals ~1e-10, which is verified.

When the primal is infeasible for ``y^k`` the feasibility problem
``min sum_c (p_c + q_c)  s.t. lo_c <= g_c(x, y^k) + p_c - q_c <= hi_c, x in X`` (an LP)
gives the multipliers of the feasibility cut (Floudas 2000, §3.3).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError, SolverBugError
from ...program.atoms import ATOMS
from ...program.expression import Expression
from .clock import timed_lp
from .unbounded import Unbounded


@dataclass
class PrimalResult:
    status: str  # "optimal" | "infeasible"
    x: np.ndarray = None  # local x order
    value: float = None  # f(x, y^k)
    lam: np.ndarray = None  # multipliers of the dualised constraints
    kkt: float = 0.0
    path: str = ""


def _inf_norm(v) -> float:
    """max |v_i|, 0 for an empty vector (numpy's norm(v, inf) raises on empty arrays before 2.1)."""
    return float(np.abs(v).max(initial=0.0))

def _linear_rows(cons, nx):
    if not cons:
        return sp.csr_matrix((0, nx)), np.zeros(0)
    # compressed rows from each row's own storage (a dense stack of 2,000 rows x 4,050 columns took 0.5 s)
    indptr, idx, val = Expression.linear_rows(cons, nx)
    A = sp.csr_matrix((val, idx, indptr), shape=(len(cons), nx))
    A.sum_duplicates()
    A.eliminate_zeros()
    k = np.array([c.constant for c in cons])
    return A, k


def solve_primal(bm, yval, xlb, xub) -> PrimalResult:
    f, cons = bm.primal_expressions(yval)
    nx = bm.nx
    A, k = _linear_rows(cons, nx)
    lo = bm.dual_lo - k
    hi = bm.dual_hi - k
    if f.is_quadratic_form:
        H, c, k0 = f.as_quadratic()
        Q = H if H.nnz else None
        if Q is not None and nx <= 60:
            # small QPs: the interior-point path is exact to ~1e-10 and avoids the QP polish cost
            try:
                return _pdip(f, A, lo, hi, xlb, xub)
            except (ModelStructureError, SolverBugError, np.linalg.LinAlgError):
                pass
        # the time left before the run's limit; stopped by it: OutOfTime, the solve returns time_limit (docs/gop.md,
        # "Time limits on larger models")
        res = timed_lp(c, A if A.shape[0] else None, lo if A.shape[0] else None, hi if A.shape[0] else None,
                       xlb, xub, Q=Q, const=k0)
        if res.status == "infeasible":
            return PrimalResult("infeasible", path="highs")
        if res.status == "unbounded":
            raise Unbounded(
                "the GOP primal problem is unbounded below for fixed relaxed-dual variables; declare finite "
                "bounds on the primal-block variables " + ", ".join(bm.part.names[i] for i in bm.xi[:6]),
                primal=(bm, yval, xlb, xub))
        if res.status != "optimal":
            raise SolverBugError(f"HiGHS failed on the GOP primal problem: {res.message}")
        lam = -res.row_duals if A.shape[0] else np.zeros(0)
        return PrimalResult("optimal", x=np.clip(res.x, xlb, xub), value=None, lam=lam, path="highs")
    return _pdip(f, A, lo, hi, xlb, xub)


def feasibility_primal(bm, yval, xlb, xub) -> PrimalResult:
    """l1 feasibility LP; ``lam`` are the multipliers of the feasibility Lagrangian."""
    _, cons = bm.primal_expressions(yval)
    nx = bm.nx
    A, k = _linear_rows(cons, nx)
    m = A.shape[0]
    lo = bm.dual_lo - k
    hi = bm.dual_hi - k
    I = sp.identity(m, format="csr")
    Aa = sp.hstack([A, I, -I], format="csr")
    c = np.concatenate([np.zeros(nx), np.ones(2 * m)])
    lb = np.concatenate([xlb, np.zeros(2 * m)])
    ub = np.concatenate([xub, np.full(2 * m, np.inf)])
    res = timed_lp(c, Aa, lo, hi, lb, ub)
    if res.status != "optimal":
        raise SolverBugError(f"the GOP feasibility problem failed: {res.status} {res.message}")
    return PrimalResult("infeasible", x=np.clip(res.x[:nx], xlb, xub), value=float(res.objective),
                        lam=-res.row_duals, path="feasibility")


class DenseExpr:
    """A small expression in dense form for the interior-point iterations.

    ``square`` atoms are expanded into the quadratic part; the other atom rows with the same
    argument ``(a_r, b_r)`` are merged (their coefficients add), so e.g. ``-sum_i phi_ik log pi_k``
    becomes one row per ``k``. Multipliers must have been fixed (primal problem).
    """

    def __init__(self, e):
        H = e.quadratic.hessian_matrix.toarray()
        c = e.linear.copy()
        k = e.constant
        self.groups = []
        for g in e.atoms:
            if np.any(g.mult >= 0):
                raise SolverBugError("GOP primal: a multiplier of the primal block survived restriction")
            A = g.A.toarray()
            if g.kernel.quadratic:
                H += 2.0 * (A.T * g.coef) @ A
                c += 2.0 * A.T @ (g.coef * g.b)
                k += float(np.sum(g.coef * g.b ** 2))
                continue
            keep = g.coef != 0
            if g.kernel.arity == 2:
                self.groups.append((g.kind, g.coef[keep], A[keep], g.b[keep], g.A2.toarray()[keep], g.b2[keep]))
                continue
            key = np.hstack([A[keep], g.b[keep, None]])
            uniq, inv = np.unique(key, axis=0, return_inverse=True)
            coef = np.bincount(inv.ravel(), weights=g.coef[keep], minlength=uniq.shape[0])
            self.groups.append((g.kind, coef, uniq[:, :-1], uniq[:, -1], None, None))
        self.lse = []
        for g in e.lse:
            if np.any(g.mult >= 0):
                raise SolverBugError("GOP primal: a multiplier of the primal block survived restriction")
            self.lse.append((g.A.toarray(), g.b, g.seg, g.starts, g.coef))
        self.H, self.c, self.k = H, c, k

    def value(self, x):
        v = self.k + self.c @ x + 0.5 * x @ self.H @ x
        for kind, coef, A, b, A2, b2 in self.groups:
            kern = ATOMS[kind]
            u = A @ x + b
            args = (u,) if kern.arity == 1 else (u, A2 @ x + b2)
            if not np.all(kern.in_domain(args[-1])):  # outside the domain: +inf for the line search
                return np.inf
            v += float(coef @ kern.value(*args))
        for A, b, seg, starts, coef in self.lse:
            s = A @ x + b
            mx = np.maximum.reduceat(s, starts)
            v += float(coef @ (mx + np.log(np.add.reduceat(np.exp(s - mx[seg]), starts))))
        return float(v)

    def derivs(self, x, hessian=True):
        """``(gradient, Hessian)`` at ``x``; the Hessian is None when ``hessian`` is False (the
        residuals of the interior-point line search need the gradient only)."""
        g = self.c + self.H @ x
        if not hessian:
            return self._gradient(x, g), None
        H = self.H.copy()
        for kind, coef, A, b, A2, b2 in self.groups:
            kern = ATOMS[kind]
            u = A @ x + b
            if kern.arity == 1:
                _, d1, d2 = kern.derivs(u, 2)
            else:
                w = A2 @ x + b2
                du, dw = kern.grad(u, w)
                g = g + A.T @ (coef * du) + A2.T @ (coef * dw)
                huu, huw, hww = kern.hess(u, w)
                H = H + (A.T * (coef * huu)) @ A + (A2.T * (coef * hww)) @ A2 + (A.T * (coef * huw)) @ A2 \
                    + (A2.T * (coef * huw)) @ A
                continue
            g = g + A.T @ (coef * d1)
            H = H + (A.T * (coef * d2)) @ A
        for A, b, seg, starts, coef in self.lse:
            s = A @ x + b
            mx = np.maximum.reduceat(s, starts)
            e = np.exp(s - mx[seg])
            p = e / np.add.reduceat(e, starts)[seg]
            cw = coef[seg] * p
            g = g + A.T @ cw
            G = coef.size
            P = np.zeros((G, s.size))
            P[seg, np.arange(s.size)] = p
            B = P @ A
            H = H + (A.T * cw) @ A - (B.T * coef) @ B
        return g, H

    def _gradient(self, x, g):
        for kind, coef, A, b, A2, b2 in self.groups:
            kern = ATOMS[kind]
            u = A @ x + b
            if kern.arity == 1:
                g = g + A.T @ (coef * kern.derivs(u, 1)[1])
            else:
                du, dw = kern.grad(u, A2 @ x + b2)
                g = g + A.T @ (coef * du) + A2.T @ (coef * dw)
        for A, b, seg, starts, coef in self.lse:
            s = A @ x + b
            mx = np.maximum.reduceat(s, starts)
            e = np.exp(s - mx[seg])
            p = e / np.add.reduceat(e, starts)[seg]
            g = g + A.T @ (coef[seg] * p)
        return g

    def gradient(self, x):
        return self.derivs(x, hessian=False)[0]


def _box_center(xlb, xub, E, e):
    """The centre of the box (a unit inside a one-sided bound, 0 when free) moved onto ``E x = e`` by the
    least-norm correction; a candidate interior start (checked by the caller)."""
    fl, fu = np.isfinite(xlb), np.isfinite(xub)
    c = np.where(fl & fu, 0.5 * (np.where(fl, xlb, 0.0) + np.where(fu, xub, 0.0)),
                 np.where(fl, np.where(fl, xlb, 0.0) + 1.0, np.where(fu, np.where(fu, xub, 0.0) - 1.0, 0.0)))
    if E.shape[0]:
        try:
            c = c - np.linalg.lstsq(E, E @ c - e, rcond=None)[0]
        except np.linalg.LinAlgError:
            return None
    return c


def reset_warm_starts(stop=None):
    """Forget the interior start and the last solution that :func:`_pdip` reuses (called at the start of a solve);
    ``stop()`` (None: never) is the run's deadline, asked once per interior-point iteration."""
    _pdip._last_start = None
    _pdip._last_x = None
    _pdip._stop = stop


def _pdip(f, A, lo, hi, xlb, xub, tol=1e-10, max_iter=200) -> PrimalResult:
    """Primal-dual interior point for ``min f(x) s.t. lo <= A x <= hi, xlb <= x <= xub`` (f convex)."""
    f = DenseExpr(f)
    Ad = A.toarray()
    up, dn, eq, bad = row_sides(Ad, lo, hi)
    if bad:
        return PrimalResult("infeasible", path="pdip")
    G, h, E, e = inequality_form(Ad, lo, hi, up, dn, eq, xlb, xub)
    m_in, m_eq = G.shape[0], E.shape[0]
    etol = tol * max(1.0, np.abs(e).max(initial=0))
    # most primal problems of a GOP run have their minimiser strictly inside the inequalities (BGMM: the means
    # and stick-breaking weights): Newton's method on the equalities alone, from the last solution, reaches the
    # same KKT point (lambda = 0) in a few steps, and then no interior start (possibly an LP) is needed; the
    # interior-point iterations run when it does not
    newton = _try_newton(f, G, h, E, e, getattr(_pdip, "_last_x", None), tol, etol)
    if newton is None:
        try:
            x = _interior_start(G, h, E, e, xlb, xub)
        except ModelStructureError:
            # bounds ~1e-9 apart around a point that equality rows pin (bound tightening through those rows rounds
            # outwards; a convex program keeps its equalities since gop stopped eliminating them there) leave no
            # strict interior between them, while the rows already hold x inside: the iterations run without those
            # bound rows (the last ones of G: no row multiplier moves), and the answer is clipped to them below
            fixed, bup, bdn = _box_sides(xlb, xub)
            thin = ~fixed & np.isfinite(xlb) & np.isfinite(xub) & (xub - xlb <= 1e-8 * np.maximum(1.0, np.abs(xub)))
            if not (m_eq and thin.any()):
                raise
            keep = np.concatenate([np.ones(int(up.sum() + dn.sum()), dtype=bool), ~thin[bup], ~thin[bdn]])
            G, h = G[keep], h[keep]
            m_in = G.shape[0]
            x = _interior_start(G, h, E, e, xlb, xub)
        if isinstance(x, PrimalResult):
            return x
        if not np.isfinite(f.value(x)):
            raise SolverBugError("GOP primal: the objective is not finite at the interior start")
        newton = _try_newton(f, G, h, E, e, x, tol, etol)
    if newton is not None:
        x, nu, it, scale = newton
        lam = np.zeros(m_in)
    else:
        x, lam, nu, it, scale = _ipm_iterations(f, G, h, E, e, x, tol, etol, max_iter,
                                                getattr(_pdip, "_stop", None))
    # multipliers of the original rows (convention: lambda_c > 0 when the upper side binds)
    m = A.shape[0]
    lam_c = np.zeros(m)
    k = 0
    iu = np.flatnonzero(up)
    lam_c[iu] += lam[k:k + iu.size]
    k += iu.size
    idn = np.flatnonzero(dn)
    lam_c[idn] -= lam[k:k + idn.size]
    ieq = np.flatnonzero(eq)
    lam_c[ieq] += nu[:ieq.size]
    rd = f.gradient(x) + G.T @ lam + E.T @ nu
    kkt = max(_inf_norm(rd) / scale, _inf_norm(E @ x - e) if m_eq else 0.0)
    _pdip._last_x = x.copy()
    return PrimalResult("optimal", x=np.clip(x, xlb, xub), lam=lam_c, kkt=kkt,
                        path=f"newton({it} it)" if newton is not None else f"pdip({it} it)")


def row_sides(Ad, lo, hi):
    """``(up, dn, eq, bad)``: the rows ``lo <= Ad x <= hi`` whose upper / lower side is finite and the equalities
    (``|hi - lo| <= 1e-12``), without the rows with no variable; ``bad`` when one of those reads ``lo <= 0 <= hi``
    falsely (an infeasible program). Rows with no variable are left out even when they hold: their slack would be
    exactly 0 and the barrier undefined."""
    eq = np.isfinite(lo) & np.isfinite(hi) & (np.abs(hi - lo) <= 1e-12 * np.maximum(1.0, np.abs(hi)))
    up = np.isfinite(hi) & ~eq
    dn = np.isfinite(lo) & ~eq
    zero = ~np.any(Ad != 0, axis=1)
    bad = bool(np.any(zero & ((hi < -1e-9) | (lo > 1e-9))))
    return up & ~zero, dn & ~zero, eq & ~zero, bad


def _box_sides(xlb, xub):
    """``(fixed, bup, bdn)``: the variables fixed by their bounds (``xub - xlb <= 1e-12``: equalities), and the others'
    finite upper and lower bounds (the last rows of :func:`inequality_form`'s ``G``, in that order)."""
    fixed = np.isfinite(xlb) & np.isfinite(xub) & (xub - xlb <= 1e-12 * np.maximum(1.0, np.abs(xub)))
    return fixed, np.isfinite(xub) & ~fixed, np.isfinite(xlb) & ~fixed


def inequality_form(Ad, lo, hi, up, dn, eq, xlb, xub):
    """``(G, h, E, e)``: the rows ``lo <= Ad x <= hi`` (their upper sides ``up``, lower sides ``dn``, equalities
    ``eq``) and the box as ``G x <= h``, ``E x = e`` (a variable with ``xub - xlb <= 1e-12`` is an equality)."""
    nx = Ad.shape[1]
    fixed, bup, bdn = _box_sides(xlb, xub)
    I = np.eye(nx)
    G = np.vstack([Ad[up], -Ad[dn], I[bup], -I[bdn]])
    h = np.concatenate([hi[up], -lo[dn], xub[bup], -xlb[bdn]])
    E = np.vstack([Ad[eq], I[fixed]])
    e = np.concatenate([hi[eq], xub[fixed]])
    return G, h, E, e


def _interior_start(G, h, E, e, xlb, xub):
    """A strictly interior point of ``G x < h``, ``E x = e`` (the last one, the box centre, or the LP below), or an
    infeasible :class:`PrimalResult`."""
    nx = G.shape[1]   # G and E always have nx columns (possibly no rows)
    m_in, m_eq = G.shape[0], E.shape[0]

    # strictly interior start: max s s.t. G x + s <= h, E x = e, s <= 1 (reuse the last one when
    # it is still strictly interior: the constraints often do not depend on y)
    def interior(p):
        return (p is not None and p.size == nx and np.all(np.isfinite(p)) and np.all(G @ p - h < -1e-9)
                and (not m_eq or np.abs(E @ p - e).max() <= 1e-12 * max(1.0, np.abs(e).max())))

    prev = getattr(_pdip, "_last_start", None)
    center = _box_center(xlb, xub, E, e) if m_in else None
    if m_in and interior(prev):
        return prev.copy()
    if m_in and interior(center):
        # the box centre moved onto the equalities is strictly interior in most tree nodes (boxes and a
        # simplex row): no LP for the start
        return center
    if m_in:
        c = np.zeros(nx + 1)
        c[-1] = -1.0
        AA = np.vstack([np.hstack([G, np.ones((m_in, 1))]), np.hstack([E, np.zeros((m_eq, 1))])])
        rlo = np.concatenate([np.full(m_in, -np.inf), e])
        rhi = np.concatenate([h, e])
        lb = np.concatenate([np.full(nx, -np.inf), [-np.inf]])
        ub = np.concatenate([np.full(nx, np.inf), [1.0]])
        r = timed_lp(c, AA, rlo, rhi, lb, ub)
        if r.status == "infeasible":
            return PrimalResult("infeasible", path="pdip")
        if r.status != "optimal":
            raise SolverBugError(f"GOP primal: no interior start ({r.status}: {r.message})")
        # checked on the rows themselves: HiGHS meets G x + s <= h only to its tolerance, and a
        # slack of 1e-9 can sit on a row with G x - h = 0 (the barrier is undefined there)
        if r.x[-1] <= 1e-12 or not np.all(G @ r.x[:nx] - h < 0):
            # the inequalities have no strict interior; treat them by an l1 feasibility check
            if r.x[-1] < -1e-9:
                return PrimalResult("infeasible", path="pdip")
            raise ModelStructureError("the GOP primal problem has no strictly feasible point (Slater's condition, "
                                      "Saddiki, Trapp & Flaherty 2017, §2.1 condition 4, fails); write implied equalities as equalities")
        _pdip._last_start = r.x[:nx].copy()
        return r.x[:nx]
    if not m_eq:
        return np.zeros(nx)
    x = np.linalg.lstsq(E, e, rcond=None)[0]
    # no inequality, so no LP above to prove E x = e inconsistent: the least-squares residual does (x + y = 1,
    # 2x + 2y = 2.5 over free x, y ran the interior-point iterations at the residual's minimiser forever, or read
    # as 'unbounded', once gop stopped eliminating the equalities of programs without relaxed-dual variables)
    if np.abs(E @ x - e).max() > 1e-9 * max(1.0, np.abs(e).max(), np.abs(E).max() * np.abs(x).max()):
        return PrimalResult("infeasible", path="pdip")
    return x


def _ipm_iterations(f, G, h, E, e, x, tol, etol, max_iter, stop=None):
    """The primal-dual interior-point iterations (Boyd & Vandenberghe §11.7) from the strictly interior ``x``:
    ``(x, lam, nu, iterations, scale)``; they end early when ``stop()`` says so (the run's time limit). The iterate
    is then strictly inside the inequalities with ``lam > 0``: the Lagrangian built from it is a valid one (GOP's
    bound holds for any multipliers >= 0), and the search checks the point's feasibility before it is an
    incumbent."""
    nx = x.size
    m_in, m_eq = G.shape[0], E.shape[0]
    lam = np.ones(m_in)
    nu = np.zeros(m_eq)
    mu = 10.0
    alpha, beta = 0.01, 0.5

    def resid(x, lam, nu, t):
        g = f.gradient(x)
        fi = G @ x - h
        rd = g + G.T @ lam + E.T @ nu
        rc = -lam * fi - 1.0 / t
        rp = E @ x - e
        return rd, rc, rp, fi

    fval = f.value(x)
    it = 0
    scale = max(1.0, float(np.abs(f.gradient(x)).max()))
    for it in range(max_iter):
        if stop is not None and it and stop():
            # an unbounded primal problem ran all 200 iterations with ~40 line-search steps each, 2.5 s past
            # time_limit=0.05 (docs/gop.md §13m)
            break
        fi = G @ x - h
        eta = float(-fi @ lam) if m_in else 0.0
        t = mu * m_in / eta if (m_in and eta > 0) else 1e12
        rd, rc, rp, fi = resid(x, lam, nu, t)
        if (_inf_norm(rd) <= tol * scale and _inf_norm(rp) <= etol
                and eta <= tol * max(1.0, abs(fval))):
            break
        _, Hf = f.derivs(x)
        D = -lam / fi if m_in else np.zeros(0)
        Hpd = Hf + (G.T * D) @ G
        rhs1 = -rd - (G.T @ (rc / fi) if m_in else 0.0)
        K = np.block([[Hpd, E.T], [E, np.zeros((m_eq, m_eq))]]) if m_eq else Hpd
        rhs = np.concatenate([rhs1, -rp]) if m_eq else rhs1
        try:
            sol = np.linalg.solve(K + 1e-14 * np.eye(K.shape[0]), rhs)
        except np.linalg.LinAlgError:
            sol = np.linalg.lstsq(K, rhs, rcond=None)[0]
        dx = sol[:nx]
        dnu = sol[nx:] if m_eq else np.zeros(0)
        dlam = (rc - lam * (G @ dx)) / fi if m_in else np.zeros(0)
        neg = dlam < 0
        s = min(1.0, 0.99 * float(np.min(-lam[neg] / dlam[neg]))) if neg.any() else 1.0
        r0 = np.sqrt(np.sum(rd ** 2) + np.sum(rc ** 2) + np.sum(rp ** 2))
        while True:
            xn = x + s * dx
            if m_in and np.any(G @ xn - h >= 0):
                s *= beta
            elif not np.isfinite(f.value(xn)):
                s *= beta
            else:
                lamn, nun = lam + s * dlam, nu + s * dnu
                a, b, cc, _ = resid(xn, lamn, nun, t)
                if np.sqrt(np.sum(a ** 2) + np.sum(b ** 2) + np.sum(cc ** 2)) <= (1 - alpha * s) * r0 or s < 1e-12:
                    break
                s *= beta
            if s < 1e-14:
                break
        xn = x + s * dx
        fn = f.value(xn)
        if (m_in and np.any(G @ xn - h >= 0)) or not np.isfinite(fn):
            # the line search found no step that keeps the iterate strictly inside (a row's slack of 0 at
            # rounding level, min sum_largest(u, 2) + ||x||^2): stepping would put 0 in the barrier's
            # denominators (NaN); the current iterate is the best point this method reaches
            break
        x, lam, nu, fval = xn, lam + s * dlam, nu + s * dnu, fn
    return x, lam, nu, it, scale


def _try_newton(f, G, h, E, e, x0, tol, etol):
    """:func:`_interior_newton` from ``x0`` when it is usable (strictly inside the inequalities, on the equalities
    to 1e-6): ``(x, nu, iterations, scale)`` or None."""
    if x0 is None or x0.size != G.shape[1]:
        return None
    if G.shape[0] and not np.all(G @ x0 - h < 0):
        return None
    if E.shape[0] and _inf_norm(E @ x0 - e) > 1e-6 * max(1.0, np.abs(e).max(initial=0)):
        return None           # Newton's step restores E x = e exactly, but its line search assumes it nearly holds
    if not np.isfinite(f.value(x0)):
        return None
    scale = max(1.0, float(np.abs(f.gradient(x0)).max()))
    out = _interior_newton(f, G, h, E, e, x0, tol * scale, etol)
    return None if out is None else (*out, scale)


def _interior_newton(f, G, h, E, e, x, gtol, etol, max_iter=30):
    """Newton's method for ``min f(x) s.t. E x = e`` from ``x`` (``E x = e``, ``G x < h``), every iterate kept
    strictly inside ``G x < h`` and the domain of ``f``; ``(x, nu, iterations)`` at a point with
    ``|grad f + E^T nu| <= gtol``, ``|E x - e| <= etol`` and ``G x < h``, else None. Such a point is the minimiser of
    the convex ``f`` under the inequalities too (KKT with zero inequality multipliers)."""
    m_eq = E.shape[0]
    fx = f.value(x)
    for it in range(max_iter):
        g, H = f.derivs(x)
        if m_eq:
            K = np.block([[H, E.T], [E, np.zeros((m_eq, m_eq))]])
            rhs = np.concatenate([-g, e - E @ x])
        else:
            K, rhs = H, -g
        try:
            sol = np.linalg.solve(K, rhs)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(sol)):
            return None
        dx, nu = sol[:x.size], sol[x.size:]
        if _inf_norm(g + E.T @ nu) <= gtol and _inf_norm(E @ x - e) <= etol:
            return x, nu, it
        slope = float(g @ dx)
        # at the rounding level of f (the last steps before the residual test passes) the slope's sign is noise:
        # the full step is taken there; a clearly ascending direction (H not positive definite) goes to the IPM
        flat = abs(slope) <= 1e-13 * max(1.0, abs(fx))
        if slope >= 0 and not flat:
            return None
        s = 1.0
        while True:
            xn = x + s * dx
            if not (G.shape[0] and np.any(G @ xn - h >= 0)):
                fn = f.value(xn)
                if np.isfinite(fn) and (flat or fn <= fx + 1e-4 * s * slope + 1e-15 * abs(fx)):
                    break
            s *= 0.5
            if s < 1e-10:
                return None
        x, fx = xn, fn
    return None
