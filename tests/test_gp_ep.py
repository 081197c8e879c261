"""Expectation propagation baseline (varopt.baselines.gp_ep / ep_tilted): tilted moments against
numerical quadrature, exactness on the Gaussian likelihood, probit EP against brute-force integration."""
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import expit, roots_hermitenorm
from scipy.stats import norm

from varopt.errors import InputDataError
from varopt.formulations.bayes_glm import se_kernel
from varopt.baselines.ep_tilted import tilted_moments, trunc_factors
from varopt.baselines.gp_ep import ep_log_predictive, ep_predict, gp_ep, gp_ep_fallback

# the reference quadratures warn about rounding at their 1e-13 target; the comparisons are at 1e-9
pytestmark = pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")


def _lik(name, y, f, s):
    if name == "probit":
        return norm.cdf(y * f)
    if name == "logistic":
        return float(expit(y * f))
    if name == "laplace":
        b = s / math.sqrt(2)
        return math.exp(-abs(y - f) / b) / (2 * b)
    return norm.pdf(y, f, s)


def _quad_moments(name, y, mu, v, s):
    """log Z, mean, variance of p(y|f) N(f|mu, v) by adaptive quadrature, split at the kinks / steps."""
    sd = math.sqrt(v)
    lo, hi = mu - 40 * sd, mu + 40 * sd
    extra = {"laplace": [y], "logistic": [-40.0, -10.0, 0.0, 10.0, 40.0], "probit": [0.0],
             "gaussian": [y - 10 * s, y, y + 10 * s]}[name]
    br = sorted([lo, hi] + [p for p in extra if lo < p < hi])

    def I(k):
        return sum(quad(lambda f: _lik(name, y, f, s) * norm.pdf(f, mu, sd) * (f - mu) ** k,
                        br[i], br[i + 1], epsabs=0, epsrel=1e-13, limit=500)[0] for i in range(len(br) - 1))
    Z = I(0)
    m1 = I(1) / Z
    return math.log(Z), mu + m1, I(2) / Z - m1 * m1


CASES = [(1, 0.3, 0.5, 0.7), (-1, 2.0, 3.0, 0.135), (1, -3.0, 0.01, 0.135), (1, 1.0, 30.0, 0.135),
         (-1, 0.5, 100.0, 1.0), (1, -4.0, 2.0, 0.3), (1, 6.0, 0.2, 0.05)]


@pytest.mark.parametrize("name", ["gaussian", "probit", "logistic", "laplace"])
def test_tilted_moments_match_quadrature(name):
    for y, mu, v, s in CASES:
        lz, m, var = (float(a[0]) for a in tilted_moments(name, y, mu, v, s))
        rz, rm, rv = _quad_moments(name, y, mu, v, s)
        assert lz == pytest.approx(rz, abs=1e-9), (y, mu, v, s)
        assert m == pytest.approx(rm, abs=1e-9 * (1 + math.sqrt(v)))
        assert var == pytest.approx(rv, rel=1e-9)


def test_logistic_tilted_moments_for_wide_cavities():
    # the logistic step (width 1) inside a cavity of sd 300: plain Gauss-Hermite would lose digits
    for y, mu, v in [(1, 0.0, 1e4), (-1, 5.0, 1e5), (1, -30.0, 2.0)]:
        lz, m, var = (float(a[0]) for a in tilted_moments("logistic", y, mu, v))
        rz, rm, rv = _quad_moments("logistic", y, mu, v, 1.0)
        assert lz == pytest.approx(rz, abs=1e-9)
        assert m == pytest.approx(rm, abs=1e-9 * math.sqrt(v))
        assert var == pytest.approx(rv, rel=1e-9)


def test_truncation_factors_continue_across_the_switch():
    # the continued fraction (a < -5) and the direct formula agree where both are accurate
    a = np.array([-5.0 - 1e-9, -5.0 + 1e-9])
    t, h = trunc_factors(a)
    assert t[0] == pytest.approx(t[1], rel=1e-8) and h[0] == pytest.approx(h[1], rel=1e-7)
    t, h = trunc_factors(np.array([-1e3]))          # t ~ 1/x, h ~ 1/x^2 without cancellation
    assert t[0] == pytest.approx(1e-3, rel=1e-5) and h[0] == pytest.approx(1e-6, rel=1e-5)


