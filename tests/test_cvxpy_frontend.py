"""CVXPY front-end: structure errors, names, sense, data errors and ``prob.solve(method=...)``."""
import math

import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402
from varopt.errors import InputDataError, InvalidOptionError, ModelStructureError  # noqa: E402
from varopt.frontends import compile_model  # noqa: E402
from varopt.frontends.cvxpy_compile import compile_cvxpy  # noqa: E402
from varopt.frontends.cvxpy_plugin import result_of  # noqa: E402

import plugin_solver  # noqa: E402,F401  (registers vo_test_scipy)


# --- unsupported structure -------------------------------------------------------------
def _vars():
    return cp.Variable(3, name="x"), cp.Variable(name="y")


@pytest.mark.parametrize("build, fragment", [
    # power(x, p) and inv_pos are power(p) atom rows (tests/test_gop_powers.py); an even p that is not a power of 2
    # has CVXPY's domain x >= 0 while x^p is convex everywhere: refused
    (lambda x, y: cp.sum(cp.power(x, 6)), "(x, 6"),
    (lambda x, y: cp.sum(x / y), "`x / Promote(y"),
    (lambda x, y: cp.sum(cp.log(x + cp.square(y))), "`log(x + Promote("),
    (lambda x, y: cp.sum(cp.abs(cp.square(x))), "of `abs` must be affine"),  # abs of an affine argument is an atom row
    (lambda x, y: cp.norm1(cp.square(x)), "of `norm1` must be affine"),  # norm1: a sum of abs rows of an affine map
    (lambda x, y: cp.sum(cp.exp(cp.multiply(x, y))), "`exp(x * Promote(y"),
    (lambda x, y: -cp.max(x), "`max(x"),  # a maximised convex max (minimised: an epigraph column)
    (lambda x, y: cp.sum(cp.multiply(cp.exp(x), cp.log(x))), "`exp(x) * log(x)`"),
    (lambda x, y: y * cp.sum(cp.multiply(x, cp.exp(x))), "degree 3"),
])
def test_unsupported_objective_raises_model_structure_error(build, fragment):
    x, y = _vars()
    expr = build(x, y)
    prob = cp.Problem(cp.Minimize(expr))
    with pytest.raises(ModelStructureError) as info:
        compile_cvxpy(prob)
    msg = str(info.value)
    assert msg.startswith("objective:"), msg
    # the offending sub-expression is printed as CVXPY prints it
    assert "cannot compile `" in msg and fragment in msg, msg


def test_error_names_the_constraint_and_subexpression():
    x, y = _vars()
    prob = cp.Problem(cp.Minimize(cp.sum(x)), [x >= 0, cp.sum(cp.power(x, 6)) + y <= 1])
    with pytest.raises(ModelStructureError) as info:
        compile_cvxpy(prob)
    msg = str(info.value)
    assert "constraint 1 (" in msg and str(prob.constraints[1]) in msg
    assert str(cp.power(x, 6)) in msg or "power(x, 6" in msg


def test_compile_formats_no_constraint_text(monkeypatch):
    """A constraint's text is formatted for error messages only (CVXPY's ``str`` walks the expression tree: more
    than tracing a small constraint costs); the message of a failing constraint still names it (test above)."""
    from cvxpy.constraints import Inequality
    x, y = _vars()
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x) + y), [x >= 0, cp.sum(x) <= 1 + y, x[0] == 0.5])
    formatted = []
    for cls in {type(c) for c in prob.constraints} | {Inequality}:
        monkeypatch.setattr(cls, "__str__", lambda self: formatted.append(self) or "c", raising=True)
    program, _ = compile_cvxpy(prob)
    assert not formatted
    assert len(program.constraints) == x.size + 1 + 1


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 1, 3), (2, 3, 2), (0, 3), (3, 0), (1, 1, 1, 2), (4, 2)])
def test_index_names_are_the_c_order_index_tuples(shape):
    import itertools

    from varopt.frontends.cvxpy_compile import _index_names
    want = ["v"] if not shape else [f"v[{','.join(map(str, t))}]" for t in itertools.product(*map(range, shape))]
    assert _index_names("v", shape) == want


