"""Sparse Ising learning at the sizes users bring: ``SparseIsing`` (proxsg, Honorio 2012) against
neighbourhood selection (L1 logistic regression per node, Meinshausen & Buehlmann 2006; Ravikumar,
Wainwright & Lafferty 2010), both in the same run.

Synthetic: a known sparse Ising model on a grid (couplings ``J_e = +-U[0.4, 0.8]``, fields
``U[-0.1, 0.1]``), ``N`` training and 2000 held-out rows drawn by 300 checkerboard Gibbs sweeps from
uniform. Real: LIBSVM a1a.t (30956 x 123 binary census features, ``../shared/data/a1a``; skipped when
absent) and scikit-learn's digits binarised at 8 (1797 x 64); constant columns dropped, 80/20 split.

Every fit runs in a fresh child process (``spawn``): time (wall and CPU), the fit's peak memory
(Linux's peak resident size ``VmHWM``, reset
before the fit through ``/proc/self/clear_refs``, minus the resident size before it; a tiny fit of the same
kind first does the lazy imports). Rows of one ``SparseIsing`` run
(``sparsify='gradient'``; FB's iterates do not depend on it): ``FB average`` (the default output),
``sparsify=gradient``, ``last (FL)``, ``random (FU)``. Neighbourhood selection: ``liblinear`` per
node with ``lambda = rho`` (``C = 1/(N rho)``), an edge when both nodes keep it (AND rule), couplings
averaged. Quality: precision/recall of the edge set against the truth; ``PLL``: the held-out
pseudo-log-likelihood per variable, ``mean_rows sum_i log sigma(2 x_i (b_i + sum_j J_ij x_j)) / p``
(computable at every p; higher is better); at ``p <= 20`` also the exact L1-ML objective against the
exact-gradient optimum (proximal Newton on the enumerated ``log Z``).

    python benchmarks/scale_ising.py [--sizes 20 50 100 200 500] [--n 5000] [--iters 300] [--rho 0.0625]
                                     [--real]
    python benchmarks/scale_ising.py --sweep-reference 400 [--sizes ...]   # oracle vs plain numpy, per call
    python benchmarks/scale_ising.py --step-grid --sizes 20 200              # FB's step rule against p
"""
import argparse
import multiprocessing as mp
import os
import resource
import time

import numpy as np


def grid_truth(p, seed):
    rng = np.random.default_rng(seed)
    s = int(np.ceil(np.sqrt(p)))
    E = [(i, i + 1) for i in range(p) if (i % s) + 1 < s and i + 1 < p] + [(i, i + s) for i in range(p - s)]
    E = np.array(sorted(E))
    J = rng.choice([-1.0, 1.0], len(E)) * rng.uniform(0.4, 0.8, len(E))
    return rng.uniform(-0.1, 0.1, p), E, J


def gibbs_data(b, E, J, rows, seed, sweeps=300):
    import scipy.sparse as sp
    from varopt.oracles.gibbs_kernel import ColourGibbs
    p = b.size
    Jm = sp.csr_matrix((np.r_[J, J], (np.r_[E[:, 0], E[:, 1]], np.r_[E[:, 1], E[:, 0]])), shape=(p, p))
    rng = np.random.default_rng(seed)
    X = 2.0 * rng.integers(0, 2, (rows, p)) - 1.0
    kern = ColourGibbs(b, Jm, None, "spin")
    for _ in range(sweeps):
        kern.sweep(X, rng)
    return X


