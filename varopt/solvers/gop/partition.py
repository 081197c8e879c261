"""Biconvexity analysis: split the variables into the GOP blocks ``x`` and ``y``.

Saddiki, Trapp & Flaherty (2017) §2.1 (conditions 1-4) and Floudas (2000) ch. 3. Notation used throughout the
gop package (see docs/gop.md):

* ``x`` -- the *primal* / enumerated block. The primal problem fixes ``y`` and is convex
  in ``x``; the relaxed duals set the *connected* ``x`` variables at their bounds.
* ``y`` -- the *relaxed-dual* block: the variables of the relaxed dual subproblems.

A valid partition needs (checked here, on the compiled :class:`~varopt.program.Program`):

1. every bilinear product ``x_i y_j`` crosses the blocks, or lies inside one block whose
   quadratic form stays positive semidefinite;
2. every multiplied atom row ``c w g(A u + b)`` has ``w`` in ``y`` with ``w >= 0`` by its
   bounds and ``c >= 0`` and all of ``u`` in ``x`` (so the row is convex in ``x``, linear in
   ``y``, and its ``x``-gradient is linear in ``y``: the qualifying constraints are linear);
3. no atom without multiplier mixes the blocks (``exp(x + y)`` would make the gradient in
   ``x`` a nonlinear function of ``y``);
4. constraints: linear; or biaffine (products across blocks only) with any sense; or a
   ``<=`` row convex in each block.

The connected variables are the ``x`` variables whose Lagrangian gradient depends on ``y``
(Saddiki et al. 2017, eq. (17)): those with a product partner in ``y``. GOP solves ``2^|connected|``
relaxed duals per iteration, so the automatic partition minimises ``|connected|``.

Search: variables are nodes of a parity union-find ("same block" / "opposite blocks"
relations) with two virtual nodes for the forced sides. Each connected component has at
most two consistent colourings; the count of connected variables is additive over
components, so choosing the better colouring of each component independently is exact.
Products inside one block (a bilinear term whose ends are already forced to the same
side) are accepted when the block's quadratic form stays PSD, else the odd cycle is
reported.
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from ...errors import ModelStructureError
from ...program.aux_bounds import row_box
from ...program.terms import LseGroup
from .convexity import block_psd, constant_hessian, merge_convex_products


def _affine_txt(names, row_idx, row_val, b=0.0, limit=3):
    """``a^T x + b`` as text (``x[0] - 2*x[1] + 3``; the constant alone when there are no variables)."""
    s = ""
    for k, (j, v) in enumerate(zip(row_idx[:limit], row_val[:limit])):
        t = names[j] if abs(v) == 1 else f"{abs(v):g}*{names[j]}"
        s += (t if v > 0 else f"-{t}") if k == 0 else (" + " if v > 0 else " - ") + t
    if len(row_idx) > limit:
        s += " + ..."
    if b:
        s = f"{b:g}" if not s else s + (" + " if b > 0 else " - ") + f"{abs(b):g}"
    return s or "0"


def _row_txt(names, g, r):
    if isinstance(g, LseGroup):
        lo = g.starts[r]
        hi = g.starts[r + 1] if r + 1 < len(g.starts) else g.seg.size
        vs = np.unique(g.A[lo:hi].indices)
        inner = "log-sum-exp(" + ", ".join(names[v] for v in vs[:3]) + (", ..." if vs.size > 3 else "") + ")"
    else:
        a = g.A[r]
        u = _affine_txt(names, a.indices, a.data, g.b[r])
        v = ""
        if g.kernel.arity == 2:
            a2 = g.A2[r]
            v = _affine_txt(names, a2.indices, a2.data, g.b2[r])
        inner = g.kernel.text.format(u=u, v=v)
    w = int(g.mult[r])
    return (f"{names[w]}*{inner}" if w >= 0 else inner)


def _row_vars(g, r):
    A = g.A
    if isinstance(g, LseGroup):
        lo = g.starts[r]
        hi = g.starts[r + 1] if r + 1 < len(g.starts) else g.seg.size
        return np.unique(A.indices[A.indptr[lo]:A.indptr[hi]])
    vs = A.indices[A.indptr[r]:A.indptr[r + 1]]
    if g.A2 is not None:
        vs = np.union1d(vs, g.A2.indices[g.A2.indptr[r]:g.A2.indptr[r + 1]])
    return np.unique(vs)


class _Text:
    """A description formatted only when a message needs it (most analyses raise nothing)."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __str__(self):
        return self.fn()


