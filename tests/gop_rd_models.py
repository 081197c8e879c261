"""Small gop models shared by the relaxed-dual tests (tests/test_gop_node_rows.py, tests/test_gop_dual_bound.py):
the two BGMM families on the minimal data set and a bilinear program with convex parts."""
import pyomo.environ as pyo

from varopt.formulations.bgmm import MINIMAL_DATA, bgmm_pyomo


def bilinear():
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 3)
    m.x = pyo.Var(m.I, bounds=(0, 2))
    m.y = pyo.Var(m.I, bounds=(-1, 1))
    m.obj = pyo.Objective(expr=sum((i - 1.5) * m.x[i] * m.y[i] for i in m.I) + m.x[0] * m.y[2] - m.x[3] * m.y[1]
                          + 0.1 * sum((m.y[i] - 0.3) ** 2 for i in m.I) + 0.1 * sum((m.x[i] - 1) ** 2 for i in m.I))
    return m


MODELS = {"bgmm_point": lambda: bgmm_pyomo(**dict(MINIMAL_DATA), family="point"),
          "bgmm_gaussian": lambda: bgmm_pyomo(**dict(MINIMAL_DATA), family="gaussian"),
          "bilinear": bilinear}
