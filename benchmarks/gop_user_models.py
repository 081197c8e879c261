"""Benchmark: ``gop`` on biconvex / bilinear / polynomial models written the way Pyomo and CVXPY users write them,
each against SCIP (held-out review, branch gopuser, 2026-11-26; docs/gop.md).

Every model is built fresh twice: once for gop (``SolverFactory('gop').solve(m, time_limit=30)`` or
``prob.solve(method='gop', time_limit=30)``, default options otherwise) and once as a Pyomo model for SCIP
(``scip_direct``, ``limits/gap = 1e-9``). A CVXPY model has a Pyomo twin written by hand for SCIP (CVXPY's SCIP
interface takes DCP problems only). Tiny models are also checked by brute force on a grid where noted.

The checks are independent of gop's own report:

* the point gop loaded is evaluated by the user's front-end (Pyomo ``value()`` of every active constraint and of the
  objective, CVXPY ``constraint.violation()`` and ``prob.objective.value``): it must satisfy the rows and bounds
  (1e-6 scaled) and give the reported incumbent;
* the proved bound must lie on the right side of SCIP's optimum (1e-6 max(1, |opt|));
* ``optimal`` must be within the certified gap of SCIP's optimum;
* the edge models (integer variables, free variables, infeasible, unbounded, NaN parameters, unsupported terms,
  empty objectives) have an expected outcome: a status, or an error whose message must match a pattern.

Verdicts: ``certified`` (optimal and correct), ``open`` (time limit, valid bound and feasible point), ``ok``
(edge model with the expected outcome), ``WRONG`` (any failed check; the reason follows).

    python gop_user_models.py                     # all models (held-out ones in a separate table)
    python gop_user_models.py --exclude-heldout    # the tuning set only
    python gop_user_models.py --only haverly1_p kmeans1d
"""
from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import re
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

TOL = 1e-6
MODELS = []


def model(name, n, *, twin=None, expect=None, heldout=False, brute=None):
    """Register ``build()`` (a Pyomo model or a CVXPY problem). ``twin``: a Pyomo builder for SCIP when ``build``
    is CVXPY (default: ``build`` itself). ``expect``: ``('status', s)`` or ``('error', regex)`` for edge models.
    ``brute``: a function returning the optimum by enumeration (a second reference)."""
    def deco(build):
        MODELS.append(dict(name=name, n=n, build=build, twin=twin, expect=expect, heldout=heldout, brute=brute))
        return build
    return deco


# ----------------------------------------------------------------------------------------------------------------
# Pooling (Haverly 1978; Ben-Tal et al. 1994): p-form (pool qualities) and pq-form (proportions), Set/Param-indexed
# ----------------------------------------------------------------------------------------------------------------

def _haverly_data(case):
    """Haverly (1978) 1-3: crudes A, B into one pool, C bypasses; products X, Y with sulfur limits."""
    d = dict(cost={"A": 6, "B": 16, "C": 10}, qual={"A": 3, "B": 1, "C": 2},
             price={"X": 9, "Y": 15}, dmax={"X": 100, "Y": 200}, qmax={"X": 2.5, "Y": 1.5})
    if case == 2:
        d["dmax"] = {"X": 600, "Y": 200}
    if case == 3:
        d["cost"] = {"A": 6, "B": 13, "C": 10}
    return d


def _haverly_p(case):
    import pyomo.environ as pyo
    d = _haverly_data(case)
    m = pyo.ConcreteModel(name=f"haverly{case}_p")
    m.I = pyo.Set(initialize=["A", "B"])          # crudes into the pool
    m.J = pyo.Set(initialize=["X", "Y"])          # products
    m.cost = pyo.Param(["A", "B", "C"], initialize=d["cost"])
    m.q = pyo.Param(["A", "B", "C"], initialize=d["qual"])
    m.price = pyo.Param(m.J, initialize=d["price"])
    m.dmax = pyo.Param(m.J, initialize=d["dmax"])
    m.qmax = pyo.Param(m.J, initialize=d["qmax"])
    m.f = pyo.Var(m.I, bounds=(0, 300))           # crude into the pool
    m.x = pyo.Var(m.J, bounds=(0, 300))           # pool to product
    m.z = pyo.Var(m.J, bounds=(0, 300))           # C to product
    m.p = pyo.Var(bounds=(1, 3))                  # pool quality
    m.obj = pyo.Objective(expr=sum(m.cost[i] * m.f[i] for i in m.I) + m.cost["C"] * sum(m.z[j] for j in m.J)
                          - sum(m.price[j] * (m.x[j] + m.z[j]) for j in m.J))
    m.mass = pyo.Constraint(expr=sum(m.f[i] for i in m.I) == sum(m.x[j] for j in m.J))
    m.qbal = pyo.Constraint(expr=sum(m.q[i] * m.f[i] for i in m.I) == m.p * sum(m.x[j] for j in m.J))
    m.dem = pyo.Constraint(m.J, rule=lambda m, j: m.x[j] + m.z[j] <= m.dmax[j])
    m.spec = pyo.Constraint(m.J, rule=lambda m, j: m.p * m.x[j] + m.q["C"] * m.z[j] <= m.qmax[j] * (m.x[j] + m.z[j]))
    return m


def _haverly_pq(case):
    import pyomo.environ as pyo
    d = _haverly_data(case)
    m = pyo.ConcreteModel(name=f"haverly{case}_pq")
    m.I = pyo.Set(initialize=["A", "B"])
    m.J = pyo.Set(initialize=["X", "Y"])
    m.y = pyo.Var(m.J, bounds=(0, 300))                       # pool to product
    m.z = pyo.Var(m.J, bounds=(0, 300))                       # C to product
    m.qp = pyo.Var(m.I, bounds=(0, 1))                        # proportion of crude i in the pool
    m.w = pyo.Expression(m.I, m.J, rule=lambda m, i, j: m.qp[i] * m.y[j])   # flow i -> pool -> j
    m.obj = pyo.Objective(expr=sum(d["cost"][i] * m.w[i, j] for i in m.I for j in m.J)
                          + sum((d["cost"]["C"] - d["price"][j]) * m.z[j] for j in m.J)
                          - sum(d["price"][j] * m.y[j] for j in m.J))
    m.simplex = pyo.Constraint(expr=pyo.quicksum(m.qp[i] for i in m.I) == 1)
    m.dem = pyo.Constraint(m.J, rule=lambda m, j: m.y[j] + m.z[j] <= d["dmax"][j])
    m.spec = pyo.Constraint(m.J, rule=lambda m, j: sum(d["qual"][i] * m.w[i, j] for i in m.I)
                            + d["qual"]["C"] * m.z[j] <= d["qmax"][j] * (m.y[j] + m.z[j]))
    m.cap = pyo.Constraint(expr=sum(m.y[j] for j in m.J) <= 300)
    return m


