"""MINLPLib instances as held-out checks run them, written inline the way MINLPLib writes them (a free ``objvar``,
the objective moved into a row ``objvar == f(x)``), each against an independent reference (docs/gop.md §13k).

References: a brute-force grid with a local refinement (ex4_1_1, ex8_1_6), and for alkyl a multi-start SLSQP with
every row held to 1e-10: SCIP 10's "optimal" -1.7650125 buys its lower value with row ``e3`` off by 9.9e-7, inside
its own feasibility tolerance, so it is not the reference (the kit of §13k found gop "wrong" against it)."""
import math
import time

import numpy as np
import pyomo.environ as pyo
import pytest
from scipy.optimize import minimize, minimize_scalar

import varopt  # noqa: F401  (registers SolverFactory('gop'))


def _rows_hold(m, rel=1e-7):
    """The largest violation of a row or a variable bound at the loaded point, relative to max(1, |side|)."""
    worst = 0.0
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        for side, sgn in ((c.lower, -1.0), (c.upper, 1.0)):
            if side is not None:
                s = pyo.value(side)
                worst = max(worst, sgn * (body - s) / max(1.0, abs(s)))
    for x in m.component_data_objects(pyo.Var):
        if x.lb is not None:
            worst = max(worst, x.lb - x.value)
        if x.ub is not None:
            worst = max(worst, x.value - x.ub)
    return worst <= rel, worst


def _certified_at(m, ref, time_limit=30):
    """gop certifies ``ref`` (1e-6 max(1, |ref|)): its bound not above it, its incumbent at it, the loaded point
    inside every row."""
    res = pyo.SolverFactory("gop").solve(m, time_limit=time_limit)
    r = res.varopt_result
    tol = 1e-6 * max(1.0, abs(ref))
    assert r.status == "optimal", (r.status, r.lower_bound, r.upper_bound)
    assert r.lower_bound <= ref + tol, (r.lower_bound, ref)
    assert abs(r.upper_bound - ref) <= tol, (r.upper_bound, ref)
    ok, worst = _rows_hold(m)
    assert ok, worst
    assert pyo.value(m.obj) == pytest.approx(ref, abs=tol)
    return r


# ------------------------------------------------------------------------------------------------ ex4_1_1
_EX4_1_1 = {6: 1.0, 5: -2.08, 4: 0.4875, 3: 7.1, 2: -3.95, 1: -1.0, 0: 0.1}


def _p411(x):
    return sum(c * x ** k for k, c in _EX4_1_1.items())


def test_ex4_1_1_degree_six_polynomial_through_objvar():
    """``objvar == x^6 - 2.08 x^5 + 0.4875 x^4 + 7.1 x^3 - 3.95 x^2 - x + 0.1`` on [-2, 11] (lifted powers, the
    tangent cuts of §13j): the minimum of a 10^6-point grid refined by a bounded scalar search."""
    x = np.linspace(-2.0, 11.0, 1_000_001)
    i = int(np.argmin(_p411(x)))
    r = minimize_scalar(_p411, bounds=(x[max(i - 1, 0)], x[min(i + 1, x.size - 1)]), method="bounded",
                        options={"xatol": 1e-13})
    ref = min(float(r.fun), float(_p411(x[i])))
    assert ref == pytest.approx(-7.4873131, abs=1e-6)   # SCIP 10: -7.4873132
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var(within=pyo.Reals)
    m.x1 = pyo.Var(within=pyo.Reals, bounds=(-2, 11))
    m.e1 = pyo.Constraint(expr=-(m.x1 ** 6 - 2.08 * m.x1 ** 5 + 0.4875 * m.x1 ** 4 + 7.1 * m.x1 ** 3
                                 - 3.95 * m.x1 ** 2 - m.x1) + m.objvar == 0.1)
    m.obj = pyo.Objective(expr=m.objvar)
    _certified_at(m, ref)


# ------------------------------------------------------------------------------------------------ ex8_1_6
def _f816(z):
    x1, x2 = z[..., 0], z[..., 1]
    return (-1 / (0.1 + (x1 - 4) ** 2 + (x2 - 4) ** 2) - 1 / (0.2 + (x1 - 1) ** 2 + (x2 - 1) ** 2)
            - 1 / (0.2 + (x1 - 8) ** 2 + (x2 - 8) ** 2))


