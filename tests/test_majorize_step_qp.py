"""The constrained step QP of majorize (Algorithm 2 step 3): the warm-started active-set fast path of
varopt.lpqp.active_set against the general QP layer (HiGHS) and CVXPY+Clarabel, and constrained logistic
fits against Clarabel."""
import numpy as np
import scipy.sparse as sp
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from varopt import lpqp
from varopt.formulations.logistic import build_cvxpy

from shared_data import load_dataset  # benchmarks/ (path set in conftest)
from varopt.lpqp.active_set import ActiveSetQP
from qp_reference import clarabel_qp


def _random_qp(seed, n, m, rank, start_active):
    """A convex QP with a feasible start ``x0``: bounds and rows around ``x0``, some tight at ``x0``
    (active at the start, degenerate when several are) and some equal (fixed columns, equality rows)."""
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(n, rank))
    Q = L @ L.T + (0.0 if rank < n else 0.1) * np.eye(n)
    c = rng.normal(size=n) * 3
    x0 = rng.normal(size=n)
    A = rng.normal(size=(m, n))
    if m >= 2 and rng.random() < 0.3:
        A[1] = A[0]  # a duplicated row: dependent constraints
    ax = A @ x0

    def gap(k):
        g = rng.exponential(size=k)
        g[rng.random(k) < start_active] = 0.0  # tight at the start
        g[rng.random(k) < 0.3] = np.inf
        return g
    lb, ub = x0 - gap(n), x0 + gap(n)
    lo, hi = ax - gap(m), ax + gap(m)
    if rank < n:  # bounded: a singular Q needs the box to close the flat directions
        lb, ub = np.minimum(lb, x0 - 5), np.maximum(ub, x0 + 5)
        lb, ub = np.where(np.isfinite(lb), lb, x0 - 5), np.where(np.isfinite(ub), ub, x0 + 5)
    fix = rng.random(n) < 0.1
    lb[fix] = ub[fix] = x0[fix]
    eq = rng.random(m) < 0.15
    lo[eq] = hi[eq] = ax[eq]
    return Q, c, A, lo, hi, lb, ub, x0


def _objective(Q, c, x):
    return 0.5 * x @ Q @ x + c @ x


def _assert_matches(fast, ref, Q, c, A, lo, hi, lb, ub):
    """The fast path's answer: HiGHS's objective to 1e-7, feasible, and a KKT certificate recomputed here."""
    x = fast.x
    assert abs(_objective(Q, c, x) - ref.objective) <= 1e-7 * max(1.0, abs(ref.objective))
    assert np.all(x >= lb - 1e-9) and np.all(x <= ub + 1e-9)
    if A.shape[0]:
        assert np.all(A @ x >= lo - 1e-8) and np.all(A @ x <= hi + 1e-8)
    assert lpqp.kkt_residual(fast, c, A, lo, hi, lb, ub, Q) <= 1e-8 * (1 + np.abs(c).max() + np.abs(Q @ x).max()
                                                                        + np.abs(A.T @ fast.row_duals).max(initial=0))


def _answers_nondegenerate_qps(solve):
    """40 QPs with positive definite Q, independent rows and tight constraints at the start: ``solve`` (the
    matrix or the operator form of ActiveSetQP) answers all but at most 2, matching HiGHS and Clarabel."""
    declined = 0
    for seed in range(40):
        Q, c, A, lo, hi, lb, ub, x0 = _random_qp(seed, 6, 3, 6, 0.5)
        A[1] = np.random.default_rng(seed + 1000).normal(size=6)  # no duplicated rows here
        lo[1], hi[1] = A[1] @ x0 - 0.5, A[1] @ x0 + 0.5
        fast = solve(ActiveSetQP(A), Q, c, lo, hi, lb, ub, x0)
        if fast is None:
            declined += 1
            continue
        ref = lpqp.solve_qp(Q, c, A=A, row_lo=lo, row_hi=hi, lb=lb, ub=ub)
        f = _objective(Q, c, fast.x)
        assert abs(f - ref.objective) <= 1e-8 * max(1.0, abs(ref.objective))
        assert abs(f - _clarabel(Q, c, A, lo, hi, lb, ub)) <= 1e-6 * max(1.0, abs(f))
    assert declined <= 2


def _clarabel(Q, c, A, lo, hi, lb, ub):
    return clarabel_qp(Q, c, A, lo, hi, lb, ub, jitter=1e-12)[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), m=st.integers(0, 4),
       singular=st.booleans(), start_active=st.sampled_from([0.0, 0.3, 0.8]))
