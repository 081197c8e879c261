"""The full form's state in the predictor space (``FullGaussian._woodbury_state``, docs/klprox.md section 3) against
the direct state (the Cholesky factor of ``V^-1 = P + A^T G A``) and against 40-digit arithmetic (mpmath)."""
from __future__ import annotations

import math

import mpmath
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as hs

import varopt  # noqa: F401
from varopt.formulations.bayes_glm import glm_program, gp_program
from varopt.registry import get_solver
from varopt.solvers.klprox import family_table, likelihood_view
from varopt.solvers.klprox import posterior as post_mod
from varopt.solvers.klprox.posterior import FullGaussian

from klprox_checks import logistic_neg_elbo_200

FAMS = family_table()


def _gp_view(N, d, log_ell, log_sf, seed, likelihood="logistic", jitter=1e-8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, d))
    y = (rng.uniform(size=N) < 0.5).astype(float) if likelihood == "logistic" else rng.normal(size=N)
    p = gp_program(X, y, likelihood, log_ell, log_sf, 1.0, jitter=jitter)[0]
    return likelihood_view(p, FAMS)


def _reference(view, gt):
    """``(vt, tr(P V), log det V)`` of ``V = (P + A^T G A)^-1`` in 40-digit arithmetic."""
    with mpmath.workdps(40):
        A = mpmath.matrix(view.A.toarray().tolist())
        P = mpmath.matrix(view.P.tolist())
        Lam = P + A.T * mpmath.diag([mpmath.mpf(float(g)) for g in gt]) * A
        V = mpmath.inverse(Lam)
        W = A * V * A.T
        PV = P * V
        return (np.array([float(W[n, n]) for n in range(view.N)]), float(sum(PV[j, j] for j in range(view.D))),
                float(-mpmath.log(mpmath.det(Lam))))


def _reference_vt(view, gt):
    return _reference(view, gt)[0]


def _check_against_direct(view, gt, rng):
    wood, direct = FullGaussian(view, woodbury=True), FullGaussian(view)
    assert wood.woodbury and not direct.woodbury
    m = rng.normal(size=view.D)
    sw, sd = wood._woodbury_state(m, gt), direct._state(m, gt)
    if sw is None:    # the bound of the rounding error sent the whole state to the direct form: it is that state
        assert np.array_equal(wood._state(m, gt).vt, sd.vt)
        return
    ref, trPV, logdetV = _reference(view, gt)
    np.testing.assert_allclose(sw.vt, ref, rtol=1e-12, atol=0)
    # equal to the direct state's vt to 1e-12 where that is itself exact to 1e-13 (with ||B|| ~ 1e6 its rounding,
    # ~eps cond(L), reaches 4e-12: the Woodbury state is then the more accurate one)
    ok = np.abs(sd.vt - ref) <= 1e-13 * ref
    np.testing.assert_allclose(sw.vt[ok], sd.vt[ok], rtol=1e-12, atol=0)
    gw, gd = wood.gauss_part(sw), direct.gauss_part(sd)
    gref = 0.5 * m @ view.P @ m + view.c @ m + view.k + 0.5 * trPV - 0.5 * (logdetV + view.D * (1 + math.log(2 * math.pi)))
    assert abs(gw - gref) <= 1e-12 * max(wood.magnitude, 1.0)
    assert abs(gw - gd) <= 1e-12 * max(wood.magnitude, 1.0) + abs(gd - gref)
    alpha, gamma = rng.normal(size=view.N), rng.uniform(0.0, 0.25, view.N)
    rw, rd = wood.residuals(sw, alpha, gamma, sw.vt), direct.residuals(sd, alpha, gamma, sd.vt)
    assert abs(rw[0] - rd[0]) <= 1e-7 * rd[0]
    # the covariance residual against the one of the 40-digit vt (the direct state's vt can be 5e-11 off where the
    # Woodbury one is exact: hypothesis found N = 5, extra = 1, log_var = 1, sign = -1, seed = 86, lo = -2, span = 8)
    rr = view.curvature_residual(gamma, gt, ref)
    assert abs(rw[1] - rr) <= 1e-12 * rr
    for natural in (True, False):
        for r in (0.3, 0.9):
            nw, nd = wood.step(sw, alpha, gamma, r, natural), direct.step(sd, alpha, gamma, r, natural)
            assert np.linalg.norm(nw.m - nd.m) <= 1e-7 * np.linalg.norm(nd.m - m)
    np.testing.assert_allclose(wood.covariance(sw), direct.covariance(sd), rtol=1e-12, atol=0)
    np.testing.assert_allclose(wood.predict(sw, view.A.toarray())[1], sd.vt, rtol=1e-12)
    # a site warm start solves V x = rhs the same way
    mt = rng.normal(size=view.N)
    np.testing.assert_allclose(wood.warm(m, gt, alpha, mt)[1].m, direct.warm(m, gt, alpha, mt)[1].m, rtol=1e-7,
                               atol=1e-7 * np.linalg.norm(direct.warm(m, gt, alpha, mt)[1].m))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(N=hs.integers(3, 12), d=hs.integers(1, 3), log_ell=hs.floats(-1.0, 3.0), log_sf=hs.floats(-2.0, 4.0),
       seed=hs.integers(0, 2 ** 16), lo=hs.floats(-14.0, 0.0), span=hs.floats(0.0, 14.0),
       zeros=hs.integers(0, 2))
