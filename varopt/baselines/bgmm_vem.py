r"""Variational EM baseline for the Bayesian GMM: coordinate ascent (CAVI; Blei, Kucukelbir and McAuliffe 2017).

Coordinate ascent on the ELBO of :mod:`varopt.formulations.bgmm`: the E-step sets
``phi_ik proportional to pi_k exp(-tau/2 ((x_i - m_k)^2 + v_k))``; the M-step sets
``pi = n / N`` with ``n_k = sum_i phi_ik``, ``m_k = tau sum_i phi_ik x_i / (tau n_k + lambda)``,
``v_k = 1 / (tau n_k + lambda)`` (and ``tau`` in closed form when learned). Each step does
not increase the negative ELBO, so it ends at a local optimum; random restarts
(:func:`vem_random_init`) show how often that optimum is not the global one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from ..errors import InputDataError
from ..estimators.base import VaroptEstimator
from ..formulations.bgmm_elbo import _check_args, _learned, _moments, _profile_costs, check_data, neg_elbo


@dataclass
class VemRun:
    """One VEM restart: final negative ELBO, parameters, iterations, time, monotonicity trace."""

    neg_elbo: float
    params: dict
    iterations: int
    time: float
    converged: bool
    trace: list = field(default_factory=list)


@dataclass
class VemResult:
    runs: list

    @property
    def values(self) -> np.ndarray:
        return np.array([r.neg_elbo for r in self.runs])

    @property
    def times(self) -> np.ndarray:
        return np.array([r.time for r in self.runs])

    @property
    def best(self) -> VemRun:
        return self.runs[int(np.argmin(self.values))]

    def count_global(self, optimum: float, rtol: float = 1e-6) -> int:
        """Restarts whose final value is within ``rtol`` (relative) of ``optimum``."""
        return int(np.sum(np.abs(self.values - optimum) <= rtol * max(abs(optimum), 1e-10)))


def vem_random_init(xv, K, family, lam, variance, rng) -> dict:
    r"""§3.2 initialisation: ``pi, phi_i ~ Dirichlet(1)``, ``tau ~ Gamma(shape = range(x))``,
    ``m_k ~ Uniform(min x, max x)``; ``v_k = 1/(tau n_k + lam)`` from the initial ``phi``."""
    N = xv.size
    pi = rng.dirichlet(np.ones(K))
    phi = rng.dirichlet(np.ones(K), size=N)
    lo, hi = float(xv.min()), float(xv.max())
    mu = rng.uniform(lo, hi, size=K)
    if _learned(variance):
        tau = float(rng.gamma(shape=max(hi - lo, 1e-3), scale=1.0))
        tau = max(tau, 1e-8)
    else:
        tau = 1.0 / float(variance)
    nk = phi.sum(axis=0)
    p = {"phi": phi, "pi": pi, "mu": mu, "tau": tau}
    if family == "gaussian":
        p["v"] = 1.0 / (tau * nk + (lam * tau if _learned(variance) else lam))
    return p


def _to_output(p, family, variance):
    """Moment-form VEM state -> the parameter dict of the models (natural form if learned)."""
    out = {"phi": p["phi"].copy(), "pi": p["pi"].copy()}
    if _learned(variance):
        out["tau"] = float(p["tau"])
        out["eta"] = p["tau"] * p["mu"]
        if family == "gaussian":
            out["w"] = p["tau"] * p["v"]
    else:
        out["mu"] = p["mu"].copy()
        if family == "gaussian":
            out["v"] = p["v"].copy()
    return out


def vem_step(p, xv, K, family, lam, variance):
    """One E-step (Saddiki et al. 2017, eq. (54)/(63)) then one exact M-step (eq. (52)-(55)/(61)-(65)).

    The M-step minimises jointly over ``(pi, mu, v, tau)`` for the fixed ``phi``: it is the
    closed-form minimiser of the x-block, so the negative ELBO never increases.
    """
    learned = _learned(variance)
    N = xv.size
    tau = p["tau"]
    v = p.get("v", np.zeros(K)) if family == "gaussian" else np.zeros(K)
    s = _profile_costs(xv, p["mu"], v, tau, p["pi"])
    phi = np.exp(s - logsumexp(s, axis=1)[:, None])
    nk = phi.sum(axis=0)
    sx = phi.T @ xv
    pi = nk / N
    if learned:
        mu = sx / (nk + lam)
        S = float(np.sum(phi * (xv[:, None] - mu[None, :]) ** 2) + lam * np.sum(mu * mu))
        c = N + K if family == "point" else N
        tau = c / S
        q = {"phi": phi, "pi": pi, "mu": mu, "tau": tau}
        if family == "gaussian":
            q["v"] = 1.0 / (tau * (nk + lam))
    else:
        mu = tau * sx / (tau * nk + lam)
        q = {"phi": phi, "pi": pi, "mu": mu, "tau": tau}
        if family == "gaussian":
            q["v"] = 1.0 / (tau * nk + lam)
    return q


def _moment_neg_elbo(p, xv, family, lam, variance):
    params = {"phi": p["phi"], "pi": p["pi"], "mu": p["mu"], "tau": p["tau"]}
    if family == "gaussian":
        params["v"] = p["v"]
    if _learned(variance):
        params = {"phi": p["phi"], "pi": p["pi"], "eta": p["tau"] * p["mu"], "tau": p["tau"]}
        if family == "gaussian":
            params["w"] = p["tau"] * p["v"]
    return neg_elbo(params, xv, family, lam, variance)


def vem_single(xv, K, family, lam, variance, init, tol=1e-12, max_iter=20000, keep_trace=False):
    """Run VEM from ``init`` (moment form) to convergence; returns :class:`VemRun`."""
    t0 = time.perf_counter()
    p = {k: (np.array(v, dtype=float) if k != "tau" else float(v)) for k, v in init.items()}
    f = _moment_neg_elbo(p, xv, family, lam, variance)
    trace = [f] if keep_trace else []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        q = vem_step(p, xv, K, family, lam, variance)
        fq = _moment_neg_elbo(q, xv, family, lam, variance)
        if keep_trace:
            trace.append(fq)
        dpar = max(float(np.max(np.abs(q["mu"] - p["mu"]))), float(np.max(np.abs(q["pi"] - p["pi"]))))
        p = q
        if abs(f - fq) <= tol * (1.0 + abs(fq)) and dpar <= 1e-9:
            f = fq
            converged = True
            break
        f = fq
    return VemRun(neg_elbo=f, params=_to_output(p, family, variance), iterations=it,
                  time=time.perf_counter() - t0, converged=converged, trace=trace)


def vem(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
        n_restarts: int = 100, seed: int = 0, tol: float = 1e-12, max_iter: int = 20000,
        keep_trace: bool = False) -> VemResult:
    r"""Variational EM (coordinate ascent on the ELBO) from ``n_restarts`` random starts.

    Each restart draws the §3.2 initialisation (:func:`vem_random_init`) from
    ``numpy.random.default_rng(seed)`` (one stream, restarts in order) and alternates
    E-step / M-step (:func:`vem_step`) until the negative ELBO changes by less than
    ``tol (1 + |f|)`` and the means and weights by less than 1e-9.
    """
    xv = check_data(x)
    K, lam = _check_args(K, family, prior_precision, variance, 1e-300)
    if isinstance(n_restarts, bool) or int(n_restarts) < 1:
        raise InputDataError(f"n_restarts: must be >= 1, got {n_restarts!r}")
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(int(n_restarts)):
        init = vem_random_init(xv, K, family, lam, variance, rng)
        runs.append(vem_single(xv, K, family, lam, variance, init, tol, max_iter, keep_trace))
    return VemResult(runs)


class BayesianGMMVEM(VaroptEstimator):
    """scikit-learn estimator: ``BayesianGMMVEM(K).fit(X)`` keeps the best of the restarts of :func:`vem`.

    The model is a mixture of one-dimensional Gaussians (Saddiki et al. 2017), so ``X`` is the 1-D data or a
    one-column ``X`` (as scikit-learn's ``IsotonicRegression`` takes it); more columns are refused by name, as are
    NaN/inf and sparse input. ``y`` is ignored, as for scikit-learn's mixtures. Fitted: ``weights_``, ``means_``,
    ``neg_elbo_``, ``params_`` (the optimum's variational parameters), ``result_`` (every restart),
    ``n_features_in_`` (1). ``predict_proba(X)`` is the E-step's responsibilities (eq. (54)/(63)) at new points and
    ``predict(X)`` their argmax; ``score_samples(X)`` / ``score(X)`` the log predictive density (per point / mean)."""

    def __init__(self, n_components=2, family="point", prior_precision=1.0, variance=1.0,
                 n_restarts=100, seed=0):
        self.n_components, self.family = n_components, family
        self.prior_precision, self.variance = prior_precision, variance
        self.n_restarts, self.seed = n_restarts, seed

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.one_d_array = True     # a 1-D x is the data (scikit-learn's checks then pass X[:, 0])
        return tags

    def _column(self, X, reset):
        """``X`` (1-D, or 2-D with one column) validated by scikit-learn (finite, numeric, not sparse, non-empty;
        ``n_features_in_`` set on ``reset``, checked otherwise) as a float vector."""
        if not hasattr(X, "toarray") and np.ndim(X) == 1:
            X = np.asarray(X).reshape(-1, 1)     # the 1-D data (a list, array or pandas Series)
        X = self._validate(X, reset=reset, with_y=False)
        if X.shape[1] != 1:
            raise InputDataError(f"{type(self).__name__} models one-dimensional data: X must be 1-D or have one "
                                 f"column, got {X.shape[1]} columns")
        return X[:, 0]

    def fit(self, X, y=None):
        x = self._column(X, reset=True)
        res = vem(x, self.n_components, self.family, self.prior_precision, self.variance,
                  self.n_restarts, self.seed)
        best = res.best
        self.result_ = res
        self.neg_elbo_ = best.neg_elbo
        self.params_ = best.params
        self.weights_ = best.params["pi"]
        self.means_ = (best.params["mu"] if "mu" in best.params else best.params["eta"] / best.params["tau"])
        return self

    def predict_proba(self, X):
        """Responsibilities ``phi_ik`` (rows sum to 1) of new points under the fitted ``q``."""
        self._check_fitted("params_")
        xv = self._column(X, reset=False)
        p = self.params_
        _, v, tau = _moments(p, self.variance, self.family)
        s = _profile_costs(xv, self.means_, v, tau, p["pi"])
        return np.exp(s - logsumexp(s, axis=1)[:, None])

    def predict(self, X):
        """The most responsible component of each point (``argmax_k phi_ik``)."""
        return np.argmax(self.predict_proba(X), axis=1)

    def score_samples(self, X):
        """Log predictive density of each point under the fitted ``q``: ``log sum_k pi_k N(x; m_k, 1/tau + v_k)``
        (``mu_k ~ N(m_k, v_k)`` integrated out; ``v_k = 0`` for the point family), as scikit-learn's mixtures'
        ``score_samples``."""
        self._check_fitted("params_")
        xv = self._column(X, reset=False)
        _, v, tau = _moments(self.params_, self.variance, self.family)
        s2 = 1.0 / tau + v
        with np.errstate(divide="ignore"):
            logp = (np.log(self.weights_)[None, :] - 0.5 * np.log(2 * np.pi * s2)[None, :]
                    - 0.5 * (xv[:, None] - self.means_[None, :]) ** 2 / s2[None, :])
        return logsumexp(logp, axis=1)

    def score(self, X, y=None):
        """Mean log predictive density (:meth:`score_samples`), so that ``GridSearchCV`` can select
        ``n_components`` and the prior by held-out likelihood."""
        return float(np.mean(self.score_samples(X)))
