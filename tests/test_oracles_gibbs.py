"""GibbsOracle against brute-force enumeration of all 2^n states of tiny pairwise binary models.

The reference moments are exact sums over the 2^n states (log Z by log-sum-exp); they are checked
first against finite differences of the brute-force log Z, so the reference is itself tested.
"""
import itertools
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

from varopt.oracles import GibbsOracle, Oracle


# ---------------------------------------------------------------------------------------------
# brute force
def all_states(n, states):
    B = np.array(list(itertools.product((0, 1), repeat=n)), dtype=float)
    return 2 * B - 1 if states == "spin" else B


def phi_all(n, edges, states):
    X = all_states(n, states)
    E = np.asarray(edges, dtype=int).reshape(-1, 2)
    return np.hstack([X, X[:, E[:, 0]] * X[:, E[:, 1]]])


def log_z(theta, Phi):
    return logsumexp(Phi @ theta)


def moments(theta, Phi):
    """Exact E[phi] and Var[phi] (the diagonal of Cov[phi])."""
    logits = Phi @ theta
    w = np.exp(logits - logsumexp(logits))
    mean = w @ Phi
    return mean, w @ (Phi - mean) ** 2


# ---------------------------------------------------------------------------------------------
# tiny models: a path (tree), a cycle, a complete graph and a random graph
def cycle(n):
    return [(i, (i + 1) % n) for i in range(n)]


def complete(n):
    return list(itertools.combinations(range(n), 2))


def random_graph(n, p, seed):
    rng = np.random.default_rng(seed)
    pairs = [e if rng.random() < 0.5 else e[::-1] for e in complete(n) if rng.random() < p]
    return [tuple(e) for e in pairs]


GRAPHS = {
    "path4": (4, [(0, 1), (1, 2), (2, 3)]),
    "cycle6": (6, cycle(6)),
    "complete5": (5, complete(5)),
    "random8": (8, random_graph(8, 0.35, 7)),
}
CASES = [(g, s) for g in GRAPHS for s in ("spin", "binary")]


def random_theta(n, m, seed, scale=0.4):
    # moderate fields and couplings: the chains mix in a few sweeps, so the burn-in bias is tiny
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(0, scale, n), rng.normal(0, scale, m)])


# Many chains and sweeps for the accuracy tests (each estimate takes ~0.1 s).
N_CHAINS, N_SWEEPS, BURN_IN = 400, 200, 50
# Burn-in bias allowance: with |J| ~ 0.4 the Gibbs sampler forgets its start geometrically fast
# (a handful of sweeps), so after 50 sweeps the bias is far below 1e-3; 0.01 is a generous cap.
BIAS = 0.01


def mc_tolerance(per_chain):
    """5 standard errors of a mean over independent chains + the bias allowance.

    The chains are independent (distinct starts and uniforms), so the per-chain averages
    (C, p) are iid and their spread estimates the standard error of the overall mean, including
    the autocorrelation within each chain. 5 SE: a false failure has probability < 1e-6 per
    component (and the seeds are fixed)."""
    C = per_chain.shape[0]
    return 5.0 * per_chain.std(axis=0, ddof=1) / np.sqrt(C) + BIAS


@pytest.mark.parametrize("graph,states", CASES)
def test_estimate_matches_enumeration_and_can_fail(graph, states):
    n, edges = GRAPHS[graph]
    Phi = phi_all(n, edges, states)
    theta = random_theta(n, len(edges), seed=100 + CASES.index((graph, states)))  # fixed seeds
    o = GibbsOracle(n, edges, states=states, n_chains=N_CHAINS, n_sweeps=N_SWEEPS, burn_in=BURN_IN)
    S = o.samples(theta, batch=123)
    assert S.shape == (N_SWEEPS, N_CHAINS, n + len(edges))
    est = o.estimate(theta, 123)
    np.testing.assert_allclose(est, S.mean(axis=(0, 1)), rtol=0, atol=1e-12)
    tol = mc_tolerance(S.mean(axis=0))
    exact, _ = moments(theta, Phi)
    err = np.abs(est - exact)
    assert (err <= tol).all(), (err.max(), tol[np.argmax(err - tol)])
    # the check can fail: the moments of a perturbed model (theta + 0.5) are far outside the tolerance
    wrong, _ = moments(theta + 0.5, Phi)
    assert (np.abs(est - wrong) > tol).any()
    assert np.abs(est - wrong).max() > 3 * tol.max()


def test_reference_gradient_and_variance_match_finite_differences_of_log_z():
    for graph, states in CASES:
        n, edges = GRAPHS[graph]
        Phi = phi_all(n, edges, states)
        theta = random_theta(n, len(edges), seed=5)
        mean, var = moments(theta, Phi)
        I = np.eye(theta.size)
        eps = 1e-5
        fd1 = np.array([(log_z(theta + eps * e, Phi) - log_z(theta - eps * e, Phi)) / (2 * eps) for e in I])
        np.testing.assert_allclose(fd1, mean, rtol=0, atol=1e-8)
        eps = 1e-4
        fd2 = np.array([(log_z(theta + eps * e, Phi) - 2 * log_z(theta, Phi) + log_z(theta - eps * e, Phi))
                        / eps ** 2 for e in I])
        np.testing.assert_allclose(fd2, var, rtol=0, atol=1e-5)


