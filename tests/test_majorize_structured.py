"""Matrix-free (preconditioned CG) majorizer steps and the class-template Kronecker form of the bound
(docs/majorize.md section 1b; issue 12 item 3)."""
import numpy as np
import pytest
import scipy.sparse as sp

import varopt.solvers.majorize  # noqa: F401  (registers 'majorize')
import varopt.solvers.majorize.structured as st
from varopt import get_solver
from varopt.errors import InvalidOptionError
from varopt.formulations.logistic import logistic_program
from varopt.program import Program
from varopt.program.expression import Expression
from varopt.program.program import Constraint
from varopt.program.terms import LseGroup, QuadraticTerms
from varopt.solvers.majorize.bound import compute_bound_reference, omega
from varopt.solvers.majorize.model import MajorizeModel
from varopt.solvers.majorize.structured import StructuredSigma, cg_step, predicted_costs


def _data(rng, t=60, d=4, C=3, scale=1.0):
    X = rng.normal(size=(t, d)) * scale
    W = rng.normal(size=(d, C))
    y = np.argmax(X @ W + rng.gumbel(size=(t, C)), axis=1)
    return X, y


def _class_columns(d, C, intercept):
    """Parameter indices of class k (logistic_program layout: W[c, j] row-major, then b[c])."""
    return [[k * d + j for j in range(d)] + ([C * d + k] if intercept else []) for k in range(C)]


def _jebara_class_matrix(s):
    """``M`` (K x K) of Algorithm 1 on the K class scores ``s`` (decreasing-score order), written out:
    ``M = sum_{i>=2} omega(s_(i) - log sum_{j<i} e^{s_(j)}) (e_(i) - p^(i-1)) (e_(i) - p^(i-1))^T`` with
    ``p^(i-1)`` the softmax over the first ``i - 1`` classes (zero elsewhere)."""
    K = s.size
    order = np.argsort(-s, kind="stable")
    M = np.zeros((K, K))
    for i in range(1, K):
        prev = order[:i]
        lz = np.logaddexp.reduce(s[prev])
        p = np.zeros(K)
        p[prev] = np.exp(s[prev] - lz)
        e = np.zeros(K)
        e[order[i]] = 1.0
        M += omega(s[order[i]] - lz) * np.outer(e - p, e - p)
    return M


@pytest.mark.parametrize("C,intercept", [(3, True), (4, False), (6, True)])
def test_multinomial_bound_is_a_sum_of_kronecker_products(rng, C, intercept):
    """Sigma of Algorithm 1 for multinomial logistic regression is sum_g M_g (x) x_g x_g^T (class blocks), with
    M_g the closed form above -- not the Hessian diag(p) - p p^T; checked against the literal Algorithm 1 on
    every group, and the matrix-free product and diagonal against the dense bound of the solver."""
    X, y = _data(rng, t=25, d=3, C=C)
    prog = logistic_program(X, y, 1.0, fit_intercept=intercept)
    th = rng.normal(size=prog.n)
    d = X.shape[1]
    Xa = np.hstack([X, np.ones((25, 1))]) if intercept else X
    cols = _class_columns(d, C, intercept)
    P = np.zeros((C * Xa.shape[1], prog.n))  # class-major (k, j) -> parameter index
    for k in range(C):
        P[k * Xa.shape[1] + np.arange(Xa.shape[1]), cols[k]] = 1.0
    g = prog.objective.lse[0]
    ref = np.zeros((prog.n, prog.n))
    kron = np.zeros((prog.n, prog.n))
    hess = np.zeros((prog.n, prog.n))
    for i in range(25):
        rows = np.flatnonzero(g.seg == i)
        F = g.A[rows].toarray()
        s = F @ th + g.b[rows]
        order = np.argsort(-s, kind="stable")
        ref += compute_bound_reference(F[order], g.b[rows][order], th)[2]
        M = _jebara_class_matrix(s)
        kron += P.T @ np.kron(M, np.outer(Xa[i], Xa[i])) @ P
        p = np.exp(s - np.logaddexp.reduce(s))
        hess += P.T @ np.kron(np.diag(p) - np.outer(p, p), np.outer(Xa[i], Xa[i])) @ P
    assert np.allclose(kron, ref, atol=1e-12 * max(1.0, np.abs(ref).max()))
    assert not np.allclose(kron, hess, atol=1e-3)  # a bound, not the Hessian
    assert np.linalg.eigvalsh(kron - hess).min() > -1e-10  # ... that dominates it here
    model = MajorizeModel(prog)
    grp = model.groups
    assert grp.template is not None
    T = grp.factors(grp.scores(th))
    assert np.allclose(grp.sigma(T), ref, atol=1e-10)
    op = StructuredSigma(grp, T, model.Hd)
    for _ in range(3):
        v = rng.normal(size=prog.n)
        np.testing.assert_allclose(op.sigma_matvec(v), ref @ v, rtol=0, atol=1e-12)  # measured 1.1e-14
    np.testing.assert_allclose(op.diag_sigma, np.diag(ref), rtol=0, atol=1e-13)  # measured 1.8e-15


