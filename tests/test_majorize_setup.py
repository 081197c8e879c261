"""The set-up shortcuts of a majorize solve (and of the Program it reads) against their plain constructions.

Each shortcut builds from arrays what scipy or a per-constraint evaluation built before; each must give the
same matrices, bounds, ratios and sets, on random inputs with the awkward cases (stored zeros, infinite sides,
points on a bound, unsorted or duplicate indices).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from varopt.program import Constraint, Expression, LseGroup, Program
from varopt.solvers.majorize.model import MajorizeModel, singleton_rows_to_bounds
from varopt.solvers.majorize.reuse import bound_tolerances, free_set
from varopt.solvers.majorize.step_qp import StepQP


def _random_rows(rng, m, n):
    """csr rows, some with one entry (bounds in disguise), one with a stored zero next to its only nonzero."""
    A = sp.random(m, n, density=0.4, format="csr", random_state=rng).toarray()
    A[0] = 0.0
    A[0, 2] = -1.5  # a singleton row with a negative coefficient
    A[1] = 0.0
    A[1, 0] = 2.0
    M = sp.csr_matrix(A)
    # row 1 gets a stored zero: still one entry
    d, i, p = list(M.data), list(M.indices), M.indptr.copy()
    k = p[1]
    d.insert(k, 0.0)
    i.insert(k, 3)
    p[2:] += 1
    Z = sp.csr_matrix((np.array(d), np.array(i), p), shape=M.shape)
    Z.has_sorted_indices = False
    return Z


@pytest.mark.parametrize("seed", range(5))
def test_singleton_rows_to_bounds_matches_scipy_row_selection(seed):
    rng = np.random.default_rng(seed)
    m, n = 7, 6
    A = _random_rows(rng, m, n)
    lo = np.where(rng.random(m) < 0.3, -np.inf, rng.standard_normal(m))
    hi = np.where(rng.random(m) < 0.3, np.inf, lo + rng.random(m))
    lb = np.where(rng.random(n) < 0.5, -np.inf, -rng.random(n))
    ub = np.where(rng.random(n) < 0.5, np.inf, rng.random(n))
    before = A.copy()
    R, rlo, rhi, rlb, rub = singleton_rows_to_bounds(A, lo, hi, lb, ub)
    # the caller's matrix is untouched (its stored zero is dropped on a copy)
    assert A.nnz == before.nnz and np.array_equal(A.data, before.data)
    ref = A.copy()
    ref.eliminate_zeros()
    single = np.diff(ref.indptr) == 1
    keep = ~single
    np.testing.assert_array_equal(R.toarray(), ref[keep].toarray())
    R.check_format(full_check=True)
    np.testing.assert_array_equal(rlo, lo[keep])
    np.testing.assert_array_equal(rhi, hi[keep])
    # every singleton row is a bound now: the feasible sets agree at random points
    for _ in range(200):
        x = rng.uniform(-3, 3, n)
        Ax = ref @ x
        want = np.all((Ax >= lo) & (Ax <= hi)) and np.all((x >= lb) & (x <= ub))
        got = np.all((R @ x >= rlo) & (R @ x <= rhi)) and np.all((x >= rlb) & (x <= rub))
        assert want == got


def _program(rng, n=6, with_rows=True):
    obj = Expression(n, 0.0, rng.standard_normal(n))
    cons = []
    if with_rows:
        # sparse rows with unsorted, repeated indices; dense rows; a singleton row; an equality; a constant body
        cons.append(Constraint("s", Expression(n, 0.3, (np.array([4, 1, 4, 0]), np.array([1.0, -2.0, 0.5, 3.0]))),
                               -1.0, 2.0))
        cons.append(Constraint("d", Expression(n, -0.2, rng.standard_normal(n)), -np.inf, 0.5))
        cons.append(Constraint("one", Expression(n, 0.0, (np.array([2]), np.array([-1.5]))), 0.1, np.inf))
        cons.append(Constraint("eq", Expression(n, 1.0, (np.array([3, 5]), np.array([1.0, 1.0]))), 0.0, 0.0))
    lb = np.where(rng.random(n) < 0.5, -np.inf, -1.0)
    ub = np.where(rng.random(n) < 0.5, np.inf, 1.0)
    return Program([f"x{j}" for j in range(n)], lb, ub, obj, cons)


def test_linear_constraints_match_the_per_row_construction():
    rng = np.random.default_rng(11)
    p = _program(rng)
    A, lo, hi, idx = p.linear_constraints()
    A.check_format(full_check=True)
    assert A.has_canonical_format
    ref = np.array([c.body.linear for c in p.constraints])
    np.testing.assert_array_equal(A.toarray(), ref)
    const = np.array([c.body.constant for c in p.constraints])
    np.testing.assert_array_equal(lo, np.array([c.lo for c in p.constraints]) - const)
    np.testing.assert_array_equal(hi, np.array([c.hi for c in p.constraints]) - const)
    assert idx == list(range(len(p.constraints)))


def test_linear_constraints_and_max_violation_share_rows_that_follow_the_list():
    """``linear_constraints`` and ``max_violation`` read one assembly of the rows, rebuilt when the constraint list
    is replaced or grows."""
    rng = np.random.default_rng(18)
    p = _program(rng)
    A1, lo1, hi1, _ = p.linear_constraints()
    assert p._linear_rows()[0] is A1
    extra = Constraint("new", Expression(p.n, 0.25, (np.array([1, 4]), np.array([2.0, -1.0]))), -0.5, 0.5)
    p.constraints.append(extra)
    A2, lo2, hi2, idx = p.linear_constraints()
    assert A2.shape[0] == A1.shape[0] + 1 and idx[-1] == len(p.constraints) - 1
    np.testing.assert_array_equal(A2.toarray()[-1], extra.body.linear)
    assert (lo2[-1], hi2[-1]) == (-0.75, 0.25)
    x = rng.uniform(-1, 1, p.n)
    g = A2 @ x
    want = max(0.0, float(np.max(np.maximum(lo2 - g, g - hi2))), float(np.max(p.lb - x)), float(np.max(x - p.ub)))
    assert p.max_violation(x) == pytest.approx(want, rel=1e-14, abs=1e-15)
    p.constraints = p.constraints[:1]
    assert p.linear_constraints()[0].shape[0] == 1


def _max_factor_reference(model, A, x, step):
    """The ratio test bounds first, then rows (``A``: the same product as the solver's, dense or sparse)."""
    a = math.inf
    sides = [(x[j], step[j], model.lb[j], model.ub[j]) for j in range(x.size)]
    sides += [(float((A @ x)[i]), float((A @ step)[i]), model.lo[i], model.hi[i]) for i in range(A.shape[0])]
    for v, dv, lo, hi in sides:   # one constraint at a time: the side the step moves towards
        if dv != 0:
            a = min(a, ((hi if dv > 0 else lo) - v) / dv)
    return max(a, 0.0)


@pytest.mark.parametrize("sides", [True, False])
def test_ratio_test_over_bounds_and_rows_at_once(sides):
    """Both forms of the ratio test: the finite sides as one dense ``G`` (``sides``) and the masks over every bound
    and row (the form for many finite sides), each equal to the constraint-by-constraint ratio test."""
    from varopt import lpqp
    rng = np.random.default_rng(13)
    for _ in range(40):
        p = _program(rng)
        model = MajorizeModel(p)
        qp = StepQP(model, lpqp)
        assert qp._sides is not None
        if not sides:
            qp._sides = None
        x = np.clip(rng.uniform(-0.5, 0.5, p.n), model.lb, model.ub)
        for _ in range(10):
            step = rng.standard_normal(p.n) * (rng.random(p.n) < 0.7)
            a = qp.max_factor(x, step)
            assert a == _max_factor_reference(model, qp._A, x, step)
        # a step along which nothing is finite or nothing is approached: no cap
        assert qp.max_factor(x, np.zeros(p.n)) == math.inf


def _feasible_reference(model, x):
    """In the box exactly, in the rows within 1e-9 relative (NaN and inf entries fail)."""
    if not (np.all(x >= model.lb) and np.all(x <= model.ub)):
        return False
    Ax = model.A.toarray() @ x
    with np.errstate(invalid="ignore"):
        lo = model.lo - 1e-9 * np.maximum(1.0, np.abs(model.lo))
        hi = model.hi + 1e-9 * np.maximum(1.0, np.abs(model.hi))
    return bool(np.all(Ax >= lo) and np.all(Ax <= hi))


@pytest.mark.parametrize("sides", [True, False])
def test_feasibility_test_of_trials_matches_the_definition(sides):
    from varopt import lpqp
    rng = np.random.default_rng(16)
    agree = {True: 0, False: 0}
    for _ in range(40):
        p = _program(rng)
        p.constraints = [c for c in p.constraints if c.name != "eq"]  # (random points never meet an equality)
        model = MajorizeModel(p)
        qp = StepQP(model, lpqp)
        if not sides:
            qp._sides = None
        for k in range(40):
            x = rng.uniform(-0.6, 0.6, p.n)
            if k % 4 == 0:  # exactly on some bounds (the box test is exact)
                x = np.clip(x, model.lb, model.ub)
            if k % 4 == 1:  # a rounding outside a bound
                j = int(rng.integers(p.n))
                if np.isfinite(model.lb[j]):
                    x = np.clip(x, model.lb, model.ub)
                    x[j] = np.nextafter(model.lb[j], -np.inf)
            want = _feasible_reference(model, x)
            assert qp.feasible(x) == want
            agree[want] += 1
            for bad in (np.nan, np.inf, -np.inf):  # a non-finite entry is never feasible (trials are finite: the
                z = np.clip(x, model.lb, model.ub)  # product's warning on 0 * inf is not silenced there)
                z[int(rng.integers(p.n))] = bad
                with np.errstate(invalid="ignore"):
                    assert not qp.feasible(z)
    assert min(agree.values()) > 50  # both answers were tested


def test_side_matrix_gives_way_to_masks_when_large(monkeypatch):
    """``G`` holds every finite side densely: past ``DENSE_ENTRIES`` entries the ratio and feasibility tests use the
    masks over all bounds and rows, with the same answers."""
    from varopt import lpqp
    from varopt.solvers.majorize import step_qp
    rng = np.random.default_rng(17)
    p = _program(rng)
    model = MajorizeModel(p)
    k = int(np.isfinite(model.lb).sum() + np.isfinite(model.ub).sum() + np.isfinite(model.lo).sum()
            + np.isfinite(model.hi).sum())
    monkeypatch.setattr(step_qp, "DENSE_ENTRIES", k * p.n - 1)
    small = StepQP(model, lpqp)
    assert small._sides is None and not sp.issparse(small._A)
    monkeypatch.setattr(step_qp, "DENSE_ENTRIES", k * p.n)
    big = StepQP(model, lpqp)
    assert big._sides is not None and big._sides[0].shape == (k, p.n)
    x = np.clip(rng.uniform(-0.5, 0.5, p.n), model.lb, model.ub)
    for _ in range(20):
        step = rng.standard_normal(p.n)
        assert small.max_factor(x, step) == big.max_factor(x, step)
        z = x + step
        assert small.feasible(z) == big.feasible(z) == _feasible_reference(model, z)


def test_free_set_with_tolerances_once_matches_the_formula():
    rng = np.random.default_rng(14)
    n = 40
    lb = rng.choice([-np.inf, -1e6, -2.0, 0.0], n)
    ub = rng.choice([np.inf, 0.5, 3.0, 1e6], n)
    with np.errstate(all="raise"):
        tol = bound_tolerances(lb, ub)
    for _ in range(50):
        x = np.clip(rng.uniform(-3, 3, n), lb, ub)
        # a rounding away from a bound still counts as on it (the tolerance scales with the bound)
        r = rng.random(n)
        with np.errstate(invalid="ignore"):
            x = np.where((r < 0.3) & np.isfinite(lb), lb + 0.5e-12 * np.maximum(1.0, np.abs(lb)), x)
            x = np.where((r > 0.7) & np.isfinite(ub), ub - 0.5e-12 * np.maximum(1.0, np.abs(ub)), x)
        u = rng.standard_normal(n)
        with np.errstate(invalid="ignore"):
            at_lb = np.isfinite(lb) & (x - lb <= 1e-12 * np.maximum(1.0, np.abs(lb)))
            at_ub = np.isfinite(ub) & (ub - x <= 1e-12 * np.maximum(1.0, np.abs(ub)))
        want = ~((at_lb & (u > 0)) | (at_ub & (u < 0)))
        with np.errstate(all="raise"):  # no floating-point exception on infinite bounds (none is silenced either)
            np.testing.assert_array_equal(free_set(x, u, lb, ub, tol), want)
            np.testing.assert_array_equal(free_set(x, u, lb, ub), want)


@pytest.mark.parametrize("seg, G, ok", [([0, 0, 1, 1, 2], 3, True), ([0], 1, True), ([0, 1, 2, 3, 3], 4, True),
                                        ([0, 1, 1, 0, 2], 3, False), ([0, 0, 2, 2, 2], 3, False),
                                        ([1, 1, 2, 2, 3], 4, False), ([0, 0, 1, 1, 2], 4, False),
                                        ([0, 2, 1, 2, 2], 3, False), ([0, 1, 0, 1, 2], 3, False)])
def test_lse_group_ids_must_be_sorted_and_cover_every_group(seg, G, ok):
    seg = np.array(seg)
    A = sp.csr_matrix(np.ones((seg.size, 2)))
    if ok:
        assert len(LseGroup(A, np.zeros(seg.size), seg, np.ones(G))) == G
    else:
        with pytest.raises(ValueError, match="seg"):
            LseGroup(A, np.zeros(seg.size), seg, np.ones(G))


def test_term_groups_keep_a_float_csr_and_canonicalize_it():
    rng = np.random.default_rng(15)
    A = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3])), shape=(1, 4))
    assert not A.has_canonical_format
    dense = A.toarray()
    g = LseGroup(A, np.zeros(1), np.zeros(1, dtype=np.int64), np.ones(1))
    assert g.A.has_canonical_format
    np.testing.assert_array_equal(g.A.toarray(), dense)
    B = sp.csr_matrix(rng.standard_normal((3, 4)))
    assert LseGroup(B, np.zeros(3), np.array([0, 0, 1]), np.ones(2)).A is B  # no re-wrapping


