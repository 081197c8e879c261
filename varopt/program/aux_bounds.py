r"""Interval bounds of auxiliary columns from the user's box, for front-ends whose variables carry few declared bounds.

A CVXPY user bounds a variable with a constraint (``y >= 0.5``) more often than with an attribute
(``Variable(bounds=...)``, ``nonneg=True``). :func:`row_box` tightens the declared box by every linear row that
involves one column only (``lo <= a x_j <= hi``), which is valid for every feasible point. :func:`expression_interval`
is natural interval arithmetic over such a box (Moore 1966): constant, linear, bilinear and square terms, and
multiplier-free atom rows through the kernels' ``interval_min``/``interval_max``
(:mod:`varopt.program.atoms`). :func:`aux_intervals` walks the auxiliary columns in column order and gives each
``ratio`` (``t = v / d``), ``sqrt`` (``t = sqrt(e)``) and ``product`` (``q = Q(x)``) column the interval of the
quantity it stands for, so the spatial tree can branch on it; a ``ratio`` whose denominator interval contains 0
is refused (the row ``t d - v == 0`` is exact only where ``d != 0``).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ModelStructureError
from .atoms import ATOMS


def row_box(lb, ub, constraints, n_user):
    """``(lb, ub)`` tightened by the rows ``lo <= a x_j <= hi`` (linear, one user column)."""
    lb, ub = np.array(lb, dtype=float), np.array(ub, dtype=float)
    for c in constraints:
        e = c.body
        if not e.is_linear:
            continue
        idx, val = e.linear_items()
        if len(idx) != 1 or idx[0] >= n_user or val[0] == 0:
            continue
        j, a = int(idx[0]), float(val[0])
        lo, hi = (c.lo - e.constant) / a, (c.hi - e.constant) / a
        if a < 0:
            lo, hi = hi, lo
        lb[j], ub[j] = max(lb[j], lo), min(ub[j], hi)
    return lb, ub


def mul_interval(al, ah, bl, bh):
    """``[al, ah] * [bl, bh]`` (``0 * inf = 0``: a factor that is exactly 0 contributes 0)."""
    vals = [0.0 if a == 0 or b == 0 else a * b for a in (al, ah) for b in (bl, bh)]
    return min(vals), max(vals)


def _scale(c, lo, hi):
    if c == 0:
        return 0.0, 0.0
    return (c * lo, c * hi) if c > 0 else (c * hi, c * lo)


def ratio_interval(nlo, nhi, dlo, dhi):
    """``[nlo, nhi] / [dlo, dhi]`` for a denominator interval that excludes 0 (``dlo > 0`` or ``dhi < 0``)."""
    if not (dlo > 0 or dhi < 0):
        return -math.inf, math.inf
    vals = []
    for a in (nlo, nhi):
        for b in (dlo, dhi):
            if math.isinf(b):
                vals.append(0.0)
            elif math.isinf(a):
                vals.append(a if b > 0 else -a)
            else:
                vals.append(a / b)
    return min(vals), max(vals)


def expression_interval(e, lb, ub):
    """Interval of the expression ``e`` over the box ``[lb, ub]`` (``(-inf, inf)`` for what it cannot bound)."""
    lo = hi = float(e.constant)
    idx, val = e.linear_items()
    for j, c in zip(np.asarray(idx).tolist(), np.asarray(val).tolist()):
        a, b = _scale(c, lb[j], ub[j])
        lo, hi = lo + a, hi + b
    q = e.quadratic
    for i, j, v in zip(q.i.tolist(), q.j.tolist(), q.v.tolist()):
        if i == j:
            a, b = abs(lb[i]), abs(ub[i])
            tl = 0.0 if lb[i] <= 0 <= ub[i] else min(a, b) ** 2
            tl, th = tl, max(a, b) ** 2
        else:
            tl, th = mul_interval(lb[i], ub[i], lb[j], ub[j])
        a, b = _scale(v, tl, th)
        lo, hi = lo + a, hi + b
    for g in e.atoms:
        kern = ATOMS[g.kind]
        if g.A2 is not None:
            return -math.inf, math.inf
        for r in range(len(g.coef)):
            s, t = g.A.indptr[r], g.A.indptr[r + 1]
            ul = uh = float(g.b[r])
            for j, c in zip(g.A.indices[s:t].tolist(), g.A.data[s:t].tolist()):
                a, b = _scale(c, lb[j], ub[j])
                ul, uh = ul + a, uh + b
            ul, uh = max(ul, kern.domain[0]), uh
            gl, gh = float(kern.interval_min(ul, uh)), float(kern.interval_max(ul, uh))
            if g.mult[r] >= 0:
                m = int(g.mult[r])
                gl, gh = mul_interval(gl, gh, lb[m], ub[m])
            a, b = _scale(float(g.coef[r]), gl, gh)
            lo, hi = lo + a, hi + b
    if e.lse:
        return -math.inf, math.inf
    return (lo if lo == lo else -math.inf), (hi if hi == hi else math.inf)


def aux_intervals(aux, lb, ub, columns, where):
    """Intervals of the auxiliary columns ``columns`` (a set or the keys of a dict) in column order over the box ``[lb, ub]`` of every
    column (auxiliary entries are filled as they are computed); returns ``{column: (lo, hi)}``. ``where`` maps a
    ratio column to the text of the model part it is in. Raises :class:`ModelStructureError` for a ratio whose
    denominator may be 0 or change sign."""
    lb, ub = np.array(lb, dtype=float), np.array(ub, dtype=float)
    out = {}
    for a in sorted(aux, key=lambda a: a.index):
        if a.index not in columns:
            continue
        if a.kind == "ratio":
            dlo, dhi = expression_interval(a.denominator, lb, ub)
            if not (dlo > 0 or dhi < 0):
                raise ModelStructureError(
                    f"{where.get(a.index, 'model')}: cannot compile `{a.term}`: the denominator may be 0 or change sign "
                    f"(the variables' bounds and the constraints on a single variable give it the range [{dlo:g}, "
                    f"{dhi:g}]); a division is compiled exactly as t * d - v == 0 only where d != 0: declare bounds "
                    "that keep the denominator > 0 (or < 0), e.g. the constraint y >= 0.01 or "
                    "cp.Variable(bounds=[0.01, 10])")
            lo, hi = ratio_interval(*expression_interval(a.definition, lb, ub), dlo, dhi)
        elif a.kind == "sqrt":
            elo, ehi = expression_interval(a.definition, lb, ub)
            lo, hi = math.sqrt(max(elo, 0.0)), math.sqrt(max(ehi, 0.0)) if ehi < math.inf else math.inf
        else:
            lo, hi = expression_interval(a.definition, lb, ub)
        lo, hi = max(lo, lb[a.index]), min(hi, ub[a.index])
        lb[a.index], ub[a.index] = lo, hi
        out[a.index] = (lo, hi)
    return out
