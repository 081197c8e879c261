"""Quasi-Newton steps on a reused, scaled bound, with Algorithm 2's step as fallback (option ``bound_reuse``).

Beyond the paper. Algorithm 2 (Jebara & Choromanska 2012) computes a fresh bound ``Sigma`` at every
iterate and steps ``D = -(H + Sigma + rho I)^{-1} u``; ``f(x + D) <= f(x) + m(D) < f(x)`` by
Theorem 1. For a chain CRF the junction-tree ``Sigma`` (Algorithm 3) costs about forty
value-and-gradient evaluations and over-estimates the Hessian several times, so the steps are short
and expensive. With ``bound_reuse = k >= 1`` each iteration first tries the step of the model

    q(D) = u^T D + 1/2 D^T B D,    B = L-BFGS update of  B_0 = c P,   P = H + Sigma_ref + rho I,

``Sigma_ref`` the last computed bound (at most ``k`` moves old, ``P`` is the matrix of Algorithm 2's
step on it), ``0 < c <= 1`` the scale ``c = y^T P^{-1} y / s^T y`` of the latest step ``s`` and
gradient change ``y`` (``C0`` before the first step), and the L-BFGS pairs of the last ``reuse_pairs``
moves (two-loop recursion, Nocedal & Wright 2006 Alg. 7.4, with ``B_0^{-1} = P^{-1} / c`` from one
Cholesky factor per bound). The scale is the bound's analogue of L-BFGS's ``gamma = s^T y / y^T y``:
with the mean Hessian ``A`` along the step (``y = A s``) it is the ``P^{-1}``-weighted mean of ``A``
relative to ``P`` and, by Cauchy-Schwarz, at least the Rayleigh ratio ``s^T y / s^T P s`` -- the
conservative one of the two secant estimates (the Rayleigh ratio along the last, often flat, step gave
steps too long elsewhere and many rejections). ``P`` dominates the Hessian (Theorem 1), so ``c <= 1``
up to the variation of the Hessian since the bound was computed; it is clipped to ``[C_MIN, 1]``. The trial ``x + D`` is accepted only when the exact objective decreases
by a fixed fraction of what the *bound step* on ``Sigma_ref`` guarantees,

    f(x) - f(x + D) >= ETA * 1/2 u^T (H + Sigma_ref + rho I)^{-1} u,                        (*)

With ``reuse_metric='scalar'`` the initial matrix is L-BFGS's own, ``B_0 = (y^T y / s^T y) I`` (``c P``
until the first pair): the bound then serves only the test (*) and the fallback. Measured on the
chain CRF (docs/majorize.md section 6) the junction-tree ``P`` is a *worse* initial matrix than the
scalar one (its over-count across separator states is far from uniform), so the CRF uses
``'scalar'``. ``'line'`` (compiled programs; chosen by ``'auto'`` when the matrix would cost more than one or two
line iterations, :mod:`.line_metric`) uses L-BFGS's initial matrix too, with ``P = L I`` at the current iterate (the
Hessian's, then the bound's curvature along the gradient) for the test (*), and Algorithm 2's step restricted
to the gradient's line as the fallback: no matrix is formed. With ``'scalar'``, a positive definite ``H`` and an oracle that gives ``u^T Sigma u`` without forming
``Sigma`` (``curvature_along``, the chain CRF's projected junction tree), ``P`` is the *line reference*
:class:`.reuse_metric.LineMetric` ``L I``, ``L = u^T (H + Sigma + rho I) u / u^T u`` at the reference point (the bound
restricted to the gradient's line; ``L <= lambda_max(P)``, so the argument below holds), and a dense ``Sigma`` is
formed only for a fallback step. If (*) fails, the iteration takes Algorithm 2's bound step from a *fresh* ``Sigma`` at ``x`` (always a
decrease, checked against its majorizer as before) and ``c`` is doubled. Every iterate has a lower
objective than the previous one. Convergence: every iteration decreases ``f`` by at least
``ETA/2 u^T (H + Sigma' + rho I)^{-1} u >= ETA/2 ||u||^2 / (||H|| + ||Sigma'|| + rho)`` for a bound
``Sigma'`` computed at an earlier iterate (a rejected trial is followed by the bound step itself,
which gives ``1/2 u^T (H + Sigma + rho I)^{-1} u``); the bounds are bounded on the level set, so for
``f`` bounded below ``sum ||u_k||^2 < inf`` and ``u_k -> 0`` as in Algorithm 2.

Compiled programs (:class:`.model.MajorizeModel`, docs/majorize.md section 2): ``P`` is the reference metric
of :mod:`.reuse_metric` (the dense bound matrix, or the Kronecker approximation ``Pbar`` of the CG step, for
which (*) uses that matrix: the argument above needs only eigenvalues bounded on the level set). An exact
metric of age 0 is never used for a trial (the model's extrapolated bound step is better). The *first* metric
is the objective's Hessian at the start (dense: :meth:`.groups.PaddedGroups.factors` with ``hessian=True``; on the
CG path its Kronecker approximation :class:`.structured.KronHessian`), tried at once with ``c = 1`` -- a Newton
step, accepted by the same test (*) with that matrix; its eigenvalues lie between those of ``H`` and of the
bound, so the argument above holds; the first rejection brings the bound back (docs/majorize.md section 2).
With constraints the trial lives on the free set of
:func:`free_set` (variables at a bound with an outward gradient stay fixed), uses ``P_FF`` and the pairs
restricted to it, and is capped at the largest feasible factor. A trial cut short by a linear row held at the
iterate is taken on the null space of the held rows instead (:mod:`.reuse_rows`: the equality QP with the held rows,
wrong-signed multipliers released; docs/majorize.md section 2b).
"""
from __future__ import annotations

