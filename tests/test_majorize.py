"""Tests of the ``majorize`` solver (seed 003, Algorithms 1, 2 and 4; section 4)."""
import numpy as np
import pytest
import scipy.sparse as sp

import varopt
import varopt.solvers.majorize  # noqa: F401  (registers 'majorize')
from varopt import get_solver
from varopt.errors import InputDataError, ModelStructureError
from varopt.program import Program
from varopt.program.expression import Expression
from varopt.program.program import Constraint
from varopt.program.terms import AtomGroup, LseGroup, QuadraticTerms
from varopt.solvers.majorize.bound import compute_bound, compute_bound_reference, omega
from varopt.solvers.majorize.latent import jensen_linear
from varopt.formulations.logistic import MajorizeLogisticRegression, build_cvxpy, logistic_program

from shared_data import load_dataset  # benchmarks/ (path set in conftest)


def _data(rng, t=60, d=4, C=2):
    X = rng.normal(size=(t, d))
    W = rng.normal(size=(d, C))
    y = np.argmax(X @ W + rng.gumbel(size=(t, C)), axis=1)
    return X, y


# --- Algorithm 1 ------------------------------------------------------------------------------------------------
def test_omega_limits():
    assert omega(np.array([0.0]))[0] == 0.25  # tanh(1/2 log 1) / (2 log 1) = 1/4
    assert omega(np.array([np.inf]))[0] == 0.0  # z -> 0+
    r = np.array([1e-4, 1e-3 * (1 - 1e-9), 1e-3, 0.3, 5.0, 700.0, 1e300])
    exact = np.tanh(r / 2) / (2 * r)
    assert np.allclose(omega(r), exact, rtol=1e-13, atol=0)
    assert np.allclose(omega(-r), omega(r))


def test_vectorized_bound_equals_algorithm_1(rng):
    for _ in range(20):
        n, d = rng.integers(1, 9), rng.integers(1, 5)
        F = rng.normal(size=(n, d)) * rng.choice([0.1, 1, 10])
        b = rng.normal(size=n) * 3
        th = rng.normal(size=d)
        bp = compute_bound(F, b, np.zeros(n, int), th, want_mu=True)
        order = np.argsort(-(F @ th + b), kind="stable")
        lz, mu, S = compute_bound_reference(F[order], b[order], th)
        assert abs(bp.logz[0] - lz) <= 1e-12 * max(1, abs(lz))
        assert np.allclose(bp.mu[0], mu, atol=1e-12)
        assert np.allclose(bp.sigma(), S, atol=1e-12 * max(1, np.abs(S).max()))


def test_logistic_closed_form_sigma(rng):
    """NOTES.md: binary logistic Sigma = sum_i w(theta^T x_i) x_i x_i^T, w(t) = tanh(t/2)/(2t)."""
    X, y = _data(rng, t=40, d=3)
    prog = logistic_program(X, y, lam=1.0)
    g = prog.objective.lse[0]
    th = rng.normal(size=prog.n) * 2
    bp = compute_bound(g.A, g.b, g.seg, th)
    Xa = np.hstack([X, np.ones((40, 1))])
    tt = Xa @ th
    w = np.tanh(tt / 2) / (2 * tt)
    assert np.allclose(bp.sigma(), (Xa * w[:, None]).T @ Xa, rtol=1e-12, atol=1e-12)


def test_jensen_bound_is_tangent_lower_bound(rng):
    A = rng.normal(size=(5, 3))
    b = rng.normal(size=5)
    seg = np.array([0, 0, 1, 1, 1])
    coef = np.array([-1.0, -2.0])
    th = rng.normal(size=3)
    g, k = jensen_linear(A, b, seg, coef, th)
    grp = LseGroup(A=sp.csr_matrix(A), b=b, seg=seg, coef=coef)
    assert np.isclose(grp.value(th), g @ th + k, atol=1e-12)
    assert np.allclose(grp.gradient(th), g, atol=1e-12)
    for _ in range(50):
        x = th + rng.normal(size=3) * 3
        assert grp.value(x) <= g @ x + k + 1e-12


# --- solver vs CVXPY + Clarabel ---------------------------------------------------------------------------------
def _rel(a, b):
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


@pytest.mark.parametrize("C", [2, 3])
def test_unconstrained_matches_clarabel(rng, C):
    X, y = _data(rng, t=50, d=3, C=C)
    prob, W, b = build_cvxpy(X, y, C=0.5)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref_val, ref_W = prob.value, np.array(W.value)
    val = prob.solve(method="majorize", tol=1e-12)
    assert abs(val - ref_val) <= 1e-6 * abs(ref_val)
    assert _rel(np.array(W.value), ref_W) <= 1e-5


