"""Is cmf's reported standard error honest? One run (``replicates=1``) against the default
(``replicates='auto'``: 4 runs sharing the same particles) on strongly coupled models, against ``exact``.

Per model and configuration, over seeded runs: the median and largest |log Z error|, the median reported
standard error, the median |error| / SE (when an SE is reported), the fraction of runs whose error is
*accounted for* ("honest": |error| <= 3 SE, or the value is flagged as a certified bound, or the runs are
flagged as disagreeing), the fractions reported as a bound and flagged, the mean |marginal error| and
the time, with the time ratio to one run.

Run: ``PYTHONPATH=. python benchmarks/cmf_replicates.py [--seeds 10] [--big]`` (``--big`` adds the complete
graph on 26 nodes, instance 105 of Carbonetto 2009 §4.4, and the 12 x 12 grid, instance 100).
"""
import argparse
import time
import warnings
from pathlib import Path

import numpy as np

import varopt
from varopt.formulations import ising
from varopt.program.energy import EnergyModel

CONFIGS = [("replicates=1", {"replicates": 1}), ("auto (4)", {})]
UAI = Path(__file__).resolve().parent.parent / "tests" / "data" / "uai" / "grid4x4.uai"


def models(big):
    rng = np.random.default_rng(5)
    n = 12
    I, J = np.triu_indices(n, 1)
    yield "glass 3x3 T=0.3", ising.spin_glass(3, 3, T=0.3, seed=1)
    yield "ferro 4x4 J=1 h=0.1", ising.lattice(4, 4, J=1.0, h=0.1, periodic=False)
    yield "complete 12, J=±1", EnergyModel(-rng.uniform(-1, 1, n), I, J, -rng.choice([-1.0, 1.0], I.size))
    yield "UAI grid4x4 (pgmpy)", EnergyModel.from_uai(UAI)
    if big:
        yield "complete 26 (inst. 105)", ising.random_field_model("complete", 26, seed=105)
        yield "grid 12x12 (inst. 100)", ising.random_field_model("grid", 12, seed=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--big", action="store_true")
    a = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)   # the disagreement warning is counted, not printed
    print("| model | config | med abs err | max abs err | med SE | med abs err/SE | honest | bound | flagged "
          "| mean abs dP | time s | time ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, e in models(a.big):
        prog = e.to_program()
        ex = varopt.get_solver("exact").solve(prog)
        lz, mu = ex.info["log_partition"], np.array([ex.info["marginals"][k] for k in prog.names])
        base = None
        seeds = a.seeds if e.n < 100 else max(2, a.seeds // 5)
        for cname, kw in CONFIGS:
            err, se, honest, bound, flag, dmu, ts = [], [], [], [], [], [], []
            for s in range(seeds):
                t = time.perf_counter()
                r = varopt.get_solver("cmf").solve(prog, seed=s, **kw)
                ts.append(time.perf_counter() - t)
                d = r.info["log_partition"] - lz
                sd = r.info.get("log_partition_se", np.nan)
                isb = bool(r.info.get("log_partition_is_bound"))
                fl = bool(r.info.get("replicates_disagree"))
                err.append(d)
                se.append(sd)
                bound.append(isb)
                flag.append(fl)
                honest.append((isb and d <= 1e-9) or fl or (not isb and abs(d) <= 3 * sd))
                dmu.append(np.mean(np.abs(np.array([r.info["marginals"][k] for k in prog.names]) - mu)))
            err, se = np.abs(err), np.array(se)
            t = float(np.mean(ts))
            base = t if base is None else base
            ratio = np.nanmedian(err / se) if np.isfinite(se).any() else np.nan
            print(f"| {name} | {cname} | {np.median(err):.3g} | {err.max():.3g} | {np.nanmedian(se) if np.isfinite(se).any() else np.nan:.3g} "
                  f"| {ratio:.3g} | {np.mean(honest):.2f} | {np.mean(bound):.2f} | {np.mean(flag):.2f} "
                  f"| {np.mean(dmu):.3f} | {t:.2f} | {t / base:.2f} |", flush=True)


if __name__ == "__main__":
    main()
