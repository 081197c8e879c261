r"""Expectation propagation for Gaussian-process models with site likelihoods: the classical baseline of
the KL-proximal experiments (Khan, Baque, Fleuret & Fua 2015, Table 3 "EP").

Prior ``f ~ N(0, K)``, likelihood ``prod_i p(y_i | f_i)`` (``gaussian``, ``probit``, ``logistic``,
``laplace``; :mod:`.ep_tilted`). EP replaces each likelihood by a Gaussian site
``t_i(f_i) ∝ exp(-tau_i f_i^2 / 2 + nu_i f_i)``; the approximate posterior is
``N(mu, Sigma)``, ``Sigma = (K^-1 + diag(tau))^-1``, ``mu = Sigma nu``. Each site update (Rasmussen &
Williams 2006, Alg. 3.5): cavity ``tau_-i = 1/Sigma_ii - tau_i``, ``nu_-i = mu_i/Sigma_ii - nu_i``;
tilted moments ``(mu_hat, s2_hat)`` of ``p(y_i | f_i) N(f_i | nu_-i/tau_-i, 1/tau_-i)``; new site
``tau_i = 1/s2_hat - tau_-i``, ``nu_i = mu_hat/s2_hat - nu_-i``, damped (Minka 2004; Kuss & Rasmussen
2005): ``site <- (1 - damping) site + damping new``.

* ``update='sequential'``: one site at a time with the rank-one update of ``Sigma`` (Alg. 3.5), ``Sigma``
  recomputed from a Cholesky factor after each sweep; ``'parallel'``: all sites from the same
  posterior, then one refactorisation (cheaper per sweep, needs damping more often).
* Negative site precisions (impossible in exact arithmetic for log-concave likelihoods, possible by
  rounding): ``negative='clip'`` sets them to 0, ``'skip'`` keeps the old site; the count is reported.
  Sites whose cavity precision is not positive are skipped (counted too).
* Converged when the posterior marginal means and variances change by less than ``tol`` (relative to
  ``1 + |value|``) over a sweep; ``max_sweeps`` bounds the run (``converged`` says which happened).
* ``log_marginal``: ``log Z_EP`` (R&W eq. 3.65, rearranged with B = I + S^½ K S^½; docs/klprox.md §9).
* :func:`ep_predict`: latent predictive ``N(mt, vt)`` (R&W Alg. 3.6); :func:`ep_log_predictive`:
  ``log int p(y* | f*) N(f* | mt, vt) df*`` (the tilted normaliser).
"""
from __future__ import annotations

import math
import time

import numpy as np
import scipy.linalg as sla

from ..errors import InputDataError
from .ep_tilted import LIKELIHOODS, tilted_moments


def _labels(y, likelihood):
    y = np.asarray(y, dtype=float).ravel()
    if not np.all(np.isfinite(y)):
        raise InputDataError("y contains NaN or infinite values")
    if likelihood in ("probit", "logistic"):
        vals = set(np.unique(y).tolist())
        if vals <= {0.0, 1.0}:
            return 2 * y - 1
        if vals <= {-1.0, 1.0}:
            return y
        raise InputDataError(f"{likelihood} EP needs labels in {{0, 1}} or {{-1, +1}}, got {sorted(vals)[:5]}")
    return y


def _posterior(K, tau, nu):
    """``(Sigma, mu, L, sW)`` from the sites; ``L = chol(I + sW K sW)`` (R&W eq. 3.67)."""
    sW = np.sqrt(tau)
    B = np.eye(len(tau)) + sW[:, None] * K * sW[None, :]
    L = np.linalg.cholesky(B)
    V = sla.solve_triangular(L, sW[:, None] * K, lower=True, check_finite=False)
    Sigma = K - V.T @ V
    return Sigma, Sigma @ nu, L, sW


def _log_marginal(likelihood, y, noise, Sigma, mu, L, tau, nu):
    """``log Z_EP`` (R&W eq. 3.65) with the cavities of the final posterior, rearranged so that zero site
    precisions are harmless (derivation: docs/klprox.md §9)."""
    d = np.diag(Sigma)
    tc = 1.0 / d - tau
    nc = mu / d - nu
    lZ, _, _ = tilted_moments(likelihood, y, nc / tc, 1.0 / tc, noise)
    return float(-np.sum(np.log(np.diag(L))) + 0.5 * nu @ Sigma @ nu + np.sum(lZ)
                 + 0.5 * np.sum(np.log1p(tau / tc))
                 + 0.5 * np.sum((nc * (tau * nc / tc - 2 * nu) - nu ** 2) / (tc + tau)))


