"""gop on models written the way MINLPLib writes them (a free ``objvar``, ``objvar == f(x)`` rows).

Each model is a small one re-derived by hand to reproduce what a MINLPLib instance exposed; the
optimum is derived in the test (closed form), so a certificate is checked against an independent value.
"""
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401


@pytest.mark.parametrize("presolve", [False, True])
@pytest.mark.parametrize("a, b", [((9.0, 9.0, 9.0), (15.0, 12.0, 9.0)), ((4.0, 7.0, 11.0), (5.0, 3.0, 8.0))])
def test_convex_qp_through_an_objvar_equality_is_certified(a, b, presolve):
    # min objvar  s.t.  objvar == sum_i a_i x_i^2 - b_i x_i,  0 <= x <= 1 (MINLPLib st_cqpjk2's form).
    # The equality is not convex, so gop runs its tree; each node's tangents stopped within oa_tol of
    # every square, and the three errors times a_i left the bound 1.5e-5 under the optimum, over the
    # 1.25e-5 tolerance, for the whole time limit: the child holding the relaxation point returned it again.
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var()
    m.x = pyo.Var(range(3), bounds=(0, 1))
    m.obj = pyo.Objective(expr=m.objvar)
    m.e = pyo.Constraint(expr=m.objvar == sum(a[i] * m.x[i] * m.x[i] - b[i] * m.x[i] for i in range(3)))
    # presolve=False keeps the equality (the tree's case above); the default substitutes objvar by its
    # definition (objective_rows.py), a convex QP solved as one primal problem
    res = pyo.SolverFactory("gop").solve(m, time_limit=3, presolve=presolve)
    r = res.varopt_result
    # the unconstrained minimiser b / (2a) lies inside [0, 1] for these data
    xs = [b[i] / (2 * a[i]) for i in range(3)]
    assert all(0 < v < 1 for v in xs)
    opt = sum(a[i] * xs[i] ** 2 - b[i] * xs[i] for i in range(3))
    assert r.status == "optimal", (r.status, r.lower_bound, r.upper_bound)
    tol = 1e-6 * max(1.0, abs(opt))
    assert r.lower_bound <= opt + tol and abs(r.upper_bound - opt) <= tol
    assert pyo.value(m.obj) == pytest.approx(opt, abs=tol)


def _qpc_m0(second_row=True):
    """min objvar, objvar == 2 x1 - x1^2 - x2^2 + 4 x2 over x >= 0, x1 - 4 x2 >= -8 (and -3 x1 + x2 >= -9)."""
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var()
    m.x1 = pyo.Var(bounds=(0, None))
    m.x2 = pyo.Var(bounds=(0, None))
    m.obj = pyo.Objective(expr=m.objvar)
    m.e1 = pyo.Constraint(expr=m.x1 - 4 * m.x2 >= -8)
    if second_row:
        m.e2 = pyo.Constraint(expr=-3 * m.x1 + m.x2 >= -9)
    m.e3 = pyo.Constraint(expr=m.objvar == 2 * m.x1 - m.x1 * m.x1 - m.x2 * m.x2 + 4 * m.x2)
    return m


def test_concave_objective_bounded_only_jointly_by_rows_is_not_refused_as_unbounded():
    # min objvar, objvar == 2 x1 - x1^2 - x2^2 + 4 x2 over x >= 0, x1 - 4 x2 >= -8, -3 x1 + x2 >= -9
    # (MINLPLib st_qpc-m0). The secants of -x_i^2 need finite bounds; the two rows give x1 <= 4, x2 <= 3
    # only together, which row-by-row tightening cannot see, so the tree's first relaxation was unbounded
    # and gop raised "the relaxation is unbounded below" on a bounded program.
    m = _qpc_m0()
    res = pyo.SolverFactory("gop").solve(m, time_limit=10)
    r = res.varopt_result

    # a concave objective over a polygon is least at a vertex: (0, 0), (3, 0), (4, 3), (0, 2)
    def f(a, b):
        return 2 * a - a * a - b * b + 4 * b
    opt = min(f(a, b) for a, b in [(0, 0), (3, 0), (4, 3), (0, 2)])
    tol = 1e-6 * max(1.0, abs(opt))
    assert r.status == "optimal", (r.status, r.message)
    assert r.lower_bound <= opt + tol and abs(r.upper_bound - opt) <= tol
    assert (pyo.value(m.x1), pyo.value(m.x2)) == pytest.approx((4.0, 3.0), abs=1e-6)


def test_truly_unbounded_concave_objective_is_still_reported():
    # the same form without the second row: x1 -> inf with x2 = (x1 + 8)/4 drives the objective to -inf
    m = _qpc_m0(second_row=False)
    from varopt.errors import ModelStructureError
    try:
        res = pyo.SolverFactory("gop").solve(m, time_limit=10)
    except ModelStructureError as e:  # gop could not prove it: the refusal says unbounded
        assert "unbounded" in str(e), str(e)
    else:
        assert res.varopt_result.status == "unbounded", res.varopt_result.status


