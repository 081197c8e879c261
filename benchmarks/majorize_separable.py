"""Benchmark: the cost of majorize's attainment check (docs/majorize.md, "Separable data") on the data sets of
``majorize_logistic.py``, and what it reports with and without a penalty.

For every set: the L2 logistic program (``lam = 1``, intercept unpenalized, as in ``majorize_logistic.py``) and the
unpenalized one (``lam = 0``, scikit-learn's ``C = inf``), solved by ``get_solver('majorize')`` with the default
``check_attained=True`` and with ``check_attained=False``, alternating run by run (same load), best of ``--repeat``
wall times each; the check's own time is ``result.info['attainment']['seconds']`` (best over the runs), and how it
decided (``cert``: the dual certificate at the converged point, no LP; ``iterate``: the last iterate's own direction
passed the exact test, no LP; ``LP``: the recession LP ran). Separability is
also decided independently (scipy ``linprog``: ``y_i (x_i^T w + b) >= 1`` feasible, binary sets only).

Usage: ``python benchmarks/majorize_separable.py [--sets a,b] [--repeat 5]`` (BLAS pinned to 1 thread).
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import time

import numpy as np
import scipy.optimize as so
from shared_data import load_dataset

import varopt
import varopt.solvers.majorize  # noqa: F401
from varopt import get_solver
from varopt.formulations.logistic import logistic_program
from varopt.solvers.majorize import recession as R

SETS = ["breast_cancer", "wine", "digits", "bupa", "heart_statlog", "hepatitis", "srbct"]


def separable(X, y):
    """scipy's LP (independent of varopt): is y_i (x_i^T w + b) >= 1 feasible? None for more than two classes."""
    cls = np.unique(y)
    if cls.size != 2:
        return None
    s = np.where(y == cls[1], 1.0, -1.0)
    A = -(s[:, None] * np.hstack([X, np.ones((X.shape[0], 1))]))
    r = so.linprog(np.zeros(X.shape[1] + 1), A_ub=A, b_ub=-np.ones(X.shape[0]), bounds=(None, None), method="highs")
    return r.status == 0


class LPCount:
    """Counts the recession LPs run (``recession_direction`` calls) while active: 0 means the dual certificate at the
    converged point decided."""

    def __enter__(self):
        self.calls, self.orig = 0, R.recession_direction

        def counted(*a, **k):
            self.calls += 1
            return self.orig(*a, **k)
        R.recession_direction = counted
        return self

    def __exit__(self, *exc):
        R.recession_direction = self.orig


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"load average: {load()}")
    print("| set | n x d, classes | lam | separable (scipy LP) | status with check | decided by | check s | "
          "solve s, check on / off | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        try:
            X, y = load_dataset(name)
        except FileNotFoundError:
            print(f"| {name} | (data not found) |")
            continue
        sep = separable(X, y)
        for lam in (1.0, 0.0):
            prog = logistic_program(X, y, lam, True)
            on, off, chk = [], [], []
            res = None
            lps = 0
            for _ in range(args.repeat):
                with LPCount() as cnt:
                    t = time.perf_counter()
                    res = get_solver("majorize").solve(prog)
                    on.append(time.perf_counter() - t)
                lps = cnt.calls
                chk.append(res.info.get("attainment", {}).get("seconds", 0.0))
                t = time.perf_counter()
                get_solver("majorize").solve(prog, check_attained=False)
                off.append(time.perf_counter() - t)
            att = res.info.get("attainment", {})
            verdict = att.get("verdict", "-")
            dec = (att.get("found_by") if att.get("verdict") not in (None, "attained")
                   else ("LP" if lps else "cert") if att else "-")
            print(f"| {name} | {X.shape[0]} x {X.shape[1]}, {np.unique(y).size} | {lam:g} | "
                  f"{'-' if sep is None else sep} | {res.status} ({verdict}) | {dec} | {min(chk):.4f} | "
                  f"{min(on):.4f} / {min(off):.4f} | {min(on) / min(off):.2f} |", flush=True)
    print(f"load average: {load()}")


if __name__ == "__main__":
    main()
