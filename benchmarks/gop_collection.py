"""Benchmark: varopt ``gop`` vs SCIP on the public collection of bilinear/biconvex instances.

Every instance of ``benchmarks/gop_instances`` (published global optima; see that package
for sources) is built twice, fresh, and solved once with ``SolverFactory('gop')`` and once
with SCIP (``scip_direct``, silent), both with the same per-instance time limit.  The table
shows the published optimum, gop's status / value / lower bound / time, SCIP's status /
value / time, the ratio t_gop / t_scip, and a flag:

* ``WRONG CERT`` -- gop returned ``optimal`` but its value or its proven bound differs from
  the published optimum by more than 1e-6 max(1, |optimum|), or the bound is on the wrong side of it;
* ``BAD BOUND`` -- gop stopped without a certificate and its proven bound is on the wrong
  side of the published optimum (beyond 1e-6 max(1, |optimum|));
* ``NO EVAL``   -- the point gop loaded into the model does not evaluate the objective, or the
  objective there differs from gop's reported value beyond the tolerance.

gop runs in a child process with a hard wall-clock limit (``--hard-factor`` x time limit + 15 s)
and an address-space limit (``--memory-gb``) so that one instance cannot stall the run;
such a stop is reported as status ``killed``.  Errors (``ModelStructureError`` ...) are shown
as the error class and the first words of the message.  Held-out instances (every third of
the sorted list, see ``gop_instances.heldout_rule``) are reported in a separate table.

    python benchmarks/gop_collection.py                       # everything, 30 s per solve
    python benchmarks/gop_collection.py --family pooling-p --time-limit 10
    python benchmarks/gop_collection.py --instances haverly1_p fv1990 --no-scip
    python benchmarks/gop_collection.py --exclude-heldout      # the tuning set only
    python benchmarks/gop_collection.py --bgmm                 # also the BGMM grid (benchmarks/gop_bgmm.py)
    python benchmarks/gop_collection.py --bgmm-only --bgmm-N 10 20 --bgmm-K 2

Timings are wall-clock on a shared machine (noisy); both include compiling the Pyomo model, neither
includes importing the solver's Python module (HiGHS / pyscipopt are imported before the clocks start).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import math
import multiprocessing as mp
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

TOL = 1e-6


def rel_diff(a, b):
    # relative to max(1, |b|): an optimum of 0 has no relative accuracy (gop's default certificate
    # is the same, UBD - LBD <= 1e-6 max(1, |UBD|))
    return abs(a - b) / max(abs(b), 1.0)


def _warm_imports():
    """Import the modules gop (HiGHS, threadpoolctl) and SCIP load lazily at their first solve, outside
    the timings: each gop solve runs in a fresh child while SCIP's module stays loaded in this process
    after its first solve, so without this every gop time carried ~0.07 s of imports and SCIP's none."""
    for mod in ("highspy", "threadpoolctl", "pyscipopt"):
        try:
            __import__(mod)
        except ImportError:
            pass


def _gop_child(name, time_limit, memory_gb, queue):
    """Solve one instance with gop (in a child process); put a result dict on ``queue``."""
    try:
        import resource
        if memory_gb:
            lim = int(memory_gb * 2 ** 30)
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    except (ImportError, ValueError, OSError):
        pass
    out = {"status": "error", "value": None, "bound": None, "time": None, "error": None, "evaluates": None,
           "model_value": None}
    try:
        import pyomo.environ as pyo

        import varopt  # noqa: F401  (registers SolverFactory('gop'))
        from gop_instances import get
        _warm_imports()
        inst = get(name)
        m = inst.build()
        t0 = time.perf_counter()
        res = pyo.SolverFactory("gop").solve(m, time_limit=time_limit, **(inst.options or {}))
        out["time"] = time.perf_counter() - t0
        r = res.varopt_result
        out["status"] = r.status
        maximize = inst.sense == "max"
        out["value"] = r.lower_bound if maximize else r.upper_bound
        if out["value"] is None:
            out["value"] = r.objective
        out["bound"] = r.upper_bound if maximize else r.lower_bound
        if getattr(res, "varopt_loaded", False):
            try:
                out["model_value"] = float(pyo.value(m.obj))
                out["evaluates"] = True
            except Exception as e:  # the loaded point is outside the domain of a term
                out["evaluates"] = False
                out["error"] = f"value(obj): {type(e).__name__}: {e}"
    except MemoryError:
        out["status"], out["error"] = "error", f"MemoryError (limit {memory_gb} GB)"
    except Exception as e:
        out["status"] = "error"
        out["error"] = f"{type(e).__name__}: {' '.join(str(e).split()[:12])}"
    queue.put(out)


