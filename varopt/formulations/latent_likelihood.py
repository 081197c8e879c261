"""Latent conditional likelihood (Jebara & Choromanska 2012, section 4, Eq. 2): mixtures of Gaussian-gated logistic regressions.

Each class ``y`` has ``m`` hidden states; with ``phi(x) = x`` and the unit-covariance Gaussian
family ``p(x | y, m) = N(x; theta_{y,m}, I)`` the change of variables
``exp(nu_{y,m}) = pi_{y,m} exp(-a(theta_{y,m}))`` (``a(theta) = ||theta||^2 / 2``) turns the
conditional likelihood into (section 4)

    L(theta) = prod_j  sum_m exp(theta^T f_{j,y_j,m}) / sum_{y,m} exp(theta^T f_{j,y,m}),

``f_{j,y,m}`` = ``[x_j; 1]`` placed in block ``(y, m)`` of ``theta in R^{|Y| m (d+1)}`` (block
layout ``[theta_{y,m}; nu_{y,m}]``). We minimise ``-log L(theta) + lam/2 ||theta||^2``: the
denominators are log-partition functions (coefficient +1) and the numerators log-sum-exp terms
with coefficient -1, which the majorize solver bounds with Jensen's inequality (section 4).

Baselines: :func:`fit_em` (EM on the *joint* likelihood: a mixture of ``m`` unit-variance
Gaussians per class, mapped into the same parameters) and :func:`fit_bfgs` (scipy BFGS on the
identical objective and gradient).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError
from ..program import Program
from ..program.expression import Expression
from ..program.terms import LseGroup, QuadraticTerms
from .logistic import _class_index


def _block_rows(X, blocks, nblocks):
    """Sparse rows: row r = [x_r, 1] in block blocks[r] (block size d+1)."""
    t, d = X.shape
    p = d + 1
    Xa = np.hstack([X, np.ones((t, 1))])
    cols = blocks[:, None] * p + np.arange(p)[None, :]
    return sp.csr_matrix((Xa.ravel(), cols.ravel(), np.arange(0, t * p + 1, p)), shape=(t, nblocks * p))


def latent_program(X, y, m: int, lam: float = 0.0, classes=None) -> Program:
    """Program of ``-log L(theta) + lam/2 ||theta||^2`` (Eq. 2) for ``m`` hidden states per class."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] == 0:
        raise InputDataError("X must be a non-empty 2-D array")
    if not np.all(np.isfinite(X)):
        raise InputDataError("X contains NaN or inf")
    if m < 1:
        raise InputDataError(f"the number of hidden states m must be >= 1, got {m}")
    classes = np.unique(y) if classes is None else np.asarray(classes)
    yi = _class_index(np.asarray(y), classes)  # exact: a label outside classes is an error, not a neighbour
    t, d = X.shape
    C = classes.size
    nb = C * m
    n = nb * (d + 1)
    # denominators: sample j, all (y, m) blocks
    rep = np.repeat(np.arange(t), nb)
    den = _block_rows(X[rep], np.tile(np.arange(nb), t), nb)
    # numerators: sample j, blocks (y_j, m)
    rep2 = np.repeat(np.arange(t), m)
    num = _block_rows(X[rep2], (yi[rep2] * m + np.tile(np.arange(m), t)), nb)
    A = sp.vstack([den, num]).tocsr()
    seg = np.concatenate([rep, t + rep2])
    coef = np.concatenate([np.ones(t), -np.ones(t)])
    lse = LseGroup(A=A, b=np.zeros(A.shape[0]), seg=seg, coef=coef, label=np.concatenate([np.arange(t)] * 2))
    quad = QuadraticTerms(np.arange(n), np.arange(n), np.full(n, 0.5 * lam), n) if lam > 0 else None
    names = [f"theta[{c},{k},{j}]" if j < d else f"nu[{c},{k}]" for c in range(C) for k in range(m)
             for j in range(d + 1)]
    obj = Expression(n, quadratic=quad, lse=[lse])
    return Program(names, np.full(n, -np.inf), np.full(n, np.inf), obj, objective_name="neg_latent_loglik")


def conditional_loglik(theta, X, y, m: int, classes) -> float:
    """``log L(theta)`` (Eq. 2) on a data set (the test log-likelihood of Table 2)."""
    prog = latent_program(X, y, m, 0.0, classes)
    return -prog.objective.value(theta)


