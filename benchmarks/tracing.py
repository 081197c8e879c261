"""Shared pieces of the majorize benchmarks: the 1e-4 criterion, a traced L-BFGS-B, data-set loop.

Imported by the scripts in this folder (``python benchmarks/X.py`` puts the folder on ``sys.path``).
"""
from __future__ import annotations

import sys
import time

import numpy as np
from scipy.optimize import minimize

from shared_data import load_dataset
from varopt.solvers.majorize.solver import MajorizeModel

#: the benchmarks' accuracy target: within 1e-4 relative of the best objective f*
REL = 1e-4


def first_within(trace, fstar, rel=REL):
    """``(time, iteration)`` of the first ``(time, f)`` entry of ``trace`` within ``rel`` of ``fstar``."""
    for it, (t, f) in enumerate(trace):
        if f - fstar <= rel * abs(fstar):
            return t, it
    return np.nan, -1


def lbfgs_trace(prog, ftol=1e-12, maxiter=20000, maxcor=10):
    """scipy L-BFGS-B on ``MajorizeModel(prog).value_and_gradient`` (the oracle majorize uses), from 0.

    Returns ``(result, trace)``; ``trace`` holds ``(seconds since start, f)`` per iteration. Building the
    model is timed (as it is for majorize); the callback's extra function value is not.
    """
    x0 = np.zeros(prog.n)
    trace = [(0.0, prog.objective.value(x0))]  # the start, not timed (L-BFGS-B evaluates it itself)
    over = [0.0]
    t0 = time.perf_counter()

    def cb(xk):
        s0 = time.perf_counter()
        f = prog.objective.value(xk)
        trace.append((s0 - t0 - over[0], f))
        over[0] += time.perf_counter() - s0
    res = minimize(MajorizeModel(prog).value_and_gradient, x0, jac=True, method="L-BFGS-B", callback=cb,
                   options={"maxiter": maxiter, "ftol": ftol, "gtol": 1e-10, "maxcor": maxcor})
    return res, trace


def datasets(names):
    """Yield ``(name, X, y)`` for every data set that loads; report the missing ones on stderr."""
    for name in names:
        try:
            X, y = load_dataset(name)
        except FileNotFoundError as exc:
            print(f"# skip {name}: {exc}", file=sys.stderr)
            continue
        yield name, X, y
