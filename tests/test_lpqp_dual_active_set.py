"""The dual active-set method (Goldfarb & Idnani 1983, varopt.lpqp.dual_active_set) against HiGHS and CVXPY+Clarabel,
its warm start (a wrong working set, rows it must add), and majorize's step QPs with many rows."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from varopt import lpqp
from varopt.lpqp.active_set import ActiveSetQP
from varopt.lpqp.dual_active_set import solve_dual
from qp_reference import clarabel_qp


def _random_qp(seed, n, m, eq_frac=0.1, dup=False):
    """A strictly convex QP with a feasible point ``x0``: two-sided, one-sided and equality rows, bounds (some
    infinite), and with ``dup`` a duplicated row; the unconstrained minimiser violates many of the constraints."""
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(n, n))
    Q = L @ L.T / n + 0.1 * np.eye(n)
    c = rng.normal(size=n) * 5
    x0 = rng.normal(size=n)
    A = rng.normal(size=(m, n))
    if dup and m >= 2:
        A[1] = 2.0 * A[0]
    ax = A @ x0
    gap = lambda k: np.where(rng.random(k) < 0.3, np.inf, rng.exponential(size=k))  # noqa: E731
    lo, hi = ax - gap(m), ax + gap(m)
    eq = rng.random(m) < eq_frac
    if dup and m >= 2:
        eq[:2] = False
    lo[eq] = hi[eq] = ax[eq]
    lb, ub = x0 - gap(n), x0 + gap(n)
    return Q, c, A, lo, hi, lb, ub


def _check(res, Q, c, A, lo, hi, lb, ub, rel=1e-8):
    """The answer against HiGHS (objective), feasible to 1e-8, and a KKT certificate recomputed here."""
    ref = lpqp.solve_qp(Q, c, A=A, row_lo=lo, row_hi=hi, lb=lb, ub=ub)
    assert ref.status == "optimal"
    x = res.x
    f = 0.5 * x @ Q @ x + c @ x
    assert abs(f - ref.objective) <= rel * max(1.0, abs(ref.objective))
    assert np.all(x >= lb - 1e-8) and np.all(x <= ub + 1e-8)
    assert np.all(A @ x >= lo - 1e-8) and np.all(A @ x <= hi + 1e-8)
    scale = 1 + np.abs(c).max() + np.abs(Q @ x).max() + np.abs(A.T @ res.row_duals).max(initial=0)
    assert lpqp.kkt_residual(res, c, A, lo, hi, lb, ub, Q) <= 1e-8 * scale
    return f


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), m=st.integers(0, 40), dup=st.booleans())
def test_dual_active_set_agrees_with_highs(seed, n, m, dup):
    """From a cold start (empty working set); duplicated rows may make it decline (the caller falls back), never
    answer wrongly."""
    Q, c, A, lo, hi, lb, ub = _random_qp(seed, n, m, dup=dup)
    res = solve_dual(ActiveSetQP(A), Q, c, lo, hi, lb, ub)
    if res is None:
        assert dup or ((lo == hi).sum() > 0 and m > n), "declined a QP with independent constraints"
        return
    assert res.info["method"] == "dual-active-set"
    _check(res, Q, c, A, lo, hi, lb, ub)


def test_dual_active_set_answers_many_rows_and_matches_clarabel():
    """Many rows in few columns (the case it is for): 800 one-sided rows in 30 columns, a few dozen active at the
    optimum; it must answer (not decline), every time, and equal Clarabel's point and value."""
    for seed in range(5):
        rng = np.random.default_rng(seed)
        n, m = 30, 800
        A = rng.normal(size=(m, n))
        hi = rng.uniform(0.5, 1.5, m)
        lo = np.full(m, -np.inf)
        L = rng.normal(size=(n, 3))
        Q = L @ L.T + 0.02 * np.eye(n)
        c = -5.0 * rng.normal(size=n)
        lb, ub = np.full(n, -np.inf), np.full(n, np.inf)
        res = solve_dual(ActiveSetQP(A), Q, c, lo, hi, lb, ub)
        assert res is not None
        f = _check(res, Q, c, A, lo, hi, lb, ub)
        v, xc = clarabel_qp(Q, c, A, lo, hi, lb, ub)
        assert abs(f - v) <= 1e-7 * max(1.0, abs(v))
        assert np.abs(res.x - xc).max() <= 1e-5 * max(1.0, np.abs(xc).max())
        assert int(np.count_nonzero(res.row_duals)) >= 10   # not a trivial instance: many rows active


