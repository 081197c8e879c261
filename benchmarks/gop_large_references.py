"""References for ``gop_large_models.py``: SCIP (``scip_direct``, its own time limit) on every Pyomo model, and on the
Pyomo twin of each CVXPY model (same seed, same data). One JSON line per model: SCIP's status, best value (a feasible
point's objective, user's sense) and bound; a gop bound is valid only if it is on the right side of SCIP's value.

    OPENBLAS_NUM_THREADS=1 python benchmarks/gop_large_references.py OUT.jsonl [time_limit=60]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import gop_large_models as G
from gop_instances.scip import solve_scip

#: the Pyomo model with the same data as each CVXPY model
TWIN = {"bmf_cvxpy": "bmf_pyomo", "qcqp_cvxpy": "qcqp_pyomo", "bgmm_cvxpy": "bgmm_pyomo"}


def main():
    out, tl = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    done = {}
    with open(out, "a") as f:
        for name in G.MODELS:
            src = TWIN.get(name, name)
            if src not in done:
                m = G.MODELS[src][1]()
                done[src] = solve_scip(m, time_limit=tl, gap=1e-9)
                done[src]["maximize"] = bool(next(m.component_data_objects(__import__("pyomo.environ").environ.Objective,
                                                                             active=True)).sense == -1)
            f.write(json.dumps(dict(name=name, reference=src, tl=tl, **done[src])) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
