"""Powers and divisions: the power(p) atom family (values, derivatives, interval bounds), their compilation in the
Pyomo and CVXPY front-ends (exact lifting, docs/gop.md §13) and gop's certified optima against brute force on a grid,
Clarabel (convex CVXPY problems) and SCIP."""
import math

import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import ModelStructureError
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.program.atoms import ATOMS
from varopt.program.powers import Power, power_kind

EXPONENTS = [3.0, 4.0, 5.0, 6.0, 1.5, 1.2, 2.5, 0.3, 0.9, 0.5 + 1e-3, -1.0, -2.0, -0.5, -1.7]


def _domain_points(kern, lo, hi):
    a = max(lo, kern.domain[0] + (1e-3 if not kern.domain[2] else 0.0))
    return a, hi


# ------------------------------------------------------------------ the atom family
@pytest.mark.parametrize("p", EXPONENTS)
def test_power_kernel_values_and_derivatives_by_finite_differences(p):
    kern = ATOMS[power_kind(p)]
    assert isinstance(kern, Power) and kern.p == p
    u = np.linspace(*_domain_points(kern, -3.0 if kern.even else 0.05, 3.0), 41)
    assert np.allclose(kern.value(u), kern.sign * u ** p)
    h = 1e-6
    fd1 = (kern.value(u + h) - kern.value(u - h)) / (2 * h)
    fd2 = (kern.d1(u + h) - kern.d1(u - h)) / (2 * h)
    assert np.allclose(kern.d1(u), fd1, rtol=1e-5, atol=1e-5)
    assert np.allclose(kern.d2(u), fd2, rtol=1e-5, atol=1e-5)
    assert np.all(kern.d2(u) >= -1e-12)  # convex on the domain: the table's convention


def test_power_kernel_domain_and_kinds():
    assert ATOMS[power_kind(3)].domain[:1] == (0.0,)  # odd: convex on u >= 0 only
    assert ATOMS[power_kind(4)].domain[0] == -np.inf
    assert ATOMS[power_kind(-2)].domain == (0.0, np.inf, False)  # u^-2 is convex on each side of 0, not across
    assert np.isnan(ATOMS[power_kind(1.5)].value(np.array(-1.0)))
    assert ATOMS[power_kind(-1)].value(np.array(0.0)) == np.inf
    assert "power(7.0)" in ATOMS and "power(7)" not in ATOMS and "power(2.0)" not in ATOMS
    with pytest.raises(ValueError):
        Power(2.0)


@settings(max_examples=80, deadline=None)
@given(p=st.sampled_from(EXPONENTS), a=st.floats(-4, 4), b=st.floats(-4, 4), t=st.floats(0, 1))
def test_power_interval_bounds_bound(p, a, b, t):
    """A bound must bound: min/max of g over [lo, hi] (clipped to the domain) contain g at every point of it."""
    kern = ATOMS[power_kind(p)]
    lo, hi = sorted((a, b))
    lo_d = max(lo, kern.domain[0] + (1e-3 if not kern.domain[2] else 0.0))
    if lo_d > hi:
        return
    u = lo_d + t * (hi - lo_d)
    g = float(kern.value(np.array(u)))
    gmin = float(kern.interval_min(np.array(lo), np.array(hi)))
    gmax = float(kern.interval_max(np.array(lo), np.array(hi)))
    tol = 1e-9 * max(1.0, abs(g))
    assert gmin - tol <= g <= gmax + tol, (p, lo, hi, u, g, gmin, gmax)


def test_power_interval_bounds_with_infinite_ends():
    k = ATOMS[power_kind(-1)]
    assert k.interval_min(np.array(1.0), np.array(np.inf)) == 0.0
    assert k.interval_max(np.array(0.0), np.array(2.0)) == np.inf
    k = ATOMS[power_kind(0.5 + 1e-3)]
    assert k.interval_min(np.array(0.0), np.array(np.inf)) == -np.inf
    assert ATOMS[power_kind(3)].interval_max(np.array(0.0), np.array(np.inf)) == np.inf


