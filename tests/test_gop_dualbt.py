"""Reduced-cost bound tightening (``gop/dualbt.py``) and the tree on complementarity programs.

References: the LP's own feasible points (vertices found by HiGHS for random costs, and their convex
combinations) for the tightened bounds; SCIP (``scip_direct``, gap 1e-9) for the optima of random
linear programs with complementarity rows ``s_i * u_i == 0`` (the KKT form of bilevel programs).
"""
import numpy as np
import pyomo.environ as pyo
import pytest
import scipy.sparse as sp

import varopt  # noqa: F401
from varopt.lpqp import HighsModel
from varopt.solvers.gop.dualbt import reduced_cost_bounds

pyscipopt = pytest.importorskip("pyscipopt")


def _random_lp(rng):
    n, m = int(rng.integers(2, 7)), int(rng.integers(1, 6))
    A = np.round(rng.normal(size=(m, n)) * (rng.random((m, n)) < 0.7), 2)
    x0 = rng.uniform(-1, 1, n)  # a feasible point
    act = A @ x0
    lo = np.where(rng.random(m) < 0.6, act - rng.uniform(0, 2, m), -np.inf)
    hi = np.where(rng.random(m) < 0.6, act + rng.uniform(0, 2, m), np.inf)
    eq = rng.random(m) < 0.2
    lo[eq], hi[eq] = act[eq], act[eq]
    L = np.where(rng.random(n) < 0.85, x0 - rng.uniform(0, 3, n), -np.inf)
    U = np.where(rng.random(n) < 0.85, x0 + rng.uniform(0, 3, n), np.inf)
    c = np.round(rng.normal(size=n), 2)
    return c, sp.csr_matrix(A), lo, hi, L, U


def _feasible_points(c, A, lo, hi, L, U, cutoff, rng, k=12):
    """Vertices of {x: lo <= Ax <= hi, L <= x <= U, c'x <= cutoff} for random costs, and mixtures."""
    A2 = sp.vstack([A, sp.csr_matrix(c[None, :])], format="csr")
    lo2, hi2 = np.append(lo, -np.inf), np.append(hi, cutoff)
    pts = []
    for _ in range(k):
        d = rng.normal(size=c.size)
        r = HighsModel(d, A2, lo2, hi2, np.maximum(L, -50), np.minimum(U, 50)).solve()
        if r.status == "optimal":
            pts.append(r.x)
    for _ in range(k):
        if len(pts) >= 2:
            i, j = rng.choice(len(pts), 2, replace=False)
            t = rng.random()
            pts.append(t * pts[i] + (1 - t) * pts[j])
    return pts


@pytest.mark.parametrize("dual", ["optimal", "random"])
def test_reduced_cost_bounds_keep_every_point_below_the_cutoff(dual):
    """300 random LPs: with the LP's optimal duals or with arbitrary multipliers, every feasible point
    with objective <= cutoff lies in the tightened box; and the bounds do tighten somewhere."""
    rng = np.random.default_rng(7 if dual == "optimal" else 8)
    moved = checked = 0
    for _ in range(300):
        c, A, lo, hi, L, U = _random_lp(rng)
        r = HighsModel(c, A, lo, hi, L, U).solve()
        if r.status != "optimal":
            continue
        y = r.row_duals if dual == "optimal" else rng.normal(size=A.shape[0]) * 0.5
        cutoff = r.objective + float(rng.uniform(0, 1.5))
        out = reduced_cost_bounds(c, A, lo, hi, L, U, y, cutoff)
        if out is None:
            continue
        L2, U2 = out
        assert np.all(L2 >= L) and np.all(U2 <= U)
        moved += int(np.any(L2 > L + 1e-9) or np.any(U2 < U - 1e-9))
        # the LP optimum itself has objective <= cutoff: it must stay
        for x in [r.x] + _feasible_points(c, A, lo, hi, L, U, cutoff, rng):
            tol = 1e-7 * np.maximum(1.0, np.abs(x))
            assert np.all(x >= L2 - tol) and np.all(x <= U2 + tol), (x, L2, U2)
            checked += 1
    assert moved >= 30 and checked >= 1000, (moved, checked)