model("haverly1_p", 7)(lambda: _haverly_p(1))
model("haverly2_pq", 6)(lambda: _haverly_pq(2))
model("haverly3_p", 7, heldout=True)(lambda: _haverly_p(3))
model("haverly1_pq", 6)(lambda: _haverly_pq(1))
model("haverly3_pq", 6)(lambda: _haverly_pq(3))
model("haverly2_p", 7, heldout=True)(lambda: _haverly_p(2))


@model("bental4_pq", 10)
def bental4_pq():
    """Ben-Tal et al. (1994) example 4 in pq-form: 3 crudes, one pool, 1 bypass, 2 products."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    crudes, prods = ["c1", "c2"], ["p1", "p2"]
    cost = {"c1": 6, "c2": 16, "c3": 10}
    qual = {"c1": 3, "c2": 1, "c3": 2}
    price = {"p1": 9, "p2": 15}
    dmax = {"p1": 100, "p2": 200}
    qmax = {"p1": 2.5, "p2": 1.5}
    m.q = pyo.Var(crudes, bounds=(0, 1))
    m.y = pyo.Var(prods, bounds=(0, 100))
    m.z = pyo.Var(prods, bounds=(0, 200))
    m.obj = pyo.Objective(expr=sum(cost[i] * m.q[i] * m.y[j] for i in crudes for j in prods)
                          + sum(cost["c3"] * m.z[j] for j in prods) - sum(price[j] * (m.y[j] + m.z[j]) for j in prods))
    m.sx = pyo.Constraint(expr=sum(m.q[i] for i in crudes) == 1)
    m.cap = pyo.Constraint(expr=sum(m.y[j] for j in prods) <= 50)
    m.dem = pyo.Constraint(prods, rule=lambda m, j: (None, m.y[j] + m.z[j], dmax[j]))
    m.spec = pyo.Constraint(prods, rule=lambda m, j: sum((qual[i] - qmax[j]) * m.q[i] * m.y[j] for i in crudes)
                            + (qual["c3"] - qmax[j]) * m.z[j] <= 0)
    return m


# ----------------------------------------------------------------------------------------------------------------
# Factorisations
# ----------------------------------------------------------------------------------------------------------------

A_R1 = np.array([[2.0, -1.0, 0.5], [1.0, 0.3, -2.0], [-0.5, 1.5, 1.0]])


def _svd_rank1(A, lo, hi):
    """Eckart-Young: the best rank-1 approximation is sigma_1 u_1 v_1^T; split as sqrt(sigma_1) u_1, sqrt(sigma_1)
    v_1 it is attained in the box when those factors fit (asserted), so ||A||^2 - sigma_1^2 is the optimum."""
    U, s, Vt = np.linalg.svd(A)
    u, v = math.sqrt(s[0]) * U[:, 0], math.sqrt(s[0]) * Vt[0]
    if lo is not None:
        assert u.min() >= lo and u.max() <= hi and v.min() >= lo and v.max() <= hi
    else:   # nonnegative factors: the Perron vectors of a positive matrix have one sign
        assert (np.all(u <= 0) and np.all(v <= 0)) or (np.all(u >= 0) and np.all(v >= 0))
        assert np.abs(u).max() <= hi and np.abs(v).max() <= hi
    return float((A ** 2).sum() - s[0] ** 2)


@model("rank1_pyomo", 6, brute=lambda: _svd_rank1(A_R1, -2, 2))
def rank1_pyomo():
    """min ||A - u v^T||_F^2 with u, v in [-2, 2]^3 (optimum: the best rank-1 approximation when it fits the box)."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 2)
    m.u = pyo.Var(m.I, bounds=(-2, 2), initialize=1.0)
    m.v = pyo.Var(m.I, bounds=(-2, 2), initialize=1.0)
    m.obj = pyo.Objective(expr=sum((A_R1[i, j] - m.u[i] * m.v[j]) ** 2 for i in m.I for j in m.I))
    return m


def _rank1_twin(lo=-2.0, hi=2.0):
    def build():
        import pyomo.environ as pyo
        m = pyo.ConcreteModel()
        m.u = pyo.Var(range(3), bounds=(lo, hi))
        m.v = pyo.Var(range(3), bounds=(lo, hi))
        m.obj = pyo.Objective(expr=sum((A_R1[i, j] - m.u[i] * m.v[j]) ** 2 for i in range(3) for j in range(3)))
        return m
    return build


@model("rank1_cvxpy", 6, twin=_rank1_twin(), brute=lambda: _svd_rank1(A_R1, -2, 2))
def rank1_cvxpy():
    import cvxpy as cp
    u = cp.Variable(3, bounds=[-2, 2])
    v = cp.Variable(3, bounds=[-2, 2])
    return cp.Problem(cp.Minimize(cp.sum_squares(A_R1 - cp.reshape(u, (3, 1), order="C") @ cp.reshape(v, (1, 3), order="C"))))


@model("rank1_outer_cvxpy", 6, twin=_rank1_twin(), heldout=True, brute=lambda: _svd_rank1(A_R1, -2, 2))
def rank1_outer_cvxpy():
    import cvxpy as cp
    u = cp.Variable(3)
    v = cp.Variable(3)
    return cp.Problem(cp.Minimize(cp.sum_squares(A_R1 - cp.outer(u, v))), [u >= -2, u <= 2, v >= -2, v <= 2])


A_NMF = np.array([[1.0, 2.0, 0.5], [0.2, 1.0, 3.0], [2.0, 0.1, 1.0]])


@model("nmf_rank1", 6, brute=lambda: _svd_rank1(A_NMF, None, 4))
def nmf_rank1():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.w = pyo.Var(range(3), bounds=(0, 4))
    m.h = pyo.Var(range(3), bounds=(0, 4))
    m.obj = pyo.Objective(expr=pyo.quicksum((A_NMF[i, j] - m.w[i] * m.h[j]) ** 2 for i in range(3) for j in range(3)))
    return m


@model("nmf_rank2_2x2", 8, heldout=True)
def nmf_rank2():
    import pyomo.environ as pyo
    A = np.array([[1.0, 0.2], [0.3, 2.0]])
    m = pyo.ConcreteModel()
    m.W = pyo.Var(range(2), range(2), bounds=(0, 2))
    m.H = pyo.Var(range(2), range(2), bounds=(0, 2))
    m.obj = pyo.Objective(expr=sum((A[i, j] - sum(m.W[i, k] * m.H[k, j] for k in range(2))) ** 2
                                   for i in range(2) for j in range(2)))
    return m


# ----------------------------------------------------------------------------------------------------------------
# Bilinear programs with disjoint constraint sets (Konno 1976), bimatrix games
# ----------------------------------------------------------------------------------------------------------------

Q_BL = np.array([[1.0, -2.0, 0.5], [-1.0, 0.5, 2.0], [0.3, 1.0, -1.5]])


