"""IPSA's start point (varopt/solvers/ipsa/start.py): the closed form for linear rows that each have a
loosening variable (the L1 box form and others; centred like the phase-1 LP's point), checked by independent evaluation of every row and
against hand-computed points; rows without one still go through the phase-1 LP. The centring's pieces
(unit-norm rows, Newton matrix assembled from a map) against dense constructions and scipy's products."""
import math

import numpy as np
import pytest

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.formulations.l1 import l1_logistic_program
from varopt.program import Constraint, Expression, Program
from varopt.solvers.ipsa import start
from varopt.solvers.ipsa.constraints import ConstraintSet


def _strict(P, x):
    """Every bound and row strictly satisfied, each row evaluated exactly (math.fsum)."""
    if not (np.all(x > P.lb) and np.all(x < P.ub)):
        return False
    for c in P.constraints:
        v = math.fsum(c.body.linear * x) + c.body.constant
        if not (c.lo < v < c.hi):
            return False
    return True


def _no_lp(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("the phase-1 LP was called")
    monkeypatch.setattr(start, "phase1_linear", fail)


def test_box_form_starts_at_w0_u1_without_the_lp(monkeypatch):
    """The closed form gives w = 0, u = 1; the start is that point centred (as the phase-1 LP's point is), without
    the LP."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    P = l1_logistic_program(X, np.where(X[:, 0] > 0, 1.0, -1.0), 0.1, "box")  # w (5), u (5), b
    _no_lp(monkeypatch)
    cons = ConstraintSet(P)
    x0 = start.loosened_interior(cons, P.lb, P.ub)
    assert np.array_equal(x0, np.r_[np.zeros(5), np.ones(5), 0.0])
    G, h = start._linear_rows(cons)
    x = start.strictly_feasible_start(cons, P)
    np.testing.assert_array_equal(x, start.centre(x0, G, h))
    assert _strict(P, x0) and _strict(P, x)
    r = varopt.get_solver("ipsa").solve(P, max_iter=3, backend="numpy", history_objective=False)
    assert r.iterations == 3


def test_loosening_variables_move_to_one_from_their_rows():
    """x0 free, coefficients of both signs (not loosening); x1 free, only with negative coefficients
    in the rows as ``G x <= h`` (loosens upwards); x2 >= 0.5, negative coefficient (upwards); x3 <= 1,
    positive coefficient (downwards). From the bounds point
    (0, 0, 1.5, 0): row a (slack 1 < |-2|) asks x1 += 1 - 1/2, row b (slack -3) asks x1 += 4 (the
    larger wins), row c (slack 0.5) asks x3 -= 0.5, row d (slack 1.5 >= 1) nothing."""
    n = 4

    def row(*coef):
        return Expression(n, linear=np.array(coef, dtype=float))

    cons = [Constraint("a", row(3, -2, 0, 0), -np.inf, 1.0),
            Constraint("b", row(-1, 1, 0, 0), 3.0, np.inf),
            Constraint("c", row(1, 0, 0, 1), -np.inf, 0.5),
            Constraint("d", row(1, 0, 1, 0), 0.0, np.inf)]
    P = Program([f"x{i}" for i in range(n)], np.array([-np.inf, -np.inf, 0.5, -np.inf]),
                np.array([np.inf, np.inf, np.inf, 1.0]), Expression(n, linear=np.ones(n)), cons)
    x = start.loosened_interior(ConstraintSet(P), P.lb, P.ub)
    assert np.array_equal(x, [0.0, 4.0, 1.5, -0.5])
    assert _strict(P, x)


@pytest.mark.parametrize("lo, hi, ub1", [(-1.0, 1.0, np.inf),     # a range row: no variable loosens both sides
                                         (-np.inf, 1.0, 5.0)])    # the loosening side is bounded
def test_rows_without_a_loosening_variable_use_the_phase1_lp(lo, hi, ub1):
    n = 2
    P = Program(["x0", "x1"], np.full(n, -np.inf), np.array([np.inf, ub1]), Expression(n, linear=np.ones(n)),
                [Constraint("r", Expression(n, linear=np.array([1.0, -1.0])), lo, hi),
                 Constraint("q", Expression(n, linear=np.array([1.0, 1.0])), -3.0, np.inf)])
    cons = ConstraintSet(P)
    assert start.loosened_interior(cons, P.lb, P.ub) is None
    assert _strict(P, start.strictly_feasible_start(cons, P))


def _random_rows(rng, n_rows, n, max_terms):
    """Sparse rows of 1..max_terms nonzeros on random columns (rows share columns: sums of several terms)."""
    import scipy.sparse as sp
    rows, cols, vals = [], [], []
    for r in range(n_rows):
        k = int(rng.integers(1, max_terms + 1))
        c = rng.choice(n, size=k, replace=False)
        rows += [r] * k
        cols += c.tolist()
        vals += rng.normal(size=k).tolist()
    return sp.csr_matrix((vals, (rows, cols)), shape=(n_rows, n))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_centring_newton_matrix_is_gt_diag_w_g_plus_i(seed):
    """_NewtonMatrix.csc(w) is G^T diag(w) G + I (dense product as the reference, rows of up to 4 terms so
    that entries sum several rows; a column in no row), in canonical CSC form (sorted rows, no stored zeros)."""
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    n = 12
    G = _random_rows(rng, 20, n, 4)
    G = sp.csr_matrix(G.toarray() * (np.arange(n) != 5))  # column 5 in no row: only the identity's 1
    w = rng.uniform(0.1, 3.0, size=G.shape[0])
    H = start._NewtonMatrix(G).csc(w)
    Gd = G.toarray()
    ref = Gd.T @ (w[:, None] * Gd) + np.eye(n)
    np.testing.assert_allclose(H.toarray(), ref, rtol=1e-13, atol=1e-14)
    assert H.has_canonical_format and np.all(H.data != 0) and H.nnz == np.count_nonzero(ref)


def test_centring_newton_matrix_matches_scipy_bit_for_bit_on_pairs():
    """With two terms per entry (the L1 box form: rows w_j + u_j >= 0, w_j - u_j <= 0, unit-normed) the
    assembled matrix is scipy's ``(G^T diag(w) G + I).tocsc()`` array for array, including the off-diagonal
    entries that cancel to an exact 0 at equal slacks (left out by scipy, and here)."""
    import scipy.sparse as sp
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 6))
    P = l1_logistic_program(X, np.where(X[:, 0] > 0, 1.0, -1.0), 0.1, "box")
    cons = ConstraintSet(P)
    G, _ = start._linear_rows(cons)
    for w in (np.full(G.shape[0], 2.0), rng.uniform(0.5, 2.0, size=G.shape[0])):
        ref = (G.T.tocsr() @ sp.diags(w) @ G + sp.identity(G.shape[1], format="csr")).tocsc()
        H = start._NewtonMatrix(G).csc(w)
        for a in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(H, a), getattr(ref, a)), a


def test_unit_norm_rows_are_the_bounds_then_the_rows_normalised():
    """_linear_rows: the rows -e_i (lower bounds), e_i (upper bounds), then G, each divided by its Euclidean
    norm (checked against a dense construction with math.fsum), and h likewise."""
    n = 4

    def row(*coef):
        return Expression(n, linear=np.array(coef, dtype=float))

    P = Program([f"x{i}" for i in range(n)], np.array([0.0, -np.inf, -1.0, -np.inf]),
                np.array([np.inf, 2.0, 3.0, np.inf]), Expression(n, linear=np.ones(n)),
                [Constraint("a", row(3, -4, 0, 0), -np.inf, 5.0), Constraint("b", row(1, 1, 1, 1), -2.0, np.inf)])
    cons = ConstraintSet(P)
    G, h = start._linear_rows(cons)
    D = np.vstack([-np.eye(n)[[0, 2]], np.eye(n)[[1, 2]], [[3, -4, 0, 0], [-1, -1, -1, -1]]])
    hd = np.array([-0.0, 1.0, 2.0, 3.0, 5.0, 2.0])
    nrm = np.array([math.sqrt(math.fsum(v * v for v in r)) for r in D])
    np.testing.assert_allclose(G.toarray(), D / nrm[:, None], rtol=1e-15, atol=0)
    np.testing.assert_allclose(h, hd / nrm, rtol=1e-15, atol=0)
    assert G.has_canonical_format


def test_centred_start_is_the_analytic_centre():
    """The centring's point solves its problem: the gradient G^T (1/s) + (x - x_lp) of
    -sum log(h - G x) + ||x - x_lp||^2 / 2 vanishes (rows of several terms, the general case)."""
    rng = np.random.default_rng(4)
    n = 8
    G = _random_rows(rng, 14, n, 3)
    x_lp = rng.normal(size=n)
    h = G @ x_lp + rng.uniform(0.05, 1.0, size=G.shape[0])
    assert np.abs(G.T @ (1.0 / (h - G @ x_lp))).max() > 0.1  # the start is far from stationary
    x = start.centre(x_lp, G, h)
    s = h - G @ x
    assert np.all(s > 0)
    # stopped on the Newton decrement g^T H^-1 g < 1e-10: |g| ~ 1e-5 sqrt(|H|) at most
    assert np.abs(G.T @ (1.0 / s) + (x - x_lp)).max() < 1e-6
