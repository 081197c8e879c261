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
  column's value is recomputed from its definition afterwards (:meth:`Program.complete_aux`). A ``sqrt`` column
  ``s = sqrt(a b)`` of a geometric mean's tree (``a``, ``b`` affine and provably ``>= 0``) becomes its hypograph, the
  rotated cone ``||(2 s, a - b)|| <= a + b`` (:func:`_hypograph_rows`), exact where every other occurrence is
  nonincreasing in ``s``;
* **p-norms among other terms**: a term ``c q^(1/p)`` (``c > 0``) of the objective or of a ``<=`` row (a ``>=`` row
  negated; ``norm(x, 4) <= t``) of a column ``q = sum_i w_i z_i^p`` (``c ||W z||_p``) that nothing else holds becomes
  ``c s`` with the power cones ``r_i^(1/p) s^(1 - 1/p) >= |z_i|``, ``sum_i r_i <= s`` over new columns
  (:class:`PowerCone`, :func:`_pnorm_cones`); a row with one term only keeps the monotone-atom rule below;
* **harmonic means among other objective terms** (when no p-norm term is taken): ``-K / q``, ``q = sum_i w_i / z_i``,
  becomes ``-s`` with the rotated cones ``s^2 <= y_i z_i``, ``sum_i w_i y_i <= K s``, ``s >= 0`` (:func:`_harmonic_cones`);
* **monotone outer atoms**: a row ``lo <= c_0 + c g(a^T x + b) <= hi`` whose only term is one atom with ``g``
  strictly monotone on its domain is the interval row ``u_lo <= a^T x + b <= u_hi`` (``q^(2/3) <= 1`` is
  ``q <= 1``); an objective ``c_0 + c g(u)`` of that form is minimised through ``u`` (``min q^(1/3)`` as
  ``min q``), its bound mapped back through the monotone ``phi(u) = c_0 + c g(u)``;
* every remaining nonlinear row must be convex on its bounded side (atoms with ``c >= 0``, no multiplier, a PSD
  quadratic part, log-sum-exp with ``c >= 0``) and every equality linear; anything else returns the reason and
  the caller keeps the tree.

:func:`solve_convex` then runs the barrier method (Boyd & Vandenberghe 2004, Algorithm 11.1: Newton centering
with the equality rows, the logarithmic barriers of the linear rows, the convex rows and each cone's
``-log(s^2 - ||u||^2)``), from a strictly feasible point (the phase-I problem ``min sigma s.t. r_i(x) <= sigma``,
§11.4.1, when the linear interior point violates a nonlinear row; retried inside a box around the start when its
barrier runs off along columns no row bounds, a retry that can find a point but proves nothing). Certificate (weak Lagrangian duality, §5.2): at
the final ``x`` with multipliers ``(lambda, nu)`` re-chosen by one LP so that ``grad_x L = 0``,

.. math::  d(\lambda, \nu) = L(x, \lambda, \nu) = f(x) + \sum_i \lambda_i r_i(x) + \nu^T (E x - e) \le f^\star,

the lower bound reported, less the Lagrangian's remaining gradient residual times ``max(1, |x|_inf)`` (its
first-order error); the upper bound is the objective at the point with the auxiliary columns at their
definitions, after checking every row of the program there. A phase-I bound above 0 (with the same margin)
proves the program infeasible; a program whose barrier method runs away is reported unbounded with a ray along which
every row's recession function is at most 0 and the objective's negative (:func:`.recession.recession_ray`).
Otherwise, when the method does not reach its tolerances (no Slater point, a numerical failure, the time limit), the
caller falls back to the tree.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...lpqp import solve_lp
from ...program.expression import Expression
from ...program.terms import AtomGroup
from .clock import current_time_limit, timed_lp
from .convexity import block_psd, constant_hessian
from .epigraph import _widen
from .primal import DenseExpr, _inf_norm, _interior_start, inequality_form, row_sides
from .recession import recession_ray


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
    ncols: int = None       # columns of the form (the program's, then the p-norm cones' s and r_i), None: the program's


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
            if np.any(col != 0) or (g.kernel.monotone_v == 0 and np.any(col2 != 0)):
                return None
            # monotone in v for every u (u^2 / v is nonincreasing in v > 0)
            signs.update(_sign(v) for v in g.kernel.monotone_v * g.coef[col2 != 0] * col2[col2 != 0])
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
    """``((a, b), 'in')``: adjacent floats of the domain around the ``u`` with ``g(u) = target`` for the strictly
    monotone kernel ``k`` (bisection; ``g(a) <= target < g(b)`` for a nondecreasing ``g``, ``g(a) >= target > g(b)``
    for a nonincreasing one), or ``(None, 'below')`` / ``(None, 'above')`` when ``target`` is below / above every
    value of ``g`` on the domain."""
    lo_d, _hi_d, closed = k.domain
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


def _augmented_form(e: Expression):
    """``(M, sup)``: ``e(x) = z^T M z`` with ``z = [x_sup; 1]`` for an ``e`` of squares of affine functions, products,
    linear terms and a constant (``M`` symmetric)."""
    sup = e.support()
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
    lin_idx, lin_val = e.linear_items()
    for i, v in zip(lin_idx, lin_val):
        M[pos[int(i)], p] += 0.5 * v
        M[p, pos[int(i)]] += 0.5 * v
    M[p, p] += e.constant
    return M, sup


def _augmented_eig(e: Expression):
    """``(w, V, sup, scale)``: the eigenvalues and eigenvectors of :func:`_augmented_form`'s ``M``, its support and
    ``max(1, |w|_inf)``, the scale of the rank and sign tests of the cone forms."""
    M, sup = _augmented_form(e)
    w, V = np.linalg.eigh(M)
    return w, V, sup, max(1.0, float(np.abs(w).max(initial=0.0)))


def _soc_rows(s, e: Expression, n):
    """Rows of ``s >= sqrt(e(x))`` (``e`` a sum of squares of affine functions plus a constant >= 0): two linear rows
    for one square, else the :class:`Cone` ``||F x + f|| <= s`` with ``e = ||F x + f||^2`` (the eigen-decomposition of
    ``e``'s quadratic form); ``(linear, rows)`` or a reason string."""
    if e.lse or any(not g.kernel.quadratic or np.any(g.mult >= 0) or np.any(g.coef < 0) for g in e.atoms):
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
    if s in set(e.support().tolist()):
        return "the norm's argument holds the norm's own column"
    w, V, sup, scale = _augmented_eig(e)
    p = sup.size
    if w.min(initial=0.0) < -1e-10 * scale:
        return "its argument is not a sum of squares (its quadratic form is indefinite)"
    keep = w > 1e-14 * scale
    if not keep.any():
        return "its argument is identically 0"
    F = (V[:, keep] * np.sqrt(w[keep])).T          # e = || F [x_sup; 1] ||^2
    Fn = np.zeros((F.shape[0], n))
    Fn[:, sup] = F[:, :p]
    return [], [Cone.on_column(Fn, F[:, p], s)]


