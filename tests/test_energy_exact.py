"""Energy models through both front-ends, and the ``exact`` solver, against brute-force
enumeration written here from the raw coefficients (independent of the compilers)."""
import itertools
import math

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest
from scipy.special import logsumexp

import varopt
from varopt.errors import InputDataError, InvalidOptionError, ModelStructureError
from varopt.program.energy import EnergyModel
from varopt.solvers.exact import Elimination, enumerate_model


def _random_bits_model(rng, n):
    c = float(rng.normal())
    lin = rng.normal(size=n) * rng.choice([0.5, 2.0])
    Q = np.triu(rng.normal(size=(n, n)), 1) * (rng.random((n, n)) < rng.uniform(0.2, 0.9))
    return c, lin, Q


def _brute(c, lin, Q, sense=1.0, beta=1.0):
    n = lin.size
    X = np.array(list(itertools.product([0, 1], repeat=n)), dtype=float)
    f = c + X @ lin + np.einsum("si,ij,sj->s", X, Q, X)
    t = -sense * beta * f
    lz = logsumexp(t)
    p = np.exp(t - lz)
    return lz, p @ X, X, p


def _pyomo(c, lin, Q, sense=pyo.minimize):
    n = lin.size
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), domain=pyo.Binary)
    m.o = pyo.Objective(expr=c + sum(lin[i] * m.x[i] for i in range(n))
                        + sum(Q[i, j] * m.x[i] * m.x[j] for i in range(n) for j in range(n) if Q[i, j]),
                        sense=sense)
    return m


def _cvxpy(c, lin, Q, maximize=False):
    n = lin.size
    x = cp.Variable(n, boolean=True, name="x")
    I, J = np.nonzero(Q)
    f = c + lin @ x
    if I.size:
        f = f + cp.sum(cp.multiply(Q[I, J], cp.multiply(x[I], x[J])))
    return cp.Problem(cp.Maximize(f) if maximize else cp.Minimize(f)), x


def test_exact_matches_enumeration_on_100_random_models_both_frontends():
    rng = np.random.default_rng(20240613)
    for k in range(100):
        n = int(rng.integers(1, 17)) if k >= 4 else 16
        c, lin, Q = _random_bits_model(rng, n)
        lz, mean, _, _ = _brute(c, lin, Q)
        m = _pyomo(c, lin, Q)
        method = "eliminate" if k % 2 else "auto"
        r = pyo.SolverFactory("exact").solve(m, method=method).varopt_result
        assert abs(r.info["log_partition"] - lz) <= 1e-10 * max(1.0, abs(lz)), (k, n)
        assert abs(r.objective + lz) <= 1e-10 * max(1.0, abs(lz))
        assert r.lower_bound == r.upper_bound == r.objective
        got = np.array([r.info["marginals"][f"x[{i}]"] for i in range(n)])
        assert np.abs(got - mean).max() < 1e-10
        prob, x = _cvxpy(c, lin, Q)
        val = prob.solve(method="exact")
        assert abs(val + lz) <= 1e-10 * max(1.0, abs(lz))
        assert np.abs(prob.varopt_marginals["x"] - mean).max() < 1e-10
        # the two front-ends compile to the same energy
        e1, e2 = pyo_energy(m), prob.varopt_program.energy
        assert np.allclose(e1.h, e2.h, atol=1e-12) and abs(e1.const - e2.const) < 1e-12
        assert np.array_equal(e1.i, e2.i) and np.array_equal(e1.j, e2.j) and np.allclose(e1.w, e2.w, atol=1e-12)


def pyo_energy(m):
    from varopt.frontends.pyomo_energy import compile_pyomo_energy
    return compile_pyomo_energy(m)[0].energy


def test_correlations_and_maximize_with_beta():
    rng = np.random.default_rng(3)
    c, lin, Q = _random_bits_model(rng, 7)
    lz, mean, X, p = _brute(c, lin, Q, sense=-1.0, beta=0.7)
    r = pyo.SolverFactory("exact").solve(_pyomo(c, lin, Q, pyo.maximize), beta=0.7).varopt_result
    assert abs(r.objective - lz / 0.7) < 1e-10  # +log Z / beta for a maximisation
    for (a, b), v in r.info["correlations"].items():
        i, j = int(a[2:-1]), int(b[2:-1])
        assert abs(v - p @ (X[:, i] * X[:, j])) < 1e-10
    prob, x = _cvxpy(c, lin, Q, maximize=True)
    assert abs(prob.solve(method="exact", beta=0.7) - lz / 0.7) < 1e-10
    assert x.value is None  # the boolean variables are not overwritten


