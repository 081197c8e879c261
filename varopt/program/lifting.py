r"""Auxiliary variables that the front-ends add to express a user's term exactly.

Users of disciplined multi-convex programming (Shen, Diamond, Udell, Gu & Boyd 2017) write
squares, absolute values and norms of expressions that are *bilinear* (affine in each block):
``(a_ij - w_i h_j)**2``, ``cp.sum_squares(A - W @ H)``, ``cp.norm(Y - D @ X, 'fro')``,
``sqrt(sum(...))``. These are not atoms of affine arguments, so the compiled program
introduces one auxiliary column per lifted quantity, with a defining equality row:

=========== ============================== ======================================== ===========
kind        column                         defining constraint                      bounds
=========== ============================== ======================================== ===========
``product`` ``q = Q(x)`` (the quadratic     ``q - Q(x) == 0``                        free
            part of the atom's argument)
``sqrt``    ``t = sqrt(e(x))``              ``e(x) - t^2 == 0``                      ``t >= 0``
``ratio``   ``t = v(x) / d(x)`` (``d``      ``t d(x) - v(x) == 0``                   interval of
            affine, sign-definite on the                                             ``v / d``
            declared bounds)
``epigraph`` ``t >= f_k(x)`` (a piece of     ``f_k(x) - t <= 0`` per piece (no equality; free
            ``max``, ``huber``, ...)       :mod:`.epigraph_lift`)
=========== ============================== ======================================== ===========

Both rows are exact: with ``t >= 0``, ``t^2 = e`` holds iff ``t = sqrt(e)`` (and has no
solution where ``e < 0``, outside the domain of ``sqrt``), so the lifted program has the same
feasible set (projected on the user's variables) and the same objective values as the user's
model (a ``ratio`` row is exact because ``d != 0`` on the box). A norm ``||u||_2`` is ``sqrt(sum_k u_k^2)``. The atom then applies to an affine
argument: ``(a - q)^2`` is a ``square`` row, ``|a - q|`` an ``abs`` row.

Auxiliary columns come after the user's variables (``program.n_user`` of them); they are never
loaded into the user's model (the solver registry strips them from ``result.x``) and their
values are always recomputable from the user's variables (:func:`complete`), in column order
(a ``sqrt`` column may be defined through earlier ``product`` columns).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .expression import Expression

#: kinds of auxiliary columns
AUX_KINDS = ("product", "sqrt", "ratio", "epigraph")


@dataclass
class AuxVariable:
    """One auxiliary column: ``kind`` (:data:`AUX_KINDS`), its ``definition`` ``Q(x)`` or ``e(x)``
    over the program's columns, the user's ``term`` it comes from (text for messages) and the
    ``constraint`` name of its defining row."""

    index: int
    kind: str
    definition: Expression
    term: str
    constraint: str
    #: the affine denominator ``d(x)`` of a ``ratio`` column (its ``definition`` is the numerator)
    denominator: Expression = None
    #: ``epigraph`` columns: the :class:`~.epigraph_lift.EpigraphRule` giving the column's value at its optimum
    #: (``definition`` is then None: the column is defined by inequality rows)
    rule: object = None

    def __post_init__(self):
        if self.kind not in AUX_KINDS:
            raise ValueError(f"unknown auxiliary kind {self.kind!r}; known: {AUX_KINDS}")
        if (self.kind == "ratio") != (self.denominator is not None):
            raise ValueError("a ratio column needs its denominator (and only a ratio column has one)")

    def value(self, x) -> float:
        if self.rule is not None:
            return self.rule.value(x)
        e = self.definition.value(x)
        if self.kind == "ratio":
            with np.errstate(divide="ignore", invalid="ignore"):
                return float(np.float64(e) / self.denominator.value(x))
        return e if self.kind == "product" else float(np.sqrt(max(e, 0.0)))


def defining_body(aux_index: int, kind: str, definition: Expression, denominator: Expression = None) -> Expression:
    """The body of the defining row (``== 0``): ``q - Q(x)``, ``e(x) - t^2`` or ``t d(x) - v(x)``."""
    from .terms import QuadraticTerms
    n = definition.n
    if kind == "product" and not definition.atoms and not definition.lse:
        # -Q(x) in new arrays (``scaled``), without the deep copy: 3,000 copies took 1 s of the compile of a 50 x 60
        # factorisation's residuals (docs/gop.md, "Time limits on larger models")
        body = definition.scaled(-1.0)
        body.linear[aux_index] += 1.0
        return body
    body = definition.copy()
    if kind in ("product", "ratio"):
        body.constant, body.linear = -body.constant, -body.linear
        q = body.quadratic
        body.quadratic = QuadraticTerms(q.i, q.j, -q.v, n)
        for g in body.groups():
            g.coef = -g.coef
        if kind == "product":
            body.linear[aux_index] += 1.0
            return body
        # + t d(x) = t (d_0 + sum_j d_j x_j): the linear part d_0 t and the bilinear terms d_j t x_j
        d = denominator
        if len(d.quadratic) or d.atoms or d.lse:
            raise ValueError("the denominator of a ratio column must be affine")
        body.linear[aux_index] += d.constant
        dl = d.linear
        js = np.flatnonzero(dl)
        q = body.quadratic
        ii = np.minimum(js, aux_index)
        jj = np.maximum(js, aux_index)
        body.quadratic = QuadraticTerms(np.append(q.i, ii), np.append(q.j, jj), np.append(q.v, dl[js]), n)
        return body
    q = body.quadratic
    body.quadratic = QuadraticTerms(np.append(q.i, aux_index), np.append(q.j, aux_index), np.append(q.v, -1.0), n)
    return body


def complete(aux, x, n_user: int) -> np.ndarray:
    """The full point: the user's part of ``x`` (first ``n_user`` entries) and every auxiliary
    column recomputed from its definition, in column order."""
    x = np.asarray(x, dtype=float).ravel()
    z = np.zeros(n_user + len(aux))
    z[:n_user] = x[:n_user]
    if x.size > n_user:
        z[n_user:] = x[n_user:n_user + len(aux)]
    for a in aux:
        z[a.index] = a.value(z)
    return z


def start_values(aux, x0, n_user: int) -> np.ndarray:
    """Starting values with the auxiliary columns filled when every user's start is given."""
    x0 = np.asarray(x0, dtype=float).ravel()
    if not aux or np.isnan(x0[:n_user]).any():
        return x0
    with np.errstate(all="ignore"):
        z = complete(aux, np.nan_to_num(x0), n_user)
    return np.where(np.isfinite(z), z, np.nan)