@dataclass
class Partition:
    """Result of the analysis (global variable indices)."""

    x: np.ndarray  #: enumerated (primal) block
    y: np.ndarray  #: relaxed-dual block
    connected: np.ndarray  #: subset of ``x`` whose Lagrangian gradient depends on ``y``
    names: list
    notes: list = field(default_factory=list)

    def describe(self) -> str:
        def nm(idx, k=6):
            s = ", ".join(self.names[i] for i in idx[:k])
            return s + (", ..." if len(idx) > k else "")
        return (f"x (primal, {len(self.x)}): {nm(self.x)}; y (relaxed dual, {len(self.y)}): {nm(self.y)}; "
                f"connected ({len(self.connected)}): {nm(self.connected)}")


class _Parity:
    """Union-find with parity; remembers the edges so that conflicts can be explained."""

    def __init__(self, n):
        self.parent = list(range(n))
        self.par = [0] * n  # parity to parent
        self.adj = defaultdict(list)

    def find(self, a):
        path = []
        while self.parent[a] != a:
            path.append(a)
            a = self.parent[a]
        root = a
        # path compression with parity
        acc = 0
        for v in reversed(path):
            acc ^= self.par[v]
            self.parent[v] = root
            self.par[v] = acc
        return root

    def parity(self, a):
        self.find(a)
        return self.par[a] if self.parent[a] != a else 0

    def relation(self, a, b):
        """None if unrelated, else 0 (same block) / 1 (opposite)."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            return None
        return self.parity(a) ^ self.parity(b)

    def union(self, a, b, rel, why):
        ra, rb = self.find(a), self.find(b)
        pa, pb = self.parity(a), self.parity(b)
        if ra == rb:
            return (pa ^ pb) == rel
        self.parent[rb] = ra
        self.par[rb] = pa ^ pb ^ rel
        self.adj[a].append((b, rel, why))
        self.adj[b].append((a, rel, why))
        return True

    def explain(self, a, b):
        """Descriptions of the recorded edges on a path a -> b."""
        prev = {a: None}
        dq = deque([a])
        while dq:
            u = dq.popleft()
            if u == b:
                break
            for v, _rel, why in self.adj[u]:
                if v not in prev:
                    prev[v] = (u, why)
                    dq.append(v)
        out = []
        u = b
        while u in prev and prev[u] is not None:
            u, why = prev[u]
            out.append(str(why))
        return list(reversed(out))


def _iter_expressions(program):
    yield program.objective_name, program.objective, "obj"
    for c in program.constraints:
        if c.lo == c.hi:
            kind = "eq"
        elif np.isfinite(c.lo) and np.isfinite(c.hi):
            kind = "range"
        elif np.isfinite(c.hi):
            kind = "le"
        else:
            kind = "ge"
        yield c.name, c.body, kind


def _described(program, ename):
    """``ename``, and for the defining row of an auxiliary column the user's term it comes from."""
    for a in program.aux:
        if a.constraint == ename:
            return f"{ename} (the defining row of the {a.kind} in the term '{a.term}')"
    return ename