def test_constrained_matches_clarabel(rng):
    """Linear constraints and bounds (theta in Lambda): Algorithm 2 step 3 as a QP through varopt.highs."""
    import cvxpy as cp
    X, y = _data(rng, t=60, d=4, C=2)
    w = cp.Variable(4)
    b = cp.Variable()
    z = X @ w + b
    s = 2.0 * y - 1.0
    obj = cp.sum(cp.logistic(-cp.multiply(s, z))) + 0.5 * cp.sum_squares(w)
    cons = [w >= 0.05, cp.sum(w) <= 0.7, w[0] - w[1] == 0.1]
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref_val, ref_w = prob.value, w.value.copy()
    val = prob.solve(method="majorize", tol=1e-12)
    assert abs(val - ref_val) <= 1e-6 * abs(ref_val)
    assert _rel(w.value, ref_w) <= 1e-5
    assert abs(w.value[0] - w.value[1] - 0.1) <= 1e-7 and np.all(w.value >= 0.05 - 1e-7)


@pytest.mark.parametrize("form", ["abs", "norm_inf", "max", "pyomo_abs"])
def test_box_constraints_written_with_abs_or_a_maximum(rng, form):
    """``|e| <= r``, ``norm_inf(e) <= r`` and ``max(e) <= r`` bound the same polyhedron as their linear rows:
    majorize solves them (they are not smooth terms of the model, only a way to write rows) and agrees with
    Clarabel on the problem as written, at a point that satisfies the constraints as CVXPY / Pyomo evaluate them."""
    import cvxpy as cp
    X, y = _data(rng, t=60, d=5, C=2)
    s = 2.0 * y - 1.0
    w = cp.Variable(5)
    e = w[:4] - 0.1
    cons = {"abs": [cp.abs(e) <= 0.2], "norm_inf": [cp.norm(e, "inf") <= 0.2], "max": [cp.max(e) <= 0.2, e >= -0.2],
            "pyomo_abs": [cp.abs(e) <= 0.2]}[form]
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(s, X @ w))) + 0.05 * cp.sum_squares(w)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ref_val, ref_w = prob.value, w.value.copy()
    assert np.abs(ref_w[:4] - 0.1).max() >= 0.2 - 1e-6  # the box is active, so a dropped row would show
    if form == "pyomo_abs":
        pyo = pytest.importorskip("pyomo.environ")
        m = pyo.ConcreteModel()
        m.w = pyo.Var(range(5), initialize=0.0)
        z = [sum(float(X[i, j]) * m.w[j] for j in range(5)) for i in range(X.shape[0])]
        m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-float(s[i]) * z[i])) for i in range(X.shape[0]))
                              + 0.05 * sum(m.w[j] ** 2 for j in range(5)))
        m.c = pyo.Constraint(range(4), rule=lambda m, j: abs(m.w[j] - 0.1) <= 0.2)
        assert pyo.check_optimal_termination(pyo.SolverFactory("majorize").solve(m, tol=1e-12))
        val, got = pyo.value(m.obj), np.array([pyo.value(m.w[j]) for j in range(5)])
        assert all(pyo.value(m.c[j].body) <= 0.2 + 1e-12 for j in range(4))
    else:
        val, got = prob.solve(method="majorize", tol=1e-12), w.value.copy()
        assert max(float(np.max(c.violation())) for c in prob.constraints) <= 1e-12
    assert abs(val - ref_val) <= 1e-6 * abs(ref_val)
    assert _rel(got, ref_w) <= 1e-5


def test_maximum_bounded_below_is_not_rewritten():
    """``r <= norm_inf(e)`` is not convex: it stays a nonsmooth term and is refused, not turned into rows."""
    import cvxpy as cp
    w = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w - 1)), [cp.norm(w, "inf") >= 0.5])
    with pytest.raises(ModelStructureError):
        prob.solve(method="majorize")


def test_pyomo_solverfactory(rng):
    pyo = pytest.importorskip("pyomo.environ")
    from varopt.formulations.logistic import build_pyomo
    X, y = _data(rng, t=30, d=2, C=3)
    m = build_pyomo(X, y, C=1.0)
    res = pyo.SolverFactory("majorize").solve(m, tol=1e-12)
    assert pyo.check_optimal_termination(res)
    prog = logistic_program(X, y, lam=1.0)
    ref = get_solver("majorize").solve(prog, tol=1e-12)
    assert abs(pyo.value(m.obj) - ref.objective) <= 1e-8 * abs(ref.objective)


def test_estimator_matches_sklearn():
    from sklearn.linear_model import LogisticRegression
    X, y = load_dataset("wine")
    est = MajorizeLogisticRegression(C=0.05, tol=1e-12).fit(X, y)
    sk = LogisticRegression(C=0.05, tol=1e-12, max_iter=10000).fit(X, y)
    assert np.max(np.abs(est.coef_ - sk.coef_)) <= 1e-4
    assert np.max(np.abs(est.predict_proba(X) - sk.predict_proba(X))) <= 1e-5
    assert np.mean(est.predict(X) == sk.predict(X)) == 1.0


