r"""Bayesian Gaussian mixture ELBOs as biconvex optimisation models (Saddiki, Trapp & Flaherty 2017, §3-4, App. B-C).

Model (1-D data ``x_1..x_N``, ``K`` components; Saddiki, Trapp & Flaherty 2017, eq. (22))::

    mu_k ~ N(0, 1/lambda)                     (known variance sigma^2 = 1/tau)
    mu_k | tau ~ N(0, 1/(lambda tau))         (learned variance, conjugate prior)
    z_i ~ Cat(pi),   x_i | z_i = k ~ N(mu_k, 1/tau)

``pi`` (and ``tau`` when learned) are point estimates. Variational families:

* ``family='point'`` (Saddiki et al. 2017, §3, eq. (23)-(25)): ``q(z_i) = Cat(phi_i)``, point mass on ``mu``.
* ``family='gaussian'`` (Saddiki et al. 2017, §4, eq. (26)-(28)): ``q(z_i) = Cat(phi_i)``, ``q(mu_k) = N(m_k, v_k)``.

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
:func:`profile_neg_log_lik`, :func:`profile_neg_elbo`, :func:`bgmm_bounds`, :data:`MINIMAL_DATA`.

Layout: :mod:`.bgmm_elbo` (negative ELBO, data checks, proven bounds, starting point); this module
holds the Pyomo and CVXPY builders and re-exports the ELBO functions. The variational EM baseline
(App. B.3 / C.3 with the random initialisation of §3.2) is :mod:`varopt.baselines.bgmm_vem`; the
independent global references (dense multistart, SCIP) are in the benchmarks (``bgmm_reference``).
"""
from __future__ import annotations

import math

import numpy as np

from .bgmm_elbo import (  # noqa: F401  (re-exported: this module's import path is public)
    bgmm_bounds,
    _check_args,
    check_data,
    _const_terms,
    default_init,
    FAMILIES,
    _finite_positive,
    _learned,
    LOG2PI,
    min_scatter,
    _moments,
    _mstep_params,
    neg_elbo,
    _profile_costs,
    profile_neg_elbo,
    profile_neg_log_lik,
    _xlogy,
)
#: Minimal data set (found by ``benchmarks/find_minimal_dataset.py``; see docs/gop_bgmm.md):
#: repeated observations plus outliers on which variational EM from 100 random restarts
#: (seed 0) ends at a non-global optimum in most restarts. Use ``bgmm_pyomo(**MINIMAL_DATA)``.
MINIMAL_DATA = {
    "x": (0.0,) * 8 + (3.0,) * 6 + (12.0,),
    "K": 2,
    "prior_precision": 1.0,
    "variance": 1.0,
}



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
