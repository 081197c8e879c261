"""Bounds from the incumbent cutoff through a separable quadratic lower estimate (objective_bounds.py, docs/gop.md §8k).

A nonconvex model whose product variables have no declared bound, ``0.1 ||x - 0.5||^2 + x0 x1 + ...`` with ``x1``
free, was refused ("GOP needs finite bounds on x[1]") where SCIP proves an optimum: the cut ``f <= UB`` of an
incumbent bounds every variable of a coercive objective. References: the exact objective at random points
(validity: no point with ``f <= UB`` is cut off), SCIP (``scip_direct``, gap 1e-9) for the optima, and
unbounded models that must stay unbounded.
"""

import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varopt  # noqa: F401  (registers the Pyomo solver 'gop')
from varopt.errors import ModelStructureError
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.solvers.gop.objective_bounds import ObjectiveBounds, _sublevel
from varopt.solvers.gop.relax import Lifted

# flows bounded jointly by a row; the quality q is free, bounded only by q^2 + q f0 <= 20 with f0 in [1, 10]
from gop_free_products import pooling_row  # noqa: E402  (benchmarks/, on the path by conftest)


def _lifted(model):
    out = compile_pyomo(model)
    prog = out[0] if isinstance(out, tuple) else out
    return Lifted(getattr(prog, "program", prog))


def _value(lf, z, r=0):
    """Row ``r`` of the program at ``z`` (the objective for r = 0), from the exact lifted point."""
    return float((lf.R[r] @ lf.lift(z))[0] + lf.const[r])


def _family(lin, bil, sq, free, lo=-3.0, hi=3.0):
    """``lin . x + b0 x0 x1 + b1 x1 x2 + sum sq_i (x_i - 0.5)^2`` over ``[lo, hi]^3``, the upper bounds of ``free`` left out."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(lo, hi))
    for i in free:
        m.x[i].setub(None)
    m.o = pyo.Objective(expr=sum(lin[i] * m.x[i] for i in range(3)) + bil[0] * m.x[0] * m.x[1]
                        + bil[1] * m.x[1] * m.x[2] + sum(sq[i] * (m.x[i] - 0.5) ** 2 for i in range(3)))
    return m


@settings(max_examples=60, deadline=None)
@given(lin=st.lists(st.floats(-3, 3), min_size=3, max_size=3), bil=st.lists(st.floats(-2, 2), min_size=2, max_size=2),
       sq=st.lists(st.floats(0.02, 1), min_size=3, max_size=3), free=st.sets(st.integers(0, 2), min_size=1),
       seed=st.integers(0, 2**31), slack=st.floats(0, 20))
def test_no_point_with_objective_at_most_the_cutoff_is_cut_off(lin, bil, sq, free, seed, slack):
    """Every sampled point of the box with ``f <= UB`` lies in the derived bounds (and some bound is finite when only
    one variable of each product is free, so the test cannot pass by deriving nothing)."""
    lf = _lifted(_family(lin, bil, sq, free))
    ob = ObjectiveBounds(lf)
    rng = np.random.default_rng(seed)
    lb, ub = lf.program.lb.astype(float), lf.program.ub.astype(float)
    # points of the box, the free coordinates spread over several scales (the bounds are tens to hundreds wide)
    Z = rng.uniform(-3, 3, size=(400, 3))
    for i in free:
        Z[:, i] = -3 + np.abs(rng.standard_cauchy(400)) * rng.choice([1, 10, 100], 400)
    f = np.array([_value(lf, z) for z in Z])
    UB = float(np.min(f)) + slack
    bl, bu, empty = ob.tighten(lb, ub, cutoff=UB)
    assert not empty
    inside = f <= UB
    assert inside.any()
    for z in Z[inside]:
        assert np.all(z >= bl) and np.all(z <= bu), (z, bl, bu, UB)
    if not ({0, 1} <= free or {1, 2} <= free):
        assert np.all(np.isfinite(bu)), (bl, bu)


@settings(max_examples=60, deadline=None)
@given(a=st.floats(0.1, 3), c=st.floats(-3, 3), rhs=st.floats(0.5, 10), seed=st.integers(0, 2**31))
def test_a_row_bounds_its_free_variable(a, c, rhs, seed):
    """``a x^2 + c x y <= rhs`` with ``y in [-1, 1]`` bounds a free ``x``; every sampled point of the row lies
    inside (FBBT alone, bounding ``x y`` by the box, leaves ``x`` free)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.y = pyo.Var(bounds=(-1, 1))
    m.c = pyo.Constraint(expr=a * m.x ** 2 + c * m.x * m.y <= rhs)
    m.o = pyo.Objective(expr=m.x * m.y)
    lf = _lifted(m)
    bl, bu, empty = ObjectiveBounds(lf).tighten(lf.program.lb.astype(float), lf.program.ub.astype(float))
    assert not empty
    assert np.all(np.isfinite(bl[:2])) and np.all(np.isfinite(bu[:2]))
    rng = np.random.default_rng(seed)
    names = list(lf.program.names)
    ix, iy = names.index("x"), names.index("y")
    for _ in range(300):
        z = np.zeros(lf.n)
        z[ix], z[iy] = rng.normal() * 10, rng.uniform(-1, 1)
        if _value(lf, z, 1) <= rhs:
            assert bl[ix] <= z[ix] <= bu[ix], (z, bl, bu)


