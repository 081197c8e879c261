"""Coverage of the reported standard error of log Z over seeds (docs/sasmc.md, "Standard errors (2026-11-26)").

For each model, ``seeds`` runs of a Monte Carlo solver; z = (log Zhat - log Z) / SE with log Z by enumeration.
Prints one markdown row per model: mean z, share of runs within 2 and 3 SE, max |z|, the mean reported SE, the
empirical standard deviation of log Zhat over the seeds, their ratio, and seconds per run.

Run: ``OPENBLAS_NUM_THREADS=1 PYTHONPATH=.:benchmarks python benchmarks/sasmc_standard_error.py SOLVER [seeds]
[key=value ...]`` (values parsed as Python literals), e.g. ``sasmc 30`` or ``sasmc 30 se="replicates"``.
"""
import ast
import math
import sys
import time
import warnings

import numpy as np

import varopt
from varopt.formulations import ising
from varopt.program.energy import EnergyModel


def k7_glass():
    """The complete graph K7 of the held-out review (benchmarks/energy_heldout.py, case K7_glass)."""
    rng = np.random.default_rng(2026)
    e7 = [(i, j, float(rng.choice([-1, 1]) * rng.uniform(0.5, 2.5))) for i in range(7) for j in range(i + 1, 7)]
    h = rng.normal(0, 1, 7)
    i, j, w = (np.array(v) for v in zip(*e7))
    # the review's f(x) = -(h.s + sum J s_i s_j) is an energy, as EnergyModel's coefficients
    return EnergyModel(-h, i.astype(int), j.astype(int), -w, names=[f"x[{k}]" for k in range(7)])


def grid_glass():
    """Open 4 x 4 +-J grid at T = 1 with uniform fields in [-0.5, 0.5] (sparse, two-colourable)."""
    e = ising.spin_glass(4, 4, T=1.0, periodic=False, seed=3)
    h = np.random.default_rng(4).uniform(-0.5, 0.5, e.n)
    return EnergyModel(e.h + h, e.i, e.j, e.w, e.const, e.names)


def ferro_chain():
    """Ferromagnetic open chain of 12 spins, J = 1 at T = 0.5 (two modes), no field."""
    return ising.lattice(1, 12, J=1.0, periodic=False, T=0.5)


def dense_random():
    """Complete graph on 8 spins, couplings N(0, 0.8^2), fields N(0, 0.5^2)."""
    rng = np.random.default_rng(7)
    i, j = np.triu_indices(8, 1)
    return EnergyModel(rng.normal(0, 0.5, 8), i, j, rng.normal(0, 0.8, i.size), names=[f"x[{k}]" for k in range(8)])


MODELS = {"K7_glass": k7_glass, "grid4x4_glass": grid_glass, "ferro_chain12": ferro_chain,
          "dense8": dense_random}


def coverage(solver, model, seeds, **opts):
    """(exact log Z, estimates, SEs (nan: a bound reported without SE), seconds per run, runs warned)."""
    prog = model.to_program()
    lz = varopt.get_solver("exact").solve(prog).info["log_partition"]
    est, se, nwarn = [], [], 0
    t0 = time.perf_counter()
    for s in seeds:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = varopt.get_solver(solver).solve(prog, seed=s, **opts)
        nwarn += bool(w)
        est.append(r.info["log_partition"])
        se.append(r.info.get("log_partition_se") or math.nan)
    return lz, np.array(est), np.array(se), (time.perf_counter() - t0) / len(seeds), nwarn


def row(name, lz, est, se, secs, nwarn):
    if np.isnan(se).all():  # cmf reported its certified lower bound in every run
        return (f"| {name} | {len(est)} | all bounds, max bound - log Z {np.max(est - lz):+.1e} | | | | | "
                f"{est.std(ddof=1):.3g} | | {nwarn} | {secs:.2f} |")
    keep = ~np.isnan(se)
    note = f" ({(~keep).sum()} bounds, max bound - log Z {np.max(est[~keep] - lz):+.1e})" if (~keep).any() else ""
    est, se = est[keep], se[keep]
    z = (est - lz) / se
    sd = est.std(ddof=1)
    return (f"| {name} | {len(est)}{note} | {z.mean():+.2f} | {np.mean(np.abs(z) <= 2):.0%} | {np.mean(np.abs(z) <= 3):.0%} "
            f"| {np.abs(z).max():.1f} | {se.mean():.3g} | {sd:.3g} | {se.mean() / sd:.2f} | {nwarn} | {secs:.2f} |")


if __name__ == "__main__":
    solver = sys.argv[1]
    n_seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    opts = {k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in sys.argv[3:])}
    chosen = opts.pop("models", MODELS)
    which = [m for m in MODELS if m in chosen]
    print(f"{solver} {opts}, seeds 100..{99 + n_seeds}")
    print("| model | runs | mean z | within 2 SE | within 3 SE | max abs z | mean SE | sd of estimates | SE/sd "
          "| runs warned | s/run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m in which:
        print(row(m, *coverage(solver, MODELS[m](), range(100, 100 + n_seeds), **opts)), flush=True)
