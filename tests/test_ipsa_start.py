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
    the LP: the centre w = 0, u = 2 in closed form (start.mirror_pair_centre), where the Newton steps of
    start.centre stop within their tolerance."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    P = l1_logistic_program(X, np.where(X[:, 0] > 0, 1.0, -1.0), 0.1, "box")  # w (5), u (5), b
    _no_lp(monkeypatch)
    cons = ConstraintSet(P)
    x0 = start.loosened_interior(cons, P.lb, P.ub)
    assert np.array_equal(x0, np.r_[np.zeros(5), np.ones(5), 0.0])
    G, h = start._linear_rows(cons)
    x = start.strictly_feasible_start(cons, P)
    assert np.array_equal(x, np.r_[np.zeros(5), np.full(5, 2.0), 0.0])
    np.testing.assert_allclose(x, start.centre(x0, G, h), rtol=0, atol=1e-8)
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


def _mirror_pairs(rng, pairs, n, p=None, c=None):
    """Rows ``p w - c u <= 0``, ``-p w - c u <= 0`` on disjoint variable pairs ``(w, u)`` (random ones of ``n``) with
    coefficients ``p != 0`` and ``c > 0`` drawn per pair unless given, the pair's columns in either order."""
    import scipy.sparse as sp
    perm = rng.permutation(n)[:2 * pairs].reshape(pairs, 2)
    p = rng.choice([-1.0, 1.0], pairs) * rng.uniform(0.2, 3.0, pairs) if p is None else np.full(pairs, p)
    c = rng.uniform(0.2, 3.0, pairs) if c is None else np.full(pairs, c)
    rows = []
    for (w, u), pk, ck in zip(perm, p, c):
        for sign in (1.0, -1.0):
            r = np.zeros(n)
            r[w], r[u] = sign * pk, -ck
            rows.append(r)
    return sp.csr_matrix(np.vstack(rows)), perm


