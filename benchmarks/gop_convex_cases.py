"""gop's direct convex path (docs/gop.md §13e-13f) on convex models with curved rows, unbounded ones and geometric
means, against CVXPY + Clarabel in the same run: status of each, gop's objective, Clarabel's, relative difference,
gop's path ('convex': one barrier solve; 'tree': the spatial tree), tree nodes, time and ratio. Errors print their first
words. Run the same script with PYTHONPATH at an older commit for the "before" column.

    OPENBLAS_NUM_THREADS=1 python benchmarks/gop_convex_cases.py [--time-limit 60] [--only inv_prod]
"""
from __future__ import annotations

import argparse
import time
import warnings

import cvxpy as cp
import numpy as np

import varopt  # noqa: F401  (registers method='gop')


def cases():
    rng = np.random.default_rng(0)
    d0 = np.array([1.0, -1.0, 0.5])
    A4 = -np.abs(rng.normal(size=(4, 3))) * np.sign(d0)
    x, y, z, t = cp.Variable(3), cp.Variable(), cp.Variable(), cp.Variable()
    x5, x7, y3 = cp.Variable(5), cp.Variable(7), cp.Variable(3)
    B, b = rng.normal(size=(4, 4)), rng.uniform(1, 3, 4)
    x4 = cp.Variable(4)
    c3 = np.array([0.5, -1.0, 2.0])
    # (a) unbounded convex programs with a curved row or objective
    yield "lse row, unbounded", lambda: cp.Problem(cp.Minimize(-d0 @ x), [cp.log_sum_exp(A4 @ x) <= 3])
    yield "sum exp row, unbounded", lambda: cp.Problem(cp.Minimize(cp.sum(x)), [cp.sum(cp.exp(x)) <= 2])
    yield "-y + exp(z), y + z <= 0", lambda: cp.Problem(cp.Minimize(-y + cp.exp(z)), [y + z <= 0])
    yield "norm rhs + exp row", lambda: cp.Problem(cp.Minimize(t - 2 * cp.sum(x)),
                                                   [cp.norm(x - 1, 2) <= t, cp.sum(cp.exp(-x)) <= 5])
    yield "sum exp(x) - c x, free", lambda: cp.Problem(cp.Minimize(cp.sum(cp.exp(x)) - c3 @ x))
    # (c) geometric means
    yield "max geo_mean, n=5", lambda: cp.Problem(cp.Maximize(cp.geo_mean(x5)), [cp.sum(x5) <= 5, x5[0] <= 0.5])
    yield "inv_prod, n=7", lambda: cp.Problem(cp.Minimize(cp.inv_prod(x7)), [cp.sum(x7) <= 7, x7[0] <= 0.5])
    yield "geo_mean(x) >= 1, n=5", lambda: cp.Problem(cp.Minimize(np.arange(1, 6) @ x5), [cp.geo_mean(x5) >= 1])
    yield "weighted mean of B x + b", lambda: cp.Problem(cp.Maximize(cp.geo_mean(B @ x4 + b, [1, 2, 3, 1])),
                                                         [cp.norm(x4, 2) <= 1])
    yield "lsq - 2 geo_mean(x[:4])", lambda: cp.Problem(cp.Minimize(cp.sum_squares(x5 - 1.5) - 2 * cp.geo_mean(x5[:4])))
    yield "harmonic_mean, n=3", lambda: cp.Problem(cp.Maximize(cp.harmonic_mean(y3)), [cp.sum(y3) <= 3, y3[0] <= 0.5])
    # (b) p-norms next to other terms: still the tree
    yield "t + pnorm(y - 1, 3)", lambda: cp.Problem(cp.Minimize(t + cp.pnorm(y3 - 1, 3)), [t >= cp.sum(y3) - 2, t >= 0])
    yield "norm_inf + pnorm(w, 1.5)", lambda: cp.Problem(cp.Minimize(cp.norm_inf(x) + cp.pnorm(y3, 1.5)),
                                                         [x + y3 == np.array([1.0, -2.0, 0.5])])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    print(f"{'case':26s} {'gop status':>10s} {'Clarabel':>10s} {'gop':>13s} {'Clarabel':>13s} {'rel diff':>8s} "
          f"{'path':>6s} {'nodes':>6s} {'gop s':>7s} {'clar s':>7s} {'ratio':>6s}")
    for name, make in cases():
        if args.only and args.only not in name:
            continue
        ref = make()
        t0 = time.perf_counter()
        ref.solve(solver=cp.CLARABEL)
        tc = time.perf_counter() - t0
        prob = make()
        t0 = time.perf_counter()
        try:
            prob.solve(method="gop", time_limit=args.time_limit)
            status, val = prob.status, prob.value
            res = prob.varopt_result
            path, nodes = res.info.get("mode", "-"), res.info.get("nodes", res.iterations)
        except Exception as exc:   # noqa: BLE001  (the before column: errors are results)
            status, val, path, nodes = "error", float("nan"), "-", "-"
            print(f"  ({name}: {type(exc).__name__}: {str(exc)[:90]})")
        tg = time.perf_counter() - t0
        rv = ref.value if ref.value is not None else float("nan")
        rel = abs(val - rv) / max(1.0, abs(rv)) if np.isfinite(rv) and np.isfinite(val) else float("nan")
        print(f"{name:26s} {status:>10s} {ref.status:>10s} {val:13.8g} {rv:13.8g} {rel:8.1e} {path:>6s} "
              f"{nodes!s:>6s} {tg:7.2f} {tc:7.3f} {tg / tc:6.0f}")


if __name__ == "__main__":
    main()
