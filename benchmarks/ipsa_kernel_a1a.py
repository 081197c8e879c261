"""Per-step time of the compiled IPSA kernels alone on a1a (no set-up, no history hand-over): the
kernel of each case runs the same 8,025 samples (5 cyclic passes) from the same start, best of
``--reps`` calls, process CPU clock. Cases: the split form with the identity, damped BB and
running-diagonal Hessians, the box form ``-u <= w <= u`` with the identity.

Usage (alternate checkouts for A/B; the loops are single-threaded)::

    PYTHONPATH=<checkout>:. python benchmarks/ipsa_kernel_a1a.py [--reps 30] [--samples 8025]
"""
from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from ipsa_throughput import load_a1a

import varopt
from varopt.formulations.l1 import l1_logistic_program
from varopt.solvers.ipsa import fast


def kernel_loop(P, hessian):
    """The FastLoop of a 1-iteration solve (its IpsaRun at the start point) and a function that runs the
    kernel over ``count`` samples from that start."""
    grabbed = {}
    orig = fast.FastLoop.solve

    def grab(self):
        grabbed["fl"] = self
        r = self.r
        grabbed["state"] = (r.x.copy(), r.s.copy(), r.z.copy(), r.k, getattr(r.hess, "beta", None),
                            getattr(r.hess, "D", None))
        return orig(self)

    fast.FastLoop.solve = grab
    try:
        varopt.get_solver("ipsa").solve(P, max_iter=1, hessian=hessian, history_objective=False, backend="numba")
    finally:
        fast.FastLoop.solve = orig
    fl = grabbed["fl"]
    x0, s0, z0, k0, beta0, D0 = grabbed["state"]
    r = fl.r
    r.run.history_every = 10 ** 9  # no records inside the timed calls

    def run(samples):
        r.x, r.s, r.z, r.k = x0.copy(), s0.copy(), z0.copy(), k0
        if beta0 is not None:
            r.hess.beta = beta0
        if D0 is not None:
            r.hess.D = D0.copy()
        r.it = 0
        return fl.chunk(samples)

    return run, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--samples", type=int, default=8025)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    X, y = load_a1a()
    split, box = l1_logistic_program(X, y, 1e-4), l1_logistic_program(X, y, 1e-4, "box")
    samples = np.arange(args.samples) % X.shape[0]
    out = [f"{Path(varopt.__file__).parents[1].name}: load {os.getloadavg()[0]:.2f}"]
    for name, P, h in (("identity", split, "identity"), ("bb", split, "bb"), ("diagonal", split, "diagonal"),
                       ("box", box, "identity")):
        run, _ = kernel_loop(P, h)
        run(samples)
        best = np.inf
        for _ in range(args.reps):
            t = time.process_time()
            done, _, _ = run(samples)
            best = min(best, time.process_time() - t)
        assert done == samples.size
        out.append(f"{name} {best / samples.size * 1e9:.0f} ns")
    print("; ".join(out))


if __name__ == "__main__":
    main()
