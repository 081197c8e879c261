r"""Symmetries of a compiled program: permutations of variables under which the objective and the
feasible set are exactly invariant, and the orderings they make valid (docs/gop.md §8c).

A permutation ``p`` of the variables (``p[v]`` = the variable that ``v`` is renamed to) is a
*symmetry* of ``min f(z) s.t. lo_c <= g_c(z) <= hi_c, lb <= z <= ub`` when renaming every variable
``v -> p[v]`` maps

* the multiset of terms of ``f`` onto itself (a term is a canonical tuple: kind, coefficients,
  constants and the sorted (variable, coefficient) pairs of its arguments; see :func:`expression_key`),
* the multiset of constraints ``(lo_c, hi_c, terms of g_c)`` onto itself, and
* the bounds (``lb[p[v]] == lb[v]``, ``ub[p[v]] == ub[v]``, the same integrality).

Then ``f(P z) = f(z)`` and ``P z`` is feasible exactly when ``z`` is (``(P z)_{p[v]} = z_v``), as
functions, not only at sample points. The comparison is exact (floats compared bitwise): a model
whose components are written the same way has identical coefficients; rounding noise can only hide
a symmetry, never create one.

Candidates come from colour refinement (1-dimensional Weisfeiler-Leman) of the graph of variables,
terms and expressions: two variables can only be exchanged when their refined colours agree. For a
class ``C`` of equally coloured variables and a pair ``(c_1, c)`` the two variables are individualised
(``c_1 -> A, c -> B`` and ``c_1 -> B, c -> A``), the colouring is refined again, and equal colours
give the candidate permutation, which is then verified exactly (:func:`is_symmetry`). An
:class:`Orbit` is a set of representatives ``R = (r_1, ..., r_K)`` with a verified symmetry
``sigma_j`` per ``j >= 2`` that swaps ``r_1`` and ``r_j`` and fixes the other representatives: the
transpositions ``(r_1 r_j)`` generate the full symmetric group on ``R``, so every ordering of the
values ``z_{r_1}, ..., z_{r_K}`` is reached by a symmetry and ``z_{r_1} <= ... <= z_{r_K}`` keeps an
image of every feasible point (in particular of a global minimiser).

numpy only (nothing here imports Pyomo or CVXPY).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from .terms import LseGroup


# ----------------------------------------------------------------------------------------
# canonical terms
# ----------------------------------------------------------------------------------------
def _pairs(row, p):
    return tuple(sorted(zip(p[row.indices].tolist(), row.data.tolist())))


def _linear(e):
    """The nonzero linear coefficients of ``e`` as lists ``(vars, coefs)`` (``e.linear`` would build a
    dense n-vector per access for sparsely stored rows)."""
    idx, val = e.linear_items()
    keep = val != 0
    return idx[keep].tolist(), val[keep].tolist()


def _terms(e, p):
    """The terms of expression ``e`` with every variable ``v`` renamed ``p[v]`` (a list of tuples;
    tuples with the same leading tag have the same layout)."""
    out = [("c", float(e.constant))]
    idx, val = _linear(e)
    out.extend(("l", int(p[v]), c) for v, c in zip(idx, val))
    q = e.quadratic
    if len(q):
        a, b = p[q.i], p[q.j]
        out.extend(("q", int(min(s, t)), int(max(s, t)), float(v))
                   for s, t, v in zip(a.tolist(), b.tolist(), q.v.tolist()))
    for g in e.groups():
        if isinstance(g, LseGroup):
            for r in range(len(g)):
                lo = g.starts[r]
                hi = g.starts[r + 1] if r + 1 < len(g.starts) else g.seg.size
                rows = tuple(sorted((float(g.b[k]), _pairs(g.A[k], p)) for k in range(lo, hi)))
                w = int(g.mult[r])
                out.append(("s", float(g.coef[r]), int(p[w]) if w >= 0 else -1, rows))
        else:
            A = g.A
            for r in range(len(g)):
                w = int(g.mult[r])
                two = (float(g.b2[r]), _pairs(g.A2[r], p)) if g.A2 is not None else ()
                out.append(("a", g.kind, float(g.coef[r]), int(p[w]) if w >= 0 else -1, float(g.b[r]),
                            _pairs(A[r], p), two))
    return out


def expression_key(e, p=None):
    """Canonical multiset of the terms of ``e`` after renaming ``v -> p[v]`` (identity when None)."""
    if p is None:
        p = np.arange(e.n)
    return tuple(sorted(_terms(e, np.asarray(p)), key=repr))


class Stopped(Exception):
    """Raised inside :func:`detect_orbits` when its ``stop()`` says the time is up."""


def _never():
    return False


def _checked(items, stop):
    """``items`` with ``stop()`` asked before each (raises :class:`Stopped`): the loops over all constraints
    are the long ones (~1,000 rows of a 30 x 30 NMF: a refinement round takes ~0.03 s)."""
    for it in items:
        if stop():
            raise Stopped
        yield it


class _Keys:
    """The program's canonical keys, computed once; :meth:`is_symmetry` compares a renaming to them."""

    def __init__(self, program, stop=_never):
        self.program = program
        self.stop = stop
        self.obj = expression_key(program.objective)
        self.cons = Counter(self._con(c, None) for c in _checked(program.constraints, stop))
        self.binary = (np.zeros(program.n, dtype=bool) if program.binary is None else program.binary)

    @staticmethod
    def _con(c, p):
        return (float(c.lo), float(c.hi), expression_key(c.body, p))

    def why_not(self, p):
        """None when ``p`` is a symmetry, else a short reason (for declared symmetries)."""
        pr = self.program
        p = np.asarray(p)
        if p.shape != (pr.n,) or not np.array_equal(np.sort(p), np.arange(pr.n)):
            return "not a permutation of the variables"
        for arr, what in ((pr.lb, "lower bound"), (pr.ub, "upper bound"), (self.binary, "integrality")):
            bad = np.flatnonzero(arr[p] != arr)
            if bad.size:
                v = int(bad[0])
                return f"{pr.names[v]} and {pr.names[p[v]]} have different {what}s"
        if expression_key(pr.objective, p) != self.obj:
            return f"the objective {pr.objective_name} changes"
        seen = Counter(self._con(c, p) for c in _checked(pr.constraints, self.stop))
        if seen != self.cons:
            for c in pr.constraints:
                if self._con(c, p) not in self.cons:
                    return f"constraint {c.name} has no image among the constraints"
            return "the constraints change"
        return None

    def is_symmetry(self, p) -> bool:
        return self.why_not(p) is None


