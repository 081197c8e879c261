r"""Presolve: stick-breaking coordinates for mixture weights that enter only through ``-log``
(docs/gop.md §2b).

Pattern (the mixture weights ``pi`` of an ELBO, ``K >= 3``): primal-block variables
``p_0, ..., p_{K-1}`` with lower bounds ``l_k > 0``, one constraint ``sum_k p_k = 1`` and no other
constraint on them, and in the objective only rows ``c w (-log p_k)`` (any multiplier ``w``, any
``c``). Substituting

    p_k = s_k prod_{j<k} (1 - s_j)  (k < K-1),      p_{K-1} = prod_{j<K-1} (1 - s_j),

turns every row into ``c w [-log s_k - sum_{j<k} log(1 - s_j)]``: each ``s_j`` now appears only in
one-variable atoms, so the objective is *separable* in ``s`` for fixed ``w`` and the node-wise
search-space reduction (§6) applies to it (for ``K >= 3`` no elimination of the simplex makes
``pi`` separable). With ``l = min_k l_k``, every feasible ``p`` maps to an ``s`` in
``[l, 1 - l]^{K-1}`` (``s_j = p_j / sum_{i>=j} p_i``, and the denominator holds ``p_{K-1} >= l``) with
the same objective value, so the program in ``s`` is a *relaxation*: its lower bounds hold for the
original. Its points may map to ``p_k < l_k``; an incumbent is accepted only when the mapped point
is feasible for the original program (:meth:`StickBreaking.accept`).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...program import Expression, Program
from ...program.atoms import ATOMS
from ...program.terms import AtomGroup
from ...program.eliminate import map_expression as _map_expr


class StickBreaking:
    """``program``: the relaxation in stick-breaking coordinates; :meth:`expand` maps back."""

    def __init__(self, original, program, simplex, svars, keep_new):
        self.original, self.program = original, program
        self.simplex = simplex  # original indices p_0..p_{K-1}
        self.svars = svars  # indices of s_0..s_{K-2} in the new program
        self.keep_new = keep_new  # new index of every kept original variable (-1 for p)

    def expand(self, zn):
        if zn is None:
            return None
        zn = np.asarray(zn, dtype=float)
        z = np.zeros(self.original.n)
        kept = self.keep_new >= 0
        z[kept] = zn[self.keep_new[kept]]
        rest = 1.0
        for k, v in enumerate(self.simplex[:-1]):
            s = zn[self.svars[k]]
            z[v] = s * rest
            rest *= 1.0 - s
        z[self.simplex[-1]] = rest
        return z

    def accept(self, zn) -> bool:
        """True when the mapped point is feasible for the original program (bounds ``l_k`` included)."""
        z = self.expand(zn)
        return self.original.max_violation(z) <= 1e-7 * max(1.0, float(np.abs(z).max(initial=0)))

    def describe(self):
        nm = self.original.names
        return (f"{', '.join(nm[v] for v in self.simplex)} (sum = 1, only in -log rows) in stick-breaking "
                f"coordinates {', '.join(self.program.names[v] for v in self.svars)}")


def _simplex_rows(program, is_x):
    """Candidate simplices: indices of linear equality rows sum_k p_k = 1 over >= 3 primal variables."""
    out = []
    for ci, c in enumerate(program.constraints):
        b = c.body
        if not (b.is_linear and c.lo == c.hi):
            continue
        nz, val = b.linear_items()
        if nz.size < 3 or not np.all(val == 1.0) or c.hi - b.constant != 1.0 or not is_x[nz].all():
            continue
        out.append((ci, nz))
    return out


def _only_in_neglog(program, ci, S):
    """True when the variables ``S`` appear nowhere but in constraint ``ci`` and in objective rows
    ``c w (-log p_k)`` (argument exactly one variable of ``S`` with coefficient 1 and constant 0)."""
    inS = np.zeros(program.n, dtype=bool)
    inS[S] = True
    for k, c in enumerate(program.constraints):
        if k != ci and inS[c.body.support()].any():
            return False
    e = program.objective
    if inS[e.linear_items()[0]].any() or inS[e.quadratic.i].any() or inS[e.quadratic.j].any():
        return False
    for g in e.groups():
        if inS[g.mult[g.mult >= 0]].any():
            return False
        rows = np.flatnonzero(np.diff(sp.csr_matrix(g.A[:, S]).indptr))
        if rows.size == 0 and not (getattr(g, "A2", None) is not None and sp.csr_matrix(g.A2[:, S]).nnz):
            continue
        kernel = ATOMS.get(getattr(g, "kind", None))  # log-sum-exp groups have no kind
        if kernel is None or not kernel.splits_products:
            return False
        for r in rows:
            row = g.A[r]
            if row.nnz != 1 or row.data[0] != 1.0 or g.b[r] != 0.0:
                return False
    return bool(np.all(program.lb[S] > 0))


def stick_breaking(program: Program, part):
    """A :class:`StickBreaking` for the first simplex of mixture weights that matches the pattern
    of the module docstring, or None."""
    is_x = np.zeros(program.n, dtype=bool)
    is_x[part.x] = True
    for ci, S in _simplex_rows(program, is_x):
        if _only_in_neglog(program, ci, S):
            return _transform(program, ci, S)
    return None


def _transform(program, ci, S):
    n, K = program.n, S.size
    inS = np.zeros(n, dtype=bool)
    inS[S] = True
    keep = np.flatnonzero(~inS)
    keep_new = np.full(n, -1, dtype=np.int64)
    keep_new[keep] = np.arange(keep.size)
    m = keep.size + K - 1
    svars = np.arange(keep.size, m)
    # z = T z' (the p columns are zero: after removing their rows nothing reads them)
    T = sp.csr_matrix((np.ones(keep.size), (keep, np.arange(keep.size))), shape=(n, m))
    pos_of = {int(v): k for k, v in enumerate(S)}
    e = program.objective
    rest_atoms, new_rows = [], {}
    for g in e.atoms:
        hit = np.flatnonzero(np.diff(sp.csr_matrix(g.A[:, S]).indptr)) if ATOMS[g.kind].splits_products \
            else np.zeros(0, int)
        if hit.size:
            coef, mult, rows_v, rows_a, b = new_rows.setdefault(g.kind, ([], [], [], [], []))
            keep_r = np.setdiff1d(np.arange(len(g)), hit)
            for r in hit:
                k = pos_of[int(g.A[r].indices[0])]
                w = int(g.mult[r])
                wn = int(keep_new[w]) if w >= 0 else -1
                # -log p_k = -log s_k - sum_{j<k} log(1 - s_j)  (k < K-1);  -sum_j log(1 - s_j)  (k = K-1)
                for j in range(min(k, K - 1)):
                    coef.append(g.coef[r]); mult.append(wn); rows_v.append(svars[j]); rows_a.append(-1.0); b.append(1.0)  # noqa: E702
                if k < K - 1:
                    coef.append(g.coef[r]); mult.append(wn); rows_v.append(svars[k]); rows_a.append(1.0); b.append(0.0)  # noqa: E702
            if keep_r.size:
                rest_atoms.append(AtomGroup(g.kind, g.coef[keep_r], g.A[keep_r], g.b[keep_r], g.mult[keep_r],
                                            None if g.A2 is None else g.A2[keep_r],
                                            None if g.A2 is None else g.b2[keep_r],
                                            None if g.label is None else g.label[keep_r]))
        else:
            rest_atoms.append(g)
    base = Expression(n, e.constant, e.linear, e.quadratic, rest_atoms, e.lse)
    obj = _map_expr(base, T, np.zeros(n), m, keep_new)
    for kind, (coef, mult, rows_v, rows_a, b) in new_rows.items():
        A = sp.csr_matrix((rows_a, (np.arange(len(rows_v)), rows_v)), shape=(len(rows_v), m))
        obj.atoms.append(AtomGroup(kind, np.array(coef), A, np.array(b), np.array(mult, dtype=np.int64)))
    cons = []
    for k, c in enumerate(program.constraints):
        if k == ci:
            continue
        cons.append(type(c)(c.name, _map_expr(c.body, T, np.zeros(n), m, keep_new), c.lo, c.hi))
    lo = float(program.lb[S].min())
    base_name = program.names[S[0]].split("[")[0]
    names = [program.names[v] for v in keep] + [f"stick({base_name})[{j}]" for j in range(K - 1)]
    x0 = np.concatenate([program.x0[keep], np.full(K - 1, np.nan)])
    p0 = program.x0[S]
    if np.all(np.isfinite(p0)) and np.all(p0 > 0):
        rem = np.cumsum(p0[::-1])[::-1]  # sum_{i>=j} p_i
        x0[keep.size:] = np.clip(p0[:-1] / rem[:-1], lo, 1 - lo)
    new = Program(names, np.concatenate([program.lb[keep], np.full(K - 1, lo)]),
                  np.concatenate([program.ub[keep], np.full(K - 1, 1.0 - lo)]), obj, cons,
                  maximize=program.maximize, objective_name=program.objective_name, x0=x0)
    return StickBreaking(program, new, S, svars, keep_new)
