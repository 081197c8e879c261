"""The Pyomo front-end: structure recognition, errors, SolverFactory integration.

References: closed-form optima, scipy's linprog (HiGHS) for LPs, and Pyomo's own
``value()`` of the compiled expressions.
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyomo.environ as pyo  # noqa: E402
from scipy.optimize import linprog  # noqa: E402

import plugin_solver  # noqa: E402,F401  (registers 'vo_test_scipy')
import varopt  # noqa: E402
from varopt.errors import InputDataError, InvalidOptionError, ModelStructureError  # noqa: E402
from varopt.frontends.pyomo_compile import compile_pyomo  # noqa: E402
from varopt.frontends.pyomo_plugin import STATUS_MAP  # noqa: E402
from varopt.options import OptionSet, common_options  # noqa: E402
from varopt.result import STATUSES, Result  # noqa: E402


@varopt.register_solver
class LinprogTestSolver(varopt.Solver):
    """Test-only plugin: linear programs through scipy's linprog (HiGHS); proves bounds at optimality."""

    name = "vo_test_linprog"
    summary = "test-only plugin: scipy linprog on linear programs"
    options = OptionSet(common_options())

    def _solve(self, program, opts):
        obj = program.objective
        if not obj.is_linear or program.nonlinear_constraints():
            return Result(self.name, "error", message="not a linear program")
        A, lo, hi, _ = program.linear_constraints()
        A = A.toarray()
        eq = lo == hi
        ub_rows = [A[~eq & np.isfinite(hi)], -A[~eq & np.isfinite(lo)]]
        ub_rhs = [hi[~eq & np.isfinite(hi)], -lo[~eq & np.isfinite(lo)]]
        A_ub, b_ub = np.vstack(ub_rows), np.concatenate(ub_rhs)
        r = linprog(obj.linear, A_ub=A_ub if A_ub.size else None, b_ub=b_ub if b_ub.size else None,
                    A_eq=A[eq] if eq.any() else None, b_eq=hi[eq] if eq.any() else None,
                    bounds=list(zip(np.where(np.isfinite(program.lb), program.lb, None),
                                    np.where(np.isfinite(program.ub), program.ub, None))),
                    method="highs")
        status = {0: "optimal", 1: "iteration_limit", 2: "infeasible", 3: "unbounded"}.get(r.status, "error")
        if status != "optimal":
            return Result(self.name, status, message=r.message)
        f = float(r.fun) + obj.constant
        return Result(self.name, "optimal", x=r.x, objective=f, lower_bound=f, upper_bound=f, message=r.message)


def _model():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=1.0, bounds=(0.1, 5))
    m.y = pyo.Var(initialize=2.0, bounds=(0.1, 5))
    m.z = pyo.Var(initialize=0.5, bounds=(0.1, 5))
    return m


# --------------------------------------------------------------------------------------
# unsupported structure
# --------------------------------------------------------------------------------------
UNSUPPORTED = [
    ("sin(x)", lambda m: pyo.sin(m.x)),
    # powers and divisions are compiled (tests/test_gop_powers.py) where the declared bounds keep the base in the
    # domain and the denominator sign-definite; x, y, z lie in [0.1, 5], so x - 1 changes sign
    ("1/(x - 1)", lambda m: 1 / (m.x - 1)),
    ("x/(y - 1)", lambda m: m.x / (m.y - 1)),
    # polynomials inside exp and log are lifted to one bounded column (tests/test_gop_lifted_user_forms.py);
    # other nonlinear arguments are not
    ("log(x + exp(y**2))", lambda m: pyo.log(m.x + pyo.exp(m.y ** 2))),
    ("exp(exp(x))", lambda m: pyo.exp(pyo.exp(m.x))),
    # sqrt(e), abs(aff + products) and (aff + products)**2 are lifted (tests/test_gop_multiconvex.py)
    ("(x - 1)**1.5", lambda m: (m.x - 1) ** 1.5),
    ("abs(exp(x))", lambda m: abs(pyo.exp(m.x))),
    ("(x - 1)**0.25", lambda m: (m.x - 1) ** 0.25),
    ("(x - 1)**-1.5", lambda m: (m.x - 1) ** -1.5),
    ("x**y", lambda m: m.x ** m.y),
    ("tanh(x)", lambda m: pyo.tanh(m.x)),
    # x*y*z is lifted (q == x*y, then z*q): tests/test_gop_powers.py; exp(x)*exp(y) is exp(x + y)
    # (tests/test_pyomo_log_exp_products.py)
    ("exp(x)*log(y)", lambda m: pyo.exp(m.x) * pyo.log(m.y)),
    ("log(x - exp(y))", lambda m: pyo.log(m.x - pyo.exp(m.y))),
    ("(exp(x) - y)**2", lambda m: (pyo.exp(m.x) - m.y) ** 2),
    ("z*x*log(y)", lambda m: m.z * (m.x * pyo.log(m.y))),
    # affine factors are split only where their bounds keep them >= 0 (log(x*y) here is log x + log y); log((x - 1)*y)
    # is lifted whole (tests/test_pyomo_log_exp_products.py)
    ("log(x + abs(y - 1))", lambda m: pyo.log(m.x + abs(m.y - 1))),
]