def is_symmetry(program, p) -> bool:
    """True when renaming ``v -> p[v]`` leaves the objective, the constraints and the bounds exactly
    invariant (see the module docstring)."""
    return _Keys(program).is_symmetry(p)


# ----------------------------------------------------------------------------------------
# colour refinement
# ----------------------------------------------------------------------------------------
class _Graph:
    """Variables, terms and expressions with labels; edges term -> (variable, role)."""

    def __init__(self, program, stop=_never):
        n = program.n
        self.stop = stop
        binary = program.binary if program.binary is not None else np.zeros(n, dtype=bool)
        self.var_label = [(float(program.lb[v]), float(program.ub[v]), bool(binary[v])) for v in range(n)]
        self.terms = []  # (label, expr index, [(var, role)])
        self.expr_label = []
        exprs = [(("obj",), program.objective)] + [
            (("con", float(c.lo), float(c.hi), float(c.body.constant)), c.body) for c in program.constraints]
        for x, (lab, e) in enumerate(_checked(exprs, stop)):
            self.expr_label.append(lab)
            for v, c in zip(*_linear(e)):
                self.terms.append((("l", c), x, [(v, "x")]))
            q = e.quadratic
            for i, j, c in zip(q.i.tolist(), q.j.tolist(), q.v.tolist()):
                self.terms.append((("q", c, i == j), x, [(i, "q"), (j, "q")] if i != j else [(i, "sq")]))
            for g in e.groups():
                if isinstance(g, LseGroup):
                    for r in range(len(g)):
                        lo = g.starts[r]
                        hi = g.starts[r + 1] if r + 1 < len(g.starts) else g.seg.size
                        ed = [(int(v), ("e", float(g.b[k]), float(a)))
                              for k in range(lo, hi) for v, a in zip(g.A[k].indices, g.A[k].data)]
                        if g.mult[r] >= 0:
                            ed.append((int(g.mult[r]), "w"))
                        self.terms.append((("s", float(g.coef[r])), x, ed))
                else:
                    for r in range(len(g)):
                        ed = [(int(v), ("a", float(a))) for v, a in zip(g.A[r].indices, g.A[r].data)]
                        b2 = 0.0
                        if g.A2 is not None:
                            ed += [(int(v), ("a2", float(a))) for v, a in zip(g.A2[r].indices, g.A2[r].data)]
                            b2 = float(g.b2[r])
                        if g.mult[r] >= 0:
                            ed.append((int(g.mult[r]), "w"))
                        self.terms.append((("a", g.kind, float(g.coef[r]), float(g.b[r]), b2), x, ed))
        self.var_terms = [[] for _ in range(n)]
        for t, (_, _, ed) in enumerate(self.terms):
            for v, role in ed:
                self.var_terms[v].append((t, role))
        self.expr_terms = [[] for _ in exprs]
        for t, (_, x, _) in enumerate(self.terms):
            self.expr_terms[x].append(t)
        self.palette = {}

    def _id(self, key):
        return self.palette.setdefault(key, len(self.palette))

    def refine(self, colour=None, max_rounds=50):
        """Stable colours of the variables (ints comparable between calls on this graph)."""
        col = [self._id(("v", lab)) for lab in self.var_label] if colour is None else list(colour)
        ecol = [self._id(("e", lab)) for lab in self.expr_label]
        # stable when no class count of variables, terms or expressions grew in a round: a split reaches the
        # variables one round after it reaches an expression (a constraint told apart by an individualised
        # variable separates that constraint's other variables only in the next round), so counting the
        # variables alone stopped one round early and hid the swap of (x_0, y_0) and (x_1, y_1) when only the
        # constraints tell y_0 from y_1
        ncls = None
        for _ in range(max_rounds):
            if self.stop():
                raise Stopped
            tcol = [self._id(("t", lab, ecol[x], tuple(sorted((col[v], repr(r)) for v, r in ed))))
                    for lab, x, ed in self.terms]
            ecol = [self._id(("e", self.expr_label[x], tuple(sorted(tcol[t] for t in ts))))
                    for x, ts in enumerate(self.expr_terms)]
            new = [self._id(("v", col[v], tuple(sorted((tcol[t], repr(r)) for t, r in vt))))
                   for v, vt in enumerate(self.var_terms)]
            k = (len(set(new)), len(set(tcol)), len(set(ecol)))
            col = new
            if k == ncls:
                break
            ncls = k
        return col


