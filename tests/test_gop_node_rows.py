"""The relaxed-dual LP reuses the previous node's rows (``RDModel._set_node_rows``): after every node set-up the
LP, read back from HiGHS, must hold exactly the base rows followed by the node's rows and bounds, and the solves
must still certify the known optima."""
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401
from varopt.formulations.bgmm import MINIMAL_DATA, bgmm_pyomo
from varopt.solvers.gop import relaxed_dual as RD


def _bilinear():
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 3)
    m.x = pyo.Var(m.I, bounds=(0, 2))
    m.y = pyo.Var(m.I, bounds=(-1, 1))
    m.obj = pyo.Objective(expr=sum((i - 1.5) * m.x[i] * m.y[i] for i in m.I) + m.x[0] * m.y[2] - m.x[3] * m.y[1]
                          + 0.1 * sum((m.y[i] - 0.3) ** 2 for i in m.I) + 0.1 * sum((m.x[i] - 1) ** 2 for i in m.I))
    return m


@pytest.mark.parametrize("name", ["bgmm_point", "bgmm_gaussian", "bilinear"])
def test_node_rows_in_the_lp_are_the_requested_ones(name, monkeypatch):
    model = {"bgmm_point": lambda: bgmm_pyomo(**dict(MINIMAL_DATA), family="point"),
             "bgmm_gaussian": lambda: bgmm_pyomo(**dict(MINIMAL_DATA), family="gaussian"),
             "bilinear": _bilinear}[name]()
    seen = {"in_place": 0, "checked": 0}
    orig = RD.RDModel._set_node_rows

    def checked(self, A, lo, hi):
        in_place = self.node_rows is not None and self.node_rows[0].shape[0] == A.shape[0]
        orig(self, A, lo, hi)
        d = self.hm.data()                   # what HiGHS holds, read back
        k = A.shape[0]
        assert d["A"].shape[0] == self.m_base + k
        want = np.array(A, dtype=float)
        want[np.abs(want) <= 1e-9] = 0.0       # HiGHS drops entries below its small_matrix_value (1e-9)
        np.testing.assert_array_equal(d["A"][self.m_base:].toarray(), want)
        np.testing.assert_array_equal(d["row_lo"][self.m_base:], np.maximum(lo, -np.inf))
        np.testing.assert_array_equal(d["row_hi"][self.m_base:], hi)
        seen["in_place"] += in_place
        seen["checked"] += 1

    monkeypatch.setattr(RD.RDModel, "_set_node_rows", checked)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=1e-6, time_limit=60)
    r = res.varopt_result
    assert r.status == "optimal", r.message
    assert seen["checked"] > 10 and seen["in_place"] > 0, seen
