"""gop on nonconvex Pyomo models whose product variables have no declared bounds, against SCIP (docs/gop.md §8k).

Before the incumbent-cutoff bounds these were refused ("GOP needs finite bounds on ..."). Models as users write them:
regularised rank-r factorisation ``||X - U V||^2 + lam (||U||^2 + ||V||^2)`` with free U, V (reference also the
closed form: the singular values soft-thresholded, ``sum_{i > r} s_i^2 + sum_{i <= r} (2 lam s_i - lam^2)`` for
``s_i > lam``), bilinear least squares with free factors, and a pooling-like model whose quality variable only a
row bounds. Both solvers run in the same process with the same time limit; the table gives values and the time ratio.

    OPENBLAS_NUM_THREADS=1 python benchmarks/gop_free_products.py [time_limit]
"""
import multiprocessing as mp
import sys
import time

import numpy as np
import pyomo.environ as pyo
from gop_instances.scip import solve_scip

import varopt  # noqa: F401  (registers 'gop')
from varopt.errors import ModelStructureError


def factorisation(n, r, lam, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n)).round(2)
    s = np.linalg.svd(X, compute_uv=False)
    closed = float(np.sum(s[r:] ** 2) + sum(2 * lam * v - lam ** 2 if v > lam else v ** 2 for v in s[:r]))

    def mk():
        m = pyo.ConcreteModel()
        m.U = pyo.Var(range(n), range(r))
        m.V = pyo.Var(range(r), range(n))
        m.o = pyo.Objective(expr=sum((X[i, j] - sum(m.U[i, k] * m.V[k, j] for k in range(r))) ** 2
                                     for i in range(n) for j in range(n))
                            + lam * (sum(m.U[i, k] ** 2 for i in range(n) for k in range(r))
                                     + sum(m.V[k, j] ** 2 for k in range(r) for j in range(n))))
        return m
    return mk, closed


def bilinear_ls(seed, n=6):
    """``min sum_i (y_i - (a_i . x)(b_i . w))^2 + 0.01 (|x|^2 + |w|^2)``, x, w in R^2 free."""
    rng = np.random.default_rng(seed)
    A, B, y = rng.normal(size=(n, 2)).round(2), rng.normal(size=(n, 2)).round(2), rng.normal(size=n).round(2)

    def mk():
        m = pyo.ConcreteModel()
        m.x = pyo.Var(range(2))
        m.w = pyo.Var(range(2))
        m.o = pyo.Objective(expr=sum((y[i] - sum(A[i, a] * m.x[a] for a in range(2))
                                      * sum(B[i, b] * m.w[b] for b in range(2))) ** 2 for i in range(n))
                            + 0.01 * sum(m.x[a] ** 2 + m.w[a] ** 2 for a in range(2)))
        return m
    return mk, None


def pooling_row():
    def mk():
        m = pyo.ConcreteModel()
        m.f = pyo.Var(range(2), bounds=(0, None))
        m.q = pyo.Var()
        m.c1 = pyo.Constraint(expr=m.f[0] + m.f[1] <= 10)
        m.c2 = pyo.Constraint(expr=m.q ** 2 + m.q * m.f[0] <= 20)
        m.c3 = pyo.Constraint(expr=m.f[0] >= 1)
        m.o = pyo.Objective(expr=-m.q * m.f[0] - 2 * m.f[1] + m.q * m.f[1])
        return m
    return mk, None


def _scip_guarded(mk, tl):
    """SCIP in a forked child: on the rank-2 factorisation it ran past its time limit for minutes."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    pr = ctx.Process(target=lambda: q.put(solve_scip(mk(), time_limit=tl)))
    pr.start()
    pr.join(tl + 15)
    if pr.is_alive():
        pr.kill()
        pr.join()
        return {"status": "hung", "value": None}
    return q.get(timeout=5)


def main(tl):
    cases = [("factorisation 3x3 rank 1", *factorisation(3, 1, 0.1, 0)),
             ("factorisation 3x3 rank 1 (seed 1)", *factorisation(3, 1, 0.1, 1)),
             ("factorisation 3x3 rank 2", *factorisation(3, 2, 0.1, 0)),
             ("bilinear least squares", *bilinear_ls(0)),
             ("bilinear least squares (seed 1)", *bilinear_ls(1)),
             ("pooling row", *pooling_row())]
    print(f"{'model':36s} {'gop status':>10s} {'gop value':>14s} {'gop t':>7s} {'SCIP status':>11s} {'SCIP value':>14s} "
          f"{'SCIP t':>7s} {'closed form':>12s} {'t ratio':>7s}")
    for name, mk, closed in cases:
        t = time.perf_counter()
        s = _scip_guarded(mk, tl)
        ts = time.perf_counter() - t
        m = mk()
        t = time.perf_counter()
        try:
            r = pyo.SolverFactory("gop").solve(m, time_limit=tl).varopt_result
            st, val = r.status, r.objective
        except ModelStructureError as e:   # a refusal ("needs finite bounds") is a result here
            st, val = type(e).__name__, float("nan")
        tg = time.perf_counter() - t
        cf = f"{closed:12.6f}" if closed is not None else f"{'-':>12s}"
        print(f"{name:36s} {st:>10s} {val:14.8f} {tg:7.2f} {s['status']:>11s} {s['value'] or float('nan'):14.8f} "
              f"{ts:7.2f} {cf} {tg / ts:7.2f}", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)
