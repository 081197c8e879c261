"""Which atoms a node LP of gop's tree cuts: the outer-approximation error weighted by the LP's prices
(``varopt/solvers/gop/oa_budget.py``, docs/gop.md §13j).

References: a brute-force grid with a local refinement for MINLPLib ex4_1_2, finite differences of HiGHS LP values
for the prices, and the budget's defining properties for the selection."""
import math
import time

import numpy as np
import pyomo.environ as pyo
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

import varopt  # noqa: F401
from varopt.lpqp import HighsModel
from varopt.solvers.gop.oa_budget import atom_prices, atoms_to_cut

from gop_polynomial_chains import EX4_1_2, ex4_1_2   # MINLPLib ex4_1_2 as MINLPLib writes it (benchmarks/)


def _poly(x):
    return sum(c * x ** k for k, c in EX4_1_2.items())


def _ex4_1_2_reference():
    """The minimum over [1, 2]: a grid of 10^6 + 1 points, then a bounded scalar search around the best one."""
    x = np.linspace(1.0, 2.0, 1_000_001)
    i = int(np.argmin(_poly(x)))
    lo, hi = x[max(i - 1, 0)], x[min(i + 1, x.size - 1)]
    r = minimize_scalar(_poly, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13})
    return min(float(r.fun), float(_poly(x[i])))


def test_ex4_1_2_as_minlplib_writes_it_is_certified():
    """``min objvar s.t. objvar == poly(x)``, a degree-50 polynomial on [1, 2] lifted to a chain of 25 squares and 24
    products. Each square's tangents stopped once it was within the node tolerance, but the chain multiplies those
    errors: nodes 4e-6 wide around the optimum kept bounds 6.6e-3 under it, and the tree reached its time limit with
    the gap open (1,287 nodes in 30 s); weighted by their LP prices the cuts close it in about 25 nodes."""
    ref = _ex4_1_2_reference()
    assert ref == pytest.approx(-663.5000966, abs=1e-6)   # SCIP 10 (scip_direct): -663.5000972
    m = ex4_1_2()
    x = m.x[1]
    t0 = time.perf_counter()
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    took = time.perf_counter() - t0
    tol = 1e-6 * abs(ref)
    assert r.status == "optimal", (r.status, r.lower_bound, r.upper_bound, took)
    assert r.lower_bound <= ref + 1e-9 * abs(ref), (r.lower_bound, ref)
    assert r.upper_bound - r.lower_bound <= tol
    assert abs(r.upper_bound - ref) <= tol, (r.upper_bound, ref)
    assert _poly(pyo.value(x)) == pytest.approx(ref, abs=tol)
    assert r.info["nodes"] <= 200, r.info["nodes"]


# ---------------------------------------------------------------------------------------------- the budget rule
_viol = st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=0, max_size=12)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), budget=st.floats(0.0, 2.0))
def test_the_atoms_left_uncut_fit_in_the_budget(data, budget):
    v = np.array(data.draw(_viol))
    price = np.array(data.draw(st.lists(st.floats(0.0, 50.0), min_size=v.size, max_size=v.size)))
    cut = atoms_to_cut(v, price, budget)
    e = np.where(v > 0, np.maximum(1.0, price) * v, 0.0)
    left = np.setdiff1d(np.arange(v.size), cut)
    # what stays uncut fits in the budget, and only violated atoms are cut
    assert e[left].sum() <= budget * (1 + 1e-12) + 1e-300
    assert np.all(v[cut] > 0)
    # every atom over the budget alone is cut (the per-atom rule before the weights), and no cut atom is smaller
    # than an uncut one (the largest weighted errors go first)
    assert set(np.flatnonzero(v > budget)) <= set(cut.tolist())
    if cut.size and left.size:
        assert e[cut].min() >= e[left].max()


def test_the_budget_rule_on_a_chain():
    # 25 atoms each 1.3e-4 under g and the budget 1.6e-4: the per-atom rule (v > budget) cut none of them; the sum
    # leaves one uncut at price 1, none at price 15 (15 x 1.3e-4 > 1.6e-4)
    v = np.full(25, 1.3e-4)
    assert atoms_to_cut(v, np.ones(25), 1.6e-4).size == 24
    assert atoms_to_cut(v, np.full(25, 15.0), 1.6e-4).size == 25
    assert atoms_to_cut(np.array([np.inf, 0.0]), np.ones(2), 1.0).tolist() == [0]


# ---------------------------------------------------------------------------------------------- the prices
def _lp(a, b, points, extra, x_hi):
    """``min a x + b T`` over ``T >= 2 p x - p^2`` (tangents of ``x^2``), ``T + extra x <= 5``, ``x in [-2, x_hi]``."""
    rows = [[-2.0 * p, 1.0] for p in points] + [[extra, 1.0]]
    lo = [-p * p for p in points] + [-np.inf]
    hi = [np.inf] * len(points) + [5.0]
    return sp.csr_matrix(np.array(rows)), np.array(lo), np.array(hi), np.array([-2.0, -np.inf]), np.array([x_hi, np.inf])