def gp_ep(K, y, likelihood="probit", noise=1.0, update="sequential", damping=1.0, tol=1e-8,
          max_sweeps=500, negative="clip", init=None):
    """Run EP. ``K``: prior covariance (n x n, positive definite); ``y``: targets / labels; ``noise``:
    standard deviation of the ``gaussian`` / ``laplace`` likelihood; ``init``: ``(tau, nu)`` to start
    from (e.g. the previous point of a hyperparameter grid), else zero sites.

    Returns a dict: ``mean``, ``cov`` (posterior), ``tau``, ``nu`` (sites), ``log_marginal``, ``sweeps``,
    ``converged``, ``n_negative`` (site precisions clipped or skipped), ``n_skipped_cavity``, ``time``
    and the factors used by :func:`ep_predict`.
    """
    t0 = time.perf_counter()
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    if update not in ("sequential", "parallel"):
        raise ValueError(f"update must be 'sequential' or 'parallel', got {update!r}")
    if negative not in ("clip", "skip"):
        raise ValueError(f"negative must be 'clip' or 'skip', got {negative!r}")
    if not 0.0 < damping <= 1.0:
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    if not (noise > 0 and math.isfinite(noise)):
        raise ValueError(f"noise must be a positive finite number, got {noise}")
    K = np.asarray(K, dtype=float)
    y = _labels(y, likelihood)
    n = len(y)
    if n == 0:
        raise InputDataError("the data set is empty")
    if K.shape != (n, n) or not np.all(np.isfinite(K)):
        raise InputDataError(f"K must be a finite {n} x {n} matrix, got shape {K.shape}")
    if init is None:
        tau, nu = np.zeros(n), np.zeros(n)
    else:
        tau, nu = (np.array(a, dtype=float, copy=True) for a in init)
        tau = np.maximum(tau, 0.0)
    Sigma, mu, L, sW = _posterior(K, tau, nu)
    n_neg = n_cav = 0
    converged = False
    sweeps = 0
    for sweeps in range(1, max_sweeps + 1):
        d_old, m_old = np.diag(Sigma).copy(), mu.copy()
        if update == "parallel":
            d = np.diag(Sigma)
            tc, nc = 1.0 / d - tau, mu / d - nu
            ok = tc > 0
            n_cav += int(np.sum(~ok))
            tcs = np.where(ok, tc, 1.0)
            _, mh, vh = tilted_moments(likelihood, y, nc / tcs, 1.0 / tcs, noise)
            tn = 1.0 / vh - tcs
            nn = mh / vh - nc
            neg = tn < 0
            n_neg += int(np.sum(neg & ok))
            if negative == "clip":
                tn = np.where(neg, 0.0, tn)
            else:
                ok = ok & ~neg
            tau = np.where(ok, (1 - damping) * tau + damping * tn, tau)
            nu = np.where(ok, (1 - damping) * nu + damping * nn, nu)
        else:
            for i in range(n):
                sii = Sigma[i, i]
                tc, nc = 1.0 / sii - tau[i], mu[i] / sii - nu[i]
                if not tc > 0:
                    n_cav += 1
                    continue
                _, mh, vh = tilted_moments(likelihood, y[i], nc / tc, 1.0 / tc, noise)
                tn, nn = 1.0 / vh[0] - tc, mh[0] / vh[0] - nc
                if tn < 0:
                    n_neg += 1
                    if negative == "skip":
                        continue
                    tn = 0.0
                tn = (1 - damping) * tau[i] + damping * tn
                nn = (1 - damping) * nu[i] + damping * nn
                dt = tn - tau[i]
                tau[i], nu[i] = tn, nn
                si = Sigma[:, i].copy()
                Sigma -= (dt / (1.0 + dt * sii)) * np.outer(si, si)
                mu = Sigma @ nu
        Sigma, mu, L, sW = _posterior(K, tau, nu)
        d = np.diag(Sigma)
        if (np.max(np.abs(d - d_old) / (1 + np.abs(d))) < tol
                and np.max(np.abs(mu - m_old) / (1 + np.abs(mu))) < tol):
            converged = True
            break
    lml = _log_marginal(likelihood, y, noise, Sigma, mu, L, tau, nu)
    return {"mean": mu, "cov": Sigma, "tau": tau, "nu": nu, "log_marginal": lml, "sweeps": sweeps,
            "converged": converged, "n_negative": n_neg, "n_skipped_cavity": n_cav,
            "time": time.perf_counter() - t0, "L": L, "sW": sW, "K": K, "likelihood": likelihood,
            "noise": noise}


def ep_predict(fit, Ks, kss):
    """Latent predictive ``(mt, vt)`` at test points: ``Ks`` = K(train, test) (n x m), ``kss`` = prior
    variances at the test points (R&W Alg. 3.6)."""
    L, sW, K, nu = fit["L"], fit["sW"], fit["K"], fit["nu"]
    z = sW * sla.cho_solve((L, True), sW * (K @ nu), check_finite=False)
    mt = Ks.T @ (nu - z)
    V = sla.solve_triangular(L, sW[:, None] * Ks, lower=True, check_finite=False)
    vt = np.asarray(kss, dtype=float) - np.einsum("ij,ij->j", V, V)
    return mt, np.maximum(vt, 1e-300)


def ep_log_predictive(likelihood, y, mt, vt, noise=1.0):
    """``log p(y* | data) = log int p(y* | f) N(f | mt, vt) df`` elementwise (labels as in :func:`gp_ep`)."""
    return tilted_moments(likelihood, _labels(y, likelihood), mt, vt, noise)[0]


def gp_ep_fallback(K, y, likelihood="probit", noise=1.0, tol=1e-6, max_sweeps=500, fast_sweeps=50):
    """Parallel undamped EP (one refactorisation per sweep: the fastest when it converges; at most
    ``fast_sweeps`` sweeps), then, while the run has not converged to a finite evidence, parallel EP with
    damping 0.5 and sequential EP with damping 1 and 0.5 (R&W Alg. 3.5; Minka 2004; Kuss & Rasmussen
    2005). The returned dict has ``attempts``: the (update, damping) pairs tried."""
    tried = []
    r = None
    plan = (("parallel", 1.0, min(fast_sweeps, max_sweeps)), ("parallel", 0.5, max_sweeps),
            ("sequential", 1.0, max_sweeps), ("sequential", 0.5, max_sweeps))
    for update, damping, sweeps in plan:
        tried.append((update, damping))
        try:
            r = gp_ep(K, y, likelihood, noise, update=update, damping=damping, tol=tol, max_sweeps=sweeps)
        except np.linalg.LinAlgError:
            continue
        if r["converged"] and math.isfinite(r["log_marginal"]):
            break
    if r is None:
        raise np.linalg.LinAlgError("EP failed to factor I + S^1/2 K S^1/2 with every update rule")
    r["attempts"] = tried
    return r
