"""Tests of the GOP solver (seed 004): partition choice, errors, statuses, history, options.

References are independent: closed-form optima, brute-force grids, or SCIP in
``test_gop_properties.py``.
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp

import varopt
from varopt.errors import InputDataError, InvalidOptionError, ModelStructureError
from varopt.program import AtomGroup, Constraint, Expression, Program, QuadraticTerms
from varopt.registry import get_solver


def gop(prog, **kw):
    return get_solver("gop").solve(prog, **kw)


def bgmm_like(x, K=2, tau=1.0, lam=0.1, pi_lb=1e-3):
    """Point-mass BGMM negative ELBO as a Program from arrays (the structure of seed 004 eq. (25))::

        sum_ik phi_ik [tau/2 (x_i - mu_k)^2 - log pi_k + log phi_ik] + lam/2 sum_k mu_k^2
        s.t. sum_k phi_ik = 1, sum_k pi_k = 1, 0 <= phi <= 1, pi_lb <= pi <= 1, min x <= mu <= max x.
    """
    x = np.asarray(x, float)
    N = x.size
    names = ([f"mu[{k}]" for k in range(K)] + [f"pi[{k}]" for k in range(K)]
             + [f"phi[{i},{k}]" for i in range(N) for k in range(K)])
    n = len(names)
    imu, ipi = np.arange(K), K + np.arange(K)
    iphi = (2 * K + np.arange(N * K)).reshape(N, K)
    m = N * K
    r = np.arange(m)
    sq = AtomGroup("square", np.full(m, 0.5 * tau), sp.csr_matrix((-np.ones(m), (r, np.tile(imu, N))), shape=(m, n)),
                   np.repeat(x, K), iphi.ravel())
    nl = AtomGroup("neglog", np.ones(m), sp.csr_matrix((np.ones(m), (r, np.tile(ipi, N))), shape=(m, n)),
                   np.zeros(m), iphi.ravel())
    xl = AtomGroup("xlogx", np.ones(m), sp.csr_matrix((np.ones(m), (r, iphi.ravel())), shape=(m, n)), np.zeros(m))
    obj = Expression(n, 0.0, np.zeros(n), QuadraticTerms(imu, imu, np.full(K, 0.5 * lam), n), [sq, nl, xl])
    cons = []
    for i in range(N):
        a = np.zeros(n)
        a[iphi[i]] = 1
        cons.append(Constraint(f"assign[{i}]", Expression(n, 0.0, a), 1.0, 1.0))
    a = np.zeros(n)
    a[ipi] = 1
    cons.append(Constraint("simplex", Expression(n, 0.0, a), 1.0, 1.0))
    lb = np.concatenate([np.full(K, x.min()), np.full(K, pi_lb), np.zeros(m)])
    ub = np.concatenate([np.full(K, x.max()), np.ones(K), np.ones(m)])
    return Program(names, lb, ub, obj, cons)


def profile_value(x, mu, pi, tau=1.0, lam=0.1):
    """min over phi of the BGMM objective at fixed (mu, pi): -sum_i log sum_k pi_k exp(-tau/2 (x_i-mu_k)^2)."""
    s = np.log(pi)[None, :] - 0.5 * tau * (x[:, None] - mu[None, :]) ** 2
    mx = s.max(1)
    return float(-np.sum(mx + np.log(np.exp(s - mx[:, None]).sum(1))) + 0.5 * lam * np.sum(mu ** 2))


def bilinear_program(quad, lin, lb, ub, names=None, cons=()):
    n = len(lb)
    names = names or [f"v{k}" for k in range(n)]
    i, j, v = zip(*quad) if quad else ((), (), ())
    return Program(names, lb, ub, Expression(n, 0.0, np.asarray(lin, float), QuadraticTerms(list(i), list(j), list(v), n)),
                   list(cons))


# ---------------------------------------------------------------- partition
def test_bgmm_partition_is_mu_pi_vs_phi():
    prog = bgmm_like(np.array([-2.0, -1.5, 0.1, 2.0, 2.5]))
    from importlib import import_module
    assert "gop" in varopt.registry.registered_solvers()
    analyze = import_module("varopt.solvers.gop.partition").analyze
    p = analyze(prog)
    names = prog.names
    assert sorted(names[i] for i in p.x) == ["mu[0]", "mu[1]", "pi[0]", "pi[1]"]
    assert sorted(names[i] for i in p.connected) == ["mu[0]", "mu[1]", "pi[0]", "pi[1]"]
    assert all(names[i].startswith("phi") for i in p.y)


def test_bgmm_small_certified_against_grid():
    x = np.array([-2.1, -1.9, -1.7, 0.3, 1.8, 2.0, 2.4])
    prog = bgmm_like(x)
    res = gop(prog)
    assert res.status == "optimal"
    assert res.rel_gap <= 1e-6
    # independent check: min over phi in closed form, dense grid + local refinement over (mu, pi)
    from scipy.optimize import minimize
    best = math.inf
    for m0 in np.linspace(x.min(), x.max(), 7):
        for m1 in np.linspace(x.min(), x.max(), 7):
            for p0 in (0.2, 0.5, 0.8):
                f = lambda t: profile_value(x, t[:2], np.array([t[2], 1 - t[2]]))  # noqa: E731
                r = minimize(f, [m0, m1, p0], bounds=[(x.min(), x.max())] * 2 + [(1e-3, 1 - 1e-3)], method="L-BFGS-B")
                best = min(best, r.fun)
    assert res.lower_bound <= best + 1e-6
    assert abs(res.objective - best) <= 1e-5 * max(1, abs(best))
    assert prog.max_violation(res.x) <= 1e-7
    # the point carries the objective value
    assert abs(prog.objective.value(res.x) - res.objective) <= 1e-8 * max(1, abs(res.objective))


def _grid_min(prog, k=41):
    """Brute-force minimum of a small program over a k^n grid of its box (feasible points only)."""
    axes = [np.linspace(lo, hi, k) for lo, hi in zip(prog.lb, prog.ub)]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, prog.n)
    vals = [prog.objective.value(z) for z in pts if prog.max_violation(z) <= 1e-9]
    return min(vals)


def test_odd_cycle_is_reported():
    prog = bilinear_program([(0, 1, 1.0), (1, 2, 1.0), (0, 2, 1.0)], [0, 0, 0], [-1] * 3, [1] * 3, ["x", "y", "z"])
    with pytest.raises(ModelStructureError) as e:
        gop(prog, mode="gop")
    msg = str(e.value)
    assert "x*y" in msg and "y*z" in msg and "x*z" in msg
    # outside GOP's class: the default mode refuses with the reason and names mode='tree', which certifies it
    with pytest.raises(ModelStructureError, match="mode='tree'") as e:
        gop(prog)
    assert "x*y" in str(e.value) and "x*z" in str(e.value)
    res = gop(prog, mode="tree")
    assert res.status == "optimal" and res.info["mode"] == "tree"
    assert "x*y" in res.info["not_biconvex"] and "x*z" in res.info["not_biconvex"]
    best = _grid_min(prog)  # -1 at a vertex with one sign differing
    assert res.objective == pytest.approx(best, abs=1e-6) and res.lower_bound <= best + 1e-9
    assert prog.objective.value(res.x) == pytest.approx(res.objective, abs=1e-9)


def test_atom_mixing_blocks_is_reported():
    # exp(x + y) with x*y: x and y must be in different blocks for the product but the atom joins them
    n = 2
    A = sp.csr_matrix(np.array([[1.0, 1.0]]))
    obj = Expression(n, 0.0, np.zeros(n), QuadraticTerms([0], [1], [-1.0], n), [AtomGroup("exp", [1.0], A, [0.0])])
    prog = Program(["x", "y"], [-1, -1], [1, 1], obj)
    with pytest.raises(ModelStructureError) as e:
        gop(prog, mode="gop")
    assert "exp(x + y)" in str(e.value)
    with pytest.raises(ModelStructureError, match="mode='tree'"):
        gop(prog)
    res = gop(prog, mode="tree")  # the tree covers exp of an affine argument and the product
    assert res.status == "optimal" and "exp(x + y)" in res.info["not_biconvex"]
    best = _grid_min(prog, k=401)
    assert res.objective <= best + 1e-9 and best - res.objective <= 1e-4
    assert res.lower_bound <= res.objective


def test_concave_term_is_reported():
    prog = bilinear_program([(0, 1, 1.0), (0, 0, -1.0)], [0, 0], [-1, -1], [1, 1], ["x", "y"])
    with pytest.raises(ModelStructureError, match="not convex|concave"):
        gop(prog, mode="gop")
    with pytest.raises(ModelStructureError, match="not convex|concave"):
        gop(prog, partition="x")
    with pytest.raises(ModelStructureError, match="mode='tree'"):
        gop(prog)
    res = gop(prog, mode="tree")  # the tree: secant of the concave square, McCormick envelope of x*y
    assert res.status == "optimal" and "concave" in res.info["not_biconvex"]
    assert res.objective == pytest.approx(-2.0, abs=1e-6)  # x = +-1, y = -x
    assert res.lower_bound <= -2.0 + 1e-9


def test_concave_quadratic_objective_over_a_polytope_is_certified():
    """A concave QP (Floudas & Pardalos 1990 style, min sum c_i x_i - 50 x_i^2 over a knapsack row) is
    outside GOP's class; the tree (mode='tree') certifies it: the optimum against enumeration of the polytope's vertices
    (a concave function attains its minimum over a polytope at a vertex)."""
    import itertools
    c = np.array([42.0, 44.0, 45.0, 47.0])
    a, b = np.array([20.0, 12.0, 11.0, 7.0]), 30.0
    n = c.size
    quad = [(i, i, -50.0) for i in range(n)]
    row = Constraint("knap", Expression(n, 0.0, a), -np.inf, b)
    prog = bilinear_program(quad, c, [0] * n, [1] * n, [f"x{i}" for i in range(n)], cons=[row])
    f = lambda z: float(c @ z - 50.0 * z @ z)
    # the vertices: 0/1 points, and points with one coordinate set by the row at equality
    cands = [np.array(bits) for bits in itertools.product([0.0, 1.0], repeat=n)]
    for free in range(n):
        for z in list(cands):
            z = z.copy()
            z[free] = (b - a @ z + a[free] * z[free]) / a[free]
            cands.append(z)
    best = min(f(z) for z in cands if a @ z <= b + 1e-12 and z.min() >= 0 and z.max() <= 1)
    res = gop(prog, mode="tree")
    assert res.status == "optimal"
    assert res.objective == pytest.approx(best, abs=1e-6 * max(1, abs(best)))
    assert res.lower_bound <= best + 1e-9
    assert prog.max_violation(res.x) <= 1e-7


def test_unbounded_connected_variable_names_the_variable():
    # min mu*phi, mu free, phi in [-1, 1]: unbounded along mu -> inf at phi = -1
    prog = bilinear_program([(0, 1, 1.0)], [0, 0], [-np.inf, -1], [np.inf, 1], ["mu", "phi"])
    with pytest.raises(ModelStructureError) as e:
        gop(prog, partition="mu", mode="gop")
    assert "mu" in str(e.value) and "setub" in str(e.value)
    res = gop(prog, partition="mu")  # the tree proves it: a feasible point and a ray of descent
    # mu -> inf at phi = -1 or, as the signed scaling normalization of docs/gop.md §8e-s puts phi at its upper
    # bound (the flip (mu, phi) -> (-mu, -phi) is a symmetry), mu -> -inf at phi = 1: checked as a ray
    ray = res.info["unbounded_ray"]
    assert res.status == "unbounded" and set(ray) == {"mu"} and abs(ray["mu"]) == 1.0
    z = np.asarray(res.info["unbounded_from"], dtype=float)
    assert -1.0 <= z[1] <= 1.0 and abs(abs(z[1]) - 1.0) < 1e-9
    f = lambda s: (z[0] + s * ray["mu"]) * z[1]  # noqa: E731 (the objective along the ray, phi fixed)
    assert f(1e6) < f(0.0) - 1e5 and f(2e6) - f(1e6) == pytest.approx(f(1e6) - f(0.0))


def test_bounds_from_linear_constraints_are_found():
    # x unbounded but 0 <= x <= 2 follows from x + s = 2, s >= 0; min x*y - x - y over y in [0, 2] is -2
    n = 3
    obj = Expression(n, 0.0, np.array([-1.0, -1.0, 0.0]), QuadraticTerms([0], [1], [1.0], n))
    con = Constraint("c", Expression(n, 0.0, np.array([1.0, 0.0, 1.0])), 2.0, 2.0)
    prog = Program(["x", "y", "s"], [0.0, 0.0, 0.0], [np.inf, 2.0, np.inf], obj, [con])
    res = gop(prog, partition="x")
    assert res.status == "optimal"
    assert abs(res.objective + 2.0) <= 1e-8


def test_infeasible_model_gives_infeasible_status():
    # x*y with x + y >= 3 but x, y <= 1
    con = Constraint("c", Expression(2, 0.0, np.array([1.0, 1.0])), 3.0, np.inf)
    prog = bilinear_program([(0, 1, 1.0)], [0, 0], [0, 0], [1, 1], ["x", "y"], [con])
    res = gop(prog)
    assert res.status == "infeasible"
    assert res.x is None


def test_infeasible_coupled_constraint_certified_by_relaxed_duals():
    # x*y >= 2 (biaffine) with x, y in [0, 1]: no FBBT proof, the relaxed duals must prove it
    body = Expression(2, 0.0, np.zeros(2), QuadraticTerms([0], [1], [1.0], 2))
    con = Constraint("prod", body, 2.0, np.inf)
    prog = bilinear_program([(0, 1, 1.0)], [1, 1], [0, 0], [1, 1], ["x", "y"], [con])
    res = gop(prog, max_iter=200)
    assert res.status == "infeasible"


def test_nan_data_raises():
    prog = bilinear_program([(0, 1, np.nan)], [0, 0], [0, 0], [1, 1], ["x", "y"])
    with pytest.raises(InputDataError, match="NaN"):
        gop(prog)


def test_iteration_and_time_limits():
    prog = bgmm_like(np.array([-2.1, -1.9, -1.7, 0.3, 1.8, 2.0, 2.4, 0.9]))
    r1 = gop(prog, max_iter=2)
    assert r1.status == "iteration_limit"
    assert r1.iterations == 2
    assert r1.lower_bound <= r1.upper_bound
    r2 = gop(prog, time_limit=1e-3)
    assert r2.status == "time_limit"
    assert r2.lower_bound <= r2.upper_bound


def test_history_is_monotone_and_complete():
    prog = bgmm_like(np.array([-2.1, -1.9, -1.7, 0.3, 1.8, 2.0, 2.4]))
    res = gop(prog)
    lows = [h["lower"] for h in res.history]
    ups = [h["upper"] for h in res.history]
    assert all(b >= a - 1e-12 for a, b in zip(lows, lows[1:]))
    assert all(b <= a + 1e-12 for a, b in zip(ups, ups[1:]))
    for h in res.history:
        assert {"iteration", "time", "lower", "upper", "n_subproblems"} <= set(h)
    assert res.history[-1]["upper"] == pytest.approx(res.objective)


def test_maximisation_sense():
    # user: max x*y over [-1, 2]^2 = 4; the program stores the negated objective -x*y
    prog = bilinear_program([(0, 1, -1.0)], [0, 0], [-1, -1], [2, 2], ["x", "y"])
    prog.maximize = True
    res = gop(prog)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(4.0, abs=1e-8)
    assert res.lower_bound <= res.objective <= res.upper_bound + 1e-12


def test_option_validation():
    prog = bilinear_program([(0, 1, 1.0)], [0, 0], [0, 0], [1, 1], ["x", "y"])
    with pytest.raises(InvalidOptionError):
        gop(prog, executor=42)
    with pytest.raises(InvalidOptionError):
        gop(prog, rel_gap=-1)
    with pytest.raises(InvalidOptionError):
        gop(prog, partition="nope")
    with pytest.raises(InvalidOptionError):
        gop(prog, no_such_option=1)


def test_reduction_and_presolve_options_give_same_optimum():
    # separable connected variables (reducible) with a y-only constraint; plain GOP converges too
    n = 4
    quad = [(0, 2, 1.0), (1, 3, -2.0), (0, 0, 1.0), (3, 3, 0.5)]
    con = Constraint("c", Expression(n, 0.0, np.array([0.0, 0.0, 1.0, 1.0])), -np.inf, 1.0)
    prog = bilinear_program(quad, [-0.6, 0.1, -0.5, 0.2], [-1, -1, -1, -1], [1, 2, 1, 1],
                            ["x0", "x1", "y0", "y1"], [con])
    a = gop(prog, reduction=True)
    b = gop(prog, reduction=False, presolve=False)
    assert a.status == b.status == "optimal"
    assert abs(a.objective - b.objective) <= 2e-6 * max(1.0, abs(a.objective))
    # brute force over a grid of y (the problem is a convex QP in x for fixed y)
    g = np.linspace(-1, 1, 201)
    Y0, Y1 = np.meshgrid(g, g)
    ok = Y0 + Y1 <= 1.0
    # min over x0 in [-1, 1] of x0^2 + x0 (y0 - 0.6); min over x1 in [-1, 2] of x1 (0.1 - 2 y1)
    x0 = np.clip(-(Y0 - 0.6) / 2, -1, 1)
    f0 = x0 ** 2 + x0 * (Y0 - 0.6)
    c1 = 0.1 - 2 * Y1
    f1 = np.minimum(-c1, 2 * c1)
    F = np.where(ok, f0 + f1 - 0.5 * Y0 + 0.2 * Y1 + 0.5 * Y1 ** 2, np.inf)
    assert a.objective <= F.min() + 1e-9
    assert a.objective >= F.min() - 1e-3


def test_pyomo_solverfactory_haverly1():
    pyo = pytest.importorskip("pyomo.environ")
    solver = pyo.SolverFactory("gop")
    if solver is None or not getattr(solver, "available", lambda: False)():
        pytest.skip("SolverFactory('gop') is not available (Pyomo front-end missing)")
    m = pyo.ConcreteModel()
    m.A, m.B = pyo.Var(bounds=(0, 300)), pyo.Var(bounds=(0, 300))
    m.Px, m.Py = pyo.Var(bounds=(0, 100)), pyo.Var(bounds=(0, 200))
    m.Cx, m.Cy = pyo.Var(bounds=(0, 100)), pyo.Var(bounds=(0, 200))
    m.p = pyo.Var(bounds=(1, 3))
    m.obj = pyo.Objective(expr=6 * m.A + 16 * m.B + 10 * (m.Cx + m.Cy) - 9 * (m.Px + m.Cx) - 15 * (m.Py + m.Cy))
    m.bal = pyo.Constraint(expr=m.A + m.B == m.Px + m.Py)
    m.sul = pyo.Constraint(expr=3 * m.A + m.B == m.p * m.Px + m.p * m.Py)
    m.qx = pyo.Constraint(expr=m.p * m.Px + 2 * m.Cx <= 2.5 * (m.Px + m.Cx))
    m.qy = pyo.Constraint(expr=m.p * m.Py + 2 * m.Cy <= 1.5 * (m.Py + m.Cy))
    m.dx = pyo.Constraint(expr=m.Px + m.Cx <= 100)
    m.dy = pyo.Constraint(expr=m.Py + m.Cy <= 200)
    solver.solve(m)
    # Haverly (1978) problem 1: published global optimum -400
    assert abs(pyo.value(m.obj) + 400.0) <= 1e-4
