"""The attainment check's shortcuts: same verdicts as the recession-direction LP (docs/majorize.md "Constrained
solves' fixed costs").

``MajorizeModel.recession`` proves "attained" without the LP by the dual certificate, for one free column by the
O(nnz) test of ``one_column_attained``, and for a multinomial's free class intercepts by the O(K m) test of
``class_intercepts_attained``; all take the columns from ``PaddedGroups.dense_rows`` when the groups hold a dense
copy. On random binary and multinomial logistic programs -- separable, quasi-separable (ties on the boundary; a class
without samples; every sample in one class), overlapping; ridge on the weights with free intercepts, or no penalty --
the verdict (attained or not) must be the LP's (``recession_direction`` without the iterate: the LP alone), and the
shortcuts must give the same answer with and without the dense columns. ``class_intercepts_attained`` is also checked
against scipy's ``linprog`` on random intercept blocks.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from varopt.formulations.logistic import logistic_program
from varopt.registry import get_solver
from varopt.solvers.majorize.model import MajorizeModel
from varopt.solvers.majorize.recession import (attained_certificate, class_intercepts_attained, one_column_attained,
                                               recession_direction)


def _data(seed, t, d, K, kind):
    """Features and labels of one of four kinds (labels 0..K-1; ``classes`` may name a class without samples)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(t, d)), 1)   # rounded: ties on the separating boundary happen
    W = rng.normal(size=(d, K))
    S = X @ W
    if kind == "overlap":
        S = S + 2.0 * rng.normal(size=S.shape)
    y = S.argmax(axis=1)
    if kind == "tie":     # quasi-separation: two copies of one sample with different labels
        X = np.vstack([X, X[:1]])
        y = np.append(y, (y[0] + 1) % K)
    classes = np.arange(K + 1) if kind == "absent" else np.arange(K)   # class K has no sample
    if kind == "one_class":   # every sample in class 0: the intercepts alone decrease without bound
        y[:] = 0
    elif np.unique(y).size < 2:
        y[0] = (y[1] + 1) % K
    return X, y, classes


def _verdicts(prog):
    """(model.recession's verdict at the solver's point, the LP's verdict), each None (attained) or a kind."""
    res = get_solver("majorize").solve(prog, check_attained=False, max_iter=200)
    model = MajorizeModel(prog)
    fast = model.recession(res.x)
    lp = recession_direction(model)
    return model, res.x, (None if fast is None else fast.kind), (None if lp is None else lp.kind)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), t=st.integers(6, 30), d=st.integers(1, 3), K=st.sampled_from([2, 3]),
       kind=st.sampled_from(["separable", "tie", "absent", "one_class", "overlap"]), lam=st.sampled_from([0.0, 0.5]))
def test_shortcut_verdict_is_the_lps(seed, t, d, K, kind, lam):
    X, y, classes = _data(seed, t, d, K, kind)
    prog = logistic_program(X, y, lam, True, classes=classes)
    model, x, fast, lp = _verdicts(prog)
    assert (fast is None) == (lp is None), (fast, lp)
    dense = model.groups.dense_rows() if model.groups is not None else None
    if dense is None:
        return
    A, b, seg, coef = model.pos[:4]
    assert np.array_equal(dense, A.toarray())          # the original rows, in order
    pinned = model.Hd > 0
    cert = attained_certificate(A, b, seg, coef, model.c, x, pinned, dense=dense)
    assert cert == attained_certificate(A, b, seg, coef, model.c, x, pinned)
    if cert:
        assert lp is None
    free = np.flatnonzero(~pinned)
    if class_intercepts_attained(dense[:, free], b, model.groups.c, coef, model.c[free]):
        assert lp is None
    if free.size == 1:
        j = int(free[0])
        one = one_column_attained(A, b, seg, coef, model.c, j, col=dense[:, j])
        assert one == one_column_attained(A, b, seg, coef, model.c, j)
        if one:
            assert lp is None


@pytest.mark.parametrize("K,kind,attained", [(2, "overlap", True), (3, "overlap", True), (3, "absent", False),
                                             (2, "absent", False), (2, "one_class", False)])
def test_intercepts_only_free(K, kind, attained):
    """Ridge on the weights, free intercepts (the benchmarks' shape): a class without samples is the one way the
    intercepts alone decrease without bound (its intercept -> -inf; with one class in a binary model, the one
    intercept: ``one_column_attained``'s case); every shortcut run sees the dense columns."""
    X, y, classes = _data(5, 40, 3, K, kind)
    prog = logistic_program(X, y, 0.5, True, classes=classes)
    model, _, fast, lp = _verdicts(prog)
    assert model.groups is not None and model.groups.dense_rows() is not None
    assert (fast is None) == attained and (lp is None) == attained, (fast, lp)
    free = np.flatnonzero(~(model.Hd > 0))
    ci = class_intercepts_attained(model.groups.dense_rows()[:, free], model.pos[1], model.groups.c, model.pos[3],
                                   model.c[free])
    # the multinomial's intercepts take the O(K m) test (and it never claims an attained minimum that is not)
    assert ci == (attained and K == 3), ci