# ------------------------------------------------------------------ Pyomo: certified optima against a grid
def _one_var(expr, lo, hi):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(lo, hi), initialize=0.5 * (lo + hi))
    m.o = pyo.Objective(expr=expr(m.x))
    return m


ONE_VAR = {
    "x**3 - 3x across 0": (lambda x: x ** 3 - 3 * x, -2.0, 2.0),
    "x**3 - 3x, asymmetric box": (lambda x: x ** 3 - 3 * x, -2.5, 1.0),
    "x**4 - 3x**2 + x": (lambda x: x ** 4 - 3 * x ** 2 + x, -2.0, 2.0),
    "-x**5 + 2x": (lambda x: -x ** 5 + 2 * x, -1.5, 1.5),
    "x**6 - 15x**4 + 27x**2 (ex4_1_6 form)": (lambda x: x ** 6 - 15 * x ** 4 + 27 * x ** 2, -5.0, 5.0),
    "x**1.5 - x": (lambda x: x ** 1.5 - x, 0.0, 3.0),
    "x**-1 + x": (lambda x: x ** -1 + x, 0.2, 3.0),
    "4/x + x": (lambda x: 4 / x + x, 0.5, 5.0),
    "-10x/(1 + 0.01x) + x**2": (lambda x: -10 * x / (1 + 0.01 * x) + x ** 2, 0.0, 10.0),
    "-x**0.9 + 0.3x": (lambda x: -x ** 0.9 + 0.3 * x, 0.0, 8.0),
    "x**1.2 - x": (lambda x: x ** 1.2 - x, 0.0, 4.0),
    "x**-2.5 + x": (lambda x: x ** -2.5 + x, 0.3, 4.0),
    "3950/(460 + x) - 0.01x**2 (st_e04 form)": (lambda x: 3950 / (460 + x) - 0.01 * x ** 2, -459.0, 80.0),
}


@pytest.mark.parametrize("mode", ["default", "tree"])
@pytest.mark.parametrize("name", sorted(ONE_VAR))
def test_certified_optimum_of_one_variable_powers_equals_the_grid(name, mode):
    f, lo, hi = ONE_VAR[name]
    grid = np.linspace(lo, hi, 400001)
    with np.errstate(all="ignore"):
        best = float(np.nanmin(f(grid)))
    m = _one_var(f, lo, hi)
    kw = {} if mode == "default" else {"mode": "tree"}
    res = pyo.SolverFactory("gop").solve(m, time_limit=20, **kw)
    r = res.varopt_result
    assert r.status == "optimal", (r.status, r.message)
    tol = 1e-5 * max(1.0, abs(best))
    assert r.lower_bound <= best + 1e-7 * max(1.0, abs(best))  # a certificate never cuts the optimum off
    assert r.upper_bound == pytest.approx(best, abs=tol)
    assert lo <= m.x.value <= hi
    assert pyo.value(m.o) == pytest.approx(r.upper_bound, rel=1e-9, abs=1e-9)  # the loaded point evaluates


def test_two_variable_ratio_and_product_with_a_power_against_the_grid():
    # x/y (a ratio column t y == x) and x * y**3 (q == y * y**2, then x q): the tree certifies the grid optimum
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 2), initialize=1)
    m.y = pyo.Var(bounds=(0.5, 3), initialize=1)
    m.o = pyo.Objective(expr=m.x / m.y + 0.3 * m.y - m.x + 0.05 * m.x * m.y ** 3)
    r = pyo.SolverFactory("gop").solve(m, mode="tree", time_limit=20).varopt_result
    X, Y = np.meshgrid(np.linspace(0, 2, 1201), np.linspace(0.5, 3, 1201))
    best = float((X / Y + 0.3 * Y - X + 0.05 * X * Y ** 3).min())
    assert r.status == "optimal"
    assert r.lower_bound <= best + 1e-9 and r.upper_bound == pytest.approx(best, abs=2e-5)
    assert pyo.value(m.o) == pytest.approx(r.upper_bound, abs=1e-9)


