r"""Proof that a program is unbounded below: a feasible point and a feasible ray of descent.

GOP meets unboundedness in two places: the primal problem at some ``y`` is unbounded (HiGHS), or
a relaxed dual is unbounded. Neither proves the program unbounded by itself (a relaxed dual is
only a lower bound; a missing bound may be implied by the constraints), so both raise
:class:`Unbounded` and :func:`unbounded_ray` looks for a certificate:

a feasible point ``z`` (the incumbent, or ``(x, y)`` with ``x`` feasible for the primal at ``y``)
and a direction ``d`` supported on the variables ``S`` along which every expression is *affine*:
no ``S`` variable inside an atom or log-sum-exp argument, no quadratic term with both factors in
``S`` (products with a factor outside ``S``, multipliers ``w`` of atoms, are linear in ``d``).
Then ``e(z + s d) = e(z) + s grad e(z)^T d`` exactly, and the LP

    min grad f(z)^T d   s.t.  grad g_c(z)^T d <= 0 (finite hi_c),  >= 0 (finite lo_c),
                              d_j >= 0 (finite lb_j), d_j <= 0 (finite ub_j), -1 <= d <= 1

with a negative value gives points ``z + s d``, feasible for every ``s >= 0``, whose objective
decreases without bound: the program is unbounded. Without such a ray the original error stands
(e.g. "declare finite bounds"), so a variable that merely lacks a bound is never reported
unbounded.

*Negative curvature* (programs outside GOP's class, docs/gop.md §8b: ``min -x^2 + y``, ``x`` free).
Let ``S'`` be the variables along which every *constraint* is affine and that no objective atom
contains; the objective's quadratic terms may have both factors in ``S'``. Along ``d`` supported on
``S'``, ``f(z + s d) = f(z) + s grad f(z)^T d + s^2 q(d)`` exactly, with ``q(d) = sum_t v_t d_i d_j``
over the objective's terms with both factors in ``S'``. A ``d`` in the cone above (constraints and
bounds hold for every ``s >= 0``) with ``q(d) < 0`` proves unboundedness whatever the slope. Such a
``d`` is sought among the eigenvectors of negative eigenvalues of the form's matrix (used as they are
when the cone holds them: ``x^2 - 3xy + y^2`` with the row ``x == y``), then from each variable ``x_p`` of
a concave diagonal term or a concave square ``c (a^T z + b)^2`` (``c < 0``): the LP
``min sum_{k != p} |d_k|`` over the cone with ``d_p = +-1`` (the sparsest ray moving ``x_p``). Every
candidate is accepted only after ``q(d) < 0`` and the constraints' sides are evaluated at it (plain
squares ``c (a^T z + b)^2`` of the objective count in ``q`` as ``c (a^T d)^2``).

*Flat directions of a convex form.* An eigenvector of a zero eigenvalue, rounded to a dyadic grid, with
``q(d) == 0`` in exact rational arithmetic and ``grad f(z)^T d < 0`` in the cone proves unboundedness as an affine
ray does (``x y + x^2/2 + y^2/2 - x`` along ``(1, -1)``, where every variable is in a quadratic term, so the affine
LP above has no column to move; gopuser review, docs/gop.md).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError
from ...program.atoms import ATOMS
from .clock import timed_lp


class Unbounded(ModelStructureError):
    """A GOP subproblem is unbounded; ``z`` a feasible point when known, ``primal`` = (bm, y, xlb, xub)."""

    def __init__(self, msg, primal=None):
        super().__init__(msg)
        self.primal = primal


def _plain_squares(g):
    """An atom group of squares ``c (a^T z + b)^2`` without multipliers (a quadratic in disguise)."""
    kern = ATOMS.get(getattr(g, "kind", None))
    return kern is not None and kern.quadratic and kern.arity == 1 and bool(np.all(g.mult < 0))


def _affine_set(program, S, objective_quadratic=True):
    """The variables of ``S`` along which every expression is affine (module docstring); with
    ``objective_quadratic=False`` the objective's quadratic terms are allowed."""
    ok = np.zeros(program.n, dtype=bool)
    ok[np.asarray(S, dtype=np.int64)] = True
    inS = ok.copy()
    for k, e in enumerate([program.objective] + [c.body for c in program.constraints]):
        for g in e.groups():
            if k == 0 and not objective_quadratic and _plain_squares(g):
                continue
            ok[g.A.indices] = False
            if getattr(g, "A2", None) is not None:
                ok[g.A2.indices] = False
        if k == 0 and not objective_quadratic:
            continue
        q = e.quadratic
        both = inS[q.i] & inS[q.j]
        ok[q.i[both]] = False
        ok[q.j[both]] = False
    return np.flatnonzero(ok)


