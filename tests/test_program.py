"""Compiled-program evaluation: values, gradients and Hessians of every term kind.

References are independent: values from a plain per-row numpy loop written from the
catalogue formulas, gradients by central finite differences, Hessians by finite
differences of the gradient.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

from varopt.program import AtomGroup, Constraint, Expression, LseGroup, Program, QuadraticTerms


def g_ref(kind, u, v=None):
    if kind == "xlogx":
        return u * np.log(u) if u > 0 else 0.0
    if kind == "neglog":
        return -np.log(u)
    if kind == "exp":
        return np.exp(u)
    if kind == "square":
        return u * u
    return u * u / v


def random_expression(seed, n=4):
    rng = np.random.default_rng(seed)
    groups = []
    for kind in ("xlogx", "neglog", "exp", "square", "quad_over_lin"):
        m = int(rng.integers(1, 4))
        A = sp.random(m, n, density=0.5, random_state=int(rng.integers(1 << 30))).tocsr()
        # positive argument domains: affine maps with nonnegative coefficients plus offset
        A.data = np.abs(A.data)
        b = rng.uniform(0.5, 1.5, m)
        mult = np.where(rng.random(m) < 0.5, rng.integers(0, n, m), -1)
        kw = {}
        if kind == "quad_over_lin":
            A2 = sp.random(m, n, density=0.5, random_state=int(rng.integers(1 << 30))).tocsr()
            A2.data = np.abs(A2.data)
            kw = dict(A2=A2, b2=rng.uniform(0.5, 1.5, m))
            A = sp.csr_matrix(rng.standard_normal((m, n)))
        groups.append(AtomGroup(kind, rng.standard_normal(m), A, b, mult=mult, **kw))
    K = int(rng.integers(2, 7))
    seg = np.sort(rng.integers(0, 3, K))
    seg = np.unique(seg, return_inverse=True)[1]
    G = seg.max() + 1
    lse = LseGroup(sp.csr_matrix(rng.standard_normal((K, n))), rng.standard_normal(K), seg,
                   rng.standard_normal(G), mult=np.where(rng.random(G) < 0.5, rng.integers(0, n, G), -1))
    q = QuadraticTerms(rng.integers(0, n, 3), rng.integers(0, n, 3), rng.standard_normal(3), n)
    return Expression(n, rng.standard_normal(), rng.standard_normal(n), q, groups, [lse]), rng


def reference_value(e, x):
    val = e.constant + e.linear @ x + sum(v * x[i] * x[j] for i, j, v in zip(e.quadratic.i, e.quadratic.j, e.quadratic.v))
    for g in e.atoms:
        for r in range(len(g)):
            u = g.A[r].toarray().ravel() @ x + g.b[r]
            v = None if g.A2 is None else g.A2[r].toarray().ravel() @ x + g.b2[r]
            w = x[g.mult[r]] if g.mult[r] >= 0 else 1.0
            val += g.coef[r] * w * g_ref(g.kind, u, v)
    for g in e.lse:
        s = g.A.toarray() @ x + g.b
        for k in range(len(g)):
            w = x[g.mult[k]] if g.mult[k] >= 0 else 1.0
            val += g.coef[k] * w * np.log(np.sum(np.exp(s[g.seg == k])))
    return val


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_value_gradient_hessian_match_references(seed):
    e, rng = random_expression(seed)
    x = rng.uniform(0.2, 1.0, e.n)
    ref = reference_value(e, x)
    assert e.value(x) == pytest.approx(ref, rel=1e-9, abs=1e-9)
    h = 1e-6
    I = np.eye(e.n)
    fd = np.array([(e.value(x + h * I[i]) - e.value(x - h * I[i])) / (2 * h) for i in range(e.n)])
    g = e.gradient(x)
    assert np.allclose(g, fd, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(fd).max()))
    H = e.hessian(x).toarray()
    fdH = np.array([(e.gradient(x + h * I[i]) - e.gradient(x - h * I[i])) / (2 * h) for i in range(e.n)])
    assert np.allclose(H, H.T, atol=1e-12)
    assert np.allclose(H, fdH, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(fdH).max()))


def test_lse_is_stable_for_huge_arguments():
    A = sp.csr_matrix(np.array([[1.0], [2.0], [3.0]]))
    g = LseGroup(A, np.zeros(3), np.array([0, 0, 1]), np.ones(2))
    x = np.array([1e4])
    v = g.value(x)
    assert np.isfinite(v) and v == pytest.approx(2e4 + np.log1p(np.exp(-1e4)) + 3e4)
    assert np.all(np.isfinite(g.gradient(x))) and np.all(np.isfinite(g.hessian(x).toarray()))


def test_xlogx_at_zero_and_domain():
    g = AtomGroup("xlogx", [1.0], sp.csr_matrix([[1.0]]), [0.0])
    assert g.value(np.array([0.0])) == 0.0
    assert np.isnan(g.value(np.array([-1.0])))


def test_interactions_and_quadratic_form():
    n = 3
    sq = AtomGroup("square", [1.0, 2.0], sp.csr_matrix([[1.0, 0, 0], [0, 1.0, 0]]), [1.0, -1.0], mult=[2, -1])
    e = Expression(n, 0.0, None, QuadraticTerms([0], [1], [3.0], n), [sq])
    assert e.interactions() == {(0, 1), (0, 2)}
    assert not e.is_quadratic_form  # the row with a multiplier is cubic
    e2 = Expression(n, 1.0, np.ones(n), QuadraticTerms([0], [1], [3.0], n), [AtomGroup("square", [2.0], sp.csr_matrix([[0, 1.0, 0]]), [-1.0])])
    H, c, k = e2.as_quadratic()
    x = np.array([0.3, -0.7, 2.0])
    assert 0.5 * x @ H @ x + c @ x + k == pytest.approx(e2.value(x))


def test_program_sense_and_views():
    n = 2
    obj = Expression(n, 0.0, np.array([1.0, 2.0]))
    c1 = Constraint("c1", Expression(n, 1.0, np.array([1.0, 1.0])), -np.inf, 3.0)
    c2 = Constraint("c2", Expression(n, 0.0, None, None, [AtomGroup("square", [1.0], sp.csr_matrix([[1.0, 0]]), [0.0])]), -np.inf, 4.0)
    p = Program(["a", "b"], [0, 0], [1, np.inf], obj, [c1, c2], maximize=True)
    A, lo, hi, idx = p.linear_constraints()
    assert idx == [0] and hi[0] == 2.0 and A.toarray().tolist() == [[1.0, 1.0]]
    assert [c.name for c in p.nonlinear_constraints()] == ["c2"]
    assert p.user_value(5.0) == -5.0
    assert p.user_bounds(-3.0, -1.0) == (1.0, 3.0)
    assert c1.sense == "<=" and p.max_violation(np.array([1.0, 5.0])) == pytest.approx(4.0)
    assert p.is_convex()


def test_max_violation_equals_the_constraint_by_constraint_evaluation():
    """``Program.max_violation`` evaluates the linear constraints as one cached sparse product; it must equal the
    largest of ``lo - g(x)``, ``g(x) - hi`` over every constraint evaluated on its own (bounds, two-sided and
    one-sided rows, an equality, a constant body, a nonlinear row) and see a constraint appended to the list."""
    from varopt.program import Constraint, Expression, Program
    from varopt.program.terms import QuadraticTerms

    def reference(p, x):
        v = [np.max(np.maximum(p.lb - x, 0.0), initial=0.0), np.max(np.maximum(x - p.ub, 0.0), initial=0.0)]
        v += [max(c.lo - c.body.value(x), c.body.value(x) - c.hi, 0.0) for c in p.constraints]
        return float(max(v))

    rng = np.random.default_rng(3)
    n = 6
    cons = [Constraint("s", Expression(n, 0.3, (np.array([4, 1, 0]), np.array([1.0, -2.0, 3.0]))), -1.0, 2.0),
            Constraint("d", Expression(n, -0.2, rng.standard_normal(n)), -np.inf, 0.5),
            Constraint("eq", Expression(n, 1.0, (np.array([3, 5]), np.array([1.0, 1.0]))), 0.0, 0.0),
            Constraint("k", Expression(n, 0.7), -np.inf, 1.0),
            Constraint("q", Expression(n, 0.0, quadratic=QuadraticTerms(np.array([0]), np.array([1]), np.array([1.0]), n)),
                       -0.5, 0.5)]
    p = Program([f"x{j}" for j in range(n)], np.where(rng.random(n) < 0.5, -np.inf, -1.0),
                np.where(rng.random(n) < 0.5, np.inf, 1.0), Expression(n), cons)
    for _ in range(300):
        x = rng.uniform(-2, 2, n) * rng.choice([0.0, 1.0, 10.0])
        assert p.max_violation(x) == pytest.approx(reference(p, x), rel=1e-12, abs=1e-15)
    x = np.zeros(n)
    assert p.max_violation(x) == pytest.approx(1.0)            # the equality row: 1 + 0 == 0
    p.constraints.append(Constraint("late", Expression(n, 5.0), -np.inf, 0.0))
    assert p.max_violation(x) == pytest.approx(5.0)            # the appended row is evaluated
    p.constraints = cons[:1]
    assert p.max_violation(x) == pytest.approx(reference(p, x))  # a new list is read anew


def test_require_smooth_names_the_nonsmooth_part():
    """The objective or the constraint holding an ``abs`` row is named in the message (formatted only then)."""
    from varopt.errors import ModelStructureError
    n = 3
    absrow = AtomGroup("abs", np.ones(1), sp.csr_matrix(np.array([[1.0, 0.0, 0.0]])), np.zeros(1))
    smooth = [Constraint(f"lin{k}", Expression(n, 0.0, np.eye(n)[k]), -1.0, 1.0) for k in range(3)]
    bad = Constraint("wide", Expression(n, 0.0, np.zeros(n), atoms=[absrow]), 1.0, np.inf)
    p = Program(["a", "b", "c"], np.full(n, -np.inf), np.full(n, np.inf), Expression(n, 0.0, np.ones(n)),
                smooth + [bad], objective_name="obj")
    with pytest.raises(ModelStructureError, match=r"^constraint wide: ipsa needs smooth terms"):
        p.require_smooth("ipsa")
    q = Program(["a", "b", "c"], np.full(n, -np.inf), np.full(n, np.inf),
                Expression(n, 0.0, np.ones(n), atoms=[absrow]), smooth, objective_name="obj")
    with pytest.raises(ModelStructureError, match=r"^objective obj: majorize needs smooth terms.*; use proxsg"):
        q.require_smooth("majorize", "use proxsg")
    Program(["a", "b", "c"], np.full(n, -np.inf), np.full(n, np.inf), Expression(n, 0.0, np.ones(n)),
            smooth).require_smooth("ipsa")  # smooth: no error


def test_fbbt_leaves_the_callers_matrix_alone():
    """fbbt drops stored zeros on a copy: the matrix may be Program.linear_constraints' cache."""
    import scipy.sparse as sp
    from varopt.solvers.gop.bounds import fbbt
    A = sp.csr_matrix((np.array([1.0, 0.0, 2.0]), np.array([0, 1, 1]), np.array([0, 2, 3])), shape=(2, 2))
    before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
    lb, ub, infeas = fbbt(A, np.array([-np.inf, -np.inf]), np.array([1.0, 4.0]), np.zeros(2), np.full(2, 10.0))
    assert not infeas and ub[0] == 1.0 and ub[1] == 2.0
    for got, want in zip((A.data, A.indices, A.indptr), before):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", ["canonical", "zero", "duplicate", "lower", "unsorted"])
