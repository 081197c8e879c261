"""gop on programs whose objective is a variable defined by an equality row (MINLPLib's ``objvar``).

``min objvar s.t. objvar == f(x)`` is substituted back to ``min f(x)`` (varopt/solvers/gop/objective_rows.py):
a convex QP in that form was not certified in 8 s (the tree relaxed the equality's products one by one).
References are independent: CVXPY with Clarabel for the convex QPs, a closed form for the bounded objvar.
"""
import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401


def _qp_data(seed, n=5):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(n, n))
    Q = M @ M.T + 0.1 * np.eye(n)
    c = 3 * rng.normal(size=n)
    A = rng.normal(size=(3, n))
    b = np.abs(rng.normal(size=3)) + 1
    return Q, c, A, b


def _clarabel(Q, c, A, b, lo=-2.0, hi=2.0):
    x = cp.Variable(Q.shape[0])
    p = cp.Problem(cp.Minimize(cp.quad_form(x, Q) + c @ x), [A @ x <= b, x >= lo, x <= hi])
    p.solve(solver=cp.CLARABEL)
    return p.value


def _model(Q, c, A, b, form):
    n = Q.shape[0]
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, n - 1)
    m.x = pyo.Var(m.I, bounds=(-2, 2), initialize=0)
    q = sum(Q[i, j] * m.x[i] * m.x[j] for i in m.I for j in m.I) + sum(c[i] * m.x[i] for i in m.I)
    m.objvar = pyo.Var(within=pyo.Reals, initialize=0)
    if form == "min, f - objvar == 0":
        m.obj = pyo.Objective(expr=m.objvar, sense=pyo.minimize)
        m.e0 = pyo.Constraint(expr=q - m.objvar == 0)
    elif form == "min, 2 objvar == 2 f":
        m.obj = pyo.Objective(expr=m.objvar + 1.5, sense=pyo.minimize)
        m.e0 = pyo.Constraint(expr=2 * m.objvar == 2 * q - 3)
    else:   # maximise the negative
        m.obj = pyo.Objective(expr=m.objvar, sense=pyo.maximize)
        m.e0 = pyo.Constraint(expr=m.objvar + q == 0)
    m.rows = pyo.ConstraintList()
    for k in range(A.shape[0]):
        m.rows.add(sum(A[k, i] * m.x[i] for i in m.I) <= b[k])
    return m, q


@pytest.mark.parametrize("form", ["min, f - objvar == 0", "min, 2 objvar == 2 f", "max, objvar + f == 0"])
@pytest.mark.parametrize("seed", [0, 1])
def test_convex_qp_written_with_an_objvar_is_certified_at_clarabels_optimum(form, seed):
    Q, c, A, b = _qp_data(seed)
    ref = _clarabel(Q, c, A, b)
    m, q = _model(Q, c, A, b, form)
    res = pyo.SolverFactory("gop").solve(m, time_limit=20)
    r = res.varopt_result
    assert r.status == "optimal", (r.status, r.lower_bound, r.upper_bound)
    assert r.info["objective_rows"] and "objvar" in r.info["objective_rows"][0]
    # in the user's sense: the model's objective is f (+ its constant), or -f when maximised
    val = pyo.value(m.obj)
    user_ref = -ref if form.startswith("max") else ref
    assert val == pytest.approx(user_ref, abs=1e-5 * max(1.0, abs(ref)))
    assert r.lower_bound <= r.upper_bound + 1e-9
    assert r.lower_bound <= user_ref + 1e-6 * max(1.0, abs(ref)) <= r.upper_bound + 2e-6 * max(1.0, abs(ref))
    # the loaded point satisfies the user's defining equality exactly (objvar at its definition)
    body = pyo.value(m.e0.body) - pyo.value(m.e0.upper)
    assert abs(body) <= 1e-9 * max(1.0, abs(ref))
    assert pyo.value(m.objvar) == pytest.approx(pyo.value(q) * (-1 if form.startswith("max") else 1)
                                                 - (1.5 if form.startswith("min, 2") else 0.0), abs=1e-9)


def test_bounds_of_the_objvar_become_a_row_on_its_definition():
    # min objvar s.t. objvar == x y - 2 x, objvar >= -0.5 over [0, 3]^2: without the bound the optimum is -6 at
    # (3, 0); the bound becomes the row x y - 2 x >= -0.5 (bilinear: in GOP's class), optimum -0.5
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 3))
    m.y = pyo.Var(bounds=(0, 3))
    m.objvar = pyo.Var(bounds=(-0.5, None))
    m.obj = pyo.Objective(expr=m.objvar)
    m.e = pyo.Constraint(expr=m.objvar == m.x * m.y - 2 * m.x)
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert r.status == "optimal"
    assert r.info["objective_rows"]
    assert pyo.value(m.obj) == pytest.approx(-0.5, abs=1e-6)
    x, y = pyo.value(m.x), pyo.value(m.y)
    assert pyo.value(m.objvar) >= -0.5 - 1e-9
    assert pyo.value(m.objvar) == pytest.approx(x * y - 2 * x, abs=1e-12)
    assert r.lower_bound <= -0.5 + 1e-6