def test_power_six_message_mentions_exponent():
    x, _ = _vars()
    with pytest.raises(ModelStructureError, match="even exponent 6"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.sum(cp.power(x, 6)))))


def test_division_by_variable_message():
    x, y = _vars()
    # unbounded denominator: the ratio column t * y - x == 0 would not be exact where y == 0
    with pytest.raises(ModelStructureError, match="denominator may be 0 or change sign"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.sum(x / y))))


def test_cone_constraints_and_integer_variables_rejected():
    X = cp.Variable((2, 2), name="X")
    with pytest.raises(ModelStructureError, match="constraint 0"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.trace(X)), [X >> 0]))
    z = cp.Variable(2, integer=True, name="z")
    with pytest.raises(ModelStructureError, match="integer"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.sum(z))))
    b = cp.Variable(2, boolean=True, name="b")
    with pytest.raises(ModelStructureError, match="boolean"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.sum(b))))


# --- names, bounds, x0, sense ---------------------------------------------------------------
def test_names_bounds_start_and_mapping():
    t = cp.Variable(name="t")
    x = cp.Variable(2, name="x", nonneg=True)
    phi = cp.Variable((2, 3), name="phi", nonpos=True)
    w = cp.Variable(2)  # unnamed: CVXPY's default name
    phi.value = -np.arange(6.0).reshape(2, 3)
    prob = cp.Problem(cp.Minimize(t + cp.sum(x) + cp.sum(phi) + cp.sum_squares(w)))
    prog, mapping = compile_cvxpy(prob)
    expected = ["t", "x[0]", "x[1]"] + [f"phi[{i},{j}]" for i in range(2) for j in range(3)] \
        + [f"{w.name()}[0]", f"{w.name()}[1]"]
    assert sorted(prog.names) == sorted(expected)
    assert mapping.names == prog.names
    k = prog.index
    assert prog.lb[k["x[1]"]] == 0 and prog.ub[k["x[1]"]] == np.inf
    assert prog.ub[k["phi[1,2]"]] == 0 and prog.lb[k["phi[1,2]"]] == -np.inf
    assert prog.x0[k["phi[1,2]"]] == -5.0 and prog.x0[k["phi[0,1]"]] == -1.0
    assert np.isnan(prog.x0[k["t"]])
    # load writes values with the variables' shapes, phi[i,j] goes to phi.value[i, j]
    xs = np.arange(prog.n, dtype=float)
    mapping.load(xs)
    assert phi.value.shape == (2, 3)
    assert phi.value[1, 0] == xs[k["phi[1,0]"]]
    assert np.shape(t.value) == () and float(t.value) == xs[k["t"]]
    assert np.isclose(prog.objective.value(xs), prob.objective.value)


def test_bounds_attribute():
    x = cp.Variable(3, name="x", bounds=[np.array([-1.0, 0.0, 1.0]), 5.0])
    prog, _ = compile_cvxpy(cp.Problem(cp.Minimize(cp.sum(x))))
    assert np.array_equal(prog.lb, [-1.0, 0.0, 1.0]) and np.array_equal(prog.ub, [5.0] * 3)


def test_maximize_is_negated_internally():
    x = cp.Variable(2, name="x")
    prob = cp.Problem(cp.Maximize(-cp.sum_squares(x - np.array([1.0, 2.0])) + 3.0))
    prog, mapping = compile_cvxpy(prob)
    assert prog.maximize
    pt = np.array([0.5, -1.0])
    mapping.load(pt)
    assert np.isclose(prog.objective.value(pt), -prob.objective.value)
    assert np.isclose(prog.user_value(prog.objective.value(pt)), prob.objective.value)


