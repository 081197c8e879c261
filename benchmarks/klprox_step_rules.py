"""klprox's default mean-step rule against the previous one, in one run, over the grids of the klprox benchmarks.

``mean_step='auto'`` now starts with the natural mean step (beta <= 10) and returns to the paper's (16) when it
stalls (docs/klprox.md, section 4); before, it started with (16) (beta <= 1) and switched to the natural step only
when (16) stalled. The previous rule is run by setting ``varopt.solvers.klprox.solver.AUTO_FIRST = "paper"`` for
its solves. Cold starts, default options otherwise (residuals to gtol = 1e-8); per point: iterations, wall time
(after one untimed 1-iteration solve of the same model), the number of mean-step switches (``sN``), and the
relative difference of the two -ELBO values.

Grids (``--grids``, comma-separated): ``heart`` (GP classification, 6 x 6 of linspace(-1, 6), split 0, as
benchmarks/klprox_gpc.py), ``housing`` (Laplace GP, noise e^-2, 4 x 4 of linspace(-1, 6), split 0), ``a1a``
(logistic regression, delta = logspace(-3, 1, 30)), ``wine`` (softmax, K = 3, delta = logspace(-1, 1, 7)),
``colon`` (logistic, dual form, split 0, delta = logspace(0, 6, 10)), ``iris`` (softmax, K = 3, all 150 rows
standardized, delta = logspace(-1, 1, 7)), ``synth4`` (softmax, K = 4: 120 rows of 6 standard normal features, labels
drawn from a random softmax model, seed 0, delta = logspace(-1, 1, 4)), ``breast`` (logistic, scikit-learn's breast
cancer, standardized, all 569 rows, delta = logspace(-3, 2, 11)), ``poisson`` (36 Poisson regressions: 80 rows of 5
normal features scaled by 0.5 or 1, counts drawn with log-rates 0, 3 or 1 + X w / 2, seeds 0-3, delta = 0.1, 0.3, 1),
``poisswide`` (all-zero counts, 50 rows of 2 normal features, delta = 10, 100, 1e3, 1e4; the 36 models of ``poisson`` at
delta = 10, 100, 1000). ``--compare newton-fp``: without and with the fixed-point Newton step on exp rows (NEWTON_FP).
``--compare regrow`` compares the adaptive rule without and with its REGROW_WINDOW (no regrowth to a step size
rejected in the last 5 iterations) instead; the cells then count rejected trial steps too. ``--compare first``: without
and with the optimistic first steps (FIRST_STEPS = 2 steps tried at beta = 1000 from a cold start). The totals also
count the iterations to -ELBO within 1e-6 relative of the run's optimum (the first history entry there).
``--compare anderson``: without and with the Anderson-extrapolated steps of models with softmax rows (docs/klprox.md,
section 4). ``--compare prior-step``: the gamma0 start against the start T(prior) (PRIOR_STEP: the undamped natural step
from the prior's predictive moments, where every prior predictor's sd is at most PRIOR_SD); the totals then also count
the prior's evaluations (one quadrature pass each, no factorization; the gamma0 start it replaces cost a factorization
and an evaluation).
Run: ``python benchmarks/klprox_step_rules.py [--grids heart,housing,a1a] [--compare mean-step|regrow|first]``.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

import varopt  # noqa: F401
from varopt.formulations.bayes_glm import glm_program, gp_program
from varopt.registry import get_solver
from varopt.solvers.klprox import solver as KS
from shared_data import load_a1a, load_colon, load_heart, load_housing, splits

#: --compare: the module constant of varopt.solvers.klprox.solver switched, and its (previous, default) values (a tuple
#: of constants: each switched to the values at the same place)
RULES = {"mean-step": ("AUTO_FIRST", "paper", "natural"),   # the natural mean step first (docs/klprox.md section 4)
         "regrow": ("REGROW_WINDOW", 0, 5),                 # no regrowth to a step size rejected 5 iterations ago
         "first": ("FIRST_STEPS", 0, 2),                    # two optimistic first steps at beta = 1000
         "anderson": ("ANDERSON_MEMORY", 0, KS.ANDERSON_MEMORY),  # Anderson-extrapolated steps (softmax rows)
         "prior-step": ("PRIOR_STEP", 0, 1),               # the start T(prior): no factorization of a gamma0 start
         "newton-fp": ("NEWTON_FP", 0, 1)}                  # the fixed-point Newton step on exp (Poisson) rows                # the start T(prior): no factorization of a gamma0 start  # Anderson-extrapolated steps (softmax rows)


def problems(grids):
    if "heart" in grids:
        X, y = load_heart()
        tr, _ = splits(len(y), 1)[0]
        for le in np.linspace(-1, 6, 6):
            for ls in np.linspace(-1, 6, 6):
                yield f"heart({le:.1f},{ls:.1f})", lambda le=le, ls=ls: gp_program(X[tr], y[tr], "logistic", le, ls)[0]
    if "housing" in grids:
        X, y = load_housing()
        tr, _ = splits(len(y), 1)[0]
        for le in np.linspace(-1, 6, 4):
            for ls in np.linspace(-1, 6, 4):
                yield (f"housing({le:.1f},{ls:.1f})",
                       lambda le=le, ls=ls: gp_program(X[tr], y[tr], "laplace", le, ls, math.exp(-2))[0])
    if "a1a" in grids:
        X, y, _, _ = load_a1a()
        for d in np.logspace(-3, 1, 30):
            yield f"a1a({d:.3g})", lambda d=d: glm_program(X, y, "logistic", prior_var=d)
    if "wine" in grids:
        from klprox_multinomial import wine
        X, y, _, _ = wine()
        for d in np.logspace(-1, 1, 7):
            yield f"wine({d:.3g})", lambda d=d: glm_program(X, y, "multinomial", prior_var=d)
    if "iris" in grids:
        from sklearn.datasets import load_iris
        X, y = load_iris(return_X_y=True)
        X = (X - X.mean(0)) / X.std(0)
        for d in np.logspace(-1, 1, 7):
            yield f"iris({d:.3g})", lambda d=d: glm_program(X, y.astype(float), "multinomial", prior_var=d)
    if "synth4" in grids:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(120, 6))
        logits = X @ rng.normal(size=(6, 4))
        y = np.array([rng.choice(4, p=np.exp(z - z.max()) / np.exp(z - z.max()).sum()) for z in logits])
        for d in np.logspace(-1, 1, 4):
            yield f"synth4({d:.3g})", lambda d=d: glm_program(X, y.astype(float), "multinomial", prior_var=d)
    if "breast" in grids:
        from shared_data import load_dataset
        X, y = load_dataset("breast_cancer")
        for d in np.logspace(-3, 2, 11):
            yield f"breast({d:.3g})", lambda d=d: glm_program(X, y, "logistic", prior_var=d)
    if "poisson" in grids:
        for seed in range(4):
            for scale, base in ((0.5, 0.0), (0.5, 3.0), (1.0, 1.0)):
                rng = np.random.default_rng(seed)
                Xp = rng.normal(size=(80, 5)) * scale
                yp = rng.poisson(np.exp(base + Xp @ rng.normal(size=5) * 0.5)).astype(float)
                for d in (0.1, 0.3, 1.0):
                    yield (f"poisson{seed},{scale:g},{base:g}({d:g})",
                           lambda Xp=Xp, yp=yp, d=d: glm_program(Xp, yp, "poisson", prior_var=d))
    if "poisswide" in grids:
        # all-zero counts under wide priors (docs/klprox.md section 6d: 122 / 983 / 6095 / 38457 iterations before the
        # fixed-point Newton step), and the 36 models of the poisson grid at delta = 10, 100, 1000
        rng = np.random.default_rng(1)
        X = rng.normal(size=(50, 2))
        y = rng.poisson(np.exp(-6.0 + 0.3 * X[:, 0])).astype(float)
        for d in (10.0, 100.0, 1e3, 1e4):
            yield f"poiszero({d:g})", lambda d=d: glm_program(X, y, "poisson", prior_var=d)
        for seed in range(4):
            for scale, base in ((0.5, 0.0), (0.5, 3.0), (1.0, 1.0)):
                rng = np.random.default_rng(seed)
                Xp = rng.normal(size=(80, 5)) * scale
                yp = rng.poisson(np.exp(base + Xp @ rng.normal(size=5) * 0.5)).astype(float)
                for d in (10.0, 100.0, 1e3):
                    yield (f"poisswide{seed},{scale:g},{base:g}({d:g})",
                           lambda Xp=Xp, yp=yp, d=d: glm_program(Xp, yp, "poisson", prior_var=d))
    if "colon" in grids:
        X, y = load_colon()
        tr, _ = splits(len(y), 1)[0]
        for d in np.logspace(0, 6, 10):
            yield f"colon({d:.3g})", lambda d=d: glm_program(X[tr], y[tr], "logistic", prior_var=d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grids", default="heart,housing,a1a")
    ap.add_argument("--compare", choices=tuple(RULES), default="mean-step",
                    help="mean-step: AUTO_FIRST 'paper' against 'natural'; regrow: REGROW_WINDOW 0 against 5; first: "
                    "FIRST_STEPS 0 against 2; anderson: ANDERSON_MEMORY 0 against the default; prior-step: PRIOR_STEP "
                    "0 against 1; newton-fp: NEWTON_FP 0 against 1")
    args = ap.parse_args()
    S = get_solver("klprox")
    const, *values = RULES[args.compare]
    rules = dict(zip(("previous", "default"), values))
    consts = const if isinstance(const, tuple) else (const,)
    saved = [getattr(KS, c) for c in consts]
    print(f"load average {os.getloadavg()[0]:.2f}; {const}: previous {values[0]!r}, default {values[1]!r}; cells: "
          "iterations, rejected trial steps, time")
    print(f"{'point':<20}" + "".join(f"{k:>30}" for k in rules) + f"{'rel. diff':>10}")
    totals = {}
    for name, make in problems(args.grids.split(",")):
        p = make()
        S.solve(p, max_iter=1)
        cells, fs = [], []
        for label, value in rules.items():
            for c, v in zip(consts, value if isinstance(const, tuple) else (value,)):
                setattr(KS, c, v)
            try:
                t0 = time.perf_counter()
                r = S.solve(p)
                t = time.perf_counter() - t0
            finally:
                for c, v in zip(consts, saved):
                    setattr(KS, c, v)
            sw = len(r.info.get("mean_step_switches", []))
            rej = r.info["rejected_steps"]
            flag = "" if r.status == "converged" else f" {r.status}"
            cells.append(f"{r.iterations:5d} {rej:4d} {t:8.3f} s" + (f" s{sw}" if sw else "   ") + flag)
            fs.append(r.objective)
            tot = totals.setdefault((name.split("(")[0].rstrip("0123456789.,"), label), [0, 0, 0.0, 0, 0, 0])
            tot[0] += r.iterations
            tot[1] += rej
            tot[2] += t
            tot[3] += r.status != "converged"
            tot[4] += next((i + 1 for i, e in enumerate(r.history)
                            if abs(e["objective"] - r.objective) <= 1e-6 * abs(r.objective)), r.iterations)
            tot[5] += r.info.get("prior_evaluations", 0)
        rel = abs(fs[1] - fs[0]) / abs(fs[0])
        print(f"{name:<20}" + "".join(f"{c:>30}" for c in cells) + f"{rel:10.1e}", flush=True)
    print(f"\n{'grid':<10} {'rule':<10} {'iterations':>10} {'rejected':>9} {'to 1e-6':>8} {'time s':>9} "
          f"{'not converged':>14} {'prior evaluations':>18}")
    for (g, label), (it, rej, t, bad, to, pe) in totals.items():
        print(f"{g:<10} {label:<10} {it:10d} {rej:9d} {to:8d} {t:9.2f} {bad:14d} {pe:18d}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
