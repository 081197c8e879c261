"""Warm starts along the housing grid (Laplace GP, split 0, the paper's 15 x 15 grid of (log ell, log sf)):
klprox iterations per grid point for each way of starting, in one run, and the largest relative difference of
every grid point's -ELBO from a reference run (``--ref``, e.g. a ``--save`` of ``--modes dag --gtol 1e-8``).

Modes: ``cold`` (the default starts only); ``prev`` (the previous point in row-major order, its mean and
pseudo-precisions as they are: the warm start before the Gaussian-site start); ``prev-sites`` (the previous
point, with its sites, docs/klprox.md section 3b); ``dag`` (the solved neighbours in both directions with their
sites, what ``GPRegressor`` does). ``--mean-step``/``--beta-max``: klprox options.
Run: ``python benchmarks/klprox_housing_warm.py [--modes prev,dag] [--gtol 1e-6] [--save f.npy] [--ref f.npy]``.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import varopt  # noqa: F401
from shared_data import load_housing, splits
from varopt.estimators.klprox_grid import warm_summary
from varopt.formulations.bayes_glm import gp_program
from varopt.registry import get_solver


def run(mode, X, y, grid, gtol, opts):
    S = get_solver("klprox")
    n = len(grid)
    done, its, rej, obj, t = {}, [], 0, np.empty((n, n)), 0.0
    prev = None
    for i, le in enumerate(grid):
        for j, ls in enumerate(grid):
            p = gp_program(X, y, "laplace", le, ls, math.exp(-2.0))[0]
            if mode == "cold":
                w = None
            elif mode == "prev":
                w = None if prev is None else {k: prev[k] for k in ("x", "pseudo_precisions", "alpha")}
            elif mode == "prev-sites":
                w = prev
            else:
                w = [done[k] for k in ((i - 1, j), (i, j - 1)) if k in done] or None
            t0 = time.perf_counter()
            r = S.solve(p, gtol=gtol, warm_start=w, **opts)
            t += time.perf_counter() - t0
            if not r.success:
                raise RuntimeError(f"not converged at ({le}, {ls}): {r.status} {r.message}")
            done[i, j] = prev = warm_summary(r)
            its.append(r.iterations)
            rej += r.info["rejected_steps"]
            obj[i, j] = r.objective
    return obj, its, rej, t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="cold,prev,prev-sites,dag")
    ap.add_argument("--gtol", type=float, default=1e-6)
    ap.add_argument("--n-grid", type=int, default=15)
    ap.add_argument("--mean-step", default=None)
    ap.add_argument("--beta-max", type=float, default=None)
    ap.add_argument("--save", default=None, help="save the last mode's -ELBO grid (.npy)")
    ap.add_argument("--ref", default=None, help="compare every mode's -ELBO grid with this one (.npy)")
    args = ap.parse_args()
    opts = {k: v for k, v in (("mean_step", args.mean_step), ("beta_max", args.beta_max)) if v is not None}
    X, y = load_housing()
    tr, _ = splits(len(y), 1)[0]
    grid = np.linspace(-1, 6, args.n_grid)
    ref = None if args.ref is None else np.load(args.ref)
    print(f"housing split 0, {args.n_grid}^2 grid, gtol {args.gtol:g}, options {opts}")
    print(f"{'mode':<12} {'iterations':>10} {'median':>7} {'max':>5} {'rejected':>9} {'time s':>8} {'pick':>8} "
          f"{'-ELBO at pick':>16} {'max rel. diff':>14}")
    for mode in args.modes.split(","):
        obj, its, rej, t = run(mode, X[tr], y[tr], grid, args.gtol, opts)
        k = np.unravel_index(np.argmin(obj), obj.shape)
        diff = "" if ref is None else f"{float(np.max(np.abs(obj - ref) / np.abs(ref))):.1e}"
        print(f"{mode:<12} {sum(its):10d} {int(np.median(its)):7d} {max(its):5d} {rej:9d} {t:8.1f} "
              f"{str(tuple(int(v) for v in k)):>8} {obj[k]:16.10f} {diff:>14}", flush=True)
        if args.save:
            np.save(args.save, obj)


if __name__ == "__main__":
    main()
