"""On-line L1 learning (thesis §2.5): builders, front-ends end to end, estimators, baselines."""
import numpy as np
import pytest

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.errors import InputDataError
from varopt.baselines import l1_online as bl
from varopt.formulations.l1 import (L1LeastSquares, L1LogisticRegression, l1_least_squares_cvxpy,
                                    l1_least_squares_program, l1_least_squares_pyomo, l1_logistic_cvxpy,
                                    l1_logistic_program, l1_logistic_pyomo)
from varopt.frontends import compile_model


def data(seed=0, n=40, m=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m))
    y = X @ np.array([1.0, 0.0, -2.0, 0.0])[:m] + 0.1 * rng.normal(size=n)
    return X, y


def exact_lasso(X, y, alpha, fit_intercept=False):
    prob, v = l1_least_squares_cvxpy(X, y, alpha, "box", fit_intercept)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return v["w"].value, (float(v["b"].value) if fit_intercept else 0.0), prob.value


def _values_by_name(P, x_by_name):
    return P.objective.value(np.array([x_by_name[nm] for nm in P.names]))


@pytest.mark.parametrize("form", ["split", "box"])
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_builders_agree_and_expose_per_sample_rows(form, loss):
    X, y = data(1, n=12, m=3)
    if loss == "logistic":
        y = np.where(y > 0, 1.0, -1.0)
        P = l1_logistic_program(X, y, 0.2, form, True)
        M = l1_logistic_pyomo(X, y, 0.2, form, True)
        prob, _ = l1_logistic_cvxpy(X, y, 0.2, form, True)
    else:
        P = l1_least_squares_program(X, y, 0.2, form, True)
        M = l1_least_squares_pyomo(X, y, 0.2, form, True)
        prob, _ = l1_least_squares_cvxpy(X, y, 0.2, form, True)
    rng = np.random.default_rng(2)
    xs = {nm: v for nm, v in zip(P.names, rng.random(P.n))}
    ref = P.objective.value(np.array([xs[nm] for nm in P.names]))
    for Q, _ in (compile_model(M), compile_model(prob)):
        assert sorted(Q.names) == sorted(P.names)
        assert _values_by_name(Q, xs) == pytest.approx(ref, rel=1e-10)
        groups = list(Q.objective.groups())
        assert len(groups) == 1 and len(groups[0]) == 12  # one row (sample) per example
        assert len(Q.constraints) == (0 if form == "split" else 6)
    # direct formula
    w, b = (np.array([xs[f"wp[{j}]"] - xs[f"wm[{j}]"] for j in range(3)]) if form == "split"
            else np.array([xs[f"w[{j}]"] for j in range(3)])), xs["b"]
    pen = (sum(xs[f"wp[{j}]"] + xs[f"wm[{j}]"] for j in range(3)) if form == "split"
           else sum(xs[f"u[{j}]"] for j in range(3)))
    t = X @ w + b
    direct = (np.mean(np.log1p(np.exp(-y * t))) if loss == "logistic" else np.sum((y - t) ** 2) / 24) + 0.2 * pen
    assert ref == pytest.approx(direct, rel=1e-10)


def test_pyomo_end_to_end_box_form():
    import pyomo.environ as pyo

    X, y = data(0)
    w_ex, b_ex, _ = exact_lasso(X, y, 0.1, True)
    M = l1_least_squares_pyomo(X, y, 0.1, "box", True)
    res = pyo.SolverFactory("ipsa").solve(M, passes=60, step_power=0.6)
    assert res.varopt_result.status == "pass_limit"
    w = np.array([pyo.value(M.w[j]) for j in range(4)])
    assert np.max(np.abs(w - w_ex)) < 0.01
    assert np.all([pyo.value(M.u[j]) > abs(pyo.value(M.w[j])) for j in range(4)])  # strictly interior


def test_cvxpy_end_to_end_split_and_logistic():
    X, y = data(0)
    w_ex, _, _ = exact_lasso(X, y, 0.1, False)
    prob, v = l1_least_squares_cvxpy(X, y, 0.1, "split", False)
    prob.solve(method="ipsa", passes=60, step_power=0.6)
    assert np.max(np.abs(v["wp"].value - v["wm"].value - w_ex)) < 0.01
    assert np.all(v["wp"].value > 0) and np.all(v["wm"].value > 0)
    # logistic: compare with CVXPY + Clarabel
    yy = np.where(X[:, 0] - X[:, 2] + 0.5 * np.random.default_rng(1).normal(size=40) > 0, 1.0, -1.0)
    prob, v = l1_logistic_cvxpy(X, yy, 0.02, "split", True)
    prob.solve(solver="CLARABEL")
    w_ex = v["wp"].value - v["wm"].value
    f_ex = prob.value
    prob2, v2 = l1_logistic_cvxpy(X, yy, 0.02, "split", True)
    prob2.solve(method="ipsa", passes=200, step_power=0.6, hessian="diagonal")
    w_on = v2["wp"].value - v2["wm"].value
    # the large coefficients are found; a small one (|w_3| = 0.34 here) can sit at the boundary
    # for many passes (interior-point steps in a coordinate scale like x_j / z_j near x_j = 0)
    big = np.abs(w_ex) > 1.0
    assert np.max(np.abs(w_on - w_ex)[big]) < 0.15
    assert f_ex <= prob2.value <= 1.03 * f_ex


