"""Hypothesis properties of the majorize bounds (seed 003: Theorem 1, Algorithms 1, 3, 4).

Case counts (max_examples): 3000 + 2000 + 1500 + 1500 + 2000 + 300 = 10,300 examples, several random
directions each; magnitudes of scores range over ~1e-6 .. 1e4 (alpha from e^-1e4 to e^1e4).
"""
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from scipy.special import logsumexp

from varopt.solvers.majorize.bound import compute_bound, compute_bound_reference, log_bound_value, omega
from varopt.solvers.majorize.junction_tree import (chain_bound, chain_curvature, chain_enumerate, tree_bound,
                                                   tree_enumerate)
from varopt.solvers.majorize.lowrank import LowRankSigma

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
scales = st.sampled_from([1e-6, 1e-2, 1.0, 10.0, 100.0, 1e3, 1e4])


@st.composite
def problems(draw, max_n=8, max_d=4):
    n = draw(st.integers(1, max_n))
    d = draw(st.integers(1, max_d))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    fscale, tscale, hscale = draw(scales), draw(scales), draw(scales)
    F = rng.normal(size=(n, d)) * fscale
    logh = rng.normal(size=n) * hscale
    theta = rng.normal(size=d) * tscale
    return F, logh, theta, rng


@settings(max_examples=3000, **FAST)
@given(problems())
def test_bound_upper_bounds_log_partition(prob):
    """Theorem 1 in log space: log z + 1/2 D'Sigma D + D'mu >= log Z(theta~ + D), no overflow/NaN."""
    F, logh, theta, rng = prob
    bp = compute_bound(F, logh, np.zeros(len(F), int), theta, want_mu=True)
    Sig = bp.sigma()
    assert np.isfinite(bp.logz).all() and np.isfinite(Sig).all() and np.isfinite(bp.mu).all()
    assert np.isclose(bp.logz[0], logsumexp(F @ theta + logh), rtol=1e-12, atol=1e-12)
    for D in [np.zeros(theta.size)] + [rng.normal(size=theta.size) * s for s in (1e-3, 0.1, 1, 10)]:
        lb = log_bound_value(bp.logz[0], bp.mu[0], Sig, D)
        lz = logsumexp(F @ (theta + D) + logh)
        assert np.isfinite(lb)
        assert lb >= lz - 1e-10 * max(1.0, abs(lz), abs(lb))


@settings(max_examples=2000, **FAST)
@given(problems(max_n=6, max_d=3))
def test_vectorized_equals_literal_algorithm_1(prob):
    F, logh, theta, _ = prob
    bp = compute_bound(F, logh, np.zeros(len(F), int), theta, want_mu=True)
    order = np.argsort(-(F @ theta + logh), kind="stable")
    lz, mu, S = compute_bound_reference(F[order], logh[order], theta)
    assert abs(bp.logz[0] - lz) <= 1e-12 * max(1, abs(lz))
    assert np.allclose(bp.mu[0], mu, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(F).max()))
    assert np.allclose(bp.sigma(), S, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(S).max()))


@settings(max_examples=500, **FAST)
@given(st.integers(1, 5), st.integers(1, 3), st.integers(0, 2 ** 32 - 1), st.sampled_from([0.1, 1.0, 5.0, 50.0]))
def test_junction_tree_matches_algorithm_1_on_enumerable_trees(n, K, seed, scale):
    """Algorithm 3 on a random tree: z and mu equal Algorithm 1 on the enumerated Omega to 1e-10, the
    bound is >= log Z, and on a chain topology it equals the chain oracle."""
    rng = np.random.default_rng(seed)
    parent = np.array([-1] + [int(rng.integers(0, t)) for t in range(1, n)])
    perm = rng.permutation(n)  # arbitrary node numbering
    inv = np.argsort(perm)
    parent = np.array([-1 if parent[perm[t]] < 0 else inv[parent[perm[t]]] for t in range(n)])
    S = rng.normal(size=(1, n, K)) * scale
    Tr = rng.normal(size=(K, K)) * scale
    lz, mu, M = tree_bound(S, Tr, parent)
    F, th = tree_enumerate(S[0], Tr, parent)
    bp = compute_bound(F, np.zeros(len(F)), np.zeros(len(F), int), th, want_mu=True)
    assert abs(lz[0] - bp.logz[0]) <= 1e-10 * max(1.0, abs(bp.logz[0]))
    assert np.max(np.abs(mu[0] - bp.mu[0])) <= 1e-10
    for s in (0.01, 0.3, 2.0):
        D = rng.normal(size=th.size) * s
        lZ = logsumexp(F @ (th + D))
        assert log_bound_value(lz[0], mu[0], M[0], D) >= lZ - 1e-10 * max(1.0, abs(lZ))
    lc, mc, Mc = chain_bound(S, Tr)
    lt, mt, Mt = tree_bound(S, Tr, np.arange(n) - 1)
    assert np.allclose(lc, lt, atol=1e-12) and np.allclose(mc, mt, atol=1e-12) and np.allclose(Mc, Mt, atol=1e-10)


