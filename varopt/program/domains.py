r"""The domains of a program's atoms as bounds and linear rows.

An atom with a finite domain end (``-log u``, ``u log u``: ``u >= 0``; ``quad_over_lin``: ``v > 0``;
:mod:`varopt.program.atoms`) is only defined on part of the space, and a user who writes
``-cp.sum(cp.log(x))`` or ``cp.entr(p)`` over a free variable relies on that domain as an implicit
constraint (CVXPY's conic solvers enforce it through the cone). A solver that moves by gradients alone
does not: ``-log x`` at ``x < 0`` has the finite "gradient" ``-1/x > 0`` and ipsa walked to
``x = -5.9`` (objective NaN) on ``min -sum log x_i + sum x_i, sum x <= 2`` over free ``x``.

:func:`with_atom_domains` makes the domains explicit: for each atom argument ``u = a^T x + b`` with
domain ``u >= lo``

* already implied by the bounds (``a^T x + b >= lo`` for every ``x`` in the box): nothing;
* on one variable (``a = c e_v``): the bound ``x_v >= (lo - b)/c`` (``<=`` for ``c < 0``), intersected
  with the variable's own bounds;
* otherwise: the linear row ``a^T x >= lo - b``, named after the atom.

The feasible set of the model is unchanged (outside the domains the objective or a constraint is
undefined), so a solver that keeps its iterates strictly inside its constraints (ipsa) keeps them
where every term evaluates.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from .atoms import ATOMS
from .expression import Expression
from .program import Constraint, Program


def _arguments(program: Program):
    """``(A, b, lo, text)`` per atom group of the objective and the constraints whose argument has a
    finite lower domain end (the second argument ``v`` of a two-argument atom)."""
    for where, e in [(program.objective_name, program.objective)] + [(c.name, c.body) for c in program.constraints]:
        for g in e.atoms:
            kern = ATOMS[g.kind]
            lo = kern.domain[0]
            if not np.isfinite(lo):
                continue
            A, b = (g.A, g.b) if kern.arity == 1 else (g.A2, g.b2)
            yield sp.csr_matrix(A, copy=True), np.asarray(b, dtype=float), float(lo), f"{where}: {kern.text}"


def _box_minimum(A, lb, ub):
    """The smallest value of every row's ``a^T x`` over the box ``lb <= x <= ub`` (no explicit zeros in ``A``)."""
    data = np.where(A.data > 0, A.data * lb[A.indices], A.data * ub[A.indices])
    return sp.csr_matrix((data, A.indices, A.indptr), shape=A.shape).sum(axis=1).A1


def with_atom_domains(program: Program) -> Program:
    """``program`` with the domain of every atom argument as a bound or a linear row (module docstring);
    the program itself when every domain is already implied by the bounds."""
    lb, ub = program.lb.copy(), program.ub.copy()
    rows = []
    for A, b, lo, text in _arguments(program):
        A.eliminate_zeros()
        need, nnz = lo - b, np.diff(A.indptr)
        # rows on one variable become bounds (arrays, not a loop: a barrier -sum(log x) has a row per variable),
        # then the others, against the tightened box, become linear rows unless the box implies them
        one = np.flatnonzero((nnz == 1) & (_box_minimum(A, lb, ub) < need))
        v, c = A.indices[A.indptr[one]], A.data[A.indptr[one]]
        up = c > 0
        np.maximum.at(lb, v[up], need[one][up] / c[up])
        np.minimum.at(ub, v[~up], need[one][~up] / c[~up])
        for r in np.flatnonzero((nnz > 1) & (_box_minimum(A, lb, ub) < need)):  # nnz 0: the front-end's to check
            sl = slice(A.indptr[r], A.indptr[r + 1])
            rows.append(Constraint(f"domain of {text.format(u='u', v='v')} (row {r})",
                                   Expression(program.n, 0.0, (A.indices[sl], A.data[sl])), need[r], np.inf))
    if not rows and np.array_equal(lb, program.lb) and np.array_equal(ub, program.ub):
        return program
    return dataclasses.replace(program, lb=lb, ub=ub, constraints=list(program.constraints) + rows)
