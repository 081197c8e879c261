"""The LP solve path of :class:`~.model.HighsModel` (a mixin): retries when HiGHS stops
without a decision, the interior-point and Clarabel fallbacks, and phase 1.
"""
from __future__ import annotations


import numpy as np

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
        """
        res = self._solve_once()
        if res.status == "error" and res.model_status not in _LIMIT_STATUSES:
            # e.g. "Unknown" after a warm start from a modified basis: retry cold, then
            # without presolve
            first = res.model_status
            for pres in (self._get_option("presolve"), "off"):
                res2 = self._solve_cold_with("presolve", pres)
                res2.iterations += res.iterations
                res = res2
                if res.status != "error" or res.model_status in _LIMIT_STATUSES:
                    break
            res.message += f"; HiGHS first stopped with {first!r}, re-solved cold"
            if res.status == "error" and res.model_status not in _LIMIT_STATUSES:
                res = self._lp_fallbacks(res)
        if not self.verify_status or res.status not in ("infeasible", "unbounded") \
                or res.model_status == "Primal infeasible or unbounded":
            return res
        if self._h.getModelPresolveStatus() == self._hp.HighsPresolveStatus.kNotPresolved:
            return res  # the simplex decided (warm solves skip presolve): it has a ray
        feas, it = self._phase1()
        res.iterations += it
        if feas is None or (res.status == "infeasible") == (feas is False):
            return res
        first = res.model_status
        res = self._solve_cold_with("presolve", "off")
        res.iterations += it
        res.message += f"; HiGHS first said {first!r}, contradicted by phase-1, re-solved without presolve"
        if (res.status == "infeasible" and feas) or (res.status == "unbounded" and not feas):
            res.status = "error"
        return res

    def _solve_cold_with(self, name, value):
        """One cold solve with HiGHS option ``name`` temporarily set to ``value``."""
        saved = self._get_option(name)
        try:
            self._h.setOptionValue(name, value)
            self._h.clearSolver()
            return self._solve_once()
        finally:
            self._h.setOptionValue(name, saved)

    def _lp_fallbacks(self, res):
        """Last resorts when the simplex keeps stopping with "Unknown" (seen on warm-started, highly
        degenerate GOP relaxed duals): HiGHS's interior point with crossover, then Clarabel."""
        first = res.message
        res2 = self._solve_cold_with("solver", "ipm")
        self._h.clearSolver()  # the next warm solve must not start from the IPM's state
        res2.iterations += res.iterations
        if res2.status != "error" or res2.model_status in _LIMIT_STATUSES:
            res2.message += f"; after: {first}; solved by HiGHS IPM"
            return res2
        cl = _clarabel_solve(self.data())
        if cl is None:
            return res2
        cl.message += f"; after: {first}; HiGHS IPM: {res2.model_status}; solved by Clarabel"
        return cl

    def _phase1(self):
        """Decide feasibility of the current constraints: (True/False/None, iterations)."""
        hp = self._hp
        lp = self._h.getLp()
        lp.col_cost_ = np.zeros(self._n)
        lp.offset_ = 0.0
        g = new_highs(hp)
        for k, v in _DEFAULT_OPTIONS.items():
            g.setOptionValue(k, v)
        g.setOptionValue("presolve", "off")
        g.setOptionValue("solver", "simplex")
        tl = self._get_option("time_limit")
        g.setOptionValue("time_limit", tl)
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
