"""Symmetry detection and symmetry breaking in gop (docs/gop.md §8b).

References: the K! relabellings of a Bayesian GMM checked term by term (:func:`is_symmetry`), a
perturbed model on which the false symmetry must not be found, and certified optima with and without
the symmetry-breaking rows (and SCIP) on the same models.
"""
import itertools

import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import varopt  # noqa: F401
from varopt.errors import InvalidOptionError
from varopt.formulations.bgmm import MINIMAL_DATA, bgmm_cvxpy, bgmm_pyomo
from varopt.frontends.cvxpy_compile import compile_cvxpy
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.program.symmetry import declared_orbit, detect_orbits, is_symmetry
from varopt.solvers.gop.symmetry import order_box

X6 = np.array([-0.3, 0.2, 4.1, 3.7, 8.3, 7.9])


def _program(m):
    return compile_pyomo(m)[0]


def _component_perm(pr, K, sigma):
    """The renaming of a BGMM program that relabels component k as sigma[k]."""
    p = np.arange(pr.n)
    for v, nm in enumerate(pr.names):
        base, idx = nm.split("[")
        parts = idx.rstrip("]").split(",")
        k = int(parts[-1])
        p[v] = pr.index[f"{base}[{','.join(parts[:-1] + [str(sigma[k])])}]"]
    return p


@pytest.mark.parametrize("family", ["point", "gaussian"])
def test_detects_the_k_factorial_relabellings_of_a_bgmm(family):
    pr = _program(bgmm_pyomo(X6, 3, family, 0.1, 1.0))
    for sigma in itertools.permutations(range(3)):
        assert is_symmetry(pr, _component_perm(pr, 3, sigma))
    orbits = detect_orbits(pr)
    assert len(orbits) == 1
    orb = orbits[0]
    assert orb.size == 3
    per = 6 + 2 + (family == "gaussian")  # phi[i, k] for 6 points, mu, pi (, v)
    assert all(len(g) == per for g in orb.groups)
    # the generated group acts as S_3 on every representative set: every ordering is reachable
    reps = {tuple(pr.names[v] for v in r) for r in orb.rep_sets()}
    assert ("mu[0]", "mu[1]", "mu[2]") in reps and ("phi[4,0]", "phi[4,1]", "phi[4,2]") in reps
    # the same structure is found through the CVXPY front-end
    prc = compile_cvxpy(bgmm_cvxpy(X6, 3, family, 0.1, 1.0))[0]
    oc = detect_orbits(prc)
    assert len(oc) == 1 and oc[0].size == 3 and len(oc[0].groups[0]) == per


def test_perturbed_component_is_not_interchangeable():
    m = bgmm_pyomo(X6, 3, "point", 0.1, 1.0)
    m.neg_elbo.expr = m.neg_elbo.expr + 1e-9 * m.mu[1] ** 2
    pr = _program(m)
    assert not is_symmetry(pr, _component_perm(pr, 3, (1, 0, 2)))
    assert is_symmetry(pr, _component_perm(pr, 3, (2, 1, 0)))
    orbits = detect_orbits(pr)
    assert len(orbits) == 1
    for orb in orbits:
        assert orb.size == 2
        for g in orb.groups:  # nothing of component 1 moves
            assert not any(pr.names[v].endswith("1]") and pr.names[v].startswith(("mu", "pi")) for v in g)
        for p in orb.perms:
            assert is_symmetry(pr, p)
    # the model's own symmetry-breaking rows leave no symmetry
    assert detect_orbits(_program(bgmm_pyomo(X6, 3, "point", 0.1, 1.0, symmetry_breaking="phi"))) == []


def test_declared_groups_are_checked():
    pr = _program(bgmm_pyomo(X6, 2, "point", 0.1, 1.0))
    idx = pr.index
    g = [[idx["mu[0]"], idx["pi[0]"]] + [idx[f"phi[{i},0]"] for i in range(6)],
         [idx["mu[1]"], idx["pi[1]"]] + [idx[f"phi[{i},1]"] for i in range(6)]]
    assert declared_orbit(pr, g).size == 2
    with pytest.raises(ValueError, match="not a symmetry"):
        declared_orbit(pr, [[idx["mu[0]"]], [idx["mu[1]"]]])
    with pytest.raises(ValueError, match="same"):
        declared_orbit(pr, [[idx["mu[0]"], idx["pi[0]"]], [idx["mu[1]"]]])


