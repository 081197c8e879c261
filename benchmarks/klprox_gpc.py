"""GP classification (logistic likelihood) on heart_statlog: klprox vs scikit-learn's
GaussianProcessClassifier (Laplace approximation) in the same run.

270 rows, 13 standardized features, 50 % train, ``--splits`` random splits; squared-exponential kernel with
(log ell, log sf) on a ``--n-grid`` x ``--n-grid`` grid of linspace(-1, 6) (the paper's range). Each method
picks its hyperparameters by its own marginal-likelihood approximation (klprox: the ELBO; sklearn: the
Laplace log marginal likelihood, ``optimizer=None`` at each grid point). Reported: test log-loss
-sum log2 p(y*) / N and the time for the grid. Run: ``python benchmarks/klprox_gpc.py``.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import varopt  # noqa: F401
from varopt.formulations.klprox_data import load_heart, splits
from varopt.formulations.klprox_estimators import GPClassifier, log_loss_bits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--n-grid", type=int, default=8)
    args = ap.parse_args()
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    X, y = load_heart()
    grid = np.linspace(-1, 6, args.n_grid)
    rows = {"klprox": ([], 0.0), "sklearn GPC (Laplace)": ([], 0.0)}
    for k, (tr, te) in enumerate(splits(len(y), args.splits)):
        t0 = time.perf_counter()
        est = GPClassifier(log_ell=grid, log_sf=grid).fit(X[tr], y[tr])
        t1 = time.perf_counter() - t0
        p = est.predict_proba(X[te])[np.arange(len(te)), y[te].astype(int)]
        ll, t = rows["klprox"]
        rows["klprox"] = (ll + [log_loss_bits(p)], t + t1)
        t0 = time.perf_counter()
        best = None
        for le in grid:
            for ls in grid:
                kern = ConstantKernel(math.exp(2 * ls), "fixed") * RBF(math.exp(le), "fixed")
                g = GaussianProcessClassifier(kern, optimizer=None).fit(X[tr], y[tr])
                if best is None or g.log_marginal_likelihood_value_ > best[0]:
                    best = (g.log_marginal_likelihood_value_, g)
        t2 = time.perf_counter() - t0
        p = best[1].predict_proba(X[te])[np.arange(len(te)), y[te].astype(int)]
        ll, t = rows["sklearn GPC (Laplace)"]
        rows["sklearn GPC (Laplace)"] = (ll + [log_loss_bits(p)], t + t2)
        print(f"split {k}: klprox (log ell, log sf) = ({est.log_ell_:.2f}, {est.log_sf_:.2f}) log-loss "
              f"{rows['klprox'][0][-1]:.4f}; sklearn log-loss {rows['sklearn GPC (Laplace)'][0][-1]:.4f}")
    print(f"\nGP classification, heart_statlog, {args.splits} splits x {args.n_grid ** 2} grid points")
    print(f"{'method':<24} {'log-loss':>16} {'time s':>8}")
    for name, (ll, t) in rows.items():
        print(f"{name:<24} {np.mean(ll):8.4f} ({np.std(ll) / math.sqrt(len(ll)):.4f}) {t:8.1f}")


if __name__ == "__main__":
    main()