def test_kronecker_preconditioner_is_exact_when_every_M_g_is_equal(rng):
    """At theta = 0 every sample has the same M_g, so P = I (x) B + Mbar (x) X^T X equals H + Sigma (up to the
    tiny eps/delta regularization): CG then converges in one iteration, and P^-1 Q v = v."""
    X, y = _data(rng, t=50, d=5, C=4)
    prog = logistic_program(X, y, 3.0)
    model = MajorizeModel(prog)
    grp = model.groups
    T = grp.factors(grp.scores(np.zeros(prog.n)))
    op = StructuredSigma(grp, T, model.Hd)
    v = rng.normal(size=prog.n)
    cm = np.asarray(grp.template[1])
    v[cm[:, -1]] -= v[cm[:, -1]].mean()  # off the flat direction (common intercept shift), where eps dominates
    assert np.allclose(op.precondition(op.matvec(v)), v, atol=1e-6 * np.abs(v).max())
    u = model.gradient(np.zeros(prog.n))
    _, mval, info = cg_step(op, u)
    assert info["cg_iterations"] <= 2 and mval < 0


def _iterates(prog, **opts):
    """Every iterate; Algorithm 2's steps (bound_reuse=0) unless asked: the step solvers are compared."""
    opts.setdefault("bound_reuse", 0)
    xs = []
    res = get_solver("majorize").solve(prog, callback=lambda it, x, f: xs.append(np.array(x)) and False, **opts)
    return res, np.array(xs)


@pytest.mark.parametrize("C", [3, 5])
def test_cg_iterates_equal_dense_iterates(rng, C):
    """Algorithm 2 (no extrapolation) without intercepts, where the bound is nonsingular: every CG iterate
    equals the dense path's to 1e-10 (40 iterations of a slowly converging, nearly separable fit)."""
    X, y = _data(rng, t=80, d=6, C=C, scale=2.0)
    prog = logistic_program(X, y, 0.5, fit_intercept=False)
    rd, xd = _iterates(prog, step_solver="dense", tol=1e-12, max_iter=40, extrapolate=False)
    rc, xc = _iterates(prog, step_solver="cg", tol=1e-12, max_iter=40, extrapolate=False)
    assert rc.info["step_solver"] == {"cg": rc.iterations} and rd.info["step_solver"] == {"dense": rd.iterations}
    assert xd.shape == xc.shape
    assert np.abs(xd - xc).max() <= 1e-12 * max(1.0, np.abs(xd).max())  # measured 1.4e-14
    assert abs(rd.objective - rc.objective) <= 1e-13 * abs(rd.objective)


def test_cg_iterates_equal_dense_iterates_with_extrapolation(rng):
    """With the default extrapolation the two paths agree to 1e-10 over the first iterations and reach the
    same optimum (the secant/subspace trials amplify rounding-level differences by about 2x per
    iteration on slow runs, for the dense path perturbed by 1e-14 as much as for CG)."""
    X, y = _data(rng, t=80, d=6, C=5, scale=2.0)
    prog = logistic_program(X, y, 5.0, fit_intercept=False)
    rd, xd = _iterates(prog, step_solver="dense", tol=1e-12)
    rc, xc = _iterates(prog, step_solver="cg", tol=1e-12)
    k = min(6, len(xd), len(xc))
    assert np.abs(xd[:k] - xc[:k]).max() <= 1e-12 * max(1.0, np.abs(xd).max())  # measured 5.0e-14
    assert rd.status == rc.status == "optimal"
    assert abs(rd.objective - rc.objective) <= 1e-13 * abs(rd.objective)


