"""proxsg FBS outputs: the uniformly random visited point (variant FU, Honorio 2012 Theorem 8) and the
sparsified average (option sparsify='prox'); independent recomputation from the same sample stream."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402,F401
from varopt.errors import InvalidOptionError  # noqa: E402


def _lasso(seed=0, m=60, n=15, lam=0.05):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, n))
    xt = np.where(rng.random(n) < 0.3, rng.normal(size=n), 0.0)
    y = A @ xt + 0.5 * rng.normal(size=m)
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(A @ x - y) / (2 * m) + lam * cp.norm1(x)))
    return prob, x, (A, y, lam)


def _f(A, y, lam, z):
    return float(np.sum((A @ z - y) ** 2) / (2 * A.shape[0]) + lam * np.abs(z).sum())


def test_random_point_is_a_visited_point_and_index_is_uniform():
    prob, x, _ = _lasso()
    opts = dict(schedule="constant", samples=6, seed=3)
    prob.solve(method="proxsg", variant="FU", max_iter=40, **opts)
    res = prob.varopt_result
    k = res.info["random_index"]
    assert 1 <= k <= 40
    np.testing.assert_array_equal(x.value, res.info["random"])
    # x_k is FL's output after k - 1 iterations: the gradient stream does not depend on the pick
    if k > 1:
        x.value = None  # the model's values are the next solve's start
        prob.solve(method="proxsg", variant="FL", max_iter=k - 1, kkt_tol=0.0, **opts)
        np.testing.assert_allclose(res.info["random"], x.value, rtol=0, atol=1e-13)
    else:
        assert not np.any(res.info["random"])  # x_1 = x0 = 0
    # FB from the same seed gives the same average, last point and random point (separate stream)
    x.value = None
    prob.solve(method="proxsg", variant="FB", max_iter=40, **opts)
    fb = prob.varopt_result.info
    np.testing.assert_array_equal(fb["random"], res.info["random"])
    np.testing.assert_array_equal(fb["last"], res.info["last"])
    # the index is uniform on 1..K (reservoir sampling): chi-square over 300 seeds, K = 5
    small, _, _ = _lasso(seed=1, m=20, n=3)
    counts = np.zeros(5)
    for seed in range(300):
        small.variables()[0].value = None
        small.solve(method="proxsg", variant="FU", max_iter=5, history_objective=False, seed=seed)
        counts[small.varopt_result.info["random_index"] - 1] += 1
    chi2 = float(((counts - 60.0) ** 2 / 60.0).sum())
    assert chi2 < 18.5, counts  # 4 degrees of freedom: P(chi2 > 18.5) < 0.001


def test_sparsify_prox_is_the_prox_of_the_average_within_the_bound():
    prob, x, (A, y, lam) = _lasso(seed=2, lam=0.3)
    opts = dict(variant="FB", schedule="constant", samples=5, max_iter=300, seed=5)
    prob.solve(method="proxsg", **opts)
    avg = prob.varopt_result.info["average"]
    np.testing.assert_array_equal(x.value, avg)
    x.value = None
    prob.solve(method="proxsg", sparsify="prox", **opts)
    info = prob.varopt_result.info
    np.testing.assert_array_equal(info["unsparsified"], avg)
    eta = info["step0"] / 301 ** 0.5
    assert info["sparsify_step"] == pytest.approx(eta, rel=1e-14)
    soft = np.sign(avg) * np.maximum(np.abs(avg) - eta * lam, 0.0)  # independent soft-threshold
    np.testing.assert_allclose(x.value, soft, rtol=0, atol=1e-15)
    assert np.count_nonzero(x.value) < np.count_nonzero(avg)
    assert np.all((x.value != 0) <= (avg != 0)) and info["support_size"] == np.count_nonzero(x.value)
    # f(p) - f(avg) <= eta G^2 / 2 with G the largest smooth gradient on the segment [avg, p]
    grad = lambda z: A.T @ (A @ z - y) / A.shape[0]  # noqa: E731
    G = max(np.linalg.norm(grad(avg + t * (soft - avg))) for t in np.linspace(0, 1, 101))
    assert _f(A, y, lam, soft) - _f(A, y, lam, avg) <= 0.5 * eta * G * G + 1e-12
    assert prob.varopt_result.objective == pytest.approx(_f(A, y, lam, soft), rel=1e-12)
    # sparsify='gradient' from the same run: same average, sparser than it
    x.value = None
    prob.solve(method="proxsg", sparsify="gradient", **opts)
    np.testing.assert_array_equal(prob.varopt_result.info["unsparsified"], avg)
    assert np.count_nonzero(x.value) < np.count_nonzero(avg)


def test_sparsify_validation():
    prob, _, _ = _lasso(m=20, n=3)
    with pytest.raises(InvalidOptionError, match="sparsify"):
        prob.solve(method="proxsg", variant="PA", sparsify="prox")
    with pytest.raises(InvalidOptionError, match="sparsify"):
        prob.solve(method="proxsg", variant="FL", schedule="constant", samples=3, sparsify="prox")
    with pytest.raises(InvalidOptionError):
        prob.solve(method="proxsg", variant="FB", sparsify="threshold")


def test_estimator_sparse_outputs():
    from varopt.estimators.sparse_ising import SparseIsing
    rng = np.random.default_rng(0)
    S = np.where(rng.random((60, 6)) < 0.5, 1.0, -1.0)
    S[:, 1] = np.where(rng.random(60) < 0.8, S[:, 0], -S[:, 0])
    common = dict(rho=0.1, gradient="gibbs", samples=30, max_iter=200, seed=1)
    dense = SparseIsing(variant="FB", **common).fit(S)
    sparse = SparseIsing(variant="FB", sparsify="prox", **common).fit(S)
    rand = SparseIsing(variant="FU", **common).fit(S)
    np.testing.assert_array_equal(sparse.result_.info["unsparsified"], dense.theta_)
    assert sparse.adjacency_.sum() <= dense.adjacency_.sum()
    grad = SparseIsing(variant="FB", sparsify="gradient", **common).fit(S)
    np.testing.assert_array_equal(grad.result_.info["unsparsified"], dense.theta_)
    assert grad.adjacency_.sum() < dense.adjacency_.sum()
    np.testing.assert_array_equal(rand.theta_, dense.result_.info["random"])
    assert np.array_equal(rand.adjacency_, rand.coef_ != 0) and not np.diag(rand.adjacency_).any()
    with pytest.raises(InvalidOptionError, match="sparsify"):
        SparseIsing(gradient="exact", sparsify="prox").fit(S)


def test_sparsify_gradient_step_from_the_average_with_the_suffix_gradient_mean():
    prob, x, (A, y, lam) = _lasso(seed=3, lam=0.2)
    K = 300
    seen = []
    # exact gradients: g_k = grad g(x_k) can be recomputed from the visited points x_1 = 0, x_2, ...
    step = 1.0 / np.linalg.eigvalsh(A.T @ A / A.shape[0])[-1]
    prob.solve(method="proxsg", variant="FB", sparsify="gradient", max_iter=K, r=0.0, step=step, average="suffix",
               callback=lambda k, z: seen.append(np.array(z)))
    info = prob.varopt_result.info
    pts = [np.zeros(A.shape[1])] + seen[:-1]
    grad = lambda z: A.T @ (A @ z - y) / A.shape[0]  # noqa: E731
    lo = 2 ** (int(np.log2(K)) - 1)  # 'last half' window: points lo..K (two windows restarted at powers of 2)
    gbar = np.mean([grad(p) for p in pts[lo - 1:]], axis=0)
    np.testing.assert_allclose(info["average_gradient"], gbar, rtol=1e-10, atol=1e-12)
    eta, a = info["sparsify_step"], info["unsparsified"]
    assert eta == info["step0"]
    v = a - eta * gbar
    np.testing.assert_allclose(x.value, np.sign(v) * np.maximum(np.abs(v) - eta * lam, 0.0), rtol=0, atol=1e-12)
    # near the optimum it is a proximal-gradient step: the optimum's support (Clarabel) is recovered
    out = x.value.copy()
    x.value = None
    prob.solve(solver="CLARABEL")
    np.testing.assert_array_equal(out != 0, np.abs(x.value) > 1e-6)
