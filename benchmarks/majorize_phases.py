"""Benchmark: CPU time of whole ``prob.solve`` calls on small problems, and where it goes (per-solve fixed costs).

The problems of ``benchmarks/majorize_constrained.py`` (constrained: ``theta[:5] >= 0``, ``sum(theta[5:10]) <= 0.5``;
unconstrained: the same objective). Each solve gets a fresh ``cvxpy.Problem``, built outside the timer and dropped
after (as the other benchmark does; keeping hundreds of solved problems alive grows the heap, and every new array
then costs page faults that a user's solve does not pay). Times are CPU times (``time.process_time``), medians over
``--n`` solves per method, the methods alternating solve by solve, so a shared and loaded machine moves the medians
far less than the best wall time of a few runs: ``prob.solve(method="majorize")`` on the constrained and the
unconstrained problem and ``prob.solve(solver="CLARABEL")`` on the constrained one (every ``--every``-th round).
``x Clarabel`` = Clarabel / constrained majorize, ``con/unc`` = constrained / unconstrained majorize.

``--phases`` also prints, per set and problem, the median microseconds of each phase of majorize's solve, measured
by CPU-time wrappers around single functions (each adds well under a microsecond): CVXPY tracing, the expressions
and the rest of ``compile_cvxpy``, the model, the start, the step QP's set-up, the other set-up, the iterations,
the attainment check after them (``MajorizeModel.recession``, docs/majorize.md "Separable data"), CVXPY's
``unpack_results`` (which evaluates the objective at the loaded point, for every solver), and the rest (options,
the result, the CVXPY entry).

Usage: ``python benchmarks/majorize_phases.py [--sets hepatitis,wine] [--n 300] [--every 5] [--phases] [--backend numba]``.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import collections
import functools
import time

import numpy as np

import varopt  # noqa: F401
from majorize_constrained import constrained_problem
from tracing import datasets

PHASES = ["trace", "to_expressions", "compile rest", "MajorizeModel", "start", "StepQP", "other set-up",
          "iterations", "attainment", "unpack_results", "rest"]


def install_phase_timers(acc):
    """CPU-time wrappers around the functions of each phase, adding into ``acc`` (a defaultdict(float))."""
    import cvxpy as cp

    import varopt.frontends.cvxpy_compile as CC
    import varopt.frontends.cvxpy_plugin as PL
    import varopt.registry as R
    import varopt.solvers.majorize.loop as L
    import varopt.solvers.majorize.model as M
    import varopt.solvers.majorize.solver as S

    def wrap(owner, attr, label):
        f = getattr(owner, attr)

        @functools.wraps(f)  # (the registry reads the solver's signature)
        def timed(*a, **k):
            t0 = time.process_time()
            try:
                return f(*a, **k)
            finally:
                acc[label] += time.process_time() - t0
        setattr(owner, attr, timed)

    wrap(CC, "compile_cvxpy", "compile")
    if hasattr(PL, "compile_cvxpy"):  # imported by the plugin at module level (it was imported per solve before)
        PL.compile_cvxpy = CC.compile_cvxpy
    wrap(CC, "_trace", "trace")
    wrap(CC, "_to_expressions", "to_expressions")
    wrap(R.Solver, "solve", "solve")
    wrap(S, "MajorizeModel", "MajorizeModel")
    wrap(S, "_start", "start")
    wrap(S, "StepQP", "StepQP")
    wrap(L.Majorization, "solve", "iterations")
    wrap(M.MajorizeModel, "recession", "attainment")   # (inside Majorization.solve: taken out of the iterations)
    wrap(cp.Problem, "unpack_results", "unpack_results")


def phases_of(acc, total):
    """The table's phases from one solve's accumulated times."""
    out = {k: acc[k] for k in ("trace", "to_expressions", "MajorizeModel", "start", "StepQP", "attainment",
                               "unpack_results")}
    out["iterations"] = acc["iterations"] - acc["attainment"]
    out["compile rest"] = acc["compile"] - acc["trace"] - acc["to_expressions"]
    out["other set-up"] = acc["solve"] - sum(acc[k] for k in ("MajorizeModel", "start", "StepQP", "iterations"))
    out["rest"] = total - acc["compile"] - acc["solve"] - acc["unpack_results"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="wine,bupa,heart_statlog,hepatitis")
    ap.add_argument("--n", type=int, default=300, help="majorize solves per problem (medians)")
    ap.add_argument("--every", type=int, default=5, help="a Clarabel solve every this many rounds (0: none)")
    ap.add_argument("--warm", type=int, default=20, help="rounds first run and not counted")
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--backend", default="numpy", choices=["numpy", "numba", "auto"],
                    help="majorize's option backend (numba: compiled iterations of small programs; the kernels' "
                         "one-time load, ~0.3 s, falls in the first solve, which the best / median leaves out)")
    ap.add_argument("--tol", type=float, default=1e-10)
    ap.add_argument("--phases", action="store_true", help="print the per-phase table (microseconds)")
    a = ap.parse_args(argv)
    acc = collections.defaultdict(float)
    if a.phases:
        install_phase_timers(acc)
    rows = []
    for name, X, y in datasets(a.sets.split(",")):
        C = 1.0 / (X.shape[0] * a.lam)
        cpu = {"con": [], "unc": [], "cla": []}
        ph = {"con": collections.defaultdict(list), "unc": collections.defaultdict(list)}
        iters, vals = {}, {}
        for r in range(a.warm + a.n):
            keys = ["con", "unc"] + (["cla"] if a.every and r % a.every == 0 else [])
            for key in keys:
                cprob, uprob = constrained_problem(X, y, C)
                prob = uprob if key == "unc" else cprob
                acc.clear()
                t0 = time.process_time()
                if key == "cla":
                    v = prob.solve(solver="CLARABEL")
                else:
                    v = prob.solve(method="majorize", tol=a.tol, max_iter=5000, backend=a.backend)
                t = time.process_time() - t0
                if r >= a.warm:
                    cpu[key].append(t)
                    if a.phases and key != "cla":
                        for k, s in phases_of(acc, t).items():
                            ph[key][k].append(s)
                iters[key], vals[key] = prob.solver_stats.num_iters, v
                del cprob, uprob, prob
        med = {k: float(np.median(v)) if v else np.nan for k, v in cpu.items()}
        gap = (vals["con"] - vals["cla"]) / abs(vals["cla"]) if "cla" in vals else np.nan
        rows.append((name, med, iters, gap, ph))
    print(f"\nCPU time per whole prob.solve (fresh problems), medians of {a.n} (majorize) and "
          f"{len(cpu['cla'])} (Clarabel, last set), ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    hdr = f"{'data':14s} | {'con':>6s} {'it':>3s} | {'unc':>6s} {'it':>3s} | {'con/unc':>7s} | {'Clarabel':>8s} | {'x Clar':>6s} | {'gap':>8s}"
    print(hdr)
    print("-" * len(hdr))
    for name, med, it, gap, _ in rows:
        print(f"{name:14s} | {1e3 * med['con']:6.3f} {it['con']:3d} | {1e3 * med['unc']:6.3f} {it['unc']:3d} | "
              f"{med['con'] / med['unc']:7.2f} | {1e3 * med['cla']:8.2f} | {med['cla'] / med['con']:6.1f} | {gap:8.1e}")
    if a.phases:
        print("\nPhases of majorize's prob.solve (CPU microseconds, medians; the phases' medians need not add up to the "
              "total's)")
        print(f"{'data':14s} {'':4s} " + " ".join(f"{p[:10]:>10s}" for p in PHASES) + f" {'total':>7s}")
        for name, med, _, _, ph in rows:
            for key in ("con", "unc"):
                print(f"{name:14s} {key:4s} " + " ".join(f"{1e6 * np.median(ph[key][p]):10.0f}" for p in PHASES)
                      + f" {1e6 * med[key]:7.0f}")
    return rows


if __name__ == "__main__":
    main()
