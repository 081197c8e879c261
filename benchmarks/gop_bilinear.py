"""Benchmark: GOP (varopt) vs SCIP on classic bilinear programs with published global optima.

Problems (Pyomo models, solved by ``SolverFactory('gop')`` and ``SolverFactory('scip_direct')``
in the same run, both to a relative gap of 1e-6):

* Haverly pooling problems 1-3 (Haverly 1978; Floudas & Visweswaran 1990): optima -400, -600, -750.
* Floudas & Visweswaran (1990), example: ``min -x + x y - y  s.t. -6x + 8y <= 3, 3x - y <= 3,
  0 <= x, y <= 5``: optimum -1.083333 at (7/6, 1/2).


Run: ``python benchmarks/gop_bilinear.py [--repeat R]``. Times are wall-clock seconds on a
shared machine (noisy); the table shows the best of ``R`` runs.
"""
import argparse
import time

import pyomo.environ as pyo

import varopt  # noqa: F401  (registers SolverFactory('gop'))


def haverly(case):
    m = pyo.ConcreteModel(name=f"haverly{case}")
    dX = 600 if case == 2 else 100
    cB = 13 if case == 3 else 16
    m.A = pyo.Var(bounds=(0, 300))
    m.B = pyo.Var(bounds=(0, 300))
    m.Px = pyo.Var(bounds=(0, dX))
    m.Py = pyo.Var(bounds=(0, 200))
    m.Cx = pyo.Var(bounds=(0, dX))
    m.Cy = pyo.Var(bounds=(0, 200))
    m.p = pyo.Var(bounds=(1, 3))  # sulphur quality of the pool
    m.obj = pyo.Objective(expr=6 * m.A + cB * m.B + 10 * (m.Cx + m.Cy) - 9 * (m.Px + m.Cx) - 15 * (m.Py + m.Cy))
    m.bal = pyo.Constraint(expr=m.A + m.B == m.Px + m.Py)
    m.sul = pyo.Constraint(expr=3 * m.A + m.B == m.p * m.Px + m.p * m.Py)
    m.qx = pyo.Constraint(expr=m.p * m.Px + 2 * m.Cx <= 2.5 * (m.Px + m.Cx))
    m.qy = pyo.Constraint(expr=m.p * m.Py + 2 * m.Cy <= 1.5 * (m.Py + m.Cy))
    m.dx = pyo.Constraint(expr=m.Px + m.Cx <= dX)
    m.dy = pyo.Constraint(expr=m.Py + m.Cy <= 200)
    return m


def fv1990():
    # the collection's coding of the same problem (benchmarks/gop_instances/bilinear.py)
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gop_instances.bilinear import fv1990 as build
    m = build()
    m.name = "fv1990"
    return m


PROBLEMS = [("Haverly 1", lambda: haverly(1), -400.0), ("Haverly 2", lambda: haverly(2), -600.0),
            ("Haverly 3", lambda: haverly(3), -750.0), ("Floudas-Visweswaran 1990", fv1990, -13.0 / 12.0)]


def run_gop(build):
    m = build()
    t = time.perf_counter()
    r = pyo.SolverFactory("gop").solve(m, rel_gap=1e-6)
    dt = time.perf_counter() - t
    return dt, pyo.value(m.obj), r


def run_scip(build):
    m = build()
    s = pyo.SolverFactory("scip_direct")
    t = time.perf_counter()
    s.solve(m, options={"limits/gap": 1e-6, "limits/absgap": 1e-9})
    dt = time.perf_counter() - t
    return dt, pyo.value(m.obj)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for name, build, pub in PROBLEMS:
        tg = min(run_gop(build)[0] for _ in range(args.repeat))
        _, vg, rg = run_gop(build)
        ts = min(run_scip(build)[0] for _ in range(args.repeat))
        _, vs = run_scip(build)
        rows.append((name, pub, vg, vs, tg, ts))
        assert abs(vg - pub) <= 1e-5 * max(1, abs(pub)), (name, vg, pub)
    print(f"{'problem':26s} {'published':>11s} {'gop':>13s} {'scip':>13s} {'gop s':>8s} {'scip s':>8s} {'scip/gop':>9s}")
    for name, pub, vg, vs, tg, ts in rows:
        print(f"{name:26s} {pub:11.6f} {vg:13.6f} {vs:13.6f} {tg:8.3f} {ts:8.3f} {ts / tg:9.2f}")


if __name__ == "__main__":
    main()
