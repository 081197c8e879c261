"""Benchmark: how far past ``time_limit`` gop returns (docs/gop.md §13m).

Every program of the chosen sources is solved with ``time_limit`` = each of LIMITS, one at a time, each in a forked
child (3 GB address space, killed at 3 t + 60 s); one JSON line per solve: the solver's own clock
(``result.wall_time``, from the start of the run), the wall clock around ``solve`` (the difference is the compile),
status and bounds, the load average.

    python benchmarks/gop_time_limits.py OUT.jsonl 0.5,2,0.05 coll,collgop,poly,free,convex [name filter, or =name]

SOURCES (comma list): ``coll`` / ``collgop`` (``gop_instances`` with their options / with ``mode='gop'``), ``poly``
(``gop_random_polynomials.py`` seeds 0-15), ``free`` (``gop_free_products.py``), ``convex`` (``gop_convex_cases.py``
through CVXPY), ``kit`` / ``kitgop`` (MINLPLib instances in JuMP form, translated by the kit's ``jump2pyomo``; the
kit lives outside the repository: set ``VAROPT_MINLP_KIT`` to its directory), ``large`` (``gop_large_models.py``:
hundreds to thousands of variables, Pyomo and CVXPY; also records the user's own evaluation of the loaded point,
``user_obj`` and ``viol``).
"""
import json, multiprocessing as mp, os, sys, time
KIT = os.environ.get("VAROPT_MINLP_KIT", "")
if KIT:
    sys.path.insert(0, KIT)
import numpy as np  # noqa: F401  (imported before the clocks start, as the solvers use it)
import pyomo.environ as pyo
import varopt, highspy  # noqa
import threadpoolctl  # noqa

def cases(sources):
    out = []
    if "kit" in sources or "kitgop" in sources:
        names = sorted(f[:-3] for f in os.listdir(os.path.join(KIT, "jl")) if f.endswith(".jl"))
        for n in names:
            if "kit" in sources: out.append(("kit", n, {}))
            if "kitgop" in sources: out.append(("kit", n, {"mode": "gop"}))
    if "coll" in sources or "collgop" in sources:
        from gop_instances import instances
        for inst in instances():
            if "coll" in sources: out.append(("coll", inst.name, dict(inst.options or {})))
            if "collgop" in sources: out.append(("coll", inst.name, {**(inst.options or {}), "mode": "gop"}))
    if "poly" in sources:
        for s in range(0, 16): out.append(("poly", str(s), {}))
    if "free" in sources:
        for k in ("fact", "bls0", "bls1", "pool"): out.append(("free", k, {}))
    if "convex" in sources:
        import gop_convex_cases as C
        for i, (nm, _) in enumerate(C.cases()): out.append(("convex", str(i), {}))
    if "large" in sources:
        import gop_large_models as G
        for nm in G.MODELS: out.append(("large", nm, {}))
    return out

def build(src, name):
    if src == "kit":
        import jump2pyomo as J
        return J.build(open(os.path.join(KIT, "jl", name + ".jl")).read())
    if src == "coll":
        from gop_instances import get
        return get(name).build()
    if src == "poly":
        import gop_random_polynomials as P
        return P.instance(int(name))[0]()
    if src == "free":
        import gop_free_products as F
        mk = {"fact": lambda: F.factorisation(8, 2, 0.1, 0)[0], "bls0": lambda: F.bilinear_ls(0)[0],
              "bls1": lambda: F.bilinear_ls(1)[0], "pool": lambda: F.pooling_row()[0]}[name]()
        return mk()
    if src == "convex":
        import gop_convex_cases as C
        return list(C.cases())[int(name)][1]()
    if src == "large":
        import gop_large_models as G
        return G.MODELS[name][1]()

def child(src, name, opts, tl, q):
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
    out = dict(src=src, name=name, opts=opts, tl=tl)
    try:
        m = build(src, name)
        t0 = time.perf_counter()
        if src == "large":
            import gop_large_models as G
            front = G.MODELS[name][0]
            if front == "cvxpy":
                m[0].solve(method="gop", time_limit=tl, **opts)
                r = m[0].varopt_result
            else:
                r = pyo.SolverFactory("gop").solve(m, time_limit=tl, load_solutions=True, **opts).varopt_result
            out["wall"] = time.perf_counter() - t0
            obj, viol = G.evaluate(front, m)
            out.update(status=r.status, run=r.wall_time, lower=r.lower_bound, upper=r.upper_bound,
                       mode=(r.info or {}).get("mode"), user_obj=obj, viol=viol, maximize=bool(getattr(r, "maximize", False)))
        elif src == "convex":
            m.solve(method="gop", time_limit=tl, **opts)
            out["wall"] = time.perf_counter() - t0
            r = getattr(m, "solver_stats", None)
            out["status"] = m.status
            out["run"] = None
        else:
            res = pyo.SolverFactory("gop").solve(m, time_limit=tl, **opts)
            out["wall"] = time.perf_counter() - t0
            r = res.varopt_result
            out.update(status=r.status, run=r.wall_time, lower=r.lower_bound, upper=r.upper_bound,
                       mode=(r.info or {}).get("mode"))
    except Exception as e:
        out["wall"] = time.perf_counter() - t0 if "t0" in dir() else None
        out["status"] = "EXC " + type(e).__name__ + ": " + str(e)[:80]
    q.put(out)

def main():
    path, limits, sources = sys.argv[1], [float(x) for x in sys.argv[2].split(",")], sys.argv[3].split(",")
    filt = sys.argv[4] if len(sys.argv) > 4 else None
    cs = cases(sources)
    if filt:  # a substring of the names, or "=name" for one name exactly
        cs = [c for c in cs if (c[1] == filt[1:] if filt.startswith("=") else filt in c[1])]
    ctx = mp.get_context("fork")
    with open(path, "a") as f:
        for tl in limits:
            for src, name, opts in cs:
                q = ctx.Queue(); p = ctx.Process(target=child, args=(src, name, opts, tl, q))
                t0 = time.perf_counter(); p.start()
                hard = 3 * tl + 60
                try: out = q.get(timeout=hard)
                except Exception: out = dict(src=src, name=name, opts=opts, tl=tl, status="killed", wall=time.perf_counter() - t0)
                p.join(5)
                if p.is_alive(): p.kill(); p.join()
                out["load"] = os.getloadavg()[0]
                f.write(json.dumps(out, default=str) + "\n"); f.flush()

if __name__ == "__main__":
    main()