def _reference_attained(P, coef, cU):
    """Independent reference (scipy's linprog, not varopt's LP layer): is there a direction ``|v| <= 1`` with
    ``f_inf(v) = cU^T v + sum_g coef_g max_k (P_g v)_k <= 0`` and a strict decrease ``sum_g coef_g sum_k (max_g -
    (P_g v)_k) > 0``, or with ``f_inf(v) < 0``? Attained when neither."""
    import scipy.optimize as so
    G, c, m = P.shape
    # variables (v, M_g); rows P_gk v - M_g <= 0
    rows = np.zeros((G * c, m + G))
    for g in range(G):
        rows[g * c:(g + 1) * c, :m] = P[g]
        rows[g * c:(g + 1) * c, m + g] = -1.0
    slope = np.concatenate([cU, coef])
    bounds = [(-1, 1)] * m + [(None, None)] * G
    # 1) the smallest slope at infinity
    r1 = so.linprog(slope, A_ub=rows, b_ub=np.zeros(G * c), bounds=bounds, method="highs")
    # 2) the largest strict decrease among flat-or-better directions
    dec = -np.concatenate([-(coef[:, None] * P.sum(axis=1)).sum(axis=0), c * coef])
    r2 = so.linprog(dec, A_ub=np.vstack([rows, slope]), b_ub=np.zeros(G * c + 1), bounds=bounds, method="highs")
    assert r1.status == 0 and r2.status == 0
    return r1.fun > -1e-9 and -r2.fun < 1e-9


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), G=st.integers(1, 5), m=st.integers(1, 4),
       shape=st.sampled_from(["permutations", "same", "broken", "freq", "offsum"]))
def test_class_intercepts_against_reference(seed, G, m, shape):
    """``class_intercepts_attained`` on random intercept blocks (a permutation per group, one shared, or one with a
    repeated intercept) and linear parts (class frequencies; some zero or negative; summing to other than 1): whenever
    it says attained, the reference LPs find neither a ray nor a direction of strict decrease."""
    rng = np.random.default_rng(seed)
    P = np.stack([np.eye(m)[rng.permutation(m)] for _ in range(G)])
    if shape == "same":
        P[:] = P[0]
    elif shape == "broken" and m > 1:
        g = rng.integers(G)
        P[g, 0] = P[g, 1]          # two configurations of group g share an intercept; one intercept unused
    coef = rng.uniform(0.5, 2.0, size=G)
    if shape in ("freq", "offsum"):
        # frequencies; "offsum": they sum to 0.9 or 1.1, so f_inf(1) = +-0.1 C: a ray along the constant direction
        cU = -coef.sum() * rng.dirichlet(np.ones(m)) * (1.0 if shape == "freq" else rng.choice([0.9, 1.1]))
    else:
        counts = rng.integers(-1, 4, size=m).astype(float)   # a class without samples, or with negative weight
        cU = -coef.sum() * counts / max(counts.sum(), 1.0)
    b = np.zeros(G * m)
    got = class_intercepts_attained(P.reshape(G * m, m), b, m, coef, cU)
    if got:
        assert _reference_attained(P, coef, cU)
    if (shape == "broken" and m > 1) or shape == "offsum":
        assert not got
    if shape == "freq":
        assert got


@pytest.mark.parametrize("K,kind,attained", [(3, "overlap", True), (4, "overlap", True), (3, "absent", False),
                                             (3, "one_class", False), (3, "tie", True)])
def test_intercepts_without_a_dense_copy(monkeypatch, K, kind, attained):
    """Models too large for the padded groups' dense copy (digits: 17,970 x 650) read the free class intercepts from
    the sparse rows (``MajorizeModel._class_columns``): same verdict as the LP, and the O(K m) test is the one that
    decides the attained cases (the certificate is switched off here, so a wrong column read cannot hide)."""
    from varopt.solvers.majorize import recession as rec
    X, y, classes = _data(7, 60, 3, K, kind)
    prog = logistic_program(X, y, 0.5, True, classes=classes)
    res = get_solver("majorize").solve(prog, check_attained=False, max_iter=200)
    model = MajorizeModel(prog)
    assert model.groups is not None
    monkeypatch.setattr(model.groups, "dense_rows", lambda: None)    # as on digits (G c d above the dense limit)
    lp = recession_direction(model)
    assert (lp is None) == attained, lp
    free = np.flatnonzero(~(model.Hd > 0))
    AU = model._class_columns(free)
    assert AU is not None and np.array_equal(AU, model.pos[0].toarray()[:, free])
    monkeypatch.setattr(rec, "attained_certificate", lambda *a, **k: False)
    if attained:   # decided by the O(K m) test, not by the LP

        def no_lp(*a, **k):
            raise AssertionError("the LP ran where the class intercepts decide")
        monkeypatch.setattr(rec, "recession_direction", no_lp)
    fast = model.recession(res.x)
    assert (fast is None) == attained, fast
    if attained:
        assert class_intercepts_attained(AU, model.pos[1], model.groups.c, model.pos[3], model.c[free])