def test_evaluate_magnitude_is_the_sum_of_the_parts_sizes():
    """``model.magnitude`` (the rounding scale of the loop's monotonicity checks) is ``|k| + |c^T x| + |x^T H x| / 2
    + |sum_g c_g log Z_g|``, each part evaluated here independently of the model's arrays."""
    from scipy.special import logsumexp
    rng = np.random.default_rng(19)
    n = 5
    A = sp.csr_matrix(rng.standard_normal((6, n)))
    g = LseGroup(A, rng.standard_normal(6), np.array([0, 0, 1, 1, 2, 2]), np.array([1.0, 2.0, 0.5]))
    from varopt.program import QuadraticTerms
    q = QuadraticTerms(np.arange(n), np.arange(n), rng.random(n), n)
    obj = Expression(n, -3.0, rng.standard_normal(n), q, lse=[g])
    model = MajorizeModel(Program([f"x{j}" for j in range(n)], np.full(n, -np.inf), np.full(n, np.inf), obj))
    for _ in range(5):
        x = rng.standard_normal(n) * 3
        f = model.evaluate(x)[0]
        s = A @ x + g.b
        lse = sum(c * logsumexp(s[2 * i:2 * i + 2]) for i, c in enumerate(g.coef))
        quad = float(np.sum(q.v * x * x))
        parts = [-3.0, float(obj.linear @ x), quad, lse]
        assert f == pytest.approx(sum(parts), rel=1e-13)
        assert model.magnitude == pytest.approx(sum(abs(p) for p in parts), rel=1e-13)


