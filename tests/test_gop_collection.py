"""The public gop test collection (benchmarks/gop_instances): instances well-formed, optima reproduced.

Nothing here measures gop: the collection is checked against its sources -- published optimal
points evaluate to the published optimum, SCIP reproduces the optimum of the smallest
instances, and the multi-convex optima (which are not published) against brute force.
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import pyomo.environ as pyo  # noqa: E402
from pyomo.core.expr.visitor import polynomial_degree  # noqa: E402

from gop_instances import FAMILIES, heldout_rule, instances  # noqa: E402

INSTS = instances()
BY_NAME = {i.name: i for i in INSTS}


def test_collection_size_and_metadata():
    assert len(INSTS) >= 30
    assert len(BY_NAME) == len(INSTS)
    for i in INSTS:
        assert i.family in FAMILIES, i.name
        assert i.sense in ("min", "max"), i.name
        assert math.isfinite(i.optimum), i.name
        assert len(i.source) > 20 and len(i.optimum_source) > 5, i.name


def test_heldout_third_is_fixed_and_spread():
    held = {i.name for i in INSTS if i.heldout}
    late = {i.name for i in INSTS if i.late}
    assert late <= held
    assert len(held - late) == (len(INSTS) - len(late)) // 3
    # the rule is a function of the (family, name) order only: rebuilding gives the same third
    assert held == {i.name for i in instances() if i.heldout}
    assert held == {i.name for i in heldout_rule(list(reversed(instances()))) if i.heldout}
    for fam in FAMILIES:
        # the positional rule spreads the third over each family; late instances are held out regardless
        members = [i for i in INSTS if i.family == fam and not i.late]
        if len(members) >= 3:
            assert any(i.heldout for i in members), fam
            assert not all(i.heldout for i in members), fam


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_instance_builds_with_recorded_sense(name):
    inst = BY_NAME[name]
    m = inst.build()
    objs = list(m.component_data_objects(pyo.Objective, active=True))
    assert len(objs) == 1 and objs[0] is m.obj
    assert m.obj.sense == (pyo.minimize if inst.sense == "min" else pyo.maximize)
    assert len(list(m.component_data_objects(pyo.Constraint, active=True))) >= 1
    if inst.family != "multiconvex":
        # bilinear / quadratic programs: every row and the objective have degree <= 2 ...
        for c in m.component_data_objects(pyo.Constraint, active=True):
            assert polynomial_degree(c.body) in (0, 1, 2), c.name
        assert polynomial_degree(m.obj.expr) in (0, 1, 2)  # 0: a feasibility problem (st_robot)
        # ... and at least one product of two variables somewhere
        degs = [polynomial_degree(c.body) for c in m.component_data_objects(pyo.Constraint, active=True)]
        assert 2 in degs + [polynomial_degree(m.obj.expr)]
    for v in m.component_data_objects(pyo.Var):
        lb, ub = v.bounds
        assert lb is None or ub is None or lb <= ub, v.name
    # two builds are independent models
    assert inst.build() is not m


POINTS = [n for n, i in BY_NAME.items() if i.point]


@pytest.mark.parametrize("name", POINTS)
def test_published_point_attains_published_optimum(name):
    inst = BY_NAME[name]
    m = inst.build()
    for v in m.component_data_objects(pyo.Var):
        v.set_value(0.0, skip_validation=True)
    names = {v.name: v for v in m.component_data_objects(pyo.Var)}
    for k, val in inst.point.items():
        names[k].set_value(val)
    assert pyo.value(m.obj) == pytest.approx(inst.optimum, rel=1e-9, abs=1e-9)
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        assert c.lower is None or body >= pyo.value(c.lower) - 1e-7, c.name
        assert c.upper is None or body <= pyo.value(c.upper) + 1e-7, c.name
    for v in m.component_data_objects(pyo.Var):
        assert v.lb is None or v.value >= v.lb - 1e-12
        assert v.ub is None or v.value <= v.ub + 1e-12


def test_published_point_check_can_fail():
    inst = BY_NAME["haverly1_p"]
    m = inst.build()
    for v in m.component_data_objects(pyo.Var):
        v.set_value(0.0, skip_validation=True)
    m.x["c2", "o1"].set_value(100.0)
    m.y["o1", "p2"].set_value(100.0)  # crude C missing: value -1500 + 1600 = 100, not -400
    assert pyo.value(m.obj) != pytest.approx(inst.optimum)


@pytest.mark.parametrize("name", ["fv1990", "st_e01", "haverly1_p", "ex9_1_2",
                                  # held out by construction; st_e24's and st_bsj4's optima are SCIP's own
                                  "st_e05", "st_glmp_kk92", "ex2_1_4", "st_e24", "st_bsj4"])
def test_scip_reproduces_published_optimum(name):
    pytest.importorskip("pyscipopt")
    from gop_instances.scip import scip_available, solve_scip
    if not scip_available():
        pytest.skip("SCIP (scip_direct) not available")
    inst = BY_NAME[name]
    r = solve_scip(inst.build(), time_limit=20, gap=1e-9)
    assert r["status"] == "optimal"
    assert r["value"] == pytest.approx(inst.optimum, rel=1e-6, abs=1e-9)
    assert r["lower"] <= inst.optimum + 1e-6 * abs(inst.optimum)


def test_nmf_optimum_against_brute_force():
    """nmf_sq: min over the simplex of w of the closed-form profile min_h>=0 ||A - w h^T||^2."""
    from scipy.optimize import minimize

    from gop_instances.multiconvex import A
    A_ = np.asarray(A)

    def profile(w):
        h = np.minimum(np.maximum(w @ A_, 0) / (w @ w), 20)
        return float(((A_ - np.outer(w, h)) ** 2).sum())
    n = 120
    grid = [(profile(np.array([i, j, n - i - j]) / n), i / n, j / n) for i in range(n + 1) for j in range(n + 1 - i)]
    v0, a, b = min(grid)
    r = minimize(lambda z: profile(np.array([z[0], z[1], 1 - z[0] - z[1]])), [a, b], method="Nelder-Mead",
                 options=dict(xatol=1e-12, fatol=1e-14, maxiter=5000))
    best = min(v0, r.fun)
    assert BY_NAME["nmf_sq"].optimum == pytest.approx(best, rel=1e-8)
    assert BY_NAME["nmf_fro"].optimum == pytest.approx(math.sqrt(best), rel=1e-8)


@pytest.mark.parametrize("name,squared", [("nmf_fro_free", False), ("nmf_sq_free", True)])
def test_free_nmf_optimum_is_the_rank1_svd_residual(name, squared):
    """The unnormalized rank-1 NMFs: the Eckart-Young residual of A (A > 0, so the Perron singular vectors are
    nonnegative) is attained by the model at w = s_1 u_1, h = v_1 and no rank-1 matrix does better."""
    from gop_instances import multiconvex as mc
    A_ = np.asarray(mc.A if name == "nmf_fro_free" else mc.A4)
    assert (A_ > 0).all()
    U, S, Vt = np.linalg.svd(A_)
    best = float(np.sum(S[1:] ** 2))
    best = best if squared else math.sqrt(best)
    assert BY_NAME[name].optimum == pytest.approx(best, rel=1e-11)
    m = BY_NAME[name].build()
    u, v = np.abs(U[:, 0]) * S[0], np.abs(Vt[0])
    for i in m.I:
        m.w[i].set_value(float(u[i]))
    for j in m.J:
        m.h[j].set_value(float(v[j]))
    assert pyo.value(m.obj) == pytest.approx(best, rel=1e-11)


def test_dictlearn_optimum_against_brute_force():
    """dictlearn: at ||d|| = 1 (optimal: a shorter d only raises the l1 price of the fit) x is soft-thresholded."""
    from scipy.optimize import minimize_scalar

    from gop_instances.multiconvex import Y
    Y_ = np.asarray(Y)

    def profile(th):
        c = np.array([np.cos(th), np.sin(th)]) @ Y_
        return float((Y_ ** 2).sum() - (c ** 2).sum()
                     + np.where(np.abs(c) > 0.25, 0.5 * np.abs(c) - 0.0625, c ** 2).sum())
    ths = np.linspace(-np.pi / 2, np.pi / 2, 20001)
    k = int(np.argmin([profile(t) for t in ths]))
    r = minimize_scalar(profile, bounds=(ths[max(k - 1, 0)], ths[min(k + 1, ths.size - 1)]), method="bounded",
                        options=dict(xatol=1e-12))
    assert BY_NAME["dictlearn"].optimum == pytest.approx(r.fun, rel=1e-9)


def test_collection_flags_wrong_certificates():
    """The benchmark's flag logic on synthetic gop results (no solver run)."""
    import gop_collection as gc
    inst = BY_NAME["haverly1_p"]

    def res(status, value, bound):
        return {"status": status, "value": value, "bound": bound, "evaluates": True, "model_value": value}
    assert gc.flags(inst, res("optimal", -400.0, -400.0001 * (1 - 1e-7))) == []
    assert gc.flags(inst, res("optimal", -399.0, -400.0)) == ["WRONG CERT"]
    assert gc.flags(inst, res("optimal", -400.0, -399.0)) == ["WRONG CERT"]      # bound above the optimum
    assert gc.flags(inst, res("optimal", -400.0, -410.0)) == ["WRONG CERT"]      # gap not closed
    assert gc.flags(inst, res("time_limit", -390.0, -399.0)) == ["BAD BOUND"]
    assert gc.flags(inst, res("time_limit", -390.0, -450.0)) == []
    assert "NO EVAL" in gc.flags(inst, {**res("optimal", -400.0, -400.0), "evaluates": False})


def test_tolerance_cannot_buy_objective_below_the_published_optimum():
    """ex3_1_1 (Floudas et al. 1999): a partial projection of a nearly feasible point onto its rows once
    turned a rejected point (violation 1.2e-5) into an accepted one (9e-7) 4e-7 below the published optimum,
    and gop certified it. The certified value must not lie below the optimum beyond 1e-8 relative, and the
    point loaded into the model must satisfy the model's rows to 1e-8 (Pyomo's own evaluation)."""
    import varopt  # noqa: F401
    inst = BY_NAME["ex3_1_1"]
    m = inst.build()
    res = pyo.SolverFactory("gop").solve(m, time_limit=60)
    val = pyo.value(m.obj)
    assert str(res.solver.termination_condition) == "optimal"
    assert val >= inst.optimum - 1e-8 * abs(inst.optimum)
    assert abs(val - inst.optimum) <= 1e-6 * abs(inst.optimum)
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if c.lower is not None:
            assert body >= pyo.value(c.lower) - 1e-8 * max(1.0, abs(pyo.value(c.lower))), c.name
        if c.upper is not None:
            assert body <= pyo.value(c.upper) + 1e-8 * max(1.0, abs(pyo.value(c.upper))), c.name