def _hypograph_rows(s, e: Expression, n, nonneg):
    """The rotated cone ``s^2 <= a(x) b(x)``, ``a, b >= 0``, i.e. ``||(2 s, a - b)|| <= a + b``, of a ``sqrt`` column
    ``s = sqrt(a b)`` whose argument is a product of two affine functions (a geometric mean's tree: ``sqrt(x_1 x_2)``,
    ``sqrt(x 1)``); ``e``'s augmented quadratic form ``M`` has one positive and one negative eigenvalue,
    ``e = (sqrt(l_+) v_+ z)^2 - (sqrt(-l_-) v_- z)^2``, whose two factors are ``a`` and ``b`` up to a common sign, chosen
    so that ``nonneg(vector, constant)`` proves both ``>= 0`` on the program's linear rows and bounds (without that
    proof the rotated cone would cut off points where both are negative). A :class:`Cone` or a reason string."""
    if e.lse or any(not g.kernel.quadratic or np.any(g.mult >= 0) for g in e.atoms):
        return "its argument is not a quadratic form"
    if s in set(e.support().tolist()):
        return "the mean's argument holds its own column"
    w, V, sup, scale = _augmented_eig(e)
    p = sup.size
    big = np.abs(w) > 1e-10 * scale
    if big.sum() != 2 or not (w[big].min() < 0 < w[big].max()):
        return "its argument is not a product of two affine functions"
    vp, vm = V[:, np.argmax(w)] * math.sqrt(w.max()), V[:, np.argmin(w)] * math.sqrt(-w.min())
    for sign in (1.0, -1.0):
        fa, fb = sign * (vp - vm), sign * (vp + vm)        # e = (fa z) (fb z)
        # each is a multiple of one factor up to rounding: clear the entries that are rounding of a zero (their signs
        # decide the monotonicity of the cone in its columns)
        for f in (fa, fb):
            f[np.abs(f) <= 1e-12 * np.abs(f).max()] = 0.0
        a, b = np.zeros(n), np.zeros(n)
        a[sup], b[sup] = fa[:p], fb[:p]
        if nonneg(a, fa[p]) and nonneg(b, fb[p]):
            F = np.zeros((2, n))
            F[0, s] = 2.0
            F[1] = a - b
            return Cone(F, np.array([0.0, fa[p] - fb[p]]), a + b, fa[p] + fb[p], factors=(a, fa[p], b, fb[p]))
    return "the factors of its argument are not both nonnegative on the linear rows and bounds"


class _LinearHull:
    """The program's linear rows and bounds, a relaxation of its feasible set: ``self(a, a0)`` is True when
    ``a^T x + a0 >= 0`` holds on it (a nonnegative combination of columns with nonnegative lower bounds, else an LP,
    to ``1e-11`` of the factor's scale),
    ``upper(a, a0)`` the largest ``a^T x + a0`` on it (an LP; ``inf`` when unbounded or not solved)."""

    def __init__(self, program):
        self.program = program
        A, const, lo, hi, _ = program._linear_rows()
        self.rows = (A, lo - const, hi - const) if A.shape[0] else (None, None, None)

    def _min(self, a):
        # stopped by the time limit: OutOfTime, not "not nonnegative"
        out = timed_lp(a, *self.rows, self.program.lb, self.program.ub)
        return out.objective if out.status == "optimal" else -math.inf

    def __call__(self, a, a0):
        nz = np.flatnonzero(a)
        if a0 >= 0 and np.all(a[nz] >= 0) and np.all(self.program.lb[nz] >= 0):
            return True
        # a factor that is a row's body has its minimum 0 at a vertex where the row binds: allow its rounding
        return self._min(a) + a0 >= -1e-11 * max(1.0, abs(a0), float(np.abs(a).sum()))

    def upper(self, a, a0):
        return -self._min(-a) + a0


class Cone:
    """The second-order-cone row ``||F x + f||_2 <= g^T x + g_0`` (the height: a column ``x_s`` for a norm, ``a + b``
    for the rotated cone ``s^2 <= a b``; the phase-I problem adds its ``sigma``), with the logarithmic barrier
    ``psi = -log(h^2 - ||u||^2)``, ``u = F x + f``, ``h = g^T x + g_0`` (self-concordant, degree 2; Boyd & Vandenberghe
    2004, §11.6.1). Its gradient ``(2 F^T u - 2 h g) / D`` (``D = h^2 - ||u||^2``) stays bounded along the central path
    into the apex (a zero group of a group lasso), where the smooth form ``||u||^2 / x_s - x_s`` stalled.
    ``factors``: ``(a, a_0, b, b_0)`` of a rotated cone (:func:`_hypograph_rows`), else None."""

    degree = 2

    def __init__(self, F, f, g, g0=0.0, factors=None):
        self.F, self.f = F, f
        self.g, self.g0 = np.asarray(g, dtype=float), float(g0)
        self.factors = factors

    @classmethod
    def on_column(cls, F, f, s):
        """``||F x + f|| <= x_s``."""
        g = np.zeros(F.shape[1])
        g[s] = 1.0
        return cls(F, f, g)

    def height(self, x):
        return float(self.g @ x) + self.g0

    def slack(self, x):
        """``h(x) - ||u||`` (> 0 strictly inside)."""
        u = self.F @ x + self.f
        return self.height(x) - float(np.sqrt(u @ u))

    def barrier(self, x):
        """``(psi, gradient, Hessian)``, ``psi = inf`` outside the cone's interior."""
        u = self.F @ x + self.f
        h = self.height(x)
        D = h * h - float(u @ u)
        if not (h > 0 and D > 0):
            return math.inf, None, None
        Fu = self.F.T @ u
        gr = (2.0 * Fu - 2.0 * h * self.g) / D
        w = Fu - h * self.g        # D-gradient is -2 w: Hessian 2 (F^T F - g g^T) / D + 4 w w^T / D^2
        H = 2.0 * (self.F.T @ self.F - np.outer(self.g, self.g)) / D + 4.0 * np.outer(w, w) / D ** 2
        return -math.log(D), gr, H

    def padded(self, k, sigma=False, homogeneous=False):
        """The cone over ``k`` more columns (zeros), with the last one added to the height (``sigma``: phase I), or its
        recession cone ``||F d|| <= g^T d`` (``homogeneous``)."""
        F = np.hstack([self.F, np.zeros((self.F.shape[0], k))])
        g = np.concatenate([self.g, np.zeros(k)])
        if sigma:
            g[-1] = 1.0
        if homogeneous:
            return Cone(F, np.zeros_like(self.f), g)
        return Cone(F, self.f, g, self.g0)

    def ray_excess(self, d):
        """``||F d|| - g^T d``: at most 0 on the recession cone."""
        u = self.F @ d
        return float(np.sqrt(u @ u)) - float(self.g @ d)

    def scale(self):
        return max(1.0, float(np.abs(self.F).sum() + np.abs(self.g).sum()))

    def direction(self, j):
        """+1 when the row ``||F x + f|| - h(x) <= 0`` (a rotated cone: ``s^2 - a b <= 0``, ``a, b >= 0``) is
        nondecreasing in column ``j``, -1 nonincreasing, 0 independent, None when neither is known."""
        if self.factors is not None:
            a, _, b, _ = self.factors
            if self.F[0, j] != 0:        # the cone's own s (2 s in the first entry of F)
                return None
            sa, sb = _sign(a[j]), _sign(b[j])
            if sa * sb < 0:
                return None
            return -(sa or sb)
        if np.any(self.F[:, j] != 0):
            return None
        return -_sign(self.g[j])


