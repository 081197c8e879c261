r"""The dual active-set method of Goldfarb & Idnani (1983) for strictly convex QPs with a dense ``Q``: the step QPs of
the majorization loop (Jebara & Choromanska 2012, Algorithm 2 step 3) with many inequality rows and few columns.

Problem (the form and dual sign convention of :mod:`varopt.lpqp`)::

    min 1/2 x'Qx + c'x   s.t.   r_lo <= A x <= r_hi,   lb <= x <= ub,       Q positive definite.

Every finite row side and column bound is a constraint ``a_k'x >= b_k`` (lower side, sign ``s = +1``) or
``a_k'x <= b_k`` (upper side, ``s = -1``; ``s = 0`` an equality) with normal ``a_k`` (a row of ``A`` or a unit vector).
On a working set ``W`` (normals ``N``, sides ``b_W``) the equality-constrained minimiser and its multipliers are, with
``q = Q^{-1} c``, ``Y = Q^{-1} N'`` and ``S = N Y``::

    S y_W = b_W + N q,     x = Y y_W - q           (stationarity Q x + c = N' y_W).

The method keeps every multiplier on its side (``s_k y_k >= 0``: dual feasible) and lets the primal be infeasible.
Each iteration takes the most violated constraint ``p`` (violation over ``||a_p||``, side sign ``s``) and raises
its multiplier ``s t`` from 0 (Goldfarb & Idnani 1983; Nocedal & Wright 2006, section 16.5): with
``r = S^{-1} N Q^{-1} a_p`` and ``z = Q^{-1} a_p - Y r`` the point moves as ``x + t s z``, the multipliers as
``y_W - t s r``, and ``a_p'z = a_p'Q^{-1}a_p - (N Q^{-1}a_p)' r >= 0`` is the Schur complement of ``S`` in the
working set with ``p`` added (the new diagonal entry of the Cholesky factor, squared). The full step
``t = gap / a_p'z`` satisfies ``p``, which joins ``W``; a partial step stops where a multiplier of ``W`` reaches 0
and drops that constraint, and the method continues with ``p``. The dual objective increases strictly in
non-degenerate steps, so no working set repeats.

Why a dual method: a step QP whose rows are mostly inactive (1,500 rows in 100 columns, about 100 active) is primal
feasible only at ``D = 0`` as far as the primal method of :mod:`.active_set` knows, and that method adds one blocking
row per iteration and releases rows one at a time (about 600 iterations cold on that QP). The dual method starts from
the unconstrained minimiser, or from the previous step QP's working set wherever the iterate has moved (it needs no
feasible start), factors ``Q`` once, and extends the factor of ``S`` by one row per addition. Every constraint is
checked at every iteration (one product ``A x``), so the working set is grown by row generation and the answer
satisfies every row. It is accepted only with the QP layer's KKT certificate
(:meth:`.active_set.ActiveSetQP._certify`); None otherwise (``Q`` not numerically positive definite, dependent
equalities, the iteration budget, a failed certificate), and the caller falls back.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import lapack, solve_triangular

from .active_set import Q_EPS, _chol, _cho_solve

#: an added normal depends on the working set when its Schur complement ``a_p'z`` is below this fraction of
#: ``a_p'Q^{-1}a_p`` (in exact arithmetic 0 for a dependent normal); the partial step then drops a constraint
DEPENDENT = 1e-11
#: iterations allowed: this many, plus ten per constraint that can be active at once (at most ``n``; cold starts far from
#: the rows took 4-6 per active row, additions and drops)
EXTRA_ITER = 50
#: a multiplier this far (relative) on the wrong side after an exact re-solve is rounding: set to 0, not dropped
SIGN_ROUNDING = 1e-13


def _tri(L, v, trans=False):
    """``L^{-1} v`` or ``L^{-T} v`` for the lower triangular ``L`` (LAPACK's ``trtrs``: scipy's wrapper validates its
    arguments at about the cost of the solve itself on these sizes)."""
    out, info = lapack.dtrtrs(L, v, lower=1, trans=1 if trans else 0)
    return out if info == 0 else solve_triangular(L, v, lower=True, trans=1 if trans else 0, check_finite=False)


class _Working:
    """The working set: constraint ids (rows ``0..m-1``, columns ``m..m+n-1``), side signs, the normals ``N``
    (rows of ``Nm``), ``Y = Q^{-1} N'`` and ``S = N Y`` with its lower Cholesky factor ``L``."""

    def __init__(self, A, cf):
        self.m, self.n = A.shape
        self.A, self.cf = A, cf
        n = self.n
        self.ids, self.sides = [], []
        self.Nm = np.empty((n, n))
        self.Y = np.empty((n, n))
        self.S = np.empty((n, n))
        self.L = np.zeros((0, 0))

    @property
    def k(self):
        return len(self.ids)

    def normal(self, k):
        if k < self.m:
            return self.A[k]
        e = np.zeros(self.n)
        e[k - self.m] = 1.0
        return e

    def start(self, cons):
        """Take the constraints ``cons`` (``(id, sign)``) at once, or, when their ``S`` does not factor (dependent
        normals), one by one keeping the independent ones. Returns the ones left out."""
        if 0 < len(cons) <= self.n:
            N = np.array([self.normal(k) for k, _ in cons])
            Y = _cho_solve(self.cf, N.T)
            if Y is not None:
                S = N @ Y
                S = 0.5 * (S + S.T)
                L, info = lapack.dpotrf(S, lower=True, clean=True)
                d = np.abs(np.diagonal(L)) if info == 0 else None
                if d is not None and d.min() ** 2 > DEPENDENT * float(np.diagonal(S).max()):
                    k = len(cons)
                    self.ids, self.sides = [c[0] for c in cons], [c[1] for c in cons]
                    self.Nm[:k], self.Y[:, :k], self.S[:k, :k], self.L = N, Y, S, L
                    return []
        left = []
        for k, s in cons:
            yp = _cho_solve(self.cf, self.normal(k))
            got = None if yp is None else self.extension(k, yp)
            if got is None or not got[3] > DEPENDENT * got[2] or self.k >= self.n:
                left.append((k, s))
            else:
                self.add(k, s, yp, *got)
        return left

    def extension(self, k, yp):
        """``(w, r, sig, dd, lw)`` of adding ``k`` with ``yp = Q^{-1} a_k``: ``w = N yp``, ``r = S^{-1} w``,
        ``sig = a_k'yp``, the Schur complement ``dd = sig - w'S^{-1}w``, ``lw = L^{-1} w``."""
        sig = float(self.normal(k) @ yp)
        if not self.ids:
            e = np.zeros(0)
            return e, e, sig, sig, e
        w = self.Nm[:self.k] @ yp
        lw = _tri(self.L, w)
        return w, _tri(self.L, lw, trans=True), sig, sig - float(lw @ lw), lw

    def add(self, k, side, yp, w, r, sig, dd, lw):
        i = self.k
        self.ids.append(k)
        self.sides.append(side)
        self.Nm[i] = self.normal(k)
        self.Y[:, i] = yp
        self.S[i, :i] = w
        self.S[:i, i] = w
        self.S[i, i] = sig
        L = np.zeros((i + 1, i + 1))
        L[:i, :i] = self.L
        L[i, :i] = lw
        L[i, i] = np.sqrt(dd)
        self.L = L

    def drop(self, i):
        """Remove entry ``i`` and refactor ``S``; False when it does not factor."""
        del self.ids[i]
        del self.sides[i]
        k = self.k
        # shift the entries after i down by one (slices: numpy copies overlapping ones correctly)
        self.Nm[i:k] = self.Nm[i + 1:k + 1]
        self.Y[:, i:k] = self.Y[:, i + 1:k + 1]
        self.S[i:k, :k + 1] = self.S[i + 1:k + 1, :k + 1]
        self.S[:k, i:k] = self.S[:k, i + 1:k + 1]
        if not k:
            self.L = np.zeros((0, 0))
            return True
        L, info = lapack.dpotrf(self.S[:k, :k], lower=True, clean=True)
        self.L = L
        return info == 0

    def eqp(self, q, b):
        """``(x, y_W)``: the equality QP on the working set (``b`` its sides)."""
        if not self.ids:
            return -q, np.zeros(0)
        k = self.k
        y = _tri(self.L, _tri(self.L, b + self.Nm[:k] @ q), trans=True)
        return self.Y[:, :k] @ y - q, y