def run_child(target, args, hard, killed_error, **killed_fields):
    """``target(*args, queue)`` in a forked child; its answer, or a ``killed`` record when none arrives within
    ``hard`` seconds (the child is then killed)."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    t0 = time.perf_counter()
    p.start()
    res = None
    try:
        res = q.get(timeout=hard)
    except Exception:
        pass
    p.join(timeout=5)
    if p.is_alive():
        p.kill()
        p.join()
    if res is None:
        res = {"status": "killed", "value": None, "bound": None, "time": time.perf_counter() - t0,
               "error": killed_error, **killed_fields}
    return res


def run_gop(name, time_limit, hard_factor, memory_gb):
    hard = hard_factor * time_limit + 15.0
    return run_child(_gop_child, (name, time_limit, memory_gb), hard,
                     f"no answer within the hard limit {hard:.0f} s (time_limit={time_limit:g})",
                     evaluates=None, model_value=None)


def run_scip(inst, time_limit):
    from gop_instances.scip import solve_scip
    try:
        r = solve_scip(inst.build(), time_limit=time_limit, gap=1e-9)
    except Exception as e:
        return {"status": "error", "value": None, "lower": None, "upper": None, "time": None,
                "error": f"{type(e).__name__}: {' '.join(str(e).split()[:12])}"}
    return r


def flags(inst, g):
    """The correctness flags of one gop result against the published optimum."""
    pub, out = inst.optimum, []
    maximize = inst.sense == "max"
    b = g["bound"]
    bound_wrong = b is not None and math.isfinite(b) and (
        (b > pub + TOL * max(abs(pub), 1.0)) if not maximize else (b < pub - TOL * max(abs(pub), 1.0)))
    if g["status"] == "optimal":
        v = g["value"]
        if v is None or rel_diff(v, pub) > TOL or b is None or rel_diff(b, pub) > TOL or bound_wrong:
            out.append("WRONG CERT")
    elif bound_wrong:
        out.append("BAD BOUND")
    if g["evaluates"] is False or (g["model_value"] is not None and g["value"] is not None
                                   and rel_diff(g["model_value"], g["value"]) > TOL):
        out.append("NO EVAL")
    return out


def fmt(v, spec=".6g"):
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


HDR = (f"{'instance':15} {'family':12} {'published':>14} | {'gop status':10} {'gop value':>14} {'gop bound':>14} "
       f"{'t_gop':>7} | {'scip status':11} {'scip value':>14} {'t_scip':>7} | {'gop/scip':>8} | flag")


def row(inst, g, s):
    ratio = None
    if g["status"] == "optimal" and s["status"] == "optimal" and s["time"]:
        ratio = g["time"] / max(s["time"], 1e-3)
    fl = flags(inst, g)
    line = (f"{inst.name:15} {inst.family:12} {inst.optimum:14.7g} | {g['status']:10} {fmt(g['value'], '14.7g'):>14} "
            f"{fmt(g['bound'], '14.7g'):>14} {fmt(g['time'], '7.2f'):>7} | {s['status']:11} "
            f"{fmt(s.get('value'), '14.7g'):>14} {fmt(s.get('time'), '7.2f'):>7} | {fmt(ratio, '8.2f'):>8} | "
            f"{' '.join(fl)}")
    if g.get("error"):
        line += f"\n{'':15} gop: {g['error']}"
    if s.get("error"):
        line += f"\n{'':15} scip: {s['error']}"
    return line, ratio, fl


def summary(label, rows):
    ratios, certified, wrong, errors, killed = [], 0, 0, 0, 0
    for inst, g, s in rows:
        _, ratio, fl = row(inst, g, s)
        certified += g["status"] == "optimal" and "WRONG CERT" not in fl
        wrong += "WRONG CERT" in fl
        errors += g["status"] == "error"
        killed += g["status"] == "killed"
        if ratio is not None:
            ratios.append(ratio)
    n = len(rows)
    scip_opt = sum(s["status"] == "optimal" for _, _, s in rows)
    med = f"{statistics.median(ratios):.2f}" if ratios else "-"
    print(f"summary ({label}): gop certified {certified}/{n} (to 1e-6 of the published optimum); wrong "
          f"certificates {wrong}; gop errors {errors}; killed at the hard limit {killed}; SCIP optimal "
          f"{scip_opt}/{n}; median t_gop/t_scip {med} over the {len(ratios)} instances both certified")


def table(title, rows):
    print(f"\n== {title} ({len(rows)} instances) ==")
    print(HDR)
    print("-" * len(HDR))
    for inst, g, s in rows:
        print(row(inst, g, s)[0])
    summary(title, rows)


def bgmm_child(argv, queue):
    import gop_bgmm
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            gop_bgmm.main(argv)
    except Exception as e:
        buf.write(f"ERROR {type(e).__name__}: {e}\n")
    queue.put(buf.getvalue())


def run_bgmm(args):
    """The BGMM grid of benchmarks/gop_bgmm.py, one (N, K, family) case per child process."""
    print(f"\n== BGMM grid (benchmarks/gop_bgmm.py; time limit {args.bgmm_time_limit:g} s per solver) ==", flush=True)
    ctx = mp.get_context("fork")
    header_done, footer = False, None
    for N in args.bgmm_N:
        for K in args.bgmm_K:
            for fam in args.bgmm_family:
                argv = ["--N", str(N), "--K", str(K), "--family", fam, "--time-limit", str(args.bgmm_time_limit)]
                q = ctx.Queue()
                p = ctx.Process(target=bgmm_child, args=(argv, q))
                p.start()
                hard = 3 * args.bgmm_time_limit + 120
                try:
                    text = q.get(timeout=hard)
                except Exception:
                    text = None
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join()
                if text is None:
                    print(f"   N={N} K={K} {fam}: killed after the hard limit {hard:.0f} s", flush=True)
                    continue
                lines = text.rstrip("\n").splitlines()
                for ln in lines:
                    is_head = ln.strip().startswith("data") or set(ln.strip()) == {"-"}
                    is_foot = ln.startswith("reference:")
                    if is_foot:
                        footer = ln
                    elif not (is_head and header_done):
                        print(ln, flush=True)
                header_done = True
    if footer:
        print(footer)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=30.0, help="seconds per solve, for gop and for SCIP")
    ap.add_argument("--instances", nargs="+", help="instance names (default: all)")
    ap.add_argument("--family", nargs="+", help="families to run (default: all)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--heldout-only", action="store_true", help="run only the held-out third")
    g.add_argument("--exclude-heldout", action="store_true", help="run only the instances not held out")
    ap.add_argument("--no-scip", action="store_true", help="skip SCIP")
    ap.add_argument("--hard-factor", type=float, default=2.0,
                    help="a gop child is killed after hard-factor * time-limit + 15 s")
    ap.add_argument("--memory-gb", type=float, default=3.0, help="address-space limit of the gop child (0: none)")
    ap.add_argument("--list", action="store_true", help="list the instances with sources and exit")
    ap.add_argument("--bgmm", action="store_true", help="also run the BGMM grid of benchmarks/gop_bgmm.py")
    ap.add_argument("--bgmm-only", action="store_true", help="run only the BGMM grid")
    ap.add_argument("--bgmm-N", type=int, nargs="+", default=[10, 20, 50, 100, 200])
    ap.add_argument("--bgmm-K", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--bgmm-family", nargs="+", default=["point", "gaussian"], choices=["point", "gaussian"])
    ap.add_argument("--bgmm-time-limit", type=float, default=None, help="default: --time-limit")
    args = ap.parse_args(argv)
    if args.time_limit <= 0:
        ap.error("--time-limit must be positive")
    args.bgmm_time_limit = args.bgmm_time_limit or args.time_limit

    from gop_instances import FAMILIES, instances
    insts = instances()
    if args.list:
        for i in insts:
            print(f"{i.name:15} {i.family:12} {i.sense} {i.optimum:.10g} {'HELD-OUT' if i.heldout else ''}\n"
                  f"{'':15} source: {i.source}\n{'':15} optimum: {i.optimum_source}")
        return
    if not args.bgmm_only:
        if args.instances:
            known = {i.name for i in insts}
            bad = [n for n in args.instances if n not in known]
            if bad:
                ap.error(f"unknown instance(s) {bad}; see --list")
            insts = [i for i in insts if i.name in args.instances]
        if args.family:
            bad = [f for f in args.family if f not in FAMILIES]
            if bad:
                ap.error(f"unknown family {bad}; valid: {FAMILIES}")
            insts = [i for i in insts if i.family in args.family]
        if args.heldout_only:
            insts = [i for i in insts if i.heldout]
        if args.exclude_heldout:
            insts = [i for i in insts if not i.heldout]
        print(f"gop vs SCIP on {len(insts)} instances, time limit {args.time_limit:g} s per solve", flush=True)
        _warm_imports()  # before the children fork: SCIP's first solve pays no import either
        rows = []
        for inst in insts:
            gr = run_gop(inst.name, args.time_limit, args.hard_factor, args.memory_gb)
            sr = ({"status": "skipped", "value": None, "time": None} if args.no_scip
                  else run_scip(inst, args.time_limit))
            rows.append((inst, gr, sr))
            print(f"  done {inst.name}: gop {gr['status']} ({fmt(gr['time'], '.2f')} s), scip {sr['status']} "
                  f"({fmt(sr.get('time'), '.2f')} s)", flush=True)
        tuned = [r for r in rows if not r[0].heldout]
        held = [r for r in rows if r[0].heldout]
        if tuned:
            table("instances not held out", tuned)
        if held:
            table("HELD-OUT instances (not to be tuned on)", held)
        if tuned and held:
            summary("all instances", rows)
    if args.bgmm or args.bgmm_only:
        run_bgmm(args)


if __name__ == "__main__":
    main()