def test_symmetry_option_is_validated_and_reported():
    m = bgmm_pyomo(**MINIMAL_DATA)
    with pytest.raises(InvalidOptionError, match="symmetry"):
        pyo.SolverFactory("gop").solve(m, symmetry="yes")
    with pytest.raises(InvalidOptionError, match="not a symmetry"):
        pyo.SolverFactory("gop").solve(m, symmetry=[["mu[0]"], ["mu[1]"]])
    with pytest.raises(InvalidOptionError, match="no variable matches"):
        pyo.SolverFactory("gop").solve(m, symmetry=[["nu[0]"], ["nu[1]"]])
    groups = [["mu[0]", "pi[0]", "phi[*,0]"], ["mu[1]", "pi[1]", "phi[*,1]"]]
    r = pyo.SolverFactory("gop").solve(m, symmetry=groups, time_limit=60).varopt_result
    assert r.status == "optimal"
    info = r.info["symmetry"]
    assert "declared" in info["groups"][0] and info["breaking"] == "box" and info["ordered"] == ["mu[0]", "mu[1]"]


@pytest.mark.parametrize("family", ["point", "gaussian"])
def test_same_certified_optimum_with_and_without_symmetry_breaking(family):
    vals = {}
    for sym in ("auto", "off"):
        m = bgmm_pyomo(**MINIMAL_DATA, family=family)
        r = pyo.SolverFactory("gop").solve(m, symmetry=sym, time_limit=120).varopt_result
        assert r.status == "optimal", (sym, r.status)
        vals[sym] = r.upper_bound
        if sym == "auto":
            assert r.info["symmetry"]["ordered"] == ["mu[0]", "mu[1]"]
            mu = [pyo.value(m.mu[k]) for k in range(2)]
            assert mu[0] <= mu[1] + 1e-9
    assert abs(vals["auto"] - vals["off"]) <= 1e-6 * abs(vals["off"])


def test_rows_on_the_relaxed_dual_block_without_reduction():
    """With reduction=False the ordering goes to rows of phi (kept in every relaxed dual); the
    bounds still bracket the optimum certified without any symmetry breaking."""
    ref = pyo.SolverFactory("gop").solve(bgmm_pyomo(**MINIMAL_DATA), symmetry="off", time_limit=120).varopt_result
    assert ref.status == "optimal"
    f = ref.upper_bound
    m = bgmm_pyomo(**MINIMAL_DATA)
    r = pyo.SolverFactory("gop").solve(m, reduction=False, time_limit=5).varopt_result
    assert r.info["symmetry"]["breaking"] == "rows"
    assert r.info["symmetry"]["ordered"][0].startswith("phi")
    tol = 1e-6 * abs(f)
    assert r.lower_bound <= f + tol and r.upper_bound >= f - tol


def test_order_box():
    lo, hi = np.array([0.0, -1.0, 2.0]), np.array([5.0, 3.0, 4.0])
    assert order_box(np.array([0, 1, 2]), lo, hi)
    assert lo.tolist() == [0.0, 0.0, 2.0] and hi.tolist() == [3.0, 3.0, 4.0]
    lo, hi = np.array([2.0, 0.0]), np.array([3.0, 1.0])
    assert not order_box(np.array([0, 1]), lo, hi)


def symmetric_bilinear(seed):
    """K identical groups (x_k, y_k) with an objective and rows invariant under every relabelling,
    plus a coupling row and a symmetric cross-group product."""
    rng = np.random.default_rng(seed)
    K, nx, ny = int(rng.integers(2, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    Q = np.round(rng.normal(size=(nx, ny)), 2)
    c, d = np.round(rng.normal(size=nx), 2), np.round(rng.normal(size=ny), 2)
    e = float(np.round(rng.normal(), 2))
    a, b = np.round(rng.uniform(0.5, 2, size=nx), 2), np.round(rng.uniform(0.5, 2, size=ny), 2)
    rhs, low = float(rng.integers(1, 4)), float(rng.uniform(0, 2))
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(K), range(nx), bounds=(0.0, 3.0))
    m.y = pyo.Var(range(K), range(ny), bounds=(-1.0, 2.0))
    m.obj = pyo.Objective(expr=sum(
        sum(c[i] * m.x[k, i] for i in range(nx)) + sum(d[j] * m.y[k, j] for j in range(ny))
        + sum(Q[i, j] * m.x[k, i] * m.y[k, j] for i in range(nx) for j in range(ny)) for k in range(K))
        + e * sum(m.x[k, 0] * m.y[l, 0] for k in range(K) for l in range(K) if k != l))
    m.row = pyo.Constraint(range(K), rule=lambda mm, k: sum(a[i] * mm.x[k, i] for i in range(nx))
                           + sum(b[j] * mm.y[k, j] for j in range(ny)) <= rhs)
    m.tot = pyo.Constraint(expr=sum(m.x[k, i] for k in range(K) for i in range(nx)) >= low)
    return m, K


def _scip(m):
    """SCIP's optimum to gap 1e-9, or None when SCIP proves the program infeasible."""
    try:
        r = pyo.SolverFactory("scip_direct").solve(m, options={"limits/gap": 1e-9, "limits/time": 60})
    except Exception as e:  # pyomo raises when no feasible solution exists
        if "feasible" in str(e).lower():
            return None
        raise
    assert str(r.solver.termination_condition) == "optimal"
    return pyo.value(m.obj)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6))
