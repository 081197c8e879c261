"""gop on random polynomial models written as MINLPLib writes them, against brute-force grids (docs/gop.md §13j).

Seed ``s``: ``min objvar`` s.t. ``objvar == p(x)``, ``p`` of degree 3-24 with up to 8 random terms ``c_k x^k`` on a random
interval inside ``[-1.5, 3.5]``; odd seeds add ``q(x) y + (y - 0.3)^2 / 2`` with ``y in [-1, 1]`` (``q``: three of the
same powers). The lifted chains of squares and products (docs/gop.md §13) meet coefficients up to ``x^24`` of the box.
Reference: a grid of 400,001 points (1501 x 1501 for two variables) refined by L-BFGS-B from its best point. Flags:
``WRONG`` (certified, but the value or the bound is off the reference by more than 1e-6 relative) and ``BAD BOUND``
(the lower bound above the reference).

    OPENBLAS_NUM_THREADS=1 python benchmarks/gop_random_polynomials.py [first_seed] [stop_seed] [time_limit]
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np
import pyomo.environ as pyo
from scipy.optimize import minimize

import varopt  # noqa: F401  (registers gop)


def instance(seed):
    """``(build, reference, description)`` of seed ``seed``."""
    rng = np.random.default_rng(seed)
    biv = seed % 2 == 1
    deg = int(rng.integers(3, 25))
    lo = float(np.round(rng.uniform(-1.5, 1.0), 2))
    hi = float(np.round(lo + rng.uniform(0.3, 2.0), 2))
    ks = sorted(set(rng.integers(1, deg + 1, size=min(deg, 8)).tolist()) | {deg})
    C = {k: float(np.round(rng.normal() * 10 ** rng.uniform(-2, 1), 4)) for k in ks}
    D = {k: float(np.round(rng.normal(), 3)) for k in ks[:3]} if biv else {}

    def p(x, y=0.0):
        return (sum(c * x ** k for k, c in C.items()) + sum(c * x ** k * y for k, c in D.items())
                + (0.5 * (y - 0.3) ** 2 if biv else 0.0))

    def build():
        m = pyo.ConcreteModel()
        m.objvar = pyo.Var()
        m.x = pyo.Var(bounds=(lo, hi))
        m.y = pyo.Var(bounds=(-1, 1))
        m.e = pyo.Constraint(expr=m.objvar == (p(m.x, m.y) if biv else p(m.x)))
        m.o = pyo.Objective(expr=m.objvar)
        return m

    if biv:
        X, Y = np.meshgrid(np.linspace(lo, hi, 1501), np.linspace(-1, 1, 1501))
        V = p(X, Y)
        i = np.unravel_index(np.argmin(V), V.shape)
        rr = minimize(lambda v: p(v[0], v[1]), [X[i], Y[i]], bounds=[(lo, hi), (-1, 1)], method="L-BFGS-B",
                      options={"ftol": 1e-15, "gtol": 1e-12})
    else:
        X = np.linspace(lo, hi, 400001)
        V = p(X)
        i = int(np.argmin(V))
        rr = minimize(lambda v: p(v[0]), [X[i]], bounds=[(lo, hi)], method="L-BFGS-B",
                      options={"ftol": 1e-15, "gtol": 1e-12})
    ref = min(float(V[i]), float(rr.fun))
    return build, ref, f"{'biv' if biv else 'uni'} deg {deg:2d} [{lo}, {hi}]"


def main(first, stop, tl):
    print(f"load average {os.getloadavg()[0]:.2f}; time limit {tl:g} s")
    bad = 0
    for seed in range(first, stop):
        build, ref, desc = instance(seed)
        t = time.perf_counter()
        try:
            r = pyo.SolverFactory("gop").solve(build(), time_limit=tl).varopt_result
            st, ub, lb = r.status, r.upper_bound, r.lower_bound
        except Exception as e:   # a refusal is a result here
            st, ub, lb = type(e).__name__, float("nan"), float("nan")
        dt = time.perf_counter() - t
        tol = 1e-6 * max(1.0, abs(ref))
        flag = ""
        if st == "optimal" and (abs(ub - ref) > 2 * tol or lb > ref + tol):
            flag = "WRONG"
        elif np.isfinite(lb) and lb > ref + tol:
            flag = "BAD BOUND"
        bad += bool(flag)
        print(f"seed {seed:3d} {desc:24s} {st:12s} ub {ub:.10g} lb {lb:.10g} ref {ref:.10g} {dt:6.2f}s {flag}",
              flush=True)
    print(f"{bad} wrong of {stop - first}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(int(a[0]) if a else 0, int(a[1]) if len(a) > 1 else 40, float(a[2]) if len(a) > 2 else 10.0)
