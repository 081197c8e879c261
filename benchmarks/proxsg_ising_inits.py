"""FB (log schedule, s0 = 10, 1000 iterations) with the Gibbs oracle's chain starts and FBS step factors
beta on the reproduction's instances: the exact-objective gap to the certified L1-ML optimum (PN).
'meanfield' is Honorio 2012's sampler; 'uniform' starts every call from uniform spins; 'persistent'
carries the chains over between iterations (persistent contrastive divergence, Tieleman 2008).
beta scales the step eta_k = beta/(G sqrt k) of Theorems 6-8 (the paper: beta = 1).

    python benchmarks/proxsg_ising_inits.py [--reps 3] [--first 0] [--inits meanfield uniform persistent] [--betas 1]
        [--iters 1000] [--average all|suffix]
"""
import argparse

from proxsg_ising import RHO, instance


def main():
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    from varopt.estimators.sparse_ising import SparseIsing
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--first", type=int, default=0, help="first repetition (split runs over processes)")
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--inits", nargs="+", default=["meanfield", "uniform", "persistent"])
    ap.add_argument("--betas", nargs="+", type=float, default=[1.0])
    ap.add_argument("--average", default="all", choices=("all", "suffix"))
    args = ap.parse_args()
    cols = [(i, b) for b in args.betas for i in args.inits]
    print("| rep | " + " | ".join(f"{i}, beta {b:g}" for i, b in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for rep in range(args.first, args.first + args.reps):
        _, S, keep = instance(rep)
        St = S[:, keep]
        opt = SparseIsing(rho=RHO).fit(St).result_.objective
        gaps = []
        for init, beta in cols:
            est = SparseIsing(rho=RHO, gradient="gibbs", variant="FB", schedule="log", samples=10, init=init,
                              max_iter=args.iters, seed=rep,
                              solver_options={"history_every": args.iters, "beta": beta,
                                              "average": args.average}).fit(St)
            gaps.append(est.result_.objective - opt)
        print(f"| {rep} | " + " | ".join(f"{g:.2e}" for g in gaps) + " |", flush=True)


if __name__ == "__main__":
    main()