def test_constraint_names_and_bounds():
    x = cp.Variable(3, name="x")
    X = cp.Variable((2, 2), name="X")
    prob = cp.Problem(cp.Minimize(cp.sum(x)), [cp.sum(x) <= 2, x[:2] >= 1, X == np.eye(2)])
    prog, _ = compile_cvxpy(prob)
    names = [c.name for c in prog.constraints]
    assert names == ["c0", "c1[0]", "c1[1]", "c2[0,0]", "c2[0,1]", "c2[1,0]", "c2[1,1]"]
    c0 = prog.constraints[0]
    assert c0.hi == 2 and c0.lo == -np.inf and c0.body.constant == 0
    # x >= 1 is kept as 1 <= x (not -x <= -1)
    c1 = prog.constraints[1]
    assert c1.lo == 1 and c1.hi == np.inf and c1.body.linear[prog.index["x[0]"]] == 1
    eq = {c.name: c for c in prog.constraints}
    assert eq["c2[0,0]"].lo == eq["c2[0,0]"].hi == 1 and eq["c2[0,1]"].hi == 0
    # c2[0,1] is X[0,1] == 0: its body reads variable X[0,1]
    assert eq["c2[0,1]"].body.linear[prog.index["X[0,1]"]] == 1


def test_recognised_atom_structure():
    """The compiled groups are the catalogue kinds (rows not expanded, products visible)."""
    N, K = 4, 3
    phi = cp.Variable((N, K), name="phi", nonneg=True)
    mu = cp.Variable(K, name="mu")
    pi = cp.Variable(K, name="pi", nonneg=True)
    d = np.arange(N, dtype=float)[:, None]
    obj = (cp.sum(cp.multiply(phi, cp.square(d - mu[None, :]))) + cp.sum(cp.multiply(phi, cp.log(phi)))
           - cp.sum(cp.multiply(phi, cp.log(pi)[None, :])) + cp.sum_squares(mu) + cp.log_sum_exp(mu))
    prog, _ = compile_cvxpy(cp.Problem(cp.Minimize(obj)))
    kinds = {a.kind: a for a in prog.objective.atoms}
    assert len(kinds["square"]) == N * K + K
    assert int((kinds["square"].mult >= 0).sum()) == N * K
    assert len(kinds["xlogx"]) == N * K and np.all(kinds["xlogx"].mult < 0)
    assert len(kinds["neglog"]) == N * K and np.all(kinds["neglog"].mult >= 0)
    assert len(prog.objective.lse) == 1 and len(prog.objective.lse[0]) == 1
    # finite-sum labels: the rows of data point n (first axis of phi) share label n
    for a in (kinds["square"], kinds["xlogx"], kinds["neglog"]):
        w = a.mult >= 0
        if w.any():
            n_of_mult = np.array([int(prog.names[j].split("[")[1].split(",")[0]) for j in a.mult[w]])
            assert np.array_equal(a.label[w], n_of_mult)
    assert sorted(kinds["xlogx"].label.tolist()) == sorted(list(range(N)) * K)
    pairs = prog.interactions()
    assert (prog.index["phi[0,0]"], prog.index["mu[0]"]) in {tuple(sorted(p)) for p in pairs}


def test_large_problem_rows_are_not_expanded():
    """10^4 rows of sum_squares / logistic compile to one group of 10^4 rows (one per sample).

    (Compile time is measured outside the test suite: no timed asserts here.)
    """
    rng = np.random.default_rng(0)
    A, y = rng.normal(size=(10_000, 20)), rng.normal(size=10_000)
    w = cp.Variable(20, name="w")
    for obj in (cp.sum_squares(A @ w - y), cp.sum(cp.logistic(A @ w))):
        prog, _ = compile_cvxpy(cp.Problem(cp.Minimize(obj)))
        groups = list(prog.objective.groups())
        assert len(groups) == 1 and len(groups[0]) == 10_000
        assert np.array_equal(np.sort(groups[0].label), np.arange(10_000))
        pt = rng.normal(size=20) * 0.1
        w.value = pt
        assert np.isclose(prog.objective.value(pt), obj.value, rtol=1e-10)


# --- data errors -------------------------------------------------------------------------
def test_nan_data_raises_input_data_error():
    x = cp.Variable(2, name="x")
    A = np.array([[1.0, np.nan], [0.0, 1.0]])
    with pytest.raises(InputDataError, match="objective.*NaN"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.sum_squares(A @ x))))
    with pytest.raises(InputDataError, match="constraint 0.*inf"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.sum(x)), [x <= np.array([1.0, np.inf])]))


