"""Fill numba's on-disk cache with ipsa's compiled kernels, in a process of its own (``python
tests/numba_warm.py``), while the test session runs the tests that need no kernel.

Why: in a fresh clone the cache is empty, and each (kernel, argument types) pair the suite runs costs
5-15 s of numba compilation (15-40 s before 2026-11-26: docs/ipsa.md, "Cold compile"), about a minute
of the suite in one process. conftest.py starts this script at the
start of a session that collects kernel users; it uses the second core, and a test that reaches a
kernel loads it from the cache instead of compiling it (numba looks the cache up on every new
signature). Nothing the tests check changes: the cached kernel is the machine code numba compiles
in the test process for the same function and types (``cache=True`` in varopt's kernels), and a
test that comes first simply compiles it as before.

The kernels are reached by solving, for a few iterations, the programs of tests/test_ipsa_compiled.py
(every kernel, for each Hessian; the fused kernels take the support and permuted row indices in the rows'
index type, so each is compiled for one signature), the order
following the suite's: the default Hessian first, the L1 split forms first of all (the estimators' tests
come before ipsa's and run those)."""
import os
import sys
from pathlib import Path

#: environment variable that turns the warm-up off (conftest.py), e.g. when timing compilation
DISABLE = "VAROPT_TEST_NO_NUMBA_WARM"


def warm():
    import numpy as np  # noqa: F401  (imported before the test module, as pytest does)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import varopt
    from test_ipsa_compiled import CASES

    S = varopt.get_solver("ipsa")
    first = ("ls-split", "logistic-split")  # the L1 estimators' kernels
    for hessian in ("identity", "bb", "diagonal"):
        for case in sorted(CASES, key=lambda c: (c not in first, c)):
            S.solve(CASES[case](), backend="numba", hessian=hessian, max_iter=2, history_objective=False)


if __name__ == "__main__":
    try:
        os.nice(5)  # the test process comes first when the machine is busy
    except OSError:  # pragma: no cover
        pass
    warm()
