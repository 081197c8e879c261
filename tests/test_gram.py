"""Weighted Gram Hessians of term groups (varopt/program/gram.py; docs/architecture.md, "Hessians of
term groups") against the former sparse formula, dense numpy and finite differences of the gradient,
in each of the three evaluation modes."""
import numpy as np
import pytest
import scipy.sparse as sp

from varopt.program import AtomGroup, Expression, LseGroup, QuadraticTerms
from varopt.program import gram as G
from varopt.program.atoms import ATOMS

MODES = ("pattern", "dense", "product")


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    """Force one evaluation mode of every WeightedGram built in the test."""
    m = request.param
    if m == "pattern":
        monkeypatch.setattr(G, "PATTERN_FRACTION", np.inf)
    else:
        monkeypatch.setattr(G, "PATTERN_MAX", -1)
        if m == "product":
            monkeypatch.setattr(G, "DENSE_MAX_N", -1)
    return m


def _matrix(rng, m, n, density, empty_rows=0.0):
    A = sp.random(m, n, density=density, random_state=int(rng.integers(1 << 30)), format="csr",
                  data_rvs=lambda k: rng.normal(size=k))
    if empty_rows:
        keep = (rng.random(m) >= empty_rows).astype(float)
        A = sp.diags(keep) @ A
    return sp.csr_matrix(A)


def _old_atom_hessian(g, x):
    """The assembly before the weighted Grams: ``A^T diag(c w g'') A + C + C^T`` (dense numpy)."""
    A = g.A.toarray()
    w = np.where(g.mult >= 0, x[np.maximum(g.mult, 0)], 1.0)
    u = A @ x + g.b
    kern = ATOMS[g.kind]
    E = np.zeros((g.n, len(g)))
    has = np.flatnonzero(g.mult >= 0)
    E[g.mult[has], has] = 1.0
    if kern.arity == 2:
        A2 = g.A2.toarray()
        v = A2 @ x + g.b2
        huu, huv, hvv = kern.hess(u, v)
        du, dv = kern.grad(u, v)
        cw = g.coef * w
        H = A.T @ np.diag(cw * huu) @ A + A2.T @ np.diag(cw * hvv) @ A2 + A.T @ np.diag(cw * huv) @ A2 \
            + A2.T @ np.diag(cw * huv) @ A
        C = E @ np.diag(g.coef * du) @ A + E @ np.diag(g.coef * dv) @ A2
    else:
        H = A.T @ np.diag(g.coef * w * kern.d2(u)) @ A
        C = E @ np.diag(g.coef * kern.d1(u)) @ A
    return H + C + C.T


def _old_lse_hessian(g, x):
    """``A^T diag(p s) A - B^T diag(s) B + C + C^T``, ``B = P A`` (dense numpy)."""
    A = g.A.toarray()
    z = A @ x + g.b
    p = np.zeros_like(z)
    lse = np.zeros(len(g))
    for k in range(len(g)):
        rows = g.seg == k
        mx = z[rows].max()
        e = np.exp(z[rows] - mx)
        p[rows] = e / e.sum()
        lse[k] = mx + np.log(e.sum())
    s = g.coef * np.where(g.mult >= 0, x[np.maximum(g.mult, 0)], 1.0)
    P = np.zeros((len(g), z.size))
    P[g.seg, np.arange(z.size)] = p
    B = P @ A
    E = np.zeros((g.n, len(g)))
    has = np.flatnonzero(g.mult >= 0)
    E[g.mult[has], has] = 1.0
    C = E @ np.diag(g.coef) @ B
    return A.T @ np.diag(p * s[g.seg]) @ A - B.T @ np.diag(s) @ B + C + C.T


def _fd_hessian(e, x, h=1e-6):
    n = x.size
    H = np.zeros((n, n))
    for j in range(n):
        d = np.zeros(n)
        d[j] = h
        H[:, j] = (e.gradient(x + d) - e.gradient(x - d)) / (2 * h)
    return 0.5 * (H + H.T)


def _random_groups(rng, n, density, with_mult):
    """Atom groups of every smooth kind and two LSE groups (a logistic loss with its empty ``exp(0)``
    rows, and a softmax with groups of 1-4 rows), arguments kept in the atoms' domains at ``x`` in
    [0.1, 0.5]^n."""
    m = int(rng.integers(3, 9))
    groups = []
    for kind in ("exp", "square", "neglog", "xlogx", "quad_over_lin"):
        A = _matrix(rng, m, n, density)
        if kind in ("neglog", "xlogx"):
            A = abs(A)
            b = rng.uniform(0.5, 1.0, m)  # u = |A| x + b > 0
        else:
            b = rng.normal(size=m)
        mult = None
        if with_mult:
            mult = np.where(rng.random(m) < 0.5, rng.integers(0, n, m), -1)
        kw = {}
        if kind == "quad_over_lin":
            kw = dict(A2=abs(_matrix(rng, m, n, density)), b2=rng.uniform(0.5, 1.0, m))
        groups.append(AtomGroup(kind, rng.uniform(0.2, 2.0, m), A, b, mult, **kw))
    # logistic rows log(exp(0) + exp(a.x)): pairs (empty row, data row)
    k = int(rng.integers(2, 8))
    data = _matrix(rng, k, n, density)
    A = sp.vstack([sp.csr_matrix((k, n)), data]).tocsr()[np.ravel(np.column_stack([np.arange(k), k + np.arange(k)]))]
    groups.append(LseGroup(A, np.zeros(2 * k), np.repeat(np.arange(k), 2), rng.uniform(0.2, 2.0, k)))
    sizes = rng.integers(1, 5, int(rng.integers(2, 6)))
    seg = np.repeat(np.arange(sizes.size), sizes)
    mult = np.where(rng.random(sizes.size) < 0.5, rng.integers(0, n, sizes.size), -1) if with_mult else None
    groups.append(LseGroup(_matrix(rng, seg.size, n, density, empty_rows=0.2), rng.normal(size=seg.size), seg,
                           rng.uniform(0.2, 2.0, sizes.size), mult))
    return groups


