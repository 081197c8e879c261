"""A tree box whose column intervals overflow is closed, not sent to the LP.

``x1 >= -3`` without an upper bound enters two products and ``0.1 (x1 - 0.5)^2``; the tree split ``x1`` far above
its root interval, and the lower bound of the square's column over ``x1 >= 4.3e159`` overflowed to ``+inf``: HiGHS's
wrapper refused the node LP ("lb: contains +inf"), ending the solve with an ``InputDataError`` about an input the
user never wrote (found by a random comparison with SCIP). Reference: SCIP (``scip_direct``, gap 1e-9).
"""
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401

pytest.importorskip("pyscipopt")


def _model():
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1, 2])
    m.x[0].setlb(0.05), m.x[0].setub(3), m.x[1].setlb(-3), m.x[2].setlb(0.05), m.x[2].setub(3)
    m.c1 = pyo.Constraint(expr=-1.39 * pyo.log(m.x[2]) + 1.2 / m.x[0] >= -2.05)
    m.c2 = pyo.Constraint(expr=-1.9 * pyo.log(m.x[2]) >= -2.01)
    m.o = pyo.Objective(expr=-0.21 * m.x[0] + 2.1 * m.x[1] - 0.09 * m.x[2] + 0.42 * m.x[0] * m.x[1]
                        - 0.54 * m.x[1] * m.x[2] + 0.1 * sum((m.x[i] - 0.5) ** 2 for i in range(3)))
    return m


def test_box_whose_square_column_overflows_is_closed():
    ref = _model()
    pyo.SolverFactory("scip_direct").solve(ref, options={"limits/gap": 1e-9, "display/verblevel": 0})
    m = _model()
    res = pyo.SolverFactory("gop").solve(m, time_limit=20)
    assert str(res.solver.termination_condition) == "optimal"
    assert abs(pyo.value(m.o) - pyo.value(ref.o)) <= 1e-6 * max(1.0, abs(pyo.value(ref.o))), (pyo.value(m.o),
                                                                                              pyo.value(ref.o))
