"""Compile time and memory of large models (conventions issue, item 4).

Three models, each built by a user-facing route and compiled into varopt's canonical program:

* ``rows``: 10^4 sparse linear rows (5 random nonzeros each, ``A x <= 1``) over 5 10^4 variables
  in [0, 1], objective ``c^T x + sum x log x`` (Pyomo and CVXPY);
* ``a1a``: L1-regularised logistic regression on a1a (1,605 x 123, sparse; LIBSVM), split form
  ``w = w+ - w-`` (Pyomo and CVXPY builders of :mod:`varopt.formulations.l1`, and the program
  built from the arrays directly, :func:`~varopt.formulations.l1.l1_logistic_program`);
* ``bgmm``: the Bayesian GMM negative ELBO with N = 10^5 points and K = 3 (known variance,
  point family): the CVXPY builder (vectorised expressions), the Pyomo builder, and the program
  built from the arrays directly (:func:`~varopt.formulations.bgmm_program.bgmm_program`).

Every (model, route) runs in its own child process, so memory figures do not mix. Columns:
build = time to write the model with the modelling library; compile = ``compile_pyomo`` /
``compile_cvxpy`` (or the array builder); "compile MB" = the largest resident-set increase during
the compile step over the resident set just before it (sampled every 2 ms); "peak MB" = the child's
high-water resident set (Python, the modelling library, the model and the program together).

Usage::

    python benchmarks/compile_scale.py                       # everything (a few minutes)
    python benchmarks/compile_scale.py --models rows --routes pyomo,cvxpy
    python benchmarks/compile_scale.py --bgmm-n 20000        # smaller ELBO
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "a1a"
ROUTES = {"rows": ("pyomo", "cvxpy"), "a1a": ("pyomo", "cvxpy", "arrays"), "bgmm": ("cvxpy", "pyomo", "arrays")}


# ------------------------------------------------------------------------------------------
# memory sampling
# ------------------------------------------------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


class _PeakRSS:
    """Largest resident set seen while the ``with`` block runs (a 2 ms sampling thread)."""

    def __enter__(self):
        self.start = self.peak = _rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss_mb())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())


# ------------------------------------------------------------------------------------------
# models
# ------------------------------------------------------------------------------------------
def _rows_data(m=10_000, n=50_000, k=5, seed=0):
    rng = np.random.default_rng(seed)
    cols = np.stack([rng.choice(n, k, replace=False) for _ in range(m)])
    vals = rng.uniform(0.5, 1.5, (m, k))
    c = rng.normal(size=n)
    return cols, vals, c, n


def build_rows(route):
    cols, vals, c, n = _rows_data()
    if route == "pyomo":
        import pyomo.environ as pyo
        M = pyo.ConcreteModel()
        M.x = pyo.Var(range(n), bounds=(0.0, 1.0), initialize=0.5 / 5)
        M.obj = pyo.Objective(expr=sum(float(c[i]) * M.x[i] + M.x[i] * pyo.log(M.x[i]) for i in range(n)))
        M.rows = pyo.Constraint(range(cols.shape[0]), rule=lambda mm, r: sum(
            float(v) * mm.x[int(j)] for j, v in zip(cols[r], vals[r])) <= 1.0)
        return M
    import cvxpy as cp
    import scipy.sparse as sp
    A = sp.csr_matrix((vals.ravel(), (np.repeat(np.arange(cols.shape[0]), cols.shape[1]), cols.ravel())),
                      shape=(cols.shape[0], n))
    x = cp.Variable(n, bounds=[0.0, 1.0], name="x")
    return cp.Problem(cp.Minimize(c @ x - cp.sum(cp.entr(x))), [A @ x <= 1.0])


def _a1a():
    from sklearn.datasets import load_svmlight_file
    if not DATA.exists():
        raise SystemExit(f"a1a not found at {DATA} (../shared/data/a1a)")
    X, y = load_svmlight_file(str(DATA / "a1a"), n_features=123)
    return X.tocsr(), y


def build_a1a(route):
    from varopt.formulations import l1
    X, y = _a1a()
    alpha = 1.0 / X.shape[0]
    if route == "pyomo":
        return l1.l1_logistic_pyomo(X, y, alpha)
    if route == "cvxpy":
        return l1.l1_logistic_cvxpy(X, y, alpha)[0]
    return ("arrays", lambda: l1.l1_logistic_program(X, y, alpha))


def build_bgmm(route, N):
    from varopt.formulations import bgmm
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(-4, 1, N // 3), rng.normal(0, 1, N // 3), rng.normal(4, 1, N - 2 * (N // 3))])
    if route == "pyomo":
        return bgmm.bgmm_pyomo(x, 3)
    if route == "cvxpy":
        return bgmm.bgmm_cvxpy(x, 3)
    from varopt.formulations.bgmm_program import bgmm_program
    return ("arrays", lambda: bgmm_program(x, 3))


# ------------------------------------------------------------------------------------------
# one measurement (child process)
# ------------------------------------------------------------------------------------------
def measure(model, route, bgmm_n):
    import varopt  # noqa: F401  (registration; the front-ends load with the modelling library)
    t0 = time.perf_counter()
    built = build_bgmm(route, bgmm_n) if model == "bgmm" else globals()[f"build_{model}"](route)
    t_build = time.perf_counter() - t0
    if isinstance(built, tuple):  # the program straight from arrays: building is compiling
        with _PeakRSS() as mem:
            t0 = time.perf_counter()
            program = built[1]()
            t_compile = time.perf_counter() - t0
        t_build = 0.0
    else:
        if route == "pyomo":
            from varopt.frontends.pyomo_compile import compile_pyomo as compile_
        else:
            from varopt.frontends.cvxpy_compile import compile_cvxpy as compile_
        with _PeakRSS() as mem:
            t0 = time.perf_counter()
            program, _ = compile_(built)
            t_compile = time.perf_counter() - t0
    A, _, _, _ = program.linear_constraints()
    return {"model": model, "route": route, "n": program.n, "rows": len(program.constraints),
            "linear nnz": int(A.nnz), "build s": t_build, "compile s": t_compile,
            "compile MB": mem.peak - mem.start,
            "peak MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="rows,a1a,bgmm")
    ap.add_argument("--routes", default=None, help="comma list of pyomo,cvxpy,arrays (default: all per model)")
    ap.add_argument("--bgmm-n", type=int, default=100_000)
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "ROUTE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child, args.bgmm_n)))
        return
    routes = None if args.routes is None else args.routes.split(",")
    rows = []
    for model in args.models.split(","):
        for route in ROUTES[model]:
            if routes is not None and route not in routes:
                continue
            cmd = [sys.executable, __file__, "--child", model, route, "--bgmm-n", str(args.bgmm_n)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                err = (out.stderr.strip().splitlines() or ["?"])[-1]
                rows.append({"model": model, "route": route, "error": err[:100]})
            else:
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(_fmt(rows[-1]), flush=True)
    print("\n| model | route | variables | rows | linear nnz | build s | compile s | compile MB | peak MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(_fmt(r))


def _fmt(r):
    if "error" in r:
        return f"| {r['model']} | {r['route']} | error: {r['error']} |"
    return (f"| {r['model']} | {r['route']} | {r['n']} | {r['rows']} | {r['linear nnz']} | {r['build s']:.2f} "
            f"| {r['compile s']:.2f} | {r['compile MB']:.0f} | {r['peak MB']:.0f} |")


if __name__ == "__main__":
    main()