@pytest.mark.parametrize("density", [0.2, 1.0], ids=["sparse", "dense"])
@pytest.mark.parametrize("with_mult", [False, True], ids=["plain", "multipliers"])
@pytest.mark.parametrize("seed", range(4))
def test_group_hessians_match_former_formula_and_finite_differences(seed, density, with_mult, mode):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    x = rng.uniform(0.1, 0.5, n)
    groups = _random_groups(rng, n, density, with_mult)
    for g in groups:
        ref = _old_lse_hessian(g, x) if isinstance(g, LseGroup) else _old_atom_hessian(g, x)
        Hs = g.hessian(x)
        assert sp.issparse(Hs)
        np.testing.assert_allclose(Hs.toarray(), ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g.hessian(x, dense=True), ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g.hessian(x + 0.05, dense=True), g.hessian(x + 0.05).toarray(), rtol=1e-12,
                                   atol=1e-12)  # a second evaluation reuses the cached structure
        idx = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
        np.testing.assert_allclose(g.hessian(x, dense=True, idx=idx), ref[np.ix_(idx, idx)], rtol=1e-12,
                                   atol=1e-12)
    iq = rng.integers(0, n, 4)
    jq = rng.integers(0, n, 4)
    e = Expression(n, 1.0, rng.normal(size=n), QuadraticTerms(iq, jq, rng.normal(size=4), n), *(
        ([g for g in groups if isinstance(g, AtomGroup)], [g for g in groups if isinstance(g, LseGroup)])))
    H = e.hessian(x, dense=True)
    np.testing.assert_allclose(H, e.hessian(x).toarray(), rtol=1e-12, atol=1e-12)
    idx = rng.permutation(n)[:max(1, n // 2)]  # unsorted: the submatrix in the order of idx
    np.testing.assert_allclose(e.hessian(x, dense=True, idx=idx), H[np.ix_(idx, idx)], rtol=1e-12, atol=1e-12)
    fd = _fd_hessian(e, x)
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(fd).max()))


def test_modes_agree_on_a_larger_sparse_logistic_loss():
    """A finite sum of 400 logistic rows over 60 features (~6 a row): the mode chosen by cost, each mode
    forced, and the dense formula ``A^T diag(c p (1 - p)) A`` over the data rows."""
    rng = np.random.default_rng(7)
    m, n = 400, 60
    data = _matrix(rng, m, n, 0.1)
    A = sp.vstack([sp.csr_matrix((m, n)), data]).tocsr()[np.ravel(np.column_stack([np.arange(m), m + np.arange(m)]))]
    x = rng.normal(size=n) * 0.3
    c = np.full(m, 1.0 / m)
    z = data @ x
    p = 1.0 / (1.0 + np.exp(-z))
    ref = data.T.toarray() @ np.diag(c * p * (1 - p)) @ data.toarray()
    for frac, pmax, dmax in ((G.PATTERN_FRACTION, G.PATTERN_MAX, G.DENSE_MAX_N), (np.inf, G.PATTERN_MAX, 6000),
                             (0.0, -1, 6000), (0.0, -1, -1)):
        old = G.PATTERN_FRACTION, G.PATTERN_MAX, G.DENSE_MAX_N
        G.PATTERN_FRACTION, G.PATTERN_MAX, G.DENSE_MAX_N = frac, pmax, dmax
        try:
            g = LseGroup(A, np.zeros(2 * m), np.repeat(np.arange(m), 2), c)
            np.testing.assert_allclose(g.hessian(x, dense=True), ref, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(g.hessian(x).toarray(), ref, rtol=1e-12, atol=1e-14)
        finally:
            G.PATTERN_FRACTION, G.PATTERN_MAX, G.DENSE_MAX_N = old


def test_cached_structure_follows_a_replaced_matrix():
    rng = np.random.default_rng(3)
    g = AtomGroup("exp", np.ones(5), _matrix(rng, 5, 4, 0.6), np.zeros(5))
    x = rng.normal(size=4)
    g.hessian(x)
    g.A = _matrix(rng, 5, 4, 0.6)
    np.testing.assert_allclose(g.hessian(x, dense=True), _old_atom_hessian(g, x), rtol=1e-12, atol=1e-12)


def test_infinite_second_derivative_stays_on_the_support(mode):
    """``g'' = 1/u`` is infinite at ``u = 0`` (``xlogx``): the Hessian is infinite on that row's support
    only, as with the sparse product (no ``inf * 0 = NaN`` spreading in the dense mode)."""
    A = sp.csr_matrix(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))
    g = AtomGroup("xlogx", np.ones(2), A, np.zeros(2))
    x = np.array([0.0, 0.3, 0.2])
    for H in (g.hessian(x).toarray(), g.hessian(x, dense=True)):
        assert H[0, 0] == np.inf
        assert np.isfinite(H[1:, 1:]).all() and not np.isnan(H).any()


def test_weight_count_and_submatrix_form_are_checked():
    W = G.WeightedGram(sp.eye(3, format="csr"), [0, 1, 2], [0, 1, 2])
    with pytest.raises(ValueError, match="3 row pairs"):
        W(np.ones(2))
    with pytest.raises(ValueError, match="dense only"):
        W(np.ones(3), idx=[0])
