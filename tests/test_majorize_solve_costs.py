"""Work a small majorize solve no longer does twice or for nothing (docs/majorize.md section 6.0s).

* The last iteration's pair: after a move the loop computes the gradient at the new point and the L-BFGS pair for
  the *next* trial; when the move stops the run (converged, diverged, the callback) no trial follows, so neither
  is computed. Every other move still makes its pair (a run stopped by ``max_iter`` too: the limit is only known
  after the iteration).
* ``one_column_attained``: the two directions ``+-e_j`` from one max, one min and one sum per group instead of a
  max and a sum per sign (``max(-a) = -min(a)``, ``sum(-a) = -sum(a)`` exactly), and no gathers when every offset is
  finite. Its verdicts against a plain reference on random group layouts with the awkward cases.
"""
from __future__ import annotations

import numpy as np
import pytest

from majorize_checks import small_constrained_logistic
from varopt.program import Constraint, Expression, Program
from varopt.registry import get_solver
from varopt.solvers.majorize.model import MajorizeModel
from varopt.solvers.majorize.recession import one_column_attained
from varopt.solvers.majorize.reuse import ScaledCurvature


def _constrained_program(seed=30):
    prog, lb, ub, row = small_constrained_logistic(seed)
    return Program(prog.names, lb, ub, prog.objective,
                   [Constraint("sum", Expression(prog.n, linear=row), -np.inf, 0.3)])


class _Counts:
    """Counts ``MajorizeModel.gradient_at`` and ``ScaledCurvature.moved`` calls, and the iteration of each move."""

    def __init__(self, monkeypatch):
        self.grad, self.moves = 0, []
        grad, moved = MajorizeModel.gradient_at, ScaledCurvature.moved
        counts = self

        def gradient_at(model, x, S):
            counts.grad += 1
            return grad(model, x, S)

        def moved_counted(sc, s, y, model, opts):
            counts.moves.append(len(counts.iterates))
            return moved(sc, s, y, model, opts)
        monkeypatch.setattr(MajorizeModel, "gradient_at", gradient_at)
        monkeypatch.setattr(ScaledCurvature, "moved", moved_counted)
        self.iterates = []

    def callback(self, k, x, f):
        self.iterates.append(np.array(x))
        return False


@pytest.mark.parametrize("program", ["constrained", "unconstrained"])
def test_no_pair_after_the_move_that_stops_the_run(monkeypatch, program):
    """A converged run makes the pair of every move but the last: ``K`` iterations, ``K - 1`` pairs and ``K``
    gradients (the start's and one per move that a trial follows); each pair is made right after its move."""
    prog = _constrained_program()
    if program == "unconstrained":
        prog = Program(prog.names, np.full(prog.n, -np.inf), np.full(prog.n, np.inf), prog.objective, [])
    counts = _Counts(monkeypatch)
    res = get_solver("majorize").solve(prog, tol=1e-12, callback=counts.callback)
    assert res.status == "optimal"
    K = res.iterations
    assert K >= 4 and res.info["bound_reuse"]["accepted"] >= 3   # trials, i.e. pairs, drive this fit
    assert len(counts.iterates) == K
    assert counts.moves == list(range(1, K))    # after moves 1 .. K-1, never after the last
    assert counts.grad == K


def test_pairs_still_made_when_the_iteration_limit_stops(monkeypatch):
    """``max_iter`` is checked after an iteration: every move before the last makes its pair (the last one may, the
    limit being known only after it); the iterates up to the limit are the converged run's, bit for bit."""
    prog = _constrained_program()
    full = _Counts(monkeypatch)
    res = get_solver("majorize").solve(prog, tol=1e-12, callback=full.callback)
    monkeypatch.undo()
    limited = _Counts(monkeypatch)
    m = res.iterations - 2
    lim = get_solver("majorize").solve(prog, tol=1e-12, max_iter=m, callback=limited.callback)
    assert lim.status == "iteration_limit" and lim.iterations == m
    assert limited.moves[:m - 1] == list(range(1, m)) and len(limited.moves) in (m - 1, m)
    for a, b in zip(limited.iterates, full.iterates[:m]):
        np.testing.assert_array_equal(a, b)


def test_a_callback_stop_makes_no_pair(monkeypatch):
    """A callback that stops the run at move 2: two moves, one pair (after move 1)."""
    prog = _constrained_program()
    counts = _Counts(monkeypatch)

    def stop_at_two(k, x, f):
        counts.callback(k, x, f)
        return k == 2
    res = get_solver("majorize").solve(prog, tol=1e-12, callback=stop_at_two)
    assert res.iterations == 2 and counts.moves == [1]