# ----------------------------------------------------------------------------------------
# orbits
# ----------------------------------------------------------------------------------------
@dataclass
class Orbit:
    """Interchangeable groups of variables: ``perms[j-1]`` is a verified symmetry that exchanges
    ``groups[0]`` and ``groups[j]`` position by position (``groups[0][m] <-> groups[j][m]``).

    :meth:`rep_sets` lists the positions ``m`` at which every ``perms[j-1]`` acts on
    ``(groups[0][m], ..., groups[K-1][m])`` as the transposition of entries ``0`` and ``j``; the
    transpositions ``(0 j)`` generate the full symmetric group of the ``K`` entries, so ordering
    the entries of ONE such set is a valid symmetry-breaking constraint (docs/gop.md §8c)."""

    perms: list
    groups: list
    declared: bool = False

    @property
    def size(self) -> int:
        return len(self.groups)

    def rep_sets(self):
        out = []
        G = np.array([np.asarray(g) for g in self.groups])  # (K, m)
        for m in range(G.shape[1]):
            col = G[:, m]
            ok = True
            for j, p in enumerate(self.perms, start=1):
                want = col.copy()
                want[0], want[j] = col[j], col[0]
                if not np.array_equal(p[col], want):
                    ok = False
                    break
            if ok:
                out.append(col.astype(np.int64))
        return out

    def describe(self, names) -> str:
        g = len(self.groups[0])
        r = " ~ ".join(names[int(G[0])] for G in [np.asarray(x) for x in self.groups])
        return (f"{self.size} interchangeable groups of {g} variable{'s' if g != 1 else ''} "
                f"({'declared' if self.declared else 'detected'}; {r}, ...)")


def _groups(perms):
    """Group 0: the variables every generator moves (for one generator, an involution: the smaller
    index of every 2-cycle); group j: its image under ``perms[j-1]``."""
    moved = [set(np.flatnonzero(p != np.arange(p.size)).tolist()) for p in perms]
    if len(perms) >= 2:
        g0 = sorted(set.intersection(*moved))
    else:
        p = perms[0]
        g0 = sorted(v for v in moved[0] if p[v] > v and p[p[v]] == v)
    return [np.array(g0, dtype=np.int64)] + [np.asarray(p[g0], dtype=np.int64) for p in perms]