import math

import numpy as np
from ...core.backend import missing_numba
from ...errors import InputDataError
from .line_metric import line_curvature
from .reuse_metric import DenseMetric, LineMetric
from .reuse_rows import held_rows, max_factor_off, null_space_direction

#: fraction (*) of the bound step's guaranteed decrease that an accepted trial must achieve
ETA = 1e-2
#: the first scale (the chain CRF's junction-tree bound over-estimates the Hessian several times)
C0 = 0.5
#: smallest scale (keeps B_0 within a factor 1000 of the bound's matrix)
C_MIN = 1e-3
#: shortened trials (quadratic interpolation) before the bound-step fallback
BACKTRACK = 2
#: relative part of u outside the range of H + Sigma_ref + rho I that sends the iteration to the bound step
FLAT = 1e-6
#: L-BFGS pairs kept by default (option ``reuse_pairs``; scipy L-BFGS-B's ``maxcor``)
PAIRS = 10
#: with constraints: a trial whose largest feasible factor is below this is not evaluated
MIN_FEASIBLE = 1e-3
#: with linear rows: a trial blocked by a held row is taken on the null space of the held rows (.reuse_rows)
ROW_TRIALS = True
#: ... skipped for 2^k - 1 chances after k failures in a row (refused, or cut to nothing by the bounds), k <= this
ROW_BACKOFF = 4


#: stand-ins for the kernels' pair ring and sides when there are none (typed as the real ones)
_NO_RING = (np.empty((1, 0)), np.empty((1, 0)), np.empty(1), 0)
_NO_SIDES = (np.empty((0, 0)), np.empty(0), np.empty(0))
_NO_BOUNDS = (np.empty(0), np.empty(0), np.empty(0), np.empty(0))
_KERNELS = []  # the kernel module, imported once (an import statement costs 1-3 us per solve)


def trial_kernels(backend):
    """The compiled trial kernels (:mod:`.compiled_trial`) under option ``backend``, or None (the numpy path):
    ``'numba'`` requires numba, ``'auto'`` uses it when installed."""
    if backend == "numpy":
        return None
    if not _KERNELS:
        try:
            from . import compiled_trial
        except ImportError:
            compiled_trial = None
        _KERNELS.append(compiled_trial)
    if _KERNELS[0] is None and backend == "numba":
        raise missing_numba()
    return _KERNELS[0]


