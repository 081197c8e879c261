"""gop on models written the way Pyomo and CVXPY users write them (held-out review, branch gopuser, 2026-11-26;
docs/gop.md, "Held-out review with user-written models"). The whole set with SCIP is benchmarks/gop_user_models.py;
each test here is a bug that review found, with a reference computed independently of gop (a closed form, or
SCIP's optimum stored once: ``scip_direct`` with ``limits/gap = 1e-9``, via that benchmark)."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import ModelStructureError


def _check_cvxpy(prob, opt, maximize=False):
    """The certificate from the outside: status, the bound on the right side of ``opt``, the loaded point feasible
    (CVXPY's own ``violation``) with CVXPY's objective value equal to the reported incumbent and to ``opt``."""
    r = prob.varopt_result
    assert prob.status == "optimal" and r.status == "optimal"
    bound = r.upper_bound if maximize else r.lower_bound
    inc = r.lower_bound if maximize else r.upper_bound
    assert (bound >= opt - 1e-6) if maximize else (bound <= opt + 1e-6)
    assert max([0.0] + [float(np.max(np.atleast_1d(c.violation()))) for c in prob.constraints]) <= 1e-6
    assert abs(prob.objective.value - inc) <= 1e-6 * max(1.0, abs(inc))
    assert abs(inc - opt) <= 1e-5 * max(1.0, abs(opt))


def test_cvxpy_product_of_three_variables_is_lifted():
    """``x * y * z`` in CVXPY raised "cannot compile `var1 * var2 * var3`: product of a variable with a quadratic
    expression (degree 3)" where the same model in Pyomo is certified (the Pyomo front-end lifts ``x * y`` into a
    bounded column). ``max x y (z - 2)  s.t.  x z <= 2`` on ``[-1, 2] x [-2, 1] x [0.5, 3]``: ``z - 2`` lies in
    ``[-1.5, 1]``; at ``z = 0.5`` the value is ``-1.5 x y <= 6`` (``x y >= -4``, at ``x = 2, y = -2``, where
    ``x z = 1 <= 2``), at ``z - 2 > 0`` it is at most ``1 * 2``: the optimum is 6 (SCIP: 6)."""
    x = cp.Variable(bounds=[-1, 2])
    y = cp.Variable(bounds=[-2, 1])
    z = cp.Variable(bounds=[0.5, 3])
    prob = cp.Problem(cp.Maximize(x * y * z - 2 * x * y), [x * z <= 2])
    prob.solve(method="gop", time_limit=30)
    _check_cvxpy(prob, 6.0, maximize=True)
    # the same in vector form: sum(multiply(multiply(a, b), c))
    a = cp.Variable(2, bounds=[-1, 1])
    b = cp.Variable(2, bounds=[-1, 1])
    c = cp.Variable(2, bounds=[0, 2])
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(cp.multiply(a, b), c)) + cp.sum(c)))
    prob.solve(method="gop", time_limit=30)
    # each entry min over the box of a b c + c: a b = -1 at c = 2 gives -2 + 2 = 0, c = 0 gives 0: optimum 0
    _check_cvxpy(prob, 0.0)


def test_cvxpy_square_times_a_signed_variable_takes_the_tree_as_pyomo_does():
    """``min square(x) * y - x**3 + 0.5 y^2`` on ``[-2, 2] x [-1, 3]``: the Pyomo form ``x**2 * y`` is certified under
    mode='auto' (lifted to a bounded column, then the tree), the CVXPY form was refused: "the multiplier var2 of the
    convex term ... may be negative; declare var2 >= 0", advice that changes the model. 'auto' now takes the tree for
    it. Reference by enumeration: the objective is quadratic in y with y* = clip(-x^2, -1, 3) for fixed x, a 1-D
    function of x minimised on a fine grid plus its stationary points: -11.5 at x = 2, y = -1 (8 * -1 - 8 + 0.5)."""
    xs = np.linspace(-2, 2, 400001)
    ys = np.clip(-xs ** 2, -1, 3)
    ref = float(np.min(xs ** 2 * ys - xs ** 3 + 0.5 * ys ** 2))
    assert abs(ref - (-11.5)) < 1e-9
    x = cp.Variable(bounds=[-2, 2])
    y = cp.Variable(bounds=[-1, 3])
    prob = cp.Problem(cp.Minimize(cp.square(x) * y - x ** 3 + 0.5 * cp.square(y)))
    prob.solve(method="gop", time_limit=30)
    _check_cvxpy(prob, ref)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-2, 2))
    m.y = pyo.Var(bounds=(-1, 3))
    m.obj = pyo.Objective(expr=m.x ** 2 * m.y - m.x ** 3 + 0.5 * m.y ** 2)
    r = pyo.SolverFactory("gop").solve(m, time_limit=30).varopt_result
    assert r.status == "optimal" and abs(pyo.value(m.obj) - ref) < 1e-6 and r.lower_bound <= ref + 1e-6
    # GOP's own iteration still refuses it, with the reason
    with pytest.raises(ModelStructureError, match="may be negative"):
        cp.Problem(cp.Minimize(cp.square(x) * y - x ** 3)).solve(method="gop", mode="gop")


def test_flat_direction_of_a_convex_quadratic_is_proved_unbounded():
    """``min x y + x^2/2 + y^2/2 - x`` over free ``x, y`` equals ``(x + y)^2 / 2 - x``: unbounded below along
    ``(1, -1)``. Written with ``cp.square(x + y)`` it got status 'unbounded'; written with the product (Pyomo or
    CVXPY) gop raised ``Unbounded: GOP: the Lagrangian is unbounded below ...; declare bounds on them`` (every variable
    is in a quadratic term, so the affine ray LP had nothing to move, and the form has no negative curvature). The
    zero-eigenvalue direction is now checked with exact rational curvature. Bounded neighbours stay bounded: the
    row ``x <= 3`` gives -3 at (3, -3); the nearly singular ``(1 - 1e-9) x y`` gives ``-1 / (2 (1 - a^2))``."""
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(), pyo.Var()
    m.obj = pyo.Objective(expr=m.x * m.y + 0.5 * m.x ** 2 + 0.5 * m.y ** 2 - m.x)
    r = pyo.SolverFactory("gop").solve(m, time_limit=30).varopt_result
    assert r.status == "unbounded" and r.lower_bound == -np.inf
    d = np.array([r.info["unbounded_ray"].get("x", 0.0), r.info["unbounded_ray"].get("y", 0.0)])
    assert d[0] + d[1] == 0 and d[0] > 0  # along (1, -1) the objective is -x
    x, y = cp.Variable(), cp.Variable()
    prob = cp.Problem(cp.Minimize(x * y + 0.5 * cp.square(x) + 0.5 * cp.square(y) - x))
    prob.solve(method="gop", time_limit=30)
    assert prob.status == "unbounded"
    m.c = pyo.Constraint(expr=m.x <= 3)
    r = pyo.SolverFactory("gop").solve(m, time_limit=30).varopt_result
    assert r.status == "optimal" and abs(r.upper_bound + 3) < 1e-6 and r.lower_bound <= -3 + 1e-6
    a = 1 - 1e-9
    m2 = pyo.ConcreteModel()
    m2.x, m2.y = pyo.Var(), pyo.Var()
    m2.obj = pyo.Objective(expr=a * m2.x * m2.y + 0.5 * m2.x ** 2 + 0.5 * m2.y ** 2 - m2.x)
    r = pyo.SolverFactory("gop").solve(m2, time_limit=30).varopt_result
    ref = -1 / (2 * (1 - a * a))
    assert r.status == "optimal" and abs(r.upper_bound - ref) <= 1e-6 * abs(ref)


def test_refused_multiplied_abs_names_the_objective_once():
    """``abs(x) * y`` is outside gop's epigraph rule (a multiplied ``|u|``); the CVXPY message began "objective
    objective:" (the default objective name repeated), the Pyomo one names the objective component."""
    x = cp.Variable(bounds=[-1, 2])
    y = cp.Variable(bounds=[0, 1])
    with pytest.raises(ModelStructureError, match=r"^objective: gop needs abs\(u\) with a nonnegative weight") as info:
        cp.Problem(cp.Minimize(cp.abs(x) * y - x * y + 0.1 * x)).solve(method="gop")
    assert "objective objective" not in str(info.value)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-1, 2))
    m.y = pyo.Var(bounds=(0, 1))
    m.obj = pyo.Objective(expr=abs(m.x) * m.y - m.x * m.y)
    with pytest.raises(ModelStructureError, match=r"^objective obj: gop needs abs\(u\)"):
        pyo.SolverFactory("gop").solve(m)
