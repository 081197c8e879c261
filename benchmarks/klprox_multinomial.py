"""Bayesian multinomial (softmax) logistic regression with klprox vs the Cholesky, mean-field and Laplace
baselines on the same -ELBO, in one run.

Data: scikit-learn's bundled ``wine`` (178 rows, 13 features, K = 3 classes; standardized on the training
half, a stratified half of the rows). Prior N(0, delta I) on all K weight vectors and intercepts.
Every method minimises the same -ELBO (softmax expectation by the (K-1)-dimensional quadrature of
docs/klprox.md); the table gives -ELBO, the median time of ``--repeat`` solves, the time to -ELBO within 1e-6 relative
of the method's own optimum (klprox: its history; the L-BFGS baselines: their evaluations), the likelihood
evaluations (klprox: iterations + rejected trials), the time ratios to klprox, and the test log-loss
(-sum log2 p(y_n) / N) of E_q[softmax] (MAP/Laplace mean: plug-in).

``--splits S`` adds the issue's log-loss comparison over S stratified half splits, each method choosing its
own prior variance on the training half from ``logspace(-1, 1, 5)``: klprox by its ELBO (the paper's rule),
Laplace by the -ELBO of its Gaussian, MAP by 5-fold cross-validation of the held-out log-loss (as
``klprox_a1a.py``).

Run: ``python benchmarks/klprox_multinomial.py [--deltas 0.3,1,3] [--repeat 3] [--no-estimator] [--splits 10]``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy.special import softmax

import varopt  # noqa: F401
from varopt.core.threads import blas_threads
from varopt.baselines import klprox as B
from varopt.formulations.bayes_glm import design, glm_program
from varopt.estimators.klprox import (
    BayesianMultinomialRegression,
    log_loss_bits,
)
from varopt.registry import get_solver
from varopt.solvers.klprox import family_table, likelihood_view

from shared_data import kfold_select


def wine(seed=0):
    from sklearn.datasets import load_wine
    X, y = load_wine(return_X_y=True)
    rng = np.random.default_rng(seed)
    tr = np.concatenate([rng.permutation(np.flatnonzero(y == k))[: (y == k).sum() // 2] for k in range(3)])
    te = np.setdiff1d(np.arange(y.size), tr)
    mu, sd = X[tr].mean(0), X[tr].std(0)
    return (X[tr] - mu) / sd, y[tr].astype(float), (X[te] - mu) / sd, y[te].astype(float)


def predictive_logloss(Ft, yt, K, m, V):
    p = F_probs(Ft, K, m, V)
    return log_loss_bits(p[np.arange(yt.size), yt.astype(int)])


def F_probs(Ft, K, m, V):
    pdim = Ft.shape[1]
    mt = Ft @ m.reshape(K, pdim).T
    if V is None:
        return softmax(mt, axis=1)
    C = V.reshape(K, pdim, K, pdim)
    Vt = np.einsum("nj,kjlm,nm->nkl", Ft, C, Ft)
    T = np.hstack([-np.ones((K - 1, 1)), np.eye(K - 1)])
    _, p, _ = family_table()["softmax"].expect_group(mt @ T.T, np.einsum("ij,njk,lk->nil", T, Vt, T))
    return np.column_stack([1 - p.sum(1), p])


def _to(trace, final, rel=1e-6):
    """Seconds to the first ``(seconds, -ELBO)`` of ``trace`` within ``rel`` of ``final``."""
    return next((t for t, f in trace if abs(f - final) <= rel * abs(final)), trace[-1][0])


def run(name, data, deltas, repeat=3):
    """Per delta: every method solved ``repeat`` times (the median time; klprox and the baselines alternate), its
    -ELBO, time to -ELBO within 1e-6 relative of its own optimum ("to 1e-6"), likelihood evaluations and test
    log-loss; klprox's ratios are the baseline's time over klprox's (full runs and to 1e-6)."""
    Xtr, ytr, Xte, yte = data
    K = int(ytr.max()) + 1
    Ft = design(Xte)
    print(f"\n{name}: {Xtr.shape[0]} train / {Xte.shape[0]} test rows, {Xtr.shape[1]} features, K = {K}, "
          f"D = {(Xtr.shape[1] + 1) * K}; medians of {repeat} solves; load average {os.getloadavg()[0]:.2f}")
    print(f"{'delta':>7} {'method':<12} {'-ELBO':>14} {'time s':>8} {'to 1e-6 s':>9} {'evals':>6} {'t/klprox':>9} "
          f"{'to 1e-6 /klprox':>15} {'test log-loss':>14}")
    for d in deltas:
        prog = glm_program(Xtr, ytr, "multinomial", prior_var=d)
        view = likelihood_view(prog, family_table())
        times = {k: [] for k in ("klprox", "cholesky", "mean-field", "laplace", "MAP")}
        to6 = {k: [] for k in ("klprox", "cholesky", "mean-field")}
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = get_solver("klprox").solve(prog)
            times["klprox"].append(time.perf_counter() - t0)
            to6["klprox"].append(next(e["time"] for e in r.history
                                      if abs(e["objective"] - r.objective) <= 1e-6 * abs(r.objective)))
            out = {}
            with blas_threads(1):
                for meth, fn in (("cholesky", B.cholesky_vi), ("mean-field", B.mean_field_vi)):
                    trace = []
                    t0 = time.perf_counter()
                    out[meth] = fn(view, trace=trace)
                    times[meth].append(time.perf_counter() - t0)
                    to6[meth].append(_to(trace, out[meth]["neg_elbo"]))
                t0 = time.perf_counter()
                out["laplace"] = B.laplace(view)
                times["laplace"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            mp = B.map_estimate(view)
            times["MAP"].append(time.perf_counter() - t0)
        tk, t6 = float(np.median(times["klprox"])), float(np.median(to6["klprox"]))
        ev = len(r.history) + r.info["rejected_steps"]
        rows = [("klprox", r.objective, r.x, r.info["covariance"], ev, r.status)]
        rows += [(meth, out[meth]["neg_elbo"], out[meth]["m"], out[meth]["V"], out[meth].get("evaluations", ""), "")
                 for meth in ("cholesky", "mean-field", "laplace")]
        rows.append(("MAP", float("nan"), mp["m"], None, "", ""))
        for meth, f, m, V, evals, st in rows:
            ll = predictive_logloss(Ft, yte, K, m, V)
            t = float(np.median(times[meth]))
            s6 = f"{np.median(to6[meth]):9.3f}" if meth in to6 else f"{'':9}"
            r6 = f"{np.median(to6[meth]) / t6:15.2f}" if meth in to6 else f"{'':15}"
            print(f"{d:7.3g} {meth:<12} {f:14.8f} {t:8.3f} {s6} {evals!s:>6} {t / tk:9.2f} {r6} {ll:14.4f} {st}")
        print(f"{'':7} klprox - cholesky -ELBO: {rows[0][1] - rows[1][1]:.2e} (relative "
              f"{(rows[0][1] - rows[1][1]) / abs(rows[1][1]):.1e}); iterations {len(r.history)}, rejected trial "
              f"steps {r.info['rejected_steps']}, Anderson steps {r.info.get('anderson_steps', 0)}", flush=True)


def view_of(X, y, d):
    return likelihood_view(glm_program(X, y, "multinomial", prior_var=d), family_table())


def split_logloss(splits, deltas):
    """Test log-loss per split, each method with its own choice of the prior variance (see the module doc)."""
    out = []
    for seed in range(splits):
        Xtr, ytr, Xte, yte = wine(seed)
        Ft = design(Xte)
        est = BayesianMultinomialRegression(prior_var=list(deltas)).fit(Xtr, ytr)
        P = est.predict_proba(Xte)
        row = {"klprox (ELBO)": (log_loss_bits(P[np.arange(yte.size), yte.astype(int)]), est.prior_var_)}
        lap = min(((B.laplace(view_of(Xtr, ytr, d)), d) for d in deltas), key=lambda t: t[0]["neg_elbo"])
        row["Laplace (its -ELBO)"] = (predictive_logloss(Ft, yte, 3, lap[0]["m"], lap[0]["V"]), lap[1])

        def fold_loss(d, tr, te):
            return predictive_logloss(design(Xtr[te]), ytr[te], 3, B.map_estimate(view_of(Xtr[tr], ytr[tr], d))["m"],
                                      None) * len(te)
        best, _ = kfold_select(len(ytr), list(deltas), fold_loss, 5, 0)
        row["MAP (5-fold CV)"] = (predictive_logloss(Ft, yte, 3, B.map_estimate(view_of(Xtr, ytr, best))["m"], None),
                                  best)
        print(f"split {seed}: " + ", ".join(f"{k} {v[0]:.4f} (delta {v[1]:.3g})" for k, v in row.items()), flush=True)
        out.append(row)
    print(f"\nwine, {splits} splits: mean (sd) test log-loss, bits")
    for k in out[0]:
        v = np.array([r[k][0] for r in out])
        wins = sum(r["klprox (ELBO)"][0] < r[k][0] for r in out)
        tail = "" if k.startswith("klprox") else f"   klprox lower on {wins}/{splits} splits"
        print(f"  {k:<22} {v.mean():.4f} ({v.std():.4f}){tail}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deltas", default="0.3,1,3")
    ap.add_argument("--repeat", type=int, default=3, help="solves per method and delta (median time)")
    ap.add_argument("--no-estimator", action="store_true", help="skip the BayesianMultinomialRegression fit")
    ap.add_argument("--splits", type=int, default=0, help="also compare test log-loss over this many splits, "
                    "each method choosing its own prior variance")
    a = ap.parse_args(argv)
    deltas = [float(v) for v in a.deltas.split(",")]
    run("wine", wine(), deltas, a.repeat)
    if a.no_estimator:
        return
    est = BayesianMultinomialRegression(prior_var=list(np.logspace(-1, 1, 5)))
    Xtr, ytr, Xte, yte = wine()
    t0 = time.perf_counter()
    est.fit(Xtr, ytr)
    P = est.predict_proba(Xte)
    print(f"\nwine, BayesianMultinomialRegression over delta = logspace(-1, 1, 5): delta by ELBO {est.prior_var_:.3g}, "
          f"test log-loss {log_loss_bits(P[np.arange(yte.size), yte.astype(int)]):.4f}, accuracy "
          f"{np.mean(est.predict(Xte) == yte):.3f}, fit {time.perf_counter() - t0:.2f} s")
    if a.splits:
        split_logloss(a.splits, np.logspace(-1, 1, 5))


if __name__ == "__main__":
    main()