def _data(n=25, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=n)
    return X, y, se_kernel(X, X, 0.2, 0.1) + 1e-8 * np.eye(n)


@pytest.mark.parametrize("update", ["sequential", "parallel"])
def test_gaussian_likelihood_is_exact(update):
    X, y, K = _data()
    s = 0.3
    r = gp_ep(K, y, "gaussian", noise=s, update=update)
    C = K + s * s * np.eye(len(y))
    Sig = K - K @ np.linalg.solve(C, K)
    mu = K @ np.linalg.solve(C, y)
    assert r["converged"] and np.max(np.abs(r["cov"] - Sig)) < 1e-10 and np.max(np.abs(r["mean"] - mu)) < 1e-10
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    g = GaussianProcessRegressor(ConstantKernel(math.exp(0.2), "fixed") * RBF(math.exp(0.2), "fixed"),
                                 alpha=s * s + 1e-8, optimizer=None, normalize_y=False).fit(X, y)
    assert r["log_marginal"] == pytest.approx(g.log_marginal_likelihood_value_, rel=1e-9)
    Xs = np.array([[0.1, -0.2], [1.5, 0.3]])
    mt, vt = ep_predict(r, se_kernel(X, Xs, 0.2, 0.1), np.full(2, math.exp(0.2)))
    gm, gs = g.predict(Xs, return_std=True)
    np.testing.assert_allclose(mt, gm, rtol=0, atol=1e-9)
    np.testing.assert_allclose(vt, gs ** 2, rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", ["probit", "logistic", "laplace"])
def test_one_site_evidence_is_exact(name):
    # with one site EP's normaliser is the tilted normaliser of the prior: the exact evidence
    y = 1.0 if name != "laplace" else 0.7
    r = gp_ep(np.array([[2.3]]), np.array([y]), name, noise=0.4)
    assert r["log_marginal"] == pytest.approx(_quad_moments(name, y, 0.0, 2.3, 0.4)[0], abs=1e-9)
    # and the posterior is the moment-matched tilted density
    _, m, v = _quad_moments(name, y, 0.0, 2.3, 0.4)
    assert r["mean"][0] == pytest.approx(m, abs=1e-9) and r["cov"][0, 0] == pytest.approx(v, rel=1e-9)


def _dense_log_zep(likelihood, y, K, r, noise=1.0):
    """R&W eq. 3.65 term by term: log N(mu~ | 0, K + S~^-1) + sum log Z_i + sum log N(mu~_i | mu_-i,
    1/tau_-i + 1/tau~_i)^-1, with dense matrices."""
    tau, nu = r["tau"], r["nu"]
    d = np.diag(r["cov"])
    tc, nc = 1 / d - tau, r["mean"] / d - nu
    mt = nu / tau
    C = K + np.diag(1 / tau)
    lz = tilted_moments(likelihood, y, nc / tc, 1 / tc, noise)[0]
    s2 = 1 / tc + 1 / tau
    return (-0.5 * np.linalg.slogdet(2 * math.pi * C)[1] - 0.5 * mt @ np.linalg.solve(C, mt) + lz.sum()
            + np.sum(0.5 * np.log(2 * math.pi * s2) + (nc / tc - mt) ** 2 / (2 * s2)))


@pytest.mark.parametrize("name", ["probit", "logistic", "laplace"])
def test_fixed_point_moment_matching_and_evidence_formula(name):
    X, y, K = _data(12, seed=3)
    if name != "laplace":
        y = np.where(y > 0, 1.0, -1.0)
    r = gp_ep(4 * K, y, name, noise=0.5, tol=1e-12)
    assert r["converged"] and r["n_negative"] == 0
    d = np.diag(r["cov"])
    tc, nc = 1 / d - r["tau"], r["mean"] / d - r["nu"]
    for i in range(len(y)):      # posterior marginal i = moments of the tilted density at its cavity
        _, m, v = _quad_moments(name, y[i], nc[i] / tc[i], 1 / tc[i], 0.5)
        assert r["mean"][i] == pytest.approx(m, abs=1e-8) and d[i] == pytest.approx(v, rel=1e-8)
    assert r["log_marginal"] == pytest.approx(_dense_log_zep(name, y, 4 * K, r, 0.5), abs=1e-8)
    p = gp_ep(4 * K, y, name, noise=0.5, update="parallel", damping=0.7, tol=1e-12)
    assert p["log_marginal"] == pytest.approx(r["log_marginal"], abs=1e-8)


def test_probit_ep_against_brute_force_integration():
    # two training points and one test point: evidence and predictive probability by 2-D quadrature.
    # EP is an approximation here; its errors (3e-5 and 8e-4) are far below what a wrong site update gives.
    k3 = np.array([[2.0, 0.5, 1.1], [0.5, 2.0, 0.7], [1.1, 0.7, 1.3]])
    K, y = k3[:2, :2], np.array([1.0, -1.0])
    r = gp_ep(K, y, "probit")
    mt, vt = ep_predict(r, k3[:2, 2:3], k3[2:3, 2])
    p_ep = math.exp(ep_log_predictive("probit", np.array([1.0]), mt, vt)[0])
    L = np.linalg.cholesky(K)
    A = np.linalg.solve(K, k3[:2, 2])
    s2 = k3[2, 2] - k3[:2, 2] @ A

    x, w = roots_hermitenorm(160)          # 2-D tensor rule over the whitened prior (smooth integrand)
    w = w / math.sqrt(2 * math.pi)
    F = L @ np.stack(np.meshgrid(x, x, indexing="ij")).reshape(2, -1)
    W = np.outer(w, w).ravel() * norm.cdf(y[0] * F[0]) * norm.cdf(y[1] * F[1])
    Z = W.sum()
    N = (W * norm.cdf(A @ F / math.sqrt(1 + s2))).sum()
    assert r["log_marginal"] == pytest.approx(math.log(Z), abs=2e-4)
    assert p_ep == pytest.approx(N / Z, abs=2e-3)
    assert abs(p_ep - N / Z) > 1e-6          # EP is not exact for two sites: the comparison is real


def test_labels_and_options_are_checked():
    K = np.eye(3)
    with pytest.raises(InputDataError, match="labels"):
        gp_ep(K, [0, 1, 2], "probit")
    with pytest.raises(InputDataError, match="NaN"):
        gp_ep(K, [0.0, np.nan, 1.0], "laplace")
    with pytest.raises(InputDataError, match="empty"):
        gp_ep(np.zeros((0, 0)), [], "laplace")
    with pytest.raises(InputDataError, match="3 x 3"):
        gp_ep(np.eye(2), [0, 1, 1], "probit")
    with pytest.raises(ValueError, match="damping"):
        gp_ep(K, [0, 1, 1], "probit", damping=0)
    with pytest.raises(ValueError, match="likelihood"):
        gp_ep(K, [0, 1, 1], "cauchy")
    r = gp_ep(K, [0, 1, 1], "logistic", max_sweeps=1)
    assert not r["converged"] and r["sweeps"] == 1


def test_fallback_runs_parallel_first_and_agrees_with_sequential():
    X, y, K = _data(15, seed=5)
    r = gp_ep_fallback(3 * K, y, "laplace", noise=0.2, tol=1e-10)
    s = gp_ep(3 * K, y, "laplace", noise=0.2, tol=1e-10)
    assert r["converged"] and r["attempts"][0] == ("parallel", 1.0)
    assert r["log_marginal"] == pytest.approx(s["log_marginal"], abs=1e-8)
    np.testing.assert_allclose(r["mean"], s["mean"], rtol=0, atol=1e-7)
    r = gp_ep_fallback(3 * K, y, "laplace", noise=0.2, max_sweeps=1)     # nothing converges in one sweep
    assert not r["converged"] and len(r["attempts"]) == 4
