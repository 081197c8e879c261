"""Held-out user models for klprox (docs/klprox.md section 6e), each returning (solve, reference): solve() runs klprox\nthrough the user's front-end, the reference is a ref.Model (independent VI), one with .exact (conjugate), or a softmax spec."""
import time
import zlib
import numpy as np
import cvxpy as cp
import pyomo.environ as pyo
import scipy.sparse as sps
from sklearn import datasets
from sklearn.preprocessing import StandardScaler
import varopt  # noqa
from ref import Model, conjugate

rng = np.random.default_rng(16)
MODELS = {}


def model(f):
    """Register a model; its synthetic data come from a generator seeded by its name (any subset reproduces)."""
    def seeded():
        global rng
        rng = np.random.default_rng(zlib.crc32(f.__name__.encode()))
        return f()
    MODELS[f.__name__] = seeded
    return f


def _cv(prob, order):
    """Solve a CVXPY problem; return m, V in `order` (list of cvxpy variables), -ELBO, loaded x."""
    t = time.perf_counter()
    val = prob.solve(method="klprox")
    t = time.perf_counter() - t
    r = prob.varopt_result
    names = r.names
    idx = []
    for v in order:
        nm = v.name()
        if v.size == 1 and nm in names:
            idx.append(names.index(nm))
        else:
            for k in range(v.size):
                # row-major entries for matrices
                if v.ndim == 2:
                    i, j = divmod(k, v.shape[1])
                    key = f"{nm}[{i},{j}]"
                else:
                    key = f"{nm}[{k}]"
                idx.append(names.index(key))
    idx = np.array(idx)
    x = np.asarray(r.x)[idx]
    V = np.asarray(r.info["covariance"])[np.ix_(idx, idx)]
    loaded = np.concatenate([np.ravel(v.value) if v.ndim < 2 else np.asarray(v.value).ravel() for v in order])
    return dict(m=x, V=V, nelbo=val, obj=r.objective, loaded=loaded, status=r.status, time=t, result=r,
                pvalue=prob.value)


def _py(m, vars_in_order):
    t = time.perf_counter()
    res = pyo.SolverFactory("klprox").solve(m)
    t = time.perf_counter() - t
    r = res.varopt_result
    names = r.names
    idx = []
    for v in vars_in_order:
        idx.append(names.index(v.name))
    idx = np.array(idx)
    loaded = np.array([pyo.value(v) for v in vars_in_order])
    return dict(m=np.asarray(r.x)[idx], V=np.asarray(r.info["covariance"])[np.ix_(idx, idx)], nelbo=r.objective,
                obj=r.objective, loaded=loaded, status=r.status, time=t, result=r, pvalue=pyo.value(m.obj))


# ---------------------------------------------------------------- data
def bc():
    X, y = datasets.load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y.astype(float)


def iris():
    return datasets.load_iris(return_X_y=True)


def diab():
    X, y = datasets.load_diabetes(return_X_y=True)
    return X, y


# ---------------------------------------------------------------- models
def _coin_data(N, D):
    """Gaussian features, fair-coin labels in {0, 1} (drawn in that order from ``rng``) and the CVXPY weights."""
    X = rng.normal(size=(N, D))
    return X, (rng.random(N) < 0.5).astype(float), cp.Variable(D, name="w")


@model
def m01_bc_logistic_pm1_cvx():
    X, y = bc(); X = X[:200, :8]; y = y[:200]
    s = 2 * y - 1; lam = 0.5
    w = cp.Variable(8, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(s, X @ w))) + lam / 2 * cp.sum(w ** 2)))
    ref = Model(lam * np.eye(8)).add("logistic", -s[:, None] * X)
    return (lambda: _cv(prob, [w])), ref


@model
def m02_bc_logistic_01_intercept_unpen_cvx():
    X, y = bc(); X = X[:, [0, 1, 7, 20, 27]]
    w = cp.Variable(5, name="w"); b = cp.Variable(name="b")
    z = X @ w + b
    # intercept "unpenalized" -> klprox needs a prior; a user gives it a broad one
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(z)) - y @ z + cp.sum_squares(w) / (2 * 4.0) + cp.square(b) / (2 * 100.0)))
    A = np.hstack([X, np.ones((len(y), 1))])
    P = np.diag([1 / 4.0] * 5 + [1 / 100.0])
    ref = Model(P, g=-A.T @ y).add("logistic", A)
    return (lambda: _cv(prob, [w, b])), ref


