"""Bias of the Gibbs gradient oracle at the exact L1-ML optimum theta* of the reproduction's
instances (benchmarks/proxsg_ising.py): |E_sampler[phi] - E_theta*[phi]|_inf over the single-spin
and pair statistics, for the paper's sampler (mean-field start + 5 sweeps) and for longer / uniform
starts, with enough chains that the Monte Carlo error (about 1/sqrt(chains)) is small.

    python benchmarks/proxsg_sampler_bias.py [--reps 3] [--chains 20000]
"""
import argparse

import numpy as np
from proxsg_ising import RHO, instance


def main():
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    from varopt.estimators.sparse_ising import SparseIsing
    from varopt.oracles.ising import IsingExactOracle, IsingGibbsOracle
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--chains", type=int, default=20000)
    args = ap.parse_args()
    cases = [("meanfield", 5), ("meanfield", 50), ("uniform", 5), ("uniform", 50)]
    print("| rep | " + " | ".join(f"{i} + {s} sweeps: singles / pairs" for i, s in cases) + " |")
    print("|---|" + "---|" * len(cases))
    for rep in range(args.reps):
        _, S, keep = instance(rep)
        St = S[:, keep]
        n = St.shape[1]
        th = SparseIsing(rho=RHO, gradient="exact").fit(St).theta_
        E = IsingExactOracle(n).estimate(th)
        cells = []
        for init, sw in cases:
            e = IsingGibbsOracle(n, n_chains=args.chains, n_sweeps=sw, init=init).estimate(th, 11)
            d = np.abs(e - E)
            cells.append(f"{d[:n].max():.3f} / {d[n:].max():.3f}")
        print(f"| {rep} | " + " | ".join(cells) + " |", flush=True)
    print(f"(Monte Carlo standard deviation <= 1/sqrt({args.chains}) = {1 / np.sqrt(args.chains):.3f})")


if __name__ == "__main__":
    main()
