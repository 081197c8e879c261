"""SPECT (Kurgan, Cios et al. 2001; ../shared/data/spect): the L1 weight rho of the Ising L1-ML fit and
neighbourhood selection's C chosen by K-fold cross-validation on the 80 *training* rows only (criterion:
exact average log-likelihood of the validation fold, enumeration of 2^22 states), then refitted on all
training rows and scored on the 187 test rows (exact held-out average log-likelihood).

The CV fits of the L1-ML estimator are the sampled FB fits (log schedule, s0 = 100, mean-field + 5 Gibbs
sweeps, 1000 iterations: ~4 s each; an exact PN fit over 2^21 spin-flip pairs takes minutes); with
--exact the exact L1-ML optimum (PN, certified) is also refitted at the selected rho.

    python benchmarks/proxsg_spect_cv.py [--folds 5] [--exact]
"""
import argparse
import time

import numpy as np
from proxsg_ising import CS, neighbourhood, quiet_single_thread
from proxsg_spect import DATA, load

RHOS = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2)


def folds(m, k, seed=0):
    perm = np.random.default_rng(seed).permutation(m)
    return [np.sort(perm[i::k]) for i in range(k)]


def main():
    quiet_single_thread()
    from varopt.formulations.sparse_ising import check_spins
    from varopt.estimators.sparse_ising import SparseIsing
    from varopt.oracles.ising import IsingExactOracle
    ap = argparse.ArgumentParser()
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--exact", action="store_true")
    args = ap.parse_args()
    if not DATA.exists():
        raise SystemExit(f"SPECT data not found at {DATA}")
    Xtr, Xte = load("spect.train.arff"), load("spect.test.arff")
    keep = ~np.all(Xtr == Xtr[:1], axis=0)
    Str, Ste = check_spins(Xtr[:, keep]), check_spins(Xte[:, keep], penalize_bias=True)
    n = Str.shape[1]
    ex = IsingExactOracle(n)
    F = folds(Str.shape[0], args.folds)
    for f in F:
        tr = np.setdiff1d(np.arange(Str.shape[0]), f)
        assert not np.any(np.all(Str[tr] == Str[tr][:1], axis=0)), "a CV training fold has a constant column"

    def fb(rho, S):
        return SparseIsing(rho=rho, gradient="gibbs", variant="FB", schedule="log", samples=100,
                           max_iter=args.iters, seed=0).fit(S)

    t0 = time.perf_counter()
    cv_rho, cv_c = {}, {}
    for rho in RHOS:
        cv_rho[rho] = np.mean([fb(rho, Str[np.setdiff1d(np.arange(Str.shape[0]), f)]).score(Str[f]) for f in F])
        print(f"rho {rho:g}: CV avg log-lik {cv_rho[rho]:.4f}", flush=True)
    for C in CS:
        cv_c[C] = np.mean([ex.log_likelihood(neighbourhood(Str[np.setdiff1d(np.arange(Str.shape[0]), f)], C),
                                             Str[f]) for f in F])
        print(f"C {C:g}: CV avg log-lik {cv_c[C]:.4f}", flush=True)
    t_cv = time.perf_counter() - t0
    rho = max(cv_rho, key=cv_rho.get)
    C = max(cv_c, key=cv_c.get)
    rows = []
    t0 = time.perf_counter()
    g = fb(rho, Str)
    rows.append((f"FB log schedule, rho = {rho:g} (CV)", time.perf_counter() - t0, g.score(Ste), g.score(Str),
                 int(g.adjacency_.sum() // 2), ""))
    t0 = time.perf_counter()
    th = neighbourhood(Str, C)
    rows.append((f"neighbourhood selection, C = {C:g} (CV)", time.perf_counter() - t0, ex.log_likelihood(th, Ste),
                 ex.log_likelihood(th, Str), int((np.abs(th[n:]) > 1e-8).sum()), ""))
    if args.exact:
        t0 = time.perf_counter()
        e = SparseIsing(rho=rho, gradient="exact").fit(Str)
        i = e.result_.info
        rows.insert(0, (f"exact L1-ML (PN), rho = {rho:g} (CV)", time.perf_counter() - t0, e.score(Ste),
                        e.score(Str), int(e.adjacency_.sum() // 2),
                        f"{e.result_.status}, {e.n_iter_} it, |v|_inf {i['subgradient_inf']:.1e}"))
    print(f"\n{args.folds}-fold CV on the {Str.shape[0]} training rows ({t_cv:.0f} s); test rows {Ste.shape[0]}")
    print("| rho | " + " | ".join(f"{r:g}" for r in RHOS) + " |")
    print("|---|" + "---|" * len(RHOS))
    print("| CV avg log-lik (FB) | " + " | ".join(f"{cv_rho[r]:.4f}" for r in RHOS) + " |")
    print("\n| C | " + " | ".join(f"{c:g}" for c in CS) + " |")
    print("|---|" + "---|" * len(CS))
    print("| CV avg log-lik (NS) | " + " | ".join(f"{cv_c[c]:.4f}" for c in CS) + " |")
    print("\n| SPECT model (refit on all training rows) | fit s | held-out avg log-lik | train avg log-lik | edges | notes |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.4f} | {r[3]:.4f} | {r[4]} | {r[5]} |")


if __name__ == "__main__":
    main()
