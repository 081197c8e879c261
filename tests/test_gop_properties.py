"""Property test of the GOP solver: random small biconvex programs against SCIP.

Every program has a bilinear objective ``x^T B y`` plus convex parts (squares, ``exp``) and
random linear constraints on the y variables (or on the single x variable), feasible by
construction. Constraints on several x variables, or coupling the two blocks, are dualised by
GOP, which then converges like a Benders decomposition (hundreds of iterations on some
instances, see docs/gop.md "known weaknesses"); they are exercised by the Haverly and
Floudas-Visweswaran problems of ``benchmarks/gop_bilinear.py`` and by ``tests/test_gop.py``.
For each seed GOP runs with an automatic partition or with a given one (``partition=``);
SCIP (pyscipopt, gap 1e-9) is the independent reference. Checked: the certified lower bound
never exceeds the true optimum (+1e-7), the gap closes (status optimal, rel gap <= 1e-6) and
the optimal values agree to 1e-6 relative.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from varopt.program import AtomGroup, Constraint, Expression, Program, QuadraticTerms
from varopt.registry import get_solver

pyscipopt = pytest.importorskip("pyscipopt", reason="SCIP (pyscipopt) is the reference solver of this test")

N_CASES = 110


def random_biconvex(seed):
    """A random biconvex program with blocks x (1-3 variables) and y (1-3 variables)."""
    rng = np.random.default_rng(seed)
    nx, ny = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    n = nx + ny
    names = [f"x[{i}]" for i in range(nx)] + [f"y[{j}]" for j in range(ny)]
    lb = -rng.uniform(0.5, 2.0, n)
    ub = rng.uniform(0.5, 2.0, n)
    B = np.round(rng.normal(size=(nx, ny)), 3)
    B[rng.random((nx, ny)) < 0.2] = 0.0
    B[0, 0] = B[0, 0] or 1.0  # at least one product
    qi, qj, qv = [], [], []
    for i in range(nx):
        for j in range(ny):
            if B[i, j]:
                qi.append(i); qj.append(nx + j); qv.append(B[i, j])
    d = np.round(rng.uniform(0.0, 1.0, n), 3) * (rng.random(n) < 0.5)
    for k in np.flatnonzero(d):
        qi.append(k); qj.append(k); qv.append(d[k])
    lin = np.round(rng.normal(size=n), 3)
    atoms = []
    exp_on = []
    if rng.random() < 0.3:
        k = int(rng.integers(0, n))
        exp_on.append(k)
        atoms.append(AtomGroup("exp", [0.3], sp.csr_matrix(([1.0], ([0], [k])), shape=(1, n)), [0.0]))
    obj = Expression(n, 0.0, lin, QuadraticTerms(qi, qj, qv, n), atoms)
    cons = []
    z0 = lb + rng.random(n) * (ub - lb)
    for r in range(int(rng.integers(0, 3))):
        a = np.round(rng.normal(size=n), 3)
        u = rng.random()
        if u < 0.8 or nx > 1:  # constraint of the y variables only
            a[:nx] = 0.0
        else:  # x only (one variable)
            a[nx:] = 0.0
        rhs = float(a @ z0) + float(rng.uniform(0.0, 0.5))
        cons.append(Constraint(f"c{r}", Expression(n, 0.0, a), -np.inf, rhs))
    prog = Program(names, lb, ub, obj, cons)
    return prog, dict(nx=nx, ny=ny, B=B, d=d, lin=lin, exp_on=exp_on, z0=z0)


def scip_optimum(prog):
    m = pyscipopt.Model()
    m.hideOutput()
    m.setParam("limits/gap", 1e-10)
    m.setParam("limits/absgap", 1e-10)
    m.setParam("numerics/feastol", 1e-9)
    z = [m.addVar(name=nm, lb=float(l), ub=float(u)) for nm, l, u in zip(prog.names, prog.lb, prog.ub)]

    def expr(e):
        out = e.constant + pyscipopt.quicksum(float(c) * z[k] for k, c in enumerate(e.linear) if c)
        q = e.quadratic
        out = out + pyscipopt.quicksum(float(v) * z[i] * z[j] for i, j, v in zip(q.i, q.j, q.v))
        for g in e.atoms:
            assert g.kind == "exp"
            for r in range(len(g)):
                arg = float(g.b[r]) + pyscipopt.quicksum(float(v) * z[j] for j, v in zip(g.A[r].indices, g.A[r].data))
                out = out + float(g.coef[r]) * pyscipopt.exp(arg)
        return out

    t = m.addVar(name="t", lb=None, ub=None)
    m.addCons(t >= expr(prog.objective))
    for c in prog.constraints:
        m.addCons(expr(c.body) <= c.hi)
    m.setObjective(t, "minimize")
    m.optimize()
    assert m.getStatus() == "optimal", m.getStatus()
    return m.getObjVal()


@pytest.mark.parametrize("seed", range(N_CASES))
def test_gop_matches_scip(seed):
    prog, meta = random_biconvex(seed)
    ref = scip_optimum(prog)
    opts = {}
    if seed % 2 == 1:  # a given partition: x-block names (component name form for half of them)
        opts["partition"] = "x" if seed % 4 == 1 else [f"x[{i}]" for i in range(meta["nx"])]
    if "partition" not in opts:
        # the automatic partition may make the constrained block the primal one; GOP dualises
        # constraints on several primal variables and converges slowly there (docs/gop.md), so
        # fall back to the given partition in that (rare) case
        from importlib import import_module
        part = import_module("varopt.solvers.gop.partition").analyze(prog)
        isx = np.zeros(prog.n, dtype=bool)
        isx[part.x] = True
        if any(np.count_nonzero(c.body.linear[isx]) > 1 for c in prog.constraints):
            opts["partition"] = "x"
    res = get_solver("gop").solve(prog, **opts)
    assert res.status == "optimal", (res.status, res.message)
    tol = 1e-6 * max(1.0, abs(ref))
    assert res.lower_bound <= ref + 1e-7 * max(1.0, abs(ref))
    # the default certificate: UBD - LBD <= max(abs_gap, rel_gap |UBD|) = 1e-6 max(1, |UBD|)
    assert res.abs_gap <= 1e-6 * max(1.0, abs(res.objective)) + 1e-12
    assert abs(res.objective - ref) <= tol, (res.objective, ref)
    assert prog.max_violation(res.x) <= 1e-6
    assert abs(prog.objective.value(res.x) - res.objective) <= 1e-9 * max(1.0, abs(ref))
    # lower bounds of the history are valid too
    for h in res.history:
        assert h["lower"] <= ref + 1e-7 * max(1.0, abs(ref))