@model("bilinear_disjoint", 6)
def bilinear_disjoint():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0, None))
    m.y = pyo.Var(range(3), bounds=(0, None))
    m.obj = pyo.Objective(expr=sum(Q_BL[i, j] * m.x[i] * m.y[j] for i in range(3) for j in range(3))
                          + m.x[0] - 2 * m.y[1])
    m.cx = pyo.ConstraintList()
    m.cx.add(m.x[0] + m.x[1] + m.x[2] <= 4)
    m.cx.add(m.x[0] - m.x[1] <= 1)
    m.cy = pyo.ConstraintList()
    m.cy.add(2 * m.y[0] + m.y[1] + m.y[2] <= 5)
    m.cy.add(m.y[1] + 3 * m.y[2] <= 6)
    return m


def _game_twin():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0, 1))
    m.y = pyo.Var(range(3), bounds=(0, 1))
    m.obj = pyo.Objective(expr=sum(Q_BL[i, j] * m.x[i] * m.y[j] for i in range(3) for j in range(3)))
    m.sx = pyo.Constraint(expr=sum(m.x.values()) == 1)
    m.sy = pyo.Constraint(expr=sum(m.y.values()) == 1)
    return m


@model("bimatrix_cvxpy", 6, twin=_game_twin)
def bimatrix_cvxpy():
    """min x^T Q y over two simplices, written with ``@``: non-DCP, accepted by gop."""
    import cvxpy as cp
    x = cp.Variable(3, nonneg=True)
    y = cp.Variable(3, nonneg=True)
    return cp.Problem(cp.Minimize(x @ Q_BL @ y), [cp.sum(x) == 1, cp.sum(y) == 1])


# ----------------------------------------------------------------------------------------------------------------
# Clustering: k-means with relaxed assignments, Gaussian-mixture style sum r_ik (x_i - mu_k)^2
# ----------------------------------------------------------------------------------------------------------------

PTS = np.array([0.5, 1.0, 1.3, 4.0, 4.4, 5.1])


def _kmeans_pyomo(points, K, lo=0.0, hi=6.0, order=True):
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.N = pyo.RangeSet(0, len(points) - 1)
    m.K = pyo.RangeSet(0, K - 1)
    m.x = pyo.Param(m.N, initialize=dict(enumerate(points)))
    m.mu = pyo.Var(m.K, bounds=(lo, hi))
    m.r = pyo.Var(m.N, m.K, bounds=(0, 1))
    m.obj = pyo.Objective(expr=sum(m.r[i, k] * (m.x[i] - m.mu[k]) ** 2 for i in m.N for k in m.K))
    m.assign = pyo.Constraint(m.N, rule=lambda m, i: sum(m.r[i, k] for k in m.K) == 1)
    if order:
        m.order = pyo.Constraint(m.K, rule=lambda m, k: m.mu[k] <= m.mu[k + 1] if k < K - 1 else pyo.Constraint.Skip)
    return m


def _kmeans_brute(points, K):
    """Optimal k-means in 1-D: the clusters are contiguous in sorted order; enumerate the cut points."""
    from itertools import combinations
    p = np.sort(points)
    best = math.inf
    for cuts in combinations(range(1, len(p)), K - 1):
        parts = np.split(p, cuts)
        best = min(best, sum(((q - q.mean()) ** 2).sum() for q in parts))
    return best


model("kmeans1d_k2", 14, brute=lambda: _kmeans_brute(PTS, 2))(lambda: _kmeans_pyomo(PTS, 2))
model("kmeans1d_k3", 21, brute=lambda: _kmeans_brute(PTS, 3), heldout=True)(lambda: _kmeans_pyomo(PTS, 3))
model("kmeans1d_k2_noorder", 14, heldout=True, brute=lambda: _kmeans_brute(PTS, 2))(lambda: _kmeans_pyomo(PTS, 2, order=False))

PTS2 = np.array([[0.0, 0.2], [0.4, 0.1], [3.0, 3.2], [2.7, 3.5], [0.2, 3.0]])


def _gmm2d_twin():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    N, K = len(PTS2), 2
    m.mu = pyo.Var(range(K), range(2), bounds=(-1, 4))
    m.r = pyo.Var(range(N), range(K), bounds=(0, 1))
    m.obj = pyo.Objective(expr=sum(m.r[i, k] * sum((PTS2[i, d] - m.mu[k, d]) ** 2 for d in range(2))
                                   for i in range(N) for k in range(K)))
    m.a = pyo.Constraint(range(N), rule=lambda m, i: sum(m.r[i, k] for k in range(K)) == 1)
    return m


@model("kmeans2d_cvxpy", 14, twin=_gmm2d_twin, brute=None)
def kmeans2d_cvxpy():
    """sum_ik r_ik ||x_i - mu_k||^2 with ``cp.multiply`` and simplex rows (non-DCP products of variables)."""
    import cvxpy as cp
    N, K = len(PTS2), 2
    mu = cp.Variable((K, 2), bounds=[-1, 4])
    r = cp.Variable((N, K), bounds=[0, 1])
    terms = []
    for k in range(K):
        dist = cp.hstack([cp.sum_squares(PTS2[i] - mu[k]) for i in range(N)])
        terms.append(cp.sum(cp.multiply(r[:, k], dist)))
    return cp.Problem(cp.Minimize(sum(terms)), [cp.sum(r, axis=1) == 1])