def test_woodbury_state_equals_the_direct_state(N, d, log_ell, log_sf, seed, lo, span, zeros):
    # random RBF kernels (jitter 1e-8: badly conditioned at long length scales) and pseudo-precisions spread over up
    # to 14 decades, some exactly 0: rows with gt vt << 1 (where 1 - (B^-1)_nn loses digits) in every kind of mix
    view = _gp_view(N, d, log_ell, log_sf, seed)
    rng = np.random.default_rng(seed + 1)
    gt = 10.0 ** rng.uniform(lo, lo + span, N)
    gt[rng.permutation(N)[:zeros]] = 0.0
    _check_against_direct(view, gt, rng)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(N=hs.integers(2, 8), extra=hs.integers(0, 4), log_var=hs.floats(0.3, 3.0), sign=hs.sampled_from([-1.0, 1.0]),
       seed=hs.integers(0, 2 ** 16), lo=hs.floats(-8.0, 0.0), span=hs.floats(0.0, 8.0))
def test_woodbury_state_of_a_glm_with_a_scaled_prior(N, extra, log_var, sign, seed, lo, span):
    # a dense GLM with N <= D (parameterization='full'), prior N(0, s I), s != 1: Sigma and log det P enter
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, N + extra))
    view = likelihood_view(glm_program(X, (rng.uniform(size=N) < 0.5).astype(float), "logistic",
                                       prior_var=math.exp(sign * log_var)), FAMS)
    assert view.N <= view.D and not np.allclose(view.P, np.eye(view.D))
    _check_against_direct(view, 10.0 ** rng.uniform(lo, lo + span, N), rng)


def test_woodbury_state_is_used_with_rows_of_tiny_gt_vt():
    # a heart-like kernel at the start's pseudo-precisions with a few rows at 1e-12: those rows take the second form
    # (St_nn - ||L_B^-1 G^1/2 St e_n||^2), the rest (1 - (B^-1)_nn) / gt_n; all equal the 40-digit values to 1e-12
    view = _gp_view(40, 3, 1.0, 1.8, 5)
    rng = np.random.default_rng(2)
    gt = rng.uniform(0.01, 0.25, view.N)
    gt[:3] = 1e-12
    wood = FullGaussian(view, woodbury=True)
    st = wood._woodbury_state(np.zeros(view.D), gt)
    assert st is not None
    np.testing.assert_allclose(st.vt, _reference_vt(view, gt), rtol=1e-12, atol=0)
    one = 1.0 - st.binv
    assert np.all(one[:3] * 1e-4 < st.vt[:3] * gt[:3])      # the first form would have lost 4+ digits there


def test_woodbury_state_declines_an_ill_conditioned_b(monkeypatch):
    # a short length scale (K nearly diagonal) and pseudo-precisions 1e12: every row's vt is exact in the first form
    # (gt vt ~ 1), but ||B|| ~ 4e12, so g^T V g = g^T Sigma g - ||L_B^-1 G^1/2 A Sigma g||^2 cancels (4e-5 relative):
    # eps ||B|| > WOODBURY_COND_TOL sends it to the direct state
    view = _gp_view(10, 2, -3.0, 0.0, 0)
    rng = np.random.default_rng(0)
    gt = 1e12 * rng.uniform(0.5, 2.0, view.N)
    m, alpha, gamma = rng.normal(size=view.N), rng.normal(size=view.N), rng.uniform(0.0, 0.25, view.N)
    wood, direct = FullGaussian(view, woodbury=True), FullGaussian(view)
    assert wood._woodbury_state(m, gt) is None
    assert wood._state(m, gt).L is not None
    sd = direct._state(m, gt)
    rd = direct.residuals(sd, alpha, gamma, sd.vt)[0]
    monkeypatch.setattr(post_mod, "WOODBURY_COND_TOL", math.inf)
    sw = wood._woodbury_state(m, gt)
    assert sw is not None
    assert abs(wood.residuals(sw, alpha, gamma, sw.vt)[0] - rd) > 1e-7 * rd


def test_gp_solve_by_woodbury_states_reports_the_200_node_elbo(monkeypatch):
    used = []
    orig = FullGaussian._woodbury_state

    def counted(self, m, gt):
        st = orig(self, m, gt)
        used.append(st is not None)
        return st

    monkeypatch.setattr(FullGaussian, "_woodbury_state", counted)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=60) > 0).astype(float)
    p = gp_program(X, y, "logistic", 0.8, 1.5)[0]
    r = get_solver("klprox").solve(p)
    assert r.status == "converged" and r.info["parameterization"] == "full"
    assert len(used) > 10 and all(used)
    ref, vt = logistic_neg_elbo_200(likelihood_view(p, FAMS), r)
    assert abs(r.objective - ref) <= 1e-9 * abs(ref)
    np.testing.assert_allclose(r.info["predictor_var"], vt, rtol=1e-9)
    # the same optimum as the direct states (the proximal-point variant reads only those)
    monkeypatch.setattr(FullGaussian, "_woodbury_state", lambda self, m, gt: None)
    r2 = get_solver("klprox").solve(p)
    assert abs(r2.objective - r.objective) <= 1e-12 * abs(r.objective)
    np.testing.assert_allclose(r2.x, r.x, rtol=1e-6, atol=1e-8)


def test_row_tolerance_is_what_keeps_tiny_rows_exact(monkeypatch):
    # without the per-row check (tolerance infinite) the first form's vt of the 1e-12 rows is far off: the check is
    # what the accuracy above rests on
    monkeypatch.setattr(post_mod, "WOODBURY_ROW_TOL", math.inf)
    view = _gp_view(40, 3, 1.0, 1.8, 5)
    gt = np.random.default_rng(2).uniform(0.01, 0.25, view.N)
    gt[:3] = 1e-12
    st = FullGaussian(view, woodbury=True)._woodbury_state(np.zeros(view.D), gt)
    ref = _reference_vt(view, gt)
    assert np.max(np.abs(st.vt[:3] - ref[:3]) / ref[:3]) > 1e-8
