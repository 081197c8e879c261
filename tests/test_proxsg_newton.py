"""proxsg PN internals: the Lanczos bound on lambda_max, the working set on wide L1 problems against
CVXPY + Clarabel, the rank shortcut of the certificate, and Expression.hessian_rank_bound."""
import numpy as np
import pytest
import scipy.sparse as sp

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402,F401
from varopt.program import AtomGroup, Expression, LseGroup  # noqa: E402
from varopt.solvers.proxsg import newton as N  # noqa: E402


@pytest.mark.parametrize("rank", [5, 60, 400])
@pytest.mark.parametrize("seed", range(3))
def test_lambda_max_is_a_tight_upper_bound(seed, rank):
    """Above LANCZOS_N the Lanczos value plus its residual is >= the largest eigenvalue (a safe FISTA
    Lipschitz constant) and within 1e-6 of it, for full-rank, low-rank and clustered spectra."""
    rng = np.random.default_rng(seed)
    n = N.LANCZOS_N + 100
    B = rng.normal(size=(rank, n)) * rng.uniform(0.1, 3.0, size=(rank, 1))
    H = B.T @ B
    if seed == 2:
        H = H + 50.0 * np.eye(n)  # a spectrum clustered at its bottom
    top = np.linalg.eigvalsh(H)[-1]
    L = N.lambda_max(H)
    assert top <= L <= top * (1 + 1e-6)


def _wide_logistic(seed, m, n, lam, nonneg=False, l2=0.0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, n))
    beta = np.zeros(n)
    beta[:5] = rng.normal(size=5) * 2
    yy = np.where(Z @ beta + 0.3 * rng.normal(size=m) > 0, 1.0, -1.0)
    w = cp.Variable(n, nonneg=nonneg)
    f = cp.sum(cp.logistic(-cp.multiply(yy, Z @ w))) / m + lam * cp.norm1(w)
    if l2:
        f = f + l2 * cp.sum_squares(w)
    return cp.Problem(cp.Minimize(f)), w


@pytest.mark.parametrize("nonneg, l2", [(False, 0.0), (True, 0.0), (False, 0.01)])
def test_pn_working_set_on_a_wide_problem_matches_clarabel(nonneg, l2):
    """m = 40 < n = 450 (> LANCZOS_N): the working set starts at the gradient's violators, ends at the
    support; the answer is Clarabel's. Without an elastic-net term the Hessian is singular everywhere
    (rank <= 40), which the certificate recognises without forming it; with one it is formed."""
    prob, w = _wide_logistic(11, 40, 450, 0.03, nonneg, l2)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    ref, wr = prob.value, w.value.copy()
    w.value = None
    val = prob.solve(method="proxsg", variant="PN", kkt_tol=1e-10)
    r = prob.varopt_result
    assert r.status == "converged"
    assert abs(val - ref) <= 1e-8  # measured 1e-13 .. 1e-12
    assert np.max(np.abs(w.value - wr)) <= 1e-4
    sizes = r.info["working_set_sizes"]
    assert max(sizes) < 450 and sizes[-1] <= r.info["support_size"] + 5
    if nonneg:
        assert (w.value >= 0).all()
    if l2:
        assert "hessian_singular" not in r.info and r.info["gap_estimate"] is not None
    else:
        assert r.info["hessian_singular"] and r.info["gap_estimate"] is None


def test_hessian_rank_bound_bounds_the_numerical_rank():
    rng = np.random.default_rng(2)
    n = 20
    A = sp.csr_matrix(rng.normal(size=(4, n)))
    A2 = sp.csr_matrix(np.abs(rng.normal(size=(3, n))))
    data = sp.csr_matrix(rng.normal(size=(5, n)))
    L = sp.vstack([sp.csr_matrix((5, n)), data]).tocsr()[np.ravel(np.column_stack([np.arange(5), 5 + np.arange(5)]))]
    e = Expression(n, atoms=[AtomGroup("exp", np.ones(4), A, np.zeros(4)),
                             AtomGroup("quad_over_lin", np.ones(3), A2, np.zeros(3), A2=A2, b2=np.ones(3))],
                   lse=[LseGroup(L, np.zeros(10), np.repeat(np.arange(5), 2), np.ones(5))])
    assert e.hessian_rank_bound() == 4 + 6 + 5  # the logistic's empty exp(0) rows do not count
    for _ in range(5):
        x = rng.uniform(0.1, 0.5, n)
        assert np.linalg.matrix_rank(e.hessian(x, dense=True)) <= e.hessian_rank_bound()
    mult = AtomGroup("exp", np.ones(2), A[:2], np.zeros(2), mult=np.array([0, -1]))
    assert mult.hessian_rank_bound() == n  # multiplier cross terms: no bound claimed
