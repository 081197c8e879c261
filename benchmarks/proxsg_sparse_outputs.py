"""Sparse answers of FBS (Honorio 2012) for structure learning: edge precision / recall (and, at N = 15,
KL(truth || .)) of the outputs of one FB fit (log schedule, mean-field + 5 Gibbs sweeps):

* average: the paper's FB output (Theorem 7), dense;
* sparsify='prox' (the average moved by one proximal step of the last step size) or sparsify='gradient'
  (a proximal-gradient step from the average with the mean sampled gradient of the last half), --sparsify;
* random: variant FU's output, a uniformly random visited point (Theorem 8);
* last: variant FL's output, the last prox iterate.

All four come from the same run (``result_.info``: ``unsparsified``, ``random``, ``last``).
N = 15: the reproduction's instances (benchmarks/proxsg_ising.py: 50 samples, s0 = 10, cap 1000);
N = 64: the instance of benchmarks/proxsg_spect.py (500 samples, s0 = 100); neighbourhood selection
(L1 logistic per node) alongside, at its best C by KL (N = 15) and at C = 0.1 (N = 64).

    python benchmarks/proxsg_sparse_outputs.py [--reps 10] [--big-n 64] [--iters 1000] [--rho 0.0625]
        [--sparsify gradient|prox]
"""
import argparse
import time

import numpy as np
from proxsg_ising import CS, RHO, instance, kl, neighbourhood, pr, quiet_single_thread, restrict



def outputs(est, sp):
    i = est.result_.info
    return dict(zip(("average", f"sparsify='{sp}'", "random (FU)", "last (FL)"),
                    (i["unsparsified"], est.theta_, i["random"], i["last"])))


def main():
    quiet_single_thread()
    from varopt.estimators.sparse_ising import SparseIsing
    from varopt.oracles.ising import IsingGibbsOracle
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--big-n", type=int, default=64)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--rho", type=float, default=RHO)
    ap.add_argument("--sparsify", default="gradient", choices=("prox", "gradient"))
    args = ap.parse_args()
    SP = args.sparsify

    rows = {}
    for rep in range(args.reps):
        theta, S, keep = instance(rep)
        n = int(keep.sum())
        St, tt = S[:, keep], restrict(theta, keep)
        est = SparseIsing(rho=args.rho, gradient="gibbs", variant="FB", schedule="log", samples=10,
                          sparsify=SP, max_iter=args.iters, seed=rep,
                          solver_options={"max_samples": 1000, "history_objective": False}).fit(St)
        for o, th in outputs(est, SP).items():
            rows.setdefault(o, []).append((*pr(tt, th, n), kl(tt, th, n), int((th[n:] != 0).sum())))
        best = min((kl(tt, neighbourhood(St, C), n), C) for C in CS)
        ns = neighbourhood(St, best[1])
        rows.setdefault("neighbourhood selection (best C)", []).append((*pr(tt, ns, n), best[0], int((np.abs(ns[n:]) > 1e-8).sum())))
        print(f"rep {rep}: " + ", ".join(f"{o} {r[-1][0]:.2f}/{r[-1][1]:.2f}" for o, r in rows.items()), flush=True)
    if args.reps:
        print(f"\nN = 15, {args.reps} reps, rho = {args.rho:g}, {args.iters} iterations; means")
        print("| output | edge precision | edge recall | KL(truth \\|\\| .) | edges |")
        print("|---|---|---|---|---|")
        for o, r in rows.items():
            a = np.array(r)
            print(f"| {o} | {a[:, 0].mean():.2f} | {a[:, 1].mean():.2f} | {a[:, 2].mean():.3f} | {a[:, 3].mean():.1f} |")

    N = args.big_n
    if not N:
        return
    rng = np.random.default_rng(64)
    a, _ = np.triu_indices(N, 1)
    J = np.where(rng.random(a.size) < 3.0 / N, rng.uniform(-1, 1, a.size), 0.0)
    theta = np.r_[np.zeros(N), J]
    S = IsingGibbsOracle(N, n_chains=500, n_sweeps=500, init="uniform").sample(theta, 1)
    t0 = time.perf_counter()
    est = SparseIsing(rho=args.rho, gradient="gibbs", variant="FB", schedule="log", samples=100, sparsify=SP,
                      max_iter=args.iters, seed=0).fit(S)
    t = time.perf_counter() - t0
    print(f"\nN = {N}: {int((J != 0).sum())} true edges, {S.shape[0]} samples; one FB fit {t:.1f} s "
          f"(sparsify step {est.result_.info['sparsify_step']:.2e}, objective bound "
          f"{est.result_.info.get('sparsify_bound', float('nan')):.2e})")
    print("| output | edge precision | edge recall | edges |")
    print("|---|---|---|---|")
    for o, th in outputs(est, SP).items():
        p = pr(theta, th, N)
        print(f"| {o} | {p[0]:.2f} | {p[1]:.2f} | {int((th[N:] != 0).sum())} |")
    ns = neighbourhood(S, 0.1)
    p = pr(theta, ns, N)
    print(f"| neighbourhood selection (C = 0.1) | {p[0]:.2f} | {p[1]:.2f} | {int((np.abs(ns[N:]) > 1e-8).sum())} |")


if __name__ == "__main__":
    main()
