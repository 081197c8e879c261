"""Tests of the IPSA solver (Carbonetto 2009, ch. 2) on programs built from arrays.

References are independent: HiGHS QP optimum (varopt.highs), closed forms, finite
differences, scikit-learn's coordinate-descent Lasso.
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp

import varopt
import varopt.solvers.ipsa  # noqa: F401  (registers 'ipsa')
from varopt.errors import InputDataError, InvalidOptionError, ModelStructureError
from varopt.program import AtomGroup, Constraint, Expression, LseGroup, Program, QuadraticTerms
from varopt.solvers.ipsa import FiniteSumOracle, IpsaOracleError, StreamOracle
from varopt.solvers.ipsa.hessian import DampedBB, DampedBFGS
from varopt.oracles.sampling import Sampler


def ipsa(program, **kw):
    return varopt.get_solver("ipsa").solve(program, **kw)


def names(n):
    return [f"x{i}" for i in range(n)]


def lasso_split_program(A, y, alpha):
    """(1/2n)||y - A(w+ - w-)||^2 + alpha 1^T (w+, w-), w+- >= 0 (thesis 2.61)."""
    n, m = A.shape
    As = np.hstack([A, -A])
    e = Expression(2 * m, linear=np.full(2 * m, alpha),
                   atoms=[AtomGroup("square", np.full(n, 1 / (2 * n)), sp.csr_matrix(-As), y)])
    return Program(names(2 * m), np.zeros(2 * m), np.full(2 * m, np.inf), e)


def random_data(seed, n=60, m=8):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, m))
    w = rng.normal(size=m) * (rng.random(m) < 0.5)
    return A, A @ w + 0.3 * rng.normal(size=n)


class Recorder:
    def __init__(self, program):
        self.program = program
        self.min_slack = np.inf
        self.min_z = np.inf
        self.iters = 0

    def __call__(self, it, x, z, s):
        self.iters = it
        self.min_slack = min(self.min_slack, float(s.min()) if s.size else np.inf)
        self.min_z = min(self.min_z, float(z.min()) if z.size else np.inf)
        # independent check on the program itself (not the solver's slack vector)
        p = self.program
        assert np.all(x > p.lb) and np.all(x < p.ub)
        for c in p.constraints:
            v = c.body.value(x)
            assert c.lo < v < c.hi, (c.name, v)


# --- finite sums ------------------------------------------------------------------------------
def test_finite_sum_gradient_is_unbiased_and_exact_over_a_pass():
    A, y = random_data(0, n=30, m=5)
    P = lasso_split_program(A, y, 0.3)
    orc = FiniteSumOracle(P.objective)
    assert orc.n_samples == 30
    x = np.random.default_rng(1).random(10)
    gs = [orc.gradient(x, np.array([i])) for i in range(30)]
    np.testing.assert_allclose(np.mean(gs, axis=0), P.objective.gradient(x), rtol=1e-12, atol=1e-12)
    # one sample = regularised delta rule (2.59)/(2.62) in the split variables
    w = x[:5] - x[5:]
    gi = -A[3] * (y[3] - A[3] @ w)
    np.testing.assert_allclose(gs[3], np.r_[gi, -gi] + 0.3, rtol=1e-12)
    # batches: (N/|B|) sum over the batch
    B = np.array([2, 7, 7])
    np.testing.assert_allclose(orc.gradient(x, B), (gs[2] + 2 * gs[7]) / 3, rtol=1e-12)
    # Hessian diagonal and Hessian of the full batch are the exact ones
    full = np.arange(30)
    H = P.objective.hessian(x).toarray()
    np.testing.assert_allclose(orc.hessian_diag(x, full), np.diag(H), rtol=1e-10)
    np.testing.assert_allclose(orc.hessian(x, full).toarray(), H, rtol=1e-10)


def test_finite_sum_lse_rows_logistic():
    rng = np.random.default_rng(3)
    n, m = 25, 4
    A = rng.normal(size=(n, m))
    yy = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    # log(1 + exp(-y a.w)) as an LseGroup with entries {0, -y a.w} per sample
    rows = np.zeros((2 * n, m))
    rows[1::2] = -yy[:, None] * A
    g = LseGroup(sp.csr_matrix(rows), np.zeros(2 * n), np.repeat(np.arange(n), 2), np.full(n, 1.0 / n))
    e = Expression(m, lse=[g])
    orc = FiniteSumOracle(e)
    assert orc.n_samples == n
    w = rng.normal(size=m)
    gs = np.array([orc.gradient(w, np.array([i])) for i in range(n)])
    np.testing.assert_allclose(gs.mean(axis=0), e.gradient(w), rtol=1e-10, atol=1e-12)
    direct = -yy[5] * A[5] / (1 + np.exp(yy[5] * A[5] @ w))  # (2.75) per sample
    np.testing.assert_allclose(gs[5], direct, rtol=1e-10)
    hd = orc.hessian_diag(w, np.arange(n))
    np.testing.assert_allclose(hd, np.diag(e.hessian(w).toarray()), rtol=1e-9, atol=1e-12)
    B = np.array([1, 4, 9])
    H = orc.hessian(w, B).toarray()
    np.testing.assert_allclose(np.diag(H), orc.hessian_diag(w, B), rtol=1e-9, atol=1e-12)


def test_finite_sum_labels_group_rows_into_samples():
    rng = np.random.default_rng(4)
    A = sp.csr_matrix(rng.normal(size=(6, 3)))
    g = AtomGroup("square", np.ones(6), A, np.zeros(6), label=np.array([0, 0, 1, 1, 2, 2]))
    orc = FiniteSumOracle(Expression(3, atoms=[g]))
    assert orc.n_samples == 3
    x = rng.normal(size=3)
    np.testing.assert_allclose(orc.gradient(x, np.array([1])),
                               3 * 2 * A[2:4].T @ (A[2:4] @ x), rtol=1e-12)


def test_sampler_modes_cover_each_pass():
    rng = np.random.default_rng(0)
    for mode in ("cyclic", "permutation"):
        smp = Sampler(10, 3, mode, rng)
        seen = np.concatenate([smp.next() for _ in range(10)])  # 30 = 3 passes
        for p in range(3):
            assert sorted(seen[10 * p:10 * (p + 1)]) == list(range(10))
    smp = Sampler(10, 4, "uniform", rng)
    assert all(b.size == 4 and b.max() < 10 for b in (smp.next() for _ in range(5)))
    assert Sampler(10, 1, "cyclic", rng).next().tolist() == [0]


@pytest.mark.parametrize("passes,batch,expected", [(1, 1, 50), (2, 3, 34), (0.5, 1, 25)])
def test_pass_counts(passes, batch, expected):
    A, y = random_data(1, n=50, m=4)
    res = ipsa(lasso_split_program(A, y, 0.2), passes=passes, batch_size=batch)
    assert res.iterations == expected
    assert res.status == "pass_limit"
    assert res.history[-1]["iteration"] == expected
    for key in ("mu", "eta", "step", "step_max", "sigma", "ftb_dual"):
        assert key in res.history[-1]


# --- accuracy ---------------------------------------------------------------------------------
def test_online_lasso_close_to_exact_and_improves_with_passes():
    from sklearn.linear_model import Lasso

    A, y = random_data(2, n=100, m=8)
    alpha = 0.1
    w_exact = Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100000).fit(A, y).coef_
    P = lasso_split_program(A, y, alpha)
    err = []
    # a_k = 1/(k0 + k)^0.6: slower-decaying steps than the harmonic default (which converges
    # only like a power of k in the directions where w+ and w- both shrink)
    for passes in (1, 10, 100):
        r = ipsa(P, passes=passes, step_power=0.6)
        err.append(np.abs(r.x[:8] - r.x[8:] - w_exact).mean())
    assert err[0] > err[1] > err[2]
    assert err[2] < 0.002


def _random_qp(seed, n=6, mrows=4):
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(n, n))
    Q = L @ L.T / n + 0.1 * np.eye(n)
    c = rng.normal(size=n) * 3
    G = rng.normal(size=(mrows, n))
    x_in = rng.uniform(-0.5, 0.5, size=n)
    act = G @ x_in
    lo = act - rng.uniform(0.1, 1.0, size=mrows)
    hi = act + rng.uniform(0.1, 1.0, size=mrows)
    hi[0] = np.inf  # a one-sided row
    lb = np.full(n, -1.0)
    ub = np.full(n, 1.0)
    ub[1] = np.inf
    iu, ju = np.triu_indices(n)
    v = np.where(iu == ju, Q[iu, ju] / 2, Q[iu, ju])
    e = Expression(n, linear=c, quadratic=QuadraticTerms(iu, ju, v, n))
    cons = [Constraint(f"r{k}", Expression(n, linear=G[k]), lo[k], hi[k]) for k in range(mrows)]
    return Program(names(n), lb, ub, e, cons), (Q, c, G, lo, hi, lb, ub)


@pytest.mark.parametrize("seed", range(4))
def test_exact_gradient_converges_to_highs_qp_optimum(seed):
    from varopt import highs

    P, (Q, c, G, lo, hi, lb, ub) = _random_qp(seed)
    ref = highs.solve_lp(c, A=G, row_lo=lo, row_hi=hi, lb=lb, ub=ub, Q=Q)
    assert ref.status == "optimal"
    rec = Recorder(P)
    r = ipsa(P, hessian="exact", step_power=0, sigma=0.2, max_iter=300, tol=1e-10, callback=rec)
    assert r.status == "converged", r.message
    assert abs(r.objective - ref.objective) <= 1e-6 * max(1.0, abs(ref.objective))
    assert np.max(np.abs(r.x - ref.x)) <= 1e-5
    assert rec.min_slack > 0 and rec.min_z > 0
    # sigma_k -> 0: the barrier parameter fell by orders of magnitude
    assert r.history[-1]["mu"] < 1e-8


def test_full_batch_finite_sum_converges_to_exact_lasso():
    from varopt import highs

    A, y = random_data(5, n=40, m=6)
    alpha = 0.2
    P = lasso_split_program(A, y, alpha)
    H, c, k = P.objective.as_quadratic()
    ref = highs.solve_lp(c, lb=np.zeros(12), Q=H, const=k)
    r = ipsa(P, batch_size=40, hessian="exact", step_power=0, max_iter=300)
    assert r.status == "converged"
    assert abs(r.objective - ref.objective) <= 1e-6 * abs(ref.objective)


def test_ball_constraint_linear_objective_closed_form():
    n, rad = 5, 2.0
    cvec = np.arange(1.0, n + 1)
    ball = Expression(n, quadratic=QuadraticTerms(np.arange(n), np.arange(n), np.ones(n), n))
    P = Program(names(n), np.full(n, -np.inf), np.full(n, np.inf), Expression(n, linear=cvec),
                [Constraint("ball", ball, -np.inf, rad)])
    rec = Recorder(P)
    r = ipsa(P, hessian="exact", step_power=0, max_iter=300, tol=1e-10, callback=rec)
    x_star = -math.sqrt(rad) * cvec / np.linalg.norm(cvec)
    assert np.max(np.abs(r.x - x_star)) < 1e-5
    assert rec.min_slack > 0


def test_user_oracle_noisy_box_problem():
    # f(x) = ||x - t||^2 / 2 with t outside the box [0, 1]^3: solution = clip(t)
    t = np.array([1.5, -0.5, 0.3])

    def grad(x, rng):
        return x - t + 0.3 * rng.normal(size=3)

    P = Program(names(3), np.zeros(3), np.ones(3), Expression(3))
    rec = Recorder(P)
    r = ipsa(P, oracle=grad, max_iter=4000, k0=5, seed=3, callback=rec)
    assert np.max(np.abs(r.x - np.clip(t, 0, 1))) < 0.06
    assert rec.min_slack > 0 and rec.min_z > 0
    # same seed -> same run
    r2 = ipsa(P, oracle=grad, max_iter=4000, k0=5, seed=3)
    np.testing.assert_array_equal(r.x, r2.x)


def test_stream_oracle_reads_chunks_until_exhausted():
    A, y = random_data(6, n=120, m=5)
    alpha = 0.05

    def chunks():
        for i in range(0, 120, 10):
            yield A[i:i + 10], y[i:i + 10]

    def grad(x, batch):
        Ab, yb = batch
        g = -Ab.T @ (yb - Ab @ (x[:5] - x[5:])) / len(yb)
        return np.r_[g, -g]

    P = lasso_split_program(A, y, alpha)
    r = ipsa(P, oracle=StreamOracle(chunks(), grad), oracle_adds_objective=False, k0=1)
    assert r.iterations == 12 and r.message == "stream exhausted"
    # adding the exact gradient of the program objective (penalty + loss) doubles the loss gradient
    r2 = ipsa(P, oracle=StreamOracle(chunks(), grad), oracle_adds_objective=True, k0=1)
    assert r2.iterations == 12 and not np.allclose(r.x, r2.x)


@pytest.mark.parametrize("hessian", ["identity", "bb", "bfgs", "diagonal"])
@pytest.mark.parametrize("dual_step", ["same", "separate"])
def test_hessian_variants_stay_feasible_and_reduce_error(hessian, dual_step):
    from sklearn.linear_model import Lasso

    A, y = random_data(7, n=80, m=6)
    alpha = 0.1
    w_exact = Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100000).fit(A, y).coef_
    P = lasso_split_program(A, y, alpha)
    rec = Recorder(P)
    r = ipsa(P, passes=20, hessian=hessian, dual_step=dual_step, sampling="permutation", seed=1, callback=rec)
    assert rec.min_slack > 0 and rec.min_z > 0
    err = np.abs(r.x[:6] - r.x[6:] - w_exact).mean()
    if hessian == "bb":
        # beta estimates the curvature along the steps, which lie mostly along a_i: between 0 and
        # the largest per-sample curvature 2 ||a_i||^2 of the split loss; the slow null direction
        # (w+ + w-, curvature 0) then moves with steps ~ a_k / beta
        assert 0 < r.info["bb_beta"] <= 2 * np.max(np.sum(A * A, axis=1))
        assert err < 0.5 * np.abs(w_exact).mean()
    else:
        assert err < 0.25 * np.abs(w_exact).mean()


def test_box_form_uses_block_solver():
    # -u <= w <= u as linear rows: 2x2 blocks (thesis 2.64-2.65)
    A, y = random_data(8, n=60, m=4)
    n, m = A.shape
    alpha = 0.1
    Aw = np.hstack([A, np.zeros((n, m))])
    e = Expression(2 * m, linear=np.r_[np.zeros(m), np.full(m, alpha)],
                   atoms=[AtomGroup("square", np.full(n, 1 / (2 * n)), sp.csr_matrix(-Aw), y)])
    cons = []
    for j in range(m):
        a = np.zeros(2 * m)
        a[j], a[m + j] = 1, 1
        cons.append(Constraint(f"lo{j}", Expression(2 * m, linear=a), 0, np.inf))
        a = np.zeros(2 * m)
        a[j], a[m + j] = 1, -1
        cons.append(Constraint(f"hi{j}", Expression(2 * m, linear=a), -np.inf, 0))
    P = Program(names(2 * m), np.full(2 * m, -np.inf), np.full(2 * m, np.inf), e, cons)
    rec = Recorder(P)
    r = ipsa(P, passes=30, callback=rec)
    assert r.info["system"] == "blocks"
    assert rec.min_slack > 0
    P2 = lasso_split_program(A, y, alpha)
    r2 = ipsa(P2, batch_size=n, hessian="exact", step_power=0, max_iter=300)
    w_exact = r2.x[:m] - r2.x[m:]
    assert np.abs(r.x[:m] - w_exact).mean() < 0.05
    # the general (dense) solver gives the same direction: exact Hessian forces it
    r3 = ipsa(P, batch_size=n, hessian="exact", step_power=0, max_iter=300)
    assert r3.info["system"] == "general"
    np.testing.assert_allclose(r3.x[:m], w_exact, atol=1e-5)


# --- quasi-Newton updates (errata of §2.4.2) ---------------------------------------------------
def test_damped_bfgs_update_errata():
    rng = np.random.default_rng(0)
    n = 5
    upd = DampedBFGS(n, gamma=0.8, cap_by_step=False)
    L = rng.normal(size=(n, n))
    upd.B = L @ L.T + np.eye(n)
    for trial in range(20):
        s = rng.normal(size=n)
        y = rng.normal(size=n)  # often <y, s> < 0: damping needed
        B = upd.B.copy()
        Bs = B @ s
        t = DampedBFGS.damping_factor(s @ Bs, y @ s, 0.8)
        yd = t * y + (1 - t) * Bs
        assert yd @ s >= 0.8 * (s @ Bs) - 1e-9  # (2.51) with the <s, Bs> denominator
        upd.update(s, y, 1.0)
        Bn = upd.B
        np.testing.assert_allclose(Bn @ s, yd, rtol=1e-8, atol=1e-8)  # secant equation
        # corrected (2.50): det B+ = det B <y, s>/<s, B s>
        np.testing.assert_allclose(np.linalg.det(Bn), np.linalg.det(B) * (yd @ s) / (s @ Bs), rtol=1e-7)
        assert np.linalg.eigvalsh(Bn).min() > 0
    # corrected Sherman-Morrison (2.48): (A + u v^T)^-1 = A^-1 - A^-1 u v^T A^-1 / (1 + v^T A^-1 u)
    A = upd.B
    u, v = rng.normal(size=n), rng.normal(size=n)
    Ai = np.linalg.inv(A)
    np.testing.assert_allclose(np.linalg.inv(A + np.outer(u, v)),
                               Ai - Ai @ np.outer(u, v) @ Ai / (1 + v @ Ai @ u), rtol=1e-8, atol=1e-10)


def test_damped_bb_update():
    bb = DampedBB(3, beta0=1.0)
    s, y = np.array([1.0, 0, 0]), np.array([3.0, 0, 0])
    bb.update(s, y, 0.5)
    assert bb.beta == pytest.approx(1.0 - 0.5 * (1.0 - 3.0))  # (2.45)
    bb.update(s, -100 * y, 0.5)  # would make beta negative: skipped
    assert bb.beta == pytest.approx(2.0) and bb.skipped == 1


# --- validation -------------------------------------------------------------------------------
def test_nan_gradient_names_iteration_and_keeps_last_iterate():
    calls = {"n": 0}

    def grad(x, rng):
        calls["n"] += 1
        return np.full(2, np.nan) if calls["n"] == 5 else x - 3.0

    P = Program(names(2), np.zeros(2), np.full(2, 10.0), Expression(2))
    with pytest.raises(IpsaOracleError, match="iteration 5") as ei:
        ipsa(P, oracle=grad, max_iter=20)
    err = ei.value
    assert err.iteration == 5 and np.all(np.isfinite(err.x)) and err.result.status == "error"
    assert np.all(err.x > 0) and np.all(err.x < 10)
    np.testing.assert_array_equal(err.result.x, err.x)


def test_wrong_gradient_shape():
    P = Program(names(3), np.zeros(3), np.ones(3), Expression(3))
    with pytest.raises(InputDataError, match="shape"):
        ipsa(P, oracle=lambda x, rng: np.ones(2), max_iter=3)


def test_nonconvex_and_equality_and_no_interior_rejected():
    n = 2
    neg_sq = Expression(n, quadratic=QuadraticTerms([0], [0], [-1.0], n))
    P = Program(names(n), np.zeros(n), np.ones(n), Expression(n, linear=np.ones(n)),
                [Constraint("concave", neg_sq, -np.inf, 1.0)])
    with pytest.raises(ModelStructureError, match="concave.*not convex"):
        ipsa(P, max_iter=2)
    # a nonlinear equality has no interior and cannot be eliminated (linear ones are: test_ipsa_equalities.py)
    sq = Expression(n, quadratic=QuadraticTerms([0, 1], [0, 1], [1.0, 1.0], n))
    P = Program(names(n), np.zeros(n), np.ones(n), Expression(n, linear=np.ones(n)),
                [Constraint("eq", sq, 0.5, 0.5)])
    with pytest.raises(ModelStructureError, match="equality"):
        ipsa(P, max_iter=2)
    # x >= 0 and x0 + x1 <= 0: feasible ({0}) but no strict interior
    P = Program(names(n), np.zeros(n), np.full(n, np.inf), Expression(n, linear=np.ones(n)),
                [Constraint("flat", Expression(n, linear=np.ones(n)), -np.inf, 0.0)])
    with pytest.raises(ModelStructureError, match="no strict interior"):
        ipsa(P, max_iter=2)
    # ball of radius 0
    ball = Expression(n, quadratic=QuadraticTerms([0, 1], [0, 1], [1.0, 1.0], n))
    P = Program(names(n), np.full(n, -5.0), np.full(n, 5.0), Expression(n, linear=np.ones(n)),
                [Constraint("ball", ball, -np.inf, 0.0)])
    with pytest.raises(ModelStructureError, match="strict"):
        ipsa(P, max_iter=2)


def test_invalid_options_and_x0():
    P = Program(names(2), np.zeros(2), np.ones(2), Expression(2, linear=np.ones(2)))
    with pytest.raises(InvalidOptionError):
        ipsa(P, sampling="random")
    with pytest.raises(InvalidOptionError):
        ipsa(P, k0=-1)
    with pytest.raises(InvalidOptionError, match="oracle"):
        ipsa(P, oracle=3)
    with pytest.raises(InputDataError, match="not strictly feasible"):
        ipsa(P, x0=[0.0, 0.5], max_iter=2)
    r = ipsa(P, x0=[0.2, 0.5], max_iter=1)
    assert r.iterations == 1


def test_sparse_rows_and_bounds_cost_linear_structure():
    # many variables, bounds only: the diagonal path, no dense n x n work
    n = 20000
    rng = np.random.default_rng(0)
    A = sp.random(200, n, density=0.001, random_state=1, format="csr")
    e = Expression(n, linear=np.full(n, 0.1), atoms=[AtomGroup("square", np.ones(200), A, rng.normal(size=200))])
    P = Program(names(n), np.zeros(n), np.full(n, np.inf), e)
    r = ipsa(P, passes=1)
    assert r.info["system"] == "diag" and r.iterations == 200
    assert np.all(r.x > 0)


def test_time_limit_and_seeded_uniform_sampling():
    A, y = random_data(9, n=50, m=4)
    P = lasso_split_program(A, y, 0.1)
    r = ipsa(P, passes=10 ** 6, time_limit=0.3)
    assert r.status == "time_limit" and 0 < r.iterations < 50 * 10 ** 6
    r1 = ipsa(P, passes=2, sampling="uniform", seed=4)
    r2 = ipsa(P, passes=2, sampling="uniform", seed=4)
    r3 = ipsa(P, passes=2, sampling="uniform", seed=5)
    np.testing.assert_array_equal(r1.x, r2.x)
    assert not np.array_equal(r1.x, r3.x)
    h = r1.history[-1]
    assert h["mu"] > 0 and h["eta"] > 0 and 0 < h["step"] <= h["step_max"]
    assert r1.info["system"] == "diag" and 0 < r1.info["mean_step_ratio"] <= 1
