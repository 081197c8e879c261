"""cmf against lbp, trw, meanfield, ais and exact on the dense models of Carbonetto 2009, §4.4:
complete graphs on 26 nodes, fields U[-1, 1], couplings ±1/2 (log-potential parameters).

For every instance: exact log Z and marginals (`exact`, split enumeration), then `cmf` (1000
particles, 100 tempering steps, resampling below ESS 500; `runs` seeds), `ais` with its number of
steps chosen to take the same wall time as the cmf run (1000 particles), `lbp`, `trw` and
`meanfield`. Printed: per method the median over instances of the mean |mu_hat - mu| (spins),
the median |log Z error|, the median time, and ratios to cmf.

    python benchmarks/cmf_complete26.py [--instances 10] [--runs 3] [--graph complete|grid]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import varopt
from varopt.formulations import ising


def run(name, e, **kw):
    t = time.perf_counter()
    r = varopt.get_solver(name).solve(e.to_program(), **kw)
    return r, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--graph", default="complete", choices=("complete", "grid"))
    ap.add_argument("--particles", type=int, default=1000)
    ap.add_argument("--moves", type=int, default=None, help="cmf random-scan moves per tempering step")
    a = ap.parse_args()
    size = 26 if a.graph == "complete" else 12
    rows = {m: [] for m in ("cmf", "ais", "lbp", "trw", "meanfield")}
    for inst in range(a.instances):
        e = ising.random_field_model(a.graph, size, seed=100 + inst)
        ex, tex = run("exact", e)
        lz, mu = ex.info["log_partition"], ex.info["spin_means"]

        def err(r):
            return float(np.abs(r.info["spin_means"] - mu).mean()), abs(r.info["log_partition"] - lz)

        for s in range(a.runs):
            r, t = run("cmf", e, particles=a.particles, seed=s, **({} if a.moves is None else {"moves": a.moves}))
            rows["cmf"].append((inst, *err(r), t))
            # ais at matched wall time: calibrate the cost of one step, then pick the step count
            _, t50 = run("ais", e, particles=a.particles, steps=50, seed=s)
            steps = max(10, int(50 * t / max(t50, 1e-3)))
            r2, t2 = run("ais", e, particles=a.particles, steps=steps, seed=s)
            rows["ais"].append((inst, *err(r2), t2))
        for m, kw in (("lbp", dict(max_iter=5000)), ("trw", dict(max_iter=5000)), ("meanfield", {})):
            r, t = run(m, e, **kw)
            rows[m].append((inst, *err(r), t))
        c = np.array(rows["cmf"])[-a.runs:]
        print(f"instance {inst}: exact log Z {lz:.3f} ({tex:.1f} s); cmf mean |mu err| {c[:, 1].mean():.3f}, "
              f"|log Z err| {c[:, 2].mean():.3f}", flush=True)

    def med(m, col):
        arr = np.array(rows[m])
        per_inst = [arr[arr[:, 0] == i, col].mean() for i in range(a.instances)]
        return float(np.median(per_inst))

    base = {col: med("cmf", col) for col in (1, 2, 3)}
    print(f"\n{a.graph} graph, {a.instances} instances, cmf/ais {a.runs} runs each, {a.particles} particles")
    print("| method | median mean abs marginal error | ratio to cmf | median abs log Z error | ratio | median time s |")
    print("|---|---|---|---|---|---|")
    for m in rows:
        e1, e2, t = med(m, 1), med(m, 2), med(m, 3)
        print(f"| {m} | {e1:.4f} | {e1 / base[1]:.2f} | {e2:.3f} | {e2 / base[2]:.2f} | {t:.2f} |")


if __name__ == "__main__":
    main()
