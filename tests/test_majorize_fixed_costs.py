"""The set-up shortcuts of small constrained majorize programs (docs/majorize.md section 6.0p) against the numpy paths
they replace: each computes the same doubles on Python floats, so the bounds, rows, sides and whole fits must agree
bit for bit (signs of zeros included, except a zero bound's: see the singleton rows' test) on random inputs with the
awkward cases (infinite and NaN sides, signed zeros, repeated and unsorted variables, negative coefficients, stored
zeros)."""
from __future__ import annotations

import types

import numpy as np
import pytest
import scipy.sparse as sp

from varopt.formulations.logistic import logistic_program
from varopt.program import Constraint, Expression, Program
from varopt.registry import get_solver
from varopt.solvers.majorize import model as model_mod
from varopt.solvers.majorize import step_qp
from varopt.solvers.majorize.model import singleton_rows_to_bounds


def _same_bits(a, b):
    """Equal arrays, NaN where NaN and the same sign of every zero."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def _random_rows(rng, m, n):
    """Rows with 0-3 entries (many singletons, repeated variables, negative and tiny coefficients), at times a stored
    zero, in csr."""
    dense = np.zeros((m, n))
    for i in range(m):
        k = min(n, rng.choice([0, 1, 1, 1, 2, 3]))
        cols = rng.choice(n, size=k, replace=False)
        dense[i, cols] = rng.choice([1.0, -1.0, 2.5, -0.5, 1e-300, 3e5], size=k)
    A = sp.csr_matrix(dense)
    if rng.random() < 0.5 and A.nnz:   # a stored zero (its row loses an entry: a singleton may become empty)
        A.data[int(rng.integers(A.nnz))] = 0.0
    return A


def _sides(rng, size, kind):
    pool = {"lo": [-np.inf, np.nan, 0.0, -0.0, -1.0, 2.0, -1e308, 0.3],
            "hi": [np.inf, np.nan, 0.0, -0.0, 1.0, 4.0, 1e308, 0.7]}[kind]
    return rng.choice(pool, size)


@pytest.mark.parametrize("seed", range(300))
def test_few_singleton_rows_are_the_numpy_paths_bounds(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 12)), int(rng.integers(1, 7))
    A = _random_rows(rng, m, n)
    lo, hi = _sides(rng, m, "lo"), _sides(rng, m, "hi")
    lb = rng.choice([-np.inf, -0.0, 0.0, -2.0, 0.5], n)
    ub = rng.choice([np.inf, -0.0, 0.0, 3.0, 0.5], n)
    before = [arr.copy() for arr in (A.data, A.indices, A.indptr, lo, hi, lb, ub)]
    fast = singleton_rows_to_bounds(A, lo, hi, lb, ub)
    monkeypatch.setattr(model_mod, "FEW_ROWS", -1)
    with np.errstate(over="ignore"):   # (1e308 / 1e-300: numpy warns, Python floats do not; both give inf)
        slow = singleton_rows_to_bounds(A, lo, hi, lb, ub)
    # lo, hi bit for bit; lb, ub equal as numbers (NaN nowhere), zeros of either sign: numpy's fmax/fmin keep
    # either of two equal zeros depending on the array's length and the loop (docstring of the Python path)
    for f, s in zip(fast[1:3], slow[1:3]):
        assert _same_bits(f, s)
    for f, s in zip(fast[3:], slow[3:]):
        np.testing.assert_array_equal(f, s)
        assert not np.isnan(f).any()
    assert fast[0].shape == slow[0].shape
    for f, s in zip((fast[0].data, fast[0].indices, fast[0].indptr), (slow[0].data, slow[0].indices, slow[0].indptr)):
        np.testing.assert_array_equal(f, s)
    # the caller's arrays are untouched
    for a, b in zip(before, (A.data, A.indices, A.indptr, lo, hi, lb, ub)):
        assert _same_bits(a, b)


def _model_like(rng, n, m):
    lb = rng.choice([-np.inf, -0.0, 0.0, -2.0, 0.5, -1e308], n)
    ub = rng.choice([np.inf, -0.0, 0.0, 3.0, 0.5, 1e308], n)
    lo, hi = _sides(rng, m, "lo"), _sides(rng, m, "hi")
    return types.SimpleNamespace(n=n, lb=lb, ub=ub, lo=lo, hi=hi)


@pytest.mark.parametrize("seed", range(200))
def test_few_finite_sides_are_the_general_paths(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 40)), int(rng.integers(0, 8))
    model = _model_like(rng, n, m)
    A = rng.standard_normal((m, n)) * (rng.random((m, n)) < 0.5)
    with np.errstate(invalid="ignore"):
        lo_tol = model.lo - 1e-9 * np.maximum(1.0, np.abs(model.lo))
        hi_tol = model.hi + 1e-9 * np.maximum(1.0, np.abs(model.hi))
    fast = step_qp._finite_sides(model, A, lo_tol, hi_tol)
    monkeypatch.setattr(step_qp, "FEW_SCAN", -1)
    slow = step_qp._finite_sides(model, A, lo_tol, hi_tol)
    for f, s in zip(fast, slow):
        assert _same_bits(f, s)


def _fit_program():
    """A logistic fit with singleton rows (some on one variable twice, one with a negative coefficient) and two real
    rows, whose trials meet the bounds and the rows."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((90, 10))
    y = (X @ rng.standard_normal(10) + 0.5 * rng.standard_normal(90) > 0).astype(int)
    prog = logistic_program(X, y, 0.05)
    n = prog.n
    e = np.eye(n)
    cons = [Constraint(f"nonneg{j}", Expression(n, linear=e[j]), 0.0, np.inf) for j in range(4)]
    cons += [Constraint("again", Expression(n, linear=2.0 * e[1]), 0.01, np.inf),
             Constraint("neg", Expression(n, linear=-0.5 * e[5]), -0.02, np.inf),
             Constraint("sum", Expression(n, linear=e[6] + e[7] + e[8]), -np.inf, 0.2),
             Constraint("pair", Expression(n, linear=e[9] - e[2]), -0.1, np.inf)]
    return Program(prog.names, np.full(n, -np.inf), np.full(n, np.inf), prog.objective, cons)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_fixed_cost_shortcuts_give_the_numpy_paths_fit(backend, monkeypatch):
    """The whole fit with the set-up shortcuts and without them: the same iterations, statistics, objective and
    point, bit for bit, and a feasible answer."""
    pytest.importorskip("numba") if backend == "numba" else None
    program = _fit_program()
    solver = get_solver("majorize")
    fast = solver.solve(program, tol=1e-12, backend=backend)
    monkeypatch.setattr(model_mod, "FEW_ROWS", -1)
    monkeypatch.setattr(step_qp, "FEW_SCAN", -1)
    slow = solver.solve(_fit_program(), tol=1e-12, backend=backend)
    assert fast.status == slow.status == "optimal"
    assert fast.iterations == slow.iterations and fast.info["bound_reuse"] == slow.info["bound_reuse"]
    assert fast.objective == slow.objective
    np.testing.assert_array_equal(fast.x, slow.x)
    assert program.max_violation(fast.x) <= 1e-9
    assert fast.x[5] <= 0.04 + 1e-12 and fast.x[1] >= 0.005 - 1e-12


