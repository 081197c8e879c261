"""Lifted powers and divisions as users write them, checked from the outside (the loaded point, the certified
value against a grid or SCIP's optimum): each test fails without the fix it names."""
import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import ModelStructureError
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.solvers.gop.objective_rows import objective_rows


def _xy(expr, bx=(0.0, 3.0), by=(1.0, 2.0)):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=bx, initialize=1.5)
    m.y = pyo.Var(bounds=by, initialize=1.5)
    m.o = pyo.Objective(expr=expr(m.x, m.y))
    return m


def _grid(f, bx=(0.0, 3.0), by=(1.0, 2.0), n=1201):
    X, Y = np.meshgrid(np.linspace(*bx, n), np.linspace(*by, n))
    return float(np.min(f(X, Y)))


def _solve(m, **kw):
    r = pyo.SolverFactory("gop").solve(m, time_limit=10, **kw).varopt_result
    assert r.status == "optimal", (r.status, r.message)
    assert pyo.value(m.o) == pytest.approx(r.upper_bound, rel=1e-9, abs=1e-9)
    return r


@pytest.mark.parametrize("name, f", [
    ("x/y - 0.7x", lambda x, y: x / y - 0.7 * x),
    ("(x/y)**2 - x", lambda x, y: (x / y) ** 2 - x),
    ("(x/y - 1)**2 - 0.3x", lambda x, y: (x / y - 1) ** 2 - 0.3 * x),
])
def test_a_numerator_in_the_objective_is_not_substituted_by_its_ratio_row(name, f):
    """``x`` enters the objective linearly and one row only, the ratio row ``t y - x == 0`` of ``x/y``: the
    objective-row presolve took it for an objective variable, fixed it at 0 and every point completed to
    ``t = 0`` (the tree ran to its time limit with the incumbent 0)."""
    m = _xy(f)
    prog, _ = compile_pyomo(m)
    assert objective_rows(prog) is None
    r = _solve(m)
    assert r.upper_bound == pytest.approx(_grid(f), abs=1e-5)


def _scip(m):
    """SCIP's certified optimum of a copy of ``m`` (skips when pyscipopt is not installed)."""
    scip = pyo.SolverFactory("scip_direct")
    if not scip.available(exception_flag=False):
        pytest.skip("SCIP (pyscipopt) is not installed: no independent global reference")
    m2 = m.clone()
    scip.options["limits/gap"] = 1e-9
    scip.solve(m2)
    return pyo.value(m2.o)


@pytest.mark.parametrize("name, row, sense", [
    ("x**2 + y**2 <= 2", lambda x, y: x ** 2 + y ** 2 <= 2, -1),
    ("exp(x) + exp(y) <= 5", lambda x, y: pyo.exp(x) + pyo.exp(y) <= 5, -1),
    ("x**1.2 + y**1.2 <= 2", lambda x, y: x ** 1.2 + y ** 1.2 <= 2, -1),
    ("x**0.3 + y**0.3 >= 1.5", lambda x, y: x ** 0.3 + y ** 0.3 >= 1.5, 1),
])
def test_a_convex_nonlinear_row_without_connected_variables_is_certified_by_the_tree(name, row, sense):
    """A convex program with a nonlinear row is in GOP's class, but GOP's primal problems dualise every row
    and take linear ones only: mode='auto' refused it ('nonlinear in the primal block') where the tree
    certifies it. Reference: SCIP."""
    m = _xy(lambda x, y: sense * (x + 2 * y), bx=(0.0, 3.0), by=(0.0, 3.0))
    m.c = pyo.Constraint(expr=row(m.x, m.y))
    ref = _scip(m)
    r = _solve(m)
    # (SCIP's value may be bought by its row tolerance: 1.7e-6 under the optimum of x**0.3 + y**0.3 >= 1.5)
    assert r.upper_bound == pytest.approx(ref, rel=1e-5)
    assert r.lower_bound <= ref + 1e-5 * abs(ref)
    body = m.c.body()
    assert (body <= m.c.upper() + 1e-7) if m.c.has_ub() else (body >= m.c.lower() - 1e-7)


