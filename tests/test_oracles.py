"""The oracle package: protocol, import boundary, common random numbers."""
import ast
import pathlib

import numpy as np
import scipy.sparse as sp

from varopt.oracles import FiniteSumOracle, Oracle, Sampler, StreamOracle, UserOracle


def test_old_ipsa_path_reexports_the_same_classes():
    from varopt.solvers import ipsa
    from varopt.solvers.ipsa import oracles as old
    assert ipsa.FiniteSumOracle is FiniteSumOracle and old.Sampler is Sampler
    assert ipsa.StreamOracle is StreamOracle and ipsa.UserOracle is UserOracle and ipsa.Oracle is Oracle


def test_oracles_package_imports_no_solver_or_frontend():
    root = pathlib.Path(__file__).resolve().parents[1] / "varopt" / "oracles"
    banned = ("pyomo", "cvxpy", "varopt.frontends", "varopt.solvers")
    for f in root.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                # relative ".." from varopt/oracles/ is varopt itself
                names = [("varopt." if node.level == 2 else "") + (node.module or "")]
            else:
                continue
            for n in names:
                assert not n.startswith(banned), f"{f.name} imports {n}"


def test_user_oracle_common_random_numbers():
    o = UserOracle(lambda x, rng: x + rng.standard_normal(x.size))
    o.start(np.random.default_rng(0), 1, "uniform")
    b1, b2 = o.next_batch(), o.next_batch()
    x = np.zeros(3)
    np.testing.assert_allclose(o.gradient(x, b1) - x, o.gradient(x + 1.0, b1) - (x + 1.0), rtol=0, atol=1e-12)
    assert not np.allclose(o.gradient(x, b1), o.gradient(x, b2))


def test_sampler_permutation_visits_every_sample_once_per_pass():
    s = Sampler(7, 3, "permutation", np.random.default_rng(1))
    seen = np.concatenate([s.next() for _ in range(7)])  # 21 = three passes
    for p in range(3):
        assert sorted(seen[7 * p:7 * p + 7]) == list(range(7))


def test_gaussian_oracle_matches_closed_form_of_a_quadratic():
    from varopt.oracles.gaussian import GaussianOracle
    rng = np.random.default_rng(3)
    n, K = 3, 40000
    A = rng.standard_normal((n, n)); A = A @ A.T + np.eye(n)
    b, m = rng.standard_normal(n), rng.standard_normal(n)
    C = rng.standard_normal((n, n)); S = C @ C.T / n + 0.5 * np.eye(n)
    fn = lambda X: (0.5 * np.einsum("ki,ij,kj->k", X, A, X) + X @ b, X @ A + b)
    o = GaussianOracle(fn, n, n_draws=K)
    v, gm, gS = o.estimate(m, S, 11)
    # closed forms: E f = tr(AS)/2 + m'Am/2 + b'm, d/dm = Am + b, d/dS = A/2.
    # Each estimate is a mean of K iid terms, so its error has sd ~ spread/sqrt(K) with spread
    # of order |A| |S| here (~10); 8/sqrt(K) * that scale is > 5 sd and far below a wrong formula.
    tol = 8 * np.linalg.norm(A) * max(1.0, np.linalg.norm(S)) / np.sqrt(K)
    assert abs(v - (np.trace(A @ S) / 2 + m @ A @ m / 2 + b @ m)) < tol * (1 + np.linalg.norm(m))
    np.testing.assert_allclose(gm, A @ m + b, atol=tol)
    np.testing.assert_allclose(gS, A / 2, atol=tol)
    # reproducible from the seed, common random numbers across (m, S)
    np.testing.assert_array_equal(o.estimate(m, S, 11)[1], gm)
    np.testing.assert_allclose(o.estimate(m + 1.0, S, 11)[1] - gm, A @ np.ones(n), atol=1e-9)
    import pytest
    with pytest.raises(ValueError, match="positive definite"):
        o.estimate(m, -S, 1)
    with pytest.raises(ValueError, match="m contains NaN"):
        o.estimate(np.full(n, np.nan), S, 1)


