"""Structural and API forms of Pyomo and CVXPY models as users write them, through gop, ipsa, majorize and
klprox (bug hunt, branch huntf): each case fails before its fix and is checked against an independent
reference (CVXPY + Clarabel, SCIP, a closed form) with the values read back the way a user reads them."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import InvalidOptionError


def _lp_with_import_suffixes():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, None))
    m.y = pyo.Var(bounds=(0, None))
    m.o = pyo.Objective(expr=2 * m.x + m.y + 0.5 * m.y ** 2)
    m.c = pyo.Constraint(expr=m.x + m.y >= 1)
    m.dual = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    m.rc = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    return m


@pytest.mark.parametrize("name", ["majorize", "gop", "ipsa"])
def test_import_suffixes_of_an_earlier_solve_are_emptied_when_the_point_is_written(name):
    """A user compares solvers on one model with ``m.dual = Suffix(IMPORT)``: after a varopt solve the suffix
    still held the multipliers of the earlier solve (here written by hand as another solver's import would),
    which read as this solve's. Pyomo's own ``solutions.load_from`` empties import suffixes first."""
    m = _lp_with_import_suffixes()
    m.dual[m.c] = 1.0
    m.rc[m.x] = 1.0
    kw = {"batch_size": 10, "max_iter": 20} if name == "ipsa" else {}
    pyo.SolverFactory(name).solve(m, **kw)
    assert len(m.dual) == 0 and len(m.rc) == 0
    assert abs(pyo.value(m.x) + pyo.value(m.y) - 1) < 0.1 or name == "ipsa"


def test_import_suffixes_are_left_alone_when_nothing_is_written():
    m = _lp_with_import_suffixes()
    m.dual[m.c] = 1.0
    pyo.SolverFactory("majorize").solve(m, load_solutions=False)
    assert m.dual[m.c] == 1.0


@pytest.mark.parametrize("cons", [[], ["sum"]])
def test_ipsa_exact_hessian_of_a_sampled_term_that_is_singular_is_named(cons):
    """``hessian='exact'`` with the default ``batch_size=1`` on ``sum_squares(x - c)``: the sampled term
    ``(x_i - c_i)^2`` curves one variable only and the reduced system (2.20) is singular. It raised
    SolverBugError ('reduced system (2.20) is singular'), as if varopt were broken; the option is named now."""
    x = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - np.arange(1, 4))), [cp.sum(x) <= 3] if cons else [])
    with pytest.raises(InvalidOptionError, match=r"hessian='exact'.*singular.*batch_size >= the number of terms \(3\)"):
        prob.solve(method="ipsa", hessian="exact", max_iter=20)
    # the full batch is the Newton method: the projection of (1, 2, 3) on sum(x) <= 3 is (0, 1, 2)
    prob.solve(method="ipsa", hessian="exact", step_power=0, batch_size=3, max_iter=200)
    assert np.allclose(x.value, [0, 1, 2] if cons else [1, 2, 3], atol=1e-6)


def test_ipsa_exact_hessian_of_a_rank_deficient_full_objective_is_named():
    x = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(np.ones((5, 3)) @ x - 1)))
    with pytest.raises(InvalidOptionError, match=r"hessian='exact'.*the objective has no curvature"):
        prob.solve(method="ipsa", hessian="exact", batch_size=100, max_iter=20)


@pytest.mark.parametrize("name", ["majorize", "exact"])
def test_an_abstract_model_not_yet_constructed_is_named(name):
    """An ``AbstractModel`` passed before ``create_instance``: the error said the model has no active objective
    ('found 0 (none)'), although the user wrote one; the instance solves (against the closed form 0)."""
    from varopt.errors import ModelStructureError
    am = pyo.AbstractModel()
    am.x = pyo.Var(bounds=(-1, 2))
    am.o = pyo.Objective(rule=lambda m: (m.x - 0.5) ** 2)
    with pytest.raises(ModelStructureError, match="abstract model that has not been constructed.*create_instance"):
        pyo.SolverFactory(name).solve(am)
    if name == "majorize":
        inst = am.create_instance()
        pyo.SolverFactory(name).solve(inst)
        assert abs(pyo.value(inst.x) - 0.5) < 1e-6


def test_gop_names_the_users_norm_and_what_the_tree_lacks():
    """``logistic loss + norm(w, 2)`` (a group-lasso-style penalty) to gop: the error named only varopt's own
    row '_aux_sqrt[0]_def' ('the term _aux_sqrt[0]*_aux_sqrt[0] is nonlinear within one GOP block') while the
    other solvers' errors sent the user to gop. It now names the user's term and why the tree, which takes norms,
    cannot run (the log-sum-exp rows); the same norm as a constraint with a least-squares objective is certified
    (against Clarabel)."""
    from varopt.errors import ModelStructureError
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((30, 4)), np.sign(rng.standard_normal(30))
    w = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w))) + cp.norm(w, 2)))
    with pytest.raises(ModelStructureError, match=r"sqrt in the term 'pnorm\(.*, 2\)'.*does not cover log-sum-exp"):
        prob.solve(method="gop", mode="tree")
    # (under 'auto' the program is convex and takes the direct convex path of docs/gop.md §13e)
    ref = prob.solve(solver="CLARABEL")
    assert abs(prob.solve(method="gop") - ref) < 1e-6 * abs(ref)
    assert prob.varopt_result.info["mode"] == "convex"
    prob = cp.Problem(cp.Minimize(cp.sum_squares(X @ w - y)), [cp.norm(w, 2) <= 0.5])
    ref = prob.solve(solver="CLARABEL")
    assert abs(prob.solve(method="gop") - ref) < 1e-6 * abs(ref)


def test_klprox_verbose_and_tee_print_a_conjugate_model_solved_at_the_start():
    """A Gaussian (conjugate) model is exact after klprox's prior step, so the run stopped before its first history
    record: ``verbose=True`` / Pyomo ``tee=True`` printed nothing and the history was empty. The posterior mean is the
    closed form ``(X'X + P)^{-1} X'y``."""
    import contextlib
    import io
    rng = np.random.default_rng(1)
    X = rng.standard_normal((25, 3))
    y = X @ np.ones(3) + 0.1 * rng.standard_normal(25)
    w = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(y - X @ w) / 2 + 0.25 * cp.sum_squares(w)))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        prob.solve(method="klprox", verbose=True)
    assert "klprox it" in buf.getvalue() and len(prob.varopt_result.history) == 1
    assert np.allclose(w.value, np.linalg.solve(X.T @ X + 0.5 * np.eye(3), X.T @ y), atol=1e-8)
    m = pyo.ConcreteModel()
    m.w = pyo.Var(range(3))
    m.o = pyo.Objective(expr=sum((y[i] - sum(X[i, j] * m.w[j] for j in range(3))) ** 2 / 2 for i in range(25))
                        + 0.25 * sum(m.w[j] ** 2 for j in range(3)))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        pyo.SolverFactory("klprox").solve(m, tee=True)
    assert "klprox it" in buf.getvalue()


@pytest.mark.parametrize("z, status", [(0.5, "ok"), (1.0, "ok"), (2.0, "infeasible")])
def test_ipsa_rows_made_constant_by_fixed_variables(z, status):
    """A what-if analysis fixes ``z``; the rows ``z <= 1`` and ``z == z0`` become constants. ipsa refused them ('linear
    constraint c (<= 1) has no variables and no strict interior', and 'constraint e is a nonlinear equality') where
    majorize and gop drop a constant row that holds and report infeasible for one that fails; so does ipsa now. The
    answer is the closed form x = 0.5 (the projection of 0.5 on [0, 1])."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.z = pyo.Var(initialize=z)
    m.z.fix()
    m.c = pyo.Constraint(expr=m.z <= 1)
    m.e = pyo.Constraint(expr=m.z == z)
    m.o = pyo.Objective(expr=(m.x - 0.5) ** 2 + (m.x - 0.5) ** 2)
    r = pyo.SolverFactory("ipsa").solve(m, batch_size=2, step_power=0, hessian="exact", max_iter=100)
    if status == "infeasible":
        assert r.solver.termination_condition == pyo.TerminationCondition.infeasible
        assert "'c' has no free variable" in r.solver.message and m.x.value is None
    else:
        assert abs(pyo.value(m.x) - 0.5) < 1e-6 and m.z.value == z
    x = cp.Variable(2)
    p = cp.Parameter(value=z)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - 1)), [p <= 1, x <= 3])
    prob.solve(method="ipsa", batch_size=2, step_power=0, hessian="exact", max_iter=100)
    if status == "infeasible":
        assert prob.status == "infeasible" and x.value is None
    else:
        assert np.allclose(x.value, 1, atol=1e-6)


