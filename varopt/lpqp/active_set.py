r"""A warm-started primal active-set method for small convex QPs with a dense PSD ``Q``: the fast path of
QPs solved many times with the same constraints and a slowly changing ``Q`` (the step QP of the
majorization loop, Jebara & Choromanska 2012, Algorithm 2 step 3).

Problem (the form and dual sign convention of :mod:`varopt.lpqp`)::

    min 1/2 x'Qx + c'x   s.t.   r_lo <= A x <= r_hi,   lb <= x <= ub,   from a feasible x0.

Working set ``W``: rows held at one of their bounds and columns ``C`` fixed at one of theirs; ``F``
the free columns. On ``W`` the equality-constrained problem has the closed-form KKT solution
(Cholesky of ``Q_FF``, ``G = Q_FF^{-1} A_WF'``, Schur complement ``S = A_WF G``)::

    g = c_F + Q_FC x_C,   S y_W = b_W + A_WF Q_FF^{-1} g,   x_F = Q_FF^{-1}(A_WF' y_W - g),
    z_C = (Q x + c - A_W' y_W)_C,

which is stationarity ``Q x + c - A'y - z = 0`` with ``y, z`` zero off ``W``. The primal active-set
iteration (Nocedal & Wright 2006, Algorithm 16.3) moves from ``x0`` towards that point, stops at the
first blocking constraint (added to ``W``), and at an equality-constrained minimiser drops the
multiplier of the wrong sign (``y_i >= 0`` at a lower bound, ``<= 0`` at an upper one). Started from the
working set of the previous solve, one factorization usually suffices.

:meth:`ActiveSetQP.solve_operator` runs the same iteration when ``Q`` is only available as an operator
(``Q^{-1}`` on a few columns and ``Q v``; e.g. the row-space Woodbury form of a bound with few rows and many
parameters): the fixed columns become equality rows, so only ``Q^{-1}`` of the gradient and of the working
set's normals and a Schur complement of size ``|W| + |C|`` are needed, never ``Q_FF``.

The answer is accepted only with the certificate of :mod:`varopt.lpqp` (:func:`.certificate.kkt_residual`:
stationarity, primal feasibility, dual signs, complementarity) at most ``_KKT_ACCEPT`` times the scale
of the QP layer. Otherwise — singular ``Q_FF`` or ``S`` (dependent active constraints), no convergence
within ``max_iter``, a start that is not feasible — :func:`solve_active_set` returns None and the caller
uses the general QP layer (:class:`.model.HighsModel`).
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from .certificate import kkt_residual
from .result import LPResult
from .settings import _KKT_ACCEPT

#: relative proximal term added to ``Q_FF`` before its Cholesky factorization (as the unconstrained
#: majorization step does): singular PSD ``Q`` (flat directions) factor, and the certificate, computed
#: with ``Q`` itself, rejects the answer when the flat direction matters (an unbounded QP)
Q_EPS = 1e-10
#: iterations allowed beyond ``10 + 2 |W0|`` (at most ``n + m``): one per constraint that becomes active after the start
COLD_EXTRA = 50


def _chol(M, eps, pivot=1e-6):
    """Upper Cholesky factor of ``M + eps max|diag| I``, or None when that is not (numerically) PD: a pivot
    below ``pivot`` times the largest (the closed form would amplify rounding)."""
    k = M.shape[0]
    if k == 0:
        return M
    M = M.copy()
    M.flat[::k + 1] += eps * max(float(np.abs(M.diagonal()).max()), 1e-300)
    cf, info = lapack.dpotrf(M, lower=False, clean=False, overwrite_a=True)
    if info != 0:
        return None
    d = np.abs(cf.diagonal())
    if d.min() <= pivot * d.max():
        return None
    return cf


#: a Cholesky pivot below this times the largest (squared: in Q's units) is the regularization's, not Q's
FLAT_PIVOT = 1e-8


def _flat(cf):
    """True when the factor of ``Q_FF + Q_EPS max|diag| I`` has a pivot at the regularization's scale (a column of
    ``Q_FF`` without curvature)."""
    d = np.abs(cf.diagonal())
    return d.size > 0 and d.min() ** 2 < FLAT_PIVOT * d.max() ** 2


def kkt_solve(QFF, AWF, g, bW, rcond_min=1e-13):
    """``(x_F, y_W)`` from the saddle-point system ``[[Q_FF, -A_WF'], [A_WF, 0]] [x_F; y_W] = [-g; b_W]`` (LU),
    or None when it is singular or worse conditioned than ``rcond_min`` (a flat direction ``W`` does not pin)."""
    k, w = QFF.shape[0], AWF.shape[0]
    K = np.zeros((k + w, k + w))
    K[:k, :k] = QFF
    K[:k, k:] = -AWF.T
    K[k:, :k] = AWF
    anorm = float(np.abs(K).sum(axis=0).max())
    lu, piv, info = lapack.dgetrf(K)
    if info != 0:
        return None
    rcond, info = lapack.dgecon(lu, anorm, norm="1")
    if info != 0 or not rcond >= rcond_min:
        return None
    sol, info = lapack.dgetrs(lu, piv, np.concatenate((-g, bW)))
    if info != 0 or not np.all(np.isfinite(sol)):
        return None
    return sol[:k], sol[k:]


def _working_rows(QFF, cf, G, Qg, AWF, bW, g):
    """``(x_F, keep, y_keep)`` of the equality QP on the held rows (``keep``: the rows whose multipliers are
    solved for, the others get 0), or None. The Schur complement ``S = A_WF G`` (``G = Q_FF^{-1} A_WF'``), except:

    * a column without curvature (``t`` in ``|w_i| <= t``, norm1's ``s >= |w|``): its pivot is the regularization,
      ``Q_FF^{-1} ~ 1e10`` and the Schur complement's answer misses ``A_W x = b_W`` by ~1e-6; the saddle-point system
      has no such amplification when the held rows pin the flat column (:func:`kkt_solve`);
    * dependent held rows (a duplicated or scaled row, a redundant equality): the iterate satisfies them all, so an
      independent subset implies the rest (:func:`_independent_rows`); the others keep the multiplier 0."""
    keep = np.arange(AWF.shape[0])
    if _flat(cf):
        got = kkt_solve(QFF, AWF, g, bW)
        if got is None:   # the saddle-point matrix is singular with dependent rows: on an independent subset
            sub = _independent_rows(AWF)
            got = None if sub is None else kkt_solve(QFF, AWF[sub], g, bW[sub])
            keep = keep if got is None else sub
        if got is not None:
            return got[0], keep, got[1]
    for reduced in (False, True):
        if reduced:
            keep = _independent_rows(AWF)
            if keep is None:
                return None
        Ak, bk = AWF[keep], bW[keep]
        # a Q_FF without any curvature (an LP step: every pivot is the regularization's, so _flat does not see it)
        # gives G ~ 1e310: S and yk are not finite and the caller declines; numpy's warnings would reach the user
        with np.errstate(invalid="ignore", over="ignore"):
            S = Ak @ G[:, keep]
            cs = _chol(0.5 * (S + S.T), 1e-14)
            if cs is None:
                continue   # dependent held rows: once more on an independent subset
            yk = _cho_solve(cs, bk + Ak @ Qg)
        if yk is None:
            return None
        with np.errstate(invalid="ignore", over="ignore"):   # a singular Q_FF: not finite, declined by the caller
            return G[:, keep] @ yk - Qg, keep, yk
    return None


def independent_rows(A, rtol=1e-10):
    """Sorted indices of a maximal set of linearly independent rows of the dense ``A`` (QR with column pivoting of
    its transpose, Golub & Van Loan 2013, section 5.4.2; a pivot below ``rtol`` times the largest is dependent):
    all of them when the rows are independent, none when every row is zero."""
    from scipy.linalg import qr
    R, piv = qr(A.T, mode="r", pivoting=True, check_finite=False)
    d = np.abs(np.diagonal(R))
    rank = int(np.count_nonzero(d > rtol * d.max())) if d.size and d.max() > 0 else 0
    return np.sort(piv[:rank])


def _independent_rows(AWF):
    """:func:`independent_rows` of the held rows, or None when there is nothing to drop or nothing is left."""
    keep = independent_rows(AWF)
    return None if keep.size in (0, AWF.shape[0]) else keep


def _eqp_point_duals(Q, c, A, xs, y, C, n):
    """``(xs, y, z)`` with the column duals ``z_C`` of the fixed columns from stationarity; None when not finite."""
    if not np.all(np.isfinite(xs)):
        return None
    r = Q @ xs + c - A.T @ y
    z = np.zeros(n)
    z[C] = r[C]
    return xs, y, z


def _cho_solve(cf, B):
    sol, info = lapack.dpotrs(cf, B)
    return sol if info == 0 else None



def _eqp_point(xs, lam, Wi, Ci, fixed, y, z):
    """The equality-QP point of the working set: fixed columns at their values, the multipliers split into row
    duals ``y`` (working rows ``Wi``) and column duals ``z`` (fixed columns ``Ci``); None when not finite."""
    xs[Ci] = fixed
    if not np.all(np.isfinite(xs)):
        return None
    y[Wi] = lam[:Wi.size]
    z[Ci] = lam[Wi.size:]
    return xs, y, z

class ActiveSetQP:
    """The fixed constraints ``r_lo <= A x <= r_hi``, ``lb <= x <= ub`` of a family of QPs, and the working
    set carried from one solve to the next (the warm start)."""

    def __init__(self, A, max_iter=None):
        self.A = np.asarray(A.toarray() if hasattr(A, "toarray") else A, dtype=float)
        self.m, self.n = self.A.shape
        self.rows = {}  # row -> +1 (held at r_lo) / -1 (at r_hi)
        self.cols = {}  # column -> +1 (at lb) / -1 (at ub)
        self.max_iter = max_iter
        self.last = {}

    def seed(self, res, row_lo, row_hi, lb, ub, tol=1e-9):
        """Take the working set of a QP answered elsewhere (the general layer's optimal ``res`` of the same family):
        the constraints with a multiplier of the right sign at a side ``x`` sits on (the dual sign convention of
        :mod:`varopt.lpqp`). The next :meth:`solve` starts from it where it is still active at its start, as it does
        from its own last answer; without it a solve the fast path declined (more blocking constraints than its
        iteration budget) would leave every later solve as cold as that one."""
        x, y, z = res.x, res.row_duals, res.col_duals
        if x is None or z is None or (self.m and y is None):
            return
        x = np.asarray(x, dtype=float)
        # an infinite side is never near (|v - inf| <= inf would hold a column or row at +-inf: NaN steps)
        near = lambda v, side: np.isfinite(side) & (np.abs(v - side) <= tol * np.maximum(1.0, np.abs(side)))  # noqa: E731
        with np.errstate(invalid="ignore"):
            Ax = self.A @ x
            y = np.asarray(y, dtype=float) if self.m else np.zeros(0)
            z = np.asarray(z, dtype=float)
            self.rows = {int(i): 1 for i in np.flatnonzero((y > 0) & near(Ax, row_lo) & (row_lo < row_hi))}
            self.rows.update({int(i): -1 for i in np.flatnonzero((y < 0) & near(Ax, row_hi) & (row_lo < row_hi))})
            self.cols = {int(j): 1 for j in np.flatnonzero((z > 0) & near(x, lb) & (lb < ub))}
            self.cols.update({int(j): -1 for j in np.flatnonzero((z < 0) & near(x, ub) & (lb < ub))})

    def solve(self, Q, c, row_lo, row_hi, lb, ub, x0, tol=1e-9, factor=None):
        """Solve from the feasible ``x0``; an optimal :class:`.result.LPResult` (``info['kkt']`` the certified
        residual, ``info['iterations']``), or None when the fast path does not apply (see module doc). ``factor``:
        the caller's ``_chol(Q, Q_EPS)``, used while no column is fixed (not factored a second time)."""
        cache = {} if factor is None else {np.zeros(0, dtype=np.int64).tobytes(): factor}
        return self._run(self._eqp, Q, lambda v: Q @ v, c, row_lo, row_hi, lb, ub, x0, tol, cache)

    def solve_operator(self, op, c, row_lo, row_hi, lb, ub, x0, tol=1e-9):
        """As :meth:`solve` with ``Q`` given as an operator: ``op.solve(V)`` (``Q^{-1}`` on the columns of ``V``)
        and ``op.matvec(v)``; ``Q`` itself is never formed (:meth:`_eqp_operator`)."""
        return self._run(self._eqp_operator, op, op.matvec, c, row_lo, row_hi, lb, ub, x0, tol)

    def _run(self, eqp, Q, qmul, c, row_lo, row_hi, lb, ub, x0, tol, cache=None):
        A, n = self.A, self.n
        x = np.array(x0, dtype=float)
        Ax = A @ x
        scale_b = lambda v: tol * np.maximum(1.0, np.abs(v))  # noqa: E731
        with np.errstate(invalid="ignore"):
            if (np.any(Ax < row_lo - scale_b(row_lo)) or np.any(Ax > row_hi + scale_b(row_hi))
                    or np.any(x < lb - scale_b(lb)) or np.any(x > ub + scale_b(ub))):
                return None  # not a feasible start
            at_rlo = np.isfinite(row_lo) & (np.abs(Ax - row_lo) <= scale_b(row_lo))   # infinite sides: never at them
            at_rhi = np.isfinite(row_hi) & (np.abs(Ax - row_hi) <= scale_b(row_hi))
            at_lb = np.isfinite(lb) & (np.abs(x - lb) <= scale_b(lb))
            at_ub = np.isfinite(ub) & (np.abs(x - ub) <= scale_b(ub))
        # warm start: the previous working set where it is still active at x0; equalities always
        rows = {i: s for i, s in self.rows.items() if (at_rlo[i] if s > 0 else at_rhi[i])}
        cols = {j: s for j, s in self.cols.items() if (at_lb[j] if s > 0 else at_ub[j])}
        for i in np.flatnonzero(row_lo == row_hi):
            rows[int(i)] = 0
        for j in np.flatnonzero(lb == ub):
            cols[int(j)] = 0
        # each iteration adds or drops one constraint: from a cold working set reaching k active constraints takes
        # k iterations, so the budget grows with the problem (up to COLD_EXTRA more) before the general layer is asked
        max_iter = self.max_iter or 10 + 2 * (len(rows) + len(cols)) + min(self.n + self.m, COLD_EXTRA)
        cache = {} if cache is None else cache
        for it in range(1, max_iter + 1):
            sol = eqp(Q, c, row_lo, row_hi, lb, ub, x, rows, cols, cache)
            if sol is None:
                return None
            xs, y, z = sol
            p = xs - x
            alpha, block = self._ratio(p, x, row_lo, row_hi, lb, ub, rows, cols)
            if block is None:
                x = xs
                # an equality-constrained minimiser: release the worst multiplier of the wrong sign
                worst, which = 0.0, None
                for i, s in rows.items():
                    if s and -s * y[i] > worst:
                        worst, which = -s * y[i], ("r", i)
                for j, s in cols.items():
                    if s and -s * z[j] > worst:
                        worst, which = -s * z[j], ("c", j)
                sc = 1.0 + float(np.abs(c).max(initial=0.0))
                if which is None or worst <= 1e-12 * sc:
                    return self._certify(qmul, c, row_lo, row_hi, lb, ub, x, y, z, rows, cols, it)
                (rows if which[0] == "r" else cols).pop(which[1])
            else:
                x = x + alpha * p
                kind, k, s = block
                (rows if kind == "r" else cols)[k] = s
                if kind == "c":
                    x[k] = lb[k] if s > 0 else ub[k]
        return None

    # --- pieces -------------------------------------------------------------------------------------------------
    def _eqp(self, Q, c, row_lo, row_hi, lb, ub, x, rows, cols, cache):
        """The minimiser of the QP with the working set as equalities, and its multipliers (None: singular)."""
        n, A = self.n, self.A
        C = np.array(sorted(cols), dtype=np.int64)
        free = np.ones(n, dtype=bool)
        free[C] = False
        F = np.flatnonzero(free)
        xs = x.copy()
        if C.size:
            xs[C] = [lb[j] if cols[j] >= 0 else ub[j] for j in C]
        key = C.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = _chol(Q[np.ix_(F, F)], Q_EPS) if F.size else np.zeros((0, 0))
        cf = cache[key]
        if cf is None:
            return None
        W = np.array(sorted(rows), dtype=np.int64)
        g = c[F] + (Q[np.ix_(F, C)] @ xs[C] if C.size else 0.0)
        y = np.zeros(self.m)
        if F.size:
            rhs = np.column_stack([g, A[np.ix_(W, F)].T]) if W.size else g[:, None]
            sol = _cho_solve(cf, rhs)
            if sol is None:
                return None
            Qg = sol[:, 0]
            if W.size:
                G = sol[:, 1:]
                AWF = A[np.ix_(W, F)]
                bW = np.array([row_lo[i] if rows[i] >= 0 else row_hi[i] for i in W])
                bW = bW - (A[np.ix_(W, C)] @ xs[C] if C.size else 0.0)
                got = _working_rows(Q[np.ix_(F, F)], cf, G, Qg, AWF, bW, g)
                if got is None:
                    return None
                xs[F], keep, y[W[keep]] = got
            else:
                xs[F] = -Qg
        elif W.size:
            return None  # every column fixed and rows in the working set: nothing to solve for
        return _eqp_point_duals(Q, c, A, xs, y, C, n)

    def _eqp_operator(self, op, c, row_lo, row_hi, lb, ub, x, rows, cols, cache):
        """:meth:`_eqp` with ``Q`` an operator: the fixed columns are equality rows ``e_j' x = x_j`` like the held
        rows, ``N = [A_W; E_C']``, and with ``Y = Q^{-1} N'`` (one solve per constraint, cached while it stays in the
        working set during this QP) and ``q = Q^{-1} c``::

            (N Y) lam = b_N + N q,   x = Y lam - q,   (y_W, z_C) = lam,

        stationarity ``Q x + c = N' lam = A_W' y_W + z_C``. ``N Y`` is Jacobi-scaled before its Cholesky factorization
        (rows and columns of very different norms); None when it is singular (dependent constraints)."""
        n, A = self.n, self.A
        W = sorted(rows)
        C = sorted(cols)
        if hasattr(op, "inner"):
            return self._eqp_inner(op, c, row_lo, row_hi, lb, ub, x, rows, cols, W, C, cache)
        keys = [("r", i) for i in W] + [("c", j) for j in C]
        need = [k for k in [("q", 0)] + keys if k not in cache]
        if need:
            M = np.zeros((n, len(need)))
            for col, (kind, k) in enumerate(need):
                if kind == "q":
                    M[:, col] = c
                elif kind == "r":
                    M[:, col] = A[k]
                else:
                    M[k, col] = 1.0
            Y = op.solve(M)
            if not np.all(np.isfinite(Y)):
                return None
            for col, key in enumerate(need):
                cache[key] = Y[:, col]
        q = cache[("q", 0)]
        y, z = np.zeros(self.m), np.zeros(n)
        if not keys:
            return -q, y, z
        Wi, Ci = np.array(W, dtype=np.int64), np.array(C, dtype=np.int64)
        Yk = np.column_stack([cache[k] for k in keys])

        def N(V):
            return np.vstack([A[Wi] @ V, V[Ci]]) if V.ndim == 2 else np.concatenate([A[Wi] @ V, V[Ci]])
        fixed = np.array([lb[j] if cols[j] >= 0 else ub[j] for j in C])
        bN = np.concatenate([[row_lo[i] if rows[i] >= 0 else row_hi[i] for i in W], fixed])
        S = N(Yk)
        S = 0.5 * (S + S.T)
        dS = S.diagonal()
        if not np.all(dS > 0):
            return None
        sc = 1.0 / np.sqrt(dS)
        cs = _chol(S * sc[:, None] * sc[None, :], 1e-14)
        if cs is None:
            return None
        lam = _cho_solve(cs, sc * (bN + N(q)))
        if lam is None:
            return None
        lam = lam * sc
        return _eqp_point(Yk @ lam - q, lam, Wi, Ci, fixed, y, z)

    def _eqp_inner(self, op, c, row_lo, row_hi, lb, ub, x, rows, cols, W, C, cache):
        """:meth:`_eqp_operator` for an operator that gives ``N Q^{-1} N'`` itself (``op.inner(N')``, e.g. in the row
        space of a Woodbury form): ``q = Q^{-1} c`` once per QP, then per working set the Schur complement and one
        solve ``x = Q^{-1}(N' lam) - q`` instead of one solve per constraint."""
        n, A = self.n, self.A
        if "q" not in cache:
            cache["q"] = op.solve(c)
            if not np.all(np.isfinite(cache["q"])):
                return None
        q = cache["q"]
        y, z = np.zeros(self.m), np.zeros(n)
        if not W and not C:
            return -q, y, z
        Wi, Ci = np.array(W, dtype=np.int64), np.array(C, dtype=np.int64)
        N = np.zeros((Wi.size + Ci.size, n))
        N[:Wi.size] = A[Wi]
        N[Wi.size + np.arange(Ci.size), Ci] = 1.0
        fixed = np.array([lb[j] if cols[j] >= 0 else ub[j] for j in C])
        bN = np.concatenate([[row_lo[i] if rows[i] >= 0 else row_hi[i] for i in W], fixed])
        S = op.inner(N.T)
        dS = S.diagonal()
        if not np.all(dS > 0) or not np.all(np.isfinite(S)):
            return None
        sc = 1.0 / np.sqrt(dS)
        cs = _chol(S * sc[:, None] * sc[None, :], 1e-14)
        if cs is None:
            return None
        lam = _cho_solve(cs, sc * (bN + N @ q))
        if lam is None:
            return None
        lam = lam * sc
        return _eqp_point(op.solve(N.T @ lam) - q, lam, Wi, Ci, fixed, y, z)

    def _ratio(self, p, x, row_lo, row_hi, lb, ub, rows, cols):
        """Step length ``alpha = min(1, ...)`` along ``p`` and the blocking constraint (None when 1)."""
        alpha, block = 1.0, None
        Ap, Ax = self.A @ p, self.A @ x
        for v, dv, lo, hi, held, kind in ((Ax, Ap, row_lo, row_hi, rows, "r"), (x, p, lb, ub, cols, "c")):
            # a move along the normal at rounding level never blocks: the full step changes the side's value by at
            # most 1e-12 relative, and blocking on it re-adds a row just released at alpha = 0 (cycling on
            # duplicated rows, whose multipliers move between the twins)
            mask = np.abs(dv) > 1e-12 * np.maximum(1.0, np.abs(v))
            if held:
                mask[list(held)] = False
            with np.errstate(divide="ignore", invalid="ignore"):
                tlo = np.where(mask & (dv < 0) & np.isfinite(lo), (lo - v) / dv, np.inf)
                thi = np.where(mask & (dv > 0) & np.isfinite(hi), (hi - v) / dv, np.inf)
            for t, s in ((tlo, 1), (thi, -1)):
                k = int(np.argmin(t)) if t.size else -1
                if k >= 0 and t[k] < alpha:
                    alpha, block = max(float(t[k]), 0.0), (kind, k, s)
        return alpha, block

    def _certify(self, qmul, c, row_lo, row_hi, lb, ub, x, y, z, rows, cols, it):
        """The QP layer's certificate: accept only a KKT residual <= _KKT_ACCEPT * scale (``qmul(v) = Q v``;
        the residual of ``Q x + c`` is that of the linear objective ``(Q x + c)' v`` at ``x``)."""
        Qx = qmul(x)
        res = LPResult("optimal", x=x, objective=0.5 * float(x @ Qx) + float(c @ x), row_duals=y,
                       col_duals=z, row_activity=self.A @ x, iterations=it)
        kkt = kkt_residual(res, Qx + c, self.A, row_lo, row_hi, lb, ub)
        Ay = self.A.T @ y
        scale = 1.0 + max(float(np.abs(c).max(initial=0.0)), float(np.abs(Qx).max(initial=0.0)),
                          float(np.abs(Ay).max(initial=0.0)))
        if not kkt <= _KKT_ACCEPT * scale:
            return None
        self.rows = {i: s for i, s in rows.items() if s}
        self.cols = {j: s for j, s in cols.items() if s}
        res.info = {"kkt": kkt, "method": "active-set", "working_set": len(rows) + len(cols), "Qx": Qx}
        return res