@example(59577)  # Q = e: only the rows tell y_0 from y_1 (the refinement stopped one round early)
def test_random_symmetric_bilinear_programs_against_scip(seed):
    pytest.importorskip("pyscipopt")
    m, K = symmetric_bilinear(seed)
    pr = _program(m)
    orbits = detect_orbits(pr)
    assert orbits and orbits[0].size == K
    for orb in orbits:
        for p in orb.perms:
            assert is_symmetry(pr, p)
    f = _scip(m.clone())
    r = pyo.SolverFactory("gop").solve(m, time_limit=60, load_solutions=f is not None).varopt_result
    if f is None:
        assert r.status == "infeasible"
        return
    tol = 1e-6 * max(1.0, abs(f))
    assert r.lower_bound <= f + tol
    assert r.status == "optimal" and abs(r.upper_bound - f) <= tol, (seed, r.status, r.upper_bound, f)
    assert r.info["symmetry"]["breaking"] == "rows"


def test_stick_breaking_relaxation_keeps_the_objective():
    """The presolved program in stick-breaking coordinates has the same objective at the mapped point,
    and every feasible pi maps into its box (docs/gop.md §2b)."""
    from varopt.solvers.gop.partition import analyze
    from varopt.solvers.gop.stick import stick_breaking
    pr = _program(bgmm_pyomo(X6, 3, "gaussian", 0.1, 1.0))
    sb = stick_breaking(pr, analyze(pr, None))
    assert sb is not None and [pr.names[v] for v in sb.simplex] == ["pi[0]", "pi[1]", "pi[2]"]
    T = sb.program
    rng = np.random.default_rng(0)
    for _ in range(20):
        zn = rng.uniform(T.lb, T.ub)
        z = sb.expand(zn)
        assert abs(z[sb.simplex].sum() - 1.0) < 1e-12
        assert abs(T.objective.value(zn) - pr.objective.value(z)) <= 1e-9 * max(1.0, abs(pr.objective.value(z)))
        p = rng.dirichlet(np.ones(3)) * (1 - 3e-6) + 1e-6
        s = [p[0], p[1] / (p[1] + p[2])]
        assert np.all(T.lb[sb.svars] <= s) and np.all(s <= T.ub[sb.svars])


def test_k3_bounds_bracket_the_scip_optimum():
    """K = 3 (not certified by SCIP in seconds): gop's lower bound is below SCIP's incumbent, its upper
    bound is the user's objective at the loaded point and above SCIP's certified lower bound."""
    pytest.importorskip("pyscipopt")
    x = (0.0, 4.1, 8.2)
    m = bgmm_pyomo(x, 3, "point", 0.1, 1.0)
    from bgmm_scip_bounds import scip_bounds
    s_lo, s_up = scip_bounds(x, 3, "point", 0.1, 1.0, time_limit=10)  # shared with test_gop_split.py
    r = pyo.SolverFactory("gop").solve(m, time_limit=20).varopt_result
    assert "stick_breaking" in r.info and r.info["symmetry"]["breaking"] == "box"
    tol = 1e-6 * abs(s_up)
    assert r.lower_bound <= s_up + tol and r.upper_bound >= s_lo - tol
    assert abs(pyo.value(m.neg_elbo) - r.upper_bound) <= tol
    if r.status == "optimal":
        assert r.upper_bound <= s_up + tol and r.lower_bound >= s_lo - tol