@pytest.mark.parametrize("text,build", UNSUPPORTED, ids=[t for t, _ in UNSUPPORTED])
@pytest.mark.parametrize("where", ["objective", "constraint"])
def test_unsupported_terms_name_term_and_component(text, build, where):
    m = _model()
    bad = build(m)
    if where == "objective":
        m.obj = pyo.Objective(expr=m.x + 2 * bad)
        ctx = "objective 'obj'"
    else:
        m.obj = pyo.Objective(expr=m.x)
        m.c = pyo.Constraint([1, 2], rule=lambda m, i: (m.x + m.y <= 3) if i == 1 else (m.y + bad <= 4))
        ctx = "constraint 'c[2]'"
    with pytest.raises(ModelStructureError) as ei:
        compile_pyomo(m)
    msg = str(ei.value)
    assert ctx in msg
    assert str(bad) in msg, (str(bad), msg)
    assert "supported terms are" in msg


def test_unsupported_names_innermost_offending_subexpression():
    m = _model()
    m.obj = pyo.Objective(expr=(m.x - 1) ** 2 + m.y * pyo.exp(pyo.sin(m.z)))
    with pytest.raises(ModelStructureError, match=r"sin\(z\)"):
        compile_pyomo(m)


# --------------------------------------------------------------------------------------
# recognised structure
# --------------------------------------------------------------------------------------
def _groups(expr):
    return {a.kind: a for a in expr.atoms}


def _check_value(m, prog, mp, expr, pyomo_expr, sign=1.0):
    x = np.array([0.7, 1.3, 2.1][:prog.n])
    mp.load(x)
    assert expr.value(x) == pytest.approx(sign * pyo.value(pyomo_expr), rel=1e-12)


def test_entropy_products_become_xlogx_and_multiplied_neglog():
    m = _model()
    e = m.x * pyo.log(m.x) + pyo.log(m.y) * m.y - 2 * m.z * pyo.log(m.x)
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    g = _groups(prog.objective)
    assert set(g) == {"xlogx", "neglog"}
    assert len(g["xlogx"]) == 2 and np.all(g["xlogx"].mult < 0) and np.allclose(g["xlogx"].coef, 1.0)
    nl = g["neglog"]
    assert len(nl) == 1 and nl.mult[0] == prog.index["z"] and nl.coef[0] == pytest.approx(2.0)
    assert nl.A.toarray()[0].tolist() == [1.0, 0.0, 0.0]
    _check_value(m, prog, mp, prog.objective, e)


def test_multiplied_square_kept_as_atom():
    m = _model()
    e = m.z * (m.x - 2 * m.y + 1) ** 2 + 3 * (m.x - 1) ** 2
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    sq = _groups(prog.objective)["square"]
    assert len(prog.objective.quadratic) == 0
    assert sorted(sq.mult.tolist()) == [-1, prog.index["z"]]
    assert sorted(sq.coef.tolist()) == [1.0, 3.0]
    assert prog.objective.interactions() == {(0, 2), (1, 2)}
    _check_value(m, prog, mp, prog.objective, e)