@model("gmm_entropy_pyomo", 14)
def gmm_entropy():
    """Mean-field style: sum r_ik (x_i - mu_k)^2 + sum r_ik log r_ik (an entropy term on the assignments)."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    pts = PTS[:5]
    m.mu = pyo.Var(range(2), bounds=(0, 6))
    m.r = pyo.Var(range(5), range(2), bounds=(1e-6, 1))
    m.fit = pyo.Expression(expr=sum(m.r[i, k] * (pts[i] - m.mu[k]) ** 2 for i in range(5) for k in range(2)))
    m.ent = pyo.Expression(expr=sum(m.r[i, k] * pyo.log(m.r[i, k]) for i in range(5) for k in range(2)))
    m.obj = pyo.Objective(expr=m.fit + m.ent)
    m.a = pyo.Constraint(range(5), rule=lambda m, i: m.r[i, 0] + m.r[i, 1] == 1)
    m.o = pyo.Constraint(expr=m.mu[0] <= m.mu[1])
    return m


# ----------------------------------------------------------------------------------------------------------------
# Concave and indefinite QPs (Vandenbussche & Nemhauser 2005 boxqp-style instances, small)
# ----------------------------------------------------------------------------------------------------------------

def _boxqp_data(n, density, seed):
    """spar-style: integer entries of Q in [-50, 50] with the given density, c in [-100, 100] (V&N 2005)."""
    rng = np.random.default_rng(seed)
    Q = np.triu(rng.integers(-50, 51, (n, n)) * (rng.random((n, n)) < density), 0).astype(float)
    Q = Q + np.triu(Q, 1).T
    c = rng.integers(-100, 101, n).astype(float)
    return Q, c


def _boxqp_pyomo(n, density, seed):
    import pyomo.environ as pyo
    Q, c = _boxqp_data(n, density, seed)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), bounds=(0, 1))
    m.obj = pyo.Objective(expr=0.5 * sum(Q[i, j] * m.x[i] * m.x[j] for i in range(n) for j in range(n))
                          + sum(c[i] * m.x[i] for i in range(n)))
    return m


model("boxqp_n8_d50", 8)(lambda: _boxqp_pyomo(8, 0.5, 1))
model("boxqp_n12_d30", 12)(lambda: _boxqp_pyomo(12, 0.3, 2))
model("boxqp_n20_d20", 20, heldout=True)(lambda: _boxqp_pyomo(20, 0.2, 3))
model("boxqp_n30_d20", 30)(lambda: _boxqp_pyomo(30, 0.2, 4))


def _boxqp_twin(n, density, seed):
    return lambda: _boxqp_pyomo(n, density, seed)


@model("boxqp_cvxpy_n10", 10, twin=_boxqp_twin(10, 0.5, 5))
def boxqp_cvxpy():
    """0.5 x^T Q x + c^T x with Q indefinite, written ``0.5 * cp.quad_form(x, Q)`` (not DCP)."""
    import cvxpy as cp
    Q, c = _boxqp_data(10, 0.5, 5)
    x = cp.Variable(10, bounds=[0, 1])
    return cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, Q) + c @ x))


@model("boxqp_at_cvxpy_n10", 10, twin=_boxqp_twin(10, 0.5, 6), heldout=True)
def boxqp_at_cvxpy():
    import cvxpy as cp
    Q, c = _boxqp_data(10, 0.5, 6)
    x = cp.Variable(10)
    return cp.Problem(cp.Minimize(0.5 * (x @ Q @ x) + c @ x), [x >= 0, x <= 1])


def _concave_box_brute():
    """A concave function attains its minimum over a box at a vertex: enumerate the 2^4 vertices."""
    from itertools import product
    Q, c = _concave_data()
    return min(-(np.array(v) @ Q @ np.array(v)) + c @ np.array(v) for v in product([-1, 2], repeat=4))


def _concave_data():
    rng = np.random.default_rng(7)
    B = rng.normal(size=(4, 4))
    return B @ B.T, rng.normal(size=4)


@model("concave_box", 4, brute=_concave_box_brute)
def concave_box():
    import pyomo.environ as pyo
    Q, c = _concave_data()
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(4), bounds=(-1, 2))
    m.obj = pyo.Objective(expr=-sum(Q[i, j] * m.x[i] * m.x[j] for i in range(4) for j in range(4))
                          + sum(c[i] * m.x[i] for i in range(4)))
    return m


def _concave_poly_twin():
    import pyomo.environ as pyo
    Q, c = _concave_data()
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(4), bounds=(0, None))
    m.obj = pyo.Objective(expr=-sum(Q[i, j] * m.x[i] * m.x[j] for i in range(4) for j in range(4))
                          + sum(c[i] * m.x[i] for i in range(4)))
    m.c1 = pyo.Constraint(expr=m.x[0] + m.x[1] + m.x[2] + m.x[3] <= 3)
    m.c2 = pyo.Constraint(expr=m.x[0] - m.x[2] >= -1)
    m.c3 = pyo.Constraint(expr=2 * m.x[1] + m.x[3] <= 4)
    return m


@model("concave_polytope_cvxpy", 4, twin=_concave_poly_twin)
def concave_polytope_cvxpy():
    """min -x^T Q x + c^T x over a polytope, written as ``-cp.quad_form(x, Q)`` (concave: DCP-invalid)."""
    import cvxpy as cp
    Q, c = _concave_data()
    x = cp.Variable(4, nonneg=True)
    return cp.Problem(cp.Minimize(-cp.quad_form(x, Q) + c @ x),
                      [cp.sum(x) <= 3, x[0] - x[2] >= -1, 2 * x[1] + x[3] <= 4])


model("concave_polytope_pyomo", 4, heldout=True)(_concave_poly_twin)


# ----------------------------------------------------------------------------------------------------------------
# Products of several variables, polynomials, bilinear constraints
# ----------------------------------------------------------------------------------------------------------------

@model("trilinear_xyz", 3)
def trilinear():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 2))
    m.y = pyo.Var(bounds=(-2, 1))
    m.z = pyo.Var(bounds=(0.5, 3))
    m.obj = pyo.Objective(expr=m.x * m.y * m.z + m.x - m.z)
    m.c = pyo.Constraint(expr=m.x + m.y + m.z <= 3)
    return m


def _trilinear_twin():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 2))
    m.y = pyo.Var(bounds=(-2, 1))
    m.z = pyo.Var(bounds=(0.5, 3))
    m.obj = pyo.Objective(expr=m.x * m.y * m.z - 2 * m.x * m.y, sense=pyo.maximize)
    m.c = pyo.Constraint(expr=m.x * m.z <= 2)
    return m


@model("trilinear_max_cvxpy", 3, twin=_trilinear_twin)
def trilinear_cvxpy():
    import cvxpy as cp
    x = cp.Variable(bounds=[-1, 2])
    y = cp.Variable(bounds=[-2, 1])
    z = cp.Variable(bounds=[0.5, 3])
    return cp.Problem(cp.Maximize(x * y * z - 2 * x * y), [x * z <= 2])


@model("poly_x2y", 2)
def poly_x2y():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-2, 2))
    m.y = pyo.Var(bounds=(-1, 3))
    m.obj = pyo.Objective(expr=m.x ** 2 * m.y - m.x ** 3 + 0.5 * m.y ** 2)
    return m


def _poly_x2y_twin():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-2, 2))
    m.y = pyo.Var(bounds=(-1, 3))
    m.obj = pyo.Objective(expr=m.x ** 2 * m.y - m.x ** 3 + 0.5 * m.y ** 2)
    return m


@model("poly_sq_times_y_cvxpy", 2, twin=_poly_x2y_twin)
def poly_sq_times_y_cvxpy():
    """poly_x2y in CVXPY: ``cp.square(x) * y`` with y of both signs (refused under 'auto' before the review)."""
    import cvxpy as cp
    x = cp.Variable(bounds=[-2, 2])
    y = cp.Variable(bounds=[-1, 3])
    return cp.Problem(cp.Minimize(cp.square(x) * y - x ** 3 + 0.5 * cp.square(y)))


@model("maximize_xy_pyomo", 2, heldout=True)
def maximize_xy():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 5))
    m.y = pyo.Var(bounds=(0, 5))
    m.obj = pyo.Objective(expr=m.x * m.y - 0.5 * m.x, sense=pyo.maximize)
    m.c1 = pyo.Constraint(expr=m.x + 2 * m.y <= 6)
    m.c2 = pyo.Constraint(expr=(1, m.x - m.y, 3))      # ranged linear row
    return m


@model("bilinear_equality", 2)
def bilinear_equality():
    """min x + y s.t. x*y == 2 on [0.5, 4]^2: optimum 2 sqrt(2)."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0.5, 4))
    m.y = pyo.Var(bounds=(0.5, 4))
    m.obj = pyo.Objective(expr=m.x + m.y)
    m.c = pyo.Constraint(expr=m.x * m.y == 2)
    return m


