r"""The lifted program and its McCormick relaxation (the node relaxation of GOP's tree mode).

Every nonconvex piece of a program made of linear, bilinear/quadratic and one-argument atom
terms is given a lifted column (McCormick 1976; Tawarmalani & Sahinidis 2002, ch. 4):

* ``W_ij = z_i z_j`` for every product of two distinct variables;
* ``T_r = g(a_r^T z + b_r)`` for every atom row, and for every square ``z_i^2`` (an atom
  ``square`` with ``a = e_i``);
* ``P_r = z_w T_r`` for every multiplied atom row ``c_r z_w g(u_r)``.

Each expression (objective and constraint bodies) becomes a *linear* row over
``Z = (z, W, T, P)``. For a box ``l <= z <= u`` the relaxation adds

* McCormick's envelope of each product ``p = s t`` with ``s in [s_l, s_u]``, ``t in [t_l, t_u]``::

      p >= s_l t + t_l s - s_l t_l      p >= s_u t + t_u s - s_u t_u
      p <= s_u t + t_l s - s_u t_l      p <= s_l t + t_u s - s_l t_u

  (rows whose bounds are infinite are left out);
* tangent cuts ``T_r >= g(t) + g'(t)(u_r - t)`` (valid for every ``z``: ``g`` is convex), kept
  in a pool shared by all nodes;
* the secant ``T_r <= g(u_l) + (g(u_h) - g(u_l)) (u_r - u_l) / (u_h - u_l)`` over the interval
  ``[u_l, u_h]`` of ``u_r`` on the box (valid because a convex ``g`` lies below its chord);
* the interval bounds of every lifted column.

Every point of the program in the box maps to a feasible point of the relaxation with the
same objective value, so the LP value is a lower bound of the program on the box.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ...program.atoms import ATOMS
from ...program.terms import LseGroup
from .merged_atoms import atom_key


class NotRelaxable(Exception):
    """The program has a term this relaxation does not cover (log-sum-exp, two-argument atoms)."""


@dataclass
class _AtomCol:
    kind: str
    idx: np.ndarray  # variables of u = a^T z + b
    val: np.ndarray
    b: float


def interval_affine(idx, val, b, l, u):
    """[min, max] of ``val . z[idx] + b`` over the box."""
    if idx.size == 0:
        return b, b
    with np.errstate(invalid="ignore"):
        lo = np.where(val > 0, val * l[idx], val * u[idx])
        hi = np.where(val > 0, val * u[idx], val * l[idx])
    return b + float(lo.sum()), b + float(hi.sum())


def interval_mul(al, au, bl, bu):
    """[min, max] of ``s t`` for ``s in [al, au]``, ``t in [bl, bu]`` (0 * inf = 0); arrays or scalars."""
    al, au, bl, bu = (np.asarray(v, dtype=float) for v in (al, au, bl, bu))
    prods = []
    for s_ in (al, au):
        for t_ in (bl, bu):
            # 0 * inf is 0 here (a zero factor fixes the product); the masked NaN is never used
            with np.errstate(invalid="ignore"):
                prods.append(np.where((s_ == 0) | (t_ == 0), 0.0, s_ * t_))
    P = np.stack(prods)
    lo, hi = P.min(axis=0), P.max(axis=0)
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)


def _sign_parts(A):
    """``(max(A, 0), max(-A, 0))`` as CSR matrices without stored zeros, on copies of ``A``'s arrays.

    :meth:`Lifted.u_intervals` multiplies infinite bounds through them, where a stored zero gives
    ``0 * inf = NaN``; scipy < 1.16 keeps the zeros of ``A.maximum(0)`` as stored entries, and its result
    can share ``A``'s index arrays, which ``eliminate_zeros`` would compact in place."""
    parts = []
    for sign in (1.0, -1.0):
        P = A.tocsr().copy()
        P.data = np.maximum(sign * P.data, 0.0)
        P.eliminate_zeros()
        parts.append(P)
    return parts[0], parts[1]