class ScaledCurvature:
    """State of the reused, scaled bound of one run (see the module docstring).

    ``age`` counts the moves since ``Sigma_ref`` was computed (0: it is the bound at the current iterate).
    Bound oracles keep ``Sigma_ref`` itself (their fallback step reuses it); compiled programs keep the
    reference metric of :meth:`.model.MajorizeModel.reuse_metric` (:mod:`.reuse_metric`)."""

    def __init__(self, reuse: int, metric: str = "bound", memory: int = PAIRS, kernels=None):
        self.reuse, self.metric, self.memory = int(reuse), metric, int(memory)
        # the compiled trial on a dense metric (:mod:`.compiled_trial`, option ``backend``), or None: the numpy path
        self.kernels = kernels if metric == "bound" else None
        self._ring = None  # (S, Y, rho, head) of the pairs for the kernels, allocated by the first pair
        # the kernels' free set: its mask, and (metric, its P_FF metric, F's indices) it was factored for
        self._all_idx, self._cF, self._csub = np.arange(0), None, None
        self.gamma = None
        self.c = C0
        self.sigma = None  # Sigma_ref (bound oracles)
        self.ref = None  # the metric P = H + Sigma_ref + rho I (DenseMetric / KronMetric), built lazily
        self.age = 0
        self.pairs = []  # (s, y, 1 / s^T y), most recent first
        self._free_key, self._free_pairs = None, {}  # the pairs restricted to the last free set (by id of s)
        self._bound_tol = None  # (model, free_set's bound tolerances)
        # the free set by the held variables (:func:`held_variables`, few bounded variables): their sides, and the
        # last held set with its mask F and P_FF (:meth:`_free_mask`)
        self._held_sides, self._held, self._held_F, self._held_sub = None, None, None, (None, None)
        self._rows_for = None  # (model, whether its trials may use the held rows' null space: :meth:`_has_rows`)
        # trials on the held rows' null space: failures in a row, chances still to skip, the last one refused
        self._row_fails, self._row_wait, self._row_refused = 0, 0, False
        self.stats = {"trials": 0, "accepted": 0, "backtracks": 0, "rejected": 0, "bounds": 0}

    def sigma_here(self, model, x):
        """The bound at the current iterate ``x`` (computed unless ``Sigma_ref`` already is; bound oracles)."""
        if self.sigma is None or self.age > 0:
            self.sigma, self.age = model.sigma_at(x), 0
            self.ref = None
            self.stats["bounds"] += 1
        return self.sigma

    def refresh(self, model, x, S, opts):
        """``Sigma_ref`` := the bound at ``x`` (compiled programs, after a bound step at ``x``: its matrix or
        operator is reused)."""
        self.ref, self.age = model.reuse_metric(x, S, opts), 0
        self.stats["bounds"] += 1

    def line_refresh(self, L):
        """The line metric := the bound's ``L`` of the line bound step just taken (``reuse_metric='line'``)."""
        self.stats["bounds"] += 1
        if L is not None:
            self.ref, self.age = LineMetric(L), 0

    def _reference(self, model, x, u, S, opts):
        """The metric of this trial. Bound oracles: ``Sigma_ref`` recomputed at ``x`` after ``reuse`` moves; with
        ``reuse_metric='scalar'`` and an oracle that gives ``u^T Sigma u`` without forming ``Sigma``
        (:meth:`.bound_oracle.OracleModel.line_curvature`) the line reference :class:`.reuse_metric.LineMetric`
        at ``x`` instead (the dense bound of a fallback step is used while it is at most ``reuse`` moves old).
        Compiled programs: the current reference (:meth:`trial` takes the bound step when it is missing or
        too old)."""
        if not hasattr(model, "reuse_metric"):
            fresh = self.age >= self.reuse
            if self.metric == "scalar" and getattr(model, "curvature_along", None) is not None:
                if self.ref is None and self.sigma is not None and not fresh:
                    self.ref = DenseMetric(model.bound_matrix(self.sigma, 1.0, opts))
                elif self.ref is None or fresh:
                    L = model.line_curvature(x, u, opts)
                    if L is None:
                        return None
                    self.ref, self.sigma, self.age = LineMetric(L), None, 0
                    self.stats["bounds"] += 1
                    self.stats["line"] = self.stats.get("line", 0) + 1
            else:
                if self.sigma is None or fresh:
                    self.sigma_here(model, x)
                if self.ref is None:
                    self.ref = DenseMetric(model.bound_matrix(self.sigma, 1.0, opts))
        return self.ref if self.ref is not None and self.ref.ok else None

    def moved(self, s, y, model, opts):
        """The iterate moved by ``s`` with gradient change ``y`` (an accepted trial or a bound step)."""
        self.age += 1
        ref = self.ref
        ypy = None
        if self.kernels is not None and ref is not None and ref.ok and ref.kind == "dense":
            sy, ss, yy, ypy = self.kernels.pair_products(s, y, ref.cf)
        else:
            sy, ss, yy = float(s @ y), float(s @ s), float(y @ y)
        if not sy > 1e-12 * math.sqrt(ss * yy):
            return  # no positive curvature along s (rounding or nonconvexity): no pair
        self.pairs = [(s, y, 1.0 / sy)] + self.pairs[:self.memory - 1]
        if self.kernels is not None:
            ring = self._ring
            if ring is None or ring[0].shape[1] != s.size:
                ring = self._ring = [np.empty((self.memory, s.size)), np.empty((self.memory, s.size)),
                                     np.empty(self.memory), -1]
            h = ring[3] = (ring[3] + 1) % self.memory  # pair i (most recent first) is in slot (head - i) mod memory
            ring[0][h], ring[1][h], ring[2][h] = s, y, self.pairs[0][2]
        if ref is not None and ref.ok:
            # (min/max: np.clip on a scalar costs ~8 us, a tenth of a small problem's iteration)
            self.c = min(1.0, max(C_MIN, (float(y @ ref.solve(y)) if ypy is None else ypy) / sy))
        self.gamma = sy / yy

    def trial(self, model, x, u, f, opts, S=None, qp=None):
        """Try the quasi-Newton step at ``x``; ``(x_new, f_new, S_new, D, q(D), info)`` if accepted, else None.

        After ``reuse`` moves the bound is recomputed at ``x`` first. None means: take Algorithm 2's
        bound step (:meth:`sigma_here` for bound oracles, the model's own step for compiled programs).
        With constraints (``qp`` a :class:`.step_qp.StepQP`) the trial lives on the face of the active
        bounds (:func:`free_set`: the variables at a bound that the gradient pushes outward stay fixed, the
        rest is free), is shortened to the largest feasible factor, and is rejected without evaluation when
        that is below ``MIN_FEASIBLE``. A trial that crosses a linear row held at ``x`` is replaced by the trial
        on the null space of the held rows (:meth:`_row_direction`, dense metric only)."""
        if self.metric == "line" and hasattr(model, "reuse_metric"):
            # matrix-free (.line_metric): L along u at x, the Hessian's at the start, else the bound's after
            # ``reuse`` moves (a rejected trial's line bound step also sets it, :meth:`line_refresh`)
            if self.ref is None or self.age > self.reuse:
                first = self.ref is None and not self.pairs
                L = line_curvature(model, x, u, S, opts, hessian=first)
                if L is None:
                    return None
                self.ref, self.age = LineMetric(L), 0
                if first:
                    self.c = 1.0
                    self.stats["hessians"] = self.stats.get("hessians", 0) + 1
                else:
                    self.stats["line"] = self.stats.get("line", 0) + 1
        elif hasattr(model, "reuse_metric") and self.ref is None and not self.pairs:
            # the first iteration: the objective's Hessian at x (dense, or its Kronecker approximation on the CG path)
            # is no bound and its trial (a Newton step) is not Algorithm 2's step, so it is tried at once (c = 1)
            self.ref = model.reuse_metric(x, S, opts, exact=False)
            if self.ref is not None:
                self.age, self.c = 0, 1.0
                self.stats["hessians"] = self.stats.get("hessians", 0) + 1
        if hasattr(model, "reuse_metric") and (self.ref is None or self.age > self.reuse
                                               or (self.age == 0 and self.ref.exact)):
            # compiled programs: a fresh bound comes with Algorithm 2's (extrapolated) step; trials on an exact
            # metric use bounds 1..k moves old (one of age 0 would only repeat that step without its extrapolation)
            return None
        ref = self._reference(model, x, u, S, opts)
        rows = (qp is not None and self._has_rows(model) and isinstance(self.ref, DenseMetric))
        if ref is None and not rows:
            return None
        if qp is not None and (self._bound_tol is None or self._bound_tol[0] is not model):
            # free_set's tolerances on first use (:meth:`_tolerances`); few bounded variables carry their own
            self._bound_tol = (model, None)
            self._held_sides = bounded_sides(model.lb, model.ub)
            self._held = None
        got = None
        if ref is None:
            pass  # P singular (columns without curvature): only the trial on the held rows' null space
        elif self.kernels is not None and ref.kind == "dense":
            got = self._compiled_direction(model, x, u, ref, qp)
        else:
            got = self._direction(model, x, u, ref, qp)
        if rows and (got is None or got[3] < 1.0):
            # blocked by the box or a row: on the null space of the rows held at x (.reuse_rows) when one is crossed.
            # A reduced trial that is refused or cut below MIN_FEASIBLE by the bounds (rows with many active bounds:
            # ``sum(W, axis=1) == 0`` with ``abs(W) <= B``) costs a dense KKT solve for nothing: after each such
            # failure the next 2^k - 1 chances are skipped (k the failures in a row, at most ROW_BACKOFF)
            if self._row_wait > 0:
                self._row_wait -= 1
            else:
                held = self._row_direction(model, x, u, qp, None if got is None else got[0])
                if held is not None and held[3] >= MIN_FEASIBLE:
                    got, self._row_fails = held, 0
                elif held is not None or self._row_refused:
                    self._row_fails = min(self._row_fails + 1, ROW_BACKOFF)
                    self._row_wait = 2 ** self._row_fails - 1
        if got is None:
            return None
        return self._try(model, x, u, f, qp, *got)

    def _has_rows(self, model):
        """Whether trials blocked by a held row may be taken on the held rows' null space (option-free part of the
        test: ``ROW_TRIALS``, the bound metric, linear rows in the model), once per model."""
        got = self._rows_for
        if got is None or got[0] is not model:
            got = self._rows_for = (model, bool(ROW_TRIALS and self.metric == "bound" and getattr(model, "A", None)
                                                is not None and model.A.shape[0] > 0))
        return got[1]

    def _row_direction(self, model, x, u, qp, D):
        """The trial direction on the null space of the rows held at ``x`` (:mod:`.reuse_rows`) in the form of
        :meth:`_direction`, or None: no row held, ``D`` (the plain trial's direction, None when there is none)
        crosses none of them, or the reduced system is refused."""
        A = qp._A
        self._row_refused = False
        if not isinstance(A, np.ndarray):
            return None  # the rows kept sparse (more than step_qp.MAX_DENSE_ROWS or DENSE_ENTRIES): no dense KKT
        if D is not None:
            idx, side = held_rows(A, x, model.lo, model.hi)
            if not idx.size:
                return None
            ad = A[idx] @ D
            tol = 1e-12 * max(1.0, float(np.abs(D).max()))
            if not np.any(np.where(side == 0, np.abs(ad) > tol, side * ad > tol)):
                return None
        F = free_set(x, u, model.lb, model.ub, self._tolerances(model))
        got = null_space_direction(self.ref.P, self.c, self.pairs, u, A, x, model.lo, model.hi, F)
        self._row_refused = got is None
        if got is None:
            self.stats["null_space_refused"] = self.stats.get("null_space_refused", 0) + 1
            return None
        D, slope, guaranteed, held = got
        self.stats["null_space"] = self.stats.get("null_space", 0) + 1
        a = max_factor_off(A, x, D, model.lo, model.hi, model.lb, model.ub, held)
        return D, slope, guaranteed, a, {"scale": self.c, "held_rows": int(held.size)}, None

    def _direction(self, model, x, u, ref, qp):
        """The trial's direction ``D = -B^{-1} u`` on the free set: ``(D, slope u^T D, guarantee, largest feasible
        factor or None without constraints, metric info)``, or None (take the bound step)."""
        F, key = (None, None) if qp is None else self._free_mask(x, u, model)
        if F is False:
            return None  # every variable held at a bound: nothing to try
        if F is not None:
            sub = self._held_sub
            if sub[0] is not ref or sub[1] != key:
                sub = self._held_sub = (ref, key, ref.restricted(F))
            ref = sub[2]
            if ref is None:
                return None
        uf = u if F is None else u[F]
        w = ref.solve(uf)
        guaranteed = 0.5 * float(uf @ w)  # finite iff w is (u is finite): the cheap test of w
        if not math.isfinite(guaranteed) or ref.residual(w, uf) > FLAT * math.sqrt(float(uf @ uf)):
            # u leaves the range of the bound's curvature: possibly unbounded along a flat direction,
            # which the bound step's own check (docs/majorize.md section 2) decides on a fresh bound
            return None
        if F is None:
            pairs = self.pairs
        else:
            if key != self._free_key:
                self._free_key, self._free_pairs = key, {}
            pairs = _restricted_pairs(self.pairs, F, self._free_pairs)
        # two-loop recursion: r = B^{-1} u (on the free variables)
        if self.metric in ("scalar", "line") and pairs:
            sy, yy = pairs[0][0] @ pairs[0][1], pairs[0][1] @ pairs[0][1]
            gamma = self.gamma if F is None else float(sy / yy)
            r = two_loop(pairs, uf, lambda q: gamma * q)
            metric = {"gamma": gamma}
        else:
            c = self.c
            r = two_loop(pairs, uf, lambda q: ref.solve(q) / c) if pairs else w / c
            metric = {"scale": self.c}
        if F is not None:
            full = np.zeros(u.size)
            full[F] = r
            r = full
        slope = -float(u @ r)  # phi'(0) of phi(a) = f(x + a D); finite iff r is (u is finite)
        if not math.isfinite(slope):
            return None
        D = -r
        return D, slope, guaranteed, None if qp is None else qp.max_factor(x, D), metric, None

    def _tolerances(self, model):
        """:func:`bound_tolerances` of ``model``'s bounds, computed once per model."""
        got = self._bound_tol
        if got is None or got[0] is not model or got[1] is None:
            got = self._bound_tol = (model, bound_tolerances(model.lb, model.ub))
        return got[1]

    def _free_mask(self, x, u, model):
        """``(F, key)`` of :func:`free_set` at ``(x, u)``: ``F`` None when every variable is free, False when none is,
        else the mask; ``key`` identifies the free set (equal keys, equal masks). With few bounded variables
        (:func:`bounded_sides`) the held ones are found by :func:`held_variables` (the same comparisons on Python
        floats) and the mask of the last held set is reused: the free set usually stays the same from one trial to
        the next, and the mask, ``P_FF`` and the restricted pairs then come from the last trial."""
        sides = self._held_sides
        if sides is None:
            F = free_set(x, u, model.lb, model.ub, self._tolerances(model))
            free = np.count_nonzero(F)
            if free == 0:
                return False, None
            return (None, None) if free == F.size else (F, F.tobytes())
        held = held_variables(x, u, sides)
        if not held:
            return None, None
        if held != self._held:
            if len(held) == x.size:
                return False, None
            F = np.ones(x.size, dtype=bool)
            F[list(held)] = False
            self._held, self._held_F = held, F
        return self._held_F, held

    def _compiled_direction(self, model, x, u, ref, qp):
        """:meth:`_direction` on a dense metric by the kernels of :mod:`.compiled_trial` (the same answer to
        rounding), and the point ``x + D`` when the kernel found it feasible (else None)."""
        K = self.kernels
        n = u.size
        if self._all_idx.size != n:
            self._all_idx, self._cF, self._csub = np.arange(n), np.ones(n, dtype=np.bool_), None
        F = self._cF
        bounds = _NO_BOUNDS if qp is None else (model.lb, model.ub) + self._tolerances(model)
        sides = None if qp is None else qp._sides
        G, g, g_tol = _NO_SIDES if sides is None else sides
        ring = self._ring
        m = len(self.pairs)
        if ring is None:
            ring, m = _NO_RING, 0
        r, z = np.empty(n), np.empty(n)
        cached = self._csub
        known = cached is not None and cached[0] is ref and cached[1] is not None
        for _ in range(2):
            sub, Fidx = (cached[1], cached[2]) if known else (ref, self._all_idx)
            code, guaranteed, slope, factor, feasible = K.qn_direction(
                u, x, bounds, F, known, Fidx, sub.cf, sub.P, ring[0], ring[1], ring[2], ring[3], m, self.c, FLAT,
                G, g, g_tol, r, z)
            if code != K.NEW_FREE:
                break
            # a new free set (written to F): P_FF factored by the numpy path (DenseMetric.restricted), then again
            if F.all():
                sub, Fidx = ref, self._all_idx
            else:
                sub, Fidx = ref.restricted(F), np.flatnonzero(F)
            cached = self._csub = (ref, sub, Fidx)
            if sub is None:
                return None
            known = True
        if code != K.OK:
            return None  # no trial: every variable held, or the bound step decides (non-finite, flat direction)
        a, z1 = None, None
        if qp is not None:
            if sides is None:
                a = qp.max_factor(x, -r)
            else:
                a, z1 = factor, (z if feasible else None)
        return -r, slope, guaranteed, a, {"scale": self.c}, z1

    def _try(self, model, x, u, f, qp, D, slope, guaranteed, a, metric, z1=None):
        """The trial along ``D`` (slope ``u^T D``; ``a``: the largest feasible factor, None without constraints;
        ``z1``: ``x + D`` when already tested feasible): shortened to the feasible set, evaluated, backtracked; the
        result of :meth:`trial`."""
        qval = 0.5 * slope
        if a is None:
            a, Da, z = 1.0, D, x + D  # a = 1: a * D is D
        elif z1 is not None:
            a, Da, z = 1.0, D, z1  # a >= 1 and x + D feasible: the loop below would accept it at once
        else:
            a = min(1.0, a)
            if a < 1.0 and self.metric != "line":
                got = self._projected_trial(model, x, u, f, D, qp, metric)
                if got is not None:
                    return got
            shrink = 1e-9  # rounding of the ratio test; grown tenfold per failure, so the loop ends in < 30 tests
            while a >= MIN_FEASIBLE:
                Da = D if a == 1.0 else a * D  # (1.0 * D is D, bit for bit)
                z = x + Da  # the point tested is the point evaluated (and returned): formed once per factor
                if qp.feasible(z):
                    break
                a *= 1.0 - shrink
                shrink = min(0.5, 10.0 * shrink)
            if a < MIN_FEASIBLE:
                self.stats["blocked"] = self.stats.get("blocked", 0) + 1
                return None
        self.stats["trials"] += 1
        for k in range(BACKTRACK + 1):
            if k:
                Da = a * D
                z = x + Da
            try:
                f_new, _, S_new = model.evaluate(z)
            except InputDataError:
                f_new, S_new = np.inf, None  # scores overflowing along an over-long step: shorter
            if guaranteed > 0 and slope < 0 and f - f_new >= ETA * guaranteed:
                self.stats["accepted"] += 1
                return z, f_new, S_new, Da, a * slope + 0.5 * a * a * -slope, dict(
                    metric, flat=0.0, bound_age=self.age, ratio=(f - f_new) / -qval, backtracks=k)
            if not slope < 0 or k == BACKTRACK:
                break
            # minimiser of the quadratic through phi(0), phi'(0), phi(a), kept in [0.1 a, 0.5 a]
            curv = (f_new - f - a * slope) / (a * a) if np.isfinite(f_new) else np.inf
            a_new = -slope / (2.0 * curv) if curv > 0 else 0.5 * a
            a = min(0.5 * a, max(0.1 * a, float(a_new)))
            self.stats["backtracks"] += 1
        self.c = min(1.0, 2.0 * self.c)
        self.stats["rejected"] += 1
        return None

    def _projected_trial(self, model, x, u, f, D, qp, metric):
        """The trial projected on the box, ``z = P[x + D]``, when the box blocks the full step (Bertsekas 1982's
        projected arc at ``a = 1``): the ratio test would stop every free variable at the first bound any of them
        meets, and with many bounds (``cp.abs(theta) <= B``) the trials shrink to nothing. Accepted when ``z`` satisfies
        the rows, ``u'(z - x) < 0`` and ``f(z) <= f - ETA * (-u'(z - x)) / 2`` (the unprojected trial's test with its
        guaranteed decrease ``-u'D / 2`` taken along the projected step): the objective decreases, so the iteration
        stays monotone. Otherwise None and the trial goes on along ``x + a D``.

        Not with the line metric (wide programs): its curvature is the bound's along one direction only, with no test
        of flat directions (the dense metric's residual test above), and the step QP that follows a blocked trial is
        what reports a QP unbounded along a feasible flat direction; projected trials carried such iterates off to
        infinity (``test_wide_constrained_unbounded_reported``)."""
        z = np.clip(x + D, model.lb, model.ub)
        Dp = z - x
        slope = float(u @ Dp)
        if not slope < 0 or not qp.feasible(z):
            return None
        try:
            f_new, _, S_new = model.evaluate(z)
        except InputDataError:
            return None
        self.stats["projected_trials"] = self.stats.get("projected_trials", 0) + 1
        if not f - f_new >= ETA * -0.5 * slope:
            return None
        self.stats["accepted"] += 1
        self.stats["projected"] = self.stats.get("projected", 0) + 1
        return z, f_new, S_new, Dp, 0.5 * slope, dict(metric, flat=0.0, bound_age=self.age,
                                                       ratio=(f - f_new) / (-0.5 * slope), backtracks=0,
                                                       projected=True)


