r"""Eliminate linear equalities by substitution (a reduction shared by gop's presolve and ipsa).

A linear equality ``a^T x = e`` on allowed variables (gop: the primal block, e.g. ``sum_k pi_k = 1``;
ipsa: every variable, e.g. a probability simplex ``sum_j w_j = 1``) is
used to eliminate one variable ``x_v = (e - sum_{j != v} a_j x_j) / a_v``: the program is
rewritten with the affine map ``z = T z' + t`` (every term group stays in its class:
affine arguments of atoms become ``A T z' + A t + b``; the quadratic part
``1/2 z^T H z`` becomes ``1/2 z'^T T^T H T z' + (T^T H t)^T z' + 1/2 t^T H t``). The bounds of
``x_v`` become the linear constraint ``lb_v <= x_v(z') <= ub_v`` (a bound when a single
variable remains). For gop this removes one connected variable per equality (halving the number of
relaxed duals) and, when the constraint disappears, lets the remaining variables be
separable so the search-space reduction applies to them (docs/gop.md). For ipsa, whose
interior-point iteration needs a strictly feasible interior, it turns equalities (which have
none) into the inequality rows of the reduced variables (docs/ipsa.md).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .expression import Expression
from .program import Constraint, Program
from .terms import AtomGroup, LseGroup, QuadraticTerms


def map_expression(e: Expression, T: sp.csr_matrix, t: np.ndarray, m: int, newpos: np.ndarray) -> Expression:
    const = e.constant + float(e.linear @ t)
    lin = np.asarray(T.T @ e.linear).ravel()
    # rounding left by cancellation is zero: a row that depends on the rows eliminated (2 a^T x = 2 e after
    # a^T x = e) maps to coefficients ~1e-16 of its terms, which the next step took as a pivot, x_v = (e - ...) / 1e-16
    # (gop's presolve then certified a lower bound above the optimum, or stalled; a convex program read -38.4 for
    # Clarabel's -376.2)
    lin[np.abs(lin) <= 1e-12 * np.asarray(abs(T).T @ np.abs(e.linear)).ravel()] = 0.0
    H = e.quadratic.hessian_matrix
    if H.nnz:
        H2 = (T.T @ H @ T).tocsr()
        lin = lin + np.asarray(T.T @ (H @ t)).ravel()
        const += 0.5 * float(t @ (H @ t))
        U = sp.triu(H2, k=1).tocoo()
        D = H2.diagonal()
        di = np.flatnonzero(D)
        Q = QuadraticTerms(np.concatenate([U.row, di]), np.concatenate([U.col, di]),
                           np.concatenate([U.data, 0.5 * D[di]]), m)
    else:
        Q = QuadraticTerms(np.zeros(0, int), np.zeros(0, int), np.zeros(0), m)
    atoms = []
    for g in e.atoms:
        mult = np.where(g.mult >= 0, newpos[np.maximum(g.mult, 0)], -1)
        atoms.append(AtomGroup(g.kind, g.coef, g.A @ T, g.b + g.A @ t, mult,
                               None if g.A2 is None else g.A2 @ T, None if g.A2 is None else g.b2 + g.A2 @ t,
                               g.label))
    lses = []
    for g in e.lse:
        mult = np.where(g.mult >= 0, newpos[np.maximum(g.mult, 0)], -1)
        lses.append(LseGroup(g.A @ T, g.b + g.A @ t, g.seg, g.coef, mult, g.label))
    return Expression(m, const, lin, Q, atoms, lses)


class Elimination:
    """``z = T z' + t``; ``program`` is the reduced program."""

    def __init__(self, program: Program, T, t, reduced: Program, eliminated: list):
        self.original = program
        self.T, self.t = T, t
        self.program = reduced
        self.eliminated = eliminated

    def expand(self, zr):
        return None if zr is None else np.asarray(self.T @ zr).ravel() + self.t


