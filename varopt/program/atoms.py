r"""The atom kernel table: the math of every convex atom ``g`` of an :class:`~.terms.AtomGroup`.

Every solver asks this table (``ATOMS[kind]``) for values, derivatives, domains and interval
bounds, so adding an atom kind means one entry here plus its recognition in the front-ends.
All functions are vectorized over numpy arrays of arguments.

=================  =====================  ==================  ====================  ============
kind               ``g``                  domain              ``g'``, ``g''``       monotone
=================  =====================  ==================  ====================  ============
``xlogx``          ``u log u``            ``u >= 0``          ``log u + 1``, ``1/u``  no
``neglog``         ``-log u``             ``u > 0``           ``-1/u``, ``1/u^2``   decreasing
``exp``            ``exp u``              all ``u``           ``exp u``, ``exp u``  increasing
``square``         ``u^2``                all ``u``           ``2u``, ``2``         no
``quad_over_lin``  ``u^2 / v``            ``v > 0``           see below             no
``abs``            ``|u|``                all ``u``           ``sign u``, ``0``     no
``sqpos``          ``max(u, 0)^2``        all ``u``           ``2 max(u, 0)``,      nondecr.
                                                              ``2 [u > 0]``
=================  =====================  ==================  ====================  ============

``abs`` is the one nonsmooth atom (``smooth = False``): ``d1`` returns the subgradient
``sign u`` (0 at ``u = 0``) and ``d2`` the almost-everywhere second derivative 0; a solver that
needs second derivatives must check ``smooth``. It is the Laplace likelihood ``|y - x^T w| / b``
of the KL-proximal solver (Khan, Baque, Fleuret & Fua 2015), whose Gaussian expectations are
smooth.

``sqpos`` is the squared hinge ``max(u, 0)^2``: the L2-SVM loss ``max(1 - y x^T w, 0)^2`` and the seven pieces of
CVXPY's ``log_normcdf`` (``-sum_k a_k^2 max(b_k - u, 0)^2``). It is differentiable (``C^1``, ``smooth = True``: ``d1``
is its gradient) but its second derivative jumps at 0 (``twice_smooth = False``): ``d2`` returns the one-sided value
``2 [u > 0]`` (0 at ``u = 0``), an element of Clarke's generalized Hessian, so a Newton-type step on it is a
semismooth Newton step (Mangasarian 2002 for the L2-SVM). The front-ends emit it only for solvers that list it in
``native_atoms`` (:class:`~varopt.registry.Solver`); every other solver receives the epigraph form ``t >= u``,
``t >= 0``, ``t^2`` (:mod:`varopt.program.epigraph_lift`), as before the atom existed.

``user_open`` marks the atoms whose domain argument must be strictly positive in the point
loaded into a user's model: every way of writing them then evaluates (``phi*log(phi)`` in Pyomo
raises at ``phi = 0``; ``-log(x)`` and ``u**2/v`` at 0 too).

Conventions of :meth:`AtomKernel.value`: ``0 log 0 = 0``, ``-log 0 = +inf`` (the closure of the
convex function), NaN outside the domain. ``quad_over_lin`` is the two-argument atom
``g(u, v) = u^2/v`` (Boyd & Vandenberghe 2004, §3.1.5) with gradient
``(2u/v, -(u/v)^2)`` and Hessian blocks ``g_uu = 2/v``, ``g_uv = -2u/v^2``, ``g_vv = 2u^2/v^3``.

Interval bounds: for ``u`` in ``[lo, hi]`` (infinite ends allowed) ``interval_min`` and
``interval_max`` return ``min g`` and ``max g`` (``+inf`` when unbounded). A convex ``g``
attains its maximum at an end point and its minimum at the clipped stationary point
(``u = 1/e`` for ``u log u``, ``u = 0`` for ``u^2``). Tangent cuts
``g(u0) + g'(u0) (u - u0)`` underestimate a convex ``g`` everywhere; ``tangent_point``
lifts ``u0`` off the boundary of an open/singular domain so ``g'(u0)`` stays finite.
"""
from __future__ import annotations