def two_loop(pairs, u, h0):
    """``B^{-1} u`` of the L-BFGS matrix with initial inverse ``h0`` and the ``pairs`` ``(s, y, 1/s^T y)``, most
    recent first: the two-loop recursion (Nocedal & Wright 2006, Alg. 7.4) with its inner products taken from
    ``S Y^T`` and three matrix-vector products. With ``q_i`` the first loop's vector before pair ``i``,
    ``s_i^T q_i = s_i^T u - sum_{j<i} a_j s_i^T y_j``; in the second loop (oldest pair first, ``r_0 = h0(q)``),
    ``y_i^T r = y_i^T r_0 + sum_{j>i} (a_j - b_j) y_i^T s_j``. The same arithmetic as the loop over vectors up to
    rounding, in a constant number of numpy calls (the vector loop made ~4 per pair, most of a small problem's
    iteration)."""
    if not pairs:
        return h0(u)
    S = np.array([p[0] for p in pairs])
    Y = np.array([p[1] for p in pairs])
    rho = [p[2] for p in pairs]
    M = (S @ Y.T).tolist()  # M[i][j] = s_i^T y_j
    su = (S @ u).tolist()
    m = len(pairs)
    a = [0.0] * m
    for i in range(m):
        t = su[i]
        Mi = M[i]
        for j in range(i):
            t -= a[j] * Mi[j]
        a[i] = rho[i] * t
    r = h0(u - Y.T @ np.array(a))
    yr = (Y @ r).tolist()
    e = [0.0] * m  # a_i - b_i
    for i in range(m - 1, -1, -1):
        t = yr[i]
        for j in range(i + 1, m):
            t += e[j] * M[j][i]
        e[i] = a[i] - rho[i] * t
    return r + S.T @ np.array(e)


