r"""Convex programs solved directly: one interior-point solve with a Lagrangian-duality certificate, no tree.

A CVXPY or Pyomo model that is convex (``norm(A x - b) <= t``, ``pnorm(y, 1.5) <= 1``, ``min pnorm(X, 3)``)
reaches gop in a lifted form: norms and p-norms are auxiliary columns with *equality* defining rows
(:mod:`varopt.program.lifting`: ``e(x) - s^2 == 0``, ``q - sum_i a_i^p == 0``) and an outer ``q^(1/p)``, which
are not convex rows, so ``mode='auto'`` sent them to the spatial tree (boxes, hundreds of nodes, and no root
bound when a variable is free). :func:`convex_form` recognises when the lifted program is a convex program in
disguise and writes that program:

* **relaxed definitions** (the epigraph of a disciplined convex program; Grant & Boyd 2008): a ``sqrt`` column
  ``s = sqrt(e(x))`` with ``e`` a sum of squares of affine functions becomes ``s >= sqrt(e(x))``, written as the
  second-order-cone row ``||F x + f|| - s <= 0`` (:class:`Cone`; ``e = ||F x + f||^2`` from the
  eigen-decomposition of ``e``'s quadratic form) or, for one square ``e = c u^2``, as the two linear rows
  ``s >= +-sqrt(c) u``; a ``product`` column ``q = Q(x)`` with ``Q`` convex becomes ``Q(x) - q <= 0``. The
  relaxation is exact when every other occurrence of the column is nondecreasing in it on the side that binds
  (objective, ``<=`` rows; checked term by term with the atoms' monotonicity): lowering the column to its
  definition then keeps every row and does not raise the objective, so the optimal values agree and the
  column's value is recomputed from its definition afterwards (:meth:`Program.complete_aux`);
* **monotone outer atoms**: a row ``lo <= c_0 + c g(a^T x + b) <= hi`` whose only term is one atom with ``g``
  strictly monotone on its domain is the interval row ``u_lo <= a^T x + b <= u_hi`` (``q^(2/3) <= 1`` is
  ``q <= 1``); an objective ``c_0 + c g(u)`` of that form is minimised through ``u`` (``min q^(1/3)`` as
  ``min q``), its bound mapped back through the monotone ``phi(u) = c_0 + c g(u)``;
* every remaining nonlinear row must be convex on its bounded side (atoms with ``c >= 0``, no multiplier, a PSD
  quadratic part, log-sum-exp with ``c >= 0``) and every equality linear; anything else returns the reason and
  the caller keeps the tree.

:func:`solve_convex` then runs the primal-dual interior-point method of the GOP primal problem
(:func:`.primal._ipm_iterations`, Boyd & Vandenberghe 2004, §11.7) with the nonlinear rows, from a strictly
feasible point (the phase-I problem ``min sigma s.t. r_i(x) <= sigma``, §11.4.1, when the linear interior point
violates a nonlinear row). Certificate (weak Lagrangian duality, §5.2): at the final ``(x, lambda, nu)`` with
``grad_x L = 0`` (to the KKT tolerance),

.. math::  d(\lambda, \nu) = L(x, \lambda, \nu) = f(x) + \sum_i \lambda_i r_i(x) + \nu^T (E x - e) \le f^\star,

the lower bound reported; the upper bound is the objective at the point with the auxiliary columns at their
definitions, after checking every row of the program there. A phase-I bound above 0 proves the program
infeasible. When the iterations do not reach the tolerances (an unbounded objective, no Slater point, a
numerical failure) the caller falls back to the tree, which reports unboundedness with a ray.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ...program.atoms import ATOMS
from ...program.expression import Expression
from ...program.terms import AtomGroup
from .convexity import block_psd, constant_hessian
from .primal import DenseExpr, _interior_start, _inf_norm, _ipm_iterations, inequality_form


@dataclass
class ConvexForm:
    """A lifted program as the convex program it is: ``min f(x)`` s.t. linear rows ``lo <= a^T x + k <= hi``,
    convex rows ``r(x) <= hi``, the program's box; ``outer`` maps a value of ``f`` to the user's objective
    (monotone nondecreasing; None when ``f`` is the program's objective)."""

    objective: Expression
    linear: list            # (Expression, lo, hi)
    rows: list              # (Expression, hi): body <= hi, body convex
    lb: np.ndarray
    ub: np.ndarray
    outer: object = None    # (kernel, c, c0, sigma): user objective = c0 + c g(sigma * value)
    notes: list = field(default_factory=list)


def _sign(v, tol=0.0):
    return 0 if abs(v) <= tol else (1 if v > 0 else -1)


def convex_expression(e: Expression) -> str | None:
    """None when ``e`` is a smooth convex function by its terms (atoms with ``c >= 0`` and no multiplier,
    log-sum-exp with ``c >= 0``, a PSD constant Hessian), else the first reason it is not."""
    for g in e.atoms:
        k = g.kernel
        if np.any(g.mult >= 0):
            return "a product of a variable with an atom"
        if np.any(g.coef < 0):
            return f"a {g.kind} atom with a negative coefficient (concave)"
        if not k.smooth:
            return f"the nonsmooth atom {g.kind}"
    for g in e.lse:
        if np.any(g.mult >= 0) or np.any(g.coef < 0):
            return "a log-sum-exp with a negative coefficient or a multiplier"
    if len(e.quadratic) or any(g.kernel.quadratic for g in e.atoms):
        sup = e.support()
        if not block_psd(constant_hessian(e), sup):
            return "an indefinite or concave quadratic"
    return None


def _direction(e: Expression, j: int):
    """+1 when ``e`` is nondecreasing in column ``j`` everywhere on the atoms' domains, -1 nonincreasing, 0 when
    ``e`` does not depend on it, None when neither can be told from the terms."""
    signs = set()
    lin = e.linear_items()
    hit = np.flatnonzero(lin[0] == j)
    if hit.size:
        signs.add(_sign(lin[1][hit[0]]))
    q = e.quadratic
    if len(q) and np.any((q.i == j) | (q.j == j)):
        return None
    for g in e.atoms:
        col = np.asarray(g.A[:, j].todense()).ravel()
        if np.any(g.mult == j):
            return None
        if g.kernel.arity == 2:
            col2 = np.asarray(g.A2[:, j].todense()).ravel()
            if np.any(col != 0) or g.kind != "quad_over_lin":
                if np.any(col != 0) or np.any(col2 != 0):
                    return None
            # u^2 / v is nonincreasing in v > 0
            signs.update(_sign(v) for v in -g.coef[col2 != 0] * col2[col2 != 0])
            continue
        rows = np.flatnonzero(col != 0)
        if rows.size:
            m = g.kernel.monotone
            if m == 0:
                return None
            signs.update(_sign(v) for v in g.coef[rows] * m * col[rows])
    for g in e.lse:
        col = np.asarray(g.A[:, j].todense()).ravel()
        if np.any(g.mult == j):
            return None
        rows = np.flatnonzero(col != 0)
        if rows.size:
            signs.update(_sign(v) for v in g.coef[g.seg[rows]] * col[rows])
    signs.discard(0)
    if len(signs) > 1:
        return None
    return signs.pop() if signs else 0


def _single_atom(e: Expression):
    """``(kernel, c, a (dense), b, c0)`` when ``e = c0 + c g(a^T x + b)`` is one strictly monotone one-argument atom
    and nothing else, else None."""
    if len(e.quadratic) or e.lse or len(e.atoms) != 1 or len(e.atoms[0]) != 1 or e.linear_items()[0].size:
        return None
    g = e.atoms[0]
    k = g.kernel
    if k.arity != 1 or k.monotone == 0 or g.mult[0] >= 0 or g.coef[0] == 0:
        return None
    return k, float(g.coef[0]), np.asarray(g.A[0].todense()).ravel(), float(g.b[0]), float(e.constant)


def _inverse(k, target):
    """The ``u`` of the domain with ``g(u) = target`` for the strictly monotone kernel ``k`` (bisection to adjacent
    floats), ``-inf`` / ``+inf`` when ``target`` is below / above every value on the domain (for a nondecreasing
    ``g``; mirrored for a nonincreasing one), as ``(u, where)`` with ``where`` in ``'in'``, ``'below'``,
    ``'above'`` (``target`` below or above the range of ``g``)."""
    lo_d, hi_d, closed = k.domain
    inc = k.monotone > 0
    start = lo_d if (np.isfinite(lo_d) and closed) else (np.nextafter(lo_d, np.inf) if np.isfinite(lo_d) else None)

    def val(u):
        with np.errstate(all="ignore"):
            return float(k.value(np.array([u]))[0])
    # bracket [a, b] with g(a) and g(b) on the two sides of target
    if start is not None:
        a = start
        ga = val(a)
        if not np.isfinite(ga):   # -log(0): the domain's open end, g unbounded there
            a = max(1e-300, a)
            ga = val(a)
        if (inc and ga > target) or (not inc and ga < target):
            return None, ("below" if inc else "above")
    else:
        a = -1.0
        while (val(a) > target if inc else val(a) < target):
            a *= 2.0
            if a < -1e300:
                return None, ("below" if inc else "above")
    b = max(1.0, abs(a) * 2.0)
    while (val(b) <= target if inc else val(b) >= target):
        b *= 2.0
        if b > 1e300:
            return None, ("above" if inc else "below")
    for _ in range(2200):
        m = 0.5 * (a + b)
        if m <= a or m >= b:
            break
        if (val(m) <= target) if inc else (val(m) >= target):
            a = m
        else:
            b = m
    return (a, b), "in"


def _preimage(k, c, c0, lo, hi):
    """The interval ``[u_lo, u_hi]`` of domain points with ``lo <= c0 + c g(u) <= hi`` (inner by one bisection step,
    so its points satisfy the row), None when it is empty."""
    # c0 + c g(u) in [lo, hi]  <=>  g(u) in [tl, th]
    tl, th = ((lo - c0) / c, (hi - c0) / c) if c > 0 else ((hi - c0) / c, (lo - c0) / c)
    inc = k.monotone > 0
    ulo, uhi = -math.inf, math.inf
    for target, upper_side in ((th, True), (tl, False)):
        if not np.isfinite(target):
            continue
        r, where = _inverse(k, target)
        if where != "in":
            # target outside the range of g: the side holds everywhere or nowhere
            if not ((where == "above") if upper_side else (where == "below")):
                return None
            continue
        # the bisection keeps g(a) <= target < g(b) (nondecreasing g) or g(a) >= target > g(b): the inner end of
        # each side's half-line is the one that satisfies it
        a, b = r
        if upper_side:          # g(u) <= th
            if inc:
                uhi = min(uhi, a)
            else:
                ulo = max(ulo, b)
        else:                   # g(u) >= tl
            if inc:
                ulo = max(ulo, b)
            else:
                uhi = min(uhi, a)
    if ulo > uhi:
        return None
    return ulo, uhi


def _soc_rows(s, e: Expression, n):
    """Rows of ``s >= sqrt(e(x))`` (``e`` a sum of squares of affine functions plus a constant >= 0): two linear rows
    for one square, else the :class:`Cone` ``||F x + f|| <= s`` with ``e = ||F x + f||^2`` (the eigen-decomposition of
    ``e``'s quadratic form); ``(linear, rows)`` or a reason string."""
    if e.lse or any(g.kind != "square" or np.any(g.mult >= 0) or np.any(g.coef < 0) for g in e.atoms):
        return "its argument is not a sum of squares of affine functions"
    lin_idx, lin_val = e.linear_items()
    if (len(e.atoms) == 1 and len(e.atoms[0]) == 1 and not len(e.quadratic) and not lin_idx.size
            and e.constant == 0.0):
        g = e.atoms[0]
        r = np.sqrt(g.coef[0])
        a = np.asarray(g.A[0].todense()).ravel() * r
        b = g.b[0] * r
        rows = []
        for sgn in (1.0, -1.0):   # s - sgn (a x + b) >= 0
            lin = -sgn * a
            lin[s] += 1.0
            rows.append((Expression(n, -sgn * b, lin), 0.0, math.inf))
        return rows, []
    sup = e.support()
    if s in set(sup.tolist()):
        return "the norm's argument holds the norm's own column"
    p = sup.size
    pos = {int(v): k for k, v in enumerate(sup)}
    M = np.zeros((p + 1, p + 1))
    for g in e.atoms:
        A = g.A[:, sup].toarray()
        Ab = np.hstack([A, g.b[:, None]])
        M += (Ab.T * g.coef) @ Ab
    q = e.quadratic
    for i, j, v in zip(q.i, q.j, q.v):
        a, b = pos[int(i)], pos[int(j)]
        if a == b:
            M[a, a] += v
        else:
            M[a, b] += 0.5 * v
            M[b, a] += 0.5 * v
    for i, v in zip(lin_idx, lin_val):
        M[pos[int(i)], p] += 0.5 * v
        M[p, pos[int(i)]] += 0.5 * v
    M[p, p] += e.constant
    w, V = np.linalg.eigh(M)
    scale = max(1.0, float(np.abs(w).max(initial=0.0)))
    if w.min(initial=0.0) < -1e-10 * scale:
        return "its argument is not a sum of squares (its quadratic form is indefinite)"
    keep = w > 1e-14 * scale
    if not keep.any():
        return "its argument is identically 0"
    F = (V[:, keep] * np.sqrt(w[keep])).T          # e = || F [x_sup; 1] ||^2
    Fn = np.zeros((F.shape[0], n))
    Fn[:, sup] = F[:, :p]
    return [], [Cone(Fn, F[:, p], s)]


class Cone:
    """The second-order-cone row ``||F x + f||_2 <= x_s`` in the row interface of :func:`.primal._ipm_iterations`,
    as the smooth convex ``r(x) = ||u||^2 / x_s - x_s <= 0`` (``u = F x + f``, domain ``x_s > 0``; the
    ``quad_over_lin`` form, Boyd & Vandenberghe 2004, §3.1.5). Its gradient ``(2 F^T u / s, -(|u| / s)^2 - 1)`` has no
    limit at the apex ``u = 0, s = 0`` (a zero group of a group lasso), where the interior-point method stalls;
    :func:`_solve_form` then solves with the apex fixed and checks the cone's dual condition (:func:`_apex`)."""

    def __init__(self, F, f, s):
        self.F, self.f, self.s = F, f, s

    def value(self, x):
        v = x[self.s]
        if not v > 0:
            return math.inf
        u = self.F @ x + self.f
        return float(u @ u) / v - v

    def gradient(self, x):
        v = x[self.s]
        u = self.F @ x + self.f
        g = self.F.T @ (2.0 * u / v)
        g[self.s] -= float(u @ u) / v ** 2 + 1.0
        return g

    def derivs(self, x, hessian=True):
        g = self.gradient(x)
        if not hessian:
            return g, None
        v = x[self.s]
        u = self.F @ x + self.f
        Fu = self.F.T @ u
        H = 2.0 / v * (self.F.T @ self.F)
        H[:, self.s] -= 2.0 / v ** 2 * Fu
        H[self.s, :] -= 2.0 / v ** 2 * Fu
        H[self.s, self.s] += 2.0 * float(u @ u) / v ** 3
        return g, H

    def depends_on(self, j) -> bool:
        return bool(np.any(self.F[:, j] != 0))


#: tag of an atom's domain row (:func:`convex_form`)
DOMAIN = -1


def convex_form(program, aux=None):
    """``(ConvexForm, None)`` when ``program`` is a convex program in the sense of the module docstring, else
    ``(None, reason)``. ``aux``: the auxiliary columns when ``program`` no longer lists them (the abs epigraph's
    program appends columns after them and drops the list; their indices and defining rows are unchanged)."""
    n = program.n
    if program.binary is not None and np.any(program.binary):
        return None, "binary variables"
    defs = {a.constraint: a for a in (program.aux or aux or []) if a.kind in ("sqrt", "product", "ratio")}
    names = {c.name for c in program.constraints}
    if any(nm not in names or defs[nm].index >= n for nm in defs):
        return None, "an auxiliary column without its defining row"
    lb, ub = program.lb.copy(), program.ub.copy()
    linear, rows, tags = [], [], []     # tags[k]: the relaxed column whose definition row k is (None: a user row)
    relaxed, notes = [], []

    def add_lin(expr, lo, hi, tag=None):
        linear.append((expr, lo, hi))
        tags.append(("lin", len(linear) - 1, tag))

    def add_row(expr, hi, tag=None):
        rows.append((expr, hi))
        tags.append(("row", len(rows) - 1, tag))

    # the objective first: most nonconvex programs (bilinear, concave) fail here, before any row is examined
    obj, outer = program.objective, None
    why = convex_expression(obj)
    if why is not None:
        one = _single_atom(obj)
        if one is None:
            return None, f"the objective: {why}"
        k, cc, av, bv, c0 = one
        sigma = 1.0 if cc * k.monotone > 0 else -1.0
        obj = Expression(n, sigma * bv, sigma * av)
        outer = (k, cc, c0, sigma)
        notes.append(f"objective {c0:g} + {cc:g} {k.kind}(u) minimised through u (monotone)")
    for c in program.constraints:
        a = defs.get(c.name)
        if a is not None:
            if a.kind == "ratio":
                return None, f"the ratio column of {a.term} (a division by a variable)"
            if a.kind == "sqrt":
                out = _soc_rows(a.index, a.definition, n)
                if isinstance(out, str):
                    return None, f"{a.term}: {out}"
                for expr, lo, hi in out[0]:
                    add_lin(expr, lo, hi, a.index)
                for cone in out[1]:
                    rows.append(cone)
                    tags.append(("row", len(rows) - 1, a.index))
            else:
                why = convex_expression(a.definition)
                if why is not None:
                    return None, f"{a.term}: {why}"
                body = a.definition.copy()
                lin = body.linear.copy()
                lin[a.index] -= 1.0
                body.linear = lin
                add_row(body, 0.0, a.index)
            relaxed.append(a.index)
            continue
        body = c.body
        if body.is_linear:
            add_lin(body, c.lo, c.hi)
            continue
        one = _single_atom(body)
        if one is not None:
            k, cc, av, bv, c0 = one
            iv = _preimage(k, cc, c0, c.lo, c.hi)
            if iv is None:
                return None, f"constraint {c.name} has no point in the domain of its atom"
            if np.isfinite(iv[0]) or np.isfinite(iv[1]):
                add_lin(Expression(n, bv, av), iv[0], iv[1])
            if np.isfinite(k.domain[0]) and not iv[0] >= k.domain[0]:
                # the atom's domain, part of the row; not a side that binds a relaxed column (the point is checked
                # on the program's own rows at the end)
                add_lin(Expression(n, bv, av), k.domain[0], math.inf, DOMAIN)
            notes.append(f"{c.name}: monotone {k.kind} row as a bound on its argument")
            continue
        if c.lo == c.hi or (np.isfinite(c.lo) and np.isfinite(c.hi)):
            return None, f"constraint {c.name}: a nonlinear equality or range row"
        expr, hi = (body, c.hi) if np.isfinite(c.hi) else (body.scaled(-1.0), -c.lo)
        why = convex_expression(expr)
        if why is not None:
            return None, f"constraint {c.name}: {why}"
        add_row(expr, hi)
    # the relaxations are exact when each relaxed column only pushes the binding side up (module docstring)
    for j in relaxed:
        d = _direction(obj, j)
        if d is None or d < 0:
            return None, f"{program.names[j]} enters the objective not nondecreasingly"
        for kind, k, tag in tags:
            if tag == j or tag == DOMAIN:
                continue
            if kind == "row" and isinstance(rows[k], Cone):
                if rows[k].depends_on(j):
                    return None, f"{program.names[j]} enters a norm's argument"
            elif kind == "row":
                d = _direction(rows[k][0], j)
                if d is None or d < 0:
                    return None, f"{program.names[j]} enters a convex row not nondecreasingly"
            else:
                expr, lo, hi = linear[k]
                idx, val = expr.linear_items()
                hit = np.flatnonzero(idx == j)
                if not hit.size:
                    continue
                v = val[hit[0]]
                if (np.isfinite(lo) and np.isfinite(hi)) or (v > 0 and np.isfinite(lo)) or (v < 0 and np.isfinite(hi)):
                    return None, f"{program.names[j]} enters a linear row on the side that would bind it from below"
    if relaxed:
        notes.append("definitions relaxed to convex rows: " + ", ".join(program.names[j] for j in relaxed[:6])
                     + (", ..." if len(relaxed) > 6 else ""))
    return ConvexForm(obj, linear, rows, lb, ub, outer, notes), None


class _Shifted:
    """``r(x) - sigma`` over ``(x, sigma)``: a row of the phase-I problem (Boyd & Vandenberghe 2004, §11.4.1)."""

    def __init__(self, r):
        self.r = r

    def value(self, z):
        return self.r.value(z[:-1]) - z[-1]

    def gradient(self, z):
        return np.append(self.r.gradient(z[:-1]), -1.0)

    def derivs(self, z, hessian=True):
        g, H = self.r.derivs(z[:-1], hessian)
        g = np.append(g, -1.0)
        if H is None:
            return g, None
        Hz = np.zeros((z.size, z.size))
        Hz[:-1, :-1] = H
        return g, Hz


class _Row:
    """``body(x) - hi`` of a convex row, through :class:`.primal.DenseExpr`."""

    def __init__(self, body, hi):
        self.f = DenseExpr(body)
        self.hi = hi

    def value(self, x):
        v = self.f.value(x)
        return v - self.hi if np.isfinite(v) else math.inf

    def gradient(self, x):
        return self.f.gradient(x)

    def derivs(self, x, hessian=True):
        return self.f.derivs(x, hessian)


class _Linear:
    """A linear objective ``c^T z`` in :class:`.primal.DenseExpr`'s interface."""

    def __init__(self, c):
        self.c = c
        self.H = np.zeros((c.size, c.size))

    def value(self, z):
        return float(self.c @ z)

    def gradient(self, z):
        return self.c

    def derivs(self, z, hessian=True):
        return self.c, (self.H if hessian else None)


def _lagrangian_bound(f, G, h, E, e, rows, x, lam, nu):
    """``(L(x, lam, nu), |grad_x L|_inf, eta)``: the dual function's value at ``(lam, nu)`` when ``x`` minimises
    the Lagrangian (``grad_x L = 0``), the gradient's residual and the surrogate gap ``-lam^T F(x)``."""
    F = np.concatenate([G @ x - h, [r.value(x) for r in rows]])
    J = np.vstack([G] + [r.gradient(x)[None, :] for r in rows]) if rows else G
    rd = f.gradient(x) + J.T @ lam + E.T @ nu
    L = f.value(x) + float(lam @ F) + (float(nu @ (E @ x - e)) if E.shape[0] else 0.0)
    return L, _inf_norm(rd), float(-lam @ F)


TOL = 1e-10

def _solve_form(form, n):
    """The interior-point solve of ``form`` over ``n`` columns: a dict with ``status`` ``'optimal'`` (``x``, the
    Lagrangian bound ``L``), ``'infeasible'`` (``reason``), or ``'stalled'`` (``reason``; ``x0`` the strictly
    feasible start when there was one); ``info`` holds the iteration counts."""
    lin = form.linear
    if lin:
        Ad = np.vstack([e.linear for e, _, _ in lin])
        k = np.array([e.constant for e, _, _ in lin])
        lo = np.array([l for _, l, _ in lin]) - k
        hi = np.array([u for _, _, u in lin]) - k
    else:
        Ad, lo, hi = np.zeros((0, n)), np.zeros(0), np.zeros(0)
    info = {"mode": "convex", "nodes": 0}
    eq = np.isfinite(lo) & np.isfinite(hi) & (np.abs(hi - lo) <= 1e-12 * np.maximum(1.0, np.abs(hi)))
    up = np.isfinite(hi) & ~eq
    dn = np.isfinite(lo) & ~eq
    zero = ~np.any(Ad != 0, axis=1)
    if np.any(zero & ((hi < -1e-9) | (lo > 1e-9))):
        return dict(status="infeasible", reason="a constant row is violated", info=info)
    up, dn, eq = up & ~zero, dn & ~zero, eq & ~zero
    if np.any(form.lb > form.ub):
        return dict(status="infeasible", reason="a lower bound above its upper bound", info=info)
    G, h, E, e = inequality_form(Ad, lo, hi, up, dn, eq, form.lb, form.ub)
    etol = TOL * max(1.0, np.abs(e).max(initial=0))
    f = DenseExpr(form.objective)
    rows = [r if isinstance(r, Cone) else _Row(*r) for r in form.rows]
    x = _interior_start(G, h, E, e, form.lb, form.ub)
    if not isinstance(x, np.ndarray):
        if getattr(x, "status", None) == "infeasible":
            return dict(status="infeasible", reason="the linear rows and bounds are infeasible", info=info)
        return dict(status="stalled", reason="no interior point of the linear rows", info=info)
    r0 = np.array([r.value(x) for r in rows])
    if rows and not np.all(r0 < 0):
        if not np.all(np.isfinite(r0)):
            return dict(status="stalled", reason="the linear interior point is outside a nonlinear row's domain",
                        info=info)
        # phase I: min sigma s.t. r_i(x) <= sigma, the linear rows, sigma >= -1 (Boyd & Vandenberghe §11.4.1)
        z = np.append(x, float(r0.max()) + 1.0)
        Gz = np.vstack([np.hstack([G, np.zeros((G.shape[0], 1))]), np.append(np.zeros(x.size), -1.0)[None, :]])
        hz = np.append(h, 1.0)
        Ez = np.hstack([E, np.zeros((E.shape[0], 1))])
        c1 = np.zeros(z.size)
        c1[-1] = 1.0
        f1, rows1 = _Linear(c1), [_Shifted(r) for r in rows]
        z, lam1, nu1, it1, _ = _ipm_iterations(f1, Gz, hz, Ez, e, z, TOL, etol, 200, rows1)
        info["phase1_iterations"] = it1 + 1
        x = z[:-1]
        if not np.all([r.value(x) < 0 for r in rows]) or (G.shape[0] and not np.all(G @ x - h < 0)):
            L1, res1, _ = _lagrangian_bound(f1, Gz, hz, Ez, e, rows1, z, lam1, nu1)
            if res1 <= 1e-9 and L1 > 1e-8:
                return dict(status="infeasible", info=info,
                            reason=f"phase I: some row exceeds its side by at least {L1:.3g} at every point "
                                   "(Lagrangian bound of the phase-I problem)")
            return dict(status="stalled", info=info,
                        reason="phase I found no strictly feasible point of the nonlinear rows (no Slater point?)")
    if not np.isfinite(f.value(x)):
        return dict(status="stalled", reason="the objective is not finite at the interior start", info=info)
    x0 = x.copy()
    x, lam, nu, it, scale = _ipm_iterations(f, G, h, E, e, x, TOL, etol, 300, rows)
    info["ipm_iterations"] = it + 1
    L, res, eta = _lagrangian_bound(f, G, h, E, e, rows, x, lam, nu)
    fx = f.value(x)
    info["dual_residual"] = res
    if not (res <= 1e-8 * scale and _inf_norm(E @ x - e) <= 1e3 * etol and eta <= 1e-8 * max(1.0, abs(fx))
            and np.isfinite(L)):
        apex = [k for k, r in enumerate(form.rows) if isinstance(r, Cone)
                and x[r.s] <= 1e-5 * max(1.0, _inf_norm(x))] if eta <= 1e-6 * max(1.0, abs(fx)) else []
        if apex:
            out = _apex(form, n, apex)
            if out is not None:
                out["info"] = {**info, **out["info"], "apex_cones": len(apex)}
                out["x0"] = x0
                return out
        return dict(status="stalled", x0=x0, info=info,
                    reason=f"the interior-point method stopped short of its tolerances (dual residual {res:.2g}, "
                           f"gap {eta:.2g}, |x| {_inf_norm(x):.2g})")
    return dict(status="optimal", x=x, L=L, x0=x0, info=info, nu=nu, eq=eq, fixed=_fixed(form.lb, form.ub))


def _fixed(lb, ub):
    """The variables :func:`.primal.inequality_form` turns into equalities (``ub - lb <= 1e-12 max(1, |ub|)``)."""
    return np.isfinite(lb) & np.isfinite(ub) & (ub - lb <= 1e-12 * np.maximum(1.0, np.abs(ub)))


def _apex(form, n, apex):
    """The solve with the cones ``apex`` at their apex (``F x + f = 0``, ``x_s = 0`` as equalities), accepted when
    each cone's equality multipliers ``(nu_u, nu_s)`` satisfy the dual-cone condition ``||nu_u|| <= -nu_s``: then
    ``nu_u^T u + nu_s s <= 0`` for every ``(u, s)`` with ``||u|| <= s``, so the restricted problem's Lagrangian is a
    lower bound of the original program too (weak duality for the second-order cone, Boyd & Vandenberghe 2004,
    §5.9), and the restricted optimum is feasible for it. None otherwise."""
    cones = [form.rows[k] for k in apex]
    rows = [r for k, r in enumerate(form.rows) if k not in set(apex)]
    linear = list(form.linear)
    first = len(linear)
    for c in cones:
        for i in range(c.F.shape[0]):
            linear.append((Expression(n, float(c.f[i]), c.F[i]), 0.0, 0.0))
    lb, ub = form.lb.copy(), form.ub.copy()
    for c in cones:
        lb[c.s] = ub[c.s] = 0.0
    out = _solve_form(ConvexForm(form.objective, linear, rows, lb, ub, form.outer), n)
    if out["status"] != "optimal":
        return None
    nu, eq, fixed = out["nu"], out["eq"], out["fixed"]
    pos = np.full(len(linear), -1)
    pos[np.flatnonzero(eq)] = np.arange(int(eq.sum()))
    fpos = np.full(n, -1)
    fpos[np.flatnonzero(fixed)] = int(eq.sum()) + np.arange(int(fixed.sum()))
    k = first
    for c in cones:
        m = c.F.shape[0]
        idx = pos[k:k + m]
        k += m
        if np.any(idx < 0) or fpos[c.s] < 0:
            return None
        nu_u, nu_s = nu[idx], nu[fpos[c.s]]
        if not float(np.linalg.norm(nu_u)) <= -nu_s + 1e-9 * max(1.0, abs(nu_s)):
            return None
    return out


def _recession_ray(form, n):
    """A direction ``d`` with ``c^T d < 0`` in the recession cone of ``form``'s feasible set, or None; only for a
    linear objective ``c^T x`` and linear and second-order-cone rows (``||F x + f|| <= x_s``), whose recession
    cones are exact: ``a^T d <= 0`` for a finite upper side (``>= 0`` lower, ``= 0`` both), ``d_j >= 0`` for a
    finite lower bound (``<= 0`` upper) and ``||F d|| <= d_s``.
    Then ``||F (z + t d) + f|| <= ||F z + f|| + t ||F d|| <= z_s + t d_s`` for a feasible ``z`` and every
    ``t >= 0`` (the triangle inequality), so ``z + t d`` is feasible and ``c^T (z + t d) -> -inf``. ``d``
    minimises ``c^T d`` over the cone cut by ``-1 <= d <= 1`` (the same interior-point method)."""
    if not form.objective.is_linear:
        return None
    rows = []
    for r in form.rows:
        if not isinstance(r, Cone):
            return None
        rows.append(Cone(r.F, np.zeros_like(r.f), r.s))
    linear = [(Expression(n, 0.0, e.linear), 0.0 if np.isfinite(lo) else -math.inf,
               0.0 if np.isfinite(hi) else math.inf) for e, lo, hi in form.linear]
    lb = np.where(np.isfinite(form.lb), 0.0, -1.0)
    ub = np.where(np.isfinite(form.ub), 0.0, 1.0)
    c = form.objective.linear
    cone = ConvexForm(Expression(n, 0.0, c), linear, rows, lb, ub)
    out = _solve_form(cone, n)
    if out["status"] != "optimal":
        return None
    d = out["x"]
    if not c @ d < -1e-7 * max(1.0, _inf_norm(c)):
        return None
    # the cone's rows checked exactly at d (the interior point keeps them strict; clear rounding-level entries)
    for e, lo, hi in linear:
        v = e.linear @ d
        if (hi == 0.0 and v > 0) or (lo == 0.0 and v < 0):
            return None
    if np.any(d < lb) or np.any(d > ub):
        return None
    for r in rows:
        if r.value(d) > 0:
            return None
    return d


def solve_convex(program, form: ConvexForm, opts, run, complete=None):
    """Solve ``form`` (:func:`convex_form` of ``program``); ``complete`` maps a point to the one with the auxiliary
    columns at their definitions (:func:`.solver._completion`). ``(status, x, lower, upper, info)`` with status
    ``'optimal'``, ``'infeasible'`` or ``'unbounded'`` (a feasible point and a ray of :func:`_recession_ray` in
    ``info``), or ``(None, reason)`` when the interior-point method did not reach its tolerances otherwise (the
    caller falls back to the tree)."""
    n = program.n
    out = _solve_form(form, n)
    info = out["info"]
    if out["status"] == "infeasible":
        info["reason"] = out["reason"]
        return "infeasible", None, math.inf, math.inf, info
    if out["status"] == "stalled":
        d = _recession_ray(form, n) if out.get("x0") is not None else None
        if d is None:
            return None, out["reason"]
        z0 = out["x0"]
        if form.outer is not None:
            return None, out["reason"]
        zc = complete(z0) if complete is not None else z0
        if program.max_violation(zc) > 1e-7 * max(1.0, _inf_norm(zc)):
            return None, out["reason"]
        d[np.abs(d) < 1e-12] = 0.0
        info["unbounded_ray"] = {program.names[j]: float(d[j]) for j in np.flatnonzero(d)}
        info["unbounded_from"] = zc
        return "unbounded", None, -math.inf, -math.inf, info
    x, L = out["x"], out["L"]
    z = complete(x) if complete is not None else x
    viol = program.max_violation(z)
    if viol > 1e-7 * max(1.0, _inf_norm(z)):
        return None, f"the point violates the program by {viol:.2g}"
    upper = float(program.objective.value(z))
    lower = L
    if form.outer is not None:
        kern, cc, c0, sigma = form.outer
        u = sigma * L
        dlo = kern.domain[0]
        if np.isfinite(dlo):
            u = max(u, dlo)
        with np.errstate(all="ignore"):
            lower = float(c0 + cc * kern.value(np.array([u]))[0])
        if not np.isfinite(lower):
            return None, "the objective's bound is not finite through the outer atom"
    lower = min(lower, upper)
    return "optimal", z, lower, upper, info
