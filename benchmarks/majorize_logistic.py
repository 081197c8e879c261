"""Benchmark: majorize vs L-BFGS-B, scikit-learn and CVXPY+Clarabel on L2 logistic regression (seed 003 Table 3).

Objective (all solvers, identical): ``sum_i loss_i + lam/2 ||w||^2`` with the intercept unpenalized and
``lam = t * lambda`` (the paper's ``t lambda / 2 ||theta||^2``), ``lambda = 1`` by default (Table 3's
smallest setting). scikit-learn's ``C = 1 / lam`` (sklearn minimises ``C sum loss + 1/2 ||w||^2``).
Features are standardized (zero mean, unit variance); hepatitis is mean-imputed; bupa uses column 7
as the label (as the 2012 benchmarks did). Multi-class sets (wine, digits, srbct) use the multinomial
loss in every solver.

Metric: wall time and iterations until the objective is within ``1e-4`` relative of the optimum ``f*``
(the best value any solver reached with tight tolerances). majorize and L-BFGS-B use the *same*
value/gradient code (``MajorizeModel.value/gradient``: cached linear/quadratic part + LseGroup terms);
both times include building that model; neither includes compiling.
scikit-learn has no per-iteration trace: it is rerun with ``max_iter = 1, 2, 4, ...`` and the time of
the first run within ``1e-4`` is reported. Clarabel is timed on the identical CVXPY problem
(``solver_stats.solve_time``, and the whole ``prob.solve`` wall time).

Usage: ``python benchmarks/majorize_logistic.py [--lam 1.0] [--sets a,b,...] [--no-clarabel]``.
The machine is shared: timings are noisy; each timing is the best of ``--repeat`` runs, majorize and
L-BFGS-B alternating run by run (both see the same load), and at least 41 runs each on problems that
solve in under 10 ms.
"""
from __future__ import annotations

import os

# one BLAS thread for every method (the anchors too): on the shared, oversubscribed 2-core machine
# multi-threaded BLAS on small matrices is 10x slower and would distort every timing
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
import time
import warnings

import numpy as np

import varopt  # noqa: F401
import varopt.solvers.majorize  # noqa: F401
from varopt import get_solver
from varopt.formulations.logistic import build_cvxpy, logistic_program

from tracing import REL, datasets, first_within, lbfgs_trace

#: runs of each method (at least) when one majorize solve takes under 10 ms
SMALL_REPEAT = 41

SETS = ["breast_cancer", "wine", "digits", "bupa", "heart_statlog", "hepatitis", "srbct"]


def run_majorize(prog):
    res = get_solver("majorize").solve(prog, tol=1e-12, max_iter=500)
    return res, [(h["time"], h["objective"]) for h in res.history]


def run_lbfgs(prog, tight=False):
    return lbfgs_trace(prog, ftol=1e-15 if tight else 1e-12)


def run_interleaved(prog, repeat, fstar_hint=None):
    """Best (fastest to 1e-4 of the running f*) of ``repeat`` majorize and L-BFGS-B runs, alternating so
    both see the same background load; sub-10 ms problems get at least ``SMALL_REPEAT`` runs each
    (timeit's rule: the minimum of many short runs is the least disturbed measurement)."""
    m = run_majorize(prog)
    lb = run_lbfgs(prog)
    fstar = min(m[0].objective, lb[1][-1][1]) if fstar_hint is None else fstar_hint
    reps = repeat if m[0].wall_time > 0.01 else max(repeat, SMALL_REPEAT)
    best_m, best_l = m, lb
    for _ in range(reps - 1):
        m = run_majorize(prog)
        if first_within(m[1], fstar)[0] < first_within(best_m[1], fstar)[0]:
            best_m = m
        lb = run_lbfgs(prog)
        if first_within(lb[1], fstar)[0] < first_within(best_l[1], fstar)[0]:
            best_l = lb
    return best_m, best_l, reps


def run_sklearn(X, y, C, fstar, prog, repeat):
    from sklearn.linear_model import LogisticRegression
    classes = np.unique(y)
    mi = 1
    while mi <= 20000:
        times = []
        for _ in range(repeat):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                sk = LogisticRegression(C=C, solver="lbfgs", max_iter=mi, tol=1e-12).fit(X, y)
                times.append(time.perf_counter() - t0)
        theta = np.concatenate([sk.coef_.ravel(), sk.intercept_])
        if classes.size > 2:
            theta = np.concatenate([sk.coef_.ravel(), sk.intercept_])
        f = prog.objective.value(theta)
        if f - fstar <= REL * abs(fstar):
            return min(times), int(np.max(sk.n_iter_)), f
        mi *= 2
    return np.nan, -1, f