def test_lowrank_reaches_same_optimum(rng):
    X, y = _data(rng, t=40, d=12, C=3)
    prog = logistic_program(X, y, lam=2.0)
    full = get_solver("majorize").solve(prog, tol=1e-12)
    low = get_solver("majorize").solve(prog, tol=1e-12, bound="lowrank", rank=3, max_iter=5000)
    assert abs(low.objective - full.objective) <= 1e-7 * abs(full.objective)
    # shifting every class intercept is a flat direction of the softmax: compare W and centred b
    def canon(x):
        return np.concatenate([x[:36], x[36:] - x[36:].mean()])
    assert _rel(canon(low.x), canon(full.x)) <= 1e-4


# --- monotonicity ---------------------------------------------------------------------------------------------
def _nonincreasing(res):
    f = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(f) <= 1e-12 * np.maximum(1.0, np.abs(f[:-1]))), np.diff(f).max()


def test_monotone_convex_constrained_latent(rng):
    X, y = _data(rng, t=50, d=3, C=3)
    prog = logistic_program(X, y, lam=0.1)
    _nonincreasing(get_solver("majorize").solve(prog, max_iter=50))
    _nonincreasing(get_solver("majorize").solve(prog, max_iter=50, bound="lowrank", rank=2))
    cons = Constraint("sum", Expression(prog.n, linear=np.ones(prog.n)), -np.inf, 0.5)
    cprog = Program(prog.names, np.full(prog.n, -1.0), np.full(prog.n, 1.0), prog.objective, [cons])
    res = get_solver("majorize").solve(cprog, max_iter=50)
    _nonincreasing(res)
    assert cprog.max_violation(res.x) <= 1e-7
    from varopt.formulations.latent_likelihood import latent_program
    lp = latent_program(X, y, m=2, lam=0.0)
    x0 = np.random.default_rng(3).normal(size=lp.n) * 0.1
    res = get_solver("majorize").solve(lp, max_iter=100, x0=x0)
    _nonincreasing(res)
    assert res.history[-1]["objective"] < res.history[0]["objective"]


