"""Sparse Ising learning on proxsg: exact oracle vs independent enumeration, Gibbs moment estimates
converging with samples, the estimator against an independent optimum, bad data."""
import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from varopt.errors import InputDataError, InvalidOptionError
from varopt.formulations.sparse_ising import check_spins, moments
from varopt.estimators.sparse_ising import SparseIsing
from varopt.oracles.ising import IsingExactOracle, IsingGibbsOracle


def _model(n, seed):
    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(n, 1)
    J = np.where(rng.random(a.size) < 0.5, rng.uniform(-1, 1, a.size), 0.0)
    return np.r_[rng.uniform(-0.3, 0.3, n), J]


def _brute(n, theta):
    X = np.array(list(itertools.product([-1.0, 1.0], repeat=n)))
    a, b = np.triu_indices(n, 1)
    P = np.hstack([X, X[:, a] * X[:, b]])
    lw = P @ theta
    M = lw.max()
    w = np.exp(lw - M)
    return X, P, M + np.log(w.sum()), (w / w.sum()) @ P


def _data(n, theta, T, seed):
    X, _, logZ, _ = _brute(n, theta)
    a, b = np.triu_indices(n, 1)
    p = np.exp(np.hstack([X, X[:, a] * X[:, b]]) @ theta - logZ)
    return X[np.random.default_rng(seed).choice(len(X), size=T, p=p / p.sum())]


def test_exact_oracle_matches_enumeration_and_finite_differences():
    n = 7
    theta = _model(n, 0)
    o = IsingExactOracle(n)
    _, _, logZ, E = _brute(n, theta)
    assert abs(o.log_partition(theta) - logZ) < 1e-12
    np.testing.assert_allclose(o.estimate(theta), E, atol=1e-13)
    e = np.eye(theta.size)
    fd = [(o.log_partition(theta + 1e-6 * e[k]) - o.log_partition(theta - 1e-6 * e[k])) / 2e-6 for k in range(5)]
    np.testing.assert_allclose(fd, E[:5], atol=1e-7)


def test_gibbs_moments_converge_to_enumeration():
    n = 6
    theta = 0.6 * _model(n, 1)
    E = _brute(n, theta)[3]
    errs = []
    for S, sweeps in ((50, 1), (20000, 30)):
        g = IsingGibbsOracle(n, n_chains=S, n_sweeps=sweeps)
        errs.append(np.abs(g.estimate(theta, 123) - E))
    # independent chains: each coordinate has standard deviation <= 1/sqrt(S); 5 sigma plus a small
    # allowance for the bias left after 30 sweeps from the mean-field start
    assert errs[1].max() <= 5.0 / np.sqrt(20000) + 0.01
    assert errs[1].mean() < errs[0].mean()


def _reference_optimum(S, rho):
    n = S.shape[1]
    a, b = np.triu_indices(n, 1)
    mu, s = moments(S)
    m = np.r_[mu, s]
    _, P, _, _ = _brute(n, np.zeros(n + a.size))
    p = a.size

    def f(z):
        th = np.r_[z[:n], z[n:n + p] - z[n + p:]]
        lw = P @ th
        M = lw.max()
        w = np.exp(lw - M)
        g = (w / w.sum()) @ P - m
        return M + np.log(w.sum()) - th @ m + rho * z[n:].sum(), np.r_[g[:n], g[n:] + rho, -g[n:] + rho]

    r = minimize(f, np.zeros(n + 2 * p), jac=True, method="L-BFGS-B",
                 bounds=[(None, None)] * n + [(0, None)] * (2 * p),
                 options=dict(ftol=1e-15, gtol=1e-11, maxiter=20000, maxcor=30))
    return r.fun


@pytest.mark.parametrize("variant", ["PB", "PA", "PN", "FB", "FR", "FL"])
def test_estimator_exact_oracle_every_method(variant):
    n = 5
    S = _data(n, _model(n, 2), 60, 3)
    ref = _reference_optimum(S, 1 / 16)
    opts = {"r": 0.0, "average": "suffix", "step": 0.25} if variant in ("FB", "FR", "FL") else {}
    est = SparseIsing(rho=1 / 16, variant=variant, max_iter=3000,
                      solver_options=dict(opts, history_every=500)).fit(S)
    assert abs(est.result_.objective - ref) <= 1e-6
    W = est.coef_
    assert np.allclose(W, W.T) and np.all(np.diag(W) == 0)
    pen = (1 / 16) * np.abs(W).sum()
    assert abs(est.score(S) - (-(est.result_.objective - pen))) < 1e-9


def test_estimator_gibbs_oracle_gets_close():
    n = 6
    S = _data(n, _model(n, 4), 50, 5)
    ref = _reference_optimum(S, 1 / 16)
    est = SparseIsing(rho=1 / 16, gradient="gibbs", variant="FB", schedule="log", samples=20,
                      max_iter=300, seed=0).fit(S)
    gap = est.result_.objective - ref
    assert 0 <= gap <= 0.03
    hist = [h["objective"] for h in est.result_.history if h.get("objective") is not None]
    assert hist[-1] < hist[0]
    again = SparseIsing(rho=1 / 16, gradient="gibbs", variant="FB", schedule="log", samples=20,
                        max_iter=300, seed=0).fit(S)
    assert np.array_equal(again.theta_, est.theta_)


