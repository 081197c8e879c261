r"""Piecewise-linear convex atoms as epigraph columns: ``max``, ``maximum``, ``pos``, ``norm_inf``, ``sum_largest``,
``huber`` (and ``min``, ``minimum``, ``neg``, ``sum_smallest`` through their negatives).

A convex function written as a pointwise maximum, ``f(x) = max_k f_k(x)``, is the optimal value of

    min_t  t   subject to   f_k(x) - t <= 0   (every piece k)

(the epigraph form; Boyd & Vandenberghe 2004, sections 3.1.7 and 4.1.3). The front-end gives ``t`` an auxiliary
column (:class:`~.lifting.AuxVariable` of kind ``epigraph``, after the user's columns, never loaded into the user's
model) and the rows ``f_k - t <= 0``. The other atoms are partial minimisations of the same kind:

* ``sum_largest(u, k) = min_t k t + sum_i max(u_i - t, 0)`` (the LP dual of choosing the ``k`` largest entries;
  Boyd & Vandenberghe 2004, exercise 5.19; also for fractional ``k``), with one column ``t`` per output entry and
  one epigraph column ``s_i >= max(u_i - t, 0)`` per entry;
* ``huber(u, M) = min_s s^2 + 2 M |u - s|`` (CVXPY's scaling: ``u^2`` for ``|u| <= M``, ``2 M |u| - M^2``
  beyond), with a free column ``s`` (at its optimum ``clip(u, -M, M)``) and an epigraph column
  ``r >= |u - s|``.

Exactness needs the convex position: the lifted expression (``t``, ``k t + sum s``, ``s^2 + 2 M r``) must be
*minimised* wherever it appears -- in a minimised objective with a nonnegative coefficient, in the body of a
``<=`` row with a nonnegative coefficient (``<=`` side), in a ``>=`` row with a nonpositive one, or inside a convex
term that is nondecreasing in it (``exp(max(u))``, a log-sum-exp) used so. Then every feasible point of the
lifted program gives the user's point with an objective no larger (``t`` can only be lowered to ``f(x)``), and
every point of the user's program lifts with ``t = f(x)``: both have the same optimal value and the same
optimal ``x``. Anywhere else (a maximised convex atom, an equality or range row, the convex side of ``>=``, a
product with a variable, a square or ``abs`` of it) the epigraph would be a relaxation, and :func:`check_positions`
refuses the program with a :class:`~varopt.errors.ModelStructureError` naming the atom and the rule it breaks
(CVXPY's DCP composition rules; Grant, Boyd & Ye 2006).

:class:`EpigraphRule` recomputes each column at its optimum from the user's variables (``t = max_k f_k(x)``,
the ``ceil(k)``-th largest entry for ``sum_largest``, ``clip(u, -M, M)`` for ``huber``), so solutions and
starting points are completed exactly (:func:`~.lifting.complete`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ModelStructureError
from .atoms import ATOMS

#: rules of :class:`EpigraphRule`
RULES = ("max", "kth", "clip")


@dataclass
class EpigraphRule:
    """The value of an epigraph column at its optimum, from the expressions ``pieces`` (over the program's columns;
    a piece may use earlier auxiliary columns): ``max`` their maximum, ``kth`` their ``ceil(k)``-th largest value,
    ``clip`` the one piece clipped to ``[-M, M]``."""

    kind: str
    pieces: list
    k: float = None
    M: float = None

    def __post_init__(self):
        if self.kind not in RULES:
            raise ValueError(f"unknown epigraph rule {self.kind!r}; known: {RULES}")

    def value(self, x) -> float:
        v = np.array([p.value(x) for p in self.pieces], dtype=float)
        if self.kind == "max":
            return float(v.max())
        if self.kind == "kth":
            return float(np.sort(v)[::-1][math.ceil(self.k - 1e-12) - 1])
        return float(np.clip(v[0], -self.M, self.M))


@dataclass
class Part:
    """One expression to check: ``where`` (for messages), its ``body``, its ``orientation`` (+1 minimised or on the
    smaller side of ``<=``, -1 on the larger side of ``>=``, 0 an equality or range row) and the auxiliary
    columns it defines (``exempt``: an epigraph row ``f_k - t <= 0`` holds its own ``t`` with coefficient -1)."""

    where: str
    body: object
    orientation: float
    exempt: frozenset = frozenset()


def check_positions(parts, roles, n):
    """Raise :class:`ModelStructureError` when an epigraph column is used outside the convex position (module
    docstring). ``roles`` maps column -> ``(role, term, floor)``: role ``epi`` (a maximum: may enter linearly with
    a nonnegative oriented coefficient, or a convex term nondecreasing in it over ``t >= floor``, the lower bound
    its rows imply) or ``free`` (``huber``'s ``s``: only in a ``square`` row with a nonnegative oriented weight);
    ``term`` is the user's atom text."""
    if not roles:
        return
    is_aux = np.zeros(n, dtype=bool)
    is_aux[list(roles)] = True
    for part in parts:
        e, s = part.body, part.orientation
        idx, val = e.linear_items()
        idx = np.asarray(idx, dtype=np.int64)
        for j, v in zip(idx[is_aux[idx]].tolist(), np.asarray(val)[is_aux[idx]].tolist()):
            if j in part.exempt:
                continue
            role, term = roles[j][:2]
            if s == 0:
                _refuse(part, term, None)
            if role == "free" or s * v < 0:
                _refuse(part, term, "negated")
        q = e.quadratic
        if len(q.v):
            hit = is_aux[q.i] | is_aux[q.j]
            if hit.any():
                k = int(np.flatnonzero(hit)[0])
                j = int(q.i[k]) if is_aux[q.i[k]] else int(q.j[k])
                _refuse(part, roles[j][1], "product")
        for g in e.atoms:
            kern = ATOMS[g.kind]
            for A, second in ((g.A, False), (g.A2, True)):
                if A is None:
                    continue
                C = A.tocoo()
                hit = is_aux[C.col]
                for r, j, a in zip(C.row[hit].tolist(), C.col[hit].tolist(), C.data[hit].tolist()):
                    if j in part.exempt:
                        continue
                    role, term = roles[j][:2]
                    w = s * float(g.coef[r])
                    if s == 0:
                        _refuse(part, term, None)
                    if g.mult[r] >= 0:
                        _refuse(part, term, "product")
                    if role == "free":
                        ok = kern.quadratic and w >= 0   # (u)^2: huber's s^2
                    else:
                        # nondecreasing in t: exp(max(u)); or a convex even atom (a square, u^2/v in u, |u|) of
                        # t + b where t >= floor >= -b (nondecreasing there): the squared hinge
                        # sum_squares(pos(1 - y * (X @ w))), quad_over_lin(pos(u), s) with a variable s
                        # a domain bounding the argument from below (power(3), u >= 0) must already hold at t's
                        # floor: power(max(u), 3) would otherwise be min over t >= max(u, 0), not CVXPY's max(u) >= 0
                        lo, closed = kern.domain[0], kern.domain[2]
                        floor = _argument_floor(A, r, g.b[r], roles)
                        in_domain = a < 0 or not np.isfinite(lo) or (floor >= lo if closed else floor > lo)
                        ok = not second and kern.convex and w >= 0 and (
                            (kern.monotone * a > 0 and in_domain) or (kern.even and floor >= 0))
                    if not ok:
                        _refuse(part, term, "atom", kern.text.format(u="...", v="..."))
        for g in e.lse:
            C = g.A.tocoo()
            hit = is_aux[C.col]
            for r, j, a in zip(C.row[hit].tolist(), C.col[hit].tolist(), C.data[hit].tolist()):
                if j in part.exempt:
                    continue
                grp = int(g.seg[r])
                role, term = roles[j][:2]
                if s == 0:
                    _refuse(part, term, None)
                if role == "free" or g.mult[grp] >= 0 or a < 0 or s * float(g.coef[grp]) < 0:
                    _refuse(part, term, "atom", "log_sum_exp(...)")


def _argument_floor(A, r, b, roles) -> float:
    """The lower bound ``sum_j a_j floor_j + b`` that the epigraph rows imply for the argument ``sum_j a_j t_j + b``
    of row ``r`` of csr ``A`` when it is made of epigraph columns only, each with ``a_j > 0`` and a finite floor;
    ``-inf`` otherwise. Nonnegative, it makes a square nondecreasing in every ``t_j`` (``square(pos(u))``,
    ``square(sum(pos(u)))``, ``square(norm_inf(u))``)."""
    lo = float(b)
    for j, a in zip(A.indices[A.indptr[r]:A.indptr[r + 1]].tolist(), A.data[A.indptr[r]:A.indptr[r + 1]].tolist()):
        role = roles.get(j)
        if role is None or role[0] != "epi" or a <= 0 or not np.isfinite(role[2]):
            return -np.inf
        lo += a * role[2]
    return lo


_RULE = ("it is convex, so it must be minimised: in a Minimize objective or a Maximize of its negative, on the "
         "smaller side of <= or the larger side of >=, with a nonnegative coefficient, or inside a convex "
         "nondecreasing function used so (CVXPY's DCP rules); varopt writes it exactly as an epigraph only there")


#: the concave mirrors (CVXPY's ``min(u)`` is ``-max(-u)``): the same position rule, told the other way round
_RULE_CONCAVE = ("it is concave, so it must be maximised: in a Maximize objective or a Minimize of its negative, on "
                 "the larger side of an inequality (g >= c, c <= g), with a nonnegative coefficient (CVXPY's DCP "
                 "rules); varopt writes it exactly as an epigraph only there")
_CONCAVE_TERMS = ("min(", "minimum(", "sum_smallest(")


def _refuse(part, term, why, atom=None):
    rule = _RULE_CONCAVE if str(term).startswith(_CONCAVE_TERMS) else _RULE
    if why == "negated":
        how = "here it enters with the opposite sign (maximised, or on the wrong side of an inequality)"
    elif why == "product":
        how = "here it is multiplied by a variable"
    elif why == "atom":
        how = f"here it is the argument of {atom}, which is not a nondecreasing convex use of it"
    else:
        how = "here it is in an equality or range constraint"
    raise ModelStructureError(f"{part.where}: cannot compile `{term}`: {rule}; {how}")
