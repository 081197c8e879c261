"""Property test of gop outside GOP's class: random nonconvex quadratic programs against SCIP.

Every program has an indefinite or concave quadratic objective ``z^T Q z + c^T z`` (diagonal
terms of both signs and products forming odd cycles, so no biconvex partition exists), random
linear rows feasible by construction, and bounds of which some are left infinite and implied
only through a row ``sum z <= b`` over nonnegative variables. ``mode='auto'`` refuses them by name (no
biconvex partition); with ``mode='tree'`` gop certifies them with the spatial tree (docs/gop.md §8b). SCIP (pyscipopt, gap 1e-10) is the
independent reference. Checked: the certified lower bound and every lower bound of the history
never exceed the true optimum (+1e-7), the gap closes, the value agrees with SCIP's to 1e-6
relative, and the returned point is feasible and carries the reported objective.
"""

import numpy as np
import pytest

from varopt.errors import ModelStructureError
from varopt.program import Constraint, Expression, Program, QuadraticTerms
from varopt.registry import get_solver

pyscipopt = pytest.importorskip("pyscipopt", reason="SCIP (pyscipopt) is the reference solver of this test")
from test_gop_properties import scip_optimum  # noqa: E402

N_CASES = 100


def random_nonconvex(seed):
    """A random QP with 2-5 variables whose objective has no biconvex partition."""
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(2, 6))
    names = [f"z[{i}]" for i in range(n)]
    implied = rng.random() < 0.4  # nonnegative variables, some without an upper bound
    if implied:
        lb = np.zeros(n)
        ub = np.where(rng.random(n) < 0.5, np.inf, rng.uniform(0.5, 2.0, n))
    else:
        lb = -rng.uniform(0.5, 2.0, n)
        ub = rng.uniform(0.5, 2.0, n)
    qi, qj, qv = [], [], []
    for i in range(n):  # diagonal of both signs, at least one concave square
        d = np.round(rng.uniform(-1.5, 1.0), 3) if i else -np.round(rng.uniform(0.2, 1.5), 3)
        if d:
            qi.append(i); qj.append(i); qv.append(d)
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < 0.6:
                qi.append(i); qj.append(j); qv.append(np.round(rng.normal(), 3))
    lin = np.round(rng.normal(size=n), 3)
    obj = Expression(n, 0.0, lin, QuadraticTerms(qi, qj, qv, n))
    z0 = np.where(np.isfinite(ub), lb + rng.random(n) * (np.where(np.isfinite(ub), ub, 1.0) - lb),
                  rng.uniform(0.0, 1.5, n))
    cons = []
    for r in range(int(rng.integers(0, 3))):
        a = np.round(rng.normal(size=n), 3)
        cons.append(Constraint(f"c{r}", Expression(n, 0.0, a), -np.inf, float(a @ z0) + float(rng.uniform(0, 0.5))))
    if implied:  # the row that bounds the variables without an upper bound
        cons.append(Constraint("cap", Expression(n, 0.0, np.ones(n)), -np.inf, float(z0.sum()) + 1.0))
    return Program(names, lb, ub, obj, cons)


@pytest.mark.parametrize("seed", range(N_CASES))
def test_gop_tree_matches_scip_outside_gops_class(seed):
    prog = random_nonconvex(seed)
    for mode in ("gop", "auto"):  # no biconvex partition: refused by name unless the tree is asked for
        with pytest.raises(ModelStructureError):
            get_solver("gop").solve(prog, mode=mode)
    ref = scip_optimum(prog)
    res = get_solver("gop").solve(prog, time_limit=60, mode="tree")
    assert res.status == "optimal", (res.status, res.message)
    assert res.info["mode"] == "tree" and res.info["not_biconvex"]
    big = max(1.0, abs(ref))
    assert res.lower_bound <= ref + 1e-7 * big
    assert res.abs_gap <= 1e-6 * max(1.0, abs(res.objective)) + 1e-12
    assert abs(res.objective - ref) <= 1e-6 * big, (res.objective, ref)
    assert prog.max_violation(res.x) <= 1e-6
    assert abs(prog.objective.value(res.x) - res.objective) <= 1e-9 * big
    for h in res.history:
        assert h["lower"] <= ref + 1e-7 * big
