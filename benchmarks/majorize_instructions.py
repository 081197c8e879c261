"""Benchmark: instructions per whole ``prob.solve(method="majorize")`` on a small problem, by callgrind.

Wall and CPU times of a ~1 ms solve scatter by 10-30 % on a shared, loaded machine, more than most changes to its
fixed costs; instruction counts do not depend on the load. Two processes run under ``valgrind --tool=callgrind``:
each builds ``--build`` fresh problems of ``benchmarks/majorize_constrained.py`` (constrained, or with ``--uncon``
the same objective without constraints), solves 3 of them to warm up and then ``--n`` (second process) or none
(first process); instructions per solve = (second - first) / n: the imports, the data, the problems and the warm-up
cancel. The count depends on how many problems are alive (Python's cyclic collector, triggered by allocations, walks
them all): compare trees only at the same ``--build``. ``--tree DIR`` solves with the varopt of ``DIR`` (e.g. main's
worktree, for an A/B comparison against the tree this script is in); ``PYTHONHASHSEED`` is fixed so that both
processes do the same set-up work.

Needs valgrind. Each process takes ~2-4 min (imports under valgrind); the first is the same for every ``--n``.

Usage: ``python benchmarks/majorize_instructions.py [--set hepatitis] [--n 30] [--build 33] [--uncon] [--backend numpy]
[--tree DIR]`` (docs/majorize.md section 6.0p: main against a branch, ``--tree`` the other worktree).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

#: the child: build, warm up, solve n (run under valgrind)
CHILD = """
import os, sys
sys.path.insert(0, {bench!r})
import varopt
from majorize_constrained import constrained_problem
from tracing import datasets
(name, X, y), = list(datasets([{name!r}]))
C = 1.0 / X.shape[0]
probs = [constrained_problem(X, y, C)[{which}] for _ in range({build})]
for p in probs[:3 + {n}]:
    p.solve(method="majorize", tol=1e-10, backend={backend!r})
"""


def instructions(tree, name, n, build, which, backend):
    """Instructions of one child process under callgrind."""
    code = CHILD.format(bench=HERE, name=name, which=which, build=build, n=n, backend=backend)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONPATH=tree)
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", sys.executable,
                              "-c", code], env=env, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="hepatitis")
    ap.add_argument("--n", type=int, default=30, help="solves counted")
    ap.add_argument("--build", type=int, default=33, help="problems built in each process (>= n + 3)")
    ap.add_argument("--uncon", action="store_true", help="the unconstrained problem")
    ap.add_argument("--backend", default="numpy", choices=["numpy", "numba", "auto"])
    ap.add_argument("--tree", default=os.path.dirname(HERE), help="repository whose varopt is measured")
    a = ap.parse_args(argv)
    build = max(a.build, a.n + 3)
    which = 1 if a.uncon else 0
    base = instructions(a.tree, a.set, 0, build, which, a.backend)
    full = instructions(a.tree, a.set, a.n, build, which, a.backend)
    per = (full - base) / a.n
    print(f"{a.set} {'unconstrained' if a.uncon else 'constrained'} backend={a.backend} tree={a.tree}: "
          f"{per / 1e6:.3f} M instructions per prob.solve ({a.n} solves; set-up {base / 1e6:.0f} M)")


if __name__ == "__main__":
    main()