@given(A=st.floats(-2, 2), b=st.floats(-5, 5), k=st.floats(-5, 5), t=st.floats(-50, 50))
def test_sublevel_interval_holds_every_point(A, b, k, t):
    """``A t^2 + b t + k <= 0`` implies ``t`` in :func:`_sublevel`'s interval (and the interval is None only when
    the set is empty)."""
    iv = _sublevel(A, b, k)
    if A * t * t + b * t + k <= 0:
        assert iv is not None and iv[0] - 1e-9 * max(1, abs(t)) <= t <= iv[1] + 1e-9 * max(1, abs(t)), (A, b, k, t, iv)


def _scip(build):
    pytest.importorskip("pyscipopt")
    m = build()
    r = pyo.SolverFactory("scip_direct").solve(m, options={"limits/gap": 1e-9})
    assert str(r.solver.termination_condition) == "optimal"
    return pyo.value(next(m.component_data_objects(pyo.Objective, active=True)))


def _rnd554():
    """Like seed 554 of the random family: x1 has no upper bound; the rows bound it only through the objective cutoff
    (the exponent of c2 is small: with exp(1.39 x1) at the optimum x1 = 41, past SCIP's infinity 1e20, SCIP reports
    -162.32 at x1 = 35 where x1 = 41 gives -165.925)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(-3, 3))
    m.x[1].setub(None)
    m.x[2].setlb(0.05)
    m.c1 = pyo.Constraint(expr=-1.797 * (1.13 * m.x[1] - 0.69) ** 2 + 1.352 * pyo.exp(1.39 * m.x[0] + 0.17) <= 1.48)
    m.c2 = pyo.Constraint(expr=-1.737 * pyo.exp(0.139 * m.x[1] - 0.33) + 1.02 * m.x[2] ** -1 <= 2.54)
    m.o = pyo.Objective(expr=0.3 * m.x[0] - 1.2 * m.x[1] + 0.4 * m.x[2] + 1.5 * m.x[0] * m.x[1] - 0.8 * m.x[1] * m.x[2]
                        + 0.1 * sum((m.x[i] - 0.5) ** 2 for i in range(3)))
    return m


def _mf(X, lam):
    """Rank-1 regularised factorisation ``||X - u v^T||^2 + lam (|u|^2 + |v|^2)``, u and v free (CVXPY cannot state it)."""
    n = X.shape[0]
    m = pyo.ConcreteModel()
    m.u = pyo.Var(range(n))
    m.v = pyo.Var(range(n))
    m.o = pyo.Objective(expr=sum((X[i, j] - m.u[i] * m.v[j]) ** 2 for i in range(n) for j in range(n))
                        + lam * sum(m.u[i] ** 2 + m.v[i] ** 2 for i in range(n)))
    return m


def test_factorisation_with_free_factors_matches_the_svd():
    """Refused before ("needs finite bounds on u[0]"). Reference: a balanced factor pair has ``lam (|u|^2 + |v|^2) =
    2 lam sigma(u v^T)``, so the optimum is the top singular value soft-thresholded: ``sum_{i >= 2} sigma_i^2 +
    2 lam sigma_1 - lam^2`` (Eckart-Young; ``sigma_1 > lam``)."""
    X = np.array([[2.0, 0.3], [0.1, 0.5]])
    lam = 0.1
    s = np.linalg.svd(X, compute_uv=False)
    ref = float(np.sum(s[1:] ** 2) + 2 * lam * s[0] - lam ** 2)
    m = _mf(X, lam)
    r = pyo.SolverFactory("gop").solve(m, time_limit=30).varopt_result
    assert r.status == "optimal", r.message
    assert abs(pyo.value(m.o) - ref) <= 1e-5 * max(1.0, abs(ref)), (pyo.value(m.o), ref)
    assert r.lower_bound <= ref + 1e-6


@pytest.mark.parametrize("build", [_rnd554, pooling_row()[0]], ids=["free-product-variable", "pooling-row"])
def test_refused_before_now_certified_at_scips_optimum(build):
    ref = _scip(build)
    m = build()
    res = pyo.SolverFactory("gop").solve(m, time_limit=30)
    r = res.varopt_result
    assert r.status == "optimal", r.message
    assert abs(pyo.value(m.o) - ref) <= 1e-5 * max(1.0, abs(ref)), (pyo.value(m.o), ref)
    assert r.lower_bound <= ref + 1e-6 * max(1.0, abs(ref))


def _free_factor():
    """``min x y - z``, ``x, z in [0, 1]``, ``y`` free: unbounded along ``y -> -inf`` at ``x = 1`` (no cutoff bounds y:
    its estimate is linear)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.y = pyo.Var()
    m.z = pyo.Var(bounds=(0, 1))
    m.o = pyo.Objective(expr=m.x * m.y - m.z)
    return m, "y"


