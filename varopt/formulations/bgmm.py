r"""Bayesian Gaussian mixture ELBOs as biconvex optimisation models (seed 004, §3-4, App. B-C).

Model (1-D data ``x_1..x_N``, ``K`` components; seed 004 eq. (22))::

    mu_k ~ N(0, 1/lambda)                     (known variance sigma^2 = 1/tau)
    mu_k | tau ~ N(0, 1/(lambda tau))         (learned variance, conjugate prior)
    z_i ~ Cat(pi),   x_i | z_i = k ~ N(mu_k, 1/tau)

``pi`` (and ``tau`` when learned) are point estimates. Variational families:

* ``family='point'`` (seed §3, eq. (23)-(25)): ``q(z_i) = Cat(phi_i)``, point mass on ``mu``.
* ``family='gaussian'`` (seed §4, eq. (26)-(28)): ``q(z_i) = Cat(phi_i)``, ``q(mu_k) = N(m_k, v_k)``.

Negative ELBO with every normalising constant (derivation in ``docs/gop_bgmm.md``;
``lam_eff = lambda`` for a known variance, ``lambda * tau`` when learned; ``v = 0`` and no
entropy of ``q(mu)`` for the point family)::

    f = sum_ik phi_ik [ tau/2 ((x_i - m_k)^2 + v_k) - log pi_k + log phi_ik ]
        + N/2 log(2 pi) - N/2 log tau
        + sum_k [ lam_eff/2 (m_k^2 + v_k) + 1/2 log(2 pi) - 1/2 log lam_eff ]
        - sum_k 1/2 log(2 pi e v_k)                          (gaussian family only)

It is biconvex in ``x = (mu, pi[, v])`` and ``y = phi``.  With a learned variance the
natural parameters ``eta_k = tau m_k`` and ``w_k = tau v_k`` make it biconvex too:
``tau (x - m)^2 = tau x^2 - 2 x eta + eta^2 / tau`` (``quad_over_lin``, jointly convex in
``(eta, tau)``) and ``tau v = w``; the builders then use variables ``eta, tau[, w]``.

Public API: :func:`bgmm_pyomo`, :func:`bgmm_cvxpy`, :func:`neg_elbo`,
:func:`profile_neg_log_lik`, :func:`profile_neg_elbo`, :func:`profile_multistart`
(independent reference), :func:`vem` (variational EM baseline, App. B.3 / C.3 with the
random initialisation of §3.2), :func:`bgmm_bounds`, :data:`MINIMAL_DATA`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from ..errors import InputDataError

FAMILIES = ("point", "gaussian")
LOG2PI = math.log(2.0 * math.pi)

#: Minimal data set (found by ``benchmarks/find_minimal_dataset.py``; see docs/gop_bgmm.md):
#: repeated observations plus outliers on which variational EM from 100 random restarts
#: (seed 0) ends at a non-global optimum in most restarts. Use ``bgmm_pyomo(**MINIMAL_DATA)``.
MINIMAL_DATA = {
    "x": (0.0,) * 8 + (3.0,) * 6 + (12.0,),
    "K": 2,
    "prior_precision": 1.0,
    "variance": 1.0,
}


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
    seed eq. (54)/(63)).
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



def _builder_inputs(x, K, family, prior_precision, variance, pi_min, init):
    """Validated data and arguments, the box of :func:`bgmm_bounds` and the starting point,
    shared by the Pyomo and CVXPY builders."""
    xv = check_data(x)
    K, lam = _check_args(K, family, prior_precision, variance, pi_min)
    bnd = bgmm_bounds(xv, K, family, lam, variance, pi_min)
    start = default_init(xv, K, family, lam, variance, pi_min)
    if init is not None:
        start.update({k: np.asarray(v, dtype=float) if k != "tau" else float(v) for k, v in init.items()})
    return xv, K, lam, xv.size, _learned(variance), bnd, start

def _symmetry_mode(v):
    if v is False or v is None:
        return None
    if v is True or v == "phi":
        return "phi"
    if v == "mu":
        return "mu"
    raise ValueError(f"symmetry_breaking must be False, True, 'phi' or 'mu', got {v!r}")


def symmetry_anchors(x, K: int) -> list:
    """Anchor observations ``i_0, ..., i_{K-2}`` of the ``'phi'`` symmetry breaking: the points
    at the ``j/(K-1)`` quantiles of the data (distinct indices; any choice is valid, spread-out
    points tend to belong to different components)."""
    xv = np.asarray(x, dtype=float)
    order = np.argsort(xv, kind="stable")
    out = []
    for j in range(K - 1):
        pos = int(round(j * (xv.size - 1) / max(K - 1, 1)))
        cand = [int(order[p]) for p in list(range(pos, xv.size)) + list(range(pos - 1, -1, -1))]
        out.append(next(i for i in cand if i not in out) if len(out) < xv.size else int(order[pos]))
    return out


def bgmm_pyomo(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
               bounds: bool = True, pi_min: float = 1e-6, init: dict | None = None,
               symmetry_breaking: bool = False):
    r"""Pyomo ``ConcreteModel`` whose objective value IS the negative ELBO (minimised).

    Variables: ``phi[i,k]`` in [0, 1], ``pi[k]`` in [pi_min, 1], and ``mu[k]`` (known
    variance) or ``eta[k]``, ``tau`` (learned variance, natural parameters), plus ``v[k]``
    (or ``w[k]``) for the gaussian family. Constraints ``simplex_phi[i]``:
    ``sum_k phi[i,k] == 1`` and ``simplex_pi``: ``sum_k pi[k] == 1``. ``bounds=True`` adds the
    finite bounds of :func:`bgmm_bounds` (needed by ``gop`` and SCIP); ``bounds=False`` keeps
    only the domain bounds (``phi``, ``pi``, positivity). ``init`` (a params dict as for
    :func:`neg_elbo`) sets starting values; default :func:`default_init`.
    ``symmetry_breaking``: the objective is invariant under relabelling the components, so
    constraints that keep one representative of every relabelling class leave the optimum
    unchanged (docs/gop_bgmm.md §16). ``'phi'`` (or ``True``) adds the linear rows
    ``break_sym[j,k]: phi[i_j,j] >= phi[i_j,k]`` (``k > j``, anchor points ``i_j`` from
    :func:`symmetry_anchors`): constraints of the relaxed-dual block only, which ``gop`` keeps
    in its relaxed duals; ``'mu'`` adds ``order_mu[k]: mu[k] <= mu[k+1]`` (``eta`` for a learned
    variance), which ``gop`` must dualise (slower for ``gop``, see the docs).
    """
    import pyomo.environ as pyo

    xv, K, lam, N, learned, bnd, start = _builder_inputs(x, K, family, prior_precision, variance, pi_min, init)

    m = pyo.ConcreteModel(name=f"bgmm_{family}_{'learned' if learned else 'known'}")
    m.I = pyo.RangeSet(0, N - 1)
    m.K = pyo.RangeSet(0, K - 1)
    m.phi = pyo.Var(m.I, m.K, bounds=(0.0, 1.0), initialize=lambda _, i, k: float(start["phi"][i, k]))
    m.pi = pyo.Var(m.K, bounds=(float(pi_min), 1.0), initialize=lambda _, k: float(start["pi"][k]))
    m.simplex_phi = pyo.Constraint(m.I, rule=lambda mm, i: sum(mm.phi[i, k] for k in mm.K) == 1)
    m.simplex_pi = pyo.Constraint(expr=sum(m.pi[k] for k in m.K) == 1)
    log = pyo.log
    pos_floor = 1e-12  # domain of log v / log tau when no finite bounds are requested

    if not learned:
        tau = 1.0 / float(variance)
        mb = bnd["mu"] if bounds else (None, None)
        m.mu = pyo.Var(m.K, bounds=mb, initialize=lambda _, k: float(start["mu"][k]))
        fit = sum(0.5 * tau * m.phi[i, k] * (float(xv[i]) - m.mu[k]) ** 2 for i in m.I for k in m.K)
        prior = sum(0.5 * lam * m.mu[k] ** 2 for k in m.K)
        const = 0.5 * N * (LOG2PI - math.log(tau)) + 0.5 * K * (LOG2PI - math.log(lam))
        if family == "gaussian":
            vb = bnd["v"] if bounds else (pos_floor, None)
            m.v = pyo.Var(m.K, bounds=vb, initialize=lambda _, k: float(start["v"][k]))
            fit = fit + sum(0.5 * tau * m.phi[i, k] * m.v[k] for i in m.I for k in m.K)
            prior = prior + sum(0.5 * lam * m.v[k] - 0.5 * log(m.v[k]) for k in m.K)
            const -= 0.5 * K * (LOG2PI + 1.0)
    else:
        tb = bnd["tau"] if bounds else (pos_floor, None)
        eb = bnd["eta"] if bounds else (None, None)
        m.tau = pyo.Var(bounds=tb, initialize=float(start["tau"]))
        m.eta = pyo.Var(m.K, bounds=eb, initialize=lambda _, k: float(start["eta"][k]))
        # tau (x - mu)^2 = tau x^2 - 2 x eta + eta^2 / tau: linear in phi, jointly convex in (eta, tau)
        fit = sum(m.phi[i, k] * (0.5 * float(xv[i]) ** 2 * m.tau - float(xv[i]) * m.eta[k]
                                  + 0.5 * (m.eta[k] ** 2 / m.tau)) for i in m.I for k in m.K)
        prior = sum(0.5 * lam * (m.eta[k] ** 2 / m.tau) for k in m.K)
        const = 0.5 * N * LOG2PI + 0.5 * K * (LOG2PI - math.log(lam))
        if family == "gaussian":
            wb = bnd["w"] if bounds else (pos_floor, None)
            m.w = pyo.Var(m.K, bounds=wb, initialize=lambda _, k: float(start["w"][k]))
            fit = fit + sum(0.5 * m.phi[i, k] * m.w[k] for i in m.I for k in m.K)
            # the prior's -1/2 log tau and the entropy's +1/2 log tau cancel (docs, learned variance)
            prior = prior + sum(0.5 * lam * m.w[k] - 0.5 * log(m.w[k]) for k in m.K) - 0.5 * N * log(m.tau)
            const -= 0.5 * K * (LOG2PI + 1.0)
        else:
            prior = prior - 0.5 * (N + K) * log(m.tau)
    mode = _symmetry_mode(symmetry_breaking)
    if mode == "mu" and K > 1:
        loc = m.eta if learned else m.mu
        m.order_mu = pyo.Constraint(pyo.RangeSet(0, K - 2), rule=lambda mm, k: loc[k] <= loc[k + 1])
    elif mode == "phi" and K > 1:
        anchors = symmetry_anchors(xv, K)
        pairs = [(j, k) for j in range(K - 1) for k in range(j + 1, K)]
        m.break_sym = pyo.Constraint(pairs, rule=lambda mm, j, k: mm.phi[anchors[j], j] >= mm.phi[anchors[j], k])
    assign = sum(-m.phi[i, k] * log(m.pi[k]) + m.phi[i, k] * log(m.phi[i, k]) for i in m.I for k in m.K)
    m.neg_elbo = pyo.Objective(expr=fit + assign + prior + const, sense=pyo.minimize)
    m._bgmm = {"x": xv, "K": K, "family": family, "prior_precision": lam, "variance": variance,
               "pi_min": pi_min, "symmetry_breaking": mode}
    return m


def pyomo_params(model) -> dict:
    """Read the parameter dict (as for :func:`neg_elbo`) back from a solved :func:`bgmm_pyomo` model."""
    import pyomo.environ as pyo

    info = model._bgmm
    N, K = info["x"].size, info["K"]
    out = {"phi": np.array([[pyo.value(model.phi[i, k]) for k in range(K)] for i in range(N)]),
           "pi": np.array([pyo.value(model.pi[k]) for k in range(K)])}
    for name in ("mu", "v", "eta", "w"):
        if hasattr(model, name):
            out[name] = np.array([pyo.value(getattr(model, name)[k]) for k in range(K)])
    if hasattr(model, "tau"):
        out["tau"] = float(pyo.value(model.tau))
    return out


def set_pyomo_params(model, params: dict):
    """Write a parameter dict into the variables of a :func:`bgmm_pyomo` model (starting point)."""
    N, K = model._bgmm["x"].size, model._bgmm["K"]
    for i in range(N):
        for k in range(K):
            model.phi[i, k].set_value(float(params["phi"][i, k]), skip_validation=True)
    for name in ("pi", "mu", "v", "eta", "w"):
        if name in params and hasattr(model, name):
            for k in range(K):
                getattr(model, name)[k].set_value(float(params[name][k]), skip_validation=True)
    if "tau" in params and hasattr(model, "tau"):
        model.tau.set_value(float(params["tau"]), skip_validation=True)


def bgmm_cvxpy(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
               bounds: bool = True, pi_min: float = 1e-6, init: dict | None = None,
               symmetry_breaking: bool = False):
    r"""``cvxpy.Problem`` with the same negative-ELBO objective as :func:`bgmm_pyomo` (not DCP).

    Variables (``prob.var_dict``): ``phi`` (N, K), ``pi`` (K,), ``mu`` (K,) or ``eta`` (K,),
    ``tau`` (scalar), and ``v`` / ``w`` (K,) for the gaussian family. The box of
    :func:`bgmm_bounds` is given as variable ``bounds=`` (``bounds=True``), the simplex rows as
    constraints; starting values (``var.value``) from ``init`` or :func:`default_init`.
    ``symmetry_breaking``: as :func:`bgmm_pyomo` (``'phi'``/``True``: ``phi[i_j, j] >= phi[i_j, k]``
    for ``k > j``; ``'mu'``: ``mu[:-1] <= mu[1:]``, ``eta`` for a learned variance).
    """
    import cvxpy as cp

    xv, K, lam, N, learned, bnd, start = _builder_inputs(x, K, family, prior_precision, variance, pi_min, init)

    def var(name, shape, box):
        lo, hi = box
        v = cp.Variable(shape, name=name, bounds=[lo, hi]) if (lo is not None or hi is not None) \
            else cp.Variable(shape, name=name)
        v.value = np.asarray(start[name], dtype=float).reshape(shape)
        return v

    def box(name, domain):
        return bnd[name] if bounds else domain

    phi = var("phi", (N, K), (0.0, 1.0))
    pi = var("pi", (K,), (float(pi_min), 1.0))
    ones_n = np.ones((N, 1))
    X = np.repeat(xv[:, None], K, axis=1)
    cons = [cp.sum(phi, axis=1) == 1, cp.sum(pi) == 1]
    log_pi = ones_n @ cp.reshape(cp.log(pi), (1, K), order="C")
    assign = cp.sum(-cp.multiply(phi, log_pi)) + cp.sum(-cp.entr(phi))
    pos = (1e-12, None)  # domain of log v / log tau without finite bounds
    if not learned:
        tau = 1.0 / float(variance)
        mu = var("mu", (K,), box("mu", (None, None)))
        MU = ones_n @ cp.reshape(mu, (1, K), order="C")
        obj = 0.5 * tau * cp.sum(cp.multiply(phi, cp.square(X - MU))) + 0.5 * lam * cp.sum_squares(mu)
        const = 0.5 * N * (LOG2PI - math.log(tau)) + 0.5 * K * (LOG2PI - math.log(lam))
        if family == "gaussian":
            v = var("v", (K,), box("v", pos))
            V = ones_n @ cp.reshape(v, (1, K), order="C")
            obj = obj + 0.5 * tau * cp.sum(cp.multiply(phi, V)) + 0.5 * lam * cp.sum(v) - 0.5 * cp.sum(cp.log(v))
            const -= 0.5 * K * (LOG2PI + 1.0)
    else:
        tau = var("tau", (), box("tau", pos))
        eta = var("eta", (K,), box("eta", (None, None)))
        ETA = ones_n @ cp.reshape(eta, (1, K), order="C")
        qol = cp.hstack([cp.quad_over_lin(eta[k], tau) for k in range(K)])
        QOL = ones_n @ cp.reshape(qol, (1, K), order="C")
        TAU = (0.5 * xv ** 2)[:, None] @ cp.reshape(tau, (1, 1), order="C") @ np.ones((1, K))
        obj = (cp.sum(cp.multiply(phi, TAU)) - cp.sum(cp.multiply(phi, cp.multiply(X, ETA)))
               + 0.5 * cp.sum(cp.multiply(phi, QOL)) + 0.5 * lam * cp.sum(qol))
        const = 0.5 * N * LOG2PI + 0.5 * K * (LOG2PI - math.log(lam))
        if family == "gaussian":
            w = var("w", (K,), box("w", pos))
            W = ones_n @ cp.reshape(w, (1, K), order="C")
            obj = obj + 0.5 * cp.sum(cp.multiply(phi, W)) + 0.5 * lam * cp.sum(w) - 0.5 * cp.sum(cp.log(w)) \
                - 0.5 * N * cp.log(tau)
            const -= 0.5 * K * (LOG2PI + 1.0)
        else:
            obj = obj - 0.5 * (N + K) * cp.log(tau)
    mode = _symmetry_mode(symmetry_breaking)
    if mode == "mu" and K > 1:
        loc = eta if learned else mu
        cons.append(loc[:-1] <= loc[1:])
    elif mode == "phi" and K > 1:
        anchors = symmetry_anchors(xv, K)
        for j in range(K - 1):
            cons.append(phi[anchors[j], j + 1:] <= phi[anchors[j], j])
    return cp.Problem(cp.Minimize(obj + assign + const), cons)


# ----------------------------------------------------------------------------------------
# variational EM baseline (seed App. B.3 / C.3; random initialisation of §3.2)
# ----------------------------------------------------------------------------------------
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
    """One E-step (seed eq. (54)/(63)) then one exact M-step (eq. (52)-(55)/(61)-(65)).

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


