"""IPSA throughput (samples/s) against scikit-learn SGD on the same data, same run.

* dense: the §2.5.7 generator with m = 40 features, N = 5000 examples, L1 least squares
  (split form), one pass in order, batch 1 (and batch 32);
  anchor: SGDRegressor(penalty='l1', max_iter=1, shuffle=False).
* a1a (LIBSVM, 1605 x 123 sparse binary, ../shared/data/a1a): L1 logistic regression, 5 passes,
  batch 1, identity and running-diagonal Hessian;
  anchor: SGDClassifier(loss='log_loss', penalty='l1', max_iter=5, shuffle=False).

samples/s = (passes x N) / wall time of the whole solve (IPSA: setup of the program and start
point included). Best of 3 runs. The machine is shared (2 cores, several workers): timings are noisy.
Usage: python benchmarks/ipsa_throughput.py
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.formulations.l1 import l1_least_squares_program, l1_logistic_program

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def best_of(fn, reps=3):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def row(name, samples, t_ipsa, t_sk):
    r1, r2 = samples / t_ipsa, samples / t_sk
    print(f"{name:<44s} {r1:12.0f} {r2:14.0f} {r1 / r2:10.4f}")


def main():
    warnings.simplefilter("ignore")
    from sklearn.linear_model import SGDClassifier, SGDRegressor
    from sklearn.datasets import load_svmlight_file

    solver = varopt.get_solver("ipsa")
    print(f"{'case':<44s} {'ipsa samp/s':>12s} {'sklearn samp/s':>14s} {'ratio':>10s}")
    rng = np.random.default_rng(0)
    N, m = 5000, 40
    z = rng.normal(size=N)
    X = rng.normal(size=(N, m)) * np.sqrt(1.0 / rng.gamma(2.5, size=m)) + z[:, None]
    y = X @ np.r_[np.zeros(10), 2 * np.ones(10), np.zeros(10), 2 * np.ones(10)] + rng.normal(size=N)
    alpha = 1.25
    t_sk = best_of(lambda: SGDRegressor(penalty="l1", alpha=alpha, max_iter=1, tol=None, shuffle=False,
                                        fit_intercept=False).fit(X, y))
    P = l1_least_squares_program(X, y, alpha)
    t_ip = best_of(lambda: solver.solve(P, passes=1, history_objective=False))
    row("dense m=40, N=5000, batch 1, 1 pass", N, t_ip, t_sk)
    t_ip = best_of(lambda: solver.solve(P, passes=1, batch_size=32, history_objective=False))
    row("dense m=40, N=5000, batch 32, 1 pass", N, t_ip, t_sk)
    t_build = best_of(lambda: l1_least_squares_program(X, y, alpha))
    print(f"  (building the Program from arrays: {t_build * 1e3:.1f} ms, not included)")

    f = DATA / "a1a" / "a1a"
    if not f.exists():
        print(f"a1a not found at {f}: skipped")
        return
    Xa, ya = load_svmlight_file(str(f), n_features=123)
    Xa = Xa.tocsr()
    Xa.indices, Xa.indptr = Xa.indices.astype(np.int32), Xa.indptr.astype(np.int32)  # sklearn needs int32
    Na = Xa.shape[0]
    a_alpha = 1e-4
    t_sk = best_of(lambda: SGDClassifier(loss="log_loss", penalty="l1", alpha=a_alpha, max_iter=5, tol=None,
                                         shuffle=False).fit(Xa, ya))
    Pa = l1_logistic_program(Xa, ya, a_alpha)
    for h in ("identity", "diagonal"):
        t_ip = best_of(lambda: solver.solve(Pa, passes=5, hessian=h, history_objective=False))
        row(f"a1a sparse 1605x123 logistic, {h}, 5 passes", 5 * Na, t_ip, t_sk)


if __name__ == "__main__":
    main()
