r"""Objective variables defined by an equality row (the form of MINLPLib and GLOBALLib) substituted back.

Modelling collections move a nonlinear objective into a row: minimise ``objvar`` subject to
``objvar == f(x)`` (MINLPLib writes ``f(x) - objvar == 0``). For gop the equality is the worst way to say
it: ``f(x) - t = 0`` is convex in neither direction even when ``f`` is convex, so a convex QP becomes a
nonconvex program (the tree relaxes the row's products one by one and branches; a 7-variable convex QP
was not certified in 8 s), and GOP's primal problems do not take nonlinear rows.

**Reduction.** In the internal minimisation, a column ``t`` is an *objective variable* when

1. ``t`` enters the objective only linearly, with coefficient ``c_t != 0``;
2. ``t`` enters exactly one constraint, an equality ``a t + g(z) = r`` (``g`` free of ``t``, ``a != 0``),
   and only linearly; or a nonlinear inequality / range row ``lo <= a t + g(z) <= hi`` (the epigraph
   ``t >= f(x)``) whose end ``r`` stops ``t`` in the direction the objective pushes it, ``t``'s own bound
   on that side being infinite (:func:`_binding_end`): ``t`` sits on ``r`` at every optimum;
3. ``t`` is a continuous user column (not a front-end auxiliary one, which has its own definition).

Then ``t = (r - g(z)) / a`` on every feasible point (for an inequality row: at every optimum, and every
feasible point maps to one so placed with no larger objective), and the program is rewritten exactly: the objective
becomes ``c^T z - c_t t + c_t (r - g(z)) / a + ...`` (the rest of the objective unchanged), the row is
replaced by the bounds of ``t`` on its definition, ``l_t <= (r - g(z)) / a <= u_t``, as a row over ``g``
(dropped when both bounds are infinite), and ``t`` is fixed at 0, appearing nowhere. Both programs have
the same feasible points (up to ``t``) with the same objective values, so bounds and certificates carry
over; the completion ``t := (r - g(z)) / a`` maps a point back. Several objective variables (each with its
own row) are substituted one after the other.

For ``f`` convex the objective is then what the user would have written without ``objvar`` (docs/gop.md
§12c).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ...program import Constraint, Expression, Program
from ...program.terms import QuadraticTerms


@dataclass
class ObjectiveRows:
    """The reduced :attr:`program` (same columns as the original, each objective variable fixed at 0) and,
    per objective variable, ``(t, k, a, r, g)``: its defining row ``a t + g(z) = r`` (row ``k`` of the
    original program; ``g`` an expression over all columns without ``t``)."""

    program: Program
    rows: list

    def complete(self, z) -> np.ndarray:
        """``z`` with every objective variable at its definition ``t = (r - g(z)) / a``."""
        z = np.array(z, dtype=float)
        for t, _, a, r, g in self.rows:
            z[t] = (r - g.value(z)) / a
        return z

    def complete_ray(self, z, d):
        """The certificate ``(z, d)`` of the reduced program (``z + s d`` feasible for every ``s >= 0``, the
        objective falling without bound) in the original columns, and the objective variables whose
        definition is not affine along ``d`` (then ``z + s d`` with each objective variable at its definition
        is the certificate, a curve; their ray entry is left at 0)."""
        z, d = self.complete(z), np.array(d, dtype=float)
        curved = []
        for t, _, a, r, g in self.rows:
            # g(z + s d) = g(z) + s g'(z) d + s^2 d'Hd / 2 for a quadratic g (from derivatives: z may lie at 1e30,
            # where differences of values lose the slope)
            if g.is_linear or (g.is_quadratic and abs(float(d @ (g.hessian(z) @ d))) <= 1e-12 * float(d @ d)):
                d[t] = -float(g.gradient(z) @ d) / a
            else:
                curved.append(t)
        return z, d, curved

    def describe(self, original: Program) -> list:
        names = original.names
        return [f"{names[t]} substituted by its definition in constraint {original.constraints[k].name}"
                for t, k, _, _, _ in self.rows]


def ge_rows_as_le(program: Program):
    """``program`` with every one-sided row ``h(z) >= lo`` whose body is nonlinear within a variable (a square
    or an atom: never affine in each block) written as ``-h(z) <= -lo``, or None when there is none.

    The same set, but GOP's class takes nonlinear terms only on the smaller side of a row (convex ``<=`` rows):
    MINLPLib's ``x1 - 0.2458 x1^2/x2 >= 6`` (st_e17) was refused where ``0.2458 x1^2/x2 - x1 <= -6`` is solved.
    The solver uses it only where the original program is outside GOP's class and this one inside."""
    cons, hit = [], False
    for c in program.constraints:
        q = c.body.quadratic
        if np.isfinite(c.lo) and c.hi == np.inf and (c.body.atoms or c.body.lse or np.any(q.i == q.j)):
            cons.append(Constraint(c.name, c.body.scaled(-1.0), -np.inf, -c.lo))
            hit = True
        else:
            cons.append(c)
    return dataclasses.replace(program, constraints=cons) if hit else None


