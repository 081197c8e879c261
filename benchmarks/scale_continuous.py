"""Continuous solvers and front-ends at the sizes users bring: varopt and an anchor in the same run, one table.

Each case runs in its own child process (memory figures do not mix); in it varopt and the anchor solve the same
problem one after the other. Columns: varopt s / anchor s (wall time of the whole call: building the model or
program from the arrays included where the anchor builds its own), ratio = varopt / anchor (> 1: varopt slower),
"varopt MB" / "anchor MB" = the largest resident-set growth during each call (sampled every 2 ms), status and the
relative objective gap (varopt - anchor) / |anchor| where both minimise the same function.

Cases (synthetic data, seeded; sparse matrices rcv1/news20-like: a few nonzeros per row):

* ``compile-cvxpy``: ``compile_cvxpy`` of L2 logistic regression written as users write it
  (``cp.sum(cp.logistic(-cp.multiply(y, X @ w))) + 1/2 ||w||^2``), X sparse 20,000 x 5,000 at 0.5 % and dense
  5,000 x 1,000; anchor ``prob.get_problem_data(cp.CLARABEL)``.
* ``compile-pyomo``: ``compile_pyomo`` of 10^5 sparse rows (5 nonzeros each, ``quicksum``) over 5 10^4 variables and
  ``sum x log x``; anchor Pyomo's NL writer (``m.write('x.nl')``).
* ``majorize-logistic`` / ``majorize-multinomial`` (K = 10) / ``majorize-cvxpy``: the program of
  :func:`varopt.formulations.logistic.logistic_program` (or the CVXPY problem above, ``prob.solve(method='majorize')``)
  on sparse 20,000 x 5,000 at 0.5 %; anchor scipy L-BFGS-B on the same objective (numpy value and gradient, ftol 1e-14).
* ``klprox-dual`` (N = 200, D = 20,000) / ``klprox-full`` (N = 50,000, D = 200): ``BayesianLogisticRegression``;
  anchor scikit-learn's ``LogisticRegression`` with the same prior (its MAP point: the scale of a cheap fit, not the
  same answer -- gap not shown).
* ``crf``: ``ChainCRF`` (majorize) on 2,000 synthetic sentences of up to 20 tokens over about 10^4 features (at most
  100 iterations, tol 1e-8); anchor the same oracle with ``method='lbfgs'`` (L-BFGS-B, the same limits).
* ``ipsa``: ``L1LogisticRegression(passes=1)`` on sparse 20,000 x 10,000 at 0.2 %; anchor ``SGDClassifier`` (L1, one
  pass). IPSA's step is O(n + m) per sample (docs/ipsa.md), SGD's O(nnz of the sample): the ratio grows with d.
* ``proxsg``: ``SparseIsing(max_iter=200)`` (Gibbs gradients, FB) at 50 spins; no anchor.

Usage::

    python benchmarks/scale_continuous.py                      # every case (about 3 minutes on 2 cores)
    python benchmarks/scale_continuous.py --cases majorize-logistic,klprox-dual
    PYTHONPATH=<other checkout> python benchmarks/scale_continuous.py   # the same table for another commit
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_scale import _PeakRSS  # noqa: E402


# ------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------
def design(N, d, density, seed=0):
    """``(X, y in {-1, +1}, z = X w)``: sparse CSR with about ``density N d`` normal entries, or dense normal."""
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    if density >= 1:
        X = rng.normal(size=(N, d))
    else:
        k = int(N * d * density)
        X = sp.csr_matrix((rng.normal(size=k), (rng.integers(0, N, k), rng.integers(0, d, k))), shape=(N, d))
    z = X @ (rng.normal(size=d) / np.sqrt(d * min(density, 1.0)))
    y = np.where(rng.random(N) < 1.0 / (1.0 + np.exp(-z)), 1.0, -1.0)
    return X, y, z, rng


def lbfgs_logistic(X, y, lam, classes=None):
    """scipy L-BFGS-B on ``sum_i [lse_c(x_i'W_c + b_c) - (x_i'W_{y_i} + b_{y_i})] + lam/2 ||W||^2`` (binary: one
    weight vector against the zero class), the objective of ``logistic_program``."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp
    N, d = X.shape
    if classes is None:  # binary, y in {-1, +1}
        def f(v):
            w, b = v[:d], v[d]
            m = -y * (X @ w + b)
            p = -y / (1.0 + np.exp(-m))
            return np.logaddexp(0.0, m).sum() + 0.5 * lam * w @ w, np.concatenate([X.T @ p + lam * w, [p.sum()]])
        n = d + 1
    else:
        K = classes
        Y = np.zeros((N, K))
        Y[np.arange(N), y] = 1.0

        def f(v):
            W, b = v[:K * d].reshape(K, d), v[K * d:]
            S = np.asarray(X @ W.T) + b
            lz = logsumexp(S, axis=1)
            P = np.exp(S - lz[:, None]) - Y
            val = lz.sum() - (S * Y).sum() + 0.5 * lam * (W * W).sum()
            return val, np.concatenate([(np.asarray(X.T @ P).T + lam * W).ravel(), P.sum(0)])
        n = K * (d + 1)
    r = minimize(f, np.zeros(n), jac=True, method="L-BFGS-B", options=dict(maxiter=10000, ftol=1e-14, gtol=1e-8))
    return r.fun, r.nit


