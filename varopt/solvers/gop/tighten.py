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
from .relax import interval_mul


def _div(al, au, bl, bu):
    """Elementwise ``[al, au] / [bl, bu]`` where ``[bl, bu]`` excludes 0; ``(-inf, inf)`` elsewhere."""
    ok = (bl > 0) | (bu < 0)
    bl_, bu_ = np.where(ok, bl, 1.0), np.where(ok, bu, 1.0)
    # 1/[bl, bu] = [1/bu, 1/bl] (finite ends: bl, bu are nonzero with one sign; 1/inf = 0)
    with np.errstate(divide="ignore"):
        rl, rh = 1.0 / bu_, 1.0 / bl_
    lo, hi = interval_mul(al, au, rl, rh)
    return np.where(ok, lo, -np.inf), np.where(ok, hi, np.inf)


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
        # other one-argument atoms: an upper bound of T bounds the argument through g's sublevel set
        # (exp(v) <= 3 gives v <= log 3; without it a free v of sum(exp(v)) <= 3 stayed unbounded above)
        self.levels = [t for t, a in enumerate(lifted.atoms)
                       if not ATOMS[a.kind].quadratic and ATOMS[a.kind].arity == 1]

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
            if lf.nW:
                w = slice(lf.oW, lf.oT)
                for a, b in ((lf.W[:, 0], lf.W[:, 1]), (lf.W[:, 1], lf.W[:, 0])):
                    ql, qh = _div(L1[w], U1[w], nl[b], nu[b])
                    np.maximum.at(nl, a, ql)
                    np.minimum.at(nu, a, qh)
            if lf.nP:
                t = lf.oT + lf.PT
                ql, qh = _div(L1[lf.oP:], U1[lf.oP:], L1[t], U1[t])
                np.maximum.at(nl, lf.Pw, ql)
                np.minimum.at(nu, lf.Pw, qh)
            extra = []
            for t in self.squares:
                th = U1[lf.oT + t]
                if np.isfinite(th):
                    a = lf.atoms[t]
                    r = np.sqrt(max(th, 0.0))
                    extra.append((a, -r - a.b, r - a.b))
            for t in self.levels:
                a = lf.atoms[t]
                iv = ATOMS[a.kind].sublevel(U1[lf.oT + t])
                if iv is not None and (np.isfinite(iv[0]) or np.isfinite(iv[1])):
                    extra.append((a, iv[0] - a.b, iv[1] - a.b))
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
        # a column bounded below by +inf (above by -inf) takes no finite value in the box: the interval of
        # (x - 0.5)^2 over x >= 4.3e159, a child of a split of a variable unbounded above, overflows; such a box
        # holds no point the program can evaluate (the LP would refuse +inf as a lower bound)
        return l, u, L, U, bool(np.any(L == np.inf) or np.any(U == -np.inf))