def test_dual_active_set_repairs_a_wrong_warm_working_set():
    """The working set carried from the previous QP is wrong: rows held there are inactive at the new optimum (their
    multipliers come out with the wrong sign and must be dropped), and the minimiser on that working set violates
    rows outside it (which must be added: the row generation). The answer equals Clarabel's; the rows added
    were not in the start, and without them the point on the start's working set is infeasible."""
    rng = np.random.default_rng(7)
    n, m = 12, 300
    A = rng.normal(size=(m, n))
    hi = rng.uniform(0.5, 1.5, m)
    lo = np.full(m, -np.inf)
    lb, ub = np.full(n, -np.inf), np.full(n, np.inf)
    Q = np.eye(n) * 0.05
    qp = ActiveSetQP(A)
    c1 = 3.0 * rng.normal(size=n)
    first = solve_dual(qp, Q, c1, lo, hi, lb, ub)
    assert first is not None
    start = set(qp.rows)
    # another pull: some of the first optimum's rows are released, others become active
    c2 = 0.5 * c1 + 3.0 * rng.normal(size=n)
    res = solve_dual(qp, Q, c2, lo, hi, lb, ub)
    assert res is not None
    v, xc = clarabel_qp(Q, c2, A, lo, hi, lb, ub)
    f = _check(res, Q, c2, A, lo, hi, lb, ub)
    assert abs(f - v) <= 1e-7 * max(1.0, abs(v))
    assert np.abs(res.x - xc).max() <= 1e-5
    active = set(np.flatnonzero(res.row_duals).tolist())
    assert active - start, "no row outside the warm working set became active"
    assert start - active, "every row of the warm working set stayed active"
    # the equality QP on the start's rows that stay active (the answer had no row been added) violates other rows
    Wk = sorted(start & active)
    K = np.block([[Q, A[Wk].T], [A[Wk], np.zeros((len(Wk), len(Wk)))]])
    xw = np.linalg.solve(K, np.concatenate((-c2, hi[Wk])))[:n]
    assert (A @ xw - hi).max() > 1e-3


def test_dual_active_set_warm_sequence_takes_few_iterations():
    """A family of QPs with the same rows and a slowly changing Q and c (majorization's step QPs): after the first,
    each starts from the last working set and needs a few iterations; every answer equals HiGHS's."""
    rng = np.random.default_rng(3)
    n, m = 20, 400
    A = rng.normal(size=(m, n))
    hi = rng.uniform(0.5, 1.5, m)
    lo, lb, ub = np.full(m, -np.inf), np.full(n, -np.inf), np.full(n, np.inf)
    Q0 = 0.1 * np.eye(n)
    c0 = 4.0 * rng.normal(size=n)
    qp = ActiveSetQP(A)
    its = []
    for k in range(8):
        Q = Q0 + 0.01 * k * np.diag(rng.random(n))
        c = c0 + 0.01 * k * rng.normal(size=n)
        res = solve_dual(qp, Q, c, lo, hi, lb, ub)
        assert res is not None
        _check(res, Q, c, A, lo, hi, lb, ub)
        its.append(res.iterations)
    assert its[0] >= 10 and max(its[1:]) <= 5