def neighbourhood(S, rho):
    """Neighbourhood selection: ``(theta, W)`` of the AND-rule graph, ``J_ij = (w_ij + w_ji)/4``."""
    from sklearn.linear_model import LogisticRegression
    N, p = S.shape
    Jm, bb = np.zeros((p, p)), np.zeros(p)
    for i in range(p):
        others = np.delete(np.arange(p), i)
        clf = LogisticRegression(penalty="l1", C=1.0 / (N * rho), solver="liblinear", tol=1e-6, max_iter=1000)
        clf.fit(S[:, others], S[:, i])
        Jm[i, others] = clf.coef_[0] / 2.0       # log-odds of x_i = +1 is 2 (b_i + sum_j J_ij x_j)
        bb[i] = clf.intercept_[0] / 2.0
    keep = (Jm != 0) & (Jm.T != 0)
    Jsym = np.where(keep, 0.5 * (Jm + Jm.T), 0.0)
    a, c = np.triu_indices(p, 1)
    return np.r_[bb, Jsym[a, c]]


def pll(theta, X):
    """Held-out pseudo-log-likelihood per variable (module docstring)."""
    p = X.shape[1]
    a, c = np.triu_indices(p, 1)
    Jm = np.zeros((p, p))
    Jm[a, c] = Jm[c, a] = theta[p:]
    F = theta[:p] + X @ Jm
    return float(np.mean(np.sum(-np.logaddexp(0.0, -2.0 * X * F), axis=1)) / p)


def _vm_hwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return float(line.split()[1])
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _child(kind, S, rho, iters, seed, conn):
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    import warnings
    warnings.filterwarnings("ignore", module="sklearn")
    import psutil
    from varopt.estimators import SparseIsing
    # a tiny fit of the same kind first: its lazy imports (solvers, scikit-learn) are not the fit's memory
    tiny = np.where(np.random.default_rng(0).random((50, 4)) < 0.5, 1.0, -1.0)
    neighbourhood(tiny, rho) if kind == "ns" else SparseIsing(rho=rho, gradient=kind, max_iter=1).fit(tiny)
    with open("/proc/self/clear_refs", "w") as fh:    # Linux: reset the peak resident size (VmHWM) to now
        fh.write("5")
    rss0 = psutil.Process().memory_info().rss / 1024
    t, c = time.perf_counter(), time.process_time()
    out = {}
    if kind == "ns":
        out["ns"] = neighbourhood(S, rho)
        status, it = "", ""
    elif kind == "exact":
        m = SparseIsing(rho=rho, gradient="exact", seed=seed).fit(S)
        out["exact PN"] = m.theta_
        status, it = m.result_.status, m.n_iter_
    else:
        m = SparseIsing(rho=rho, gradient="gibbs", sparsify="gradient", max_iter=iters, seed=seed).fit(S)
        info = m.result_.info
        out = {"FB average": info["unsparsified"], "sparsify=gradient": m.theta_, "last (FL)": info["last"],
               "random (FU)": info["random"]}
        status, it = m.result_.status, m.n_iter_
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    peak = _vm_hwm_kb()
    conn.send((out, wall, cpu, (peak - rss0) / 1024, status, it))
    conn.close()


def fit(kind, S, rho, iters, seed=0):
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe(False)
    pr = ctx.Process(target=_child, args=(kind, S, rho, iters, seed, b))
    pr.start()
    res = a.recv()
    pr.join()
    return res


def objective(theta, S, rho):
    from varopt.formulations.sparse_ising import moments
    from varopt.oracles.ising import IsingExactOracle
    p = S.shape[1]
    mu, s = moments(S)
    return IsingExactOracle(p).log_partition(theta) - theta @ np.r_[mu, s] + rho * np.abs(theta[p:]).sum()


