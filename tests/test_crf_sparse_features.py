"""Sparse token features of the chain CRF (varopt.estimators.crf_features): a real vocabulary (10^4 features, a few
per token) was stored as dense B x T x F batches (2,000 sentences over 10,544 features: 2.5 GB)."""

import numpy as np
from memory_peak import traced_peak
import pytest

import varopt.estimators.crf_features as cf
from varopt.estimators.crf import ChainCRF


def _corpus(S, T, V, seed=0):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(S):
        ids = rng.zipf(1.3, int(rng.integers(T // 2, T + 1))) % V
        X.append([f"w{i}" for i in ids])
        Y.append(["B" if i % 7 == 0 else ("I" if i % 5 == 0 else "O") for i in ids])
    return X, Y


def _prepared(X, Y, sparse, monkeypatch):
    monkeypatch.setattr(cf, "DENSE_ENTRIES", 0 if sparse else 10 ** 15)
    crf = ChainCRF(method="lbfgs", max_iter=1).fit(X, Y)
    assert all(Phi.sparse == sparse for Phi, _ in crf.batches_)
    return crf


def test_sparse_batches_give_the_dense_oracle(monkeypatch):
    """Value, gradient, gold features, junction-tree Sigma and the projected curvature of sparse batches equal the
    dense batches' (the same sums in another order)."""
    X, Y = _corpus(40, 9, 60)
    dense, sparse = _prepared(X, Y, False, monkeypatch), _prepared(X, Y, True, monkeypatch)
    np.testing.assert_allclose(sparse.linear_, dense.linear_, rtol=0, atol=1e-12)
    th = 0.3 * np.random.default_rng(1).normal(size=dense.d_)
    vd, gd, Sd = dense.oracle(th, True)
    vs, gs, Ss = sparse.oracle(th, True)
    assert vs == pytest.approx(vd, rel=1e-14)
    np.testing.assert_allclose(gs, gd, rtol=0, atol=1e-12 * np.abs(gd).max())
    np.testing.assert_allclose(Ss, Sd, rtol=0, atol=1e-12 * np.abs(Sd).max())
    V = np.random.default_rng(2).normal(size=(dense.d_, 3))
    np.testing.assert_allclose(sparse.curvature_along(th, V), V.T @ Sd @ V, rtol=1e-11)
    assert dense.predict(X[:5]) == sparse.predict(X[:5])


def test_a_large_vocabulary_is_not_densified():
    """600 sentences of up to 12 tokens over a few thousand features (dense batches: about 100 MB): the fit
    allocates a few MB."""
    X, Y = _corpus(600, 12, 3000, seed=3)
    crf, peak = traced_peak(ChainCRF(max_iter=3).fit, X, Y)
    tokens = sum(len(s) for s in X)
    assert tokens * crf.F_ * 8 > 60e6            # what the dense batches took
    assert peak < 25e6, f"{peak / 1e6:.0f} MB"
    assert all(Phi.sparse for Phi, _ in crf.batches_)