def test_active_set_agrees_with_highs(seed, n, m, singular, start_active):
    rank = max(1, n - 2) if singular else n
    Q, c, A, lo, hi, lb, ub, x0 = _random_qp(seed, n, m, rank, start_active)
    fast = ActiveSetQP(A).solve(Q, c, lo, hi, lb, ub, x0)
    ref = lpqp.solve_qp(Q, c, A=A if m else None, row_lo=lo if m else None, row_hi=hi if m else None, lb=lb, ub=ub)
    assert ref.status == "optimal"
    if fast is None:
        return  # the fast path declined (degenerate or not converged): the caller falls back to HiGHS
    _assert_matches(fast, ref, Q, c, A, lo, hi, lb, ub)


def test_active_set_solves_nondegenerate_qps_and_matches_clarabel():
    """Positive definite Q, independent rows, starts with tight constraints: the fast path must answer
    (not decline) and agree with HiGHS and with CVXPY+Clarabel."""
    _answers_nondegenerate_qps(lambda asq, Q, c, lo, hi, lb, ub, x0: asq.solve(Q, c, lo, hi, lb, ub, x0))


def test_active_set_warm_start_and_infeasible_start():
    """A sequence of QPs with the same constraints and a slowly changing Q, each started from the last
    answer (as in majorization, where theta~ moves to the step's end): the working set carried over makes
    later solves take one or two systems; an infeasible start declines."""
    Q, c, A, lo, hi, lb, ub, x0 = _random_qp(3, 8, 2, 8, 0.0)
    lb[:4] = x0[:4]  # a bound block as theta[:5] >= 0
    solver = ActiveSetQP(A)
    its = []
    rng = np.random.default_rng(0)
    for k in range(10):
        Qk = Q + 0.01 * k * np.diag(rng.random(8))
        res = solver.solve(Qk, c, lo, hi, lb, ub, x0)
        x0 = res.x
        ref = lpqp.solve_qp(Qk, c, A=A, row_lo=lo, row_hi=hi, lb=lb, ub=ub)
        assert abs(res.objective - ref.objective) <= 1e-8 * max(1.0, abs(ref.objective))
        its.append(res.iterations)
    assert max(its[1:]) <= 2 < its[0] or its[0] <= 2
    bad = x0.copy()
    bad[0] = lb[0] - 1.0
    assert solver.solve(Q, c, lo, hi, lb, ub, bad) is None


def test_active_set_seeded_from_the_general_layer():
    """The working set of a QP answered by HiGHS (``seed``) is the next solve's start: the same QP started at HiGHS's
    answer is certified in one system. A bound-heavy QP from a cold start (more blocking constraints than the old
    budget of 10 + 2|W0| iterations) is answered, not declined."""
    rng = np.random.default_rng(4)
    n = 30
    L = rng.normal(size=(n, n))
    Q = L @ L.T / n + 0.1 * np.eye(n)
    c = rng.normal(size=n) * 5
    A = np.ones((1, n))
    lo, hi = np.array([-np.inf]), np.array([0.5])
    lb, ub = -0.2 * np.ones(n), 0.2 * np.ones(n)
    ref = lpqp.solve_qp(Q, c, A=A, row_lo=lo, row_hi=hi, lb=lb, ub=ub)
    active = int(np.sum((np.abs(ref.x - lb) < 1e-9) | (np.abs(ref.x - ub) < 1e-9)))
    assert ref.status == "optimal" and active > 12
    cold = ActiveSetQP(A).solve(Q, c, lo, hi, lb, ub, np.zeros(n))
    assert cold is not None and cold.iterations > 10
    _assert_matches(cold, ref, Q, c, A, lo, hi, lb, ub)
    warm = ActiveSetQP(A)
    warm.seed(ref, lo, hi, lb, ub)
    assert len(warm.cols) + len(warm.rows) >= active - 1          # degenerate sides (zero multiplier) may be left out
    x0 = np.clip(ref.x, lb, ub)
    res = warm.solve(Q, c, lo, hi, lb, ub, x0)
    assert res is not None and res.iterations == 1
    _assert_matches(res, ref, Q, c, A, lo, hi, lb, ub)


