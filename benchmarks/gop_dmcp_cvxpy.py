"""Benchmark: the DMCP-style instances of the collection written in CVXPY as their users write them.

``cp.sum_squares(A - W @ H)`` and ``cp.norm(A - W @ H, 'fro')`` (NMF), and
``cp.sum_squares(Y - d @ x) + 0.5 * cp.norm1(x)`` with ``cp.norm(d, 2) <= 1`` (dictionary learning), on the
data of ``benchmarks/gop_instances/multiconvex.py``; gop's value and bound against the collection's
SCIP/brute-force optimum (same feasible sets).

    python benchmarks/gop_dmcp_cvxpy.py --time-limit 60
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import cvxpy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import varopt  # noqa: E402,F401
from gop_instances import get  # noqa: E402
from gop_instances.multiconvex import A, Y  # noqa: E402


def nmf(fro):
    W = cp.Variable((3, 1), nonneg=True)
    H = cp.Variable((1, 2), nonneg=True)
    R = np.array(A) - W @ H
    obj = cp.norm(R, "fro") if fro else cp.sum_squares(R)
    return cp.Problem(cp.Minimize(obj), [cp.sum(W) == 1, H <= 20])


def dictlearn():
    d = cp.Variable((2, 1))
    x = cp.Variable((1, 3))
    return cp.Problem(cp.Minimize(cp.sum_squares(np.array(Y) - d @ x) + 0.5 * cp.norm1(x)),
                      [cp.norm(d, 2) <= 1, d[0] >= 0, x <= 10, x >= -10])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args(argv)
    print("| instance (CVXPY) | optimum | gop status | value | bound | rel. error | s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, build in (("nmf_sq", lambda: nmf(False)), ("nmf_fro", lambda: nmf(True)), ("dictlearn", dictlearn)):
        prob = build()
        t0 = time.perf_counter()
        val = prob.solve(method="gop", time_limit=args.time_limit)
        t = time.perf_counter() - t0
        r = prob.varopt_result
        opt = get(name).optimum
        print(f"| {name} | {opt:.9f} | {r.status} | {val:.9f} | {r.lower_bound:.9f} | "
              f"{abs(val - opt) / abs(opt):.1e} | {t:.2f} |")


if __name__ == "__main__":
    main()