def eliminate_equalities(program: Program, xset: set | None = None, max_elim: int = 50, min_support: int = 2,
                         stop=None):
    """Eliminate linear equalities with at least ``min_support`` variables, all in ``xset`` (None:
    every variable), one at a time, at most ``max_elim``; returns an :class:`Elimination` or None.

    ``stop()`` (None: never) is asked before each elimination and each row it maps: when it says True the
    elimination under way is dropped and the ones made before it are kept (each one is an exact substitution, so
    any prefix of them is); None when none was completed.
    """
    if not any(c.lo == c.hi for c in program.constraints):
        return None  # no equality (one pass; the search below also tests each row's support)
    n = program.n
    T = sp.identity(n, format="csr")
    t = np.zeros(n)
    prog = program
    keep_idx = np.arange(n)  # original index of each reduced variable
    eliminated = []
    for _ in range(max_elim):
        if stop is not None and stop():
            break
        cand = None
        for ci, c in enumerate(prog.constraints):
            if c.lo != c.hi or not c.body.is_linear:
                continue
            sup = c.body.linear_items()[0]
            if sup.size < min_support or (xset is not None and not all(keep_idx[j] in xset for j in sup)):
                continue
            a = c.body.linear
            # the pivot: the variable with the largest coefficient (numerically safest)
            v = int(sup[np.argmax(np.abs(a[sup]))])
            cand = (ci, v)
            break
        if cand is None:
            break
        ci, v = cand
        c = prog.constraints[ci]
        a = c.body.linear
        e = c.hi - c.body.constant
        m = prog.n - 1
        others = np.array([j for j in range(prog.n) if j != v])
        newpos = np.full(prog.n, -1, dtype=np.int64)
        newpos[others] = np.arange(m)
        # z = S z' + s with z_v = (e - sum_{j != v} a_j z_j) / a_v
        rows, cols, vals = list(others), list(range(m)), [1.0] * m
        for j in others:
            if a[j] != 0:
                rows.append(v)
                cols.append(int(newpos[j]))
                vals.append(-a[j] / a[v])
        S = sp.csr_matrix((vals, (rows, cols)), shape=(prog.n, m))
        s = np.zeros(prog.n)
        s[v] = e / a[v]
        cons = []
        stopped = False
        for k, cc in enumerate(prog.constraints):
            if k == ci:
                continue
            if stop is not None and stop():
                # one substitution maps every row (0.3-0.7 s on the pooling programs foulds3-5 in the pq form):
                # this one is dropped, the ones before it are kept
                stopped = True
                break
            cons.append(Constraint(cc.name, map_expression(cc.body, S, s, m, newpos), cc.lo, cc.hi))
        if stopped:
            break
        lb = prog.lb[others].copy()
        ub = prog.ub[others].copy()
        row = np.asarray(S[v].toarray()).ravel()
        nz = np.flatnonzero(row)
        if nz.size == 0 and prog.lb[v] <= s[v] <= prog.ub[v]:
            pass  # a fixed variable within its bounds: no row left
        elif np.isfinite(prog.lb[v]) or np.isfinite(prog.ub[v]):
            if nz.size == 1:
                j = nz[0]
                lo_j = (prog.lb[v] - s[v]) / row[j]
                hi_j = (prog.ub[v] - s[v]) / row[j]
                if row[j] < 0:
                    lo_j, hi_j = hi_j, lo_j
                lb[j] = max(lb[j], lo_j)
                ub[j] = min(ub[j], hi_j)
            else:
                cons.append(Constraint(f"bounds of {prog.names[v]} (eliminated by {c.name})",
                                       Expression(m, s[v], row), prog.lb[v], prog.ub[v]))
        obj = map_expression(prog.objective, S, s, m, newpos)
        x0 = prog.x0[others]
        prog = Program([prog.names[j] for j in others], lb, ub, obj, cons, prog.maximize, prog.objective_name, x0)
        # compose z = T_old (S z' + s) + t_old
        t = np.asarray(T @ s).ravel() + t
        T = (T @ S).tocsr()
        eliminated.append((program.names[keep_idx[v]], c.name))
        keep_idx = keep_idx[others]
    if not eliminated:
        return None
    return Elimination(program, T, t, prog, eliminated)