class Lifted:
    """The lifted linear form of a program; columns ``z (n) | W | T | P``."""

    def __init__(self, program):
        self.program = program
        n = self.n = program.n
        self.pairs = {}  # (i, j) -> W index (0-based within W)
        self.atoms = []  # list[_AtomCol]
        self.mults = []  # (w variable, T index) per P column
        self._atom_index, self._mult_index = {}, {}  # shared columns (:meth:`_atom_col`)
        exprs = [program.objective] + [c.body for c in program.constraints]
        staged = [self._stage(e) for e in exprs]
        self.nW, self.nT, self.nP = len(self.pairs), len(self.atoms), len(self.mults)
        self.oW, self.oT, self.oP = n, n + self.nW, n + self.nW + self.nT
        self.N = self.oP + self.nP
        rows, cols, vals, consts = [], [], [], []
        for r, (const, entries) in enumerate(staged):
            for (part, k), v in entries.items():
                rows.append(r)
                cols.append({"z": 0, "W": self.oW, "T": self.oT, "P": self.oP}[part] + k)
                vals.append(v)
            consts.append(const)
        self.R = sp.csr_matrix((vals, (rows, cols)), shape=(len(exprs), self.N))
        self.R.sum_duplicates()
        self.const = np.array(consts)
        # atom arguments as one sparse map u = TA z + Tb, and the atoms grouped by kind
        self.TA = sp.csr_matrix((np.concatenate([a.val for a in self.atoms]) if self.atoms else np.zeros(0),
                                 np.concatenate([a.idx for a in self.atoms]) if self.atoms else np.zeros(0, int),
                                 np.concatenate([[0], np.cumsum([a.idx.size for a in self.atoms])])),
                                shape=(len(self.atoms), n))
        self.Tb = np.array([a.b for a in self.atoms])
        kinds = [a.kind for a in self.atoms]
        self.by_kind = {k: np.array([t for t, kk in enumerate(kinds) if kk == k]) for k in set(kinds)}
        self.TApos, self.TAneg = _sign_parts(self.TA)
        self.lo = np.array([-np.inf] + [c.lo for c in program.constraints])
        self.hi = np.array([np.inf] + [c.hi for c in program.constraints])
        self.W = np.array(list(self.pairs), dtype=np.int64).reshape(-1, 2)
        self.Pw = np.array([w for w, _ in self.mults], dtype=np.int64)
        self.PT = np.array([t for _, t in self.mults], dtype=np.int64)
        # the variables each lifted column depends on (for branching)
        self.atom_vars = [a.idx for a in self.atoms]

    def _stage(self, e):
        entries = {}

        def add(key, v):
            entries[key] = entries.get(key, 0.0) + v

        for j, v in zip(*e.linear_items()):
            add(("z", int(j)), float(v))
        q = e.quadratic
        for i, j, v in zip(q.i.tolist(), q.j.tolist(), q.v.tolist()):
            if i == j:
                add(("T", self._atom_col("square", np.array([i]), np.array([1.0]), 0.0)), v)
            else:
                key = (min(i, j), max(i, j))
                k = self.pairs.setdefault(key, len(self.pairs))
                add(("W", k), v)
        for g in e.groups():
            if isinstance(g, LseGroup) or ATOMS[g.kind].arity != 1:
                raise NotRelaxable(f"{getattr(g, 'kind', 'log-sum-exp')} terms")
            A = g.A.tocsr()
            for r in range(len(g)):
                sl = slice(A.indptr[r], A.indptr[r + 1])
                t = self._atom_col(g.kind, A.indices[sl].astype(np.int64), A.data[sl].copy(), float(g.b[r]))
                if g.mult[r] >= 0:
                    key = (int(g.mult[r]), t)
                    k = self._mult_index.get(key)
                    if k is None:
                        k = self._mult_index[key] = len(self.mults)
                        self.mults.append(key)
                    add(("P", k), float(g.coef[r]))
                else:
                    add(("T", t), float(g.coef[r]))
        return e.constant, entries

    def _atom_col(self, kind, idx, val, b):
        """The ``T`` column of ``g(val . z[idx] + b)``: rows with the same atom of the same argument, in one
        expression or several, share one column (and a multiplier and a column share one ``P``). Their
        coefficients then add up in the linear rows, so the relaxation sees the net term (the Gibbs free
        energies of MINLPLib ex6_2_* write ``18.3 x log x`` and ``-17.3 x log x``: net ``x log x``, convex,
        where two separate columns relax a convex and a concave term independently)."""
        key = atom_key(kind, idx, val, b)
        t = self._atom_index.get(key)
        if t is None:
            t = self._atom_index[key] = len(self.atoms)
            self.atoms.append(_AtomCol(kind, idx, val, b))
        return t

    # ------------------------------------------------------------------ evaluation
    def lift(self, z):
        """The exact lifted point of ``z`` (``W = z_i z_j``, ``T = g(u)``, ``P = z_w T``)."""
        Z = np.empty(self.N)
        Z[:self.n] = z
        if self.nW:
            Z[self.oW:self.oT] = z[self.W[:, 0]] * z[self.W[:, 1]]
        if self.nT:
            u = self.Tb + self.TA @ z
            for kind, ts in self.by_kind.items():
                Z[self.oT + ts] = ATOMS[kind].value(u[ts])
        if self.nP:
            Z[self.oP:] = z[self.Pw] * Z[self.oT + self.PT]
        return Z

    def _jacobian_pattern(self):
        """Sparsity of ``dlift/dz`` (fixed): the positions of its entries in CSR order and the data
        the values are built from, so :meth:`jacobian` does no sparse construction per call."""
        n = self.n
        TA = self.TA.tocoo()
        TP = self.TA[self.PT].tocoo() if self.nP else None
        rows, cols = [np.arange(n)], [np.arange(n)]
        if self.nW:
            k = self.oW + np.arange(self.nW)
            rows += [k, k]
            cols += [self.W[:, 0], self.W[:, 1]]
        if self.nT:
            rows.append(self.oT + TA.row)
            cols.append(TA.col)
            if self.nP:
                rows += [self.oP + np.arange(self.nP), self.oP + TP.row]
                cols += [self.Pw, TP.col]
        key = np.concatenate(rows).astype(np.int64) * n + np.concatenate(cols)
        uniq, inv = np.unique(key, return_inverse=True)  # the P rows may repeat a column: summed
        indptr = np.searchsorted(uniq // n, np.arange(self.N + 1))
        self._jp = (inv, (uniq % n).astype(np.int32), indptr.astype(np.int32), TA, TP)
        return self._jp

    def jacobian(self, z):
        """``(values, J)`` of all expressions (objective first) at ``z``: ``R lift(z) + const`` and
        its derivative ``R dlift/dz`` (sparse)."""
        n = self.n
        inv, ind, ptr, TA, TP = getattr(self, "_jp", None) or self._jacobian_pattern()
        Z = self.lift(z)
        vals = [np.ones(n)]
        if self.nW:
            vals += [z[self.W[:, 1]], z[self.W[:, 0]]]
        if self.nT:
            u = self.Tb + self.TA @ z
            d1 = np.empty(self.nT)
            for kind, ts in self.by_kind.items():
                kern = ATOMS[kind]
                with np.errstate(all="ignore"):
                    d1[ts] = kern.d1(kern.tangent_point(np.maximum(u[ts], kern.domain[0])))
            vals.append(d1[TA.row] * TA.data)
            if self.nP:
                # P = z_w T(u): dP = T e_w + z_w dT
                vals.append(Z[self.oT + self.PT])
                vals.append(z[self.Pw][TP.row] * d1[self.PT][TP.row] * TP.data)
        data = np.bincount(inv, weights=np.concatenate(vals), minlength=ind.size)
        D = sp.csr_matrix((data, ind, ptr), shape=(self.N, n))
        return self.R @ Z + self.const, (self.R @ D).tocsr()

    def u_values(self, Z):
        z = Z[:self.n]
        return np.array([float(a.val @ z[a.idx]) + a.b for a in self.atoms])

    # ------------------------------------------------------------------ bounds of lifted columns
    def u_intervals(self, l, u):
        """``[u_l, u_h]`` of every atom argument over the box (sparse: no 0 * inf)."""
        if not self.nT:
            return np.zeros(0), np.zeros(0)
        ul = self.Tb + self.TApos @ l - self.TAneg @ u
        uh = self.Tb + self.TApos @ u - self.TAneg @ l
        return np.asarray(ul, dtype=float), np.asarray(uh, dtype=float)

    def column_bounds(self, l, u):
        """Interval bounds of every lifted column for the box ``[l, u]`` and the u-intervals."""
        L = np.empty(self.N)
        U = np.empty(self.N)
        L[:self.n], U[:self.n] = l, u
        if self.nW:
            i, j = self.W[:, 0], self.W[:, 1]
            L[self.oW:self.oT], U[self.oW:self.oT] = interval_mul(l[i], u[i], l[j], u[j])
        ul, uh = self.u_intervals(l, u)
        for kind, ts in self.by_kind.items():
            kern = ATOMS[kind]
            lo_t = np.maximum(ul[ts], kern.domain[0])
            with np.errstate(all="ignore"):
                L[self.oT + ts] = kern.interval_min(lo_t, uh[ts])
                U[self.oT + ts] = kern.interval_max(lo_t, uh[ts])
        if self.nP:
            w, t = self.Pw, self.oT + self.PT
            L[self.oP:], U[self.oP:] = interval_mul(l[w], u[w], L[t], U[t])
        L = np.where(np.isnan(L), -np.inf, L)
        U = np.where(np.isnan(U), np.inf, U)
        return L, U, ul, uh

    def objective_lower(self, L, U) -> float:
        """Interval bound of the objective over lifted column bounds ``[L, U]``: ``const + sum_j min(c_j L_j,
        c_j U_j)`` over the objective row ``c`` (``-inf`` when a needed end is infinite). Valid for every point of
        the program whose lifted columns lie in ``[L, U]`` (those of :meth:`column_bounds` or of bound
        tightening), since the objective is exactly ``c^T Z + const`` at the lifted point ``Z``: a bound that
        needs no LP."""
        row = self.R[0]
        c, j = row.data, row.indices
        keep = c != 0
        c, j = c[keep], j[keep]
        with np.errstate(invalid="ignore"):
            terms = np.where(c > 0, c * L[j], c * U[j])
        if np.any(np.isnan(terms)) or np.any(terms == -np.inf):
            return -math.inf
        return float(self.const[0] + terms.sum())

    # ------------------------------------------------------------------ relaxation rows
    def _mccormick(self, s, t, p, L, U, rows):
        sl, su, tl, tu = (_clean(v, lower) for v, lower in ((L[s], True), (U[s], False), (L[t], True), (U[t], False)))
        # (coef s, coef t, lo, hi) of  p - cs s - ct t  in [lo, hi]; an infinite end drops its rows
        for cs, ct, lower in ((tl, sl, True), (tu, su, True), (tl, su, False), (tu, sl, False)):
            if not (np.isfinite(cs) and np.isfinite(ct)):
                continue
            bound = cs * ct
            rows.append(({p: 1.0, s: -cs, t: -ct}, -bound if lower else -np.inf, np.inf if lower else -bound))

    def node_rows(self, L, U, ul, uh):
        """McCormick envelopes and secants for the box: list of ({col: coef}, lo, hi)."""
        rows = []
        for k, (i, j) in enumerate(self.W):
            self._mccormick(int(i), int(j), self.oW + k, L, U, rows)
        for k in range(self.nP):
            self._mccormick(int(self.Pw[k]), int(self.oT + self.PT[k]), self.oP + k, L, U, rows)
        for t, a in enumerate(self.atoms):
            kern = ATOMS[a.kind]
            lo_t = max(ul[t], kern.domain[0])
            if not (np.isfinite(lo_t) and np.isfinite(uh[t])):
                continue
            with np.errstate(all="ignore"):
                gl, gh = float(kern.value(np.array(lo_t))), float(kern.value(np.array(uh[t])))
            if not (np.isfinite(gl) and np.isfinite(gh)):
                continue
            col = self.oT + t
            if uh[t] - lo_t <= 1e-12 * max(1.0, abs(lo_t)):
                rows.append(({col: 1.0}, -np.inf, max(gl, gh)))
                continue
            s = (gh - gl) / (uh[t] - lo_t)
            # T - s a^T z <= gl + s (b - lo_t)
            r = {col: 1.0}
            for v, c in zip(a.idx.tolist(), a.val.tolist()):
                r[v] = r.get(v, 0.0) - s * c
            hi = gl + s * (a.b - lo_t)
            if abs(hi) >= _HUGE_CUT or max(map(abs, r.values())) >= _HUGE_CUT:
                # exp over an interval hundreds wide: a slope HiGHS refuses (passModel kError); the secant is an
                # upper estimate, so leaving it out keeps the node's bound valid (branching narrows the interval)
                continue
            rows.append((r, -np.inf, hi))
        return rows

    def tangent(self, t, point):
        """Tangent cut of ``T_t`` at ``u = point``: ({col: coef}, lo, hi)."""
        cut = self.tangent_at(t, point)
        return None if cut is None else cut[1]

    def tangent_at(self, t, point):
        """``(p, cut)``: the tangent cut of ``T_t`` and the point ``p`` it touches (``point`` lifted
        into the atom's domain by ``tangent_point``), or None where ``g`` or ``g'`` is not finite."""
        a = self.atoms[t]
        kern = ATOMS[a.kind]
        p = float(kern.tangent_point(np.array(max(point, kern.domain[0]))))
        g, d = float(kern.value(np.array(p))), float(kern.d1(np.array(p)))
        if not (np.isfinite(g) and np.isfinite(d)):
            return None
        r = {self.oT + t: 1.0}
        for v, c in zip(a.idx.tolist(), a.val.tolist()):
            r[v] = r.get(v, 0.0) - d * c
        lo = g + d * (a.b - p)
        # exp at an LP point far up an unbounded column (exp(max(v)) <= 3 with v unbounded above): HiGHS refuses
        # matrix entries of 1e15 and more (addRows kError), and a side beyond 1e20 is infinite to it; such a cut is
        # of no use to the LP, and leaving it out keeps the relaxation valid
        if abs(lo) >= _HUGE_CUT or max(map(abs, r.values())) >= _HUGE_CUT:
            return None
        return p, (r, lo, np.inf)

    def domain_rows(self):
        """``u_t >= domain lower end`` for atoms with a bounded domain (``u log u``: ``u >= 0``)."""
        rows = []
        for a in self.atoms:
            dlo = ATOMS[a.kind].domain[0]
            if np.isfinite(dlo) and a.idx.size:
                rows.append(({v: c for v, c in zip(a.idx.tolist(), a.val.tolist())}, dlo - a.b, np.inf))
        return rows

    def violations(self, Z):
        """Per lifted column: |lifted value - exact value| (W, P) and the secant gap T - g(u) (T)."""
        z = Z[:self.n]
        vW = np.abs(Z[self.oW:self.oT] - z[self.W[:, 0]] * z[self.W[:, 1]]) if self.nW else np.zeros(0)
        u = self.u_values(Z)
        g = np.array([float(ATOMS[a.kind].value(np.array(max(uu, ATOMS[a.kind].domain[0]))))
                      for a, uu in zip(self.atoms, u)])
        T = Z[self.oT:self.oP]
        with np.errstate(invalid="ignore"):
            vT = np.where(np.isfinite(g), T - g, np.inf)
        vP = np.abs(Z[self.oP:] - z[self.Pw] * T[self.PT]) if self.nP else np.zeros(0)
        return vW, vT, vP, u, g


def _clean(v, lower, eps=1e-8):
    """A bound within ``eps`` of 0 on its inner side moved to 0: a lower bound 6.6e-9 becomes 0, an
    upper bound -6.6e-9 becomes 0. The box only grows (the rows stay valid) and the LP does not get
    coefficients of 1e-9 next to ones of 30, which HiGHS cannot classify reliably."""
    if lower and 0 < v < eps:
        return 0.0
    if not lower and -eps < v < 0:
        return 0.0
    return v


def interval_lower_bound(program, l, u) -> float:
    """The interval bound of ``program``'s objective over the box ``[l, u]`` through its lifted form
    (:meth:`Lifted.objective_lower` of :meth:`Lifted.column_bounds`); ``-inf`` when a term is not relaxable or
    the box leaves a needed end infinite. Valid for every point of the box: it needs no LP."""
    try:
        lf = Lifted(program)
    except NotRelaxable:
        return -math.inf
    L, U, _, _ = lf.column_bounds(np.asarray(l, dtype=float), np.asarray(u, dtype=float))
    return lf.objective_lower(L, U)


#: tangent cuts and secants with a coefficient or side this large are left out (:meth:`Lifted.tangent_at`):
#: HiGHS returned "optimal" LPs that were not (max x0 = 17.7 where x0 = 40 is feasible) once a tangent of
#: exp(1.25 x0 - 0.42) at x0 = 18.5, slope 9e9, sat next to unit coefficients; leaving a cut out only loosens the
#: relaxation. 1e14 (HiGHS's refusal) and 1e9 still gave a wrong certified optimum on that model
_HUGE_CUT = 1e8


def rows_to_csr(rows, N):
    """Rows as ({col: coef}, lo, hi) -> (csr, lo, hi)."""
    if not rows:
        return sp.csr_matrix((0, N)), np.zeros(0), np.zeros(0)
    ind, dat, ptr = [], [], [0]
    for r, _, _ in rows:
        ind.extend(r.keys())
        dat.extend(r.values())
        ptr.append(len(ind))
    A = sp.csr_matrix((np.array(dat, dtype=float), np.array(ind, dtype=np.int64), np.array(ptr)), shape=(len(rows), N))
    return A, np.array([r[1] for r in rows], dtype=float), np.array([r[2] for r in rows], dtype=float)


class TangentPool:
    r"""Tangent cuts of the convex atoms, shared by all nodes, handed to a node only where they can bind.

    For a convex ``g`` and tangent points ``p_1 < p_2 <= u_l``, the tangent at ``p_2`` dominates the one
    at ``p_1`` on ``u >= p_2``: their difference is ``g(p_2) - g(p_1) - g'(p_1)(p_2 - p_1)
    + (g'(p_2) - g'(p_1))(u - p_2) >= 0`` (both terms are nonnegative by convexity). On a node whose
    columns keep ``u_t`` in ``[u_l, u_h]`` the cuts touching below ``u_l`` other than the closest one,
    and symmetrically above ``u_h``, are therefore implied by the rows kept: the node LP's value is
    the same with or without them, and its rows stay few as the pool grows (docs/gop.md §8).

    The cuts of one atom share their columns (``T_t`` and the atom's variables), so they are kept as
    arrays per atom and a node's block is assembled without per-row Python work.
    """

    def __init__(self, n_atoms):
        self._pts = [[] for _ in range(n_atoms)]
        self._data = [[] for _ in range(n_atoms)]
        self._lo = [[] for _ in range(n_atoms)]
        self._cols = [None] * n_atoms
        self._arr = [None] * n_atoms  # (points, data, lo) as arrays, rebuilt after an add
        self.size = 0

    def add(self, t, tangent):
        """Add ``tangent = (p, (row, lo, hi))`` of atom ``t`` (None is ignored). Returns True if added."""
        if tangent is None:
            return False
        p, (row, lo, _) = tangent
        if self._cols[t] is None:
            self._cols[t] = np.fromiter(row.keys(), dtype=np.int64, count=len(row))
        self._pts[t].append(p)
        self._data[t].append([row[c] for c in self._cols[t].tolist()])
        self._lo[t].append(lo)
        self._arr[t] = None
        self.size += 1
        return True

    def _arrays(self, t):
        if self._arr[t] is None:
            self._arr[t] = (np.array(self._pts[t]), np.array(self._data[t], dtype=float), np.array(self._lo[t]))
        return self._arr[t]

    def keep(self, t, ul, uh):
        """Indices of atom ``t``'s cuts that can bind while ``u_t`` lies in ``[ul, uh]``."""
        pts = self._arrays(t)[0]
        inside = (pts >= ul) & (pts <= uh)
        sel = [np.flatnonzero(inside)]
        below = np.flatnonzero(pts < ul)
        if below.size:
            sel.append(below[[int(np.argmax(pts[below]))]])
        above = np.flatnonzero(pts > uh)
        if above.size:
            sel.append(above[[int(np.argmin(pts[above]))]])
        return np.concatenate(sel)

    def block(self, ul, uh, N):
        """``(A, lo, hi)``: the cuts that can bind when every ``u_t`` lies in ``[ul[t], uh[t]]``."""
        ind, dat, los = [], [], []
        ptr = [np.zeros(1, dtype=np.int64)]
        nnz = 0
        for t, pts in enumerate(self._pts):
            if not pts:
                continue
            k = self.keep(t, ul[t], uh[t])
            _, data, lo = self._arrays(t)
            cols = self._cols[t]
            ind.append(np.tile(cols, k.size))
            dat.append(data[k].ravel())
            los.append(lo[k])
            ptr.append(nnz + cols.size * np.arange(1, k.size + 1, dtype=np.int64))
            nnz += cols.size * k.size
        if not los:
            return sp.csr_matrix((0, N)), np.zeros(0), np.zeros(0)
        lo = np.concatenate(los)
        A = sp.csr_matrix((np.concatenate(dat), np.concatenate(ind), np.concatenate(ptr)), shape=(lo.size, N))
        return A, lo, np.full(lo.size, np.inf)