@model("bilinear_ge_nonconvex", 2)
def bilinear_ge():
    """min (x - 3)^2 + (y - 3)^2 s.t. x*y <= 2 (nonconvex feasible set), boxes [0, 5]."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 5))
    m.y = pyo.Var(bounds=(0, 5))
    m.obj = pyo.Objective(expr=(m.x - 3) ** 2 + (m.y - 3) ** 2)
    m.c = pyo.Constraint(expr=m.x * m.y <= 2)
    return m


@model("ranged_bilinear", 3, heldout=True)
def ranged_bilinear():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 4))
    m.y = pyo.Var(bounds=(0, 4))
    m.z = pyo.Var(bounds=(-1, 1))
    m.obj = pyo.Objective(expr=m.x - 2 * m.y + m.z * m.x)
    m.c = pyo.Constraint(expr=pyo.inequality(1, m.x * m.y, 3))
    m.d = pyo.Constraint(expr=m.x + m.y + m.z >= 2)
    return m


@model("fixed_and_mutable", 4)
def fixed_and_mutable():
    """A fixed variable and a mutable Param changed after construction (the solver must read the new value)."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.a = pyo.Param(initialize=1.0, mutable=True)
    m.x = pyo.Var(range(3), bounds=(-2, 2))
    m.t = pyo.Var(bounds=(0, 5))
    m.obj = pyo.Objective(expr=m.a * m.x[0] * m.x[1] + m.t * m.x[2] + (m.x[0] - m.t) ** 2)
    m.c = pyo.Constraint(expr=m.x[0] + m.x[1] + m.x[2] <= m.a + 1)
    m.t.fix(1.5)
    m.a = -2.0
    return m


@model("skip_rule_blend", 9)
def skip_rule_blend():
    """Biconvex blending: sum_j f_ij q_j with quality variables; some rows skipped by the rule."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.S = pyo.RangeSet(1, 3)
    m.q = pyo.Var(m.S, bounds=(0.5, 2.0))
    m.f = pyo.Var(m.S, m.S, bounds=(0, 10))
    m.obj = pyo.Objective(expr=pyo.quicksum(m.f[i, j] * (m.q[j] - i) for i in m.S for j in m.S)
                          - 2 * pyo.quicksum(m.f[i, j] for i in m.S for j in m.S))

    def cap(m, i):
        if i == 2:
            return pyo.Constraint.Skip
        return pyo.quicksum(m.f[i, j] for j in m.S) <= 4 * i
    m.cap = pyo.Constraint(m.S, rule=cap)
    m.qual = pyo.Constraint(m.S, rule=lambda m, j: pyo.quicksum(m.f[i, j] * m.q[j] for i in m.S) <= 6)
    m.total = pyo.Constraint(expr=sum(m.q.values()) >= 3)
    return m


@model("portfolio_biconvex", 8)
def portfolio_biconvex():
    """Biconvex portfolio: weights w on a simplex, scenario multipliers s in a box; risk sum_i (s_i r_i . w)^2
    is not biconvex as written — instead min w^T Sigma w - sum_i s_i mu_i w_i with s in a polytope."""
    import pyomo.environ as pyo
    Sigma = np.array([[0.10, 0.02, 0.01, 0.0], [0.02, 0.08, 0.02, 0.01], [0.01, 0.02, 0.12, 0.03],
                      [0.0, 0.01, 0.03, 0.09]])
    mu = np.array([0.3, 0.2, 0.5, 0.25])
    m = pyo.ConcreteModel()
    m.w = pyo.Var(range(4), bounds=(0, 1))
    m.s = pyo.Var(range(4), bounds=(0.5, 1.5))
    m.obj = pyo.Objective(expr=sum(Sigma[i, j] * m.w[i] * m.w[j] for i in range(4) for j in range(4))
                          - sum(m.s[i] * mu[i] * m.w[i] for i in range(4)))
    m.sw = pyo.Constraint(expr=sum(m.w.values()) == 1)
    m.ss = pyo.Constraint(expr=sum(m.s.values()) <= 4)
    return m


@model("deactivated_parts", 4, heldout=True)
def deactivated_parts():
    """Two objectives (one deactivated), a deactivated constraint, a Block."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.b = pyo.Block()
    m.b.x = pyo.Var(bounds=(-1, 3))
    m.b.y = pyo.Var(bounds=(-1, 3))
    m.u = pyo.Var(range(2), bounds=(0, 2))
    m.o1 = pyo.Objective(expr=m.b.x * m.b.y + m.u[0] * m.b.x - m.u[1])
    m.o2 = pyo.Objective(expr=m.b.x + m.b.y)
    m.o2.deactivate()
    m.c1 = pyo.Constraint(expr=m.b.x + m.b.y >= 1)
    m.c2 = pyo.Constraint(expr=m.b.x + m.b.y >= 100)   # would be infeasible
    m.c2.deactivate()
    m.c3 = pyo.Constraint(expr=m.u[0] + m.u[1] <= 3)
    return m


@model("objective_constant_max", 3, heldout=True)
def objective_constant_max():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 2))
    m.y = pyo.Var(bounds=(0, 2))
    m.z = pyo.Var(bounds=(0, 2))
    m.obj = pyo.Objective(expr=100 - (m.x - 1) ** 2 + m.x * m.y - m.y * m.z + 3, sense=pyo.maximize)
    m.c = pyo.Constraint(expr=m.x + m.y + m.z == 3)
    return m


@model("param_cvxpy", 4, twin=None)
def param_cvxpy():
    """cp.Parameter coefficients with values, a bilinear objective and a DCP-violating product in a row."""
    import cvxpy as cp
    a = cp.Parameter(2, value=np.array([1.0, -0.5]))
    x = cp.Variable(2, bounds=[0, 3])
    y = cp.Variable(2, bounds=[0, 3])
    return cp.Problem(cp.Minimize(a @ cp.multiply(x, y) - cp.sum(x) + cp.sum_squares(y - 1)),
                      [x[0] * y[1] <= 2, cp.sum(x + y) <= 5])


def _param_twin():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), bounds=(0, 3))
    m.y = pyo.Var(range(2), bounds=(0, 3))
    m.obj = pyo.Objective(expr=1.0 * m.x[0] * m.y[0] - 0.5 * m.x[1] * m.y[1] - m.x[0] - m.x[1]
                          + (m.y[0] - 1) ** 2 + (m.y[1] - 1) ** 2)
    m.c1 = pyo.Constraint(expr=m.x[0] * m.y[1] <= 2)
    m.c2 = pyo.Constraint(expr=m.x[0] + m.x[1] + m.y[0] + m.y[1] <= 5)
    return m


MODELS[-1]["twin"] = _param_twin