@model
def m03_iris_binary_pyomo_loglogexp():
    X, y = iris(); yb = (y == 1).astype(float); X = X - X.mean(0)
    N, D = X.shape
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, N - 1); m.J = pyo.RangeSet(0, D - 1)
    m.x = pyo.Param(m.I, m.J, initialize={(i, j): float(X[i, j]) for i in range(N) for j in range(D)})
    m.y = pyo.Param(m.I, initialize={i: float(yb[i]) for i in range(N)})
    m.w = pyo.Var(m.J)
    m.b = pyo.Var()

    def z(mm, i):
        return sum(mm.x[i, j] * mm.w[j] for j in mm.J) + mm.b
    m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(z(m, i))) - m.y[i] * z(m, i) for i in m.I)
                          + 0.5 * sum(m.w[j] ** 2 for j in m.J) + 0.05 * m.b ** 2)
    A = np.hstack([X, np.ones((N, 1))])
    ref = Model(np.diag([1.0] * D + [0.1]), g=-A.T @ yb).add("logistic", A)
    return (lambda: _py(m, [m.w[j] for j in m.J] + [m.b])), ref


@model
def m04_logistic_fullprec_quadform():
    N, D = 80, 6
    X = rng.normal(size=(N, D)); wt = rng.normal(size=D)
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ wt))).astype(float)
    B = rng.normal(size=(D, D)); P = B @ B.T / D + 0.3 * np.eye(D)
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ X @ w + 0.5 * cp.quad_form(w, P)))
    ref = Model(P, g=-X.T @ y).add("logistic", X)
    return (lambda: _cv(prob, [w])), ref


@model
def m05_logistic_prior_mean():
    N, D = 60, 4
    X = rng.normal(size=(N, D)); y = (rng.random(N) < 0.4).astype(float)
    mu = np.array([1.0, -2.0, 0.5, 3.0]); s2 = 0.3
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ (X @ w) + cp.sum_squares(w - mu) / (2 * s2)))
    ref = Model(np.eye(D) / s2, mu=mu, g=-X.T @ y).add("logistic", X)
    return (lambda: _cv(prob, [w])), ref


@model
def m06_logistic_per_coord_prior():
    N, D = 70, 5
    X = rng.normal(size=(N, D)) * np.array([1, 3, 0.1, 1, 10])
    y = (rng.random(N) < 0.5).astype(float)
    lam = np.array([0.1, 1.0, 10.0, 0.5, 2.0])
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ X @ w + 0.5 * cp.sum(cp.multiply(lam, cp.square(w)))))
    ref = Model(np.diag(lam), g=-X.T @ y).add("logistic", X)
    return (lambda: _cv(prob, [w])), ref


@model
def m07_logistic_weights_mean_obj():
    N, D = 50, 3
    X = rng.normal(size=(N, D)); y = (rng.random(N) < 0.5).astype(float)
    sw = rng.uniform(0.2, 3, N)
    w = cp.Variable(D, name="w")
    # mean instead of sum: the objective is the user's negative log joint (tempered by 1/N)
    obj = (sw @ cp.logistic(X @ w) - cp.sum(cp.multiply(sw * y, X @ w))) / N + cp.sum_squares(w) / (2 * N)
    prob = cp.Problem(cp.Minimize(obj))
    ref = Model(np.eye(D) / N, g=-X.T @ (sw * y) / N).add("logistic", X, c=sw / N)
    return (lambda: _cv(prob, [w])), ref


@model
def m08_sparse_X_NltD_logistic():
    N, D = 25, 60
    X = sps.random(N, D, density=0.15, random_state=3, format="csr")
    y = (rng.random(N) < 0.5).astype(float)
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ (X @ w) + cp.sum_squares(w) / 2))
    ref = Model(np.eye(D), g=-X.T @ y).add("logistic", X.toarray())
    return (lambda: _cv(prob, [w])), ref


