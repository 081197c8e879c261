"""L1LeastSquares / L1LogisticRegression with their default settings against scikit-learn and the exact optimum.

The estimators minimise (varopt.formulations.l1)

    least squares:  F(w, b) = (1/2n) ||y - X w - b||^2 + alpha ||w||_1     = Lasso's objective, Lasso(alpha=alpha)
    logistic:       F(w, b) = (1/n) sum log(1 + exp(-y_i (x_i^T w + b))) + alpha ||w||_1
                    = (C sum_i loss_i + ||w||_1) / (C n): LogisticRegression(l1_ratio=1, solver='saga', C=1/(n alpha))
                    (saga does not penalise the intercept; liblinear does, so it is not the same objective)

Every row: the estimator with its defaults except ``alpha`` (``L1LeastSquares()`` / ``L1LogisticRegression(alpha)``),
scikit-learn's model on the same objective with its own defaults (Lasso: coordinate descent to tol=1e-4; saga:
tol=1e-4, max_iter=100 epochs, a ConvergenceWarning counted as "warn"), and the exact optimum F* of the same
objective (CVXPY + Clarabel, box form). Columns: in-sample R^2 / accuracy, relative objective gap (F - F*) / |F*|,
wall time of fit (seconds; the first row also loads the compiled IPSA kernel from numba's cache),
warnings raised by fit. Data: scikit-learn's bundled sets (raw and standardized X,
uncentred targets) and generated ones with offsets in X and y, unscaled columns and a sparse X.

Usage: PYTHONPATH=. OPENBLAS_NUM_THREADS=1 python benchmarks/l1_estimator_defaults.py [--quick]
(run the same script with PYTHONPATH pointing at another tree to compare versions).
"""
from __future__ import annotations

import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn import datasets
from sklearn.linear_model import Lasso, LogisticRegression
from sklearn.preprocessing import StandardScaler

from varopt.estimators import L1LeastSquares, L1LogisticRegression
from varopt.formulations.l1 import l1_least_squares_cvxpy, l1_logistic_cvxpy


def objective(loss, X, y, alpha, w, b):
    t = np.asarray(X @ w).ravel() + b
    if loss == "squared":
        return float(np.sum((y - t) ** 2) / (2 * len(y)) + alpha * np.abs(w).sum())
    return float(np.mean(np.logaddexp(0.0, -y * t)) + alpha * np.abs(w).sum())


def exact(loss, X, y, alpha):
    build = l1_least_squares_cvxpy if loss == "squared" else l1_logistic_cvxpy
    prob, v = build(X, y, alpha, "box", True)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)
    w, b = np.asarray(v["w"].value), float(v["b"].value)
    # re-evaluated: the same formula for every method; the in-sample score at the optimum
    t = np.asarray(X @ w).ravel() + b
    score = 1 - np.sum((y - t) ** 2) / np.sum((y - y.mean()) ** 2) if loss == "squared" else np.mean(np.sign(t) == y)
    return objective(loss, X, y, alpha, w, b), score