def test_a_diag_variable_solved_before_by_another_solver_is_named():
    """``cp.Variable((2, 2), diag=True)`` after an SCS solve holds a sparse value: varopt read it as the start and
    raised TypeError ('float() argument must be ... not dia_array') before its check of the attribute."""
    from varopt.errors import ModelStructureError
    X = cp.Variable((2, 2), diag=True)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(cp.diag(X) - 1)))
    prob.solve(solver="SCS")
    with pytest.raises(ModelStructureError, match="diag=True"):
        prob.solve(method="majorize")


def test_cvxpy_warm_start_after_a_parameter_change_is_a_hint_for_ipsa():
    """``warm_start=True`` after the Parameter ``t`` moved so that the previous point violates ``sum(x) <= t``:
    ipsa raised 'x0 is not strictly feasible' (an option the user never passed); CVXPY's warm start is a hint, and
    ipsa now starts from its own strictly feasible point. Closed form: the projection of (3, 1) on sum(x) <= t."""
    t = cp.Parameter(value=1.0)
    x = cp.Variable(2)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - np.array([3.0, 1.0]))), [cp.sum(x) <= t])
    kw = dict(step_power=0, hessian="exact", batch_size=2, max_iter=200, warm_start=True)
    prob.solve(method="ipsa", **kw)
    assert np.allclose(x.value, [1.5, -0.5], atol=1e-6)
    t.value = -2.0
    prob.solve(method="ipsa", **kw)
    assert np.allclose(x.value, [0.0, -2.0], atol=1e-6)
    t.value = 5.0   # the previous point is strictly feasible: the run starts there (objective 9 + 9)
    x.value = np.array([10.0, 10.0])
    prob.solve(method="ipsa", **kw)
    assert np.allclose(x.value, [3.0, 1.0], atol=1e-6)
    assert abs(prob.varopt_result.history[0]["objective"] - 18.0) < 1e-6   # not f(10, 10) = 130


