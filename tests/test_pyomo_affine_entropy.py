"""``(a.x + c) * log(lam (a.x + c))``: the entropy of an affine expression, as MINLPLib's Gibbs free-energy
problems (ex6_2_*) write it, e.g. ``(4.0643 x2 + 5.7409 x3) * log(4.0643 x2 + 5.7409 x3)`` and
``(26.907 x2 + 41.771 x3) * log(3.9235 x2 + 6.0909 x3)`` (proportional to 15 printed digits).

Before, the product was expanded into ``x_j * log(u)`` for every variable ``x_j`` of the first factor: products
of a variable with a concave function, which the tree relaxes by McCormick envelopes and branches on. It is now
one convex ``xlogx`` row of ``u`` (exact: ``w log u = lam u log u`` when ``w = lam u``).
"""
import itertools

import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401
from varopt.frontends.pyomo_compile import compile_pyomo


def _kinds(expr):
    out = {}
    for g in expr.atoms:
        for mu in g.mult:
            key = (g.kind, bool(mu >= 0))
            out[key] = out.get(key, 0) + 1
    return out


def test_affine_times_log_of_a_proportional_affine_is_one_xlogx_row():
    m = pyo.ConcreteModel()
    m.x = pyo.Var([1, 2, 3], bounds=(0.1, 1))
    lam = 26.9071667605344 / 3.9235  # MINLPLib's ex6_2_6 data: the other ratios agree to ~1e-15
    e = (26.9071667605344 * m.x[1] + 41.7710875549227 * m.x[2] + 6.30931398488382 * m.x[3]) \
        * pyo.log(3.9235 * m.x[1] + 6.0909 * m.x[2] + 0.92 * m.x[3]) \
        + (2 * m.x[1] + 4 * m.x[2] + 2) * pyo.log(m.x[1] + 2 * m.x[2] + 1)
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    assert _kinds(prog.objective) == {("xlogx", False): 2}
    xl = [g for g in prog.objective.atoms if g.kind == "xlogx"][0]
    assert sorted(xl.coef.tolist()) == pytest.approx(sorted([lam, 2.0]), rel=1e-14)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.uniform(0.1, 1, 3)
        mp.load(x)
        assert prog.objective.value(x) == pytest.approx(pyo.value(e), rel=1e-12)


@pytest.mark.parametrize("first", ["x1 + 3 x2", "x1 + 2 x2 + 1e-9 x1"])
def test_non_proportional_factors_keep_their_multiplied_rows(first):
    m = pyo.ConcreteModel()
    m.x = pyo.Var([1, 2], bounds=(0.1, 1))
    w = m.x[1] + 3 * m.x[2] if first == "x1 + 3 x2" else m.x[1] + 2 * m.x[2] + 1e-9 * m.x[1]
    e = w * pyo.log(m.x[1] + 2 * m.x[2])
    m.obj = pyo.Objective(expr=e)
    prog, mp = compile_pyomo(m)
    assert _kinds(prog.objective) == {("neglog", True): 2}
    x = np.array([0.3, 0.7])
    mp.load(x)
    assert prog.objective.value(x) == pytest.approx(pyo.value(e), rel=1e-12)


def _gibbs_like():
    """min (x1 + 2 x2 + 3 x3) log(x1 + 2 x2 + 3 x3) - sum_i c_i x_i log x_i + d.x over the simplex x >= 1e-6:
    a convex entropy of an affine map minus entropies (concave), so the program is nonconvex."""
    c = (0.5, 0.3, 0.2)
    d = (0.4, -0.2, 0.1)
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1, 2], bounds=(1e-6, 1), initialize=1 / 3)
    s = m.x[0] + 2 * m.x[1] + 3 * m.x[2]
    m.obj = pyo.Objective(expr=(m.x[0] + 2 * m.x[1] + 3 * m.x[2]) * pyo.log(s)
                          - sum(c[i] * m.x[i] * pyo.log(m.x[i]) for i in range(3)) + sum(d[i] * m.x[i] for i in range(3)))
    m.simplex = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) == 1)

    def f(x):
        s = x[0] + 2 * x[1] + 3 * x[2]
        return s * np.log(s) - sum(c[i] * x[i] * np.log(x[i]) for i in range(3)) + sum(d[i] * x[i] for i in range(3))
    return m, f


def test_gibbs_like_program_is_certified_at_the_brute_force_optimum():
    m, f = _gibbs_like()
    # brute force: a fine grid of the simplex, then a local polish of the best point (the optimum is interior or
    # on an edge; both are grid-resolved at 1/400)
    best = min((f((a, b, 1 - a - b)), (a, b)) for a, b in itertools.product(np.linspace(1e-6, 1, 401), repeat=2)
               if a + b <= 1 - 1e-6)
    from scipy.optimize import minimize
    r = minimize(lambda p: f((p[0], p[1], 1 - p[0] - p[1])) if min(p[0], p[1], 1 - p[0] - p[1]) >= 1e-6 else 1e9,
                 best[1], method="Nelder-Mead", options=dict(xatol=1e-12, fatol=1e-14))
    opt = min(best[0], r.fun)
    # not biconvex (-c x log x is concave): mode="auto" refuses and names mode="tree" (by design)
    res = pyo.SolverFactory("gop").solve(m, time_limit=20, mode="tree")
    out = res.varopt_result
    tol = 1e-6 * max(1.0, abs(opt))
    assert out.status == "optimal", (out.status, out.lower_bound, out.upper_bound)
    assert out.lower_bound <= opt + tol and abs(out.upper_bound - opt) <= tol
    assert pyo.value(m.obj) == pytest.approx(opt, abs=tol)