class PowerCone(Cone):
    """The power-cone row ``X^alpha Y^(1 - alpha) >= |Z|``, ``X, Y >= 0``, over affine ``X, Y, Z`` (rows of ``J``, offsets
    ``u0``), with the barrier ``psi = -log(X^(2 alpha) Y^(2 - 2 alpha) - Z^2) - (1 - alpha) log X - alpha log Y``
    (logarithmically homogeneous of degree 3; Chares 2009, Skajaa & Ye 2015). One entry ``|z_i|^p <= r_i s^(p - 1)`` of a
    p-norm ``||z||_p <= s`` (``alpha = 1/p``; with ``sum_i r_i <= s``). ``z_nonneg``: ``Z >= 0`` holds on the program
    (its domain row), so the row is nondecreasing in ``Z``."""

    degree = 3

    def __init__(self, J, u0, alpha, z_nonneg=False):
        self.J, self.u0, self.alpha, self.z_nonneg = J, u0, float(alpha), z_nonneg
        self.factors = None

    def _u(self, x):
        return self.J @ x + self.u0

    def slack(self, x):
        """``min(X, Y, X^alpha Y^(1 - alpha) - |Z|)`` (``min(X, Y) - |Z|`` off the quadrant): ``> 0`` strictly inside,
        and ``sigma = 1 - slack`` puts ``(X + sigma, Y + sigma, Z)`` strictly inside (phase I)."""
        X, Y, Z = self._u(x)
        if X > 0 and Y > 0:
            return min(X, Y, X ** self.alpha * Y ** (1.0 - self.alpha) - abs(Z))
        return min(X, Y) - abs(Z)

    def barrier(self, x):
        X, Y, Z = self._u(x)
        a = self.alpha
        if not (X > 0 and Y > 0):
            return math.inf, None, None
        P = X ** (2 * a) * Y ** (2 - 2 * a)
        phi = P - Z * Z
        if not phi > 0:
            return math.inf, None, None
        dphi = np.array([2 * a * P / X, (2 - 2 * a) * P / Y, -2.0 * Z])
        d2 = np.array([[2 * a * (2 * a - 1) * P / X ** 2, 2 * a * (2 - 2 * a) * P / (X * Y), 0.0],
                       [2 * a * (2 - 2 * a) * P / (X * Y), (2 - 2 * a) * (1 - 2 * a) * P / Y ** 2, 0.0],
                       [0.0, 0.0, -2.0]])
        g3 = -dphi / phi - np.array([(1 - a) / X, a / Y, 0.0])
        H3 = -d2 / phi + np.outer(dphi, dphi) / phi ** 2 + np.diag([(1 - a) / X ** 2, a / Y ** 2, 0.0])
        val = -math.log(phi) - (1 - a) * math.log(X) - a * math.log(Y)
        return val, self.J.T @ g3, self.J.T @ H3 @ self.J

    def padded(self, k, sigma=False, homogeneous=False):
        J = np.hstack([self.J, np.zeros((3, k))])
        if sigma:
            J[0, -1] = J[1, -1] = 1.0
        return PowerCone(J, np.zeros(3) if homogeneous else self.u0, self.alpha, self.z_nonneg)

    def direction(self, j):
        cx, cy, cz = self.J[:, j]
        if cz != 0 and not self.z_nonneg:
            return None
        signs = {-_sign(cx), -_sign(cy), _sign(cz)} - {0}
        return None if len(signs) > 1 else (signs.pop() if signs else 0)

    def ray_excess(self, d):
        """``|Z d| - (X d)^alpha (Y d)^(1 - alpha)`` of the homogeneous map (``inf`` off the quadrant): at most 0 on the
        cone's recession cone (the cone itself)."""
        X, Y, Z = self.J @ d
        if X < 0 or Y < 0:
            return math.inf
        return abs(Z) - X ** self.alpha * Y ** (1.0 - self.alpha)

    def scale(self):
        return max(1.0, float(np.abs(self.J).sum()))


#: tag of an atom's domain row (:func:`convex_form`)
DOMAIN = -1


def _uses(e: Expression, j):
    """The number of terms of ``e`` that hold column ``j`` (linear, quadratic, atom rows, log-sum-exp rows)."""
    k = int(e.linear[j] != 0)
    q = e.quadratic
    k += int(np.sum((q.i == j) | (q.j == j))) if len(q) else 0
    for g in e.groups():
        k += int(np.count_nonzero(g.A[:, j].toarray()))
        if getattr(g, "A2", None) is not None:
            k += int(np.count_nonzero(g.A2[:, j].toarray()))
    return k


def _outer_atom_rows(obj, defs, n, outer_ok):
    """The rows ``(group, atom group, row, coefficient row, q, product def, widened definition)`` of the objective's
    atom groups accepted by ``outer_ok(kernel)`` that are a negative multiple of the atom of ``lam q`` alone
    (``lam > 0``, no multiplier, no constant) for a ``product`` column ``q`` defined by one positive atom group without
    multipliers, constants, linear, quadratic or log-sum-exp terms: the shape shared by the p-norm and the
    harmonic-mean terms."""
    by_col = {a.index: a for a in defs.values() if a.kind == "product"}
    for gi, g in enumerate(obj.atoms):
        if not outer_ok(g.kernel):
            continue
        for r in range(len(g)):
            row = g.A[r]
            if g.coef[r] >= 0 or g.mult[r] >= 0 or g.b[r] != 0 or row.nnz != 1 or row.data[0] <= 0:
                continue
            q = int(row.indices[0])
            a = by_col.get(q)
            if a is None:
                continue
            d = a.definition if a.definition.n == n else _widen(a.definition, n)
            if (d.lse or len(d.quadratic) or d.constant != 0.0 or d.linear_items()[0].size or len(d.atoms) != 1
                    or np.any(d.atoms[0].mult >= 0) or np.any(d.atoms[0].coef <= 0)):
                continue
            yield gi, g, r, row, q, a, d


def _pnorm_terms(program, obj, defs, n, owner=None):
    """The p-norm terms of the objective (``owner`` None) or of the ``<=`` form ``obj`` of the row named ``owner`` ``c (lam q)^(1/p)`` (``c > 0``; the atom ``-u^(1/p)`` with a negative coefficient) of a
    ``product`` column ``q = sum_i w_i z_i^p`` (``w_i > 0``, ``z_i`` affine, ``p > 1``) that nothing else holds: ``(group,
    row, q, c lam^(1/p), p, [(w_i^(1/p) A_i, w_i^(1/p) b_i)], definition row)``. Each is ``c ||W z||_p``, convex in
    ``z``, which the lifted form hides (``q^(1/p)`` is concave in ``q``)."""
    out = []
    for gi, g, r, row, q, a, d in _outer_atom_rows(obj, defs, n,
                                                   lambda k: 0.0 < (getattr(k, "p", None) or 0.0) < 1.0):
        alpha = g.kernel.p
        h = d.atoms[0]
        P = getattr(h.kernel, "p", None)
        if P is None or h.kernel.arity != 1 or abs(P * alpha - 1.0) > 1e-12:
            continue
        # q only in this term and its definition
        if _uses(obj, q) != 1 or any(_uses(c.body, q) for c in program.constraints
                                     if c.name not in (a.constraint, owner)):
            continue
        if owner is not None and _uses(program.objective, q):
            continue
        w = h.coef ** (1.0 / P)
        args = [(np.asarray(h.A[i].todense()).ravel() * w[i], float(h.b[i] * w[i])) for i in range(len(h))]
        out.append((gi, r, q, float(-g.coef[r] * row.data[0] ** alpha), P, args, a.constraint, h.kernel))
    return out


