"""Logistic rows with labels evaluated without cancellation (docs/klprox.md, section 2: ``softplus(u) - y u``).

With a wide prior on separable data (Colon, N < D) the predictor means reach 1e4; ``E[softplus(u)] - m`` then loses
every digit below ``eps * m`` and the ELBO's rounding level grows with them. The view evaluates a row
``softplus(u) - t u`` as ``(1 - t) softplus(u) + t softplus(-u)``; checked here against adaptive quadrature.
"""
import math

import numpy as np
from scipy import integrate

import varopt  # noqa: F401
from varopt.formulations.bayes_glm import glm_program
from varopt.registry import get_solver
from varopt.solvers.klprox import family_table, likelihood_view


def _expect(f, m, v):
    s = math.sqrt(v)
    val = integrate.quad(lambda t: f(m + s * t) * math.exp(-0.5 * t * t), -40, 40, epsabs=0, epsrel=1e-12,
                         limit=400, points=[-m / s] if abs(m / s) < 40 else None)[0]
    return val / math.sqrt(2 * math.pi)


def _data(n=12, d=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X @ rng.standard_normal(d) > 0).astype(float)
    return X, y


def _reference(view, y, mt, vt, t):
    """Per-row ``E[softplus(u) - t u]`` as the expectation of ``(1 - t) softplus(u) + t softplus(-u)``
    (``t`` = label), and its derivative in the mean by quadrature of the sigmoid."""
    E = np.array([_expect(lambda u, tt=tt: (1 - tt) * np.logaddexp(0, u) + tt * np.logaddexp(0, -u), m, v)
                  for m, v, tt in zip(mt, vt, t)])
    sig = lambda u: 1 / (1 + math.exp(-u)) if u > -700 else 0.0
    nsig = lambda u: 1 / (1 + math.exp(u)) if u < 700 else 0.0
    dE = np.array([(1 - tt) * _expect(sig, m, v) - tt * _expect(nsig, m, v) for m, v, tt in zip(mt, vt, t)])
    return E, dE


def test_confident_rows_keep_their_digits():
    X, y = _data()
    view = likelihood_view(glm_program(X, y, "logistic", prior_var=1.0), family_table())
    t = -view.lin / view.coef
    assert set(np.round(t, 12)) == {0.0, 1.0}           # rows are softplus(u) - y u
    sign = np.where(t > 0.5, 1.0, -1.0)                   # predictor on the side of the label: confident rows
    for m0, v0, tol in ((40.0, 0.01, 1e-8), (3e4, 1e7, None)):
        mt, vt = sign * m0, np.full(view.N, v0)
        lik, _, alpha, _ = view.terms(family_table(), mt, vt)
        E, dE = _reference(view, y, mt, vt, t)
        if tol:    # narrow: every row ~ e^-40, to relative accuracy (the subtraction left 1e-15 absolute noise)
            assert abs(lik - E.sum()) <= tol * E.sum()
            np.testing.assert_allclose(alpha, dE, rtol=tol)
        else:      # wide (Colon's scale): m * eps = 7e-12 of noise before, on values of ~5e-18; now the
            # values themselves, to the accuracy of the solver's Gauss-Hermite rule on a 9.5-sigma tail
            # (measured: 7.7e-6 relative on the sum, 2.1e-3 on the derivatives; the noise before was 1e9 times
            # the values)
            assert E.sum() > 0 and abs(lik - E.sum()) <= 1e-4 * E.sum()
            np.testing.assert_allclose(alpha, dE, rtol=1e-2, atol=0)


def test_fractional_targets_and_targets_outside_the_unit_interval():
    # t in (0, 1) mixes both parts; t outside [0, 1] keeps softplus(u) - t u
    X, _ = _data(n=4, d=3)
    yv = np.array([0.25, 0.75, 0.0, 1.0])
    view = likelihood_view(glm_program(X, (yv > 0.5).astype(float), "logistic", prior_var=1.0), family_table())
    view.lin = -np.array([0.25, 0.75, -0.5, 1.5]) * view.coef
    t = -view.lin / view.coef
    mt, vt = np.array([2.0, -1.0, 0.5, 3.0]), np.array([0.3, 4.0, 1.0, 10.0])
    lik, _, alpha, gamma = view.terms(family_table(), mt, vt)
    E = [_expect(lambda u, tt=tt: np.logaddexp(0, u) - tt * u, m, v) for m, v, tt in zip(mt, vt, t)]
    dE = [_expect(lambda u: 1 / (1 + math.exp(-u)), m, v) - tt for m, v, tt in zip(mt, vt, t)]
    assert abs(lik - sum(E)) <= 1e-10
    np.testing.assert_allclose(alpha, dE, atol=1e-10)
    g = [_expect(lambda u: 0.25 / math.cosh(u / 2) ** 2, m, v) for m, v in zip(mt, vt)]
    np.testing.assert_allclose(gamma, g, atol=1e-10)


def test_wide_prior_on_separable_data_keeps_the_elbo_exact():
    # N < D (dual update), separable, prior variance 1e5: predictor means of order 1e3-1e4
    X, y = _data(n=12, d=30)
    r = get_solver("klprox").solve(glm_program(X, y, "logistic", prior_var=1e5))
    assert r.status == "converged"
    assert np.max(np.abs(r.info["predictor_mean"])) > 1e3
    # the rounding level of -ELBO no longer grows with the predictor means (2.4e-10 with -y u kept apart, 2.3e-13 now)
    assert r.info["rounding"] < 1e-12 * max(1.0, abs(r.objective))


def test_dual_step_leaves_a_fixed_point_in_place():
    # (16) in the dual form: z+ = z - (1 - r)(I + rG St)^-1 (z + alpha). At z = -alpha the step is exactly 0; written
    # as (I + rG St)^-1 [r(I + G St) z - (1 - r) alpha] it was a difference of vectors of size |G St z| (1e5 |z| here)
    from varopt.solvers.klprox.posterior import DualGaussian, FullGaussian
    X, y = _data(n=12, d=30)
    view = likelihood_view(glm_program(X, y, "logistic", prior_var=1e8), family_table())
    post = DualGaussian(view)
    rng = np.random.default_rng(3)
    z, gt = 1e-3 * rng.standard_normal(view.N), np.full(view.N, 1e-6)
    st = post._state(z, gt)
    for r in (0.5, 0.999):
        new = post.step(st, -z, gt, r)
        assert np.array_equal(new.z, z)
        np.testing.assert_allclose(new.gt, gt, rtol=1e-15, atol=0)
    # away from the fixed point the step is (16): the same mean as the full form's step, on a narrower prior
    view = likelihood_view(glm_program(X, y, "logistic", prior_var=10.0), family_table())
    dual, full = DualGaussian(view), FullGaussian(view)
    gt = rng.uniform(0.05, 0.25, view.N)
    alpha, gamma = rng.uniform(-0.5, 0.5, view.N), rng.uniform(0.05, 0.25, view.N)
    sd = dual._state(1e-1 * rng.standard_normal(view.N), gt)
    sf = full._state(dual.mean(sd), gt)
    for r in (0.5, 0.9):
        np.testing.assert_allclose(dual.mean(dual.step(sd, alpha, gamma, r)), full.step(sf, alpha, gamma, r).m,
                                   rtol=1e-9, atol=1e-11)
