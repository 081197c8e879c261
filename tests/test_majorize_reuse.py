"""Option bound_reuse (varopt/solvers/majorize/reuse.py): quasi-Newton trials on a reused bound, monotone by
value, with Algorithm 2's bound step as fallback. Checked against enumeration, L-BFGS and Algorithm 2 itself."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize as scipy_minimize

import varopt.solvers.majorize.reuse as reuse
from varopt import get_solver
from varopt.errors import InvalidOptionError
from varopt.estimators.crf import ChainCRF
from varopt.solvers.majorize import minimize
from varopt.solvers.majorize.bound import compute_bound

from test_crf import X, Y, _brute
from test_majorize_bound_oracle import _problem, _program


@pytest.mark.parametrize("metric", ["bound", "scalar"])
@pytest.mark.parametrize("k", [1, 3, 100])
def test_crf_reuse_is_monotone_by_enumeration_and_reaches_lbfgs(metric, k):
    iterates = []
    a = ChainCRF(lam=0.5, method="majorize", tol=1e-13, max_iter=300, bound_reuse=k, reuse_metric=metric,
                 callback=lambda th, J: iterates.append((th.copy(), J))).fit(X, Y)
    b = ChainCRF(lam=0.5, method="lbfgs", tol=1e-14, max_iter=2000).fit(X, Y)
    assert a.result_.status == "optimal"
    # every iterate's objective recomputed by enumerating all labellings: what was reported, and decreasing
    f = np.array([_brute(a, th) for th, _ in iterates])
    assert np.allclose(f, [J for _, J in iterates], rtol=1e-12, atol=0)
    f = np.concatenate([[_brute(a, np.zeros(a.d_))], f])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    assert abs(a.objective() - b.objective()) <= 1e-9 * abs(b.objective())
    ref = scipy_minimize(lambda th: a.oracle(th)[:2], b.theta_, jac=True, method="L-BFGS-B",
                         options={"ftol": 1e-16, "gtol": 1e-12, "maxiter": 5000}).x
    assert np.abs(a.theta_ - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())
    st = a.result_.info["bound_reuse"]
    assert st["accepted"] > 0 and st["bounds"] >= 1
    assert st["trials"] == st["accepted"] + st["rejected"]
    assert a.predict(X) == Y


def test_all_trials_rejected_is_algorithm_2(monkeypatch):
    """With an unattainable acceptance test every iteration falls back to the bound step on a fresh Sigma:
    the iterates are those of Algorithm 2 (bound_reuse=0) and each is checked against its majorizer."""
    sm, lam = _problem(seed=2)
    n = sm.A.shape[1]
    ref = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-12, max_iter=15)
    monkeypatch.setattr(reuse, "ETA", 1e30)
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-12, max_iter=15, bound_reuse=4)
    st = res.info["bound_reuse"]
    assert st["accepted"] == 0 and st["rejected"] == st["trials"] == res.iterations
    assert st["backtracks"] == reuse.BACKTRACK * st["trials"]
    assert st["bounds"] == res.iterations  # a fresh Sigma at every iterate
    fa = np.array([h["objective"] for h in ref.history])
    fb = np.array([h["objective"] for h in res.history])
    assert len(fa) == len(fb) and np.allclose(fa, fb, rtol=1e-12, atol=0)
    assert np.allclose(res.x, ref.x, rtol=0, atol=1e-12 * max(1.0, np.abs(ref.x).max()))


def test_some_trials_rejected_still_monotone_and_optimal(monkeypatch):
    """A demanding acceptance test (but not an impossible one): rejections and accepted trials mix."""
    sm, lam = _problem(seed=3, t=60, d=4)
    n = sm.A.shape[1]
    monkeypatch.setattr(reuse, "ETA", 2.0)
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-13, bound_reuse=5, reuse_metric="scalar")
    st = res.info["bound_reuse"]
    assert st["rejected"] > 0 and st["accepted"] > 0
    ref = scipy_minimize(lambda th: sm.value_grad(th, lam), np.zeros(n), jac=True, method="L-BFGS-B",
                         options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 5000})
    assert res.status == "optimal" and abs(res.objective - ref.fun) <= 1e-9 * abs(ref.fun)
    f = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    assert np.isclose(res.objective, sm.value_grad(res.x, lam)[0], rtol=1e-12)


@pytest.mark.parametrize("metric", ["bound", "scalar"])
def test_user_oracle_with_reuse_matches_program_path(metric):
    sm, lam = _problem()
    n = sm.A.shape[1]
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-13, bound_reuse=3, reuse_metric=metric)
    prog = get_solver("majorize").solve(_program(sm, lam), tol=1e-13)
    assert res.status == "optimal"
    assert abs(res.objective - prog.objective) <= 1e-9 * abs(prog.objective)
    assert np.abs(res.x - prog.x).max() <= 1e-6 * max(1.0, np.abs(prog.x).max())
    f = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))


def test_reuse_options_are_validated():
    sm, lam = _problem()
    n = sm.A.shape[1]
    with pytest.raises(InvalidOptionError, match="bound_reuse"):
        minimize(sm, np.zeros(n), quadratic=lam, bound_reuse=-1)
    with pytest.raises(InvalidOptionError, match="bound_reuse"):
        minimize(sm, np.zeros(n), quadratic=lam, bound_reuse=1.5)
    with pytest.raises(InvalidOptionError, match="reuse_metric"):
        minimize(sm, np.zeros(n), quadratic=lam, bound_reuse=2, reuse_metric="newton")
    with pytest.raises(InvalidOptionError, match="reuse_metric.*bound_reuse"):
        minimize(sm, np.zeros(n), quadratic=lam, reuse_metric="scalar")
    with pytest.raises(InvalidOptionError, match="lowrank"):
        minimize(sm, np.zeros(n), quadratic=lam, bound_reuse=2, bound="lowrank")
    with pytest.raises(InvalidOptionError, match="bound oracles"):
        get_solver("majorize").solve(_program(sm, lam), bound_reuse=2)
    with pytest.raises(InvalidOptionError, match="bound_reuse"):
        ChainCRF(lam=0.5, bound_reuse=-3).fit(X, Y)
    with pytest.raises(InvalidOptionError, match="reuse_metric"):
        ChainCRF(lam=0.5, reuse_metric="diag").fit(X, Y)


def test_bad_problems_reported_as_without_reuse():
    """An objective affine along a flat direction of the bound is 'unbounded' at once, and one that decreases
    without bound while the bound never flattens ends with 'diverging iterates', with or without reuse."""
    def flat(theta, want_sigma):  # log Z = theta_0 + log(e^{theta_1} + e^{-theta_1})
        lz = theta[0] + np.logaddexp(theta[1], -theta[1])
        mu = np.array([1.0, np.tanh(theta[1])])
        return lz, mu, np.diag([0.0, 1.0]) if want_sigma else None

    A = sp.csr_matrix(np.array([[2.0], [0.0]]))

    def lse2(theta, want_sigma):  # log(1 + e^{2x}) by Algorithm 1: f = log(1 + e^{2x}) - 3x -> -inf
        bp = compute_bound(A, np.zeros(2), np.zeros(2, int), theta, want_mu=True)
        return float(bp.logz.sum()), bp.mu.sum(0), bp.sigma() if want_sigma else None
    for k in (0, 3):
        for metric in (["bound", "scalar"] if k else [None]):
            kw = dict(bound_reuse=k, **({"reuse_metric": metric} if metric else {}))
            res = minimize(flat, np.zeros(2), quadratic=[0.0, 1.0], linear=[0.0, 0.3], **kw)
            assert res.status == "unbounded" and res.iterations == 1 and res.objective == -np.inf
            res = minimize(lse2, np.zeros(1), linear=[-3.0], max_iter=100000, **kw)
            assert res.status == "error" and "diverging iterates" in res.message and res.objective < -1e19