def test_step_qp_cold_start_from_the_clipped_step():
    """The first step QP of a solve (no working set carried over) starts from the unconstrained step clipped to the
    bounds, with the clipped bounds as its working set: on QPs whose answer has 25-30 active bounds it takes at most
    0.7 times the active-set iterations of the start at D = 0 (one blocking bound per iteration), with HiGHS's answer.
    When the clipped point violates a row the start is D = 0 (the same iterations; still answered)."""
    from types import SimpleNamespace

    from varopt.solvers.majorize.step_qp import StepQP
    n = 30
    lb, ub = -0.2 * np.ones(n), 0.2 * np.ones(n)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        L = rng.normal(size=(n, n))
        Q = L @ L.T / n + 0.1 * np.eye(n)
        c = rng.normal(size=n) * 5
        clipped = np.clip(np.linalg.solve(Q, -c), lb, ub)
        for hi_row in (clipped.sum() + 0.5, clipped.sum() - 0.5):     # a row the clipped step satisfies / violates
            lo, hi = np.array([-np.inf]), np.array([hi_row])
            ref = lpqp.solve_qp(Q, c, A=np.ones((1, n)), row_lo=lo, row_hi=hi, lb=lb, ub=ub)
            assert np.sum((np.abs(ref.x - lb) < 1e-9) | (np.abs(ref.x - ub) < 1e-9)) >= 25
            its = []
            for cold in (False, True):
                qp = StepQP(SimpleNamespace(A=sp.csr_matrix(np.ones((1, n))), n=n, lo=lo, hi=hi, lb=lb, ub=ub), lpqp)
                if cold:
                    qp._cold_start = lambda *a: (np.zeros(n), None)
                step, m, _, _ = qp.solve(np.zeros(n), c, Q)
                assert abs(m - ref.objective) <= 1e-9 * max(1.0, abs(ref.objective))
                assert np.max(np.abs(step - ref.x)) <= 1e-7
                # iterations of the fast path; the cold start may exceed its budget (then HiGHS answers: infinite)
                its.append(qp.stats.get("active_set_iterations", np.inf))
            if hi_row > clipped.sum():
                assert its[0] <= 0.7 * its[1]
            else:
                assert its[0] == its[1]


def test_step_qp_cold_start_factor_is_shared(monkeypatch):
    """Bounds inactive at the answer (nothing clipped): the clipped start's factorization of ``Q`` is the fast path's
    first system, so the step QP factors ``Q`` once, not twice; the answer is HiGHS's."""
    from types import SimpleNamespace

    import varopt.lpqp.active_set as AS
    from varopt.solvers.majorize.step_qp import StepQP
    rng = np.random.default_rng(1)
    n = 12
    L = rng.normal(size=(n, n))
    Q = L @ L.T / n + 0.5 * np.eye(n)
    c = rng.normal(size=n) * 0.1
    lb, ub = -10.0 * np.ones(n), 10.0 * np.ones(n)
    lo, hi = np.array([-np.inf]), np.array([100.0])
    calls = []
    real = AS._chol
    monkeypatch.setattr(AS, "_chol", lambda M, eps, *a: calls.append(M.shape) or real(M, eps, *a))
    qp = StepQP(SimpleNamespace(A=sp.csr_matrix(np.ones((1, n))), n=n, lo=lo, hi=hi, lb=lb, ub=ub), lpqp)
    step, m, _, _ = qp.solve(np.zeros(n), c, Q)
    ref = lpqp.solve_qp(Q, c, A=np.ones((1, n)), row_lo=lo, row_hi=hi, lb=lb, ub=ub)
    assert qp.stats["active_set"] == 1 and abs(m - ref.objective) <= 1e-9 * max(1.0, abs(ref.objective))
    assert calls == [(n, n)]


def test_bound_heavy_constrained_logistic_takes_the_fast_path():
    """Boxes on most weights (many active bounds; CVXPY rows ``cp.abs(theta[k:]) <= u`` become bounds): every step
    QP goes through the warm-started fast path (before: each one fell back to HiGHS, declined by the iteration
    budget, and the working set never carried over), and the fit equals Clarabel's."""
    import cvxpy as cp
    from sklearn.datasets import load_breast_cancer
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    theta, b = cp.Variable(X.shape[1]), cp.Variable()
    z = X @ theta + b
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(z)) - y @ z + 0.5 * cp.sum_squares(theta)),
                      [theta[:5] >= 0, cp.sum(theta[5:10]) <= 0.5, cp.abs(theta[10:]) <= 0.4])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref = prob.value
    val = prob.solve(method="majorize", tol=1e-12)
    assert abs(val - ref) <= 1e-8 * abs(ref)
    assert all(c.violation().max() <= 1e-9 for c in prob.constraints)
    res = prob.varopt_result
    assert res.info["step_qp"]["fallback"] == 0 and res.info["step_qp"]["active_set"] > 0
    hist = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(hist) <= 1e-12 * np.maximum(1.0, np.abs(hist[:-1])))