@model
def m09_parameter_data():
    N, D = 40, 3
    Xv = rng.normal(size=(N, D)); yv = (rng.random(N) < 0.5).astype(float)
    X = cp.Parameter((N, D)); y = cp.Parameter(N); lam = cp.Parameter(nonneg=True)
    X.value, y.value, lam.value = Xv, yv, 2.0
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w) - cp.multiply(y, X @ w)) + lam / 2 * cp.sum_squares(w)))
    ref = Model(2.0 * np.eye(D), g=-Xv.T @ yv).add("logistic", Xv)
    return (lambda: _cv(prob, [w])), ref


@model
def m10_poisson_cvx_linnerud():
    Xl, Yl = datasets.load_linnerud(return_X_y=True)
    # Chins (counts) from physiology (standardized) + intercept
    Z = StandardScaler().fit_transform(Yl); cnt = Xl[:, 0]
    N, D = Z.shape
    w = cp.Variable(D, name="w"); b = cp.Variable(name="b")
    eta = Z @ w + b
    prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(eta) - cp.multiply(cnt, eta)) + cp.sum_squares(w) / 2 + cp.square(b) / 20))
    A = np.hstack([Z, np.ones((N, 1))])
    ref = Model(np.diag([1, 1, 1, 0.1]), g=-A.T @ cnt).add("exp", A)
    return (lambda: _cv(prob, [w, b])), ref


@model
def m11_poisson_pyomo_offset():
    N, D = 60, 3
    X = rng.normal(size=(N, D)) * 0.5; expo = rng.uniform(0.5, 4, N)
    cnt = rng.poisson(expo * np.exp(X @ np.array([0.5, -0.3, 0.2]))).astype(float)
    m = pyo.ConcreteModel(); m.N = pyo.Set(initialize=range(N)); m.D = pyo.Set(initialize=range(D))
    m.w = pyo.Var(m.D, initialize=0.0)
    lo = np.log(expo)
    m.obj = pyo.Objective(expr=sum(pyo.exp(lo[i] + sum(X[i, j] * m.w[j] for j in m.D)) - cnt[i] * (lo[i] + sum(X[i, j] * m.w[j] for j in m.D)) for i in m.N)
                          + sum(m.w[j] ** 2 for j in m.D))
    ref = Model(2 * np.eye(D), g=-X.T @ cnt, k0=-cnt @ lo).add("exp", X, b=lo)
    return (lambda: _py(m, [m.w[j] for j in m.D])), ref


@model
def m12_gaussian_diabetes_conj():
    X, y = diab(); y = (y - y.mean()) / y.std()
    N, D = X.shape; s2 = 0.5; d = 3.0
    X = X * 10
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum_squares(y - X @ w) / (2 * s2) + cp.sum_squares(w) / (2 * d)))
    ref = Model(np.eye(D) / d, g=-X.T @ y / s2, k0=y @ y / (2 * s2)).add("sq", X, c=np.full(N, 1 / (2 * s2)))
    mc, Vc, _ = conjugate(np.eye(D) / d, np.zeros(D), X, y, s2)
    ref.exact = (mc, Vc)
    return (lambda: _cv(prob, [w])), ref


@model
def m13_laplace_robust_diabetes():
    X, y = diab(); y = (y - y.mean()) / y.std(); X = X * 10
    X = X[:150, :5]; y = y[:150].copy(); y[:5] += 8  # outliers
    N, D = X.shape
    w = cp.Variable(D, name="w"); b = cp.Variable(name="b")
    prob = cp.Problem(cp.Minimize(cp.norm1(y - X @ w - b) / 0.7 + 0.5 * cp.sum_squares(w) + 0.5 * cp.square(b)))
    A = np.hstack([X, np.ones((N, 1))])
    ref = Model(np.eye(D + 1)).add("abs", -A, b=y, c=np.full(N, 1 / 0.7))
    return (lambda: _cv(prob, [w, b])), ref