def _lse_program(bad=()):
    """A small program with one log-sum-exp group, a linear and a quadratic part; ``bad``: the inputs set to NaN
    or inf (``'A'``, ``'b'``, ``'coef'``, ``'linear'``, ``'quad'``)."""
    from varopt.program.terms import LseGroup, QuadraticTerms
    n = 3
    A = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [1.0, 1.0, 0.0], [0.5, 0.0, 0.0]]))
    b = np.array([0.0, -np.inf, 0.3, 0.1])   # a zero base measure (-inf) is allowed
    coef = np.array([1.0, 2.0])
    lin = np.array([0.1, -0.2, 0.3])
    qv = np.array([0.5, 0.5, 0.5])
    if "A" in bad:
        A.data[1] = np.nan
    if "b" in bad:
        b[2] = np.inf
    if "coef" in bad:
        coef[1] = -np.inf
    if "linear" in bad:
        lin[0] = np.nan
    if "quad" in bad:
        qv[2] = np.inf
    g = LseGroup(A, b, np.array([0, 0, 1, 1]), coef)
    e = Expression(n, 0.0, lin, QuadraticTerms(np.arange(n), np.arange(n), qv, n), lse=[g])
    return Program(["x0", "x1", "x2"], np.full(n, -np.inf), np.full(n, np.inf), e)


NAMES = {"A": "log-sum-exp features", "b": "log-sum-exp offsets", "coef": "log-sum-exp coefficients",
         "linear": "linear coefficients", "quad": "quadratic coefficients"}


@pytest.mark.parametrize("few", [True, False])
@pytest.mark.parametrize("bad", [(), ("A",), ("b",), ("coef",), ("linear",), ("quad",), ("b", "coef"),
                                 ("coef", "linear"), ("A", "b"), ("linear", "quad"), ("b", "quad")])
def test_objective_checks_in_one_pass_name_the_first_bad_input(bad, few, monkeypatch):
    """The finite-value checks of the model, in one pass or array by array: a finite program passes, a bad one is
    refused with the name of the first bad input in the order features, offsets, coefficients (per group), linear,
    quadratic -- the order of the array-by-array checks."""
    from varopt.errors import InputDataError
    from varopt.solvers.majorize.model import MajorizeModel
    if not few:
        monkeypatch.setattr(model_mod, "FEW_CHECKED", -1)
    program = _lse_program(bad)
    if not bad:
        MajorizeModel(program)
        return
    first = min(bad, key=["A", "b", "coef", "linear", "quad"].index)
    with pytest.raises(InputDataError, match=NAMES[first]):
        MajorizeModel(program)