class BayesianGMMVEM:
    """scikit-learn style wrapper: ``BayesianGMMVEM(K).fit(x)`` keeps the best of the restarts."""

    def __init__(self, n_components=2, family="point", prior_precision=1.0, variance=1.0,
                 n_restarts=100, seed=0):
        self.n_components, self.family = n_components, family
        self.prior_precision, self.variance = prior_precision, variance
        self.n_restarts, self.seed = n_restarts, seed

    def fit(self, x):
        res = vem(x, self.n_components, self.family, self.prior_precision, self.variance,
                  self.n_restarts, self.seed)
        best = res.best
        self.result_ = res
        self.neg_elbo_ = best.neg_elbo
        self.params_ = best.params
        self.weights_ = best.params["pi"]
        self.means_ = (best.params["mu"] if "mu" in best.params else best.params["eta"] / best.params["tau"])
        return self

    def predict_proba(self, x):
        xv = check_data(x)
        p = self.params_
        _, v, tau = _moments(p, self.variance, self.family)
        s = _profile_costs(xv, self.means_, v, tau, p["pi"])
        return np.exp(s - logsumexp(s, axis=1)[:, None])


# ----------------------------------------------------------------------------------------
# independent reference: dense multistart on the low-dimensional profile
# ----------------------------------------------------------------------------------------
def _theta_to_params(theta, K, family, variance, learned):
    """Unconstrained theta -> moment params: means, softmax(pi logits), log v, log tau."""
    mu = theta[:K]
    z = np.concatenate([theta[K:2 * K - 1], [0.0]])
    pi = np.exp(z - logsumexp(z))
    j = 2 * K - 1
    p = {"mu": mu, "pi": pi}
    if family == "gaussian":
        p["v"] = np.exp(theta[j:j + K])
        j += K
    if learned:
        p["tau"] = float(np.exp(theta[j]))
    return p


