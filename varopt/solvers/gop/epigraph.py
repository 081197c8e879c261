r"""Epigraph form of the nonsmooth atom rows (``abs``) for gop.

GOP's primal problems, relaxed duals and tree relaxations need smooth convex rows. A row
``c |u|`` (``u = a^T z + b``) that enters a minimisation with ``c >= 0`` (the objective, or the
body of a ``<=`` constraint; ``c <= 0`` in a ``>=`` constraint) is replaced by ``c t`` with a new
column ``t >= 0`` and the two linear rows ``t - u >= 0``, ``t + u >= 0``, i.e. ``t >= |u|``.

Validity: every feasible point of the original program lifts to a feasible point of the
epigraph program with the same objective (``t = |u|``); conversely, for a feasible point of
the epigraph program, ``c |u| <= c t`` row by row, so dropping ``t`` gives a feasible point of
the original program whose objective is not larger. Hence both programs have the same optimal
value, a lower bound of one is a lower bound of the other, and an incumbent of the epigraph
program is (after dropping ``t``) an incumbent of the original program at least as good.

Rows where the sign is wrong (``-|u|`` in the objective, ``|u|`` in an equality or a ``>=``
row with ``c > 0``, a multiplier ``w |u|``) make the program nonconvex in a way gop does not
relax: they are rejected with a :class:`~varopt.errors.ModelStructureError` naming the row.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError
from ...program import Constraint, Expression, Program
from ...program.atoms import ATOMS
from ...program.terms import AtomGroup, LseGroup, QuadraticTerms


def _widen(e: Expression, n2: int) -> Expression:
    def pad(A):
        return None if A is None else sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.shape[0], n2))
    q = e.quadratic
    atoms = [AtomGroup(g.kind, g.coef, pad(g.A), g.b, g.mult, pad(g.A2), g.b2, g.label) for g in e.atoms]
    lse = [LseGroup(pad(g.A), g.b, g.seg, g.coef, g.mult, g.label) for g in e.lse]
    return Expression(n2, e.constant, np.concatenate([e.linear, np.zeros(n2 - e.n)]),
                      QuadraticTerms(q.i, q.j, q.v, n2), atoms, lse)


def _nonsmooth(e: Expression):
    return [g for g in e.atoms if not ATOMS[g.kind].smooth]


def abs_epigraph(program: Program):
    """``(program2, n, U, b)``: ``program2`` has every nonsmooth row in epigraph form (its first ``n``
    columns are the columns of ``program``, auxiliary information dropped; column ``n + r`` is
    ``t_r >= |U_r z + b_r|``); ``None`` when the program has no nonsmooth row."""
    places = [(program.objective_label, program.objective, 1.0)]
    for c in program.constraints:
        places.append((f"constraint {c.name}", c.body, None))
    if not any(_nonsmooth(e) for _, e, _ in places):
        return None
    n = program.n
    rows = []  # (place index, group, row) of every epigraph column
    for k, (where, e, _) in enumerate(places):
        sign = 1.0
        if k > 0:
            c = program.constraints[k - 1]
            if np.isfinite(c.hi) and not np.isfinite(c.lo):
                sign = 1.0
            elif np.isfinite(c.lo) and not np.isfinite(c.hi):
                sign = -1.0
            elif _nonsmooth(e):
                raise ModelStructureError(f"{where}: gop handles {_text(e)} only in the objective or on the "
                                          "smaller side of an inequality (an equality or range row makes it "
                                          "nonconvex)")
        for g in _nonsmooth(e):
            bad = (g.mult >= 0) | (sign * g.coef < 0)
            if bad.any():
                raise ModelStructureError(
                    f"{where}: gop needs {ATOMS[g.kind].text.format(u='u')} with a nonnegative weight in a "
                    "minimisation (convex; a concave -|u| or a multiplied w*|u| is not supported)")
            rows += [(k, g, r) for r in range(len(g))]
    m = len(rows)
    n2 = n + m
    new = [_widen(e, n2) for _, e, _ in places]
    for e in new:
        e.atoms = [g for g in e.atoms if ATOMS[g.kind].smooth]
    extra = []
    for t, (k, g, r) in enumerate(rows):
        col = n + t
        new[k].linear[col] += g.coef[r]
        a = np.zeros(n2)
        a[g.A[r].indices] = g.A[r].data
        for s in (1.0, -1.0):  # t - s u >= 0
            lin = -s * a
            lin[col] += 1.0
            extra.append(Constraint(f"_abs_epigraph[{t}]{'+' if s > 0 else '-'}", Expression(n2, 0.0, lin),
                                    s * float(g.b[r]), np.inf))
    cons = [Constraint(c.name, e, c.lo, c.hi) for c, e in zip(program.constraints, new[1:])] + extra
    names = list(program.names) + [f"_abs_epigraph[{t}]" for t in range(m)]
    lb = np.concatenate([program.lb, np.zeros(m)])
    ub = np.concatenate([program.ub, np.full(m, np.inf)])
    x0 = program.x0
    t0 = np.full(m, np.nan)
    if not np.isnan(x0).any():
        t0 = np.array([abs(float((g.A[r] @ x0)[0]) + g.b[r]) for _, g, r in rows])
    prog2 = Program(names, lb, ub, new[0], cons, program.maximize, program.objective_name,
                    np.concatenate([x0, t0]))
    U = sp.vstack([g.A[r] for _, g, r in rows], format="csr") if rows else sp.csr_matrix((0, n))
    b = np.array([g.b[r] for _, g, r in rows])
    return prog2, n, U, b


def _text(e):
    return " and ".join(ATOMS[g.kind].text.format(u="u") for g in _nonsmooth(e))