@pytest.mark.parametrize("bounds", [None, [-10, 10]])
def test_gop_an_equality_written_as_two_inequalities(bounds):
    """``x0 <= x1`` and ``x0 >= x1`` (an equality from data with lo == hi, written as two rows): both rows are active
    and HiGHS returns multipliers of +-1e-23; the one of the wrong sign picked the infinite side of its row, and gop
    raised SolverBugError ('a non-connected primal variable without finite bounds has a nonzero Lagrangian
    gradient; declare bounds', also with bounds). Reference: Clarabel (convex) and SCIP (bilinear)."""
    x = cp.Variable(2, bounds=bounds)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - np.array([1.0, 3.0]))), [x[0] <= x[1], x[0] >= x[1]])
    ref = prob.solve(solver="CLARABEL")
    assert abs(prob.solve(method="gop") - ref) < 1e-6 and np.allclose(x.value, [2, 2], atol=1e-6)
    x = cp.Variable(2, bounds=[0, 3])
    y = cp.Variable(bounds=[0, 2])
    prob = cp.Problem(cp.Minimize(x[0] * y - x[1] + cp.square(y - 1)), [x[0] <= x[1], x[0] >= x[1], x[0] + y <= 3])
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1], bounds=(0, 3))
    m.y = pyo.Var(bounds=(0, 2))
    m.o = pyo.Objective(expr=m.x[0] * m.y - m.x[1] + (m.y - 1) ** 2)
    m.c = pyo.ConstraintList()
    for c in (m.x[0] <= m.x[1], m.x[0] >= m.x[1], m.x[0] + m.y <= 3):
        m.c.add(c)
    pyo.SolverFactory("scip_direct").solve(m)
    assert abs(prob.solve(method="gop") - pyo.value(m.o)) < 1e-6


def test_pyomo_warmstart_keyword():
    """``opt.solve(m, warmstart=True)``, the Pyomo keyword written for MIP solvers, was an unknown option although
    every solver with a starting point starts from the variables' values (and ``warm_start_capable()`` said False).
    True is that start; False ignores the values (ipsa's own interior start, the centre of the box). The first
    history record is the objective at the start (closed forms)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1), initialize=0.3)
    m.y = pyo.Var(bounds=(0, 2), initialize=1.7)
    m.o = pyo.Objective(expr=(m.x - 3) ** 2 + (m.y - 1) ** 2)
    opt = pyo.SolverFactory("ipsa")
    assert opt.warm_start_capable() and not pyo.SolverFactory("gop").warm_start_capable()
    r = opt.solve(m, warmstart=True, max_iter=3, batch_size=2)
    assert abs(r.varopt_result.history[0]["objective"] - (2.7 ** 2 + 0.7 ** 2)) < 1e-12
    m.x.value, m.y.value = 0.3, 1.7
    r = opt.solve(m, warmstart=False, max_iter=3, batch_size=2)
    assert abs(r.varopt_result.history[0]["objective"] - 2.5 ** 2) < 1e-12


def test_pyomo_wallclock_time_is_set():
    """``results.solver.wallclock_time`` (the field Pyomo declares and its direct interfaces fill) was None: varopt
    wrote its time only under its own name ``wall_time``."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.o = pyo.Objective(expr=(m.x - 3) ** 2)
    r = pyo.SolverFactory("majorize").solve(m)
    assert r.solver.wallclock_time == r.varopt_result.wall_time > 0 and r.solver.wall_time == r.solver.wallclock_time
