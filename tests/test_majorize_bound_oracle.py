"""Algorithm 2 over a bound oracle (``varopt.solvers.majorize.minimize``), the solver's shared run loop
(limits, callback, interrupt) and ChainCRF.fit through the solver."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize as scipy_minimize
from scipy.special import logsumexp

import varopt.solvers.majorize  # noqa: F401  (registers 'majorize')
from varopt import get_solver
from varopt.errors import InputDataError, InvalidOptionError
from varopt.estimators.crf import ChainCRF
from varopt.program import Program
from varopt.program.expression import Expression
from varopt.program.terms import LseGroup, QuadraticTerms
from varopt.solvers.majorize import minimize
from varopt.solvers.majorize.bound import compute_bound


class Softmax:
    """Multinomial logistic regression written by a user as a bound oracle: theta = W (C x d) row-major,
    configuration k of sample i has features e_k (x) x_i; log Z = sum_i log sum_k exp(w_k^T x_i)."""

    def __init__(self, X, y, C):
        self.X, self.y, self.C = X, y, C
        t, d = X.shape
        self.A = sp.csr_matrix(np.vstack([np.kron(np.eye(C)[k], X[i]) for i in range(t) for k in range(C)]))
        self.seg = np.repeat(np.arange(t), C)
        self.gold = -np.asarray(self.A[np.arange(t) * C + y].sum(0)).ravel()
        self.calls = 0

    def partition_bound(self, theta, want_sigma):
        self.calls += 1
        bp = compute_bound(self.A, np.zeros(self.A.shape[0]), self.seg, theta, want_mu=True)
        return float(bp.logz.sum()), bp.mu.sum(0), bp.sigma() if want_sigma else None

    def value_grad(self, theta, lam):
        S = (self.X @ theta.reshape(self.C, -1).T)
        P = np.exp(S - logsumexp(S, axis=1, keepdims=True))
        P[np.arange(len(self.y)), self.y] -= 1.0
        f = logsumexp(S, axis=1).sum() - S[np.arange(len(self.y)), self.y].sum() + 0.5 * lam * theta @ theta
        return f, (P.T @ self.X).ravel() + lam * theta


def _problem(seed=0, t=40, d=3, C=3, lam=0.7):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(t, d))
    y = np.argmax(X @ rng.normal(size=(d, C)) + rng.gumbel(size=(t, C)), axis=1)
    return Softmax(X, y, C), lam


def _program(sm, lam):
    n = sm.A.shape[1]
    obj = Expression(n, linear=sm.gold, quadratic=QuadraticTerms(np.arange(n), np.arange(n), np.full(n, 0.5 * lam), n),
                     lse=[LseGroup(A=sm.A, b=np.zeros(sm.A.shape[0]), seg=sm.seg, coef=np.ones(len(sm.y)))])
    return Program([f"w{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), obj, [])


@pytest.mark.parametrize("extrapolate", [True, False])
def test_user_bound_oracle_matches_program_path_and_lbfgs(extrapolate):
    sm, lam = _problem()
    n = sm.A.shape[1]
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-13, extrapolate=extrapolate)
    assert res.status == "optimal" and res.solver == "majorize"
    prog = get_solver("majorize").solve(_program(sm, lam), tol=1e-13, extrapolate=extrapolate)
    ref = scipy_minimize(lambda th: sm.value_grad(th, lam), np.zeros(n), jac=True, method="L-BFGS-B",
                         options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 5000})
    assert abs(res.objective - ref.fun) <= 1e-6 * abs(ref.fun)
    assert abs(res.objective - prog.objective) <= 1e-6 * abs(prog.objective)
    assert np.abs(res.x - ref.x).max() <= 1e-6 * max(1.0, np.abs(ref.x).max())
    assert np.abs(res.x - prog.x).max() <= 1e-6 * max(1.0, np.abs(prog.x).max())
    assert np.isclose(res.objective, sm.value_grad(res.x, lam)[0], rtol=1e-12)
    f = np.array([h["objective"] for h in res.history])
    assert f[0] == pytest.approx(len(sm.y) * np.log(sm.C)) and np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    assert {"objective", "step", "majorizer_decrease"} <= set(res.history[-1])
    assert all(h["majorizer_decrease"] >= 0 for h in res.history[1:])


def test_bound_oracle_lowrank_and_dense_quadratic():
    sm, lam = _problem(seed=1, d=4)
    n = sm.A.shape[1]
    full = minimize(sm, np.zeros(n), quadratic=np.full(n, lam), linear=sm.gold, tol=1e-13)
    low = minimize(sm.partition_bound, np.zeros(n), quadratic=lam * np.eye(n), linear=sm.gold, tol=1e-13,
                   bound="lowrank", rank=2, max_iter=3000)
    assert low.status == full.status == "optimal"
    assert abs(low.objective - full.objective) <= 1e-8 * abs(full.objective)


def test_bound_oracle_limits_options_and_errors():
    sm, lam = _problem()
    n = sm.A.shape[1]
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-14, max_iter=2, extrapolate=False)
    assert res.status == "iteration_limit" and res.iterations == 2 and len(res.history) == 3
    # limits are checked after each iteration (as before the shared run loop): one step always runs
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, time_limit=1e-9)
    assert res.status == "time_limit" and res.iterations == 1 and res.x is not None
    seen = []
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-14,
                   callback=lambda it, x, f: seen.append(it) or it == 3)
    assert seen == [1, 2, 3] and res.iterations == 3 and "callback" in res.message
    with pytest.raises(InvalidOptionError, match="tol"):
        minimize(sm, np.zeros(n), tol=-1.0)
    with pytest.raises(InvalidOptionError, match="nosuch"):
        minimize(sm, np.zeros(n), nosuch=1)
    with pytest.raises(InputDataError, match="mu"):
        minimize(lambda th, s: (0.0, np.full(n, np.nan), np.eye(n)), np.zeros(n))
    with pytest.raises(InputDataError, match="Sigma"):
        minimize(lambda th, s: (0.0, np.zeros(n), np.eye(n - 1)), np.zeros(n), extrapolate=False)
    with pytest.raises(InputDataError, match="x0"):
        minimize(sm, np.full(n, np.inf))


def test_oracle_interrupt_returns_last_iterate():
    sm, lam = _problem()
    n = sm.A.shape[1]
    iterates = []

    def oracle(theta, want_sigma):
        if sm.calls == 4:
            raise KeyboardInterrupt
        return sm.partition_bound(theta, want_sigma)
    res = minimize(oracle, np.zeros(n), quadratic=lam, linear=sm.gold, extrapolate=False,
                   callback=lambda it, x, f: iterates.append(x.copy()))
    assert res.status == "interrupted" and "interrupted" in res.message
    assert res.iterations == 4 and len(iterates) == 3 and np.array_equal(res.x, iterates[-1])
    assert res.objective == pytest.approx(sm.value_grad(res.x, lam)[0], rel=1e-12)


def test_program_interrupt_through_the_callback():
    sm, lam = _problem()
    prog = _program(sm, lam)
    iterates = []

    def cb(it, x, f):
        iterates.append((x.copy(), f))
        if it == 3:
            raise KeyboardInterrupt
    res = get_solver("majorize").solve(prog, tol=1e-14, callback=cb)
    assert res.status == "interrupted" and res.iterations == 3
    assert np.array_equal(res.x, iterates[-1][0]) and res.objective == iterates[-1][1]
    assert res.history[-1]["iteration"] == 3
    done = get_solver("majorize").solve(prog, tol=1e-14)
    assert done.status == "optimal" and done.iterations > 3 and done.objective < res.objective


X = [["Juan", "vive", "en", "Madrid"], ["El", "Barça", "gana"], ["hola"], ["Ana", "y", "Luis"]]
Y = [["B-PER", "O", "O", "B-LOC"], ["O", "B-ORG", "O"], ["O"], ["B-PER", "O", "B-PER"]]


def test_crf_fit_returns_a_result_with_limits():
    crf = ChainCRF(lam=0.5, method="majorize", tol=1e-13, max_iter=300).fit(X, Y)
    assert crf.result_.status == "optimal" and crf.result_.solver == "majorize"
    assert crf.n_iter_ == crf.result_.iterations and crf.history_ is crf.result_.history
    assert np.isclose(crf.result_.objective, crf.objective(), rtol=1e-12)
    short = ChainCRF(lam=0.5, method="majorize", tol=1e-13, max_iter=2).fit(X, Y)
    assert short.result_.status == "iteration_limit" and short.n_iter_ == 2 and len(short.history_) == 3
    timed = ChainCRF(lam=0.5, method="majorize", tol=1e-13, time_limit=1e-9).fit(X, Y)
    assert timed.result_.status == "time_limit" and timed.n_iter_ == 1  # limits checked after a step
    seen = []
    ChainCRF(lam=0.5, method="majorize", max_iter=3, tol=1e-13, callback=lambda th, f: seen.append(f)).fit(X, Y)
    assert len(seen) == 3 and np.all(np.diff(seen) <= 0)


def test_crf_partition_bound_is_the_oracle_without_linear_and_ridge():
    crf = ChainCRF(lam=0.5, method="lbfgs", max_iter=1).fit(X, Y)
    th = np.random.default_rng(2).normal(size=crf.d_) * 0.3
    logz, mu, Sig = crf.partition_bound(th, True)
    v, g, S2 = crf.oracle(th, True)
    assert np.isclose(v, logz + crf.linear_ @ th + 0.25 * th @ th, rtol=1e-13)
    assert np.allclose(g, mu + crf.linear_ + 0.5 * th, atol=1e-12) and np.array_equal(Sig, S2)
