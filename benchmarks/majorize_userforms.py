"""Benchmark: constrained L2 logistic regression written the way users write the constraints, majorize vs
CVXPY+Clarabel (docs/majorize.md, "User forms").

breast_cancer (scikit-learn's bundled copy, standardized; 569 x 30, intercept), objective
``sum_i logistic(-y_i (x_i'w + b)) + 1/2 ||w||^2``, with one of these constraint sets:

* ``norm1``:      ``cp.norm1(w) <= 2`` (lifted to columns s >= |w| without curvature, varopt.program.abs_lift)
* ``norm1_t``:    ``cp.norm1(w) <= t`` and ``+ 5 t`` in the objective (t a variable without curvature)
* ``norminf_t``:  ``cp.norm_inf(w) <= t`` and ``+ 5 t`` in the objective
* ``dup``:        ``w[:5] >= 0``, ``sum(w[5:10]) <= 0.5`` written twice, once scaled by 2, ``sum(w[10:]) == 0.2``
  twice (dependent rows held together)
* ``box``:        ``cp.abs(w) <= 0.1`` (reference: bounds only)

and on 300 digits (scikit-learn's bundled copy, first 300, pixels / 16; multinomial, ``W`` 64 x 10 and an intercept,
``sum_i [logsumexp(z_i) - z_i,y_i] + 1/2 ||W||^2``; only with ``--forms``):

* ``digits_norm1``:  ``cp.norm1(W[:, 0]) <= 1`` (a lifted norm1 on one class's weights)
* ``digits_sum0``:   ``cp.sum(W, axis=1) == 0``, ``cp.abs(W) <= 0.3`` (64 equalities and bounds)

Per form, in the same run and alternating: ``prob.solve(method="majorize", tol=1e-10)`` and
``prob.solve(solver="CLARABEL")``, whole ``prob.solve`` wall time, best of ``--repeat``; ``fallback`` counts the
step QPs the active set handed to HiGHS. ratio = Clarabel / majorize (> 1: majorize faster); gap = relative
objective difference (majorize - Clarabel).

Usage: ``python benchmarks/majorize_userforms.py [--repeat 5] [--forms norm1,dup,digits_norm1]``.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import time

import cvxpy as cp
from sklearn.datasets import load_breast_cancer

import varopt  # noqa: F401


def _data():
    X, y = load_breast_cancer(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), 2.0 * y - 1.0


def _digits():
    from sklearn.datasets import load_digits
    X, y = load_digits(return_X_y=True)
    return X[:300] / 16.0, y[:300]


def digits_problem(form):
    from varopt.formulations.logistic import build_cvxpy
    X, y = _digits()
    prob, W, _ = build_cvxpy(X, y, C=1.0)
    if form == "digits_norm1":
        return cp.Problem(prob.objective, [cp.norm1(W[:, 0]) <= 1])
    if form == "digits_sum0":
        return cp.Problem(prob.objective, [cp.sum(W, axis=1) == 0, cp.abs(W) <= 0.3])
    raise ValueError(form)


def problem(form, X, y):
    if form.startswith("digits_"):
        return digits_problem(form)
    d = X.shape[1]
    w, b, t = cp.Variable(d), cp.Variable(), cp.Variable()
    loss = cp.sum(cp.logistic(cp.multiply(-y, X @ w + b))) + 0.5 * cp.sum_squares(w)
    if form == "norm1":
        return cp.Problem(cp.Minimize(loss), [cp.norm1(w) <= 2])
    if form == "norm1_t":
        return cp.Problem(cp.Minimize(loss + 5 * t), [cp.norm1(w) <= t])
    if form == "norminf_t":
        return cp.Problem(cp.Minimize(loss + 5 * t), [cp.norm_inf(w) <= t])
    if form == "dup":
        return cp.Problem(cp.Minimize(loss), [w[:5] >= 0, cp.sum(w[5:10]) <= 0.5, cp.sum(w[5:10]) <= 0.5,
                                              2 * cp.sum(w[5:10]) <= 1.0, cp.sum(w[10:]) == 0.2,
                                              cp.sum(w[10:]) == 0.2])
    if form == "box":
        return cp.Problem(cp.Minimize(loss), [cp.abs(w) <= 0.1])
    raise ValueError(form)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--forms", default="norm1,norm1_t,norminf_t,dup,box")
    args = ap.parse_args()
    X, y = _data()
    print(f"{'form':10s} {'majorize ms':>11s} {'Clarabel ms':>11s} {'ratio':>6s} {'gap':>9s} {'iters':>5s} "
          f"{'active set':>10s} {'fallback':>8s}")
    for form in args.forms.split(","):
        tm, tc = [], []
        for _ in range(args.repeat):
            prob = problem(form, X, y)
            t0 = time.perf_counter()
            fm = prob.solve(method="majorize", tol=1e-10)
            tm.append(time.perf_counter() - t0)
            r = prob.varopt_result
            prob = problem(form, X, y)
            t0 = time.perf_counter()
            fc = prob.solve(solver="CLARABEL")
            tc.append(time.perf_counter() - t0)
        st = r.info.get("step_qp", {})
        print(f"{form:10s} {1e3 * min(tm):11.1f} {1e3 * min(tc):11.1f} {min(tc) / min(tm):6.2f} "
              f"{(fm - fc) / abs(fc):9.1e} {r.iterations:5d} {st.get('active_set', 0):10d} {st.get('fallback', 0):8d}")


if __name__ == "__main__":
    main()