@settings(max_examples=1500, **FAST)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(0, 2 ** 32 - 1), st.sampled_from([0.1, 1.0, 5.0, 50.0]))
def test_junction_tree_matches_algorithm_1_on_enumerable_chains(T, K, seed, scale):
    """Algorithm 3 on a chain: z and mu equal Algorithm 1 on the enumerated Omega to 1e-10; Sigma equals it for
    one clique (T = 1) and is a valid bound otherwise."""
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(1, T, K)) * scale
    Tr = rng.normal(size=(K, K)) * scale
    lz, mu, M = chain_bound(S, Tr)
    F, th = chain_enumerate(S[0], Tr)
    bp = compute_bound(F, np.zeros(len(F)), np.zeros(len(F), int), th, want_mu=True)
    assert abs(lz[0] - bp.logz[0]) <= 1e-10 * max(1.0, abs(bp.logz[0]))
    assert np.max(np.abs(mu[0] - bp.mu[0])) <= 1e-10
    if T == 1:
        assert np.max(np.abs(M[0] - bp.sigma())) <= 1e-10 * max(1.0, np.abs(M[0]).max())
    for s in (0.01, 0.3, 2.0):
        D = rng.normal(size=th.size) * s
        lZ = logsumexp(F @ (th + D))
        assert log_bound_value(lz[0], mu[0], M[0], D) >= lZ - 1e-10 * max(1.0, abs(lZ))


@settings(max_examples=600, **FAST)
@given(st.integers(1, 2), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2 ** 32 - 1),
       st.sampled_from([1e-3, 1.0, 5.0, 50.0, 1e3]))
def test_forward_backward_equals_algorithm_1_on_enumerable_chains(B, T, K, seed, scale):
    """The value/gradient path of chain_bound (want_sigma=False: forward-backward) on a batch: log Z and mu equal
    Algorithm 1 on each enumerated chain to 1e-10 relative, and the junction-tree path's to 1e-10."""
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(B, T, K)) * scale
    Tr = rng.normal(size=(K, K)) * scale
    lz, mu, M = chain_bound(S, Tr, want_sigma=False)
    assert M is None and lz.shape == (B,) and mu.shape == (B, T * K + K * K)
    lj, mj, _ = chain_bound(S, Tr)
    for b in range(B):
        F, th = chain_enumerate(S[b], Tr)
        bp = compute_bound(F, np.zeros(len(F)), np.zeros(len(F), int), th, want_mu=True)
        tol = 1e-10 * max(1.0, abs(bp.logz[0]))
        assert abs(lz[b] - bp.logz[0]) <= tol and abs(lz[b] - lj[b]) <= tol
        assert np.max(np.abs(mu[b] - bp.mu[0])) <= 1e-10 and np.max(np.abs(mu[b] - mj[b])) <= 1e-10


@settings(max_examples=400, **FAST)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2 ** 32 - 1),
       st.sampled_from([1e-3, 1.0, 5.0, 50.0, 1e3]))
def test_projected_junction_tree_curvature_equals_the_dense_one(B, T, K, m, seed, scale):
    """chain_curvature (the projected recursion, no D x D matrix) gives W^T M W of chain_bound's M to 1e-10
    relative on a batch, for m random directions; and it bounds log Z on the subspace (enumeration)."""
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(B, T, K)) * scale
    Tr = rng.normal(size=(K, K)) * scale
    D = T * K + K * K
    W = rng.normal(size=(B, D, m))
    Q = chain_curvature(S, Tr, W)
    lz, mu, M = chain_bound(S, Tr)
    ref = np.einsum("bdi,bde,bej->bij", W, M, W)
    assert Q.shape == (B, m, m)
    assert np.max(np.abs(Q - ref)) <= 1e-10 * max(1.0, np.abs(ref).max())
    F, th = chain_enumerate(S[0], Tr)
    for s in (0.01, 0.3, 2.0):
        a = rng.normal(size=m) * s
        Da = W[0] @ a
        lZ = logsumexp(F @ (th + Da))
        assert lz[0] + Da @ mu[0] + 0.5 * a @ Q[0] @ a >= lZ - 1e-10 * max(1.0, abs(lZ))


