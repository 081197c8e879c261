"""``lagrangian.restrict`` (cached per block) against direct evaluation of the full expression.

GOP substitutes one block's values into the objective and constraint bodies at every
iteration; the cached plan must give the same function of the kept variables as the
expression evaluated at the combined point, on every call (new values each time, fixed
multipliers at zero that drop rows, rows that become constant, log-sum-exp groups).
"""
import numpy as np
import pyomo.environ as pyo
import pytest

from varopt.formulations.bgmm import MINIMAL_DATA, bgmm_pyomo
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.solvers.gop.lagrangian import restrict


def _mixed_model():
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 3)
    m.x = pyo.Var(m.I, bounds=(0.1, 2.0))
    m.y = pyo.Var(m.I, bounds=(0.1, 3.0))
    m.obj = pyo.Objective(expr=sum(m.x[i] * pyo.log(m.x[i]) for i in m.I)
                          + sum(m.y[i] * pyo.log(m.y[i] + m.x[i]) * 0 + m.x[i] * m.y[i] for i in m.I)
                          + m.x[0] * pyo.exp(m.y[1] - 1) + m.y[2] * pyo.exp(m.y[3])
                          + pyo.log(pyo.exp(m.x[1]) + pyo.exp(m.y[0]) + pyo.exp(2.0))
                          + pyo.log(pyo.exp(m.x[2] - 1) + pyo.exp(m.x[3]))
                          + (m.x[0] - m.y[0]) ** 2 + 3 * m.x[1] - m.y[2])
    m.c = pyo.Constraint(expr=sum(m.x[i] * m.y[i] for i in m.I) <= 4)
    return m


def _models():
    yield "bgmm", bgmm_pyomo(**dict(MINIMAL_DATA), family="point")
    yield "bgmm_gauss", bgmm_pyomo(**dict(MINIMAL_DATA), family="gaussian")
    yield "mixed", _mixed_model()


@pytest.mark.parametrize("name,model", list(_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_restrict_equals_the_full_expression_at_the_combined_point(name, model):
    prog = compile_pyomo(model)[0]
    n = prog.n
    rng = np.random.default_rng(0)
    lo = np.where(np.isfinite(prog.lb), prog.lb, -2.0)
    hi = np.where(np.isfinite(prog.ub), prog.ub, 2.0)
    exprs = [prog.objective] + [c.body for c in prog.constraints]
    for trial in range(6):
        fixed = np.sort(rng.choice(n, size=max(1, n // 2), replace=False))
        keep = np.setdiff1d(np.arange(n), fixed)
        keep = rng.permutation(keep)  # the kept order is the caller's
        for e in exprs:
            for call in range(3):  # same block, new values: the cached plan is reused
                vals = rng.uniform(lo[fixed], hi[fixed])
                if call == 2:
                    vals[rng.random(vals.size) < 0.5] = 0.0  # fixed multipliers at zero drop rows
                with np.errstate(all="ignore"):  # random values may leave an atom's domain (checked below)
                    r = restrict(e, keep, fixed, vals)
                for _ in range(3):
                    zk = rng.uniform(lo[keep], hi[keep])
                    z = np.zeros(n)
                    z[fixed], z[keep] = vals, zk
                    with np.errstate(all="ignore"):
                        want = e.value(z)
                    if not np.isfinite(want):
                        continue
                    with np.errstate(all="ignore"):
                        got, g_full, g_r = r.value(zk), e.gradient(z)[keep], r.gradient(zk)
                    assert got == pytest.approx(want, rel=1e-12, abs=1e-12), (name, trial, call)
                    np.testing.assert_allclose(g_r, g_full, rtol=1e-10, atol=1e-10)


def _xlogx_objective(n):
    """sum_i x_i log x_i over n variables, as an Expression."""
    import scipy.sparse as sp

    from varopt.program import Expression
    from varopt.program.terms import AtomGroup
    return Expression(n, 0.0, np.zeros(n), None, [AtomGroup("xlogx", np.ones(n), sp.identity(n, format="csr"),
                                                          np.zeros(n))])


def test_primal_interior_point_rows_without_primal_variables():
    """A row whose primal part vanished (0 <= 0) constrains nothing: the interior point solves the rest
    (min sum x log x on the simplex: x = 1/n, multiplier of the simplex row known in closed form);
    an infeasible one (0 <= -1) is reported infeasible; no warnings either way."""
    import scipy.sparse as sp
    import warnings

    from varopt.solvers.gop.primal import _pdip
    n = 3
    A = sp.csr_matrix(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    lo = np.array([1.0, -np.inf])
    xlb, xub = np.zeros(n), np.ones(n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = _pdip(_xlogx_objective(n), A, lo, np.array([1.0, 0.0]), xlb, xub)
        assert r.status == "optimal"
        np.testing.assert_allclose(r.x, np.full(n, 1 / n), atol=1e-8)
        # stationarity: log x + 1 + lambda = 0 at x = 1/n
        assert r.lam[0] == pytest.approx(np.log(n) - 1, abs=1e-7)
        assert r.lam[1] == 0.0
        r = _pdip(_xlogx_objective(n), A, lo, np.array([1.0, -1.0]), xlb, xub)
        assert r.status == "infeasible"


@pytest.mark.parametrize("name,model", list(_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_restrict_with_nothing_or_everything_fixed(name, model):
    """The two shortcuts of a program without relaxed-dual variables: nothing fixed in the original order gives the
    expression itself; everything fixed gives the constant ``e(z)``; both equal the full expression (and the first
    equals the cached plan of a permuted order, which takes the general path)."""
    prog = compile_pyomo(model)[0]
    n = prog.n
    rng = np.random.default_rng(3)
    lo = np.where(np.isfinite(prog.lb), prog.lb, -2.0)
    hi = np.where(np.isfinite(prog.ub), prog.ub, 2.0)
    allv, none = np.arange(n), np.zeros(0, dtype=np.int64)
    for e in [prog.objective] + [c.body for c in prog.constraints]:
        z = rng.uniform(lo, hi)
        with np.errstate(all="ignore"):
            want = e.value(z)
        if not np.isfinite(want):
            continue
        same = restrict(e, allv, none, np.zeros(0))
        assert same is e
        perm = rng.permutation(n)
        with np.errstate(all="ignore"):
            general = restrict(e, perm, none, np.zeros(0))
            assert general.value(z[perm]) == pytest.approx(want, rel=1e-12, abs=1e-12)
        const = restrict(e, none, allv, z)
        assert const.n == 0 and const.is_linear and const.constant == pytest.approx(want, rel=1e-12, abs=1e-12)