@pytest.mark.parametrize("graph,states", [("cycle6", "spin"), ("complete5", "binary"), ("random8", "spin")])
def test_hessian_diag_matches_enumerated_variance(graph, states):
    n, edges = GRAPHS[graph]
    Phi = phi_all(n, edges, states)
    theta = random_theta(n, len(edges), seed=11)
    o = GibbsOracle(n, edges, states=states, n_chains=N_CHAINS, n_sweeps=N_SWEEPS, burn_in=BURN_IN)
    assert o.has_hessian_diag
    hd = o.hessian_diag(theta, 9)
    S = o.samples(theta, 9)
    np.testing.assert_allclose(hd, S.reshape(-1, S.shape[-1]).var(axis=0), rtol=0, atol=1e-12)
    # per-chain mean squared deviations from the overall mean are iid across chains; their mean
    # is hd, so their spread gives its standard error (same 5 SE + bias rule as for the mean)
    per_chain = ((S - S.mean(axis=(0, 1))) ** 2).mean(axis=0)
    tol = mc_tolerance(per_chain)
    _, var = moments(theta, Phi)
    assert (np.abs(hd - var) <= tol).all()
    _, wrong = moments(theta + 0.5, Phi)
    assert (np.abs(hd - wrong) > tol).any()


def test_common_random_numbers():
    n, edges = GRAPHS["random8"]
    theta = random_theta(n, len(edges), seed=2)
    o = GibbsOracle(n, edges, n_chains=64, n_sweeps=50, burn_in=20)
    o.start(np.random.default_rng(0), 1, "uniform")
    b1, b2 = o.next_batch(), o.next_batch()
    assert isinstance(b1, int) and 0 <= b1 < 2 ** 62 and b1 != b2
    g = o.gradient(theta, b1)
    np.testing.assert_array_equal(o.gradient(theta, b1), g)                       # bit-identical
    np.testing.assert_array_equal(o.hessian_diag(theta, b1), o.hessian_diag(theta, b1))
    delta = 1e-4 * np.random.default_rng(3).standard_normal(theta.size)
    same_numbers = np.abs(o.gradient(theta + delta, b1) - g).max()
    other_batch = np.abs(o.gradient(theta, b2) - g).max()
    assert other_batch > 0.01                                                     # Monte Carlo noise
    assert same_numbers < 0.2 * other_batch, (same_numbers, other_batch)


def test_data_mean_gradient_and_zero_at_the_moments():
    n, edges = GRAPHS["cycle6"]
    Phi = phi_all(n, edges, "spin")
    theta = random_theta(n, len(edges), seed=4)
    exact, _ = moments(theta, Phi)
    # brute force: f = log Z - theta' d with d = E_theta[phi] is stationary at theta
    f = lambda t: log_z(t, Phi) - t @ exact
    eps = 1e-5
    fd = np.array([(f(theta + eps * e) - f(theta - eps * e)) / (2 * eps) for e in np.eye(theta.size)])
    np.testing.assert_allclose(fd, 0.0, atol=1e-8)
    o0 = GibbsOracle(n, edges, n_chains=N_CHAINS, n_sweeps=N_SWEEPS, burn_in=BURN_IN)
    o = GibbsOracle(n, edges, n_chains=N_CHAINS, n_sweeps=N_SWEEPS, burn_in=BURN_IN, data_mean=exact)
    est = o.estimate(theta, 5)
    np.testing.assert_array_equal(o0.gradient(theta, 5), est)                     # no data: grad log Z
    np.testing.assert_allclose(o.gradient(theta, 5), est - exact, rtol=0, atol=1e-15)
    tol = mc_tolerance(o.samples(theta, 5).mean(axis=0))
    assert (np.abs(o.gradient(theta, 5)) <= tol).all()
    # the data do not change the Hessian
    np.testing.assert_array_equal(o.hessian_diag(theta, 5), o0.hessian_diag(theta, 5))


def test_protocol_attributes_and_states():
    o = GibbsOracle(3, [(0, 1), (2, 1)], states="binary", n_chains=3, n_sweeps=4, burn_in=0)
    assert isinstance(o, Oracle) and o.exact is False and o.n_samples is None
    assert o.value(np.zeros(5)) is None and o.n_params == 5
    X = o.sample(np.zeros(5), 1)
    assert X.shape == (4, 3, 3) and set(np.unique(X)) <= {0, 1}
    X = GibbsOracle(3, [], n_chains=3, n_sweeps=4).sample(np.zeros(3), 1)     # no edges
    assert set(np.unique(X)) <= {-1, 1}


