"""Regression: gop on a convex (no coupling) log-sum-exp problem returns promptly and matches Clarabel.

An earlier version hung inside HiGHS on this model despite ``time_limit``."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")
import varopt  # noqa: E402,F401


def test_gop_convex_logistic_matches_clarabel():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = (rng.random(200) < 0.5) * 2 - 1
    w = cp.Variable(5, bounds=[-10, 10])
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w))) + cp.sum_squares(w)))
    v = prob.solve(method="gop", time_limit=20)
    res = prob.varopt_result
    assert res.status == "optimal" and res.lower_bound <= v + 1e-9
    ref = prob.solve(solver="CLARABEL")
    assert v == pytest.approx(ref, rel=1e-6)


# ---------------------------------------------------------------- convexity inside a block
def _qp_pyomo():
    pyo = pytest.importorskip("pyomo.environ")
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(-5, 5))
    m.obj = pyo.Objective(expr=(m.x[0] - 1) ** 2 + 2 * (m.x[1] + .5) ** 2 + (m.x[2] - 3) ** 2 + 0.5 * m.x[0] * m.x[1])
    m.c = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) <= 2)
    return pyo, m


def _qp_clarabel():
    """The same QP through CVXPY + Clarabel: 1/2 x'Px + q'x + 10.5 with P its (PSD) Hessian."""
    x = cp.Variable(3)
    P = np.array([[2.0, .5, 0], [.5, 4, 0], [0, 0, 2]])
    q = np.array([-2.0, 2.0, -6.0])
    prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, P) + q @ x + 10.5), [cp.sum(x) <= 2, x >= -5, x <= 5])
    return prob.solve(solver="CLARABEL")


@pytest.mark.parametrize("partition", [None, "x"])
def test_convex_qp_in_one_primal_problem_pyomo(partition):
    pyo, m = _qp_pyomo()
    kw = {} if partition is None else {"partition": partition}
    r = pyo.SolverFactory("gop").solve(m, time_limit=20, **kw)
    res = r.varopt_result
    assert res.status == "optimal" and res.iterations == 1
    assert res.info["connected"] == []
    assert pyo.value(m.obj) == pytest.approx(_qp_clarabel(), rel=1e-7, abs=1e-8)


def test_convex_qp_with_quad_form_cvxpy():
    P = np.array([[1, .25, 0], [.25, 2, 0], [0, 0, 1.]])
    x = cp.Variable(3, bounds=[-5, 5])
    prob = cp.Problem(cp.Minimize(cp.quad_form(x, P) - 2 * np.array([1, -1, 3.]) @ x + 10.5), [cp.sum(x) <= 2])
    v = prob.solve(method="gop", time_limit=20)
    res = prob.varopt_result
    assert res.status == "optimal" and res.iterations == 1
    assert v == pytest.approx(_qp_clarabel(), rel=1e-7, abs=1e-8)


def test_convex_cycle_of_products_is_accepted_and_nonconvex_one_refused():
    """x*y + y*z + x*z is an odd cycle; with squares making the block convex it is one convex
    block; without them GOP must refuse it (see test_gop.test_odd_cycle_is_reported)."""
    pyo = pytest.importorskip("pyomo.environ")
    m = pyo.ConcreteModel()
    m.v = pyo.Var(range(3), bounds=(-2, 2))
    m.obj = pyo.Objective(expr=sum((m.v[i] - i) ** 2 for i in range(3)) + 0.3 * (m.v[0] * m.v[1] + m.v[1] * m.v[2] + m.v[0] * m.v[2]))
    res = pyo.SolverFactory("gop").solve(m).varopt_result
    assert res.status == "optimal"
    H = 2 * np.eye(3) + 0.3 * (np.ones((3, 3)) - np.eye(3))
    v = cp.Variable(3)
    ref = cp.Problem(cp.Minimize(0.5 * cp.quad_form(v, H) - 2 * np.arange(3) @ v + 5), [v >= -2, v <= 2]).solve(solver="CLARABEL")
    assert res.objective == pytest.approx(ref, rel=1e-7, abs=1e-8)


def test_convex_lp_without_relaxed_dual_block_is_one_primal_problem(monkeypatch):
    """A quantile (pinball) regression, convex with no relaxed-dual variable: the primal problem is the whole program,
    solved once and certified by its relaxed dual. The block alternation re-solved it twice (the swapped problem and
    the primal again) for nothing: 3 primal solves, 0.6 s of a 2.0 s solve at 2,000 rows
    (benchmarks/cvxpy_epigraph_atoms.py). The optimum equals Clarabel's."""
    from varopt.solvers.gop import primal as P, search as S
    calls = []
    orig = P.solve_primal

    def counted(*a, **k):
        calls.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(S, "solve_primal", counted)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 4))
    y = X @ rng.standard_normal(4) + rng.standard_t(2, 120)
    w = cp.Variable(4)
    r = X @ w - y
    prob = cp.Problem(cp.Minimize(cp.sum(cp.pos(r)) + 0.5 * cp.sum(r)))
    v = prob.solve(method="gop")
    res = prob.varopt_result
    assert res.status == "optimal" and res.info["partition"].count("relaxed dual, 0") == 1
    assert len(calls) == 1, len(calls)
    ref = cp.Problem(cp.Minimize(cp.sum(cp.pos(X @ w - y)) + 0.5 * cp.sum(X @ w - y))).solve(solver="CLARABEL")
    assert v == pytest.approx(ref, rel=1e-7) and res.lower_bound <= v + 1e-9


def test_convex_program_keeps_its_equalities_for_its_one_primal_problem():
    """A projection onto an affine set (convex, no relaxed-dual variable: one primal problem) is solved with its
    equality rows as they are. Eliminating them by substitution serves only the relaxed duals and fills the Hessian
    with the substituted rows: on 1,000 columns and 500 dense equalities it cost 7 s of substitutions and 15 s of
    HiGHS's QP on the filled Hessian (Clarabel: 0.3 s). The optimum equals Clarabel's and the loaded point
    satisfies the equalities."""
    rng = np.random.default_rng(3)
    n, m = 40, 12
    E, e, z = rng.standard_normal((m, n)), rng.standard_normal(m), 2 * rng.standard_normal(n)
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - z) + 0.1 * z @ x), [E @ x == e, x >= -3])
    v = prob.solve(method="gop")
    res = prob.varopt_result
    assert res.status == "optimal" and res.info["partition"].count("relaxed dual, 0") == 1
    assert not res.info.get("eliminated"), res.info.get("eliminated")
    assert np.abs(E @ x.value - e).max() <= 1e-8
    ref = cp.Problem(cp.Minimize(cp.sum_squares(x - z) + 0.1 * z @ x), [E @ x == e, x >= -3]).solve(solver="CLARABEL")
    assert v == pytest.approx(ref, rel=1e-8)