@model
def m14_laplace_pyomo_abs():
    N, D = 40, 2
    X = rng.normal(size=(N, D)); y = X @ np.array([1.0, -1.0]) + rng.laplace(size=N)
    m = pyo.ConcreteModel(); m.w = pyo.Var([0, 1])
    m.obj = pyo.Objective(expr=sum(abs(y[i] - X[i, 0] * m.w[0] - X[i, 1] * m.w[1]) for i in range(N)) + 0.1 * (m.w[0] ** 2 + m.w[1] ** 2))
    ref = Model(0.2 * np.eye(D)).add("abs", -X, b=y)
    return (lambda: _py(m, [m.w[0], m.w[1]])), ref


@model
def m15_multinomial_iris_lse():
    X, y = iris(); X = StandardScaler().fit_transform(X)[:, :2]
    K = 3; Y = np.eye(K)[y]
    W = cp.Variable((2, K), name="W")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.log_sum_exp(X @ W, axis=1)) - cp.sum(cp.multiply(Y, X @ W)) + cp.sum_squares(W) / 2))
    return (lambda: _cv(prob, [W])), ("softmax", X, Y, 1.0)


@model
def m16_multinomial_wine_pyomo():
    X, y = datasets.load_wine(return_X_y=True); X = StandardScaler().fit_transform(X)[:, [0, 6, 9]]
    X = X[::2]; y = y[::2]
    N, D = X.shape; K = 3
    m = pyo.ConcreteModel(); m.D = pyo.RangeSet(0, D - 1); m.K = pyo.RangeSet(0, K - 1)
    m.W = pyo.Var(m.D, m.K)
    f = lambda i, k: sum(X[i, j] * m.W[j, k] for j in m.D)
    m.obj = pyo.Objective(expr=sum(pyo.log(sum(pyo.exp(f(i, k)) for k in m.K)) - f(i, int(y[i])) for i in range(N))
                          + 0.5 * sum(m.W[j, k] ** 2 for j in m.D for k in m.K))
    Y = np.eye(K)[y]
    return (lambda: _py(m, [m.W[j, k] for j in m.D for k in m.K])), ("softmax", X, Y, 1.0)


@model
def m17_digits_binary_logistic_lse():
    X, y = datasets.load_digits(return_X_y=True)
    sel = (y == 3) | (y == 8); X = X[sel][:120] / 16.0; y = (y[sel][:120] == 8).astype(float)
    X = X[:, X.std(0) > 0.2][:, :20]
    N, D = X.shape
    w = cp.Variable(D, name="w")
    z = X @ w
    # log_sum_exp of [0, z_n] per row
    prob = cp.Problem(cp.Minimize(sum(cp.log_sum_exp(cp.hstack([0, z[i]])) for i in range(N)) - y @ z + cp.sum_squares(w) / 2))
    ref = Model(np.eye(D), g=-X.T @ y).add("logistic", X)
    return (lambda: _cv(prob, [w])), ref


@model
def m18_pyomo_cvx_same_gp_class():
    # GP classification, whitened, N=D
    N = 30
    x = np.sort(rng.uniform(-3, 3, N)); y = (np.sin(x) + 0.3 * rng.normal(size=N) > 0).astype(float)
    K = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) * 2.0 + 1e-6 * np.eye(N)
    L = np.linalg.cholesky(K)
    v = cp.Variable(N, name="v")
    f = L @ v
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(f)) - y @ f + cp.sum_squares(v) / 2))
    ref = Model(np.eye(N), g=-L.T @ y).add("logistic", L)
    return (lambda: _cv(prob, [v])), ref


@model
def m19_poisson_NltD():
    N, D = 15, 40
    X = rng.normal(size=(N, D)) / np.sqrt(D); cnt = rng.poisson(2.0, N).astype(float)
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(X @ w)) - cnt @ (X @ w) + 0.5 * cp.sum_squares(w)))
    ref = Model(np.eye(D), g=-X.T @ cnt).add("exp", X)
    return (lambda: _cv(prob, [w])), ref


