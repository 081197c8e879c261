"""Large sparse models: linear rows stored sparse end to end (conventions issue, item 4)."""
import numpy as np
import pytest
import scipy.sparse as sp

from varopt.program.expression import Expression
from varopt.program.program import Constraint, Program


def _random_rows(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    cols = np.stack([rng.choice(n, k, replace=False) for _ in range(m)])
    vals = rng.uniform(-1.5, 1.5, (m, k))
    A = sp.csr_matrix((vals.ravel(), (np.repeat(np.arange(m), k), cols.ravel())), shape=(m, n))
    return cols, vals, A


def test_sparse_and_dense_storage_agree():
    rng = np.random.default_rng(1)
    n = 40
    idx = np.array([7, 3, 7, 20, 0])
    val = np.array([1.0, -2.0, 0.5, 0.0, 3.0])
    dense = np.zeros(n)
    np.add.at(dense, idx, val)
    s = Expression(n, 1.5, (idx, val))
    d = Expression(n, 1.5, dense)
    assert s.is_sparse and not d.is_sparse
    np.testing.assert_array_equal(s.linear_items()[0], [0, 3, 7])  # sorted, duplicates merged, zeros dropped
    np.testing.assert_array_equal(s.linear, dense)
    for _ in range(5):
        x = rng.normal(size=n)
        assert s.value(x) == pytest.approx(d.value(x), rel=1e-15)
        np.testing.assert_array_equal(s.gradient(x), d.gradient(x))
    # the dense view of a sparse expression is a copy: writing into it changes nothing
    s.linear[0] = 99.0
    assert s.linear[0] == 3.0
    # a scipy sparse row is accepted as well
    assert Expression(n, 0.0, sp.csr_matrix(dense)).linear_items()[1].tolist() == [3.0, -2.0, 1.5]
    with pytest.raises(ValueError, match="out of range"):
        Expression(n, 0.0, ([n], [1.0]))


def test_linear_constraints_and_jacobian_are_sparse_and_exact():
    m, n = 300, 20_000
    cols, vals, A = _random_rows(m, n, 4)
    cons = [Constraint(f"r[{r}]", Expression(n, 0.25, (cols[r], vals[r])), -np.inf, 1.0) for r in range(m)]
    p = Program([f"x[{j}]" for j in range(n)], np.zeros(n), np.ones(n), Expression(n), cons)
    B, lo, hi, idx = p.linear_constraints()
    assert (B != A).nnz == 0
    np.testing.assert_allclose(hi, 0.75)
    J = p.constraint_jacobian(np.full(n, 0.5))
    assert sp.issparse(J) and (J != A).nnz == 0
    x = np.random.default_rng(2).uniform(size=n)
    np.testing.assert_allclose(p.constraint_values(x), A @ x + 0.25, rtol=1e-14)


def test_nan_in_one_sparse_row_is_named():
    from varopt.errors import InputDataError
    n = 10
    cons = [Constraint(f"c{r}", Expression(n, 0.0, ([r], [1.0])), 0.0, 1.0) for r in range(5)]
    cons[3] = Constraint("c3", Expression(n, 0.0, ([3], [np.nan])), 0.0, 1.0)
    p = Program([f"x{j}" for j in range(n)], np.zeros(n), np.ones(n), Expression(n), cons)
    with pytest.raises(InputDataError, match="constraint c3"):
        p.check_finite()


def test_pyomo_and_cvxpy_compile_many_rows_sparse():
    pyo = pytest.importorskip("pyomo.environ")
    cp = pytest.importorskip("cvxpy")
    import varopt  # noqa: F401
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    from varopt.frontends.pyomo_compile import compile_pyomo

    m, n = 400, 5_000
    cols, vals, A = _random_rows(m, n, 5, seed=4)
    M = pyo.ConcreteModel()
    M.x = pyo.Var(range(n), bounds=(0, 1))
    M.obj = pyo.Objective(expr=sum(M.x[i] * pyo.log(M.x[i]) for i in range(n)))
    M.rows = pyo.Constraint(range(m), rule=lambda mm, r: sum(float(v) * mm.x[int(j)]
                                                             for j, v in zip(cols[r], vals[r])) <= 1.0)
    x = cp.Variable(n, bounds=[0, 1], name="x")
    prob = cp.Problem(cp.Minimize(-cp.sum(cp.entr(x))), [A @ x <= 1.0])
    for program, _ in (compile_pyomo(M), compile_cvxpy(prob)):
        assert all(c.body.is_sparse for c in program.constraints)
        perm = np.array([program.index[f"x[{j}]"] for j in range(n)])
        B, lo, hi, idx = program.linear_constraints()
        assert (B[:, perm] != A).nnz == 0
        np.testing.assert_allclose(hi, 1.0)


def test_l1_builders_take_sparse_data_without_densifying():
    pytest.importorskip("pyomo.environ")
    pytest.importorskip("cvxpy")
    import varopt  # noqa: F401
    from varopt.formulations.l1 import l1_logistic_cvxpy, l1_logistic_pyomo, l1_logistic_program
    from varopt.frontends.cvxpy_compile import compile_cvxpy
    from varopt.frontends.pyomo_compile import compile_pyomo

    rng = np.random.default_rng(5)
    Xs = sp.random(60, 15, density=0.2, format="csr", random_state=6)
    y = np.where(rng.random(60) < 0.5, -1.0, 1.0)
    ref = l1_logistic_program(Xs.toarray(), y, 0.05)
    z = rng.uniform(0, 1, ref.n)
    target = ref.objective.value(z)
    for program in (compile_pyomo(l1_logistic_pyomo(Xs, y, 0.05))[0], compile_cvxpy(l1_logistic_cvxpy(Xs, y, 0.05)[0])[0],
                    compile_pyomo(l1_logistic_pyomo(Xs.toarray(), y, 0.05))[0]):
        zz = np.empty(program.n)
        zz[[program.index[nm] for nm in ref.names]] = z
        assert program.objective.value(zz) == pytest.approx(target, rel=1e-12)


@pytest.mark.parametrize("mode", ["reversed", "shuffled", "runs", "duplicates"])
def test_unsorted_csr_rows_are_canonicalised_exactly(mode, monkeypatch):
    """terms._csr sorts unsorted rows by index arithmetic or a stable key sort (large matrices, e.g. CVXPY's dense
    ``X @ w + b`` with every row reversed) and sums duplicates: same matrix as the dense reference, canonical."""
    import varopt.program.terms as terms
    monkeypatch.setattr(terms, "SORT_ROWS_MIN", 0)
    rng = np.random.default_rng(7)
    for _ in range(10):
        m, n = int(rng.integers(1, 60)), int(rng.integers(1, 80))
        dense = rng.normal(size=(m, n)) * (rng.random((m, n)) < 0.6)
        ind, dat, ptr = [], [], [0]
        for i in range(m):
            cols = np.flatnonzero(dense[i])
            vals = dense[i, cols]
            if mode == "reversed":
                cols, vals = cols[::-1], vals[::-1]
            elif mode == "shuffled":
                p = rng.permutation(cols.size)
                cols, vals = cols[p], vals[p]
            elif mode == "runs":
                h = cols.size // 2
                cols, vals = np.r_[cols[h:], cols[:h]], np.r_[vals[h:], vals[:h]]
            else:  # every entry split in two halves, the second copy at the end of the row
                cols, vals = np.r_[cols, cols], np.r_[vals / 2, vals / 2]
            ind.append(cols)
            dat.append(vals)
            ptr.append(ptr[-1] + cols.size)
        A = sp.csr_matrix((np.concatenate(dat), np.concatenate(ind).astype(np.int32), ptr), shape=(m, n))
        want = A.toarray()  # sums duplicates
        got = terms._csr(A, n)
        assert got.has_canonical_format
        for i in range(m):
            assert np.all(np.diff(got.indices[got.indptr[i]:got.indptr[i + 1]]) > 0)
        np.testing.assert_allclose(got.toarray(), want, rtol=0, atol=1e-15)


@pytest.mark.parametrize("mixed", [False, True, "sparse"])
def test_linear_rows_are_the_linear_items_row_by_row(mixed):
    """Expression.linear_rows (ipsa's ConstraintSet builds its row matrix with it): row k holds
    exactly ``exprs[k].linear_items()``, for dense bodies (one nonzero call over all of them), with
    an all-zero body, for a mix with sparse storage, and for sparse storage only (the stored arrays
    read directly)."""
    from varopt.program import Expression

    rng = np.random.default_rng(0)
    n = 9
    dense = [np.where(rng.random(n) < 0.4, rng.normal(size=n), 0.0) for _ in range(6)]
    dense[3][:] = 0.0
    exprs = [Expression(n, linear=v) for v in dense]
    if mixed == "sparse":
        exprs = [Expression(n, linear=(np.flatnonzero(v)[::-1], v[np.flatnonzero(v)][::-1])) for v in dense]
        assert all(e.is_sparse for e in exprs)
    elif mixed:
        exprs[1] = Expression(n, linear=(np.array([7, 2, 2]), np.array([1.5, -1.0, 0.25])))
    ptr, idx, val = Expression.linear_rows(exprs, n)
    assert ptr.dtype == idx.dtype == np.int64 and ptr[0] == 0 and ptr[-1] == idx.size == val.size
    for k, e in enumerate(exprs):
        i, v = e.linear_items()
        assert np.array_equal(idx[ptr[k]:ptr[k + 1]], i) and np.array_equal(val[ptr[k]:ptr[k + 1]], v)
        assert np.array_equal(np.bincount(i, weights=v, minlength=n), e.linear)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_in_the_objective_constant_and_linear_part_is_named(bad):
    # Expression.check_finite reads a float constant and a dense linear part directly: the same verdicts, named
    from varopt.errors import InputDataError
    n = 6
    names, lb, ub = [f"x{j}" for j in range(n)], np.full(n, -np.inf), np.full(n, np.inf)
    lin = np.zeros(n)
    Program(names, lb, ub, Expression(n, 1.5, lin), []).check_finite()          # finite: passes
    with pytest.raises(InputDataError, match="constant"):
        Program(names, lb, ub, Expression(n, bad, lin), []).check_finite()
    lin[4] = bad
    with pytest.raises(InputDataError, match="linear coefficients"):
        Program(names, lb, ub, Expression(n, 0.0, lin), []).check_finite()          # dense storage
    with pytest.raises(InputDataError, match="linear coefficients"):
        Program(names, lb, ub, Expression(n, 0.0, ([4], [bad])), []).check_finite()  # sparse storage
    e = Expression(n, 0.0, lin.copy())
    e.constant = np.float64(bad)                                                  # a numpy scalar constant
    with pytest.raises(InputDataError, match="constant"):
        Program(names, lb, ub, e, []).check_finite()