@settings(max_examples=1500, **FAST)
@given(st.integers(1, 25), st.integers(1, 12), st.integers(1, 6), st.integers(0, 2 ** 32 - 1), scales)
def test_lowrank_dominates_full_sigma(nrows, d, k, seed, scale):
    """Algorithm 4 (with Lemma 3 absorption): V'SV + D - sum r r' is PSD (min eigenvalue >= -1e-10 relative)."""
    rng = np.random.default_rng(seed)
    R = rng.normal(size=(nrows, d)) * scale
    if rng.random() < 0.3:
        R[:, : d // 2] = 0.0  # sparse-ish rows
    D0 = np.abs(rng.normal(size=d)) * rng.choice([0.0, 1.0])
    L = LowRankSigma(d, k, D0).add_rows(R)
    full = R.T @ R + np.diag(D0)
    diff = L.dense() - full
    ev = np.linalg.eigvalsh(0.5 * (diff + diff.T)).min()
    assert ev >= -1e-10 * max(1.0, np.abs(full).max())
    assert L.V.shape[0] <= k
    # the Woodbury solve agrees with a dense solve when the diagonal is positive
    if np.all(L.D > 1e-8 * max(1.0, np.abs(full).max())):
        u = rng.normal(size=d)
        x = L.solve(u)
        assert np.allclose(L.dense() @ x, u, rtol=1e-6, atol=1e-6 * np.abs(u).max())


@settings(max_examples=2000, **FAST)
@given(st.floats(-1e300, 1e300, allow_nan=False))
def test_omega_properties(r):
    w = omega(np.array([r]))[0]
    assert 0.0 <= w <= 0.25 and np.isfinite(w)
    if abs(r) > 1e-3 and abs(r) < 1e300:
        assert np.isclose(w, np.tanh(abs(r) / 2) / (2 * abs(r)), rtol=1e-12, atol=0)


@settings(max_examples=300, **FAST)
@given(st.integers(1, 6), st.integers(2, 4), st.integers(0, 2 ** 32 - 1), st.sampled_from([0, 1, 2]),
       st.sampled_from([1e-2, 1.0, 10.0]))
def test_row_space_woodbury_solves_the_bound_system(G, cmax, seed, nfree, scale):
    """The matrix-free Woodbury step: (diag(Dg) + F'T'TF) x = u, x'Sigma x and the score image F x (within
    its rounding bound), for unequal (padded) partition functions with h = 0 rows and unpenalized
    coordinates, regularization from 1e-6 to 1."""
    from varopt.solvers.majorize.groups import PaddedGroups
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, cmax + 1, size=G)
    sizes[0] = cmax
    seg = np.repeat(np.arange(G), sizes)
    K = seg.size
    d = 3 * K + nfree
    A = rng.normal(size=(K, d)) * scale
    b = rng.normal(size=K)
    first = np.r_[0, np.cumsum(sizes)[:-1]]
    zero = rng.random(K) < 0.2
    zero[first] = False
    b[zero] = -np.inf
    pg = PaddedGroups(A, b, seg, rng.random(G) + 0.5)
    Dg = (rng.random(d) + 0.1) * rng.choice([1e-6, 1e-3, 1.0])
    Dg[rng.choice(d, nfree, replace=False)] = 0.0
    th, cv = rng.normal(size=d), rng.normal(size=d)
    S = pg.scores(th)
    _, W = pg.value_weights(S)
    T = pg.factors(S)
    R = pg.rows(T)
    Sig = np.diag(Dg) + R.T @ R
    u = cv + Dg * th + pg.gradient(W)
    if nfree:  # keep u in the range of Sigma (an unpenalized direction may be flat)
        lam, U = np.linalg.eigh(Sig)
        flat = U[:, lam < 1e-9 * lam[-1]]
        u = u - flat @ (flat.T @ u)
    x, q, Fx, Fx_err, res = pg.woodbury_solve(T, Dg, u)
    tol = 1e-7 * max(1.0, np.abs(Sig).max()) * max(1.0, np.abs(x).max())
    assert np.allclose(Sig @ x, u, atol=tol)
    assert np.isclose(q, x @ Sig @ x, rtol=1e-8, atol=tol)
    # the free score image is within its (typical-growth) rounding bound of the exact product
    live = np.isfinite(pg.logh).ravel()
    exact = pg.Apad @ x
    assert np.all(np.abs(Fx.ravel() - exact)[live] <= 10 * Fx_err.ravel()[live] + 1e-14 * np.abs(exact).max())
