"""klprox on squared hinges: the closed-form Gaussian expectation of ``max(u, 0)^2`` (expectations.SqPosFamily)
against 80-digit arithmetic, adaptive quadrature and finite differences, and Bayesian probit regression written with
CVXPY's ``log_normcdf`` (seven squared hinges per data point) against an independent ELBO: the reported -ELBO, the
Cholesky-VI baseline, stationarity by finite differences, monotone steps."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

cp = pytest.importorskip("cvxpy")
mp = pytest.importorskip("mpmath")

import varopt
from varopt.baselines.klprox import cholesky_vi
from varopt.frontends.cvxpy_compile import compile_cvxpy
from varopt.solvers.klprox.expectations import SqPosFamily, family_table
from varopt.solvers.klprox.view import likelihood_view

FAM = SqPosFamily()


def _mp_reference(m, v):
    """``(E, dE/dm, dE/dv)`` of ``max(u, 0)^2``, ``u ~ N(m, v)``, in 80-digit arithmetic (no cancellation left)."""
    with mp.workdps(80):
        m, v = mp.mpf(m), mp.mpf(v)
        s = mp.sqrt(v)
        z = m / s
        cdf, pdf = mp.ncdf(z), mp.npdf(z)
        return [float(x) for x in ((m * m + v) * cdf + m * s * pdf, 2 * (m * cdf + s * pdf), cdf)]


def _check_against_mp(m, v):
    got = [float(x[0]) for x in FAM.expect(np.array([m]), np.array([v]))]
    want = _mp_reference(m, v)
    z = m / math.sqrt(v)
    # the conditioning of Phi(z), phi(z) in z is z^2: a rounding of z itself (1e-16 relative) moves them by
    # 1e-16 z^2 relative; beyond that the evaluation must be exact to a few ulps
    tol = 4e-15 * (1.0 + z * z)
    for g, w in zip(got, want):
        assert np.isfinite(g)
        assert abs(g - w) <= tol * abs(w) + 1e-300, (m, v, got, want)


@pytest.mark.parametrize("m", [-1e3, -50.0, -10.0, -3.0, -1.0, -0.1, 0.0, 0.1, 1.0, 3.0, 10.0, 50.0, 1e3])
@pytest.mark.parametrize("v", [1e-8, 1e-3, 0.1, 1.0, 10.0, 1e4])
def test_expectation_against_80_digit_arithmetic(m, v):
    if abs(m) / math.sqrt(v) > 37:   # phi(z) below 1e-300: the value underflows (checked below)
        return
    _check_against_mp(m, v)


@settings(max_examples=300, deadline=None)
@given(st.floats(-40, 40), st.floats(-8, 4))
def test_expectation_property_wide_range(z, logv):
    """Over |z| <= 40 and v in [1e-8, 1e4] (hypothesis): finite, and equal to the 80-digit value (in the far
    left tail a naive (m^2 + v) Phi + m s phi loses every digit to cancellation)."""
    v = 10.0 ** logv
    m = z * math.sqrt(v)
    if abs(z) > 37:
        E, d1, d2 = FAM.expect(np.array([m]), np.array([v]))
        assert np.all(np.isfinite([E, d1, d2])) and E[0] >= 0 and d1[0] >= 0 and 0 <= d2[0] <= 1
        return
    _check_against_mp(m, v)


def test_extreme_arguments_give_no_nan():
    m = np.array([-1e300, -1e30, -1e8, 0.0, 1e8, 1e30, 1e150, -5.0, 5.0, 0.0])
    v = np.array([1e-300, 1.0, 1e-8, 1e300, 1e-8, 1.0, 1.0, 0.0, 0.0, 0.0])
    E, d1, d2 = FAM.expect(m, v)
    assert np.all(np.isfinite(E[:6])) and np.all(np.isfinite(d1)) and np.all(np.isfinite(d2))
    assert np.all(E >= 0) and np.all(d1 >= 0) and np.all((d2 >= 0) & (d2 <= 1))
    # v = 0: the point values
    np.testing.assert_array_equal(E[7:], [0.0, 25.0, 0.0])
    np.testing.assert_array_equal(d1[7:], [0.0, 10.0, 0.0])
    np.testing.assert_array_equal(d2[7:], [0.0, 1.0, 0.0])


@pytest.mark.parametrize("m,v", [(-2.5, 0.3), (-0.4, 2.0), (0.0, 1.0), (0.7, 0.05), (3.0, 9.0), (-6.0, 4.0)])
def test_expectation_against_adaptive_quadrature_and_finite_differences(m, v):
    """The closed form against scipy's adaptive quadrature of the definition, and its derivatives against central
    differences of the value (the derivation of docs/klprox.md §2, checked independently)."""
    s = math.sqrt(v)
    dens = lambda u: math.exp(-0.5 * ((u - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    ref, _ = integrate.quad(lambda u: u * u * dens(u), 0.0, np.inf, epsabs=0, epsrel=1e-13, limit=200)
    E, d1, d2 = (float(x[0]) for x in FAM.expect(np.array([m]), np.array([v])))
    assert abs(E - ref) <= 1e-11 * max(ref, 1e-300) + 1e-300
    h = 1e-5
    f = lambda mm, vv: float(FAM.expect(np.array([mm]), np.array([vv]))[0][0])
    assert abs((f(m + h, v) - f(m - h, v)) / (2 * h) - d1) <= 1e-7 * max(1.0, abs(d1))
    hv = 1e-5 * v
    assert abs((f(m, v + hv) - f(m, v - hv)) / (2 * hv) - d2) <= 1e-7 * max(1.0, abs(d2))


# --- Bayesian probit regression with cp.log_normcdf -------------------------------------------------------------
#: CVXPY's log_normcdf(x) = -sum_k A_k max(B_k - x, 0)^2 (cvxpy/atoms/log_normcdf.py), written out here so the
#: ELBO below does not go through varopt's compiler; checked against CVXPY's value in _data
A2 = np.array([0.02301291, 0.08070214, 0.16411522, 0.09003495, 0.08200854, 0.01371543, 0.04641081])
BK = np.array([3.0, 2.0, 1.0, 0.0, -1.0, -2.5, -3.5])


def _data(N, D, scale, seed):
    rng = np.random.default_rng(seed)
    X = scale * rng.standard_normal((N, D))
    y = np.sign(X @ rng.standard_normal(D) + 0.5 * rng.standard_normal(N))
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(-cp.sum(cp.log_normcdf(cp.multiply(y, X @ w))) + 0.5 * cp.sum_squares(w)))
    w.value = rng.standard_normal(D)
    eta = y * (X @ w.value)
    mine = float(np.sum(A2 * np.maximum(BK[None, :] - eta[:, None], 0.0) ** 2)) + 0.5 * w.value @ w.value
    assert abs(mine - prob.objective.value) <= 1e-6 * abs(mine)   # CVXPY's constants are rounded to 8 digits
    return X, y, w, prob


def _gl_panels(lo, hi, knots, panels=20, nodes=10):
    """Gauss-Legendre nodes and weights on [lo, hi]: ``panels`` equal panels (200 nodes) further split at the kinks."""
    edges = np.union1d(np.linspace(lo, hi, panels + 1), knots[(knots > lo) & (knots < hi)])
    x, w = np.polynomial.legendre.leggauss(nodes)
    a, b = edges[:-1, None], edges[1:, None]
    return ((a + b) / 2 + (b - a) / 2 * x).ravel(), ((b - a) / 2 * w).ravel()


def _neg_elbo(X, y, m, V, scale_a=None):
    """-ELBO = E_q[F] - H[q], q = N(m, V), F(w) = sum_n sum_k A_k max(B_k - y_n x_n^T w, 0)^2 + |w|^2 / 2: each data
    term by piecewise Gauss-Legendre over its predictor's +-14 sd (the integrand is a quadratic times a Gaussian on
    each piece between the kinks B_k), the prior and the entropy in closed form."""
    D = m.size
    mu = y * (X @ m)
    sd = np.sqrt(np.einsum("nd,de,ne->n", X, V, X))
    lik = 0.0
    for mu_n, sd_n in zip(mu, sd):
        t, wt = _gl_panels(mu_n - 14 * sd_n, mu_n + 14 * sd_n, BK)
        dens = np.exp(-0.5 * ((t - mu_n) / sd_n) ** 2) / (sd_n * math.sqrt(2 * math.pi))
        lik += float(np.sum(wt * dens * np.sum(A2[None, :] * np.maximum(BK[None, :] - t[:, None], 0.0) ** 2,
                                               axis=1)))
    prior = 0.5 * (m @ m + np.trace(V))
    entropy = 0.5 * D * (1 + math.log(2 * math.pi)) + 0.5 * np.linalg.slogdet(V)[1]
    return lik + prior - entropy


CASES = [(40, 3, 1.0, 0), (120, 5, 3.0, 1)]   # the second with large margins: predictors far in the tails


@pytest.mark.parametrize("N,D,scale,seed", CASES)
def test_probit_posterior_neg_elbo_and_baseline(N, D, scale, seed):
    X, y, _, prob = _data(N, D, scale, seed)
    seen = []
    prob.solve(method="klprox", callback=lambda it, m, f: seen.append(f) and None)
    r = prob.varopt_result
    assert r.status == "converged", r.message
    m, V = np.asarray(r.x), np.asarray(r.info["covariance"])
    # the reported -ELBO equals the independent re-evaluation
    ref = _neg_elbo(X, y, m, V)
    assert abs(r.info["neg_elbo"] - ref) <= 1e-9 * max(1.0, abs(ref)), (r.info["neg_elbo"], ref)
    # the default (adaptive) step rule never increases the -ELBO
    assert len(seen) > 2 and np.all(np.diff(seen) <= 1e-12 * max(1.0, abs(seen[0])))
    # the Cholesky-VI baseline (L-BFGS over (m, C)) reaches the same fixed point
    prog, _ = compile_cvxpy(prob, native_atoms={"sqpos"})
    b = cholesky_vi(likelihood_view(prog, family_table(100)))
    assert np.abs(b["m"] - m).max() <= 1e-6 and np.abs(b["V"] - V).max() <= 1e-6
    assert abs(b["neg_elbo"] - r.info["neg_elbo"]) <= 1e-9 * max(1.0, abs(ref))


def test_probit_posterior_is_stationary_for_the_independent_elbo():
    """The baseline shares the expectation code; stationarity is therefore also checked on the independent ELBO:
    its central differences in m and in the Cholesky factor of V vanish at klprox's answer."""
    X, y, _, prob = _data(40, 3, 1.0, 0)
    prob.solve(method="klprox")
    m, V = np.asarray(prob.varopt_result.x), np.asarray(prob.varopt_result.info["covariance"])
    L = np.linalg.cholesky(V)
    il = np.tril_indices(m.size)
    theta = np.concatenate([m, L[il]])

    def f(th):
        Lt = np.zeros_like(L)
        Lt[il] = th[m.size:]
        return _neg_elbo(X, y, th[:m.size], Lt @ Lt.T)

    h = 1e-5
    grad = np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in np.eye(theta.size)])
    assert np.abs(grad).max() <= 1e-6, grad
    # and the check can fail: a moved mean is not stationary
    moved = theta.copy()
    moved[0] += 0.05
    assert abs(f(moved + h * np.eye(theta.size)[0]) - f(moved - h * np.eye(theta.size)[0])) / (2 * h) > 1e-3