def _cone(program, z, J):
    """The recession cone at ``z`` along ``J``: rows ``A`` with sides ``lo``/``hi`` (0 or inf) and
    the box of ``d`` (``0`` on the side of a finite bound, else ``-+1``)."""
    rows, lo, hi = [], [], []
    for c in program.constraints:
        a = c.body.gradient(z)[J]
        if not a.any():
            continue
        rows.append(a)
        lo.append(0.0 if np.isfinite(c.lo) else -np.inf)
        hi.append(0.0 if np.isfinite(c.hi) else np.inf)
    lb = np.where(np.isfinite(program.lb[J]), 0.0, -1.0)
    ub = np.where(np.isfinite(program.ub[J]), 0.0, 1.0)
    A = sp.csr_matrix(np.array(rows)) if rows else None
    return A, np.array(lo), np.array(hi), lb, ub


def _drifts(A, lo, hi, d, scale):
    """True when ``d`` moves a constraint off its side by more than a rounding fraction of ``scale``."""
    if A is None:
        return False
    s = A @ d
    bad = np.maximum(np.where(np.isfinite(hi), s, 0.0), np.where(np.isfinite(lo), -s, 0.0))
    return bool(np.any(bad > 1e-12 * scale))


def curvature_ray(program, z, S, tol=1e-9):
    """A ray ``d`` along which the objective is a concave parabola in ``s`` and every constraint
    stays satisfied (module docstring, *negative curvature*), or None."""
    J = _affine_set(program, S, objective_quadratic=False)
    if J.size == 0:
        return None
    pos = -np.ones(program.n, dtype=np.int64)
    pos[J] = np.arange(J.size)
    q = program.objective.quadratic
    keep = (pos[q.i] >= 0) & (pos[q.j] >= 0)
    qi, qj, qv = pos[q.i[keep]], pos[q.j[keep]], np.asarray(q.v, dtype=float)[keep]
    sq = [(g.coef, g.A[:, J]) for g in program.objective.atoms if _plain_squares(g)]
    # the variables of the concave diagonal terms and of the concave squares: the rays to try
    starts = set(qi[(qi == qj) & (qv < 0)].tolist())
    for coef, AJ in sq:
        for r in np.flatnonzero(coef < 0):
            starts.update(AJ[r].indices.tolist())

    def curv(d):
        return float(np.sum(qv * d[qi] * d[qj])) + sum(float(coef @ (AJ @ d) ** 2) for coef, AJ in sq)
    scale = max([1.0, float(np.abs(qv).max()) if qv.size else 0.0] + [float(np.abs(c).max()) for c, _ in sq if c.size])
    A, lo, hi, lb, ub = _cone(program, z, J)
    m = J.size

    def accept(d):
        k = curv(d)
        if not k < -tol * scale or _drifts(A, lo, hi, d, abs(k)):
            return None
        out = np.zeros(program.n)
        out[J] = d
        return out
    if m <= 200:
        # the directions of negative curvature of the whole form (x^2 - 3xy + y^2 along x = y):
        # eigenvectors of negative eigenvalues, used as they are when the cone holds them
        H = np.zeros((m, m))
        np.add.at(H, (qi, qj), 0.5 * qv)
        np.add.at(H, (qj, qi), 0.5 * qv)
        for coef, AJ in sq:
            D = AJ.toarray()
            H += D.T @ (coef[:, None] * D)
        lam, V = np.linalg.eigh(H)
        for t in np.flatnonzero(lam < -tol * scale):
            for sign in (1.0, -1.0):
                d = sign * V[:, t] / np.abs(V[:, t]).max()
                d[np.abs(d) < 1e-12] = 0.0
                if np.all(d >= lb) and np.all(d <= ub):
                    out = accept(d)
                    if out is not None:
                        return out
        # a flat direction of a convex form with descent (x*y + x^2/2 + y^2/2 - x along (1, -1)): q(d) == 0
        # *exactly* (rational arithmetic on the float coefficients, d rounded to a dyadic grid), so the objective
        # is affine along d, and the slope decides (module docstring, affine rays)
        g = program.objective.gradient(z)[J]
        for t in np.flatnonzero(np.abs(lam) <= tol * scale):
            for sign in (1.0, -1.0):
                d = np.round(sign * V[:, t] / np.abs(V[:, t]).max() * 2.0 ** 20) / 2.0 ** 20
                slope = float(g @ d)
                if not (np.all(d >= lb) and np.all(d <= ub)) or not slope < -tol * max(1.0, float(np.abs(g).max())):
                    continue
                if _exact_curvature(qi, qj, qv, sq, d) != 0 or _drifts(A, lo, hi, d, abs(slope)):
                    continue
                out = np.zeros(program.n)
                out[J] = d
                return out
    # d = u - w, u, w >= 0: min sum_{k != p} (u_k + w_k), d_p fixed at +-1
    A2 = None if A is None else sp.hstack([A, -A]).tocsr()
    for p in sorted(starts):
        for sign in (1.0, -1.0):
            if (sign > 0 and ub[p] <= 0) or (sign < 0 and lb[p] >= 0):
                continue
            c = np.ones(2 * m)
            c[p] = c[m + p] = 0.0
            ulo, uhi = np.zeros(m), np.maximum(ub, 0.0)
            wlo, whi = np.zeros(m), np.maximum(-lb, 0.0)
            ulo[p] = uhi[p] = max(sign, 0.0)
            wlo[p] = whi[p] = max(-sign, 0.0)
            r = timed_lp(c, A2, lo if A is not None else None, hi if A is not None else None,
                         np.concatenate([ulo, wlo]), np.concatenate([uhi, whi]))
            if r.status != "optimal":
                continue
            out = accept(np.clip(r.x[:m] - r.x[m:], lb, ub))
            if out is not None:
                return out
    return None