def _join(items):
    items = list(dict.fromkeys(items))
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def analyze(program, partition=None) -> Partition:
    """Find (or check, when ``partition`` lists the x-block variables) a GOP partition.

    Without ``partition`` two searches run: one that first keeps every product whose block stays
    convex inside one block (:mod:`.convexity`; a convex program then has no connected variable
    and is solved by one primal problem), and the plain one that splits every free product. The
    valid partition with fewer connected variables wins (ties: the first).
    Raises :class:`ModelStructureError` naming the offending terms when none exists.
    """
    if partition is not None:
        return _analyze(program, partition, merge=False)
    try:
        merged = _analyze(program, None, merge=True)
    except ModelStructureError:
        return _analyze(program, None, merge=False)
    try:
        plain = _analyze(program, None, merge=False)
    except ModelStructureError:
        return merged
    return plain if plain.connected.size < merged.connected.size else merged


def _analyze(program, partition, merge) -> Partition:
    n = program.n
    names = list(program.names)
    X, Y = n, n + 1  # virtual nodes: forced x side / forced y side
    uf = _Parity(n + 2)
    uf.union(X, Y, 1, "(x and y are different blocks)")
    cross = defaultdict(set)  # i -> partners in a product (bilinear or multiplier)
    nonlin = np.zeros(n, dtype=bool)  # variable appears in some nonlinear term
    quad_pending = []  # (i, j, text) bilinear products
    notes = []

    def fail_cycle(a, b, why, rel):
        path = uf.explain(a, b)
        why = str(why)
        terms = [p for p in path if not p.startswith("(")] + [why]
        if rel == 1:
            msg = (f"the products {_join(terms)} cannot be split into two blocks: they form an odd cycle "
                   f"(each product needs its two factors in different blocks)")
        else:
            msg = f"{_join(terms)}: these terms put variables that must be in different blocks into one block"
        raise ModelStructureError(f"no biconvex partition (GOP; Saddiki, Trapp & Flaherty 2017, §2.1): {msg}")

    for ename, e, kind in _iter_expressions(program):
        q = e.quadratic
        for a, b, v in zip(q.i.tolist(), q.j.tolist(), q.v.tolist()):
            nonlin[a] = nonlin[b] = True
            if a != b:
                quad_pending.append((a, b, f"{names[a]}*{names[b]} (in {ename})"))
        for g in e.groups():
            for r in range(len(g)):
                vs = _row_vars(g, r).tolist()
                w = int(g.mult[r])

                def txt(g=g, r=r):
                    return _row_txt(names, g, r)

                nonlin[vs] = True
                if w >= 0:
                    nonlin[w] = True
                    if w in vs:
                        exc = ModelStructureError(
                            f"{ename}: the term {txt()} multiplies an atom by one of its own variables "
                            f"({names[w]}); GOP needs the multiplier and the atom in different blocks")
                        # x log x - x log y of a relative entropy over shared variables, x exp(x): the spatial
                        # tree relaxes such a row (a McCormick product of the multiplier and the atom's column),
                        # so mode='auto' takes the tree instead of refusing (docs/gop.md §8i)
                        exc.tree_ok = True
                        raise exc
                    why = _Text(lambda txt=txt, w=w: f"{txt()} (needs {names[w]} in the relaxed-dual block)")
                    if not uf.union(w, Y, 0, why):
                        fail_cycle(w, Y, why, 0)
                    for v in vs:
                        why = _Text(lambda txt=txt, v=v: f"{txt()} (needs {names[v]} in the primal block)")
                        if not uf.union(v, X, 0, why):
                            fail_cycle(v, X, why, 0)
                        cross[v].add(w)
                        cross[w].add(v)
                elif len(vs) > 1:
                    for v in vs[1:]:
                        why = _Text(lambda txt=txt, v=v, v0=vs[0]: f"{txt()} mixes {names[v0]} and {names[v]} "
                                    f"(one atom must stay in one block)")
                        if not uf.union(vs[0], v, 0, why):
                            fail_cycle(vs[0], v, why, 0)

    if partition is not None:
        xset = set(partition)
        for i in range(n):
            why = f"partition option puts {names[i]} in the {'primal' if i in xset else 'relaxed-dual'} block"
            if not uf.union(i, X if i in xset else Y, 0, why):
                fail_cycle(i, X if i in xset else Y, why, 0)

    if merge:
        merge_convex_products(program, uf, quad_pending)
    same_block_products = []
    for a, b, txt in quad_pending:
        rel = uf.relation(a, b)
        if rel is None:
            uf.union(a, b, 1, txt)
            cross[a].add(b)
            cross[b].add(a)
        elif rel == 1:
            cross[a].add(b)
            cross[b].add(a)
        else:
            path = [t for t in uf.explain(a, b) if not t.startswith("(")]
            same_block_products.append((a, b, txt, path))

    # choose the colouring of every free component
    side = np.full(n, -1)  # 0 = x, 1 = y
    comps = defaultdict(list)
    for i in range(n):
        comps[uf.find(i)].append(i)
    rootX = uf.find(X)
    pX = uf.parity(X)
    for root, members in comps.items():
        if root == rootX:
            for i in members:
                side[i] = 0 if uf.parity(i) == pX else 1
            continue
        if len(members) == 1 and not cross[members[0]]:
            i = members[0]
            side[i] = 0 if nonlin[i] else 1
            continue
        best = None
        for orient in (0, 1):  # which parity class becomes x
            xs = [i for i in members if uf.parity(i) == orient]
            cnt = sum(1 for i in xs if cross[i])
            key = (cnt, len(xs))
            if best is None or key < best[0]:
                best = (key, orient)
        for i in members:
            side[i] = 0 if uf.parity(i) == best[1] else 1

    if merge and not any(cross.values()) and all(c.body.is_linear for c in program.constraints):
        # no product crosses the blocks and the constraints are linear: the program is convex (the
        # blocks' Hessians were checked) and one primal problem over all variables solves it
        side[:] = 0
    xs = np.flatnonzero(side == 0)
    ys = np.flatnonzero(side == 1)
    is_x = side == 0
    _check_conditions(program, is_x, names, same_block_products)
    conn = np.array([i for i in xs if any(not is_x[j] for j in cross[i])], dtype=np.int64)
    if same_block_products:
        notes.append("products inside one block (PSD checked): " + _join(t for _, _, t, _ in same_block_products[:4]))
    return Partition(x=xs.astype(np.int64), y=ys.astype(np.int64), connected=conn, names=names, notes=notes)


