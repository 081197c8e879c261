"""gop on models written the way users write them (bug hunt, branch huntb), each against an independent
reference (a closed form, CVXPY + Clarabel, SCIP), with the certificate checked: the lower bound is at most the
reference optimum and the loaded point attains the upper bound when the user's model evaluates it."""
from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import ModelStructureError


def test_entropy_over_a_free_simplex_is_certified():
    """``min c.p - sum entr(p)  s.t.  sum p == 1`` with ``p`` free: ``entr`` implies ``p >= 0``, the optimum is
    ``-log sum exp(-c)`` at the softmax of ``-c``. gop used to raise ``SolverBugError: the objective is NaN at a
    primal solution`` (the primal problems left the domain of ``p log p``)."""
    c = np.array([0.3, -1.2, 0.5, 0.0])
    p = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(c @ p - cp.sum(cp.entr(p))), [cp.sum(p) == 1])
    prob.solve(method="gop")
    opt = -math.log(np.exp(-c).sum())
    r = prob.varopt_result
    assert prob.status == "optimal"
    assert r.lower_bound <= opt + 1e-9 and abs(r.upper_bound - opt) < 1e-6
    assert abs(prob.value - r.upper_bound) < 1e-9  # CVXPY's own evaluation of the loaded point
    assert np.abs(p.value - np.exp(-c) / np.exp(-c).sum()).max() < 1e-5


def test_log_of_an_affine_argument_over_free_variables_with_a_product():
    """``min -log(x0 - 1) - log(x1 - 1) + y (x0 + x1 - 3)``, ``x0 + x1 <= 5``, ``y in [0, 1]``: biconvex; for
    ``y = 0`` the optimum is ``x = 2.5`` (``-2 log 1.5``), for ``y = 1`` it is ``x = 2`` (value 1), and the objective
    is linear in ``y``, so the optimum is ``-2 log 1.5`` at ``y = 0``."""
    x = cp.Variable(2)
    y = cp.Variable(bounds=[0, 1])
    prob = cp.Problem(cp.Minimize(-cp.sum(cp.log(x - 1)) + y * cp.sum(x) - 3 * y), [cp.sum(x) <= 5])
    prob.solve(method="gop")
    opt = -2 * math.log(1.5)
    r = prob.varopt_result
    assert prob.status == "optimal" and r.lower_bound <= opt + 1e-9 and abs(prob.value - opt) < 1e-6


def test_a_binary_variable_error_points_to_the_energy_solvers():
    """A binary variable given to gop was refused with "varopt solves continuous problems only", which is not
    so: the energy-model solvers take binary variables. The message now names them (Pyomo and CVXPY)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.Binary)
    m.y = pyo.Var(bounds=(0, 3))
    m.obj = pyo.Objective(expr=m.x * m.y - m.x - m.y)
    with pytest.raises(ModelStructureError, match="discrete domain Binary; this solver takes continuous.*'exact'"):
        pyo.SolverFactory("gop").solve(m)
    b = cp.Variable(2, boolean=True)
    with pytest.raises(ModelStructureError, match="boolean=True, which this solver does not support.*'meanfield'"):
        cp.Problem(cp.Minimize(b[0] * b[1])).solve(method="gop")
