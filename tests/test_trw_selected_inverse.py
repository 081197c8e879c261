"""trw's edge appearance probabilities by selected inversion (:mod:`varopt.solvers.trw.selected_inverse`) against
the reference per-edge solves, and the factorisation and recurrence against dense inverses."""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from varopt.formulations import ising
from varopt.solvers.trw import solver as trw_solver
from varopt.solvers.trw.solver import spanning_tree_probabilities

pytest.importorskip("numba")
from varopt.solvers.trw import selected_inverse as si


def _both(n, i, j):
    a = spanning_tree_probabilities(n, i, j, method="selected")
    b = spanning_tree_probabilities(n, i, j, method="solves")
    return a, b


def _pairs(n):
    return np.array([(a, b) for a in range(n) for b in range(a + 1, n)], dtype=int).reshape(-1, 2)


def _gnp(n, p, rng):
    """Erdos-Renyi G(n, p): each pair an edge with probability p."""
    P = _pairs(n)
    return P[rng.random(len(P)) < p]


def _gnm(n, m, rng):
    """A uniformly random simple graph with n nodes and m edges."""
    P = _pairs(n)
    return P[np.sort(rng.choice(len(P), size=m, replace=False))]


def _tree(n, rng):
    """A random labelled tree: node k joins a uniform earlier node, then the labels are permuted."""
    perm = rng.permutation(n)
    return np.array([(perm[k], perm[rng.integers(0, k)]) for k in range(1, n)])


def _regular3(n, rng):
    """A random simple 3-regular graph (configuration model, redrawn until simple)."""
    while True:
        stubs = rng.permutation(np.repeat(np.arange(n), 3)).reshape(-1, 2)
        E = np.sort(stubs, axis=1)
        if np.all(E[:, 0] != E[:, 1]) and len(np.unique(E, axis=0)) == len(E):
            return E


def _union(*parts):
    """Disjoint union of ``(n, edges)`` graphs: ``(n, edges)`` with the nodes renumbered."""
    off, edges = 0, []
    for n, E in parts:
        edges.append(np.asarray(E, dtype=int).reshape(-1, 2) + off)
        off += n
    return off, np.concatenate(edges)


def _graphs():
    rng = np.random.default_rng(0)
    out = []
    out.append(("tree", 40, *_tree(40, rng).T))                                  # tree: every rho_e = 1
    e = ising.lattice(7, 9, 1.0, 0.0, False)                                     # open grid
    out.append(("grid", e.n, e.i, e.j))
    e = ising.lattice(6, 6, 1.0, 0.0, True)                                      # torus
    out.append(("torus", e.n, e.i, e.j))
    n, E = _union((12, _gnp(12, 0.4, rng)), (5, [(k, k + 1) for k in range(4)]), (3, []),
                  (6, _pairs(6)))                                                # components, isolated nodes
    out.append(("disconnected", n, *E.T))
    for s in range(3):
        out.append((f"gnm{s}", 60, *_gnm(60, int(rng.integers(60, 400)), rng).T))  # simple random graphs
    out.append(("3-regular", 200, *_regular3(200, rng).T))
    return out


@pytest.mark.parametrize("name,n,i,j", _graphs(), ids=[g[0] for g in _graphs()])
def test_selected_inversion_equals_per_edge_solves(name, n, i, j):
    a, b = _both(n, np.asarray(i), np.asarray(j))
    assert np.abs(a - b).max() <= 1e-10
    # Kirchhoff: the probabilities sum to the size of a spanning forest, n - #components
    k = sp.csgraph.connected_components(sp.coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n)), directed=False)[0]
    assert abs(a.sum() - (n - k)) < 1e-9
    if name == "tree":
        assert np.allclose(a, 1.0, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 30), st.floats(0.05, 0.9), st.integers(0, 10_000))
def test_random_graphs_property(n, p, seed):
    E = _gnp(n, p, np.random.default_rng(seed))
    if len(E) == 0:
        return
    i, j = E.T
    a, b = _both(n, i, j)
    assert np.abs(a - b).max() <= 1e-10


def test_factor_and_inverse_against_dense():
    rng = np.random.default_rng(5)
    n = 40
    M = sp.random(n, n, density=0.08, random_state=6)
    A = (M @ M.T + sp.identity(n) * 0.5).tocsc()
    order = rng.permutation(n)
    P = A[order][:, order].tocsc()
    P.sort_indices()
    Ap, Ai = P.indptr.astype(np.int64), P.indices.astype(np.int64)
    parent, Lp = si.ldl_symbolic(n, Ap, Ai)
    Li, Lx, D, ok = si.ldl_numeric(n, Ap, Ai, P.data.astype(float), Lp, parent)
    assert ok
    L = sp.csc_matrix((Lx, Li, Lp), shape=(n, n)).toarray() + np.eye(n)
    assert np.allclose(L @ np.diag(D) @ L.T, P.toarray(), atol=1e-12)
    Zd, Zx, ok = si.selected_inverse(n, Lp, Li, Lx, D)
    Z = np.linalg.inv(P.toarray())
    assert ok and np.allclose(Zd, np.diag(Z), rtol=1e-10)
    rows = np.repeat(np.arange(n), np.diff(Lp))
    assert np.allclose(Zx, Z[Li, rows], rtol=1e-9, atol=1e-12)


def test_failures_are_reported():
    # an indefinite matrix: a non-positive pivot
    A = sp.csc_matrix(np.array([[1.0, 2.0], [2.0, 1.0]]))
    parent, Lp = si.ldl_symbolic(2, A.indptr.astype(np.int64), A.indices.astype(np.int64))
    assert not si.ldl_numeric(2, A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data, Lp, parent)[3]
    # a pattern that is not filled (column 0 has rows 1 and 2, column 1 lacks row 2): the recurrence says so
    Lp, Li = np.array([0, 2, 2, 2]), np.array([1, 2])
    assert not si.selected_inverse(3, Lp, Li, np.array([0.5, 0.5]), np.ones(3))[2]


def test_auto_uses_selected_inversion_without_per_edge_solves(monkeypatch):
    calls = []
    real = si.resistances
    monkeypatch.setattr(si, "resistances", lambda *a: calls.append(1) or real(*a))
    e = ising.lattice(32, 32, 1.0, 0.0, True)
    assert e.m >= trw_solver.SELECTED_MIN_EDGES
    r = spanning_tree_probabilities(e.n, e.i, e.j)
    assert calls == [1] and np.allclose(r, (e.n - 1) / e.m, atol=1e-12)   # (n - 1)/|E|: edge-transitive graph
    monkeypatch.setattr(trw_solver, "numba_available", lambda: False)
    assert np.allclose(spanning_tree_probabilities(e.n, e.i, e.j), r, atol=1e-12) and calls == [1]
    monkeypatch.setattr(trw_solver, "numba_available", lambda: True)
    small = ising.lattice(5, 5, 1.0, 0.0, True)   # small graphs: the solves cost less than compiling once
    assert np.allclose(spanning_tree_probabilities(small.n, small.i, small.j), 24 / 50) and calls == [1]
    with pytest.raises(ValueError, match="method"):
        spanning_tree_probabilities(e.n, e.i, e.j, method="dense")