def test_constant_over_a_variable_is_certified_and_refused_only_across_zero():
    # MINLPLib `sample` writes 4/x1 + ...: a ratio column t with t x1 == 4 (x1 > 0 on its bounds); across 0 the
    # message names the term and the bound to declare
    from varopt.errors import ModelStructureError
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(100, 1000))
    m.obj = pyo.Objective(expr=m.x)
    m.c = pyo.Constraint(expr=4 / m.x <= 0.01)
    r = pyo.SolverFactory("gop").solve(m).varopt_result
    assert r.status == "optimal" and r.upper_bound == pytest.approx(400.0, rel=1e-6)
    assert r.lower_bound == pytest.approx(400.0, rel=1e-6) and pyo.value(m.c.body) <= 0.01 + 1e-9
    m.x.setlb(-1.0)
    with pytest.raises(ModelStructureError, match=r"4/x.*may be 0 or change sign.*declare bounds"):
        pyo.SolverFactory("gop").solve(m)


def test_a_large_objvar_does_not_loosen_the_feasibility_of_other_rows():
    # min objvar, objvar == 29.4 x1 + 18 x2, 0.2458 x1^2 / x2 - x1 <= -6 (MINLPLib st_e17 with its >= row
    # written as <=). The GOP incumbent check scaled its tolerance by the largest coordinate, objvar = 376, so a
    # point 9.3e-6 outside the row (variables about 8) was accepted and certified 1.15e-6 under the optimum.
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var()
    m.x1 = pyo.Var(bounds=(0, 115.8))
    m.x2 = pyo.Var(bounds=(1e-5, 30))
    m.obj = pyo.Objective(expr=m.objvar)
    m.e1 = pyo.Constraint(expr=0.2458 * m.x1 ** 2 / m.x2 - m.x1 <= -6)
    m.e2 = pyo.Constraint(expr=-29.4 * m.x1 - 18 * m.x2 + m.objvar == 0)
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    # the row is active at the optimum: x2 = 0.2458 x1^2 / (x1 - 6), and d/dx1 [29.4 x1 + 18 x2] = 0 gives
    # 29.4 (x1 - 6)^2 + 18 * 0.2458 (x1^2 - 12 x1) = 0
    a = 18 * 0.2458
    roots = np.roots([29.4 + a, -2 * 6 * 29.4 - 12 * a, 29.4 * 36])
    x1 = max(float(v.real) for v in roots if abs(v.imag) < 1e-12 and v.real > 6)
    opt = 29.4 * x1 + a * x1 ** 2 / (x1 - 6)
    tol = 1e-6 * abs(opt)
    assert r.status == "optimal", (r.status, r.message)
    assert r.lower_bound <= opt + tol and abs(r.upper_bound - opt) <= tol, (r.upper_bound, opt)
    assert pyo.value(m.e1.body) <= -6 + 1e-6 * 6


def test_tiny_boxes_whose_lp_fails_are_closed_by_their_interval_bound():
    """min x^4 - 14x^2 + 24x - y^2 over y - x <= 8, y <= x^2 + 2x - 2 (MINLPLib st_e19's structure, written in
    its objective-variable form). x**4 is lifted (q = x^2, q^2), and the boxes around the optimum shrink to
    1e-8 where HiGHS calls the node LP infeasible and phase 1 contradicts it; such a node kept its parent's
    bound, 1.5e-6 below the optimum, for every one of 5000 iterations. The interval bound of the objective over
    a failed box closes it. The optimum is checked on a fine grid: -y^2 wants y at its largest feasible value."""
    m = pyo.ConcreteModel()
    m.f = pyo.Var(initialize=0.0)
    m.x = pyo.Var(bounds=(-8, 10), initialize=0.0)
    m.y = pyo.Var(bounds=(0, 10), initialize=0.0)
    m.obj = pyo.Objective(expr=m.f)
    m.lin = pyo.Constraint(expr=m.y - m.x <= 8)
    m.quad = pyo.Constraint(expr=m.y - m.x**2 - 2 * m.x <= -2)
    m.defn = pyo.Constraint(expr=m.f == m.x**4 - 14 * m.x**2 + 24 * m.x - m.y**2)
    res = pyo.SolverFactory("gop").solve(m, max_iter=5000)
    assert str(res.solver.termination_condition) == "optimal"
    x = np.linspace(-8, 10, 2_000_001)
    ymax = np.minimum(np.minimum(10.0, x + 8), x**2 + 2 * x - 2)
    ok = ymax >= 0
    ref = float(np.min((x**4 - 14 * x**2 + 24 * x - ymax**2)[ok]))
    lo, up = res.problem.lower_bound, res.problem.upper_bound
    assert lo <= ref + 1e-9 and up >= ref - 1e-6
    assert up - lo <= 1e-6 * abs(up) + 1e-9
    assert pyo.value(m.obj) == pytest.approx(ref, rel=2e-6)
