"""IPSA's start point (varopt/solvers/ipsa/start.py): the closed form for linear rows that each have a
loosening variable (the L1 box form and others; centred like the phase-1 LP's point), checked by independent evaluation of every row and
against hand-computed points; rows without one still go through the phase-1 LP."""
import math

import numpy as np
import pytest

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.formulations.l1 import l1_logistic_program
from varopt.program import Constraint, Expression, Program
from varopt.solvers.ipsa import start
from varopt.solvers.ipsa.constraints import ConstraintSet


def _strict(P, x):
    """Every bound and row strictly satisfied, each row evaluated exactly (math.fsum)."""
    if not (np.all(x > P.lb) and np.all(x < P.ub)):
        return False
    for c in P.constraints:
        v = math.fsum(c.body.linear * x) + c.body.constant
        if not (c.lo < v < c.hi):
            return False
    return True


def _no_lp(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("the phase-1 LP was called")
    monkeypatch.setattr(start, "phase1_linear", fail)


def test_box_form_starts_at_w0_u1_without_the_lp(monkeypatch):
    """The closed form gives w = 0, u = 1; the start is that point centred (as the phase-1 LP's point is), without
    the LP."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    P = l1_logistic_program(X, np.where(X[:, 0] > 0, 1.0, -1.0), 0.1, "box")  # w (5), u (5), b
    _no_lp(monkeypatch)
    cons = ConstraintSet(P)
    x0 = start.loosened_interior(cons, P.lb, P.ub)
    assert np.array_equal(x0, np.r_[np.zeros(5), np.ones(5), 0.0])
    G, h = start._linear_rows(cons)
    x = start.strictly_feasible_start(cons, P)
    np.testing.assert_array_equal(x, start.centre(x0, G, h))
    assert _strict(P, x0) and _strict(P, x)
    r = varopt.get_solver("ipsa").solve(P, max_iter=3, backend="numpy", history_objective=False)
    assert r.iterations == 3


def test_loosening_variables_move_to_one_from_their_rows():
    """x0 free, coefficients of both signs (not loosening); x1 free, only with negative coefficients
    in the rows as ``G x <= h`` (loosens upwards); x2 >= 0.5, negative coefficient (upwards); x3 <= 1,
    positive coefficient (downwards). From the bounds point
    (0, 0, 1.5, 0): row a (slack 1 < |-2|) asks x1 += 1 - 1/2, row b (slack -3) asks x1 += 4 (the
    larger wins), row c (slack 0.5) asks x3 -= 0.5, row d (slack 1.5 >= 1) nothing."""
    n = 4

    def row(*coef):
        return Expression(n, linear=np.array(coef, dtype=float))

    cons = [Constraint("a", row(3, -2, 0, 0), -np.inf, 1.0),
            Constraint("b", row(-1, 1, 0, 0), 3.0, np.inf),
            Constraint("c", row(1, 0, 0, 1), -np.inf, 0.5),
            Constraint("d", row(1, 0, 1, 0), 0.0, np.inf)]
    P = Program([f"x{i}" for i in range(n)], np.array([-np.inf, -np.inf, 0.5, -np.inf]),
                np.array([np.inf, np.inf, np.inf, 1.0]), Expression(n, linear=np.ones(n)), cons)
    x = start.loosened_interior(ConstraintSet(P), P.lb, P.ub)
    assert np.array_equal(x, [0.0, 4.0, 1.5, -0.5])
    assert _strict(P, x)


@pytest.mark.parametrize("lo, hi, ub1", [(-1.0, 1.0, np.inf),     # a range row: no variable loosens both sides
                                         (-np.inf, 1.0, 5.0)])    # the loosening side is bounded
def test_rows_without_a_loosening_variable_use_the_phase1_lp(lo, hi, ub1):
    n = 2
    P = Program(["x0", "x1"], np.full(n, -np.inf), np.array([np.inf, ub1]), Expression(n, linear=np.ones(n)),
                [Constraint("r", Expression(n, linear=np.array([1.0, -1.0])), lo, hi),
                 Constraint("q", Expression(n, linear=np.array([1.0, 1.0])), -3.0, np.inf)])
    cons = ConstraintSet(P)
    assert start.loosened_interior(cons, P.lb, P.ub) is None
    assert _strict(P, start.strictly_feasible_start(cons, P))
