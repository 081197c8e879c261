"""GP estimators at the sizes users bring: ``GPRegressor`` (Gaussian, Laplace) and ``GPClassifier`` against
scikit-learn's ``GaussianProcessRegressor`` / ``GaussianProcessClassifier`` in the same run.

Data (no download): ``friedman1`` (``make_friedman1``, 5 features, noise 1), ``friedman2`` / ``friedman3`` (4
features, targets standardized), ``sin1d`` (``sin(3x)`` on [-2, 2], noise 0.1), ``smooth8`` (8-D
``sin(x.w)`` + ``0.5 cos(x.v)``, noise 0.1), ``moons`` (noise 0.3), ``circles`` (noise 0.15, factor 0.5),
``classification`` (``make_classification``, 8 features, standardized). Training sets of N rows, test sets of
1000 rows drawn from the same generator (seeded). Regression targets are centred with the training mean.

varopt: the default ``"auto"`` grid (``--point``: the single point ``log_ell = log(median distance)``, ``log_sf =
log std(y)`` (classifier 1), ``log_noise = log std(y) - 1``). scikit-learn: ``ConstantKernel * RBF (+ WhiteKernel)``
with its L-BFGS optimizer (``--restarts k``: ``n_restarts_optimizer = k``), ``normalize_y=False`` on the centred
targets (the same model as varopt's with a Gaussian likelihood). Reported: fit time, the ratio varopt / sklearn,
varopt's iterations summed over the grid (its points counted), and the test RMSE (regression) or log-loss in bits
(classification, ``-mean log2 p(y*)``) of both.

Run: ``OPENBLAS_NUM_THREADS=1 python benchmarks/klprox_gp_scale.py`` (a few minutes: N = 500, 1000; friedman1 with
both likelihoods, moons) or e.g. ``--sizes 2000 4000 --data friedman1 smooth8 moons --models laplace gpc``.
The script uses the public API only, so the same file runs against another checkout (``PYTHONPATH=...``) for a
before/after table.
"""
from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np

import varopt.estimators.klprox_grid as grid_module
from varopt.estimators.klprox import GPClassifier, GPRegressor, log_loss_bits, median_distance

REGRESSION = ("friedman1", "friedman2", "friedman3", "sin1d", "smooth8")
CLASSIFICATION = ("moons", "circles", "classification")


def make_data(name, n, seed):
    """``(X, y)`` of ``n`` rows of the named generator (``seed``: the random stream)."""
    from sklearn import datasets
    rng = np.random.default_rng(seed)
    if name == "friedman1":
        return datasets.make_friedman1(n, n_features=5, noise=1.0, random_state=seed)
    if name in ("friedman2", "friedman3"):
        X, y = getattr(datasets, f"make_{name}")(n, noise=0.0, random_state=seed)
        X = (X - [50.0, 940.0, 0.5, 6.0]) / [29.0, 520.0, 0.29, 2.9]        # the generators' ranges, standardized
        y = y + (0.1 if name == "friedman3" else 25.0) * rng.normal(size=n)
        return X, y / (0.35 if name == "friedman3" else 380.0)
    if name == "sin1d":
        X = rng.uniform(-2, 2, size=(n, 1))
        return X, np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=n)
    if name == "smooth8":
        X = rng.normal(size=(n, 8))
        w, v = np.linspace(0.2, 0.6, 8), np.linspace(0.5, -0.5, 8)
        return X, np.sin(X @ w) + 0.5 * np.cos(X @ v) + 0.1 * rng.normal(size=n)
    if name == "moons":
        return datasets.make_moons(n, noise=0.3, random_state=seed)
    if name == "circles":
        return datasets.make_circles(n, noise=0.15, factor=0.5, random_state=seed)
    if name == "classification":
        X, y = datasets.make_classification(n, n_features=8, n_informative=5, random_state=seed)
        return (X - X.mean(0)) / X.std(0), y
    raise ValueError(name)


def split(name, n, seed):
    X, y = make_data(name, n + 1000, seed)
    return X[:n], y[:n], X[n:], y[n:]


