r"""Euclidean norms in convex position as second-order cones, relaxed by gradient cuts (no branching on their
arguments).

A 2-norm (``cp.norm(r, 2)``, Pyomo ``sqrt(x**2 + y**2)``) is compiled as a column ``t >= 0`` with the defining
row ``e(z) - t^2 == 0``, ``e`` a convex quadratic (:mod:`varopt.program.lifting`). Relaxed as an equality, its
side ``e - t^2 >= 0`` is concave in the argument and needs branching on every variable of ``e`` -- forever at the
nonsmooth optimum ``r = 0`` of a group-lasso group. When ``t`` is in *convex position* (it is minimised wherever
it appears: the rule of the epigraph columns, :func:`varopt.program.epigraph_lift.check_positions`), the program
with the row replaced by the cone ``sqrt(e(z)) <= t`` has the same optimal value and the same optimal ``z`` (``t``
can only be lowered to ``sqrt(e)``; Boyd & Vandenberghe 2004, section 4.4.2). Since the equality implies the
cone, every bound of the cone program is also a valid bound of the user's program, in any position; the
position only makes the relaxation exact at the optimum.

``e`` qualifies when ``sqrt(e)`` is convex: ``e(z) = z^T Q z + g^T z + d`` with ``Q`` positive semidefinite and
``min_z e = r >= 0`` (then ``e = ||Q^{1/2}(z - z*)||^2 + r`` and ``sqrt(e)`` is the norm of an affine map). A
tiny negative ``r`` (rounding) is absorbed: ``h = sqrt(e - r)`` is a norm and ``sqrt(e) >= h - sqrt(-r)``.

The cone is relaxed by Kelley's outer approximation (Kelley 1960): the gradient cut of ``h`` at a relaxation
point ``z0`` with ``h(z0) > t0``,

    t >= h(z0) + grad e(z0) . (z - z0) / (2 h(z0)) - sqrt(max(-r, 0)),

(for ``e = ||u||^2``: ``t >= u0 . u / ||u0||``) and, before the first LP, the cuts
``t >= sqrt(lambda_i) |w_i . (z - z*)| - sqrt(max(-r, 0))`` along the eigenvectors ``w_i`` of ``Q``. All cuts are
valid for every ``z``, so they form one pool shared by all nodes.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError
from ...program.atoms import ATOMS
from ...program.epigraph_lift import Part, check_positions
from ...program.terms import QuadraticTerms
from .relax import rows_to_csr

#: above this many variables in one norm the dense quadratic form is not built (the row stays an equality)
MAX_SUPPORT = 2000
#: above this many candidate norms whose joint position check fails, none is checked one by one
MAX_SINGLE_CHECKS = 200


@dataclasses.dataclass
class _Cone:
    row: int          # index of the defining row in program.constraints
    t: int            # the norm column
    S: np.ndarray     # variables of e
    Q: np.ndarray     # e(z) = zS^T Q zS + g . zS + d
    g: np.ndarray
    d: float
    zstar: np.ndarray  # a minimiser of e
    shift: float      # sqrt(max(-min e, 0))

    def h(self, zS):
        """``sqrt(e(z) + shift^2)`` and the gradient of ``e``."""
        grad = 2.0 * self.Q @ zS + self.g
        e = float(zS @ self.Q @ zS + self.g @ zS + self.d) + self.shift ** 2
        return math.sqrt(max(e, 0.0)), grad


class NormCones:
    """The defining rows of 2-norm columns in convex position, their cuts and their violations."""

    def __init__(self, program, cones):
        self.cones = cones
        drop = {c.row for c in cones}
        #: the program the node relaxation is built from: the cone rows are relaxed here, not by McCormick
        self.relaxed = dataclasses.replace(
            program, constraints=[c for i, c in enumerate(program.constraints) if i not in drop])
        self.cuts = []   # ({col: coef}, lo, hi), valid everywhere
        self._csr = (0, None)   # (number of cuts, their rows as (csr, lo, hi)): every node LP takes them all

    @classmethod
    def build(cls, program):
        """The cones of ``program`` (None when no norm column qualifies). A norm column is recognised by its row,
        not by ``program.aux`` (gop's own rewrites, the abs epigraph, rebuild the program without it): an equality
        ``e(z) - c t^2 == k`` (``c > 0``) with ``t >= 0`` and ``t`` nowhere else in the row, which defines
        ``t = sqrt((e(z) - k) / c)`` -- also when the user wrote it."""
        cand = []
        for k, con in enumerate(program.constraints):
            if con.lo != con.hi or not np.isfinite(con.lo):
                continue
            q = con.body.quadratic
            neg = np.flatnonzero((q.i == q.j) & (q.v < 0))
            if neg.size != 1 or program.lb[q.i[neg[0]]] < 0:
                continue
            cone = _quadratic_form(con, k, int(q.i[neg[0]]))
            if cone is not None:
                cand.append(cone)
        if not cand:
            return None
        cand = _in_convex_position(program, cand)
        return cls(program, cand) if cand else None

    # ------------------------------------------------------------------ cuts
    def cut_at(self, k, z):
        """Gradient cut of cone ``k`` at ``z`` (full column vector), or None where ``h(z) = 0`` (``t >= 0`` holds
        there: the bound of the column)."""
        c = self.cones[k]
        zS = z[c.S]
        hv, grad = c.h(zS)
        if not hv > 1e-12:
            return None
        a = grad / (2.0 * hv)
        row = {int(j): -float(v) for j, v in zip(c.S, a) if v != 0.0}
        row[c.t] = 1.0
        return row, hv - float(a @ zS) - c.shift, np.inf

    def initial_cuts(self):
        """The cuts along the eigenvectors of each ``Q`` (no box needed: they hold everywhere)."""
        rows = []
        for c in self.cones:
            lam, W = np.linalg.eigh(c.Q)
            top = max(float(lam.max(initial=0.0)), 1e-300)
            for li, w in zip(lam, W.T):
                if li <= 1e-10 * top:
                    continue
                for s in (1.0, -1.0):
                    a = s * math.sqrt(li) * w
                    row = {int(j): -float(v) for j, v in zip(c.S, a) if v != 0.0}
                    row[c.t] = 1.0
                    rows.append((row, -float(a @ c.zstar) - c.shift, np.inf))
        self.cuts.extend(rows)
        return rows

    def rows(self, N):
        """All cuts as ``(csr, lo, hi)`` over ``N`` columns; only the cuts added since the last call are converted."""
        done, got = self._csr
        if got is None or done != len(self.cuts) or got[0].shape[1] != N:
            if got is None or got[0].shape[1] != N:
                done, got = 0, rows_to_csr([], N)
            A, lo, hi = rows_to_csr(self.cuts[done:], N)
            got = (sp.vstack([got[0], A], format="csr"), np.concatenate([got[1], lo]), np.concatenate([got[2], hi]))
            self._csr = (len(self.cuts), got)
        return got

    def violations(self, z):
        """``sqrt(e(z)) - t`` per cone (positive: the point is outside the cone)."""
        return np.array([c.h(z[c.S])[0] - c.shift - z[c.t] for c in self.cones])

    def add_at(self, z):
        """Cuts at ``z`` of every cone (a point on the cones, e.g. an incumbent: its cuts support them there); added
        to the pool and returned. For a convex program, the cuts at an optimum ``z*`` (where ``e(z*) > 0``) make
        the node LP's optimum ``z*`` too (the KKT conditions of the cone program at ``z*`` are those of the LP with
        the cones replaced by their cuts there), which Kelley's cuts at LP points approach only slowly in many
        dimensions."""
        rows = [cut for cut in (self.cut_at(k, z) for k in range(len(self.cones))) if cut is not None]
        self.cuts.extend(rows)
        return rows

    def add_violated(self, z, tol):
        """Cuts at ``z`` of the cones it violates by more than ``tol``; added to the pool and returned."""
        rows = []
        for k in np.flatnonzero(self.violations(z) > tol):
            cut = self.cut_at(int(k), z)
            if cut is not None:
                rows.append(cut)
        self.cuts.extend(rows)
        return rows


def _quadratic_form(con, k, t):
    """The cone of the row ``e(z) - t^2 == lo`` when ``sqrt(e)`` is convex (module docstring), else None."""
    body = con.body
    if body.lse or any(not ATOMS[g.kind].quadratic or g.A2 is not None for g in body.atoms):
        return None
    q = body.quadratic
    own = (q.i == t) & (q.j == t)
    if np.count_nonzero(own) != 1:
        return None
    scale_t = -float(q.v[own][0])   # the row divided by c: e / c - t^2
    qi, qj, qv = q.i[~own], q.j[~own], q.v[~own]
    li, lv = (np.asarray(v) for v in body.linear_items())
    if t in qi or t in qj or t in li:
        return None
    cols = [qi, qj, li.astype(np.int64)]
    for g in body.atoms:
        if np.any(np.asarray(g.mult) >= 0) or np.any(np.asarray(g.coef) < 0):
            return None
        cols.append(g.A.tocoo().col)
    S = np.unique(np.concatenate(cols)).astype(np.int64)
    if S.size == 0 or S.size > MAX_SUPPORT or t in S:
        return None
    pos = {int(j): p for p, j in enumerate(S)}
    m = S.size
    Q, g_lin = np.zeros((m, m)), np.zeros(m)
    d = float(body.constant) - float(con.lo)
    for i, j, v in zip(qi.tolist(), qj.tolist(), qv.tolist()):
        if i == j:
            Q[pos[i], pos[i]] += v
        else:
            Q[pos[i], pos[j]] += 0.5 * v
            Q[pos[j], pos[i]] += 0.5 * v
    for j, v in zip(li.tolist(), lv.tolist()):
        g_lin[pos[int(j)]] += v
    for grp in body.atoms:
        A = grp.A.tocsr()
        for r in range(A.shape[0]):
            sl = slice(A.indptr[r], A.indptr[r + 1])
            idx = np.array([pos[int(j)] for j in A.indices[sl]], dtype=np.int64)
            a, b, w = A.data[sl], float(grp.b[r]), float(grp.coef[r])
            Q[np.ix_(idx, idx)] += w * np.outer(a, a)
            np.add.at(g_lin, idx, 2.0 * w * b * a)
            d += w * b * b
    Q, g_lin, d = Q / scale_t, g_lin / scale_t, d / scale_t
    scale = max(1.0, float(np.abs(Q).max()), float(np.abs(g_lin).max(initial=0.0)), abs(d))
    if not np.isfinite(scale):
        return None
    lam = np.linalg.eigvalsh(Q)
    if lam.min() < -1e-10 * max(1.0, float(lam.max())):
        return None
    zstar = np.linalg.lstsq(2.0 * Q, -g_lin, rcond=None)[0]
    if np.linalg.norm(2.0 * Q @ zstar + g_lin) > 1e-9 * scale:
        return None   # g outside the range of Q: e is unbounded below (sqrt of an affine part is concave)
    r = float(zstar @ Q @ zstar + g_lin @ zstar + d)
    if r < -1e-8 * scale:
        return None   # e < 0 somewhere: sqrt(e) is not a norm
    return _Cone(k, t, S, Q, g_lin, d, zstar, math.sqrt(max(-r, 0.0)))


def _in_convex_position(program, cand):
    """The candidates whose column is minimised wherever it appears outside its own defining row."""
    own = {c.row: c.t for c in cand}
    parts = [Part("objective", program.objective, 1.0)]
    for k, c in enumerate(program.constraints):
        lo_inf, hi_inf = not np.isfinite(c.lo), not np.isfinite(c.hi)
        orient = 0.0 if lo_inf == hi_inf else (1.0 if lo_inf else -1.0)
        body = c.body
        if k in own:
            # a defining row holds its own column as -t^2: the rest (e) is what the check reads; another
            # candidate inside e (a norm of norms) is then refused as a product, which keeps its equality
            body = body.copy()
            q = body.quadratic
            keep = ~((q.i == own[k]) & (q.j == own[k]))
            body.quadratic = QuadraticTerms(q.i[keep], q.j[keep], q.v[keep], body.n)
            orient = 0.0
        parts.append(Part(c.name, body, orient))

    def ok(cones):
        try:
            check_positions(parts, {c.t: ("epi", "norm", 0.0) for c in cones}, program.n)
        except ModelStructureError:
            return False
        return True

    if ok(cand):
        return cand
    if len(cand) > MAX_SINGLE_CHECKS:
        return []
    return [c for c in cand if ok([c])]

