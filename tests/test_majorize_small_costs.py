"""The per-solve and per-trial shortcuts of small constrained majorize programs against their plain forms.

Each shortcut (docs/majorize.md section 6.0l) computes on Python floats, from a cache or without a numpy wrapper what
the numpy path computed before; each must give the same sets, ratios, pairs, choices and arrays, bit for bit, on
random inputs with the awkward cases (points exactly at a bound's tolerance, infinite sides, rows the step moves
towards, a stale cache, repeated or unsorted indices, padding).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from majorize_checks import assert_same_pairs, restricted_reference, small_constrained_logistic
from varopt import lpqp
from varopt.formulations.logistic import logistic_program
from varopt.program import Constraint, Expression, Program
from varopt.registry import get_solver
from varopt.solvers.majorize import reuse, step_qp
from varopt.solvers.majorize.groups import PaddedGroups
from varopt.solvers.majorize.model import MajorizeModel, singleton_rows_to_bounds
from varopt.solvers.majorize.reuse import (HELD_PY_MAX, ScaledCurvature, bound_tolerances, bounded_sides, free_set,
                                           held_variables, _restricted_pairs)
from varopt.solvers.majorize.step_qp import StepQP
from varopt.solvers.majorize.structured import choose_step_solver, predicted_costs


def _bounds(rng, n):
    lb = rng.choice([-np.inf, -1e6, -2.0, 0.0], n)
    ub = rng.choice([np.inf, 0.5, 3.0, 1e6], n)
    return lb, ub


def _points_on_the_tolerance(rng, lb, ub, tol):
    """Random points in the box, many exactly on a bound, at its tolerance (``x - lb == tl``), or just past it."""
    n = lb.size
    x = np.clip(rng.uniform(-3, 3, n), lb, ub)
    r = rng.random(n)
    tl, tu = tol
    with np.errstate(invalid="ignore"):
        x = np.where((r < 0.2) & np.isfinite(lb), lb, x)
        x = np.where((r >= 0.2) & (r < 0.3) & np.isfinite(lb) & (lb == 0.0), tl, x)  # 0 + tl - 0 == tl exactly
        x = np.where((r >= 0.3) & (r < 0.35) & np.isfinite(lb) & (lb == 0.0), np.nextafter(tl, np.inf), x)
        x = np.where((r >= 0.35) & (r < 0.45) & np.isfinite(lb), lb + 0.5 * tl, x)  # within a scaled tolerance
        x = np.where((r > 0.8) & (r < 0.9) & np.isfinite(ub), ub, x)
        x = np.where((r >= 0.9) & np.isfinite(ub), ub - 0.5 * tu, x)
    return x


def test_held_variables_are_the_complement_of_free_set():
    """The held variables on Python floats (few bounded variables) are exactly those ``free_set`` holds: the same
    comparisons on the same doubles, including a point at exactly the tolerance, a zero gradient component and
    infinite sides; above ``HELD_PY_MAX`` bounded variables there is no Python form."""
    rng = np.random.default_rng(21)
    seen = set()
    for trial in range(400):
        n = int(rng.integers(1, 30))
        lb, ub = _bounds(rng, n)
        if trial % 3 == 0:  # few bounded variables (the Python form's case)
            free = rng.random(n) < 0.7
            lb[free], ub[free] = -np.inf, np.inf
        tol = bound_tolerances(lb, ub)
        sides = bounded_sides(lb, ub)
        bounded = int(np.count_nonzero(np.isfinite(lb) | np.isfinite(ub)))
        if bounded > HELD_PY_MAX:
            assert sides is None
            continue
        x = _points_on_the_tolerance(rng, lb, ub, tol)
        u = rng.standard_normal(n) * (rng.random(n) < 0.9)  # some exact zeros
        want = tuple(np.flatnonzero(~free_set(x, u, lb, ub, tol)).tolist())
        assert held_variables(x, u, sides) == want
        seen.add(min(len(want), 2))
    assert seen == {0, 1, 2}  # none, one and several held variables were tested


def test_free_mask_reuses_the_last_held_set_and_matches_free_set():
    """``ScaledCurvature._free_mask``: None when nothing is held, False when everything is, else the mask of
    ``free_set``; the mask object is reused while the held set stays the same and replaced when it changes."""
    n = 8
    lb = np.full(n, -np.inf)
    ub = np.full(n, np.inf)
    lb[:4] = 0.0
    ub[6] = 1.0
    model = type("M", (), {"lb": lb, "ub": ub})()
    sc = ScaledCurvature(5)
    sc._bound_tol = (model, bound_tolerances(lb, ub))
    sc._held_sides = bounded_sides(lb, ub)
    assert sc._held_sides is not None
    x = np.zeros(n)
    u = -np.ones(n)   # pushes every variable up: none held at its lower bound
    assert sc._free_mask(x, u, model) == (None, None)
    u[[0, 2]] = 1.0   # variables 0 and 2 held at 0
    F, key = sc._free_mask(x, u, model)
    np.testing.assert_array_equal(F, free_set(x, u, lb, ub))
    assert key == (0, 2)
    F2, _ = sc._free_mask(x + 0.0, u * 2.0, model)  # the same held set: the same mask object
    assert F2 is F
    u[3] = 5.0
    F3, key3 = sc._free_mask(x, u, model)
    assert key3 == (0, 2, 3) and F3 is not F
    np.testing.assert_array_equal(F3, free_set(x, u, lb, ub))
    one = type("M", (), {"lb": np.zeros(1), "ub": np.full(1, np.inf)})()
    sc1 = ScaledCurvature(5)
    sc1._bound_tol = (one, bound_tolerances(one.lb, one.ub))
    sc1._held_sides = bounded_sides(one.lb, one.ub)
    assert sc1._free_mask(np.zeros(1), np.ones(1), one)[0] is False   # every variable held


def _program(rng, n=7, rows=2):
    """A small program with bounds (finite and infinite, lower and upper) and dense rows with both sides."""
    obj = Expression(n, 0.0, rng.standard_normal(n))
    # row 0 one-sided (a step moves towards it about half the time), the others two-sided
    cons = [Constraint(f"r{i}", Expression(n, 0.1 * i, rng.standard_normal(n)), -np.inf if i == 0 else -1.0 - i,
                       0.5 + i) for i in range(rows)]
    lb = np.where(rng.random(n) < 0.5, -np.inf, -0.5)
    ub = np.where(rng.random(n) < 0.5, np.inf, 0.5)
    return Program([f"x{j}" for j in range(n)], lb, ub, obj, cons)


def _old_ratio(qp, x, step):
    """The ratio test before the Python-float form: the finite sides the step moves towards, gathered."""
    G, g, _ = qp._sides
    gd = G @ step
    down = gd < 0
    if not down.any():
        return np.inf
    return max(float(((g[down] - G[down] @ x) / gd[down]).min()), 0.0)


def _reference_ratio(model, x, step):
    """One constraint at a time, in exact-enough arithmetic (fractions would be overkill: 1e-13 relative)."""
    A = model.A.toarray()
    a = math.inf
    sides = [(x[j], step[j], model.lb[j], model.ub[j]) for j in range(x.size)]
    sides += [(float(A[i] @ x), float(A[i] @ step), model.lo[i], model.hi[i]) for i in range(A.shape[0])]
    for v, dv, lo, hi in sides:
        if dv != 0:
            a = min(a, ((hi if dv > 0 else lo) - v) / dv)
    return max(a, 0.0)


def test_ratio_test_on_python_floats_with_the_feasibility_tests_product():
    """The ratio test over few finite sides takes ``G x`` from the feasibility test that accepted ``x`` (the same
    product when ``x`` is that point, a fresh one otherwise): bound sides bit for bit as the gathered form, rows to
    rounding; equal to the constraint-by-constraint ratio test; a stale product (another ``x``) is never used."""
    rng = np.random.default_rng(23)
    checked = {"rows": 0, "bounds": 0, "cached": 0}
    for k in range(60):
        p = _program(rng, rows=1 + k % 2)
        model = MajorizeModel(p)
        qp = StepQP(model, lpqp)
        assert qp._few_sides
        fresh = StepQP(model, lpqp)
        x = np.clip(rng.uniform(-0.3, 0.3, p.n), model.lb, model.ub)
        x = np.where(rng.random(p.n) < 0.3, np.clip(np.sign(rng.standard_normal(p.n)) * 0.5, model.lb, model.ub), x)
        for _ in range(8):
            step = rng.standard_normal(p.n) * (rng.random(p.n) < 0.8)
            a = qp.max_factor(x, step)
            assert a == fresh.max_factor(x.copy(), step)   # with or without the cached product: the same doubles
            ref = _reference_ratio(model, x, step)
            assert a == pytest.approx(ref, rel=1e-13, abs=1e-15)
            old = _old_ratio(qp, x, step)
            assert a == pytest.approx(old, rel=1e-13, abs=1e-15)
            G, g, _ = qp._sides
            down = (G @ step) < 0
            rows_down = bool(down[int(np.isfinite(model.lb).sum() + np.isfinite(model.ub).sum()):].any())
            if not rows_down:
                assert a == old   # bound sides only: bit for bit
                checked["bounds"] += 1
            else:
                checked["rows"] += 1
            # move to a feasible point on the segment; the feasibility test's product serves the next ratio test
            t = min(1.0, a) * rng.uniform(0.2, 1.0)
            z = x + t * step
            if qp.feasible(z):
                x = z
                checked["cached"] += 1
            else:
                # a stale product must not serve another point: test with a new x after a failed test
                x = np.clip(x + 0.01 * rng.standard_normal(p.n), model.lb, model.ub)
    assert min(checked.values()) > 20


def test_ratio_test_never_reads_the_product_of_another_point():
    rng = np.random.default_rng(24)
    p = _program(rng, rows=1)
    model = MajorizeModel(p)
    qp = StepQP(model, lpqp)
    x = np.zeros(p.n)
    step = rng.standard_normal(p.n)
    assert qp.feasible(x)
    y = np.clip(rng.uniform(-0.4, 0.4, p.n), model.lb, model.ub)   # not the point the product was taken at
    assert qp.max_factor(y, step) == StepQP(model, lpqp).max_factor(y, step)
    assert qp.max_factor(y, step) == pytest.approx(_reference_ratio(model, y, step), rel=1e-13, abs=1e-15)


def test_restricted_pairs_follow_a_list_that_is_not_the_last_one_extended():
    """The aligned cache restricts only the new pair when the list is the last one with a pair in front; any other
    list (a pair replaced behind the first, the same first pair with another tail) is restricted afresh."""
    rng = np.random.default_rng(25)
    n = 9
    F = rng.random(n) < 0.7

    def pair():
        s = rng.standard_normal(n)
        y = s * rng.uniform(0.5, 2.0, n)
        return (s, y, 1.0 / float(s @ y))

    cache = {}
    p = [pair() for _ in range(4)]
    assert_same_pairs(_restricted_pairs(p, F, cache), restricted_reference(p, F))
    q = [pair()] + p[:3]                        # the last list extended: only the new pair is restricted
    assert_same_pairs(_restricted_pairs(q, F, cache), restricted_reference(q, F))
    r = [pair(), q[0], pair(), q[2]]             # the same second pair, another tail
    assert_same_pairs(_restricted_pairs(r, F, cache), restricted_reference(r, F))
    s = [pair()] + [r[0], r[1], q[1]]            # first two match r, then a pair from an older list
    assert_same_pairs(_restricted_pairs(s, F, cache), restricted_reference(s, F))


def test_step_solver_choice_follows_the_working_set_hint_and_cg_iterations():
    """The choice kept on the model is the least predicted cost for its key (options, CG iterations, working-set
    hint, template detection): changing any of them gives the fresh choice, here including a change of path."""
    rng = np.random.default_rng(26)
    X = rng.standard_normal((60, 300))
    y = (rng.random(60) < 0.5).astype(int)
    prog = logistic_program(X, y, 1.0)
    n = prog.n
    lb, ub = np.full(n, -0.1), np.full(n, 0.1)
    # more rows than the bounds-and-rows Newton method takes: the active set's price, which reads the hint
    cons = [Constraint(f"sum{i}", Expression(n, linear=(np.arange(n) % 25 == i).astype(float)), -np.inf, 0.5)
            for i in range(25)]
    model = MajorizeModel(Program(prog.names, lb, ub, prog.objective, cons))
    opts = get_solver("majorize").options.validate({})
    choices = set()
    for hint in (None, 0, 3, 40, None, 400, 0):
        for cg in (None, 4, None):
            model.working_set_hint = hint
            costs = predicted_costs(model, opts, cg)
            want = min(costs, key=costs.get)
            assert choose_step_solver(model, opts, cg) == want
            choices.add(want)
    assert len(choices) >= 2   # the hint changes the path here: a key without it would repeat a stale choice


def test_two_configuration_log_partitions_are_the_plain_formula():
    """Groups of two configurations (every binary logistic loss) take one maximum and one sum: the same doubles as
    the column loop's ``max`` and ``+``, checked against the plain formula bit for bit."""
    rng = np.random.default_rng(27)
    G = 50
    A = rng.standard_normal((2 * G, 4))
    seg = np.repeat(np.arange(G), 2)
    coef = rng.uniform(0.5, 2.0, G)
    b = np.where(rng.random(2 * G) < 0.1, -30.0, 0.0)
    grp = PaddedGroups(A, b, seg, coef)
    assert grp.c == 2
    S = rng.standard_normal((G, 2)) * 30
    v, W = grp.value_weights(S)
    smax = S.max(axis=1)
    E = np.exp(S - smax[:, None])
    tot = E[:, 0] + E[:, 1]
    want_W = E * (coef / tot)[:, None]
    np.testing.assert_array_equal(W, want_W)
    assert v == float(coef @ (smax + np.log(tot)))
    S[3, 1] = np.nan
    with pytest.raises(Exception, match="NaN"):
        grp.value_weights(S)
    S[3] = -np.inf
    with pytest.raises(Exception, match="identically zero"):
        grp.value_weights(S)