def _plus(e: Expression, k: float, f: Expression, const: float, drop: int) -> Expression:
    """``e + k f + const`` with column ``drop``'s linear coefficient set to 0 (``e`` and ``f`` free of it
    otherwise)."""
    lin = e.linear + k * f.linear
    lin[drop] = 0.0
    q, p = e.quadratic, f.quadratic
    Q = QuadraticTerms(np.concatenate([q.i, p.i]), np.concatenate([q.j, p.j]), np.concatenate([q.v, k * p.v]), e.n)
    atoms = list(e.atoms) + [dataclasses.replace(g, coef=k * g.coef) for g in f.atoms]
    lse = list(e.lse) + [dataclasses.replace(g, coef=k * g.coef) for g in f.lse]
    return Expression(e.n, e.constant + k * f.constant + const, lin, Q, atoms, lse)


def _without(e: Expression, t: int) -> Expression:
    """``e`` with column ``t``'s linear coefficient set to 0."""
    lin = np.array(e.linear)   # (a dense expression's linear is its own array)
    lin[t] = 0.0
    return Expression(e.n, e.constant, lin, e.quadratic, list(e.atoms), list(e.lse))


def _binding_end(con, a: float, ct: float, lt: float, ut: float):
    """The end ``r`` of row ``lo <= a t + g <= hi`` that ``t`` sits on at every optimum, or None.

    An equality gives ``r = lo``. For a nonlinear inequality or range row (``t >= f(x)``, the epigraph form) the
    objective ``c_t t`` pushes ``t`` down when ``c_t > 0`` (up when ``c_t < 0``); when ``t``'s own bound
    on that side is infinite, only the row stops it, at ``lo`` if ``c_t a > 0`` and at ``hi`` otherwise.
    Any feasible ``(z, t)`` then moves to ``(z, (r - g(z)) / a)``, feasible with an objective no larger,
    so the substitution is exact. A finite bound of ``t`` on that side would make ``t`` the larger of
    two functions (not one expression): no substitution."""
    if con.lo == con.hi:
        return float(con.lo) if np.isfinite(con.lo) else None
    if con.body.is_linear or not np.isinf(lt if ct > 0 else ut):
        # (a linear row is in GOP's class as written: the rewrite would only change a linear program's columns)
        return None
    r = float(con.lo if ct * a > 0 else con.hi)
    return r if np.isfinite(r) else None


def _feeds_aux(program: Program) -> np.ndarray:
    """The columns that :meth:`Program.complete_aux` reads: the supports of the auxiliary columns' definitions,
    denominators and epigraph pieces."""
    exprs = []
    for a in program.aux:
        exprs += [e for e in (a.definition, a.denominator) if e is not None]
        if a.rule is not None:
            exprs += list(a.rule.pieces)
    if not exprs:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate([e.support() for e in exprs]))


def objective_rows(program: Program):
    """:class:`ObjectiveRows` substituting every objective variable by its defining equality (module
    docstring), or None when the program has none."""
    c = program.objective.linear
    cand = np.flatnonzero(c[:program.n_user] != 0)
    if cand.size == 0 or not program.constraints:
        return None
    if program.binary is not None:
        cand = cand[~program.binary[cand]]
    cand = np.setdiff1d(cand, program.objective.nonlinear_support())
    # a column an auxiliary column is computed from (``x`` in the ratio row ``t y - x == 0`` of ``x/y``) keeps
    # its column: fixed at 0 in the reduced program, it would complete every point to ``t = 0/y``
    cand = np.setdiff1d(cand, _feeds_aux(program))
    if cand.size == 0:
        return None
    where = {int(t): [] for t in cand}
    for k, con in enumerate(program.constraints):
        for t in np.intersect1d(con.body.support(), cand, assume_unique=True).tolist():
            where[t].append(k)
    obj, cons, lb, ub = program.objective, list(program.constraints), program.lb.copy(), program.ub.copy()
    rows, drop, used = [], set(), set()
    for t, ks in where.items():
        if len(ks) != 1:
            continue
        k = ks[0]
        if k in used:
            continue   # the row of another objective variable, already substituted
        used.add(k)
        con = cons[k]
        if t in con.body.nonlinear_support():
            continue
        a, ct = float(con.body.linear[t]), float(obj.linear[t])
        if a == 0.0 or ct == 0.0:
            continue   # (a previous substitution may have brought t's coefficient to 0)
        r = _binding_end(con, a, ct, lb[t], ub[t])
        if r is None:
            continue
        g = _without(con.body, t)
        # min ... + c_t t  with  t = (r - g) / a
        obj = _plus(obj, -ct / a, g, ct * r / a, t)
        # l_t <= (r - g) / a <= u_t  as a row over g
        ends = (r - a * lb[t], r - a * ub[t])   # (a != 0 and r finite: infinite bounds give infinite ends)
        lo, hi = min(ends), max(ends)
        if np.isfinite(lo) or np.isfinite(hi):
            cons[k] = Constraint(con.name, g, lo, hi)
        else:
            drop.add(k)
        lb[t] = ub[t] = 0.0
        rows.append((t, k, a, r, g))
    if not rows:
        return None
    x0 = program.x0.copy()
    x0[[t for t, *_ in rows]] = 0.0
    reduced = dataclasses.replace(program, lb=lb, ub=ub, objective=obj, x0=x0,
                                  constraints=[cc for k, cc in enumerate(cons) if k not in drop])
    return ObjectiveRows(reduced, rows)
