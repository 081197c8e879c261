r"""Bound tightening through linear *and* nonlinear rows of a lifted program.

Feasibility-based tightening (FBBT; Belotti et al. 2009, Tawarmalani & Sahinidis 2004):

1. every expression of the program is a linear row over the lifted columns
   ``Z = (z, W, T, P)`` (:mod:`.relax`); interval propagation over these rows (forward and
   backward, :func:`.bounds.fbbt`) bounds the lifted columns and, through them, ``z``;
2. the products are propagated both ways: ``W_ij in [z_i] x [z_j]`` and, when ``[z_j]``
   excludes 0, ``z_i in [W_ij] / [z_j]``; the same for ``P = z_w T``; a square
   ``T = (a^T z + b)^2 <= T_h`` gives the linear row ``|a^T z + b| <= sqrt(T_h)``;
3. repeat until nothing moves (or a round limit).

With an incumbent value ``UB`` the objective row ``f(z) <= UB`` joins the rows (optimality-
based pruning of the box). Every bound produced holds for every feasible point of the
program in the box (with objective at most ``UB``), so the tightened box loses no such point.

Optimization-based tightening (OBBT) minimises and maximises a variable over the McCormick
relaxation (:func:`obbt_relaxation`); the LP optimum bounds the variable over every feasible
point (the relaxation contains them all).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...program.atoms import ATOMS
from .bounds import fbbt
from .relax import interval_affine


def _div(al, au, bl, bu):
    """[al, au] / [bl, bu] for an interval ``[bl, bu]`` that excludes 0; None otherwise."""
    if bl <= 0 <= bu:
        return None
    c = [a / b for a in (al, au) for b in (bl, bu) if np.isfinite(a) or np.isfinite(b)]
    with np.errstate(invalid="ignore"):
        c = [0.0 if np.isnan(v) else v for v in c]
    if any(not np.isfinite(a) for a in (al, au)):
        # an infinite end of the numerator leaves that side open
        lo = -np.inf if (al == -np.inf and bl > 0) or (au == np.inf and bu < 0) else min(c)
        hi = np.inf if (au == np.inf and bl > 0) or (al == -np.inf and bu < 0) else max(c)
        return lo, hi
    return min(c), max(c)


def _moved(old, new, sgn, tol=1e-7):
    """Did a bound move by more than ``tol`` (relative) in direction ``sgn``? (inf-safe)"""
    fin = np.isfinite(new)
    if not fin.any():
        return False
    o, nw = old[fin], new[fin]
    step = sgn * (nw - np.where(np.isfinite(o), o, -sgn * np.inf))
    return bool(np.any(step > tol * np.maximum(1.0, np.abs(nw))))


class Tightener:
    """FBBT on a :class:`~.relax.Lifted` program (item 1 of the tree mode)."""

    def __init__(self, lifted):
        self.lf = lifted
        R = lifted.R
        self.A = R
        self.rlo = lifted.lo - lifted.const
        self.rhi = lifted.hi - lifted.const
        self.squares = [t for t, a in enumerate(lifted.atoms) if ATOMS[a.kind].quadratic]

    def tighten(self, l, u, cutoff=np.inf, rounds=10, colL=None, colU=None):
        """Returns ``(l, u, L, U, infeasible)``: the tightened box and bounds of every lifted column."""
        lf = self.lf
        n = lf.n
        l, u = l.astype(float).copy(), u.astype(float).copy()
        L0, U0, _, _ = lf.column_bounds(l, u)
        L = L0 if colL is None else np.maximum(L0, colL)
        U = U0 if colU is None else np.minimum(U0, colU)
        hi = self.rhi.copy()
        hi[0] = cutoff - lf.const[0]
        for _ in range(rounds):
            L1, U1, infeas = fbbt(self.A, self.rlo, hi, L, U, rounds=3)
            if infeas:
                return l, u, L1, U1, True
            moved = False
            nl, nu = L1[:n].copy(), U1[:n].copy()
            for k, (i, j) in enumerate(lf.W):
                w = lf.oW + k
                for a, b in ((i, j), (j, i)):
                    q = _div(L1[w], U1[w], nl[b], nu[b])
                    if q is not None:
                        nl[a], nu[a] = max(nl[a], q[0]), min(nu[a], q[1])
            for k in range(lf.nP):
                w, t = lf.Pw[k], lf.oT + lf.PT[k]
                q = _div(L1[lf.oP + k], U1[lf.oP + k], L1[t], U1[t])
                if q is not None:
                    nl[w], nu[w] = max(nl[w], q[0]), min(nu[w], q[1])
            extra = []
            for t in self.squares:
                th = U1[lf.oT + t]
                if np.isfinite(th):
                    a = lf.atoms[t]
                    r = np.sqrt(max(th, 0.0))
                    extra.append((a, -r - a.b, r - a.b))
            if extra:
                M = sp.csr_matrix((np.concatenate([a.val for a, _, _ in extra]),
                                   np.concatenate([a.idx for a, _, _ in extra]),
                                   np.concatenate([[0], np.cumsum([a.idx.size for a, _, _ in extra])])),
                                  shape=(len(extra), n))
                nl, nu, infeas = fbbt(M, np.array([e[1] for e in extra]), np.array([e[2] for e in extra]),
                                      nl, nu, rounds=2)
                if infeas:
                    return nl, nu, L1, U1, True
            if np.any(nl > nu + 1e-7 * np.maximum(1.0, np.abs(nl))):
                return nl, nu, L1, U1, True
            nu = np.maximum(nu, nl)
            moved = _moved(l, nl, 1.0) or _moved(u, nu, -1.0)
            l, u = nl, nu
            Lb, Ub, _, _ = lf.column_bounds(l, u)
            L, U = np.maximum(Lb, L1), np.minimum(Ub, U1)
            L[:n], U[:n] = l, u
            if not moved:
                break
        return l, u, L, U, False


def atom_intervals(lifted, l, u):
    """``[u_l, u_h]`` of every atom argument over the box."""
    out = [interval_affine(a.idx, a.val, a.b, l, u) for a in lifted.atoms]
    return np.array([o[0] for o in out]), np.array([o[1] for o in out])