@pytest.mark.parametrize("equal", [True, False])
def test_padded_log_base_measures_keep_each_row_in_its_place(equal):
    """Groups of equal sizes are their own padding (no scatter); unequal ones are padded with ``-inf``: either way
    entry ``(g, k)`` of ``logh`` is the ``k``-th row of group ``g``."""
    rng = np.random.default_rng(28)
    sizes = [3, 3, 3, 3] if equal else [3, 1, 2, 3]
    seg = np.repeat(np.arange(len(sizes)), sizes)
    K = seg.size
    b = np.where(rng.random(K) < 0.2, -np.inf, rng.standard_normal(K))
    grp = PaddedGroups(rng.standard_normal((K, 3)), b, seg, np.ones(len(sizes)))
    assert grp.logh.shape == (len(sizes), max(sizes))
    k = 0
    for g, s in enumerate(sizes):
        np.testing.assert_array_equal(grp.logh[g, :s], b[k:k + s])
        assert np.all(grp.logh[g, s:] == -np.inf)
        k += s
    b_before = b.copy()
    grp.logh[0, 0] = 123.0   # its own array: the caller's offsets are not shared
    np.testing.assert_array_equal(b, b_before)


@pytest.mark.parametrize("case", ["ascending", "repeated", "unsorted"])
def test_singleton_rows_tighten_bounds_one_row_at_a_time(case):
    """Singleton rows become bounds intersected with the existing ones, row by row: distinct variables by a gather
    and a scatter, repeated ones by ``ufunc.at``; both the per-row intersection."""
    import scipy.sparse as sp
    n = 6
    cols = {"ascending": [0, 2, 5], "repeated": [1, 4, 1], "unsorted": [5, 0, 3]}[case]
    coefs = [2.0, -0.5, 1.0]
    A = np.zeros((len(cols) + 1, n))
    for i, (j, a) in enumerate(zip(cols, coefs)):
        A[i, j] = a
    A[-1] = 1.0   # a real row
    lo = np.array([-0.2, -np.inf, 0.1, -3.0])
    hi = np.array([0.4, 0.3, np.inf, 3.0])
    lb = np.array([-0.05, -1.0, -np.inf, -0.5, -np.inf, 0.0])   # some tighter than the rows
    ub = np.array([np.inf, 0.5, 1.0, np.inf, 2.0, 0.15])
    R, rlo, rhi, rlb, rub = singleton_rows_to_bounds(sp.csr_matrix(A), lo, hi, lb, ub)
    want_lb, want_ub = lb.copy(), ub.copy()
    for i, (j, a) in enumerate(zip(cols, coefs)):
        l1, h1 = lo[i] / a, hi[i] / a
        if a < 0:
            l1, h1 = h1, l1
        want_lb[j] = max(want_lb[j], l1)
        want_ub[j] = min(want_ub[j], h1)
    np.testing.assert_array_equal(rlb, want_lb)
    np.testing.assert_array_equal(rub, want_ub)
    np.testing.assert_array_equal(R.toarray(), A[-1:])
    np.testing.assert_array_equal(rlo, lo[-1:])
    np.testing.assert_array_equal(rhi, hi[-1:])
    np.testing.assert_array_equal(lb, [-0.05, -1.0, -np.inf, -0.5, -np.inf, 0.0])   # the caller's arrays untouched