def free_set(x, u, lb, ub, tol=None):
    """The free variables of a constrained trial: all but those at a bound (``1e-12`` relative) whose gradient
    component pushes outward (``u_j > 0`` at ``lb``, ``u_j < 0`` at ``ub``: their bound multiplier has the right
    sign). With bounds only, ``x`` is a KKT point iff ``u`` vanishes on this set, so the guarantee
    ``1/2 u_F^T P_FF^{-1} u_F`` of the acceptance test is zero exactly there."""
    tl, tu = bound_tolerances(lb, ub) if tol is None else tol
    # an infinite bound is never active: x is finite, so x - lb = +inf there and its NaN tolerance compares False
    # (no floating-point exception on either: no errstate, which costs as much as the rest of this test)
    return ~(((x - lb <= tl) & (u > 0)) | ((ub - x <= tu) & (u < 0)))


def bound_tolerances(lb, ub):
    """The activity tolerances of :func:`free_set`: ``1e-12 max(1, |b|)`` for the finite bounds, NaN for the
    infinite ones (computed once per solve: the bounds do not change; ``1e-12 |inf|`` is ``inf``, no exception)."""
    return (np.where(np.isfinite(lb), 1e-12 * np.maximum(1.0, np.abs(lb)), np.nan),
            np.where(np.isfinite(ub), 1e-12 * np.maximum(1.0, np.abs(ub)), np.nan))


