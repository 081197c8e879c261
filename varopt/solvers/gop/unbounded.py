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
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError
from ...lpqp import solve_lp


class Unbounded(ModelStructureError):
    """A GOP subproblem is unbounded; ``z`` a feasible point when known, ``primal`` = (bm, y, xlb, xub)."""

    def __init__(self, msg, primal=None):
        super().__init__(msg)
        self.primal = primal


def _affine_set(program, S):
    """The variables of ``S`` along which every expression is affine (module docstring)."""
    ok = np.zeros(program.n, dtype=bool)
    ok[np.asarray(S, dtype=np.int64)] = True
    inS = ok.copy()
    for e in [program.objective] + [c.body for c in program.constraints]:
        for g in e.groups():
            ok[g.A.indices] = False
            if getattr(g, "A2", None) is not None:
                ok[g.A2.indices] = False
        q = e.quadratic
        both = inS[q.i] & inS[q.j]
        ok[q.i[both]] = False
        ok[q.j[both]] = False
    return np.flatnonzero(ok)


def unbounded_ray(program, z, S, tol=1e-9):
    """A ray ``d`` (full length) proving unboundedness from the feasible ``z`` along ``S``, or None."""
    J = _affine_set(program, S)
    if J.size == 0:
        return None
    g = program.objective.gradient(z)[J]
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
    r = solve_lp(g, A, np.array(lo) if rows else None, np.array(hi) if rows else None, lb, ub)
    if r.status != "optimal":
        return None
    d = np.clip(r.x, lb, ub)
    slope = float(g @ d)
    if not slope < -tol * max(1.0, float(np.abs(g).max())):
        return None
    if rows:
        s = A @ d
        bad = np.maximum(np.where(np.isfinite(hi), s, 0.0), np.where(np.isfinite(lo), -s, 0.0))
        # a constraint drifting by more than a rounding fraction of the descent is no proof
        if np.any(bad > 1e-12 * abs(slope)):
            return None
    out = np.zeros(program.n)
    out[J] = d
    return out


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
