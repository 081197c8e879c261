"""The Pyomo and CVXPY front-ends compile the same model to equal programs.

Each model is written twice, once in Pyomo and once in CVXPY, and both compiled. The
programs must have the same variable names (up to order: we permute by name), the
same bounds, and an objective and constraint set that agree in value, gradient and
Hessian at random points. Constraints are matched up to order and sign: each is
normalised to a residual ``r(x) <= 0`` (or ``== 0`` with a sign fixed by its gradient)
and the residuals are paired by sorting their values at a random point.
"""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")
pyo = pytest.importorskip("pyomo.environ")
pyomo_compile = pytest.importorskip("varopt.frontends.pyomo_compile",
                                    reason="the Pyomo front-end is not written yet")

from varopt.frontends.cvxpy_compile import compile_cvxpy  # noqa: E402


# --- the models, written twice ---------------------------------------------------------------
def bgmm(rng):
    """Negative ELBO of a 1-D Gaussian mixture (unit variances) with simplex constraints."""
    N, K, lam = 6, 3, 0.3
    y = rng.normal(size=N) * 2

    phi = cp.Variable((N, K), name="phi", bounds=[0.0, 1.0])
    mu = cp.Variable(K, name="mu")
    pi = cp.Variable(K, name="pi", nonneg=True)
    obj = (0.5 * cp.sum(cp.multiply(phi, cp.square(y[:, None] - mu[None, :])))
           + cp.sum(cp.multiply(phi, cp.log(phi)))
           - cp.sum(cp.multiply(phi, cp.log(pi)[None, :]))
           + lam / 2 * cp.sum_squares(mu))
    prob = cp.Problem(cp.Minimize(obj), [cp.sum(phi, axis=1) == 1, cp.sum(pi) == 1])

    m = pyo.ConcreteModel()
    m.N, m.K = pyo.RangeSet(0, N - 1), pyo.RangeSet(0, K - 1)
    m.phi = pyo.Var(m.N, m.K, bounds=(0, 1))
    m.mu = pyo.Var(m.K)
    m.pi = pyo.Var(m.K, within=pyo.NonNegativeReals)
    m.obj = pyo.Objective(expr=sum(0.5 * m.phi[n, k] * (float(y[n]) - m.mu[k]) ** 2
                                   + m.phi[n, k] * pyo.log(m.phi[n, k]) - m.phi[n, k] * pyo.log(m.pi[k])
                                   for n in m.N for k in m.K)
                          + lam / 2 * sum(m.mu[k] ** 2 for k in m.K))
    m.simplex = pyo.Constraint(m.N, rule=lambda m, n: sum(m.phi[n, k] for k in m.K) == 1)
    m.pisum = pyo.Constraint(expr=sum(m.pi[k] for k in m.K) == 1)
    return prob, m, {"phi", "pi"}


def l1_split(rng):
    """Lasso with x = u - v, u, v >= 0: 1/2 ||A(u - v) - b||^2 + lam sum(u + v)."""
    M, D, lam = 7, 4, 0.5
    A, b = rng.normal(size=(M, D)), rng.normal(size=M)
    u = cp.Variable(D, name="u", nonneg=True)
    v = cp.Variable(D, name="v", nonneg=True)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(A @ (u - v) - b) + lam * cp.sum(u + v)))

    m = pyo.ConcreteModel()
    m.D = pyo.RangeSet(0, D - 1)
    m.u = pyo.Var(m.D, within=pyo.NonNegativeReals)
    m.v = pyo.Var(m.D, within=pyo.NonNegativeReals)
    m.obj = pyo.Objective(expr=sum(0.5 * (sum(float(A[i, j]) * (m.u[j] - m.v[j]) for j in m.D) - float(b[i])) ** 2
                                   for i in range(M)) + lam * sum(m.u[j] + m.v[j] for j in m.D))
    return prob, m, set()


def logistic(rng):
    """L2-regularised logistic regression: sum log(1 + exp(-y_i a_i^T w)) + lam/2 ||w||^2."""
    M, D, lam = 9, 3, 0.7
    A = rng.normal(size=(M, D))
    y = np.where(rng.random(M) < 0.5, -1.0, 1.0)
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, A @ w))) + lam / 2 * cp.sum_squares(w)))

    m = pyo.ConcreteModel()
    m.D = pyo.RangeSet(0, D - 1)
    m.w = pyo.Var(m.D)
    m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-float(y[i]) * sum(float(A[i, j]) * m.w[j] for j in m.D)))
                                   for i in range(M)) + lam / 2 * sum(m.w[j] ** 2 for j in m.D))
    return prob, m, set()


def lse_model(rng):
    """c^T x + logsumexp(B x + d) subject to logsumexp(G x + h) <= 1 and sum(x) >= -2."""
    D, R1, R2 = 3, 5, 4
    c, B, d = rng.normal(size=D), rng.normal(size=(R1, D)), rng.normal(size=R1)
    G, h = rng.normal(size=(R2, D)), rng.normal(size=R2)
    x = cp.Variable(D, name="x")
    prob = cp.Problem(cp.Minimize(c @ x + cp.log_sum_exp(B @ x + d)),
                      [cp.log_sum_exp(G @ x + h) <= 1, cp.sum(x) >= -2])

    m = pyo.ConcreteModel()
    m.D = pyo.RangeSet(0, D - 1)
    m.x = pyo.Var(m.D)

    def aff(M, r, off):
        return sum(float(M[r, j]) * m.x[j] for j in m.D) + float(off[r])

    m.obj = pyo.Objective(expr=sum(float(c[j]) * m.x[j] for j in m.D)
                          + pyo.log(sum(pyo.exp(aff(B, r, d)) for r in range(R1))))
    m.lse = pyo.Constraint(expr=pyo.log(sum(pyo.exp(aff(G, r, h)) for r in range(R2))) <= 1)
    m.lin = pyo.Constraint(expr=sum(m.x[j] for j in m.D) >= -2)
    return prob, m, set()


