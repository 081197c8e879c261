r"""Bayesian GMM negative ELBO in numpy: data checks, the proven variable box, evaluation.

Negative ELBO of the model of :mod:`varopt.formulations.bgmm` with every normalising
constant (derivation in ``docs/gop_bgmm.md``; ``lam_eff = lambda`` for a known variance,
``lambda * tau`` when learned; ``v = 0`` and no entropy of ``q(mu)`` for the point family)::

    f = sum_ik phi_ik [ tau/2 ((x_i - m_k)^2 + v_k) - log pi_k + log phi_ik ]
        + N/2 log(2 pi) - N/2 log tau
        + sum_k [ lam_eff/2 (m_k^2 + v_k) + 1/2 log(2 pi) - 1/2 log lam_eff ]
        - sum_k 1/2 log(2 pi e v_k)                          (gaussian family only)

Holds the input validation (:func:`check_data`), the bounds of every variable proven in
``docs/gop_bgmm.md`` §4 (:func:`bgmm_bounds`, :func:`min_scatter`), the evaluation of
``f`` (:func:`neg_elbo`), of its minimum over ``phi`` (:func:`profile_neg_elbo`,
:func:`profile_neg_log_lik`) and the closed-form M-step used as a starting point
(:func:`default_init`).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from ..errors import InputDataError

FAMILIES = ("point", "gaussian")
LOG2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------
def check_data(x, name: str = "x") -> np.ndarray:
    """Return ``x`` as a float vector; reject empty, non-numeric, non-finite or non-1-D data."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputDataError(f"{name}: data must be numeric ({exc})") from None
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise InputDataError(f"{name}: expected 1-D data (N,), got shape {arr.shape}")
    if arr.size == 0:
        raise InputDataError(f"{name}: empty data set (N = 0)")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputDataError(f"{name}: {int(bad.sum())} non-finite value(s) (NaN/inf), first at index "
                             f"{int(np.flatnonzero(bad)[0])}")
    return arr


def _check_args(K, family, prior_precision, variance, pi_min):
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise InputDataError(f"K: the number of components must be an integer >= 1, got {K!r}")
    if family not in FAMILIES:
        raise InputDataError(f"family: must be one of {FAMILIES}, got {family!r}")
    lam = _finite_positive(prior_precision, "prior_precision")
    if isinstance(variance, str):
        if variance != "learned":
            raise InputDataError(f"variance: a positive number or 'learned', got {variance!r}")
    else:
        _finite_positive(variance, "variance")
    pm = _finite_positive(pi_min, "pi_min")
    if pm * K >= 1.0:
        raise InputDataError(f"pi_min: must satisfy pi_min * K < 1, got pi_min={pi_min!r}, K={K}")
    return int(K), lam


def _finite_positive(v, name):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputDataError(f"{name}: must be a positive number, got {v!r}") from None
    if not math.isfinite(f) or f <= 0:
        raise InputDataError(f"{name}: must be finite and > 0, got {v!r}")
    return f


def _learned(variance) -> bool:
    return isinstance(variance, str)


# ----------------------------------------------------------------------------------------
# bounds (docs/gop_bgmm.md §4 proves each one)
# ----------------------------------------------------------------------------------------
def min_scatter(x, K: int, lam: float) -> float:
    r"""``S_min = min over soft phi, m of sum_ik phi_ik (x_i - m_k)^2 + lam sum_k m_k^2``.

    For fixed ``m`` the best ``phi`` puts each point on its nearest mean, so in 1-D the
    clusters are contiguous runs of the sorted data; empty clusters take ``m_k = 0``. The
    exact value is a dynamic programme over at most ``K`` contiguous segments with segment
    cost ``sum x^2 - (sum x)^2 / (n + lam)`` (the shrunk mean ``sum x / (n + lam)``).
    """
    xs = np.sort(np.asarray(x, dtype=float))
    N = xs.size
    c1 = np.concatenate([[0.0], np.cumsum(xs)])
    c2 = np.concatenate([[0.0], np.cumsum(xs * xs)])

    def cost(i, j):  # segment xs[i:j], vectorised over i
        n = j - i
        s = c1[j] - c1[i]
        return (c2[j] - c2[i]) - s * s / (n + lam)

    # D[j] = best cost of xs[:j] with the current number of segments
    D = np.array([cost(0, j) for j in range(N + 1)])
    for _ in range(1, K):
        newD = D.copy()
        for j in range(1, N + 1):
            i = np.arange(0, j)
            newD[j] = min(D[j], float(np.min(D[i] + cost(i, j))))
        D = newD
    return float(max(D[N], 0.0))


