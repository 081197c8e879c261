"""Benchmark: varopt ``gop`` vs SCIP on Bayesian GMM negative ELBOs (Saddiki, Trapp & Flaherty 2017, §3.2, Table 1).

For every N, K, family: draw data from a K-component mixture (seeded), build ONE Pyomo
model (``bgmm_pyomo``) and solve it with ``SolverFactory('gop')`` and with SCIP
(``scip_direct``) under the same time limit and gap; print the time to a certified relative
gap (or the status and bounds at the time limit), the time ratio SCIP/gop, and check the
optimum against SCIP when SCIP finishes, else against a dense multistart on the profile
(``profile_multistart``; 1e-6 relative).

    python benchmarks/gop_bgmm.py --N 10 20 --K 2 --family point --time-limit 60
    python benchmarks/gop_bgmm.py                 # full grid N in {10,20,50,100,200}, K in {2,3}, both families (long)
    python benchmarks/gop_bgmm.py --minimal       # the minimal data set only

Timings are wall-clock on whatever machine runs this; on a shared machine they are noisy.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np


def make_data(N, K, seed=0, sep=4.0):
    """``x_i ~ sum_k (1/K) N(sep * k, 1)`` (means 0, sep, 2 sep, ...), seeded by (seed, N, K)."""
    rng = np.random.default_rng([seed, N, K])
    z = rng.integers(0, K, size=N)
    return np.round(rng.normal(sep * z, 1.0), 3)


def run_gop(model, time_limit, rel_gap, **opts):
    import pyomo.environ as pyo
    t0 = time.perf_counter()
    res = pyo.SolverFactory("gop").solve(model, rel_gap=rel_gap, time_limit=time_limit, **opts)
    r = res.varopt_result
    return {"status": r.status, "time": time.perf_counter() - t0, "lower": r.lower_bound,
            "upper": r.upper_bound, "iters": r.iterations}


def random_starts(args):
    """gop from R random starting points on MINIMAL_DATA (Saddiki et al. 2017, §3.2: GOP reached the optimum 100/100)."""
    import pyomo.environ as pyo

    from varopt.baselines import bgmm_vem as V
    from varopt.formulations import bgmm as B

    import bgmm_reference as R

    d = B.MINIMAL_DATA
    x = np.asarray(d["x"], dtype=float)
    rng = np.random.default_rng(args.seed)
    for fam in args.family:
        ref = R.profile_multistart(x, d["K"], fam, d["prior_precision"], d["variance"])["value"]
        ok, times, vals = 0, [], []
        for r in range(args.random_starts):
            init = V.vem_random_init(x, d["K"], fam, d["prior_precision"], d["variance"], rng)
            m = B.bgmm_pyomo(**d, family=fam)
            B.set_pyomo_params(m, V._to_output(init, fam, d["variance"]))
            t0 = time.perf_counter()
            res = pyo.SolverFactory("gop").solve(m, rel_gap=args.gap, time_limit=args.time_limit).varopt_result
            times.append(time.perf_counter() - t0)
            vals.append(res.upper_bound)
            good = (res.status == "optimal" and abs(res.upper_bound - ref) <= 1e-6 * abs(ref)
                    and res.lower_bound <= ref + 1e-6 * abs(ref))
            ok += bool(good)
            if not good:
                print(f"  start {r}: status {res.status} bounds [{res.lower_bound}, {res.upper_bound}]", flush=True)
        print(f"{fam}: gop certified the reference optimum {ref:.8f} from {ok}/{args.random_starts} random "
              f"starts; time median {np.median(times):.2f} s, max {np.max(times):.2f} s", flush=True)


def fmt(v, spec=".6f"):
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--N", type=int, nargs="+", default=[10, 20, 50, 100, 200])
    ap.add_argument("--K", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--family", nargs="+", default=["point", "gaussian"], choices=["point", "gaussian"])
    ap.add_argument("--variance", default="1.0", help="known variance or 'learned'")
    ap.add_argument("--prior-precision", type=float, default=0.1)
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--gap", type=float, default=1e-6, help="relative gap for both solvers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sep", type=float, default=4.0, help="distance between the true component means")
    ap.add_argument("--minimal", action="store_true", help="benchmark MINIMAL_DATA instead of the grid")
    ap.add_argument("--symmetry-breaking", default="phi", choices=["phi", "mu", "none"],
                    help="label-symmetry breaking rows added to the model both solvers get (docs/gop_bgmm.md "
                         "§16; default 'phi': rows of the relaxed-dual block, cheap for gop)")
    ap.add_argument("--gop-symmetry", default="auto", choices=["auto", "off"],
                    help="gop's own symmetry option (docs/gop.md §8c); it finds nothing to break when the model "
                         "already has symmetry-breaking rows")
    ap.add_argument("--no-scip", action="store_true", help="skip SCIP (reference: multistart only)")
    ap.add_argument("--random-starts", type=int, default=0, metavar="R",
                    help="instead of the grid: run gop R times on MINIMAL_DATA from random starting values "
                         "(the §3.2 VEM initialisation written into the model) and count certified optima")
    args = ap.parse_args(argv)
    if args.random_starts:
        return random_starts(args)

    import varopt
    from varopt.formulations.bgmm import MINIMAL_DATA, bgmm_pyomo

    from bgmm_reference import profile_multistart, scip_reference

    if "gop" not in varopt.registered_solvers():
        raise SystemExit("error: solver 'gop' is not registered")
    variance = args.variance if args.variance == "learned" else float(args.variance)
    cases = []
    if args.minimal:
        for fam in args.family:
            d = MINIMAL_DATA
            cases.append(("minimal", np.asarray(d["x"], float), d["K"], fam, d["prior_precision"], d["variance"]))
    else:
        for N in args.N:
            for K in args.K:
                for fam in args.family:
                    x = make_data(N, K, args.seed, args.sep)
                    cases.append((f"N={N}", x, K, fam, args.prior_precision, variance))

    hdr = (f"{'data':>8} {'K':>2} {'family':>8} | {'gop status':>10} {'t_gop':>7} {'gop lower':>12} {'gop upper':>12}"
           f" {'gap':>8} | {'scip status':>12} {'t_scip':>7} {'scip lower':>12} {'scip upper':>12} {'gap':>8}"
           f" | {'t_scip/t_gop':>12} | {'reference':>13} {'check':>9}")
    print(hdr)
    print("-" * len(hdr))

    def rgap(lo, up):
        if lo is None or up is None or not (math.isfinite(lo) and math.isfinite(up)):
            return None
        return (up - lo) / max(abs(up), 1e-10)

    sb = False if args.symmetry_breaking == "none" else args.symmetry_breaking
    for label, x, K, fam, lam, var in cases:
        model = bgmm_pyomo(x, K, fam, lam, var, symmetry_breaking=sb)
        g = run_gop(model, args.time_limit, args.gap, symmetry=args.gop_symmetry)
        if args.no_scip:
            s = {"status": "skipped", "time": None, "lower": None, "upper": None}
        else:
            s = scip_reference(x, K, fam, lam, var, time_limit=args.time_limit, gap=args.gap, symmetry_breaking=sb)
        if s["status"] == "optimal" and s["upper"] is not None:
            ref, src = s["upper"], "scip"
        else:
            ref, src = profile_multistart(x, K, fam, lam, var, n_starts=4096, n_polish=32)["value"], "ms"
        tol = 1e-6 * abs(ref)
        valid = g["lower"] <= ref + tol and g["upper"] >= ref - tol
        if g["status"] == "optimal":
            check = "agree" if (abs(g["upper"] - ref) <= tol and valid) else "MISMATCH"
        else:
            check = "bounds ok" if valid else "INVALID"
        ratio = (s["time"] / g["time"]) if (s["time"] and g["status"] == "optimal") else None
        ratio_txt = fmt(ratio, "12.2f") if (ratio is None or s["status"] == "optimal") else f">{ratio:.2f}"
        print(f"{label:>8} {K:>2} {fam:>8} | {g['status']:>10} {g['time']:7.2f} {fmt(g['lower']):>12} "
              f"{fmt(g['upper']):>12} {fmt(rgap(g['lower'], g['upper']), '.1e'):>8} | {s['status']:>12} "
              f"{fmt(s['time'], '7.2f'):>7} {fmt(s['lower']):>12} {fmt(s['upper']):>12} "
              f"{fmt(rgap(s['lower'], s['upper']), '.1e'):>8} | {ratio_txt:>12} | "
              f"{ref:13.6f}{'*' if src == 'ms' else ' '} {check:>9}", flush=True)
    print("reference: SCIP optimum when SCIP certified it, else (*) dense multistart on the profile. check: "
          "'agree' = gop certified and its incumbent is within 1e-6 (relative) of the reference; 'bounds ok' = "
          "gop stopped at a limit and its bounds bracket the reference; gap = (upper - lower) / |upper|; "
          "'>r' = SCIP did not finish, so the ratio is a lower bound")


if __name__ == "__main__":
    main()