def test_validation_errors():
    with pytest.raises(ValueError, match="outside 0..3"):
        GibbsOracle(4, [(0, 4)])
    with pytest.raises(ValueError, match="outside"):
        GibbsOracle(4, [(-1, 2)])
    with pytest.raises(ValueError, match="self loop"):
        GibbsOracle(4, [(0, 1), (2, 2)])
    with pytest.raises(ValueError, match=r"edges 0 and 2 are the same pair \{1, 2\}"):
        GibbsOracle(4, [(1, 2), (0, 3), (2, 1)])
    with pytest.raises(ValueError, match="same pair"):
        GibbsOracle(4, [(0, 1), (0, 1)])
    with pytest.raises(ValueError, match=r"shape \(m, 2\)"):
        GibbsOracle(4, [0, 1, 2])
    with pytest.raises(ValueError, match="integer"):
        GibbsOracle(4, [(0, 1.5)])
    with pytest.raises(ValueError, match="states must be one of"):
        GibbsOracle(4, [(0, 1)], states="ising")
    with pytest.raises(ValueError, match="n_chains"):
        GibbsOracle(4, [(0, 1)], n_chains=0)
    with pytest.raises(ValueError, match="data_mean must have shape"):
        GibbsOracle(4, [(0, 1)], data_mean=np.zeros(4))
    with pytest.raises(ValueError, match="data_mean contains NaN"):
        GibbsOracle(4, [(0, 1)], data_mean=[0, 0, 0, np.inf, 0])
    o = GibbsOracle(4, [(0, 1)])
    with pytest.raises(ValueError, match=r"theta must have shape \(5,\)"):
        o.gradient(np.zeros(4), 1)
    with pytest.raises(ValueError, match="theta contains NaN"):
        o.gradient(np.array([0, 0, np.nan, 0, 0]), 1)
    with pytest.raises(ValueError, match="theta contains NaN"):
        o.hessian_diag(np.array([0, 0, np.inf, 0, 0]), 1)


@pytest.mark.parametrize("states", ["spin", "binary"])
def test_strong_couplings_no_overflow_or_nan(states):
    n, edges = GRAPHS["complete5"]
    rng = np.random.default_rng(8)
    theta = np.concatenate([rng.normal(0, 1, n), np.full(len(edges), 5.0)])       # |J| = 5
    big = np.concatenate([1e4 * rng.standard_normal(n), -5.0 * np.ones(len(edges))])
    o = GibbsOracle(n, edges, states=states, n_chains=200, n_sweeps=50, burn_in=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for t in (theta, -theta, big):
            g, hd = o.gradient(t, 1), o.hessian_diag(t, 1)
            assert np.isfinite(g).all() and np.isfinite(hd).all() and (hd >= 0).all()
        if states == "spin":
            # ferromagnetic |J| = 5: every chain sits in an aligned state, so each pair statistic is
            # ~1, as in the exact model (the +/- modes do not mix, but x_i x_j does not see them)
            exact, _ = moments(theta, phi_all(n, edges, states))
            np.testing.assert_allclose(o.estimate(theta, 1)[n:], exact[n:], atol=1e-3)


@pytest.mark.parametrize("states", ["spin", "binary"])
@pytest.mark.parametrize("block", [1 << 22, 1, 700])
def test_estimate_by_edge_blocks_is_the_full_statistics_mean_bit_for_bit(states, block, monkeypatch):
    """estimate / hessian_diag reduce the edge statistics block by block (the samples x (n + |E|) matrix is
    128 MB at n = 200 with all pairs): the same numbers as the full matrix's mean and variance, bit for bit,
    for blocks of every width (one column wide, an F-ordered block, would be summed pairwise)."""
    import varopt.oracles.gibbs as gibbs
    n = 13
    edges = [(i, j) for i in range(n) for j in range(i + 1, n)]
    o = GibbsOracle(n, edges, states=states, n_chains=16, n_sweeps=30, burn_in=2)
    theta = np.random.default_rng(3).normal(size=o.n_params) * 0.3
    full = o.samples(theta, 5).reshape(-1, o.n_params)
    monkeypatch.setattr(gibbs, "_BLOCK_ENTRIES", block)
    assert np.array_equal(o.estimate(theta, 5), full.mean(axis=0))
    assert np.array_equal(o.hessian_diag(theta, 5), full.var(axis=0))


def test_estimate_by_edge_blocks_keeps_memory_to_a_block(monkeypatch):
    """With blocks of 2^14 entries the peak of hessian_diag stays a fraction of the full statistics matrix (before:
    the matrix and its variance's temporaries, several times its size)."""
    import varopt.oracles.gibbs as gibbs
    from memory_peak import traced_peak
    n = 60
    o = GibbsOracle(n, [(i, j) for i in range(n) for j in range(i + 1, n)], n_chains=16, n_sweeps=30, burn_in=1)
    theta = np.zeros(o.n_params)
    monkeypatch.setattr(gibbs, "_BLOCK_ENTRIES", 1 << 14)
    full_bytes = 480 * o.n_params * 8
    assert traced_peak(o.hessian_diag, theta, 5)[1] < 0.25 * full_bytes