def test_the_reduction_leaves_the_users_program_unchanged():
    # a rejected substitution (a concave objective is outside GOP's class) hands the original program on: the
    # reduction must not have changed its rows (it zeroed objvar's coefficient in the user's row, and MINLPLib's
    # st_fp7b came out "infeasible")
    from varopt.frontends import compile_model
    from varopt.solvers.gop.objective_rows import objective_rows
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0, 2))
    m.objvar = pyo.Var()
    m.obj = pyo.Objective(expr=m.objvar)
    m.e = pyo.Constraint(expr=-m.x[0] * m.x[0] + m.x[1] - 2 * m.x[2] - m.objvar == 0)
    p = compile_model(m)[0]
    before = [(c.body.linear.copy(), c.lo, c.hi) for c in p.constraints], p.objective.linear.copy(), p.lb.copy()
    d = objective_rows(p)
    assert d is not None and d.program is not p
    after = [(c.body.linear, c.lo, c.hi) for c in p.constraints], p.objective.linear, p.lb
    for (a, lo, hi), (b, lo2, hi2) in zip(before[0], after[0]):
        assert np.array_equal(a, b) and (lo, hi) == (lo2, hi2)
    assert np.array_equal(before[1], after[1]) and np.array_equal(before[2], after[2])
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert r.status == "optimal" and "objective_rows" not in r.info
    assert pyo.value(m.obj) == pytest.approx(-4 - 4, abs=1e-6)   # x = (2, 0, 2)


def test_an_objvar_in_two_rows_is_not_substituted():
    # objvar also enters a second row: not an objective variable in the sense of the reduction (its value is
    # constrained beyond its definition); the program is solved as written
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 3))
    m.y = pyo.Var(bounds=(0, 3))
    m.objvar = pyo.Var(bounds=(-10, 10))
    m.obj = pyo.Objective(expr=m.objvar)
    m.e = pyo.Constraint(expr=m.objvar == m.x * m.y - 2 * m.x)
    m.f = pyo.Constraint(expr=m.objvar + m.y >= -1)
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert "objective_rows" not in r.info
    # brute force on a grid refined around its best point: min x*y - 2x s.t. x*y - 2x + y >= -1
    g = np.linspace(0, 3, 3001)
    X, Y = np.meshgrid(g, g)
    F = X * Y - 2 * X
    best = F[F + Y >= -1].min()
    assert r.status == "optimal"
    assert pyo.value(m.obj) == pytest.approx(best, abs=5e-3)
    assert r.lower_bound <= pyo.value(m.obj) + 1e-9


def test_presolve_off_keeps_the_row():
    Q, c, A, b = _qp_data(0, n=3)
    m, _ = _model(Q, c, A, b, "min, f - objvar == 0")
    r = pyo.SolverFactory("gop").solve(m, presolve=False, max_iter=3).varopt_result
    assert "objective_rows" not in r.info


def test_a_ge_row_with_a_concave_body_is_solved_as_its_le_form():
    # MINLPLib st_e17: min 29.4 x1 + 18 x2 s.t. x1 - 0.2458 x1^2/x2 >= 6 (a convex set; the body is concave):
    # GOP's class takes nonlinear terms on the smaller side of a row only, so the row is handed on as
    # 0.2458 x1^2/x2 - x1 <= -6. Reference: the same convex program in CVXPY with Clarabel.
    m = pyo.ConcreteModel()
    m.x1 = pyo.Var(bounds=(0, 115.8), initialize=1)
    m.x2 = pyo.Var(bounds=(1e-5, 30), initialize=1)
    m.objvar = pyo.Var()
    m.obj = pyo.Objective(expr=m.objvar)
    m.e1 = pyo.Constraint(expr=m.x1 - 0.2458 * m.x1 ** 2 / m.x2 >= 6)
    m.e2 = pyo.Constraint(expr=-29.4 * m.x1 - 18 * m.x2 + m.objvar == 0)
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    x = cp.Variable(2)
    p = cp.Problem(cp.Minimize(29.4 * x[0] + 18 * x[1]),
                   [0.2458 * cp.quad_over_lin(x[0], x[1]) - x[0] <= -6, x >= [0, 1e-5], x <= [115.8, 30]])
    p.solve(solver=cp.CLARABEL)
    assert r.status == "optimal", (r.status, r.message)
    assert r.info["rows_as_le"] == ["e1"]
    assert pyo.value(m.obj) == pytest.approx(p.value, rel=1e-6)
    assert r.lower_bound <= p.value * (1 + 1e-6)
    assert pyo.value(m.e1.body) >= 6 - 1e-6

