"""IPSA throughput (samples/s) against scikit-learn SGD on the same data, same run: the numpy
path (``backend='numpy'``), the compiled per-sample loop (``backend='numba'``, needs
``pip install 'varopt[fast]'``) and scikit-learn side by side, with ratios.

* dense: the §2.5.7 generator with m = 40 features, N = 5000 examples, L1 least squares
  (split form), one pass in order, batch 1 (and batch 32);
  anchor: SGDRegressor(penalty='l1', max_iter=1, shuffle=False).
* a1a (LIBSVM, 1605 x 123 sparse binary, ../shared/data/a1a): L1 logistic regression, 5 passes,
  batch 1, identity and running-diagonal Hessian;
  anchor: SGDClassifier(loss='log_loss', penalty='l1', max_iter=5, shuffle=False).

samples/s = (passes x N) / wall time of the whole solve (IPSA: setup of the program and start
point included). Best of 7 runs, after one warm-up call. The JIT cost is reported apart: the
compile of the kernel in a fresh process with an empty numba cache, and the first call in this
process (cache load, ``cache=True``). The machine is shared (2 cores, several workers): timings are noisy.
Usage: python benchmarks/ipsa_throughput.py [--cpu]   (--cpu: process CPU time instead of wall time)
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.formulations.l1 import l1_least_squares_program, l1_logistic_program

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


#: ``--cpu``: time with the process CPU clock instead of the wall clock (on a loaded machine the
#: wall clock also counts the time other processes hold the core; all three loops are single-threaded)
CLOCK = time.process_time if "--cpu" in sys.argv else time.perf_counter


def load_a1a():
    """``(X csr with int32 indices, y)`` of LIBSVM's a1a, or None (said on stdout) when the data set is absent."""
    from sklearn.datasets import load_svmlight_file
    f = DATA / "a1a" / "a1a"
    if not f.exists():
        print(f"a1a not found at {f}: skipped")
        return None
    X, y = load_svmlight_file(str(f), n_features=123)
    X = X.tocsr()
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)  # sklearn needs int32
    return X, y


def best_of(fn, reps=7, warm=False):
    """The least of ``reps`` timings of ``fn()`` on CLOCK (after one untimed call with ``warm``: a numba kernel's
    load, a first sklearn import)."""
    if warm:
        fn()
    ts = []
    for _ in range(reps):
        t = CLOCK()
        fn()
        ts.append(CLOCK() - t)
    return min(ts)


def one_pass(solver, P, hessian, backend, reps=7):
    """``(seconds, result)``: the best of ``reps`` one-pass batch-1 runs of ``solver`` on the program ``P`` with
    ``hessian`` and ``backend`` (after a warm-up), and a last run's result, checked to have used ``backend``."""
    def solve():
        return solver.solve(P, passes=1, hessian=hessian, history_objective=False, backend=backend)
    t = best_of(solve, reps, warm=True)
    r = solve()
    assert r.info["backend"].startswith(backend), r.info["backend"]
    return t, r