def _runaway_other():
    """``min -x y + 0.1 y^2 - w``, ``w >= 0``: the cutoff bounds y, but w runs away: unbounded along ``w``."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.y = pyo.Var()
    m.w = pyo.Var(bounds=(0, None))
    m.o = pyo.Objective(expr=-m.x * m.y + 0.1 * m.y ** 2 - m.w)
    return m, "w"


@pytest.mark.parametrize("build", [_free_factor, _runaway_other], ids=["free-factor", "runaway-other"])
def test_truly_unbounded_model_is_still_reported_unbounded(build):
    m, var = build()
    r = pyo.SolverFactory("gop").solve(m, mode="tree", time_limit=20).varopt_result
    assert r.status == "unbounded"
    assert var in r.info["unbounded_ray"]


def test_maximisation_message_names_the_cause_in_the_users_sense():
    """``max x y - y^2 + log(z)``: ``log(z)`` grows without bound (the model is unbounded above); the cutoff would bound
    ``y`` if ``z`` had bounds. The refusal names ``z`` and says "above"; it named only ``y`` before."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.y = pyo.Var()
    m.z = pyo.Var()
    m.o = pyo.Objective(expr=m.x * m.y + pyo.log(m.z) - m.y ** 2, sense=pyo.maximize)
    with pytest.raises(ModelStructureError) as e:
        pyo.SolverFactory("gop").solve(m, mode="tree", time_limit=20)
    msg = str(e.value)
    assert "terms in z are unbounded above" in msg and "declare bounds on z" in msg, msg
    assert "below" not in msg, msg


def test_maximised_relaxation_message_says_above():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.y = pyo.Var()
    m.z = pyo.Var(bounds=(0, 2))
    m.o = pyo.Objective(expr=m.x * m.z - m.y ** 2 + pyo.exp(m.y), sense=pyo.maximize)
    with pytest.raises(ModelStructureError) as e:
        pyo.SolverFactory("gop").solve(m, mode="tree", time_limit=20)
    assert "unbounded above (the objective is maximised)" in str(e.value), str(e.value)


def test_wide_exponential_box_is_not_certified_wrong():
    """Random-family seed 182 with ``x0 <= 40``: a tangent of ``exp(1.25 x0 - 0.42)`` with slope 9e9 in the node LP
    made HiGHS report max x0 = 17.7 "optimal" (x0 = 40 is feasible), and the tree certified -76.626; the cutoff bounds
    of a free x0 give such boxes. Both rows hold on the whole box, so the reference is the quadratic objective's
    minimum: x0 in closed form on a grid of (x1, x2) that contains the box's vertices."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(-3, 3))
    m.x[0].setub(40)
    m.x[2].setlb(0.05)
    m.c1 = pyo.Constraint(expr=-0.9467 * pyo.exp(1.25 * m.x[0] - 0.42) <= 2.5)
    m.c2 = pyo.Constraint(expr=1.9627 * m.x[2] ** -1 >= -3.44)
    lin, b0, b1 = (-1.59, 0.04, 0.47), 1.47, 0.35

    def f(x0, x1, x2):
        return (lin[0] * x0 + lin[1] * x1 + lin[2] * x2 + b0 * x0 * x1 + b1 * x1 * x2
                + 0.1 * ((x0 - 0.5) ** 2 + (x1 - 0.5) ** 2 + (x2 - 0.5) ** 2))
    m.o = pyo.Objective(expr=f(m.x[0], m.x[1], m.x[2]))
    x1, x2 = np.meshgrid(np.linspace(-3, 3, 301), np.linspace(0.05, 3, 296))
    x0 = np.clip(-(lin[0] + b0 * x1 - 0.1) / 0.2, -3, 40)   # df/dx0 = 0, clipped to the box (f convex in x0)
    ref = float(np.min(f(x0, x1, x2)))
    r = pyo.SolverFactory("gop").solve(m, time_limit=30).varopt_result
    assert r.status == "optimal"
    assert pyo.value(m.o) == pytest.approx(ref, rel=1e-6), (pyo.value(m.o), ref)