# --- bad inputs ---------------------------------------------------------------------------------------------------
def _lse_prog(n=2, atoms=(), constraints=(), A=None):
    A = sp.csr_matrix(np.array([[0.0, 0.0], [1.0, 2.0]])) if A is None else A
    lse = LseGroup(A=A, b=np.zeros(A.shape[0]), seg=np.zeros(A.shape[0], int), coef=np.ones(1))
    q = QuadraticTerms(np.arange(n), np.arange(n), np.ones(n), n)
    obj = Expression(n, quadratic=q, lse=[lse], atoms=list(atoms))
    return Program([f"x{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), obj, list(constraints))


def test_structure_errors():
    s = get_solver("majorize")
    exp_atom = AtomGroup("exp", np.ones(1), sp.csr_matrix([[1.0, 0.0]]), np.zeros(1))
    with pytest.raises(ModelStructureError, match="'exp'"):
        s.solve(_lse_prog(atoms=[exp_atom]))
    qol = AtomGroup("quad_over_lin", np.ones(1), sp.csr_matrix([[1.0, 0.0]]), np.zeros(1),
                    A2=sp.csr_matrix([[0.0, 1.0]]), b2=np.ones(1))
    with pytest.raises(ModelStructureError, match="quad_over_lin"):
        s.solve(_lse_prog(atoms=[qol]))
    prod = AtomGroup("square", np.ones(1), sp.csr_matrix([[1.0, 0.0]]), np.zeros(1), mult=np.array([1]))
    with pytest.raises(ModelStructureError, match="w\\*g"):
        s.solve(_lse_prog(atoms=[prod]))
    sq = AtomGroup("square", np.ones(1), sp.csr_matrix([[1.0, 0.0]]), np.zeros(1))
    nl = Constraint("ball", Expression(2, atoms=[sq]), -np.inf, 1.0)
    with pytest.raises(ModelStructureError, match="ball"):
        s.solve(_lse_prog(constraints=[nl]))


def test_cvxpy_non_loglinear_term_rejected():
    import cvxpy as cp
    x = cp.Variable(2)
    prob = cp.Problem(cp.Minimize(cp.log_sum_exp(x) + cp.sum(cp.exp(x))))
    with pytest.raises(ModelStructureError):
        prob.solve(method="majorize")


def test_input_errors():
    s = get_solver("majorize")
    with pytest.raises(InputDataError, match="NaN"):
        s.solve(_lse_prog(A=sp.csr_matrix(np.array([[0.0, 0.0], [np.nan, 1.0]]))))
    with pytest.raises(InputDataError):
        logistic_program(np.array([[1.0, np.nan]]), np.array([0]), 1.0)
    with pytest.raises(InputDataError, match="empty Omega"):
        compute_bound(sp.csr_matrix((0, 2)), np.zeros(0), np.zeros(0, int), np.zeros(2))
    from varopt.solvers.majorize.groups import PaddedGroups
    with pytest.raises(InputDataError, match="empty Omega"):
        PaddedGroups(sp.csr_matrix((0, 2)), np.zeros(0), np.zeros(0, int), np.zeros(0))
    pg = PaddedGroups(np.eye(2), np.array([-np.inf, -np.inf]), np.array([0, 0]), np.ones(1))
    with pytest.raises(InputDataError, match="identically zero"):
        pg.value_weights(pg.scores(np.zeros(2)))
    with pytest.raises(InputDataError, match="empty"):
        from varopt.estimators.crf import ChainCRF
        ChainCRF(labels=[]).fit([["a"]], [["B"]])


def test_infeasible_constraints():
    n = 2
    c1 = Constraint("lo", Expression(n, linear=np.array([1.0, 1.0])), 2.0, np.inf)
    c2 = Constraint("hi", Expression(n, linear=np.array([1.0, 1.0])), -np.inf, 1.0)
    res = get_solver("majorize").solve(_lse_prog(constraints=[c1, c2]))
    assert res.status == "infeasible"


@pytest.mark.parametrize("sizes", [[3, 3, 4, 1, 2], [2, 2, 2, 1], [4, 4, 4]])
def test_padded_row_space_bound_equals_algorithm_1(rng, sizes):
    """groups.py: T_g from the scores alone gives the sum of c_g Sigma_g of Algorithm 1 as printed
    (literal transcription, configurations in decreasing score order), its log z and its gradient."""
    from varopt.solvers.majorize.groups import PaddedGroups
    seg = np.repeat(np.arange(len(sizes)), sizes)
    K, d = seg.size, 3
    A = rng.normal(size=(K, d)) * 5
    b = rng.normal(size=K)
    b[1] = -np.inf  # h(y) = 0
    c = rng.random(len(sizes)) + 0.1
    th = rng.normal(size=d)
    pg = PaddedGroups(A, b, seg, c)
    S = pg.scores(th)
    v, W = pg.value_weights(S)
    bp = compute_bound(A, b, seg, th, c, want_mu=True)
    assert np.isclose(v, float(c @ bp.logz), rtol=1e-12)
    assert np.allclose(pg.gradient(W), c @ bp.mu, atol=1e-10)
    ref = 0.0
    for g, cg in enumerate(c):  # Algorithm 1 as printed, configurations in decreasing score order
        rows = np.flatnonzero(seg == g)
        rows = rows[np.argsort(-(A[rows] @ th + b[rows]), kind="stable")]
        ref = ref + cg * compute_bound_reference(A[rows], b[rows], th)[2]
    assert np.allclose(ref, bp.sigma(), atol=1e-9)
    T = pg.factors(S)
    assert np.allclose(pg.sigma(T), ref, atol=1e-9)
    R = pg.rows(T)
    assert np.allclose(R.T @ R, ref, atol=1e-9)
    Rs = pg.rows_sparse(T).toarray()
    assert np.allclose(Rs.T @ Rs, ref, atol=1e-9)


@pytest.mark.parametrize("C", [2, 3, 5])
def test_class_template_sigma_equals_generic(rng, C):
    """Multinomial features (x_i copied into class blocks) use the block form X^T diag(M_ab) X."""
    from varopt.solvers.majorize.groups import PaddedGroups
    X, y = _data(rng, t=40, d=3, C=C)
    prog = logistic_program(X, y, 1.0)
    g = prog.objective.lse[0]
    pg = PaddedGroups(g.A, g.b, g.seg, g.coef)
    assert pg.template is not None
    th = rng.normal(size=prog.n)
    T = pg.factors(pg.scores(th))
    R = pg.rows(T)
    assert np.allclose(pg._sigma_template(T), R.T @ R, atol=1e-10)


def test_woodbury_capacitance_from_cached_gram(rng):
    """T (F Da^-1 F^T) T^T equals Ra Da^-1 Ra^T, and the Woodbury step equals a dense solve."""
    from varopt.solvers.majorize.groups import PaddedGroups
    from varopt.solvers.majorize.solver import _woodbury_solve
    X, y = _data(rng, t=8, d=40, C=3)
    prog = logistic_program(X, y, 2.0)
    g = prog.objective.lse[0]
    pg = PaddedGroups(g.A, g.b, g.seg, g.coef)
    Dg = np.full(prog.n, 2.0)
    Dg[-3:] = 0.0  # unpenalized intercepts
    a = np.flatnonzero(Dg > 0)
    T = pg.factors(pg.scores(rng.normal(size=prog.n)))
    R = pg.rows(T)
    C = pg.congruence(T, pg.gram(a, 1.0 / Dg[a]))
    assert np.allclose(C, (R[:, a] / Dg[a]) @ R[:, a].T, atol=1e-10)
    u = rng.normal(size=prog.n)
    u[-3:] -= u[-3:].mean()  # in the range of the singular bound (common intercept shift is flat)
    x = _woodbury_solve(Dg, R, u)
    Sig = np.diag(Dg) + R.T @ R
    assert np.allclose(Sig @ x, u, atol=1e-8)
    # the matrix-free row-space form the solver uses, with and without unpenalized coordinates
    for D in (Dg, np.full(prog.n, 0.7)):
        x, q, Fx, Fx_err, res = pg.woodbury_solve(T, D, u)
        Sig = np.diag(D) + R.T @ R
        assert np.allclose(Sig @ x, u, atol=1e-8)
        assert np.isclose(q, x @ Sig @ x, rtol=1e-10)
        assert np.all(np.abs(Fx.ravel() - pg.Apad @ x) <= 10 * Fx_err.ravel() + 1e-12)  # the free score image


@pytest.mark.parametrize("name", ["breast_cancer", "wine"])
def test_extrapolation_keeps_monotone_and_optimum(name):
    """The secant extrapolation (beyond the paper) is monotone and reaches Algorithm 2's optimum."""
    X, y = load_dataset(name)
    prog = logistic_program(X, y, float(X.shape[0]))
    plain = get_solver("majorize").solve(prog, tol=1e-12, extrapolate=False)
    fast = get_solver("majorize").solve(prog, tol=1e-12)
    assert plain.status == fast.status == "optimal"
    assert abs(plain.objective - fast.objective) <= 1e-9 * abs(plain.objective)
    hist = np.array([h["objective"] for h in fast.history])
    assert np.all(np.diff(hist) <= 1e-12 * np.abs(hist[:-1]))
    assert fast.iterations < plain.iterations


def test_pyomo_latent_likelihood_end_to_end():
    """Maximised latent likelihood through SolverFactory('majorize'): numerators compile to lse with c < 0."""
    pyo = pytest.importorskip("pyomo.environ")
    from varopt.formulations.latent_likelihood import build_pyomo
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    m = build_pyomo(X, y, 2, lam=0.1)
    vals = rng.normal(size=len(m.theta) + len(m.nu)) * 0.1
    for v, val in zip(list(m.theta.values()) + list(m.nu.values()), vals):
        v.set_value(float(val))
    start = pyo.value(m.obj)
    res = pyo.SolverFactory("majorize").solve(m, tol=1e-10, max_iter=500)
    assert pyo.check_optimal_termination(res)
    hist = [h["objective"] for h in res.varopt_result.history]
    assert np.all(np.diff(hist) >= -1e-12 * np.abs(hist[:-1]))  # user's sense: maximised, nondecreasing
    assert pyo.value(m.obj) > start


def test_woodbury_with_unpenalized_coordinates(rng):
    from varopt.solvers.majorize.solver import _woodbury_solve
    n, K = 30, 6
    R = rng.normal(size=(K, n))
    Dg = rng.random(n) + 0.1
    Dg[[3, 17]] = 0.0  # unpenalized (e.g. intercepts)
    u = rng.normal(size=n)
    Sig = np.diag(Dg) + R.T @ R
    assert np.allclose(_woodbury_solve(Dg, R, u), np.linalg.solve(Sig, u), rtol=1e-8, atol=1e-10)


def test_subspace_trial_is_exact_on_a_quadratic(rng):
    """On f = 1/2 x'Ax - b'x the secant curvature is exact, so the two-dimensional trial lands on the
    minimiser of f over the plane x + a D + b s (and is kept: it is below f(x + D))."""
    from varopt.solvers.majorize.extrapolate import secant_extrapolate
    n = 6
    M = rng.normal(size=(n, n))
    A = M @ M.T + n * np.eye(n)
    bv = rng.normal(size=n)

    def ev(z):
        return 0.5 * z @ A @ z - bv @ z, A @ z - bv, None
    x = rng.normal(size=n)
    u = ev(x)[1]
    D = -0.3 * u  # a short descent step (as a loose majorizer gives)
    s = rng.normal(size=n)
    f1, g1, _ = ev(x + D)
    z, fz, gz, _, a = secant_extrapolate(ev, x, u, D, x + D, f1, g1, prev=[(s, A @ s)])
    V = np.column_stack([D, s])
    coef = np.linalg.solve(V.T @ A @ V, -V.T @ u)
    assert np.allclose(z, x + V @ coef, atol=1e-9)
    assert fz < f1 and np.isclose(a, coef[0])


@pytest.mark.parametrize("seed", range(6))
def test_random_unequal_groups_match_clarabel(seed):
    """Partition functions of unequal sizes (padded path), h(y) = 0 rows, a non-diagonal PSD quadratic
    and a linear term: majorize (with and without extrapolation) matches CVXPY/Clarabel to 1e-6."""
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(seed)
    n = 5
    sizes = rng.integers(1, 6, size=12)
    seg = np.repeat(np.arange(sizes.size), sizes)
    K = seg.size
    A = rng.normal(size=(K, n)) * 2
    b = rng.normal(size=K)
    first = np.r_[0, np.cumsum(sizes)[:-1]]
    zero = rng.random(K) < 0.2
    zero[first] = False  # every partition function keeps one configuration with h > 0
    b[zero] = -np.inf
    coef = rng.random(sizes.size) + 0.5
    M = rng.normal(size=(n, n))
    H = M @ M.T / n + 0.1 * np.eye(n)
    c = rng.normal(size=n)
    iu, ju = np.triu_indices(n)
    v = np.where(iu == ju, 0.5, 1.0) * H[iu, ju]  # sum v x_i x_j = 1/2 x'Hx
    obj = Expression(n, linear=c, quadratic=QuadraticTerms(iu, ju, v, n),
                     lse=[LseGroup(A=sp.csr_matrix(A), b=b, seg=seg, coef=coef)])
    prog = Program([f"x{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), obj, [])
    x = cp.Variable(n)
    terms = [coef[g] * cp.log_sum_exp(A[(seg == g) & ~zero] @ x + b[(seg == g) & ~zero])
             for g in range(sizes.size)]
    ref = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, H) + c @ x + sum(terms)))
    ref.solve(solver="CLARABEL")
    for ex in (True, False):
        res = get_solver("majorize").solve(prog, tol=1e-12, max_iter=2000, extrapolate=ex)
        assert res.status == "optimal"
        assert abs(res.objective - ref.value) <= 1e-6 * max(1.0, abs(ref.value))
        hist = np.array([h["objective"] for h in res.history])
        assert np.all(np.diff(hist) <= 1e-12 * np.abs(hist[:-1]))


@pytest.mark.parametrize("seed", range(3))
def test_woodbury_path_with_padding_matches_clarabel(seed):
    """Many parameters, few configurations (the row-space Woodbury step with free score images):
    unequal partition functions, h(y) = 0 rows, a diagonal ridge with two unpenalized coordinates."""
    cp = pytest.importorskip("cvxpy")
    from varopt.solvers.majorize.solver import MajorizeModel
    rng = np.random.default_rng(100 + seed)
    n = 150
    sizes = rng.integers(2, 6, size=10)
    seg = np.repeat(np.arange(sizes.size), sizes)
    K = seg.size
    A = rng.normal(size=(K, n))
    b = rng.normal(size=K)
    first = np.r_[0, np.cumsum(sizes)[:-1]]
    zero = rng.random(K) < 0.2
    zero[first] = False
    b[zero] = -np.inf
    coef = rng.random(sizes.size) + 0.5
    d = np.full(n, 0.7)
    d[[3, 77]] = 0.0  # unpenalized
    c = rng.normal(size=n) * 0.3
    c[[3, 77]] = 0.0
    obj = Expression(n, linear=c, quadratic=QuadraticTerms(np.arange(n), np.arange(n), 0.5 * d, n),
                     lse=[LseGroup(A=sp.csr_matrix(A), b=b, seg=seg, coef=coef)])
    prog = Program([f"x{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), obj, [])
    model = MajorizeModel(prog)
    assert model.groups is not None and model.H_diagonal  # the Woodbury path applies
    x = cp.Variable(n)
    terms = [coef[g] * cp.log_sum_exp(A[(seg == g) & ~zero] @ x + b[(seg == g) & ~zero])
             for g in range(sizes.size)]
    ref = cp.Problem(cp.Minimize(0.5 * cp.sum(cp.multiply(d, cp.square(x))) + c @ x + sum(terms)))
    ref.solve(solver="CLARABEL")
    for ex in (True, False):
        res = get_solver("majorize").solve(prog, tol=1e-12, max_iter=3000, extrapolate=ex)
        assert res.status == "optimal"
        assert abs(res.objective - ref.value) <= 1e-6 * max(1.0, abs(ref.value))
        assert np.isclose(res.objective, prog.objective.value(res.x), rtol=1e-12)
        hist = np.array([h["objective"] for h in res.history])
        assert np.all(np.diff(hist) <= 1e-12 * np.abs(hist[:-1]))


def test_junction_tree_sigma_is_no_enumeration_order_of_algorithm_1():
    """Why the acceptance's 'junction-tree bound equals Algorithm 1' is tested for z and mu only
    (docs/majorize.md section 4): on a 3-node, 2-label chain, Algorithm 1 run over Omega in each of
    the 8! = 40320 orders never reproduces the junction-tree Sigma, while z and mu agree in every order."""
    import itertools
    from varopt.solvers.majorize.bound import omega
    from varopt.solvers.majorize.junction_tree import chain_bound, chain_enumerate
    rng = np.random.default_rng(3)
    T, K = 3, 2
    S, Tr = rng.normal(size=(1, T, K)), rng.normal(size=(K, K))
    lz, mu, M = chain_bound(S, Tr)
    F, th = chain_enumerate(S[0], Tr)
    perms = np.array(list(itertools.permutations(range(len(F)))))  # (40320, 8)
    Fp, la = F[perms], (F @ th)[perms]  # Algorithm 1 for every order at once, in log space
    logz = np.full(len(perms), -np.inf)
    m = np.zeros((len(perms), F.shape[1]))
    Sig = np.zeros((len(perms), F.shape[1], F.shape[1]))
    for i in range(len(F)):
        l = Fp[:, i] - m
        Sig += omega(la[:, i] - logz)[:, None, None] * l[:, :, None] * l[:, None, :]
        new = np.logaddexp(logz, la[:, i])
        m += np.exp(la[:, i] - new)[:, None] * l
        logz = new
    assert np.allclose(logz, lz[0], rtol=1e-12) and np.allclose(m, mu[0], atol=1e-12)
    gap = np.abs(Sig - M[0]).max(axis=(1, 2))
    assert gap.min() > 1e-3 * np.abs(M[0]).max()


def _lse_program(n, groups, d, c):
    """Program ``c'x + 1/2 sum d_i x_i^2 + sum_g log sum_k exp(A_k x)`` from a list of (rows of A)."""
    A = np.vstack([np.atleast_2d(g) for g in groups])
    seg = np.repeat(np.arange(len(groups)), [np.atleast_2d(g).shape[0] for g in groups])
    obj = Expression(n, linear=np.asarray(c, float), quadratic=QuadraticTerms(np.arange(n), np.arange(n),
                                                                               0.5 * np.asarray(d, float), n),
                     lse=[LseGroup(A=sp.csr_matrix(A), b=np.zeros(len(seg)), seg=seg, coef=np.ones(len(groups)))])
    return Program([f"x{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), obj, [])


@pytest.mark.parametrize("n", [2, 60])
def test_unbounded_along_a_flat_direction(n):
    """x0 enters only through a one-configuration partition function (log exp(x0) = x0) and has no
    penalty: the bound is flat along e0 and f is affine there, so the solver reports 'unbounded' at
    once (dense Cholesky step for n = 2, row-space Woodbury step for n = 60) instead of diverging."""
    rng = np.random.default_rng(0)
    e0 = np.eye(n)[0]
    other = rng.normal(size=(3, n))
    other[:, 0] = 0.0
    d = np.ones(n)
    d[0] = 0.0
    prog = _lse_program(n, [e0, other], d, np.zeros(n))
    res = get_solver("majorize").solve(prog)
    assert res.status == "unbounded" and res.iterations == 1 and res.objective == -np.inf
    assert "unbounded" in res.message


def test_diverging_iterates_reported():
    """f = log(1 + exp(2 x)) - 3 x -> -inf as x -> inf, but the bound's curvature never vanishes (no
    flat direction): the iterates diverge, and the recession LP (majorize/recession.py) then proves the problem
    unbounded (slope at infinity 2 - 3 = -1 along x = +1), not 'optimal'. Without that check the diverging-iterates
    rule stops it with an error naming it."""
    prog = _lse_program(1, [np.array([[2.0], [0.0]])], [0.0], [-3.0])
    res = get_solver("majorize").solve(prog, max_iter=100000)
    assert res.status == "unbounded" and res.objective == -np.inf and "slope at infinity" in res.message
    assert res.info["unbounded_ray"][0] > 0 and res.info["attainment"]["slope"] < 0
    res = get_solver("majorize").solve(prog, max_iter=100000, check_attained=False)
    assert res.status == "error" and "diverging iterates" in res.message
    assert res.objective < -1e19


def test_unbounded_over_constraints():
    """A feasible direction of no curvature with negative slope (x0 >= 0 free above, f = -x0 + ...): the
    step QP is unbounded and so is the problem."""
    prog = _lse_program(2, [np.array([[-1.0, 0.0]]), np.array([[0.0, 1.0], [0.0, -1.0]])], [0.0, 1.0], [0.0, 0.0])
    prog.lb[0] = 0.0
    res = get_solver("majorize").solve(prog)
    assert res.status == "unbounded" and res.objective == -np.inf and "unbounded" in res.message


@pytest.mark.parametrize("lam", [1e-6, 1e-3, 1.0])
def test_woodbury_path_small_ridge_keeps_the_bound_check(lam):
    """d >> t multinomial logistic regression (the row-space Woodbury step) with a small ridge: the Gram
    matrix ~ 1/ridge makes the free score images cancel; their rounding bound must send the solver to
    exact products instead of a spurious 'objective exceeds its majorizer' (srbct, lambda = 1e-3, did)."""
    rng = np.random.default_rng(7)
    t, p, C = 60, 1500, 4
    y = np.arange(t) % C
    X = rng.normal(size=(t, p)) + 0.5 * np.eye(C)[y] @ rng.normal(size=(C, p))
    prog = logistic_program(X, y, lam)
    res = get_solver("majorize").solve(prog, tol=1e-12, max_iter=60)
    hist = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(hist) <= 1e-12 * np.maximum(1.0, np.abs(hist[:-1])))
    assert np.isclose(res.objective, prog.objective.value(res.x), rtol=1e-12, atol=1e-12)


def test_woodbury_with_every_coordinate_unpenalized(rng):
    """No ridge at all (Sigma = R'R, rank K << d): the Schur complement over all d coordinates comes from
    a thin SVD in the row space; the step is the minimum-norm solution (R'R)^+ u."""
    from varopt.solvers.majorize.groups import PaddedGroups
    X, y = _data(rng, t=8, d=60, C=3)
    prog = logistic_program(X, y, 1.0)
    g = prog.objective.lse[0]
    pg = PaddedGroups(g.A, g.b, g.seg, g.coef)
    T = pg.factors(pg.scores(rng.normal(size=prog.n)))
    R = pg.rows(T)
    u = R.T @ rng.normal(size=R.shape[0])  # in the range of R'R
    x, q, Fx, Fx_err, res = pg.woodbury_solve(T, np.zeros(prog.n), u)
    ref = np.linalg.pinv(R.T @ R) @ u
    assert np.allclose(x, ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())
    assert res <= 1e-8 * np.linalg.norm(u)


def test_tight_tol_on_unscaled_data_does_not_trip_the_bound_check():
    """Unscaled digits (pixels 0..16, C = 1): near the optimum f = 17 is the difference of parts of size 4e4
    (sum of log-partitions against the data term), so f's rounding is ~1e-12 relative to |f|; the monotonicity
    check scaled by |f| raised SolverBugError ("exceeds its majorizer", relative 1.5e-12) at tol=1e-14. The check
    is relative to the parts' size; the run converges below the tol=1e-8 optimum."""
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    from varopt.formulations.logistic import logistic_program
    X, y = load_digits(return_X_y=True)
    prog = logistic_program(X, y, 1.0, True, np.unique(y))
    tight = get_solver("majorize").solve(prog, tol=1e-14, max_iter=5000)
    loose = get_solver("majorize").solve(prog, tol=1e-8)
    assert tight.status == "optimal" and tight.objective <= loose.objective


def test_stopping_test_meets_tol_on_standardized_digits():
    """The stopping test's remaining-decrease estimate uses the slowest of the last ratios of decreases: with one
    ratio, irregular (quasi-Newton, extrapolated) steps stopped 600 standardized digits at 3.2e-4 relative above
    the optimum for tol=1e-4 and 3.4e-8 for tol=1e-8 (all 1797: 3.2e-4 and 6.3e-8). Reference: scipy L-BFGS-B on an independent numpy objective and
    gradient."""
    pytest.importorskip("sklearn")
    from scipy.optimize import minimize
    from scipy.special import logsumexp, softmax
    from sklearn.datasets import load_digits

    from varopt.formulations.logistic import logistic_program, unpack
    X, y = load_digits(return_X_y=True)
    X, y = X[:600], y[:600]
    X = (X - X.mean(0)) / np.maximum(X.std(0), 1e-12)
    n, d, K = X.shape[0], X.shape[1], 10
    Y = np.eye(K)[y]

    def fg(th):
        W, b = th[:K * d].reshape(K, d), th[K * d:]
        Z = X @ W.T + b
        P = softmax(Z, axis=1) - Y
        f = float(np.sum(logsumexp(Z, axis=1)) - np.sum(Z * Y) + 0.5 * np.sum(W * W))
        return f, np.concatenate([(P.T @ X + W).ravel(), P.sum(0)])
    prog = logistic_program(X, y, 1.0, True, np.arange(K))
    W, b = unpack(get_solver("majorize").solve(prog, tol=1e-14, max_iter=5000).x, d, K, True)
    # started at a tight majorize solution, L-BFGS-B checks it (and can only lower it) in a few iterations
    ref = minimize(fg, np.concatenate([W.ravel(), b]), jac=True, method="L-BFGS-B",
                   options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-9}).fun
    for tol in (1e-4, 1e-8):
        r = get_solver("majorize").solve(prog, tol=tol, max_iter=5000)
        W, b = unpack(r.x, d, K, True)
        f = fg(np.concatenate([W.ravel(), b]))[0]
        assert r.status == "optimal" and (f - ref) / abs(ref) <= 2 * tol
