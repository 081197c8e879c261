"""CVXPY's piecewise-linear atoms as epigraph columns at regression scale: gop and majorize against Clarabel.

Robust regressions ``min_w sum huber(X w - y)``, ``norm_inf(X w - y)``, ``sum_largest(X w - y, k)`` and a quantile
(pinball) loss ``sum pos(r) + 0.5 sum r`` on ``N x D`` Gaussian data with heavy-tailed (Student t, 2 dof) noise,
seeded. Prints one row per atom: compile time, each solver's wall time, its ratio to Clarabel's and the relative
error of its optimal value against Clarabel's (the check: every solver must reach 1e-6).

Usage: ``python benchmarks/cvxpy_epigraph_atoms.py [N] [D]`` (default 2000 x 50); run with
``OPENBLAS_NUM_THREADS=1`` and note the load average: the machine is shared.
"""
from __future__ import annotations

import sys
import time

import numpy as np


def problems(N, D, seed=0):
    import cvxpy as cp
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    y = X @ rng.standard_normal(D) + rng.standard_t(2, N)

    def build(kind):
        w = cp.Variable(D)
        r = X @ w - y
        f = {"huber": cp.sum(cp.huber(r, 1.0)), "norm_inf": cp.norm_inf(r),
             "sum_largest": cp.sum_largest(r, max(1, N // 20)), "pinball": cp.sum(cp.pos(r)) + 0.5 * cp.sum(r)}[kind]
        return cp.Problem(cp.Minimize(f))
    return build


def main(N=2000, D=50):
    import varopt  # noqa: F401  (registers the methods)
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    build = problems(N, D)
    print(f"N={N} D={D}")
    print(f"{'atom':12s} {'compile':>8s} {'clarabel':>9s} {'gop':>8s} {'ratio':>6s} {'rel.err':>8s} "
          f"{'majorize':>9s} {'ratio':>6s} {'rel.err':>8s}")
    for kind in ("huber", "norm_inf", "sum_largest", "pinball"):
        t = time.perf_counter()
        compile_cvxpy(build(kind))
        tc = time.perf_counter() - t
        p = build(kind)
        t = time.perf_counter()
        ref = p.solve(solver="CLARABEL")
        tr = time.perf_counter() - t
        cells = []
        for method in ("gop", "majorize"):
            p = build(kind)
            t = time.perf_counter()
            v = p.solve(method=method, time_limit=300)
            ts = time.perf_counter() - t
            cells.append(f"{ts:8.2f}s {ts / tr:5.1f}x {abs(v - ref) / max(1.0, abs(ref)):8.1e}")
        print(f"{kind:12s} {tc:7.2f}s {tr:8.2f}s {cells[0]} {cells[1]}", flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