@model
def m20_gaussian_fullprior_mean_pyomo():
    N, D = 25, 3
    X = rng.normal(size=(N, D)); y = X @ np.array([1.0, 2.0, -1.0]) + 0.5 * rng.normal(size=N)
    B = rng.normal(size=(D, D)); P = B @ B.T + np.eye(D); mu = np.array([0.5, 0.5, 0.0]); s2 = 0.25
    m = pyo.ConcreteModel(); m.w = pyo.Var(range(D))
    m.obj = pyo.Objective(expr=sum((y[i] - sum(X[i, j] * m.w[j] for j in range(D))) ** 2 for i in range(N)) / (2 * s2)
                          + 0.5 * sum(P[j, k] * (m.w[j] - mu[j]) * (m.w[k] - mu[k]) for j in range(D) for k in range(D)))
    ref = Model(P, mu=mu, g=-X.T @ y / s2, k0=y @ y / (2 * s2)).add("sq", X, c=np.full(N, 1 / (2 * s2)))
    mc, Vc, _ = conjugate(P, mu, X, y, s2)
    ref.exact = (mc, Vc)
    return (lambda: _py(m, [m.w[j] for j in range(D)])), ref


@model
def m21_mixed_families():
    N = 30; D = 3
    X = rng.normal(size=(N, D))
    yb = (rng.random(N) < 0.5).astype(float); cnt = rng.poisson(1.5, N).astype(float); yr = rng.normal(size=N)
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - yb @ X @ w + cp.sum(cp.exp(0.3 * X @ w)) - cnt @ (0.3 * X @ w)
                                  + cp.sum(cp.abs(yr - X @ w)) + cp.sum_squares(w) / 2))
    ref = Model(np.eye(D), g=-X.T @ yb - 0.3 * X.T @ cnt).add("logistic", X).add("exp", 0.3 * X).add("abs", -X, b=yr)
    return (lambda: _cv(prob, [w])), ref


@model
def m22_logistic_maximize_loglik():
    N, D = 50, 4
    X, y, w = _coin_data(N, D)
    z = X @ w
    prob = cp.Problem(cp.Maximize(y @ z - cp.sum(cp.logistic(z)) - 0.5 * cp.sum_squares(w)))
    ref = Model(np.eye(D), g=-X.T @ y).add("logistic", X)
    return (lambda: _cv(prob, [w])), ref


@model
def m23_pyomo_params_mutable_prior():
    N, D = 45, 3
    X = rng.normal(size=(N, D)); y = (rng.random(N) < 0.6).astype(float)
    m = pyo.ConcreteModel(); m.I = pyo.Set(initialize=range(N)); m.J = pyo.Set(initialize=range(D))
    m.X = pyo.Param(m.I, m.J, initialize=lambda mm, i, j: float(X[i, j]))
    m.y = pyo.Param(m.I, initialize=lambda mm, i: float(y[i]))
    m.lam = pyo.Param(initialize=3.0, mutable=True)
    m.w = pyo.Var(m.J)
    m.z = pyo.Expression(m.I, rule=lambda mm, i: sum(mm.X[i, j] * mm.w[j] for j in mm.J))
    m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-m.z[i])) + (1 - m.y[i]) * m.z[i] for i in m.I) + m.lam / 2 * sum(m.w[j] ** 2 for j in m.J))
    # log(1+exp(-z)) + (1-y) z = softplus(z) - y z
    ref = Model(3.0 * np.eye(D), g=-X.T @ y).add("logistic", X)
    return (lambda: _py(m, [m.w[j] for j in m.J])), ref


@model
def m24_logistic_intercept_penalized_hstack():
    X, y = bc(); X = X[::3, :6]; y = y[::3]
    N, D = X.shape
    A = np.hstack([np.ones((N, 1)), X])
    w = cp.Variable(D + 1, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(A @ w)) - cp.sum(cp.multiply(y, A @ w)) + 0.5 * cp.sum_squares(w) / 0.5))
    ref = Model(np.eye(D + 1) / 0.5, g=-A.T @ y).add("logistic", A)
    return (lambda: _cv(prob, [w])), ref


@model
def m25_gp_laplace_regression_quadform():
    N = 25
    x = np.sort(rng.uniform(0, 5, N)); y = np.sin(x) + 0.2 * rng.laplace(size=N)
    K = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 0.8) + 1e-4 * np.eye(N)
    Kinv = np.linalg.inv(K); Kinv = (Kinv + Kinv.T) / 2
    f = cp.Variable(N, name="f")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.abs(y - f)) / 0.2 + 0.5 * cp.quad_form(f, cp.psd_wrap(Kinv))))
    ref = Model(Kinv).add("abs", -np.eye(N), b=y, c=np.full(N, 5.0))
    return (lambda: _cv(prob, [f])), ref


