"""Larger gop models for the time-limit harness (docs/gop.md, "Time limits on larger models", 2026-11-26).

Hundreds to a few thousand variables, generated from seeds, sized so that gop does not finish in 5 s: the question
is whether ``time_limit`` is honoured, not whether the optimum is certified. Each entry of :data:`MODELS` maps a
name to ``(front, build)``: ``front`` is ``'pyomo'`` (``build()`` returns a ``ConcreteModel``) or ``'cvxpy'``
(``build()`` returns ``(problem, variables)``). :func:`evaluate` is the user's own check of a loaded point (Pyomo
``value()`` of the objective and every active row; CVXPY ``.value`` and ``violation()``).

Models: pooling in the p-form (Haverly 1978's structure, random data: 16 inputs, 8 pools, 12 outputs, 4
qualities, and 20 inputs, 10 pools, 16 outputs, 5 qualities) in Pyomo; rank-5 bilinear matrix factorisation ``min ||X - U V||^2`` (U 50 x 5, V 5 x 60, boxes
[-2, 2]) in Pyomo and CVXPY; NMF 30 x 30 rank 5 (Pyomo); a bilinear QCQP with 500 products in the objective and
10 bilinear rows (Pyomo; CVXPY ``x @ Q @ y``); the sparse bilinear program ``bilinear:200`` of
``scale_energy_gop.py`` (Pyomo); the Bayesian Gaussian mixture negative ELBO of ``varopt.formulations`` with N = 60
points and K = 3 (Pyomo and CVXPY; a biconvex latent-variable model); relaxed 2-D k-means (60 points, K = 4,
Pyomo).
"""
from __future__ import annotations

import numpy as np


def pooling_p(seed=0, I=12, L=6, J=10, K=4):
    """Pooling p-form: flows ``x[i,l]`` (input to pool), ``y[l,j]`` (pool to output), ``z[i,j]`` (bypass), pool
    qualities ``q[l,k]``; quality balance ``sum_i c_ik x_il = q_lk sum_j y_lj`` (bilinear equalities) and output
    specifications ``sum_l q_lk y_lj + sum_i c_ik z_ij <= P_jk (sum_l y_lj + sum_i z_ij)``; maximise profit."""
    import pyomo.environ as pyo
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.5, 4.0, (I, K)).round(2)
    cost = rng.uniform(5, 16, I).round(1)
    price = rng.uniform(9, 20, J).round(1)
    P = rng.uniform(1.5, 3.0, (J, K)).round(2)
    cap_in, cap_pool, dem = rng.uniform(50, 150, I).round(), rng.uniform(80, 200, L).round(), rng.uniform(40, 120, J).round()
    arcs = [(i, l) for i in range(I) for l in range(L) if rng.random() < 0.5]
    m = pyo.ConcreteModel()
    m.x = pyo.Var(arcs, bounds=lambda m, i, l: (0, float(min(cap_in[i], cap_pool[l]))))
    m.y = pyo.Var(range(L), range(J), bounds=lambda m, l, j: (0, float(min(cap_pool[l], dem[j]))))
    m.z = pyo.Var(range(I), range(J), bounds=lambda m, i, j: (0, float(min(cap_in[i], dem[j]))))
    m.q = pyo.Var(range(L), range(K), bounds=lambda m, l, k: (float(c[:, k].min()), float(c[:, k].max())))
    m.obj = pyo.Objective(sense=pyo.maximize, expr=sum(price[j] * (sum(m.y[l, j] for l in range(L))
                                                                   + sum(m.z[i, j] for i in range(I)))
                                                       for j in range(J))
                          - sum(cost[i] * (sum(m.x[a] for a in arcs if a[0] == i) + sum(m.z[i, j] for j in range(J)))
                                for i in range(I)))
    m.bal = pyo.Constraint(range(L), rule=lambda m, l: sum(m.x[a] for a in arcs if a[1] == l)
                           == sum(m.y[l, j] for j in range(J)))
    m.qual = pyo.Constraint(range(L), range(K), rule=lambda m, l, k: sum(c[a[0], k] * m.x[a] for a in arcs if a[1] == l)
                            == m.q[l, k] * sum(m.y[l, j] for j in range(J)))
    m.spec = pyo.Constraint(range(J), range(K), rule=lambda m, j, k: sum(m.q[l, k] * m.y[l, j] for l in range(L))
                            + sum(c[i, k] * m.z[i, j] for i in range(I))
                            <= P[j, k] * (sum(m.y[l, j] for l in range(L)) + sum(m.z[i, j] for i in range(I))))
    m.cin = pyo.Constraint(range(I), rule=lambda m, i: sum(m.x[a] for a in arcs if a[0] == i)
                           + sum(m.z[i, j] for j in range(J)) <= cap_in[i])
    m.cpool = pyo.Constraint(range(L), rule=lambda m, l: sum(m.y[l, j] for j in range(J)) <= cap_pool[l])
    m.dem = pyo.Constraint(range(J), rule=lambda m, j: sum(m.y[l, j] for l in range(L))
                           + sum(m.z[i, j] for i in range(I)) <= dem[j])
    return m