def test_parameter_without_value():
    x = cp.Variable(2, name="x")
    p = cp.Parameter(2, name="theta")
    with pytest.raises(InputDataError, match="theta"):
        compile_cvxpy(cp.Problem(cp.Minimize(p @ x)))
    p.value = np.array([1.0, 2.0])
    prog, _ = compile_cvxpy(cp.Problem(cp.Minimize(p @ x)))
    assert np.array_equal(prog.objective.linear, [1.0, 2.0])


# --- prob.solve(method=...) -------------------------------------------------------------------
def test_solve_method_end_to_end_matches_clarabel():
    rng = np.random.default_rng(1)
    A, b = rng.normal(size=(8, 3)), rng.normal(size=8)
    x = cp.Variable(3, name="x")
    cons = [cp.sum(x) == 1, x >= -0.2]
    ref = cp.Problem(cp.Minimize(cp.sum_squares(A @ x - b) + cp.log_sum_exp(x)), cons)
    ref_val = ref.solve(solver="CLARABEL")
    x_ref = x.value.copy()
    x.value = None
    prob = cp.Problem(cp.Minimize(cp.sum_squares(A @ x - b) + cp.log_sum_exp(x)), cons)
    val = prob.solve(method="vo_test_scipy")
    assert prob.status == cp.OPTIMAL_INACCURATE  # 'converged': local method, no proof
    assert math.isclose(val, ref_val, rel_tol=1e-6)
    assert math.isclose(prob.value, val)
    assert np.allclose(x.value, x_ref, atol=1e-4)
    res = prob.varopt_result
    assert res is result_of(prob)
    assert isinstance(res, varopt.Result) and res.solver == "vo_test_scipy" and res.status == "converged"
    assert math.isclose(res.objective, val)
    assert prob.solver_stats.solver_name == "vo_test_scipy"


def test_solve_method_maximize_in_user_sense():
    x = cp.Variable(2, name="x")
    prob = cp.Problem(cp.Maximize(5.0 - cp.sum_squares(x - np.array([1.0, -2.0]))), [x[0] <= 0.5])
    val = prob.solve(method="vo_test_scipy")
    assert math.isclose(val, 5.0 - 0.25, rel_tol=1e-7)
    assert math.isclose(prob.value, 4.75, rel_tol=1e-7)
    assert np.allclose(x.value, [0.5, -2.0], atol=1e-5)
    assert result_of(prob).maximize and math.isclose(result_of(prob).objective, 4.75, rel_tol=1e-7)


def test_solve_method_nonconvex_product_is_accepted():
    """A non-DCP bilinear objective solves through method= (no DCP check)."""
    x, y = cp.Variable(name="x"), cp.Variable(name="y")
    prob = cp.Problem(cp.Minimize(x * y + cp.square(x - 1) + cp.square(y - 1)), [x >= 0, y >= 0])
    x.value, y.value = 0.9, 0.8
    val = prob.solve(method="vo_test_scipy")
    # stationary point x = y = 2/3 (the function is convex along x = y there)
    assert np.allclose([x.value, y.value], [2 / 3, 2 / 3], atol=1e-5)
    assert math.isclose(val, 4 / 9 + 2 / 9, rel_tol=1e-7)


def test_unknown_option_lists_valid_ones():
    x = cp.Variable(name="x")
    prob = cp.Problem(cp.Minimize(cp.square(x)))
    with pytest.raises(InvalidOptionError) as info:
        prob.solve(method="vo_test_scipy", not_an_option=3)
    msg = str(info.value)
    assert "not_an_option" in msg and "max_iter" in msg and "tol" in msg
    with pytest.raises(InvalidOptionError, match="max_iter"):
        prob.solve(method="vo_test_scipy", max_iter=-1)
    # verbose and a valid option pass through
    prob.solve(method="vo_test_scipy", verbose=False, tol=1e-9)
    assert prob.varopt_result.options["tol"] == 1e-9