def solve_dual(qp, Q, c, row_lo, row_hi, lb, ub, tol=1e-9, factor=None, max_iter=None, row_tol=None):
    """The QP on the constraints of ``qp`` (an :class:`.active_set.ActiveSetQP`: its dense ``A``, and its working set
    ``rows``/``cols`` as the start) by the dual active-set method; an optimal certified :class:`.result.LPResult`
    (``info['method'] == 'dual-active-set'``), or None (see the module doc). On success the working set is stored back
    in ``qp`` (the next solve's start, for this method or the primal one). ``factor``: the caller's
    ``_chol(Q, Q_EPS)``. ``tol``: the primal feasibility tolerance, relative to ``max(1, |side|)`` (the primal
    method's); ``row_tol``: absolute tolerances of the rows instead (the constraints outside the working set are
    satisfied to within them)."""
    A, n, m = qp.A, qp.n, qp.m
    c = np.asarray(c, dtype=float)
    cf = _chol(Q, Q_EPS) if factor is None else factor
    if cf is None:
        return None
    q = _cho_solve(cf, c)
    if q is None or not np.all(np.isfinite(q)):
        return None
    lo = np.concatenate((row_lo, lb))
    hi = np.concatenate((row_hi, ub))
    eq = lo == hi
    fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
    budget = max_iter or EXTRA_ITER + 10 * min(int(np.count_nonzero(fin_lo | fin_hi)), n)
    norms = np.concatenate((np.sqrt(np.einsum("ij,ij->i", A, A)), np.ones(n)))
    norms[norms == 0] = 1.0
    with np.errstate(invalid="ignore"):
        tol_lo = np.where(fin_lo, tol * np.maximum(1.0, np.abs(lo)), 0.0)
        tol_hi = np.where(fin_hi, tol * np.maximum(1.0, np.abs(hi)), 0.0)
    if row_tol is not None:
        tol_lo[:m] = tol_hi[:m] = row_tol
    ws = _Working(A, cf)

    def sides():
        return np.array([lo[k] if s >= 0 else hi[k] for k, s in zip(ws.ids, ws.sides)])

    # the start: the equalities, then the last working set where its side is finite
    cons = [(int(k), 0) for k in np.flatnonzero(eq)]
    cons += [(int(i), s) for i, s in sorted(qp.rows.items()) if not eq[i] and (fin_lo if s > 0 else fin_hi)[i]]
    cons += [(m + int(j), s) for j, s in sorted(qp.cols.items())
             if not eq[m + j] and (fin_lo if s > 0 else fin_hi)[m + j]]
    if any(s == 0 for _, s in ws.start(cons)):
        return None   # dependent equalities (the primal method reduces those)
    x, y = _dual_feasible(ws, q, sides)   # the start's multipliers may have the wrong signs
    if x is None:
        return None

    p = None
    for it in range(1, budget + 1):
        if p is None:
            v = np.concatenate((A @ x, x))
            with np.errstate(invalid="ignore"):
                under = np.where(fin_lo, lo - v - tol_lo, -np.inf)
                over = np.where(fin_hi, v - hi - tol_hi, -np.inf)
            if ws.ids:
                under[ws.ids] = -np.inf
                over[ws.ids] = -np.inf
            viol = np.maximum(under, over) / norms
            p = int(np.argmax(viol))
            if not viol[p] > 0.0:
                return _certified(qp, Q, c, row_lo, row_hi, lb, ub, x, y, ws, it)
            sgn = 1 if under[p] >= over[p] else -1
            a_p = ws.normal(p)
            yp = _cho_solve(cf, a_p)
            if yp is None:
                return None
        w, r, sig, dd, lw = ws.extension(p, yp)
        z = yp - ws.Y[:, :ws.k] @ r if ws.ids else yp
        gap = sgn * ((lo[p] if sgn > 0 else hi[p]) - float(a_p @ x))   # > 0 until p holds
        t2 = gap / dd if dd > DEPENDENT * sig and ws.k < n else np.inf
        t1, j = np.inf, None
        if ws.ids:
            sg = np.asarray(ws.sides, dtype=float)
            move = (sg != 0) & (sgn * sg * r > 0)   # multipliers that shrink towards 0 as t grows
            if move.any():
                ti = np.where(move, y / np.where(move, sgn * r, 1.0), np.inf)
                j = int(np.argmin(ti))
                t1 = max(float(ti[j]), 0.0)
        if t1 == np.inf and t2 == np.inf:
            return None   # p cannot hold on this working set: an infeasible QP, or rounding; the caller decides
        if t2 <= t1:
            ws.add(p, sgn, yp, w, r, sig, dd, lw)
            p = None
            x, y = _dual_feasible(ws, q, sides)   # exactly on the new working set (the updates drift)
            if x is None:
                return None
        else:
            x = x + (t1 * sgn) * z
            y = np.delete(y - (t1 * sgn) * r, j)
            if not ws.drop(j):
                return None
        if not np.all(np.isfinite(x)):
            return None
    return None


