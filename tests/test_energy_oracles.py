"""The shared sampling machinery (colour classes, the colour-class Gibbs kernel, particles)
against enumeration and exact expectations."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

from varopt.oracles import ColourGibbs, GibbsOracle, Particles, colour_classes
from varopt.oracles.particles import stratified_indices


def _torus(L, W):
    idx = np.arange(L * W).reshape(L, W)
    return L * W, np.concatenate([idx.ravel(), idx.ravel()]), np.concatenate([np.roll(idx, -1, 1).ravel(),
                                                                           np.roll(idx, -1, 0).ravel()])


@pytest.mark.parametrize("graph", ["torus44", "torus33", "complete6", "rbm"])
def test_colour_classes_are_proper_and_bipartite_graphs_get_two(graph):
    if graph.startswith("torus"):
        n, i, j = _torus(int(graph[5]), int(graph[6]))
    elif graph == "complete6":
        n = 6
        i, j = map(np.array, zip(*itertools.combinations(range(6), 2)))
    else:
        n = 7
        i, j = map(np.array, zip(*[(v, 4 + k) for v in range(4) for k in range(3)]))
    cls = colour_classes(n, i, j)
    lab = np.empty(n, dtype=int)
    for c, idx in enumerate(cls):
        lab[idx] = c
    assert sorted(np.concatenate(cls).tolist()) == list(range(n))
    assert (lab[i] != lab[j]).all()
    if graph in ("torus44", "rbm"):
        assert len(cls) == 2
    if graph == "complete6":
        assert len(cls) == 6


@pytest.mark.parametrize("states", ["spin", "binary"])
def test_colour_gibbs_matches_enumeration(states):
    rng = np.random.default_rng(0)
    n, i, j = 6, np.array([0, 1, 2, 3, 4, 0, 1]), np.array([1, 2, 3, 4, 5, 5, 4])
    h, w = rng.normal(0, 0.4, n), rng.normal(0, 0.4, i.size)
    J = sp.csr_matrix((np.r_[w, w], (np.r_[i, j], np.r_[j, i])), shape=(n, n))
    X = np.array(list(itertools.product((0, 1), repeat=n)), dtype=float)
    if states == "spin":
        X = 2 * X - 1
    lw = X @ h + (X[:, i] * X[:, j]) @ w
    p = np.exp(lw - logsumexp(lw))
    exact = p @ X
    kern = ColourGibbs(h, J, states=states)
    lo = -1.0 if states == "spin" else 0.0
    S = np.where(rng.random((2000, n)) < 0.5, 1.0, lo)
    for _ in range(30):
        kern.sweep(S, rng)
    acc = np.zeros(n)
    for _ in range(20):
        kern.sweep(S, rng)
        acc += kern.conditional_means(S).mean(axis=0)
    assert np.abs(acc / 20 - exact).max() < 0.02
    # a wrong kernel would fail: the uniform distribution's means are far from these
    assert np.abs(exact - (0.0 if states == "spin" else 0.5)).max() > 0.05


def test_gibbs_oracle_colour_kernel_matches_enumeration():
    n, edges = 5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]
    rng = np.random.default_rng(1)
    theta = rng.normal(0, 0.4, n + len(edges))
    X = 2.0 * np.array(list(itertools.product((0, 1), repeat=n))) - 1
    E = np.array(edges)
    Phi = np.hstack([X, X[:, E[:, 0]] * X[:, E[:, 1]]])
    p = np.exp(Phi @ theta - logsumexp(Phi @ theta))
    o = GibbsOracle(n, edges, n_chains=400, n_sweeps=100, burn_in=30, kernel="colour")
    assert np.abs(o.estimate(theta, 7) - p @ Phi).max() < 0.02
    assert np.array_equal(o.estimate(theta, 7), o.estimate(theta, 7))  # common random numbers
    with pytest.raises(ValueError, match="kernel"):
        GibbsOracle(n, edges, kernel="nope")


def test_stratified_resampling_is_unbiased_and_low_variance():
    rng = np.random.default_rng(2)
    W = rng.dirichlet(np.ones(10) * 0.5)
    counts = np.array([np.bincount(stratified_indices(W, rng), minlength=10) for _ in range(4000)])
    assert np.abs(counts.mean(axis=0) - 10 * W).max() < 0.05
    # stratified: each count within one of N W (floor/ceil bound of at most 2 apart)
    assert (np.abs(counts - 10 * W) < 2.0).all()


def test_particles_log_z_and_variance_without_resampling_is_importance_sampling():
    rng = np.random.default_rng(3)
    pop = Particles(50, rng)
    inc = rng.normal(size=50)
    pop.reweight(inc)
    w = np.exp(inc)
    assert abs(pop.log_z - np.log(w.mean())) < 1e-12
    assert abs(pop.relative_variance() - w.var(ddof=1) / 50 / w.mean() ** 2) < 1e-12
    assert pop.resample(0.01) is None and pop.resamples == 0
    with pytest.raises(ValueError):
        Particles(1, rng)
