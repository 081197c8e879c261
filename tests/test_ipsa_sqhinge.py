"""ipsa on squared hinges (``sqpos`` rows): L2-SVMs and a box-constrained probit against Clarabel, with exact
gradients (batch_size = all rows) and the tolerances of tests/test_ipsa_equalities.py, every iterate strictly
interior; per-sample steps of the L2-SVM run on the compiled (numba) kernels."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: F401
from varopt.errors import InvalidOptionError

RNG = np.random.default_rng(7)
X = RNG.standard_normal((40, 3))
Y = np.sign(X @ np.array([1.0, -1.0, 0.5]) + 0.3 * RNG.standard_normal(40))
W0 = np.array([2.0, -2.0, 1.0])


def _hinge(w):
    return cp.sum(cp.square(cp.pos(1 - cp.multiply(Y, X @ w))))


#: name -> (objective, constraints, strict interior of an iterate w: the smallest slack, which must stay > 0)
CASES = {
    "free": (lambda w: _hinge(w) + 0.5 * cp.sum_squares(w), lambda w: [], lambda x: 1.0),
    "nonneg": (lambda w: _hinge(w) + 0.5 * cp.sum_squares(w), lambda w: [w >= 0], lambda x: x.min()),
    "l1_row": (lambda w: _hinge(w), lambda w: [cp.norm1(w) <= 1.0], lambda x: 1.0 - np.abs(x).sum()),
    "hinge_row": (lambda w: cp.sum_squares(w - W0), lambda w: [cp.sum_squares(cp.pos(1 - cp.multiply(Y, X @ w))) <= 20],
                  lambda x: 20.0 - np.sum(np.maximum(1 - Y * (X @ x), 0.0) ** 2)),
    "probit_box": (lambda w: -cp.sum(cp.log_normcdf(cp.multiply(Y, X @ w))) + 0.5 * cp.sum_squares(w),
                   lambda w: [w <= 0.5, w >= -0.5], lambda x: 0.5 - np.abs(x).max()),
}


@pytest.mark.parametrize("hessian", ["exact", "bfgs"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_l2svm_and_probit_match_clarabel_strictly_inside(name, hessian):
    obj, cons, slack = CASES[name]
    w = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(obj(w)), cons(w))
    ref = prob.solve(solver="CLARABEL")
    wref = w.value.copy()
    seen = []
    prob.solve(method="ipsa", warm_start=False, batch_size=10 ** 4, hessian=hessian, step_power=0, max_iter=300,
               kkt_tol=1e-10,
               callback=lambda k, x, *rest: seen.append(slack(np.asarray(x, dtype=float))) and None)
    r = prob.varopt_result
    assert r.status == "converged" and r.iterations >= 3, (r.message, r.iterations)   # a cold start, not Clarabel's w
    assert not prob.varopt_program.aux and "sqpos" in {g.kind for g in prob.varopt_program.objective.atoms} | {
        g.kind for c in prob.varopt_program.constraints for g in c.body.atoms}
    assert abs(float(prob.value) - ref) <= 1e-7 * max(1.0, abs(ref))
    assert np.max(np.abs(w.value - wref)) <= 1e-4
    assert seen and min(seen) > 0 and slack(w.value) > 0


def test_stochastic_steps_run_compiled_and_equal_the_numpy_path():
    """Per-sample steps (batch_size=1): the compiled kernels take squared-hinge rows (one per sample, the L2-SVM), so
    backend='auto' runs them and ends where the numpy path ends (iterate equality step by step is in
    tests/test_ipsa_compiled.py); the probit's seven hinges per sample in seven row groups stay on the numpy path,
    and backend='numba' refuses them by name."""
    pytest.importorskip("numba")
    w = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(_hinge(w)), [cp.norm1(w) <= 1.0])
    ref = prob.solve(solver="CLARABEL")
    # the running diagonal Hessian: 1.0e-4 relative gap after 20000 steps here, as on the same model with square in
    # place of sqpos (docs/ipsa.md, sqhinge section). The identity Hessian stalls near 3% on both.
    out = {}
    for backend in ("auto", "numpy"):
        prob.solve(method="ipsa", warm_start=False, max_iter=20000, seed=0, hessian="diagonal", backend=backend)
        r = prob.varopt_result
        out[backend] = (r.info["backend"], float(prob.value), w.value.copy())
    assert out["auto"][0] == "numba" and out["numpy"][0].startswith("numpy")
    assert abs(out["auto"][1] - out["numpy"][1]) <= 1e-10 * abs(ref)
    np.testing.assert_allclose(out["auto"][2], out["numpy"][2], rtol=0, atol=1e-10)
    assert abs(out["auto"][1] - ref) <= 1e-3 * max(1.0, abs(ref))
    assert np.abs(out["auto"][2]).sum() < 1.0
    obj, cons, _ = CASES["probit_box"]
    probit = cp.Problem(cp.Minimize(obj(w)), cons(w))
    probit.solve(method="ipsa", warm_start=False, max_iter=50, seed=0)
    assert probit.varopt_result.info["backend"].startswith("numpy (")
    with pytest.raises(InvalidOptionError, match="backend='numba' does not cover"):
        probit.solve(method="ipsa", backend="numba", max_iter=10)
