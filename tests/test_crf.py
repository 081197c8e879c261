"""Tests of the chain CRF (seed 003 section 5: junction-tree bound inside Algorithm 2)."""
import itertools

import numpy as np
import pytest

from varopt.errors import InputDataError
from varopt.estimators.crf import ChainCRF, f1_entities, read_conll
from varopt.solvers.majorize.bound import compute_bound
from varopt.solvers.majorize.junction_tree import chain_bound, chain_enumerate

X = [["Juan", "vive", "en", "Madrid"], ["El", "Barça", "gana"], ["hola"], ["Ana", "y", "Luis"]]
Y = [["B-PER", "O", "O", "B-LOC"], ["O", "B-ORG", "O"], ["O"], ["B-PER", "O", "B-PER"]]


def _prepared(lam=0.5):
    crf = ChainCRF(lam=lam, method="lbfgs", max_iter=1)
    crf.fit(X, Y)
    return crf


def _brute(crf, theta):
    W, Tr = crf._unpack(theta)
    tot = 0.5 * crf.lam * theta @ theta
    for tk, ys in zip(X, Y):
        S = crf._phi(tk) @ W.T
        T, K = S.shape
        sc = [sum(S[t, p[t]] for t in range(T)) + sum(Tr[p[t - 1], p[t]] for t in range(1, T))
              for p in itertools.product(range(K), repeat=T)]
        yi = [crf.label_index_[a] for a in ys]
        tot += np.logaddexp.reduce(sc) - (sum(S[t, yi[t]] for t in range(T))
                                          + sum(Tr[yi[t - 1], yi[t]] for t in range(1, T)))
    return tot


def test_oracle_value_gradient_and_bound_against_enumeration():
    crf = _prepared()
    rng = np.random.default_rng(0)
    th = rng.normal(size=crf.d_) * 0.3
    v, g, Sig = crf.oracle(th, True)
    assert abs(v - _brute(crf, th)) <= 1e-10 * abs(v)
    e = 1e-6
    idx = rng.choice(crf.d_, 12, replace=False)
    fd = [(_brute(crf, th + e * np.eye(crf.d_)[i]) - _brute(crf, th - e * np.eye(crf.d_)[i])) / (2 * e) for i in idx]
    assert np.max(np.abs(np.array(fd) - g[idx])) <= 1e-6
    H = Sig + crf.lam * np.eye(crf.d_)
    for s in (0.1, 1.0, 3.0):
        D = rng.normal(size=crf.d_) * s
        assert _brute(crf, th + D) <= v + g @ D + 0.5 * D @ H @ D + 1e-9 * abs(v)


def test_curvature_along_equals_the_dense_bound():
    """ChainCRF.curvature_along (projected junction tree, no d x d matrix) is V^T Sigma V of partition_bound."""
    crf = _prepared()
    rng = np.random.default_rng(3)
    th = rng.normal(size=crf.d_) * 0.5
    _, _, Sig = crf.partition_bound(th, True)
    V = rng.normal(size=(crf.d_, 3))
    Q = crf.curvature_along(th, V)
    assert np.max(np.abs(Q - V.T @ Sig @ V)) <= 1e-10 * np.abs(Q).max()
    assert abs(crf.curvature_along(th, V[:, 1]) - V[:, 1] @ Sig @ V[:, 1]) <= 1e-10 * Q[1, 1]


def test_batched_chain_bound_equals_single():
    rng = np.random.default_rng(1)
    S = rng.normal(size=(3, 4, 3))
    Tr = rng.normal(size=(3, 3))
    lz, mu, M = chain_bound(S, Tr)
    for b in range(3):
        l1, m1, M1 = chain_bound(S[b:b + 1], Tr)
        assert np.allclose(lz[b], l1[0]) and np.allclose(mu[b], m1[0]) and np.allclose(M[b], M1[0])
        F, th = chain_enumerate(S[b], Tr)
        bp = compute_bound(F, np.zeros(len(F)), np.zeros(len(F), int), th, want_mu=True)
        assert abs(lz[b] - bp.logz[0]) <= 1e-10 and np.max(np.abs(mu[b] - bp.mu[0])) <= 1e-10


