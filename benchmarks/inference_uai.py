"""Every energy method on binary pairwise UAI competition files, against ``exact``.

For each model file (an optional evidence file follows it with ``--evid``), prints ln Z and log10 Z (the
UAI "PR" answer) of ``exact``, then per method its ln Z, the error, the reported standard error or
certified bound, the mean |P(x=1) error| of the marginals and the time. A published log10 Z can be given
with ``--published`` (one per file) and is compared with ``exact``.

Run: ``PYTHONPATH=. python benchmarks/inference_uai.py tests/data/uai/grid10x10.f10.uai --published 303.09``
(the files are read from where they are; nothing is copied).
"""
import argparse
import math
import time

import numpy as np

import varopt
from varopt.program.energy import EnergyModel

METHODS = [("meanfield", {}), ("lbp", {}), ("trw", {}), ("ais", {"seed": 0}), ("sasmc", {"seed": 0}),
           ("cmf", {"seed": 0})]


def run(name, prog, **kw):
    t = time.perf_counter()
    r = varopt.get_solver(name).solve(prog, **kw)
    return r, time.perf_counter() - t


def report(path, evid, published, methods):
    e = EnergyModel.from_uai(path, evid)
    prog = e.to_program()
    ex, t = run("exact", prog)
    lz = ex.info["log_partition"]
    mu = np.array([ex.info["marginals"][nm] for nm in e.names])
    pub = "" if published is None else f", published log10 Z {published} (diff {lz / math.log(10) - published:+.4f})"
    print(f"\n{path}{' | ' + str(evid) if evid else ''}: {e.n} free binary variables, {e.m} couplings; "
          f"exact ln Z = {lz:.6f}, log10 Z = {lz / math.log(10):.6f} ({t:.2f} s){pub}")
    print(f"{'method':<10} {'ln Z':>12} {'error':>10} {'se / bound':>14} {'mean|dP|':>9} {'time s':>7}  status")
    for name, kw in methods:
        r, t = run(name, prog, **kw)
        est = r.info["log_partition"]
        extra = ""
        if "log_partition_se" in r.info:
            extra = f"se {r.info['log_partition_se']:.3g}"
        elif "log_partition_upper" in r.info:
            extra = f"<= {r.info['log_partition_upper']:.4f}"
        elif "log_partition_lower" in r.info:
            extra = f">= {r.info['log_partition_lower']:.4f}"
        marg = r.info.get("marginals")
        dmu = np.mean(np.abs(np.array([marg[nm] for nm in e.names]) - mu)) if marg else float("nan")
        print(f"{name:<10} {est:>12.4f} {est - lz:>+10.4f} {extra:>14} {dmu:>9.4f} {t:>7.2f}  {r.status}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help=".uai model files")
    ap.add_argument("--evid", nargs="*", default=None, help="evidence files, one per model file")
    ap.add_argument("--published", nargs="*", type=float, default=None, help="published log10 Z, one per file")
    ap.add_argument("--methods", default=",".join(m for m, _ in METHODS), help="comma-separated methods")
    a = ap.parse_args()
    for opt in ("evid", "published"):
        if getattr(a, opt) is not None and len(getattr(a, opt)) != len(a.files):
            ap.error(f"--{opt} takes one entry per file ({len(a.files)})")
    chosen = [(m, kw) for m, kw in METHODS if m in a.methods.split(",")]
    for k, path in enumerate(a.files):
        report(path, a.evid[k] if a.evid else None, a.published[k] if a.published else None, chosen)


if __name__ == "__main__":
    main()