#: :func:`held_variables` (Python floats) up to this many bounded variables; numpy's :func:`free_set` beyond
HELD_PY_MAX = 24


def bounded_sides(lb, ub):
    """The finite bounds as Python floats for :func:`held_variables`: ``[(j, lb_j, tl_j, ub_j, tu_j)]`` over the
    variables with a finite bound (an infinite side as None), or None when more than ``HELD_PY_MAX`` variables are
    bounded (numpy's :func:`free_set` is then cheaper). The tolerances are :func:`bound_tolerances`'s,
    ``1e-12 max(1, |b|)``, in the same double arithmetic."""
    fin_l, fin_u = np.isfinite(lb), np.isfinite(ub)
    jb = np.flatnonzero(fin_l | fin_u)
    if jb.size > HELD_PY_MAX:
        return None
    out = []
    for j in jb.tolist():
        lo = float(lb[j]) if fin_l[j] else None
        hi = float(ub[j]) if fin_u[j] else None
        out.append((j, lo, None if lo is None else 1e-12 * max(1.0, abs(lo)),
                    hi, None if hi is None else 1e-12 * max(1.0, abs(hi))))
    return out


def held_variables(x, u, sides):
    """The variables :func:`free_set` holds (ascending tuple): at a bound within its tolerance with the gradient
    pushing outward. The same IEEE comparisons as :func:`free_set` on the same doubles, one variable at a time:
    with a handful of bounded variables a loop over them costs less than ten numpy calls over every variable."""
    held = []
    for j, lo, tl, hi, tu in sides:
        uj = u.item(j)
        if uj > 0.0:
            if lo is not None and x.item(j) - lo <= tl:
                held.append(j)
        elif uj < 0.0:
            if hi is not None and hi - x.item(j) <= tu:
                held.append(j)
    return tuple(held)