def timed(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
    names = sorted({type(c.message).__name__.replace("Warning", "") for c in caught})
    return out, dt, ",".join(names) or "-"


def regression_sets():
    X, y = datasets.load_diabetes(return_X_y=True)
    yield "diabetes (X as loaded)", X, y, 1.0
    yield "diabetes standardized X", StandardScaler().fit_transform(X), y, 1.0
    yield "diabetes standardized X, alpha=0.1", StandardScaler().fit_transform(X), y, 0.1
    Xr, yr = datasets.make_regression(400, 20, n_informative=5, noise=10.0, random_state=0)
    scales = np.logspace(-1, 2, 20)
    yield "make_regression +5 in X, +100 in y", Xr + 5.0, yr + 100.0, 1.0
    yield "make_regression unscaled columns 0.1..100", (Xr + 5.0) * scales, yr + 100.0, 1.0
    rng = np.random.default_rng(0)
    Xs = sp.random(1000, 100, density=0.05, random_state=1, format="csr")
    ys = np.asarray(Xs @ rng.normal(size=100) * 3.0).ravel() + 20.0 + rng.normal(size=1000)
    yield "sparse X 1000x100 (5 %), +20 in y", Xs, ys, 0.01


def classification_sets():
    X, y = datasets.load_breast_cancer(return_X_y=True)
    yield "breast_cancer (X as loaded)", X, y
    yield "breast_cancer standardized X", StandardScaler().fit_transform(X), y
    X, y = datasets.load_wine(return_X_y=True)
    keep = y < 2
    yield "wine classes 0/1 (X as loaded)", X[keep], y[keep]
    yield "wine classes 0/1 standardized X", StandardScaler().fit_transform(X[keep]), y[keep]
    X, y = datasets.load_iris(return_X_y=True)
    keep = y > 0
    yield "iris versicolor/virginica", X[keep], y[keep]
    Xc, yc = datasets.make_classification(400, 20, n_informative=5, shift=3.0, scale=10.0, random_state=0)
    yield "make_classification shift 3 scale 10", Xc, yc
    rng = np.random.default_rng(2)
    Xs = sp.random(1000, 100, density=0.05, random_state=3, format="csr")
    t = np.asarray(Xs @ rng.normal(size=100) * 3.0).ravel() - 0.5
    yield "sparse X 1000x100 (5 %)", Xs, (rng.random(1000) < 1 / (1 + np.exp(-t))).astype(int)


def main(quick=False):
    print("# L1LeastSquares() against Lasso(alpha) (same objective) and the exact optimum (Clarabel)")
    hdr = f"{'data':<42s} {'R2 ours':>8s} {'R2 sk':>8s} {'R2 opt':>8s} {'gap ours':>9s} {'gap sk':>9s} " \
          f"{'t ours':>7s} {'t sk':>7s} {'ratio':>6s} {'warn ours':>12s} {'warn sk':>8s}"
    print(hdr)
    for name, X, y, alpha in regression_sets():
        Fs, s_opt = exact("squared", X, y, alpha)
        ours, t1, w1 = timed(lambda: L1LeastSquares(alpha=alpha).fit(X, y))
        sk, t2, w2 = timed(lambda: Lasso(alpha=alpha).fit(X, y))
        f1 = objective("squared", X, y, alpha, ours.coef_, ours.intercept_)
        f2 = objective("squared", X, y, alpha, sk.coef_, sk.intercept_)
        print(f"{name:<42s} {ours.score(X, y):8.4f} {sk.score(X, y):8.4f} {s_opt:8.4f} {(f1 - Fs) / abs(Fs):9.2e} "
              f"{(f2 - Fs) / abs(Fs):9.2e} {t1:7.3f} {t2:7.3f} {t1 / t2:6.1f} {w1:>12s} {w2:>8s}")
    alphas = (1.0, "1/n") if not quick else ("1/n",)
    print("\n# L1LogisticRegression(alpha) against LogisticRegression(l1_ratio=1, solver='saga', C=1/(n alpha)) "
          "and the exact optimum (Clarabel); alpha = 1 (the estimator's default) and 1/n (C = 1, scikit-learn's)")
    print(hdr.replace("R2 ours", "acc ours").replace("R2 sk  ", "acc sk").replace("R2 opt", "acc op"))
    for name, X, y in classification_sets():
        n = X.shape[0]
        ypm = np.where(y == np.unique(y)[1], 1.0, -1.0)
        for a in alphas:
            alpha = 1.0 / n if a == "1/n" else a
            Fs, s_opt = exact("logistic", X, ypm, alpha)
            ours, t1, w1 = timed(lambda: L1LogisticRegression(alpha=alpha).fit(X, y))
            sk, t2, w2 = timed(lambda: LogisticRegression(l1_ratio=1.0, solver="saga", C=1.0 / (n * alpha),
                                                       random_state=0).fit(X, y))
            f1 = objective("logistic", X, ypm, alpha, ours.coef_, ours.intercept_)
            f2 = objective("logistic", X, ypm, alpha, sk.coef_.ravel(), sk.intercept_[0])
            label = f"{name}, alpha={a}"
            print(f"{label:<42s} {ours.score(X, y):8.4f} {sk.score(X, y):8.4f} {s_opt:8.4f} {(f1 - Fs) / abs(Fs):9.2e} "
                  f"{(f2 - Fs) / abs(Fs):9.2e} {t1:7.3f} {t2:7.3f} {t1 / t2:6.1f} {w1:>12s} {w2:>8s}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