def test_bilinear_and_linear_times_variable():
    m = _model()
    e = 2 * m.x * m.y + m.x * m.x + m.z * (m.x + 3) - (m.y - 1) * (m.z + 2)
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    assert prog.objective.is_quadratic and len(prog.objective.quadratic) > 0
    _check_value(m, prog, mp, prog.objective, e)


def test_quad_over_lin_and_log_sum_exp_patterns():
    m = _model()
    e = ((m.x + 1) ** 2 + 2 * (m.y - m.z) ** 2) / (m.z + 1) \
        + pyo.log(2 * pyo.exp(m.x) + pyo.exp(m.y - 1) + 0.5 * pyo.exp(2 * m.z)) \
        + pyo.log(1 + pyo.exp(m.x - m.y)) + m.z * pyo.log(pyo.exp(m.x) + pyo.exp(m.y)) \
        + pyo.log(3 * pyo.exp(m.x + m.y))
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    qol = _groups(prog.objective)["quad_over_lin"]
    assert len(qol) == 2 and np.allclose(qol.coef, [1.0, 2.0])
    (lse,) = prog.objective.lse
    assert len(lse) == 3  # log(3 exp(x + y)) is simplified to x + y + log 3
    assert lse.seg.tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert lse.b[:3] == pytest.approx([math.log(2), -1.0, math.log(0.5)])
    assert lse.A.toarray()[4].tolist() == [0.0, 0.0, 0.0] and lse.b[4] == pytest.approx(0.0)  # log(1 + ...)
    assert lse.mult.tolist() == [-1, -1, prog.index["z"]]
    assert prog.objective.linear.tolist() == [1.0, 1.0, 0.0]
    assert prog.objective.constant == pytest.approx(math.log(3))
    _check_value(m, prog, mp, prog.objective, e)


def test_log_of_quotients_and_products_of_positive_factors():
    """``log(1/(1 + exp(-x)))`` (the log-sigmoid as users write it), a softmax probability, constants and named
    expressions: logs of products and quotients of positive factors become sums of log-sum-exp rows."""
    m = _model()
    m.s = pyo.Expression(expr=1 / (1 + pyo.exp(-m.x)))
    e = -pyo.log(1 / (1 + pyo.exp(m.y - m.x))) - pyo.log(m.s) \
        - pyo.log(pyo.exp(m.x) / (pyo.exp(m.x) + pyo.exp(m.y) + 2)) + pyo.log10(2 * pyo.exp(m.z) / 3) \
        + m.z * pyo.log(0.5 / (pyo.exp(m.x) + pyo.exp(-m.y)))
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    (lse,) = prog.objective.lse
    assert len(lse) == 4
    assert sorted(lse.coef.tolist()) == [-1.0, 1.0, 1.0, 1.0]   # the multiplied row: -log(...) times z
    assert lse.mult.tolist().count(prog.index["z"]) == 1
    _check_value(m, prog, mp, prog.objective, e)


def test_constant_base_power_log10_fixed_vars_params_and_named_expressions():
    m = _model()
    m.p = pyo.Param(initialize=2.0, mutable=True)
    m.w = pyo.Var(initialize=3.0)
    m.w.fix()
    m.e = pyo.Expression(expr=(m.x - m.p) ** 2)
    e = 2 ** m.x + pyo.log10(m.y) + m.w * m.e + m.p * m.x ** 1 + m.y ** 0 + pyo.exp(m.w) * m.z \
        + abs(m.w - 5) * m.x + pyo.sin(m.w) * pyo.sqrt(m.w) * m.y
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    assert prog.names == ["x", "y", "z"]
    _check_value(m, prog, mp, prog.objective, e)


