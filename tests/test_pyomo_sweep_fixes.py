"""Regressions of the Pyomo form sweep (docs/atoms_coverage.md): each failed before its fix."""
import pytest

pyo = pytest.importorskip("pyomo.environ")

import varopt  # noqa: E402,F401
from varopt.errors import ModelStructureError  # noqa: E402


def _model():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-2, 2))
    return m


def test_gdp_disjunction_is_refused_not_dropped():
    """The disjunct's constraints were never walked: gop reported 0 at x = 0.2, outside both alternatives (the optimum
    over x <= -1 or x >= 1 is 0.64)."""
    from pyomo.gdp import Disjunction
    m = _model()
    m.d = Disjunction(expr=[[m.x <= -1], [m.x >= 1]])
    m.o = pyo.Objective(expr=(m.x - 0.2) ** 2)
    for method in ("gop", "majorize"):
        with pytest.raises(ModelStructureError, match="GDP Disjunction 'd' is not supported"):
            pyo.SolverFactory(method).solve(m)
    # after gdp.bigm the choice is a binary variable: refused by its domain
    pyo.TransformationFactory("gdp.bigm").apply_to(m, bigM=10)
    with pytest.raises(ModelStructureError, match="discrete domain Binary"):
        pyo.SolverFactory("gop").solve(m)


def test_piecewise_sos2_is_refused_not_dropped():
    """Piecewise's SOS2 set was dropped: gop solved the convex hull of the breakpoints. With f = (0, 2, 0, 2) at x = 0, 1,
    2, 3 and min y - x the hull gives -2 (at x = 2, y = 0) and so does the function, but min y + (x - 1.5)^2 over the
    hull is 0.25 at y = 0 between breakpoints where f is 1."""
    m = _model()
    m.y = pyo.Var()
    m.x.setlb(0)
    m.x.setub(3)
    m.pw = pyo.Piecewise(m.y, m.x, pw_pts=[0, 1, 2, 3], f_rule=[0, 2, 0, 2], pw_constr_type="EQ")
    m.o = pyo.Objective(expr=m.y + (m.x - 1.5) ** 2)
    with pytest.raises(ModelStructureError, match="SOS constraint 'pw.SOS2_sosconstraint' is not supported"):
        pyo.SolverFactory("gop").solve(m)


def test_expr_if_is_refused_by_name():
    """Walking Expr_if's condition raised Pyomo's NotImplementedError (an inequality has no getname())."""
    m = _model()
    m.o = pyo.Objective(expr=pyo.Expr_if(IF=m.x >= 0, THEN=m.x, ELSE=-m.x))
    with pytest.raises(ModelStructureError, match="the operation 'Expr_if' of variables is not supported"):
        pyo.SolverFactory("gop").solve(m)
