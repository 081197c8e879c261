"""Table 2 (second half) of Khan, Baque, Fleuret & Fua (2015): Bayesian logistic regression on Colon, in one run.

Colon cancer (62 x 2000, LIBSVM-normalized; read from the shared data directory), 50 % training rows (31), test on
the other 31, ``--splits`` random splits (seeded), intercept with the same prior, prior N(0, delta I),
delta = logspace(0, 6, 30). N = 31 < D = 2001, so klprox takes its dual update (19) (``parameterization='auto'``).
Methods on the same splits, each over the whole delta range:

* klprox (default adaptive step rule), delta chosen by the ELBO; cold starts, and (``--warm``) a second sweep
  warm-started from the previous delta's posterior (``warm_start``), which must reach the same -ELBO;
* mean-field VI (L-BFGS over (m, log s)), delta chosen by its ELBO (as in the paper);
* MAP (L-BFGS), delta chosen by 5-fold cross-validation of the held-out log-loss;
* Laplace at the MAP, delta chosen by the Laplace evidence (N x N determinant lemma).

Log-loss: -sum_n log2 p(y_n | x_n) / N on the test rows (1 = coin flipping). Paper: Proximal 15.82 / 0.70 (18 min),
mean-field 18.35 / 0.78 (15 min), MAP - / 0.78 (7 s).

Independent check (``--check``, on split 0 at the delta klprox selects): the dual optimum against the primal D x D
update (``parameterization='full'``), and the stationarity of an independent -ELBO (adaptive quadrature per row,
``slogdet`` of the dense covariance) by central differences in the mean and the covariance.

The baselines stop at an L-BFGS gradient norm of ``GTOL`` = 1e-5 (the paper: 1e-4 for all methods).

Run: ``python benchmarks/klprox_colon.py [--splits 10] [--n-grid 30] [--check] [--warm] [--no-map-cv]
[--run-splits FIRST STOP]``.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
import scipy.integrate as si
from scipy.special import expit

import varopt  # noqa: F401
from varopt.core.threads import blas_threads
from varopt.baselines import klprox as B
from varopt.formulations.bayes_glm import design, glm_program
from shared_data import kfold_select, load_colon, splits
from varopt.estimators.klprox import log_loss_bits
from varopt.registry import get_solver
from varopt.solvers.klprox import family_table, likelihood_view

FAM = family_table()["logistic"]
#: L-BFGS gradient tolerance of the baselines (the paper stops every method at an optimality measure of 1e-4; with
#: 1e-9 mean-field takes ~30 s and MAP ~1 s per delta here, on separable data with a wide prior)
GTOL = 1e-5
PAPER = {"Proximal (klprox)": (15.82, 0.70, "18 m"), "Mean-field": (18.35, 0.78, "15 m"),
         "MAP (5-fold CV)": (None, 0.78, "7 s")}


def logloss(Ft, yt, mt, vt):
    """Test log-loss in bits of the predictive ``E[sigmoid(+-u)]``, ``u ~ N(mt, vt)`` (no ``1 - p`` cancellation)."""
    vt = np.maximum(vt, 1e-300)
    p1 = FAM.expect(mt, vt)[1]
    p0 = FAM.expect(-mt, vt)[1]
    return log_loss_bits(np.where(yt == 1, p1, p0))


def view_of(X, y, d):
    return likelihood_view(glm_program(X, y, "logistic", prior_var=d), family_table())


def laplace_evidence(view, d):
    """MAP, Laplace evidence and a predictive function, with the N x N forms of the D x D Hessian
    ``H = I/d + F^T Gamma F`` (prior ``N(0, d I)``): ``log det(d H) = log det(I + d Gamma^1/2 F F^T Gamma^1/2)``."""
    o = B.map_estimate(view, gtol=GTOL)
    F = view.A.toarray()
    u = F @ o["m"] + view.b
    s = expit(u)
    g = s * (1 - s) * view.coef
    rg = np.sqrt(g)
    K = np.eye(view.N) + d * (rg[:, None] * (F @ F.T) * rg[None, :])
    Lk = np.linalg.cholesky(K)
    # -log p(y) ~ F(w*) + 1/2 log det H - D/2 log 2 pi, log det H = log det(d H) - D log d
    evid = o["value"] + float(np.sum(np.log(np.diag(Lk)))) - 0.5 * view.D * math.log(2 * math.pi * d)

    def predict(Ft):
        C = rg[:, None] * (F @ Ft.T)                               # Gamma^1/2 F Ft^T
        W = np.linalg.solve(Lk, C)
        return Ft @ o["m"], d * np.einsum("ij,ij->i", Ft, Ft) - d * d * np.einsum("ij,ij->j", W, W)
    return evid, predict


def map_cv(X, y, deltas, folds=5, seed=0):
    def fold_loss(d, tr, te):
        m = B.map_estimate(view_of(X[tr], y[tr], d), gtol=GTOL)["m"]
        Ft = design(X[te])
        return logloss(Ft, y[te], Ft @ m, np.zeros(len(te))) * len(te)
    best, _ = kfold_select(len(y), deltas, fold_loss, folds, seed)
    return best, B.map_estimate(view_of(X, y, best), gtol=GTOL)["m"]


def independent_neg_elbo(F, y, d, m, V):
    """-ELBO of prior N(0, d I) and Bernoulli-logistic rows, written from the definition: the expectation of
    each row's ``log(1 + e^u) - y u`` by adaptive quadrature (scipy ``quad``), the entropy by ``slogdet``."""
    D = m.size
    mt, vt = F @ m, np.einsum("ij,jk,ik->i", F, V, F)
    lik = 0.0
    for mu, v, yy in zip(mt, vt, y):
        s = math.sqrt(v)
        f = lambda t: (np.logaddexp(0.0, -t) if yy == 1 else np.logaddexp(0.0, t)) * math.exp(-0.5 * ((t - mu) / s) ** 2)
        val = si.quad(f, mu - 40 * s, mu + 40 * s, points=[0.0] if abs(mu) < 40 * s else None,
                      epsabs=0, epsrel=1e-13, limit=400)[0]
        lik += val / (s * math.sqrt(2 * math.pi))
    kl = 0.5 * (np.trace(V) / d + m @ m / d - D + D * math.log(d) - np.linalg.slogdet(V)[1])
    return lik + kl