def _swap(graph, keys, stable, a, b):
    """A verified symmetry exchanging variables ``a`` and ``b``, or None."""
    n = len(stable)
    A, B = ("ind", "A", stable[a]), ("ind", "B", stable[a])
    c1 = list(stable)
    c1[a], c1[b] = graph._id(A), graph._id(B)
    c2 = list(stable)
    c2[a], c2[b] = graph._id(B), graph._id(A)
    r1, r2 = graph.refine(c1), graph.refine(c2)
    cls1, cls2 = {}, {}
    for v in range(n):
        cls1.setdefault(r1[v], []).append(v)
        cls2.setdefault(r2[v], []).append(v)
    if {k: len(v) for k, v in cls1.items()} != {k: len(v) for k, v in cls2.items()}:
        return None
    p = np.empty(n, dtype=np.int64)
    for k, vs in cls1.items():
        p[vs] = cls2[k]  # equal sets (a class the swap leaves in place) map to themselves
    if p[a] != b or p[b] != a:
        return None
    return p if keys.is_symmetry(p) else None


def detect_orbits(program, max_class: int = 64, max_checks: int = 64, stop=None):
    """Orbits of interchangeable variable groups (see the module docstring), largest groups first.

    Classes of the stable colouring with 2..``max_class`` members are tried in order of size; a
    class whose variables an orbit found earlier already moves is skipped; at most ``max_checks``
    candidate swaps are verified in all (each costs two refinements and one exact comparison).
    ``stop``: a callable asked between refinement rounds and constraints (a solver's time limit); when it
    answers True the detection ends with the orbits verified so far, the class being tried included with
    the swaps already verified (each is an exact symmetry, so every subset of them breaks validly).
    Returns a list of :class:`Orbit` (possibly empty)."""
    stop = stop or _never
    out, checks, covered = [], 0, set()

    def keep(perms):
        if perms:
            orb = Orbit(perms, _groups(perms))
            if orb.rep_sets():
                out.append(orb)
                covered.update(v for g in orb.groups for v in g.tolist())

    perms = []
    try:
        graph = _Graph(program, stop)
        keys = _Keys(program, stop)
        stable = graph.refine()
        classes = {}
        for v, c in enumerate(stable):
            classes.setdefault(c, []).append(v)
        cands = sorted((vs for vs in classes.values() if 2 <= len(vs) <= max_class),
                       key=lambda vs: (len(vs), vs[0]))
        for vs in cands:
            if covered.issuperset(vs) or checks >= max_checks:
                continue
            r1, reps, perms = vs[0], [vs[0]], []
            for c in vs[1:]:
                if checks >= max_checks:
                    break
                checks += 1
                p = _swap(graph, keys, stable, r1, c)
                # p must act on the representatives as the transposition (r1 c)
                if p is None or any(p[r] != r for r in reps[1:]) or any(q[c] != c for q in perms):
                    continue
                reps.append(c)
                perms.append(p)
            keep(perms)
            perms = []
    except Stopped:
        keep(perms)
    out.sort(key=lambda o: -len(o.groups[0]))
    return out


def declared_orbit(program, groups) -> Orbit:
    """The :class:`Orbit` of user-declared groups (lists of variable indices of equal length, the
    ``m``-th variables of the groups corresponding); raises ``ValueError`` naming the first swap of
    two groups that is not an exact symmetry of the program."""
    groups = [np.asarray(g, dtype=np.int64).ravel() for g in groups]
    if len(groups) < 2:
        raise ValueError("declare at least two groups")
    m = groups[0].size
    if m == 0 or any(g.size != m for g in groups):
        raise ValueError("every group must hold the same (positive) number of variables")
    allv = np.concatenate(groups)
    if np.unique(allv).size != allv.size:
        raise ValueError("the groups overlap (a variable appears twice)")
    keys = _Keys(program)
    perms = []
    for j in range(1, len(groups)):
        p = np.arange(program.n)
        p[groups[0]], p[groups[j]] = groups[j], groups[0]
        why = keys.why_not(p)
        if why is not None:
            nm = program.names
            raise ValueError(f"swapping the groups of {nm[groups[0][0]]} and {nm[groups[j][0]]} is not a symmetry "
                             f"of the program: {why}")
        perms.append(p)
    return Orbit(perms, groups, declared=True)


def with_order_rows(program, reps, name="symmetry_order"):
    """A copy of ``program`` with the rows ``z_{r_j} - z_{r_{j+1}} <= 0`` (``reps`` one
    representative set of an :class:`Orbit`): every feasible point has an image under the orbit's
    symmetries that satisfies them, so the optimal value is unchanged (docs/gop.md §8c)."""
    import copy

    from .expression import Expression
    from .program import Constraint

    out = copy.copy(program)
    out.constraints = list(program.constraints)
    for j in range(len(reps) - 1):
        a = np.zeros(program.n)
        a[int(reps[j])], a[int(reps[j + 1])] = 1.0, -1.0
        out.constraints.append(Constraint(f"{name}[{j}]", Expression(program.n, linear=a), -np.inf, 0.0))
    return out
