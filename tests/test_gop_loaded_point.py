"""The point gop loads evaluates in the user's model (issue: "the loaded point evaluates").

Certified optima with exact zeros (``phi = 0`` where the model has ``phi*log(phi)``) are moved
strictly inside the domain of every term, within the gap tolerance of the certified value, and
the user's own evaluation (Pyomo ``value()``, CVXPY ``.value``) is the reference.
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

import varopt  # noqa: F401
from varopt.formulations import bgmm as B
from varopt.program import AtomGroup, Constraint, Expression, Program
from varopt.program.evaluable import evaluable_point

pyo = pytest.importorskip("pyomo.environ")


def entropy_model():
    """min sum_i phi_i (c_i - mu)^2 + 0.01 sum_i phi_i log(phi_i), sum phi = 1: the optimum puts
    (numerically) all mass on one i, the others are exactly 0 in the certified point."""
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 3)
    m.phi = pyo.Var(m.I, bounds=(0, 1))
    m.mu = pyo.Var(bounds=(-2, 2))
    c = [3.0, -1.0, 2.0, -2.0]
    m.obj = pyo.Objective(expr=sum(m.phi[i] * (c[i] - m.mu) ** 2 for i in m.I)
                          + 0.01 * sum(m.phi[i] * pyo.log(m.phi[i]) for i in m.I))
    m.s = pyo.Constraint(expr=sum(m.phi[i] for i in m.I) == 1)
    return m


def test_hand_written_entropy_model_evaluates():
    m = entropy_model()
    res = pyo.SolverFactory("gop").solve(m).varopt_result
    assert res.status == "optimal"
    phi = np.array([m.phi[i].value for i in m.I])
    assert np.all(phi > 0)  # strictly inside the domain of phi*log(phi)
    val = pyo.value(m.obj)  # would raise "math domain error" at phi = 0
    tol = 1e-6 * max(abs(res.objective), 1e-10) + 1e-9
    assert val == pytest.approx(res.objective, abs=tol)
    assert res.lower_bound <= val + tol
    assert abs(sum(phi) - 1.0) <= 1e-12
    assert "moved into the domain" in res.info["loaded_point"]


def test_bgmm_point_mass_pyomo_and_cvxpy_evaluate():
    d = B.MINIMAL_DATA
    m = B.bgmm_pyomo(**d, family="point")
    res = pyo.SolverFactory("gop").solve(m, rel_gap=1e-7, time_limit=100).varopt_result
    assert res.status == "optimal"
    (obj,) = m.component_data_objects(pyo.Objective, active=True)
    val = pyo.value(obj)
    assert val == pytest.approx(res.objective, rel=1e-7, abs=1e-9)
    # the independent formula (0 log 0 = 0) agrees with the user's evaluation
    ref = B.neg_elbo(B.pyomo_params(m), np.array(d["x"]), "point", d["prior_precision"], d["variance"])
    assert val == pytest.approx(ref, rel=1e-9)
    phis = np.array([v.value for v in m.phi.values()])
    assert phis.min() > 0
    cp = pytest.importorskip("cvxpy")
    prob = B.bgmm_cvxpy(**d, family="point")
    v = prob.solve(method="gop", rel_gap=1e-7, time_limit=100)
    assert prob.varopt_result.status == "optimal"
    ov = prob.objective.value
    assert ov is not None and math.isfinite(ov)
    assert ov == pytest.approx(v, rel=1e-7, abs=1e-9)
    assert ov == pytest.approx(val, rel=1e-6)
    assert min(float(np.min(x.value)) for x in prob.variables() if x.name().startswith("phi")) > 0
    del cp


def test_evaluable_point_moves_neglog_argument_and_keeps_constraints():
    # w * (-log p) + p with w = 0, p = 0 at the given point; w + p <= 1
    A = sp.csr_matrix(np.array([[0.0, 1.0]]))
    obj = Expression(2, 0.0, np.array([0.0, 1.0]), None, [AtomGroup("neglog", [1.0], A, [0.0], mult=[0])])
    con = Constraint("c", Expression(2, 0.0, np.array([1.0, 1.0])), -np.inf, 1.0)
    prog = Program(["w", "p"], [0.0, 0.0], [1.0, 1.0], obj, [con])
    x = np.array([0.0, 0.0])
    z, note = evaluable_point(prog, x, 1e-9)
    assert z[1] > 0 and prog.max_violation(z) == 0.0
    assert abs(prog.objective.value(z)) <= 1e-9  # the closure value 0 * (-log 0) = 0 at x
    assert math.isfinite(-math.log(z[1]))  # the user's -log(p) evaluates
    assert note and "moved" in note
    # already inside: unchanged (same object), no note
    y = np.array([0.5, 0.25])
    assert evaluable_point(prog, y, 1e-9) == (y, None) or evaluable_point(prog, y, 1e-9)[0] is y


def test_evaluable_point_reports_when_no_interior_exists():
    A = sp.csr_matrix(np.array([[1.0]]))
    obj = Expression(1, 0.0, np.zeros(1), None, [AtomGroup("xlogx", [1.0], A, [0.0])])
    prog = Program(["phi"], [0.0], [0.0], obj)  # phi fixed at 0: phi*log(phi) cannot evaluate
    z, note = evaluable_point(prog, np.zeros(1), 1e-9)
    assert z[0] == 0.0 and "no point strictly inside" in note


# ---------------------------------------------------------------- the suite-wide check
def test_every_pyomo_gop_solve_is_checked():
    from gop_checks import CHECKED
    from varopt.frontends.pyomo_plugin import VaroptPyomoSolver
    assert getattr(VaroptPyomoSolver.solve, "gop_checked", False)
    before = CHECKED["count"]
    pyo.SolverFactory("gop").solve(entropy_model())
    assert CHECKED["count"] == before + 1


def test_the_check_fails_on_a_wrong_objective_and_on_a_domain_error():
    from gop_checks import check_loaded_objective
    m = entropy_model()
    for i in m.I:
        m.phi[i].value = 0.25
    m.mu.value = 0.0
    good = pyo.value(m.obj)
    fake = SimpleNamespace(varopt_result=SimpleNamespace(objective=good, options={}), varopt_loaded=True)
    check_loaded_objective(m, fake)
    fake.varopt_result.objective = good + 1e-3
    with pytest.raises(AssertionError, match="differs"):
        check_loaded_objective(m, fake)
    m.phi[0].value = 0.0
    fake.varopt_result.objective = good
    with pytest.raises(AssertionError, match="does not evaluate"):
        check_loaded_objective(m, fake)
