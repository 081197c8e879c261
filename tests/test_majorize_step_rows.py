"""The step QP of majorize with bounds and a few general rows (varopt.solvers.majorize.step_rows: projected Newton
on the box inside a Newton method on the rows' multipliers) against the general QP layer (HiGHS) on random QPs, and a
wide constrained logistic fit with hundreds of active bounds and active rows against CVXPY+Clarabel."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varopt import lpqp
from varopt.formulations.logistic import build_cvxpy
from varopt.lpqp.result import LPResult


class _DenseEliminated:
    """``Q`` dense; ``solve(V)``: ``(Q_FF)^{-1} V_F`` on the free variables, 0 on the fixed (reference operator)."""

    def __init__(self, Q, fixed):
        self.Q, self.F = Q, ~fixed

    def solve(self, V):
        out = np.zeros_like(V, dtype=float)
        F = self.F
        out[F] = np.linalg.solve(self.Q[np.ix_(F, F)], V[F])
        return out


def _random_step_qp(seed, n, m, k, tight):
    """``Q = diag + R^T R`` (the row-space curvature's form), bounds and rows around ``D = 0`` (feasible): one-sided,
    two-sided, infinite, equality rows, sides at 0 (active at the start), sparse rows and now and then a duplicated
    row (dependent constraints)."""
    rng = np.random.default_rng(seed)
    R = rng.normal(size=(k, n))
    Q = np.diag(rng.uniform(0.05, 1.0, n)) + R.T @ R
    u = rng.normal(size=n) * 3
    lo, hi = -rng.exponential(tight, n), rng.exponential(tight, n)
    lo[rng.random(n) < 0.3] = -np.inf
    hi[rng.random(n) < 0.3] = np.inf
    lo[rng.random(n) < 0.2] = 0.0
    A = rng.normal(size=(m, n)) * (rng.random((m, n)) < rng.uniform(0.2, 1.0))
    if m >= 2 and rng.random() < 0.2:
        A[1] = A[0]
    rlo, rhi = -rng.exponential(tight, m), rng.exponential(tight, m)
    rlo[rng.random(m) < 0.3] = -np.inf
    rhi[rng.random(m) < 0.3] = np.inf
    rlo[rng.random(m) < 0.2] = 0.0
    eq = rng.random(m) < 0.15
    rlo[eq] = rhi[eq] = 0.0
    return Q, u, A, rlo, rhi, lo, hi


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40), m=st.integers(1, 6), k=st.integers(1, 6),
       tight=st.sampled_from([0.05, 0.5, 5.0]))
def test_bounds_and_rows_agree_with_highs(seed, n, m, k, tight):
    """Answered, HiGHS's optimum to 1e-9, feasible to rounding, and the KKT conditions of the whole QP recomputed here
    (varopt.lpqp's certificate with the returned row multipliers; the column multipliers are the gradient at the
    bounds) at the acceptance level."""
    from varopt.solvers.majorize.step_rows import bounds_and_rows
    Q, u, A, rlo, rhi, lo, hi = _random_step_qp(seed, n, m, k, tight)
    got = bounds_and_rows(lambda fixed: _DenseEliminated(Q, fixed), lambda v: Q @ v, u, A, rlo, rhi, lo, hi)
    assert got is not None
    D, q, y, _ = got
    ref = lpqp.solve_qp(Q, u, A=A, row_lo=rlo, row_hi=rhi, lb=lo, ub=hi)
    assert ref.status == "optimal"
    assert abs(q - (u @ D + 0.5 * D @ Q @ D)) <= 1e-12 * max(1.0, abs(q))
    assert abs(q - ref.objective) <= 1e-9 * max(1.0, abs(ref.objective))
    assert np.all(D >= lo) and np.all(D <= hi)
    AD = A @ D
    assert np.all(AD >= rlo - 1e-12 * (1 + np.abs(rlo))) and np.all(AD <= rhi + 1e-12 * (1 + np.abs(rhi)))
    g = u + Q @ D + A.T @ y
    z = np.where((D <= lo) | (D >= hi), g, 0.0)
    kkt = lpqp.kkt_residual(LPResult("optimal", x=D, row_duals=-y, col_duals=z), u, A, rlo, rhi, lo, hi, Q)
    assert kkt <= 1e-9 * (1.0 + max(np.abs(u).max(), np.abs(Q @ D).max(), np.abs(A.T @ y).max()))


def test_bounds_and_rows_warm_start_and_breakpoints():
    """Many bounds change between the start and the answer, the rows bind, and a warm start from the answer's own
    multipliers is certified after one box solve with no dual step."""
    from varopt.solvers.majorize.step_rows import bounds_and_rows
    rng = np.random.default_rng(3)
    n = 60
    R = rng.normal(size=(4, n))
    Q = np.diag(rng.uniform(0.05, 1.0, n)) + R.T @ R
    u = rng.normal(size=n) * 3
    u[:40] -= 2.0                                   # pushes the rows' variables up against both rows
    lo, hi = np.zeros(n), np.full(n, np.inf)        # theta >= 0 at theta~ = 0: every bound active at the start
    A = np.vstack([np.r_[np.ones(20), np.zeros(n - 20)], np.r_[np.zeros(20), np.ones(20), np.zeros(20)]])
    rlo, rhi = np.array([-np.inf, -1.0]), np.array([0.2, 0.5])
    def make_op(fixed):
        return _DenseEliminated(Q, fixed)
    D, q, y, st_cold = bounds_and_rows(make_op, lambda v: Q @ v, u, A, rlo, rhi, lo, hi)
    ref = lpqp.solve_qp(Q, u, A=A, row_lo=rlo, row_hi=rhi, lb=lo, ub=hi)
    assert abs(q - ref.objective) <= 1e-9 * max(1.0, abs(ref.objective))
    assert y[0] > 0 and y[1] > 0 and st_cold["outer"] >= 1          # both rows bind
    assert np.count_nonzero(D > 0) >= 5 and np.count_nonzero(D == 0) >= 10   # several bounds left, many stayed
    _, q2, _, st_warm = bounds_and_rows(make_op, lambda v: Q @ v, u, A, rlo, rhi, lo, hi, y0=y)
    assert st_warm["outer"] == 0 and st_warm["box"] == 1
    assert abs(q2 - q) <= 1e-12 * max(1.0, abs(q))


def _wide_fit(seed, N, K, rows):
    """``problem()``: a fresh wide multinomial logistic fit (``N`` samples, 500 features, ``K`` classes, seeded) with
    the constraints ``rows(W, theta, n)`` (``theta = vec(W)`` column-major, ``n`` its length); returns ``(prob, W)``."""
    import cvxpy as cp
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 500))
    y = rng.integers(0, K, size=N)

    def problem():
        free, W, _ = build_cvxpy(X, y, C=1.0 / N)
        th = cp.vec(W, order="F")
        return cp.Problem(free.objective, rows(W, th, th.shape[0])), W
    return problem


def test_wide_fit_with_active_bounds_and_rows_matches_clarabel():
    """``W >= 0`` on every weight of a wide multinomial fit (2,004 parameters, 30 samples; hundreds of bounds active)
    with two general rows (an inequality and an equality, both binding): every step QP goes to the bounds-and-rows
    Newton method (before: the active set, one bound per iteration with a factorization each, or the dense step), the
    fit equals Clarabel's, CVXPY finds no violation beyond rounding and the objective never increases."""
    import cvxpy as cp
    problem = _wide_fit(0, 30, 4, lambda W, th, n: [W >= 0, cp.sum(th[:n // 3]) <= 0.05,
                                                    cp.sum(th[n // 3:2 * n // 3]) - cp.sum(th[2 * n // 3:]) == 0])
    prob, W = problem()
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref = prob.value
    duals = [float(np.ravel(c.dual_value)[0]) for c in prob.constraints[1:]]
    active = int(np.sum(np.asarray(W.value) < 1e-6))
    assert active > 500 and min(abs(d) for d in duals) > 1e-3          # bounds and both rows bind
    prob, W = problem()
    val = prob.solve(method="majorize", tol=1e-12)
    res = prob.varopt_result
    stats = res.info["step_qp"]
    assert stats.get("rows_newton", 0) == res.iterations and stats.get("rows_newton_outer", 0) >= 1
    assert "rows_newton_declined" not in stats and stats["fallback"] == 0
    assert abs(val - ref) <= 1e-8 * abs(ref)
    assert max(float(np.max(c.violation())) for c in prob.constraints) <= 1e-12
    hist = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(hist) <= 1e-12 * np.maximum(1.0, np.abs(hist[:-1])))


def test_box_blocked_trials_are_projected_and_monotone():
    """``cp.abs(theta[10:]) <= 0.03`` plus the benchmark's rows on a small standardized logistic fit (the setting of
    ``benchmarks/majorize_constrained.py --box 0.03``): the quasi-Newton trials blocked by the box are projected on
    it (varopt.solvers.majorize.reuse, ``projected`` counted), some are accepted, the objective never increases, the
    answer equals Clarabel's and CVXPY finds no violation beyond rounding."""
    import cvxpy as cp
    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, 30))
    y = (X @ rng.normal(size=30) + rng.normal(size=150) > 0).astype(int)

    def problem():
        free, w, _ = build_cvxpy(X, y, C=1.0 / 150)
        return cp.Problem(free.objective, [w[:5] >= 0, cp.sum(w[5:10]) <= 0.5, cp.abs(w[10:]) <= 0.03])
    prob = problem()
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref = prob.value
    prob = problem()
    val = prob.solve(method="majorize", tol=1e-12)
    res = prob.varopt_result
    stats = res.info["bound_reuse"]
    assert stats.get("projected", 0) >= 1
    assert abs(val - ref) <= 1e-8 * abs(ref)
    assert max(float(np.max(c.violation())) for c in prob.constraints) <= 1e-12
    hist = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(hist) <= 0.0)


def test_projected_trial_accepts_only_a_decrease():
    """The projected trial (``ScaledCurvature._projected_trial``) on a quadratic ``f`` with a box: the point is the
    clipped one, accepted when ``f`` decreases enough, and refused (None, the ratio-test trial goes on) when the
    projected point raises ``f``, when its slope is not a descent and when it leaves the rows (``qp.feasible``)."""
    from varopt.solvers.majorize.reuse import ScaledCurvature

    class Model:
        lb, ub = np.array([-1.0, -1.0]), np.array([1.0, 0.1])

        def __init__(self, Q):
            self.Q = Q

        def evaluate(self, z):
            return 0.5 * z @ self.Q @ z, None, None

    class QP:
        def __init__(self, ok):
            self.ok = ok

        def feasible(self, z):
            return self.ok
    x, D = np.zeros(2), np.array([0.5, 1.0])
    u = np.array([-1.0, -1.0])   # D is a descent direction: u'D < 0
    sc = ScaledCurvature(3)
    good = Model(np.diag([-1.0, -1.0]))          # f decreases along the clipped step
    got = sc._projected_trial(good, x, u, 0.0, D, QP(True), {})
    assert got is not None and np.array_equal(got[0], [0.5, 0.1]) and got[1] < 0.0
    bad = Model(np.diag([100.0, 100.0]))          # f rises at the clipped point
    assert sc._projected_trial(bad, x, u, 0.0, D, QP(True), {}) is None
    assert sc._projected_trial(good, x, -u, 0.0, D, QP(True), {}) is None
    assert sc._projected_trial(good, x, u, 0.0, D, QP(False), {}) is None


def _random_projection(rng):
    """A point ``x`` inside random bounds and a nonempty polyhedron around a point ``z0`` of the box: one-sided,
    two-sided (often both sides inactive at the projection), infinite and equality rows, sparse rows."""
    n, m = int(rng.integers(2, 30)), int(rng.integers(1, 6))
    A = rng.standard_normal((m, n)) * (rng.random((m, n)) < 0.6)
    lb = np.where(rng.random(n) < 0.5, -rng.random(n), -np.inf)
    ub = np.where(rng.random(n) < 0.5, rng.random(n), np.inf)
    Az = A @ np.clip(rng.standard_normal(n), lb, ub)
    lo = np.where(rng.random(m) < 0.7, Az - rng.random(m), -np.inf)
    hi = np.where(rng.random(m) < 0.7, Az + rng.random(m), np.inf)
    eq = rng.random(m) < 0.2
    lo[eq] = hi[eq] = Az[eq]
    return np.clip(3 * rng.standard_normal(n), lb, ub), A, lo, hi, lb, ub


def test_projection_of_the_start_equals_highs():
    """``project_start`` (the rows' dual method with ``Q = I``) on 600 random projections: always certified (before
    the multipliers stopped at zero, about 1 in 200 zig-zagged around an inactive two-sided row's ``y_i = 0`` until the
    iteration limit, or stalled at ``y_i = 1e-17``) and equal to HiGHS's projection: the distance to 1e-9, the point to
    1e-6, feasible to 1e-9."""
    from varopt.lpqp.project import project
    from varopt.solvers.majorize.step_rows import project_start
    rng = np.random.default_rng(20261124)
    for trial in range(600):
        x, A, lo, hi, lb, ub = _random_projection(rng)
        z = project_start(x, A if trial % 2 else lpqp_sparse(A), lo, hi, lb, ub)
        assert z is not None, trial
        ref = project(x, lpqp_sparse(A), lo, hi, lb, ub)
        assert ref.status == "optimal"
        d, dref = 0.5 * np.sum((z - x) ** 2), 0.5 * np.sum((ref.x - x) ** 2)
        assert abs(d - dref) <= 1e-9 * (1.0 + dref), trial
        assert np.abs(z - ref.x).max() <= 1e-6, trial
        Az = A @ z
        assert np.all(z >= lb) and np.all(z <= ub)
        # the certificate's level (1e-9 of the scale; HiGHS's own feasibility tolerance is 1e-7)
        assert np.all(Az >= lo - 1e-9 * (1 + np.abs(Az))) and np.all(Az <= hi + 1e-9 * (1 + np.abs(Az))), trial


def lpqp_sparse(A):
    import scipy.sparse as sp
    return sp.csr_matrix(A)


def test_projection_of_the_start_refuses_an_empty_polyhedron():
    """``x1 + x2 >= 3`` inside ``0 <= x <= 1``: no answer (the caller's QP layer then reports infeasibility)."""
    from varopt.solvers.majorize.step_rows import project_start
    z = project_start(np.zeros(2), np.ones((1, 2)), np.array([3.0]), np.array([np.inf]), np.zeros(2), np.ones(2))
    assert z is None


def test_violated_row_at_the_start_is_projected_without_the_qp_layer(monkeypatch):
    """A wide fit (1,504 parameters) whose rows exclude the start ``theta = 0``: the start is projected by
    ``project_start`` (the QP layer's projection, HiGHS, took 2.3 s on one row over 2,000 variables and over 300 s on
    SRBCT's 9,236), and the fit equals Clarabel's, feasible to rounding by CVXPY."""
    import cvxpy as cp
    problem = _wide_fit(1, 40, 3, lambda W, th, n: [th[:5] >= 0, cp.sum(th[n // 3:2 * n // 3]) >= 0.3,
                                                    cp.sum(th[:n // 3]) == -0.2])
    prob, _ = problem()
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref = prob.value

    def refuse(*a, **k):
        raise AssertionError("the start went to the QP layer's projection")
    monkeypatch.setattr(lpqp, "project", refuse)     # the solver calls the layer as varopt.lpqp.project
    prob, _ = problem()
    val = prob.solve(method="majorize", tol=1e-12)
    assert abs(val - ref) <= 1e-8 * abs(ref)
    assert max(float(np.max(c.violation())) for c in prob.constraints) <= 1e-10
