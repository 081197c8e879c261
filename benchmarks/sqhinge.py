"""Squared hinges ``max(u, 0)^2`` (atom ``sqpos``): the L2-SVM and Bayesian probit regression (``cp.log_normcdf``)
with every solver that takes them, against Clarabel.

* L2-SVM ``sum_n max(1 - y_n x_n^T w, 0)^2 + |w|^2 / 2``, free and with ``w >= 0``: Clarabel; gop and majorize (the
  epigraph program: one column and two rows per data point); ipsa (``sqpos`` rows, exact gradients:
  ``batch_size`` = all rows, ``hessian='exact'``, ``step_power=0``).
* Probit ``-sum_n log_normcdf(y_n x_n^T w) + |w|^2 / 2``: the MAP by Clarabel, gop, majorize, ipsa; the posterior by
  klprox (its -ELBO is not the MAP value: printed apart) and by the Cholesky-VI baseline.

Prints, per model and solver: the compiled program's size, the median wall time of ``--repeat`` solves, its ratio to
Clarabel's and the relative error of the optimal value. Usage: ``python benchmarks/sqhinge.py [N] [D] [--repeat R]``
(default 1000 x 10, 3); ``--a1a`` takes a1a's training rows instead (``--solvers ipsa`` to skip gop and majorize,
whose epigraph programs have a column per hinge); run with ``OPENBLAS_NUM_THREADS=1`` and note the load average
(shared machine).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np


def data(N, D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    y = np.sign(X @ rng.standard_normal(D) + 0.5 * rng.standard_normal(N))
    return X, y


def models(X, y):
    import cvxpy as cp
    D = X.shape[1]
    out = {}
    for name in ("l2svm", "l2svm_nonneg", "probit"):
        w = cp.Variable(D)
        if name == "probit":
            f = -cp.sum(cp.log_normcdf(cp.multiply(y, X @ w)))
        else:
            f = cp.sum_squares(cp.pos(1 - cp.multiply(y, X @ w)))
        out[name] = cp.Problem(cp.Minimize(f + 0.5 * cp.sum_squares(w)), [w >= 0] if name.endswith("nonneg") else [])
    return out


def _loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def timed(fn, repeat):
    ts, val = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        val = fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), val


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("N", nargs="?", type=int, default=1000)
    ap.add_argument("D", nargs="?", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--a1a", action="store_true", help="a1a's 1605 training rows (123 features + intercept, labels "
                    "+-1) in place of the Gaussian data")
    ap.add_argument("--solvers", default="gop,majorize,ipsa", help="comma-separated MAP solvers besides Clarabel")
    a = ap.parse_args()
    import varopt  # noqa: F401
    from varopt.baselines.klprox import cholesky_vi
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    from varopt.solvers.klprox.expectations import family_table
    from varopt.solvers.klprox.view import likelihood_view
    print(f"N={a.N} D={a.D} repeat={a.repeat} loadavg={_loadavg()} "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    if a.a1a:
        from shared_data import load_a1a
        Xa, ya = load_a1a()[:2]
        X, y = np.hstack([Xa, np.ones((Xa.shape[0], 1))]), 2.0 * ya - 1.0
        print(f"a1a: N={X.shape[0]} D={X.shape[1]} (the N, D arguments are ignored)")
    else:
        X, y = data(a.N, a.D)
    ipsa_opts = {"batch_size": 10 ** 9, "hessian": "exact", "step_power": 0, "max_iter": 300, "kkt_tol": 1e-10}
    print(f"{'model':14s} {'solver':9s} {'columns':>7s} {'rows':>6s} {'status':18s} {'time s':>8s} {'ratio':>6s} "
          f"{'rel err':>9s}")
    for name, prob in models(X, y).items():
        tref, ref = timed(lambda prob=prob: prob.solve(solver="CLARABEL"), a.repeat)
        print(f"{name:14s} {'clarabel':9s} {'':>7s} {'':>6s} {prob.status:18s} {tref:8.3f} {1.0:6.2f} {0.0:9.1e}")
        for m in [m for m in a.solvers.split(",") if m]:
            opts = ipsa_opts if m == "ipsa" else {}
            t, val = timed(lambda prob=prob, m=m, opts=opts: prob.solve(method=m, warm_start=False, **opts), a.repeat)   # cold: not from Clarabel's w
            pr = prob.varopt_program
            print(f"{name:14s} {m:9s} {pr.n:7d} {len(pr.constraints):6d} {prob.varopt_result.status:18s} {t:8.3f} "
                  f"{t / tref:6.2f} {abs(val - ref) / max(1.0, abs(ref)):9.1e}")
        if name == "probit":
            t, _ = timed(lambda prob=prob: prob.solve(method="klprox", warm_start=False), a.repeat)
            r = prob.varopt_result
            prog, _ = compile_cvxpy(prob, native_atoms={"sqpos"})
            tb, b = timed(lambda prog=prog: cholesky_vi(likelihood_view(prog, family_table(100))), 1)
            print(f"{name:14s} {'klprox':9s} {prog.n:7d} {0:6d} {r.status:18s} {t:8.3f} {t / tref:6.2f}   "
                  f"-ELBO {r.info['neg_elbo']:.10f} ({r.iterations} iterations)")
            print(f"{name:14s} {'chol-VI':9s} {'':>7s} {'':>6s} {'':18s} {tb:8.3f} {tb / tref:6.2f}   "
                  f"-ELBO {b['neg_elbo']:.10f}; |m - m_klprox| {np.abs(b['m'] - r.x).max():.1e}, "
                  f"|V - V_klprox| {np.abs(b['V'] - r.info['covariance']).max():.1e}")


if __name__ == "__main__":
    main()