def test_compile_model_dispatches_to_cvxpy():
    x = cp.Variable(2, name="x")
    prog, mapping = compile_model(cp.Problem(cp.Minimize(cp.sum_squares(x))))
    assert prog.names == ["x[0]", "x[1]"]


@pytest.mark.parametrize("status, cvx_status, value_min", [
    ("optimal", "optimal", 1.5), ("converged", "optimal_inaccurate", 1.5), ("time_limit", "user_limit", 1.5),
    ("iteration_limit", "user_limit", 1.5), ("pass_limit", "user_limit", 1.5), ("numerical", "user_limit", 1.5),
    ("infeasible", "infeasible", math.inf), ("unbounded", "unbounded", -math.inf), ("error", "solver_error", None),
])
@pytest.mark.parametrize("maximize", [False, True])
def test_status_mapping(monkeypatch, status, cvx_status, value_min, maximize):
    """Every varopt status maps to a CVXPY status and value (sign of inf in the user's sense)."""
    import varopt.registry as registry
    from varopt.frontends.cvxpy_plugin import solve_problem
    from varopt.options import OptionSet, common_options

    class Fixed(varopt.Solver):
        name = "vo_fixed_status"
        options = OptionSet(common_options())

        def _solve(self, program, opts):
            x = np.array([0.25, 0.5])
            return varopt.Result(solver=self.name, status=status, x=x, objective=program.objective.value(x))

    monkeypatch.setattr(registry, "get_solver", lambda name: Fixed())
    x = cp.Variable(2, name="x")
    f = cp.sum(x) + 0.75
    prob = cp.Problem(cp.Maximize(f) if maximize else cp.Minimize(f))
    if status == "error":
        # CVXPY's own convention for a failed solver: SolverError (the varopt.Result stays readable)
        with pytest.raises(cp.error.SolverError, match="vo_fixed_status"):
            solve_problem(prob, "vo_fixed_status")
        assert prob.varopt_result.status == "error"
        return
    val = solve_problem(prob, "vo_fixed_status")
    assert prob.status == cvx_status
    expected = value_min
    if maximize and value_min is not None and math.isinf(value_min):
        expected = -value_min
    if expected is None:
        assert val is None and prob.value is None
    else:
        assert val == expected and prob.value == expected
    if cvx_status in ("optimal", "optimal_inaccurate", "user_limit"):
        assert np.array_equal(x.value, [0.25, 0.5])
    else:
        assert x.value is None
    assert result_of(prob).status == status


@pytest.mark.parametrize("make,public", [(lambda x: cp.power(x[0], 6), "power("), (lambda x: cp.norm(x, 3), "pnorm("),
                                         (lambda x: cp.sqrt(x[0]), "power("),
                                         (lambda x: cp.geo_mean(x), "geo_mean(")])
def test_unsupported_atom_messages_show_public_function_names(make, public):
    x = cp.Variable(2, name="x")
    with pytest.raises(ModelStructureError) as err:
        cp.Problem(cp.Minimize(make(x)), [x >= 1]).solve(method="ipsa")
    assert public in str(err.value) and "Approx" not in str(err.value)


@pytest.mark.parametrize("zero", [False, True])
def test_node_scale_equals_the_diagonal_product(zero):
    """The row-scaling fast path of ``_Node.scale`` gives the node ``diag(d) @ node`` (with a zero in
    ``d`` it takes the product, which drops the entries instead of storing explicit zeros)."""
    import scipy.sparse as sp
    from varopt.frontends.cvxpy_nodes import _Node
    rng = np.random.default_rng(7)
    m, n = 6, 4
    A = sp.random(m, n, density=0.5, random_state=1, format="csr")
    W = sp.random(m, 3, density=0.5, random_state=2, format="csr")
    z = _Node((m,), n, A, rng.normal(size=m), [("q", W)], [("r", W * 2.0)], [("g", W * 3.0)])
    d = rng.normal(size=m)
    if zero:
        d[2] = 0.0
    fast, ref = z.scale(d), z.apply(sp.diags(d), (m,))
    assert np.array_equal(fast.c, ref.c)
    for P, R in [(fast.A, ref.A)] + [(a[1], b[1]) for a, b in zip(fast.Q + fast.rows + fast.lse,
                                                                   ref.Q + ref.rows + ref.lse)]:
        assert abs(P - R).max() == 0.0
        if zero:
            assert P.nnz == R.nnz  # no explicit zeros left for the nonlinear-term checks