def profile_multistart(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
                       n_starts: int = 4096, n_polish: int = 64, seed: int = 0) -> dict:
    r"""Independent global reference: dense multistart on the phi-profiled objective.

    ``g(theta) = min_phi f(phi, theta)`` (:func:`profile_neg_elbo`) depends only on the
    ``(2K - 1)`` (point) / ``(3K - 1)`` (gaussian) [+1 learned] continuous parameters. Starts:
    a scrambled Sobol sample of ``n_starts`` points over the bounding box of
    :func:`bgmm_bounds` (means), the simplex (weights) and ``[v_lo, v_hi]`` (log scale); each
    is improved by 200 vectorised EM steps (monotone in ``g``); the ``n_polish`` best distinct
    ones are finished by VEM to convergence and L-BFGS on ``g``. Returns
    ``{"value", "params" (model form), "values" (all polished)}``. No restriction
    ``pi >= pi_min`` is imposed: compare with care when the optimal weights are tiny.
    """
    from scipy.optimize import minimize
    from scipy.stats import qmc

    xv = check_data(x)
    K, lam = _check_args(K, family, prior_precision, variance, 1e-300)
    learned = _learned(variance)
    N = xv.size
    a, b = min(0.0, float(xv.min())), max(0.0, float(xv.max()))
    if learned:
        bnd = bgmm_bounds(xv, K, family, lam, variance)
        tlo, thi = bnd["tau"]
    else:
        tlo = thi = 1.0 / float(variance)
    dim = K + (K - 1) + (K if family == "gaussian" else 0) + (1 if learned else 0)
    sob = qmc.Sobol(dim, scramble=True, seed=seed).random(n_starts)
    mus = a + (b - a) * sob[:, :K]
    e = -np.log(np.clip(sob[:, K:2 * K - 1], 1e-12, 1.0))
    pis = np.concatenate([e, np.full((n_starts, 1), 1.0)], axis=1) if K > 1 else np.ones((n_starts, 1))
    pis = pis / pis.sum(axis=1, keepdims=True)
    j = 2 * K - 1
    taus = np.full(n_starts, tlo)
    if learned:
        taus = np.exp(np.log(tlo) + (np.log(thi) - np.log(tlo)) * sob[:, -1])
    if family == "gaussian":
        vlo = 1.0 / (taus * N + (lam * taus if learned else lam))
        vhi = 1.0 / (lam * taus if learned else lam)
        vs = np.exp(np.log(vlo)[:, None] + (np.log(vhi) - np.log(vlo))[:, None] * sob[:, j:j + K])
    else:
        vs = np.zeros((n_starts, K))

    # vectorised EM over all starts (same updates as vem_step)
    M, P, V, T = mus, pis, vs, taus
    for _ in range(200):
        with np.errstate(divide="ignore"):
            s = np.log(P)[:, None, :] - 0.5 * T[:, None, None] * ((xv[None, :, None] - M[:, None, :]) ** 2
                                                                 + V[:, None, :])
        phi = np.exp(s - logsumexp(s, axis=2)[:, :, None])
        nk = phi.sum(axis=1)
        sx = np.einsum("sik,i->sk", phi, xv)
        P = nk / N
        if learned:
            M = sx / (nk + lam)
            S = np.einsum("sik,sik->s", phi, (xv[None, :, None] - M[:, None, :]) ** 2) + lam * np.sum(M * M, 1)
            T = (N + K if family == "point" else N) / np.maximum(S, 1e-300)
            if family == "gaussian":
                V = 1.0 / (T[:, None] * (nk + lam))
        else:
            M = T[:, None] * sx / (T[:, None] * nk + lam)
            if family == "gaussian":
                V = 1.0 / (T[:, None] * nk + lam)

    def g_of(mu, pi, v, tau):
        p = {"mu": mu, "pi": pi, "tau": tau, "v": v}
        if learned:
            p = {"eta": tau * mu, "pi": pi, "tau": tau, "w": tau * v}
        return profile_neg_elbo(p, xv, family, lam, variance)

    vals = np.array([g_of(M[s], P[s], V[s], T[s]) for s in range(n_starts)])
    order = np.argsort(vals)
    chosen, keys = [], set()
    for s in order:
        key = tuple(np.round(np.sort(M[s]), 4))
        if key in keys:
            continue
        keys.add(key)
        chosen.append(s)
        if len(chosen) >= n_polish:
            break

    def theta_obj(theta):
        p = _theta_to_params(theta, K, family, variance, learned)
        return g_of(p["mu"], p["pi"], p.get("v", np.zeros(K)), p.get("tau", tlo))

    best = None
    polished = []
    for s in chosen:
        init = {"mu": M[s], "pi": P[s], "tau": float(T[s]), "phi": None}
        if family == "gaussian":
            init["v"] = V[s]
        init["phi"] = np.full((N, K), 1.0 / K)
        run = vem_single(xv, K, family, lam, variance, init, tol=1e-13, max_iter=3000)
        p = run.params
        mu, v, tau = _moments(p, variance, family)
        pi = np.clip(p["pi"], 1e-300, None)
        theta = np.concatenate([mu, np.log(pi[:-1]) - np.log(pi[-1])])
        if family == "gaussian":
            theta = np.concatenate([theta, np.log(v)])
        if learned:
            theta = np.concatenate([theta, [math.log(tau)]])
        r = minimize(theta_obj, theta, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000})
        val, th = (float(r.fun), r.x) if r.fun < run.neg_elbo else (run.neg_elbo, theta)
        polished.append(val)
        if best is None or val < best[0]:
            best = (val, th)
    q = _theta_to_params(best[1], K, family, variance, learned)
    mp = {"mu": q["mu"], "pi": q["pi"], "tau": q.get("tau", tlo)}
    if family == "gaussian":
        mp["v"] = q["v"]
    if learned:
        nat = {"eta": mp["tau"] * q["mu"], "pi": q["pi"], "tau": mp["tau"]}
        if family == "gaussian":
            nat["w"] = mp["tau"] * q["v"]
        mp = nat
    val, phi = profile_neg_elbo(mp, xv, family, lam, variance, return_phi=True)
    mp["phi"] = phi
    return {"value": float(val), "params": mp, "values": np.sort(np.array(polished))}


