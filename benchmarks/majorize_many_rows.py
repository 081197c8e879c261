"""Benchmark: majorize with many dense inequality rows in few columns, against CVXPY+Clarabel (issue 12 item 1).

A CVXPY user's problem (found by a user-form sweep, 2026-11-26)::

    min  log_sum_exp(W x) - 1.5 W[0]'x + 0.01 ||x||^2     s.t.  A x <= b,

``A`` (m x n) and ``W`` (6 x n) standard normal, ``b`` uniform on [0.5, 1.5], seed 1; the optimum is at (or next to) a
vertex of the rows, so about n rows are active. Per shape, in the same run and alternating: ``prob.solve(method=
"majorize")`` (default options; the step QPs by the dual active set of :mod:`varopt.lpqp.dual_active_set`), with
``--previous`` also majorize with that path switched off (every step QP through the QP layer, as before
2026-11-26), and ``prob.solve(solver="CLARABEL")`` (tolerances 1e-10). Times: whole ``prob.solve`` walls (CVXPY's
compilation included), best of ``--repeat``. ratio = Clarabel / majorize (> 1: majorize faster); gap = relative
objective difference to Clarabel; viol = CVXPY's largest constraint violation at majorize's point.

Usage: ``python benchmarks/majorize_many_rows.py [--shapes 100x1500,100x500] [--repeat 3] [--previous]``.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import time

import numpy as np

import varopt  # noqa: F401
from varopt.solvers.majorize import step_qp

SHAPES = "100x1500,100x500,50x3000,200x1500"


def problem(n, m, seed=1):
    import cvxpy as cp
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, n))
    b = rng.uniform(0.5, 1.5, m)
    W = rng.normal(size=(6, n))
    x = cp.Variable(n, name="x")
    obj = cp.log_sum_exp(W @ x) - 1.5 * (W[0] @ x) + 0.01 * cp.sum_squares(x)
    return cp.Problem(cp.Minimize(obj), [A @ x <= b])


def run(key, n, m):
    """``(wall, value, iterations, step QP counts, violation)`` of one fresh solve."""
    prob = problem(n, m)
    saved = step_qp.DUAL_MAX_COLS
    if key == "previous":
        step_qp.DUAL_MAX_COLS = 0   # no dual active set: every step QP through the QP layer
    try:
        t0 = time.perf_counter()
        if key == "clarabel":
            v = prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
        else:
            v = prob.solve(method="majorize")
        wall = time.perf_counter() - t0
    finally:
        step_qp.DUAL_MAX_COLS = saved
    viol = max(float(np.max(c.violation(), initial=0.0)) for c in prob.constraints)
    if key == "clarabel":
        return wall, v, prob.solver_stats.num_iters, {}, viol
    res = prob.solver_stats.extra_stats["varopt_result"]
    return wall, v, res.iterations, res.info.get("step_qp", {}), viol


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=SHAPES, help="comma-separated n x m (columns x rows)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--previous", action="store_true", help="also majorize without the dual active set")
    a = ap.parse_args(argv)
    keys = ["majorize", "clarabel"] + (["previous"] if a.previous else [])
    rows = []
    for shape in a.shapes.split(","):
        n, m = (int(v) for v in shape.split("x"))
        best = {k: np.inf for k in keys}
        out = {}
        for _ in range(a.repeat):
            for k in keys:
                got = run(k, n, m)
                best[k] = min(best[k], got[0])
                out[k] = got
        rows.append((n, m, best, out))
        print(f"# {shape} done", flush=True)
    print(f"\nmajorize with many rows: log_sum_exp(W x) - 1.5 W[0]'x + 0.01||x||^2, A x <= b; best of {a.repeat} "
          f"whole prob.solve walls (ms); load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    hdr = (f"{'n':>4s} {'m':>5s} | {'majorize':>9s} {'it':>3s} {'dual/QP layer':>13s} | {'Clarabel':>9s} {'it':>3s} | "
           f"{'ratio':>6s} | {'gap':>8s} {'viol':>7s}" + (f" | {'previous':>9s} {'ratio':>6s} {'gap':>8s}"
                                                            if a.previous else ""))
    print(hdr)
    print("-" * len(hdr))
    for n, m, best, out in rows:
        vm, vc = out["majorize"][1], out["clarabel"][1]
        st = out["majorize"][3]
        line = (f"{n:4d} {m:5d} | {1e3 * best['majorize']:9.1f} {out['majorize'][2]:3d} "
                f"{str(st.get('dual', 0)) + '/' + str(st.get('fallback', 0)):>13s} | {1e3 * best['clarabel']:9.1f} "
                f"{out['clarabel'][2]:3d} | {best['clarabel'] / best['majorize']:6.2f} | {(vm - vc) / abs(vc):8.1e} "
                f"{out['majorize'][4]:7.1e}")
        if a.previous:
            vp = out["previous"][1]
            line += (f" | {1e3 * best['previous']:9.1f} {best['clarabel'] / best['previous']:6.2f} "
                     f"{(vp - vc) / abs(vc):8.1e}")
        print(line)
    print("ratio = Clarabel / majorize (> 1: majorize faster); dual/QP layer = step QPs answered by the dual active "
          "set / by the QP layer; previous = majorize without the dual active set (each step QP by the QP layer)")
    return rows


if __name__ == "__main__":
    main()