def _harmonic_terms(program, obj, defs, n):
    """The objective's harmonic-mean terms ``-K / q`` (the atom ``u^(-1)`` of ``lam q`` with a negative coefficient,
    ``K = -coef / lam > 0``) of a ``product`` column ``q = sum_i w_i z_i^(-1)`` (``w_i > 0``, ``z_i`` affine) that
    nothing else holds: ``(group, row, q, K, [w_i], [(A_i, b_i)], definition row)``. ``-K / sum_i (w_i / z_i)`` is
    convex in ``z > 0`` (minus a weighted harmonic mean: CVXPY's ``harmonic_mean``), though ``-K / q`` is concave in
    ``q``."""
    out = []
    for gi, g, r, row, q, a, d in _outer_atom_rows(obj, defs, n, lambda k: getattr(k, "p", None) == -1.0):
        if getattr(d.atoms[0].kernel, "p", None) != -1.0 or d.atoms[0].kernel.arity != 1:
            continue
        if _uses(obj, q) != 1 or any(_uses(c.body, q) for c in program.constraints if c.name != a.constraint):
            continue
        h = d.atoms[0]
        args = [(np.asarray(h.A[i].todense()).ravel(), float(h.b[i])) for i in range(len(h))]
        out.append((gi, r, q, float(-g.coef[r] / row.data[0]), h.coef.astype(float), args, a.constraint))
    return out


def _atoms_without(obj, terms):
    """The objective's atom groups without the rows ``(group, row, ...)`` of ``terms`` (replaced by cones)."""
    drop = {}
    for gi, r, *_ in terms:
        drop.setdefault(gi, []).append(r)
    atoms = []
    for gi, g in enumerate(obj.atoms):
        keep = np.setdiff1d(np.arange(len(g)), drop.get(gi, []))
        if keep.size:
            atoms.append(AtomGroup(g.kind, g.coef[keep], g.A[keep], g.b[keep], g.mult[keep],
                                   None if g.A2 is None else g.A2[keep], None if g.b2 is None else g.b2[keep]))
    return atoms


def _harmonic_cones(terms, obj, n, N):
    """``(objective without the terms, the new columns' objective coefficients, linear rows with tags, cones)``: each
    ``-K / sum_i (w_i / z_i)`` as ``-s`` over new columns ``s, y_1, ...`` (after ``n``) with ``s >= 0``,
    ``sum_i w_i y_i <= K s`` and the rotated cones ``s^2 <= y_i z_i`` (``||(2 s, y_i - z_i)|| <= y_i + z_i``): for
    ``s > 0`` these give ``s sum_i w_i / z_i <= K``, i.e. ``s`` below the mean, and ``y_i = s^2 / z_i`` attains it, so
    minimising ``-s`` is minimising the term (the mean is ``>= 0``, so ``s >= 0`` loses nothing)."""
    atoms = _atoms_without(obj, terms)
    base = Expression(n, obj.constant, obj.linear.copy(), obj.quadratic, atoms, obj.lse)
    cost, linear, cones, col = np.zeros(N), [], [], n
    for _gi, _r, _q, K, w, args, _name in terms:
        s, ys = col, list(range(col + 1, col + 1 + len(args)))
        col += 1 + len(args)
        cost[s] = -1.0
        e_s = np.zeros(N)
        e_s[s] = 1.0
        linear.append((Expression(N, 0.0, e_s), 0.0, math.inf, None))
        row = np.zeros(N)
        row[ys] = w
        row[s] = -K
        linear.append((Expression(N, 0.0, row), -math.inf, 0.0, None))
        for (a, b), yi in zip(args, ys):
            za = np.zeros(N)
            za[:n] = a
            e_y = np.zeros(N)
            e_y[yi] = 1.0
            F = np.vstack([2.0 * e_s, e_y - za])
            cones.append(Cone(F, np.array([0.0, -b]), e_y + za, b, factors=(e_y, 0.0, za, b)))
    return base, cost, linear, cones