def test_trial_with_every_variable_held_at_a_bound_is_not_evaluated():
    """Every variable at a bound with an outward gradient: the free set is empty, the trial returns None (the
    bound step decides) without evaluating the objective."""
    from varopt import lpqp
    from varopt.solvers.majorize.reuse import ScaledCurvature
    from varopt.solvers.majorize.reuse_metric import DenseMetric
    rng = np.random.default_rng(20)
    n = 4
    g = LseGroup(sp.csr_matrix(rng.standard_normal((4, n))), np.zeros(4), np.array([0, 0, 1, 1]), np.ones(2))
    obj = Expression(n, 0.0, rng.standard_normal(n), lse=[g])
    model = MajorizeModel(Program([f"x{j}" for j in range(n)], np.zeros(n), np.ones(n), obj))
    qp = StepQP(model, lpqp)
    sc = ScaledCurvature(3, "bound")
    sc.ref, sc.age = DenseMetric(np.eye(n) * 2.0), 1
    x = np.where(rng.random(n) < 0.5, 0.0, 1.0)
    u = np.where(x == 0.0, 1.0, -1.0)  # outward everywhere
    calls = []
    real = model.evaluate
    model.evaluate = lambda *a, **k: calls.append(1) or real(*a, **k)
    assert sc.trial(model, x, u, 1.0, None, None, qp) is None
    assert not calls and sc.stats["trials"] == 0
    u[0] = -u[0]  # one variable free: a trial is made and evaluated
    sc.trial(model, x, u, 1.0, None, None, qp)
    assert calls and sc.stats["trials"] == 1