def test_least_squares_estimator_fit_matches_lasso_and_predicts():
    from sklearn.linear_model import Lasso

    X, y = data(3, n=80, m=4)
    ref = Lasso(alpha=0.1, tol=1e-12, max_iter=100000).fit(X, y)
    est = L1LeastSquares(alpha=0.1, passes=100, step_power=0.6).fit(X, y)
    assert np.max(np.abs(est.coef_ - ref.coef_)) < 0.01
    assert abs(est.intercept_ - ref.intercept_) < 0.02
    np.testing.assert_allclose(est.predict(X), X @ est.coef_ + est.intercept_)
    assert est.get_params()["alpha"] == 0.1
    est.set_params(alpha=0.2)
    assert est.alpha == 0.2


@pytest.mark.parametrize("form", ["split", "box"])
def test_partial_fit_in_chunks_equals_one_online_pass(form):
    X, y = data(4, n=60, m=4)
    full = L1LeastSquares(alpha=0.1, form=form, passes=1).fit(X, y)
    online = L1LeastSquares(alpha=0.1, form=form)
    for i in range(0, 60, 20):
        online.partial_fit(X[i:i + 20], y[i:i + 20])
    assert online.n_iter_ == 60
    np.testing.assert_allclose(online.coef_, full.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(online.intercept_, full.intercept_, rtol=1e-9, atol=1e-12)


def test_logistic_estimator_matches_sklearn_l1():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    n, m = 200, 5
    X = rng.normal(size=(n, m))
    p = 1 / (1 + np.exp(-(X @ np.array([2.0, 0, -1.5, 0, 0]) + 0.3)))
    y = np.where(rng.random(n) < p, "spam", "ham")
    alpha = 0.02
    ref = LogisticRegression(l1_ratio=1.0, C=1.0 / (n * alpha), solver="saga", tol=1e-10, max_iter=100000).fit(X, y)
    # mini-batches of 10 reduce the stationary noise of the stochastic iterates (std ~ sqrt(a_k var / curv));
    # a fresh random order every pass avoids the O(a_k / D) bias of cyclic (incremental-gradient)
    # order, large here because the running diagonal D ~ 0.1 magnifies the steps
    est = L1LogisticRegression(alpha=alpha, passes=200, batch_size=10, step_power=0.6,
                               sampling="permutation").fit(X, y)
    assert list(est.classes_) == ["ham", "spam"]
    assert np.max(np.abs(est.coef_ - ref.coef_.ravel())) < 0.1
    yy = np.where(y == "spam", 1.0, -1.0)

    def F(w, b):
        return np.mean(np.log1p(np.exp(-yy * (X @ w + b)))) + alpha * np.abs(w).sum()

    assert F(est.coef_, est.intercept_) <= 1.01 * F(ref.coef_.ravel(), ref.intercept_[0])
    pr = est.predict_proba(X)
    assert pr.shape == (n, 2) and np.allclose(pr.sum(axis=1), 1)
    assert np.mean(est.predict(X) == ref.predict(X)) > 0.97
    with pytest.raises(InputDataError):
        est.partial_fit(X[:3], ["ham", "eggs", "spam"])


def test_estimator_input_validation():
    X, y = data(0)
    X[0, 0] = np.nan
    with pytest.raises(InputDataError, match="X contains NaN"):
        L1LeastSquares().fit(X, y)
    with pytest.raises(InputDataError, match="inconsistent numbers of samples"):  # scikit-learn's check
        L1LeastSquares().fit(data(0)[0], y[:5])
    with pytest.raises(ValueError, match="form"):
        L1LeastSquares(form="diamond").fit(*data(0))


def test_sparse_logistic_program():
    import scipy.sparse as sp

    rng = np.random.default_rng(6)
    X = sp.random(50, 30, density=0.1, random_state=2, format="csr")
    X.data[:] = 1.0
    y = np.where(rng.random(50) < 0.5, 1.0, -1.0)
    P = l1_logistic_program(X, y, 0.01)
    Pd = l1_logistic_program(X.toarray(), y, 0.01)
    x = rng.random(P.n)
    assert P.objective.value(x) == pytest.approx(Pd.objective.value(x), rel=1e-12)
    r = varopt.get_solver("ipsa").solve(P, passes=2, hessian="diagonal")
    assert r.iterations == 100 and np.all(r.x[:60] > 0)


def test_baselines_reach_the_lasso_solution_with_many_passes():
    X, y = data(7, n=60, m=4)
    w_ex, _, _ = exact_lasso(X, y, 0.1)
    for fn in (bl.projected_gradient, bl.subgradient, bl.smoothed_l1):
        w = fn(X, y, 0.1, k0=5, passes=200)
        assert np.max(np.abs(w - w_ex)) < 0.05, fn.__name__
    w = bl.augmented_lagrangian(X, y, 0.1, k0=5, passes=200)
    assert np.max(np.abs(w - w_ex)) < 0.2
    # projected gradient stays feasible and sets coefficients exactly to zero
    x = bl.projected_gradient(X, y, 0.5, k0=5, passes=50, return_split=True)
    assert np.all(x >= 0) and np.sum(x == 0) >= 4
    with pytest.raises(InputDataError):
        bl.subgradient(X, y[:3], 0.1)


def test_pyomo_ball_constraint_with_noisy_oracle_end_to_end():
    """A convex nonlinear constraint compiled from Pyomo: min c.x s.t. sum x_j^2 <= 2."""
    import pyomo.environ as pyo

    c = np.array([1.0, -2.0, 0.5])
    M = pyo.ConcreteModel()
    M.x = pyo.Var(range(3), initialize=0.0)
    M.ball = pyo.Constraint(expr=sum(M.x[j] ** 2 for j in range(3)) <= 2.0)
    M.obj = pyo.Objective(expr=sum(float(c[j]) * M.x[j] for j in range(3)))
    seen = []

    def cb(it, x, z, s):
        seen.append(float(np.sum(x ** 2)))

    def noisy(x, rng):
        return c + 0.2 * rng.normal(size=3)

    res = pyo.SolverFactory("ipsa").solve(M, oracle=noisy, max_iter=3000, k0=1.0, step_power=0.7, callback=cb)
    x = np.array([pyo.value(M.x[j]) for j in range(3)])
    x_star = -np.sqrt(2.0) * c / np.linalg.norm(c)
    assert np.max(np.abs(x - x_star)) < 0.05
    assert max(seen) < 2.0 and res.varopt_result.iterations == 3000


def test_a1a_online_logistic_accuracy():
    from conftest import data_dir
    from sklearn.datasets import load_svmlight_file

    d = data_dir("a1a")
    X, y = load_svmlight_file(str(d / "a1a"), n_features=123)
    Xt, yt = load_svmlight_file(str(d / "a1a.t"), n_features=123)
    est = L1LogisticRegression(alpha=1e-3, passes=1, k0=1.0).fit(X, y)
    acc = np.mean(est.predict(Xt[:5000]) == yt[:5000])
    base = max(np.mean(yt[:5000] == 1), np.mean(yt[:5000] == -1))
    assert acc > base + 0.05  # one on-line pass beats the majority class (76 %) clearly
    assert est.coef_.shape == (123,)


def test_abs_constraints_are_the_box_form():
    """`cp.abs(w) <= u` (CVXPY) and `abs(w[j]) <= u[j]` (Pyomo) are the box form -u <= w <= u of
    Carbonetto (2009, 2.64); ipsa rejected them as nonsmooth. Now they are two linear rows each:
    the optimum is Clarabel's lasso optimum and the loaded point satisfies |w| <= u."""
    import cvxpy as cp
    import pyomo.environ as pyo
    rng = np.random.default_rng(0)
    n, d = 60, 4
    X = rng.normal(size=(n, d))
    y = X @ np.array([1.0, -1.0, 0.0, 0.0]) + 0.1 * rng.normal(size=n)
    w = cp.Variable(d)
    ref = cp.Problem(cp.Minimize(cp.sum_squares(y - X @ w) / (2 * n) + 0.1 * cp.norm1(w)))
    ref.solve(solver="CLARABEL")
    opts = dict(batch_size=n, hessian="exact", step_power=0, max_iter=300, kkt_tol=1e-10)
    w = cp.Variable(d)
    u = cp.Variable(d)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(y - X @ w) / (2 * n) + 0.1 * cp.sum(u)), [cp.abs(w) <= u])
    val = prob.solve(method="ipsa", **opts)
    assert abs(val - ref.value) <= 1e-7 and abs(prob.value - val) <= 1e-12
    assert np.all(np.abs(w.value) < u.value)            # strictly inside, as every ipsa iterate
    m = pyo.ConcreteModel()
    J = range(d)
    m.w = pyo.Var(J)
    m.u = pyo.Var(J)
    m.c = pyo.Constraint(J, rule=lambda m, j: abs(m.w[j]) <= m.u[j])
    m.o = pyo.Objective(expr=sum((y[i] - sum(X[i, j] * m.w[j] for j in J)) ** 2 for i in range(n)) / (2 * n)
                        + 0.1 * sum(m.u[j] for j in J))
    pyo.SolverFactory("ipsa").solve(m, **opts)
    assert abs(pyo.value(m.o) - ref.value) <= 1e-7