def test_quadratic_terms_canonical_fast_path_equals_the_sparse_round_trip(case):
    # already canonical pairs (sorted upper pairs, no duplicates, no zeros) are kept as given; every other input goes
    # through the sparse round trip; both give the same arrays as that round trip (row-major upper pairs, no zeros)
    rng = np.random.default_rng(3)
    n = 6
    i, j = np.triu_indices(n)
    keep = rng.random(i.size) < 0.6
    i, j, v = i[keep], j[keep], rng.standard_normal(int(keep.sum()))
    if case == "zero":
        v[1] = 0.0
    elif case == "duplicate":
        i, j, v = np.append(i, i[0]), np.append(j, j[0]), np.append(v, 2.0)
    elif case == "lower":
        i, j = j, i
    elif case == "unsorted":
        i, j, v = i[::-1], j[::-1], v[::-1]
    q = QuadraticTerms(i, j, v, n)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    M = sp.coo_matrix((v, (lo, hi)), shape=(n, n)).tocsr()
    M.sum_duplicates()
    M.eliminate_zeros()
    M = M.tocoo()
    for got, ref in ((q.i, M.row), (q.j, M.col)):
        assert got.dtype == np.int64 and np.array_equal(got, ref)
    assert q.v.dtype == np.float64 and np.array_equal(q.v, M.data)