def test_python_float_shortcuts_give_the_numpy_paths_fit(monkeypatch):
    """A constrained fit whose trials meet bounds and a row, with the shortcuts (held variables and ratios on
    Python floats) and without them (numpy's free set and the gathered ratio test): the same iterations, trial
    statistics and, bit for bit, objective and point."""
    prog, lb, ub, row = small_constrained_logistic(30)
    n = prog.n
    ub[4:6] = 0.05
    cons = [Constraint("sum", Expression(n, linear=row), -np.inf, 0.3),
            Constraint("pair", Expression(n, linear=np.eye(n)[10] - np.eye(n)[11]), -0.1, np.inf)]
    program = Program(prog.names, lb, ub, prog.objective, cons)
    solver = get_solver("majorize")
    fast = solver.solve(program, tol=1e-12)
    monkeypatch.setattr(reuse, "HELD_PY_MAX", -1)
    monkeypatch.setattr(step_qp, "FEW_SIDES", -1)
    slow = solver.solve(program, tol=1e-12)
    assert fast.status == slow.status == "optimal"
    assert fast.iterations == slow.iterations and fast.info["bound_reuse"] == slow.info["bound_reuse"]
    assert fast.objective == slow.objective
    np.testing.assert_array_equal(fast.x, slow.x)
    assert program.max_violation(fast.x) <= 1e-9
    assert fast.info["bound_reuse"]["accepted"] >= 3
