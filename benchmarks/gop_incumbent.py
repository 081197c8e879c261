"""gop's incumbent under a time limit on models with 50-300 variables, against SCIP with the same limit and,
for NMF, against alternating minimisation written here.

Models (built by :func:`benchmarks.scale_energy_gop.gop_model`, written in Pyomo as users write them):
``nmf:p:q:r`` (``||X - W H||_F^2``, ``W, H`` in boxes), ``bilinear:n`` (random bilinear objective, box bounds and
linear rows on each block) and pooling instances of ``benchmarks/gop_instances``. Every solve runs in its own
process (``run_case`` of ``scale_energy_gop``). Columns: gop's lower and upper bound, the objective that Pyomo's
``value()`` gives at the loaded point and the largest row violation there, SCIP's bounds (``scip_direct``, same
time limit), and ``rel`` = (gop upper - SCIP upper) / max(1, |SCIP upper|) (> 0: gop's point is worse).
For NMF, ``altmin`` is the best of ``--am-starts`` runs of alternating nonnegative least squares over the boxes
(``scipy.optimize.lsq_linear`` per column of ``H`` and row of ``W``, random starts seeded 0, 1, ..., each to a
round that gains less than 1e-13 of the objective or 2000 rounds): the value of a local method that the incumbent
should reach.

Run: ``OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/gop_incumbent.py`` (about 6 min; ``--quick``: NMF and
two instances at 5 s). Timings are from a shared machine: ``uptime`` is printed.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.gop_instances.multiconvex import alternating_nnls as altmin  # noqa: E402
from benchmarks.scale_energy_gop import fmt, run_case


def nmf_data(p, q, r):
    """The matrix of ``gop_model('nmf:p:q:r')`` (same seed and construction)."""
    rng = np.random.default_rng(0)
    return rng.random((p, r)) @ rng.random((r, q)) + 0.05 * rng.random((p, q))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--times", type=float, nargs="+", default=[5.0, 20.0])
    ap.add_argument("--am-starts", type=int, default=3)
    ap.add_argument("--cases", nargs="+", default=None)
    a = ap.parse_args()
    cases = a.cases or (["nmf:30:30:5", "bilinear:50", "foulds3_p"] if a.quick else
                        ["nmf:30:30:5", "nmf:20:20:4", "bilinear:50", "bilinear:100", "bilinear:200",
                         "foulds3_p", "foulds4_pq", "adhya3_p"])
    times = [5.0] if a.quick else a.times
    print(f"{'instance':<13} {'vars':>5} {'limit':>5} {'gop s':>6} {'gop lower':>13} {'gop upper':>13} "
          f"{'value()':>13} {'viol':>8} {'SCIP lower':>13} {'SCIP upper':>13} {'rel':>9} {'altmin':>13}")
    for name in cases:
        am = None
        if name.startswith("nmf"):
            p, q, r = (int(v) for v in name.split(":")[1:])
            am = min(altmin(nmf_data(p, q, r), r, s) for s in range(a.am_starts))
        for tl in times:
            g = run_case("gop", name, "gop", {"time_limit": tl})
            s = run_case("gop", name, "scip", {"time_limit": tl})
            if "error" in g or "error" in s:
                print(f"{name:<13} error: {g.get('error') or s.get('error')}")
                continue
            rel = None
            if g.get("upper") is not None and s.get("upper") is not None:
                rel = (g["upper"] - s["upper"]) / max(1.0, abs(s["upper"]))
            print(f"{name:<13} {g['n']:>5} {tl:>5g} {g['time']:>6.1f} {fmt(g.get('lower'), '.7g'):>13} "
                  f"{fmt(g.get('upper'), '.9g'):>13} {fmt(g.get('value'), '.9g'):>13} {fmt(g.get('viol'), '.1e'):>8} "
                  f"{fmt(s.get('lower'), '.7g'):>13} {fmt(s.get('upper'), '.9g'):>13} {fmt(rel, '+.1e'):>9} "
                  f"{fmt(am, '.9g'):>13}", flush=True)
    print("\nload average:", os.getloadavg())


if __name__ == "__main__":
    main()
