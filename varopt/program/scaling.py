r"""Scaling symmetries of bilinear factorizations and the normalization rows they make valid
(docs/gop.md §8e).

A *scaling pair* is a pair of disjoint variable blocks ``(X, Y)`` such that the program is invariant
under ``x -> c x``, ``y -> y / c`` for every ``c > 0`` (as far as the bounds allow): NMF
``min ||A - W H||`` has one pair per factor, ``(W[:, k], H[k, :])``. Detected on the compiled
program (nothing here imports Pyomo or CVXPY) as the components of a signed graph:

* a variable is a *candidate* when it is not binary, its box contains 0 (``[0, U]``, ``[-inf, 0]``,
  ``[-inf, inf]``, ``[-L, U]``, ...; after single-variable rows are folded into bounds), and it occurs only (a) in bilinear monomials ``v w`` (``v != w``) of the objective or
  of any row, and (b) linearly in *conical* rows: linear, no constant, sides in ``{-inf, 0, inf}``.
  Never linearly elsewhere, never squared, never in an atom, a multiplier or a log-sum-exp;
* a monomial ``v w`` with a non-candidate disqualifies both, as does a conical row with a
  non-candidate (to a fixpoint);
* the candidates form a graph with *odd* edges (the two factors of a monomial: opposite blocks)
  and *even* edges (the variables of one conical row: the same block). A connected component with a
  consistent two-colouring and at least one monomial is a pair ``(X, Y)`` (the two colours).

Under ``x -> c x, y -> y / c`` every monomial of the component keeps its value (its factors are one
``X`` and one ``Y`` variable), a conical row over one block is multiplied by ``c`` or ``1 / c`` (its
sign, hence its sides, are kept), and no other term contains a variable of the component: the
objective and every row are unchanged, and the bounds are kept when they are ``0`` or infinite.

**Normalization** (proofs in docs/gop.md §8e). For the normalized block ``S`` (``X`` or ``Y``, all
variables sign-constrained, ``s_v z_v >= 0`` with ``s_v = +-1``, not all fixed at 0, no conical row
of two or more variables) with weights ``w_v = 1 / U_v`` (``U_v`` the finite magnitude bound, 1
when infinite) and its partner block ``T``:

* ``sum_S w_v s_v z_v == 1`` when no variable of ``T`` has a finite nonzero bound;
* otherwise ``sum_S w_v s_v z_v >= 1``; when every variable of ``S`` has a finite bound the stronger
  disjunction *some* ``z_v = s_v U_v`` (``v in S``) holds at some optimum too, and the tree can split
  its root box on it (:attr:`ScalingPair.split`).

**Signed factors** (docs/gop.md §8e-s). When neither block is sign-constrained but one, ``S``, has boxes
``[L_v, U_v]`` containing 0 whose nonzero sides are finite, some optimum has ``z_v = U_v`` or ``z_v = L_v``
for some ``v in S`` (scaling by ``c = 1 / max_v rho_v(z) >= 1``, ``rho_v(z) = z_v / U_v`` for ``z_v > 0``,
``z_v / L_v`` for ``z_v < 0``): a split of the root box into up to ``2 |S|`` boxes, no row (``kind='split'``).
When the flip ``(z_X, z_Y) -> (-z_X, -z_Y)`` is a symmetry too (every box of the pair ``[-a, a]``, no conical
row on the pair; checked by evaluation at random points), the ``L_v`` side is dropped: ``|S|`` boxes.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np


@dataclass
class ScalingPair:
    """One scaling symmetry ``z_X -> c z_X``, ``z_Y -> z_Y / c``: the blocks (variable indices), the
    normalized block ``S`` (one of them, or None when neither qualifies), its signs and weights, the
    kind of the row (``'=='`` or ``'>='``), and ``split`` (the ``(v, s_v U_v)`` of the disjunction, or
    None)."""

    X: list
    Y: list
    S: list = field(default_factory=list)
    signs: np.ndarray = None
    weights: np.ndarray = None
    kind: str = None
    split: list = None
    reason: str = ""
    #: the partner block and its signs (0 for a free variable)
    T: list = field(default_factory=list)
    tsigns: np.ndarray = None
    #: True when the flip ``(z_X, z_Y) -> (-z_X, -z_Y)`` is a verified symmetry (signed factors; the split then
    #: keeps only the ``+U_v`` side)
    flip: bool = False

    def describe(self, names, limit=4):
        def block(b):
            s = ", ".join(names[v] for v in b[:limit])
            return s + (f", ... ({len(b)})" if len(b) > limit else "")
        return f"{block(self.X)} ~ {block(self.Y)} (x -> c x, y -> y / c)"

    def split_text(self, names, limit=6):
        """The disjunction of a signed pair (``kind == 'split'``): ``u[0] == 2 or u[0] == -2 or ...``."""
        terms = [f"{names[v]} == {val:.6g}" for v, val in self.split]
        return " or ".join(terms[:limit]) + (f" or ... ({len(terms)})" if len(terms) > limit else "")

    def row_text(self, names, limit=4):
        terms = [f"{'-' if s < 0 else ''}{'' if w == 1 else f'{w:.6g} '}{names[v]}"
                 for v, s, w in zip(self.S, self.signs, self.weights)]
        txt = " + ".join(terms[:limit]) + (" + ..." if len(terms) > limit else "")
        return f"{txt} {self.kind} 1"


def _bound_pattern_ok(lb, ub):
    """Bounds that a scaling toward 0 keeps, and a scaling away from 0 keeps up to a finite bound: every
    box that contains 0 (``[0, U]``, ``[-inf, 0]``, ``[-inf, inf]``, and since the signed factors of
    docs/gop.md §8e-s also ``[L, U]`` with ``L < 0 < U``): a box is convex, so with 0 it holds the segment
    from each of its points to 0."""
    return (lb <= 0) & (ub >= 0)


def _is_conical(c):
    e = c.body
    return (e.is_linear and e.constant == 0 and c.lo in (0.0, -np.inf) and c.hi in (0.0, np.inf)
            and c.lo <= c.hi)


def scaling_pairs(program, stop=None):
    """The scaling pairs of ``program`` (a list of :class:`ScalingPair`, normalization chosen). ``stop()`` (None:
    never) is asked before each pair's normalization and each point of the flip check; once it says True no pair
    is returned (adding none is always valid: the rows and splits only remove symmetric copies of optima)."""
    p = program.fold_bound_rows()
    lb, ub = p.lb, p.ub
    ok = _bound_pattern_ok(lb, ub)
    if p.binary is not None:
        ok &= ~p.binary
    edges = set()
    conical = []

    def scan(e, cone):
        idx, val = e.linear_items()
        idx = np.asarray(idx)[np.asarray(val) != 0]
        if cone:
            if idx.size >= 2:
                conical.append(idx.tolist())
        else:
            ok[idx] = False
        q = e.quadratic
        for i, j, v in zip(q.i.tolist(), q.j.tolist(), q.v.tolist()):
            if v == 0:
                continue
            if i == j:
                ok[i] = False
            else:
                edges.add((min(i, j), max(i, j)))
        for g in e.groups():
            ok[g.A.indices] = False
            ok[g.mult[g.mult >= 0]] = False
            if getattr(g, "A2", None) is not None:
                ok[g.A2.indices] = False

    scan(p.objective, False)
    for c in p.constraints:
        scan(c.body, _is_conical(c))
    if not edges:
        return []
    changed = True
    while changed:  # a monomial or a conical row with a non-candidate disqualifies its candidates
        changed = False
        for i, j in edges:
            if ok[i] != ok[j]:
                ok[i] = ok[j] = False
                changed = True
        for r in conical:
            if not ok[r].all() and ok[r].any():
                ok[r] = False
                changed = True
    # two-colouring of the candidates: odd edges (monomials), even edges (conical rows)
    adj = {}
    for i, j in edges:
        if ok[i]:
            adj.setdefault(i, []).append((j, 1))
            adj.setdefault(j, []).append((i, 1))
    row_of = {}
    for k, r in enumerate(conical):
        if ok[r[0]]:
            for a, b in zip(r[:-1], r[1:]):
                adj.setdefault(a, []).append((b, 0))
                adj.setdefault(b, []).append((a, 0))
            for v in r:
                row_of.setdefault(v, []).append(k)
    colour = {}
    pairs = []
    for start in sorted(adj):
        if start in colour:
            continue
        colour[start] = 0
        comp, stack, consistent = [start], [start], True
        while stack:
            v = stack.pop()
            for w, par in adj[v]:
                cw = colour[v] ^ par
                if w not in colour:
                    colour[w] = cw
                    comp.append(w)
                    stack.append(w)
                elif colour[w] != cw:
                    consistent = False
        X = sorted(v for v in comp if colour[v] == 0)
        Y = sorted(v for v in comp if colour[v] == 1)
        if not consistent or not X or not Y:
            continue
        if stop is not None and stop():
            return []
        pairs.append(_normalize(ScalingPair(X, Y), lb, ub, row_of, p, stop))
    if stop is not None and stop():
        return []   # a flip check was cut short: its pair's answer is not known
    return pairs


def _normalize(pair, lb, ub, row_of, program=None, stop=None):
    """Choose the normalized block and its row (module docstring; docs/gop.md §8e), or for signed factors
    the disjunction of the root split (:func:`_normalize_signed`; docs/gop.md §8e-s)."""
    def eligible(S):
        S = np.asarray(S)
        signed = (lb[S] == 0) | (ub[S] == 0)
        free = ~((lb[S] == 0) & (ub[S] == 0))
        return bool(signed.all() and free.any() and not any(v in row_of for v in S.tolist()))

    def partner_free(T):
        T = np.asarray(T)
        return bool(np.all(np.isin(lb[T], (0.0, -np.inf)) & np.isin(ub[T], (0.0, np.inf))))

    def finite(S):
        S = np.asarray(S)
        S = S[~((lb[S] == 0) & (ub[S] == 0))]
        mag = np.where(lb[S] == 0, ub[S], -lb[S])
        return bool(np.isfinite(mag).all())

    opts = []
    for S, T in ((pair.X, pair.Y), (pair.Y, pair.X)):
        if eligible(S):
            # prefer an equality, then a block whose disjunction can split the root, then fewer variables
            opts.append((not partner_free(T), not finite(S), len(S), S[0], S, T))
    if not opts:
        return _normalize_signed(pair, lb, ub, row_of, program, stop)
    eq_not, fin_not, _, _, S, T = min(opts)
    S = np.asarray(S)
    S = S[~((lb[S] == 0) & (ub[S] == 0))]
    s = np.where(lb[S] == 0, 1.0, -1.0)
    mag = np.where(lb[S] == 0, ub[S], -lb[S])
    w = np.where(np.isfinite(mag), 1.0 / np.where(np.isfinite(mag), mag, 1.0), 1.0)
    pair.S, pair.signs, pair.weights = S.tolist(), s, w
    T = np.asarray(T)
    pair.T, pair.tsigns = T.tolist(), np.where(lb[T] == 0, 1.0, np.where(ub[T] == 0, -1.0, 0.0))
    pair.kind = ">=" if eq_not else "=="
    if eq_not:
        pair.reason = "the partner block has finite bounds: the scaling is limited, only a one-sided row is valid"
        if not fin_not:
            pair.split = [(int(v), float(sv * m)) for v, sv, m in zip(S, s, mag)]
    else:
        pair.reason = "the partner block has no finite bounds: every scale is reachable"
    return pair


def _normalize_signed(pair, lb, ub, row_of, program, stop=None):
    """Signed factors (docs/gop.md §8e-s, Claims 3-4): a block ``S`` whose variables have boxes
    ``[L_v, U_v]`` with ``L_v <= 0 <= U_v``, finite on every nonzero side, not all ``[0, 0]``, no conical row
    of two or more variables. Some optimum has ``z_v = U_v`` (``U_v > 0``) or ``z_v = L_v`` (``L_v < 0``) for
    some ``v in S`` (Claim 3); with the flip symmetry only ``z_v = U_v`` (Claim 4). ``kind = 'split'``: no
    row (``max_v rho_v(z) >= 1`` is not convex), only :attr:`ScalingPair.split`."""
    def eligible(S):
        S = np.asarray(S)
        zero = (lb[S] == 0) & (ub[S] == 0)
        finite = np.where(lb[S] < 0, np.isfinite(lb[S]), True) & np.where(ub[S] > 0, np.isfinite(ub[S]), True)
        return bool(finite.all() and (~zero).any() and not any(v in row_of for v in S.tolist()))

    both = np.asarray(pair.X + pair.Y)
    # the flip is a symmetry when every term of the pair is invariant (monomials across X x Y are, by the
    # two-colouring; a conical row would change its sign) and every box of the pair is [-a, a]
    flip = bool(np.all(lb[both] == -ub[both]) and not any(v in row_of for v in both.tolist()))
    flip_note = ""
    if flip and program is not None:
        flip = flip_invariant(program, pair.X, pair.Y, stop=stop)
        if not flip:
            flip_note = "; the flip (x, y) -> (-x, -y) changed the program at a random point: not used"

    def sides(v):
        out = []
        if ub[v] > 0:
            out.append((int(v), float(ub[v])))
        if lb[v] < 0 and not flip:
            out.append((int(v), float(lb[v])))
        return out

    opts = []
    for S, T in ((pair.X, pair.Y), (pair.Y, pair.X)):
        if eligible(S):
            split = [d for v in S for d in sides(v)]
            # fewer root boxes first, then fewer variables
            opts.append((len(split), len(S), S[0], S, T, split))
    if not opts:
        pair.reason = ("no block is sign-constrained without rows of its own, nor boxed around 0 on its finite "
                       "sides: no normalization")
        return pair
    _, _, _, S, T, split = min(opts)
    pair.S, pair.T, pair.split, pair.flip, pair.kind = list(S), list(T), split, flip, "split"
    pair.reason = ("the boxes of the normalized block contain 0: no linear row is valid; some optimum has one "
                   "of its variables at a bound (the side its sign points to)"
                   + ("; the flip (x, y) -> (-x, -y) is a symmetry (boxes [-a, a], no conical row; verified at "
                      "random points): only the upper bounds" if flip else flip_note))
    return pair


def flip_invariant(program, X, Y, points=3, seed=0, stop=None):
    """True when the objective and every row body of ``program`` take the same values at ``z`` and at
    ``z`` with ``z_X``, ``z_Y`` negated, at ``points`` random points of the box (clipped to ``[-3, 3]``;
    auxiliary columns completed from their definitions). The structural rule of :func:`_normalize_signed`
    proves this; the evaluation guards it against a term the detection does not see (docs/gop.md §8e-s).
    False when ``stop()`` says True before a point (not verified: the flip is then not used)."""
    rng = np.random.default_rng(seed)
    lo = np.clip(program.lb, -3.0, 3.0)
    hi = np.clip(program.ub, -3.0, 3.0)
    hi = np.maximum(hi, lo)
    idx = np.asarray(list(X) + list(Y), dtype=np.int64)
    for _ in range(points):
        if stop is not None and stop():
            return False
        z = lo + (hi - lo) * rng.uniform(0.05, 0.95, program.n)
        z = program.complete_aux(z)
        z2 = z.copy()
        z2[idx] = -z[idx]
        z2 = program.complete_aux(z2)
        with np.errstate(all="ignore"):
            a = [program.objective.value(z)] + [c.body.value(z) for c in program.constraints]
            b = [program.objective.value(z2)] + [c.body.value(z2) for c in program.constraints]
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if not np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True):
            return False
    return True


def with_scaling_rows(program, pairs, products=False, name="scaling_normalization"):
    """A copy of ``program`` with the normalization row ``r(z) = sum_S w_v s_v z_v (== or >=) 1`` of
    every pair that has one; with ``products`` also the row times each partner variable ``t`` (RLT,
    Sherali & Adams 1990): ``s_t z_t (r(z) - 1) == 0`` for an equality, ``>= 0`` for ``r >= 1`` when
    ``s_t z_t >= 0`` (a free ``t`` gets none then). They are implied by the normalization row, and in
    a lifted relaxation they tie each partner variable to its products (NMF: ``h_j = sum_i w_i h_j``
    when ``sum(w) == 1``), which bounds the partner block through the products."""
    from .expression import Expression
    from .program import Constraint
    from .terms import QuadraticTerms

    out = copy.copy(program)
    out.constraints = list(program.constraints)
    n = program.n
    for k, pr in enumerate(pairs):
        if pr.kind not in ("==", ">="):   # None, or 'split' (signed factors: no row, only the root split)
            continue
        S = np.asarray(pr.S, dtype=np.int64)
        a = pr.signs * pr.weights
        hi = 1.0 if pr.kind == "==" else np.inf
        out.constraints.append(Constraint(f"{name}[{k}]", Expression(n, 0.0, (S, a)), 1.0, hi))
        if not products:
            continue
        for t, st in zip(pr.T, pr.tsigns):
            if pr.kind == ">=" and st == 0.0:
                continue
            st = st or 1.0
            q = QuadraticTerms(S, np.full(S.size, t), st * a, n)
            e = Expression(n, 0.0, (np.array([t]), np.array([-st])), q)
            out.constraints.append(Constraint(f"{name}[{k}]*{program.names[t]}", e, 0.0, 0.0 if hi == 1.0 else np.inf))
    return out
