"""gop and the energy-model methods at the sizes users bring: time, peak memory, result against a reference.

Every case runs in its own process (peak RSS is the child's ``ru_maxrss``; the interpreter with numpy,
scipy and pyomo loaded is ~100 MB of it). References:

* periodic ferromagnets (30 x 30, 100 x 100 tori): exact log Z of Kaufman (1949)
  (``varopt.formulations.kaufman``); ``err`` is the method's log Z minus it, and a bound is checked
  (meanfield <= log Z <= trw when converged);
* a 14 x 14 open ±J glass: ``exact`` (variable elimination, width 14);
* random 3-regular graphs (5000 nodes) and a complete graph on 100 nodes: no exact reference;
  the rows show that ``exact`` refuses quickly and the bounds are ordered (meanfield <= trw);
* per-iteration cost: ``meanfield`` and ``lbp`` time per iteration against a plain numpy/scipy sweep
  of the same update on the same graph (a reference implementation written here), ratio column;
* gop: random bilinear programs and NMF written in Pyomo, pooling problems of
  ``benchmarks/gop_instances``; SCIP (``scip_direct``) with its own time limit is the reference,
  the gop lower bound must be <= SCIP's upper bound and gop's point is evaluated by pyomo ``value()``.
  ``benchmarks/gop_incumbent.py`` runs the larger gop models (NMF 30 x 30 rank 5, bilinear 50-200, pooling) at
  5 and 20 s against SCIP and alternating NNLS (docs/gop.md §8f).

Run: ``OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scale_energy_gop.py`` (about 4 min with the
defaults; ``--quick`` about 1 min; ``--gop-time 20 --scip-time 40`` for longer gop runs). Timings are from
a shared machine: print ``uptime`` next to them.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ----------------------------------------------------------------------------------------------- instances
def energy(name):
    from varopt.formulations import ising
    from varopt.program.energy import EnergyModel
    kind, *a = name.split(":")
    if kind == "torus":
        L, T = int(a[0]), float(a[1])
        return ising.lattice(L, L, 1.0, 0.0, True, T)
    if kind == "glass":
        return ising.spin_glass(int(a[0]), int(a[0]), T=float(a[1]), periodic=False, seed=1)
    if kind == "regular":
        import networkx as nx
        n, d, c = int(a[0]), int(a[1]), float(a[2])
        G = nx.random_regular_graph(d, n, seed=0)
        i, j = np.array(G.edges()).T
        rng = np.random.default_rng(0)
        return EnergyModel(rng.uniform(-0.5, 0.5, n), i, j, rng.choice([-c, c], i.size))
    if kind == "complete":
        return ising.random_field_model("complete", int(a[0]), 1.0, float(a[1]), seed=0)
    raise ValueError(name)


def reference(name):
    kind, *a = name.split(":")
    if kind == "torus":
        from varopt.formulations.kaufman import kaufman_log_partition
        K = 1.0 / float(a[1])
        return kaufman_log_partition(K, K, int(a[0]), int(a[0])), "Kaufman"
    if kind == "glass":
        import varopt
        return varopt.get_solver("exact").solve(energy(name).to_program()).info["log_partition"], "exact"
    return None, "-"


def gop_model(name):
    import pyomo.environ as pyo
    kind, *a = name.split(":")
    if kind == "bilinear":
        n = int(a[0])
        rng = np.random.default_rng(0)
        Q = rng.normal(size=(n, n)) * (rng.random((n, n)) < 0.2)
        c, d = rng.normal(size=n), rng.normal(size=n)
        rows = max(2, n // 4)
        A, B = rng.random((rows, n)), rng.random((rows, n))
        m = pyo.ConcreteModel()
        m.x = pyo.Var(range(n), bounds=(0, 10))
        m.y = pyo.Var(range(n), bounds=(0, 10))
        m.obj = pyo.Objective(expr=sum(c[i] * m.x[i] + d[i] * m.y[i] for i in range(n))
                              + sum(Q[i, j] * m.x[i] * m.y[j] for i in range(n) for j in range(n) if Q[i, j]))
        m.ax = pyo.Constraint(range(rows), rule=lambda m, r: sum(A[r, i] * m.x[i] for i in range(n)) <= 2.5 * n)
        m.by = pyo.Constraint(range(rows), rule=lambda m, r: sum(B[r, i] * m.y[i] for i in range(n)) <= 2.5 * n)
        return m
    sys.path.insert(0, ROOT)
    if kind == "nmf":
        from benchmarks.gop_large_models import nmf_pyomo
        return nmf_pyomo(seed=0, p=int(a[0]), q=int(a[1]), r=int(a[2]))
    from benchmarks.gop_instances import get
    inst = get(kind)
    return inst.builder(*inst.args)


# ----------------------------------------------------------------------------------------------- one case
def numpy_meanfield_sweep(e, iters, restarts=4):
    """Reference: undamped coordinate ascent by colour classes, one sparse product per class, on ``restarts``
    rows at once as ``meanfield`` does by default (its bound F, computed every iteration, is not here)."""
    from varopt.oracles.colouring import colour_classes
    J = e.J.tocsr()
    classes = colour_classes(e.n, e.i, e.j)
    Jc = [J[idx] for idx in classes]
    mu = np.zeros((e.n, restarts))
    t = time.perf_counter()
    for _ in range(iters):
        for idx, Ji in zip(classes, Jc):
            mu[idx] = np.tanh(-e.h[idx, None] - Ji @ mu)  # log-potential t = -q
    return (time.perf_counter() - t) / iters


def numpy_lbp_flood(e, iters):
    """Reference: flooding sum-product on log-odds messages, u = atanh(tanh(w) tanh(cavity))."""
    src, dst = np.r_[e.i, e.j], np.r_[e.j, e.i]
    w = -np.r_[e.w, e.w]  # log-potential t = -q
    rev = np.r_[np.arange(e.m, 2 * e.m), np.arange(e.m)]
    u = np.zeros(2 * e.m)
    t = time.perf_counter()
    for _ in range(iters):
        field = -e.h + np.bincount(dst, u, minlength=e.n)
        cav = field[src] - u[rev]
        u = 0.5 * u + 0.5 * np.arctanh(np.tanh(w) * np.tanh(cav))
    return (time.perf_counter() - t) / iters


def case_energy(name, method, opts):
    import varopt
    e = energy(name)
    prog = e.to_program()
    t = time.perf_counter()
    try:
        r = varopt.get_solver(method).solve(prog, **opts)
    except Exception as exc:  # a refusal is a result here (exact on wide models)
        return {"time": time.perf_counter() - t, "error": f"{type(exc).__name__}: {str(exc)[:90]}"}
    dt = time.perf_counter() - t
    info = r.info or {}
    mg = np.array(list((info.get("marginals") or {}).values()))
    out = {"time": dt, "status": r.status, "logZ": info.get("log_partition"), "se": info.get("log_partition_se"),
           "lower": info.get("log_partition_lower"), "upper": info.get("log_partition_upper"),
           "iters": r.iterations, "n": e.n, "m": e.m,
           "marg_ok": bool(mg.size == 0 or (np.isfinite(mg).all() and mg.min() >= 0 and mg.max() <= 1))}
    if method in ("meanfield", "lbp") and r.iterations:
        out["per_iter"] = dt / r.iterations
        out["ref_per_iter"] = (numpy_meanfield_sweep if method == "meanfield" else numpy_lbp_flood)(e, 30)
    return out


def case_gop(name, which, tl):
    import pyomo.environ as pyo

    import varopt  # noqa: F401  (registers the Pyomo solver 'gop')
    m = gop_model(name)
    nv = sum(1 for _ in m.component_data_objects(pyo.Var))
    t = time.perf_counter()
    if which == "scip":
        from benchmarks.gop_instances.scip import solve_scip
        r = solve_scip(m, time_limit=tl, gap=1e-6)
        return {"time": time.perf_counter() - t, "status": r["status"], "lower": r["lower"], "upper": r["upper"],
                "n": nv}
    res = pyo.SolverFactory("gop").solve(m, time_limit=tl)
    r = res.varopt_result
    obj = next(m.component_data_objects(pyo.Objective, active=True))
    viol = 0.0
    for c in m.component_data_objects(pyo.Constraint, active=True):
        b = pyo.value(c.body)
        viol = max(viol, (pyo.value(c.lower) - b) if c.has_lb() else 0.0,
                   (b - pyo.value(c.upper)) if c.has_ub() else 0.0)
    return {"time": time.perf_counter() - t, "status": r.status, "lower": r.lower_bound, "upper": r.upper_bound,
            "value": pyo.value(obj), "viol": viol, "iters": r.iterations, "n": nv}


def child(args):
    kind, name, method, opts = args
    sys.path.insert(0, ROOT)
    out = case_energy(name, method, json.loads(opts)) if kind == "energy" else \
        case_gop(name, method, float(json.loads(opts)["time_limit"]))
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out, default=float))


def run_case(kind, name, method, opts, timeout=600):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
               OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    p = subprocess.run([sys.executable, __file__, "--child", kind, name, method, json.dumps(opts)],
                       capture_output=True, text=True, env=env, timeout=timeout)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:90]}


def fmt(v, spec=".6g"):
    return "-" if v is None else format(v, spec)


# ----------------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="30 x 30 and the 1000-node graph only, short gop runs")
    ap.add_argument("--sample-time", type=float, default=10.0, help="time_limit of ais, sasmc, cmf (s)")
    ap.add_argument("--gop-time", type=float, default=10.0, help="time_limit of gop (s)")
    ap.add_argument("--scip-time", type=float, default=20.0, help="time limit of SCIP (s)")
    a = ap.parse_args()
    st = a.sample_time
    energy_cases = [
        ("torus:30:2.5", ["exact", "meanfield", "lbp", "trw", "ais", "sasmc", "cmf"]),
        ("torus:30:1.5", ["meanfield", "lbp", "trw", "ais"]),
        ("glass:14:1.0", ["meanfield", "lbp", "trw", "ais", "sasmc", "cmf"]),
        ("regular:1000:3:0.5", ["exact", "meanfield", "lbp", "trw"]),
    ]
    if not a.quick:
        energy_cases += [
            ("torus:100:2.5", ["exact", "meanfield", "lbp", "trw", "sasmc"]),
            ("regular:5000:3:0.5", ["exact", "meanfield", "lbp", "trw"]),
            ("complete:100:1.0", ["exact", "meanfield", "lbp", "trw", "ais"]),
        ]
    print(f"{'instance':<20} {'n':>6} {'edges':>6} {'method':<10} {'time s':>8} {'RSS MB':>7} {'status':<15} "
          f"{'log Z':>13} {'bound':>13} {'ref':>13} {'err':>9} {'s/iter':>9} {'numpy':>9} {'ratio':>6}")
    for name, methods in energy_cases:
        ref, _ = reference(name)
        bounds = {}
        for method in methods:
            opts = {"time_limit": st} if method in ("ais", "sasmc", "cmf") else {}
            if method == "trw":
                opts = {"time_limit": 120.0}
            r = run_case("energy", name, method, opts)
            if "error" in r:
                print(f"{name:<20} {'':>6} {'':>6} {method:<10} {fmt(r.get('time'), '.3g'):>8} {'':>7} "
                      f"refused: {r['error']}")
                continue
            lz = r.get("logZ")
            err = None if (lz is None or ref is None) else lz - ref
            if r.get("lower") is not None:
                bounds.setdefault("lower", []).append((method, r["lower"]))
            if r.get("upper") is not None:
                bounds.setdefault("upper", []).append((method, r["upper"]))
            ratio = r["per_iter"] / r["ref_per_iter"] if r.get("ref_per_iter") else None
            bound = r.get("lower") if r.get("lower") is not None else r.get("upper")
            print(f"{name:<20} {r['n']:>6} {r['m']:>6} {method:<10} {r['time']:>8.3g} {r['rss_mb']:>7.0f} "
                  f"{r['status']:<15} {fmt(lz, '.6f'):>13} {fmt(bound, '.6f'):>13} {fmt(ref, '.6f'):>13} "
                  f"{fmt(err, '+.3g'):>9} "
                  f"{fmt(r.get('per_iter'), '.2e'):>9} {fmt(r.get('ref_per_iter'), '.2e'):>9} {fmt(ratio, '.2f'):>6}"
                  + ("" if r["marg_ok"] else "  MARGINALS OUT OF [0,1]"))
        lo = max((v for _, v in bounds.get("lower", [])), default=None)
        up = min((v for _, v in bounds.get("upper", [])), default=None)
        ok = [lo is None or ref is None or lo <= ref + 1e-6, up is None or ref is None or up >= ref - 1e-6,
              lo is None or up is None or lo <= up + 1e-6]
        print(f"{'':<20} certified bounds: lower {fmt(lo)} upper {fmt(up)} -> {'ordered' if all(ok) else 'VIOLATED'}")
    gop_cases = ["bilinear:25", "nmf:10:10:2", "haverly1_p"] + ([] if a.quick else ["bilinear:100", "foulds3_p"])
    print(f"\n{'instance':<14} {'vars':>5} {'solver':<6} {'time s':>8} {'RSS MB':>7} {'status':<12} {'lower':>14} "
          f"{'upper':>14} {'value()':>14} {'viol':>8} {'lb<=scip ub':>11}")
    for name in gop_cases:
        g = run_case("gop", name, "gop", {"time_limit": a.gop_time})
        s = run_case("gop", name, "scip", {"time_limit": a.scip_time})
        for which, r in (("gop", g), ("scip", s)):
            if "error" in r:
                print(f"{name:<14} {'':>5} {which:<6} error: {r['error']}")
                continue
            ok = "-"
            if which == "gop" and s.get("upper") is not None and r.get("lower") is not None:
                ok = "yes" if r["lower"] <= s["upper"] + 1e-6 * max(1.0, abs(s["upper"])) else "NO"
            print(f"{name:<14} {r['n']:>5} {which:<6} {r['time']:>8.3g} {r['rss_mb']:>7.0f} {r['status']:<12} "
                  f"{fmt(r.get('lower'), '.8g'):>14} {fmt(r.get('upper'), '.8g'):>14} "
                  f"{fmt(r.get('value'), '.8g'):>14} {fmt(r.get('viol'), '.1e'):>8} {ok:>11}")
    print("\nload average:", os.getloadavg())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    else:
        main()
