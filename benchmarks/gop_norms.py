"""gop on convex programs with Euclidean norms (square-root lasso, group lasso, norm ball, Pyomo sqrt(x^2+y^2))
against Clarabel (CVXPY) in the same run: status, objective, relative difference, gop's path ('convex': the direct
convex path of docs/gop.md §13e; 'tree'), tree nodes, time and ratio. ``--mode tree`` runs the spatial tree (its
cone cuts, §8) instead of 'auto'.

    OPENBLAS_NUM_THREADS=1 python benchmarks/gop_norms.py [--sizes 20x5,100x20] [--time-limit 30]
"""
from __future__ import annotations

import argparse
import time

import cvxpy as cp
import numpy as np

import varopt  # noqa: F401  (registers method='gop')


def models(N, D, seed=0):
    rng = np.random.default_rng(seed)
    A, b = rng.standard_normal((N, D)), rng.standard_normal(N)
    x = cp.Variable(D)
    groups = [x[i:i + 5] for i in range(0, D, 5)]
    yield "sqrt-lasso", cp.Problem(cp.Minimize(cp.norm(A @ x - b, 2) + 0.1 * cp.norm1(x)))
    yield "group lasso", cp.Problem(cp.Minimize(cp.sum_squares(A @ x - b) + 2 * sum(cp.norm(g, 2) for g in groups)))
    yield "norm ball", cp.Problem(cp.Minimize(cp.sum_squares(A @ x - b)), [cp.norm(x, 2) <= 0.3])


def pyomo_model():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 1))
    m.y = pyo.Var(bounds=(-1, 1))
    m.o = pyo.Objective(expr=pyo.sqrt(m.x ** 2 + m.y ** 2) - 0.5 * m.x)
    return m


def _nodes(res):
    return res.info.get("nodes", res.info.get("tree_nodes", res.iterations))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="20x5,100x20")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--mode", default="auto", choices=("auto", "tree"))
    args = ap.parse_args()
    print(f"{'model':12s} {'N x D':>7s} {'status':>10s} {'gop':>12s} {'Clarabel':>12s} {'rel diff':>9s} "
          f"{'path':>6s} {'nodes':>6s} {'gop s':>7s} {'clar s':>7s} {'ratio':>7s}")
    for size in args.sizes.split(","):
        N, D = (int(v) for v in size.split("x"))
        for name, prob in models(N, D):
            t0 = time.perf_counter()
            ref = prob.solve(solver=cp.CLARABEL)
            tc = time.perf_counter() - t0
            t0 = time.perf_counter()
            val = prob.solve(method="gop", time_limit=args.time_limit, mode=args.mode)
            tg = time.perf_counter() - t0
            nodes = _nodes(prob.varopt_result)
            print(f"{name:12s} {size:>7s} {prob.status:>10s} {val:12.8f} {ref:12.8f} "
                  f"{abs(val - ref) / max(1.0, abs(ref)):9.1e} {prob.varopt_result.info.get('mode', '-'):>6s} {nodes!s:>6s} {tg:7.2f} {tc:7.3f} {tg / tc:7.0f}")
    import pyomo.environ as pyo
    m = pyomo_model()
    t0 = time.perf_counter()
    r = pyo.SolverFactory("gop").solve(m, time_limit=args.time_limit, mode=args.mode).varopt_result
    tg = time.perf_counter() - t0
    print(f"{'pyomo sqrt':12s} {'2':>7s} {str(r.status):>10s} {pyo.value(m.o):12.8f} {0.0:12.8f} "
          f"{abs(pyo.value(m.o)):9.1e} {r.info.get('mode', '-'):>6s} {_nodes(r)!s:>6s} {tg:7.2f}")


if __name__ == "__main__":
    main()
