"""The dual checks of the relaxed duals: the multipliers of the last LPs, applied to the next node's rows, bound that
node's LP from below (weak duality, ``RDModel._dual_bound``); a node is fathomed without an LP solve only when that
bound reaches the incumbent. The dual rays of the last infeasible LPs prove a node infeasible (Farkas,
``RDModel._ray_proves_infeasible``). Checked against the node's LP solved from scratch by SciPy's HiGHS interface
(every 7th finite bound, every 3rd ray-fathomed node) and by the certified optima of solves that use them."""
import numpy as np
import pyomo.environ as pyo
import pytest
from gop_rd_models import MODELS
from scipy.optimize import linprog

import varopt  # noqa: F401
from varopt.solvers.gop import relaxed_dual as RD


def _lp_value(model, A, lo, hi):
    """min c^T z over the base rows HiGHS holds, the node rows ``lo <= A z <= hi`` and the column bounds, solved
    from scratch (no basis, no cuts added)."""
    d = model.hm.data()
    A = A.toarray() if hasattr(A, "toarray") else np.asarray(A)   # the node rows are CSR
    Ab = d["A"][:model.m_base].toarray()
    # node columns past the node's width (used by other nodes): no entry, cost 0, bounds [0, inf)
    M = np.vstack([Ab, np.pad(A, ((0, 0), (0, Ab.shape[1] - A.shape[1])))])
    rlo = np.concatenate([d["row_lo"][:model.m_base], lo])
    rhi = np.concatenate([d["row_hi"][:model.m_base], hi])
    up, dn = np.isfinite(rhi), np.isfinite(rlo)
    res = linprog(model.c, A_ub=np.vstack([M[up], -M[dn]]), b_ub=np.concatenate([rhi[up], -rlo[dn]]),
                  bounds=list(zip(np.where(np.isfinite(d["lb"]), d["lb"], None),
                                  np.where(np.isfinite(d["ub"]), d["ub"], None))), method="highs")
    if res.status == 2:
        return np.inf
    assert res.status == 0, res.message
    return res.fun


@pytest.mark.parametrize("name", ["bgmm_gaussian", "bgmm_point", "bilinear"])
def test_dual_bound_is_below_the_node_lp(name, monkeypatch):
    model = MODELS[name]()
    orig = RD.RDModel._dual_bound
    seen = {"finite": 0, "checked": 0, "fathomed": 0}

    def checked(self, A, lo, hi, stop=np.inf):
        b = orig(self, A, lo, hi, stop)
        if np.isfinite(b):
            seen["finite"] += 1
            if seen["finite"] % 7 == 1:  # every 7th: the LPs from scratch would dominate the test's time
                v = _lp_value(self, A, lo, hi)
                assert b <= v + 1e-7 * max(1.0, abs(v)), (b, v)
                seen["checked"] += 1
        return b

    monkeypatch.setattr(RD.RDModel, "_dual_bound", checked)
    orig_ray = RD.RDModel._ray_proves_infeasible
    seen.update(infeasible=0, infeasible_checked=0)

    def checked_ray(self, A, lo, hi):
        out = orig_ray(self, A, lo, hi)
        if out:
            seen["infeasible"] += 1
            if seen["infeasible"] % 3 == 1:
                assert _lp_value(self, A, lo, hi) == np.inf
                seen["infeasible_checked"] += 1
        return out

    monkeypatch.setattr(RD.RDModel, "_ray_proves_infeasible", checked_ray)
    orig_node = RD.RDModel.solve_node

    def node(self, *a, **kw):
        n0 = self.n_dual_fathomed
        out = orig_node(self, *a, **kw)
        seen["fathomed"] += self.n_dual_fathomed - n0
        return out

    monkeypatch.setattr(RD.RDModel, "solve_node", node)
    orig_level = RD.RDModel._level_node_cols
    seen.update(levelled=0)

    def level(self, pi, r, A, lo, hi):
        # a node column with a negative reduced cost (a sibling's other sign or box end) makes the bound -inf unless
        # its defining row's multiplier is shifted (docs/gop.md §7, "node columns"): afterwards none is left
        pi2, r2 = orig_level(self, pi, r, A, lo, hi)
        if np.any(r[self.ncol:A.shape[1]] < -1e-9):
            assert np.all(r2[self.ncol:A.shape[1]] >= -1e-9)
            seen["levelled"] += 1
        return pi2, r2

    monkeypatch.setattr(RD.RDModel, "_level_node_cols", level)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=1e-6, time_limit=60)
    r = res.varopt_result
    assert r.status == "optimal", r.message
    assert seen["checked"] >= 5, seen
    if name.startswith("bgmm"):
        assert seen["fathomed"] > 0 and seen["levelled"] > 0, seen
    if name == "bgmm_gaussian":
        assert seen["infeasible_checked"] > 0, seen
    print(seen)
