"""One line of a1a throughput for A/B comparisons between checkouts: the compiled IPSA loop
(``backend='numba'``) and scikit-learn's SGDClassifier in the same process, samples/s and the
ratio, for the split form with the identity, damped BB and running-diagonal Hessians and the box
form ``-u <= w <= u`` (the settings of ``ipsa_throughput.py``: L1 logistic regression, alpha =
1e-4, 5 passes, batch 1, cyclic order). Best of 15 solves after a warm-up.

Usage (alternate the checkouts, one process at a time, on a shared machine)::

    PYTHONPATH=<checkout A> python benchmarks/ipsa_ab_a1a.py [--cpu]
    PYTHONPATH=<checkout B> python benchmarks/ipsa_ab_a1a.py [--cpu]

``--cpu``: process CPU time instead of wall time (the loops are single-threaded).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

from ipsa_throughput import best_of, load_a1a

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.formulations.l1 import l1_logistic_program


def main():
    warnings.simplefilter("ignore")
    from sklearn.linear_model import SGDClassifier

    a1a = load_a1a()
    if a1a is None:
        return
    X, y = a1a
    solver = varopt.get_solver("ipsa")
    N = 5 * X.shape[0]
    split, box = l1_logistic_program(X, y, 1e-4), l1_logistic_program(X, y, 1e-4, "box")
    for P in (split, box):
        solver.solve(P, passes=5, history_objective=False, backend="numba")
    t_sk = best_of(lambda: SGDClassifier(loss="log_loss", penalty="l1", alpha=1e-4, max_iter=5, tol=None,
                                      shuffle=False).fit(X, y), reps=15)
    out = [f"{Path(varopt.__file__).parents[1].name}: load {os.getloadavg()[0]:.2f}, sklearn {N / t_sk / 1e6:.2f} M/s"]
    for name, P, h in (("identity", split, "identity"), ("bb", split, "bb"), ("diagonal", split, "diagonal"),
                       ("box", box, "identity")):
        t = best_of(lambda: solver.solve(P, passes=5, hessian=h, history_objective=False, backend="numba"), reps=15)
        out.append(f"{name} {N / t / 1e3:.0f} k/s ({t_sk / t:.3f} x)")
    print("; ".join(out))


if __name__ == "__main__":
    main()
