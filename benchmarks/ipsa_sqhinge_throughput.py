"""On-line L2-SVM at batch 1: IPSA's compiled per-sample loop (``backend='numba'``) and its numpy path on
squared-hinge rows (``sqpos``) against scikit-learn's ``SGDClassifier(loss='squared_hinge')`` in the same run:
samples/s, and the objective and test error reached after one pass, both against Clarabel's optimum.

Model: ``(1/N) sum_i max(1 - y_i (x_i^T w + b), 0)^2 + alpha ||w||_1`` (intercept ``b`` not penalised), IPSA in the
L1 split form (bounds only: ``compiled_bounds``) or the box form (``compiled_pairs``), one pass in file order
(cyclic), ``alpha = 1e-4``; scikit-learn ``penalty='l1'`` is the same objective (its truncated-gradient L1 step;
``learning_rate='optimal'``, the default, and ``'invscaling'`` with ``eta0 = 0.1``). ``penalty='l2'`` (``alpha/2 ||w||^2``) is timed as well, as the usual
on-line L2-SVM: the compiled loop does not take a quadratic term beside the sampled rows, so IPSA is not run on it.

* a1a (LIBSVM, 1605 x 123 sparse binary, ../shared/data/a1a; test error on a1a.t, 30956 rows);
* dense m = 40, N = 5000: the generator of ``ipsa_throughput.py`` with labels ``sign(X beta + noise)``; test error on
  20000 fresh draws.

samples/s = N / wall time of one pass (IPSA: the solve of the prebuilt program, start point included; scikit-learn:
``fit``); best of 7 after a warm-up. Objective: relative gap ``(f - f*) / f*`` to Clarabel's optimum ``f*`` of the
same problem (CVXPY).

Usage: cd benchmarks; PYTHONPATH=..:. python ipsa_sqhinge_throughput.py [--cpu] [--reps 7]
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
from varopt.formulations.l1 import _design, _penalty_and_constraints, variable_layout, weights_from_x
from varopt.program import AtomGroup, Expression, Program

ALPHA = 1e-4
REPS = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 7


def l1_squared_hinge_program(X, y, alpha, form="split"):
    """Program of ``(1/N) sum_i max(1 - y_i (x_i^T w + b), 0)^2 + alpha ||w||_1``: one ``sqpos`` row per sample
    (``u_i = 1 - y_i D_i x``), the L1 penalty in the split or box form of :mod:`varopt.formulations.l1`."""
    N, m = X.shape
    names, lb, ub = variable_layout(m, form, True)
    D = _design(X, form, True)
    lin, cons = _penalty_and_constraints(m, form, alpha, len(names))
    rows = sp.csr_matrix(sp.diags(-y) @ D)
    e = Expression(len(names), linear=lin, atoms=[AtomGroup("sqpos", np.full(N, 1.0 / N), rows, np.ones(N),
                                                            label=np.arange(N))])
    return Program(names, lb, ub, e, cons)


def objective(X, y, w, b, alpha):
    u = np.maximum(1.0 - y * (X @ w + b), 0.0)
    return float(np.mean(u * u) + alpha * np.abs(w).sum())


def clarabel(X, y, alpha):
    import cvxpy as cp
    w, b = cp.Variable(X.shape[1]), cp.Variable()
    f = cp.sum_squares(cp.pos(1 - cp.multiply(y, X @ w + b))) / X.shape[0] + alpha * cp.norm1(w)
    cp.Problem(cp.Minimize(f)).solve(solver="CLARABEL")
    return w.value, float(b.value)


def run(name, X, y, Xt, yt):
    from sklearn.linear_model import SGDClassifier

    N = X.shape[0]
    solver = varopt.get_solver("ipsa")
    w_opt, b_opt = clarabel(X, y, ALPHA)
    f_opt = objective(X, y, w_opt, b_opt, ALPHA)
    print(f"\n{name}: N = {N}, m = {X.shape[1]}; Clarabel f* = {f_opt:.6g}, test error {test_error(Xt, yt, w_opt, b_opt):.4f}")
    print(f"{'one pass, batch 1':<34s} {'samples/s':>11s} {'x sk-l1':>8s} {'x sk-l2':>8s} {'rel. gap':>9s} {'test err':>9s}")

    def sgd(penalty, rate="optimal", eta0=0.01):
        return SGDClassifier(loss="squared_hinge", penalty=penalty, alpha=ALPHA, max_iter=1, tol=None, shuffle=False,
                             learning_rate=rate, eta0=eta0).fit(X, y)

    t_l1, t_l2 = best_of(lambda: sgd("l1"), REPS, warm=True), best_of(lambda: sgd("l2"), REPS, warm=True)
    rows = []
    # 'optimal' (the default, eta = 1 / (alpha (t0 + t))) starts with long steps, which a squared hinge's gradient,
    # linear in the margin, amplifies: |w| reaches ~1e13 on a1a after one pass; 'invscaling' with eta0 = 0.1 was
    # the best of a few settings on a1a (optimal, invscaling 0.01 / 0.1, constant 0.01 / 0.001, adaptive 0.01)
    for pen, rate, eta0 in (("l1", "optimal", 0.01), ("l1", "invscaling", 0.1), ("l2", "optimal", 0.01)):
        t = best_of(lambda p=pen, r=rate, e=eta0: sgd(p, r, e), REPS, warm=True) if rate != "optimal" else (t_l1 if pen == "l1" else t_l2)
        c = sgd(pen, rate, eta0)
        w, b = c.coef_.ravel(), float(c.intercept_[0])
        gap = (objective(X, y, w, b, ALPHA) - f_opt) / f_opt if pen == "l1" else float("nan")
        rows.append((f"sklearn {pen} {rate}", N / t, gap, test_error(Xt, yt, w, b)))
    m = X.shape[1]
    for form, hessians in (("split", ("identity", "diagonal")), ("box", ("identity",))):
        P = l1_squared_hinge_program(X, y, ALPHA, form)
        for h in hessians:
            for backend in ("numba", "numpy"):
                t, r = one_pass(solver, P, h, backend, REPS)
                w, b = weights_from_x(r.x, m, form, True)
                rows.append((f"ipsa {form} {h} {backend}", N / t, (objective(X, y, w, b, ALPHA) - f_opt) / f_opt,
                             test_error(Xt, yt, w, b)))
    for label, sps, gap, err in rows:
        print(f"{label:<34s} {sps:11.0f} {sps * t_l1 / N:8.3f} {sps * t_l2 / N:8.3f} {gap:9.2e} {err:9.4f}")


def main():
    warnings.simplefilter("ignore")
    print(clock_line(REPS))
    a1a = load_a1a()
    if a1a is not None:
        X, y = a1a
        from sklearn.datasets import load_svmlight_file
        Xt, yt = load_svmlight_file(str(DATA / "a1a" / "a1a.t"), n_features=123)
        run("a1a", X, y, Xt.tocsr(), yt)
    rng = np.random.default_rng(0)
    N, m = 5000, 40

    def draw(n):
        z = rng.normal(size=n)
        X = rng.normal(size=(n, m)) * scale + z[:, None]
        return X, np.where(X @ beta + rng.normal(size=n) > 0, 1.0, -1.0)

    scale = np.sqrt(1.0 / rng.gamma(2.5, size=m))
    beta = np.r_[np.zeros(10), 2 * np.ones(10), np.zeros(10), 2 * np.ones(10)] / 10
    X, y = draw(N)
    Xt, yt = draw(20000)
    run("dense m = 40", X, y, Xt, yt)
    print(f"\nload average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