def test_wide_program_with_inactive_bounds_keeps_the_row_space_step():
    """Bounds on every weight of a wide multinomial fit (2,004 parameters, 30 samples), inactive at the optimum: the
    step solver's cost counts the bounds the working set holds (none at the start) plus a margin, not every bounded
    variable, so the row-space Woodbury step and the line metric are kept (before: the dense step, forming the
    n x n curvature); the optimum is the unconstrained one."""
    import cvxpy as cp
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 500))
    y = rng.integers(0, 4, size=30)
    free, W, _ = build_cvxpy(X, y, C=1.0 / 30)
    boxed = cp.Problem(free.objective, [cp.abs(cp.vec(W, order="F")) <= 1.0])
    ref = free.solve(method="majorize", tol=1e-12)
    val = boxed.solve(method="majorize", tol=1e-12)
    res = boxed.varopt_result
    assert res.info["reuse_metric"] == "line"
    assert abs(val - ref) <= 1e-9 * abs(ref)
    assert all(c.violation().max() <= 1e-9 for c in boxed.constraints)


class _DenseEliminated:
    """``Q`` dense; ``solve(v)``: ``(Q_FF)^{-1} v_F`` on the free variables, 0 on the fixed (reference operator)."""

    def __init__(self, Q, fixed):
        self.Q, self.F = Q, ~fixed

    def solve(self, v):
        out = np.zeros_like(v)
        F = self.F
        out[F] = np.linalg.solve(self.Q[np.ix_(F, F)], v[F])
        return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40), k=st.integers(1, 6), tight=st.sampled_from([0.05, 0.5, 5.0]))
def test_projected_newton_box_qp_agrees_with_highs(seed, n, k, tight):
    """The bounds-only step QP by projected Newton (varopt.solvers.majorize.step_bounds) on ``Q = diag + R^T R``
    (the row-space curvature's form) with one-sided, two-sided and infinite bounds around 0: the QP layer's optimum
    (HiGHS) to 1e-9, a feasible point, and the box QP's KKT conditions (projected gradient) at rounding level."""
    from varopt.solvers.majorize.step_bounds import projected_newton
    rng = np.random.default_rng(seed)
    R = rng.normal(size=(k, n))
    Q = np.diag(rng.uniform(0.05, 1.0, n)) + R.T @ R
    u = rng.normal(size=n) * 3
    lo = -rng.exponential(tight, n)
    hi = rng.exponential(tight, n)
    lo[rng.random(n) < 0.3] = -np.inf
    hi[rng.random(n) < 0.3] = np.inf
    lo[rng.random(n) < 0.2] = 0.0          # at the bound at the start (theta >= 0 at theta~ = 0)
    got = projected_newton(lambda fixed: _DenseEliminated(Q, fixed), lambda v: Q @ v, u, lo, hi)
    assert got is not None
    D, q, its = got
    ref = lpqp.solve_qp(Q, u, lb=lo, ub=hi)
    assert ref.status == "optimal"
    assert abs(q - (u @ D + 0.5 * D @ Q @ D)) <= 1e-12 * max(1.0, abs(q))
    assert abs(q - ref.objective) <= 1e-9 * max(1.0, abs(ref.objective))
    assert np.all(D >= lo) and np.all(D <= hi)
    g = u + Q @ D
    assert np.abs(D - np.clip(D - g, lo, hi)).max() <= 1e-8 * (1.0 + np.abs(u).max() + np.abs(Q @ D).max())


def test_wide_program_with_active_bounds_takes_projected_newton_steps():
    """``W >= 0`` on every weight of a wide multinomial fit (2,004 parameters, 30 samples; about half the bounds active
    at the optimum): the step QPs go to projected Newton on the row-space operator with the active variables eliminated
    (before: the dense step and one active-set iteration per bound, each a factorization of the free block), the fit
    equals Clarabel's and the objective never increases."""
    import cvxpy as cp
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 500))
    y = rng.integers(0, 4, size=30)
    free, W, _ = build_cvxpy(X, y, C=1.0 / 30)
    prob = cp.Problem(free.objective, [W >= 0])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref = prob.value
    active = int(np.sum(np.asarray(W.value) < 1e-6))
    val = prob.solve(method="majorize", tol=1e-12)
    res = prob.varopt_result
    stats = res.info["step_qp"]
    assert active > 500 and stats.get("projected_newton", 0) >= 1 and "projected_newton_declined" not in stats
    assert abs(val - ref) <= 1e-7 * abs(ref)
    assert np.asarray(W.value).min() >= 0.0
    hist = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(hist) <= 1e-12 * np.maximum(1.0, np.abs(hist[:-1])))