def test_shared_subexpressions_and_products_compile_as_written():
    """A sub-expression used several times (traced once, memoized per compile) and a product of variables used
    twice inside squares (auxiliary columns, never memoized): the program's objective equals CVXPY's value at
    random points, and a second compile after changing a Parameter's value sees the new value."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3))
    Wv = cp.Variable((3, 2), name="W")
    t = cp.Parameter(nonneg=True, value=0.7)
    Z = X @ Wv
    obj = cp.sum(cp.log_sum_exp(Z, axis=1)) - cp.sum(cp.multiply(np.eye(6, 2), Z)) + t * cp.sum_squares(Z)
    prob = cp.Problem(cp.Minimize(obj))
    for _ in range(2):
        prog, mapping = compile_cvxpy(prob)
        for _ in range(3):
            x = rng.normal(size=prog.n)
            mapping.load(x)
            assert abs(prog.objective.value(x) - obj.value) <= 1e-10 * max(1.0, abs(obj.value))
        t.value = 2.5
    u, v = cp.Variable(name="u"), cp.Variable(name="v")
    uv = cp.multiply(u, v)
    e = cp.square(uv - 1) + cp.square(uv + 2)
    prog, mapping = compile_cvxpy(cp.Problem(cp.Minimize(e)))
    for _ in range(3):
        x = rng.normal(size=prog.n_user)
        mapping.load(x)
        assert abs(prog.objective.value(_lifted_point(prog, x)) - e.value) <= 1e-9 * max(1.0, abs(e.value))


def _lifted_point(prog, x):
    """``x`` with the auxiliary columns at their defining values (varopt.program.lifting's start)."""
    full = np.concatenate([x, np.zeros(prog.n - x.size)])
    for a in prog.aux:
        full[a.index] = a.definition.value(full)
    return full


def test_write_back_stores_each_variable_once_in_its_shape():
    """The solution reaches the variables through ``unpack_results`` only (no validated setter first): every
    variable holds its entries of ``res.x`` in its own shape (program columns in C order), a scalar a float, and
    ``prob.value`` is CVXPY's objective at those values; ``mapping.load`` stores a tiny bound violation as it is."""
    import cvxpy as cp

    from varopt.frontends.cvxpy_compile import compile_cvxpy
    rng = np.random.default_rng(21)
    W, w, b = cp.Variable((3, 2), name="W"), cp.Variable(4, name="w"), cp.Variable(name="b")
    T = rng.standard_normal((3, 2))
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W - T) + cp.sum_squares(w - np.arange(4.0)) + cp.square(b - 0.5)),
                      [w[:2] >= 0.5])
    prob.solve(method="majorize", tol=1e-12)
    res = prob.varopt_result
    vals = dict(zip(res.names, res.x))
    for v in (W, w, b):
        assert np.shape(v.value) == v.shape
        for idx in np.ndindex(*v.shape):
            name = v.name() + (f"[{','.join(map(str, idx))}]" if idx else "")
            assert v.value[idx] == vals[name]
    assert isinstance(b.value, float) and not isinstance(b.value, np.ndarray)
    np.testing.assert_allclose(W.value, T, atol=1e-6)
    assert prob.value == prob.objective.value
    nn = cp.Variable(2, nonneg=True, name="nn")
    p2 = cp.Problem(cp.Minimize(cp.sum_squares(nn)))
    _, mapping = compile_cvxpy(p2)
    mapping.load(np.array([-1e-14, 2.0]))  # cvxpy's value setter would refuse the negative entry
    np.testing.assert_array_equal(nn.value, [-1e-14, 2.0])