def test_marginal_suffix_and_values_untouched():
    m = _pyomo(0.0, np.array([1.0, -2.0]), np.array([[0, 0.5], [0, 0]]))
    m.marginal = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    m.x[0].set_value(1)
    res = pyo.SolverFactory("exact").solve(m)
    assert m.x[0].value == 1 and m.x[1].value is None
    assert abs(m.marginal[m.x[1]] - res.varopt_marginals["x[1]"]) == 0.0
    _, mean, _, _ = _brute(0.0, np.array([1.0, -2.0]), np.array([[0, 0.5], [0, 0]]))
    assert abs(m.marginal[m.x[0]] - mean[0]) < 1e-12


def test_squares_powers_duplicates_and_spins():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), domain=pyo.Binary)
    s = [2 * m.x[i] - 1 for i in range(3)]
    m.o = pyo.Objective(expr=m.x[0] * m.x[1] + m.x[1] * m.x[0] + m.x[2] ** 3 + (m.x[0] + m.x[2]) ** 2
                        - 0.5 * s[0] * s[1] / 2)
    r = pyo.SolverFactory("exact").solve(m).varopt_result
    X = np.array(list(itertools.product([0, 1], repeat=3)), dtype=float)
    S = 2 * X - 1
    f = 2 * X[:, 0] * X[:, 1] + X[:, 2] + (X[:, 0] + X[:, 2]) ** 2 - 0.25 * S[:, 0] * S[:, 1]
    assert abs(r.info["log_partition"] - logsumexp(-f)) < 1e-12
    # evaluate the user's model with Pyomo at every state: the compiled energy agrees
    e = pyo_energy(m)
    for xs, fv in zip(X, f):
        for i in range(3):
            m.x[i].set_value(xs[i])
        assert abs(pyo.value(m.o) - fv) < 1e-12
        assert abs(e.value(2 * xs - 1) - fv) < 1e-12


def test_zero_energy_free_spins_and_components():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(5), domain=pyo.Binary)
    m.o = pyo.Objective(expr=0.0)
    r = pyo.SolverFactory("exact").solve(m).varopt_result
    assert abs(r.info["log_partition"] - 5 * math.log(2)) < 1e-12
    rng = np.random.default_rng(5)
    a = EnergyModel(rng.normal(size=4), [0, 1, 2], [1, 2, 3], rng.normal(size=3))
    b = EnergyModel(rng.normal(size=5), [0, 0, 1, 3], [1, 4, 2, 4], rng.normal(size=4))
    ab = EnergyModel(np.concatenate([a.h, b.h]), np.concatenate([a.i, b.i + 4]), np.concatenate([a.j, b.j + 4]),
                     np.concatenate([a.w, b.w]), 0.25)
    za, zb, zab = (varopt.get_solver("exact").solve(e.to_program(), method="eliminate").info["log_partition"]
                   for e in (a.scaled(-1), b.scaled(-1), ab.scaled(-1)))
    assert abs(zab - (za + zb + 0.25)) < 1e-12


def test_elimination_on_lattices_matches_enumeration_and_reports_width():
    rng = np.random.default_rng(11)
    L, W = 4, 4
    idx = np.arange(L * W).reshape(L, W)
    i = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel(), idx[:, 0]])
    j = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel(), idx[:, -1]])  # a cylinder
    model = EnergyModel(rng.uniform(-1, 1, L * W), i, j, rng.choice([-0.5, 0.5], i.size), 0.1)
    lz, m1, c1 = enumerate_model(model)
    el = Elimination(model)
    lz2, m2, c2 = el.run()
    assert abs(lz - lz2) < 1e-11 and np.abs(m1 - m2).max() < 1e-11 and np.abs(c1 - c2).max() < 1e-11
    assert el.width <= 6
    with pytest.raises(ModelStructureError, match="width"):
        varopt.get_solver("exact").solve(model.to_program(), method="eliminate", max_width=2)


def test_cylinder_width_is_the_circumference():
    L, W = 6, 10
    idx = np.arange(L * W).reshape(L, W)
    i = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel(), idx[:, -1]])
    j = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel(), idx[:, 0]])
    model = EnergyModel(np.zeros(L * W), i, j, np.full(i.size, 0.4))
    el = Elimination(model)
    assert el.width <= W + 1
    lz, m, _ = el.run()
    assert np.abs(m).max() < 1e-12  # zero field: symmetric


