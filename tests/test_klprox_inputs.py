"""klprox: Gaussian expectations against adaptive quadrature and finite differences; the same posterior from
Pyomo and CVXPY; the likelihood view of the compiled program; clear errors for bad models, data and options."""
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit

import varopt  # noqa: F401
from varopt.errors import InputDataError, InvalidOptionError, ModelStructureError
from varopt.formulations.bayes_glm import build_cvxpy, build_pyomo, design, glm_program
from varopt.registry import get_solver
from varopt.solvers.klprox import family_table, likelihood_view

S = get_solver("klprox")
FAMS = family_table()
FUNCS = {"logistic": lambda u: np.logaddexp(0.0, u), "exp": np.exp, "abs": np.abs, "square": lambda u: u * u}


def _quad(fn, m, v):
    s = math.sqrt(v)
    pts = [0.0] if m - 40 * s < 0 < m + 40 * s else None
    dens = lambda u: fn(u) * math.exp(-0.5 * ((u - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    return integrate.quad(dens, m - 40 * s, m + 40 * s, points=pts, epsabs=1e-300, epsrel=1e-13, limit=500)[0]


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_expectations_match_adaptive_quadrature_and_finite_differences(name):
    fam, fn = FAMS[name], FUNCS[name]
    for m in (-6.0, -0.7, 0.0, 1.3, 5.0):
        for v in (0.05, 1.0, 1.9, 2.1, 30.0, 400.0):
            if name == "exp" and m + v / 2 > 50:
                continue
            E, d1, d2 = (float(a[0]) for a in fam.expect(np.array([m]), np.array([v])))
            ref = _quad(fn, m, v)
            assert abs(E - ref) <= 1e-11 * max(abs(ref), 1e-3), (m, v, E, ref)
            h = 1e-5 * max(1.0, abs(m))
            fd1 = (fam.expect(np.array([m + h]), np.array([v]))[0][0] - fam.expect(np.array([m - h]), np.array([v]))[0][0]) / (2 * h)
            hv = 1e-5 * v
            fd2 = (fam.expect(np.array([m]), np.array([v + hv]))[0][0] - fam.expect(np.array([m]), np.array([v - hv]))[0][0]) / (2 * hv)
            assert abs(d1 - fd1) <= 1e-6 * max(1.0, abs(d1)), (m, v, d1, fd1)
            assert abs(d2 - fd2) <= 1e-6 * max(1.0, abs(d2)), (m, v, d2, fd2)


def test_logistic_quadrature_rules_agree_at_the_switch():
    fam = FAMS["logistic"]
    m = np.linspace(-8, 8, 33)
    v = np.full(m.size, fam.vt_switch)
    a = fam._hermite(m, v)
    b = fam._split(m, v)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


def test_logistic_pair_equals_two_expectations():
    # E[l(u)] and E[l(-u)] from one set of nodes (the rows (1 - t) l(u) + t l(-u) of a fractional split), every
    # Gauss-Hermite grade and the split rule (vt > 2), against two separate evaluations
    fam = FAMS["logistic"]
    rng = np.random.default_rng(0)
    m = rng.uniform(-30, 30, 400)
    v = np.exp(rng.uniform(np.log(1e-4), np.log(1e3), 400))
    ep, ap, g, en, an = fam.expect_pair(m, v)
    for x, y in zip((ep, ap, g, en, an), fam.expect(m, v) + fam.expect(-m, v)[:2]):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=1e-300)



@pytest.mark.parametrize("pair", [False, True])
def test_logistic_grades_of_a_few_rows_merged_into_the_widest_one(monkeypatch, pair):
    # rows in several Gauss-Hermite grades: a few of them (MERGE_NODES) in one call with the largest node count
    # present, many in one call per grade; either way every row as accurate as alone in its own grade
    from varopt.solvers.klprox import expectations as E
    fam = FAMS["logistic"]
    rng = np.random.default_rng(1)
    calls = []
    rule = E.LogisticFamily._hermite_pair_rule if pair else E.LogisticFamily._hermite_rule
    monkeypatch.setattr(E.LogisticFamily, "_hermite_pair_rule" if pair else "_hermite_rule",
                        staticmethod(lambda m, v, x, w: calls.append(x.size) or rule(m, v, x, w)))
    run = fam._hermite_pair if pair else fam._hermite
    for n, merged in ((40, True), (2000, False)):
        m = rng.uniform(-20, 20, n)
        v = np.exp(rng.uniform(np.log(1e-3), np.log(2.0), n))
        calls.clear()
        out = run(m, v)
        grades = {min(k for b, k in fam.grades if vi <= b) for vi in v}
        assert calls == ([max(grades)] if merged else sorted(grades)), (n, calls)
        alone = [run(m[i:i + 1], v[i:i + 1]) for i in range(0, n, max(1, n // 40))]
        for k, ref in zip(range(0, n, max(1, n // 40)), alone):
            for a, b in zip(out, ref):
                assert abs(a[k] - b[0]) <= 2e-14 * max(1.0, abs(b[0])), (n, k, a[k], b[0])



def test_every_gauss_hermite_grade_is_exact_at_its_bound():
    # each grade's node count against a 200-node rule at the largest variance it serves (and below), both rules:
    # relative to max(|value|, 0.01), 1e-14 for the narrow grades (measured <= 8e-16; 8 nodes at 0.05 give 1.6e-13),
    # 1e-12 for the wider ones (measured 1.0e-13 with 24 nodes at 0.5, 6.5e-13 with 64 at 2)
    from varopt.solvers.klprox import expectations as E
    m = np.linspace(-30, 30, 1201)
    for vmax, n in E.HERMITE_NODES:
        for v0 in (1e-8, vmax / 3, vmax):
            v = np.full(m.size, v0)
            for rule in (E.LogisticFamily._hermite_rule, E.LogisticFamily._hermite_pair_rule):
                for a, b in zip(rule(m, v, *E._gh(n)), rule(m, v, *E._gh(200))):
                    err = np.max(np.abs(a - b) / np.maximum(np.abs(b), 0.01))
                    assert err <= (1e-14 if vmax <= 0.1 else 1e-12), (vmax, n, err)


# --- the view of a compiled program --------------------------------------------------------------------
def test_view_reproduces_the_program_objective():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    for lik, y in (("logistic", (rng.uniform(size=30) < 0.5).astype(float)), ("poisson", rng.poisson(2.0, 30).astype(float)),
                   ("laplace", rng.normal(size=30)), ("gaussian", rng.normal(size=30))):
        p = glm_program(X, y, lik, prior_var=1.7, noise=0.8)
        view = likelihood_view(p, FAMS)
        for _ in range(3):
            w = rng.normal(size=p.n)
            assert abs(view.value(w) - p.objective.value(w)) <= 1e-10 * (1 + abs(p.objective.value(w)))


# --- Pyomo and CVXPY declarations give the same posterior -----------------------------------------------
@pytest.mark.parametrize("likelihood", ["logistic", "poisson", "laplace", "gaussian"])
def test_pyomo_and_cvxpy_give_the_same_posterior(likelihood):
    import pyomo.environ as pe
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2))
    w = np.array([0.8, -0.5])
    y = {"logistic": (rng.uniform(size=40) < expit(X @ w)).astype(float), "poisson": rng.poisson(np.exp(X @ w)).astype(float),
         "laplace": X @ w + rng.laplace(size=40), "gaussian": X @ w + rng.normal(size=40)}[likelihood]
    F = design(X)
    prob, wv = build_cvxpy(F, y, likelihood, prior_var=2.0, noise=0.9)
    val = prob.solve(method="klprox")
    rc = prob.varopt_result
    model = build_pyomo(F, y, likelihood, prior_var=2.0, noise=0.9)
    res = pe.SolverFactory("klprox").solve(model)
    rp = res.varopt_result
    ra = S.solve(glm_program(X, y, likelihood, prior_var=2.0, noise=0.9))
    assert rc.status == rp.status == "converged"
    assert abs(val - rp.objective) <= 1e-10 * abs(val) and abs(val - ra.objective) <= 1e-10 * abs(val)
    np.testing.assert_allclose(wv.value, rp.x, atol=1e-9)
    np.testing.assert_allclose([pe.value(model.w[j]) for j in range(3)], ra.x, atol=1e-9)
    np.testing.assert_allclose(rc.info["covariance"], rp.info["covariance"], atol=1e-9)
    np.testing.assert_allclose(rc.info["covariance"], ra.info["covariance"], atol=1e-9)
    # the loaded point is the posterior mean and the model evaluates there
    assert math.isfinite(pe.value(model.obj))


# --- bad inputs -------------------------------------------------------------------------------------------
def test_term_not_a_function_of_an_affine_predictor():
    import cvxpy as cp
    x = cp.Variable(2)
    bad = [cp.sum_squares(x) - cp.sum(cp.log(x + 3)), cp.sum_squares(x) + cp.quad_over_lin(x[0], x[1] + 2),
           cp.sum_squares(x) + cp.sum(cp.entr(x + 2))]
    for obj in bad:
        with pytest.raises(ModelStructureError, match="klprox: objective"):
            cp.Problem(cp.Minimize(obj)).solve(method="klprox")
    with pytest.raises(ModelStructureError, match="softmax groups of more than 4 entries"):
        u = cp.hstack([x[0], x[1], 0, x[0] - x[1], 2 * x[0], x[1] + 1])
        cp.Problem(cp.Minimize(cp.sum_squares(x) + cp.log_sum_exp(u))).solve(method="klprox")
    with pytest.raises(ModelStructureError, match="constraints"):
        cp.Problem(cp.Minimize(cp.sum_squares(x) + cp.sum(cp.logistic(x))), [x >= 0]).solve(method="klprox")
    with pytest.raises(ModelStructureError, match="negative coefficient"):
        cp.Problem(cp.Minimize(cp.sum_squares(x) - cp.sum(cp.exp(x)))).solve(method="klprox")


def test_product_with_a_variable_is_rejected():
    import pyomo.environ as pe
    m = pe.ConcreteModel()
    m.x = pe.Var(range(2))
    m.o = pe.Objective(expr=m.x[0] ** 2 + m.x[1] ** 2 + m.x[0] * pe.exp(m.x[1]))
    with pytest.raises(ModelStructureError, match="product with a variable"):
        pe.SolverFactory("klprox").solve(m)


def test_missing_or_indefinite_prior():
    import cvxpy as cp
    x = cp.Variable(3, name="x")
    with pytest.raises(ModelStructureError, match=r"no Gaussian prior on 'x\[2\]'"):
        cp.Problem(cp.Minimize(cp.sum_squares(x[:2]) + cp.sum(cp.logistic(x)))).solve(method="klprox")
    P = np.diag([1.0, 1.0, -0.5])
    with pytest.raises(ModelStructureError, match="not positive definite"):
        cp.Problem(cp.Minimize(cp.quad_form(x, P, assume_PSD=True) + cp.sum(cp.logistic(x)))).solve(method="klprox")
    with pytest.raises(ModelStructureError, match="no Gaussian prior"):
        cp.Problem(cp.Minimize(cp.sum(cp.logistic(x)))).solve(method="klprox")


def test_nan_and_empty_data_and_bad_steps():
    X = np.ones((5, 2))
    y = np.array([0, 1, 0, 1, 1.0])
    Xn = X.copy()
    Xn[2, 1] = np.nan
    with pytest.raises(InputDataError, match="X contains NaN"):
        glm_program(Xn, y)
    with pytest.raises(InputDataError, match="y contains NaN"):
        glm_program(X, np.array([0, 1, np.nan, 1, 0]), "laplace")
    with pytest.raises(InputDataError, match="empty"):
        glm_program(np.zeros((0, 2)), np.zeros(0))
    with pytest.raises(InputDataError, match="0/1"):
        glm_program(X, np.array([0, 1, 2, 1, 0.0]))
    import cvxpy as cp
    x = cp.Variable(2)
    with pytest.raises(InputDataError, match="NaN"):
        cp.Problem(cp.Minimize(cp.sum_squares(x) + cp.sum(cp.logistic(np.array([[1, np.nan], [0, 1.0]]) @ x)))).solve(method="klprox")
    p = glm_program(X, y)
    for bad in ({"beta": 0.0}, {"beta": -1.0}, {"shrink": 1.5}, {"step_rule": "armijo"}, {"quadrature_nodes": 5}):
        with pytest.raises(InvalidOptionError, match=list(bad)[0]):
            S.solve(p, **bad)


def test_warm_start_from_a_previous_solution():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(60, 3))
    y = (rng.uniform(size=60) < expit(X @ np.array([1.0, -1.0, 0.5]))).astype(float)
    r1 = S.solve(glm_program(X, y, prior_var=1.0))
    for par in ("full", "dual"):
        again = S.solve(glm_program(X, y, prior_var=1.0), warm_start=r1, parameterization=par)
        assert again.iterations <= 3 and abs(again.objective - r1.objective) <= 1e-10 * abs(r1.objective)
    nxt = S.solve(glm_program(X, y, prior_var=1.5), warm_start=r1)
    ref = S.solve(glm_program(X, y, prior_var=1.5))
    assert abs(nxt.objective - ref.objective) <= 1e-10 * abs(ref.objective)
    with pytest.raises(InvalidOptionError, match="warm_start"):
        S.solve(glm_program(X[:50], y[:50], prior_var=1.0), warm_start=r1)
    with pytest.raises(InvalidOptionError, match="warm_start"):
        S.solve(glm_program(X, y, prior_var=1.0), warm_start={"x": np.zeros(4)})


def test_warm_start_sites_reproduce_the_solution_and_carry_over_to_a_new_kernel():
    """The Gaussian-site start (docs/klprox.md, section 3): under the same prior it is the solution itself (both
    parameterizations); under a new GP kernel it starts lower than the carried mean and ends at the cold optimum."""
    from varopt.formulations.bayes_glm import gp_program
    from varopt.solvers.klprox.posterior import DualGaussian, FullGaussian
    rng = np.random.default_rng(11)
    X = rng.normal(size=(40, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.laplace(size=40)
    p = gp_program(X, y, "laplace", 0.0, 0.0, 0.2)[0]
    r = S.solve(p, gtol=1e-10)
    v = likelihood_view(p, FAMS)
    for cls in (FullGaussian, DualGaussian):
        post = cls(v)
        sites = post.warm(r.x, r.info["pseudo_precisions"], r.info["alpha"], r.info["predictor_mean"])[-1]
        np.testing.assert_allclose(post.mean(sites), r.x, atol=1e-8)
    p2 = gp_program(X, y, "laplace", 0.0, 0.5, 0.2)[0]
    post = FullGaussian(likelihood_view(p2, FAMS))
    carried, sites = post.warm(r.x, r.info["pseudo_precisions"], r.info["alpha"], r.info["predictor_mean"])
    f = [post.gauss_part(st) + post.view.terms(FAMS, *post.predictors(st))[0] for st in (carried, sites)]
    assert f[1] < f[0]
    cold, warm = S.solve(p2), S.solve(p2, warm_start=[r, S.solve(gp_program(X, y, "laplace", 0.5, 0.0, 0.2)[0])])
    assert warm.status == cold.status == "converged" and warm.iterations < cold.iterations
    assert abs(warm.objective - cold.objective) <= 1e-9 * abs(cold.objective)
    h = np.array([e["objective"] for e in warm.history])
    assert np.all(np.diff(h) <= warm.info["rounding"])
    for bad, match in (([], "empty"), (dict(r.info, x=r.x, beta=-1.0), "beta"),
                       (dict(r.info, x=r.x, predictor_mean=r.info["predictor_mean"][:5]), "predictor means")):
        with pytest.raises(InvalidOptionError, match=match):
            S.solve(p2, warm_start=bad)


def test_warm_start_sites_of_softmax_groups_reproduce_the_solution():
    """The site start with J x J pseudo-precision blocks (multinomial rows): the solution under the same prior."""
    from varopt.solvers.klprox.posterior import DualGaussian, FullGaussian
    rng = np.random.default_rng(12)
    X = rng.normal(size=(40, 2))
    y = rng.integers(0, 3, 40).astype(float)
    p = glm_program(X, y, "multinomial", prior_var=1.0)
    r = S.solve(p, gtol=1e-10)
    v = likelihood_view(p, FAMS)
    assert not v.diagonal
    for cls in (FullGaussian, DualGaussian):
        post = cls(v)
        sites = post.warm(r.x, r.info["pseudo_precisions"], r.info["alpha"], r.info["predictor_mean"])[-1]
        np.testing.assert_allclose(post.mean(sites), r.x, atol=1e-8)


def test_natural_mean_step_reaches_the_same_optimum():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(80, 3))
    y = (rng.uniform(size=80) < expit(X @ np.array([1.0, -2.0, 0.5]))).astype(float)
    p = glm_program(X, y, prior_var=3.0)
    a = S.solve(p)
    for kw in ({"mean_step": "natural"}, {"mean_step": "natural", "beta_max": 100.0, "parameterization": "dual"}):
        b = S.solve(p, **kw)
        assert b.status == "converged" and abs(a.objective - b.objective) <= 1e-10 * abs(a.objective)
        np.testing.assert_allclose(a.x, b.x, atol=1e-7)
        h = np.array([e["objective"] for e in b.history])
        assert np.all(np.diff(h) <= b.info["rounding"])


def test_cvxpy_warm_start_keyword():
    """CVXPY's ``warm_start=True`` (a boolean) starts from the problem's previous klprox solve (before: an
    InvalidOptionError "'bool' object is not subscriptable"); False is a cold start; majorize accepts it too."""
    import cvxpy as cp
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), (rng.random(50) < 0.5).astype(float)
    w, lam = cp.Variable(3), cp.Parameter(nonneg=True, value=1.0)
    p = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ (X @ w) + lam / 2 * cp.sum_squares(w)))
    cold = p.solve(method="klprox", warm_start=True)        # no previous solve: a cold start
    n_cold = p.varopt_result.iterations
    assert p.solve(method="klprox", warm_start=True) == pytest.approx(cold, rel=1e-12)
    assert p.varopt_result.iterations < n_cold
    lam.value = 2.0
    warm = p.solve(method="klprox", warm_start=True)
    assert p.solve(method="klprox", warm_start=False) == pytest.approx(warm, rel=1e-10)
    assert p.varopt_result.iterations > 1
    assert p.solve(method="majorize", warm_start=True) == pytest.approx(p.solve(solver=cp.CLARABEL), rel=1e-7)


@pytest.mark.parametrize("form", ["power", "square"])
def test_squared_two_norm_prior_is_sum_squares(form):
    """``cp.norm(w)**2`` and ``cp.square(cp.norm(w))`` compile to sum_squares' rows (before: an auxiliary
    ``t = sqrt(sum w^2)`` that only gop handles, so klprox and majorize refused the most common L2 prior)."""
    import cvxpy as cp
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(30, 3)), (rng.random(30) < 0.5).astype(float)
    priors = {"power": lambda w: cp.norm(w, 2) ** 2 / 2, "square": lambda w: cp.square(cp.norm(w)) / 2}
    vals = []
    for pr in (priors[form], lambda w: cp.sum_squares(w) / 2):
        w = cp.Variable(3)
        p = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ (X @ w) + pr(w)))
        vals.append((p.solve(method="klprox"), w.value.copy(), p.solve(method="majorize")))
    assert vals[0][0] == pytest.approx(vals[1][0], rel=1e-13) and np.allclose(vals[0][1], vals[1][1], atol=1e-12)
    assert vals[0][2] == pytest.approx(vals[1][2], rel=1e-10)


