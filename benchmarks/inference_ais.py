"""``ais`` against a straightforward numpy AIS at matched wall time (log-Z RMSE).

Baseline (what users hand-roll): particles from the uniform distribution, a linear schedule in
the inverse temperature, one systematic-scan single-site Gibbs sweep per step (a Python loop
over sites, vectorized over particles), multinomial resampling when ESS < N/2; 100 particles and
250 steps (Carbonetto 2009, §3.4.2). varopt's ``ais`` gets the same wall time: its step count is
set from a calibration run so that one run takes as long as one baseline run (100 particles).
Models: 20 x 20 periodic ferromagnets at T = 0.5 and 2.269 (reference: Kaufman), a 12 x 12 grid
and a complete graph on 26 nodes with fields U[-1,1] and couplings ±1/2 (reference: ``exact``).
Also reported for the ferromagnets: the fraction of runs that keep both magnetisation modes
(the estimated P(x[0] = 1) between 0.05 and 0.95; exactly 1/2 by symmetry).

Run: ``PYTHONPATH=. python benchmarks/inference_ais.py [--runs 10]`` (about 5 min).
"""
import argparse
import math
import time

import numpy as np
from scipy.special import logsumexp

import varopt
from varopt.formulations import ising
from varopt.formulations.kaufman import kaufman_log_partition


def numpy_ais(e, particles=100, steps=250, seed=0):
    """Plain AIS with resampling; returns (log Z, final particles, normalised weights)."""
    rng = np.random.default_rng(seed)
    h, J = -e.h, -e.J.toarray()  # log-potential
    n = e.n
    nbr = [np.flatnonzero(J[k]) for k in range(n)]
    X = rng.choice([-1.0, 1.0], size=(particles, n))
    logw = np.zeros(particles)
    log_z = n * math.log(2.0) - e.const
    for k in range(1, steps + 1):
        lam0, lam = (k - 1) / steps, k / steps
        ell = X @ h + 0.5 * np.einsum("pi,ij,pj->p", X, J, X)
        new = logw + (lam - lam0) * ell
        log_z += logsumexp(new) - logsumexp(logw)
        logw = new - new.max()
        W = np.exp(logw)
        W /= W.sum()
        if 1.0 / (W @ W) < particles / 2:
            X = X[rng.choice(particles, particles, p=W)]
            logw = np.zeros(particles)
        for i in range(n):
            a = lam * (h[i] + X[:, nbr[i]] @ J[i, nbr[i]])
            X[:, i] = np.where(rng.random(particles) < 1 / (1 + np.exp(-2 * a)), 1.0, -1.0)
    W = np.exp(logw - logw.max())
    return log_z, X, W / W.sum()


def main(runs):
    models = [("20x20 torus T=0.5", ising.lattice(20, 20, T=0.5), kaufman_log_partition(2.0, 2.0, 20, 20)),
              ("20x20 torus T=2.269", ising.lattice(20, 20, T=2.269),
               kaufman_log_partition(1 / 2.269, 1 / 2.269, 20, 20))]
    for g, s in (("grid", 12), ("complete", 26)):
        e = ising.random_field_model(g, s, seed=0)
        models.append((f"{g} {s}", e, varopt.get_solver("exact").solve(e.to_program()).info["log_partition"]))
    ais = varopt.get_solver("ais")
    print(f"{'model':<22} {'numpy s/run':>11} {'varopt steps':>12} {'varopt s/run':>12} {'numpy err':>16} "
          f"{'varopt err':>16} {'RMSE np':>8} {'RMSE vo':>8} {'modes np':>8} {'modes vo':>8}")
    for label, e, lz in models:
        t = time.perf_counter()
        base = [numpy_ais(e, seed=s) for s in range(runs)]
        tb = (time.perf_counter() - t) / runs
        prog = e.to_program()
        t = time.perf_counter()
        ais.solve(prog, steps=250, particles=100, seed=999)
        per_step = (time.perf_counter() - t) / 250
        steps = max(10, int(tb / per_step))
        t = time.perf_counter()
        ours = [ais.solve(prog, steps=steps, particles=100, seed=s) for s in range(runs)]
        tv = (time.perf_counter() - t) / runs
        eb = np.array([b[0] for b in base]) - lz
        ev = np.array([r.info["log_partition"] for r in ours]) - lz
        # modes: P(x[0] = 1) from the weighted particles, away from 0 and 1 when both modes survive
        mb = np.mean([min(p, 1 - p) > 0.05 for p in (b[2] @ (b[1][:, 0] > 0) for b in base)])
        mv = np.mean([min(r.info["marginals"]["x[0]"], 1 - r.info["marginals"]["x[0]"]) > 0.05 for r in ours])
        if "torus" not in label:
            mb = mv = float("nan")
        print(f"{label:<22} {tb:>11.3f} {steps:>12} {tv:>12.3f} {eb.mean():>+8.3f}±{eb.std():<7.3f} "
              f"{ev.mean():>+8.3f}±{ev.std():<7.3f} {math.sqrt(np.mean(eb ** 2)):>8.3f} "
              f"{math.sqrt(np.mean(ev ** 2)):>8.3f} {mb:>8.2f} {mv:>8.2f}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    main(ap.parse_args().runs)
