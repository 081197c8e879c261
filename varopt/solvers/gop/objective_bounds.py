r"""Bounds from the incumbent cutoff through a separable quadratic lower estimate (docs/gop.md §8k).

A variable ``x_j`` of a product with no finite bound from its declaration or from FBBT
(:mod:`.tighten`) leaves McCormick's envelope without rows. Once an incumbent of value ``UB``
exists, every point that can still improve on it satisfies ``f(x) <= UB``; SCIP and BARON
tighten bounds with this cut (Ryoo & Sahinidis 1996; Belotti et al. 2009, §5). Here the cut
gives bounds through a separable lower estimate of ``f`` (the objective row ``c^T Z`` over the
lifted columns ``Z = (z, W, T, P)`` of :mod:`.relax`), each column assigned to one variable ``z_i``:

* ``z_i`` and the squares of ``z_i`` alone, ``c (v z_i + b)^2``, exactly: ``A_i t^2 + B_i t`` (+ constant);
* a product ``c z_i z_o`` whose other factor is bounded is linear in ``z_i`` with a coefficient in
  ``c [l_o, u_o]``; the same for ``c z_i g(u)`` (a ``P`` column) with ``g(u)`` in a finite interval and ``u``
  free of ``z_i``; their sum is ``alpha t``, ``alpha in [a_lo_i, a_hi_i]``, and
  ``min_alpha alpha t = min(a_lo_i t, a_hi_i t)``;
* every other column is bounded below by its interval over the box, ``c L_k`` (``c > 0``) or ``c U_k``: ``K``.

So for every ``z`` in the box ``c^T Z >= K + sum_i phi_i(z_i)``, ``phi_i(t) = A_i t^2 + B_i t +
min(a_lo_i t, a_hi_i t)``. With ``m_i = min phi_i`` over ``z_i``'s interval, ``c^T Z <= UB`` gives
``phi_j(z_j) <= UB - K - sum_{i != j} m_i``: the union of the sublevel sets of the two quadratics
``A_j t^2 + (B_j + a) t`` (``a = a_lo_j, a_hi_j``), each an interval when ``A_j > 0`` (a half-line
when ``A_j = 0``). Its hull bounds ``z_j``; no point with ``f <= UB`` is cut off. A new bound
tightens the others' ``m_i`` and coefficient intervals: the rows are swept until nothing moves.

Constraint rows ``lo <= c^T Z <= hi`` give the same with ``hi`` (and ``-c``, ``-lo``) in place
of ``UB``; they need no incumbent.
"""
from __future__ import annotations

import math

import numpy as np

from ...program.atoms import ATOMS


def _sublevel(A, b, k):
    """``{t : A t^2 + b t + k <= 0}`` as ``(lo, hi)``, ``None`` when empty (an outer interval under rounding)."""
    if A > 0:
        disc = b * b - 4.0 * A * k
        if disc < -1e-12 * max(1.0, b * b, abs(4.0 * A * k)):
            return None
        r = math.sqrt(max(disc, 0.0))
        # the roots without cancellation (the larger-magnitude one first)
        q = -0.5 * (b + math.copysign(r, b))
        roots = sorted([q / A, k / q if q != 0 else 0.0])
        return roots[0], roots[1]
    if A < 0:
        return -math.inf, math.inf   # concave in t: no bound
    if b > 0:
        return -math.inf, -k / b
    if b < 0:
        return -k / b, math.inf
    return (-math.inf, math.inf) if k <= 0 else None


def _group_min(A, B, a_lo, a_hi, lo, hi):
    """``min over t in [lo, hi]`` of ``A t^2 + B t + min(a_lo t, a_hi t)`` (``-inf`` when unbounded below)."""
    best = math.inf
    for s in (B + a_lo, B + a_hi):
        if A > 0:
            ts = [min(max(-s / (2.0 * A), lo), hi)]
        elif A == 0 and s == 0:
            ts = [0.0 if lo <= 0 <= hi else (lo if lo > 0 else hi)]
        else:
            ts = [lo, hi]
        for t in ts:
            if not math.isfinite(t):
                return -math.inf
            best = min(best, A * t * t + s * t)
    return best