@model
def m26_poisson_exp_minus_multiply():
    X, y = diab(); cnt = np.round(y / 10)
    X = StandardScaler().fit_transform(X)[:, :4]
    N, D = X.shape
    w = cp.Variable(D, name="w"); b = cp.Variable(name="b")
    eta = X @ w + b
    prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(eta) - cp.multiply(cnt, eta)) + 2 * cp.sum_squares(w) + cp.square(b) / 200))
    A = np.hstack([X, np.ones((N, 1))])
    ref = Model(np.diag([4.0] * D + [0.01]), g=-A.T @ cnt).add("exp", A)
    return (lambda: _cv(prob, [w, b])), ref


@model
def m27_gaussian_heteroscedastic_sparse():
    N, D = 50, 8
    X = sps.random(N, D, density=0.3, random_state=5, format="csc")
    s = rng.uniform(0.3, 2.0, N); y = X @ rng.normal(size=D) + s * rng.normal(size=N)
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum_squares(cp.multiply(1 / s, y - X @ w)) / 2 + cp.sum_squares(w) / 2))
    Xd = X.toarray()
    Xs = Xd / s[:, None]; ys = y / s
    mc, Vc, _ = conjugate(np.eye(D), np.zeros(D), Xs, ys, 1.0)
    ref = Model(np.eye(D), g=-Xs.T @ ys, k0=ys @ ys / 2).add("sq", Xs, c=np.full(N, 0.5))
    ref.exact = (mc, Vc)
    return (lambda: _cv(prob, [w])), ref


@model
def m28_exponential_regression_exp_neg():
    N, D = 60, 3
    X = rng.normal(size=(N, D)) * 0.5; wt = np.array([0.3, -0.5, 0.2])
    yv = rng.exponential(np.exp(X @ wt))  # mean exp(z): -log p = z + y exp(-z)
    w = cp.Variable(D, name="w")
    z = X @ w
    prob = cp.Problem(cp.Minimize(cp.sum(z) + yv @ cp.exp(-z) + cp.sum_squares(w) / 2))
    ref = Model(np.eye(D), g=X.sum(0)).add("exp", -X, c=yv)
    return (lambda: _cv(prob, [w])), ref


@model
def m29_binomial_trials():
    N, D = 40, 3
    X = rng.normal(size=(N, D)); n = rng.integers(1, 20, N).astype(float)
    k = rng.binomial(n.astype(int), 1 / (1 + np.exp(-X @ np.array([0.5, -1, 0.3])))).astype(float)
    w = cp.Variable(D, name="w")
    z = X @ w
    prob = cp.Problem(cp.Minimize(n @ cp.logistic(z) - k @ z + cp.sum_squares(w) / 2))
    ref = Model(np.eye(D), g=-X.T @ k).add("logistic", X, c=n)
    return (lambda: _cv(prob, [w])), ref


@model
def m30_negative_binomial_pyomo():
    N, D = 40, 2
    X = rng.normal(size=(N, D)); rr = 2.5
    yv = rng.negative_binomial(rr, 0.4, N).astype(float)
    m = pyo.ConcreteModel(); m.w = pyo.Var(range(D)); m.b = pyo.Var()
    z = lambda i: X[i, 0] * m.w[0] + X[i, 1] * m.w[1] + m.b
    m.obj = pyo.Objective(expr=sum((yv[i] + rr) * pyo.log(1 + pyo.exp(z(i))) - yv[i] * z(i) for i in range(N))
                          + 0.5 * (m.w[0] ** 2 + m.w[1] ** 2) + 0.01 * m.b ** 2)
    A = np.hstack([X, np.ones((N, 1))])
    ref = Model(np.diag([1, 1, 0.02]), g=-A.T @ yv).add("logistic", A, c=yv + rr)
    return (lambda: _py(m, [m.w[0], m.w[1], m.b])), ref


