r"""Move a solution into the domain where the user's own model evaluates.

A solver may return a point on the boundary of an atom's domain: GOP's certified BGMM optimum has
``phi_ik = 0`` exactly, where ``phi*log(phi)`` (``0 log 0 = 0`` for the solver) raises ``math
domain error`` in Pyomo's ``value()``. Atoms whose table entry says ``user_open``
(:mod:`varopt.program.atoms`) need their domain argument strictly positive in the loaded point.

:func:`evaluable_point` returns the nearest such point along a segment, checked by evaluation:

1. if every atom argument of the objective and the constraints is already strictly inside
   (beyond its rounding margin, :mod:`varopt.program.rounding`, when the argument is not a single
   variable), ``x`` is returned unchanged;
2. otherwise an *anchor* ``x_c`` is found by the LP ``max s`` s.t. ``u_r(z) >= s`` for every such
   argument, ``s <= 1``, the linear constraints and the bounds;
3. the points ``z(t) = x + t (x_c - x)`` for ``t = 1e-15, 1e-13, ..., 1e-1, 1`` are tried in order.
   The arguments are affine, so ``u_r(z(t)) = (1-t) u_r(x) + t u_r(x_c) >= t s > 0`` and the linear
   constraints and bounds hold along the whole segment (convexity); other constraints are
   re-checked. The first ``z(t)`` that is evaluable, feasible to the tolerance ``x`` had, and whose
   objective is within ``tol`` of ``f(x)`` is returned.

When no candidate keeps the objective within ``tol`` the best evaluable candidate is returned and
the note says by how much the objective moved; when no strictly interior point exists (e.g. a
variable fixed at 0 inside ``log``) ``x`` is returned with a note.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .atoms import ATOMS
from .rounding import slack_margin

STEPS = (1e-15, 1e-13, 1e-11, 1e-9, 1e-7, 1e-5, 1e-3, 1e-1, 1.0)


def _domain_rows(program):
    """``(A, b, exact)`` of every argument that must stay strictly inside its domain (``A z + b > lo``
    with ``lo = 0`` for every such atom of the table; ``exact``: the argument is one variable times
    a positive number, evaluated without rounding)."""
    As, bs = [], []
    exprs = [program.objective] + [c.body for c in program.constraints]
    for e in exprs:
        for g in e.atoms:
            kern = ATOMS[g.kind]
            if not (kern.user_open and np.isfinite(kern.domain[0])):
                continue
            A, b = (g.A, g.b) if kern.arity == 1 else (g.A2, g.b2)
            As.append(sp.csr_matrix(A))
            bs.append(np.asarray(b, dtype=float) - kern.domain[0])
    if not As:
        return None
    A = sp.vstack(As, format="csr")
    b = np.concatenate(bs)
    nnz = np.diff(A.indptr)
    exact = (nnz == 1) & (b == 0)
    exact[exact] = A.data[A.indptr[:-1][exact]] > 0
    return A, b, exact


def _inside(A, b, exact, z) -> bool:
    u = A @ z + b
    margin = np.where(exact, 0.0, slack_margin(np.diff(A.indptr) + 1, abs(A) @ np.abs(z) + np.abs(b)))
    return bool(np.all(u > margin))


def evaluable_point(program, x, tol: float):
    """``(z, note)``: ``z`` the point to load (``x`` itself when it evaluates), ``note`` ``None`` or a
    sentence for the result's info (see the module docstring). ``tol`` is the objective tolerance
    (the solver's reported gap tolerance, in the program's minimisation sense)."""
    x = np.asarray(x, dtype=float)
    rows = _domain_rows(program)
    if rows is None or _inside(*rows, x):
        return x, None
    A, b, exact = rows
    with np.errstate(invalid="ignore"):
        f0 = program.objective.value(x)
    n = program.n
    # anchor: the most interior point of the linear constraints, bounds and domain rows
    L, lo, hi, _ = program.linear_constraints()
    m = A.shape[0]
    AA = sp.vstack([sp.hstack([L, sp.csr_matrix((L.shape[0], 1))]), sp.hstack([A, -np.ones((m, 1))])], format="csr")
    rlo = np.concatenate([lo, -b])
    rhi = np.concatenate([hi, np.full(m, np.inf)])
    c = np.zeros(n + 1)
    c[-1] = -1.0
    from ..lpqp import solve_lp  # the LP layer imports the program package: import on use

    r = solve_lp(c, AA, rlo, rhi, np.append(program.lb, -np.inf), np.append(program.ub, 1.0))
    if r.status != "optimal" or not r.x[-1] > 1e-9:
        return x, ("the solution lies on the boundary of the domain of a term (e.g. log at 0) and no point "
                   "strictly inside satisfies the linear constraints and bounds; it was loaded as found")
    xc = np.clip(r.x[:n], program.lb, program.ub)
    vtol = max(program.max_violation(x), 1e-9 * max(1.0, float(np.abs(x).max(initial=0.0))))
    best = None
    for t in STEPS:
        z = np.clip(x + t * (xc - x), program.lb, program.ub)
        if not _inside(A, b, exact, z):
            continue
        f = program.objective.value(z)
        if not np.isfinite(f) or program.max_violation(z) > vtol:
            continue
        if abs(f - f0) <= tol or not np.isfinite(f0):  # f0 NaN: 0 * log 0 products at x itself
            return z, (f"moved into the domain of every term (strictly inside, step {t:g} towards an interior "
                       f"point); objective changed by {f - f0:.3g} (tolerance {tol:.3g})")
        if best is None or f < best[1]:
            best = (z, f, t)
    if best is None:
        return x, ("the solution lies on the boundary of the domain of a term (e.g. log at 0); no nearby point "
                   "strictly inside kept the constraints: it was loaded as found")
    z, f, t = best
    return z, (f"moved into the domain of every term (step {t:g}); the objective changed by {f - f0:.3g}, MORE "
               f"than the tolerance {tol:.3g}: the loaded point is the best evaluable one found")