def _widen(lo, hi):
    """Push both ends outwards so rounding in the sums cannot cut off a point on the boundary."""
    return (lo - 1e-7 * max(1.0, abs(lo)) if math.isfinite(lo) else lo,
            hi + 1e-7 * max(1.0, abs(hi)) if math.isfinite(hi) else hi)


class ObjectiveBounds:
    """The separable lower estimates of every row of a :class:`~.relax.Lifted` program, per variable."""

    def __init__(self, lifted):
        lf = self.lf = lifted
        # square atoms of one variable: T column -> (variable, v, b) of (v z_j + b)^2
        self.square_of = {}
        for t, a in enumerate(lf.atoms):
            if ATOMS[a.kind].quadratic and a.idx.size == 1:
                self.square_of[lf.oT + t] = (int(a.idx[0]), float(a.val[0]), float(a.b))
        self.atom_has = [set(a.idx.tolist()) for a in lf.atoms]
        R = lf.R.tocsr()
        self.rows = [(R.indices[R.indptr[r]:R.indptr[r + 1]], R.data[R.indptr[r]:R.indptr[r + 1]])
                     for r in range(R.shape[0])]

    def _groups(self, cols, vals, l, u, L, U):
        """The separable lower estimate of ``vals . Z[cols]`` over the box: ``({i: [A, B, a_lo, a_hi]}, K, blockers)``.

        ``c^T Z >= K + sum_i phi_i(z_i)``, ``phi_i(t) = A t^2 + B t + min(a_lo t, a_hi t)``: every ``z_i`` column,
        square of ``z_i`` alone and product ``z_i z_o`` (or ``z_i g(u)``) whose other factor is bounded goes to
        ``phi_i`` (a product of two bounded factors to the first); a product of two unbounded factors and every
        other column are bounded by their interval. ``blockers``: the columns whose interval is ``-inf``."""
        lf = self.lf
        groups = {}
        K = 0.0
        blockers = []

        def grp(i):
            g = groups.get(i)
            if g is None:
                g = groups[i] = [0.0, 0.0, 0.0, 0.0]
            return g
        for k, c in zip(cols.tolist(), vals.tolist()):
            if c == 0.0:
                continue
            if k < lf.n:
                grp(k)[1] += c
                continue
            sq = self.square_of.get(k)
            if sq is not None:
                i, v, b = sq
                g = grp(i)
                g[0] += c * v * v
                g[1] += 2.0 * c * v * b
                K += c * b * b
                continue
            owner = coef = None
            if lf.oW <= k < lf.oT:
                p, q = (int(v) for v in lf.W[k - lf.oW])
                qfin = math.isfinite(l[q]) and math.isfinite(u[q])
                pfin = math.isfinite(l[p]) and math.isfinite(u[p])
                if qfin:
                    owner, coef = p, (l[q], u[q])
                elif pfin:
                    owner, coef = q, (l[p], u[p])
            elif k >= lf.oP:
                w, t = int(lf.Pw[k - lf.oP]), int(lf.PT[k - lf.oP])
                if w not in self.atom_has[t] and math.isfinite(L[lf.oT + t]) and math.isfinite(U[lf.oT + t]):
                    owner, coef = w, (L[lf.oT + t], U[lf.oT + t])
            if owner is not None:
                lo_, hi_ = sorted((c * coef[0], c * coef[1]))
                g = grp(owner)
                g[2] += lo_
                g[3] += hi_
                continue
            end = c * (L[k] if c > 0 else U[k])
            if not math.isfinite(end):
                blockers.append(k)
                continue
            K += end
        return groups, K, blockers

    def objective_blockers(self, j, l, u):
        """``(variables, products_only)``: the variables other than ``j`` whose objective terms are unbounded below
        over the box ``[l, u]`` and so keep the cutoff from bounding ``z_j`` (the cause to name when ``z_j`` stays
        unbounded); ``products_only`` when every such term is a product of two unbounded variables (the objective
        may well be bounded: ``x y + x^2 + y^2``)."""
        lf = self.lf
        L, U, _, _ = lf.column_bounds(l, u)
        cols, vals = self.rows[0]
        groups, _, blockers = self._groups(cols, vals, l, u, L, U)
        out = set()
        for k in blockers:
            out.update(self._variables(np.array([k])))
        grown = [i for i, g in groups.items() if _group_min(*g, l[i], u[i]) == -math.inf]
        out.update(grown)
        products_only = bool(blockers) and not grown and all(lf.oW <= k < lf.oT for k in blockers)
        out.discard(j)
        return sorted(out), products_only

    def tighten(self, l, u, cutoff=math.inf, rounds=5):
        """Tighten the infinite bounds of ``[l, u]`` with the rows and ``f <= cutoff``; returns ``(l, u, empty)``.

        Only infinite ends are replaced (finite ones are FBBT's and OBBT's work), so the result holds every point
        of the box that satisfies the rows and has objective at most ``cutoff``."""
        lf = self.lf
        l, u = l.astype(float).copy(), u.astype(float).copy()
        sides = []
        if math.isfinite(cutoff):
            sides.append((0, 1.0, cutoff - lf.const[0]))
        for r in range(1, len(self.rows)):
            if math.isfinite(lf.hi[r]):
                sides.append((r, 1.0, lf.hi[r] - lf.const[r]))
            if math.isfinite(lf.lo[r]):
                sides.append((r, -1.0, -(lf.lo[r] - lf.const[r])))
        for _ in range(rounds):
            moved = False
            L, U, _, _ = lf.column_bounds(l, u)
            for r, sgn, rhs in sides:
                cols, vals = self.rows[r]
                if moved:   # (the column bounds of the box as it stands: a row's new bound tightens the next row's)
                    L, U, _, _ = lf.column_bounds(l, u)
                groups, K, blockers = self._groups(cols, sgn * vals, l, u, L, U)
                if blockers:
                    continue
                mins = {i: _group_min(*g, l[i], u[i]) for i, g in groups.items()}
                n_inf = sum(1 for v in mins.values() if v == -math.inf)
                total = K + sum(v for v in mins.values() if v != -math.inf)
                for j, (A, B, a_lo, a_hi) in groups.items():
                    if math.isfinite(l[j]) and math.isfinite(u[j]):
                        continue
                    if n_inf - (mins[j] == -math.inf) > 0:
                        continue
                    # phi_j(z_j) <= rhs - K - sum_{i != j} min phi_i, with a rounding margin on the right
                    rest = total - (mins[j] if mins[j] != -math.inf else 0.0)
                    k = rest - rhs - 1e-9 * (max(1.0, abs(rhs), abs(K)) + sum(abs(v) for v in mins.values()
                                                                               if math.isfinite(v)))
                    parts = [p for p in (_sublevel(A, B + a_lo, k), _sublevel(A, B + a_hi, k)) if p is not None]
                    if not parts:
                        return l, u, True
                    lo, hi = _widen(min(p[0] for p in parts), max(p[1] for p in parts))
                    lo, hi = max(l[j], lo), min(u[j], hi)
                    if lo > hi:
                        return l, u, True
                    if lo > l[j] or hi < u[j]:
                        l[j], u[j] = lo, hi
                        moved = True
            if not moved:
                break
        return l, u, False

    def _variables(self, cols):
        """The variables a row's columns depend on."""
        lf = self.lf
        out = set()
        for k in cols.tolist():
            if k < lf.n:
                out.add(k)
            elif k < lf.oT:
                out.update(int(v) for v in lf.W[k - lf.oW])
            elif k < lf.oP:
                out.update(self.atom_has[k - lf.oT])
            else:
                out.add(int(lf.Pw[k - lf.oP]))
                out.update(self.atom_has[int(lf.PT[k - lf.oP])])
        return sorted(out)