def _eq_cvxpy_twin():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0.1, 5))
    m.obj = pyo.Objective(expr=m.x[0] + 2 * m.x[1] + 3 * m.x[2])
    m.c1 = pyo.Constraint(expr=m.x[0] * m.x[1] == 2)
    m.c2 = pyo.Constraint(expr=m.x[1] * m.x[2] >= 1)
    return m


@model("bilinear_eq_cvxpy", 3, twin=_eq_cvxpy_twin, heldout=True)
def bilinear_eq_cvxpy():
    import cvxpy as cp
    x = cp.Variable(3, bounds=[0.1, 5])
    return cp.Problem(cp.Minimize(x[0] + 2 * x[1] + 3 * x[2]), [x[0] * x[1] == 2, x[1] * x[2] >= 1])


@model("convex_qp_cvxpy", 5, twin=None)
def convex_qp_cvxpy():
    """A convex model users also send to gop (certified by one primal problem)."""
    import cvxpy as cp
    rng = np.random.default_rng(11)
    A = rng.normal(size=(8, 5))
    b = rng.normal(size=8)
    x = cp.Variable(5)
    return cp.Problem(cp.Minimize(cp.sum_squares(A @ x - b) + cp.norm1(x)), [cp.sum(x) == 1, x >= -1])


def _convex_qp_twin():
    import pyomo.environ as pyo
    rng = np.random.default_rng(11)
    A = rng.normal(size=(8, 5))
    b = rng.normal(size=8)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(5), bounds=(-1, None))
    m.t = pyo.Var(range(5), bounds=(0, None))
    m.obj = pyo.Objective(expr=sum((sum(A[i, j] * m.x[j] for j in range(5)) - b[i]) ** 2 for i in range(8))
                          + sum(m.t.values()))
    m.p = pyo.Constraint(range(5), rule=lambda m, j: m.t[j] >= m.x[j])
    m.n = pyo.Constraint(range(5), rule=lambda m, j: m.t[j] >= -m.x[j])
    m.s = pyo.Constraint(expr=sum(m.x.values()) == 1)
    return m


MODELS[-1]["twin"] = _convex_qp_twin


@model("bilinear_60", 60)
def bilinear_60():
    """A random sparse bilinear program with 30 + 30 variables and 10 coupling rows (medium size)."""
    import pyomo.environ as pyo
    rng = np.random.default_rng(21)
    n = 30
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), bounds=(0, 1))
    m.y = pyo.Var(range(n), bounds=(0, 1))
    pairs = [(i, int(j)) for i in range(n) for j in rng.choice(n, 2, replace=False)]
    coef = rng.normal(size=len(pairs))
    m.obj = pyo.Objective(expr=sum(c * m.x[i] * m.y[j] for c, (i, j) in zip(coef, pairs))
                          + sum(rng.normal() * m.x[i] for i in range(n)))
    m.rows = pyo.ConstraintList()
    for _ in range(10):
        idx = rng.choice(n, 6, replace=False)
        m.rows.add(sum(m.x[int(i)] + m.y[int(i)] for i in idx) <= 5)
    return m


@model("polynomial_deg4", 3, heldout=True)
def polynomial_deg4():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(-1.5, 1.5))
    m.obj = pyo.Objective(expr=m.x[0] ** 4 - 2 * m.x[0] ** 2 * m.x[1] + m.x[1] ** 2 + m.x[0] * m.x[1] * m.x[2]
                          - m.x[2] ** 2)
    return m


# ----------------------------------------------------------------------------------------------------------------
# Bad and edge inputs
# ----------------------------------------------------------------------------------------------------------------

@model("edge_integer_pyomo", 2, expect=("error", r"(?i)integer|discrete"))
def edge_integer():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.Integers, bounds=(0, 5))
    m.y = pyo.Var(bounds=(0, 3))
    m.obj = pyo.Objective(expr=m.x * m.y - m.x - 2 * m.y)
    return m


@model("edge_integer_cvxpy", 2, expect=("error", r"(?i)integer"), heldout=True)
def edge_integer_cvxpy():
    import cvxpy as cp
    x = cp.Variable(integer=True)
    y = cp.Variable(bounds=[0, 3])
    return cp.Problem(cp.Minimize(x * y - x - 2 * y), [x >= 0, x <= 5])


@model("edge_free_unbounded", 2, expect=("status", "unbounded"))
def edge_free_unbounded():
    """min x*y with free x, y: unbounded below (x = -y = t)."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.y = pyo.Var()
    m.obj = pyo.Objective(expr=m.x * m.y)
    m.c = pyo.Constraint(expr=m.x + m.y == 0)
    return m


@model("edge_free_flat_unbounded", 2, expect=("status", "unbounded"))
def edge_free_flat_unbounded():
    """min x*y + x^2/2 + y^2/2 - x over free x, y: convex, (x + y)^2 / 2 - x, unbounded along (1, -1) (gop raised
    'Unbounded: ... declare bounds on them' before the gopuser review)."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.y = pyo.Var()
    m.obj = pyo.Objective(expr=m.x * m.y + 0.5 * m.x ** 2 + 0.5 * m.y ** 2 - m.x)
    return m


@model("edge_infeasible", 2, expect=("status", "infeasible"))
def edge_infeasible():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 2))
    m.y = pyo.Var(bounds=(0, 2))
    m.obj = pyo.Objective(expr=m.x * m.y - m.x)
    m.c = pyo.Constraint(expr=m.x * m.y >= 5)
    return m


@model("edge_infeasible_linear_cvxpy", 2, expect=("status", "infeasible"), heldout=True)
def edge_infeasible_cvxpy():
    import cvxpy as cp
    x = cp.Variable(bounds=[0, 2])
    y = cp.Variable(bounds=[0, 2])
    return cp.Problem(cp.Minimize(x * y), [x + y >= 5])


@model("edge_unbounded_max", 2, expect=("status", "unbounded"))
def edge_unbounded_max():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, None))
    m.y = pyo.Var(bounds=(0, None))
    m.obj = pyo.Objective(expr=m.x * m.y, sense=pyo.maximize)
    m.c = pyo.Constraint(expr=m.x - m.y <= 1)
    return m


@model("edge_nan_param", 2, expect=("error", r"(?i)nan"))
def edge_nan_param():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.p = pyo.Param(initialize=float("nan"), mutable=True)
    m.x = pyo.Var(bounds=(0, 2))
    m.y = pyo.Var(bounds=(0, 2))
    m.obj = pyo.Objective(expr=m.p * m.x * m.y + m.x)
    return m


@model("edge_nan_cvxpy", 2, expect=("error", r"(?i)nan"), heldout=True)
def edge_nan_cvxpy():
    """NaN in the data (CVXPY itself refuses a NaN Parameter value: 'Parameter value must be real')."""
    import cvxpy as cp
    a = np.array([1.0, float("nan")])
    x = cp.Variable(2, bounds=[0, 2])
    y = cp.Variable(2, bounds=[0, 2])
    return cp.Problem(cp.Minimize(a @ cp.multiply(x, y) + cp.sum(x)))