def _check_conditions(program, is_x, names, same_block_products):
    """GOP conditions 1-4 (Saddiki, Trapp & Flaherty 2017, §2.1) for the chosen blocks; raise with the offending term."""
    # the rows on one variable count (CVXPY bounds a multiplier with the constraint x >= 1 more often than with
    # an attribute): every point the primal problems and relaxed duals take satisfies them
    lb = row_box(program.lb, program.ub, program.constraints, program.n)[0]
    xs, ys = np.flatnonzero(is_x), np.flatnonzero(~is_x)
    for ename, e, kind in _iter_expressions(program):
        biaffine_only = kind in ("eq", "ge", "range")
        q = e.quadratic
        within = [(a, b) for a, b in zip(q.i.tolist(), q.j.tolist()) if is_x[a] == is_x[b]]
        if within:
            a, b = within[0]
            if biaffine_only:
                raise ModelStructureError(
                    f"constraint {_described(program, ename)}: the term {names[a]}*{names[b]} is nonlinear within one GOP block; "
                    f"equality, >= and range constraints must be affine in each block (Saddiki, Trapp & Flaherty 2017, §2.1, condition 3)")
            H = constant_hessian(e)  # every term of the block: products, squares, square atoms
            for blk, label in ((xs, "primal"), (ys, "relaxed-dual")):
                if not block_psd(H, blk):
                    for a2, b2, txt, path in same_block_products:
                        if is_x[a2] == (label == "primal") and path:
                            terms = [p.split(" (in")[0] for p in path] + [txt.split(" (in")[0]]
                            forced = [t for t in terms[:-1] if t.startswith("partition option")]
                            if forced:
                                # the user's partition, not a cycle of products, put the factors together (the
                                # message read "the products partition option puts ... form an odd cycle")
                                via = [t for t in terms[:-1] if not t.startswith("partition option")]
                                raise ModelStructureError(
                                    f"no biconvex partition (GOP; Saddiki, Trapp & Flaherty 2017, §2.1): the "
                                    f"{_join(forced)}" + (f" (with the products {_join(via)})" if via else "")
                                    + f", so {names[a2]} and {names[b2]} share a block, where {terms[-1]} is not "
                                    "convex (block Hessian not PSD): choose a partition that splits the product")
                            raise ModelStructureError(
                                f"no biconvex partition (GOP; Saddiki, Trapp & Flaherty 2017, §2.1): the products {_join(terms)} form an "
                                f"odd cycle: {_join(terms[:-1])} force {names[a2]} and {names[b2]} into one block, "
                                f"where {terms[-1]} is not convex (block Hessian not PSD)")
                    bad = [f"{names[a]}*{names[b]}" if a != b else f"{names[a]}^2" for a, b in within
                           if is_x[a] == (label == "primal")]
                    raise ModelStructureError(
                        f"{ename}: the quadratic terms {_join(bad[:4])} are not convex in the {label} block "
                        f"(Hessian not PSD); " + ("they form an odd cycle of products" if any(a != b for a, b in within)
                                                  else "a concave square cannot be handled by GOP"))
            if not block_psd(q.hessian_matrix, ys):
                # the relaxed duals outer-approximate the quadratic terms of y on their own (cuts.py)
                raise ModelStructureError(
                    f"{ename}: the quadratic terms of the relaxed-dual block are not convex on their own (the "
                    f"relaxed duals need them convex apart from the squared affine terms); write the products as one "
                    f"squared expression or choose another partition")
        for g in e.groups():
            kind_txt = "log-sum-exp" if isinstance(g, LseGroup) else g.kind
            for r in range(len(g)):
                txt = _Text(lambda g=g, r=r: _row_txt(names, g, r))
                if biaffine_only:
                    raise ModelStructureError(
                        f"constraint {ename}: the term {txt} is nonlinear; equality, >= and range constraints "
                        f"must be affine in each GOP block (Saddiki, Trapp & Flaherty 2017, §2.1, condition 3)")
                w = int(g.mult[r])
                if g.coef[r] < 0:
                    exc = ModelStructureError(
                        f"{ename}: the term {txt} enters with a negative coefficient {g.coef[r]:g}, so it is concave "
                        f"({kind_txt} is convex); GOP needs convexity in each block")
                    # -y * square(x): a polynomial term the tree relaxes (McCormick of y and the atom's column),
                    # as the Pyomo front-end's lifted -x**2 * y is (gopuser review, docs/gop.md)
                    exc.tree_ok = w >= 0
                    raise exc
                if w >= 0:
                    if is_x[w]:
                        raise ModelStructureError(f"{ename}: the multiplier {names[w]} of {txt} must be in the "
                                                  f"relaxed-dual block")
                    if not (lb[w] >= 0):
                        exc = ModelStructureError(
                            f"{ename}: the multiplier {names[w]} of the convex term {txt} may be negative "
                            f"(lower bound {lb[w]:g}), so the term is not convex in the primal block; if "
                            f"{names[w]} is nonnegative in your model, declare it (Pyomo: m.{names[w]}.setlb(0); "
                            f"CVXPY: add {names[w]} >= 0)")
                        # CVXPY's square(x) * y with y in [-1, 3] (a polynomial x^2 y): mode='auto' takes the tree,
                        # which relaxes the product of y and the atom's column, as it does for the Pyomo form
                        # x**2 * y (lifted to a bounded column); before, 'auto' refused the CVXPY form only
                        exc.tree_ok = True
                        raise exc
                vs = _row_vars(g, r)
                if w >= 0 and not np.all(is_x[vs]):
                    raise ModelStructureError(f"{ename}: the atom of {txt} must lie in the primal block")
    return True