def run_clarabel(X, y, C):
    prob, _, _ = build_cvxpy(X, y, C=C)
    t0 = time.perf_counter()
    prob.solve(solver="CLARABEL")
    wall = time.perf_counter() - t0
    st = prob.solver_stats
    return prob.value, st.solve_time, wall, st.num_iters


def run_majorize_cvxpy(X, y, C):
    prob, _, _ = build_cvxpy(X, y, C=C)
    t0 = time.perf_counter()
    v = prob.solve(method="majorize", tol=1e-10)
    return v, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--lam", type=float, default=1.0, help="paper's lambda; penalty t*lambda/2 ||w||^2")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-clarabel", action="store_true")
    a = ap.parse_args(argv)
    rows = []
    for name, X, y in datasets(a.sets.split(",")):
        t, d = X.shape
        lam = t * a.lam
        C = 1.0 / lam
        prog = logistic_program(X, y, lam)
        _, ltight = run_lbfgs(prog, tight=True)
        (mres, mtrace), (lres, ltrace), reps = run_interleaved(prog, a.repeat, ltight[-1][1])
        cands = [mres.objective, ltrace[-1][1], ltight[-1][1]]
        cl = None
        if not a.no_clarabel:
            cl = run_clarabel(X, y, C)
            cands.append(cl[0])
        fstar = min(cands)
        mt, mi = first_within(mtrace, fstar)
        lt, li = first_within(ltrace, fstar)
        st, si, sf = run_sklearn(X, y, C, fstar, prog, a.repeat)
        mc = run_majorize_cvxpy(X, y, C) if not a.no_clarabel and t * d < 1e5 else (np.nan, np.nan)
        row = dict(name=name, t=t, d=prog.n, fstar=fstar, maj_t=mt, maj_it=mi, maj_total=mres.wall_time,
                   maj_iters=mres.iterations, lb_t=lt, lb_it=li, sk_t=st, sk_it=si,
                   cl_solve=cl[1] if cl else np.nan, cl_wall=cl[2] if cl else np.nan,
                   cl_rel=(cl[0] - fstar) / abs(fstar) if cl else np.nan, maj_cvx_wall=mc[1])
        rows.append(row)
        print(f"# {name}: done", file=sys.stderr, flush=True)
    print(f"\nL2 logistic regression, lam = t * {a.lam} (sklearn C = 1/lam), time to within {REL:g} relative of f*"
          " (best of %d interleaved runs, >= %d below 10 ms; shared 2-core machine: noisy)" % (a.repeat, SMALL_REPEAT))
    hdr = (f"{'data':14s} {'t':>5s} {'d':>6s} {'f*':>12s} | {'maj ms':>8s} {'it':>3s} | {'L-BFGS-B ms':>11s} {'it':>4s}"
           f" {'ratio':>6s} | {'sklearn ms':>10s} {'it':>4s} {'ratio':>6s} | {'Clarabel s':>10s} {'wall s':>7s}"
           f" {'ratio':>7s} | {'maj cvxpy wall':>14s}")
    print(hdr)
    print("-" * len(hdr))
    wins = 0
    for r in rows:
        rl = r["lb_t"] / r["maj_t"] if r["maj_t"] > 0 else np.nan
        rs = r["sk_t"] / r["maj_t"] if r["maj_t"] > 0 else np.nan
        rc = r["cl_solve"] / r["maj_t"] if r["maj_t"] > 0 else np.nan
        wins += int(rl > 1)
        print(f"{r['name']:14s} {r['t']:5d} {r['d']:6d} {r['fstar']:12.6f} | {1e3 * r['maj_t']:8.3f} {r['maj_it']:3d} | "
              f"{1e3 * r['lb_t']:11.3f} {r['lb_it']:4d} {rl:6.2f} | {1e3 * r['sk_t']:10.3f} {r['sk_it']:4d} {rs:6.2f} | "
              f"{r['cl_solve']:10.4f} {r['cl_wall']:7.3f} {rc:7.1f} | {r['maj_cvx_wall']:14.3f}")
    print(f"\nratio = anchor time / majorize time (> 1: majorize faster). majorize faster than L-BFGS-B on "
          f"{wins}/{len(rows)} sets. Clarabel relative objective gaps: "
          + ", ".join(f"{r['name']} {r['cl_rel']:.1e}" for r in rows))
    return rows


if __name__ == "__main__":
    main()
