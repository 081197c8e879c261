"""CVXPY forms gop refused before (docs/gop.md §8h): ``x / y`` with a variable denominator, ``geo_mean``,
``harmonic_mean``, ``pnorm(x, p)`` for p not in {1, 2, inf} (``varopt/frontends/cvxpy_ratios.py``).

Each certified optimum is checked against an independent reference: CVXPY + Clarabel where the form is DCP, SCIP
(``pyscipopt`` through Pyomo's ``scip_direct``, gap 1e-9) on the same model written in Pyomo where it is not; the
values loaded into the user's variables must evaluate (CVXPY's ``.value``) to the reported objective and satisfy the
constraints. Random instances are seeded."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")
pyo = pytest.importorskip("pyomo.environ")

import varopt  # noqa: F401  (registers method='gop')
from varopt.errors import ModelStructureError
from varopt.frontends.cvxpy_compile import compile_cvxpy

REL = 1e-6


def _scip(m):
    opt = pyo.SolverFactory("scip_direct")
    if not opt.available(exception_flag=False):
        pytest.skip("SCIP (pyscipopt) is not installed: no reference for a non-convex form")
    opt.options["limits/gap"] = 1e-9
    opt.options["numerics/feastol"] = 1e-9
    opt.solve(m)
    return pyo.value(m.o)


def _check(prob, ref, **opts):
    got = prob.solve(method="gop", **opts)
    assert prob.status == "optimal", prob.status
    assert abs(got - ref) <= REL * max(1.0, abs(ref)), (got, ref)
    # the loaded point evaluates to the reported objective and satisfies every constraint
    assert abs(prob.objective.value - got) <= 1e-7 * max(1.0, abs(got)), (prob.objective.value, got)
    for c in prob.constraints:
        assert float(np.max(c.violation())) <= 1e-6, (str(c), c.violation())
    return got


# --- divisions by a variable ----------------------------------------------------------------------------------
def _division_instance(seed, sense, negative):
    rng = np.random.default_rng(seed)
    a, b, c = rng.uniform(0.5, 2.0), rng.uniform(0.2, 1.5), rng.uniform(-1.0, 1.0)
    ylo, yhi = sorted(rng.uniform(0.3, 3.0, 2))
    if negative:
        ylo, yhi = -yhi, -ylo
    xlo, xhi = -1.0, 2.0
    x, y = cp.Variable(name="x"), cp.Variable(name="y")
    f = a * x / y + b * y + c * x
    prob = cp.Problem(cp.Minimize(f) if sense == "min" else cp.Maximize(f),
                      [x >= xlo, x <= xhi, y >= ylo, y <= yhi])
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(bounds=(xlo, xhi)), pyo.Var(bounds=(ylo, yhi))
    m.o = pyo.Objective(expr=a * m.x / m.y + b * m.y + c * m.x, sense=pyo.minimize if sense == "min" else pyo.maximize)
    return prob, m


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("sense", ["min", "max"])
@pytest.mark.parametrize("negative", [False, True])
def test_division_by_a_variable_in_the_objective_equals_scip(seed, sense, negative):
    prob, m = _division_instance(seed, sense, negative)
    _check(prob, _scip(m))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("side", ["<=", ">="])
def test_division_by_an_affine_expression_in_a_constraint_equals_scip(seed, side):
    """``(x + 1) / (y + 2 z) <= r`` or ``>= r`` (a ratio of affine expressions, not convex either way)."""
    rng = np.random.default_rng(10 + seed)
    w = rng.normal(size=3)
    r = rng.uniform(0.3, 1.5)
    v = cp.Variable(3, name="v")
    x, y, z = v[0], v[1], v[2]
    ratio = (x + 1) / (y + 2 * z)
    row = ratio <= r if side == "<=" else ratio >= r
    prob = cp.Problem(cp.Minimize(w @ v), [row, v >= 0.1, v <= 2])
    m = pyo.ConcreteModel()
    m.v = pyo.Var(range(3), bounds=(0.1, 2))
    m.o = pyo.Objective(expr=sum(w[i] * m.v[i] for i in range(3)))
    lhs = m.v[0] + 1
    den = m.v[1] + 2 * m.v[2]
    m.c = pyo.Constraint(expr=lhs <= r * den if side == "<=" else lhs >= r * den)
    _check(prob, _scip(m))


def test_inv_pos_times_a_variable_and_a_constant_numerator():
    """``x * inv_pos(y)`` (a product with a power(-1) row; its multiplier needs a declared ``x >= 0``) and ``x / y``
    (a ratio column) give the same optimum; ``3 / y`` is a ratio column with a constant numerator."""
    x, y = cp.Variable(name="x", nonneg=True), cp.Variable(name="y")
    cons = [x >= 0.5, x <= 3, y >= 0.5, y <= 3]
    ref = 2.0 * np.sqrt(0.5)                    # min 0.5 / y + y at y = sqrt(0.5)
    _check(cp.Problem(cp.Minimize(x * cp.inv_pos(y) + y), cons), ref)
    _check(cp.Problem(cp.Minimize(x / y + y), cons), ref)
    _check(cp.Problem(cp.Minimize(3 / y + 3 * y), [y >= 0.5, y <= 3]), 6.0)


def test_denominator_bounds_come_from_attributes_and_single_variable_rows():
    yb = cp.Variable(name="yb", bounds=[1.0, 4.0])
    _check(cp.Problem(cp.Minimize(2 / yb + yb)), 2 * np.sqrt(2))
    # a lower bound written as a constraint on a vector variable
    v = cp.Variable(2, name="v")
    _check(cp.Problem(cp.Minimize(cp.sum(cp.multiply(1.0, 1 / v)) + cp.sum(v)), [v >= 0.25, v <= 4]), 4.0)


@pytest.mark.parametrize("cons, rng_text", [
    (lambda x, y: [x >= 1, x <= 2, y >= -1, y <= 2], r"\[-1, 2\]"),
    (lambda x, y: [x >= 1, x <= 2], r"\[-inf, inf\]"),
])
def test_division_by_an_expression_that_may_be_zero_is_refused(cons, rng_text):
    x, y = cp.Variable(name="x"), cp.Variable(name="y")
    with pytest.raises(ModelStructureError, match=r"objective: cannot compile `x / y`: the denominator may be 0 or "
                                                  r"change sign .*range " + rng_text + ".*declare bounds"):
        cp.Problem(cp.Minimize(x / y), cons(x, y)).solve(method="gop")


def test_a_positive_variable_without_a_lower_bound_is_refused_in_a_constraint():
    x, y = cp.Variable(name="x"), cp.Variable(name="y", pos=True)
    with pytest.raises(ModelStructureError, match=r"constraint 0 .*cannot compile `x / y`.*range \[0, inf\]"):
        cp.Problem(cp.Minimize(x + y), [x / y >= 1, x >= 1, x <= 2]).solve(method="gop")


# --- geometric and harmonic means, p-norms in CVXPY's DCP positions: Clarabel ---------------------------------
def _clarabel(prob):
    return prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("weights", [None, [1, 2, 4, 1], [1, 1, 0, 2], [1, 1, 1], [1, 2, 3]])
def test_geo_mean_maximised_equals_clarabel(seed, weights):
    """Dyadic weights (the root of the tree of square roots is the mean) and others (``D = 3, 6``: the root to the
    power ``2^m / D``)."""
    rng = np.random.default_rng(seed)
    k = 4 if weights is None else len(weights)
    c = rng.uniform(0.2, 1.5, k)
    v = cp.Variable(k, name="v")
    prob = cp.Problem(cp.Maximize(cp.geo_mean(v, weights) - 0.2 * cp.sum_squares(v - c)), [v <= 2, cp.sum(v) <= 4])
    _check(prob, _clarabel(prob))


@pytest.mark.parametrize("seed", range(2))
def test_geo_mean_and_harmonic_mean_on_the_larger_side_of_a_constraint_equal_clarabel(seed):
    rng = np.random.default_rng(20 + seed)
    a = rng.uniform(0.5, 2.0, 3)
    v = cp.Variable(3, name="v")
    for mean in (cp.geo_mean(v, [1, 2, 1]), cp.harmonic_mean(v)):
        prob = cp.Problem(cp.Minimize(a @ v), [mean >= 1, v >= 0.05, v <= 5])
        _check(prob, _clarabel(prob))


@pytest.mark.parametrize("p", [1.5, 3, 4])
@pytest.mark.parametrize("where", ["objective", "constraint"])
def test_convex_pnorm_minimised_equals_clarabel(p, where):
    """Minimised in the objective or on the smaller side of ``<=``; an entry that may be negative gets a column
    ``|x_i|`` (not for even p), so the box is declared (the tree needs it)."""
    rng = np.random.default_rng(30)
    c = rng.normal(size=2)
    v = cp.Variable(2, name="v")
    if where == "objective":
        prob = cp.Problem(cp.Minimize(cp.pnorm(v - c, p) + 0.1 * cp.sum(v)), [cp.sum(v) == 1, v >= -3, v <= 3])
    else:
        prob = cp.Problem(cp.Maximize(c @ v), [cp.pnorm(v - c, p) <= 1, v >= -3, v <= 3])
    _check(prob, _clarabel(prob))


def test_pnorm_of_nonnegative_entries_needs_no_absolute_value_column():
    w = cp.Variable(3, name="w", nonneg=True)
    prob = cp.Problem(cp.Minimize(cp.pnorm(w, 3)), [cp.sum(w) == 1, w <= 3])
    program, _ = compile_cvxpy(prob)
    assert [a.kind for a in program.aux] == ["product"]           # q == sum w_i^3, no |w_i|
    _check(prob, _clarabel(prob))


@pytest.mark.parametrize("p", [0.5, 0.3, -2])
def test_concave_pnorm_maximised_equals_clarabel(p):
    rng = np.random.default_rng(40)
    a = rng.uniform(0.5, 1.5, 3)
    v = cp.Variable(3, name="v")
    prob = cp.Problem(cp.Maximize(cp.pnorm(v, p)), [a @ v <= 3, v >= 0.1, v <= 3])
    _check(prob, _clarabel(prob))


# --- the same atoms outside DCP: SCIP on the Pyomo model -------------------------------------------------------
def test_geo_mean_minimised_equals_scip():
    """``min geo_mean(v) + ||v - c||^2`` (a concave term minimised): the optimum puts an entry at 0."""
    c = np.array([1.0, 0.4, 2.0])
    v = cp.Variable(3, name="v")
    prob = cp.Problem(cp.Minimize(cp.geo_mean(v) + cp.sum_squares(v - c)), [v >= 0, v <= 3])
    m = pyo.ConcreteModel()
    m.v = pyo.Var(range(3), bounds=(0, 3))
    m.g = pyo.Var(bounds=(0, 3))
    m.cg = pyo.Constraint(expr=m.g ** 3 == m.v[0] * m.v[1] * m.v[2])
    m.o = pyo.Objective(expr=m.g + sum((m.v[i] - c[i]) ** 2 for i in range(3)))
    _check(prob, _scip(m))


@pytest.mark.parametrize("p", [3, 1.5])
def test_pnorm_maximised_equals_scip(p):
    v = cp.Variable(3, name="v")
    a = np.array([1.0, -0.5, 0.25])
    prob = cp.Problem(cp.Maximize(cp.pnorm(v, p) + a @ v), [cp.sum(v) == 1, v >= -1, v <= 2])
    m = pyo.ConcreteModel()
    m.v = pyo.Var(range(3), bounds=(-1, 2))
    m.s = pyo.Var(range(3), bounds=(0, 2))
    m.t = pyo.Var(bounds=(0, 10))
    m.cs = pyo.Constraint(range(3), rule=lambda m, i: m.s[i] ** 2 == m.v[i] ** 2)
    m.ct = pyo.Constraint(expr=m.t ** p == sum(m.s[i] ** p for i in range(3)))
    m.sum = pyo.Constraint(expr=sum(m.v[i] for i in range(3)) == 1)
    m.o = pyo.Objective(expr=m.t + sum(a[i] * m.v[i] for i in range(3)), sense=pyo.maximize)
    _check(prob, _scip(m))


# --- refusals -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["majorize", "ipsa", "klprox"])
@pytest.mark.parametrize("form", ["div", "geo", "pnorm"])
def test_other_solvers_refuse_the_auxiliary_columns_by_name(method, form):
    v = cp.Variable(2, name="v")
    term = {"div": v[0] / v[1], "geo": -cp.geo_mean(v), "pnorm": cp.pnorm(v - 1, 3)}[form]
    prob = cp.Problem(cp.Minimize(term + cp.sum_squares(v)), [v >= 0.5, v <= 2])
    with pytest.raises(ModelStructureError, match=f"{method} does not support the term .*only gop handles"):
        prob.solve(method=method)


def test_geo_mean_with_an_axis_is_refused_by_name():
    X = cp.Variable((2, 2), name="X")
    with pytest.raises(ModelStructureError, match="geo_mean with an axis"):
        cp.Problem(cp.Maximize(cp.sum(cp.geo_mean(X, axis=0))), [X <= 1]).solve(method="gop")


# --- relative entropies with both arguments variable, xexp, nonlinear rows (mode='auto' takes the tree) ----------
def _kl_problems(seed):
    rng = np.random.default_rng(50 + seed)
    a = rng.uniform(0.5, 2.0, 3)
    x, y = cp.Variable(3, name="x"), cp.Variable(3, name="y")
    box = [cp.sum(x) == 1, cp.sum(y) == 1, x >= 0, x <= 1, y >= 0.05, y <= 1]
    return {
        # shared variables: x log x - x log(1 + x_rev / 2) multiplies a log row by its own variable
        "kl_div shared, objective": cp.Problem(cp.Minimize(cp.sum(cp.kl_div(x, 1 + 0.5 * x[::-1])) - a @ x), box),
        "rel_entr, constraint": cp.Problem(cp.Maximize(a @ x), box + [cp.sum(cp.rel_entr(x, y)) <= 0.1]),
        "kl_div, constraint": cp.Problem(cp.Maximize(a @ x), box + [cp.sum(cp.kl_div(x, y)) <= 0.05]),
    }


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name", ["kl_div shared, objective", "rel_entr, constraint", "kl_div, constraint"])
def test_relative_entropy_of_two_variable_arguments_equals_clarabel(seed, name):
    """Refused under mode='auto' before ("multiplies an atom by one of its own variables"; "mixes the primal block
    with a nonlinear term"): gop now takes the spatial tree for them."""
    prob = _kl_problems(seed)[name]
    _check(prob, _clarabel(prob))


def test_xexp_minimised_equals_the_stationary_point():
    """``min x exp(x) - 2 x``: ``(1 + x) exp(x) = 2`` (bisection to 1e-15 as the reference)."""
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if (1 + mid) * np.exp(mid) < 2 else (lo, mid)
    ref = lo * np.exp(lo) - 2 * lo
    x = cp.Variable(name="x")
    _check(cp.Problem(cp.Minimize(cp.xexp(x) - 2 * x), [x <= 3]), ref)
    v = cp.Variable(2, name="v", nonneg=True)        # CVXPY's DCP rule for xexp
    prob = cp.Problem(cp.Maximize(cp.sum(v)), [cp.sum(cp.xexp(v)) <= 1, v <= 3])
    _check(prob, _clarabel(prob))


@pytest.mark.parametrize("form", ["huber", "exp_max", "sum_exp"])
def test_convex_nonlinear_constraints_equal_clarabel(form):
    """Convex rows over the primal block were refused under mode='auto' ("gop's primal takes linear constraints");
    ``exp(max(v)) <= 3`` with ``v`` unbounded above also made HiGHS fail on an exp secant of slope 1e135. (``v`` without
    an upper bound under ``sum(exp(v)) <= 3``: tests/test_gop_sublevel_bounds.py.)"""
    c = np.array([1.0, -0.5, 2.0])
    v = cp.Variable(3, name="v")
    row = {"huber": cp.sum(cp.huber(v - 1, 1)) <= 1, "exp_max": cp.exp(cp.max(v)) <= 3,
           "sum_exp": cp.sum(cp.exp(v)) <= 3}[form]
    prob = cp.Problem(cp.Minimize(-c @ v), [row, v >= -4] + ([v <= 5] if form != "exp_max" else []))
    _check(prob, _clarabel(prob))


def test_huber_row_without_bounds_is_solved_as_a_convex_program():
    # (the tree refused it: "needs finite bounds on v[0]: it enters the term huber"; the program is convex, and
    # the direct convex path of docs/gop.md §13e solves it without bounds)
    v = cp.Variable(3, name="v")
    prob = cp.Problem(cp.Minimize(cp.sum(v)), [cp.sum(cp.huber(v - 1, 1)) <= 1])
    _check(prob, _clarabel(prob))


# --- the Pyomo forms of a relative entropy ------------------------------------------------------------------------
PYOMO_KL = {
    "x*log(x/y)": lambda x, y: x * pyo.log(x / y),
    "x*log(x) - x*log(y)": lambda x, y: x * pyo.log(x) - x * pyo.log(y),
    "x*(log(x) - log(y))": lambda x, y: x * (pyo.log(x) - pyo.log(y)),
}


@pytest.mark.parametrize("form", sorted(PYOMO_KL))
@pytest.mark.parametrize("case", ["shared, objective", "separate, constraint"])
def test_pyomo_relative_entropy_forms_equal_clarabel(form, case):
    rng = np.random.default_rng(60)
    a = rng.uniform(0.5, 2.0, 3)
    shared = case.startswith("shared")
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0, 1), initialize=1 / 3)
    m.y = pyo.Var(range(3), bounds=(0.05, 1), initialize=1 / 3)
    m.sx = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) == 1)
    m.sy = pyo.Constraint(expr=sum(m.y[i] for i in range(3)) == 1)
    den = (lambda i: 1 + 0.5 * m.x[2 - i]) if shared else (lambda i: m.y[i])
    kl = sum(PYOMO_KL[form](m.x[i], den(i)) for i in range(3))
    x, y = cp.Variable(3), cp.Variable(3)
    ckl = cp.sum(cp.rel_entr(x, 1 + 0.5 * x[::-1] if shared else y))
    box = [cp.sum(x) == 1, cp.sum(y) == 1, x >= 0, x <= 1, y >= 0.05, y <= 1]
    if shared:
        m.o = pyo.Objective(expr=kl - sum(a[i] * m.x[i] for i in range(3)))
        ref = cp.Problem(cp.Minimize(ckl - a @ x), box)
    else:
        m.c = pyo.Constraint(expr=kl <= 0.1)
        m.o = pyo.Objective(expr=sum(a[i] * m.x[i] for i in range(3)), sense=pyo.maximize)
        ref = cp.Problem(cp.Maximize(a @ x), box + [ckl <= 0.1])
    want = _clarabel(ref)
    res = pyo.SolverFactory("gop").solve(m, time_limit=20)
    assert str(res.solver.termination_condition) == "optimal"
    got = pyo.value(m.o)
    assert abs(got - want) <= REL * max(1.0, abs(want)), (got, want)
    if not shared:
        assert pyo.value(kl) <= 0.1 + 1e-6


