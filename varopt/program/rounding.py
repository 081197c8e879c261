"""How far another evaluation of an expression may land from ours: rounding scales.

A user checks a point by evaluating their own expression (Pyomo ``value()``, CVXPY ``.value``),
in another summation order than the compiled program. Both evaluations of a sum of ``t`` terms
are within ``t * eps * M`` of the exact value, where ``M`` is the *magnitude* of the sum: the
sum of the absolute values of its terms and of the rounding that enters through inner affine
maps (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, §4.2)::

    M(x) = |k| + sum_j |l_j x_j| + sum |v x_i x_j|
           + sum_r |c_r w_r| (|g(u_r)| + |g'(u_r)| (|A_r| |x| + |b_r|))        atom rows
           + sum_g |c_g w_g| (|lse_g| + max_{k in g} (|A_k| |x| + |b_k|))      log-sum-exp rows

(for ``u^2 / v`` both arguments contribute, with ``|du| = 2|u/v|`` and ``|dv| = (u/v)^2``).
A constraint ``body(x) <= hi`` whose slack ``hi - body(x)`` exceeds
:func:`slack_margin` therefore holds strictly in any other evaluation order.
"""
from __future__ import annotations

import numpy as np

from .atoms import ATOMS
from .expression import Expression
from .terms import AtomGroup, LseGroup, _mult_values

EPS = np.finfo(float).eps


def _abs_affine(A, b, ax):
    return abs(A) @ ax + np.abs(b)


def _atom_magnitude(g: AtomGroup, x, ax) -> float:
    cw = np.abs(g.coef * _mult_values(g.mult, x))
    au = _abs_affine(g.A, g.b, ax)
    kern = ATOMS[g.kind]
    if kern.arity == 2:
        u, v, val = g._g(x, 0)
        du, dv = kern.grad(u, v)
        inner = np.abs(du) * au + np.abs(dv) * _abs_affine(g.A2, g.b2, ax)
    else:
        _, val, d1, _ = g._g(x, 1)
        inner = np.abs(d1) * au
    with np.errstate(invalid="ignore"):
        return float(np.sum(cw * (np.abs(val) + inner)))


def _lse_magnitude(g: LseGroup, x, ax) -> float:
    cw = np.abs(g.coef * _mult_values(g.mult, x))
    au = _abs_affine(g.A, g.b, ax)
    inner = np.maximum.reduceat(au, g.starts) if au.size else au
    return float(np.sum(cw * (np.abs(g.group_values(x)) + inner)))


def magnitude(e: Expression, x) -> float:
    """``M(x)`` of the module docstring (NaN or inf outside the expression's domain)."""
    x = np.asarray(x, dtype=float)
    ax = np.abs(x)
    li, lv = e.linear_items()
    m = abs(e.constant) + float(np.abs(lv) @ ax[li])
    q = e.quadratic
    if len(q):
        m += float(np.abs(q.v) @ (ax[q.i] * ax[q.j]))
    for g in e.atoms:
        m += _atom_magnitude(g, x, ax)
    for g in e.lse:
        m += _lse_magnitude(g, x, ax)
    return m


def n_terms(e: Expression) -> int:
    """The number of floating-point terms in an evaluation of ``e`` (the ``t`` of the docstring)."""
    t = 1 + int(e.linear_items()[0].size) + len(e.quadratic)
    for g in e.groups():
        t += len(g) + g.A.nnz
    return t


def slack_margin(terms: int, scale) -> np.ndarray:
    """Smallest slack that survives re-evaluation: ``2 (terms + 2) eps scale`` (two evaluations,
    each within ``(terms + 1) eps scale`` of the exact value, plus the subtraction from ``hi``)."""
    return 2.0 * (np.asarray(terms, dtype=float) + 2.0) * EPS * np.asarray(scale, dtype=float)