# --- constrained logistic regression: majorize against Clarabel -----------------------------------------------
def _constrained(X, y, C):
    import cvxpy as cp
    prob, W, _ = build_cvxpy(X, y, C=C)
    theta = W if len(W.shape) == 1 else cp.vec(W, order="F")
    return cp.Problem(prob.objective, [theta[:5] >= 0, cp.sum(theta[5:10]) <= 0.5]), W


@pytest.mark.parametrize("name", ["breast_cancer", "wine", "hepatitis"])
def test_constrained_logistic_matches_clarabel(name):
    """The benchmark's constraint set (theta[:5] >= 0, sum(theta[5:10]) <= 0.5) on real data: the fit
    matches CVXPY+Clarabel to 1e-6 and every step QP went through the fast path."""
    try:
        X, y = load_dataset(name)
    except FileNotFoundError as exc:
        pytest.skip(f"data set {name} not available: {exc}")
    C = 1.0 / X.shape[0]
    prob, W = _constrained(X, y, C)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref_val, ref_W = prob.value, np.array(W.value)
    val = prob.solve(method="majorize", tol=1e-12, max_iter=5000)
    assert abs(val - ref_val) <= 1e-6 * abs(ref_val)
    assert np.max(np.abs(W.value - ref_W)) <= 1e-6 * max(1.0, np.abs(ref_W).max())
    assert all(c.violation().max() <= 1e-9 for c in prob.constraints)
    res = prob.solver_stats.extra_stats["varopt_result"]
    hist = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(hist) <= 1e-12 * np.maximum(1.0, np.abs(hist[:-1])))
    # every step QP went through the fast path: the iterations are accepted quasi-Newton trials (no QP; here the
    # start is Clarabel's point, where a trial may pass the test on a rounding-level decrease) or bound steps
    trials = res.info["bound_reuse"]["accepted"]
    assert res.info["step_qp"]["fallback"] == 0 and res.info["step_qp"]["active_set"] == res.iterations - trials


def test_constrained_logistic_infeasible_reported():
    import cvxpy as cp
    X, y = load_dataset("breast_cancer")
    prob, W, _ = build_cvxpy(X[:80], y[:80], C=0.1)
    bad = cp.Problem(prob.objective, [W[:5] >= 0, cp.sum(W[:5]) <= -0.5])
    bad.solve(method="majorize")
    assert bad.status == "infeasible"


# --- the step QP on a factored operator (Q never formed: the constrained Woodbury step) -------------------------
class _DenseOp:
    """A test operator: ``Q`` kept privately, ``Q^{-1}`` by least squares (minimum norm when singular)."""

    def __init__(self, Q):
        self.Q = Q
        self.pinv = np.linalg.pinv(Q, rcond=1e-12)

    def matvec(self, v):
        return self.Q @ v

    def solve(self, V):
        return self.pinv @ V


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), m=st.integers(0, 4),
       singular=st.booleans(), start_active=st.sampled_from([0.0, 0.3, 0.8]))
def test_active_set_operator_agrees_with_highs(seed, n, m, singular, start_active):
    """The operator form (fixed columns as equality rows, Schur complement of the working set) agrees with
    HiGHS whenever it answers, and its certificate holds with the true Q."""
    rank = max(1, n - 2) if singular else n
    Q, c, A, lo, hi, lb, ub, x0 = _random_qp(seed, n, m, rank, start_active)
    fast = ActiveSetQP(A).solve_operator(_DenseOp(Q), c, lo, hi, lb, ub, x0)
    ref = lpqp.solve_qp(Q, c, A=A if m else None, row_lo=lo if m else None, row_hi=hi if m else None, lb=lb, ub=ub)
    assert ref.status == "optimal"
    if fast is None:
        return
    _assert_matches(fast, ref, Q, c, A, lo, hi, lb, ub)


def test_active_set_operator_answers_nondegenerate_qps():
    """Positive definite Q, independent rows: the operator form must answer and match HiGHS and Clarabel."""
    _answers_nondegenerate_qps(
        lambda asq, Q, c, lo, hi, lb, ub, x0: asq.solve_operator(_DenseOp(Q), c, lo, hi, lb, ub, x0))


def _wide(seed, t, p, K):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(t, p))
    W = rng.normal(size=(p, K)) * 0.3
    y = np.argmax(X @ W + rng.gumbel(size=(t, K)), axis=1)
    return X, y


