"""Benchmark: gop's tree vs SCIP on small polynomial models where the lifted chains are weak (docs/gop.md §13b).

Instances (generated here, seeded by their definition; nothing is read from disk):

* ``quartic<n>`` -- ``min sum_i x_i^4 - 2 x_i^2 + 0.3 x_i x_{i+1}^3 + 0.1 x_i`` over ``[-1.5, 1.5]^n`` (indices
  cyclic): ``x^4`` is lifted to the square of ``q = x^2`` and ``x y^3`` to a chain of two products
  (docs/gop.md §13), whose McCormick rows are loose until the tree has split every variable.
* ``norm2`` -- ``min sqrt(x^2 + y^2) - 0.5 x`` over ``[-2, 2]^2``: convex, the ``sqrt`` column at a nonsmooth optimum
  (value 0 at the origin).
* ``ex4_1_2`` -- MINLPLib ex4_1_2 as MINLPLib writes it: ``min objvar`` s.t. ``objvar == p(x)``, ``p`` of degree 50,
  ``x in [1, 2]``: a chain of 25 squares and 24 products whose errors add up in the bound (docs/gop.md §13j).

gop (``mode='tree'``) and SCIP (``scip_direct``, gap 1e-9) run in the same process one after the other with the same
time limit; the table gives the status, value, bound, time and the time ratio gop / SCIP.

    OPENBLAS_NUM_THREADS=1 python benchmarks/gop_polynomial_chains.py                # 30 s per solve
    OPENBLAS_NUM_THREADS=1 python benchmarks/gop_polynomial_chains.py --time-limit 10 --instances quartic3
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import pyomo.environ as pyo

import varopt  # noqa: F401  (registers gop)
from gop_collection import fmt


def quartic(n):
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, n - 1)
    m.x = pyo.Var(m.I, bounds=(-1.5, 1.5), initialize=0.1)
    m.o = pyo.Objective(expr=sum(m.x[i] ** 4 - 2 * m.x[i] ** 2 + 0.3 * m.x[i] * m.x[(i + 1) % n] ** 3 + 0.1 * m.x[i]
                                 for i in m.I))
    return m


def norm2():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-2, 2), initialize=1.0)
    m.y = pyo.Var(bounds=(-2, 2), initialize=1.0)
    m.o = pyo.Objective(expr=pyo.sqrt(m.x ** 2 + m.y ** 2) - 0.5 * m.x)
    return m


#: MINLPLib ex4_1_2's coefficients of x^k, as MINLPLib writes them
EX4_1_2 = {2: 2.5, 1: -500, 3: 1.666666666, 4: 1.25, 5: 1, 6: 0.8333333, 7: 0.714285714, 8: 0.625, 9: 0.555555555,
           10: 1, 11: -43.6363636, 12: 0.41666666, 13: 0.384615384, 14: 0.357142857, 15: 0.3333333, 16: 0.3125,
           17: 0.294117647, 18: 0.277777777, 19: 0.263157894, 20: 0.25, 21: 0.238095238, 22: 0.227272727,
           23: 0.217391304, 24: 0.208333333, 25: 0.2, 26: 0.192307692, 27: 0.185185185, 28: 0.178571428,
           29: 0.344827586, 30: 0.6666666, 31: -15.48387097, 32: 0.15625, 33: 0.1515151, 34: 0.14705882,
           35: 0.14285712, 36: 0.138888888, 37: 0.135135135, 38: 0.131578947, 39: 0.128205128, 40: 0.125,
           41: 0.121951219, 42: 0.119047619, 43: 0.116279069, 44: 0.113636363, 45: 0.1111111, 46: 0.108695652,
           47: 0.106382978, 48: 0.208333333, 49: 0.408163265, 50: 0.8}


def ex4_1_2():
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var()
    m.x = pyo.Var([1], bounds=(1.0, 2.0))
    x = m.x[1]
    m.e1 = pyo.Constraint(expr=-(sum(c * x ** k if k > 1 else c * x for k, c in EX4_1_2.items())) + m.objvar == 0.0)
    m.o = pyo.Objective(expr=m.objvar)
    return m


INSTANCES = {"quartic3": lambda: quartic(3), "quartic5": lambda: quartic(5), "quartic8": lambda: quartic(8),
             "norm2": norm2, "ex4_1_2": ex4_1_2}


def run_gop(build, time_limit):
    m = build()
    t0 = time.perf_counter()
    r = pyo.SolverFactory("gop").solve(m, mode="tree", time_limit=time_limit).varopt_result
    return {"status": r.status, "value": r.upper_bound, "bound": r.lower_bound, "time": time.perf_counter() - t0,
            "nodes": r.info.get("nodes")}


def run_scip(build, time_limit):
    m = build()
    s = pyo.SolverFactory("scip_direct")
    s.options["limits/gap"] = 1e-9
    s.options["limits/time"] = time_limit
    t0 = time.perf_counter()
    res = s.solve(m)
    dt = time.perf_counter() - t0
    return {"status": str(res.solver.termination_condition), "value": pyo.value(m.o),
            "bound": res.problem.lower_bound, "time": dt}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--instances", nargs="*", default=list(INSTANCES))
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}; time limit {args.time_limit:g} s")
    print(f"{'instance':10s} {'gop status':11s} {'gop value':>12s} {'gop bound':>12s} {'nodes':>6s} {'gop s':>7s} "
          f"{'SCIP status':12s} {'SCIP value':>12s} {'SCIP s':>7s} {'ratio':>7s}")
    for name in args.instances:
        g = run_gop(INSTANCES[name], args.time_limit)
        s = run_scip(INSTANCES[name], args.time_limit)
        ratio = g["time"] / max(s["time"], 1e-3)
        print(f"{name:10s} {g['status']:11s} {fmt(g['value'], '.8g'):>12s} {fmt(g['bound'], '.8g'):>12s} "
              f"{g['nodes'] or 0:6d} {g['time']:7.2f} {s['status']:12s} {fmt(s['value'], '.8g'):>12s} "
              f"{s['time']:7.2f} {ratio:7.1f}")


if __name__ == "__main__":
    main()