def _restricted_pairs(pairs, F, cache):
    """The L-BFGS pairs on the free variables ``F`` (pairs without positive curvature there dropped). ``cache`` (one
    per free set) holds the last ``pairs`` list with the restriction of each of its pairs (None: dropped): the free set
    usually stays the same from one trial to the next, and the pairs then are the same list or the last one with a
    new pair in front (:meth:`ScaledCurvature.moved`), of which only the new pair is restricted."""
    last, aligned, out = cache.get("last", (None, None, None))
    if last is not None and pairs is last:
        return out
    if (last is not None and len(pairs) > 1 and len(pairs) - 1 <= len(last)
            and all(a is b for a, b in zip(pairs[1:], last))):
        aligned = [_restrict_pair(pairs[0], F)] + aligned[:len(pairs) - 1]
    else:
        aligned = [_restrict_pair(p, F) for p in pairs]
    out = [p for p in aligned if p is not None]
    cache["last"] = (pairs, aligned, out)
    return out


def _restrict_pair(pair, F):
    """``(s_F, y_F, 1 / s_F^T y_F)``, or None without positive curvature on ``F``."""
    s, y, _ = pair
    sf, yf = s[F], y[F]
    sy = float(sf @ yf)
    # (math.sqrt of the same double product: numpy's sqrt of a scalar costs a microsecond)
    return (sf, yf, 1.0 / sy) if sy > 1e-12 * math.sqrt(float(sf @ sf) * float(yf @ yf)) else None
