"""Exact-mode sparse Ising learning (Honorio 2012's N = 15 set-up, problem (2) with rho = 1/16):
proxsg PN (proximal Newton, exact enumeration oracle) and PA (FISTA with restart) against
CVXPY + Clarabel on the explicit 2^15-term log-sum-exp, in the same run.

The instances are those of benchmarks/proxsg_ising.py (seeds 1000 + rep). For every solver the
objective of its point is re-evaluated by the same enumeration (IsingExactOracle) so the gaps are
comparable; "cert" is proxsg's certificate (least-norm subgradient, gap estimate |v|^2/(2 mu)).

    python benchmarks/proxsg_exact.py [--reps 3] [--no-cvxpy]

BLAS runs single-threaded (threadpoolctl): on a shared 2-core machine OpenBLAS's threads spin
against other processes and made the same PN fit 5-10x slower.
"""
import argparse
import time

import numpy as np
from proxsg_ising import RHO, instance

from varopt.formulations.sparse_ising import ising_cvxpy, moments
from varopt.estimators.sparse_ising import SparseIsing
from varopt.oracles.ising import IsingExactOracle


def objective(S, theta):
    n = S.shape[1]
    mu, s = moments(S)
    return IsingExactOracle(n).log_partition(theta) - theta @ np.r_[mu, s] + RHO * np.abs(theta[n:]).sum()


def main():
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-cvxpy", action="store_true")
    args = ap.parse_args()
    rows = []
    for rep in range(args.reps):
        _, S, keep = instance(rep)
        St = S[:, keep]
        res = {}
        for v in ("PN", "PA"):
            t0 = time.perf_counter()
            est = SparseIsing(rho=RHO, gradient="exact", variant=v,
                              solver_options={"kkt_tol": 1e-10, "max_iter": 20000}).fit(St)
            t = time.perf_counter() - t0
            i = est.result_.info
            res[v] = (t, objective(St, est.theta_), est.n_iter_, est.result_.status, i["subgradient_inf"],
                      i["gap_estimate"])
        cv = None
        if not args.no_cvxpy:
            prob, b, J = ising_cvxpy(St, RHO, explicit=True)
            t0 = time.perf_counter()
            prob.solve(solver="CLARABEL")
            t = time.perf_counter() - t0
            cv = (t, objective(St, np.r_[b.value, J.value]), prob.status)
        rows.append((rep, St.shape[1], res, cv))
        pn, pa = res["PN"], res["PA"]
        line = (f"rep {rep}: n={St.shape[1]}  PN {pn[0]:.2f}s {pn[2]} it |v|={pn[4]:.1e} gap<={pn[5]:.1e}  "
                f"PA {pa[0]:.2f}s {pa[2]} it  f(PA)-f(PN)={pa[1] - pn[1]:.1e}")
        if cv:
            line += f"  Clarabel {cv[0]:.1f}s {cv[2]} f-f(PN)={cv[1] - pn[1]:.1e}"
        print(line, flush=True)
    print("\n| rep | n | PN s (it) | PN |v|_inf | PN gap est. | PA s (it) | f(PA)-f(PN) | Clarabel s | status | "
          "f(Clarabel)-f(PN) | Clarabel/PN |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rep, n, res, cv in rows:
        pn, pa = res["PN"], res["PA"]
        c = (f"{cv[0]:.1f} | {cv[2]} | {cv[1] - pn[1]:.1e} | {cv[0] / pn[0]:.0f}x" if cv else "- | - | - | -")
        print(f"| {rep} | {n} | {pn[0]:.2f} ({pn[2]}) | {pn[4]:.1e} | {pn[5]:.1e} | {pa[0]:.2f} ({pa[2]}) | "
              f"{pa[1] - pn[1]:.1e} | {c} |")
    t = np.array([r[2]["PN"][0] for r in rows])
    print(f"\nPN time: mean {t.mean():.2f}s, max {t.max():.2f}s over {len(rows)} instances")


if __name__ == "__main__":
    main()