import numpy as np

_EXP_M1 = np.exp(-1.0)


class AtomKernel:
    """Base of the kernels. Attributes are facts the solvers query."""

    kind: str = ""
    #: number of affine arguments: 1 for ``g(u)``, 2 for ``g(u, v)``
    arity: int = 1
    #: text of one row for messages; ``{u}`` (and ``{v}``) are replaced by the arguments
    text: str = ""
    #: domain of ``u`` (of ``v`` for arity 2) as ``(lo, hi, lo_closed)``; ``hi`` is always open
    domain: tuple = (-np.inf, np.inf, False)
    convex: bool = True
    #: ``g(u) = max(u, -u)``: a constraint row ``c g(u) + l <= r`` (``c > 0``) is the two linear rows
    #: ``+-c u + l <= r`` (ipsa's box form, :meth:`~varopt.program.Program.split_abs_rows`)
    max_of_pm_u: bool = False
    #: +1 nondecreasing, -1 nonincreasing, 0 neither (over the domain, in ``u``)
    monotone: int = 0
    #: for arity 2, +1 / -1 when ``g(u, v)`` is nondecreasing / nonincreasing in ``v`` for every fixed ``u``
    #: (``u^2 / v``: -1), 0 when neither
    monotone_v: int = 0
    #: where the recession function ``g_inf(s) = lim_{t -> inf} (g(u + t s) - g(u)) / t`` vanishes: +1 on ``s >= 0``,
    #: -1 on ``s <= 0``, 0 only at ``s = 0``; it is taken as ``+inf`` elsewhere. Exact for the atoms that grow
    #: superlinearly or leave their domain off that set; an inner description for ``|u|`` (``g_inf(s) = |s|``) and
    #: ``u^2 / v`` (``s^2 / r``), so a ray built from it lies in the true recession cone (gop's
    #: :mod:`~varopt.solvers.gop.recession`)
    recession: int = 0
    #: for arity 2, the same in ``v`` at ``s = 0`` (``u^2 / v``: +1, ``g_inf(0, r) = 0`` for ``r >= 0``)
    recession_v: int = 0
    #: ``g(u) = u^2`` exactly: rows ``c (a^T x + b)^2`` expand into a quadratic form
    quadratic: bool = False
    #: ``g(-u) = g(u)`` (``u^2``, ``u^2 / v``, ``|u|``): a convex even ``g`` is nondecreasing in ``u`` on ``u >= 0``, so
    #: an epigraph column of a nonnegative maximum may be its argument (``quad_over_lin(pos(u), t)``,
    #: :func:`varopt.program.epigraph_lift.check_positions`)
    even: bool = False
    #: ``g(u) = max(u, 0)^2`` exactly (``g' = 2 max(u, 0)``, ``g'' = 2 [u > 0]``): ipsa's compiled per-sample loop
    #: evaluates such rows in place (:mod:`varopt.solvers.ipsa.kernel_steps`)
    squared_hinge: bool = False
    #: the CVXPY hinge forms a solver receives as rows of this kind when it lists the kind in
    #: :attr:`varopt.registry.Solver.native_atoms` (other solvers get epigraph columns); "" when there are none.
    #: A solver that needs every term to be a function of one affine predictor (ipsa, klprox) lists every kind with
    #: such forms (:data:`varopt.registry.PREDICTOR_ATOMS`); ``varopt solvers NAME`` prints the text
    hinge_forms: str = ""
    #: tangent points are lifted to at least this value (None: any point of the domain)
    tangent_floor: float = None
    #: ``True`` when the domain argument must lie *strictly* above ``domain[0]`` for every way a user
    #: writes the atom to evaluate (``u*log(u)`` at ``u = 0`` raises in Pyomo although ``0 log 0 = 0``
    #: here); a solution loaded into a user's model is moved inside (:mod:`varopt.program.evaluable`)
    user_open: bool = False
    #: ``False`` for atoms with kinks (``abs``): ``d1`` is then a subgradient and ``d2`` holds only
    #: almost everywhere. ``True`` means differentiable everywhere (``C^1``): ``d1`` is the gradient
    smooth: bool = True
    #: ``False`` when ``g''`` is discontinuous (``max(u, 0)^2`` at 0): ``d2`` is then a one-sided second derivative
    #: (an element of the generalized Hessian), exact except on a null set, and a method whose convergence rests on a
    #: Lipschitz Hessian (Newton's quadratic rate) gets only its semismooth version
    twice_smooth: bool = True
    #: ``g(s t) = g(s) + g(t)`` for ``s, t`` in the domain (``-log``): a product in the argument splits
    #: into a sum of atoms (gop's stick-breaking presolve, docs/gop.md §2b)
    splits_products: bool = False

    def user_evaluable(self, u, margin=0.0):
        """True where a user's own evaluation of the atom at domain argument ``u`` is defined; with
        ``user_open`` the argument must exceed ``domain[0]`` by more than ``margin`` (rounding)."""
        lo, _, closed = self.domain
        if not np.isfinite(lo):
            return np.ones(np.shape(u), dtype=bool)
        if self.user_open or not closed:
            return u > lo + margin
        return u >= lo

    def in_domain(self, u):
        lo, _, closed = self.domain
        return u >= lo if closed else u > lo

    def tangent_point(self, u):
        return u if self.tangent_floor is None else np.maximum(u, self.tangent_floor)

    def derivs(self, u, order: int):
        """``(g, g', g'')`` up to ``order`` (later entries None)."""
        g = self.value(u)
        d1 = self.d1(u) if order >= 1 else None
        d2 = self.d2(u) if order >= 2 else None
        return g, d1, d2

    def deriv(self, u, order: int):
        """``g``, ``g'`` or ``g''`` (``order`` 0, 1, 2)."""
        return (self.value, self.d1, self.d2)[order](u)

    def sublevel(self, th: float):
        """An interval ``(lo, hi)`` holding every ``u`` of the domain with ``g(u) <= th`` (a convex ``g`` has an
        interval as sublevel set), widened outwards by rounding; None where the kernel has no closed form, or
        ``th`` is below the infimum of ``g`` (an empty set: left to the LP) or not finite."""
        return None


