"""The attainment check's shortcuts read the free columns from the padded groups' dense features: same verdicts as
the recession-direction LP (docs/majorize.md "Constrained solves' fixed costs").

``MajorizeModel.recession`` proves "attained" without the LP by the dual certificate or, for one free column, by the
O(nnz) test of ``one_column_attained``; both now take the columns from ``PaddedGroups.dense_rows`` when the groups
hold a dense copy. On random binary and multinomial logistic programs -- separable, quasi-separable (ties on the
boundary; a class without samples; every sample in one class), overlapping; ridge on the weights with free intercepts, or no penalty -- the
verdict (attained or not) must be the LP's (``recession_direction`` without the iterate: the LP alone), and the
shortcuts must give the same answer with and without the dense columns.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from varopt.formulations.logistic import logistic_program
from varopt.registry import get_solver
from varopt.solvers.majorize.model import MajorizeModel
from varopt.solvers.majorize.recession import attained_certificate, one_column_attained, recession_direction


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