def test_ex8_1_6_sum_of_reciprocals_over_free_variables():
    """Three wells ``-1/(c + |x - a|^2)`` over free x1, x2 (divisions by nonlinear denominators, variables bounded
    only through the objective): a 1201^2 grid on [-2, 10]^2 (outside it every term is above -0.013 and the sum
    above -0.04) refined by Nelder-Mead from its best point."""
    g = np.linspace(-2.0, 10.0, 1201)
    Z = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1)
    F = _f816(Z)
    k = np.unravel_index(int(np.argmin(F)), F.shape)
    r = minimize(lambda z: float(_f816(np.asarray(z))), Z[k], method="Nelder-Mead",
                 options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 4000})
    ref = min(float(r.fun), float(F[k]))
    assert ref == pytest.approx(-10.0860015, abs=1e-6)   # SCIP 10: -10.0860018
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var(within=pyo.Reals)
    m.x1 = pyo.Var(within=pyo.Reals)
    m.x2 = pyo.Var(within=pyo.Reals)
    m.e1 = pyo.Constraint(expr=-(-1 / (0.1 + (m.x1 - 4) ** 2 + (m.x2 - 4) ** 2) - 1 / (0.2 + (m.x1 - 1) ** 2
                                 + (m.x2 - 1) ** 2) - 1 / (0.2 + (m.x1 - 8) ** 2 + (m.x2 - 8) ** 2)) + m.objvar == 0)
    m.obj = pyo.Objective(expr=m.objvar)
    _certified_at(m, ref)


# ------------------------------------------------------------------------------------------------ alkyl
_ALKYL_BOUNDS = {2: (0, 2), 3: (0, 1.6), 4: (0, 1.2), 5: (0, 5), 6: (0, 2), 7: (0.85, 0.93), 8: (0.9, 0.95),
                 9: (3, 12), 10: (1.2, 4), 11: (1.45, 1.62), 12: (0.99, 1.01010101010101),
                 13: (0.99, 1.01010101010101), 14: (0.9, 1.11111111111111), 15: (0.99, 1.01010101010101)}
# the best of 100 seeded SLSQP starts with every row held to 1e-10 (alkyl as below); SCIP 10 reports -1.7650125128884526
# at a point whose row e3 is off by 9.9e-7
_ALKYL_REF = -1.7649996458979769


def _alkyl():
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var(within=pyo.Reals)
    x = {i: pyo.Var(within=pyo.Reals, bounds=b) for i, b in _ALKYL_BOUNDS.items()}
    for i, v in x.items():
        m.add_component(f"x{i}", v)
    m.e1 = pyo.Constraint(expr=6.3 * x[5] * x[8] + m.objvar - 5.04 * x[2] - 0.35 * x[3] - x[4] - 3.36 * x[6] == 0)
    m.e2 = pyo.Constraint(expr=-0.819672131147541 * x[2] + x[5] - 0.819672131147541 * x[6] == 0)
    m.e3 = pyo.Constraint(expr=0.98 * x[4] - x[7] * (0.01 * x[5] * x[10] + x[4]) == 0)
    m.e4 = pyo.Constraint(expr=-x[2] * x[9] + 10 * x[3] + x[6] == 0)
    m.e5 = pyo.Constraint(expr=x[5] * x[12] - x[2] * (1.12 + 0.13167 * x[9] - 0.0067 * x[9] * x[9]) == 0)
    m.e6 = pyo.Constraint(expr=x[8] * x[13] - 0.01 * (1.098 * x[9] - 0.038 * x[9] * x[9]) - 0.325 * x[7] == 0.57425)
    m.e7 = pyo.Constraint(expr=x[10] * x[14] + 22.2 * x[11] == 35.82)
    m.e8 = pyo.Constraint(expr=x[11] * x[15] - 3 * x[8] == -1.33)
    m.obj = pyo.Objective(expr=m.objvar)
    return m


def test_alkyl_reference_point_holds_every_row():
    """The reference is attained: SLSQP from the box's midpoint with every row to 1e-10 reaches it (a local
    optimum; the 100-start search that found no lower one is in the kit, docs/gop.md §13k)."""
    m = _alkyl()
    xs = list(m.component_data_objects(pyo.Var))
    cons = list(m.component_data_objects(pyo.Constraint, active=True))

    def setx(z):
        for v, zi in zip(xs, z):
            v.value = float(zi)

    def obj(z):
        setx(z)
        return pyo.value(m.obj)

    def eqs(z):
        setx(z)
        return np.array([pyo.value(c.body) - pyo.value(c.upper) for c in cons])

    lb = [v.lb if v.lb is not None else -10.0 for v in xs]
    ub = [v.ub if v.ub is not None else 10.0 for v in xs]
    best = math.inf
    rng = np.random.default_rng(3)
    for _ in range(6):
        z0 = np.array(lb) + rng.random(len(xs)) * (np.array(ub) - np.array(lb))
        r = minimize(obj, z0, method="SLSQP", bounds=list(zip(lb, ub)), constraints=[{"type": "eq", "fun": eqs}],
                     options={"maxiter": 500, "ftol": 1e-14})
        setx(r.x)
        if _rows_hold(m, rel=1e-10)[0]:
            best = min(best, float(r.fun))
    assert best >= _ALKYL_REF - 1e-9
    assert best == pytest.approx(_ALKYL_REF, abs=1e-8)


def test_alkyl_certified_at_the_feasible_optimum_not_at_scip_tolerance():
    """gop's certificate sits at the optimum of the rows as written (bound below it, incumbent at it, point inside
    every row to 1e-7), not at SCIP's value bought with a row violation of 9.9e-7."""
    _certified_at(_alkyl(), _ALKYL_REF)