def _lowrank(seed, p, q, r):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(p, r)) @ rng.normal(size=(r, q)) / np.sqrt(r) + 0.1 * rng.normal(size=(p, q))).round(3)


def bmf_pyomo(seed=0, p=50, q=60, r=5, box=2.0):
    """``min ||X - U V||_F^2`` over ``U`` (p x r), ``V`` (r x q) in ``[-box, box]``: biconvex in (U, V)."""
    import pyomo.environ as pyo
    X = _lowrank(seed, p, q, r)
    m = pyo.ConcreteModel()
    m.U = pyo.Var(range(p), range(r), bounds=(-box, box), initialize=0.1)
    m.V = pyo.Var(range(r), range(q), bounds=(-box, box), initialize=0.1)
    m.obj = pyo.Objective(expr=sum((X[i, j] - sum(m.U[i, k] * m.V[k, j] for k in range(r))) ** 2
                                   for i in range(p) for j in range(q)))
    return m


def bmf_cvxpy(seed=0, p=50, q=60, r=5, box=2.0):
    """The same as :func:`bmf_pyomo` in CVXPY: ``sum_squares(X - U @ V)`` (not DCP; gop takes the products)."""
    import cvxpy as cp
    X = _lowrank(seed, p, q, r)
    U = cp.Variable((p, r), bounds=[-box, box])
    V = cp.Variable((r, q), bounds=[-box, box])
    return cp.Problem(cp.Minimize(cp.sum_squares(X - U @ V))), [U, V]


def nmf_pyomo(seed=0, p=30, q=30, r=5):
    """NMF ``min ||X - W H||^2``, ``W, H >= 0`` bounded by ``max X`` (``scale_energy_gop.py``'s ``nmf:30:30:5``
    form, another seed)."""
    import pyomo.environ as pyo
    rng = np.random.default_rng(seed)
    X = rng.random((p, r)) @ rng.random((r, q)) + 0.05 * rng.random((p, q))
    m = pyo.ConcreteModel()
    m.W = pyo.Var(range(p), range(r), bounds=(0, float(X.max())))
    m.H = pyo.Var(range(r), range(q), bounds=(0, float(X.max())))
    m.obj = pyo.Objective(expr=sum((X[i, j] - sum(m.W[i, k] * m.H[k, j] for k in range(r))) ** 2
                                   for i in range(p) for j in range(q)))
    return m


def _qcqp_data(seed, n, terms, rows):
    rng = np.random.default_rng(seed)
    Q = np.zeros((n, n))
    flat = rng.choice(n * n, size=terms, replace=False)
    Q.flat[flat] = rng.normal(size=terms).round(2)
    c, d = rng.normal(size=n).round(2), rng.normal(size=n).round(2)
    R = []
    for _ in range(rows):
        G = np.zeros((n, n))
        G.flat[rng.choice(n * n, size=20, replace=False)] = rng.uniform(0, 1, 20).round(2)
        R.append(G)
    A = rng.uniform(0, 1, (rows, n)).round(2)
    return Q, c, d, R, A


def qcqp_pyomo(seed=0, n=60, terms=500, rows=10):
    """``min c.x + d.y + x^T Q y`` (500 products) s.t. ``x^T G_r y + a_r.x <= 40`` (10 bilinear rows, 20 products
    each), ``sum x <= 3 n``, ``x, y in [0, 10]``: a bilinear QCQP."""
    import pyomo.environ as pyo
    Q, c, d, R, A = _qcqp_data(seed, n, terms, rows)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), bounds=(0, 10))
    m.y = pyo.Var(range(n), bounds=(0, 10))
    nz = list(zip(*np.nonzero(Q)))
    m.obj = pyo.Objective(expr=sum(c[i] * m.x[i] + d[i] * m.y[i] for i in range(n))
                          + sum(Q[i, j] * m.x[i] * m.y[j] for i, j in nz))
    m.g = pyo.Constraint(range(rows), rule=lambda m, r: sum(R[r][i, j] * m.x[i] * m.y[j] for i, j in zip(*np.nonzero(R[r])))
                         + sum(A[r, i] * m.x[i] for i in range(n)) <= 40)
    m.sx = pyo.Constraint(expr=sum(m.x[i] for i in range(n)) <= 3 * n)
    m.sy = pyo.Constraint(expr=sum(m.y[i] for i in range(n)) <= 3 * n)
    return m