def _outward(r, side):
    """``r`` moved outwards (``side`` +1: up, -1: down) by more than the rounding of a ``log``, ``exp`` or ``**``."""
    return float(r + side * 1e-12 * max(1.0, abs(r)))


class XLogX(AtomKernel):
    """``g(u) = u log u`` on ``u >= 0`` (``0 log 0 = 0``); ``g' = log u + 1``, ``g'' = 1/u``; min ``-1/e`` at ``1/e``."""

    kind, text, domain, tangent_floor = "xlogx", "({u})*log({u})", (0.0, np.inf, True), 1e-10
    user_open = True  # written u*log(u) (Pyomo, numpy) it does not evaluate at 0

    def value(self, u):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(u > 0, u * np.log(np.where(u > 0, u, 1.0)), np.where(u == 0, 0.0, np.nan))

    def d1(self, u):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(u) + 1.0

    def d2(self, u):
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1.0 / u

    def interval_min(self, lo, hi):
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.clip(_EXP_M1, np.maximum(lo, 0), hi)
            return np.where(m > 0, m * np.log(np.where(m > 0, m, 1)), 0.0)

    def interval_max(self, lo, hi):
        a, b = self.value(np.maximum(lo, 0.0)), self.value(hi)
        return np.where(np.isinf(hi), np.inf, np.maximum(a, b))