def _bad_model(kind):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), domain=pyo.Binary)
    if kind == "continuous":
        m.y = pyo.Var()
        m.o = pyo.Objective(expr=m.x[0] + m.y)
    elif kind == "integer":
        m.z = pyo.Var(domain=pyo.Integers, bounds=(0, 3))
        m.o = pyo.Objective(expr=m.x[0] * m.z)
    elif kind == "constraint":
        m.o = pyo.Objective(expr=m.x[0])
        m.c = pyo.Constraint(expr=m.x[0] + m.x[1] <= 1)
    elif kind == "cubic":
        m.o = pyo.Objective(expr=m.x[0] + m.x[0] * m.x[1] * m.x[2])
    elif kind == "exp":
        m.o = pyo.Objective(expr=pyo.exp(m.x[1]))
    elif kind == "log":
        m.o = pyo.Objective(expr=pyo.log(1 + m.x[2]))
    elif kind == "nan":
        m.p = pyo.Param(initialize=float("nan"), mutable=True)
        m.o = pyo.Objective(expr=m.p * m.x[0])
    return m


@pytest.mark.parametrize("kind,err,match", [
    ("continuous", ModelStructureError, "variable 'y' is continuous"),
    ("integer", ModelStructureError, "variable 'z' is general integer"),
    ("constraint", ModelStructureError, "constraint 'c'"),
    ("cubic", ModelStructureError, r"x\[0\]\*x\[1\]\*x\[2\]|order 3"),
    ("exp", ModelStructureError, r"exp\(x\[1\]\)"),
    ("log", ModelStructureError, r"log\(1 \+ x\[2\]\)"),
    ("nan", InputDataError, "non-finite|nan"),
])
def test_bad_pyomo_inputs(kind, err, match):
    with pytest.raises(err, match=match):
        pyo.SolverFactory("exact").solve(_bad_model(kind))


@pytest.mark.parametrize("solver", ["exact", "trw", "lbp"])
def test_bounds_that_pin_a_binary_condition_the_distribution(solver):
    """``x[1].setub(0)`` and ``x[2].setlb(1)`` pin those bits (the energy is conditioned on them, as
    for ``fix``); an integer variable with bounds (0, 1) is a spin. Reference: enumeration of the
    free bits with the pinned ones substituted by hand."""
    rng = np.random.default_rng(3)
    c, lin, Q = _random_bits_model(rng, 5)
    Q = np.triu(rng.normal(size=(5, 5)), 1)   # dense: every pinned bit is coupled to the free ones
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(4), domain=pyo.Binary)
    m.y = pyo.Var(domain=pyo.Integers, bounds=(0, 1))
    xs = [m.x[0], m.x[1], m.x[2], m.x[3], m.y]
    m.o = pyo.Objective(expr=c + sum(lin[i] * xs[i] for i in range(5))
                        + sum(Q[i, j] * xs[i] * xs[j] for i in range(5) for j in range(i + 1, 5)))
    m.x[1].setub(0)
    m.x[2].setlb(1)
    free = [0, 3, 4]
    X = np.array(list(itertools.product([0, 1], repeat=3)), dtype=float)
    full = np.zeros((8, 5))
    full[:, free] = X
    full[:, 2] = 1.0
    f = c + full @ lin + np.einsum("si,ij,sj->s", full, Q, full)
    lz = logsumexp(-f)
    res = pyo.SolverFactory(solver).solve(m).varopt_result
    assert sorted(res.info["marginals"]) == ["x[0]", "x[3]", "y"]
    if solver == "exact":
        assert res.info["log_partition"] == pytest.approx(lz, abs=1e-10)
        p = np.exp(-f - lz)
        got = [res.info["marginals"][k] for k in ("x[0]", "x[3]", "y")]
        assert np.allclose(got, p @ X, atol=1e-10)
    elif solver == "trw":
        assert res.info["log_partition"] >= lz - 1e-9   # still an upper bound of the conditioned log Z