@pytest.mark.parametrize("K", [2, 4])
def test_wide_constrained_logistic_never_forms_dense_curvature(K, monkeypatch):
    """A wide constrained logistic regression (d = K p >> t, as SRBCT): the step is the row-space Woodbury QP on
    the factored operator. Fails if any n x n curvature is formed (the bound's Sigma, the Hessian metric, a
    Cholesky of an n x n matrix, the dense step QP or HiGHS), and the fit matches CVXPY+Clarabel."""
    from varopt.solvers.majorize import groups, reuse_metric, step, step_operator, step_qp
    X, y = _wide(K, 40, 150, K)
    C = 1.0 / X.shape[0]
    prob, W = _constrained(X, y, C)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref_val, ref_W = prob.value, np.array(W.value)

    def forbidden(*a, **k):
        raise AssertionError("a dense n x n curvature was formed")
    monkeypatch.setattr(groups.PaddedGroups, "sigma", forbidden)
    monkeypatch.setattr(step, "gram", forbidden)
    monkeypatch.setattr(step, "proximal_cholesky", forbidden)
    monkeypatch.setattr(reuse_metric, "DenseMetric", forbidden)
    monkeypatch.setattr(step_operator.RowSpaceCurvature, "dense", forbidden)
    monkeypatch.setattr(step_qp.StepQP, "solve", forbidden)
    val = prob.solve(method="majorize", tol=1e-12, max_iter=5000)
    res = prob.solver_stats.extra_stats["varopt_result"]
    assert res.info["step_solver"] == {"woodbury": res.iterations}
    assert res.info["step_qp"]["operator"] == res.iterations and res.info["step_qp"]["fallback"] == 0
    assert abs(val - ref_val) <= 1e-6 * abs(ref_val)
    assert np.max(np.abs(W.value - ref_W)) <= 1e-5 * max(1.0, np.abs(ref_W).max())
    assert all(c.violation().max() <= 1e-9 for c in prob.constraints)
    hist = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(hist) <= 1e-12 * np.maximum(1.0, np.abs(hist[:-1])))
    # the constraints bind (else the test would not exercise the working set)
    theta = np.ravel(W.value, order="F")
    assert np.min(theta[:5]) <= 1e-9 or abs(np.sum(theta[5:10]) - 0.5) <= 1e-9


def test_wide_constrained_woodbury_option_and_infeasible():
    """step_solver='woodbury' is accepted with constraints (same answer as 'dense'); 'cg' is still rejected; an
    infeasible constraint set on a wide problem is reported infeasible."""
    import cvxpy as cp
    from varopt.errors import InvalidOptionError
    X, y = _wide(7, 30, 60, 3)
    prob, W = _constrained(X, y, 1.0 / 30)
    v_w = prob.solve(method="majorize", step_solver="woodbury", tol=1e-12)
    v_d = prob.solve(method="majorize", step_solver="dense", tol=1e-12)
    assert abs(v_w - v_d) <= 1e-9 * abs(v_d)
    with pytest.raises(InvalidOptionError):
        prob.solve(method="majorize", step_solver="cg")
    theta = cp.vec(W, order="F")
    bad = cp.Problem(prob.objective, [theta[:5] >= 0, cp.sum(theta[:5]) <= -0.5])
    bad.solve(method="majorize")
    assert bad.status == "infeasible"


def test_separable_square_atoms_give_the_expanded_quadratic():
    """Square atoms of one variable each (``sum_squares(w)``, ``square(2 x_3 - 1)``) take the diagonal shortcut
    of MajorizeModel; its H, c, k equal Expression.as_quadratic's expansion, and f(x) is the program's value."""
    import cvxpy as cp
    import scipy.sparse as sp
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    from varopt.solvers.majorize.model import MajorizeModel
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20, 4))
    w = cp.Variable(4)
    z = X @ w
    obj = (cp.sum(cp.logistic(z)) + 0.3 * cp.sum_squares(w[:3]) + 2.0 * cp.square(2 * w[3] - 1)
           + cp.sum(w) + 1.5)
    prog, _ = compile_cvxpy(cp.Problem(cp.Minimize(obj)))
    assert prog.objective.atoms  # the squares are atoms here, not quadratic terms
    model = MajorizeModel(prog)
    assert model.H_diagonal and model._H is None  # the shortcut, not the sparse expansion
    from varopt.program.expression import Expression
    o = prog.objective
    H, c, k = Expression(prog.n, o.constant, o.linear, o.quadratic, atoms=list(o.atoms)).as_quadratic()
    assert np.allclose(model.Hd, H.diagonal(), rtol=1e-14, atol=0) and sp.triu(H, 1).nnz == 0
    assert np.allclose(model.c, c, rtol=1e-14, atol=1e-15) and abs(model.k - k) <= 1e-14 * max(1.0, abs(k))
    for _ in range(3):
        x = rng.normal(size=prog.n)
        assert abs(model.value(x) - prog.objective.value(x)) <= 1e-12 * max(1.0, abs(prog.objective.value(x)))