class NegLog(AtomKernel):
    """``g(u) = -log u`` on ``u > 0`` (``-log 0 = +inf``); ``g' = -1/u``, ``g'' = 1/u^2``; decreasing."""

    kind, text, domain, monotone, tangent_floor = "neglog", "-log({u})", (0.0, np.inf, False), -1, 1e-8
    recession = 1   # -log(u + t s) grows like log t for s > 0
    user_open = True
    splits_products = True

    def value(self, u):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(u > 0, -np.log(np.where(u > 0, u, 1.0)), np.where(u == 0, np.inf, np.nan))

    def d1(self, u):
        with np.errstate(divide="ignore", invalid="ignore"):
            return -1.0 / u

    def d2(self, u):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return 1.0 / (u * u)

    def interval_min(self, lo, hi):
        with np.errstate(divide="ignore", invalid="ignore"):
            return -np.log(hi)

    def interval_max(self, lo, hi):
        return self.value(np.maximum(lo, 0.0))

    def sublevel(self, th):
        # -log u <= th  <=>  u >= exp(-th)
        return (_outward(np.exp(-th), -1), np.inf) if np.isfinite(th) else None


class Exp(AtomKernel):
    """``g(u) = exp u`` on all ``u``; ``g' = g'' = exp u``; increasing."""

    kind, text, monotone = "exp", "exp({u})", 1
    recession = -1  # exp(u + t s) -> 0 for s < 0

    def value(self, u):
        with np.errstate(over="ignore"):
            return np.exp(u)

    d1 = d2 = value

    def derivs(self, u, order):
        g = self.value(u)
        return g, g if order >= 1 else None, g if order >= 2 else None

    def interval_min(self, lo, hi):
        with np.errstate(over="ignore"):
            return np.where(np.isfinite(lo), np.exp(lo), 0.0)

    def interval_max(self, lo, hi):
        return self.value(hi)

    def sublevel(self, th):
        # exp u <= th  <=>  u <= log th (th > 0; empty otherwise)
        return (-np.inf, _outward(np.log(th), 1)) if 0 < th < np.inf else None


class Square(AtomKernel):
    """``g(u) = u^2`` on all ``u``; ``g' = 2u``, ``g'' = 2``; min 0 at ``u = 0``."""

    kind, text, quadratic, even = "square", "({u})^2", True, True

    # no errstate context: the least-squares case is hot and cannot raise floating point errors
    def value(self, u):
        return u * u

    def d1(self, u):
        return 2.0 * u

    def d2(self, u):
        return np.full_like(u, 2.0)

    def interval_min(self, lo, hi):
        return np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(lo * lo, hi * hi))

    def interval_max(self, lo, hi):
        return np.maximum(lo * lo, hi * hi)


