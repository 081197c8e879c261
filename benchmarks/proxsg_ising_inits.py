"""FB (log schedule, s0 = 10, 1000 iterations) with the Gibbs oracle's chain starts and FBS step factors
beta on the reproduction's instances: the exact-objective gap to the certified L1-ML optimum (PN).
'meanfield' is Honorio 2012's sampler; 'uniform' starts every call from uniform spins; 'persistent'
carries the chains over between iterations (persistent contrastive divergence, Tieleman 2008).
beta scales the step eta_k = beta/(G sqrt k) of Theorems 6-8 (the paper: beta = 1).

    python benchmarks/proxsg_ising_inits.py [--reps 3] [--first 0] [--inits meanfield uniform persistent] [--betas 1]
        [--iters 1000] [--average all|suffix] [--kl]

--kl adds KL(truth || fit) per column, and for the exact L1-ML fit and neighbourhood selection at its
best C (the issue's goal: the learned model at most half as far from the truth as neighbourhood
selection, on average over the repetitions).
"""
import argparse

import numpy as np

from proxsg_ising import CS, RHO, instance, kl, neighbourhood, quiet_single_thread, restrict


def main():
    quiet_single_thread()
    from varopt.estimators.sparse_ising import SparseIsing
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--first", type=int, default=0, help="first repetition (split runs over processes)")
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--inits", nargs="+", default=["meanfield", "uniform", "persistent"])
    ap.add_argument("--betas", nargs="+", type=float, default=[1.0])
    ap.add_argument("--average", default="all", choices=("all", "suffix"))
    ap.add_argument("--kl", action="store_true", help="also KL(truth || fit), exact L1-ML and neighbourhood selection")
    args = ap.parse_args()
    cols = [(i, b) for b in args.betas for i in args.inits]
    extra = " | KL exact | KL NS (best C)" if args.kl else ""
    print("| rep | " + " | ".join(f"{i}, beta {b:g}" for i, b in cols) + extra + " |")
    print("|---|" + "---|" * (len(cols) + 2 * args.kl))
    kls = []
    for rep in range(args.first, args.first + args.reps):
        theta_t, S, keep = instance(rep)
        St, tt, n = S[:, keep], restrict(theta_t, keep), int(keep.sum())
        exact = SparseIsing(rho=RHO).fit(St)
        opt = exact.result_.objective
        gaps, row = [], []
        for init, beta in cols:
            est = SparseIsing(rho=RHO, gradient="gibbs", variant="FB", schedule="log", samples=10, init=init,
                              max_iter=args.iters, seed=rep,
                              solver_options={"history_every": args.iters, "beta": beta,
                                              "average": args.average}).fit(St)
            gaps.append(est.result_.objective - opt)
            if args.kl:
                row.append(kl(tt, est.theta_, n))
        cells = [f"{g:.2e}" for g in gaps]
        if args.kl:
            row += [kl(tt, exact.theta_, n), min(kl(tt, neighbourhood(St, C), n) for C in CS)]
            kls.append(row)
            cells = [f"{g:.2e} (KL {k:.3f})" for g, k in zip(gaps, row)] + [f"{k:.3f}" for k in row[-2:]]
        print(f"| {rep} | " + " | ".join(cells) + " |", flush=True)
    if args.kl:
        m = np.mean(kls, axis=0)
        print("mean KL: " + ", ".join(f"{i} beta {b:g} {k:.3f} (/NS {k / m[-1]:.2f})" for (i, b), k in zip(cols, m))
              + f", exact {m[-2]:.3f} (/NS {m[-2] / m[-1]:.2f}), NS {m[-1]:.3f}")


if __name__ == "__main__":
    main()
