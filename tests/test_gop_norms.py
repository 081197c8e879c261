"""gop certifies convex programs with Euclidean norms (square-root lasso, group lasso, norm balls): a 2-norm column
in convex position is relaxed as a second-order cone by gradient cuts (varopt/solvers/gop/norm_cones.py) instead of
branching on its argument; elsewhere it keeps its equality. References: Clarabel (an interior-point conic solver),
brute-force grids."""
import itertools

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varopt  # noqa: F401
from varopt.frontends.cvxpy_compile import compile_cvxpy as _compile
from varopt.solvers.gop.norm_cones import NormCones


def compile_cvxpy(prob):
    return _compile(prob)[0]


def _data(N=20, D=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, D)), rng.standard_normal(N)


def _convex_models():
    A, b = _data()
    D = A.shape[1]
    x = cp.Variable(D)
    yield "sqrt_lasso", cp.Problem(cp.Minimize(cp.norm(A @ x - b, 2) + 0.1 * cp.norm1(x))), x
    yield "group_lasso", cp.Problem(cp.Minimize(cp.sum_squares(A @ x - b)
                                                + 2 * sum(cp.norm(x[i:i + 5], 2) for i in range(0, D, 5)))), x
    yield "two_groups", cp.Problem(cp.Minimize(cp.sum_squares(A @ x - b) + cp.norm(x[:2], 2)
                                               + 3 * cp.norm(x[2:], 2))), x
    yield "norm_ball", cp.Problem(cp.Minimize(cp.sum_squares(A @ x - b)), [cp.norm(x, 2) <= 0.3]), x


@pytest.mark.parametrize("name", [n for n, _, _ in _convex_models()])
def test_convex_norm_models_certified_equal_clarabel(name):
    prob, x = next((p, x) for n, p, x in _convex_models() if n == name)
    ref = prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    # mode='tree': the cone cuts (under 'auto' these convex programs take the direct convex path, docs/gop.md §13e)
    for mode in ("tree", "auto"):
        val = prob.solve(method="gop", time_limit=20, mode=mode)
        res = prob.varopt_result
        assert res.status == "optimal", (res.status, res.message)
        assert abs(val - ref) <= 1e-6 * max(1.0, abs(ref))
        # what is loaded into the user's variables evaluates to the reported objective (t recomputed from u)
        assert abs(prob.objective.value - val) <= 1e-9 * max(1.0, abs(val))
        assert all(c.violation() <= 1e-7 for c in prob.constraints) if prob.constraints else True
        if mode == "tree":
            assert res.info["mode"] == "tree"
            assert res.info["nodes"] <= 100   # today's equality relaxation ran thousands of nodes to the time limit
        else:
            assert res.info["mode"] == "convex"


def test_the_cones_are_recognised_only_in_convex_position():
    A, b = _data()
    x = cp.Variable(5)
    conv = compile_cvxpy(cp.Problem(cp.Minimize(cp.norm(A @ x - b, 2))))
    cones = NormCones.build(conv)
    assert cones is not None and len(cones.cones) == 1
    assert len(cones.relaxed.constraints) == len(conv.constraints) - 1
    for prob in (cp.Problem(cp.Minimize(-cp.norm(x, 2)), [x >= -1, x <= 1]),
                 cp.Problem(cp.Minimize(cp.sum_squares(x)), [cp.norm(x, 2) >= 0.5]),
                 cp.Problem(cp.Minimize(cp.sum_squares(x)), [cp.norm(x, 2) == 0.5])):
        assert NormCones.build(compile_cvxpy(prob)) is None


def test_pyomo_sqrt_norm_certified():
    pyo = pytest.importorskip("pyomo.environ")
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 1))
    m.y = pyo.Var(bounds=(-1, 1))
    m.o = pyo.Objective(expr=pyo.sqrt(m.x ** 2 + m.y ** 2) - 0.5 * m.x + 0.3 * m.y)
    res = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert res.status == "optimal", (res.status, res.message)
    g = np.linspace(-1, 1, 401)
    X, Y = np.meshgrid(g, g)
    ref = float(np.min(np.sqrt(X ** 2 + Y ** 2) - 0.5 * X + 0.3 * Y))
    assert abs(res.objective - ref) <= 1e-6
    assert abs(pyo.value(m.o) - res.objective) <= 1e-9


