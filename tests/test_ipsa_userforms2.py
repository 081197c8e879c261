"""ipsa on models written the way users write them (bug hunt, branch huntb): each case is checked against an
independent reference (a closed form, CVXPY + Clarabel) and, where ipsa promises it, against strict interiority
evaluated by the user's own tools (CVXPY ``.value``, Pyomo ``value()``)."""
from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo

import varopt  # noqa: F401  (registers the solvers)


def test_log_over_free_variables_keeps_the_iterates_in_the_domain():
    """``min -sum log x_i + sum x_i  s.t.  sum x <= 2`` over a free ``x``: the optimum is ``x = 2/3`` (the
    unconstrained minimiser ``x = 1`` violates the row; by symmetry and convexity the row is active), value
    ``2 - 3 log(2/3)``. The domain ``x > 0`` of ``log`` is implicit in the model; ipsa used to step out of it
    (``-log x`` has the finite slope ``-1/x`` at ``x < 0``) and returned ``x = -5.9`` with objective NaN."""
    x = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(-cp.sum(cp.log(x)) + cp.sum(x)), [cp.sum(x) <= 2])
    seen = []
    prob.solve(method="ipsa", max_iter=3000, callback=lambda k, xk, *rest: seen.append(np.min(xk)) and None)
    assert min(seen) > 0  # every iterate inside the domain of log
    assert np.isfinite(prob.value) and abs(prob.value - (2 - 3 * math.log(2 / 3))) < 0.03
    assert np.all(x.value > 0) and abs(np.sum(x.value) - 2) < 0.03


def test_pyomo_log_model_loads_a_point_pyomo_evaluates():
    """The same model in Pyomo, started at the user's ``x = 1``: ``value(m.o)`` raised ``math domain error``."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), initialize=1.0)
    m.o = pyo.Objective(expr=-sum(pyo.log(m.x[i]) for i in range(3)) + sum(m.x[i] for i in range(3)))
    m.c = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) <= 2)
    pyo.SolverFactory("ipsa").solve(m, max_iter=3000)
    assert abs(pyo.value(m.o) - (2 - 3 * math.log(2 / 3))) < 0.03


def test_entropy_on_a_simplex_without_a_sign_constraint_matches_clarabel():
    """``min c.p - sum entr(p)  s.t.  sum p == 1`` with ``p`` free (``entr`` implies ``p >= 0``): the optimum is
    the softmax of ``-c``; the answer must be within 1e-2 of it and strictly positive."""
    c = np.array([0.3, -1.2, 0.5, 0.0])
    p = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(c @ p - cp.sum(cp.entr(p))), [cp.sum(p) == 1])
    prob.solve(method="ipsa", max_iter=1500)
    ref = np.exp(-c) / np.exp(-c).sum()
    assert np.all(p.value > 0) and np.abs(p.value - ref).max() < 1e-2
    assert abs(prob.value - (-math.log(np.exp(-c).sum()))) < 1e-3


def test_a_limit_says_which_limit_and_that_it_was_the_default():
    """A small QP written with ``cp.sum_squares`` is a finite sum of its 3 rows for ipsa; without a stopping rule
    the run is 10 passes = 30 iterations and stops far from the optimum (value 3.06 against Clarabel's 1/3). The
    status said ``pass_limit`` with an empty message (Pyomo's ``results.solver.message`` was the bare status)."""
    x = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - np.arange(3))), [cp.sum(x) <= 2])
    prob.solve(method="ipsa")
    r = prob.varopt_result
    assert prob.status == "user_limit" and r.status == "pass_limit" and r.iterations == 30
    assert "10 passes over the 3 terms of the finite sum (30 iterations)" in r.message
    assert "default when no stopping rule is given" in r.message
    prob.solve(method="ipsa", max_iter=7)
    assert prob.varopt_result.message == "max_iter=7 reached"  # the user's own limit: no hint
