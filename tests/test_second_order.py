"""Second-order check before a local solver says "locally optimal" (conventions issue, item 5)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from varopt.core import second_order
from varopt.program.expression import Expression
from varopt.program.program import Constraint, Program
from varopt.program.terms import QuadraticTerms

pyo = pytest.importorskip("pyomo.environ")
import varopt  # noqa: E402,F401


def _saddle_model():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 1), initialize=0.0)
    m.y = pyo.Var(bounds=(-1, 1), initialize=0.0)
    m.obj = pyo.Objective(expr=m.x * m.y)
    return m


def _descends(m, res, obj):
    """The user's own evaluation: the objective decreases along the reported direction."""
    d = dict(zip(res.names, res.info["descent_direction"]))
    base = pyo.value(obj)
    x0 = {v.name: v.value for v in m.component_data_objects(pyo.Var)}
    for v in m.component_data_objects(pyo.Var):
        v.set_value(x0[v.name] + 1e-2 * d[v.name])
    lower = pyo.value(obj)
    for v in m.component_data_objects(pyo.Var):
        v.set_value(x0[v.name])
    return lower < base - 1e-7


def test_ipsa_saddle_is_reported_as_stationary_not_locally_optimal():
    m = _saddle_model()
    results = pyo.SolverFactory("ipsa").solve(m, step_power=0.0, hessian="bfgs")
    assert results.solver.termination_condition == pyo.TerminationCondition.other
    assert "not a local minimum" in results.solver.message
    res = results.varopt_result
    assert res.status == "stationary" and res.info["second_order"]["min_curvature"] == pytest.approx(-1.0)
    assert (m.x.value, m.y.value) == (0.0, 0.0)
    assert _descends(m, res, m.obj)


def test_majorize_saddle_of_a_latent_objective_and_a_true_minimum():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=0.0)
    m.y = pyo.Var(initialize=0.0)
    m.obj = pyo.Objective(expr=0.25 * m.x ** 2 + m.y ** 2 - pyo.log(pyo.exp(m.x) + pyo.exp(-m.x)))
    res = pyo.SolverFactory("majorize").solve(m).varopt_result
    assert res.status == "stationary" and _descends(m, res, m.obj)
    m.x.set_value(0.3)
    results = pyo.SolverFactory("majorize").solve(m)
    assert results.solver.termination_condition == pyo.TerminationCondition.locallyOptimal
    assert results.varopt_result.info["second_order"]["ok"]
    # an independent check of local optimality: f grows in every direction around the point
    x0, f0 = m.x.value, pyo.value(m.obj)
    for t in (1e-3, -1e-3):
        m.x.set_value(x0 + t)
        assert pyo.value(m.obj) > f0
    m.x.set_value(x0)


def test_convex_program_needs_no_check_and_oracle_runs_cannot_be_checked():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 1), initialize=0.0)
    m.obj = pyo.Objective(expr=(m.x - 0.5) ** 2)
    res = pyo.SolverFactory("majorize").solve(m).varopt_result
    assert res.status == "optimal"
    # a run whose gradient came from a user oracle cannot be checked against the program, and says so
    from varopt.result import Result
    from varopt.solvers.ipsa.solver import IpsaSolver
    opts = IpsaSolver.options.validate({"oracle": lambda x, rng: x})
    reason = IpsaSolver().second_order_skip(opts)
    p = _qp(-np.eye(2), np.zeros((0, 2)), np.zeros(2))
    r = second_order.apply(p, Result("ipsa", "converged", x=np.zeros(2), objective=0.0), reason)
    assert r.status == "converged" and r.info["second_order"].startswith("not checked: the gradient came from a user oracle")
    r = second_order.apply(p, Result("ipsa", "converged", x=np.zeros(2), objective=0.0))
    assert r.status == "stationary"


def _qp(H, A, x):
    """``f(z) = (z - x)^T H (z - x) / 2`` (stationary at ``x``) with rows ``A z = A x`` and a wide box."""
    n = H.shape[0]
    iu = np.triu_indices(n)
    w = np.where(iu[0] == iu[1], 0.5, 1.0) * H[iu]
    lin = -H @ x
    obj = Expression(n, 0.5 * x @ H @ x, lin, QuadraticTerms(iu[0], iu[1], w, n))
    cons = [Constraint(f"r{k}", Expression(n, 0.0, A[k]), float(A[k] @ x), float(A[k] @ x)) for k in range(A.shape[0])]
    return Program([f"z{j}" for j in range(n)], np.full(n, -10.0), np.full(n, 10.0), obj, cons)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 7), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_check_agrees_with_the_reduced_hessian_and_its_direction_descends(n, m, seed):
    rng = np.random.default_rng(seed)
    m = min(m, n - 1)
    B = rng.normal(size=(n, n))
    H = B @ B.T * rng.choice([1.0, 0.05]) - rng.choice([0.0, 1.0]) * np.eye(n)
    A = rng.normal(size=(m, n))
    x = rng.uniform(-1, 1, n)
    p = _qp(H, A, x)
    rep = second_order.check(p, x)
    from scipy.linalg import null_space
    Z = null_space(A) if m else np.eye(n)
    lam = np.linalg.eigvalsh(Z.T @ H @ Z).min()
    scale = max(1.0, np.abs(H).max())
    if lam < -1e-6 * scale:
        assert not rep["ok"]
        d = rep["direction"]
        assert np.abs(A @ d).max(initial=0) < 1e-8
        t = 1e-2
        assert p.objective.value(x + t * d) < p.objective.value(x) and p.max_violation(x + t * d) < 1e-8
    elif lam > 1e-6 * scale:
        assert rep["ok"]


def test_large_operator_path_matches_the_dense_path(monkeypatch):
    rng = np.random.default_rng(0)
    n = 40
    B = rng.normal(size=(n, n))
    H = B @ B.T / n - 0.3 * np.eye(n)
    A = rng.normal(size=(5, n))
    x = rng.uniform(-1, 1, n)
    p = _qp(H, A, x)
    dense = second_order.check(p, x)
    monkeypatch.setattr(second_order, "DENSE_MAX", 10)
    lanczos = second_order.check(p, x)
    assert dense["ok"] == lanczos["ok"] is False
    assert lanczos["min_curvature"] == pytest.approx(dense["min_curvature"], rel=1e-10)