class QuadOverLin(AtomKernel):
    """``g(u, v) = u^2 / v`` on ``v > 0`` (jointly convex); gradient ``(2u/v, -(u/v)^2)``,
    Hessian ``[[2/v, -2u/v^2], [-2u/v^2, 2u^2/v^3]]``.

    Interval bounds over ``u in [lo, hi]``, ``v in [vlo, vhi]`` (default ``v`` in ``(0, inf)``):
    min ``min_u u^2 / vhi`` (0 when ``[lo, hi]`` holds 0), max ``max_u u^2 / vlo``.
    """

    kind, text, arity, domain = "quad_over_lin", "({u})^2/({v})", 2, (0.0, np.inf, False)
    even = True   # in u
    monotone_v = -1
    recession_v = 1
    user_open = True

    def value(self, u, v):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(v > 0, u * u / np.where(v > 0, v, 1.0), np.nan)

    def grad(self, u, v):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return 2.0 * u / v, -(u / v) ** 2

    def hess(self, u, v):
        """``(g_uu, g_uv, g_vv)``."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return 2.0 / v, -2.0 * u / v ** 2, 2.0 * u ** 2 / v ** 3

    def interval_min(self, lo, hi, vlo=0.0, vhi=np.inf):
        with np.errstate(divide="ignore", invalid="ignore"):
            u2 = np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(lo * lo, hi * hi))
            return np.where(u2 == 0, 0.0, u2 / vhi)

    def interval_max(self, lo, hi, vlo=0.0, vhi=np.inf):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            u2 = np.maximum(lo * lo, hi * hi)
            pos = np.asarray(vlo) > 0
            return np.where(u2 == 0, 0.0, np.where(pos, u2 / np.where(pos, vlo, 1.0), np.inf))


class Abs(AtomKernel):
    """``g(u) = |u|`` on all ``u``; subgradient ``sign u`` (0 at 0), ``g'' = 0`` almost everywhere;
    min 0 at ``u = 0``; nonsmooth (``smooth = False``)."""

    kind, text, smooth, even = "abs", "abs({u})", False, True
    twice_smooth = False   # (read by no solver: smooth = False already says more)
    max_of_pm_u = True
    hinge_forms = ("maximum(a, b) of affine a, b as (a + b)/2 + abs(a - b)/2 (hinges pos(u), maximum(u, 0), neg(u)); "
                   "minimum(a, b) as (a + b)/2 - abs(a - b)/2")

    def value(self, u):
        return np.abs(u)

    def d1(self, u):
        return np.sign(u).astype(float)

    def d2(self, u):
        return np.zeros(np.shape(u))

    def interval_min(self, lo, hi):
        return np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(np.abs(lo), np.abs(hi)))

    def interval_max(self, lo, hi):
        return np.maximum(np.abs(lo), np.abs(hi))

    def sublevel(self, th):
        return (-th, th) if 0 <= th < np.inf else None


class SqPos(AtomKernel):
    """``g(u) = max(u, 0)^2`` on all ``u`` (the squared hinge); ``g' = 2 max(u, 0)``, ``g'' = 2 [u > 0]`` (one-sided,
    0 at ``u = 0``); nondecreasing; min 0 on ``u <= 0``; ``C^1`` but not ``C^2`` (``twice_smooth = False``).

    Recession function ``g_inf(s) = 0`` for ``s <= 0`` and ``+inf`` for ``s > 0`` (exact: ``recession = -1``).
    Sublevel sets ``{g <= th} = (-inf, sqrt(th)]`` for ``th >= 0``. Tangent cuts ``g(u0) + g'(u0) (u - u0)`` are
    valid at every ``u0`` (``g'`` is finite everywhere)."""

    kind, text, monotone = "sqpos", "pos({u})^2", 1
    squared_hinge = True
    hinge_forms = "square(pos(u)), sum_squares(pos(u)), maximum(u, 0)**2 and the like; log_normcdf(u)"
    recession = -1      # max(u + t s, 0)^2 stays 0 for s < 0 (and s = 0), grows like t^2 for s > 0
    twice_smooth = False

    def value(self, u):
        p = np.maximum(u, 0.0)
        return p * p

    def d1(self, u):
        return 2.0 * np.maximum(u, 0.0)

    def d2(self, u):
        return np.where(np.asarray(u) > 0, 2.0, 0.0)

    def interval_min(self, lo, hi):
        # nondecreasing: the minimum is at the lower end (0 for lo <= 0, also lo = -inf)
        return self.value(np.asarray(lo, dtype=float))

    def interval_max(self, lo, hi):
        return self.value(np.asarray(hi, dtype=float))

    def sublevel(self, th):
        # max(u, 0)^2 <= th  <=>  u <= sqrt(th) (th >= 0; empty for th < 0)
        return (-np.inf, _outward(np.sqrt(th), 1)) if 0 <= th < np.inf else None


class _AtomTable(dict):
    """``kind -> kernel`` with the parameterised power family (:mod:`varopt.program.powers`):
    ``ATOMS["power(3.0)"]`` is created on first use, so a program may hold any exponent."""

    def __missing__(self, kind):
        from .powers import power_kernel
        k = power_kernel(kind)
        if k is None:
            raise KeyError(kind)
        return k

    def get(self, kind, default=None):
        try:
            return self[kind]
        except KeyError:
            return default

    def __contains__(self, kind):
        return self.get(kind) is not None


#: kind -> kernel; the single source of the atom kinds (plus the ``power(p)`` family)
ATOMS = _AtomTable({k.kind: k for k in (XLogX(), NegLog(), Exp(), Square(), QuadOverLin(), Abs(), SqPos())})
#: the fixed kinds; ``kind in ATOMS`` also accepts the power family
ATOM_KINDS = tuple(ATOMS)