def test_dual_active_set_declines_what_it_cannot_answer():
    """Infeasible rows, a singular Q (not strictly convex), dependent equalities: None (the caller falls back)."""
    n = 3
    A = np.array([[1.0, 0, 0], [1.0, 0, 0]])
    lb, ub = np.full(n, -np.inf), np.full(n, np.inf)
    Q, c = np.eye(n), np.ones(n)
    assert solve_dual(ActiveSetQP(A), Q, c, np.array([1.0, -np.inf]), np.array([np.inf, 0.0]), lb, ub) is None
    Qs = np.diag([1.0, 1.0, 0.0])
    assert solve_dual(ActiveSetQP(A[:1]), Qs, c, np.array([-1.0]), np.array([1.0]), lb, ub) is None
    assert solve_dual(ActiveSetQP(A), Q, c, np.array([1.0, 1.0]), np.array([1.0, 1.0]), lb, ub) is None


@pytest.mark.parametrize("warm", [False, True])
def test_majorize_many_rows_by_the_dual_active_set(warm):
    """A CVXPY user's log-sum-exp objective with 600 dense inequality rows in 40 columns (about 40 active: a vertex
    of the rows, approached step by step): every step QP by the dual active set (none by the QP layer), the
    objective monotone along the iterates, the point feasible (CVXPY's violation) and equal to Clarabel's."""
    import cvxpy as cp
    rng = np.random.default_rng(1)
    n, m, K = 40, 600, 6
    A = rng.normal(size=(m, n))
    b = rng.uniform(0.5, 1.5, m)
    W = rng.normal(size=(K, n))

    def build():
        x = cp.Variable(n, name="x")
        obj = cp.log_sum_exp(W @ x) - 1.5 * (W[0] @ x) + 0.01 * cp.sum_squares(x)
        return cp.Problem(cp.Minimize(obj), [A @ x <= b]), x

    ref, _ = build()
    ref.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    prob, x = build()
    if warm:
        x.value = np.full(n, 1e-3)
    seen = []

    def f(v):
        return float(np.log(np.exp(W @ v).sum()) - 1.5 * W[0] @ v + 0.01 * v @ v)
    got = prob.solve(method="majorize", tol=1e-12, callback=lambda it, xv, fv: seen.append(f(xv)) and False,
                     **({"warm_start": True} if warm else {}))
    res = prob.solver_stats.extra_stats["varopt_result"]
    stats = res.info["step_qp"]
    assert stats["fallback"] == 0 and stats.get("dual", 0) == stats["active_set"] >= 3
    assert abs(got - ref.value) <= 1e-6 * max(1.0, abs(ref.value))
    assert max(float(np.max(con.violation())) for con in prob.constraints) <= 1e-8
    assert all(b_ <= a_ + 1e-12 * max(1.0, abs(a_)) for a_, b_ in zip(seen, seen[1:]))
    assert int(np.count_nonzero(A @ x.value >= b - 1e-7)) >= 10


def test_majorize_many_rows_singular_curvature_falls_back():
    """Without the ridge the curvature (the log-sum-exp bound over 6 scores) is singular in 40 columns: the dual
    active set declines (twice, then it is not tried again in the solve) and the step QPs take the primal active set
    or the QP layer; the fit still equals Clarabel's and is feasible."""
    import cvxpy as cp
    rng = np.random.default_rng(2)
    n, m = 40, 600
    A = rng.normal(size=(m, n))
    b = rng.uniform(0.5, 1.5, m)
    W = rng.normal(size=(6, n))

    def build():
        x = cp.Variable(n)
        return cp.Problem(cp.Minimize(cp.log_sum_exp(W @ x) - 1.5 * (W[0] @ x)), [A @ x <= b])

    ref = build()
    ref.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    prob = build()
    got = prob.solve(method="majorize", tol=1e-12)
    stats = prob.solver_stats.extra_stats["varopt_result"].info["step_qp"]
    assert stats.get("dual", 0) == 0 and stats["dual_declined"] == 2
    assert stats["active_set"] + stats["fallback"] >= 3
    assert abs(got - ref.value) <= 1e-6 * max(1.0, abs(ref.value))
    assert max(float(np.max(con.violation())) for con in prob.constraints) <= 1e-8