def test_a_multiplier_bounded_by_a_constraint_on_it_alone_is_nonnegative():
    """``x * inv_pos(y)`` and ``x * exp(-y)`` with ``x >= 1`` written as a constraint (how CVXPY users bound a
    variable): the multiplier is nonnegative at every feasible point, so the product is convex in the primal block.
    It was refused with 'the multiplier x ... may be negative (lower bound -inf); ... CVXPY: add x >= 0', which the
    user had done. A row on two variables does not bound the multiplier (still refused by GOP's iteration; since the
    gopuser review 'auto' then takes the tree, which certifies it). References: the closed form
    ``min x/y + y = 2 sqrt(x)`` at ``x = 1``; SCIP on the exponential."""
    x, y = cp.Variable(name="x"), cp.Variable(name="y")
    box = [y >= 0.5, y <= 3]
    for mode in ("auto", "gop"):
        _check(cp.Problem(cp.Minimize(cp.inv_pos(y) * x + y), [x >= 1, x <= 2] + box), 2.0, mode=mode)
        _check(cp.Problem(cp.Minimize(cp.inv_pos(y) * x + y - 0.5 * x), [2 * x >= 0.6, -x >= -4] + box),
               2 * np.sqrt(0.3) - 0.15, mode=mode)
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(bounds=(0.2, 4)), pyo.Var(bounds=(0.5, 3))
    m.o = pyo.Objective(expr=m.x * pyo.exp(-m.y) + 0.3 * m.y - 0.1 * m.x)
    _check(cp.Problem(cp.Minimize(x * cp.exp(-y) + 0.3 * y - 0.1 * x), [x >= 0.2, x <= 4] + box), _scip(m))
    z = cp.Variable(name="z")
    with pytest.raises(ModelStructureError, match=r"multiplier x of the convex term .* may be negative"):
        cp.Problem(cp.Minimize(cp.inv_pos(y) * x + y), [x + z >= 1, z <= 0, x <= 4] + box).solve(method="gop",
                                                                                               mode="gop")
    _check(cp.Problem(cp.Minimize(cp.inv_pos(y) * x + y), [x + z >= 1, z <= 0, x <= 4] + box), 2.0)


