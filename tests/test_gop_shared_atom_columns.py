"""The tree's relaxation gives rows with the same atom of the same argument one lifted column (relax.py,
``Lifted._atom_col``), so their coefficients add up.

MINLPLib's Gibbs free energies (ex6_2_*) write ``18.32 x2 log x2 + ... - 17.30 x2 log x2``: the net term
``x2 log x2`` is convex, but two separate columns relax a convex and a concave term independently (tangents under
one, a chord over the other), and the tree branched on a convex program. Optima are derived in closed form.
"""
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401
from varopt.errors import ModelStructureError
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.solvers.gop.relax import Lifted

C = (18.3, 7.0, 2.5)
D = (0.4, -0.2, 0.1)


def _entropy_written_twice():
    """min sum_i (c_i + 1) x_i log x_i - c_i x_i log x_i + d_i x_i over the simplex: the net objective is
    sum_i x_i log x_i + d.x, minimised at x_i = exp(-d_i) / sum_j exp(-d_j) with value -log sum_j exp(-d_j)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1, 2], bounds=(1e-6, 1), initialize=1 / 3)
    m.obj = pyo.Objective(expr=sum((C[i] + 1) * m.x[i] * pyo.log(m.x[i]) - C[i] * m.x[i] * pyo.log(m.x[i])
                                   + D[i] * m.x[i] for i in range(3)))
    m.s = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) == 1)
    return m, -np.log(np.exp(-np.array(D)).sum())


def test_rows_of_one_atom_share_a_column():
    m, _ = _entropy_written_twice()
    m.c = pyo.Constraint(expr=m.x[0] * pyo.log(m.x[0]) + m.x[1] * m.x[1] + 2 * m.x[1] ** 2 <= 5)
    prog, _ = compile_pyomo(m)
    lf = Lifted(prog)
    # x0 log x0, x1 log x1, x2 log x2 (each written twice, and once more in c) and x1^2 (written twice)
    assert lf.nT == 4
    z = np.array([0.2, 0.3, 0.5])
    Z = lf.lift(z)
    assert lf.R[0] @ Z + lf.const[0] == pytest.approx(prog.objective.value(z), rel=1e-12)
    assert lf.R[1:] @ Z + lf.const[1:] == pytest.approx([c.body.value(z) for c in prog.constraints], rel=1e-12)


def test_net_convex_entropy_is_certified_without_branching():
    m, opt = _entropy_written_twice()
    res = pyo.SolverFactory("gop").solve(m, mode="tree", time_limit=20)
    r = res.varopt_result
    assert r.status == "optimal"
    assert r.lower_bound <= opt + 1e-6 and abs(r.upper_bound - opt) <= 1e-6
    assert pyo.value(m.obj) == pytest.approx(opt, abs=1e-6)
    # 3 nodes with the shared columns; 1,323 with one column per row (a convex program branched on)
    assert r.info["nodes"] <= 20, r.info["nodes"]


def test_net_convex_entropy_is_solved_under_auto_as_one_convex_row():
    """Under ``mode='auto'`` the same program (linear rows only) was refused: 'the term x[0]*log(x[0]) enters with a
    negative coefficient -18.3, so it is concave'. Rows of one atom of one argument are merged into one row with the
    summed coefficient (``gop/merged_atoms.py``) where only that puts the program in GOP's class: a convex program,
    one primal problem. A net concave entropy stays refused."""
    m, opt = _entropy_written_twice()
    r = pyo.SolverFactory("gop").solve(m).varopt_result
    assert r.status == "optimal", (r.status, r.message)
    assert r.lower_bound <= opt + 1e-6 and abs(r.upper_bound - opt) <= 1e-6
    assert pyo.value(m.obj) == pytest.approx(opt, abs=1e-6) and r.objective == pytest.approx(pyo.value(m.obj), abs=1e-9)
    m2 = pyo.ConcreteModel()
    m2.x = pyo.Var([0, 1], bounds=(1e-3, 1))
    m2.obj = pyo.Objective(expr=2 * m2.x[0] * pyo.log(m2.x[0]) - 3 * m2.x[0] * pyo.log(m2.x[0]) + m2.x[1])
    with pytest.raises(ModelStructureError, match=r"x\[0\]\)\*log\(x\[0\]\) enters with a negative coefficient"):
        pyo.SolverFactory("gop").solve(m2)
