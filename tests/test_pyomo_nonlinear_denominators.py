"""Divisions by nonlinear denominators (``c/(x*y)``, ``x**0.67/y**0.67``, ``c/(x**0.71 * y)``), as MINLPLib's
ex7_2_3 and ex7_2_4 write them.

Before, a product denominator was lifted to a column without bounds, so the sign test saw ``[-inf, inf]`` and
refused ``83333.333/(x1*x6)`` over ``x1, x6 >= 10``; a power in a denominator was refused outright. The
denominator is now lifted whole to a column carrying its interval (:meth:`PowerRules.form_interval`). Optima are
derived in closed form in each test.
"""
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401
from varopt.errors import ModelStructureError
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.program.lifting import complete


def _certified(m, opt, time_limit=10):
    res = pyo.SolverFactory("gop").solve(m, time_limit=time_limit)
    r = res.varopt_result
    tol = 1e-6 * max(1.0, abs(opt))
    assert r.status == "optimal", (r.status, r.lower_bound, r.upper_bound)
    assert r.lower_bound <= opt + tol and abs(r.upper_bound - opt) <= tol, (r.lower_bound, r.upper_bound, opt)
    assert pyo.value(m.obj) == pytest.approx(opt, abs=tol)
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        assert (not c.has_ub() or body <= pyo.value(c.upper) + 1e-6) and (not c.has_lb() or body >= pyo.value(c.lower) - 1e-6)
    return r


def test_constant_over_a_product_of_positive_variables_is_certified():
    # min x + y  s.t.  100/(x*y) <= 1, x, y in [1, 50]: x y >= 100, optimum x = y = 10, value 20 (AM-GM)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(1, 50), initialize=30)
    m.y = pyo.Var(bounds=(1, 50), initialize=30)
    m.obj = pyo.Objective(expr=m.x + m.y)
    m.c = pyo.Constraint(expr=100 / (m.x * m.y) <= 1)
    _certified(m, 20.0)


def test_product_denominator_whose_bounds_cross_zero_is_refused_with_its_range():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 2))
    m.y = pyo.Var(bounds=(1, 3))
    m.obj = pyo.Objective(expr=m.x + m.y)
    m.c = pyo.Constraint(expr=1 / (m.x * m.y) <= 1)
    with pytest.raises(ModelStructureError, match=r"range \[-3, 6\]"):
        compile_pyomo(m)


_K = 2.0 ** (1 / 0.67)
_X = 1.42 ** (1 / 1.71)
POWER_ROWS = {
    # min x + y  s.t.  x**0.67 / y**0.67 >= 2: x >= k y with k = 2**(1/0.67), so y = 0.1 and x = 0.1 k
    "power_over_power": (lambda m: m.x ** 0.67 / m.y ** 0.67 >= 2, 0.1 * (1 + _K)),
    # min x + y  s.t.  2/(x**0.71 * y) <= 1: y = 2 x**-0.71 at the optimum, and d/dx (x + 2 x**-0.71) = 0 at
    # x = 1.42**(1/1.71)
    "constant_over_power_times_variable": (lambda m: 2 / (m.x ** 0.71 * m.y) <= 1, _X + 2 * _X ** -0.71),
}


@pytest.mark.parametrize("name", sorted(POWER_ROWS))
def test_rows_dividing_by_powers_are_certified(name):
    row, opt = POWER_ROWS[name]
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0.1, 10), initialize=5)
    m.y = pyo.Var(bounds=(0.1, 10), initialize=1)
    m.obj = pyo.Objective(expr=m.x + m.y)
    m.c = pyo.Constraint(expr=row(m))
    _certified(m, opt)


def test_lifted_denominators_evaluate_like_pyomo():
    m = pyo.ConcreteModel()
    m.x = pyo.Var([1, 2, 3], bounds=(0.5, 4))
    e = 3 / (m.x[1] * m.x[2]) + m.x[1] ** 0.67 / m.x[3] ** 0.67 + m.x[2] / (m.x[3] ** 0.71 * m.x[1]) \
        + pyo.exp(m.x[1]) / (m.x[2] * m.x[3] + 1)
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    assert len(prog.aux) >= 4  # x1*x2, x3**0.67, x3**0.71 * x1, x2*x3 + 1 lifted; ratios
    rng = np.random.default_rng(3)
    for _ in range(5):
        for v in mp.vars:
            v.set_value(float(rng.uniform(0.5, 4)))
        z = complete(prog.aux, mp.values(), prog.n_user)
        assert prog.objective.value(z) == pytest.approx(pyo.value(e), rel=1e-12)
        for c in prog.constraints:  # every defining row holds at the completed point
            assert abs(c.body.value(z)) <= 1e-9 * max(1.0, abs(pyo.value(e)))