def test_cg_with_unpenalized_intercepts_equals_dense_up_to_the_flat_shift(rng):
    """With unpenalized intercepts the bound is flat along the common intercept shift (both paths regularize it
    by the same eps; the step's component there is rounding / eps): objective traces agree to 1e-12 and the
    iterates to 1e-9 once that component is removed."""
    C = 4
    X, y = _data(rng, t=90, d=5, C=C)
    prog = logistic_program(X, y, 2.0)
    rd, xd = _iterates(prog, step_solver="dense", tol=1e-12, max_iter=30, extrapolate=False)
    rc, xc = _iterates(prog, step_solver="cg", tol=1e-12, max_iter=30, extrapolate=False)
    fd = np.array([h["objective"] for h in rd.history])
    fc = np.array([h["objective"] for h in rc.history])
    assert fd.shape == fc.shape and np.allclose(fd, fc, rtol=1e-13, atol=0)
    b = np.asarray(_class_columns(5, C, True))[:, -1]
    diff = xd - xc
    diff[:, b] -= diff[:, b].mean(axis=1, keepdims=True)
    assert np.abs(diff).max() <= 1e-12 * max(1.0, np.abs(xd).max())  # measured 9.5e-15
    assert np.all(np.diff(fc) <= 1e-12 * np.abs(fc[:-1]))