@model
def m31_gaussian_full_noise_cov():
    N, D = 12, 3
    X = rng.normal(size=(N, D)); B = rng.normal(size=(N, N)); S = B @ B.T / N + 0.5 * np.eye(N)
    Si = np.linalg.inv(S); Si = (Si + Si.T) / 2
    yv = X @ np.array([1.0, 0.0, -1.0]) + np.linalg.cholesky(S) @ rng.normal(size=N)
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(yv - X @ w, Si) + cp.sum_squares(w) / 4))
    Lam = 0.5 * np.eye(D) + X.T @ Si @ X
    V = np.linalg.inv(Lam); mm = V @ X.T @ Si @ yv
    Lc = np.linalg.cholesky(Si)
    ref = Model(0.5 * np.eye(D), g=-(X.T @ Si @ yv), k0=0.5 * yv @ Si @ yv).add("sq", Lc.T @ X, c=np.full(N, 0.5))
    ref.exact = (mm, V)
    return (lambda: _cv(prob, [w])), ref


@model
def m32_same_predictor_twice():
    N, D = 30, 3
    X, yv, w = _coin_data(N, D)
    z = X @ w
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(z)) + 0.5 * cp.sum(cp.logistic(z)) - 1.5 * yv @ z + cp.sum_squares(w) / 2))
    ref = Model(np.eye(D), g=-1.5 * X.T @ yv).add("logistic", X, c=np.full(N, 1.5))
    return (lambda: _cv(prob, [w])), ref


@model
def m33_quadform_shifted_prior():
    N, D = 50, 4
    X = rng.normal(size=(N, D)); yv = (rng.random(N) < 0.5).astype(float)
    B = rng.normal(size=(D, D)); P = B @ B.T + 0.5 * np.eye(D); mu = rng.normal(size=D)
    w = cp.Variable(D, name="w")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w) - cp.multiply(yv, X @ w)) + 0.5 * cp.quad_form(w - mu, P)))
    ref = Model(P, mu=mu, g=-X.T @ yv).add("logistic", X)
    return (lambda: _cv(prob, [w])), ref


@model
def m34_multinomial_K4_rows_hstack_fro():
    X, y = datasets.load_digits(return_X_y=True)
    sel = y < 4; X = X[sel][:60]; y = y[sel][:60]
    X = StandardScaler().fit_transform(X[:, [10, 20, 36, 43]])[:, :2]
    N, D = X.shape; K = 4; Y = np.eye(K)[y]
    W = cp.Variable((D, K), name="W")
    F = X @ W
    prob = cp.Problem(cp.Minimize(sum(cp.log_sum_exp(F[i, :]) for i in range(N)) - cp.trace(Y.T @ F) + cp.norm(W, "fro") ** 2 / 2))
    return (lambda: _cv(prob, [W])), ("softmax", X, Y, 1.0)


@model
def m35_gp_class_large_sf_quadform():
    N = 25
    x = np.sort(rng.uniform(-3, 3, N)); yv = (x > 0).astype(float); yv[[3, 20]] = 1 - yv[[3, 20]]
    K = 20.0 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 1.5) + 1e-4 * np.eye(N)
    Ki = np.linalg.inv(K); Ki = (Ki + Ki.T) / 2
    f = cp.Variable(N, name="f")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(2 * yv - 1, f))) + 0.5 * cp.quad_form(f, cp.psd_wrap(Ki))))
    ref = Model(Ki).add("logistic", -np.diag(2 * yv - 1))
    return (lambda: _cv(prob, [f])), ref


@model
def m36_pyomo_product_prior_swapped_log():
    N, D = 40, 3
    X = rng.normal(size=(N, D)); yv = (rng.random(N) < 0.5).astype(float)
    m = pyo.ConcreteModel(); m.J = pyo.Set(initialize=["a", "b", "c"]); m.w = pyo.Var(m.J, within=pyo.Reals, bounds=(None, None))
    m.s2 = pyo.Param(initialize=2.0, mutable=True)
    cols = {"a": 0, "b": 1, "c": 2}
    z = lambda i: sum(X[i, cols[j]] * m.w[j] for j in m.J)
    m.nll = pyo.Expression(expr=sum(pyo.log(pyo.exp(z(i)) + 1) - yv[i] * z(i) for i in range(N)))
    m.prior = pyo.Expression(expr=sum(m.w[j] * m.w[j] for j in m.J) / (2 * m.s2))
    m.obj = pyo.Objective(expr=m.nll + m.prior)
    ref = Model(np.eye(D) / 2.0, g=-X.T @ yv).add("logistic", X)
    return (lambda: _py(m, [m.w[j] for j in ["a", "b", "c"]])), ref