# ------------------------------------------------------------------------------------------
# cases: each returns (size, varopt part, anchor name, anchor part); a part is a callable -> (status, objective)
# ------------------------------------------------------------------------------------------
def case_compile_cvxpy(variant):
    import cvxpy as cp
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    N, d, dens = (20000, 5000, 0.005) if variant == "sparse" else (5000, 1000, 1.0)
    X, y, _, _ = design(N, d, dens)
    w = cp.Variable(d)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w))) + 0.5 * cp.sum_squares(w)))
    return (f"{variant} {N}x{d}", lambda: (f"n={compile_cvxpy(prob)[0].n}", None), "get_problem_data(CLARABEL)",
            lambda: (prob.get_problem_data(cp.CLARABEL) and "ok", None))


def case_compile_pyomo():
    import pyomo.environ as pe
    import scipy.sparse as sp
    from varopt.frontends.pyomo_compile import compile_pyomo
    R, n = 100_000, 50_000
    rng = np.random.default_rng(0)
    cols = np.stack([rng.choice(n, 5, replace=False) for _ in range(R)])
    A = sp.csr_matrix((rng.uniform(0.5, 1.5, R * 5), (np.repeat(np.arange(R), 5), cols.ravel())), shape=(R, n))
    m = pe.ConcreteModel()
    m.x = pe.Var(range(n), bounds=(0, 1), initialize=0.1)
    m.o = pe.Objective(expr=pe.quicksum(m.x[j] * pe.log(m.x[j]) for j in range(n)))
    m.c = pe.Constraint(range(R), rule=lambda m, i: pe.quicksum(
        float(v) * m.x[int(j)] for j, v in zip(A.indices[A.indptr[i]:A.indptr[i + 1]],
                                                A.data[A.indptr[i]:A.indptr[i + 1]])) <= 1)
    nl = os.path.join(tempfile.mkdtemp(), "x.nl")
    return (f"{R} rows x {n}", lambda: (f"n={compile_pyomo(m)[0].n}", None), "NL writer",
            lambda: (m.write(nl) and "ok", None))


def _lbfgs_part(X, y, classes):
    f, nit = lbfgs_logistic(X, y, 1.0, classes)
    return f"nit={nit}", f


def case_majorize(kind):
    from varopt import get_solver
    from varopt.formulations.logistic import logistic_program
    N, d, dens = 20000, 5000, 0.005
    X, y, z, rng = design(N, d, dens)
    if kind == "multinomial":
        K = 10
        S = X @ (rng.normal(size=(d, K)) / np.sqrt(d * dens))
        lab = np.argmax(S + rng.gumbel(size=S.shape), axis=1)

        def run():
            r = get_solver("majorize").solve(logistic_program(X, lab, 1.0))
            return r.status, r.objective
        return f"{N}x{d} 0.5% K={K}", run, "L-BFGS-B", lambda: _lbfgs_part(X, lab, K)
    if kind == "cvxpy":
        import cvxpy as cp
        w, b = cp.Variable(d), cp.Variable()
        prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w + b))) + 0.5 * cp.sum_squares(w)))

        def run():
            prob.solve(method="majorize")
            return prob.status, prob.value
    else:
        def run():
            r = get_solver("majorize").solve(logistic_program(X, (y > 0).astype(float), 1.0))
            return r.status, r.objective
    return f"{N}x{d} 0.5%", run, "L-BFGS-B", lambda: _lbfgs_part(X, y, None)


def case_klprox(form):
    from sklearn.linear_model import LogisticRegression
    from varopt.estimators import BayesianLogisticRegression
    N, D = (200, 20000) if form == "dual" else (50000, 200)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) / np.sqrt(D)
    y = (rng.random(N) < 1 / (1 + np.exp(-(X @ rng.normal(size=D))))).astype(int)

    def run():
        est = BayesianLogisticRegression().fit(X, y)
        return f"{est.result_.status} ({est.result_.info['parameterization']})", None
    return f"N={N} D={D}", run, "sklearn LogisticRegression (MAP)", \
        lambda: ("nit=%d" % LogisticRegression(C=1.0, max_iter=1000).fit(X, y).n_iter_[0], None)


