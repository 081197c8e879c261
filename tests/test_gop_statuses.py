"""gop's statuses on unbounded, infeasible and bad inputs, and no RuntimeWarnings on ordinary models.

Unboundedness is reported only with a certificate (a feasible point and a feasible ray of descent,
``varopt/solvers/gop/unbounded.py``); a variable that merely lacks a bound keeps the
"declare finite bounds" error.
"""
import math
import time
import warnings

import numpy as np
import pytest

from varopt.errors import InputDataError, ModelStructureError
from varopt.formulations import bgmm as B

pyo = pytest.importorskip("pyomo.environ")
import varopt  # noqa: E402,F401


def gop(m, **kw):
    return pyo.SolverFactory("gop").solve(m, **kw)


def _bilinear_minus_z(sense=pyo.minimize, cap=None):
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(bounds=(0, 1)), pyo.Var(bounds=(0, 1))
    m.z = pyo.Var(bounds=(0, None))
    m.obj = pyo.Objective(expr=m.x * m.y - m.z if sense == pyo.minimize else m.x * m.y + m.z, sense=sense)
    if cap is not None:
        m.cap = pyo.Constraint(expr=m.z + m.y <= cap)
    return m


# ---------------------------------------------------------------- unbounded
@pytest.mark.parametrize("sense", [pyo.minimize, pyo.maximize])
def test_unbounded_relaxed_dual_direction_is_reported_unbounded(sense):
    m = _bilinear_minus_z(sense)
    r = gop(m)
    res = r.varopt_result
    assert res.status == "unbounded"
    assert str(r.solver.termination_condition) == "unbounded"
    want = -math.inf if sense == pyo.minimize else math.inf
    assert res.objective == want
    assert res.info["unbounded_ray"] == {"z": pytest.approx(res.info["unbounded_ray"]["z"])}
    assert res.info["unbounded_ray"]["z"] > 0
    assert m.z.value is None  # nothing loaded
    # the message speaks of the user's objective: a maximised one increases (it said "decreases" for both)
    assert ("increases without bound" if sense == pyo.maximize else "decreases without bound") in res.message


def test_unbounded_lp_in_the_primal_block():
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1], bounds=(0, None))
    m.obj = pyo.Objective(expr=-m.x[0] - m.x[1])
    m.c = pyo.Constraint(expr=m.x[0] - m.x[1] <= 1)
    res = gop(m).varopt_result
    assert res.status == "unbounded" and res.objective == -math.inf
    # the certificate: a feasible ray of descent (checked independently here)
    d = np.array([res.info["unbounded_ray"].get(f"x[{i}]", 0.0) for i in range(2)])
    assert d.min() >= 0 and d[0] - d[1] <= 1e-12 and -d.sum() < 0


def _along_ray(m, res, s):
    """The model's objective and largest row violation at the unbounded-from point moved s along the ray."""
    ray, z0 = res.info["unbounded_ray"], res.info["unbounded_from"]
    for v, x0 in zip(m.component_data_objects(pyo.Var), z0):
        v.set_value(float(x0) + s * ray.get(v.name, 0.0), skip_validation=True)
    viol = 0.0
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        viol = max(viol, (pyo.value(c.lower) - body) if c.lower is not None else 0.0,
                   (body - pyo.value(c.upper)) if c.upper is not None else 0.0)
    return pyo.value(m.obj), viol