def _mirror_program(G, n):
    """A program whose linear rows are ``G x <= 0``, no bounds."""
    cons = [Constraint(f"r{k}", Expression(n, linear=G[k].toarray().ravel()), -np.inf, 0.0) for k in range(G.shape[0])]
    return Program([f"x{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), Expression(n, linear=np.ones(n)),
                   cons)


@pytest.mark.parametrize("seed", range(4))
def test_mirror_pair_centre_is_the_centring_point(seed):
    """start.mirror_pair_centre (the box form's centre in closed form): from points w = 0, u > 0 of random mirror
    pairs (coefficients, column order, free variables in no row) the point where the gradient of the centring's
    objective -sum log(h - G x) + ||x - x_lp||^2 / 2 (unit-norm rows) is zero, and what start.centre's Newton steps
    reach to their tolerance; from u = 1 the point u = 2 exactly."""
    rng = np.random.default_rng(seed)
    n = 11
    G, pair = _mirror_pairs(rng, 4, n)
    x_lp = rng.normal(size=n)
    x_lp[pair[:, 0]] = 0.0
    x_lp[pair[:, 1]] = rng.uniform(0.1, 4.0, size=4)
    cons = ConstraintSet(_mirror_program(G, n))
    x = start.mirror_pair_centre(cons, x_lp)
    Gu, hu = start._linear_rows(cons)
    s = hu - Gu @ x
    assert np.all(s > 0)
    assert np.abs(Gu.T @ (1.0 / s) + (x - x_lp)).max() < 1e-14 * (1 + np.abs(x).max())
    # the Newton steps stop on the decrement g^T H^-1 g < 1e-10: within ~1e-5 of the centre
    np.testing.assert_allclose(x, start.centre(x_lp, Gu, hu), rtol=0, atol=1e-5)
    x_lp[pair[:, 1]] = 1.0
    assert np.array_equal(start.mirror_pair_centre(cons, x_lp)[pair[:, 1]], np.full(4, 2.0))


@pytest.mark.parametrize("seed", range(3))
def test_mirror_pair_start_is_the_loosened_point_centred(seed, monkeypatch):
    """For mirror pairs the start skips loosened_interior's search: the same point as its (w = 0, u = 1) centred
    in closed form, i.e. u = 2 (random coefficients and column order, variables in no row), strictly feasible."""
    rng = np.random.default_rng(seed)
    n = 9
    G, pair = _mirror_pairs(rng, 3, n)
    P = _mirror_program(G, n)
    cons = ConstraintSet(P)
    x0 = start.loosened_interior(cons, P.lb, P.ub)
    _no_lp(monkeypatch)
    x = start.strictly_feasible_start(cons, P)
    assert np.array_equal(x, start.mirror_pair_centre(cons, x0))
    assert np.array_equal(x[pair[:, 1]], np.full(3, 2.0)) and not np.any(np.delete(x, pair[:, 1]))
    assert _strict(P, x)


def test_mirror_pair_centre_declines_other_rows():
    """Rows that are not mirror pairs on disjoint pairs, or a start off w = 0, get None (the Newton centring):
    a nonzero right-hand side, unequal u coefficients, a u coefficient of the loosening-downward sign, a
    variable in two pairs, a bound, w != 0."""
    import scipy.sparse as sp
    rng = np.random.default_rng(7)
    n = 6
    G, pair = _mirror_pairs(rng, 2, n, p=1.5, c=0.5)
    x = np.zeros(n)
    x[pair[:, 1]] = 1.0
    P = _mirror_program(G, n)
    assert start.mirror_pair_centre(ConstraintSet(P), x) is not None
    shifted = Program(P.names, P.lb, P.ub, P.objective, [Constraint(c.name, c.body, c.lo, 0.5) for c in P.constraints])
    assert start.mirror_pair_centre(ConstraintSet(shifted), x) is None
    for edit in ("unequal", "sign"):
        D = G.toarray()
        u = pair[0, 1]
        D[1, u] = -0.25 if edit == "unequal" else 0.5
        D[0, u] = D[0, u] if edit == "unequal" else 0.5
        assert start.mirror_pair_centre(ConstraintSet(_mirror_program(sp.csr_matrix(D), n)), x) is None
    D = G.toarray()
    D[2:, :] = 0.0
    D[2, pair[0, 1]], D[2, pair[1, 1]], D[3, pair[0, 1]], D[3, pair[1, 1]] = 1.0, -0.5, -1.0, -0.5  # u_0 in two pairs
    assert start.mirror_pair_centre(ConstraintSet(_mirror_program(sp.csr_matrix(D), n)), x) is None
    lb = np.full(n, -np.inf)
    lb[pair[0, 1]] = 0.0
    bounded = Program(P.names, lb, P.ub, P.objective, P.constraints)
    assert start.mirror_pair_centre(ConstraintSet(bounded), x) is None
    xw = x.copy()
    xw[pair[0, 0]] = 0.1
    assert start.mirror_pair_centre(ConstraintSet(P), xw) is None


@pytest.mark.parametrize("seed", range(4))
def test_row_components_of_variable_pairs_are_scipys(seed):
    """constraints.row_components on rows that link each variable to at most one other (the box form's pairs: its
    fast path without scipy's graph) and on rows that do not (scipy's): the components and labels of the pattern
    of |G|^T |G| + I, rows of one or two terms, repeated rows, variables in no row."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    from varopt.solvers.ipsa.constraints import _matching_components, row_components
    rng = np.random.default_rng(seed)
    n = 25
    G, _ = _mirror_pairs(rng, 8, n)
    singles = sp.csr_matrix(np.eye(n)[rng.choice(n, size=5)])
    for k, M in enumerate((G, sp.vstack([singles, G]).tocsr(), sp.vstack([G, _random_rows(rng, 3, n, 3)]).tocsr())):
        rid = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
        link = np.flatnonzero(rid[1:] == rid[:-1])
        fast = _matching_components(M.indices[link], M.indices[link + 1], n)
        assert fast is not None or k == 2  # the pairs (with or without one-variable rows) take the fast path
        ref = connected_components((abs(M).T @ abs(M)).tocsr() + sp.identity(n, format="csr"), directed=False)
        got = row_components(M, n)
        assert got[0] == ref[0] and np.array_equal(got[1], ref[1]) and got[1].dtype == ref[1].dtype


@pytest.mark.parametrize("seed", range(4))
def test_row_components_are_those_of_the_rows_products(seed):
    """constraints.row_components (chains of each row's nonzeros) finds the components of the pattern of
    |G|^T |G| + I, labels included (scipy's numbering, which fixes the order of ReducedSystem's blocks):
    rows of 1-3 terms, some columns in no row."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    from varopt.solvers.ipsa.constraints import row_components
    rng = np.random.default_rng(seed)
    n = 30
    G = _random_rows(rng, 12, n, 3)
    ref = connected_components((abs(G).T @ abs(G)).tocsr() + sp.identity(n, format="csr"), directed=False)
    got = row_components(G, n)
    assert got[0] == ref[0] and np.array_equal(got[1], ref[1])
    assert got[0] < n  # some rows join variables


@pytest.mark.parametrize("seed", range(3))
def test_row_products_are_scipys_bit_for_bit(seed):
    """The centring's G v and G^T u (bincount over the entries) equal scipy's CSR products array for array
    (rows of up to 5 terms: sums of several terms, whose order matters)."""
    rng = np.random.default_rng(seed)
    G = _random_rows(rng, 40, 12, 5)
    prod = start._RowProducts(G)
    v, u = rng.normal(size=12), rng.normal(size=40)
    assert np.array_equal(prod.dot(v), G @ v)
    assert np.array_equal(prod.tdot(u), G.T.tocsr() @ u)


def test_block_centring_solves_the_newton_systems_of_the_sparse_one():
    """With rows that split the variables into blocks of 1, 2 and 3 (a variable in no row, pairs, a triple)
    the centring solves its Newton systems block by block: the same steps as the sparse LU to rounding, and
    the point is the analytic centre (its gradient vanishes)."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla
    from varopt.solvers.ipsa.constraints import block_layout, row_components
    rng = np.random.default_rng(5)
    n = 9  # blocks {0, 1}, {2, 3, 4}, {5}, {6, 7}, {8}
    rows = [[0, 1], [1], [0, 1], [2, 3], [3, 4], [2, 4], [6, 7], [7, 6], [8]]
    G = sp.csr_matrix(np.vstack([np.bincount(r, weights=rng.normal(size=len(r)), minlength=n) for r in rows]))
    ncomp, lab = row_components(G, n)
    layout = block_layout(lab, np.bincount(lab, minlength=ncomp))
    assert sorted(sz for sz, _, _ in layout[0]) == [1, 2, 3]
    newton = start._NewtonMatrix(G)
    blocks = start._BlockNewton(newton, layout)
    w, rhs = rng.uniform(0.5, 2.0, size=G.shape[0]), rng.normal(size=n)
    np.testing.assert_allclose(blocks.solve(w, rhs), spla.spsolve(newton.csc(w), rhs), rtol=1e-12, atol=1e-14)
    x_lp = rng.normal(size=n)
    h = G @ x_lp + rng.uniform(0.05, 1.0, size=G.shape[0])
    x = start.centre(x_lp, G, h, layout=layout)
    np.testing.assert_array_equal(x, start.centre(x_lp, G, h))  # the layout found from G when not given
    s = h - G @ x
    assert np.all(s > 0)
    assert np.abs(G.T @ (1.0 / s) + (x - x_lp)).max() < 1e-6


def test_constraint_rows_as_arrays_equal_the_loop(monkeypatch):
    """ConstraintSet builds all-linear rows as arrays: the same G, h, row names, ||G_r||_1 and term counts as
    its loop over the constraints (forced here), for upper, lower and range rows with constants, an infinite
    side, repeated side values and a row without variables (dropped)."""
    n = 4

    def row(const, *coef):
        return Expression(n, constant=const, linear=np.array(coef, dtype=float))

    cons = [Constraint("a", row(0.5, 3, -4, 0, 0), -np.inf, 5.0), Constraint("b", row(0.0, 1, 1, 1, 1), -2.0, np.inf),
            Constraint("c", row(-1.25, 0, 2, 0, -1), -1.5, 7.0), Constraint("d", row(2.0, 0, 0, 0, 0), -np.inf, 5.0),
            Constraint("e", row(0.0, 0, 0, 1e-3, 0), 0.0, np.inf), Constraint("f", row(0.0, 1, 0, 0, 0), -np.inf, -0.0)]
    P = Program([f"x{i}" for i in range(n)], np.full(n, -np.inf), np.full(n, np.inf), Expression(n, linear=np.ones(n)),
                cons)
    fast = ConstraintSet(P)
    with monkeypatch.context() as mp:
        mp.setattr(ConstraintSet, "_linear_rows_arrays", staticmethod(lambda cs, bodies: None))
        loop = ConstraintSet(P)
    for a in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(fast.G, a), getattr(loop.G, a)), a
    assert np.array_equal(fast.h, loop.h) and fast.names == loop.names and fast.row_names == loop.row_names
    assert fast.names == ["a (<= 5)", "b (>= -2)", "c (<= 7)", "c (>= -1.5)", "e (>= 0)", "f (<= -0)"]
    np.testing.assert_array_equal(fast.h, [4.5, 2.0, 8.25, 0.25, 0.0, 0.0])
    assert np.array_equal(fast.G_norm1, loop.G_norm1)
    assert np.array_equal(fast.G_norm1, np.asarray(abs(fast.G).sum(axis=1)).ravel())
    assert np.array_equal(fast.G_terms, [3, 5, 3, 3, 2, 2])