def table(name, S, Xte, rho, iters, truth=None):
    p = S.shape[1]
    rows = []
    runs = [("varopt", "gibbs")] + ([("varopt", "exact")] if p <= 20 else []) + [("NS", "ns")]
    f_star = None
    for who, kind in runs:
        out, wall, cpu, mem, status, it = fit(kind, S, rho, iters)
        for label, theta in out.items():
            rows.append((label, wall, cpu, mem, status, it, theta))
        if kind == "exact":
            f_star = objective(out["exact PN"], S, rho)
    ns_time = [r[1] for r in rows if r[0] == "ns"][0]
    print(f"\n{name}: p = {p}, N = {S.shape[0]}, rho = {rho:g}, held-out rows {Xte.shape[0]}, load {os.getloadavg()[0]:.2f}")
    print("| output | time s (cpu) | peak MB | status (it) | edges | precision | recall | held-out PLL |"
          + (" f - f* |" if f_star is not None else "") + " time / NS |")
    print("|---|---|---|---|---|---|---|---|" + ("---|" if f_star is not None else "") + "---|")
    for label, wall, cpu, mem, status, it, theta in rows:
        sup = theta[p:] != 0
        edges = int(sup.sum())
        if truth is not None:
            t = np.zeros(sup.size, bool)
            a, c = np.triu_indices(p, 1)
            idx = {(i, j): k for k, (i, j) in enumerate(zip(a, c))}
            t[[idx[tuple(e)] for e in truth]] = True
            tp = int((t & sup).sum())
            prec, rec = f"{tp / max(edges, 1):.2f}", f"{tp / t.sum():.2f}"
        else:
            prec = rec = "–"
        gap = f" {objective(theta, S, rho) - f_star:.2e} |" if f_star is not None else ""
        same = label not in ("FB average", "exact PN", "ns")
        tm = "(same run)" if same else f"{wall:.2f} ({cpu:.2f})"
        mm = "" if same else f"{mem:.0f}"
        st = "" if same else f"{status} ({it})" if status else ""
        ratio = "" if same else f"{wall / ns_time:.2f}"
        lab = "neighbourhood selection" if label == "ns" else label
        print(f"| {lab} | {tm} | {mm} | {st} | {edges} | {prec} | {rec} | {pll(theta, Xte):.4f} |{gap} {ratio} |",
              flush=True)


def sweep_reference(sizes, chains, reps=3):
    """Cost of one ``IsingGibbsOracle.estimate`` (mean-field start, 5 colour-class sweeps, moments)
    against a plain numpy reference of the same work: per spin ``f = h_i + X J[:, i]``, a Bernoulli draw,
    then ``X^T X / S``; couplings 40 % nonzero (the iterates' density at p = 100-500)."""
    from scipy.special import expit
    from varopt.oracles.ising import IsingGibbsOracle, mean_field

    def ref(theta, p, rng):
        h = theta[:p]
        a, c = np.triu_indices(p, 1)
        Jd = np.zeros((p, p))
        Jd[a, c] = Jd[c, a] = theta[p:]
        X = np.where(rng.random((chains, p)) < 0.5 * (1 + mean_field(h, Jd)), 1.0, -1.0)
        for _ in range(5):
            for i in range(p):
                X[:, i] = np.where(rng.random(chains) < expit(2 * (h[i] + X @ Jd[:, i])), 1.0, -1.0)
        return np.r_[X.mean(0), (X.T @ X / chains)[a, c]]

    print(f"\nper-call cost of the Gibbs oracle, {chains} chains, 5 sweeps, load {os.getloadavg()[0]:.2f}")
    print("| p | oracle ms | numpy reference ms | ratio | ns per chain x sweep x p^2 |")
    print("|---|---|---|---|---|")
    for p in sizes:
        rng = np.random.default_rng(p)
        q = p * (p - 1) // 2
        theta = np.r_[rng.normal(0, 0.1, p), rng.normal(0, 0.1, q) * (rng.random(q) < 0.4)]
        o = IsingGibbsOracle(p, n_chains=chains, n_sweeps=5)
        best = [np.inf, np.inf]
        for r in range(reps):
            t = time.perf_counter()
            o.estimate(theta, r)
            best[0] = min(best[0], time.perf_counter() - t)
            t = time.perf_counter()
            ref(theta, p, np.random.default_rng(r))
            best[1] = min(best[1], time.perf_counter() - t)
        print(f"| {p} | {best[0] * 1e3:.1f} | {best[1] * 1e3:.1f} | {best[0] / best[1]:.2f} | "
              f"{best[0] / (5 * chains * p * p) * 1e9:.2f} |", flush=True)