def bgmm_profile_pyomo(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
                       pi_min: float = 1e-6):
    r"""Pyomo model of the phi-profiled objective ``g(mu, pi[, v, tau]) = min_phi f`` (reference only).

    ``g = -sum_j c_j log sum_k pi_k exp(-tau/2 ((u_j - mu_k)^2 + v_k)) + (constants and prior terms
    of f)`` over the distinct data values ``u_j`` with multiplicities ``c_j`` (the minimising
    ``phi`` is unique and equal for equal observations). Same optimal value as
    :func:`bgmm_pyomo` (docs/gop_bgmm.md, "Profile"), with only ``2K - 1`` (point) or ``3K - 1``
    (gaussian) [+1 learned] variables, so SCIP certifies it quickly. Moment parameters are used
    (``mu``, ``v``, ``tau``); bounds as in :func:`bgmm_bounds` (``tau m`` -> ``m``).
    """
    import pyomo.environ as pyo

    xv = check_data(x)
    K, lam = _check_args(K, family, prior_precision, variance, pi_min)
    N = xv.size
    learned = _learned(variance)
    bnd = bgmm_bounds(xv, K, family, lam, variance, pi_min)
    u, cnt = np.unique(xv, return_counts=True)
    a, b = min(0.0, float(xv.min())), max(0.0, float(xv.max()))
    start = default_init(xv, K, family, lam, variance, pi_min)
    smu, sv, stau = _moments(start, variance, family)
    m = pyo.ConcreteModel(name="bgmm_profile")
    m.K = pyo.RangeSet(0, K - 1)
    m.pi = pyo.Var(m.K, bounds=(float(pi_min), 1.0), initialize=lambda _, k: float(start["pi"][k]))
    m.mu = pyo.Var(m.K, bounds=(a, b), initialize=lambda _, k: float(smu[k]))
    m.simplex_pi = pyo.Constraint(expr=sum(m.pi[k] for k in m.K) == 1)
    if learned:
        m.tau = pyo.Var(bounds=bnd["tau"], initialize=float(stau))
        tau = m.tau
        lam_eff = lam * m.tau
        log_tau = pyo.log(m.tau)
    else:
        tau = 1.0 / float(variance)
        lam_eff = lam
        log_tau = math.log(tau)
    if family == "gaussian":
        if learned:
            vb = (1.0 / (bnd["tau"][1] * (N + lam)), 1.0 / (lam * bnd["tau"][0]))
        else:
            vb = bnd["v"]
        m.v = pyo.Var(m.K, bounds=vb, initialize=lambda _, k: float(sv[k]))
        vk = [m.v[k] for k in range(K)]
    else:
        vk = [0.0] * K
    mix = sum(-float(c) * pyo.log(sum(m.pi[k] * pyo.exp(-0.5 * tau * ((float(uj) - m.mu[k]) ** 2 + vk[k]))
                                      for k in range(K))) for uj, c in zip(u, cnt))
    obj = mix + 0.5 * N * LOG2PI - 0.5 * N * log_tau
    obj = obj + sum(0.5 * lam_eff * (m.mu[k] ** 2 + vk[k]) for k in range(K)) + 0.5 * K * LOG2PI
    obj = obj - (0.5 * K * (math.log(lam) + log_tau) if learned else 0.5 * K * math.log(lam))
    if family == "gaussian":
        obj = obj - sum(0.5 * (LOG2PI + 1.0 + pyo.log(m.v[k])) for k in range(K))
    m.profile = pyo.Objective(expr=obj, sense=pyo.minimize)
    return m