def bgmm_bounds(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
                pi_min: float = 1e-6) -> dict:
    r"""Finite variable bounds that contain a global optimum (docs/gop_bgmm.md, "Bounds").

    * ``mu`` (or ``m``): ``[min(0, min x), max(0, max x)]`` -- for fixed ``phi`` the optimal
      mean is the shrunk weighted mean ``tau sum_i phi_ik x_i / (tau n_k + lam)``, a convex
      combination of 0 and the data.
    * ``v``: ``[1 / (tau N + lam), 1 / lam]`` -- the optimal ``v_k = 1/(tau n_k + lam)``,
      ``0 <= n_k <= N``. Learned variance: ``w = tau v in [1/(N + lam), 1/lam]``.
    * ``tau`` (learned): ``tau* = c / S`` with ``c = N + K`` (point) or ``N`` (gaussian) and
      ``S = sum phi (x - m)^2 + lam sum m^2``; ``S`` lies in ``[S_min, S_max]``
      (:func:`min_scatter`; ``S_max = N (b - a)^2 + lam K max(a^2, b^2)``).
      ``eta = tau m in [tau_max a, tau_max b]``.
    * ``pi``: ``[pi_min, 1]``. ``log pi`` needs ``pi > 0``; restricting ``pi >= pi_min`` changes
      the optimum by at most ``-N log(1 - K pi_min)`` (mix the optimum with the uniform
      weights) and not at all when the optimal weights exceed ``pi_min``.
    """
    xv = check_data(x)
    K, lam = _check_args(K, family, prior_precision, variance, pi_min)
    N = xv.size
    a, b = min(0.0, float(xv.min())), max(0.0, float(xv.max()))
    out = {"phi": (0.0, 1.0), "pi": (float(pi_min), 1.0)}
    if not _learned(variance):
        tau = 1.0 / float(variance)
        out["mu"] = (a, b)
        if family == "gaussian":
            out["v"] = (1.0 / (tau * N + lam), 1.0 / lam)
        return out
    smin = min_scatter(xv, K, lam)
    if not smin > 0:
        raise InputDataError("x: every observation is 0, so the learned-variance ELBO is unbounded "
                             "(tau -> inf); use a known variance")
    smax = N * (b - a) ** 2 + lam * K * max(a * a, b * b)
    c = N + K if family == "point" else N
    tlo, thi = c / smax, c / smin
    out["tau"] = (tlo, thi)
    out["eta"] = (thi * a, thi * b)
    if family == "gaussian":
        out["w"] = (1.0 / (N + lam), 1.0 / lam)
    return out


# ----------------------------------------------------------------------------------------
# numpy evaluation
# ----------------------------------------------------------------------------------------
def _moments(params, variance, family):
    """(mu, v, tau) in moment form from a parameter dict (natural or moment keys)."""
    if _learned(variance):
        tau = float(params["tau"])
        mu = np.asarray(params["eta"], dtype=float) / tau if "eta" in params else np.asarray(params["mu"], float)
    else:
        tau = 1.0 / float(variance)
        mu = np.asarray(params["mu"], dtype=float)
    if family == "gaussian":
        if "w" in params:
            v = np.asarray(params["w"], dtype=float) / tau
        else:
            v = np.asarray(params["v"], dtype=float)
    else:
        v = np.zeros_like(mu)
    return mu, v, tau


