"""Speed against a peer: varopt ``lbp`` and ``meanfield`` vs pyGMs (Ihler; ``pip install pyGMs``)
loopy BP and naive mean field on 12 x 12 grids (fields U[-1,1], couplings ±1/2), same answer.

pyGMs has no convergence test (it runs ``maxIter`` sweeps), so its iteration count is doubled
until its log Z agrees with varopt's converged answer to 1e-6; the time reported is that of the
first run that agrees. varopt runs undamped (as pyGMs) with ``tol=1e-9`` (messages / means).
Both start from uniform beliefs / zero messages and update sequentially (pyGMs) or by colour
class / flooding (varopt), so on these weakly frustrated grids both reach the same fixed point.

Run: ``PYTHONPATH=. python benchmarks/inference_pygms.py [--instances 3]`` (a few minutes).
"""
import argparse
import time

import numpy as np

import varopt
from varopt.formulations import ising


def pygms_model(e):
    import pygms as gm
    X = [gm.Var(k, 2) for k in range(e.n)]
    th = -e.h  # log-potential fields (state 0 is s = -1)
    fs = [gm.Factor([X[k]], np.exp([-th[k], th[k]])) for k in range(e.n)]
    for a, b, w in zip(e.i.tolist(), e.j.tolist(), (-e.w).tolist()):
        fs.append(gm.Factor([X[a], X[b]], np.exp(np.array([[w, -w], [-w, w]]))))
    return gm.GraphModel(fs)


def time_pygms(fn, model, target, tol=1e-6, start=8, limit=1024):
    it = start
    while True:
        t = time.perf_counter()
        lnz, _ = fn(model, maxIter=it)
        dt = time.perf_counter() - t
        if abs(lnz - target) <= tol or it >= limit:
            return lnz, dt, it
        it *= 2


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=3)
    a = ap.parse_args()
    try:
        import pygms.messagepass as mp
    except ImportError:
        ap.error("this benchmark compares with pyGMs, which is not installed: pip install pyGMs")
    print(f"{'inst':>4} {'method':<10} {'varopt s':>9} {'pyGMs s':>9} {'pyGMs it':>8} {'ratio':>8} "
          f"{'|dlogZ|':>9} {'varopt logZ':>12}")
    for seed in range(a.instances):
        e = ising.random_field_model("grid", 12, seed=seed)
        g = pygms_model(e)
        for name, fn, kw in (("lbp", mp.LBP, {"damping": 0.0, "tol": 1e-9, "init": "zero"}),
                             ("meanfield", mp.NMF, {"damping": 0.0, "tol": 1e-9, "restarts": 1})):
            solver = varopt.get_solver(name)
            prog = e.to_program()
            solver.solve(prog, **kw)  # warm-up (imports)
            t = time.perf_counter()
            r = solver.solve(prog, **kw)
            tv = time.perf_counter() - t
            lz = r.info["log_partition"]
            lzp, tp, it = time_pygms(fn, g, lz)
            print(f"{seed:>4} {name:<10} {tv:>9.4f} {tp:>9.2f} {it:>8} {tp / tv:>8.0f} {abs(lzp - lz):>9.2e} "
                  f"{lz:>12.6f}", flush=True)