def scip_profile_reference(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
                           time_limit: float = 300.0, gap: float = 1e-7, pi_min: float = 1e-6):
    """Certify the global optimum with SCIP on :func:`bgmm_profile_pyomo` (few variables).

    Returns ``{"status", "value", "lower", "upper", "time", "params"}``.
    """
    import pyomo.environ as pyo

    m = bgmm_profile_pyomo(x, K, family, prior_precision, variance, pi_min)
    t0 = time.perf_counter()
    res = pyo.SolverFactory("scip_direct").solve(m, load_solutions=False, options={
        "limits/time": float(time_limit), "limits/gap": float(gap)})
    out = {"status": str(res.solver.termination_condition), "time": time.perf_counter() - t0,
           "lower": None, "upper": None, "value": None, "params": None}
    try:
        out["lower"] = float(res.problem.lower_bound)
        out["upper"] = float(res.problem.upper_bound)
        m.solutions.load_from(res)
        out["value"] = float(pyo.value(m.profile))
        out["params"] = {"mu": np.array([pyo.value(m.mu[k]) for k in range(int(K))]),
                         "pi": np.array([pyo.value(m.pi[k]) for k in range(int(K))])}
        if hasattr(m, "v"):
            out["params"]["v"] = np.array([pyo.value(m.v[k]) for k in range(int(K))])
        if hasattr(m, "tau"):
            out["params"]["tau"] = float(pyo.value(m.tau))
    except Exception:  # no incumbent (time limit before a feasible point)
        pass
    return out