def step_grid(p, n, iters, rho):
    """FB's step rule at size p: the default ``eta_k = beta / (G sqrt k)`` with ``beta = 1`` and
    ``G = |1 + |m||_2`` (Lemma 3) against larger steps; ``G`` grows like p."""
    from varopt.estimators import SparseIsing
    b, E, J = grid_truth(p, seed=p)
    X = gibbs_data(b, E, J, n + 2000, seed=p + 1)
    S, Xte = X[:n], X[n:]
    f_star = objective(SparseIsing(rho=rho, gradient="exact").fit(S).theta_, S, rho) if p <= 20 else None
    a, c = np.triu_indices(p, 1)
    idx = {(i, j): k for k, (i, j) in enumerate(zip(a, c))}
    t = np.zeros(a.size, bool)
    t[[idx[tuple(e)] for e in E]] = True
    print(f"\nstep rule, grid p = {p}, N = {n}, {iters} iterations, rho = {rho:g}, load {os.getloadavg()[0]:.2f}")
    print("| solver_options | G | output | edges | precision | recall | held-out PLL |" + (" f - f* |" if f_star else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if f_star else ""))
    for so in ({}, {"beta": 4, "average": "suffix"}, {"step": 0.3}, {"step": 1.0, "average": "suffix"}):
        m = SparseIsing(rho=rho, gradient="gibbs", sparsify="gradient", max_iter=iters, solver_options=so).fit(S)
        G = m.result_.info["grad_bound"]
        for lab, th in (("average", m.result_.info["unsparsified"]), ("sparsify=gradient", m.theta_),
                        ("last", m.result_.info["last"])):
            sup = th[p:] != 0
            tp = int((sup & t).sum())
            gap = f" {objective(th, S, rho) - f_star:.3e} |" if f_star else ""
            print(f"| {so or 'default'} | {G:.0f} | {lab} | {int(sup.sum())} | {tp / max(sup.sum(), 1):.2f} | "
                  f"{tp / t.sum():.2f} | {pll(th, Xte):.4f} |{gap}", flush=True)


def binarise(X, seed):
    X = np.where(X > 0, 1.0, -1.0)
    X = X[:, ~np.all(X == X[:1], axis=0)]
    idx = np.random.default_rng(seed).permutation(X.shape[0])
    cut = int(0.8 * X.shape[0])
    tr, te = X[idx[:cut]], X[idx[cut:]]
    keep = ~np.all(tr == tr[:1], axis=0)           # no constant column in the training split
    return tr[:, keep], te[:, keep]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 50, 100, 200, 500])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--rho", type=float, default=1.0 / 16)
    ap.add_argument("--real", action="store_true", help="also a1a.t and binarised digits")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--sweep-reference", type=int, default=0, metavar="CHAINS",
                    help="only the per-call cost of the Gibbs oracle against plain numpy at --sizes")
    ap.add_argument("--step-grid", action="store_true", help="only FB's step rule at --sizes")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if args.sweep_reference or args.step_grid:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
        if args.sweep_reference:
            sweep_reference(args.sizes, args.sweep_reference)
        if args.step_grid:
            for p in args.sizes:
                step_grid(p, args.n, args.iters, args.rho)
        return
    if not args.no_synthetic:
        for p in args.sizes:
            b, E, J = grid_truth(p, seed=p)
            X = gibbs_data(b, E, J, args.n + 2000, seed=p + 1)
            table(f"grid, {len(E)} true edges", X[:args.n], X[args.n:], args.rho, args.iters, truth=E)
    if args.real:
        from sklearn.datasets import load_digits
        tr, te = binarise(load_digits().data - 8, 0)
        table("digits > 8", tr, te, args.rho, args.iters)
        try:
            from shared_data import load_a1a
            _, _, Xa, _ = load_a1a()
            tr, te = binarise(Xa, 0)
            table("a1a.t", tr, te, args.rho, args.iters)
        except FileNotFoundError as e:
            print(f"\na1a skipped: {e}")


if __name__ == "__main__":
    main()