def test_variable_order_names_bounds_and_start():
    m = pyo.ConcreteModel()
    m.b = pyo.Var([(2, 1), (1, 2)], domain=pyo.NonNegativeReals)
    m.a = pyo.Var(domain=pyo.PositiveReals, bounds=(None, 4), initialize=1.5)
    m.unused = pyo.Var()
    m.u = pyo.Var(domain=pyo.UnitInterval, initialize=0.25)
    m.obj = pyo.Objective(expr=m.a + m.u)
    m.c = pyo.Constraint(expr=m.b[1, 2] + m.b[2, 1] >= m.a)
    prog, mp = compile_pyomo(m)
    assert prog.names == ["b[2,1]", "b[1,2]", "a", "u"]
    assert [v.name for v in mp.vars] == prog.names == mp.names
    assert prog.lb.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert prog.ub.tolist() == [math.inf, math.inf, 4.0, 1.0]
    assert np.isnan(prog.x0[0]) and prog.x0[2:].tolist() == [1.5, 0.25]
    c = prog.constraints[0]
    assert c.name == "c" and c.body.linear.tolist() == [-1.0, -1.0, 1.0, 0.0] and c.hi == 0.0  # a - b <= 0
    prog2, _ = compile_pyomo(m)
    assert prog2.names == prog.names


def test_load_writes_values_back():
    m = _model()
    m.obj = pyo.Objective(expr=(m.x - 1) ** 2 + m.y)
    prog, mp = compile_pyomo(m)
    mp.load([2.5, 3.5])
    assert (m.x.value, m.y.value, m.z.value) == (2.5, 3.5, 0.5)
    assert mp.values().tolist() == [2.5, 3.5]
    with pytest.raises(ValueError):
        mp.load([1.0])


def test_maximize_stored_negated():
    m = _model()
    m.obj = pyo.Objective(expr=-(m.x - 2) ** 2 + m.y, sense=pyo.maximize)
    prog, mp = compile_pyomo(m)
    assert prog.maximize
    x = np.array([1.0, 3.0])
    mp.load(x)
    assert prog.objective.value(x) == pytest.approx(-pyo.value(m.obj))
    assert prog.user_value(prog.objective.value(x)) == pytest.approx(pyo.value(m.obj))


# --------------------------------------------------------------------------------------
# model and data errors
# --------------------------------------------------------------------------------------
def test_objective_count_errors():
    m = _model()
    with pytest.raises(ModelStructureError, match="exactly one active objective"):
        compile_pyomo(m)
    m.o1 = pyo.Objective(expr=m.x)
    m.o2 = pyo.Objective(expr=m.y)
    with pytest.raises(ModelStructureError, match="'o1', 'o2'"):
        compile_pyomo(m)
    m.o2.deactivate()
    assert compile_pyomo(m)[0].names == ["x"]


@pytest.mark.parametrize("domain", [pyo.Binary, pyo.Integers, pyo.NonNegativeIntegers])
def test_integer_domain_rejected(domain):
    m = _model()
    m.k = pyo.Var(domain=domain)
    m.obj = pyo.Objective(expr=m.x + m.k)
    with pytest.raises(ModelStructureError, match="variable 'k'.*discrete domain"):
        compile_pyomo(m)
    m.k.fix(1)  # a fixed integer variable is a constant
    assert compile_pyomo(m)[0].names == ["x"]


def test_crossed_bounds_rejected():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(2, 1))
    m.obj = pyo.Objective(expr=m.x)
    with pytest.raises(InputDataError, match="variable 'x'"):
        compile_pyomo(m)


def test_nan_param_coefficient_names_constraint():
    m = _model()
    m.p = pyo.Param([1, 2], initialize={1: 1.0, 2: float("nan")}, mutable=True, within=pyo.Any)
    m.obj = pyo.Objective(expr=m.x)
    m.c = pyo.Constraint([1, 2], rule=lambda m, i: m.p[i] * (m.x - 1) ** 2 <= 3)
    with pytest.raises(InputDataError) as ei:
        compile_pyomo(m)
    assert "constraint 'c[2]'" in str(ei.value) and "p[2]" in str(ei.value)


def test_inf_data_in_objective_and_nan_bounds():
    m = _model()
    m.obj = pyo.Objective(expr=float("inf") * m.x)
    with pytest.raises(InputDataError, match="objective 'obj'"):
        compile_pyomo(m)
    m2 = _model()
    m2.p = pyo.Param(initialize=float("nan"), mutable=True, within=pyo.Any)
    m2.obj = pyo.Objective(expr=m2.x)
    m2.c = pyo.Constraint(expr=m2.x + m2.y <= m2.p)
    with pytest.raises(InputDataError, match="constraint 'c'"):
        compile_pyomo(m2)
    m3 = _model()
    m3.w = pyo.Var()
    m3.w.fix(None)
    m3.obj = pyo.Objective(expr=m3.x * m3.w)
    with pytest.raises(InputDataError, match="'w' is fixed but has no value"):
        compile_pyomo(m3)


