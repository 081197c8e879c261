"""Benchmark: constrained L2 logistic regression, majorize vs CVXPY+Clarabel vs unconstrained majorize.

The problems of ``benchmarks/majorize_logistic.py`` (same loaders, same objective ``sum_i loss_i +
lam/2 ||W||^2``, ``lam = t * lambda``) with a few linear constraints on the weight vector
``theta = vec(W)`` (column-major: class 0's weights first; the binary ``w``):

    theta[:5] >= 0,        sum(theta[5:10]) <= 0.5

written in CVXPY. Per data set, in the same run: ``prob.solve(method="majorize")`` on the constrained
problem, ``prob.solve(solver="CLARABEL")`` on the identical problem, and ``method="majorize"`` on the
unconstrained problem. Times are whole ``prob.solve`` wall times (CVXPY's compilation included for every
method), best of ``--repeat``; the methods alternate run by run so they see the same load.
ratio Clarabel = Clarabel / constrained majorize (> 1: majorize faster); ratio uncon = constrained /
unconstrained majorize (the issue's goal: <= 2). ``gap`` is the relative objective difference to Clarabel
(majorize - Clarabel; negative: majorize lower).

Usage: ``python benchmarks/majorize_constrained.py [--lam 1.0] [--sets a,b] [--repeat 3] [--tol 1e-10]``.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
import time

import numpy as np

import varopt  # noqa: F401
from varopt.formulations.logistic import build_cvxpy

from tracing import datasets

SETS = ["breast_cancer", "wine", "digits", "bupa", "heart_statlog", "hepatitis", "srbct"]


def constrained_problem(X, y, C):
    """The CVXPY problem of majorize_logistic.py plus ``theta[:5] >= 0``, ``sum(theta[5:10]) <= 0.5``."""
    import cvxpy as cp
    prob, W, _ = build_cvxpy(X, y, C=C)
    theta = W if len(W.shape) == 1 else cp.vec(W, order="F")
    cons = [theta[:5] >= 0, cp.sum(theta[5:10]) <= 0.5]
    return cp.Problem(prob.objective, cons), prob


def timed(fn):
    t0 = time.perf_counter()
    v = fn()
    return v, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--lam", type=float, default=1.0, help="paper's lambda; penalty t*lambda/2 ||w||^2")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-10, help="majorize's tol (both majorize runs)")
    a = ap.parse_args(argv)
    rows = []
    for name, X, y in datasets(a.sets.split(",")):
        t = X.shape[0]
        C = 1.0 / (t * a.lam)
        best = {"maj": np.inf, "cla": np.inf, "unc": np.inf}
        vals, iters = {}, {}
        for _ in range(a.repeat):
            for key in ("maj", "cla", "unc"):
                cprob, uprob = constrained_problem(X, y, C)  # fresh problems: no cached compilation
                if key == "maj":
                    v, s = timed(lambda: cprob.solve(method="majorize", tol=a.tol, max_iter=5000))
                    iters[key] = cprob.solver_stats.num_iters
                elif key == "cla":
                    v, s = timed(lambda: cprob.solve(solver="CLARABEL"))
                    iters[key] = cprob.solver_stats.num_iters
                else:
                    v, s = timed(lambda: uprob.solve(method="majorize", tol=a.tol, max_iter=5000))
                    iters[key] = uprob.solver_stats.num_iters
                best[key] = min(best[key], s)
                vals[key] = v
        rows.append(dict(name=name, t=t, n=X.shape[1], **{k + "_s": v for k, v in best.items()},
                         **{k + "_it": v for k, v in iters.items()},
                         gap=(vals["maj"] - vals["cla"]) / abs(vals["cla"]), fcon=vals["maj"], func=vals["unc"]))
        print(f"# {name}: done", file=sys.stderr, flush=True)
    print(f"\nConstrained L2 logistic regression (theta[:5] >= 0, sum(theta[5:10]) <= 0.5), lam = t * {a.lam}; "
          f"whole prob.solve wall time, best of {a.repeat}; majorize tol = {a.tol:g}")
    hdr = (f"{'data':14s} {'t':>5s} {'p':>5s} | {'maj con ms':>10s} {'it':>4s} | {'Clarabel ms':>11s} {'it':>3s}"
           f" {'ratio':>6s} | {'maj uncon ms':>12s} {'it':>4s} {'con/uncon':>9s} | {'gap':>8s}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['name']:14s} {r['t']:5d} {r['n']:5d} | {1e3 * r['maj_s']:10.1f} {r['maj_it']:4d} | "
              f"{1e3 * r['cla_s']:11.1f} {r['cla_it']:3d} {r['cla_s'] / r['maj_s']:6.1f} | "
              f"{1e3 * r['unc_s']:12.1f} {r['unc_it']:4d} {r['maj_s'] / r['unc_s']:9.2f} | {r['gap']:8.1e}")
    return rows


if __name__ == "__main__":
    main()
