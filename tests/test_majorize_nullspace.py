"""majorize's quasi-Newton trials on the null space of the linear rows held at the iterate (option ``bound_reuse``,
``varopt/solvers/majorize/reuse_rows.py``; docs/majorize.md section 2b).

With rows active at the iterate the plain trial crossed them and was blocked at every iteration (or, with a column
without curvature such as ``t`` of ``norm1(w) <= t``, not formed at all). Checked here: the reduced direction
against an independent null-space-basis solve; on programs whose rows are active at the optimum, that the trials
are taken and accepted, that every iterate the callback sees satisfies the constraints by CVXPY's ``violation()``
(<= 1e-9) with a numpy objective that never increases, and that the optimum is Clarabel's (1e-8 relative).
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import scipy.linalg as sla

import varopt  # noqa: F401
from varopt.solvers.majorize import reuse_rows

RNG = np.random.default_rng(20261126)
N, D = 200, 8
X = RNG.normal(size=(N, D))
W_TRUE = RNG.normal(size=D) * 1.5
Y = np.where(RNG.random(N) < 1 / (1 + np.exp(-X @ W_TRUE)), 1.0, -1.0)
LAM = 0.05
CLARABEL = {"solver": "CLARABEL", "tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12}
A3 = RNG.normal(size=(3, D))


def loss_np(w, b=0.0):
    return np.logaddexp(0.0, -Y * (X @ w + b)).sum() + LAM * w @ w


def loss(w, b=0.0):
    return cp.sum(cp.logistic(cp.multiply(-Y, X @ w + b))) + LAM * cp.sum_squares(w)


def _norm1_t():
    """norm1(w) <= t with t priced in the objective: t and the lift's columns have no curvature (the plain trial is
    not formed); several w_j are 0 at the optimum (both abs rows held) and the rest hold one row each."""
    w, t = cp.Variable(D), cp.Variable()
    return cp.Problem(cp.Minimize(loss(w) + 8.0 * t), [cp.norm1(w) <= t]), [w, t], lambda w, t: loss_np(w) + 8.0 * t


def _rows():
    """An equality, inequalities active at the optimum and a duplicated (dependent) inequality, with an intercept."""
    w, b = cp.Variable(D), cp.Variable()
    cons = [cp.sum(w) == 0.3, A3 @ w <= -0.2, 2.0 * (A3[0] @ w) <= -0.4, w[:2] >= -0.5]
    return cp.Problem(cp.Minimize(loss(w, b)), cons), [w, b], lambda w, b: loss_np(w, b)


def _split(x, variables):
    out, k = [], 0
    for v in variables:
        out.append(np.reshape(x[k:k + v.size], v.shape, order="F"))
        k += v.size
    assert k == x.size
    return out


def _violation(prob):
    return max([float(np.max(c.violation())) for c in prob.constraints] + [0.0])


@pytest.mark.parametrize("make", [_norm1_t, _rows], ids=["norm1(w) <= t", "equality, active and duplicated rows"])
def test_null_space_trials_feasible_monotone_and_optimal(make):
    """Trials accepted on the held rows' null space; every iterate feasible (CVXPY) with a non-increasing numpy
    objective; the optimum Clarabel's to 1e-8 relative. (Fails with the held rows' multiplier signs ignored or with
    an infinite side counted as held -- the solve stopped on a face 46% above the optimum -- or with the trials off.)"""
    prob, variables, f_np = make()
    f_ref = prob.solve(**CLARABEL)
    assert prob.status == "optimal"

    prob, variables, f_np = make()
    its = []
    f = prob.solve(method="majorize", tol=1e-12, callback=lambda k, x, fk: its.append(np.array(x)) and False)
    res = prob.varopt_result
    assert prob.status == "optimal", res.message
    st = res.info["bound_reuse"]
    assert st.get("null_space", 0) >= 3 and st["accepted"] >= 3, st
    assert abs(f - f_ref) <= 1e-8 * max(1.0, abs(f_ref)), (f, f_ref)
    # the callback's point is the user's variables in order (checked on the last one against the loaded values)
    loaded = np.concatenate([np.ravel(v.value, order="F") for v in variables])
    np.testing.assert_allclose(its[-1], loaded, rtol=0, atol=1e-12)
    fs = []
    for x in its:
        vals = _split(x, variables)
        for v, val in zip(variables, vals):
            v.value = val
        assert _violation(prob) <= 1e-9, _violation(prob)
        fs.append(f_np(*vals))
    fs = np.array(fs)
    assert np.all(np.diff(fs) <= 1e-12 * np.abs(fs[:-1])), fs


def test_null_space_trials_save_iterations_on_norm1_t():
    """The trials replace the plain majorization steps that norm1(w) <= t took at every iteration: fewer iterations
    than with them off (the same answer). (Fails with the trials off.)"""
    from varopt.solvers.majorize import reuse

    prob, _, _ = _norm1_t()
    f_on = prob.solve(method="majorize", tol=1e-10)
    it_on = prob.varopt_result.iterations
    old = reuse.ROW_TRIALS
    reuse.ROW_TRIALS = False
    try:
        prob, _, _ = _norm1_t()
        f_off = prob.solve(method="majorize", tol=1e-10)
        it_off = prob.varopt_result.iterations
    finally:
        reuse.ROW_TRIALS = old
    assert abs(f_on - f_off) <= 1e-8 * abs(f_off)
    assert 2 * it_on <= it_off, (it_on, it_off)


def _reference_direction(B, u, Aw):
    """min u'D + 1/2 D'BD s.t. Aw D = 0 by a null-space basis Z: D = -Z (Z'BZ)^{-1} Z'u."""
    Z = sla.null_space(Aw)
    return -Z @ np.linalg.solve(Z.T @ B @ Z, Z.T @ u)


def test_null_space_direction_matches_a_basis_solve():
    """The KKT direction on B = BFGS(c P, pairs) equals the null-space-basis solve of the same QP, with a
    flat column pinned by a held equality, a dependent copy of a held row, and a held row whose multiplier has the
    wrong sign released (D then moves inwards on it). (Fails with the release or the dependent-row subset removed.)"""
    rng = np.random.default_rng(7)
    n = 6
    M = rng.normal(size=(n, n))
    P = M @ M.T + np.eye(n)
    P[-1, :] = P[:, -1] = 0.0   # a column without curvature
    pairs = []
    for _ in range(3):
        s, y = rng.normal(size=n), None
        y = (P + np.eye(n)) @ s
        pairs.insert(0, (s, y, 1.0 / float(s @ y)))
    u = rng.normal(size=n)
    x = np.zeros(n)
    # row 0: an equality pinning the flat column; row 1: held at hi; row 2: 2 x row 1 (dependent); row 3: held at lo
    A = np.zeros((5, n))
    A[0, -1], A[0, 0] = 1.0, 1.0
    A[1, 1:3] = [1.0, -1.0]
    A[2] = 2.0 * A[1]
    A[3, 3] = 1.0
    A[4, 4] = 1.0   # not held: its side is away from x
    lo = np.array([0.0, -np.inf, -np.inf, 0.0, -1.0])
    hi = np.array([0.0, 0.0, 0.0, np.inf, 1.0])
    F = np.ones(n, dtype=bool)
    c = 0.7
    B = reuse_rows.bfgs_matrix(P, c, pairs)
    got = reuse_rows.null_space_direction(P, c, pairs, u, A, x, lo, hi, F)
    assert got is not None
    D, slope, guaranteed, held = got
    assert 0 in held and 2 not in held    # the equality kept, the dependent copy dropped
    ref = _reference_direction(B, u, A[held])
    np.testing.assert_allclose(D, ref, rtol=1e-9, atol=1e-12)
    assert abs(A[0] @ D) <= 1e-12 and np.all(np.abs(A[held] @ D) <= 1e-12)
    # a released row is left inwards: its side is not crossed
    for i in (1, 3):
        if i not in held:
            assert (A[i] @ D <= 1e-12) if i == 1 else (A[i] @ D >= -1e-12)
    # the held inequalities' multipliers have the right sign: u + B D + A_W' lam = 0 with lam_i >= 0 at hi
    lam = np.linalg.lstsq(A[held].T, -(u + B @ D), rcond=None)[0]
    sides = {0: 0.0, 1: 1.0, 3: -1.0}
    for i, l in zip(held, lam):
        assert sides[int(i)] * l >= -1e-10
    assert slope < 0 and guaranteed > 0


def test_bfgs_matrix_inverts_the_two_loop_recursion():
    """B of reuse_rows.bfgs_matrix is the matrix whose inverse the trial's two-loop recursion applies (with
    B_0^{-1} = P^{-1} / c). (Fails with the pairs applied newest first or the scale left out.)"""
    from varopt.solvers.majorize.reuse import two_loop
    rng = np.random.default_rng(3)
    n = 7
    M = rng.normal(size=(n, n))
    P = M @ M.T + np.eye(n)
    pairs = []
    for _ in range(4):
        s = rng.normal(size=n)
        y = (P + 0.5 * np.diag(rng.random(n))) @ s
        pairs.insert(0, (s, y, 1.0 / float(s @ y)))
    c = 0.4
    B = reuse_rows.bfgs_matrix(P, c, pairs)
    v = rng.normal(size=n)
    r = two_loop(pairs, v, lambda q: np.linalg.solve(P, q) / c)
    np.testing.assert_allclose(B @ r, v, rtol=1e-10, atol=1e-10)


def test_blocked_reduced_trials_back_off(monkeypatch):
    """A reduced trial the bounds cut to nothing is skipped for 2^k - 1 chances after k failures in a row: with every
    reduced trial blocked (the ratio test forced to 0) they are tried at about log2 of the iterations, not at every
    one, and the answer is that of the plain steps. (Fails with the back-off removed.)"""
    from varopt.solvers.majorize import reuse

    prob, _, _ = _norm1_t()
    reuse_off = reuse.ROW_TRIALS
    monkeypatch.setattr(reuse, "ROW_TRIALS", False)
    f_plain = prob.solve(method="majorize", tol=1e-10)
    monkeypatch.setattr(reuse, "ROW_TRIALS", reuse_off)
    monkeypatch.setattr(reuse, "max_factor_off", lambda *a: 0.0)
    prob, _, _ = _norm1_t()
    f = prob.solve(method="majorize", tol=1e-10)
    res = prob.varopt_result
    tried = res.info["bound_reuse"].get("null_space", 0)
    assert res.iterations >= 15, res.iterations
    # tried at chances 1, 3, 7, 15, ... (then every 16th): about log2 of the iterations
    assert 1 <= tried <= 1 + int(np.log2(res.iterations + 1)), (tried, res.iterations)
    assert abs(f - f_plain) <= 1e-8 * abs(f_plain)
