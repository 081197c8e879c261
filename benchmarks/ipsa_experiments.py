"""Reproduction of the on-line L1 experiments of Carbonetto (2009) §2.5.7 (Figs. 2.5-2.7).

Data (Tibshirani 1996 §7.5, as used by Carbonetto 2009): n = 100, m = 40, x_ij = z_ij + z_i with
z_i ~ N(0, 1), z_ij ~ N(0, s_j^2), s_j^2 ~ Inverse-Gamma(shape 2.5, scale nu); true
w = (0 x10, 2 x10, 0 x10, 2 x10); y = w^T x + N(0, 1). Objective (2.56):
(1/2n)||y - Xw||^2 + (lambda/n)||w||_1 with lambda/n = 1.25. Every on-line method visits the
examples once in order (100 steps) with steps a_k = 1/(k0 + k), k0 = 50.
Exact solutions: the split-form QP solved by HiGHS (varopt.highs). Error: (1/m)||w_exact - w_online||_1,
averaged over 20 data sets.

Methods: IPSA (varopt ``ipsa`` solver, split form 2.61, identity Hessian, the regularised delta
rule 2.62-2.63), projected gradient, sub-gradient, smoothed L1, augmented Lagrangian
(r_k = 50/(k0+k)^0.1), scikit-learn SGDRegressor(penalty='l1', one epoch, no shuffling).

Experiments: 1 vs k0; 2 vs nu; 3 vs lambda/n (+ regularisation paths after 1 and 10 passes,
Fig. 2.7); 4 m = 8, w = (0, 0, 2, -4, 0, 0, -1, 3).

Usage: python benchmarks/ipsa_experiments.py [--quick]   (plots in benchmarks/out/)
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt import highs
from varopt.baselines import l1_online as bl
from varopt.formulations.l1 import l1_least_squares_program

OUT = Path(__file__).resolve().parent / "out"
W40 = np.r_[np.zeros(10), 2 * np.ones(10), np.zeros(10), 2 * np.ones(10)]
W8 = np.array([0, 0, 2, -4, 0, 0, -1, 3.0])


def make_data(seed, nu=1.0, w=W40, n=100):
    rng = np.random.default_rng(seed)
    m = w.size
    z = rng.normal(size=n)
    s2 = nu / rng.gamma(2.5, size=m)  # Inverse-Gamma(2.5, scale nu)
    X = rng.normal(size=(n, m)) * np.sqrt(s2) + z[:, None]
    y = X @ w + rng.normal(size=n)
    return X, y


def exact(X, y, alpha):
    """Split-form QP: min 1/2 x^T Q x + c^T x, x >= 0 with x = (w+, w-)."""
    n, m = X.shape
    D = np.hstack([X, -X])
    Q = D.T @ D / n
    c = -D.T @ y / n + alpha
    res = highs.solve_lp(c, lb=np.zeros(2 * m), Q=Q, const=y @ y / (2 * n))
    if res.status != "optimal":
        raise RuntimeError(f"HiGHS QP: {res.status}")
    x = np.asarray(res.x)
    w = x[:m] - x[m:]
    w[np.abs(w) < 1e-9] = 0.0
    return w


def ipsa(X, y, alpha, k0=50.0, passes=1, **kw):
    P = l1_least_squares_program(X, y, alpha, "split", False)
    r = varopt.get_solver("ipsa").solve(P, passes=passes, k0=k0, history_objective=False, **kw)
    m = X.shape[1]
    return r.x[:m] - r.x[m:]


def sgd_sklearn(X, y, alpha, k0=50.0):
    from sklearn.linear_model import SGDRegressor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = SGDRegressor(penalty="l1", alpha=alpha, fit_intercept=False, max_iter=1, tol=None, shuffle=False,
                         learning_rate="invscaling", eta0=1.0 / k0, power_t=1.0, random_state=0).fit(X, y)
    return r.coef_


METHODS = {
    "ipsa": lambda X, y, a, k0: ipsa(X, y, a, k0),
    "projected gradient": lambda X, y, a, k0: bl.projected_gradient(X, y, a, k0),
    "sub-gradient": lambda X, y, a, k0: bl.subgradient(X, y, a, k0),
    "smoothed L1": lambda X, y, a, k0: bl.smoothed_l1(X, y, a, k0),
    "augmented Lagrangian": lambda X, y, a, k0: bl.augmented_lagrangian(X, y, a, k0),
    "sklearn SGD (l1)": lambda X, y, a, k0: sgd_sklearn(X, y, a, k0),
}


def errors(datasets, alpha, k0, extra_ipsa_passes=(10,)):
    out = {k: [] for k in METHODS}
    for p in extra_ipsa_passes:
        out[f"ipsa ({p} passes)"] = []
    for X, y, we in datasets:
        m = X.shape[1]
        for name, fn in METHODS.items():
            out[name].append(np.abs(fn(X, y, alpha, k0) - we).sum() / m)
        for p in extra_ipsa_passes:
            out[f"ipsa ({p} passes)"].append(np.abs(ipsa(X, y, alpha, k0, passes=p) - we).sum() / m)
    return {k: np.array(v) for k, v in out.items()}


def table(title, errs):
    print(f"\n{title}")
    print(f"{'method':<24s} {'mean error':>11s} {'std':>8s} {'median':>8s} {'mean / proj. gradient':>22s}")
    pg = errs["projected gradient"].mean()
    for k, v in errs.items():
        print(f"{k:<24s} {v.mean():11.4f} {v.std():8.4f} {np.median(v):8.4f} {v.mean() / pg:22.3f}")


def main(quick=False):
    OUT.mkdir(exist_ok=True)
    nsets = 5 if quick else 20
    alpha = 1.25
    t0 = time.perf_counter()
    base = []
    for d in range(nsets):
        X, y = make_data(d)
        base.append((X, y, exact(X, y, alpha)))
    zeros = np.mean([np.mean(we == 0) for _, _, we in base])
    errs = errors(base, alpha, 50.0, extra_ipsa_passes=(10, 50))
    table(f"§2.5.7 set-up: n=100, m=40, lambda/n=1.25, k0=50, one pass; {nsets} data sets; "
          f"exact solutions (HiGHS QP) have {100 * zeros:.0f}% zeros", errs)
    single = {k: v for k, v in errs.items() if "passes" not in k}
    best = min(single, key=lambda k: single[k].mean())
    print(f"lowest one-pass error: {best}; ipsa / projected gradient = "
          f"{errs['ipsa'].mean() / errs['projected gradient'].mean():.3f}; ipsa 1 -> 10 -> 50 passes: "
          f"{errs['ipsa'].mean():.4f} -> {errs['ipsa (10 passes)'].mean():.4f} -> {errs['ipsa (50 passes)'].mean():.4f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(METHODS)

    def sweep(values, make, label, fname, title):
        res = {k: [] for k in names}
        for v in values:
            ds, a, k0 = make(v)
            e = errors(ds, a, k0, extra_ipsa_passes=())
            for k in names:
                res[k].append(e[k].mean())
        print(f"\n{title}")
        print(f"{label:>10s} " + " ".join(f"{k[:14]:>14s}" for k in names))
        for i, v in enumerate(values):
            print(f"{v:10.3g} " + " ".join(f"{res[k][i]:14.4f}" for k in names))
        plt.figure(figsize=(5, 4))
        for k in names:
            plt.semilogy(values, res[k], marker="o", label=k)
        plt.xlabel(label)
        plt.ylabel("(1/m) ||w_exact - w_online||_1")
        plt.title(title, fontsize=9)
        plt.legend(fontsize=7)
        plt.tight_layout()
        plt.savefig(OUT / fname, dpi=110)
        plt.close()
        return res

    k0s = [1, 2, 5, 10, 20, 50] if not quick else [5, 50]
    sweep(k0s, lambda k0: (base, alpha, float(k0)), "k0", "ipsa_exp1_k0.png", "Experiment 1: error vs k0")

    nus = [0.5, 1.5, 2.5, 3.5, 4.5] if not quick else [0.5, 2.5]

    def by_nu(nu):
        ds = []
        for d in range(nsets):
            X, y = make_data(100 + d, nu=nu)
            ds.append((X, y, exact(X, y, alpha)))
        return ds, alpha, 50.0

    sweep(nus, by_nu, "nu", "ipsa_exp2_nu.png", "Experiment 2: error vs nu (inverse-Gamma scale)")

    lams = [0.25, 0.5, 1.0, 1.25, 2.0, 3.0, 5.0] if not quick else [0.5, 2.0]

    def by_lam(lam):
        return [(X, y, exact(X, y, lam)) for X, y, _ in base], lam, 50.0

    sweep(lams, by_lam, "lambda/n", "ipsa_exp3_lambda.png", "Experiment 3: error vs lambda/n")

    # regularisation paths (Fig. 2.7) on data set 0
    X, y, _ = base[0]
    grid = np.linspace(0.05, 8.0, 25 if not quick else 6)
    paths = {"exact": [], "ipsa 1 pass": [], "ipsa 10 passes": []}
    for lam in grid:
        paths["exact"].append(exact(X, y, lam))
        paths["ipsa 1 pass"].append(ipsa(X, y, lam, passes=1))
        paths["ipsa 10 passes"].append(ipsa(X, y, lam, passes=10))
    fig, axs = plt.subplots(1, 3, figsize=(12, 4), sharey=True)
    for ax, (k, v) in zip(axs, paths.items()):
        ax.plot(grid, np.array(v))
        ax.set_title(k)
        ax.set_xlabel("lambda/n")
    axs[0].set_ylabel("w_j")
    plt.tight_layout()
    plt.savefig(OUT / "ipsa_exp3_paths.png", dpi=110)
    plt.close()
    print("\nregularisation path (data set 0): fraction |w_j| < 0.05 (near zero) at each lambda/n")
    print(f"{'lambda/n':>9s} {'exact =0':>9s} {'1 pass':>9s} {'10 passes':>10s} {'err 1':>8s} {'err 10':>8s}")
    for i, lam in enumerate(grid):
        e, p1, p10 = paths["exact"][i], paths["ipsa 1 pass"][i], paths["ipsa 10 passes"][i]
        print(f"{lam:9.2f} {np.mean(e == 0):9.2f} {np.mean(np.abs(p1) < 0.05):9.2f} {np.mean(np.abs(p10) < 0.05):10.2f} "
              f"{np.abs(p1 - e).mean():8.3f} {np.abs(p10 - e).mean():8.3f}")

    # experiment 4: m = 8
    ds8 = []
    for d in range(nsets):
        X, y = make_data(200 + d, w=W8)
        ds8.append((X, y, exact(X, y, alpha)))
    table("Experiment 4: m = 8, w = (0, 0, 2, -4, 0, 0, -1, 3), lambda/n = 1.25, k0 = 50",
          errors(ds8, alpha, 50.0, extra_ipsa_passes=(10,)))
    print(f"\nplots in {OUT}; total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
