"""The constrained step QP of Algorithm 2 (Jebara & Choromanska 2012, step 3) across iterations.

In ``D = theta - theta~`` the step QP is ``min u'D + 1/2 D'QD`` over ``lo - A theta~ <= A D <= hi - A theta~``,
``lb - theta~ <= D <= ub - theta~``: the constraint matrix never changes and ``Q`` (the bound's
curvature plus ``H``) changes smoothly, so the active set of one iteration is usually the next one's.
:class:`StepQP` first tries the warm-started primal active-set method of
:mod:`varopt.lpqp.active_set` (closed-form KKT solves by Cholesky; its answer is accepted only with
the KKT certificate of the QP layer) and only when that does not apply or does not converge falls back
to the general QP layer (HiGHS with its own verification, polish and fallbacks; its answer is not
checked a second time). ``D = 0`` is feasible at every iterate, so the fast path always has a
feasible start; infeasible constraint sets are found before the first step (the start projection). With many rows
in few columns (more than ``MAX_DENSE_ROWS`` rows, at most ``DUAL_MAX_COLS`` columns) the dual active set of
:mod:`varopt.lpqp.dual_active_set` (Goldfarb & Idnani 1983) comes first: it needs no feasible start, so the last
working set is its start wherever the iterate moved, and it adds rows by violation instead of one blocking row per
iteration from ``D = 0``.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...lpqp import active_set  # (its functions looked up at the call: tests wrap them)
from ...lpqp import dual_active_set
from ...lpqp.qp_ladder import cold_prefers_clarabel

#: the fast path keeps a dense copy of the constraint rows when they are this few
MAX_DENSE_ROWS = 200
#: ... and for the feasibility tests of trials when they have at most this many entries
DENSE_ENTRIES = 200_000
#: the ratio test of a trial on Python floats up to this many finite sides (:meth:`StepQP.max_factor`)
FEW_SIDES = 32
#: more rows than MAX_DENSE_ROWS in at most this many columns: the step QP by the dual active set
#: (:mod:`varopt.lpqp.dual_active_set`; ``Q`` factored once per step, ``n x n`` working-set matrices) ...
DUAL_MAX_COLS = 400
#: ... when the dense copy of the rows holds at most this many entries
DUAL_ENTRIES = 2 ** 22
#: after this many step QPs in a row that the dual active set declined it is not tried again in the solve (each
#: decline can cost its whole iteration budget before the fallbacks run)
DUAL_DECLINED_MAX = 2
#: the dual active set's step QP holds its rows this far (relative to ``max(1, |side|, |a||theta|)``) inside their
#: sides, and every other row within half of it: the new iterate satisfies the rows strictly, not within rounding
#: (outside by 1e-13, the secant trials' ratio test blocked every extrapolation along rows the step keeps active)
ROW_MARGIN = 1e-12


class StepQP:
    """The step QPs of one solve: the active-set state and counts of each path (``stats``)."""

    def __init__(self, model, lpqp):
        self.model, self.lpqp = model, lpqp
        m = model.A.shape[0]
        self._fast = None  # the active-set solver, built by the first step QP (most small solves take none: trials)
        # many rows in few columns: the dual active set first (the primal one adds a blocking row per iteration from
        # D = 0, and the QP layer pays an interior point or HiGHS's active set per step)
        self._many_rows = m > MAX_DENSE_ROWS and model.n <= DUAL_MAX_COLS and m * model.n <= DUAL_ENTRIES
        self._abs_A = self._side_scale = None   # |A| and the sides' scale of the rows' margin, on first use
        self._dual_declined = 0   # the dual active set's declines in a row (DUAL_DECLINED_MAX: not tried again)
        self.stats = {"active_set": 0, "fallback": 0}
        self._y_rows = None   # the rows' multipliers of the last .step_rows answer (its warm start)
        # A z for the feasibility tests of every trial: a dense copy of a few rows multiplies without scipy's
        # per-call overhead (about 8 us, several times per iteration of a small problem)
        self._A = model.A.toarray() if m <= MAX_DENSE_ROWS and m * model.n <= DENSE_ENTRIES else model.A
        # the rows' tolerances of feasible() (1e-9 relative, the start's), once
        with np.errstate(invalid="ignore"):
            self._lo_tol = model.lo - 1e-9 * np.maximum(1.0, np.abs(model.lo))
            self._hi_tol = model.hi + 1e-9 * np.maximum(1.0, np.abs(model.hi))
        # the ratio test of max_factor over the bounds and the rows at once without dense sides: their sides
        # stacked, on first use
        self._lo_all = self._hi_all = None
        self._sides = _finite_sides(model, self._A, self._lo_tol, self._hi_tol) if not sp.issparse(self._A) else None
        self._few_sides = self._sides is not None and self._sides[1].size <= FEW_SIDES
        self._g_list = self._sides[1].tolist() if self._few_sides else None
        self._last_Gz = (None, None)

    @property
    def fast(self):
        """The warm-started active-set solver of :mod:`varopt.lpqp.active_set` (None with more than
        ``MAX_DENSE_ROWS`` rows, unless they are few columns' many rows), built on first use."""
        if self._fast is None and (self.model.A.shape[0] <= MAX_DENSE_ROWS or self._many_rows):
            A = self._A if isinstance(self._A, np.ndarray) else self.model.A
            self._fast = active_set.ActiveSetQP(A)
        return self._fast

    def _shifted(self, x):
        """The constraints in ``D = theta - theta~``: ``(rlo, rhi, blo, bhi)``."""
        model = self.model
        Ax = model.A @ x if model.A.shape[0] else np.zeros(0)
        return model.lo - Ax, model.hi - Ax, model.lb - x, model.ub - x

    def solve_operator(self, x, u, op):
        """The step QP with ``Q`` a factored operator (:mod:`.step_operator`: ``op.solve``, ``op.matvec``): the
        active set on a Schur complement of its working set, ``Q`` never formed; when that does not answer, the
        dense path of :meth:`solve` on ``op.dense()``."""
        res = None
        if self.fast is not None:
            res = self.fast.solve_operator(op, u, *self._shifted(x), np.zeros(self.model.n))
        if res is None:
            self.stats["operator_declined"] = self.stats.get("operator_declined", 0) + 1
            return self.solve(x, u, op.dense())
        self.stats["active_set"] += 1
        self.stats["operator"] = self.stats.get("operator", 0) + 1
        self.model.working_set_hint = len(self.fast.cols)   # the step solver's cost model (.structured)
        return self._finish(x, u, res, op.matvec)

    def solve_bounds(self, x, u, make_op, matvec):
        """The step QP when the only constraints are bounds and ``Q`` is a row-space operator: projected Newton
        (:mod:`.step_bounds`; ``make_op(fixed)`` the operator with the ``fixed`` variables eliminated); None when it
        does not converge (the caller then takes :meth:`solve_operator`)."""
        from .step_bounds import projected_newton
        model = self.model
        got = projected_newton(make_op, matvec, u, model.lb - x, model.ub - x)
        if got is None:
            self.stats["projected_newton_declined"] = self.stats.get("projected_newton_declined", 0) + 1
            return None
        D, q, its = got
        self.stats["projected_newton"] = self.stats.get("projected_newton", 0) + 1
        self.stats["projected_newton_iterations"] = self.stats.get("projected_newton_iterations", 0) + its
        step = np.clip(x + D, model.lb, model.ub) - x
        if np.array_equal(step, D):
            return step, q, {}, None
        return step, float(u @ step + 0.5 * step @ matvec(step)), {}, None

    def solve_rows(self, x, u, make_op, matvec):
        """The step QP with bounds and at most :data:`.step_rows.MAX_ROWS` rows when ``Q`` is a row-space operator:
        projected Newton on the box inside a Newton method on the rows' multipliers (:mod:`.step_rows`, warm-started
        from the last multipliers); None when that is not certified (the caller then takes :meth:`solve_operator`)."""
        from ...lpqp.result import LPResult
        from .step_rows import bounds_and_rows
        model = self.model
        rlo, rhi, blo, bhi = self._shifted(x)
        got = bounds_and_rows(make_op, matvec, u, self._A, rlo, rhi, blo, bhi, y0=self._y_rows)
        if got is None:
            self.stats["rows_newton_declined"] = self.stats.get("rows_newton_declined", 0) + 1
            return None
        D, q, y, st = got
        self._y_rows = y
        self.stats["operator"] = self.stats.get("operator", 0) + 1   # answered on the factored operator
        for k, key in (("rows_newton", None), ("rows_newton_outer", "outer"), ("rows_newton_box_iterations",
                                                                                 "box_iterations")):
            self.stats[k] = self.stats.get(k, 0) + (1 if key is None else st[key])
        if self.fast is not None:   # a later declined answer starts the active set from this one's working set
            g = u + matvec(D) + self._A.T @ y
            z = np.where((D <= blo) | (D >= bhi), g, 0.0)
            self.fast.seed(LPResult("optimal", x=D, row_duals=-y, col_duals=z), rlo, rhi, blo, bhi)
            model.working_set_hint = len(self.fast.cols)
        step = np.clip(x + D, model.lb, model.ub) - x
        if np.array_equal(step, D):
            return step, q, {}, None
        return step, float(u @ step + 0.5 * step @ matvec(step)), {}, None

    def solve(self, x, u, Q):
        """``(D, m(D), info, None)``, or ``(None, None, status, None)`` when the QP has no solution."""
        model = self.model
        m = model.A.shape[0]
        rlo, rhi, blo, bhi = self._shifted(x)
        res = None
        if self.fast is not None and not sp.issparse(Q):
            factor = None
            if self._many_rows and self._dual_declined < DUAL_DECLINED_MAX:
                factor = active_set._chol(Q, active_set.Q_EPS)   # None: Q is not (numerically) positive definite
                if factor is not None:
                    margin = self._row_margin(x)
                    eq = rlo == rhi
                    res = dual_active_set.solve_dual(self.fast, Q, u, np.where(eq, rlo, rlo + margin),
                                                     np.where(eq, rhi, rhi - margin), blo, bhi, factor=factor,
                                                     row_tol=0.5 * margin)
                key = "dual" if res is not None else "dual_declined"
                self.stats[key] = self.stats.get(key, 0) + 1
                self._dual_declined = 0 if res is not None else self._dual_declined + 1
            if res is None:
                x0, factor = self._cold_start(Q, u, rlo, rhi, blo, bhi, factor)
                if not self._cold_at_zero(x0, rlo, rhi, blo, bhi):
                    res = self.fast.solve(Q, u, rlo, rhi, blo, bhi, x0, factor=factor)
        if res is not None:
            self.stats["active_set"] += 1
            self.stats["active_set_iterations"] = self.stats.get("active_set_iterations", 0) + res.iterations
            self.model.working_set_hint = len(self.fast.cols)   # the step solver's cost model (.structured)
        else:
            self.stats["fallback"] += 1
            Qs = sp.csr_matrix(0.5 * (Q + Q.T))
            res = self.lpqp.solve_lp(u, A=model.A if m else None, row_lo=rlo if m else None,
                                     row_hi=rhi if m else None, lb=blo, ub=bhi, Q=Qs)
            if res.status != "optimal":
                return None, None, res.status if res.status in ("infeasible", "unbounded") else "error", None
            if self.fast is not None:     # the next step QP warm-starts from this answer's active set
                self.fast.seed(res, rlo, rhi, blo, bhi)
                self.model.working_set_hint = len(self.fast.cols)
        return self._finish(x, u, res, lambda v: Q @ v)

    def _row_margin(self, x):
        """:data:`ROW_MARGIN` of each row in the step QP's units: relative to its largest finite side, to one and to
        the rounding of ``A theta`` (``|A| |theta|``)."""
        model = self.model
        if self._abs_A is None:
            self._abs_A = np.abs(self.fast.A)
            with np.errstate(invalid="ignore"):
                self._side_scale = np.maximum(1.0, np.maximum(np.where(np.isfinite(model.lo), np.abs(model.lo), 0.0),
                                                              np.where(np.isfinite(model.hi), np.abs(model.hi), 0.0)))
        return ROW_MARGIN * np.maximum(self._side_scale, self._abs_A @ np.abs(x))

    def _cold_at_zero(self, x0, rlo, rhi, blo, bhi):
        """Whether the fast path would start at ``D = 0`` with no inequality in its working set on a QP the QP layer
        answers faster cold (:func:`varopt.lpqp.qp_ladder.cold_prefers_clarabel`): it adds one blocking constraint
        per iteration, each a dense factorization (a projection onto the simplex in 2,000 columns: 60 of them, 5 s,
        then declined; Clarabel 0.03 s). The layer's answer seeds the working set of the next step QPs."""
        fast = self.fast
        if fast.rows or fast.cols or np.any(x0):
            return False
        if not (np.isfinite(blo).any() or np.isfinite(bhi).any() or np.any(rlo < rhi)):
            return False    # equalities only: one factorization answers it
        return cold_prefers_clarabel(self.model.n, self._A, rlo, rhi)

    def _cold_start(self, Q, u, rlo, rhi, blo, bhi, cf=None):
        """The fast path's start: ``D = 0`` (feasible at every iterate), or, when no working set is carried over (the
        first step QP, or after a rejected answer), the unconstrained step clipped to the bounds with the clipped
        bounds as the working set, if that point satisfies the rows. A cold start at ``D = 0`` adds one blocking bound
        per active-set iteration (each a factorization); the clipped step usually holds most of the final working
        set, so a few multipliers of the wrong sign are released instead. Any start is feasible, and the answer is
        accepted only with the KKT certificate, so the start changes the cost, not the answer.

        Returns ``(x0, factor)``: ``factor`` the Cholesky factor of ``Q`` (``cf`` when the caller has it, else computed
        here when needed), handed to the fast path (its first system when no bound is clipped), or None."""
        fast, n = self.fast, self.model.n
        zero = np.zeros(n)
        if fast.rows or fast.cols or not (np.isfinite(blo).any() or np.isfinite(bhi).any()):
            return zero, cf
        cf = active_set._chol(Q, active_set.Q_EPS) if cf is None else cf
        if cf is None:
            return zero, None
        free = active_set._cho_solve(cf, -u)
        if free is None or not np.all(np.isfinite(free)):
            return zero, cf
        x = np.clip(free, blo, bhi)
        if self.model.A.shape[0]:
            Ax = self.model.A @ x
            tol = 1e-9 * np.maximum(1.0, np.abs(Ax))
            if np.any(Ax < rlo - tol) or np.any(Ax > rhi + tol):
                return zero, cf
        fast.cols = {int(j): 1 for j in np.flatnonzero(free < blo)}
        fast.cols.update({int(j): -1 for j in np.flatnonzero(free > bhi)})
        return x, cf

    def _finish(self, x, u, res, qmul):
        model = self.model
        raw = np.asarray(res.x, dtype=float)
        # keep theta inside the box despite QP tolerances
        step = np.clip(x + raw, model.lb, model.ub) - x
        info = res.info or {}
        if info.get("method") == "active-set":
            # m(D) from the certificate's Q D (no second product): the clip moves D by rounding only, to first
            # order m(D + d) = m(D) + (u + Q D)^T d (the second-order term ~ |d|^2 ||Q|| is below any tolerance)
            d = step - raw
            if not d.any():
                return step, float(res.objective), {}, None
            if float(np.abs(d).max()) <= 1e-12 * max(1.0, float(np.abs(raw).max())):
                return step, float(res.objective) + float((u + info["Qx"]) @ d), {}, None
        return step, float(u @ step + 0.5 * step @ qmul(step)), {}, None

    # --- feasibility of extrapolation trials (loop.py): a trial outside Lambda is never evaluated -------------
    def feasible(self, z):
        """``z`` in the box exactly and in the rows within ``1e-9`` relative (the start's tolerance)."""
        if self._sides is not None:  # every finite side as ``G z >= g``: one product (NaN or inf in z fail it)
            G, _, g_tol = self._sides
            Gz = G @ z
            self._last_Gz = (z, Gz)  # the ratio test at z, when z becomes the iterate (:meth:`max_factor`)
            return bool((Gz >= g_tol).all())
        model = self.model
        if not ((z >= model.lb).all() and (z <= model.ub).all()):
            return False
        if not model.A.shape[0]:
            return True
        Az = self._A @ z
        return bool((Az >= self._lo_tol).all() and (Az <= self._hi_tol).all())

    def max_factor(self, x, step):
        """The largest ``a`` with ``x + a step`` in Lambda (ratio test; constraints ``step`` does not move
        are ignored). An infinite side gives the ratio ``+inf`` by itself (``(-inf - v) / dv`` with ``dv < 0``)."""
        if self._sides is not None:
            # the finite sides only, as ``G z >= g``: a side the step moves towards has ``G step < 0``; bound sides
            # are exact (rows of +-I), so their ratios are the bitwise ones of the general path below
            G, g, _ = self._sides
            gd = G @ step
            if self._few_sides:
                # few sides: the ratios on Python floats, with ``G x`` from the feasibility test that accepted ``x``
                # (:meth:`feasible`; a bound side's entry is +-x_j exactly, a row's rounds as in that product)
                gl = gd.tolist()
                a = np.inf
                Gx = None
                for i, d in enumerate(gl):
                    if d < 0.0:
                        if Gx is None:
                            last = self._last_Gz
                            Gx = (last[1] if last[0] is x else G @ x).tolist()
                        r = (self._g_list[i] - Gx[i]) / d
                        if r < a:
                            a = r
                return a if Gx is None else max(a, 0.0)
            down = gd < 0
            if not down.any():
                return np.inf
            return max(float(((g[down] - G[down] @ x) / gd[down]).min()), 0.0)
        v, dv = x, step
        model = self.model
        if model.A.shape[0]:  # the bounds and the rows in one pass (few small arrays: the calls dominate)
            v, dv = np.concatenate((x, self._A @ x)), np.concatenate((step, self._A @ step))
        if self._lo_all is None:
            m = model.A.shape[0]
            self._lo_all = np.concatenate((model.lb, model.lo)) if m else model.lb
            self._hi_all = np.concatenate((model.ub, model.hi)) if m else model.ub
        lo, hi = self._lo_all, self._hi_all
        a = np.inf
        down, up = dv < 0, dv > 0
        if down.any():
            a = min(a, float(((lo[down] - v[down]) / dv[down]).min()))
        if up.any():
            a = min(a, float(((hi[up] - v[up]) / dv[up]).min()))
        return max(a, 0.0)


def _finite_sides(model, A, lo_tol, hi_tol):
    """``(G, g, g_tol)``: every finite side of the bounds and the (dense) rows ``A`` as ``G z >= g`` -- rows
    ``+e_j`` (``lb_j``), ``-e_j`` (``-ub_j``), ``+a_i`` (``lo_i``), ``-a_i`` (``-hi_i``), in that order -- and the
    sides of :meth:`StepQP.feasible` (exact on the bounds, ``1e-9`` relative on the rows). The ratio test and the
    feasibility test of a trial are then one dense product each, instead of masks over every variable (most have no
    bound) and a dozen small numpy calls; None when the dense ``G`` would hold more than ``DENSE_ENTRIES`` entries.
    ``lo_tol``, ``hi_tol``: the rows' sides of the feasibility test."""
    n, m = model.n, A.shape[0]
    sides = np.concatenate((model.lb, -model.ub, model.lo, -model.hi))
    fin = np.flatnonzero(np.isfinite(sides))
    k = fin.size
    if k * n > DENSE_ENTRIES:
        return None
    G = np.zeros((k, n))
    nb = int(np.searchsorted(fin, 2 * n))  # the bound sides come first
    jb = fin[:nb]
    G[np.arange(nb), jb % n] = np.where(jb < n, 1.0, -1.0)
    if nb < k:
        r = fin[nb:] - 2 * n
        G[nb:] = A[r % m] * np.where(r < m, 1.0, -1.0)[:, None]  # (a sign change is exact)
    g_tol = np.concatenate((model.lb, -model.ub, lo_tol, -hi_tol))[fin]
    return G, sides[fin], g_tol