def _xlogy(a, b):
    """``a log b`` with ``0 log 0 = 0`` (the closure of the entropy terms)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        # b = 0 with a > 0 gives -inf (so -phi log pi = +inf); b < 0 is outside the domain (NaN)
        return np.where(a == 0, 0.0, a * np.log(np.where(b >= 0, b, np.nan)))


def _const_terms(N, K, lam, tau, v, family, learned):
    lam_eff = lam * tau if learned else lam
    c = 0.5 * N * LOG2PI - 0.5 * N * math.log(tau) + K * (0.5 * LOG2PI - 0.5 * math.log(lam_eff))
    if family == "gaussian":
        c -= 0.5 * float(np.sum(LOG2PI + 1.0 + np.log(v)))
    return c, lam_eff


def neg_elbo(params: dict, x, family: str = "point", prior_precision: float = 1.0, variance=1.0) -> float:
    r"""Negative ELBO (module docstring formula) at ``params``.

    ``params``: ``phi`` (N, K), ``pi`` (K,), and ``mu`` (K,) [or ``eta`` = tau mu], ``v`` (K,)
    [or ``w`` = tau v] for the gaussian family, ``tau`` when ``variance='learned'``.
    """
    xv = check_data(x)
    phi = np.asarray(params["phi"], dtype=float)
    pi = np.asarray(params["pi"], dtype=float)
    K = pi.size
    _, lam = _check_args(K, family, prior_precision, variance, 1e-300)
    mu, v, tau = _moments(params, variance, family)
    N = xv.size
    cost = 0.5 * tau * ((xv[:, None] - mu[None, :]) ** 2 + v[None, :])
    val = float(np.sum(phi * cost) - np.sum(_xlogy(phi, pi[None, :])) + np.sum(_xlogy(phi, phi)))
    c, lam_eff = _const_terms(N, K, lam, tau, v, family, _learned(variance))
    return val + c + 0.5 * lam_eff * float(np.sum(mu * mu + v))


def _profile_costs(xv, mu, v, tau, pi):
    """``-c_ik``: the per-(i, k) log-weights whose softmax is the optimal ``phi`` (E-step)."""
    with np.errstate(divide="ignore"):
        return np.log(pi)[None, :] - 0.5 * tau * ((xv[:, None] - mu[None, :]) ** 2 + v[None, :])


def profile_neg_elbo(params: dict, x, family: str = "point", prior_precision: float = 1.0,
                     variance=1.0, return_phi: bool = False):
    r"""``min over phi (rows on the simplex)`` of :func:`neg_elbo` at fixed ``(mu, pi[, v, tau])``.

    ``min_{phi_i in simplex} sum_k phi_ik (c_ik + log phi_ik) = -logsumexp_k(-c_ik)`` (Gibbs
    variational principle), attained at ``phi_ik = softmax_k(-c_ik)`` (the VEM E-step,
    Saddiki et al. 2017, eq. (54)/(63)).
    """
    xv = check_data(x)
    pi = np.asarray(params["pi"], dtype=float)
    K = pi.size
    _, lam = _check_args(K, family, prior_precision, variance, 1e-300)
    mu, v, tau = _moments(params, variance, family)
    s = _profile_costs(xv, mu, v, tau, pi)
    lse = logsumexp(s, axis=1)
    c, lam_eff = _const_terms(xv.size, K, lam, tau, v, family, _learned(variance))
    val = float(-np.sum(lse)) + c + 0.5 * lam_eff * float(np.sum(mu * mu + v))
    if return_phi:
        return val, np.exp(s - lse[:, None])
    return val


def profile_neg_log_lik(mu, pi, x, prior_precision: float = 1.0, variance=1.0, tau=None) -> float:
    r"""``-log p(x, mu | pi[, tau]) = -sum_i log sum_k pi_k N(x_i; mu_k, 1/tau) - sum_k log N(mu_k; 0, 1/lam_eff)``.

    For the point-mass family this equals the minimum over ``phi`` of the negative ELBO
    (docs/gop_bgmm.md, "Profile"), the objective of the reference multistart. Computed
    here directly from the mixture density (not through :func:`profile_neg_elbo`), so the
    two can check each other.
    """
    xv = check_data(x)
    mu = np.asarray(mu, dtype=float)
    pi = np.asarray(pi, dtype=float)
    lam = _finite_positive(prior_precision, "prior_precision")
    if _learned(variance):
        if tau is None:
            raise InputDataError("tau: required when variance='learned'")
        tau = _finite_positive(tau, "tau")
        lam_eff = lam * tau
    else:
        tau = 1.0 / _finite_positive(variance, "variance")
        lam_eff = lam
    sd = 1.0 / math.sqrt(tau)
    from scipy.stats import norm
    with np.errstate(divide="ignore"):
        logmix = logsumexp(np.log(pi)[None, :] + norm.logpdf(xv[:, None], mu[None, :], sd), axis=1)
    logprior = norm.logpdf(mu, 0.0, 1.0 / math.sqrt(lam_eff))
    return float(-np.sum(logmix) - np.sum(logprior))


# ----------------------------------------------------------------------------------------
# Pyomo and CVXPY builders
# ----------------------------------------------------------------------------------------
def default_init(x, K, family="point", prior_precision=1.0, variance=1.0, pi_min=1e-6) -> dict:
    """A feasible starting point: uniform ``phi``/``pi``, means at spread quantiles, M-step ``v``/``tau``."""
    xv = check_data(x)
    K, lam = _check_args(K, family, prior_precision, variance, pi_min)
    N = xv.size
    phi = np.full((N, K), 1.0 / K)
    return _mstep_params(xv, phi, K, family, lam, variance, pi_min, quantile_means=True)


def _mstep_params(xv, phi, K, family, lam, variance, pi_min, quantile_means=False):
    N = xv.size
    nk = phi.sum(axis=0)
    pi = np.clip(nk / N, pi_min, 1.0)
    pi = pi / pi.sum()
    sx = phi.T @ xv
    if quantile_means:
        sx = np.quantile(xv, (np.arange(K) + 0.5) / K) * (nk + lam)
    if _learned(variance):
        m = sx / (nk + lam)
        S = float(np.sum(phi * (xv[:, None] - m[None, :]) ** 2) + lam * np.sum(m * m))
        c = N + K if family == "point" else N
        bnd = bgmm_bounds(xv, K, family, lam, variance, pi_min)
        tau = float(np.clip(c / max(S, 1e-300), *bnd["tau"]))
        out = {"phi": phi, "pi": pi, "eta": tau * m, "tau": tau}
        if family == "gaussian":
            out["w"] = 1.0 / (nk + lam)
        return out
    tau = 1.0 / float(variance)
    m = tau * sx / (tau * nk + lam)
    out = {"phi": phi, "pi": pi, "mu": m}
    if family == "gaussian":
        out["v"] = 1.0 / (tau * nk + lam)
    return out