def test_bad_data():
    with pytest.raises(InputDataError, match=r"X\[0, 1\] = 2"):
        check_spins([[1, 2], [0, 1]])
    with pytest.raises(InputDataError, match="NaN"):
        check_spins([[1, np.nan], [-1, 1]])
    with pytest.raises(InputDataError, match="empty"):
        check_spins(np.zeros((0, 3)))
    with pytest.raises(InputDataError, match="all -1/\\+1 or all 0/1"):
        check_spins([[1, 0], [-1, 1]])
    with pytest.raises(InputDataError, match="column 1 is constant"):
        SparseIsing().fit([[1, 1, -1], [-1, 1, 1], [1, 1, 1]])
    # 0/1 data is read as spins; a penalised bias accepts a constant column
    est = SparseIsing(penalize_bias=True, max_iter=2000).fit([[1, 1, 0], [0, 1, 1], [1, 1, 1]])
    assert np.isfinite(est.intercept_).all()


@pytest.mark.parametrize("n", [1, 2, 6])
def test_chunked_enumeration_equals_plain_enumeration(n):
    """log Z, E phi and Cov phi by the spin-flip-paired, chunked enumeration (every chunk size, cached
    or not) against plain enumeration of all 2^n states; the Hessian against finite differences."""
    theta = 0.8 * _model(n, 7)
    _, P, logZ, E = _brute(n, theta)
    p = np.exp(P @ theta - logZ)
    H = (P * p[:, None]).T @ P - np.outer(E, E)
    for kw in ({}, {"chunk_rows": 1, "cache_bytes": 0}, {"chunk_rows": 3, "cache_bytes": 0},
               {"chunk_rows": 1 << 20, "cache_bytes": 0}):
        o = IsingExactOracle(n, **kw)
        assert abs(o.log_partition(theta) - logZ) <= 1e-12
        np.testing.assert_allclose(o.estimate(theta), E, atol=1e-13)
        np.testing.assert_allclose(o.hessian(theta), H, atol=1e-13)
    o = IsingExactOracle(n)
    eps = 1e-6
    for k in range(theta.size):
        d = np.zeros(theta.size)
        d[k] = eps
        fd = (o.estimate(theta + d) - o.estimate(theta - d)) / (2 * eps)
        np.testing.assert_allclose(fd, o.hessian(theta)[k], rtol=0, atol=2e-9)  # measured 1.8e-10
    with pytest.raises(ValueError, match="chunk_rows"):
        IsingExactOracle(n, chunk_rows=0)


def test_exact_pn_certificate_and_agreement():
    """Exact mode: PN (the default) reaches the independent L-BFGS-B optimum, reports a tiny least-norm
    subgradient and gap estimate, and agrees with PA to 1e-9."""
    n = 6
    S = _data(n, _model(n, 8), 50, 9)
    ref = _reference_optimum(S, 1 / 16)
    pn = SparseIsing(rho=1 / 16).fit(S)
    assert pn.result_.info["method"] == "PN" and pn.result_.status == "converged"
    assert abs(pn.result_.objective - ref) <= 1e-11  # measured 4.4e-16
    assert pn.result_.info["subgradient_inf"] <= 1e-12 and pn.result_.info["gap_estimate"] <= 1e-12
    pa = SparseIsing(rho=1 / 16, variant="PA", solver_options=dict(restart=True)).fit(S)
    assert abs(pa.result_.objective - pn.result_.objective) <= 1e-12
    assert pa.result_.objective >= pn.result_.objective - 1e-12


def test_certificate_hessian_only_where_it_is_cheap_or_formed_anyway(monkeypatch):
    """The gap estimate needs the dense Hessian: PN forms it (and reports the estimate); PA on the enumerated
    Ising oracle does not form it (it would cost hundreds of gradients) and reports None."""
    from varopt.oracles.ising import IsingExactOracle
    n = 5
    S = _data(n, _model(n, 3), 40, 2)
    calls = []
    orig = IsingExactOracle.hessian
    monkeypatch.setattr(IsingExactOracle, "hessian", lambda self, *a, **k: calls.append(1) or orig(self, *a, **k))
    pa = SparseIsing(rho=1 / 16, variant="PA").fit(S)
    assert calls == [] and pa.result_.info["gap_estimate"] is None
    assert pa.result_.info["subgradient_inf"] < 1e-6
    pn = SparseIsing(rho=1 / 16, variant="PN").fit(S)
    assert calls and pn.result_.info["gap_estimate"] is not None


def test_sparse_01_data_are_read_as_dense_spins():
    """0/1 data stored as a scipy sparse matrix (zeros = -1 spins) give the fit of the dense array
    (they raised 'must be a numeric array')."""
    import scipy.sparse as sps
    rng = np.random.default_rng(0)
    X = (rng.random((80, 4)) < 0.4).astype(float)
    X[:, 1] = np.where(rng.random(80) < 0.8, X[:, 0], 1 - X[:, 0])
    assert np.array_equal(check_spins(sps.csr_matrix(X)), check_spins(X))
    dense = SparseIsing(rho=0.05).fit(X)
    sparse = SparseIsing(rho=0.05).fit(sps.csr_matrix(X))
    assert np.array_equal(dense.theta_, sparse.theta_)


def test_estimator_zero_samples_and_zero_max_iter_are_refused_not_replaced():
    """``SparseIsing(samples=0)`` ran 100 chains and ``max_iter=0`` the default 1000 iterations (``x or default``
    replaced the user's zero without a word); both now reach the validation that names them."""
    S = np.random.default_rng(3).choice([-1, 1], size=(40, 4))
    with pytest.raises(ValueError, match="number of chains must be an integer >= 1 \\(got 0\\)"):
        SparseIsing(gradient="gibbs", samples=0, max_iter=5).fit(S)
    with pytest.raises(InvalidOptionError, match="option 'max_iter': must be positive"):
        SparseIsing(gradient="gibbs", max_iter=0).fit(S)
    assert SparseIsing(gradient="gibbs", samples=7, max_iter=3).fit(S).n_iter_ == 3