class Counter:
    """Iterations summed over the grid's klprox runs (``solve_point`` wrapped; serial grids)."""

    def __init__(self):
        self.iterations, self.points = 0, 0
        self._orig = grid_module.solve_point

    def __enter__(self):
        def counted(*a, **k):
            r = self._orig(*a, **k)
            self.iterations += r.iterations
            self.points += 1
            return r
        grid_module.solve_point = counted
        return self

    def __exit__(self, *exc):
        grid_module.solve_point = self._orig


def varopt_fit(model, X, y, point):
    if model == "gpc":
        kw = dict(log_ell=math.log(median_distance(X)), log_sf=1.0) if point else {}
        est = GPClassifier(**kw)
    else:
        sd = float(np.std(y))
        kw = dict(log_ell=math.log(median_distance(X)), log_sf=math.log(sd), log_noise=math.log(sd) - 1) \
            if point else {}
        est = GPRegressor(model, **kw)
    with Counter() as c, warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the long-grid warning of the larger sizes
        t = time.perf_counter()
        est.fit(X, y)
        dt = time.perf_counter() - t
    return est, dt, c


def sklearn_fit(model, X, y, restarts):
    from sklearn.gaussian_process import GaussianProcessClassifier, GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    ell = median_distance(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # sklearn's ConvergenceWarning at the bounds
        t = time.perf_counter()
        if model == "gpc":
            g = GaussianProcessClassifier(ConstantKernel(1.0) * RBF(ell), n_restarts_optimizer=restarts,
                                          random_state=0).fit(X, y)
        else:
            sd = float(np.std(y))
            k = ConstantKernel(sd * sd) * RBF(ell) + WhiteKernel(0.1 * sd * sd)
            g = GaussianProcessRegressor(k, n_restarts_optimizer=restarts, random_state=0).fit(X, y)
        return g, time.perf_counter() - t


def score(model, est, Xt, yt):
    if model == "gpc":
        P = est.predict_proba(Xt)
        return log_loss_bits(P[np.arange(len(yt)), (yt == est.classes_[1]).astype(int)])
    return float(np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000])
    ap.add_argument("--data", nargs="+", default=["friedman1", "moons"], choices=REGRESSION + CLASSIFICATION)
    ap.add_argument("--models", nargs="+", default=["gaussian", "laplace", "gpc"],
                    choices=["gaussian", "laplace", "gpc"])
    ap.add_argument("--point", action="store_true", help="one hyperparameter point instead of the 'auto' grid")
    ap.add_argument("--restarts", type=int, default=0, help="sklearn's n_restarts_optimizer")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"# OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, load average "
          f"{os.getloadavg()[0]:.2f} at the start; varopt {'one point' if args.point else 'auto grid'}, "
          f"sklearn n_restarts_optimizer={args.restarts}")
    head = (f"{'data':<14} {'N':>5} {'model':<8} {'varopt s':>9} {'sklearn s':>9} {'ratio':>7} {'points':>6} "
            f"{'iters':>6} {'metric':<7} {'varopt':>8} {'sklearn':>8}")
    print(head)
    print("-" * len(head))
    for name in args.data:
        clf = name in CLASSIFICATION
        for n in args.sizes:
            X, y, Xt, yt = split(name, n, args.seed)
            if not clf:
                mean = y.mean()
                y, yt = y - mean, yt - mean
            for model in args.models:
                if (model == "gpc") != clf:
                    continue
                est, t1, c = varopt_fit(model, X, y, args.point)
                g, t2 = sklearn_fit(model, X, y, args.restarts)
                metric = "logloss" if clf else "RMSE"
                print(f"{name:<14} {n:>5} {model:<8} {t1:>9.2f} {t2:>9.2f} {t1 / t2:>7.1f} {c.points:>6} "
                      f"{c.iterations:>6} {metric:<7} {score(model, est, Xt, yt):>8.4f} "
                      f"{score(model, g, Xt, yt):>8.4f}", flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