@pytest.mark.parametrize("form", ["min t, t >= f", "max t, -t >= f", "min -2 t, t <= 1 - f", "min t, -1 <= t - f <= 1"])
def test_epigraph_row_of_a_free_objvar_is_substituted(form):
    # the epigraph form of a convex QP, min t s.t. t >= f(x) with t free: t sits on the row's end at every
    # optimum, so the substitution is exact; the row as written went to a relaxed dual over the free t and
    # was refused as "unbounded" (the program's optimum is Clarabel's)
    Q, c, A, b = _qp_data(1, n=3)
    ref = _clarabel(Q, c, A, b)
    m, q = _model(Q, c, A, b, "min, f - objvar == 0")
    m.del_component(m.obj)
    m.del_component(m.e0)
    t = m.objvar
    if form == "min t, t >= f":
        m.obj, m.e0, user = pyo.Objective(expr=t), pyo.Constraint(expr=t >= q), ref
    elif form == "max t, -t >= f":
        m.obj, m.e0, user = pyo.Objective(expr=t, sense=pyo.maximize), pyo.Constraint(expr=-t >= q), -ref
    elif form == "min -2 t, t <= 1 - f":
        m.obj, m.e0, user = pyo.Objective(expr=-2 * t), pyo.Constraint(expr=t <= 1 - q), 2 * ref - 2
    else:
        m.obj, m.e0, user = pyo.Objective(expr=t), pyo.Constraint(expr=pyo.inequality(-1, t - q, 1)), ref - 1
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert r.status == "optimal" and r.info["objective_rows"]
    assert pyo.value(m.obj) == pytest.approx(user, abs=1e-5 * max(1.0, abs(user)))
    lo, body, hi = pyo.value(m.e0.lower), pyo.value(m.e0.body), pyo.value(m.e0.upper)
    assert (lo is None or body >= lo - 1e-9) and (hi is None or body <= hi + 1e-9)


def test_epigraph_row_with_a_bound_on_the_pushed_side_is_not_substituted():
    # min t s.t. t >= f(x), t >= -1: t = max(f(x), -1), not one expression; the bound on the other side is
    # a row on f (t <= 2: f(x) <= 2), substituted
    from varopt.frontends import compile_model
    from varopt.solvers.gop.objective_rows import objective_rows
    for bounds, substituted in (((-1, None), False), ((None, 2), True)):
        m = pyo.ConcreteModel()
        m.x = pyo.Var(bounds=(0, 3))
        m.y = pyo.Var(bounds=(0, 3))
        m.t = pyo.Var(bounds=bounds)
        m.obj = pyo.Objective(expr=m.t)
        m.e = pyo.Constraint(expr=m.t >= (m.x - 1) ** 2 - 2 * m.y)
        d = objective_rows(compile_model(m)[0])
        assert (d is not None) == substituted
        if substituted:
            (con,) = d.program.constraints
            assert con.hi == pytest.approx(2.0) and not np.isfinite(con.lo)


def test_unbounded_certificate_moves_the_objvar_along_its_definition():
    # min objvar s.t. objvar == x y - z, z >= 0 free above: unbounded along z. The certificate was the reduced
    # program's (objvar fixed at 0, the ray {z: 1}): along it the user's row objvar == x y - z failed
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.y = pyo.Var(bounds=(0, 1))
    m.z = pyo.Var(bounds=(0, None))
    m.objvar = pyo.Var()
    m.obj = pyo.Objective(expr=m.objvar)
    m.e = pyo.Constraint(expr=m.objvar == m.x * m.y - m.z)
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert r.status == "unbounded" and r.info["objective_rows"]
    ray, z0 = r.info["unbounded_ray"], r.info["unbounded_from"]
    assert ray.get("objvar") == pytest.approx(-ray["z"]) and ray["z"] > 0
    for s in (0.0, 1.0, 1e3):
        for v, x0 in zip(m.component_data_objects(pyo.Var), z0):
            v.set_value(float(x0) + s * ray.get(v.name, 0.0), skip_validation=True)
        assert abs(pyo.value(m.e.body) - pyo.value(m.e.upper)) <= 1e-9 * max(1.0, abs(pyo.value(m.objvar)))
