r"""Independent global references for the Bayesian GMM, used to check gop's certified optimum.

``g(theta) = min_phi f(phi, theta)`` (the negative ELBO of :mod:`varopt.formulations.bgmm`
profiled over ``phi``) depends only on the ``2K - 1`` (point) / ``3K - 1`` (gaussian)
[+1 learned] continuous parameters. :func:`profile_multistart` minimises it by dense
multistart (Sobol starts, vectorised EM, polishing); :func:`bgmm_profile_pyomo` states it as
a Pyomo model and :func:`scip_profile_reference` / :func:`scip_reference` solve it or the
full model with SCIP (spatial branch and bound) when installed.
"""
from __future__ import annotations

import math
import time

import numpy as np
from scipy.special import logsumexp

from varopt.formulations.bgmm_elbo import (LOG2PI, _check_args, _learned, _moments, bgmm_bounds, check_data, default_init,
                        neg_elbo, profile_neg_elbo)
from varopt.baselines.bgmm_vem import vem_single


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

    from varopt.formulations.bgmm import bgmm_pyomo, pyomo_params  # the builders import this module: import at call time

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
