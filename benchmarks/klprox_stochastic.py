"""klprox minibatch steps vs the deterministic method on a1a (Bayesian logistic regression), in one run.

a1a (1605 rows, 123 features + intercept), prior N(0, delta I) at the ELBO-selected delta = 0.4175 of
benchmarks/klprox_a1a.py. Deterministic klprox (adaptive rule, converged) gives the reference -ELBO; the
stochastic variant (``batch_size=B``, permutation sampling, ``step_decay`` 0.6, seeds 0..S-1) runs
``--steps`` steps; the table gives its exact -ELBO gap at the last q, and the time ratio to the
deterministic solve. Run: ``python benchmarks/klprox_stochastic.py [--steps 300,1000] [--batches 50,200]``.
``--synthetic N`` replaces a1a by N rows of a logistic model with 20 Gaussian features (seed 0), where one
deterministic iteration costs O(N D^2) and a batch step O(B D^2 + D^3).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import varopt  # noqa: F401
from varopt.formulations.bayes_glm import glm_program
from shared_data import load_a1a
from varopt.registry import get_solver


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delta", type=float, default=0.4175)
    ap.add_argument("--steps", default="300,1000")
    ap.add_argument("--batches", default="50,200")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--synthetic", type=int, default=0)
    a = ap.parse_args(argv)
    if a.synthetic:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(a.synthetic, 20))
        y = (rng.uniform(size=a.synthetic) < 1 / (1 + np.exp(-(X @ rng.normal(size=20) * 0.5)))).astype(float)
    else:
        X, y, _, _ = load_a1a()
    prog = glm_program(X, y, "logistic", prior_var=a.delta)
    S = get_solver("klprox")
    t0 = time.perf_counter()
    r0 = S.solve(prog)
    td = time.perf_counter() - t0
    print(f"{'synthetic' if a.synthetic else 'a1a'} N = {y.size}, D = {prog.n}, delta = {a.delta}: deterministic klprox -ELBO {r0.objective:.8f}, "
          f"{len(r0.history)} iterations, {td:.2f} s ({r0.status})")
    print(f"{'batch':>6} {'steps':>6} {'passes':>7} {'gap mean':>10} {'gap max':>10} {'time s':>8} {'t/determ.':>10}")
    for B in (int(v) for v in a.batches.split(",")):
        for K in (int(v) for v in a.steps.split(",")):
            gaps, times = [], []
            for s in range(a.seeds):
                t0 = time.perf_counter()
                r = S.solve(prog, batch_size=B, max_iter=K, seed=s)
                times.append(time.perf_counter() - t0)
                gaps.append(r.objective - r0.objective)
            t = float(np.mean(times))
            print(f"{B:6d} {K:6d} {B * K / y.size:7.1f} {np.mean(gaps):10.3e} {np.max(gaps):10.3e} {t:8.2f} {t / td:10.2f}")


if __name__ == "__main__":
    main()