def test_bounds_without_a_binary_value_are_rejected():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), domain=pyo.Binary)
    m.x[1].setlb(0.2)
    m.x[1].setub(0.8)
    m.o = pyo.Objective(expr=m.x[0] * m.x[1])
    with pytest.raises(InputDataError, match=r"variable 'x\[1\]': no integer value"):
        pyo.SolverFactory("exact").solve(m)
    m2 = pyo.ConcreteModel()
    m2.s = pyo.Var(range(2), domain=pyo.Integers, bounds=(-1, 1))   # spins as {-1, 0, 1}: not bits
    m2.o = pyo.Objective(expr=m2.s[0] * m2.s[1])
    with pytest.raises(ModelStructureError, match=r"variable 's\[0\]' is general integer"):
        pyo.SolverFactory("exact").solve(m2)


def test_bad_cvxpy_inputs_and_options():
    x = cp.Variable(3, boolean=True, name="x")
    y = cp.Variable(name="y")
    z = cp.Variable(integer=True, name="z")
    with pytest.raises(ModelStructureError, match="variable `y` is continuous"):
        cp.Problem(cp.Minimize(cp.sum(x) + y)).solve(method="exact")
    with pytest.raises(ModelStructureError, match="variable `z` is integer"):
        cp.Problem(cp.Minimize(cp.sum(x) + z)).solve(method="exact")
    with pytest.raises(ModelStructureError, match="constraint 0"):
        cp.Problem(cp.Minimize(cp.sum(x)), [x[0] + x[1] <= 1]).solve(method="exact")
    with pytest.raises(ModelStructureError, match=r"exp\(x\[0\]\)"):
        cp.Problem(cp.Minimize(cp.exp(x[0]))).solve(method="exact")
    with pytest.raises(ModelStructureError, match="degree 3|order 3"):
        cp.Problem(cp.Minimize(cp.multiply(x[0], cp.square(x[1])))).solve(method="exact")
    with pytest.raises(InputDataError):
        cp.Problem(cp.Minimize(np.array([np.nan, 1.0, 1.0]) @ x)).solve(method="exact")
    for beta in (0.0, -1.0, float("inf")):
        with pytest.raises(InvalidOptionError, match="beta"):
            cp.Problem(cp.Minimize(cp.sum(x))).solve(method="exact", beta=beta)
    # duplicates x0*x1 + x1*x0 are summed
    prob = cp.Problem(cp.Minimize(x[0] * x[1] + x[1] * x[0]))
    prob.solve(method="exact")
    assert np.allclose(prob.varopt_program.energy.w, [0.5])


def test_solvers_without_binary_support_keep_rejecting_binaries():
    m = _bad_model("exp")
    with pytest.raises(ModelStructureError, match="discrete domain"):
        pyo.SolverFactory("ipsa").solve(m)
    x = cp.Variable(2, boolean=True)
    with pytest.raises(ModelStructureError, match="boolean"):
        cp.Problem(cp.Minimize(cp.sum(x))).solve(method="ipsa")


def test_energy_model_bits_roundtrip():
    rng = np.random.default_rng(2)
    c, lin, Q = _random_bits_model(rng, 6)
    I, J = np.nonzero(Q)
    e = EnergyModel.from_bits(c, lin, I, J, Q[I, J])
    c2, lin2, i2, j2, q2 = e.to_bits()
    X = np.array(list(itertools.product([0, 1], repeat=6)), dtype=float)
    f = c + X @ lin + np.einsum("si,ij,sj->s", X, Q, X)
    assert np.abs(e.value(2 * X - 1) - f).max() < 1e-12
    assert np.abs(c2 + X @ lin2 + (X[:, i2] * X[:, j2]) @ q2 - f).max() < 1e-12


def test_cvxpy_boolean_with_bounds_is_rejected_not_ignored():
    """cp.Variable(3, boolean=True, bounds=[0, [1, 0, 1]]) pins x[1] = 0; the bound was ignored and the
    free model's log Z returned. nonneg=True (no effect on bits) stays accepted."""
    x = cp.Variable(3, boolean=True, bounds=[0, np.array([1.0, 0.0, 1.0])], name="x")
    with pytest.raises(ModelStructureError, match="variable `x` has bounds"):
        cp.Problem(cp.Minimize(x[0] * x[1] + 0.5 * x[1] + x[2])).solve(method="exact")
    y = cp.Variable(3, boolean=True, nonneg=True, name="y")
    val = cp.Problem(cp.Minimize(y[0] * y[1] + 0.5 * y[1] + y[2])).solve(method="exact")
    Q = np.zeros((3, 3))
    Q[0, 1] = 1.0
    lz, _, _, _ = _brute(0.0, np.array([0.0, 0.5, 1.0]), Q)
    assert val == pytest.approx(-lz, abs=1e-12)
