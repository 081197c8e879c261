"""FB (log schedule, s0 = 10, beta = 1, 1000 iterations) with the Gibbs oracle's three chain starts on
the reproduction's instances: the exact-objective gap to the certified L1-ML optimum (PN).
'meanfield' is Honorio 2012's sampler; 'uniform' starts every call from uniform spins; 'persistent'
carries the chains over between iterations (persistent contrastive divergence, Tieleman 2008).

    python benchmarks/proxsg_ising_inits.py [--reps 3]
"""
import argparse

from proxsg_ising import RHO, instance


def main():
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    from varopt.estimators.sparse_ising import SparseIsing
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    inits = ("meanfield", "uniform", "persistent")
    print("| rep | " + " | ".join(inits) + " |")
    print("|---|---|---|---|")
    for rep in range(args.reps):
        _, S, keep = instance(rep)
        St = S[:, keep]
        opt = SparseIsing(rho=RHO).fit(St).result_.objective
        gaps = []
        for init in inits:
            est = SparseIsing(rho=RHO, gradient="gibbs", variant="FB", schedule="log", samples=10, init=init,
                              max_iter=1000, seed=rep, solver_options={"history_every": 1000}).fit(St)
            gaps.append(est.result_.objective - opt)
        print(f"| {rep} | " + " | ".join(f"{g:.4f}" for g in gaps) + " |", flush=True)


if __name__ == "__main__":
    main()