def _pnorm_cones(terms, obj, n, lb, col=None, N=None):
    """``(expression without the terms, the new columns' coefficients in it (length ``N``), linear rows with
    their tags, cones, N)``: each term ``c ||z||_p`` of ``obj`` (the objective or a row's ``<=`` form) as ``c s`` with the
    power cones ``r_i^(1/p) s^(1 - 1/p) >= |z_i|`` and ``sum_i r_i <= s`` (``||z||_p <= s`` iff such ``r`` exist:
    ``|z_i|^p <= r_i s^(p - 1)`` summed), over new columns ``s, r_1, ...`` from ``col`` (default the program's ``n``) of
    the form's ``N``; ``z_i >= 0`` rows where the power's domain requires it (tagged as domain rows). In a row the
    replacement is exact as in the objective: ``||z||_p <= s`` with ``s`` entering the row with a positive coefficient."""
    col = n if col is None else col
    N = n + sum(1 + len(t[5]) for t in terms) if N is None else N
    atoms = _atoms_without(obj, terms)
    lin = np.zeros(N)
    base = Expression(n, obj.constant, obj.linear.copy(), obj.quadratic, atoms, obj.lse)
    linear, cones = [], []
    for _gi, _r, _q, c, P, args, _name, kern in terms:
        s, rs = col, list(range(col + 1, col + 1 + len(args)))
        col += 1 + len(args)
        lin[s] += c
        row = np.zeros(N)
        row[rs] = 1.0
        row[s] = -1.0
        linear.append((Expression(N, 0.0, row), -math.inf, 0.0, None))
        for (a, b), ri in zip(args, rs):
            J = np.zeros((3, N))
            J[0, ri], J[1, s], J[2, :n] = 1.0, 1.0, a
            nonneg = np.isfinite(kern.domain[0])
            if nonneg:      # the power's domain z >= 0, part of the program's objective
                linear.append((Expression(N, b, np.concatenate([a, np.zeros(N - n)])), 0.0, math.inf, DOMAIN))
            else:
                nz = np.flatnonzero(a)
                nonneg = b >= 0 and bool(np.all(a[nz] >= 0)) and bool(np.all(lb[nz] >= 0))
            cones.append(PowerCone(J, np.array([0.0, 0.0, b]), 1.0 / P, z_nonneg=nonneg))
    return base, lin, linear, cones, N


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
    relaxed, notes, nonneg = [], [], None

    def add_lin(expr, lo, hi, tag=None):
        linear.append((expr, lo, hi))
        tags.append(("lin", len(linear) - 1, tag))

    def add_row(expr, hi, tag=None):
        rows.append((expr, hi))
        tags.append(("row", len(rows) - 1, tag))

    # the objective first: most nonconvex programs (bilinear, concave) fail here, before any row is examined
    obj, outer = program.objective, None
    terms = _pnorm_terms(program, obj, defs, n)
    # p-norms in <= rows (norm(x, 4) <= t, pnorm(z, 3) + pnorm(w, 1.5) <= 1 - t): the same power cones
    row_terms = {}
    for c in program.constraints:
        if (c.name in defs or c.body.is_linear or (np.isfinite(c.lo) and np.isfinite(c.hi))
                or _single_atom(c.body) is not None):      # pnorm(y, 3) <= 1: an interval of q (below)
            continue
        expr, hi = (c.body, c.hi) if np.isfinite(c.hi) else (c.body.scaled(-1.0), -c.lo)
        t = _pnorm_terms(program, expr, defs, n, owner=c.name)
        if t:
            row_terms[c.name] = (expr, hi, t)
    all_terms = terms + [t for _e, _h, ts in row_terms.values() for t in ts]
    pnorm = None
    hterms = [] if all_terms else _harmonic_terms(program, obj, defs, n)
    if hterms:
        # minus harmonic means (maximised harmonic_mean next to other terms) as rotated cones over new columns
        N = n + sum(1 + len(t[5]) for t in hterms)
        obj, s_cost, pn_linear, pn_cones = _harmonic_cones(hterms, obj, n, N)
        pnorm = (s_cost, N, {t[6] for t in hterms}, [t[2] for t in hterms])
        notes.append(f"{len(hterms)} harmonic-mean term(s) of the objective as rotated cones")
        terms = hterms
    if all_terms:
        # p-norms among other terms as power cones (over new columns after the program's)
        N = n + sum(1 + len(t[5]) for t in all_terms)
        col = n
        s_cost, pn_linear, pn_cones = np.zeros(N), [], []
        if terms:
            obj, s_cost, pn_linear, pn_cones, _ = _pnorm_cones(terms, obj, n, lb, col, N)
            col += sum(1 + len(t[5]) for t in terms)
        for name, (expr, hi, ts) in list(row_terms.items()):
            base, s_row, lin_r, cones_r, _ = _pnorm_cones(ts, expr, n, lb, col, N)
            col += sum(1 + len(t[5]) for t in ts)
            row_terms[name] = (base, hi, s_row)
            pn_linear += lin_r
            pn_cones += cones_r
        pnorm = (s_cost, N, {t[6] for t in all_terms}, [t[2] for t in all_terms])
        notes.append(f"{len(all_terms)} p-norm term(s) as power cones"
                     + (f" (in rows {', '.join(row_terms)})" if row_terms else ""))
    why = convex_expression(obj)
    if why is not None and terms:
        return None, f"the objective: {why}"
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
        if pnorm is not None and c.name in pnorm[2]:
            continue      # a p-norm's q = sum z_i^p: replaced by its cones
        a = defs.get(c.name)
        if a is not None:
            if a.kind == "ratio":
                return None, f"the ratio column of {a.term} (a division by a variable)"
            # (the abs epigraph's program has columns after the definitions': widen them)
            defn = a.definition if a.definition.n == n else _widen(a.definition, n)
            want = 1     # the relaxed column must only push the binding side up (+1, an epigraph) or down (-1)
            if a.kind == "sqrt":
                out = _soc_rows(a.index, defn, n)
                if isinstance(out, str):
                    # a geometric mean's s = sqrt(a b): its hypograph, exact where s is wanted large
                    nonneg = nonneg or _LinearHull(program)
                    hyp = _hypograph_rows(a.index, defn, n, nonneg)
                    if isinstance(hyp, str):
                        return None, f"{a.term}: {out}; nor {hyp}"
                    fa, fa0, fb, fb0 = hyp.factors
                    if np.isfinite(ub[a.index]) and \
                            not ub[a.index] ** 2 * (1 + 1e-9) >= nonneg.upper(fa, fa0) * nonneg.upper(fb, fb0):
                        # raising s to sqrt(a b) must not cross its upper bound: only where the bound is implied by
                        # the factors' own (a box propagated onto the column: y <= 5 gives s <= 5; to its rounding)
                        return None, f"{a.term}: a mean's column with an upper bound below the product of its factors'"
                    out, want = ([], [hyp]), -1
                for expr, lo, hi in out[0]:
                    add_lin(expr, lo, hi, a.index)
                for cone in out[1]:
                    rows.append(cone)
                    tags.append(("row", len(rows) - 1, a.index))
            else:
                why = convex_expression(defn)
                if why is not None:
                    return None, f"{a.term}: {why}"
                body = defn.copy()
                lin = body.linear.copy()
                lin[a.index] -= 1.0
                body.linear = lin
                add_row(body, 0.0, a.index)
            relaxed.append((a.index, want))
            continue
        body = c.body
        if body.is_linear:
            add_lin(body, c.lo, c.hi)
            continue
        if c.name in row_terms:
            base, hi, s_row = row_terms[c.name]
            why = convex_expression(base)
            if why is not None:
                return None, f"constraint {c.name}: {why}"
            expr = _widen(base, pnorm[1])
            expr.linear = expr.linear + s_row
            if expr.is_linear:      # norm(x, 4) <= t: s - t <= 0
                add_lin(expr, -math.inf, hi)
            else:
                add_row(expr, hi)
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
    if pnorm is not None:
        for expr, lo, hi, tag in pn_linear:
            add_lin(expr, lo, hi, tag)
        for cone in pn_cones:
            rows.append(cone)
            tags.append(("row", len(rows) - 1, None))
        for q in pnorm[3]:       # the p-norm's q is no column of the form any more: fixed at 0 (recomputed after)
            lb[q], ub[q] = -math.inf, math.inf
            e1 = np.zeros(n)
            e1[q] = 1.0
            add_lin(Expression(n, 0.0, e1), 0.0, 0.0, DOMAIN)
    # the relaxations are exact when each relaxed column only pushes the binding side up (an epigraph, want = +1) or
    # only down (a hypograph, want = -1) (module docstring)
    for j, want in relaxed:
        way = "nondecreasingly" if want > 0 else "nonincreasingly"
        d = _direction(obj, j)
        if d is None or d * want < 0:
            return None, f"{program.names[j]} enters the objective not {way}"
        for kind, k, tag in tags:
            if tag == j or tag == DOMAIN:
                continue
            if kind == "row":
                d = rows[k].direction(j) if isinstance(rows[k], Cone) else _direction(rows[k][0], j)
                if d is None or d * want < 0:
                    return None, (f"{program.names[j]} enters a norm's argument" if isinstance(rows[k], Cone)
                                  and rows[k].factors is None and want > 0 else
                                  f"{program.names[j]} enters a convex row not {way}")
            else:
                expr, lo, hi = linear[k]
                idx, val = expr.linear_items()
                hit = np.flatnonzero(idx == j)
                if not hit.size:
                    continue
                v = val[hit[0]] * want
                if (np.isfinite(lo) and np.isfinite(hi)) or (v > 0 and np.isfinite(lo)) or (v < 0 and np.isfinite(hi)):
                    return None, f"{program.names[j]} enters a linear row on the side that would bind it " + \
                        ("from below" if want > 0 else "from above")
    if relaxed:
        notes.append("definitions relaxed to convex rows: " + ", ".join(program.names[j] for j, _ in relaxed[:6])
                     + (", ..." if len(relaxed) > 6 else ""))
    if pnorm is None:
        return ConvexForm(obj, linear, rows, lb, ub, outer, notes), None
    s_cost, N, _, _ = pnorm
    k = N - n

    def wide(e):
        return e if e.n == N else _widen(e, N)
    obj = wide(obj)
    obj.linear = obj.linear + s_cost
    linear = [(wide(e), lo, hi) for e, lo, hi in linear]
    rows = [r if isinstance(r, PowerCone) or (isinstance(r, Cone) and r.F.shape[1] == N)
            else r.padded(k) if isinstance(r, Cone) else (wide(r[0]), r[1]) for r in rows]
    return ConvexForm(obj, linear, rows, np.concatenate([lb, np.full(k, -math.inf)]),
                      np.concatenate([ub, np.full(k, math.inf)]), outer, notes, ncols=N), None


#: relative duality gap at which the barrier method stops
TOL_GAP = 1e-8
#: largest gradient of the Lagrangian (relative to the objective's gradient at the start) at which its value is taken
#: as the dual function's: the centering is exact to the rounding of the Newton system only (1e-7 to 3e-5 measured on
#: p-norm rows and cones at their apex at t ~ 1e10)
DUAL_RESIDUAL = 1e-4