class _DenseOpInner(_DenseOp):
    """As _DenseOp, also giving the Schur complement ``N Q^+ N'`` itself (the path of RowSpaceCurvature.inner)."""

    def inner(self, Nt):
        return Nt.T @ self.pinv @ Nt


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), m=st.integers(0, 4),
       singular=st.booleans(), start_active=st.sampled_from([0.0, 0.3, 0.8]))
def test_active_set_operator_inner_agrees_with_highs(seed, n, m, singular, start_active):
    rank = max(1, n - 2) if singular else n
    Q, c, A, lo, hi, lb, ub, x0 = _random_qp(seed, n, m, rank, start_active)
    fast = ActiveSetQP(A).solve_operator(_DenseOpInner(Q), c, lo, hi, lb, ub, x0)
    ref = lpqp.solve_qp(Q, c, A=A if m else None, row_lo=lo if m else None, row_hi=hi if m else None, lb=lb, ub=ub)
    assert ref.status == "optimal"
    if fast is None:
        return
    assert abs(_objective(Q, c, fast.x) - ref.objective) <= 1e-7 * max(1.0, abs(ref.objective))
    assert np.all(fast.x >= lb - 1e-9) and np.all(fast.x <= ub + 1e-9)


@pytest.mark.parametrize("t, p, template", [(20, 40, False), (100, 400, True)])
def test_row_space_inner_matches_dense(t, p, template):
    """RowSpaceCurvature.inner (row space, feature columns on the normals' support) equals N Q^+ N' of the dense Q,
    with unpenalized coordinates (intercepts: Q singular along their common shift)."""
    import scipy.sparse as sp
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    from varopt.solvers.majorize.model import MajorizeModel
    from varopt.solvers.majorize.step_operator import RowSpaceCurvature
    X, y = _wide(5, t, p, 3)
    prob, W = _constrained(X, y, 1.0 / t)
    prog, _ = compile_cvxpy(prob)
    model = MajorizeModel(prog)
    grp = model.groups
    rng = np.random.default_rng(1)
    x = rng.normal(size=prog.n) * 0.1
    if not template:
        grp._template = None  # the generic padded-feature products
    op = RowSpaceCurvature(grp, grp.factors(grp.scores(x)), model.Hd)
    assert grp._template_fast() == template
    Qd = op.dense()
    assert np.allclose(Qd @ x, op.matvec(x), rtol=1e-12, atol=1e-12)
    cols = np.flatnonzero(model.Hd > 0)[[0, 3, 7]]
    row = rng.normal(size=(prog.n, 1)) * (rng.random((prog.n, 1)) < 0.2)
    row[model.Hd == 0] = 0.0  # normals off the flat intercept shift
    Nt = sp.hstack([sp.csr_matrix((np.ones(3), (cols, np.arange(3))), shape=(prog.n, 3)),
                    sp.csr_matrix(row)]).toarray()
    ref = Nt.T @ np.linalg.pinv(Qd, rcond=1e-12) @ Nt
    assert np.allclose(op.inner(Nt), ref, rtol=1e-8, atol=1e-10 * np.abs(ref).max())
    V = Nt
    assert np.allclose(Qd @ op.solve(V), V, atol=1e-9 * np.abs(V).max())


def test_wide_constrained_unbounded_reported():
    """A wide constrained multinomial whose objective is affine along the flat common intercept shift (a linear term
    in the intercepts' sum): the operator active set declines (its certificate fails) and the step QP reports the
    objective unbounded, as the dense path did."""
    import cvxpy as cp
    X, y = _wide(11, 30, 80, 3)
    prob, W, b = build_cvxpy(X, y, C=1.0 / 30)
    theta = cp.vec(W, order="F")
    bad = cp.Problem(cp.Minimize(prob.objective.args[0] + cp.sum(b)), [theta[:5] >= 0, cp.sum(theta[5:10]) <= 0.5])
    bad.solve(method="majorize")
    assert bad.status == "unbounded"
    res = bad.solver_stats.extra_stats["varopt_result"]
    assert res.info["step_solver"].get("woodbury", 0) >= 1