def scip_reference(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
                   time_limit: float = 300.0, gap: float = 1e-6, pi_min: float = 1e-6, tee: bool = False,
                   symmetry_breaking=False):
    """Solve :func:`bgmm_pyomo` (with ``symmetry_breaking`` as given) with SCIP through Pyomo ``scip_direct``.

    Returns ``{"status", "value" (objective at SCIP's point), "lower", "upper", "time", "params"}``.
    """
    import pyomo.environ as pyo

    m = bgmm_pyomo(x, K, family, prior_precision, variance, bounds=True, pi_min=pi_min,
                   symmetry_breaking=symmetry_breaking)
    solver = pyo.SolverFactory("scip_direct")
    t0 = time.perf_counter()
    opts = {"limits/time": float(time_limit), "limits/gap": float(gap)}
    if not tee:
        # SCIP's log goes through Pyomo's fd capture; on long runs that pipe has deadlocked
        # (SCIP blocked in write(), the reader thread idle), so keep SCIP silent unless asked
        opts["display/verblevel"] = 0
    res = solver.solve(m, tee=tee, load_solutions=False, options=opts)
    elapsed = time.perf_counter() - t0
    tc = str(res.solver.termination_condition)
    out = {"status": tc, "time": elapsed, "lower": None, "upper": None, "value": None, "params": None}
    try:
        out["lower"] = float(res.problem.lower_bound)
        out["upper"] = float(res.problem.upper_bound)
    except (TypeError, ValueError, AttributeError):
        pass
    if len(res.solution) > 0 or tc in ("optimal", "maxTimeLimit", "feasible"):
        try:
            m.solutions.load_from(res)
            out["params"] = pyomo_params(m)
            # evaluated with 0 log 0 = 0 (Pyomo's log(0) raises when SCIP returns phi = 0)
            out["value"] = neg_elbo(out["params"], x, family, prior_precision, variance)
        except Exception:  # no incumbent loaded (e.g. time limit before any feasible point)
            pass
    return out