def test_bound_oracle_is_a_gradient_oracle_and_bounds_log_z():
    """A bound oracle (here Algorithm 1 on random log-sum-exp groups) is also an exact gradient oracle:
    gradient = mu = finite differences of log Z; value = log Z; and the quadratic bound holds."""
    import scipy.sparse as sp
    from scipy.special import logsumexp
    from varopt.oracles import BoundOracle
    from varopt.solvers.majorize.bound import compute_bound
    rng = np.random.default_rng(7)
    n, K = 4, 6
    A = rng.normal(size=(K, n))
    b = rng.normal(size=K)
    seg = np.array([0, 0, 0, 1, 1, 1])

    def log_z(t):
        s = A @ t + b
        return logsumexp(s[:3]) + logsumexp(s[3:])

    def fn(theta, want_sigma):
        parts = compute_bound(sp.csr_matrix(A), b, seg, theta, want_mu=True)  # Sigma = R^T R
        return float(np.sum(parts.logz)), np.asarray(parts.mu).sum(axis=0), \
            ((parts.R.T @ parts.R).toarray() if want_sigma else None)
    o = BoundOracle(fn, n)
    theta = rng.normal(size=n)
    assert o.exact and abs(o.value(theta) - log_z(theta)) < 1e-12
    h = 1e-6
    fd = np.array([(log_z(theta + h * e) - log_z(theta - h * e)) / (2 * h) for e in np.eye(n)])
    np.testing.assert_allclose(o.gradient(theta, None), fd, atol=1e-8)
    lz, mu, S = o.bound(theta, True)
    for _ in range(50):
        D = 3 * rng.normal(size=n)
        assert log_z(theta + D) <= lz + D @ mu + 0.5 * D @ S @ D + 1e-10
    import pytest
    from varopt.errors import InputDataError, InvalidOptionError
    with pytest.raises(InvalidOptionError, match="partition_bound"):
        BoundOracle(42, n)
    with pytest.raises(InputDataError, match="length"):
        BoundOracle(lambda t, w: (0.0, np.zeros(n + 1), None), n).gradient(theta)


def test_a_penalty_on_coordinates_is_the_finite_sums_quadratic_term_not_samples():
    """``lam * sum_j w_j**2`` as both front-ends emit it (``square`` rows of single coordinates, b = 0) is part of the
    deterministic ``d``: Pyomo's model has N samples (it had N + m: each penalty row was a sample of its own), CVXPY's
    labels no longer tie penalty row j to data point j; every single-sample estimate stays unbiased (their mean is
    the exact gradient) and the full batch is exact. Data rows with one feature but an offset, rows with a multiplier
    variable and a negatively weighted square stay samples."""
    import cvxpy as cp
    import pyomo.environ as pyo
    from varopt.frontends import compile_model
    from varopt.oracles.finite_sum import _coordinate_squares
    from varopt.program import AtomGroup
    rng = np.random.default_rng(5)
    N, m, lam = 15, 3, 0.7
    X, y = rng.standard_normal((N, m)), np.sign(rng.standard_normal(N))
    M = pyo.ConcreteModel()
    M.w = pyo.Var(range(m), initialize=0)
    M.o = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-y[i] * sum(X[i, j] * M.w[j] for j in range(m))))
                                 for i in range(N)) + lam * sum(M.w[j] ** 2 for j in range(m)))
    w = cp.Variable(m)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w))) + lam * cp.sum_squares(w)))
    x = rng.standard_normal(m)
    for model in (M, prob):
        P, _ = compile_model(model)
        orc = FiniteSumOracle(P.objective)
        assert orc.n_samples == N
        np.testing.assert_allclose(orc.Q.toarray(), 2 * lam * np.eye(m), rtol=1e-14)
        orc.start(np.random.default_rng(0), 1, "cyclic")
        mean = np.mean([orc.gradient(x, np.array([i])) for i in range(N)], axis=0)
        np.testing.assert_allclose(mean, P.objective.gradient(x), rtol=1e-10)
        np.testing.assert_allclose(orc.gradient(x, np.arange(N)), P.objective.gradient(x), rtol=1e-12)
    one = sp.csr_matrix(np.eye(2))
    assert _coordinate_squares(AtomGroup("square", [1.0, 1.0], one, [0.0, -1.0])) is None      # an offset: data
    assert _coordinate_squares(AtomGroup("square", [1.0, -1.0], one, [0.0, 0.0])) is None      # concave part
    assert _coordinate_squares(AtomGroup("square", [1.0, 1.0], one, [0.0, 0.0], mult=[0, -1])) is None
    assert _coordinate_squares(AtomGroup("abs", [1.0, 1.0], one, [0.0, 0.0])) is None
    assert _coordinate_squares(AtomGroup("square", [1.0], sp.csr_matrix(np.ones((1, 2))), [0.0])) is None
    D = _coordinate_squares(AtomGroup("square", [0.5, 2.0, 1.0], sp.csr_matrix(np.array([[3.0, 0], [0, 1], [1, 0]])),
                                      [0.0, 0.0, 0.0]))
    np.testing.assert_allclose(D.toarray(), np.diag([2 * 0.5 * 9 + 2 * 1.0, 2 * 2.0]))