def test_auxiliary_columns_get_interval_bounds_and_are_not_loaded():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-3, 2))
    m.y = pyo.Var(bounds=(1, 4))
    m.o = pyo.Objective(expr=m.x ** 3 + 4 / m.y + m.y ** 1.5)
    prog, mapping = compile_pyomo(m)
    assert prog.n_user == 2 and len(mapping) == 2
    kinds = {a.kind: (prog.lb[a.index], prog.ub[a.index]) for a in prog.aux}
    assert kinds["product"] == (0.0, 9.0)  # q = x^2 over [-3, 2]
    assert kinds["ratio"] == (1.0, 4.0)  # t = 4/y over [1, 4]
    assert kinds["sqrt"] == (1.0, 2.0)  # s = sqrt(y)
    # the lifted program evaluates like the user's model at every point (auxiliary columns completed)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x, y = rng.uniform(-3, 2), rng.uniform(1, 4)
        z = prog.complete_aux(np.array([x, y]))
        assert prog.objective.value(z) == pytest.approx(x ** 3 + 4 / y + y ** 1.5, rel=1e-12)
        assert all(abs(c.body.value(z)) < 1e-9 for c in prog.constraints if c.name.startswith("_aux_"))


def test_shared_powers_and_ratios_are_lifted_once():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(1, 2))
    m.y = pyo.Var(bounds=(1, 2))
    m.o = pyo.Objective(expr=m.x ** 3 + m.x ** 4 + m.x ** 2 * 0 + m.y / (m.x + 1))
    m.c = pyo.Constraint(expr=m.y / (m.x + 1) + m.x ** 3 <= 5)
    prog, _ = compile_pyomo(m)
    assert sorted(a.kind for a in prog.aux) == ["product", "ratio"]  # q = x^2 (x^3 = x q, x^4 = q^2), y/(x+1)


def test_certified_optimum_with_powers_in_constraints_against_scip():
    pytest.importorskip("pyscipopt")

    def build():
        m = pyo.ConcreteModel()
        m.x = pyo.Var(bounds=(0, 3), initialize=1)
        m.y = pyo.Var(bounds=(0.2, 4), initialize=1)
        m.o = pyo.Objective(expr=-m.x - 0.5 * m.y)
        m.c1 = pyo.Constraint(expr=m.x ** 3 - 2 * m.x * m.y + m.y ** 2 <= 4)
        m.c2 = pyo.Constraint(expr=m.x / m.y + m.y ** 1.5 <= 6)
        return m

    ref = build()
    pyo.SolverFactory("scip_direct").solve(ref)
    m = build()
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert r.status == "optimal"
    assert r.upper_bound == pytest.approx(pyo.value(ref.o), abs=1e-5)
    assert r.lower_bound <= pyo.value(ref.o) + 1e-6
    assert pyo.value(m.c1.body) <= 4 + 1e-6 and pyo.value(m.c2.body) <= 6 + 1e-6


# ------------------------------------------------------------------ refusals name the term and the bound
@pytest.mark.parametrize("build,fragment", [
    (lambda m: (m.x - 1) ** 1.5, r"\(x - 1\)\*\*1.5.*lower end -0.9.*declare bounds"),
    (lambda m: (m.x - 1) ** -0.7, r"\(x - 1\)\*\*\(-0.7\).*base > 0"),
    (lambda m: 1 / (m.x - 1), r"1/\(x - 1\).*may be 0 or change sign.*\[-0.9, 4\]"),
    (lambda m: m.y / (m.x - 1), r"y/\(x - 1\).*declare bounds that keep the denominator"),
    (lambda m: (m.x - 1) ** -2, r"may be 0 or change sign"),
    # a negative base is sign-definite, but its half-integer power is undefined (was a bare math domain error)
    (lambda m: (-m.x) ** -1.5, r"\(- x\)\*\*\(-1.5\).*base > 0.*lower end -5"),
    (lambda m: (-m.x) ** -0.5, r"base > 0.*lower end -5"),
])
def test_refusals_name_the_term_and_the_bound_to_declare(build, fragment):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0.1, 5))
    m.y = pyo.Var(bounds=(0.1, 5))
    m.o = pyo.Objective(expr=m.y)
    m.c = pyo.Constraint(expr=build(m) <= 3)
    with pytest.raises(ModelStructureError, match=fragment) as ei:
        pyo.SolverFactory("gop").solve(m)
    assert "constraint 'c'" in str(ei.value)