def test_pyomo_sqrt_of_shifted_quadratic_certified():
    """``sqrt((x - 1)^2 + 2 (x - 1) y + 2 y^2 + 0.25)``: a PSD quadratic with a linear part and a constant, a
    norm of an affine map only after completing the square."""
    pyo = pytest.importorskip("pyomo.environ")
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-2, 2))
    m.y = pyo.Var(bounds=(-2, 2))
    m.o = pyo.Objective(expr=pyo.sqrt((m.x - 1) ** 2 + 2 * (m.x - 1) * m.y + 2 * m.y ** 2 + 0.25) + 0.4 * m.x)
    res = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert res.status == "optimal", (res.status, res.message)
    g = np.linspace(-2, 2, 801)
    X, Y = np.meshgrid(g, g)
    F = np.sqrt((X - 1) ** 2 + 2 * (X - 1) * Y + 2 * Y ** 2 + 0.25) + 0.4 * X
    assert res.objective <= float(F.min()) + 1e-9
    assert res.objective >= float(F.min()) - 1e-4   # the grid's spacing: the optimum is interior


def _corners_max(c):
    return max(float(np.linalg.norm(np.array(v) - c)) for v in itertools.product((-1.0, 1.0), repeat=c.size))


def test_maximised_norm_keeps_its_equality_and_is_certified():
    c = np.array([0.3, -0.2, 0.1])
    x = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(-cp.norm(x - c, 2)), [x >= -1, x <= 1])
    val = prob.solve(method="gop", time_limit=20)
    assert prob.varopt_result.status == "optimal"
    assert abs(val + _corners_max(c)) <= 1e-6


def test_norm_on_the_larger_side_keeps_its_equality_and_is_certified():
    """``min ||x - c||^2`` s.t. ``||x||_2 >= 1`` (nonconvex): the projection of ``c`` onto the outside of the unit
    ball, ``(1 - ||c||)^2`` for ``||c|| < 1``."""
    c = np.array([0.3, -0.2])
    x = cp.Variable(2)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - c)), [cp.norm(x, 2) >= 1, x >= -2, x <= 2])
    val = prob.solve(method="gop", time_limit=20)
    assert prob.varopt_result.status == "optimal"
    assert abs(val - (1 - np.linalg.norm(c)) ** 2) <= 1e-6


@settings(max_examples=40, deadline=None, derandomize=True)
@given(m=st.integers(2, 6), k=st.integers(2, 4), seed=st.integers(0, 2 ** 31 - 1), scale=st.floats(0.01, 100.0))
def test_every_cut_holds_on_the_cone(m, k, seed, scale):
    """Every gradient cut and initial cut holds at random points ``(z, t = sqrt(e(z)))`` (norms of one entry are
    compiled as abs: at least two)."""
    rng = np.random.default_rng(seed)
    A = scale * rng.standard_normal((m, k))
    if rng.random() < 0.3:
        A[:, 0] = 0.0   # a rank-deficient argument
    b = rng.standard_normal(m) * scale
    x = cp.Variable(k)
    program = compile_cvxpy(cp.Problem(cp.Minimize(cp.norm(A @ x - b, 2) + cp.norm(x, 2))))
    cones = NormCones.build(program)
    assert cones is not None and len(cones.cones) == 2
    n = program.n

    def point(zx):
        z = np.zeros(n)
        z[:k] = zx
        return program.complete_aux(z)

    cuts = list(cones.initial_cuts())
    assert cones.rows(n)[0].shape == (len(cuts), n)
    for _ in range(5):
        z = point(rng.standard_normal(k) * 10 * rng.random())
        z[n - 2:] = 0.0   # t below the cone: violated
        cuts += cones.add_violated(z, 0.0)
    assert len(cuts) > 2
    # the node LPs' rows, converted incrementally (one call after the initial cuts, one now), equal all the cuts
    from varopt.solvers.gop.relax import rows_to_csr
    R, r_lo, r_hi = cones.rows(n)
    R_all, lo_all, hi_all = rows_to_csr(cones.cuts, n)
    assert (R != R_all).nnz == 0 and np.array_equal(r_lo, lo_all) and np.array_equal(r_hi, hi_all)
    for _ in range(30):
        z = point(rng.standard_normal(k) * 10 * rng.random())
        assert np.allclose(z[-2:], [np.linalg.norm(A @ z[:k] - b), np.linalg.norm(z[:k])])
        assert np.all(cones.violations(z) <= 1e-9 * max(1.0, float(np.abs(z).max())))
        for row, lo, _ in cuts:
            lhs = sum(v * z[j] for j, v in row.items())
            assert lhs >= lo - 1e-9 * max(1.0, abs(lo), *(abs(v * z[j]) for j, v in row.items()))
    # the cut at a violated point separates it (the outer approximation closes, no branching needed)
    z = point(rng.standard_normal(k) + 0.1)
    z[-1] = 0.5 * z[-1] - 1e-3
    for row, lo, _ in cones.add_violated(z, 0.0):
        assert sum(v * z[j] for j, v in row.items()) < lo


