"""Results where Pyomo and CVXPY users look for them (written the way those users write code)."""
import pathlib
import re

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt
from varopt.errors import InvalidOptionError


def bilinear_model():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.y = pyo.Var(bounds=(-1, 2))
    m.obj = pyo.Objective(expr=m.x * m.y - m.x)
    return m


def test_pyomo_load_solutions_false_then_load_from():
    m = bilinear_model()
    results = pyo.SolverFactory("gop").solve(m, load_solutions=False)
    assert m.x.value is None and m.y.value is None
    assert len(results.solution) == 1
    m.solutions.load_from(results)
    assert (m.x.value, m.y.value) == pytest.approx((1.0, -1.0))
    assert pyo.value(m.obj) == pytest.approx(-2.0)
    pyo.assert_optimal_termination(results)


def test_pyomo_infeasible_has_no_solution_and_the_standard_condition():
    m = bilinear_model()
    m.c = pyo.Constraint(expr=m.x + m.y >= 5)
    results = pyo.SolverFactory("gop").solve(m)
    assert results.solver.termination_condition == pyo.TerminationCondition.infeasible
    assert len(results.solution) == 0 and m.x.value is None


def test_pyomo_tee_streams_progress_to_stdout(capsys):
    pyo.SolverFactory("gop").solve(bilinear_model(), tee=True)
    out, err = capsys.readouterr()
    assert "gop it" in out and "gop it" not in err


def test_pyomo_generic_arguments_are_accepted():
    results = pyo.SolverFactory("gop").solve(bilinear_model(), keepfiles=False, symbolic_solver_labels=True,
                                             report_timing=False)
    pyo.assert_optimal_termination(results)


def test_none_for_an_option_without_a_none_meaning_is_a_clear_error():
    with pytest.raises(InvalidOptionError, match="rel_gap.*cannot be None"):
        pyo.SolverFactory("gop").solve(bilinear_model(), rel_gap=None)
    # None where it means something: no iteration limit, relative gap only
    results = pyo.SolverFactory("gop").solve(bilinear_model(), max_iter=None, abs_gap=None)
    pyo.assert_optimal_termination(results)


def test_cvxpy_solver_stats_and_status_constants():
    x = cp.Variable(2)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - np.array([1.0, -2.0]))), [x >= 0])
    val = prob.solve(method="majorize")
    assert prob.status == cp.OPTIMAL and val == pytest.approx(4.0, abs=1e-8)
    st = prob.solver_stats
    assert st.solver_name == "majorize" and st.solve_time > 0 and st.num_iters >= 1
    assert st.extra_stats["varopt_result"] is prob.varopt_result


def test_cvxpy_verbose_prints_to_stdout(capsys):
    x = cp.Variable(name="x", bounds=[0, 1])
    y = cp.Variable(name="y", bounds=[-1, 2])
    prob = cp.Problem(cp.Minimize(x * y - x))
    prob.solve(method="gop", verbose=True)
    out, _ = capsys.readouterr()
    assert "gop it" in out and prob.value == pytest.approx(-2.0)


def test_no_cvxpy_private_attribute_is_written_in_varopt():
    root = pathlib.Path(varopt.__file__).parent
    pat = re.compile(r"\bprob(lem)?\._[a-z]\w*\s*=")
    hits = [f"{p}:{i}" for p in root.rglob("*.py") for i, line in enumerate(p.read_text().splitlines(), 1)
            if pat.search(line)]
    assert hits == []


def _fixed_model():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.x.fix(0.5)
    m.obj = pyo.Objective(expr=(m.x - 1) ** 2)
    return m


@pytest.mark.parametrize("solver", ["gop", "ipsa", "majorize"])
def test_all_variables_fixed_is_a_constant_problem(solver):
    m = _fixed_model()
    results = pyo.SolverFactory(solver).solve(m)
    pyo.assert_optimal_termination(results)
    assert results.varopt_result.objective == pytest.approx(0.25) and m.x.value == 0.5
    m.c = pyo.Constraint(expr=m.x >= 0.75)  # a violated constant constraint
    results = pyo.SolverFactory(solver).solve(m)
    assert results.solver.termination_condition == pyo.TerminationCondition.infeasible


def test_ipsa_reports_an_infeasible_model_as_infeasible():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.obj = pyo.Objective(expr=m.x ** 2)
    m.c = pyo.Constraint(expr=m.x >= 2)
    results = pyo.SolverFactory("ipsa").solve(m)
    assert results.solver.termination_condition == pyo.TerminationCondition.infeasible
    assert m.x.value is None


def test_progress_of_a_maximisation_shows_the_users_values(capsys):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.y = pyo.Var(bounds=(-1, 2))
    m.obj = pyo.Objective(expr=m.x - m.x * m.y + 0.1 * m.y, sense=pyo.maximize)
    pyo.SolverFactory("gop").solve(m, tee=True)
    out, _ = capsys.readouterr()
    last = [ln for ln in out.splitlines() if ln.startswith("gop it")][-1].split()
    vals = {k: float(v) for k, v in zip(last[3::2], last[4::2]) if k in ("lower", "upper", "objective")}
    assert vals["objective"] == pytest.approx(pyo.value(m.obj), abs=1e-6) == pytest.approx(1.9, abs=1e-6)
    assert vals["lower"] <= vals["objective"] + 1e-9 <= vals["upper"] + 2e-9
