"""Honorio 2012, §4: N = 15, ground truth with 50 % edge density, weights U[-1, 1], b = 0, 50 samples;
mean-field start + 5 Gibbs sweeps, beta = 1, rho = 1/16. Exact objective (2^15 states) per method and
schedule, against the exact L1-ML optimum (proxsg PA with the exact oracle); KL(truth || learned) and
edge recovery against neighbourhood selection (L1 logistic per node, scikit-learn) at its best C.

    python benchmarks/proxsg_ising.py [--reps 10] [--iters 300] [--cvxpy]
"""
import argparse
import time

import numpy as np

from varopt.formulations.sparse_ising_estimator import SparseIsing
from varopt.oracles.ising import IsingExactOracle

N, T, RHO = 15, 50, 1.0 / 16


def instance(rep):
    rng = np.random.default_rng(1000 + rep)
    a, b = np.triu_indices(N, 1)
    W = np.where(rng.random(a.size) < 0.5, rng.uniform(-1, 1, a.size), 0.0)
    theta = np.r_[np.zeros(N), 2.0 * W]          # x^T W x = sum_e 2 W_e x_i x_j
    ex = IsingExactOracle(N)
    idx = np.arange(1 << N)
    X = (((idx[:, None] >> np.arange(N)) & 1) * 2 - 1).astype(float)
    lw = ex.statistics(X) @ theta
    p = np.exp(lw - lw.max())
    S = X[rng.choice(X.shape[0], size=T, p=p / p.sum())]
    keep = ~np.all(S == S[:1], axis=0)           # Assumption 1 (a constant column is dropped)
    return theta, S, keep


def kl(theta_t, theta_l, n):
    ex = IsingExactOracle(n)
    E = ex.estimate(theta_t)
    return float((theta_t - theta_l) @ E - ex.log_partition(theta_t) + ex.log_partition(theta_l))


def restrict(theta, keep):
    n = keep.size
    a, b = np.triu_indices(n, 1)
    ke = keep[a] & keep[b]
    return np.r_[theta[:n][keep], theta[n:][ke]]


def neighbourhood(S, C):
    from sklearn.linear_model import LogisticRegression
    n = S.shape[1]
    Jm, bb = np.zeros((n, n)), np.zeros(n)
    for i in range(n):
        others = np.delete(np.arange(n), i)
        clf = LogisticRegression(penalty="l1", C=C, solver="liblinear", tol=1e-8, max_iter=1000)
        clf.fit(S[:, others], S[:, i])
        Jm[i, others] = clf.coef_[0] / 2.0            # log-odds of x_i = +1 is 2 (b_i + sum_j J_ij x_j)
        bb[i] = clf.intercept_[0] / 2.0
    a, b = np.triu_indices(n, 1)
    return np.r_[bb, 0.5 * (Jm[a, b] + Jm[b, a])]


def pr(theta_t, theta_l, n):
    t, l_ = theta_t[n:] != 0, np.abs(theta_l[n:]) > 1e-8
    tp = (t & l_).sum()
    return tp / max(l_.sum(), 1), tp / max(t.sum(), 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--cvxpy", action="store_true", help="also CVXPY+Clarabel on the explicit 2^15-term form")
    args = ap.parse_args()
    methods = ["PB", "PA", "FB", "FR", "FL"]
    schedules = ["constant", "log", "linear", "quadratic"]
    gaps = {(m, s): [] for m in methods for s in schedules}
    rows = []
    for rep in range(args.reps):
        theta_t, S, keep = instance(rep)
        n = int(keep.sum())
        St, tt = S[:, keep], restrict(theta_t, keep)
        t0 = time.perf_counter()
        exact = SparseIsing(rho=RHO, gradient="exact", variant="PA",
                            solver_options=dict(kkt_tol=1e-12, max_iter=20000)).fit(St)
        t_exact = time.perf_counter() - t0
        opt = exact.result_.objective
        t_cvx = None
        if args.cvxpy and rep == 0:
            from varopt.formulations.sparse_ising import ising_cvxpy
            prob, _, _ = ising_cvxpy(St, RHO, explicit=True)
            t0 = time.perf_counter()
            prob.solve(solver="CLARABEL")
            t_cvx = (time.perf_counter() - t0, prob.status, prob.value - opt)
        for m in methods:
            for s in schedules:
                est = SparseIsing(rho=RHO, gradient="gibbs", variant=m, schedule=s, samples=10, n_sweeps=5,
                                  max_iter=args.iters, seed=rep,
                                  solver_options=dict(max_samples=2000, history_every=args.iters)).fit(St)
                gaps[m, s].append(est.result_.objective - opt)
        fb = SparseIsing(rho=RHO, gradient="gibbs", variant="FB", schedule="log", samples=10,
                         max_iter=args.iters, seed=rep).fit(St)
        best = min((kl(tt, neighbourhood(St, C), n), C) for C in (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0))
        ns = neighbourhood(St, best[1])
        rows.append((rep, n, t_exact, exact.n_iter_, kl(tt, exact.theta_, n), kl(tt, fb.theta_, n), best[0],
                     pr(tt, exact.theta_, n), pr(tt, ns, n), t_cvx))
        print(f"rep {rep}: n={n} exact {t_exact:.2f}s ({exact.n_iter_} it)  KL exact {rows[-1][4]:.3f}  "
              f"FB-log {rows[-1][5]:.3f}  NS(best C={best[1]}) {best[0]:.3f}  cvxpy {t_cvx}", flush=True)
    print("\nexact-objective gap after", args.iters, "iterations (median [max] over reps), S_k = 10 * schedule, cap 2000")
    print("| method | " + " | ".join(schedules) + " |")
    print("|---|" + "---|" * len(schedules))
    for m in methods:
        print(f"| {m} | " + " | ".join(f"{np.median(gaps[m, s]):.4f} [{np.max(gaps[m, s]):.4f}]" for s in schedules)
              + " |")
    r = np.array([(x[2], x[4], x[5], x[6]) for x in rows])
    print(f"\nexact PA time mean {r[:, 0].mean():.2f}s max {r[:, 0].max():.2f}s; KL(truth||.) mean: exact L1-ML "
          f"{r[:, 1].mean():.3f}, FB-log (Gibbs) {r[:, 2].mean():.3f}, neighbourhood selection (best C) "
          f"{r[:, 3].mean():.3f}; ratio exact/NS {r[:, 1].mean() / r[:, 3].mean():.2f}")
    pe = np.array([x[7] for x in rows])
    pn = np.array([x[8] for x in rows])
    print(f"edge precision/recall: exact L1-ML {pe[:, 0].mean():.2f}/{pe[:, 1].mean():.2f}, "
          f"NS {pn[:, 0].mean():.2f}/{pn[:, 1].mean():.2f}")


if __name__ == "__main__":
    main()
