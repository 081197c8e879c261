"""Symmetry breaking for gop (option ``symmetry``; docs/gop.md §8c).

The orbits come from :mod:`varopt.program.symmetry` (detected, or declared by the user and
verified). ONE representative set ``R = (r_1, ..., r_K)`` of ONE orbit is ordered,
``z_{r_1} <= ... <= z_{r_K}``, in one of two ways:

* ``'box'`` (plain GOP): ``R`` lies in the primal block, every ``r_j`` is a branchable variable of
  the search-space reduction (docs/gop.md §6) and the objective is strictly convex in it (a
  multiplier-free ``c z_r^2``, ``c > 0``). The ordering then tightens the box of every node
  (:func:`order_box`) instead of being a constraint (a constraint on primal variables would be
  dualised, and dualised variables lose the reduction).
* ``'rows'``: the linear rows ``z_{r_j} - z_{r_{j+1}} <= 0`` are added to the program (the tree
  mode, or plain GOP with ``R`` in the relaxed-dual block, where they stay in every relaxed dual).
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from ...errors import InvalidOptionError
from ...program.symmetry import declared_orbit, detect_orbits


def symmetry_domain(v):
    """Option ``symmetry``: 'auto', 'off', or a list of at least two groups of variable names."""
    if isinstance(v, str):
        if v not in ("auto", "off"):
            raise ValueError("must be 'auto', 'off' or a list of groups of variable names")
        return v
    if isinstance(v, (list, tuple)) and len(v) >= 2 and all(
            isinstance(g, (list, tuple)) and g and all(isinstance(s, str) for s in g) for g in v):
        return tuple(tuple(g) for g in v)
    raise ValueError("must be 'auto', 'off' or a list of at least two groups (lists) of variable names, e.g. "
                     "[['mu[0]', 'phi[*,0]'], ['mu[1]', 'phi[*,1]']]")


def _expand(program, pattern):
    """Variable indices matching ``pattern`` (``*`` matches one index, brackets are literal), in order."""
    if pattern in program.index:
        return [program.index[pattern]]
    rx = re.compile("^" + re.escape(pattern).replace(r"\*", r"[^,\]]*") + "$")
    hits = [k for k, s in enumerate(program.names) if rx.match(s)]
    if not hits:
        raise InvalidOptionError(f"option 'symmetry': no variable matches {pattern!r} (variables: "
                                 f"{', '.join(program.names[:8])}{', ...' if program.n > 8 else ''})")
    return hits


#: share of the time left that the detection of ``symmetry='auto'`` may use under a time limit (a presolve: on a
#: 30 x 30 rank-5 NMF it took ~1 s on a quiet machine and ~3 s of a 5 s limit on a loaded one)
DETECT_SHARE = 0.2


def orbits_for(program, value, stop=None):
    """The orbits of ``program`` for the option value (detected, declared, or none). ``stop``: asked during the
    detection; True ends it with the orbits verified so far (:func:`varopt.program.symmetry.detect_orbits`)."""
    if value == "off":
        return []
    if value == "auto":
        return detect_orbits(program, stop=stop)
    groups = [[k for pat in g for k in _expand(program, pat)] for g in value]
    try:
        return [declared_orbit(program, groups)]
    except ValueError as e:
        raise InvalidOptionError(f"option 'symmetry': {e}") from None


def strictly_convex(program, v) -> bool:
    """True when the objective holds a multiplier-free term ``c z_v^2`` with ``c > 0`` (the rest of the
    objective is convex in ``z_v`` for fixed relaxed-dual variables by the partition conditions, so
    the objective is then strictly convex in ``z_v``)."""
    e = program.objective
    q = e.quadratic
    if np.any((q.i == v) & (q.j == v) & (q.v > 0)):
        return True
    for g in e.atoms:
        if not g.kernel.quadratic:
            continue
        for r in np.flatnonzero((g.mult < 0) & (g.coef > 0)):
            row = g.A[r]
            if row.nnz == 1 and row.indices[0] == v and row.data[0] != 0:
                return True
    return False


def choose(program, part, orbits, tree: bool, box_ok: bool = True):
    """``(mode, reps)``: how to break the symmetry (``'box'``, ``'rows'`` or None) and the ordered
    representative variables (indices of ``program``). ``box_ok``: the search-space reduction is on."""
    is_x = np.zeros(program.n, dtype=bool)
    is_x[part.x] = True
    for orb in orbits:
        sets = orb.rep_sets()
        if tree:
            xs = [r for r in sets if is_x[r].all()]
            return "rows", (xs or sets)[0]
        for r in sets if box_ok else ():
            if is_x[r].all() and all(strictly_convex(program, int(v)) for v in r):
                return "box", r
        for r in sets:
            if not is_x[r].any():
                return "rows", r
    return None, None


def order_box(chain, blo, bub) -> bool:
    """Tighten the box ``[blo, bub]`` (in place) to the smallest box holding its points with
    ``z_{chain[0]} <= z_{chain[1]} <= ...``; False when no such point exists."""
    for a, b in itertools.pairwise(chain):
        blo[b] = max(blo[b], blo[a])
    for b, a in itertools.pairwise(chain[::-1]):
        bub[a] = min(bub[a], bub[b])
    return bool(np.all(blo[chain] <= bub[chain]))