class _Row:
    """``body(x) - hi`` of a convex row, through :class:`.primal.DenseExpr`; ``shift`` a column subtracted (the
    phase-I ``sigma``)."""

    def __init__(self, body, hi, n, shift=None):
        self.f_body = body
        self.f = DenseExpr(body)
        self.hi, self.n, self.shift = hi, n, shift

    def value(self, x):
        v = self.f.value(x[:self.n])
        if not np.isfinite(v):
            return math.inf
        return v - self.hi - (x[self.shift] if self.shift is not None else 0.0)

    def derivs(self, x):
        g, H = self.f.derivs(x[:self.n])
        if x.size > self.n:
            g = np.append(g, np.zeros(x.size - self.n))
            Hz = np.zeros((x.size, x.size))
            Hz[:self.n, :self.n] = H
            H = Hz
        if self.shift is not None:
            g[self.shift] -= 1.0
        return g, H


def _phi(x, G, h, rows, cones, hessian=True):
    """The barrier ``-sum log(h - G x) - sum log(-r_i(x)) + sum psi_c(x)``, its gradient and Hessian; ``inf`` outside
    the interior. Also the number of barrier terms weighted by their degrees (the duality gap is that over ``t``)."""
    sl = h - G @ x
    if np.any(sl <= 0):
        return math.inf, None, None
    val = -float(np.sum(np.log(sl)))
    d = 1.0 / sl
    g = G.T @ d
    H = (G.T * d * d) @ G if hessian else None
    for r in rows:
        v = r.value(x)
        if not v < 0:
            return math.inf, None, None
        rg, rH = r.derivs(x)
        val -= math.log(-v)
        g = g + rg / -v
        if hessian:
            H = H + rH / -v + np.outer(rg, rg) / (v * v)
    for c in cones:
        v, cg, cH = c.barrier(x)
        if not np.isfinite(v):
            return math.inf, None, None
        val += v
        g = g + cg
        if hessian:
            H = H + cH
    return val, g, H


def _barrier_method(f, G, h, E, e, rows, cones, x, tol=TOL_GAP, stop=None, max_newton=400, clock=None):
    """The barrier method (Boyd & Vandenberghe 2004, §11.3, Algorithm 11.1) from the strictly feasible ``x``
    (``E x = e``): centering steps ``min t f(x) + phi(x)`` s.t. ``E x = e`` by Newton's method with backtracking
    (Algorithm 10.2), ``t <- 20 t`` until the duality gap ``theta / t`` (``theta``: the barrier's degree) is below
    ``tol max(1, |f|)``. ``stop(x)`` ends the iterations early (phase I: a strictly feasible point found); ``clock()``
    True (the run's time limit) ends them unconverged.
    Returns ``(x, t, nu, newton_steps, converged)``; ``nu`` the equality multipliers ``w / t``."""
    theta = G.shape[0] + len(rows) + sum(c.degree for c in cones)
    n, m_eq = x.size, E.shape[0]
    fx = f.value(x)
    t = 1.0 if theta == 0 else max(1.0, theta / max(1.0, abs(fx)))
    nu = np.zeros(m_eq)
    steps = 0
    while True:
        prev = math.inf
        while steps < max_newton:
            if clock is not None and clock():
                return x, t, nu, steps, False
            gf, Hf = f.derivs(x)
            pv, pg, pH = _phi(x, G, h, rows, cones)
            g = t * gf + pg
            Hm = t * Hf + pH
            if m_eq:
                K = np.block([[Hm, E.T], [E, np.zeros((m_eq, m_eq))]])
                rhs = np.concatenate([-g, e - E @ x])
            else:
                K, rhs = Hm, -g
            sol = _newton_solve(K, rhs, n)
            dx, w = sol[:n], sol[n:]
            steps += 1
            dec = float(dx @ Hm @ dx)
            if not np.isfinite(dec):
                return x, t, nu, steps, False
            nu = w / t
            # centred: the decrement at its target, or stuck at the rounding level of the Newton system (large t)
            if dec / 2.0 <= 1e-11 or (dec <= 1e-6 and dec > 0.25 * prev):
                break
            prev = dec
            phi0 = t * fx + pv
            slope = float(g @ dx)
            s = 1.0
            while True:
                xn = x + s * dx
                fn = f.value(xn)
                pn = _phi(xn, G, h, rows, cones, hessian=False)[0] if np.isfinite(fn) else math.inf
                if np.isfinite(pn) and (t * fn + pn <= phi0 + 0.25 * s * slope
                                        or abs(s * slope) <= 1e-13 * max(1.0, abs(phi0))):
                    break
                s *= 0.5
                if s < 1e-12:
                    return x, t, nu, steps, False
            x, fx = xn, fn
            if stop is not None and stop(x):
                return x, t, nu, steps, True
            if not np.isfinite(fx) or _inf_norm(x) > 1e12:
                return x, t, nu, steps, False      # running away: an unbounded objective
        else:
            return x, t, nu, steps, False
        if theta == 0 or theta / t <= tol * max(1.0, abs(fx)):
            return x, t, nu, steps, True
        t *= 20.0


def _newton_solve(K, rhs, n):
    """The Newton system ``K sol = rhs`` (``K``'s leading ``n x n`` block the Hessian). A Hessian singular in some
    direction (``x^4`` rows at ``x = 0``: no curvature, and the minimum-norm solution does not move there) is
    regularised by ``delta I`` on that block, ``delta = 1e-8 (1 + max |H_ii|)``: a long step along the gradient, which
    the line search shortens (Levenberg-Marquardt damping)."""
    try:
        sol = np.linalg.solve(K, rhs)
        if np.all(np.isfinite(sol)) and np.linalg.norm(K @ sol - rhs) <= 1e-8 * max(1.0, np.linalg.norm(rhs)):
            return sol
    except np.linalg.LinAlgError:
        pass
    Kd = K.copy()
    d = 1e-8 * (1.0 + float(np.abs(np.diag(K)[:n]).max(initial=0.0)))
    Kd[np.arange(n), np.arange(n)] += d
    try:
        sol = np.linalg.solve(Kd, rhs)
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(Kd, rhs, rcond=None)[0]
    return sol