def test_norm_ball_still_bounds_the_factors_of_products():
    """``norm(d) <= 1`` is the only bound of ``d``, which enters products ``d_i x``: with the cone row out of the
    node relaxation, ``d`` must still be bounded (OBBT over the initial cone cuts with ``t <= 1`` bounds it) or the
    tree would ask for bounds.
    The optimum: ``min_{||d|| <= 1, |x| <= 3} ||y - d x||^2 = 0`` for ``||y|| <= 3``; here ``||y|| = 5``:
    ``(5 - 3)^2 = 4`` at ``d = y / 5``, ``x = 3``."""
    y = np.array([3.0, 4.0])
    d, x = cp.Variable(2), cp.Variable()
    prob = cp.Problem(cp.Minimize(cp.sum_squares(y - d * x)), [cp.norm(d, 2) <= 1, x >= -3, x <= 3])
    val = prob.solve(method="gop", time_limit=20)
    assert prob.varopt_result.status == "optimal", prob.varopt_result.message
    assert abs(val - 4.0) <= 1e-6


def test_square_root_lasso_100_by_20_closes_by_cuts_not_branching():
    """20-dimensional cone: the cone-only cut rounds close it at a few nodes (stopped at the atoms' 1 % gain rule,
    347 nodes and 7 s)."""
    A, b = _data(100, 20)
    x = cp.Variable(20)
    prob = cp.Problem(cp.Minimize(cp.norm(A @ x - b, 2) + 0.1 * cp.norm1(x)))
    ref = prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    val = prob.solve(method="gop", time_limit=20)
    assert prob.varopt_result.status == "optimal"
    assert abs(val - ref) <= 1e-6 * max(1.0, abs(ref))
    assert prob.varopt_result.info["nodes"] <= 50


def test_cone_cuts_at_the_incumbent_close_a_convex_root():
    """The cones' cuts at each new incumbent (valid everywhere) as well as at violating LP points: for a convex
    program the cuts at its optimum make the node LP's optimum the same point (the KKT conditions agree), which
    Kelley's cuts at LP points approach slowly in many dimensions. A 100 x 20 square-root lasso is certified within
    5 nodes (benchmarks/gop_norms.py, seed 0: 100 x 20 9 -> 3 nodes; 200 x 50 time limit of 30 s at 52 nodes ->
    3 nodes, 0.24 s); the optimum equals Clarabel's."""
    rng = np.random.default_rng(7)
    A, b = rng.standard_normal((100, 20)), rng.standard_normal(100)
    x = cp.Variable(20)
    prob = cp.Problem(cp.Minimize(cp.norm(A @ x - b, 2) + 0.1 * cp.norm1(x)))
    ref = prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    val = prob.solve(method="gop", max_iter=5)
    res = prob.varopt_result
    assert res.status == "optimal", (res.status, res.info.get("nodes"))
    assert abs(val - ref) <= 1e-6 * max(1.0, abs(ref)) and res.lower_bound <= ref + 1e-9