def test_partition_function_too_large_for_padding_is_evaluated_by_its_group_starts():
    """A group of 65 configurations (above ``PADDED_MAX_ROWS``): no padded groups, the positive part evaluated from
    the merged rows and their group starts; the optimum agrees with scipy's BFGS on the same function."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    from varopt import get_solver
    from varopt.program import QuadraticTerms
    rng = np.random.default_rng(21)
    n, K = 3, MajorizeModel.PADDED_MAX_ROWS + 1
    A = rng.normal(size=(K + 4, n))
    seg = np.r_[np.zeros(K, dtype=np.int64), np.ones(4, dtype=np.int64)]
    g = LseGroup(sp.csr_matrix(A), rng.normal(size=K + 4), seg, np.array([1.0, 2.0]))
    obj = Expression(n, 0.0, rng.normal(size=n), QuadraticTerms(np.arange(n), np.arange(n), np.ones(n), n), lse=[g])
    prog = Program(["a", "b", "c"], np.full(n, -np.inf), np.full(n, np.inf), obj)
    model = MajorizeModel(prog)
    assert model.groups is None and model._pos_starts is not None
    f = lambda x: (logsumexp(A[:K] @ x + g.b[:K]) + 2.0 * logsumexp(A[K:] @ x + g.b[K:])  # noqa: E731
                   + obj.linear @ x + x @ x)
    x = rng.normal(size=n)
    assert model.evaluate(x)[0] == pytest.approx(f(x), rel=1e-13)
    res = get_solver("majorize").solve(prog, tol=1e-12)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(minimize(f, np.zeros(n), tol=1e-14).fun, rel=1e-10)
