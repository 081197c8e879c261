"""Models as CVXPY users write them (matrix variables, axis sums, indexing, stacking, reshape, trace, diag, sparse
``@``, ``multiply``, Parameters, lists of ``==`` rows, ``Maximize`` of a concave objective, matrix norms): gop equals
Clarabel to 1e-6 relative, CVXPY's ``prob.value`` at the loaded point is the reported value, and atoms varopt does
not compile are refused by name."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")
sps = pytest.importorskip("scipy.sparse")

import varopt  # noqa: E402,F401
from varopt.errors import ModelStructureError  # noqa: E402

RNG = np.random.default_rng(5)
M = RNG.standard_normal((3, 4))
S = sps.random(5, 4, density=0.5, random_state=1)
Y = RNG.standard_normal(5)


def _box(X, x):
    return [cp.abs(X) <= 1, cp.abs(x) <= 1]


FORMS = {
    "sum_axis0": lambda X, x, P: cp.Minimize(cp.sum(cp.square(cp.sum(X, axis=0) - 1)) + cp.sum(X)),
    "index_slice": lambda X, x, P: cp.Minimize(cp.sum_squares(X[1:, ::2] - 0.3) + X[0, 3]
                                               + x[1:3] @ np.array([1.0, -2.0])),
    "stacks": lambda X, x, P: cp.Minimize(cp.sum_squares(cp.vstack([X, cp.reshape(x, (1, 4), order="C")]) - 0.5)
                                          + cp.sum(cp.hstack([x, X[:, 0]]))),
    "parameter": lambda X, x, P: cp.Minimize(cp.sum_squares(X - P) + cp.sum(cp.multiply(P, X))),
    "reshape_c": lambda X, x, P: cp.Minimize(cp.sum_squares(cp.reshape(X, (4, 3), order="C") @ np.ones(3) - x)
                                             + cp.sum(x)),
    "trace": lambda X, x, P: cp.Minimize(cp.trace(X[:, :3]) + cp.sum_squares(X)),
    "diag": lambda X, x, P: cp.Minimize(cp.sum(cp.diag(x)) + cp.sum_squares(cp.diag(X[:, :3]) - 2)
                                        + cp.sum_squares(x)),
    "sparse_matmul": lambda X, x, P: cp.Minimize(cp.sum_squares(S @ x - Y)),
    "sparse_norm1": lambda X, x, P: cp.Minimize(cp.norm1(S @ x - Y)),
    "multiply": lambda X, x, P: cp.Minimize(cp.sum_squares(cp.multiply(M, X) - 1)),
    "maximize_concave": lambda X, x, P: cp.Maximize(cp.sum(cp.log(x + 2)) - cp.sum_squares(X - 1)
                                                    + cp.sum(cp.entr(x + 1.5))),
    "maximize_min_axis": lambda X, x, P: cp.Maximize(cp.sum(cp.min(X, axis=1)) - cp.sum_squares(X)),
    "max_keepdims": lambda X, x, P: cp.Minimize(cp.sum(cp.max(X @ np.ones((4, 2)) - 1, axis=1, keepdims=True))
                                                + cp.sum_squares(X)),
    "norm_inf_matrix": lambda X, x, P: cp.Minimize(cp.norm_inf(X - M) + cp.sum(X)),
    "induced_inf_norm": lambda X, x, P: cp.Minimize(cp.norm(X - M, "inf") + cp.sum(X)),
    "induced_1_norm": lambda X, x, P: cp.Minimize(cp.norm(X - M, 1) + cp.sum(X)),
    "mixed_norm": lambda X, x, P: cp.Minimize(cp.mixed_norm(X - M, 2, 1)),
    "huber_parameter_M": lambda X, x, P: cp.Minimize(cp.sum(cp.huber(X - P, cp.Parameter(nonneg=True, value=0.3)))),
    "maximum_broadcast": lambda X, x, P: cp.Minimize(cp.sum(cp.maximum(X, cp.reshape(x[:3], (3, 1), order="F")))),
    "sum_largest_matrix": lambda X, x, P: cp.Minimize(cp.sum_largest(X - M, 3) + 0.1 * cp.sum_squares(X)),
    "cvar": lambda X, x, P: cp.Minimize(cp.sum_largest(S @ x - Y, 1.5) / 1.5),
    "tv": lambda X, x, P: cp.Minimize(cp.tv(x) + cp.sum_squares(x - np.arange(4) / 4)),
    "log_sum_exp_axis": lambda X, x, P: cp.Minimize(cp.sum(cp.log_sum_exp(X, axis=0)) - cp.sum(cp.multiply(M, X))),
}


def _solve(name, how):
    X, x = cp.Variable((3, 4), name="X"), cp.Variable(4, name="x")
    P = cp.Parameter((3, 4), value=M)
    cons = _box(X, x)
    if name == "eq_rows":
        obj = cp.Minimize(cp.sum_squares(X) + cp.sum_squares(x))
        cons = [cp.sum(X, axis=1) == 1, x[0] + x[1] == 0.5, X[0, 0] == x[2]]
    else:
        obj = FORMS[name](X, x, P)
    prob = cp.Problem(obj, cons)
    val = prob.solve(solver="CLARABEL") if how == "CLARABEL" else prob.solve(method=how)
    return val, prob


@pytest.mark.parametrize("name", sorted(FORMS) + ["eq_rows"])
def test_user_forms_equal_clarabel_with_gop(name):
    got, prob = _solve(name, "gop")
    ref, _ = _solve(name, "CLARABEL")
    assert prob.status == "optimal"
    assert abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (got, ref)
    assert abs(prob.value - got) <= 1e-7 * max(1.0, abs(got)), (prob.value, got)


@pytest.mark.parametrize("build, fragment", [
    (lambda x: cp.Minimize(cp.sum(cp.cumprod(x))), "the atom `cumprod` is not supported"),
    (lambda x: cp.Maximize(cp.log_det(cp.diag(x + 2))), "the atom `log_det` is not supported"),
])
def test_atoms_outside_the_catalogue_are_refused_by_name(build, fragment):
    x = cp.Variable(4)
    with pytest.raises(ModelStructureError, match=fragment):
        cp.Problem(build(x), [cp.abs(x) <= 1]).solve(method="gop")