def _dual_feasible(ws, q, sides):
    """``(x, y_W)`` of the working set's equality QP after dropping, one at a time, the constraint whose multiplier is
    worst on the wrong side until none is (one within rounding is set to 0 instead: after a full step every
    multiplier is on its side in exact arithmetic); ``(None, None)`` when ``S`` stops factoring or ``x`` is not
    finite."""
    while True:
        x, y = ws.eqp(q, sides())
        if not np.all(np.isfinite(x)):
            return None, None
        if not ws.ids:
            return x, y
        bad = -np.asarray(ws.sides, dtype=float) * y
        i = int(np.argmax(bad))
        if bad[i] <= SIGN_ROUNDING * (1.0 + float(np.abs(y).max())):
            return x, np.where(bad > 0, 0.0, y)
        if not ws.drop(i):
            return None, None


def _certified(qp, Q, c, row_lo, row_hi, lb, ub, x, yW, ws, it):
    """The answer in :mod:`varopt.lpqp`'s form (row duals ``y``, column duals ``z``), certified by the primal
    method's :meth:`~.active_set.ActiveSetQP._certify`, which also stores the working set in ``qp``."""
    m, n = qp.m, qp.n
    y, z = np.zeros(m), np.zeros(n)
    rows, cols = {}, {}
    for k, s, v in zip(ws.ids, ws.sides, yW):
        if k < m:
            y[k], rows[k] = v, s
        else:
            z[k - m], cols[k - m] = v, s
    res = qp._certify(lambda v: Q @ v, c, row_lo, row_hi, lb, ub, x, y, z, rows, cols, it)
    if res is not None:
        res.info["method"] = "dual-active-set"
    return res