# --------------------------------------------------------------------------------------
# SolverFactory
# --------------------------------------------------------------------------------------
def _qp():
    """min (x-1)^2 + (y-2)^2 s.t. x + y <= 2: optimum (0.5, 1.5), value 0.5."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-5, 5))
    m.y = pyo.Var(bounds=(-5, 5))
    m.obj = pyo.Objective(expr=(m.x - 1) ** 2 + (m.y - 2) ** 2)
    m.c = pyo.Constraint(expr=m.x + m.y <= 2)
    return m


def test_solverfactory_end_to_end_convex():
    m = _qp()
    opt = pyo.SolverFactory("vo_test_scipy")
    assert opt.available() and opt.license_is_valid() and opt.version() == (0, 1, 0)
    results = opt.solve(m)
    assert pyo.check_optimal_termination(results)
    pyo.assert_optimal_termination(results)
    assert results.solver.status == pyo.SolverStatus.ok
    assert results.solver.termination_condition == pyo.TerminationCondition.locallyOptimal
    assert results.solver.name == "vo_test_scipy"
    assert results.solver.wall_time > 0
    assert results.problem.sense == pyo.minimize
    assert results.problem.number_of_variables == 2 and results.problem.number_of_constraints == 1
    # SLSQP proves nothing: Pyomo's default bounds stay
    assert results.problem.lower_bound == -math.inf and results.problem.upper_bound == math.inf
    assert (pyo.value(m.x), pyo.value(m.y)) == pytest.approx((0.5, 1.5), abs=1e-6)
    vr = results.varopt_result
    assert isinstance(vr, varopt.Result) and vr.status == "converged"
    assert vr.objective == pytest.approx(0.5, abs=1e-8) == pytest.approx(pyo.value(m.obj), abs=1e-8)
    assert results.varopt_mapping.names == ["x", "y"]
    assert pyo.SolverFactory.doc("vo_test_scipy") == plugin_solver.ScipyTestSolver.summary


def test_maximize_through_solverfactory_reports_user_sense():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 4))
    m.y = pyo.Var(bounds=(0, 4))
    m.obj = pyo.Objective(expr=3 * m.x + 2 * m.y + 1, sense=pyo.maximize)
    m.c = pyo.Constraint(expr=m.x + m.y <= 5)
    ref = linprog([-3, -2], A_ub=[[1, 1]], b_ub=[5], bounds=[(0, 4), (0, 4)], method="highs")
    results = pyo.SolverFactory("vo_test_linprog").solve(m)
    assert results.solver.termination_condition == pyo.TerminationCondition.optimal
    assert results.problem.sense == pyo.maximize
    assert results.problem.lower_bound == pytest.approx(-ref.fun + 1)
    assert results.problem.upper_bound == pytest.approx(-ref.fun + 1)
    assert results.varopt_result.objective == pytest.approx(-ref.fun + 1) == pytest.approx(pyo.value(m.obj))
    assert (m.x.value, m.y.value) == pytest.approx(tuple(ref.x))

    m2 = _qp()
    m2.obj.deactivate()
    m2.o = pyo.Objective(expr=-(m2.x - 1) ** 2 - (m2.y - 2) ** 2 + 7, sense=pyo.maximize)
    r2 = pyo.SolverFactory("vo_test_scipy").solve(m2)
    assert r2.varopt_result.objective == pytest.approx(6.5, abs=1e-8) == pytest.approx(pyo.value(m2.o))


def test_infeasible_leaves_values_untouched():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1), initialize=0.25)
    m.obj = pyo.Objective(expr=m.x)
    m.c = pyo.Constraint(expr=m.x >= 2)
    results = pyo.SolverFactory("vo_test_linprog").solve(m)
    assert results.solver.status == pyo.SolverStatus.warning
    assert results.solver.termination_condition == pyo.TerminationCondition.infeasible
    assert not pyo.check_optimal_termination(results)
    with pytest.raises(RuntimeError):
        pyo.assert_optimal_termination(results)
    assert m.x.value == 0.25
    assert results.problem.lower_bound == -math.inf


def test_unbounded_status():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=3.0)
    m.obj = pyo.Objective(expr=m.x)
    results = pyo.SolverFactory("vo_test_linprog").solve(m)
    assert results.solver.termination_condition == pyo.TerminationCondition.unbounded
    assert m.x.value == 3.0


@pytest.mark.parametrize("status", STATUSES)
def test_status_mapping_and_optimal_check(status):
    m = _qp()
    from varopt.frontends.pyomo_compile import compile_pyomo as cp
    prog, mp = cp(m)
    opt = pyo.SolverFactory("vo_test_scipy")
    res = Result("vo_test_scipy", status, x=np.zeros(2), objective=0.0)
    results = opt._results(m, prog, mp, res, False)
    st, tc = STATUS_MAP[status]
    assert results.solver.status == getattr(pyo.SolverStatus, st)
    assert results.solver.termination_condition == getattr(pyo.TerminationCondition, tc)
    assert pyo.check_optimal_termination(results) == (status in ("optimal", "converged"))


def test_load_solutions_false_and_options_paths():
    m = _qp()
    m.x.value, m.y.value = 0.0, 0.0
    with pyo.SolverFactory("vo_test_scipy", options={"tol": 1e-12}) as opt:
        opt.options["max_iter"] = 300
        results = opt.solve(m, load_solutions=False, tee=True)
    assert (m.x.value, m.y.value) == (0.0, 0.0)
    assert results.varopt_result.options == {"tol": 1e-12, "max_iter": 300, "verbose": True}
    results.varopt_mapping.load(results.varopt_result.x)
    assert (m.x.value, m.y.value) == pytest.approx((0.5, 1.5), abs=1e-6)
    # keyword options override opt.options; options= dict is merged too
    opt = pyo.SolverFactory("vo_test_scipy")
    opt.options.max_iter = 7
    r = opt.solve(_qp(), options={"tol": 1e-9}, max_iter=50)
    assert r.varopt_result.options == {"max_iter": 50, "tol": 1e-9}


def test_max_iter_reaches_the_solver():
    m = _qp()
    m.obj.deactivate()
    m.o = pyo.Objective(expr=pyo.exp(m.x - 3) + (m.y - 2) ** 2 + m.x * m.y)
    results = pyo.SolverFactory("vo_test_scipy").solve(m, max_iter=1)
    assert results.varopt_result.status == "iteration_limit"
    assert results.solver.termination_condition == pyo.TerminationCondition.maxIterations
    assert not pyo.check_optimal_termination(results)


def test_unknown_and_invalid_options():
    opt = pyo.SolverFactory("vo_test_scipy")
    with pytest.raises(InvalidOptionError) as ei:
        opt.solve(_qp(), bogus=1)
    msg = str(ei.value)
    assert "'bogus'" in msg
    for name in ("max_iter", "time_limit", "verbose", "tol", "tee", "load_solutions"):
        assert name in msg
    opt.options["nope"] = 3
    with pytest.raises(InvalidOptionError, match="'nope'"):
        opt.solve(_qp())
    with pytest.raises(InvalidOptionError, match="'max_iter'"):
        pyo.SolverFactory("vo_test_scipy").solve(_qp(), max_iter=-2)
    with pytest.raises(InvalidOptionError, match="'tol'"):
        pyo.SolverFactory("vo_test_scipy").solve(_qp(), tol="abc")


def test_config_dict_mirrors_option_set():
    opt = pyo.SolverFactory("vo_test_scipy")
    cfg = type(opt).CONFIG
    assert set(cfg.keys()) == {"max_iter", "time_limit", "verbose", "tol", "tee", "load_solutions", "warmstart",
                               "keepfiles", "symbolic_solver_labels", "report_timing"}
    assert cfg.max_iter == 500 and cfg.tol == 1e-10 and cfg.load_solutions is True
    assert cfg.get("tol")._description == "SLSQP tolerance"
    assert "SLSQP tolerance" in cfg.generate_documentation()
    c = cfg()
    c.max_iter = "12"
    assert c.max_iter == 12
    with pytest.raises(ValueError, match="must be positive"):
        c.max_iter = 0