def _lagrangian_bound(f, G, h, E, e, rows, cones, x, t, nu, polish=True):
    """``(L, residual)``: the Lagrangian at ``x`` with the central-path multipliers ``lambda = 1 / (t (h - G x))``,
    ``1 / (t (-r_i))`` and the cones' ``y = -grad psi / t`` (inside the self-dual cone: ``||y_u|| <= y_s``), and the
    infinity norm of its gradient; ``L`` is the dual function's value, a lower bound on the optimum (weak duality),
    when the gradient vanishes (Boyd & Vandenberghe 2004, §11.2.2)."""
    sl = h - G @ x
    lam = 1.0 / (t * sl)
    fx, gf = f.value(x), f.derivs(x)[0]
    L = fx - float(lam @ sl)
    grad = gf + G.T @ lam
    rv = np.array([r.value(x) for r in rows])
    rg = [r.derivs(x)[0] for r in rows]
    for v, g in zip(rv, rg):
        li = 1.0 / (t * -v)
        L += li * v
        grad = grad + li * g
    # y_c = -grad_u psi_c / t in the dual cone; its term -y_c^T u_c(x) = -degree / t (logarithmic homogeneity)
    cgs = [c.barrier(x)[1] / t for c in cones]
    for c, y in zip(cones, cgs):
        L -= c.degree / t
        grad = grad + y
    if E.shape[0]:
        # the equality multipliers that best cancel the gradient (the Newton system's are one step old)
        nu = np.linalg.lstsq(E.T, -grad, rcond=None)[0]
        L += float(nu @ (E @ x - e))
        grad = grad + E.T @ nu
    res = _inf_norm(grad)
    if polish and res > 1e-12 * max(1.0, _inf_norm(gf)):
        # every multiplier re-chosen by an LP so that the gradient vanishes exactly (to HiGHS's tolerance), with the
        # largest Lagrangian: lambda >= 0 for the linear and the nonlinear rows (their gradients at x), a scale
        # alpha_c >= 0 of each cone's central-path multiplier (alpha y stays in the self-dual cone), nu free;
        # maximise L = f(x) - lambda_G^T (h - G x) + lambda_r^T r(x) - sum_c 2 alpha_c / t + nu^T (E x - e)
        mG, mR, mC, mE = G.shape[0], len(rows), len(cones), E.shape[0]
        cols = [G.T] + ([np.column_stack(rg)] if mR else []) + ([np.column_stack(cgs)] if mC else []) \
            + ([E.T] if mE else [])
        Aeq = np.hstack(cols)
        cost = np.concatenate([sl, -rv, np.array([c.degree / t for c in cones]), -(E @ x - e) if mE else np.zeros(0)])
        k = mG + mR + mC
        lbv = np.concatenate([np.zeros(k), np.full(mE, -np.inf)])
        if Aeq.shape[1]:
            # the time left (a polish stopped by it keeps the certificate above, valid)
            out = solve_lp(cost, Aeq, -gf, -gf, lbv, np.full(k + mE, np.inf), time_limit=current_time_limit())
            if out.status == "optimal":
                z = np.concatenate([np.maximum(out.x[:k], 0.0), out.x[k:]])
                grad2 = gf + Aeq @ z
                L2 = fx - float(cost @ z)
                # kept when it is the better certificate: exact stationarity at a bound as tight to the gap tolerance
                if _inf_norm(grad2) < res and L - L2 <= TOL_GAP * max(1.0, abs(fx)):
                    return L2, _inf_norm(grad2)
    return L, res


def _linear_form(form, n):
    lin = form.linear
    if lin:
        Ad = np.vstack([e.linear for e, _, _ in lin])
        k = np.array([e.constant for e, _, _ in lin])
        lo = np.array([l for _, l, _ in lin]) - k
        hi = np.array([u for _, _, u in lin]) - k
    else:
        Ad, lo, hi = np.zeros((0, n)), np.zeros(0), np.zeros(0)
    return (Ad, lo, hi) + row_sides(Ad, lo, hi)


def _solve_form(form, n, clock=None):
    """The barrier-method solve of ``form`` over ``n`` columns: a dict with ``status`` ``'optimal'`` (``x``, the
    Lagrangian bound ``L``), ``'infeasible'`` (``reason``), or ``'stalled'`` (``reason``; ``x0`` the strictly
    feasible start when there was one); ``info`` holds the step counts."""
    info = {"mode": "convex", "nodes": 0}
    Ad, lo, hi, up, dn, eq, bad = _linear_form(form, n)
    if bad:
        return {"status": "infeasible", "reason": "a constant row is violated", "info": info}
    if np.any(form.lb > form.ub):
        return {"status": "infeasible", "reason": "a lower bound above its upper bound", "info": info}
    G, h, E, e = inequality_form(Ad, lo, hi, up, dn, eq, form.lb, form.ub)
    f = DenseExpr(form.objective)
    rows = [_Row(b, u, n) for r in form.rows if not isinstance(r, Cone) for b, u in [r]]
    cones = [r for r in form.rows if isinstance(r, Cone)]
    x = _interior_start(G, h, E, e, form.lb, form.ub)
    if not isinstance(x, np.ndarray):
        if getattr(x, "status", None) == "infeasible":
            return {"status": "infeasible", "reason": "the linear rows and bounds are infeasible", "info": info}
        return {"status": "stalled", "reason": "no interior point of the linear rows", "info": info}
    worst = max([r.value(x) for r in rows] + [-c.slack(x) for c in cones] + [-math.inf])
    if worst >= 0:
        if not np.isfinite(worst):
            return {"status": "stalled", "reason": "the linear interior point is outside a nonlinear row's domain",
                        "info": info}
        # phase I (Boyd & Vandenberghe 2004, §11.4.1): min sigma s.t. r_i(x) <= sigma, ||u_c|| <= x_s + sigma, the
        # linear rows, sigma >= -1; stopped at the first point with sigma < 0
        m = n + 1
        x_start = x
        z = np.append(x, worst + 1.0)
        Gz = np.vstack([np.hstack([G, np.zeros((G.shape[0], 1))]), np.append(np.zeros(n), -1.0)[None, :]])
        hz = np.append(h, 1.0)
        Ez = np.hstack([E, np.zeros((E.shape[0], 1))])
        rows1 = [_Row(r.f_body, r.hi, n, shift=n) for r in rows]
        cones1 = [c.padded(1, sigma=True) for c in cones]
        c1 = np.zeros(m)
        c1[-1] = 1.0
        z, t1, nu1, st1, _ = _barrier_method(_Linear(c1), Gz, hz, Ez, e, rows1, cones1, z, clock=clock,
                                             stop=lambda zz: zz[-1] < -1e-9 * max(1.0, abs(worst)))
        info["phase1_newton_steps"] = st1
        x = z[:-1]

        def strictly_inside(x):
            return (all(r.value(x) < 0 for r in rows) and all(c.slack(x) > 0 for c in cones)
                    and (not G.shape[0] or bool(np.all(G @ x - h < 0))))
        if not strictly_inside(x) and not (clock is not None and clock()):
            # the phase-I barrier can be unbounded below along columns no row bounds (a p-norm objective's cone
            # columns s, r_i: their barrier falls as they grow, 1e11 after 39 steps with sigma still > 0 while a
            # row's cone needed sigma < 0); once more inside a box around the start, which only adds rows: a point
            # found is strictly feasible for the program, a failure proves nothing (no infeasibility claim from it)
            M = 1e4 * max(1.0, _inf_norm(x_start))
            I = np.eye(n)
            Gb = np.vstack([Gz, np.hstack([I, np.zeros((n, 1))]), np.hstack([-I, np.zeros((n, 1))])])
            hb = np.concatenate([hz, x_start + M, M - x_start])
            zb, _, _, st2, _ = _barrier_method(_Linear(c1), Gb, hb, Ez, e, rows1, cones1,
                                               np.append(x_start, worst + 1.0), clock=clock,
                                               stop=lambda zz: zz[-1] < -1e-9 * max(1.0, abs(worst)))
            info["phase1_newton_steps"] += st2
            if strictly_inside(zb[:-1]):
                x = zb[:-1]
        if not strictly_inside(x):
            if clock is not None and clock():
                return {"status": "stalled", "info": info, "reason": "the time limit"}
            L1, res1 = _lagrangian_bound(_Linear(c1), Gz, hz, Ez, e, rows1, cones1, z, t1, nu1)
            # the bound less its first-order error (residual times the point's scale), as for the optimum below:
            # "infeasible" is a claim the user cannot check, so it must not rest on an unconverged centering
            L1 -= res1 * max(1.0, _inf_norm(z))
            if res1 <= DUAL_RESIDUAL and L1 > 1e-6:
                return {"status": "infeasible", "info": info,
                            "reason": f"phase I: some row exceeds its side by at least {L1:.3g} at every point "
                                   "(Lagrangian bound of the phase-I problem)"}
            return {"status": "stalled", "info": info,
                        "reason": "phase I found no strictly feasible point of the nonlinear rows (no Slater point?)"}
    if not np.isfinite(f.value(x)):
        return {"status": "stalled", "reason": "the objective is not finite at the interior start", "info": info}
    x0 = x.copy()
    x, t, nu, steps, ok = _barrier_method(f, G, h, E, e, rows, cones, x, clock=clock)
    if clock is not None and clock():
        return {"status": "stalled", "info": info, "reason": "the time limit"}
    info["newton_steps"] = steps
    L, res = _lagrangian_bound(f, G, h, E, e, rows, cones, x, t, nu)
    fx = f.value(x)
    info["dual_residual"] = res
    scale = max(1.0, _inf_norm(f.derivs(x0)[0]))
    # (a method stopped by its step limit still certifies when its Lagrangian bound meets the point: the bound is
    # weak duality at whatever point it reached; power cones at their apex end so, the Newton system near singular)
    if not (res <= DUAL_RESIDUAL * scale and np.isfinite(L) and fx - L <= 10 * TOL_GAP * max(1.0, abs(fx))):
        return {"status": "stalled", "x0": x0, "info": info,
                    "reason": f"the barrier method stopped short of its tolerances (dual residual {res:.2g}, gap "
                           f"{fx - L:.2g}, |x| {_inf_norm(x):.2g})"}
    return {"status": "optimal", "x": x, "L": L, "x0": x0, "info": info}