def _exact_curvature(qi, qj, qv, sq, d):
    """``q(d)`` of :func:`curvature_ray` in exact rational arithmetic (floats are dyadic rationals)."""
    from fractions import Fraction
    D = [Fraction(float(v)) for v in d]
    k = sum((Fraction(float(v)) * D[i] * D[j] for i, j, v in zip(qi.tolist(), qj.tolist(), qv.tolist())), Fraction(0))
    for coef, AJ in sq:
        AJ = AJ.tocsr()
        for r in range(AJ.shape[0]):
            lo, hi = AJ.indptr[r], AJ.indptr[r + 1]
            ad = sum((Fraction(float(a)) * D[c] for a, c in zip(AJ.data[lo:hi].tolist(), AJ.indices[lo:hi].tolist())),
                     Fraction(0))
            k += Fraction(float(coef[r])) * ad * ad
    return k


def unbounded_ray(program, z, S, tol=1e-9):
    """A ray ``d`` (full length) proving unboundedness from the feasible ``z`` along ``S``, or None:
    a descent direction along which every expression is affine, else one of negative curvature."""
    J = _affine_set(program, S)
    if J.size:
        g = program.objective.gradient(z)[J]
        A, lo, hi, lb, ub = _cone(program, z, J)
        # stopped by the time limit: OutOfTime, not "no ray"
        r = timed_lp(g, A, lo if A is not None else None, hi if A is not None else None, lb, ub)
        if r.status == "optimal":
            d = np.clip(r.x, lb, ub)
            slope = float(g @ d)
            # a constraint drifting by more than a rounding fraction of the descent is no proof
            if slope < -tol * max(1.0, float(np.abs(g).max())) and not _drifts(A, lo, hi, d, abs(slope)):
                out = np.zeros(program.n)
                out[J] = d
                return out
    return curvature_ray(program, z, S, tol)


def prove_unbounded(program, part, incumbent, exc: Unbounded):
    """``(z, d)`` certifying unboundedness, or None (see the module docstring)."""
    points = []
    if incumbent is not None:
        points.append(np.asarray(incumbent, dtype=float))
    if exc.primal is not None:
        from .primal import feasibility_primal
        bm, y, xlb, xub = exc.primal
        fp = feasibility_primal(bm, y, xlb, xub)
        z = np.zeros(program.n)
        z[bm.xi], z[bm.yi] = fp.x, y
        points.append(z)
    for z in points:
        if program.max_violation(z) > 1e-7 * max(1.0, float(np.abs(z).max(initial=0.0))):
            continue
        for S in (part.y, part.x, np.arange(program.n)):
            d = unbounded_ray(program, z, S)
            if d is not None:
                return z, d
    return None