@pytest.mark.parametrize("bound_reuse", [0, 100])  # Algorithm 2 / the default quasi-Newton trials on a reused bound
def test_majorize_fit_matches_lbfgs_and_is_monotone(bound_reuse):
    a = ChainCRF(lam=0.5, method="majorize", tol=1e-13, max_iter=300, bound_reuse=bound_reuse).fit(X, Y)
    b = ChainCRF(lam=0.5, method="lbfgs", tol=1e-14, max_iter=2000).fit(X, Y)
    assert abs(a.objective() - b.objective()) <= 1e-6 * abs(b.objective())
    f = np.array([h["objective"] for h in a.history_])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    assert a.predict(X) == Y  # separable toy data is fitted


def test_viterbi_is_argmax():
    crf = ChainCRF(lam=0.5, method="lbfgs", max_iter=5).fit(X, Y)
    tk = X[0]
    S = crf._phi(tk) @ crf.W_.T
    T, K = S.shape
    best = max(itertools.product(range(K), repeat=T),
               key=lambda p: sum(S[t, p[t]] for t in range(T)) + sum(crf.Tr_[p[t - 1], p[t]] for t in range(1, T)))
    assert crf.predict([tk])[0] == [crf.labels_[k] for k in best]


def test_f1_and_errors():
    assert f1_entities([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]]) == 1.0
    assert f1_entities([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]]) == 0.0
    with pytest.raises(InputDataError, match="empty"):
        ChainCRF(labels=[]).fit([["a"]], [["O"]])
    with pytest.raises(InputDataError, match="not in the label set"):
        ChainCRF(labels=["O"]).fit([["a"]], [["B-PER"]])


def test_read_conll_subset():
    from conftest import data_dir
    d = data_dir("conll2002_esp")
    sents = read_conll(d / "esp.train", max_sentences=5)
    assert len(sents) == 5 and sents[0][0][0] == "Melbourne" and sents[0][1][0] == "B-LOC"


def test_tree_bound_rejects_non_trees():
    from varopt.solvers.majorize.junction_tree import tree_bound
    S = np.zeros((1, 3, 2))
    with pytest.raises(ValueError, match="one root"):
        tree_bound(S, np.zeros((2, 2)), [-1, -1, 0])
    with pytest.raises(ValueError, match="not describe a tree"):
        tree_bound(S, np.zeros((2, 2)), [-1, 2, 1])
    with pytest.raises(ValueError, match="entries"):
        tree_bound(S, np.zeros((2, 2)), [-1, 0])


def test_fit_validates_lengths_and_lam_and_applies_overrides():
    """A sentence whose tag list has another length is an InputDataError naming it (before: an IndexError from
    numpy broadcasting); a negative or non-numeric lam is named (before: "quadratic has a negative diagonal
    entry"); the deprecated ``fit(X, Y, lam=...)`` override is applied (before: silently ignored, the
    constructor's lam was used)."""
    X = [["the", "cat", "sat"], ["a", "dog"], ["John", "runs"], ["the", "dog", "sat", "down"]]
    Y = [["D", "N", "V"], ["D", "N"], ["N", "V"], ["D", "N", "V", "P"]]
    with pytest.raises(InputDataError, match="sentence 1 has 2 tokens but 3 tags"):
        ChainCRF().fit(X, [Y[0], ["D", "N", "V"], Y[2], Y[3]])
    for lam in (-1.0, "a", float("nan")):
        with pytest.raises(InputDataError, match="lam must be"):
            ChainCRF(lam=lam).fit(X, Y)
    with pytest.warns(DeprecationWarning):
        over = ChainCRF(tol=1e-12).fit(X, Y, lam=5.0)
    ref = ChainCRF(lam=5.0, tol=1e-12).fit(X, Y)
    assert over.result_.objective == pytest.approx(ref.result_.objective, rel=1e-10)
    assert over.lam == 1.0 and over.lam_ == 5.0


def test_numeric_tokens_and_score():
    """Tokens that are numbers (word ids) use the default templates as their strings (before: AttributeError
    'int' object has no attribute 'lower'); ``score`` is the token accuracy of ``predict`` (before: missing)."""
    X = [[3, 17, 4], [5, 9], [12, 8], [3, 9, 4, 2]]
    Y = [["D", "N", "V"], ["D", "N"], ["N", "V"], ["D", "N", "V", "P"]]
    ints = ChainCRF(tol=1e-12).fit(X, Y)
    strs = ChainCRF(tol=1e-12).fit([[str(t) for t in s] for s in X], Y)
    assert ints.result_.objective == pytest.approx(strs.result_.objective, rel=1e-12)
    pred = ints.predict(X)
    acc = np.mean([a == b for p, ys in zip(pred, Y) for a, b in zip(p, ys)])
    assert ints.score(X, Y) == pytest.approx(acc) and 0.5 < acc <= 1.0
