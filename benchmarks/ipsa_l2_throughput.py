"""On-line L2-penalised L2-SVM and logistic regression at batch 1: IPSA's compiled per-sample loop
(``backend='numba'``, which takes a diagonal quadratic term beside the sampled rows since branch qdiag) and its numpy
path against scikit-learn's ``SGDClassifier(penalty='l2')`` on the same objective, in the same run: samples/s, and the
relative gap to Clarabel's optimum and the test error after one pass.

Models (intercept ``b`` not penalised, ``alpha = 1e-4``), each one program with a quadratic term ``(alpha/2) ||w||^2``
(Hessian ``alpha I`` on ``w``), no constraints (the bounds kernel with ``m = 0``):

* L2-SVM ``(1/N) sum_i max(1 - y_i (x_i^T w + b), 0)^2 + (alpha/2) ||w||^2``: one ``sqpos`` row per sample;
  scikit-learn ``loss='squared_hinge'``;
* logistic regression ``(1/N) sum_i log(1 + exp(-y_i (x_i^T w + b))) + (alpha/2) ||w||^2``: one log-sum-exp group
  per sample; scikit-learn ``loss='log_loss'``.

scikit-learn runs ``max_iter=1, shuffle=False, tol=None`` with its default ``learning_rate='optimal'``. Data: a1a
(LIBSVM, 1605 x 123 sparse, test error on a1a.t) and dense m = 40, N = 5000 (the generator of
``ipsa_sqhinge_throughput.py``; test error on 20000 fresh draws). samples/s = N / time of one pass in file order
(IPSA: the solve of the prebuilt program; scikit-learn: ``fit``); best of ``--reps`` (7) after a warm-up.

Usage: cd benchmarks; OPENBLAS_NUM_THREADS=1 PYTHONPATH=..:. python ipsa_l2_throughput.py [--cpu] [--reps 7]
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import scipy.sparse as sp

from ipsa_throughput import DATA, best_of, clock_line, load_a1a, one_pass, test_error

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.formulations.l1 import _logistic_lse
from varopt.program import AtomGroup, Expression, LseGroup, Program, QuadraticTerms

ALPHA = 1e-4
REPS = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 7
HESSIANS = ("identity", "diagonal", "bb")


def l2_program(X, y, alpha, loss):
    """``(1/N) sum_i loss(y_i (x_i^T w + b)) + (alpha/2) ||w||^2`` over ``(w, b)``, ``loss`` ``'squared_hinge'``
    (``sqpos`` rows ``max(1 - y_i D_i x, 0)^2``) or ``'log_loss'`` (groups ``log(exp 0 + exp(-y_i D_i x))``)."""
    N, m = X.shape
    D = sp.hstack([sp.csr_matrix(X), np.ones((N, 1))]).tocsr()
    q = QuadraticTerms(np.arange(m), np.arange(m), np.full(m, alpha / 2), m + 1)
    if loss == "squared_hinge":
        e = Expression(m + 1, quadratic=q, atoms=[AtomGroup("sqpos", np.full(N, 1.0 / N), sp.csr_matrix(sp.diags(-y) @ D),
                                                            np.ones(N), label=np.arange(N))])
    else:
        rows, seg = _logistic_lse(D, y)
        e = Expression(m + 1, quadratic=q, lse=[LseGroup(rows, np.zeros(2 * N), seg, np.full(N, 1.0 / N),
                                                          label=np.arange(N))])
    names = [f"w{j}" for j in range(m)] + ["b"]
    return Program(names, np.full(m + 1, -np.inf), np.full(m + 1, np.inf), e)


def objective(X, y, w, b, alpha, loss):
    u = y * (X @ w + b)
    f = np.maximum(1.0 - u, 0.0) ** 2 if loss == "squared_hinge" else np.logaddexp(0.0, -u)
    return float(np.mean(f) + alpha / 2 * w @ w)


def clarabel(X, y, alpha, loss):
    import cvxpy as cp
    w, b = cp.Variable(X.shape[1]), cp.Variable()
    u = cp.multiply(y, X @ w + b)
    f = cp.sum_squares(cp.pos(1 - u)) if loss == "squared_hinge" else cp.sum(cp.logistic(-u))
    cp.Problem(cp.Minimize(f / X.shape[0] + alpha / 2 * cp.sum_squares(w))).solve(solver="CLARABEL")
    return w.value, float(b.value)


def run(name, X, y, Xt, yt, loss):
    from sklearn.linear_model import SGDClassifier

    N, m = X.shape
    solver = varopt.get_solver("ipsa")
    w_opt, b_opt = clarabel(X, y, ALPHA, loss)
    f_opt = objective(X, y, w_opt, b_opt, ALPHA, loss)
    print(f"\n{name}, {loss}: N = {N}, m = {m}; Clarabel f* = {f_opt:.6g}, "
          f"test error {test_error(Xt, yt, w_opt, b_opt):.4f}")
    print(f"{'one pass, batch 1':<30s} {'samples/s':>11s} {'x sklearn':>9s} {'rel. gap':>9s} {'test err':>9s}")

    def sgd():
        return SGDClassifier(loss=loss, penalty="l2", alpha=ALPHA, max_iter=1, tol=None, shuffle=False).fit(X, y)

    t_sk = best_of(sgd, REPS, warm=True)
    c = sgd()
    w, b = c.coef_.ravel(), float(c.intercept_[0])
    rows = [("sklearn SGDClassifier l2", N / t_sk, (objective(X, y, w, b, ALPHA, loss) - f_opt) / f_opt,
             test_error(Xt, yt, w, b))]
    P = l2_program(X, y, ALPHA, loss)
    for h in HESSIANS:
        for backend in ("numba", "numpy"):
            t, r = one_pass(solver, P, h, backend, REPS)
            w, b = r.x[:m], float(r.x[m])
            rows.append((f"ipsa {h} {backend}", N / t, (objective(X, y, w, b, ALPHA, loss) - f_opt) / f_opt,
                         test_error(Xt, yt, w, b)))
    for label, sps, gap, err in rows:
        print(f"{label:<30s} {sps:11.0f} {sps * t_sk / N:9.3f} {gap:9.2e} {err:9.4f}")


def main():
    warnings.simplefilter("ignore")
    print(clock_line(REPS))
    data = []
    a1a = load_a1a()
    if a1a is not None:
        from sklearn.datasets import load_svmlight_file
        Xt, yt = load_svmlight_file(str(DATA / "a1a" / "a1a.t"), n_features=123)
        data.append(("a1a", *a1a, Xt.tocsr(), yt))
    rng = np.random.default_rng(0)
    N, m = 5000, 40
    scale = np.sqrt(1.0 / rng.gamma(2.5, size=m))
    beta = np.r_[np.zeros(10), 2 * np.ones(10), np.zeros(10), 2 * np.ones(10)] / 10

    def draw(n):
        z = rng.normal(size=n)
        X = rng.normal(size=(n, m)) * scale + z[:, None]
        return X, np.where(X @ beta + rng.normal(size=n) > 0, 1.0, -1.0)

    data.append(("dense m = 40", *draw(N), *draw(20000)))
    for loss in ("squared_hinge", "log_loss"):
        for name, X, y, Xt, yt in data:
            run(name, X, y, Xt, yt, loss)
    print(f"\nload average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