def qcqp_cvxpy(seed=0, n=60, terms=500, rows=10):
    """:func:`qcqp_pyomo` in CVXPY (``x @ Q @ y``)."""
    import cvxpy as cp
    Q, c, d, R, A = _qcqp_data(seed, n, terms, rows)
    x = cp.Variable(n, bounds=[0, 10])
    y = cp.Variable(n, bounds=[0, 10])
    cons = [x @ R[r] @ y + A[r] @ x <= 40 for r in range(rows)] + [cp.sum(x) <= 3 * n, cp.sum(y) <= 3 * n]
    return cp.Problem(cp.Minimize(c @ x + d @ y + x @ Q @ y), cons), [x, y]


def bilinear200():
    """``bilinear:200`` of ``scale_energy_gop.py`` (about 8,000 products, 400 variables)."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from scale_energy_gop import gop_model
    return gop_model("bilinear:200")


def _mixture_data(seed, N):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-3, 1, N // 3), rng.normal(0, 1, N // 3), rng.normal(3, 1, N - 2 * (N // 3))]).round(3)


def bgmm_pyomo_large(seed=0, N=60, K=3):
    """Negative ELBO of the Bayesian Gaussian mixture (``varopt.formulations.bgmm``), N points, K components."""
    from varopt.formulations.bgmm import bgmm_pyomo
    return bgmm_pyomo(_mixture_data(seed, N), K)


def bgmm_cvxpy_large(seed=0, N=60, K=3):
    from varopt.formulations.bgmm import bgmm_cvxpy
    prob = bgmm_cvxpy(_mixture_data(seed, N), K)
    return prob, prob.variables()


def kmeans_pyomo(seed=0, N=60, K=4):
    """Relaxed 2-D k-means: ``min sum_ik r_ik ||x_i - mu_k||^2``, ``sum_k r_ik = 1``, ``r >= 0``, centres in the data's
    box: biconvex in (r, mu)."""
    import pyomo.environ as pyo
    rng = np.random.default_rng(seed)
    C = rng.uniform(-5, 5, (K, 2))
    X = (C[rng.integers(0, K, N)] + rng.normal(size=(N, 2))).round(3)
    lo, hi = X.min(0), X.max(0)
    m = pyo.ConcreteModel()
    m.r = pyo.Var(range(N), range(K), bounds=(0, 1), initialize=1.0 / K)
    m.mu = pyo.Var(range(K), range(2), bounds=lambda m, k, a: (float(lo[a]), float(hi[a])))
    m.obj = pyo.Objective(expr=sum(m.r[i, k] * sum((X[i, a] - m.mu[k, a]) ** 2 for a in range(2))
                                   for i in range(N) for k in range(K)))
    m.one = pyo.Constraint(range(N), rule=lambda m, i: sum(m.r[i, k] for k in range(K)) == 1)
    return m


MODELS = {
    "pool_p": ("pyomo", lambda: pooling_p(seed=2, I=20, L=10, J=16, K=5)),
    "pool_p_s1": ("pyomo", lambda: pooling_p(seed=1, I=16, L=8, J=12, K=4)),
    "bmf_pyomo": ("pyomo", bmf_pyomo),
    "bmf_cvxpy": ("cvxpy", bmf_cvxpy),
    "nmf30": ("pyomo", lambda: nmf_pyomo(seed=1)),
    "qcqp_pyomo": ("pyomo", qcqp_pyomo),
    "qcqp_cvxpy": ("cvxpy", qcqp_cvxpy),
    "bilinear200": ("pyomo", bilinear200),
    "bgmm_pyomo": ("pyomo", bgmm_pyomo_large),
    "bgmm_cvxpy": ("cvxpy", bgmm_cvxpy_large),
    "kmeans": ("pyomo", kmeans_pyomo),
}


def evaluate(front, model, tol=1e-5):
    """The user's own check of the loaded point: ``(objective, max violation)`` by the front-end (None, None when no
    point is loaded)."""
    if front == "pyomo":
        import pyomo.environ as pyo
        try:
            obj = pyo.value(next(model.component_data_objects(pyo.Objective, active=True)))
        except (ValueError, TypeError):
            return None, None
        viol = 0.0
        for c in model.component_data_objects(pyo.Constraint, active=True):
            b = pyo.value(c.body)
            if c.has_lb():
                viol = max(viol, pyo.value(c.lower) - b)
            if c.has_ub():
                viol = max(viol, b - pyo.value(c.upper))
        for v in model.component_data_objects(pyo.Var):
            if v.value is None:
                return None, None
            if v.lb is not None:
                viol = max(viol, v.lb - v.value)
            if v.ub is not None:
                viol = max(viol, v.value - v.ub)
        return float(obj), float(viol)
    prob = model[0]
    if any(v.value is None for v in prob.variables()):
        return None, None
    viol = max([0.0] + [float(np.max(c.violation())) for c in prob.constraints])
    for v in prob.variables():
        lo, hi = v.attributes.get("bounds") or (None, None)
        if lo is not None:
            viol = max(viol, float(np.max(np.asarray(lo) - v.value)))
        if hi is not None:
            viol = max(viol, float(np.max(v.value - np.asarray(hi))))
    return float(prob.objective.value), viol