def predict_proba(theta, X, m: int, n_classes: int):
    X = np.asarray(X, dtype=float)
    t, d = X.shape
    Th = np.asarray(theta).reshape(n_classes, m, d + 1)
    S = np.einsum("td,cmd->tcm", X, Th[:, :, :d]) + Th[:, :, d][None]
    mx = S.max(axis=(1, 2), keepdims=True)
    P = np.exp(S - mx).sum(axis=2)
    return P / P.sum(axis=1, keepdims=True)


def fit_em(X, y, m: int, classes=None, n_iter: int = 200, seed: int = 0, tol: float = 1e-10):
    """EM on the joint likelihood ``p(x, y) = sum_m pi_{y,m} N(x; mu_{y,m}, I)``; returns theta (Eq. 2 layout).

    ``theta_{y,m} = mu_{y,m}``, ``nu_{y,m} = log pi_{y,m} - ||mu_{y,m}||^2 / 2``.
    """
    rng = np.random.default_rng(seed)
    X = np.asarray(X, dtype=float)
    classes = np.unique(y) if classes is None else np.asarray(classes)
    yi = _class_index(np.asarray(y), classes)  # exact: a label outside classes is an error, not a neighbour
    t, d = X.shape
    theta = np.zeros((classes.size, m, d + 1))
    for c in range(classes.size):
        Xc = X[yi == c]
        nc = Xc.shape[0]
        if nc == 0:
            theta[c, :, d] = -1e3
            continue
        mu = Xc[rng.choice(nc, size=m, replace=nc < m)] + 1e-3 * rng.normal(size=(m, d))
        w = np.full(m, 1.0 / m)
        prev = -np.inf
        for _ in range(n_iter):
            S = -0.5 * ((Xc[:, None, :] - mu[None]) ** 2).sum(-1) + np.log(w)[None]
            mx = S.max(1, keepdims=True)
            R = np.exp(S - mx)
            ll = float(np.sum(mx[:, 0] + np.log(R.sum(1))))
            R /= R.sum(1, keepdims=True)
            Nk = R.sum(0) + 1e-12
            mu = (R.T @ Xc) / Nk[:, None]
            w = Nk / Nk.sum()
            if ll - prev <= tol * max(1.0, abs(ll)):
                break
            prev = ll
        prior = nc / t
        theta[c, :, :d] = mu
        theta[c, :, d] = np.log(prior * w) - 0.5 * (mu ** 2).sum(1)
    return theta.ravel()


def fit_bfgs(program: Program, x0, max_iter: int = 1000, gtol: float = 1e-6):
    """scipy BFGS on the identical objective/gradient of ``program``; returns the OptimizeResult."""
    from scipy.optimize import minimize
    return minimize(program.objective.value, np.asarray(x0, dtype=float), jac=program.objective.gradient,
                    method="BFGS", options={"maxiter": max_iter, "gtol": gtol})


def build_pyomo(X, y, m: int, lam: float = 0.0):
    """Pyomo model maximising ``log L(theta) - lam/2 ||theta||^2`` (numerators and denominators as log(sum(exp)))."""
    import pyomo.environ as pyo
    X = np.asarray(X, dtype=float)
    classes = np.unique(y)
    yi = np.searchsorted(classes, y)
    t, d = X.shape
    C = classes.size
    mdl = pyo.ConcreteModel()
    mdl.theta = pyo.Var(range(C), range(m), range(d), initialize=0.0)
    mdl.nu = pyo.Var(range(C), range(m), initialize=0.0)

    def s(j, c, k):
        return sum(float(X[j, i]) * mdl.theta[c, k, i] for i in range(d)) + mdl.nu[c, k]
    ll = sum(pyo.log(sum(pyo.exp(s(j, int(yi[j]), k)) for k in range(m)))
             - pyo.log(sum(pyo.exp(s(j, c, k)) for c in range(C) for k in range(m))) for j in range(t))
    reg = lam / 2 * (sum(v ** 2 for v in mdl.theta.values()) + sum(v ** 2 for v in mdl.nu.values())) if lam else 0
    mdl.obj = pyo.Objective(expr=ll - reg, sense=pyo.maximize)
    return mdl