@model
def m37_pyomo_exp_scaled_forms():
    N, D = 30, 2
    X = rng.normal(size=(N, D)) * 0.5; t = rng.uniform(0.5, 2, N); yv = rng.poisson(t).astype(float)
    m = pyo.ConcreteModel(); m.w = pyo.Var(range(D)); m.t = pyo.Param(range(N), initialize=dict(enumerate(t)))
    z = lambda i: X[i, 0] * m.w[0] + X[i, 1] * m.w[1]
    # t*exp(z), exp(z + log t)/2 + exp(z)*t/2: Poisson with exposure written three ways
    m.obj = pyo.Objective(expr=sum(0.5 * m.t[i] * pyo.exp(z(i)) + pyo.exp(z(i) + np.log(t[i])) / 4 + pyo.exp(z(i)) * m.t[i] / 4 - yv[i] * z(i) for i in range(N))
                          + (m.w[0] ** 2 + m.w[1] ** 2) / 2)
    ref = Model(np.eye(D), g=-X.T @ yv).add("exp", X, c=t)
    return (lambda: _py(m, [m.w[0], m.w[1]])), ref


@model
def m38_pyomo_softmax_base_constant():
    X, y = iris(); X = StandardScaler().fit_transform(X)[::3, [0, 2]]; y = y[::3]
    N, D = X.shape
    m = pyo.ConcreteModel(); m.W = pyo.Var(range(D), [1, 2])
    f = lambda i, k: sum(X[i, j] * m.W[j, k] for j in range(D))
    # class 0 is the reference class with f = 0: log(1 + exp(f1) + exp(f2)) - f_y
    m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(f(i, 1)) + pyo.exp(f(i, 2))) - (f(i, int(y[i])) if y[i] > 0 else 0) for i in range(N))
                          + 0.5 * sum(m.W[j, k] ** 2 for j in range(D) for k in [1, 2]))
    # reference: softmax over K=3 with W[:,0] fixed to 0 -> SoftmaxModel over K-1 free columns is not directly it;
    # use generic: rows u = (0, f1, f2), variables W[:,1:], prior 1
    Y = np.eye(3)[y]
    return (lambda: _py(m, [m.W[j, k] for j in range(D) for k in [1, 2]])), ("softmax_ref0", X, Y, 1.0)


@model
def m39_bc_full_30_features_intercept():
    X, y = bc()
    N, D = X.shape
    w = cp.Variable(D, name="w"); b = cp.Variable(name="b")
    z = X @ w + b
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(z)) - y @ z + cp.sum_squares(w) / 2 + cp.square(b) / 20))
    A = np.hstack([X, np.ones((N, 1))])
    ref = Model(np.diag([1.0] * D + [0.1]), g=-A.T @ y).add("logistic", A)
    return (lambda: _cv(prob, [w, b])), ref


@model
def m40_digits_0v1_raw_pixels_pyomo():
    X, y = datasets.load_digits(return_X_y=True)
    sel = y < 2; X = X[sel] / 16.0; y = y[sel].astype(float)
    N, D = X.shape
    m = pyo.ConcreteModel(); m.J = pyo.RangeSet(0, D - 1); m.w = pyo.Var(m.J)
    m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(sum(X[i, j] * m.w[j] for j in range(D) if X[i, j] != 0)))
                                   - y[i] * sum(X[i, j] * m.w[j] for j in range(D) if X[i, j] != 0) for i in range(N))
                          + sum(m.w[j] ** 2 for j in m.J) / 2)
    ref = Model(np.eye(D), g=-X.T @ y).add("logistic", X)
    return (lambda: _py(m, [m.w[j] for j in m.J])), ref