def test_log_normcdf_is_no_longer_refused_and_the_hint_changed():
    from varopt.solvers.klprox.solver import LIKELIHOOD_HINT
    assert "log_normcdf" in LIKELIHOOD_HINT and "squared hinge" in LIKELIHOOD_HINT
    # a square of a shifted hinge is still an epigraph: refused with the hint
    x = cp.Variable(2)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.square(cp.pos(x) + 1)) + cp.sum_squares(x)))
    with pytest.raises(varopt.errors.ModelStructureError, match="klprox reads each term"):
        prob.solve(method="klprox")


def test_probit_stochastic_steps_sample_data_points():
    """batch_size=10 of 40 data points (labels: data entries, each with its seven pieces): a stochastic run whose
    tail-averaged -ELBO is within 1e-5 of the deterministic one (8.5e-7 measured), and not equal to it (a batch of all
    rows would be: the pieces were once the labels, seven of them, all inside any batch of 10)."""
    _, _, _, prob = _data(40, 3, 1.0, 0)
    prob.solve(method="klprox")
    full = prob.varopt_result.info["neg_elbo"]
    prob.solve(method="klprox", batch_size=10, max_iter=3000, seed=0, warm_start=False)
    got = prob.varopt_result.info["neg_elbo"]
    assert 1e-12 < got - full <= 1e-5