def check(X, y, tr, d, r):
    """The independent checks of the module doc at one (split, delta)."""
    S = get_solver("klprox")
    print(f"\nindependent check, split 0, delta = {d:.4g} (dual result: -ELBO {r.objective:.12f}, "
          f"{r.iterations} iterations, {r.info['parameterization']})")
    t0 = time.perf_counter()
    rf = S.solve(glm_program(X[tr], y[tr], "logistic", prior_var=d), parameterization="full")
    tf = time.perf_counter() - t0
    Vd, Vf = r.info["covariance"], rf.info["covariance"]
    print(f"  primal D x D update: -ELBO {rf.objective:.12f} ({rf.status}, {rf.iterations} it, {tf:.1f} s); "
          f"rel. diff {(rf.objective - r.objective) / abs(r.objective):.1e}; max |mean diff| "
          f"{np.max(np.abs(rf.x - r.x)):.1e} (max |mean| {np.max(np.abs(r.x)):.2g}); max |cov diff| "
          f"{np.max(np.abs(Vf - Vd)):.1e} (max |cov| {np.max(np.abs(Vd)):.2g})")
    F = design(X[tr])
    m, V = r.x, Vd
    f0 = independent_neg_elbo(F, y[tr], d, m, V)
    print(f"  independent -ELBO (adaptive quadrature, slogdet) {f0:.12f}; rel. diff {(f0 - r.objective) / abs(f0):.1e}")
    rng = np.random.default_rng(0)
    h = 1e-3
    # mean: two directions in the span of the rows (where the data act) and one random, scaled to |F u| = 1
    for u in [F.T @ rng.standard_normal(F.shape[0]) for _ in range(2)] + [rng.standard_normal(m.size)]:
        u = u / np.linalg.norm(F @ u)
        fp, fm = independent_neg_elbo(F, y[tr], d, m + h * u, V), independent_neg_elbo(F, y[tr], d, m - h * u, V)
        gp = abs(m @ u / d)                 # size of one part of the derivative (the prior's), for scale
        print(f"  d(-ELBO)/dt along a mean direction: {(fp - fm) / (2 * h):+.2e} (prior part alone {gp:.2e})")
    # covariance: V(t) = V + t V^1/2-free direction W W^T with W = V F^T e (stays PSD for |t| small)
    for _ in range(2):
        e = rng.standard_normal(F.shape[0])
        w = V @ (F.T @ e)
        w /= math.sqrt(float(F @ w @ (F @ w)))
        Wd = np.outer(w, w)
        ts = 1e-3 * float(np.min(np.einsum("ij,jk,ik->i", F, V, F))) / max(float(np.max((F @ w) ** 2)), 1e-300)
        fp = independent_neg_elbo(F, y[tr], d, m, V + ts * Wd)
        fm = independent_neg_elbo(F, y[tr], d, m, V - ts * Wd)
        tr_part = abs(np.trace(Wd) / (2 * d))
        print(f"  d(-ELBO)/dt along a covariance direction: {(fp - fm) / (2 * ts):+.2e} (prior trace part alone "
              f"{tr_part:.2e})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--run-splits", type=int, nargs=2, metavar=("FIRST", "STOP"), default=None,
                    help="run only splits FIRST .. STOP-1 of the --splits seeded splits (to share a long run between "
                         "processes; the table then covers those splits only)")
    ap.add_argument("--n-grid", type=int, default=30)
    ap.add_argument("--check", action="store_true", help="independent checks on split 0 (slow: the D x D update)")
    ap.add_argument("--warm", action="store_true", help="also the sweep warm-started from the previous delta")
    ap.add_argument("--no-map-cv", action="store_true", help="skip the MAP cross-validation (1500 L-BFGS runs)")
    ap.add_argument("--aggregate", nargs="+", metavar="LOG",
                    help="no solves: the table over the per-split lines of earlier runs' output (e.g. two processes "
                         "that ran --run-splits 0 6 and 6 10)")
    args = ap.parse_args()
    if args.aggregate:
        return aggregate(args.aggregate)
    X, y = load_colon()
    deltas = np.logspace(0, 6, args.n_grid)
    S = get_solver("klprox")
    res = {k: [] for k in ("Proximal (klprox)", "Proximal, warm-started sweep", "Mean-field", "MAP (5-fold CV)",
                           "Laplace (evidence)")}
    worst_warm, statuses, iters = 0.0, set(), []
    first, stop = args.run_splits or (0, args.splits)
    for k, (tr, te) in enumerate(splits(len(y), args.splits, 0.5, seed=0)):
        if not first <= k < stop:
            continue
        Ft = design(X[te])
        t0 = time.perf_counter()
        prox = []
        for d in deltas:
            r = S.solve(glm_program(X[tr], y[tr], "logistic", prior_var=d))
            prox.append((r.objective, d, r))
        t_prox = time.perf_counter() - t0
        statuses |= {r.status for _, _, r in prox}
        iters += [r.iterations for _, _, r in prox]
        f, dstar, r = min(prox, key=lambda z: z[0])
        res["Proximal (klprox)"].append((f, logloss(Ft, y[te], *r.info["predict"](Ft)), t_prox, dstar))
        if k == 0 and args.check:
            check(X, y, tr, dstar, r)

        if args.warm:
            t0 = time.perf_counter()
            warm, prev = [], None
            for d in deltas:
                rw = S.solve(glm_program(X[tr], y[tr], "logistic", prior_var=d), warm_start=prev)
                warm.append((rw.objective, d, rw))
                prev = rw
            t_warm = time.perf_counter() - t0
            worst_warm = max(worst_warm, max(abs(a[0] - b[0]) / abs(a[0]) for a, b in zip(prox, warm)))
            fw, dw, rw = min(warm, key=lambda z: z[0])
            res["Proximal, warm-started sweep"].append((fw, logloss(Ft, y[te], *rw.info["predict"](Ft)), t_warm, dw))

        with blas_threads(1):
            t0 = time.perf_counter()
            mf = []
            for d in deltas:
                o = B.mean_field_vi(view_of(X[tr], y[tr], d), gtol=GTOL)
                mf.append((o["neg_elbo"], d, o))
            t_mf = time.perf_counter() - t0
            f_mf, d_mf, o = min(mf, key=lambda z: z[0])
            s2 = np.diag(o["V"])
            res["Mean-field"].append((f_mf, logloss(Ft, y[te], Ft @ o["m"], (Ft ** 2) @ s2), t_mf, d_mf))

            if not args.no_map_cv:
                t0 = time.perf_counter()
                d_map, m_map = map_cv(X[tr], y[tr], deltas)
                t_map = time.perf_counter() - t0
                res["MAP (5-fold CV)"].append((None, logloss(Ft, y[te], Ft @ m_map, np.zeros(len(te))), t_map, d_map))

            t0 = time.perf_counter()
            lap = [(*laplace_evidence(view_of(X[tr], y[tr], d), d), d) for d in deltas]
            t_lap = time.perf_counter() - t0
            e_lap, pred, d_lap = min(lap, key=lambda z: z[0])
            res["Laplace (evidence)"].append((e_lap, logloss(Ft, y[te], *pred(Ft)), t_lap, d_lap))
        print(f"split {k} (Neg-Log-Lik / log-loss / time s / delta): " + "; ".join(
            f"{name} {'—' if v[-1][0] is None else format(v[-1][0], '.4f')} / {v[-1][1]:.4f} / {v[-1][2]:.1f} / "
            f"{v[-1][3]:.3g}" for name, v in res.items() if v), flush=True)

    print(f"\nklprox statuses over {stop - first} splits x {len(deltas)} deltas: {statuses}; iterations min/median/max "
          f"{min(iters)}/{int(np.median(iters))}/{max(iters)}")
    if args.warm:
        print(f"warm-started sweep vs cold: largest relative -ELBO difference over all deltas and splits {worst_warm:.1e}")
    print(f"\nTable 2, Colon (splits {first}..{stop - 1}, mean (standard error); Neg-Log-Lik = -ELBO or Laplace evidence at "
          "the selected delta; time for the whole delta range per split)")
    print(f"{'method':<30} {'Neg-Log-Lik':>15} {'log-loss':>15} {'time s':>8} {'median delta':>12}   paper")
    for name, rows in res.items():
        if not rows:
            continue
        table_row(name, np.array([[np.nan if f is None else f, ll, t, d] for f, ll, t, d in rows]))


