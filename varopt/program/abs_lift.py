r"""Sums of absolute values in a constraint as linear rows: one new column per ``abs`` row.

A constraint ``sum_r c_r |a_r^T x + b_r| + l^T x + k <= hi`` (``c_r > 0``; CVXPY ``cp.norm1(e) <= t``,
``cp.sum(cp.abs(e)) <= t``, Pyomo ``sum(abs(e[j]) for j in J) <= t``) is a polyhedron, but not one linear
row: it is the projection on ``x`` of

    -s_r <= a_r^T x + b_r <= s_r   (two rows per r),      sum_r c_r s_r + l^T x + k <= hi

(the epigraph form of an L1 norm; Boyd & Vandenberghe 2004, section 6.1). Given ``x`` in the set, ``s_r =
|a_r^T x + b_r|`` satisfies the lifted rows; conversely the lifted rows give ``c_r |a_r^T x + b_r| <= c_r s_r``,
so ``x`` satisfies the constraint. The same holds mirrored, ``lo <= -sum_r c_r |...| + l^T x + k`` (CVXPY
writes ``t >= norm1(e)`` that way round). The new columns ``s`` come after the program's columns, take no part
in the objective, and have no bounds: ``s >= 0`` is implied by the rows, and stated as a bound it would make every
vertex with ``a_r^T x + b_r = 0`` degenerate (both rows and the bound active: the active set's working-set system is
singular there and every step would go to the general QP layer). A single ``abs`` row needs no column:
:meth:`~varopt.program.Program.split_abs_rows` writes it as its two rows first.

An L1 penalty in a minimised objective, ``sum_r c_r |a_r^T x + b_r|`` with every ``c_r > 0`` (``lam *
cp.norm1(w)``), is lifted the same way with ``objective=True``: the same two rows per term and ``c_r s_r`` in the
objective (exact: the objective only decreases as ``s_r`` falls to ``|a_r^T x + b_r|``).

Used by solvers that take linear constraints but need smooth terms (``majorize``): they solve the lifted
program and keep the first ``n`` entries of its point (:meth:`AbsLift.restrict`); a start for the user's
variables is completed by :meth:`AbsLift.extend` (``s_r = |a_r^T x + b_r|``: feasible whenever ``x`` is).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from .atoms import ATOMS
from .eliminate import map_expression
from .expression import Expression
from .program import Constraint, Program


def _orientation(con) -> float:
    """+1 for ``sum c_r |.| + linear <= hi`` (every ``c_r > 0``), -1 for the mirrored ``lo <= -sum c_r |.| +
    linear`` (every ``c_r < 0``), 0 for any other constraint (no atoms, a range, a kink that is not a
    ``max(u, -u)``, a multiplier, a quadratic or log-sum-exp part: not a polyhedron this lift writes)."""
    e = con.body
    if not e.atoms or e.lse or len(e.quadratic):
        return 0.0
    if any(not ATOMS[g.kind].max_of_pm_u or (g.mult >= 0).any() for g in e.atoms):
        return 0.0
    coef = np.concatenate([g.coef for g in e.atoms])
    if (coef > 0).all() and np.isfinite(con.hi) and not np.isfinite(con.lo):
        return 1.0
    if (coef < 0).all() and np.isfinite(con.lo) and not np.isfinite(con.hi):
        return -1.0
    return 0.0


@dataclasses.dataclass
class AbsLift:
    """The lifted ``program`` of :func:`lift_abs_sums`; its first ``n_user`` columns are the original ones and
    ``A s``-rows ``A, b`` (one per new column, in column order) define ``s = |A x + b|``."""

    program: Program
    n_user: int
    A: sp.csr_matrix
    b: np.ndarray

    def extend(self, x) -> np.ndarray:
        """The original point ``x`` (length ``n_user``; NaN read as 0) with ``s = |A x + b|`` appended."""
        x = np.asarray(x, dtype=float).ravel()
        return np.concatenate((x, np.abs(self.A @ np.where(np.isnan(x), 0.0, x) + self.b)))

    def restrict(self, z):
        """The original columns of a point of the lifted program (None stays None)."""
        return None if z is None else np.asarray(z, dtype=float).ravel()[:self.n_user]


def _objective_abs(program: Program) -> list:
    """The objective's ``abs`` groups when every one of their rows has a positive weight and no multiplier (an L1
    penalty ``lam * norm1(w)`` in a minimisation: ``c_r |u_r|`` is ``c_r s_r`` with ``s_r >= |u_r|``, exact because
    ``s_r`` is minimised); [] otherwise (the solver's smoothness check then names the row)."""
    groups = [g for g in program.objective.atoms if ATOMS[g.kind].max_of_pm_u]
    if not groups or any((g.mult >= 0).any() or (g.coef <= 0).any() for g in groups):
        return []
    return groups


def lift_abs_sums(program: Program, objective: bool = False) -> AbsLift | None:
    """:class:`AbsLift` of ``program`` with every constraint that is a sum of absolute values (module docstring)
    written as linear rows on new columns, and with ``objective=True`` also the objective's positively weighted
    ``abs`` rows (the epigraph of an L1 penalty, the same rows); None when there is nothing to lift."""
    lifted = [(k, s) for k, con in enumerate(program.constraints) if (s := _orientation(con))]
    obj_groups = _objective_abs(program) if objective else []
    if not lifted and not obj_groups:
        return None
    n = program.n
    rows, consts, owner = [], [], []
    for g in obj_groups:
        rows.append(g.A)
        consts.append(g.b)
    for k, _ in lifted:
        for g in program.constraints[k].body.atoms:
            rows.append(g.A)
            consts.append(g.b)
            owner.append((k, g))
    A = sp.vstack(rows, format="csr") if rows else sp.csr_matrix((0, n))
    b = np.concatenate(consts)
    K = A.shape[0]
    m = n + K
    widen = sp.eye(n, m, format="csr")   # x = [I 0] (x, s): every expression re-indexed on m columns
    keep = np.arange(n)

    def wide(e: Expression) -> Expression:
        return map_expression(e, widen, np.zeros(n), m, keep)

    A_wide = sp.hstack([A, sp.csr_matrix((K, K))], format="csr")
    out, col = [], n
    obj = program.objective
    if obj_groups:
        kept = obj.copy()
        kept.atoms = [g for g in kept.atoms if not ATOMS[g.kind].max_of_pm_u]
        obj = wide(kept)
        lin = obj.linear.copy()
        for g in obj_groups:
            for r in range(g.coef.size):
                out.extend(_pm_rows(f"{program.objective_name} (abs term {col - n}", m, A_wide[col - n],
                                    float(b[col - n]), col))
                lin[col] += g.coef[r]
                col += 1
        obj.linear = lin
    else:
        obj = wide(obj)
    lifted = dict(lifted)
    for k, con in enumerate(program.constraints):
        if k not in lifted:
            out.append(dataclasses.replace(con, body=wide(con.body)))
            continue
        e = con.body
        idx, val = e.linear_items()
        first = col
        for g in e.atoms:
            for _ in range(g.coef.size):
                out.extend(_pm_rows(f"{con.name} (abs term {col - first}", m, A_wide[col - n], float(b[col - n]), col))
                col += 1
        # c_r |u_r| replaced by c_r s_r (c_r < 0 in the mirrored form, whose side is lo)
        coef = np.concatenate([g.coef for g in e.atoms])
        body = Expression(m, e.constant, (np.concatenate((np.asarray(idx, dtype=np.int64), np.arange(first, col))),
                                          np.concatenate((np.asarray(val, dtype=float), coef))))
        out.append(Constraint(con.name, body, con.lo, con.hi))
    names = list(program.names) + [f"abs{r}" for r in range(K)]
    lift = AbsLift(None, n, A, b)
    x0 = program.x0
    new = dataclasses.replace(
        program, names=names, lb=np.concatenate((program.lb, np.full(K, -np.inf))),
        ub=np.concatenate((program.ub, np.full(K, np.inf))), objective=obj, constraints=out,
        x0=lift.extend(x0),
        binary=None if program.binary is None else np.concatenate((program.binary, np.zeros(K, dtype=bool))),
        # the front-end's auxiliary columns (epigraph columns of a max or norm_inf, which majorize takes) stay
        # ordinary columns of the lifted program, which appends its own after them; the caller's program keeps them
        aux=[])
    lift.program = new
    return lift


def _pm_rows(label, m, row, b_r, col):
    """The two rows ``+-(a_r^T x + b_r) - s_r <= 0`` of one ``abs`` term (``a_r`` a sparse row, ``s_r`` column
    ``col``), named ``label + " +)"`` and ``label + " -)"``."""
    idx = np.append(row.indices, col).astype(np.int64)
    return [Constraint(f"{label} {tag})", Expression(m, pm * b_r, (idx, np.append(pm * row.data, -1.0))), -np.inf, 0.0)
            for pm, tag in ((1.0, "+"), (-1.0, "-"))]