def test_auto_takes_the_tree_for_a_relative_entropy_over_separate_simplices():
    """``min sum_i x_i log(x_i / y_i) - a.x`` over two simplices (Pyomo): every ``x_i`` multiplies its own ``log y_i``.
    'auto' ran GOP's iteration on it (time limit, incumbent 2.4 % above the optimum at 20 s, lower bound -0.971); the
    tree certifies it (docs/gop.md §8j). Reference: Clarabel on the convex CVXPY form. An ELBO, whose ``log pi_k``
    has one multiplier ``phi_ik`` per data point, still takes the iteration."""
    from varopt.formulations.bgmm import bgmm_pyomo
    rng = np.random.default_rng(60)
    a = rng.uniform(0.5, 2.0, 3)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0, 1), initialize=1 / 3)
    m.y = pyo.Var(range(3), bounds=(0.05, 1), initialize=1 / 3)
    m.sx = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) == 1)
    m.sy = pyo.Constraint(expr=sum(m.y[i] for i in range(3)) == 1)
    m.o = pyo.Objective(expr=sum(m.x[i] * pyo.log(m.x[i] / m.y[i]) - a[i] * m.x[i] for i in range(3)))
    x, y = cp.Variable(3), cp.Variable(3)
    want = _clarabel(cp.Problem(cp.Minimize(cp.sum(cp.rel_entr(x, y)) - a @ x),
                                [cp.sum(x) == 1, cp.sum(y) == 1, x >= 0, x <= 1, y >= 0.05, y <= 1]))
    r = pyo.SolverFactory("gop").solve(m, time_limit=30).varopt_result
    assert r.status == "optimal" and r.info.get("mode") == "tree", (r.status, r.info.get("mode"))
    assert abs(pyo.value(m.o) - want) <= REL * max(1.0, abs(want)), (pyo.value(m.o), want)
    elbo = bgmm_pyomo(np.array([-0.3, 0.2, 3.9, 4.4]), 2)
    r = pyo.SolverFactory("gop").solve(elbo, time_limit=30).varopt_result
    assert r.status == "optimal" and r.info.get("mode") != "tree", (r.status, r.info.get("mode"))