def mixed(rng):
    """quad_over_lin, exp, entropy, quadratic form and a bilinear constraint."""
    D = 3
    P = rng.normal(size=(D, D))
    P = P @ P.T + np.eye(D)
    x = cp.Variable(D, name="x")
    t = cp.Variable(name="t", nonneg=True)
    p = cp.Variable(D, name="p", nonneg=True)
    prob = cp.Problem(cp.Minimize(cp.quad_over_lin(x, t) + cp.sum(cp.exp(x)) - cp.sum(cp.entr(p))
                                  + cp.quad_form(x, P)),
                      [x[0] * x[1] <= 1, cp.multiply(p, x) >= -3])

    m = pyo.ConcreteModel()
    m.D = pyo.RangeSet(0, D - 1)
    m.x = pyo.Var(m.D)
    m.t = pyo.Var(within=pyo.NonNegativeReals)
    m.p = pyo.Var(m.D, within=pyo.NonNegativeReals)
    m.obj = pyo.Objective(expr=sum(m.x[j] ** 2 for j in m.D) / m.t + sum(pyo.exp(m.x[j]) for j in m.D)
                          + sum(m.p[j] * pyo.log(m.p[j]) for j in m.D)
                          + sum(float(P[i, j]) * m.x[i] * m.x[j] for i in m.D for j in m.D))
    m.bil = pyo.Constraint(expr=m.x[0] * m.x[1] <= 1)
    m.px = pyo.Constraint(m.D, rule=lambda m, j: m.p[j] * m.x[j] >= -3)
    return prob, m, {"t", "p"}


MODELS = {"bgmm": bgmm, "l1_split": l1_split, "logistic": logistic, "lse": lse_model, "mixed": mixed}


# --- comparison ---------------------------------------------------------------------------------
def residuals(prog):
    """Constraint residual functions ``(value, gradient, hessian)`` normalised to ``r <= 0`` / ``r == 0``."""
    out = []
    for c in prog.constraints:
        if c.lo == c.hi:
            s, bound = 1.0, c.hi
        elif np.isfinite(c.hi):
            s, bound = 1.0, c.hi
        else:
            s, bound = -1.0, c.lo
        out.append((c, s, bound))
    return out


def eq_sign(c, s, x_ref):
    """For equalities, the sign that makes the largest-magnitude gradient entry positive."""
    if c.lo != c.hi:
        return s
    g = c.body.gradient(x_ref)
    k = int(np.argmax(np.abs(g)))
    return s if g[k] >= 0 else -s


def sample_point(names, positive, rng):
    x = rng.normal(size=len(names))
    for k, name in enumerate(names):
        if name.split("[")[0] in positive:
            x[k] = rng.uniform(0.1, 0.9)
    return x


@pytest.mark.parametrize("model", sorted(MODELS))
def test_pyomo_and_cvxpy_compile_to_equal_programs(model):
    rng = np.random.default_rng(2024)
    prob, m, positive = MODELS[model](rng)
    pc, _ = compile_cvxpy(prob)
    pp, _ = pyomo_compile.compile_pyomo(m)

    assert sorted(pc.names) == sorted(pp.names)
    perm = np.array([pc.index[name] for name in pp.names])  # x_pyomo = x_cvxpy[perm]
    assert np.array_equal(pc.lb[perm], pp.lb) and np.array_equal(pc.ub[perm], pp.ub)
    assert pc.maximize == pp.maximize
    assert len(pc.constraints) == len(pp.constraints)

    x_ref = sample_point(pc.names, positive, rng)
    rc = [(c, eq_sign(c, s, x_ref), b) for c, s, b in residuals(pc)]
    rp = [(c, eq_sign(c, s, x_ref[perm]), b) for c, s, b in residuals(pp)]

    def val(r, x):
        c, s, b = r
        return s * (c.body.value(x) - b)

    oc = np.argsort([val(r, x_ref) for r in rc])
    op = np.argsort([val(r, x_ref[perm]) for r in rp])
    for _ in range(5):
        x = sample_point(pc.names, positive, rng)
        xp = x[perm]
        # objective
        assert np.isclose(pc.objective.value(x), pp.objective.value(xp), rtol=1e-10, atol=1e-10)
        assert np.allclose(pc.objective.gradient(x)[perm], pp.objective.gradient(xp), rtol=1e-10, atol=1e-10)
        Hc = pc.objective.hessian(x).toarray()[np.ix_(perm, perm)]
        assert np.allclose(Hc, pp.objective.hessian(xp).toarray(), rtol=1e-10, atol=1e-10)
        # constraints, matched by sorted residual at x_ref
        for i, j in zip(oc, op):
            (c1, s1, b1), (c2, s2, b2) = rc[i], rp[j]
            assert (c1.lo == c1.hi) == (c2.lo == c2.hi), (c1.name, c2.name)
            assert np.isclose(val(rc[i], x), val(rp[j], xp), rtol=1e-10, atol=1e-10), (c1.name, c2.name)
            assert np.allclose(s1 * c1.body.gradient(x)[perm], s2 * c2.body.gradient(xp), rtol=1e-10, atol=1e-10)
            H1 = s1 * c1.body.hessian(x).toarray()[np.ix_(perm, perm)]
            assert np.allclose(H1, s2 * c2.body.hessian(xp).toarray(), rtol=1e-10, atol=1e-10)