# --- one_column_attained --------------------------------------------------------------------------------------------
def _reference_one_column(b, seg, coef, c, j, col):
    """The definition, group by group in Python: neither ``+e_j`` nor ``-e_j`` is a direction of strict decrease.
    Along ``v = s e_j`` the slope at infinity is ``s c_j + sum_g coef_g max_k s a_k`` and a group strictly decreases
    when its configurations' ``s a_k`` differ (``sum_k (max - s a_k) > 0``); rows with ``b = -inf`` are no
    configuration. The same margin ``1e-9`` of the terms' scale as the solver's test."""
    groups = {}
    for k in range(len(seg)):
        if np.isfinite(b[k]):
            groups.setdefault(int(seg[k]), []).append(float(col[k]))
    if not groups:
        return False  # no configuration left: the test declines (the caller's general checks decide)
    cj = float(c[j])
    scale = abs(cj) + sum(coef[g] * max(abs(a) for a in vals) for g, vals in groups.items()) + 1e-300
    for s in (1.0, -1.0):
        slope = s * cj + sum(coef[g] * max(s * a for a in vals) for g, vals in groups.items())
        gap = sum(coef[g] * sum(max(s * a for a in vals) - s * a for a in vals) for g, vals in groups.items())
        if slope < 1e-9 * scale or (slope <= 1e-9 * scale and gap > 0):
            return False
    return True


def _draw_layout(rng):
    G = int(rng.integers(1, 12))
    sizes = rng.integers(1, 5, G)
    seg = np.repeat(np.arange(G), sizes)
    K = seg.size
    b = rng.standard_normal(K)
    if rng.random() < 0.4:
        b[rng.random(K) < 0.25] = -np.inf        # h = 0 rows: not configurations
    # dyadic values (multiples of 1/8, coefficients of 1/4): every sum and product below is exact in any order, so
    # the reference's Python sums and the test's numpy reductions meet the margins with the same doubles
    kind = rng.integers(4)
    if kind == 0:
        col = np.round(8.0 * rng.standard_normal(K)) / 8.0
    elif kind == 1:
        col = rng.integers(-2, 3, K).astype(float)   # ties and zeros
    elif kind == 2:
        col = np.ones(K)                             # every configuration alike: no group strictly decreases
    else:
        col = np.where(rng.random(K) < 0.5, 0.0, -0.0)
    coef = rng.integers(1, 9, G) / 4.0
    return b, seg, coef, col


def _edge_linear(rng, b, seg, coef, col, s):
    """``c_j`` that makes the slope along ``s e_j`` exactly zero (the boundary of the test) or close to it."""
    t = 0.0
    for g in np.unique(seg):
        rows = [k for k in range(len(seg)) if seg[k] == g and np.isfinite(b[k])]
        if rows:
            t += coef[g] * max(s * col[k] for k in rows)
    return -s * t + rng.choice([0.0, 1e-12, -1e-12, 1e-3, -1e-3])


def test_one_column_attained_is_the_definition():
    """On 3,000 random layouts (unequal groups, ``-inf`` offsets, ties, signed zeros, constant columns) with ``c_j``
    random or on the edge of either sign's slope: the same verdict as the group-by-group reference, with the column
    passed or read from the CSR features."""
    import scipy.sparse as sp

    rng = np.random.default_rng(12)
    verdicts = {True: 0, False: 0}
    for trial in range(3000):
        b, seg, coef, col = _draw_layout(rng)
        K = seg.size
        j = int(rng.integers(0, 3))
        A = np.zeros((K, 3))
        A[:, j] = col
        A[:, (j + 1) % 3] = rng.standard_normal(K)
        c = np.round(8.0 * rng.standard_normal(3)) / 8.0
        r = trial % 3
        if r:
            c[j] = _edge_linear(rng, b, seg, coef, col, 1.0 if r == 1 else -1.0)
        want = _reference_one_column(b, seg, coef, c, j, col)
        got = one_column_attained(sp.csr_matrix(A), b, seg, coef, c, j, col=col)
        assert got == want, (trial, b, seg, coef, col, c[j])
        assert one_column_attained(sp.csr_matrix(A), b, seg, coef, c, j) == want
        verdicts[want] += 1
    assert min(verdicts.values()) >= 300    # both verdicts drawn often


def test_one_column_attained_declines_unsorted_groups():
    seg = np.array([0, 1, 0, 1])
    col = np.array([0.0, 1.0, 1.0, 0.0])
    b = np.zeros(4)
    assert not one_column_attained(None, b, seg, np.ones(2), np.array([-1.0]), 0, col=col)