@pytest.mark.parametrize("case", ["free", "row", "halfline", "form"])
def test_unbounded_along_negative_curvature_is_reported_unbounded(case):
    """Outside GOP's class the objective may fall along a direction of negative curvature; the
    certificate (a feasible point and a ray, unbounded.py) is checked here on the user's model."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, None) if case in ("halfline", "form") else (None, None))
    m.y = pyo.Var(bounds=(0, 1) if case != "form" else (0, None))
    if case == "free":
        m.obj = pyo.Objective(expr=-m.x ** 2 + m.y)
    elif case == "row":
        m.obj = pyo.Objective(expr=-m.x ** 2 + 3 * m.x + m.x * m.y)
        m.c = pyo.Constraint(expr=m.x + m.y <= 3)
    elif case == "halfline":
        m.obj = pyo.Objective(expr=m.x * m.y - m.x ** 2)
    else:  # convex in x and in y, concave along x = y
        m.obj = pyo.Objective(expr=m.x ** 2 - 3 * m.x * m.y + m.y ** 2)
        m.c = pyo.Constraint(expr=m.x - m.y == 0)
    r = gop(m, time_limit=30, mode="tree")      # outside GOP's class: the tree is the user's choice
    res = r.varopt_result
    assert res.status == "unbounded" and str(r.solver.termination_condition) == "unbounded"
    assert res.objective == -math.inf and m.x.value is None
    f = [_along_ray(m, res, s) for s in (0.0, 10.0, 100.0, 1000.0)]
    assert all(viol <= 1e-9 for _, viol in f)
    assert f[0][0] > f[1][0] > f[2][0] > f[3][0] and f[3][0] < -1e4


def test_unbounded_odd_cycle_is_reported_without_warnings():
    """max x0 x1 + x1 x2 + x0 x2 over x >= 0, x0 - x1 <= 1: no biconvex partition, unbounded along
    x = (1, 1, 1). The root LP's point lies far out on the unbounded box; evaluating it must not
    overflow into RuntimeWarnings (issue 11: none on ordinary models)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0, None))
    m.obj = pyo.Objective(expr=m.x[0] * m.x[1] + m.x[1] * m.x[2] + m.x[0] * m.x[2], sense=pyo.maximize)
    m.c = pyo.Constraint(expr=m.x[0] - m.x[1] <= 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = gop(m, time_limit=30, mode="tree")
    res = r.varopt_result
    assert res.status == "unbounded" and res.objective == math.inf
    f = [_along_ray(m, res, s) for s in (0.0, 10.0, 100.0)]
    assert all(viol <= 1e-9 for _, viol in f) and f[0][0] < f[1][0] < f[2][0]


def test_concave_objective_bounded_by_a_row_is_not_unbounded():
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.obj = pyo.Objective(expr=-m.x ** 2)
    m.c = pyo.Constraint(expr=m.x ** 2 <= 4)
    res = gop(m).varopt_result
    assert res.status == "optimal" and res.objective == pytest.approx(-4.0, abs=1e-6)


def test_bounded_with_an_implied_bound_is_not_unbounded():
    # z has no upper bound of its own, but z + y <= 3 bounds it: optimum -3 at y = 0, z = 3
    m = _bilinear_minus_z(cap=3.0)
    res = gop(m).varopt_result
    assert res.status == "optimal" and res.objective == pytest.approx(-3.0, abs=1e-8)


def test_missing_bound_on_a_bounded_problem_keeps_the_error():
    # x and y are free but x**2 + y**2 keeps the objective bounded: no ray certificate, so no "unbounded" status;
    # and x y with both factors free gives the incumbent cutoff no one-variable estimate (objective_bounds.py)
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(), pyo.Var()
    m.s, m.t = pyo.Var(bounds=(0, 1)), pyo.Var(bounds=(0, 1))
    m.obj = pyo.Objective(expr=m.x * m.y + m.x ** 2 + m.y ** 2 - m.s * m.t)
    with pytest.raises(ModelStructureError, match="bound"):
        gop(m)


def test_free_variable_bounded_by_the_incumbent_cutoff_is_solved():
    # z is free but z**2 keeps the objective bounded: the cutoff f <= UB of an incumbent bounds z through
    # z^2 + x z >= z^2 - |z| (x in [-1, 1]); refused before as missing a bound. min: x = -1, y = 1, z = 1/2
    m = pyo.ConcreteModel()
    m.x, m.y, m.z = pyo.Var(bounds=(-1, 1)), pyo.Var(bounds=(0, 1)), pyo.Var()
    m.obj = pyo.Objective(expr=m.x * m.y + m.x * m.z + m.z ** 2)
    res = gop(m).varopt_result
    assert res.status == "optimal"
    assert pyo.value(m.obj) == pytest.approx(-1.25, abs=1e-6)
    assert res.lower_bound <= -1.25 + 1e-6


# ---------------------------------------------------------------- bad inputs
def test_non_biconvex_product_is_named():
    m = pyo.ConcreteModel()
    m.a, m.b, m.c = (pyo.Var(bounds=(-1, 1)) for _ in range(3))
    m.obj = pyo.Objective(expr=m.a * m.b + m.b * m.c + m.a * m.c)
    for mode in ("gop", "auto"):           # refused, naming the products (issue 11's bad-input rule)
        with pytest.raises(ModelStructureError, match="odd cycle") as e:
            gop(m, mode=mode)
        assert "a*b" in str(e.value) and "b*c" in str(e.value) and "a*c" in str(e.value)
    assert "mode='tree'" in str(e.value)
    assert all(v.value is None for v in (m.a, m.b, m.c))
    # the tree, asked for, certifies it (docs/gop.md §8b) and keeps the named reason
    r = gop(m, mode="tree")
    res = r.varopt_result
    assert res.status == "optimal" and "odd cycle" in res.info["not_biconvex"]
    assert pyo.value(m.obj) == pytest.approx(-1.0, abs=1e-6)  # -1: two of a, b, c equal, the third opposite
    assert res.lower_bound <= -1.0 + 1e-9


def test_infeasible_model_has_no_certificate():
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(bounds=(0, 1)), pyo.Var(bounds=(0, 1))
    m.obj = pyo.Objective(expr=m.x * m.y)
    m.c = pyo.Constraint(expr=m.x * m.y >= 2)  # x*y <= 1 on the box
    t0 = time.perf_counter()
    r = gop(m, time_limit=30)
    res = r.varopt_result
    assert time.perf_counter() - t0 < 60  # never a hang
    assert res.status == "infeasible" and res.x is None and res.objective is None
    assert str(r.solver.termination_condition) == "infeasible"
    assert not pyo.check_optimal_termination(r)
    assert m.x.value is None  # nothing loaded
    # no optimality claim: no finite bounds on an optimal value
    assert res.upper_bound is None or not math.isfinite(res.upper_bound)
    assert res.lower_bound is None or not math.isfinite(res.lower_bound)


def test_nan_data_names_the_input():
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(bounds=(0, 1)), pyo.Var(bounds=(0, 1))
    m.p = pyo.Param(initialize=float("nan"), mutable=True)
    m.obj = pyo.Objective(expr=m.p * m.x * m.y + m.x)
    with pytest.raises(InputDataError, match="NaN|nan") as e:
        gop(m)
    assert "obj" in str(e.value) or "objective" in str(e.value)


# ---------------------------------------------------------------- no RuntimeWarnings
def _models():
    m1 = _bilinear_minus_z(cap=3.0)
    m2 = pyo.ConcreteModel()  # the convex QP of the issue, free variables
    m2.x = pyo.Var(range(3))
    m2.obj = pyo.Objective(expr=(m2.x[0] - 1) ** 2 + 2 * (m2.x[1] + .5) ** 2 + (m2.x[2] - 3) ** 2 + 0.5 * m2.x[0] * m2.x[1])
    m2.c = pyo.Constraint(expr=sum(m2.x.values()) <= 2)
    m3 = _bilinear_minus_z()  # unbounded
    m4 = B.bgmm_pyomo(**B.MINIMAL_DATA, family="point")
    m5 = pyo.ConcreteModel()  # x unbounded above, bounded by x + s == 2
    m5.x, m5.y, m5.s = pyo.Var(bounds=(0, None)), pyo.Var(bounds=(0, 2)), pyo.Var(bounds=(0, None))
    m5.obj = pyo.Objective(expr=m5.x * m5.y - m5.x - m5.y)
    m5.c = pyo.Constraint(expr=m5.x + m5.s == 2)
    m6 = pyo.ConcreteModel()  # a free relaxed-dual variable inside a square, no starting values
    m6.x, m6.y, m6.z = pyo.Var(bounds=(-1, 1)), pyo.Var(bounds=(0, 1)), pyo.Var(bounds=(None, 5))
    m6.obj = pyo.Objective(expr=m6.x * m6.y + (m6.y + m6.z - 1) ** 2 + m6.x)
    return [m1, m2, m3, m4, m5, m6]


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_no_runtime_warnings_on_ordinary_models():
    for m in _models():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res = gop(m, time_limit=60).varopt_result
        assert res.status in ("optimal", "unbounded")


def test_a_partition_that_joins_the_factors_of_a_product_is_named_as_the_cause():
    """``partition=['x', 'y']`` puts both factors of ``x[0]*y[0]`` in the primal block; the error read "the products
    partition option puts x[0] in the primal block, ... and x[0]*y[0] form an odd cycle" (there is no cycle)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), bounds=(0, 2))
    m.y = pyo.Var(range(2), bounds=(0, 2))
    m.obj = pyo.Objective(expr=m.x[0] * m.y[0] - m.x[1] * m.y[1] + m.x[0] - m.y[1])
    with pytest.raises(ModelStructureError) as e:
        gop(m, partition=["x", "y"])
    msg = str(e.value)
    assert "odd cycle" not in msg and "the products partition" not in msg
    assert "partition option puts x[0] in the primal block" in msg and "x[0]*y[0] is not convex" in msg
    assert gop(m, partition="y").varopt_result.status == "optimal"  # a partition that splits the products


# ---------------------------------------------------------------- numerical
def test_failed_relaxations_leaving_the_gap_open_give_status_numerical_with_the_point_loaded(monkeypatch):
    """Node relaxations the LP layer cannot solve (here: every node below the root, as on MINLPLib's ex14_1_9 with
    4.5e6 x exp(-7548/x)) leave the tree without nodes and the gap open. The incumbent is feasible and the bounds
    valid, so the status is ``numerical`` (Pyomo warning/other, the point loaded; it was ``error`` with nothing
    loaded), and the loaded point evaluates to the reported objective."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from gop_instances import get
    from varopt.solvers.gop import tree as TREE
    orig = TREE.GopTree._solve_node
    calls = [0]

    def fail_below_root(self, *a, **k):
        calls[0] += 1
        if calls[0] == 1:
            return orig(self, *a, **k)
        self.n_lp_failed += 1
        return "failed", -math.inf, None

    monkeypatch.setattr(TREE.GopTree, "_solve_node", fail_below_root)
    monkeypatch.setattr(TREE.GopTree, "_widest", lambda self, *a: None)  # a failed box closes, it is not split
    m = get("ex5_2_4").build()   # its root relaxation does not close the gap (59 nodes without the patch)
    r = gop(m, mode="tree")
    res = r.varopt_result
    assert res.status == "numerical", (res.status, res.message)
    assert "could not be solved" in res.message and res.info["failed_relaxations"] >= 2
    assert r.solver.status == pyo.SolverStatus.warning
    assert r.solver.termination_condition == pyo.TerminationCondition.other
    assert not pyo.check_optimal_termination(r)
    obj = next(m.component_data_objects(pyo.Objective, active=True))
    assert res.lower_bound < res.upper_bound - 1.0      # the gap is open
    assert res.lower_bound <= -450.0 + 1e-6             # a valid bound (optimum -450, SCIP and this collection)
    assert abs(pyo.value(obj) - res.objective) <= 1e-9 * max(1.0, abs(res.objective))
    for c in m.component_data_objects(pyo.Constraint, active=True):
        v = pyo.value(c.body)
        assert (c.lower is None or v >= pyo.value(c.lower) - 1e-6) and (c.upper is None or v <= pyo.value(c.upper) + 1e-6)
