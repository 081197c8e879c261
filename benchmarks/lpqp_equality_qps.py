"""Equality-constrained projections (min ||x||^2 + c'x s.t. A x = e, optional box) through the QP layer, gop and
majorize against CVXPY + Clarabel in the same run: objective difference, time and ratio. ``highs-first`` forces the
layer's old order (HiGHS's active set before Clarabel) to show what the equality rule of
``varopt.lpqp.settings._CLARABEL_FIRST_EQ_NNZ`` changes.

    OPENBLAS_NUM_THREADS=1 python benchmarks/lpqp_equality_qps.py [--sizes 300x150,900x500] [--solvers layer,gop]
"""
from __future__ import annotations

import argparse
import time
from functools import partial

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

import varopt  # noqa: F401  (registers method='gop' and 'majorize')
from varopt.lpqp import qp_ladder, solve_qp


def instance(n, m, box, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, n)) / np.sqrt(n)
    e = A @ rng.uniform(-1, 1, n)
    c = 3 * rng.standard_normal(n)
    return A, e, c, (np.full(n, -3.0), np.full(n, 3.0)) if box else (None, None)


def problem(A, e, c, bounds):
    x = cp.Variable(A.shape[1])
    cons = [A @ x == e] + ([x >= bounds[0], x <= bounds[1]] if bounds[0] is not None else [])
    return cp.Problem(cp.Minimize(cp.sum_squares(x) + c @ x), cons)


def solve_cvxpy(A, e, c, bounds, how):
    return problem(A, e, c, bounds).solve(**how)


def solve_layer(A, e, c, bounds):
    n = A.shape[1]
    return solve_qp(sp.identity(n, format="csr") * 2.0, c, sp.csr_matrix(A), e, e, *bounds).objective


def timed(f):
    t = time.perf_counter()
    v = f()
    return v, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="300x150,500x250,900x500,1000x50")
    ap.add_argument("--solvers", default="layer,highs-first,gop,majorize")
    args = ap.parse_args()
    print(f"{'n x m':>9} {'box':>4} {'solver':>12} {'objective':>16} {'|diff|':>9} {'time s':>8} {'clarabel s':>10} "
          f"{'ratio':>7}")
    for size in args.sizes.split(","):
        n, m = (int(v) for v in size.split("x"))
        for box in (False, True):
            A, e, c, bounds = instance(n, m, box)
            ref, t_ref = timed(partial(solve_cvxpy, A, e, c, bounds, {"solver": cp.CLARABEL}))
            for name in args.solvers.split(","):
                if name in ("layer", "highs-first"):
                    saved = qp_ladder._CLARABEL_FIRST_EQ_NNZ
                    if name == "highs-first":
                        qp_ladder._CLARABEL_FIRST_EQ_NNZ = np.inf
                    try:
                        val, t = timed(partial(solve_layer, A, e, c, bounds))
                    finally:
                        qp_ladder._CLARABEL_FIRST_EQ_NNZ = saved
                else:
                    val, t = timed(partial(solve_cvxpy, A, e, c, bounds, {"method": name}))
                print(f"{size:>9} {box!s:>4} {name:>12} {val:16.10g} {abs(val - ref):9.2e} {t:8.3f} {t_ref:10.3f} "
                      f"{t / t_ref:7.2f}", flush=True)


if __name__ == "__main__":
    main()
