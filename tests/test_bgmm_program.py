"""The BGMM program built from arrays equals the compiled Pyomo and CVXPY models."""
import numpy as np
import pytest

pyo = pytest.importorskip("pyomo.environ")

import varopt  # noqa: E402,F401
from varopt.formulations.bgmm import bgmm_cvxpy, bgmm_pyomo  # noqa: E402
from varopt.formulations.bgmm_program import bgmm_program  # noqa: E402
from varopt.frontends.cvxpy_compile import compile_cvxpy  # noqa: E402
from varopt.frontends.pyomo_compile import compile_pyomo  # noqa: E402
from varopt.registry import get_solver  # noqa: E402

CASES = [("point", 1.0, False), ("gaussian", 0.5, "phi"), ("point", "learned", "mu"), ("gaussian", "learned", "phi")]


def _random_points(p, rng, k=5):
    lo = np.where(np.isfinite(p.lb), p.lb, -3.0)
    hi = np.where(np.isfinite(p.ub), p.ub, 3.0)
    return [lo + (hi - lo) * rng.uniform(0.05, 0.95, p.n) for _ in range(k)]


@pytest.mark.parametrize("family,variance,sym", CASES)
def test_program_equals_compiled_pyomo_model(family, variance, sym):
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(-2, 1, 4), rng.normal(2, 1, 3)])
    ours = bgmm_program(x, 3, family, prior_precision=0.5, variance=variance, symmetry_breaking=sym)
    ref, _ = compile_pyomo(bgmm_pyomo(x, 3, family, prior_precision=0.5, variance=variance, symmetry_breaking=sym))
    assert ours.names == ref.names
    np.testing.assert_array_equal(ours.lb, ref.lb)
    np.testing.assert_array_equal(ours.ub, ref.ub)
    np.testing.assert_allclose(ours.x0, ref.x0, rtol=0, atol=0)
    assert [c.name for c in ours.constraints] == [c.name for c in ref.constraints]
    for z in _random_points(ref, rng):
        assert ours.objective.value(z) == pytest.approx(ref.objective.value(z), rel=1e-12)
        np.testing.assert_allclose(ours.objective.gradient(z), ref.objective.gradient(z), rtol=1e-11, atol=1e-11)
        # same feasible set: each row's violation agrees (the body may differ by sign / side)
        for a, b in zip(ours.constraints, ref.constraints):
            va = max(a.lo - a.body.value(z), a.body.value(z) - a.hi, 0.0)
            vb = max(b.lo - b.body.value(z), b.body.value(z) - b.hi, 0.0)
            assert va == pytest.approx(vb, abs=1e-12)


def test_program_equals_compiled_cvxpy_model_and_solves_the_same():
    x = np.array([0.0, 0.2, 3.0, 3.3, 6.1])
    ours = bgmm_program(x, 2)
    ref, _ = compile_cvxpy(bgmm_cvxpy(x, 2))
    assert sorted(ours.names) == sorted(ref.names)
    perm = np.array([ref.index[nm] for nm in ours.names])
    for z in _random_points(ours, np.random.default_rng(0)):
        zr = np.empty(ref.n)
        zr[perm] = z
        assert ours.objective.value(z) == pytest.approx(ref.objective.value(zr), rel=1e-12)
    res = get_solver("gop").solve(ours, rel_gap=1e-6)
    model = bgmm_pyomo(x, 2)
    pres = pyo.SolverFactory("gop").solve(model, rel_gap=1e-6)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(pyo.value(model.neg_elbo), rel=1e-6)
    assert str(pres.solver.termination_condition) == "optimal"


def test_sparse_linear_rows():
    p = bgmm_program(np.linspace(0, 1, 50), 2)
    assert all(c.body.is_sparse for c in p.constraints)
    A, lo, hi, idx = p.linear_constraints()
    assert A.shape == (51, p.n) and A.nnz == 50 * 2 + 2
