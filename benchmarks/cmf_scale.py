"""cmf and trw's effective resistances at 144-10000 spins: the compiled paths against the numpy references, in the
same run.

* cmf with default options (1000 particles, 4 replicates, 100 tempering steps, 10 moves, seed 0) with
  ``backend='numpy'`` (the reference) and ``backend='numba'``: wall time, ratio, log Z and its error against the
  exact value (12 x 12 open random-field grid of ``docs/cmf.md``: variable elimination; 30 x 30 periodic
  ferromagnet at T = 2.5: Kaufman 1949, ``varopt.formulations.kaufman``), and whether the estimates, marginals,
  c and theta sequences are bit-identical;
* trw's edge appearance probabilities (``spanning_tree_probabilities``): selected inversion against the per-edge
  solves on tori and a random 3-regular graph, time, ratio and the largest difference.

Run: ``OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/cmf_scale.py`` (about 3 min on a quiet machine, most of it the numpy
reference on 30 x 30; ``--no-numpy-30`` skips that one; ``--seeds K --only-seeds``: the numba path's log Z error
and standard error over seeds 1..K on both instances, nothing else). Timings are from a shared machine: the load average is
printed with every row.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

KEYS = ("log_partition", "log_partition_smc", "spin_means", "spin_correlations", "c_sequence")


def instance(name):
    from varopt.formulations import ising
    if name == "grid12":
        return ising.random_field_model("grid", 12, 1.0, 0.5, seed=100)
    return ising.lattice(30, 30, 1.0, 0.0, True, 2.5)


def reference(name):
    if name == "grid12":
        import varopt
        return varopt.get_solver("exact").solve(instance(name).to_program()).info["log_partition"]
    from varopt.formulations.kaufman import kaufman_log_partition
    return kaufman_log_partition(1 / 2.5, 1 / 2.5, 30, 30)


def run_cmf(name, backend, seed=0):
    import varopt
    t = time.perf_counter()
    r = varopt.get_solver("cmf").solve(instance(name).to_program(), backend=backend, seed=seed)
    return time.perf_counter() - t, r.info


def same(a, b):
    ok = all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in KEYS)
    return ok and all(np.array_equal(x, y) for x, y in zip(a["theta_sequence"], b["theta_sequence"]))


def load():
    return f"{os.getloadavg()[0]:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-numpy-30", action="store_true", help="skip the numpy reference on the 30 x 30 torus")
    ap.add_argument("--seeds", type=int, default=0, help="then the numba path with seeds 1..SEEDS on both instances: "
                    "log Z error against the exact value and its standard error per seed")
    ap.add_argument("--only-seeds", action="store_true", help="skip the backend comparison and trw (with --seeds)")
    a = ap.parse_args()
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)  # the replicates' disagreement warning (in the message)
    run_cmf("grid12", "numba")  # compile (or load the cached kernels) outside the timings
    if not a.only_seeds:
        compare_backends(a)
    if a.seeds:
        seeds(a.seeds)
    if not a.only_seeds:
        trw_probabilities()


def seeds(k):
    """Accuracy over seeds: the error of log Z against the exact value, its SE and their ratio."""
    print(f"\n{'instance':<10} {'seed':>4} {'time s':>8} {'log Z':>12} {'err':>8} {'se':>7} {'|err|/se':>8} "
          f"{'disagree':>8} {'load':>5}")
    for name in ("grid12", "torus30"):
        ref = reference(name)
        for seed in range(1, k + 1):
            dt, info = run_cmf(name, "numba", seed)
            err, se = info["log_partition"] - ref, info.get("log_partition_se")
            ratio = "-" if not se else f"{abs(err) / se:.2f}"
            print(f"{name:<10} {seed:>4} {dt:>8.1f} {info['log_partition']:>12.4f} {err:>+8.3f} "
                  f"{'-' if se is None else format(se, '.3f'):>7} {ratio:>8} "
                  f"{'yes' if info.get('replicates_disagree') else 'no':>8} {load():>5}", flush=True)


def compare_backends(a):
    print(f"{'instance':<10} {'backend':<8} {'time s':>8} {'ratio':>6} {'log Z':>12} {'ref':>12} {'err':>8} "
          f"{'se':>7} {'identical':>9} {'load':>5}")
    for name in ("grid12", "torus30"):
        ref = reference(name)
        res = {}
        for backend in ("numpy", "numba"):
            if backend == "numpy" and name == "torus30" and a.no_numpy_30:
                continue
            res[backend] = run_cmf(name, backend)
        base = res.get("numpy", (None, None))[0]
        for backend, (dt, info) in res.items():
            ratio = "-" if base is None else f"{base / dt:.2f}"
            ident = "-" if backend == "numpy" or "numpy" not in res else ("yes" if same(res["numpy"][1], info) else "NO")
            se = info.get("log_partition_se")
            print(f"{name:<10} {backend:<8} {dt:>8.1f} {ratio:>6} {info['log_partition']:>12.4f} {ref:>12.4f} "
                  f"{info['log_partition'] - ref:>+8.3f} {'-' if se is None else format(se, '.3f'):>7} {ident:>9} "
                  f"{load():>5}")


def trw_probabilities():
    import networkx as nx

    from varopt.formulations import ising
    from varopt.solvers.trw.solver import spanning_tree_probabilities as stp
    stp(3, np.array([0, 1]), np.array([1, 2]), method="selected")  # compile
    print(f"\n{'graph':<16} {'n':>6} {'edges':>6} {'selected s':>10} {'solves s':>9} {'ratio':>6} {'max diff':>9} "
          f"{'load':>5}")
    graphs = []
    for L in (30, 100):
        e = ising.lattice(L, L, 1.0, 0.0, True, 2.5)
        graphs.append((f"torus {L}x{L}", e.n, e.i, e.j))
    G = nx.random_regular_graph(3, 5000, seed=0)
    graphs.append(("3-regular", 5000, *np.array(G.edges()).T))
    for label, n, i, j in graphs:
        t = time.perf_counter()
        r1 = stp(n, i, j, method="selected")
        t1 = time.perf_counter() - t
        t = time.perf_counter()
        r0 = stp(n, i, j, method="solves")
        t0 = time.perf_counter() - t
        print(f"{label:<16} {n:>6} {len(i):>6} {t1:>10.3f} {t0:>9.2f} {t0 / t1:>6.1f} {np.abs(r1 - r0).max():>9.1e} "
              f"{load():>5}")


if __name__ == "__main__":
    main()