class _Linear:
    """A linear objective ``c^T z`` in :class:`.primal.DenseExpr`'s interface."""

    def __init__(self, c):
        self.c = c
        self.H = np.zeros((c.size, c.size))

    def value(self, z):
        return float(self.c @ z)

    def derivs(self, z, hessian=True):
        return self.c, (self.H if hessian else None)


def _cone_ray_solve(cost, linear, cones, lb, ub, N):
    """The ray program of :func:`.recession.recession_ray` with second-order cones, by the barrier method: ``z`` or
    None."""
    form = ConvexForm(Expression(N, 0.0, cost), [(Expression(N, 0.0, a), lo, hi) for a, lo, hi in linear],
                      cones, lb, ub)
    out = _solve_form(form, N)
    return out["x"] if out["status"] == "optimal" else None


def _outer_unbounded(outer):
    """True when the user's objective ``c_0 + c g(sigma v)`` tends to ``-inf`` as ``v`` (the form's objective) does
    (no outer atom: ``v`` is the objective). ``c g(sigma v)`` is nondecreasing in ``v``; its limit is ``c`` times ``g``'s
    at the end of the domain that ``sigma v`` runs to (``max geo_mean(x)``: ``-r^(8/5)`` as ``r -> inf``; ``exp`` at
    ``-inf`` is bounded)."""
    if outer is None:
        return True
    k, cc, _c0, sigma = outer
    with np.errstate(all="ignore"):
        if sigma < 0:                       # sigma v -> +inf
            g = k.interval_max(1.0, np.inf) if k.monotone > 0 else k.interval_min(1.0, np.inf)
        elif np.isfinite(k.domain[0]):      # sigma v -> -inf leaves the domain: no such ray
            return False
        else:
            g = k.interval_min(-np.inf, -1.0) if k.monotone > 0 else k.interval_max(-np.inf, -1.0)
    return bool(np.isinf(g) and cc * float(g) < 0)


def _descends_feasibly(program, z, d, complete, aux=None):
    """The program's rows hold at ``z + s d`` (the auxiliary columns at their definitions) and its objective
    decreases, for ``s = 1, 10, 1000``: a check from the outside of the ray that :func:`.recession.recession_ray`
    proved. The definitions themselves are not checked: ``complete`` computes them, and at ``|x| ~ 1e12`` a norm's
    ``e(x) - t^2`` is rounding of order ``1e8``."""
    defs = {a.constraint for a in (program.aux or aux or [])}
    rows = [c for c in program.constraints if c.name not in defs]
    prev = None
    for s in (0.0, 1.0, 10.0, 1e3):
        p = z + s * d
        p = complete(p) if complete is not None else p
        tol = 1e-7 * max(1.0, _inf_norm(p))
        with np.errstate(all="ignore"):
            v = float(program.objective.value(p))
            vals = [c.body.value(p) for c in rows]
        if not (np.isfinite(v) and all(np.isfinite(vals)) and np.all(p >= program.lb - tol)
                and np.all(p <= program.ub + tol)):
            return False
        if any(g < c.lo - tol or g > c.hi + tol for c, g in zip(rows, vals)):
            return False
        if prev is not None and not v < prev:
            return False
        prev = v
    return True


def solve_convex(program, form: ConvexForm, opts, run, complete=None, aux=None):
    """Solve ``form`` (:func:`convex_form` of ``program``); ``complete`` maps a point to the one with the auxiliary
    columns at their definitions (:func:`.solver._completion`), ``aux`` as for :func:`convex_form`.
    ``(status, x, lower, upper, info)`` with status ``'optimal'``, ``'infeasible'`` or ``'unbounded'`` (a feasible point and a ray of :func:`.recession.recession_ray` in
    ``info``), or ``(None, reason)`` when the interior-point method did not reach its tolerances otherwise (the
    caller falls back to the tree)."""
    n = program.n
    N = form.ncols or n
    out = _solve_form(form, N, clock=None if run is None else run.out_of_time)
    for key in ("x", "x0"):     # the program's columns (a p-norm's cone columns dropped)
        if out.get(key) is not None:
            out[key] = out[key][:n]
    info = out["info"]
    if out["status"] == "infeasible":
        info["reason"] = out["reason"]
        return "infeasible", None, math.inf, math.inf, info
    if out["status"] == "stalled":
        if out.get("x0") is None or not _outer_unbounded(form.outer):
            return None, out["reason"]
        d = recession_ray(form, N, _cone_ray_solve)
        if d is None:
            return None, out["reason"]
        d = d[:n]
        z0 = out["x0"]
        zc = complete(z0) if complete is not None else z0
        if program.max_violation(zc) > 1e-7 * max(1.0, _inf_norm(zc)):
            return None, out["reason"]
        # the ray proved by its recession functions (:mod:`.recession`), and checked on the program's own rows
        if not _descends_feasibly(program, z0, d, complete, aux):
            return None, out["reason"] + "; a recession ray was found but failed the check along it"
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
    # the bound less its first-order error (the Lagrangian's gradient residual times the point's scale): with a
    # residual left by the centering, L is the dual function's value only to first order; after the multipliers' LP
    # the residual is at rounding level and the margin negligible, otherwise the gap stays open (no certificate)
    margin = info.get("dual_residual", 0.0) * max(1.0, _inf_norm(x))
    lower = L - margin
    if form.outer is not None:
        kern, cc, c0, sigma = form.outer
        # the bound on u less its first-order error (the Lagrangian's gradient residual times the point's scale): an
        # outer root magnifies that error near the root's 0 (min pnorm(A x - b, 4) at 0: L = 4e-22 with a residual
        # of 1e-9 mapped to 4.4e-6, above the optimum 0)
        u = sigma * (L - margin)
        dlo = kern.domain[0]
        if np.isfinite(dlo):
            u = max(u, dlo)
        with np.errstate(all="ignore"):
            lower = float(c0 + cc * kern.value(np.array([u]))[0])
        if not np.isfinite(lower):
            return None, "the objective's bound is not finite through the outer atom"
    lower = min(lower, upper)
    return "optimal", z, lower, upper, info