def clock_line(reps):
    """The header line of a throughput table: which clock, the load, best of how many."""
    return (f"clock: {'process CPU time' if '--cpu' in sys.argv else 'wall time'}; load average "
            f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores; best of {reps}")


def test_error(Xt, yt, w, b):
    """The share of test points ``sign(Xt w + b)`` gets wrong (labels +-1)."""
    return float(np.mean(np.where(Xt @ w + b > 0, 1.0, -1.0) != yt))


def row(name, samples, t_np, t_nb, t_sk):
    a, b, c = samples / t_np, samples / t_nb, samples / t_sk
    print(f"{name:<46s} {a:11.0f} {b:11.0f} {c:12.0f} {b / a:9.1f} {b / c:9.3f}")


def jit_costs():
    """Seconds to compile the kernel with an empty cache (fresh process) and to load it from the cache."""
    code = ("import time, numpy as np, varopt, varopt.solvers.ipsa\n"
            "from varopt.formulations.l1 import l1_least_squares_program\n"
            "P = l1_least_squares_program(np.eye(3), np.ones(3), 0.1)\n"
            "t = time.perf_counter(); varopt.get_solver('ipsa').solve(P, max_iter=2, backend='numba')\n"
            "print(time.perf_counter() - t)")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(2):  # first: compile into the empty cache; second: load it
            env["NUMBA_CACHE_DIR"] = d
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            out.append(float(r.stdout.split()[-1]))
    return out


def main():
    warnings.simplefilter("ignore")
    from sklearn.linear_model import SGDClassifier, SGDRegressor

    solver = varopt.get_solver("ipsa")
    compile_s, load_s = jit_costs()
    print(f"numba kernel: compile {compile_s:.1f} s (fresh process, empty cache), cached load + first solve "
          f"{load_s:.2f} s (fresh process)")
    print(f"clock: {'process CPU time' if CLOCK is time.process_time else 'wall time'}; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'case':<46s} {'numpy s/s':>11s} {'numba s/s':>11s} {'sklearn s/s':>12s} {'nb/np':>9s} {'nb/sk':>9s}")
    rng = np.random.default_rng(0)
    N, m = 5000, 40
    z = rng.normal(size=N)
    X = rng.normal(size=(N, m)) * np.sqrt(1.0 / rng.gamma(2.5, size=m)) + z[:, None]
    y = X @ np.r_[np.zeros(10), 2 * np.ones(10), np.zeros(10), 2 * np.ones(10)] + rng.normal(size=N)
    alpha = 1.25
    P = l1_least_squares_program(X, y, alpha)
    t = time.perf_counter()
    solver.solve(P, passes=1, history_objective=False, backend="numba")
    print(f"  (first numba solve in this process: {time.perf_counter() - t:.2f} s)")
    for passes in (1, 10):
        t_sk = best_of(lambda: SGDRegressor(penalty="l1", alpha=alpha, max_iter=passes, tol=None, shuffle=False,
                                            fit_intercept=False).fit(X, y))
        t_np = best_of(lambda: solver.solve(P, passes=passes, history_objective=False, backend="numpy"))
        t_nb = best_of(lambda: solver.solve(P, passes=passes, history_objective=False, backend="numba"))
        row(f"dense m=40, N=5000, batch 1, {passes} pass(es)", passes * N, t_np, t_nb, t_sk)
    t_sk = best_of(lambda: SGDRegressor(penalty="l1", alpha=alpha, max_iter=1, tol=None, shuffle=False,
                                        fit_intercept=False).fit(X, y))
    t_ip = best_of(lambda: solver.solve(P, passes=1, batch_size=32, history_objective=False))
    print(f"  (batch 32, numpy path, 1 pass: {N / t_ip:.0f} samples/s, {N / t_ip / (N / t_sk):.3f} x sklearn)")
    t_build = best_of(lambda: l1_least_squares_program(X, y, alpha))
    print(f"  (building the Program from arrays: {t_build * 1e3:.1f} ms, not included)")

    a1a = load_a1a()
    if a1a is None:
        return
    Xa, ya = a1a
    Na = Xa.shape[0]
    a_alpha = 1e-4
    t_sk = best_of(lambda: SGDClassifier(loss="log_loss", penalty="l1", alpha=a_alpha, max_iter=5, tol=None,
                                         shuffle=False).fit(Xa, ya))
    Pa = l1_logistic_program(Xa, ya, a_alpha)
    for h in ("identity", "bb", "diagonal"):
        t_np = best_of(lambda: solver.solve(Pa, passes=5, hessian=h, history_objective=False, backend="numpy"))
        t_nb = best_of(lambda: solver.solve(Pa, passes=5, hessian=h, history_objective=False, backend="numba"))
        row(f"a1a sparse 1605x123 logistic, {h}, 5 passes", 5 * Na, t_np, t_nb, t_sk)
    Pb = l1_logistic_program(Xa, ya, a_alpha, "box")
    t_np = best_of(lambda: solver.solve(Pb, passes=5, history_objective=False, backend="numpy"))
    t_nb = best_of(lambda: solver.solve(Pb, passes=5, history_objective=False, backend="numba"))
    row("a1a logistic, box form -u<=w<=u, identity, 5 p.", 5 * Na, t_np, t_nb, t_sk)


if __name__ == "__main__":
    main()