def _generic_program(rng, n=30, G=25, ridge=0.3, free=2):
    sizes = rng.integers(2, 6, size=G)
    seg = np.repeat(np.arange(G), sizes)
    A = sp.random(seg.size, n, density=0.4, random_state=rng, data_rvs=rng.standard_normal).tocsr()
    b = rng.normal(size=seg.size)
    d = np.full(n, ridge)
    d[:free] = 0.0
    obj = Expression(n, linear=rng.normal(size=n), quadratic=QuadraticTerms(np.arange(n), np.arange(n), d / 2, n),
                     lse=[LseGroup(A=A, b=b, seg=seg, coef=rng.random(G) + 0.5)])
    return Program([f"x{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), obj, [])


@pytest.mark.parametrize("seed", range(3))
def test_generic_features_cg_equals_dense(seed):
    """Unequal partition functions with generic (non-template) sparse features: the matrix-free product
    ``F^T T^T T F v`` equals the dense Sigma, and the CG run equals the dense run iterate by iterate."""
    rng = np.random.default_rng(seed)
    prog = _generic_program(rng, free=0)
    model = MajorizeModel(prog)
    grp = model.groups
    assert grp.template is None
    th = rng.normal(size=prog.n)
    T = grp.factors(grp.scores(th))
    op = StructuredSigma(grp, T, model.Hd)
    S = grp.sigma(T)
    v = rng.normal(size=prog.n)
    assert np.allclose(op.sigma_matvec(v), S @ v, atol=1e-10)
    assert np.allclose(op.diag_sigma, np.diag(S), atol=1e-12)
    _, xd = _iterates(prog, step_solver="dense", tol=1e-12, max_iter=30)
    _, xc = _iterates(prog, step_solver="cg", tol=1e-12, max_iter=30)
    assert xd.shape == xc.shape and np.abs(xd - xc).max() <= 1e-12 * max(1.0, np.abs(xd).max())


def test_inexact_cg_steps_stay_monotone_and_reach_the_optimum(rng, monkeypatch):
    """Stopped after 2 CG iterations every step is inexact, yet still a descent step of the majorizer: the
    run stays monotone, passes the bound check every iteration and reaches the dense optimum."""
    X, y = _data(rng, t=120, d=8, C=5, scale=3.0)
    prog = logistic_program(X, y, 0.05)
    ref = get_solver("majorize").solve(prog, step_solver="dense", tol=1e-12)
    monkeypatch.setattr(st.cg_step, "__defaults__", (st.CG_RTOL, 2))
    res = get_solver("majorize").solve(prog, step_solver="cg", tol=1e-12, max_iter=3000, check_bound=True)
    f = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    assert res.status == "optimal" and abs(res.objective - ref.objective) <= 1e-10 * abs(ref.objective)


def test_cg_matches_clarabel_multinomial(rng):
    pytest.importorskip("cvxpy")
    from varopt.formulations.logistic import build_cvxpy
    X, y = _data(rng, t=70, d=4, C=4)
    prob, _, _ = build_cvxpy(X, y, C=0.5)
    prob.solve(solver="CLARABEL")
    ref = prob.value
    prob2, _, _ = build_cvxpy(X, y, C=0.5)
    v = prob2.solve(method="majorize", tol=1e-12, step_solver="cg")
    assert abs(v - ref) <= 1e-9 * max(1.0, abs(ref))  # measured 7.2e-12


def test_automatic_choice_by_predicted_cost(rng):
    """Wide multinomial -> CG; small binary -> dense; few samples, many parameters -> row-space Woodbury."""
    X, y = _data(rng, t=400, d=64, C=10)
    prog = logistic_program(X, y, 400.0)
    res = get_solver("majorize").solve(prog, tol=1e-10, bound_reuse=0)  # Algorithm 2: every step by the solver
    assert set(res.info["step_solver"]) == {"cg"}
    costs = predicted_costs(MajorizeModel(prog), get_solver("majorize").options.validate({}))
    assert costs["cg"] < costs["dense"] and costs["cg"] < costs["woodbury"]
    X, y = _data(rng, t=100, d=5, C=2)
    # (bound_reuse=0: with the default the first metric is the Hessian and every trial may be accepted, no bound step)
    res = get_solver("majorize").solve(logistic_program(X, y, 1.0), bound_reuse=0)
    assert set(res.info["step_solver"]) == {"dense"}
    X, y = _data(rng, t=8, d=60, C=3)
    # (bound_reuse=0: with the default, a program without a matrix metric takes the line metric's trials)
    res = get_solver("majorize").solve(logistic_program(X, y, 1.0), bound_reuse=0)
    assert set(res.info["step_solver"]) == {"woodbury"}
    res = get_solver("majorize").solve(logistic_program(X, y, 1.0))
    assert res.info["reuse_metric"] == "line" and set(res.info["step_solver"]) <= {"line"}
    opts = get_solver("majorize").options.validate({"bound": "auto"})
    assert "lowrank" in predicted_costs(MajorizeModel(logistic_program(X, y, 1.0)), opts)


def test_step_solver_option_errors(rng):
    X, y = _data(rng, t=30, d=3, C=3)
    prog = logistic_program(X, y, 1.0)
    n = prog.n
    con = Program(prog.names, np.full(n, -np.inf), np.full(n, np.inf), prog.objective,
                  [Constraint("c0", Expression(n, linear=np.eye(n)[0]), -np.inf, 0.0)])
    with pytest.raises(InvalidOptionError, match="unconstrained"):
        get_solver("majorize").solve(con, step_solver="cg")
    with pytest.raises(InvalidOptionError, match="lowrank"):
        get_solver("majorize").solve(prog, step_solver="woodbury", bound="lowrank")
    with pytest.raises(InvalidOptionError):
        get_solver("majorize").solve(prog, step_solver="qr")
    from varopt.solvers.majorize import minimize
    with pytest.raises(InvalidOptionError, match="dense"):
        minimize(lambda th, want: (0.0, np.zeros(2), np.zeros((2, 2))), np.zeros(2), step_solver="cg")
    res = get_solver("majorize").solve(con, step_solver="auto", bound_reuse=0)  # every step by the solver
    assert res.status == "optimal" and set(res.info["step_solver"]) == {"dense"}


def test_unbounded_detected_on_the_cg_path():
    """x0 enters only through log exp(x0) = x0 without a penalty: f is affine along e0 and the CG step's
    residual on that flat direction reports 'unbounded' at once, as the dense and Woodbury steps do."""
    rng = np.random.default_rng(0)
    n = 40
    other = rng.normal(size=(3, n))
    other[:, 0] = 0.0
    rows = [np.eye(n)[0][None, :], other]
    seg = np.concatenate([np.full(len(r), g) for g, r in enumerate(rows)])
    A = np.vstack(rows)
    d = np.ones(n)
    d[0] = 0.0
    obj = Expression(n, quadratic=QuadraticTerms(np.arange(n), np.arange(n), d / 2, n),
                     lse=[LseGroup(A=sp.csr_matrix(A), b=np.zeros(len(seg)), seg=seg, coef=np.ones(2))])
    prog = Program([f"x{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), obj, [])
    res = get_solver("majorize").solve(prog, step_solver="cg")
    assert res.status == "unbounded" and res.iterations == 1 and res.objective == -np.inf
