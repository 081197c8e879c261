"""Benchmark: GOP relaxed duals solved serially vs. in parallel (``executor=``), same instance, one run.

    python benchmarks/gop_parallel.py --N 50 --K 2              # serial vs ProcessPoolExecutor(2)
    python benchmarks/gop_parallel.py --N 100 --dask            # also a dask LocalCluster executor
    python benchmarks/gop_parallel.py --minimal                 # the minimal data set

The data are ``benchmarks/gop_bgmm.make_data`` (seeded). Each configuration solves the same
Pyomo-built program (``bgmm_pyomo`` compiled once) to the same relative gap; the table shows the
time, iterations, relaxed duals solved, bounds, and the speed-up ``t_serial / t``. Executors are
started before the clock starts (pool start-up is not counted; the first solve in fresh workers,
which builds their HiGHS models, is). Timings on a shared machine are noisy: best of ``--repeat``.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def build_program(args):
    from varopt.formulations.bgmm import MINIMAL_DATA, bgmm_pyomo
    from varopt.frontends.pyomo_compile import compile_pyomo

    if args.minimal:
        d = dict(MINIMAL_DATA)
        label = f"minimal (N={len(d['x'])}, K={d['K']})"
    else:
        from gop_bgmm import make_data
        d = dict(x=make_data(args.N, args.K, args.seed), K=args.K, prior_precision=args.prior_precision,
                 variance=1.0)
        label = f"N={args.N}, K={args.K}"
    return compile_pyomo(bgmm_pyomo(**d, family=args.family))[0], label


def solve(program, executor, args):
    from varopt.registry import get_solver
    t0 = time.perf_counter()
    r = get_solver("gop").solve(program, executor=executor, rel_gap=args.gap, time_limit=args.time_limit)
    return time.perf_counter() - t0, r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--N", type=int, default=50)
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--family", default="point", choices=["point", "gaussian"])
    ap.add_argument("--prior-precision", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minimal", action="store_true", help="MINIMAL_DATA instead of make_data")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gap", type=float, default=1e-6)
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--repeat", type=int, default=1, help="best of R runs per configuration")
    ap.add_argument("--dask", action="store_true", help="also run a dask.distributed LocalCluster executor")
    args = ap.parse_args(argv)

    program, label = build_program(args)
    configs = [("serial", None)]
    pool = cf.ProcessPoolExecutor(max_workers=args.workers)
    configs.append((f"ProcessPool({args.workers})", pool))
    client = None
    if args.dask:
        from dask.distributed import Client
        client = Client(processes=True, n_workers=args.workers, threads_per_worker=1, dashboard_address=None,
                        silence_logs=50)
        configs.append((f"dask LocalCluster({args.workers})", client.get_executor()))
    try:
        list(pool.map(abs, range(args.workers)))  # start the worker processes
        rows = []
        for name, ex in configs:
            best = None
            for _ in range(args.repeat):
                t, r = solve(program, ex, args)
                if best is None or t < best[0]:
                    best = (t, r)
            rows.append((name, *best))
    finally:
        pool.shutdown()
        if client is not None:
            client.close()
    print(f"GOP, BGMM {args.family} family, {label}, rel_gap {args.gap:g}, {os.cpu_count()} CPUs "
          f"(load average {os.getloadavg()[0]:.2f})")
    hdr = f"{'executor':>22} | {'status':>10} {'time s':>8} {'iters':>6} {'RDs':>6} {'lower':>14} {'upper':>14} | {'speed-up':>8}"
    print(hdr)
    print("-" * len(hdr))
    t_serial = rows[0][1]
    for name, t, r in rows:
        print(f"{name:>22} | {r.status:>10} {t:8.2f} {r.iterations:6d} {r.info.get('n_subproblems', 0):6d} "
              f"{r.lower_bound:14.8f} {r.upper_bound:14.8f} | {t_serial / t:8.2f}")
    ok = all(abs(r.upper_bound - rows[0][2].upper_bound) <= 2e-6 * abs(rows[0][2].upper_bound) for _, _, r in rows)
    print("all certified optima agree (1e-6 relative)" if ok else "WARNING: the optima differ")


if __name__ == "__main__":
    main()