# ------------------------------------------------------------------ CVXPY
cp = pytest.importorskip("cvxpy")


CVX = {
    "power 1.5": lambda x: cp.Problem(cp.Minimize(cp.sum(cp.power(x, 1.5)) - cp.sum(x))),
    "inv_pos": lambda x: cp.Problem(cp.Minimize(cp.sum(cp.inv_pos(x)) + cp.sum(x))),
    "power 0.3 (maximize)": lambda x: cp.Problem(cp.Maximize(cp.sum(cp.power(x, 0.3)) - cp.sum(x))),
    "power 4": lambda x: cp.Problem(cp.Minimize(cp.sum(cp.power(x - 1, 4)) + cp.sum(x))),
    "power -2 in a constraint": lambda x: cp.Problem(cp.Minimize(cp.sum(x)), [cp.sum(cp.power(x, -2)) <= 3]),
    "power 3": lambda x: cp.Problem(cp.Minimize(cp.sum(cp.power(x, 3)) - 3 * cp.sum(x))),
}


@pytest.mark.parametrize("name", sorted(CVX))
def test_cvxpy_powers_certified_equal_clarabel(name):
    x = cp.Variable(2, bounds=[0.2, 3])
    ref = CVX[name](x).solve(solver="CLARABEL")
    prob = CVX[name](x)
    # a convex atom in a constraint row is the tree's (GOP's primal takes rows linear in its block: as for exp)
    val = prob.solve(method="gop", **({"mode": "tree"} if "constraint" in name else {}))
    assert prob.status == "optimal"
    assert val == pytest.approx(ref, abs=1e-6 * max(1.0, abs(ref)) + 1e-7)


def test_cvxpy_odd_power_follows_cvxpys_domain():
    # CVXPY defines power(y, 3) for y >= 0 (+inf elsewhere): the atom's domain row keeps y >= 0
    y = cp.Variable(bounds=[-2, 2])
    prob = cp.Problem(cp.Minimize(cp.power(y, 3) + y))
    assert prob.solve(method="gop", mode="tree") == pytest.approx(0.0, abs=1e-7)
    assert y.value >= -1e-9


def test_cvxpy_even_power_that_is_not_a_power_of_two_is_refused():
    x = cp.Variable(2)
    with pytest.raises(ModelStructureError, match=r"power\(var.*even exponent 6"):
        cp.Problem(cp.Minimize(cp.sum(cp.power(x, 6)))).solve(method="gop")


def test_solvers_without_the_power_atom_refuse_with_its_name():
    x = cp.Variable(2)
    with pytest.raises(ModelStructureError, match=r"power\(1.5\)"):
        cp.Problem(cp.Minimize(cp.sum(cp.power(x, 1.5)) - cp.sum(x))).solve(method="majorize")
    with pytest.raises(ModelStructureError, match=r"\^1.5"):
        cp.Problem(cp.Minimize(cp.sum(cp.power(x, 1.5)) - cp.sum(x) + cp.sum_squares(x))).solve(method="klprox")


def test_lifted_pyomo_powers_are_refused_by_solvers_without_auxiliary_columns():
    m = _one_var(lambda x: x ** 3 - 3 * x, -2.0, 2.0)
    with pytest.raises(ModelStructureError):
        pyo.SolverFactory("majorize").solve(m)
    assert math.isfinite(pyo.SolverFactory("gop").solve(m).varopt_result.upper_bound)


