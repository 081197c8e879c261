"""Lifted powers and divisions as users write them, checked from the outside (the loaded point, the certified
value against a grid or SCIP's optimum): each test fails without the fix it names."""
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401  (registers the solvers)
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.solvers.gop.objective_rows import objective_rows


def _xy(expr, bx=(0.0, 3.0), by=(1.0, 2.0)):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=bx, initialize=1.5)
    m.y = pyo.Var(bounds=by, initialize=1.5)
    m.o = pyo.Objective(expr=expr(m.x, m.y))
    return m


def _grid(f, bx=(0.0, 3.0), by=(1.0, 2.0), n=1201):
    X, Y = np.meshgrid(np.linspace(*bx, n), np.linspace(*by, n))
    return float(np.min(f(X, Y)))


def _solve(m, **kw):
    r = pyo.SolverFactory("gop").solve(m, time_limit=10, **kw).varopt_result
    assert r.status == "optimal", (r.status, r.message)
    assert pyo.value(m.o) == pytest.approx(r.upper_bound, rel=1e-9, abs=1e-9)
    return r


@pytest.mark.parametrize("name, f", [
    ("x/y - 0.7x", lambda x, y: x / y - 0.7 * x),
    ("(x/y)**2 - x", lambda x, y: (x / y) ** 2 - x),
    ("(x/y - 1)**2 - 0.3x", lambda x, y: (x / y - 1) ** 2 - 0.3 * x),
])
def test_a_numerator_in_the_objective_is_not_substituted_by_its_ratio_row(name, f):
    """``x`` enters the objective linearly and one row only, the ratio row ``t y - x == 0`` of ``x/y``: the
    objective-row presolve took it for an objective variable, fixed it at 0 and every point completed to
    ``t = 0`` (the tree ran to its time limit with the incumbent 0)."""
    m = _xy(f)
    prog, _ = compile_pyomo(m)
    assert objective_rows(prog) is None
    r = _solve(m)
    assert r.upper_bound == pytest.approx(_grid(f), abs=1e-5)