@settings(max_examples=60, deadline=None)
@given(a=st.floats(-6.0, 6.0), b=st.floats(0.2, 20.0), pts=st.lists(st.floats(-2.0, 2.0), min_size=1, max_size=4,
       unique=True), extra=st.floats(-1.0, 1.0), x_hi=st.floats(0.5, 2.0))
def test_an_atom_price_bounds_what_each_row_on_its_column_is_worth(a, b, pts, extra, x_hi):
    """The LP value moves by ``y_r`` per unit of row ``r``'s side (finite differences of HiGHS solves); for every row
    through the atom column ``T`` that rate times the row's coefficient on ``T`` is at most ``T``'s price."""
    c = np.array([a, b])
    A, lo, hi, L, U = _lp(a, b, pts, extra, x_hi)
    r = HighsModel(c, A, lo, hi, L, U).solve()
    if r.status != "optimal":
        return
    price = float(atom_prices(c, A, r.row_duals, r.col_duals, [1])[0])
    h = 1e-6
    for k in range(A.shape[0]):
        lo2, hi2 = lo.copy(), hi.copy()
        if np.isfinite(lo[k]):
            lo2[k] += h
        else:
            hi2[k] -= h
        r2 = HighsModel(c, A, lo2, hi2, L, U).solve()
        if r2.status != "optimal":
            continue
        rate = abs(r2.objective - r.objective) / h
        assert rate * abs(A[k, 1]) <= price * (1 + 1e-4) + 1e-4, (k, rate, price)


def test_prices_without_multipliers_are_one():
    A = sp.csr_matrix(np.ones((2, 3)))
    c = np.zeros(3)
    assert atom_prices(c, A, None, None, [0, 2]).tolist() == [1.0, 1.0]
    assert atom_prices(c, A, np.ones(3), None, [1]).tolist() == [1.0]          # wrong length
    assert atom_prices(c, A, np.array([np.nan, 1.0]), None, [1]).tolist() == [1.0]
    assert math.isclose(float(atom_prices(np.array([0.0, 3.0, 0.0]), A, np.array([1.0, 2.0]), None, [1])[0]), 3.0)


# ---------------------------------------------------------------------------------------------- OBBT from the duals
def test_obbt_bounds_come_from_what_the_multipliers_prove():
    """``min objvar`` s.t. ``objvar == p(x) + q(x) y``, degree 22 on ``x in [0.64, 2.32]``, ``y in [-1, 1]`` (a random
    polynomial of benchmarks/gop_random_polynomials.py, seed 13): the lifted chain's McCormick rows have coefficients
    of 5e7 next to 1, and HiGHS answered an OBBT LP ``max x`` with 2.07 where ``x = 2.32`` is feasible; the tree
    certified -2,640,535 in 5 nodes where ``p(2.32, -1) = -19,831,724``. OBBT now takes the weak-duality bound of the
    LP's multipliers when it is smaller than HiGHS's optimum. The reference: a 1501 x 1501 grid refined by L-BFGS-B
    (SCIP 10: -19,831,727.6, at ``y = -1 - 1e-8``, within its feasibility tolerance)."""
    from scipy.optimize import minimize
    C = {2: 0.171, 4: 0.0419, 6: -0.0063, 14: 2.0422, 18: -0.1766, 20: -0.1004, 21: -1.9431, 22: 0.6793}
    D = {2: 1.537, 4: 0.318, 6: 1.481}

    def p(x, y):
        return sum(c * x ** k for k, c in C.items()) + sum(c * x ** k * y for k, c in D.items()) + 0.5 * (y - 0.3) ** 2
    X, Y = np.meshgrid(np.linspace(0.64, 2.32, 1501), np.linspace(-1, 1, 1501))
    V = p(X, Y)
    i = np.unravel_index(np.argmin(V), V.shape)
    rr = minimize(lambda v: p(v[0], v[1]), [X[i], Y[i]], bounds=[(0.64, 2.32), (-1, 1)], method="L-BFGS-B")
    ref = min(float(V[i]), float(rr.fun))
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var()
    m.x = pyo.Var(bounds=(0.64, 2.32))
    m.y = pyo.Var(bounds=(-1, 1))
    m.e = pyo.Constraint(expr=m.objvar == p(m.x, m.y))
    m.o = pyo.Objective(expr=m.objvar)
    r = pyo.SolverFactory("gop").solve(m, time_limit=8).varopt_result
    tol = 1e-6 * abs(ref)
    assert r.lower_bound <= ref + tol, (r.status, r.lower_bound, ref)
    if r.status == "optimal":
        assert abs(r.upper_bound - ref) <= 2 * tol, (r.upper_bound, ref)