def test_products_of_polynomial_factors_against_the_grid():
    # x*y**2*z and y**2 * z**3 (MINLPLib ex7_3_1 writes such monomials): each factor lifted to a bounded column
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 1), initialize=0)
    m.y = pyo.Var(bounds=(0, 1.5), initialize=0)
    m.z = pyo.Var(bounds=(-1, 1), initialize=0)
    m.o = pyo.Objective(expr=m.x * m.y ** 2 * m.z + m.y ** 2 * m.z ** 3 - 0.5 * m.y + 0.3 * m.x ** 2)
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    X, Y, Z = np.meshgrid(*(np.linspace(a, b, 151) for a, b in ((-1, 1), (0, 1.5), (-1, 1))), indexing="ij")
    best = float((X * Y ** 2 * Z + Y ** 2 * Z ** 3 - 0.5 * Y + 0.3 * X ** 2).min())
    assert r.status == "optimal"
    assert r.lower_bound <= best + 1e-9 and r.upper_bound == pytest.approx(best, abs=1e-3)
    assert r.upper_bound <= best + 1e-9  # the grid holds the optimum's box corner region only approximately
    assert pyo.value(m.o) == pytest.approx(r.upper_bound, abs=1e-9)


def test_quad_over_lin_in_a_nonconvex_position_is_lifted_and_certified():
    # ex7_2_1 writes ... - 0.03762*x6**2/x5 <= 1: u^2/v with a negative weight in a <= row (and here in the
    # objective) is concave; it becomes t with t v == q, q == u^2, which the tree relaxes
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 2), initialize=1)
    m.y = pyo.Var(bounds=(0.5, 2), initialize=1)
    m.o = pyo.Objective(expr=-(m.x - 0.5) ** 2 / m.y + 0.8 * m.x + 0.3 * m.y)
    m.c = pyo.Constraint(expr=m.x + 0.4 * m.y - 0.25 * m.x ** 2 / m.y <= 2)
    prog, _ = compile_pyomo(m)
    assert "ratio" in {a.kind for a in prog.aux}
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    X, Y = np.meshgrid(np.linspace(0, 2, 2001), np.linspace(0.5, 2, 1501))
    F = -(X - 0.5) ** 2 / Y + 0.8 * X + 0.3 * Y
    F[X + 0.4 * Y - 0.25 * X ** 2 / Y > 2] = np.inf
    best = float(F.min())
    assert r.status == "optimal"
    assert r.lower_bound <= best + 1e-9 and r.upper_bound == pytest.approx(best, abs=2e-3)
    assert pyo.value(m.c.body) <= 2 + 1e-6


def test_two_nearly_active_polynomial_rows_do_not_buy_objective():
    # the form of ex4_1_9 (Floudas et al. 1999): both rows are active at the optimum; the local repair projected
    # onto one violated row at a time and alternated, so an incumbent 9e-7 outside a row was certified 4e-6
    # relatively below the optimum. Reference: y(x) = min(4, the two rows solved for y), maximised by brute force
    # and a bounded scalar refinement
    from scipy.optimize import minimize_scalar

    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 3))
    m.y = pyo.Var(bounds=(0, 4))
    m.t = pyo.Var()
    m.o = pyo.Objective(expr=m.t)
    m.e1 = pyo.Constraint(expr=m.x + m.y + m.t == 0)
    m.e2 = pyo.Constraint(expr=8 * m.x ** 3 - 2 * m.x ** 4 - 8 * m.x ** 2 + m.y <= 2)
    m.e3 = pyo.Constraint(expr=32 * m.x ** 3 - 4 * m.x ** 4 - 88 * m.x ** 2 + 96 * m.x + m.y <= 36)

    def y(x):
        return min(4.0, 2 - (8 * x ** 3 - 2 * x ** 4 - 8 * x ** 2), 36 - (32 * x ** 3 - 4 * x ** 4 - 88 * x ** 2 + 96 * x))

    g = np.linspace(0, 3, 30001)
    f = np.array([-(x + y(x)) if y(x) >= 0 else np.inf for x in g])
    x0 = g[np.argmin(f)]
    opt = minimize_scalar(lambda x: -(x + y(x)) if y(x) >= 0 else np.inf, bounds=(x0 - 2e-4, x0 + 2e-4),
                          method="bounded", options={"xatol": 1e-13}).fun
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert r.status == "optimal"
    assert r.lower_bound <= opt + 1e-9
    assert r.upper_bound >= opt - 1e-6 * abs(opt), (r.upper_bound, opt)
    assert pyo.value(m.e3.body) <= 36 + 1e-6 and pyo.value(m.e2.body) <= 2 + 1e-6