# ------------------------------------------------------------------------------------------------ ex8_4_1
# data points (p_i, q_i); MINLPLib boxes every coordinate to its point +- 0.5 and fits q = a p + b (a = x22, b = x21)
_EX8_4_1 = [(0.0, 5.9), (0.9, 5.4), (1.8, 4.4), (2.6, 4.6), (3.3, 3.5), (4.4, 3.7), (5.2, 2.8), (6.1, 2.8), (6.5, 2.4),
            (7.4, 1.5)]


def _ex8_4_1_value(a, b):
    """min over the boxed points (u, a u + b) of the squared distances to the data: per point a convex 1-D problem,
    solved by clipping its unconstrained minimiser to the interval where both coordinates stay in their boxes
    (inf where that interval is empty)."""
    total = 0.0
    for p, q in _EX8_4_1:
        lo, hi = np.full_like(a, p - 0.5), np.full_like(a, p + 0.5)
        with np.errstate(divide="ignore", invalid="ignore"):
            t1, t2 = (q - 0.5 - b) / a, (q + 0.5 - b) / a
        nz = a != 0
        lo = np.where(nz, np.maximum(lo, np.minimum(t1, t2)), lo)
        hi = np.where(nz, np.minimum(hi, np.maximum(t1, t2)), hi)
        ok = np.where(nz, lo <= hi, np.abs(b - q) <= 0.5)
        u = np.clip((p + a * (q - b)) / (1 + a * a), lo, hi)
        total = total + np.where(ok, (u - p) ** 2 + (a * u + b - q) ** 2, np.inf)
    return total


def _ex8_4_1():
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var(within=pyo.Reals)
    m.x21 = pyo.Var(within=pyo.Reals, bounds=(0, 10))
    m.x22 = pyo.Var(within=pyo.Reals, bounds=(-2, 2))
    xs = []
    for i, (p, q) in enumerate(_EX8_4_1):
        u = pyo.Var(within=pyo.Reals, bounds=(p - 0.5, p + 0.5))
        v = pyo.Var(within=pyo.Reals, bounds=(q - 0.5, q + 0.5))
        m.add_component(f"x{2 * i + 1}", u)
        m.add_component(f"x{2 * i + 2}", v)
        m.add_component(f"e{i + 2}", pyo.Constraint(expr=m.x22 * u - v + m.x21 == 0))
        xs.append((u, v, p, q))
    m.e1 = pyo.Constraint(expr=-sum((u - p) ** 2 + (v - q) ** 2 for u, v, p, q in xs) + m.objvar == 0)
    m.obj = pyo.Objective(expr=m.objvar)
    return m


def test_ex8_4_1_honours_the_time_limit_with_a_valid_bound():
    """Line fitting with bilinear rows ``x22 x_odd - x_even + x21 == 0``. An OBBT LP there stalls HiGHS's phase 1 for
    the whole time left; the infeasibility check then re-solved it without presolve under the same, stale limit
    (and HiGHS's getDualRay would solve it once more), so ``time_limit=30`` took 57.7 s. Reference: the closed-form
    inner minimum over a 401 x 1001 grid of (a, b), refined by Nelder-Mead (SCIP 10: 0.6185692, at a point whose
    rows are off by up to 1e-6; gop and a 40-start SLSQP: 0.6185727594)."""
    A, B = np.meshgrid(np.linspace(-2, 2, 401), np.linspace(0, 10, 1001), indexing="ij")
    F = _ex8_4_1_value(A, B)
    k = np.unravel_index(int(np.argmin(F)), F.shape)
    r = minimize(lambda z: float(_ex8_4_1_value(np.array([z[0]]), np.array([z[1]]))[0]), [A[k], B[k]],
                 method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-15, "maxiter": 4000})
    ref = min(float(r.fun), float(F[k]))
    assert ref == pytest.approx(0.6185727594, abs=1e-8)
    m = _ex8_4_1()
    tl = 8.0
    t0 = time.perf_counter()
    res = pyo.SolverFactory("gop").solve(m, time_limit=tl)
    took = time.perf_counter() - t0
    out = res.varopt_result
    assert took <= tl + 3.0, (took, out.status, out.info.get("nodes"))
    tol = 1e-6 * max(1.0, abs(ref))
    assert out.lower_bound <= ref + tol, (out.lower_bound, ref)
    if out.upper_bound is not None and math.isfinite(out.upper_bound):
        assert out.upper_bound >= ref - tol, (out.upper_bound, ref)
        assert _rows_hold(m)[0]


def test_ex8_4_1_is_certified_again():
    """Certified by ``8626aa4`` and ``e3e0f7d`` (37 nodes), not in 30 s since the tangent-cut budget of §13j took the
    tree through LPs on which HiGHS stalls; with the LPs' iteration limits it is certified in about 19 nodes."""
    ref = 0.6185727594370373   # the closed-form reference of the test above (and a 40-start SLSQP, rows to 1e-10)
    m = _ex8_4_1()
    _certified_at(m, ref, time_limit=25)
