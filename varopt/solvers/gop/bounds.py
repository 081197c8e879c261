r"""Bounds of the GOP blocks: feasibility- and optimization-based bound tightening.

GOP sets the connected variables at their bounds (seed 004 eq. (16)), so they need finite
bounds; the tighter they are the stronger the relaxed duals.

* FBBT (interval propagation) over the linear constraints ``lo <= a^T z <= hi``: for every
  row and variable ``j``, ``a_j z_j`` lies in ``[lo, hi] - sum_{k != j} a_k [l_k, u_k]``.
* OBBT with HiGHS: ``min / max z_j`` over the linear constraints and the box (an LP whose
  feasible set contains every feasible point of the program).

The node-wise search-space reduction of GOP is in :mod:`.solver` (docs/gop.md §6).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...lpqp import HighsModel


def fbbt(A, lo, hi, lb, ub, rounds=20, tol=1e-9):
    """Interval propagation; returns (lb, ub, infeasible)."""
    lb = lb.copy()
    ub = ub.copy()
    A = sp.csr_matrix(A)
    if A.shape[0] == 0:
        return lb, ub, bool(np.any(lb > ub + tol))
    rows = [(A.indices[A.indptr[r]:A.indptr[r + 1]], A.data[A.indptr[r]:A.indptr[r + 1]]) for r in range(A.shape[0])]
    for _ in range(rounds):
        changed = False
        for r, (idx, val) in enumerate(rows):
            if idx.size == 0:
                continue
            with np.errstate(invalid="ignore"):
                tlo = np.where(val > 0, val * lb[idx], val * ub[idx])
                thi = np.where(val > 0, val * ub[idx], val * lb[idx])
            tlo = np.where(np.isnan(tlo), -np.inf, tlo)
            thi = np.where(np.isnan(thi), np.inf, thi)
            ninf_lo = np.isinf(tlo)
            ninf_hi = np.isinf(thi)
            slo = tlo[~ninf_lo].sum()
            shi = thi[~ninf_hi].sum()
            cnt_lo, cnt_hi = int(ninf_lo.sum()), int(ninf_hi.sum())
            for k, j in enumerate(idx):
                a = val[k]
                # range of the others
                olo = -np.inf if (cnt_lo - int(ninf_lo[k])) > 0 else slo - (0.0 if ninf_lo[k] else tlo[k])
                ohi = np.inf if (cnt_hi - int(ninf_hi[k])) > 0 else shi - (0.0 if ninf_hi[k] else thi[k])
                # a z_j in [lo - ohi, hi - olo]
                vlo = lo[r] - ohi if np.isfinite(lo[r]) else -np.inf
                vhi = hi[r] - olo if np.isfinite(hi[r]) else np.inf
                if a > 0:
                    nlo, nhi = vlo / a, vhi / a
                else:
                    nlo, nhi = vhi / a, vlo / a
                # bounds move only to finite values (an infinite candidate never tightens)
                if np.isfinite(nlo) and nlo > lb[j] + tol * max(1.0, abs(nlo)):
                    lb[j] = nlo
                    changed = True
                if np.isfinite(nhi) and nhi < ub[j] - tol * max(1.0, abs(nhi)):
                    ub[j] = nhi
                    changed = True
        if np.any(lb > ub + 1e-7 * np.maximum(1.0, np.abs(lb))):
            return lb, ub, True
        if not changed:
            break
    return lb, np.maximum(ub, lb), False


def obbt(A, lo, hi, lb, ub, idx):
    """Tighten the bounds of ``idx`` by LPs over the linear constraints; returns (lb, ub, infeasible)."""
    lb = lb.copy()
    ub = ub.copy()
    n = lb.size
    if A.shape[0] == 0 or len(idx) == 0:
        return lb, ub, False
    hm = HighsModel(np.zeros(n), A, lo, hi, lb, ub)
    for j in idx:
        for sgn in (1.0, -1.0):
            c = np.zeros(n)
            c[j] = sgn
            hm.set_cost(c)
            r = hm.solve()
            if r.status == "infeasible":
                return lb, ub, True
            if r.status != "optimal":
                continue
            v = sgn * r.objective
            if sgn > 0:
                # a safety margin keeps the bound valid under LP tolerances
                lb[j] = max(lb[j], v - 1e-9 * max(1.0, abs(v)))
            else:
                ub[j] = min(ub[j], v + 1e-9 * max(1.0, abs(v)))
    return lb, ub, False