@pytest.mark.parametrize("name, f, bx, by", [
    ("1/(x*y) + x + y", lambda x, y, e, lg: 1 / (x * y) + x + y, (0.5, 3.0), (0.5, 3.0)),
    ("1/x**2 + x + y", lambda x, y, e, lg: 1 / x ** 2 + x + y, (0.5, 3.0), (0.0, 1.0)),
    ("-x/(x**2 + 1) + 0.1y", lambda x, y, e, lg: -x / (x ** 2 + 1) + 0.1 * y, (-3.0, 3.0), (0.0, 1.0)),
    ("exp(x*y) - x - y", lambda x, y, e, lg: e(x * y) - x - y, (-1.0, 1.0), (-1.0, 1.0)),
    ("-exp(-x**2) + 0.1x + y", lambda x, y, e, lg: -e(-x ** 2) + 0.1 * x + y, (-2.0, 2.0), (0.0, 1.0)),
    ("log(x**2 + 1) - 0.3x + y", lambda x, y, e, lg: lg(x ** 2 + 1) - 0.3 * x + y, (-3.0, 3.0), (0.0, 1.0)),
    ("(x*y)**1.5 - 3xy", lambda x, y, e, lg: (x * y) ** 1.5 - 3 * x * y, (0.5, 2.0), (1.0, 3.0)),
    ("(x**2)**2 - 3x**2 + y", lambda x, y, e, lg: (x ** 2) ** 2 - 3 * x ** 2 + y, (-2.0, 2.0), (0.0, 1.0)),
])
def test_products_and_polynomials_under_a_division_a_fractional_power_exp_and_log(name, f, bx, by):
    """A denominator, the base of a fractional or negative power and the argument of exp/log that are products
    of variables or polynomials are lifted to one column bounded by the declared bounds; they were refused
    (a product column was unbounded, so ``1/(x*y)`` 'may be 0'; a square was not liftable at all)."""
    m = _xy(lambda x, y: f(x, y, pyo.exp, pyo.log), bx, by)
    r = _solve(m, mode="tree")
    best = _grid(lambda X, Y: f(X, Y, np.exp, np.log), bx, by)
    assert r.lower_bound <= best + 1e-7
    assert r.upper_bound == pytest.approx(best, abs=1e-4 * max(1.0, abs(best)))


