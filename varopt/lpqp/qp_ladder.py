"""The QP solve path of :class:`~.model.HighsModel` (a mixin): HiGHS's active-set QP
verified by the independent KKT residual, the retry ladder (regularisation, presolve off,
cold starts), the recession check for unboundedness, the polish and the Clarabel fallback.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .errors import INF
from .result import LPResult
from .settings import _CLARABEL_FIRST, _CLARABEL_FIRST_EQ_NNZ, _KKT_ACCEPT, _QP_RETRIES
from .polish import _kkt_scale, _polish_kkt
from .clarabel import _clarabel_solve
from .psd import _PSD_CHECK_DENSE_N, _min_eig
from .certificate import kkt_residual


class QPSolving:
    """QP path of :class:`~.model.HighsModel`: the retry ladder, recession checks and the KKT polish."""

    def _solve_qp(self):
        """Convex QP, verified (see "QP reliability" in :mod:`varopt.lpqp`).

        Attempts: HiGHS's active-set solver with its default regularisation, then with
        larger ones, then Clarabel; every "optimal" answer is polished and accepted only
        if its KKT residual is <= ``_KKT_ACCEPT * scale``; every "infeasible" answer is
        confirmed by a phase-1 LP and every "unbounded" one by a recession-direction LP.
        """
        if "qp_iteration_limit" not in self._user_options:
            # cycling shows up as hitting this limit; legitimate runs need O(n + m) iterations
            self._h.setOptionValue("qp_iteration_limit", int(20 * (self._n + self._m) + 1000))
        hot = self._user_options.get("qp_allow_hot_start", True)
        self._h.setOptionValue("qp_allow_hot_start", bool(hot))
        warm = hot and self._qp_start is not None and self._qp_start[:2] == (self._n, self._m)
        if warm:
            # warm start the active-set solver from the last verified solve (HiGHS drops it
            # on model changes); a wrong answer from it is caught by the checks below
            self._h.setSolution(self._qp_start[2])
            self._h.setBasis(self._qp_start[3])
        d = self.data()
        tries, iters, best, psd_checked = [], 0, None, False
        cycled = False   # HiGHS stopped at the iteration limit we set: its other attempts cycle too
        saved = {k: self._get_option(k) for k in ("qp_regularization_value", "presolve", "time_limit",
                                                  "qp_allow_hot_start")}
        t_end = time.perf_counter() + saved["time_limit"]  # the limit covers all attempts
        try:
            ladder = ({},) + _QP_RETRIES + ("clarabel",)
            if not warm and cold_prefers_clarabel(self._n, d["A"], d["row_lo"], d["row_hi"]):
                # a large cold QP: HiGHS's active set needs one iteration per active bound or row, each dearer with
                # the size (a projection onto 1,000 rows: 7.7 s, then its iteration limit; Clarabel 0.09 s), and
                # dense equality rows make each one dear below that size (500 in 900 columns: 12 s; Clarabel
                # 0.33 s); the answer is polished and verified the same way
                ladder = ("clarabel",) + ladder[:-1]
            for extra in ladder:
                remaining = t_end - time.perf_counter()
                if remaining <= 0:
                    if best is None:
                        best = LPResult("error", message="time limit reached", model_status="Time limit reached")
                    break
                if cycled and extra != "clarabel":
                    continue
                if extra == "clarabel":
                    res = _clarabel_solve(d, remaining)
                    if res is None:
                        break
                    tries.append("clarabel: " + res.model_status)
                else:
                    for k, v in extra.items():
                        self._h.setOptionValue(k, v)
                    if extra:
                        self._h.clearSolver()  # retries start cold
                    if np.isfinite(remaining):
                        self._h.setOptionValue("time_limit", float(remaining))
                    res = self._solve_once()
                    tries.append(res.model_status)
                    # the limit is ours (20 (n + m) + 1000), reached by cycling: a projection onto 1,000 rows spent
                    # 3 x 7.7 s in HiGHS's attempts before Clarabel solved it in 0.09 s
                    cycled = (res.model_status == "Iteration limit reached"
                              and "qp_iteration_limit" not in self._user_options)
                iters += res.iterations
                if res.model_status == "Time limit reached":
                    if best is None or best.status != "optimal":
                        best = res
                    break
                if res.model_status == "Not Set" and self._n > _PSD_CHECK_DENSE_N and not psd_checked:
                    # HiGHS calls Q non-convex: it is sometimes wrong for singular PSD Q
                    psd_checked = True
                    lam = _min_eig(d["Q"])
                    if lam < -1e-9 * max(1.0, float(abs(d["Q"]).max())):
                        best = LPResult("error", message=f"Q is not positive semidefinite (smallest "
                                        f"eigenvalue {lam:.3g})", model_status="Non-convex")
                        break
                if res.status == "optimal":
                    if extra != "clarabel":
                        start = (self._n, self._m, self._h.getSolution(), self._h.getBasis())
                    self._polish(res, d)
                    kkt = res.info["kkt"]
                    if best is None or best.status != "optimal" or kkt < best.info["kkt"]:
                        best = res
                    if kkt <= _KKT_ACCEPT * _kkt_scale(res, d):
                        self._qp_start = start if extra != "clarabel" else None
                        break
                elif res.status == "infeasible":
                    feas, it = self._phase1(t_end)
                    iters += it
                    if feas is False:
                        best = res
                        break
                elif res.status == "unbounded":
                    unb, it = self._recession_check(d, t_end)
                    iters += it
                    if unb:
                        best = res
                        break
                elif best is None:
                    best = res
        finally:
            for k, v in saved.items():
                self._h.setOptionValue(k, v)
        if best is None:
            best = LPResult("error", message="no QP attempt produced a result")
        unverified = best.status == "error" or (
            best.status == "optimal" and best.info["kkt"] > _KKT_ACCEPT * _kkt_scale(best, d))
        if unverified and best.model_status != "Time limit reached":
            # HiGHS calls some unbounded QPs "optimal" (KKT residual O(1)) and Clarabel then
            # stalls: look for a certificate of unboundedness before giving up
            unb, it = self._recession_check(d, t_end)
            iters += it
            tries.append("recession check: " + ("unbounded" if unb else "no direction"))
            if unb:
                best = LPResult("unbounded", message="no attempt verified optimality; an LP found a "
                                "recession direction d (Q d = 0, c'd < 0)", model_status="Unbounded")
        if best.status == "optimal" and best.info["kkt"] > _KKT_ACCEPT * _kkt_scale(best, d):
            best.info["unverified"] = True
            best.message += f"; KKT residual {best.info['kkt']:.3g} above the acceptance threshold"
            if best.info["kkt"] > 1e3 * _KKT_ACCEPT * _kkt_scale(best, d):
                best.status = "error"
        best.iterations = iters
        best.info["attempts"] = tries
        if len(tries) > 1:
            best.info["fallback"] = tries[-1]
        return best

    def _recession_check(self, d, t_end=INF):
        """Certify unboundedness of the convex QP: phase-1 feasible and
        ``min c'd s.t. Q d = 0, d in the recession cone of the constraints, -1 <= d <= 1 < 0``; both LPs within
        the time left before ``t_end`` (no certificate when none is left)."""
        feas, it = self._phase1(t_end)
        if feas is not True:
            return False, it
        left = t_end - time.perf_counter()
        if left <= 0:
            return False, it
        A, Q, c = d["A"], d["Q"], d["c"]
        n = c.size
        rlo = np.where(np.isfinite(d["row_lo"]), 0.0, -INF)
        rhi = np.where(np.isfinite(d["row_hi"]), 0.0, INF)
        clo = np.where(np.isfinite(d["lb"]), 0.0, -1.0)
        chi = np.where(np.isfinite(d["ub"]), 0.0, 1.0)
        M = sp.vstack([A, Q], format="csr") if Q is not None else A
        lo = np.concatenate([rlo, np.zeros(n)]) if Q is not None else rlo
        hi = np.concatenate([rhi, np.zeros(n)]) if Q is not None else rhi
        r = type(self)(c, M, lo, hi, clo, chi, options={"presolve": "off"},
                       time_limit=left if np.isfinite(left) else None).solve()
        thr = -1e-9 * max(1.0, float(np.abs(c).max()) if n else 1.0)
        return bool(r.status == "optimal" and r.objective < thr), it + r.iterations

    def _polish(self, res, d=None):
        """Re-solve the KKT system on the active set (see "QP accuracy"); keep it if better.
        Stores the final KKT residual in ``res.info["kkt"]``."""
        if res.x is None or res.row_duals is None:
            return
        d = self.data() if d is None else d
        args = (d["c"], d["A"], d["row_lo"], d["row_hi"], d["lb"], d["ub"], d["Q"])
        best = kkt_residual(res, *args)
        if not np.isfinite(best):
            best = INF
        res.info["kkt_before_polish"] = best
        res.info["polished"] = False
        for tol in (1e-9, 1e-7, 1e-5, 1e-3):
            if best <= 1e-13 * _kkt_scale(res, d):
                break
            try:
                cands = _polish_kkt(res, d, tol)
            except (np.linalg.LinAlgError, ValueError, RuntimeError):
                continue
            for cand in cands:
                r = kkt_residual(cand, *args)
                if r < best:
                    best = r
                    res.x, res.row_duals, res.col_duals = cand.x, cand.row_duals, cand.col_duals
                    res.row_activity, res.objective = cand.row_activity, cand.objective
                    res.info["polished"] = True
        res.info["kkt"] = best


def cold_prefers_clarabel(n, A, row_lo, row_hi):
    """Whether a cold QP in ``n`` columns with the rows ``row_lo <= A x <= row_hi`` (``A`` sparse or dense) is
    solved faster by Clarabel than by an active set: at least ``_CLARABEL_FIRST`` columns + rows, or equality rows
    holding at least ``_CLARABEL_FIRST_EQ_NNZ`` nonzeros (an active set pays a factorization per constraint it
    adds or drops, dearer with the size and with dense equalities; an interior point a few dozen of them)."""
    m = A.shape[0]
    if n + m >= _CLARABEL_FIRST:
        return True
    eq = np.asarray(row_lo) == np.asarray(row_hi)
    if not eq.any():
        return False
    per_row = np.diff(A.tocsr().indptr) if sp.issparse(A) else np.count_nonzero(A, axis=1)
    return int(np.asarray(per_row)[eq].sum()) >= _CLARABEL_FIRST_EQ_NNZ
