"""Table of benchmarks/gop_time_limits.py's output (python gop_time_limits_table.py OUT.jsonl). Overrun table: per limit and group, max and 99th percentile of (solver clock - limit) and (wall - limit),
the compile (wall - solver clock); flags over max(0.5, 0.1 limit) on the solver clock (wall for CVXPY)."""
import json, sys, numpy as np, collections
def grp(r):
    g = {"kit": "MINLPLib kit", "coll": "gop_instances", "poly": "random polynomials", "free": "free products",
         "convex": "convex cases (CVXPY)"}[r["src"]]
    return g + (" mode='gop'" if r["opts"].get("mode") == "gop" else "")
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows:
    by[(r["tl"], grp(r))].append(r)
print("| limit s | programs | n | solver clock - limit: max / p99 | wall - limit: max / p99 | compile (wall - clock): max |")
print("|---|---|---|---|---|---|")
for tl in sorted({k[0] for k in by}):
    for g in sorted({k[1] for k in by if k[0] == tl}):
        rs = by[(tl, g)]
        run = np.array([r["run"] - tl for r in rs if r.get("run") is not None] or [np.nan])
        wall = np.array([r["wall"] - tl for r in rs if r.get("wall") is not None])
        comp = np.array([r["wall"] - r["run"] for r in rs if r.get("run") is not None] or [np.nan])
        print(f"| {tl:g} | {g} | {len(rs)} | {np.nanmax(run):+.2f} / {np.nanpercentile(run, 99):+.2f} | {wall.max():+.2f} / {np.percentile(wall, 99):+.2f} | {np.nanmax(comp):.2f} |")
    allr = [r for k, v in by.items() if k[0] == tl for r in v]
    run = np.array([r["run"] - tl for r in allr if r.get("run") is not None]); wall = np.array([r["wall"] - tl for r in allr])
    print(f"| {tl:g} | **all** | {len(allr)} | {run.max():+.2f} / {np.percentile(run, 99):+.2f} | {wall.max():+.2f} / {np.percentile(wall, 99):+.2f} | |")
print()
for r in rows:
    tl = r["tl"]; thr = max(0.5, 0.1 * tl)
    v = (r["run"] if r.get("run") is not None else r["wall"]) - tl
    if v > thr:
        print(f"OVER tl={tl:g} {grp(r)} {r['name']}: clock {r.get('run') and round(r['run'],2)} wall {r['wall']:.2f} {str(r['status'])[:60]} load {r['load']:.1f}")