def test_converged_cvxpy_solve_does_not_warn_inaccurate():
    """A converged klprox solve maps to CVXPY's OPTIMAL_INACCURATE without CVXPY's "Solution may be inaccurate. Try
    another solver" warning (the convergence test passed); an iteration limit is still USER_LIMIT."""
    import warnings

    import cvxpy as cp
    rng = np.random.default_rng(4)
    X, y = rng.normal(size=(20, 2)), (rng.random(20) < 0.5).astype(float)
    w = cp.Variable(2)
    p = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ (X @ w) + cp.sum_squares(w)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.solve(method="klprox")
    assert p.status == "optimal_inaccurate" and p.varopt_result.status == "converged"
    p.solve(method="klprox", max_iter=1)
    assert p.status == "user_limit"


def test_logistic_split_rule_equals_a_48_node_rule_to_rounding():
    # the split rule's graded panels (SPLIT_NODES: 120 nodes) against the same panels with 48 nodes each (exact to
    # rounding there), value and both derivatives, wherever the rule is used (v > 2) and far into both tails
    from varopt.solvers.klprox import expectations as E
    fam = FAMS["logistic"]
    m, v = (a.ravel() for a in np.meshgrid(np.linspace(-40, 40, 161), np.geomspace(2.0, 1e5, 30)))
    ref = E.LogisticFamily()
    ref.panels = E.split_panels(E.SPLIT_EDGES, (48,) * len(E.SPLIT_NODES))
    assert fam.panels.t.size == sum(E.SPLIT_NODES) < ref.panels.t.size == 48 * len(E.SPLIT_NODES)
    for got, want in zip(fam._split(m, v), ref._split(m, v)):
        err = np.abs(got - want)
        assert np.all(err <= 4e-15 * np.maximum(1.0, np.abs(want))), float(np.max(err / np.maximum(1.0, np.abs(want))))
        near = (np.abs(m) <= 14.0) & (np.abs(want) > 0)      # rows within 14 of 0: 1e-14 relative to themselves too
        assert np.all(err[near] <= 1e-14 * np.abs(want[near])), float(np.max(err[near] / np.abs(want[near])))