def _l1_ball_qp(seed, n, dup):
    """``min 1/2 w'Pw + c'w`` over ``||w||_1 <= t`` written with columns ``s >= |w|`` that have no curvature (the
    lifted norm1 constraint, varopt.program.abs_lift) and, with ``dup``, every row written twice (once scaled by 2):
    Q is singular on ``s`` and held rows are dependent. Feasible start ``(w0, |w0|)``."""
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(n, n))
    Q = np.zeros((2 * n, 2 * n))
    Q[:n, :n] = L @ L.T + 0.1 * np.eye(n)
    c = np.r_[rng.normal(size=n) * 3, np.zeros(n)]
    eye = np.eye(n)
    A = np.vstack([np.hstack([eye, -eye]), np.hstack([-eye, -eye]), np.r_[np.zeros(n), np.ones(n)][None]])
    hi = np.r_[np.zeros(2 * n), 1.0]
    if dup:
        A, hi = np.vstack([A, 2 * A]), np.r_[hi, 2 * hi]
    w0 = rng.normal(size=n) * 0.5 / n
    x0 = np.r_[w0, np.abs(w0)]
    return Q, c, A, np.full(A.shape[0], -np.inf), hi, np.full(2 * n, -np.inf), np.full(2 * n, np.inf), x0


@pytest.mark.parametrize("dup", [False, True])
def test_active_set_answers_flat_columns_and_dependent_rows(dup):
    """Columns without curvature pinned by the working set (the saddle-point solve of active_set.kkt_solve) and
    duplicated held rows (active_set._independent_rows): the fast path answers, matching HiGHS and Clarabel. Before
    both changes it declined every one of these QPs (A_W x = b_W missed by ~1e-6 / a singular Schur complement)."""
    declined = 0
    for seed in range(30):
        Q, c, A, lo, hi, lb, ub, x0 = _l1_ball_qp(seed, 5, dup)
        fast = ActiveSetQP(A).solve(Q, c, lo, hi, lb, ub, x0)
        if fast is None:
            declined += 1
            continue
        ref = lpqp.solve_qp(Q, c, A=A, row_lo=lo, row_hi=hi, lb=lb, ub=ub)
        _assert_matches(fast, ref, Q, c, A, lo, hi, lb, ub)
        assert abs(_objective(Q, c, fast.x) - _clarabel(Q, c, A, lo, hi, lb, ub)) <= 1e-6 * max(1.0, abs(ref.objective))
    assert declined <= 1


def test_large_cold_step_qp_at_zero_goes_to_the_qp_layer(monkeypatch):
    """A step QP the fast path would start at ``D = 0`` with an empty working set, on a QP the QP layer answers faster
    cold (here 100 dense equality rows in 300 columns: 30,000 nonzeros), goes to the QP layer (Clarabel first); its
    answer seeds the fast path of the next step QPs. The fast path added one blocking bound per dense factorization:
    a projection onto the simplex in 2,000 columns spent 60 of them (5 s) before declining (Clarabel 0.03 s;
    benchmarks/lpqp_equality_qps.py). The optimum equals Clarabel's."""
    import cvxpy as cp
    starts = []
    real = ActiveSetQP.solve

    def recorded(self, Q, c, row_lo, row_hi, lb, ub, x0, *a, **k):
        starts.append((bool(np.any(x0)), len(self.cols), sum(1 for s in self.rows.values() if s)))
        return real(self, Q, c, row_lo, row_hi, lb, ub, x0, *a, **k)
    monkeypatch.setattr(ActiveSetQP, "solve", recorded)
    rng = np.random.default_rng(6)
    n, m = 300, 100
    A = rng.standard_normal((m, n)) / np.sqrt(n)
    e = A @ rng.uniform(-1, 1, n)
    c = 3 * rng.standard_normal(n)
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x) + c @ x), [A @ x == e, x >= -1.5, x <= 1.5])
    v = prob.solve(method="majorize")
    assert prob.status == "optimal"
    assert (False, 0, 0) not in starts, starts
    assert prob.varopt_result.info["step_qp"]["fallback"] >= 1
    assert np.abs(A @ x.value - e).max() <= 1e-8 and np.abs(x.value).max() <= 1.5
    ref = cp.Problem(cp.Minimize(cp.sum_squares(x) + c @ x), [A @ x == e, x >= -1.5, x <= 1.5]).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert v == pytest.approx(ref, rel=1e-8)