def aggregate(logs):
    """The table of ``main`` from the ``split k (...): name f / ll / t / d; ...`` lines of earlier runs (the first
    line of each split wins)."""
    rows = {}
    for path in logs:
        for line in open(path):
            if not line.startswith("split "):
                continue
            head, body = line.split(": ", 1)
            k = int(head.split()[1])
            for part in body.strip().split("; "):
                name, vals = part.rsplit(" ", 7)[0], part.rsplit(" ", 7)[1:]
                f, ll, t, d = vals[0], vals[2], vals[4], vals[6]
                rows.setdefault(name, {}).setdefault(k, (np.nan if f == "—" else float(f), float(ll), float(t),
                                                         float(d)))
    ks = sorted({k for v in rows.values() for k in v})
    print(f"Table 2, Colon ({len(ks)} splits: {ks}; mean (standard error); from {', '.join(logs)})")
    print(f"{'method':<30} {'Neg-Log-Lik':>15} {'log-loss':>15} {'time s':>8} {'median delta':>12}   paper")
    for name, by in rows.items():
        table_row(name, np.array([by[k] for k in sorted(by)]), f"  [{len(by)} splits]")


def table_row(name, a, note=""):
    """One method's line of Table 2: ``a`` holds (Neg-Log-Lik or NaN, log-loss, time, delta) per split."""
    se = a.std(0, ddof=1) / math.sqrt(len(a)) if len(a) > 1 else np.zeros(4)
    fs = "—" if np.isnan(a[0, 0]) else f"{a[:, 0].mean():.2f} ({se[0]:.2f})"
    p = PAPER.get(name)
    ps = "" if p is None else f"{'—' if p[0] is None else p[0]} / {p[1]} / {p[2]}"
    print(f"{name:<30} {fs:>15} {a[:, 1].mean():8.3f} ({se[1]:.3f}) {a[:, 2].mean():8.1f} "
          f"{np.median(a[:, 3]):12.4g}   {ps}{note}")


if __name__ == "__main__":
    main()
