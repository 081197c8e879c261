"""Pyomo products of exponentials and logs of products, as users write them: ``exp(a)*exp(b)`` is
``exp(a + b)``; ``log(p*q)`` and ``log(p/q)`` split into logs of the factors where the declared bounds keep every
affine factor nonnegative (and are lifted whole, one bounded column for the product, where they do not)."""
import itertools

import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401
from varopt.frontends.pyomo_compile import compile_pyomo


def _model(lo=0.1):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(lo, 3), initialize=1.0)
    m.y = pyo.Var(bounds=(0.1, 3), initialize=1.0)
    m.z = pyo.Var(bounds=(0.5, 2), initialize=1.0)
    return m


#: name -> (Pyomo objective, the same function on numpy arrays, gop options)
OBJECTIVES = {
    "exp*exp": (lambda m: 0.5 * pyo.exp(m.x - 1) * (2 * pyo.exp(0.5 * m.y)) - 3 * m.x - 2 * m.y + m.z,
                lambda x, y, z: 0.5 * np.exp(x - 1) * 2 * np.exp(0.5 * y) - 3 * x - 2 * y + z, {}),
    "log(x*y)": (lambda m: -pyo.log(m.x * m.y) + m.x + m.y + (m.z - 1) ** 2,
                 lambda x, y, z: -np.log(x * y) + x + y + (z - 1) ** 2, {}),
    # + log(z) is concave: the tree's secant covers it
    "log(x*y/z)": (lambda m: -pyo.log(2 * m.x * m.y / m.z) + 0.5 * m.x + m.y + m.z,
                   lambda x, y, z: -np.log(2 * x * y / z) + 0.5 * x + y + z, {"mode": "tree"}),
}


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_compiled_objective_equals_pyomo_and_gop_equals_a_grid(name):
    build, f, opts = OBJECTIVES[name]
    m = _model()
    m.obj = pyo.Objective(expr=build(m))
    prog, mp = compile_pyomo(m)
    assert not prog.aux  # one atom row per factor, no auxiliary columns
    rng = np.random.default_rng(1)
    for _ in range(20):
        pt = np.array([rng.uniform(v.lb, v.ub) for v in mp.vars])
        mp.load(pt)
        assert prog.objective.value(pt) == pytest.approx(pyo.value(m.obj), rel=1e-12, abs=1e-12)
    res = pyo.SolverFactory("gop").solve(m, **opts)
    assert str(res.solver.termination_condition) == "optimal"
    X, Y, Z = np.meshgrid(*[np.linspace(v.lb, v.ub, 121) for v in (m.x, m.y, m.z)], indexing="ij")
    ref = float(np.min(f(X, Y, Z)))
    assert res.problem.lower_bound <= ref + 1e-9
    assert pyo.value(m.obj) <= ref + 1e-9
    assert pyo.value(m.obj) >= ref - 2e-3  # the grid's own resolution


def test_log_of_a_product_whose_factor_may_be_negative_is_lifted_not_split():
    """``log(x*y)`` with ``x`` allowed below 0 is not ``log x + log y`` (undefined at ``x, y < 0`` where ``log(x*y)``
    is defined): the product is lifted whole to one bounded column (it was refused by name before polynomials
    inside log were lifted), and the compiled value equals Pyomo's where the term is defined."""
    m = _model(lo=-1.0)
    m.y.setlb(-2.0)
    m.obj = pyo.Objective(expr=-pyo.log(m.x * m.y) + m.x + m.y)
    prog, mp = compile_pyomo(m)
    assert [a.kind for a in prog.aux] == ["product"]
    for pt in ((-0.5, -1.5), (-1.0, -0.2), (2.0, 1.5), (0.3, 2.9)):
        full = prog.complete_aux(np.array(pt))
        mp.load(np.array(pt))
        assert prog.objective.value(full) == pytest.approx(pyo.value(m.obj), rel=1e-12)


def test_products_of_exponentials_with_multipliers_are_not_merged():
    """x * exp(y) * exp(z) keeps its variable multiplier: merged only when both factors are bare exponentials."""
    m = _model()
    m.obj = pyo.Objective(expr=pyo.exp(m.y) * pyo.exp(m.z) + m.x * pyo.exp(m.y))
    prog, mp = compile_pyomo(m)
    for pt in itertools.product((0.2, 1.7), (0.3, 2.5), (0.6, 1.9)):
        mp.load(np.array(pt))
        assert prog.objective.value(np.array(pt)) == pytest.approx(pyo.value(m.obj), rel=1e-12)