def case_crf():
    from varopt.estimators.crf import ChainCRF
    rng = np.random.default_rng(0)
    X, Y = [], []
    for _ in range(2000):
        ids = rng.zipf(1.3, int(rng.integers(10, 21))) % 8000
        X.append([f"w{i}" for i in ids])
        Y.append(["B" if i % 7 == 0 else ("I" if i % 5 == 0 else "O") for i in ids])

    def fit(method):
        est = ChainCRF(method=method, max_iter=100).fit(X, Y)
        return f"it={est.n_iter_}", est.objective()
    return "2000 sentences, F=10544", lambda: fit("majorize"), "ChainCRF(method='lbfgs')", lambda: fit("lbfgs")


def case_ipsa():
    from sklearn.linear_model import SGDClassifier
    from varopt.estimators import L1LogisticRegression
    X, y, _, _ = design(20000, 10000, 0.002)
    yy = (y > 0).astype(int)

    def run():
        est = L1LogisticRegression(alpha=1e-4, passes=1).fit(X, yy)
        return f"acc={est.score(X, yy):.3f}", None

    def anchor():
        sk = SGDClassifier(loss="log_loss", penalty="l1", alpha=1e-4, max_iter=1, tol=None, shuffle=False,
                           random_state=0).fit(X, yy)
        return f"acc={sk.score(X, yy):.3f}", None
    return "20000x10000 0.2%, 1 pass", run, "SGDClassifier", anchor


def case_proxsg():
    from varopt.estimators import SparseIsing
    rng = np.random.default_rng(0)
    d = 50
    X = np.empty((1000, d))
    X[:, 0] = rng.choice([-1.0, 1.0], 1000)
    for j in range(1, d):   # a chain: each spin copies its neighbour with probability 0.8
        X[:, j] = np.where(rng.random(1000) < 0.8, X[:, j - 1], -X[:, j - 1])

    def run():
        est = SparseIsing(max_iter=200).fit(X)
        return f"{est.result_.status} it={est.n_iter_}", None
    return "d=50, 200 iterations", run, None, None


CASES = {
    "compile-cvxpy-sparse": lambda: case_compile_cvxpy("sparse"),
    "compile-cvxpy-dense": lambda: case_compile_cvxpy("dense"),
    "compile-pyomo": case_compile_pyomo,
    "majorize-logistic": lambda: case_majorize("logistic"),
    "majorize-multinomial": lambda: case_majorize("multinomial"),
    "majorize-cvxpy": lambda: case_majorize("cvxpy"),
    "klprox-dual": lambda: case_klprox("dual"),
    "klprox-full": lambda: case_klprox("full"),
    "crf": case_crf,
    "ipsa": case_ipsa,
    "proxsg": case_proxsg,
}


def measure(name):
    import varopt  # noqa: F401
    warnings.simplefilter("ignore")
    size, mine, anchor_name, anchor = CASES[name]()
    out = {"case": name, "size": size, "anchor": anchor_name or "-"}
    for key, fn in (("varopt", mine), ("anchor", anchor)):
        if fn is None:
            continue
        with _PeakRSS() as mem:
            t0 = time.perf_counter()
            status, obj = fn()
            out[key + " s"] = time.perf_counter() - t0
        out[key + " MB"] = mem.peak - mem.start
        out[key + " status"], out[key + " f"] = status, obj
    return out


def _fmt(r):
    if "error" in r:
        return f"| {r['case']} | error: {r['error']} |"
    a = r.get("anchor s")
    gap, anchor_s, anchor_mb, ratio = "-", "-", "-", "-"
    if r.get("varopt f") is not None and r.get("anchor f") is not None:
        gap = f"{(r['varopt f'] - r['anchor f']) / abs(r['anchor f']):.1e}"
    if a is not None:
        anchor_s, anchor_mb, ratio = f"{a:.2f}", f"{r['anchor MB']:.0f}", f"{r['varopt s'] / a:.2f}"
    return (f"| {r['case']} | {r['size']} | {r['varopt s']:.2f} | {r['varopt MB']:.0f} | {r['varopt status']} | "
            f"{r['anchor']} | {anchor_s} | {anchor_mb} | {ratio} | {gap} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case (child process)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    rows = []
    for name in args.cases.split(","):
        try:
            out = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True,
                                 timeout=args.timeout)
            if out.returncode != 0:
                rows.append({"case": name, "error": (out.stderr.strip().splitlines() or ["?"])[-1][:120]})
            else:
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        except subprocess.TimeoutExpired:
            rows.append({"case": name, "error": f"timeout after {args.timeout:.0f} s"})
        print(_fmt(rows[-1]), flush=True)
    print(f"\nload average {os.getloadavg()[0]:.2f} at end\n")
    print("| case | size | varopt s | varopt MB | varopt status | anchor | anchor s | anchor MB | ratio | rel gap |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(_fmt(r))


if __name__ == "__main__":
    main()
