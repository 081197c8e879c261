"""sasmc vs AIS on periodic Ising ferromagnets (Carbonetto 2009, Figs. 3.5-3.6), reduced scale.

Fig. 3.5: 12 x 12 torus at T = 0.1, 100 particles, sasmc with a_k = 1/(1+k)^0.4 (100 iterations,
'edges' family) vs AIS (100 steps). Fig. 3.6: 20 x 20 torus, sasmc 250 iterations ('tied' family:
the 800-parameter 'edges' family costs ~0.4 s per ipsa iteration here, see docs/sasmc.md) vs AIS
250 steps / 100 particles / resampling at ESS < 50. Truth: kaufman_log_partition. Reports log-Z
error per spin (RMSE over seeds), fraction of runs keeping both modes (weighted up-fraction in
[0.25, 0.75]) and wall time. Run: ``python benchmarks/inference_sasmc.py [seeds]``.
"""
import sys
import time

import numpy as np

import varopt
from varopt.formulations import ising
from varopt.formulations.kaufman import kaufman_log_partition


def run(name, prog, **kw):
    t = time.perf_counter()
    r = varopt.get_solver(name).solve(prog, **kw)
    return r, time.perf_counter() - t


def up_fraction(r):
    if "up_fraction" in r.info:
        return r.info["up_fraction"]
    m = np.array(list(r.info["marginals"].values()))  # AIS: mean magnetisation -> weighted up share
    return float((2 * m.mean() - 1 + 1) / 2)


def row(L, T, seeds, sa_kw, ais_kw):
    e = ising.lattice(L, L, T=T)
    prog, lz = e.to_program(), kaufman_log_partition(1 / T, 1 / T, L, L)
    out = {}
    for name, kw in (("sasmc", sa_kw), ("ais", ais_kw)):
        err, both, ts = [], [], []
        for s in range(seeds):
            r, t = run(name, prog, seed=s, **kw)
            err.append((r.info["log_partition"] - lz) / L ** 2)
            u = up_fraction(r)
            both.append(0.25 <= u <= 0.75)
            ts.append(t)
        out[name] = (float(np.sqrt(np.mean(np.square(err)))), float(np.mean(both)), float(np.mean(ts)))
    s, a = out["sasmc"], out["ais"]
    print(f"| {L}x{L} | {T:g} | {s[0]:.2e} | {a[0]:.2e} | {s[1]:.0%} | {a[1]:.0%} | {s[2]:.1f} | {a[2]:.2f} |",
          flush=True)


if __name__ == "__main__":
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"seeds per cell: {seeds}\n")
    print("| lattice | T | sasmc RMSE/spin | AIS RMSE/spin | sasmc both modes | AIS both modes | sasmc s | AIS s |")
    print("|---|---|---|---|---|---|---|---|")
    row(12, 0.1, seeds, dict(step_power=0.4, max_iter=100), dict(steps=100, particles=100))
    for T in (0.2, 0.5, 1.0, 2.0, 2.269, 3.0):
        row(20, T, seeds, dict(family="tied", max_iter=250), dict(steps=250, particles=100))
