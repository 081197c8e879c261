"""The LP solve path of :class:`~.model.HighsModel` (a mixin): retries when HiGHS stops
without a decision, the interior-point and Clarabel fallbacks, and phase 1.
"""
from __future__ import annotations


import time

import numpy as np

from .errors import INF
from .result import LPResult
from .process import _native_stdout_silenced, new_highs
from .settings import _DEFAULT_OPTIONS, _LIMIT_STATUSES
from .clarabel import _clarabel_solve


class LPSolving:
    """LP path of :class:`~.model.HighsModel`: cold retries, IPM and Clarabel fallbacks, and the phase-1
    solve that resolves HiGHS's ``kUnboundedOrInfeasible``."""

    def _solve_lp(self):
        """LP solve; "infeasible"/"unbounded" answers are confirmed by a phase-1 LP.

        HiGHS 1.15's presolve calls some tiny degenerate feasible LPs "infeasible" (seen
        in tests/test_highs.py's random integer LPs, e.g. an unbounded LP with a free
        column); when phase-1 contradicts the answer the model is re-solved with presolve
        off (simplex only), which was correct in every case tested.

        HiGHS's ``time_limit`` covers the whole call: every internal solve after the first (cold retries,
        fallbacks, phase 1, the re-solve without presolve) gets the time left, recomputed just before it, and
        is skipped when none is left (before, each got the full limit again: one call could take several times
        the time left, docs/gop.md §13k and §13m).
        """
        t_end = self._deadline()
        res = self._solve_once()
        if res.status == "error" and res.model_status not in _LIMIT_STATUSES:
            # e.g. "Unknown" after a warm start from a modified basis: retry cold, then
            # without presolve
            first = res.model_status
            for pres in (self._get_option("presolve"), "off"):
                res2 = self._solve_cold_with("presolve", pres, t_end)
                if res2 is None:
                    break   # no time left: keep the first answer (an error)
                res2.iterations += res.iterations
                res = res2
                if res.status != "error" or res.model_status in _LIMIT_STATUSES:
                    break
            res.message += f"; HiGHS first stopped with {first!r}, re-solved cold"
            if res.status == "error" and res.model_status not in _LIMIT_STATUSES:
                res = self._lp_fallbacks(res, t_end)
        if not self.verify_status or res.status not in ("infeasible", "unbounded") \
                or res.model_status == "Primal infeasible or unbounded":
            return res
        if self._h.getModelPresolveStatus() == self._hp.HighsPresolveStatus.kNotPresolved:
            return res  # the simplex decided (warm solves skip presolve): it has a ray
        feas, it = self._phase1(t_end)
        res.iterations += it
        if feas is None or (res.status == "infeasible") == (feas is False):
            return res
        first = res.model_status
        res2 = self._solve_cold_with("presolve", "off", t_end)
        if res2 is None:
            # phase 1 contradicted HiGHS and no time is left to decide: neither answer is kept
            return LPResult("error", iterations=res.iterations + it, model_status="Time limit reached",
                            message=f"HiGHS said {first!r}, contradicted by phase-1; time limit reached")
        res = res2
        res.iterations += it
        res.message += f"; HiGHS first said {first!r}, contradicted by phase-1, re-solved without presolve"
        if (res.status == "infeasible" and feas) or (res.status == "unbounded" and not feas):
            res.status = "error"
        return res

    def _deadline(self):
        """``perf_counter()`` at which the time limit of this ``solve()`` runs out (inf without one)."""
        tl = self._get_option("time_limit")
        return time.perf_counter() + tl if np.isfinite(tl) else INF

    def _solve_cold_with(self, name, value, t_end=INF):
        """One cold solve with HiGHS option ``name`` temporarily set to ``value`` and the time left before
        ``t_end``; None when none is left."""
        left = t_end - time.perf_counter()
        if left <= 0:
            return None
        saved = self._get_option(name)
        saved_tl = self._get_option("time_limit")
        try:
            self._h.setOptionValue(name, value)
            if np.isfinite(left):
                self._h.setOptionValue("time_limit", float(left))
            self._h.clearSolver()
            return self._solve_once()
        finally:
            self._h.setOptionValue(name, saved)
            self._h.setOptionValue("time_limit", saved_tl)

    def _lp_fallbacks(self, res, t_end=INF):
        """Last resorts when the simplex keeps stopping with "Unknown" (seen on warm-started, highly
        degenerate GOP relaxed duals): HiGHS's interior point with crossover, then Clarabel, each with the time
        left before ``t_end`` (``res`` itself when none is left)."""
        first = res.message
        res2 = self._solve_cold_with("solver", "ipm", t_end)
        if res2 is None:
            return res
        self._h.clearSolver()  # the next warm solve must not start from the IPM's state
        res2.iterations += res.iterations
        if res2.status != "error" or res2.model_status in _LIMIT_STATUSES:
            res2.message += f"; after: {first}; solved by HiGHS IPM"
            return res2
        left = t_end - time.perf_counter()
        if left <= 0:
            return res2
        cl = _clarabel_solve(self.data(), left)
        if cl is None:
            return res2
        cl.message += f"; after: {first}; HiGHS IPM: {res2.model_status}; solved by Clarabel"
        return cl

    def _phase1(self, t_end=None):
        """Decide feasibility of the current constraints: (True/False/None, iterations); within the time left
        before ``t_end`` (default: this model's time limit from now), None at once when none is left."""
        hp = self._hp
        left = self._get_option("time_limit") if t_end is None else t_end - time.perf_counter()
        if left <= 0:
            return None, 0
        lp = self._h.getLp()
        lp.col_cost_ = np.zeros(self._n)
        lp.offset_ = 0.0
        g = new_highs(hp)
        for k, v in _DEFAULT_OPTIONS.items():
            g.setOptionValue(k, v)
        g.setOptionValue("presolve", "off")
        g.setOptionValue("solver", "simplex")
        g.setOptionValue("time_limit", float(left))
        # a check, not the answer: stop it where a healthy simplex has long decided. On a gop OBBT LP of MINLPLib
        # ex8_4_1 (583 rows, 53 columns) HiGHS stalled here for 690,000 iterations, the whole time left
        g.setOptionValue("simplex_iteration_limit", int(max(5_000, 20 * (self._m + self._n))))
        g.passModel(lp)
        with _native_stdout_silenced():
            g.run()
        ms = g.getModelStatus()
        info = g.getInfo()
        it = max(0, int(info.simplex_iteration_count))
        if ms == hp.HighsModelStatus.kOptimal:
            return True, it
        if ms == hp.HighsModelStatus.kInfeasible:
            return False, it
        return None, it

    # ------------------------------------------------------------------ QP polish
