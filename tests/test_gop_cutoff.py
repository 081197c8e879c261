"""The relaxed duals are fathomed half the gap tolerance below the incumbent (``GopSearch._cutoff``, docs/gop.md §7):
a node proved ``>= UB - tol/2`` is dropped and the run's lower bound never exceeds the smallest cutoff used so. Checked
at every node of solves of the BGMM (both families, minimal data) and a bilinear program: the cutoff handed to the
relaxed duals, the certified gap, the lower bound against every fathoming cutoff, and both bounds against an
independent reference (a dense multistart on the BGMM profile; a grid over the bilinear program's ``x``)."""
import itertools

import numpy as np
import pyomo.environ as pyo
import pytest
from gop_rd_models import MODELS
from scipy.optimize import minimize

import varopt  # noqa: F401
from varopt.formulations.bgmm import MINIMAL_DATA
from varopt.solvers.gop import relaxed_dual as RD
from varopt.solvers.gop import search as S

import bgmm_reference as R  # benchmarks/ (independent references; path set in conftest)


def _bilinear_reference():
    """min over ``x`` on a grid (then polished) of min over ``y`` (a convex QP in ``y`` for fixed ``x``, box
    constrained): an upper bound on the optimum that is within the polish tolerance of it."""
    def f(x, y):
        return (sum((i - 1.5) * x[i] * y[i] for i in range(4)) + x[0] * y[2] - x[3] * y[1]
                + 0.1 * sum((y[i] - 0.3) ** 2 for i in range(4)) + 0.1 * sum((x[i] - 1) ** 2 for i in range(4)))

    def inner(x):
        return minimize(lambda y: f(x, y), np.zeros(4), bounds=[(-1, 1)] * 4, method="L-BFGS-B").fun

    best = np.inf
    for x in itertools.product([0.0, 1.0, 2.0], repeat=4):
        r = minimize(lambda z: f(z[:4], z[4:]), np.concatenate([x, np.zeros(4)]),
                     bounds=[(0, 2)] * 4 + [(-1, 1)] * 4, method="L-BFGS-B")
        best = min(best, r.fun, inner(np.array(x)))
    return best


def _reference(name):
    if name == "bilinear":
        return _bilinear_reference()
    d = MINIMAL_DATA
    fam = name.split("_")[1]
    return R.profile_multistart(np.asarray(d["x"], float), d["K"], fam, d["prior_precision"], d["variance"],
                                n_starts=1024, n_polish=16)["value"]


@pytest.mark.parametrize("name", ["bgmm_point", "bgmm_gaussian", "bilinear"])
def test_cutoff_is_below_the_incumbent_and_bounds_the_lower_bound(name, monkeypatch):
    model = MODELS[name]()
    seen = {"fathomed": [], "below_incumbent": 0, "nodes": 0}
    orig_solve_node, orig_cutoff = RD.RDModel.solve_node, S.GopSearch._cutoff
    rel = 1e-6

    def cutoff(self, UB):
        c = orig_cutoff(self, UB)
        if np.isfinite(UB):
            tol = max(rel * abs(UB), rel)
            # half the tolerance below the incumbent: fathoming there may lower the bound by tol/2 at most
            assert c == pytest.approx(UB - 0.5 * tol, rel=1e-14, abs=1e-14), (c, UB)
            seen["below_incumbent"] += c < UB
        else:
            assert c == np.inf
        return c

    def solve_node(self, A, lo, hi, oa_tol, feas_tol=1e-9, max_rounds=30, cutoff=np.inf):
        out = orig_solve_node(self, A, lo, hi, oa_tol, feas_tol, max_rounds, cutoff)
        seen["nodes"] += 1
        if out["status"] == "cutoff":
            assert out["value"] == cutoff
            seen["fathomed"].append(cutoff)
        elif out["status"] == "optimal" and np.isfinite(cutoff) and out["value"] >= cutoff:
            seen["fathomed"].append(out["value"])
        return out

    monkeypatch.setattr(S.GopSearch, "_cutoff", cutoff)
    monkeypatch.setattr(RD.RDModel, "solve_node", solve_node)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=rel, time_limit=120)
    r = res.varopt_result
    assert r.status == "optimal", r.message
    assert seen["below_incumbent"] > 0 and len(seen["fathomed"]) > 10, seen["below_incumbent"]
    lb, ub = r.lower_bound, r.upper_bound
    # the lower bound counts the regions dropped at a cutoff: it is at most the smallest such cutoff (or value)
    assert lb <= min(seen["fathomed"]) + 1e-12 * max(1.0, abs(lb)), (lb, min(seen["fathomed"]))
    assert ub - lb <= max(rel * abs(ub), rel) * (1 + 1e-9)
    ref = _reference(name)
    tol = 1e-6 * max(1.0, abs(ref))
    assert lb <= ref + tol, (lb, ref)
    assert abs(ub - ref) <= tol, (ub, ref)


def test_relaxed_duals_run_unscaled_only_on_well_scaled_rows(monkeypatch):
    """The relaxed-dual LPs switch HiGHS's scaling off (fewer simplex iterations on the BGMM relaxed duals) only
    when the base rows' nonzeros span at most ``UNSCALED_RANGE``; the same bilinear program with one row scaled
    mixing coefficients 1 and 1e6 keeps HiGHS's scaling, and both certify the same optimum."""
    import pyomo.environ as pyo
    import varopt.solvers.gop.relaxed_dual as rd
    from gop_rd_models import bilinear
    assert rd._coefficient_range(np.array([[0.0, -2.0], [0.5, 0.0]])) == 4.0
    assert rd._coefficient_range(np.zeros((2, 2))) == 1.0
    built = []
    orig = rd.RDModel.__init__

    def spy(self, base):
        orig(self, base)
        built.append((self.scaled, self.hm._h.getOptionValue("simplex_scale_strategy")[1]))
    monkeypatch.setattr(rd.RDModel, "__init__", spy)
    got = {}
    for big in (1.0, 1e6):
        m = bilinear()
        m.row = pyo.Constraint(expr=big * (m.y[0] + m.y[1] + m.y[2]) <= big * 1.5)  # a row of the relaxed duals
        built.clear()
        r = pyo.SolverFactory("gop").solve(m, time_limit=60, mode="gop").varopt_result
        assert r.status == "optimal" and built
        assert all(s == (big > 1.0) and (v == 0) == (not s) for s, v in built), built
        got[big] = r.upper_bound
    assert got[1.0] == pytest.approx(got[1e6], rel=1e-6, abs=1e-8)
