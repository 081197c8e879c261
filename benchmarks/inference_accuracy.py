"""Accuracy and time of every energy solver against exact answers (Carbonetto 2009, §4.4 models
and the periodic ferromagnet of §3.4.2).

* 12 x 12 open grids and complete graphs on 26 nodes, fields U[-1, 1], couplings ±1/2
  (10 instances each): log-Z error and mean |mu_hat - mu| against ``exact``;
* 20 x 20 periodic ferromagnets at T in {1.0, 2.0, 2.269, 2.5, 3.0} against
  ``kaufman_log_partition`` (magnetisations are 0 by symmetry).

Run: ``PYTHONPATH=. python benchmarks/inference_accuracy.py [--instances 10]`` (about 5 min).
"""
import argparse
import time

import numpy as np

import varopt
from varopt.formulations import ising
from varopt.formulations.kaufman import kaufman_log_partition

METHODS = [("meanfield", {}), ("lbp", {}), ("trw", {}), ("ais", {"steps": 1000, "particles": 100})]


def run(name, e, **kw):
    t = time.perf_counter()
    r = varopt.get_solver(name).solve(e.to_program(), **kw)
    return r, time.perf_counter() - t


def table(title, rows):
    print(f"\n{title}")
    print(f"{'method':<10} {'logZ err (mean)':>16} {'|err| max':>10} {'mean|dmu|':>10} {'time s':>8} {'bound ok':>9}")
    for name, errs, dmu, ts, ok in rows:
        print(f"{name:<10} {np.mean(errs):>16.4g} {np.max(np.abs(errs)):>10.4g} {np.mean(dmu):>10.4g} "
              f"{np.mean(ts):>8.3g} {ok:>9}")


def family(graph, size, instances):
    res = {m: ([], [], [], []) for m, _ in METHODS}
    ex_t = []
    for seed in range(instances):
        e = ising.random_field_model(graph, size, seed=seed)
        ex, t = run("exact", e)
        ex_t.append(t)
        lz, mu = ex.info["log_partition"], ex.info["spin_means"]
        for m, kw in METHODS:
            r, t = run(m, e, seed=seed, **kw) if m in ("ais", "lbp", "trw", "meanfield") else run(m, e, **kw)
            errs, dmu, ts, ok = res[m]
            errs.append(r.info["log_partition"] - lz)
            dmu.append(np.mean(np.abs(r.info["spin_means"] - mu)))
            ts.append(t)
            lo, up = r.info.get("log_partition_lower"), r.info.get("log_partition_upper")
            ok.append((lo is None or lo <= lz + 1e-9) and (up is None or up >= lz - 1e-9))
    rows = [("exact", [0.0], [0.0], ex_t, "-")]
    rows += [(m, e_, d, t, f"{sum(o)}/{len(o)}") for m, (e_, d, t, o) in res.items()]
    table(f"{graph} {size}{'x' + str(size) if graph == 'grid' else ' nodes'}, {instances} instances "
          "(fields U[-1,1], couplings ±1/2)", rows)


def ferromagnets():
    print("\n20x20 periodic ferromagnet vs Kaufman (log-Z error; |mu| should be 0 by symmetry)")
    print(f"{'T':>6} " + " ".join(f"{m:>22}" for m, _ in METHODS))
    for T in (1.0, 2.0, 2.269, 2.5, 3.0):
        e = ising.lattice(20, 20, T=T)
        lz = kaufman_log_partition(1 / T, 1 / T, 20, 20)
        cells = []
        for m, kw in METHODS:
            r, t = run(m, e, **kw)
            conv = r.info.get("converged")
            cells.append(f"{r.info['log_partition'] - lz:+9.4f} ({t:5.2f}s{'' if conv in (None, True) else ' nc'})")
        print(f"{T:>6} " + " ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=10)
    a = ap.parse_args()
    family("grid", 12, a.instances)
    family("complete", 26, a.instances)
    ferromagnets()