def test_reduced_cost_bounds_are_exact_on_a_one_variable_lp():
    """min x s.t. x in [0, 10] with cutoff 3: x <= 3 (reduced cost 1); cutoff below the optimum: empty."""
    A = sp.csr_matrix((0, 1))
    e = np.zeros(0)
    L2, U2 = reduced_cost_bounds(np.array([1.0]), A, e, e, np.array([0.0]), np.array([10.0]), e, 3.0)
    assert L2[0] == 0.0 and 3.0 <= U2[0] <= 3.0 + 1e-7
    L2, U2 = reduced_cost_bounds(np.array([1.0]), A, e, e, np.array([0.0]), np.array([10.0]), e, -1.0)
    assert U2[0] < L2[0]


def random_lpcc(seed):
    """min c'x + x'Dx (D >= 0 diagonal, sometimes) s.t. A x + s == b, s >= 0, G'u + H x == e, u >= 0,
    s_i * u_i == 0; built around a feasible point (some complementary pairs both zero: degenerate)."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 4)), int(rng.integers(2, 5))
    x0 = rng.uniform(0, 4, n)
    s0 = np.where(rng.random(k) < 0.5, rng.uniform(0.5, 3, k), 0.0)
    u0 = np.where((s0 == 0) & (rng.random(k) < 0.7), rng.uniform(0.5, 3, k), 0.0)
    A = np.round(rng.normal(size=(k, n)), 1)
    b = A @ x0 + s0
    G = np.round(rng.uniform(0.5, 2, k), 1)
    H = np.round(rng.normal(size=n), 1)
    e = float(G @ u0 + H @ x0)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), bounds=(0, 10))
    m.s = pyo.Var(range(k), bounds=(0, 50))
    m.u = pyo.Var(range(k), bounds=(0, 20))
    c = np.round(rng.normal(size=n), 1)
    sq = rng.random() < 0.5
    m.obj = pyo.Objective(expr=sum(c[i] * m.x[i] for i in range(n)) - sum(m.u[i] for i in range(k)) * 0.1
                          + (sum((m.x[i] - float(x0[i])) ** 2 for i in range(n)) if sq else 0))
    m.lin = pyo.Constraint(range(k), rule=lambda m, i: sum(float(A[i, j]) * m.x[j] for j in range(n)) + m.s[i]
                           == float(b[i]))
    m.stat = pyo.Constraint(expr=sum(float(G[i]) * m.u[i] for i in range(k))
                            + sum(float(H[j]) * m.x[j] for j in range(n)) == e)
    m.compl = pyo.Constraint(range(k), rule=lambda m, i: m.s[i] * m.u[i] == 0)
    return m


@pytest.mark.parametrize("chunk", range(2))
def test_complementarity_programs_bound_valid_and_certified_value_exact(chunk):
    """30 random complementarity programs: LBD <= SCIP's optimum, 'optimal' only with UBD = SCIP's
    optimum to 1e-6 (no point buying objective through the feasibility tolerance of s * u == 0), and
    the loaded point evaluates to the reported objective."""
    n_opt = 0
    for seed in range(15 * chunk, 15 * chunk + 15):
        ref = random_lpcc(seed)
        r = pyo.SolverFactory("scip_direct").solve(ref, options={"limits/gap": 1e-9})
        assert str(r.solver.termination_condition) == "optimal", seed
        f_ref = pyo.value(ref.obj)
        m = random_lpcc(seed)
        res = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
        tol = 1e-6 * max(1.0, abs(f_ref))
        assert res.lower_bound <= f_ref + tol, (seed, res.lower_bound, f_ref)
        if res.status == "optimal":
            n_opt += 1
            assert abs(res.objective - f_ref) <= tol, (seed, res.objective, f_ref)
            assert abs(pyo.value(m.obj) - res.objective) <= 1e-6 * max(1.0, abs(f_ref)), seed
    assert n_opt >= 13, n_opt


def test_degenerate_complementarity_certified_at_the_published_optimum():
    """ex9_2_2 (Floudas et al. 1999): the optimum 100 sits where relaxation errors of 1e-8 on
    ``x4 * x8 == 0`` buy 5e-6 of objective; the tree must branch on them (not on the widest variable)
    and must not accept such a point as the incumbent: certified, at 100 to 1e-6, within 2000 nodes."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from gop_instances import get
    inst = get("ex9_2_2")
    m = inst.build()
    res = pyo.SolverFactory("gop").solve(m, max_iter=2000).varopt_result
    assert res.status == "optimal", (res.status, res.lower_bound, res.upper_bound)
    assert res.lower_bound <= 100.0 + 1e-6 * 100
    assert abs(res.objective - 100.0) <= 1e-6 * 100, res.objective
    assert abs(pyo.value(m.obj) - res.objective) <= 1e-6 * 100