def test_a_variable_without_bounds_is_named_not_its_auxiliary_column():
    """The tree needs finite bounds on the variables of lifted terms. ``x**4`` (a square of ``q = x**2``) said
    only 'the relaxation is unbounded below'; ``x/y`` with ``x >= 0`` unbounded above named the column
    ``_aux_ratio[0]``, which the user cannot bound."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=0.5)
    m.o = pyo.Objective(expr=m.x ** 4 - 3 * m.x)
    with pytest.raises(ModelStructureError, match=r"finite bounds on x: it enters a nonlinear term"):
        pyo.SolverFactory("gop").solve(m)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(within=pyo.NonNegativeReals, initialize=0.5)
    m.y = pyo.Var(bounds=(1, 2))
    m.o = pyo.Objective(expr=m.x / m.y - m.x ** 0.5)
    with pytest.raises(ModelStructureError, match=r"finite bounds on x: it enters the term x/y") as info:
        pyo.SolverFactory("gop").solve(m)
    assert "m.x.setlb" in str(info.value) and "_aux_ratio[0].setlb" not in str(info.value)


_LIFTED = [
    lambda x, y: 1 / (x * y), lambda x, y: x / (x ** 2 + 1), lambda x, y: 1 / x ** 2, lambda x, y: pyo.exp(x * y),
    lambda x, y: pyo.exp(-x ** 2), lambda x, y: pyo.log(x ** 2 + 1), lambda x, y: (x * y) ** 1.5,
    lambda x, y: (x ** 2) ** 2, lambda x, y: (x * y - 0.5) ** -2, lambda x, y: (x ** 2 * y ** 2 + 1) ** -1.5,
    lambda x, y: pyo.log(x * y), lambda x, y: (x + y) ** 3 / (y ** 2 + 0.5),
]


@settings(max_examples=60, deadline=None)
@given(k=st.integers(0, len(_LIFTED) - 1), ends=st.lists(st.floats(-3, 3), min_size=4, max_size=4),
       t=st.lists(st.floats(0, 1), min_size=2, max_size=2))
def test_lifted_columns_hold_their_intervals_and_the_objective_evaluates(k, ends, t):
    """Every auxiliary column at the completed point lies in the interval the front-end gave it, and the compiled
    objective there equals Pyomo's value (a bound that cuts a value off would make the tree's certificate wrong)."""
    a, b = sorted(ends[:2])
    c, d = sorted(ends[2:])
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(a, b))
    m.y = pyo.Var(bounds=(c, d))
    m.o = pyo.Objective(expr=_LIFTED[k](m.x, m.y))
    try:
        prog, _ = compile_pyomo(m)
    except ModelStructureError:
        return   # (a denominator or base the bounds do not keep sign-definite: refused by name)
    z = np.array([a + t[0] * (b - a), c + t[1] * (d - c)])
    full = prog.complete_aux(z)
    tol = 1e-9 * (1 + np.abs(full))
    with np.errstate(invalid="ignore"):
        inside = (full >= prog.lb - tol) & (full <= prog.ub + tol)
    assert np.all(inside | ~np.isfinite(full)), [(prog.names[i], full[i], prog.lb[i], prog.ub[i])
                                                 for i in np.flatnonzero(~inside)]
    m.x.value, m.y.value = z
    try:
        want = pyo.value(m.o)
    except (ValueError, ZeroDivisionError):
        return   # (outside the term's domain: log of a negative product)
    assert prog.objective.value(full) == pytest.approx(want, rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("p", [-1.0, -1.5, -3.0])
@pytest.mark.parametrize("lower", [None, 0.0])
def test_cvxpy_negative_power_row_whose_argument_may_reach_zero(p, lower):
    """``sum(power(x, p)) <= 2`` with ``p < 0`` and no positive lower bound on ``x`` (CVXPY's domain ``x > 0``):
    the tree's tangent at ``u = 1e-8`` had the slope ``p 1e-8^(p-1)`` (-1e16 for p = -1) and HiGHS rejected the
    node LP ('HiGHS rejected the model'). Equal to Clarabel."""
    cp = pytest.importorskip("cvxpy")
    vals = []
    for how in ("gop", "CLARABEL"):
        x = cp.Variable(3)
        cons = [cp.sum(cp.power(x, p)) <= 2, x <= 3] + ([x >= lower] if lower is not None else [])
        prob = cp.Problem(cp.Minimize(cp.sum(x) + 0.1 * x[0]), cons)
        vals.append(prob.solve(method="gop", time_limit=20) if how == "gop" else prob.solve(solver="CLARABEL"))
        if how == "gop":
            assert prob.varopt_result.status == "optimal"
    assert vals[0] == pytest.approx(vals[1], rel=1e-5)


def test_a_concave_cvxpy_atom_in_a_convex_position_is_called_concave():
    """``Minimize(min(x))`` is refused (min is concave); the message said 'it is convex, so it must be minimised'."""
    cp = pytest.importorskip("cvxpy")
    x = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.min(x) + cp.sum_squares(x)), [x >= -2, x <= 2])
    with pytest.raises(ModelStructureError, match="it is concave, so it must be maximised") as info:
        prob.solve(method="gop")
    assert "it is convex" not in str(info.value)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x)), [cp.max(x) >= 1, x >= -2, x <= 2])
    with pytest.raises(ModelStructureError, match="it is convex, so it must be minimised"):
        prob.solve(method="gop")
