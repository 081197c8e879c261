"""Rows of one atom of one argument, written several times in an expression, merged into one row.

A model may write a term as a difference of copies: MINLPLib's Gibbs free energies (ex6_2_*) write
``18.3 x log x - 17.3 x log x``. The two rows ``c_1 g(u)`` and ``c_2 g(u)`` (the same atom ``g``, the same affine
argument ``u``, the same multiplier) are the one row ``(c_1 + c_2) g(u)``: an identity, so both programs have the
same feasible points and objective values. GOP's class is stated per row (Saddiki, Trapp & Flaherty 2017, §2.1:
a convex atom must enter with a nonnegative coefficient), so the copy with ``-17.3`` made a convex net term a
concave one and the program was refused. The solver uses the merged program only where the original is outside
GOP's class and the merged one inside (as :func:`.objective_rows.ge_rows_as_le`); the tree merges such rows in its
own relaxation (``relax.Lifted._atom_col``).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...program import Constraint, Expression, Program


def atom_key(kind, idx, val, b):
    """What makes ``g(val . z[idx] + b)`` the same term as another: the atom and its argument, in sorted column
    order (also the key of the tree's shared atom columns, ``relax.Lifted._atom_col``)."""
    order = np.argsort(idx, kind="stable")
    return kind, np.asarray(idx)[order].astype(np.int64).tobytes(), np.asarray(val, dtype=float)[order].tobytes(), \
        float(b)


def _row_key(g, r):
    """What makes row ``r`` of the atom group ``g`` the same term as another: the atom, its argument(s), the
    multiplier."""
    def arg(A, b):
        sl = slice(A.indptr[r], A.indptr[r + 1])
        return atom_key(g.kind, A.indices[sl], A.data[sl], b[r])
    second = None if g.A2 is None else arg(g.A2, g.b2)
    return arg(g.A, g.b), second, int(g.mult[r])


def _merged(e: Expression):
    """``e`` with duplicate atom rows merged (the first copy keeps the summed coefficient), or None."""
    first, coef, dup = {}, [np.array(g.coef, dtype=float) for g in e.atoms], False
    keep = [np.ones(len(g), dtype=bool) for g in e.atoms]
    for k, g in enumerate(e.atoms):
        for r in range(len(g)):
            key = _row_key(g, r)
            if key in first:
                k0, r0 = first[key]
                coef[k0][r0] += coef[k][r]
                keep[k][r], dup = False, True
            else:
                first[key] = (k, r)
    if not dup:
        return None
    atoms = []
    for g, c, kp in zip(e.atoms, coef, keep):
        if not kp.any():
            continue
        rows = np.flatnonzero(kp)
        atoms.append(dataclasses.replace(
            g, coef=c[rows], A=g.A[rows], b=g.b[rows], mult=g.mult[rows],
            A2=None if g.A2 is None else g.A2[rows], b2=None if g.b2 is None else g.b2[rows],
            label=None if g.label is None else np.asarray(g.label)[rows]))
    return Expression(e.n, e.constant, e.linear, e.quadratic, atoms, list(e.lse))


def merged_atom_rows(program: Program):
    """``program`` with the duplicate atom rows of every expression merged (module docstring), or None when no
    expression has any."""
    obj = _merged(program.objective)
    cons, hit = [], obj is not None
    for c in program.constraints:
        body = _merged(c.body)
        hit = hit or body is not None
        cons.append(c if body is None else Constraint(c.name, body, c.lo, c.hi))
    if not hit:
        return None
    return dataclasses.replace(program, objective=program.objective if obj is None else obj, constraints=cons)