@model("edge_unsupported_sin", 2, expect=("error", r"sin"))
def edge_unsupported_sin():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 2))
    m.y = pyo.Var(bounds=(0, 2))
    m.obj = pyo.Objective(expr=pyo.sin(m.x) * m.y)
    return m


@model("edge_empty_objective", 2, expect=("status_or_error", r"(?i)optimal|objective"))
def edge_empty_objective():
    """No objective: a feasibility problem (x*y >= 1 in a box)."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 2))
    m.y = pyo.Var(bounds=(0, 2))
    m.c = pyo.Constraint(expr=m.x * m.y >= 1)
    return m


@model("edge_constant_objective", 2, expect=("status_or_error", r"(?i)optimal|objective"), heldout=True)
def edge_constant_objective():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 2))
    m.y = pyo.Var(bounds=(0, 2))
    m.obj = pyo.Objective(expr=0)
    m.c = pyo.Constraint(expr=m.x * m.y >= 1)
    return m


@model("edge_param_no_value_cvxpy", 2, expect=("error", r"(?i)parameter|value"))
def edge_param_no_value():
    import cvxpy as cp
    a = cp.Parameter()
    x = cp.Variable(bounds=[0, 2])
    y = cp.Variable(bounds=[0, 2])
    return cp.Problem(cp.Minimize(a * x * y + x))


def _abs_product_brute():
    """A grid over the box (step 0.005, contains the vertex (-1, -1)); |.| >= 0 and 0.5 x >= -0.5 make its value
    there, -0.5, the optimum (SCIP's Pyomo interface does not take abs)."""
    g = np.linspace(-1, 2, 601)
    X, Y = np.meshgrid(g, g)
    return float(np.min(np.abs(X * Y - 1) + 0.5 * X))


@model("edge_abs_product", 2, heldout=True, brute=_abs_product_brute, expect=("status_or_error", r"optimal|abs"))
def edge_abs_product():
    """abs of a bilinear term in the objective (not biconvex as written)."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 2))
    m.y = pyo.Var(bounds=(-1, 2))
    m.obj = pyo.Objective(expr=abs(m.x * m.y - 1) + 0.5 * m.x)
    return m


# ----------------------------------------------------------------------------------------------------------------
# Runner
# ----------------------------------------------------------------------------------------------------------------

def _is_cvxpy(obj):
    return obj.__class__.__module__.startswith("cvxpy")


def scip_reference(spec, time_limit=60.0):
    """SCIP's optimum of the Pyomo twin (None when SCIP does not certify it), its status, and its time."""
    import pyomo.environ as pyo
    build = spec["twin"] or spec["build"]
    m = build()
    if _is_cvxpy(m):
        return None, "no twin", 0.0
    opt = pyo.SolverFactory("scip_direct")
    opt.options["limits/gap"] = 1e-9
    opt.options["limits/absgap"] = 1e-9
    opt.options["limits/time"] = time_limit
    opt.options["timing/clocktype"] = 2   # wall clock: under load a CPU-time limit ran past the harness's wait
    t0 = time.perf_counter()
    try:
        res = opt.solve(m, load_solutions=False)
    except Exception as e:
        return None, f"scip error {type(e).__name__}", time.perf_counter() - t0
    dt = time.perf_counter() - t0
    tc = str(res.solver.termination_condition)
    if tc != "optimal":
        return None, tc, dt
    obj = [o for o in m.component_data_objects(pyo.Objective, active=True)]
    m.solutions.load_from(res)
    val = float(pyo.value(obj[0])) if obj else 0.0
    return val, tc, dt


def _check_pyomo_point(m, tol=1e-6):
    """Feasibility of the loaded point by Pyomo's own evaluation: (max violation, objective value)."""
    import pyomo.environ as pyo
    viol = 0.0
    for v in m.component_data_objects(pyo.Var, active=True):
        if v.value is None:
            continue
        if v.lb is not None:
            viol = max(viol, (v.lb - v.value) / max(1.0, abs(v.lb)))
        if v.ub is not None:
            viol = max(viol, (v.value - v.ub) / max(1.0, abs(v.ub)))
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        lo, hi = pyo.value(c.lower), pyo.value(c.upper)
        if lo is not None:
            viol = max(viol, (lo - body) / max(1.0, abs(lo)))
        if hi is not None:
            viol = max(viol, (body - hi) / max(1.0, abs(hi)))
    objs = list(m.component_data_objects(pyo.Objective, active=True))
    return viol, (float(pyo.value(objs[0])) if objs else 0.0)


def _child(idx, time_limit, scip, queue):
    """SCIP's reference and then gop, in a forked child (the parent never runs a solver: Pyomo's output capture
    of scip_direct uses threads and pipes, and forking after it once hung the parent writing to a pipe)."""
    spec = MODELS[idx]
    ref = (None, "skipped", 0.0)
    if scip and (not spec["expect"] or spec["expect"][0] == "status_or_error"):
        try:
            ref = scip_reference(spec)
        except Exception as e:
            ref = (None, f"scip {type(e).__name__}", 0.0)
    queue.put(ref)
    queue.put(_gop(idx, time_limit))


def _gop(idx, time_limit):
    """gop with default options; a model refused under mode='auto' with a message naming mode='tree' (not biconvex)
    is solved again as the message says, and the record says so (``refused``)."""
    out = _gop_once(idx, time_limit, {})
    if out["error"] is not None and "mode='tree' certifies" in out["error"]:
        again = _gop_once(idx, time_limit, {"mode": "tree"})
        again["refused"] = out["error"]
        return again
    return out


def _gop_once(idx, time_limit, options):
    out = dict(status="error", lb=None, ub=None, value=None, time=None, error=None, viol=None, model_value=None,
               maximize=False)
    try:
        import pyomo.environ as pyo

        import varopt  # noqa: F401
        spec = MODELS[idx]
        m = spec["build"]()
        t0 = time.perf_counter()
        if _is_cvxpy(m):
            m.solve(method="gop", time_limit=time_limit, **options)
            out["time"] = time.perf_counter() - t0
            r = m.varopt_result
            if r.x is not None and all(v.value is not None for v in m.variables()):
                out["viol"] = max([0.0] + [float(np.max(np.atleast_1d(c.violation()))) for c in m.constraints])
                for v in m.variables():   # the declared bounds / sign attributes
                    val = np.asarray(v.value, dtype=float)
                    if v.attributes.get("nonneg"):
                        out["viol"] = max(out["viol"], float(np.max(-val)))
                    b = v.attributes.get("bounds")
                    if b is not None:
                        out["viol"] = max(out["viol"], float(np.max(np.asarray(b[0]) - val)),
                                          float(np.max(val - np.asarray(b[1]))))
                out["model_value"] = float(m.objective.value)
        else:
            res = pyo.SolverFactory("gop").solve(m, time_limit=time_limit, **options)
            out["time"] = time.perf_counter() - t0
            r = res.varopt_result
            if getattr(res, "varopt_loaded", False):
                out["viol"], out["model_value"] = _check_pyomo_point(m)
        out.update(status=r.status, lb=r.lower_bound, ub=r.upper_bound, maximize=bool(r.maximize),
                   value=r.objective)
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {' '.join(str(e).split())}"
        out["time"] = None
    return out


def run_model(idx, time_limit, scip, hard):
    """(SCIP reference, gop record) from a forked child; a ``killed`` record when gop gives no answer in time."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(idx, time_limit, scip, q))
    p.start()
    try:
        ref = q.get(timeout=150)
    except Exception:
        # SCIP past its limit: gop in a fresh child without it
        p.kill()
        p.join()
        ref = (None, "scip killed", 150.0)
        q = ctx.Queue()
        p = ctx.Process(target=_child, args=(idx, time_limit, False, q))
        p.start()
        q.get(timeout=30)
    try:
        out = q.get(timeout=hard)
    except Exception:
        out = dict(status="killed", lb=None, ub=None, value=None, time=None, error=f"no answer in {hard} s",
                   viol=None, model_value=None, maximize=False)
    p.join(5)
    if p.is_alive():
        p.kill()
        p.join()
    return ref, out


def verdict(spec, ref, g):
    """The verdict on one run and the reason (see the module docstring)."""
    exp = spec["expect"]
    if exp is not None:
        kind, pat = exp
        if g["error"] is not None:
            ok = kind in ("error", "status_or_error") and re.search(pat, g["error"]) is not None
            return ("ok" if ok else "WRONG"), g["error"][:150]
        if kind == "status" and g["status"] != pat:
            return "WRONG", f"status {g['status']}, expected {pat}"
        if kind == "error":
            return "WRONG", f"no error (status {g['status']}), expected /{pat}/"
        if kind == "status_or_error" and not re.search(pat, g["status"]):
            return "WRONG", f"status {g['status']}, expected /{pat}/"
        if g["status"] in ("infeasible", "unbounded"):
            return "ok", ""
        if kind == "status":
            return "ok", ""
    if g["error"] is not None:
        return "WRONG", g["error"][:150]
    if g["status"] == "killed":
        return "WRONG", "killed"
    sign = -1.0 if g["maximize"] else 1.0     # compare in the minimisation sense
    inc = g["lb"] if g["maximize"] else g["ub"]
    bound = g["ub"] if g["maximize"] else g["lb"]
    reasons = []
    if g["viol"] is not None and g["viol"] > 1e-6:
        reasons.append(f"loaded point violates rows by {g['viol']:.2e}")
    if g["model_value"] is not None and inc is not None and abs(g["model_value"] - inc) > 1e-6 * max(1, abs(inc)):
        reasons.append(f"model evaluates {g['model_value']:.8g} at the point, reported {inc:.8g}")
    if g["model_value"] is None and g["status"] in ("optimal", "time_limit", "numerical"):
        reasons.append("no point loaded")
    if ref is not None and bound is not None and sign * bound > sign * ref + TOL * max(1, abs(ref)):
        reasons.append(f"bound {bound:.8g} beyond SCIP optimum {ref:.8g}")
    if ref is not None and inc is not None and sign * inc < sign * ref - TOL * max(1, abs(ref)):
        reasons.append(f"incumbent {inc:.8g} better than SCIP optimum {ref:.8g}")
    if g["status"] == "optimal" and ref is not None and inc is not None:
        gap = abs(inc - bound) if bound is not None else 0.0
        if abs(inc - ref) > max(gap, TOL * max(1, abs(ref))) + 1e-9:
            reasons.append(f"optimal {inc:.8g} but SCIP {ref:.8g}")
    note = "after mode='auto' refused it as not biconvex, mode='tree'" if g.get("refused") else ""
    if reasons:
        return "WRONG", "; ".join(reasons + ([note] if note else []))
    if g["status"] == "optimal":
        return "certified", note
    return "open", g["status"] + (f"; {note}" if note else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--exclude-heldout", action="store_true")
    ap.add_argument("--heldout-only", action="store_true")
    ap.add_argument("--no-scip", action="store_true")
    a = ap.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    with open("/proc/loadavg") as f:
        print("load:", f.read().strip())
    rows = {False: [], True: []}
    for idx, spec in enumerate(MODELS):
        if a.only and spec["name"] not in a.only:
            continue
        if (a.exclude_heldout and spec["heldout"]) or (a.heldout_only and not spec["heldout"]):
            continue
        (ref, scip_status, t_scip), g = run_model(idx, a.time_limit, not a.no_scip, hard=3 * a.time_limit + 30)
        brute = spec["brute"]() if spec["brute"] else None
        if brute is not None and ref is not None and abs(brute - ref) > 1e-6 * max(1, abs(ref)):
            scip_status += f" (brute {brute:.8g} differs)"
        if ref is None and brute is not None:
            ref = brute
        if ref is None and not spec["expect"]:
            print(f"  ({spec['name']}: no SCIP reference: {scip_status})")
        elif "differs" in scip_status:
            print(f"  ({spec['name']}: {scip_status})")
        v, why = verdict(spec, ref, g)
        gap = (g["ub"] - g["lb"]) if g["ub"] is not None and g["lb"] is not None else None
        st = g["status"] if g["error"] is None else "error"
        row = (spec["name"], spec["n"], ref, t_scip, ("tree:" if g.get("refused") else "") + st, g["lb"], g["ub"],
               gap, g["time"], v, why)
        rows[spec["heldout"]].append(row)
        _print_row(row)
        sys.stdout.flush()
    for held in (False, True):
        if rows[held]:
            print(f"\n== {'held-out' if held else 'tuning'} set ({len(rows[held])} models) ==")
            _print_header()
            for row in rows[held]:
                _print_row(row)
            counts = {}
            for row in rows[held]:
                counts[row[9]] = counts.get(row[9], 0) + 1
            print("verdicts:", counts)


def _f(x, w=12):
    if x is None:
        return "-".rjust(w)
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x).rjust(w)
        return f"{x:.7g}".rjust(w)
    return str(x).rjust(w)


def _print_header():
    print(f"{'model':26s} {'n':>3s} {'SCIP opt':>12s} {'t_scip':>7s} {'gop status':>14s} {'LB':>12s} {'UB':>12s} "
          f"{'gap':>9s} {'t_gop':>7s}  verdict")


def _print_row(r):
    name, n, ref, ts, st, lb, ub, gap, tg, v, why = r
    print(f"{name:26s} {n:3d} {_f(ref)} {_f(ts, 7) if ts is None else f'{ts:7.2f}'} {st:>14s} {_f(lb)} {_f(ub)} "
          f"{_f(gap, 9)} {'-'.rjust(7) if tg is None else f'{tg:7.2f}'}  {v} {why}")


if __name__ == "__main__":
    main()
