"""CVXPY's piecewise-linear convex atoms (max, maximum, pos, neg, norm_inf, sum_largest, huber and the concave
mirrors min, minimum, sum_smallest) as epigraph columns (varopt.program.epigraph_lift), and rel_entr / kl_div with
a constant argument: optimal values equal to Clarabel's, the loaded ``.value``s evaluate to the reported objective,
and DCP-style refusals where the epigraph would not be exact."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402,F401  (registers the solve methods)
from varopt.errors import ModelStructureError  # noqa: E402
from varopt.frontends.cvxpy_compile import compile_cvxpy  # noqa: E402

RNG = np.random.default_rng(20261125)
A = RNG.standard_normal((6, 4))
B = RNG.standard_normal(6)
C = RNG.standard_normal(4)


def _u(x):
    return A @ x - B


CONVEX = {
    "max": lambda x: cp.max(_u(x)),
    "maximum": lambda x: cp.sum(cp.maximum(_u(x), 0.2, -_u(x) - 1)),
    "pos": lambda x: cp.sum(cp.pos(_u(x))),
    "neg": lambda x: cp.sum(cp.neg(_u(x))),
    "norm_inf": lambda x: cp.norm_inf(_u(x)),
    "norm_inf_axis": lambda x: cp.sum(cp.norm_inf(cp.reshape(_u(x), (3, 2), order="F"), axis=1)),
    "max_axis": lambda x: cp.sum(cp.max(cp.reshape(_u(x), (3, 2), order="F"), axis=0)),
    "sum_largest": lambda x: cp.sum_largest(_u(x), 2),
    "sum_largest_frac": lambda x: cp.sum_largest(_u(x), 2.5),
    "huber": lambda x: cp.sum(cp.huber(_u(x), 0.7)),
    "huber_default_M": lambda x: cp.sum(cp.huber(_u(x))),
    "nested": lambda x: cp.max(cp.hstack([cp.max(_u(x)), x[0] + 1, cp.norm_inf(x[1:])])),
    "exp_of_max": lambda x: cp.exp(cp.max(_u(x))),
}
CONCAVE = {
    "min": lambda x: cp.min(_u(x)),
    "minimum": lambda x: cp.sum(cp.minimum(_u(x), 0.3)),
    "sum_smallest": lambda x: cp.sum_smallest(_u(x), 2),
}

FORMS = {
    "minimize": lambda f, x, t: (cp.Minimize(f(x) + C @ x), []),
    "maximize_negative": lambda f, x, t: (cp.Maximize(-2.0 * f(x) + C @ x), []),
    "le_constraint": lambda f, x, t: (cp.Minimize(C @ x), [f(x) <= 4.5]),
    "epigraph_variable": lambda f, x, t: (cp.Minimize(t + 0.1 * C @ x), [t >= f(x)]),
}
CONCAVE_FORMS = {
    "maximize": lambda f, x, t: (cp.Maximize(f(x) + C @ x), []),
    "ge_constraint": lambda f, x, t: (cp.Minimize(C @ x), [f(x) >= -4.5]),
}


def _pair(form, f, method):
    """``(varopt value, Clarabel value, problem solved by varopt)`` of the same model built twice."""
    vals, probs = [], []
    for how in (method, "CLARABEL"):
        x, t = cp.Variable(4, name="x"), cp.Variable(name="t")
        obj, cons = form(f, x, t)
        prob = cp.Problem(obj, cons + [cp.norm_inf(x) <= 2])
        vals.append(prob.solve(method=how) if how != "CLARABEL" else prob.solve(solver="CLARABEL"))
        probs.append(prob)
    return vals[0], vals[1], probs[0]


def _close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(1.0, abs(b))


def _check(form, f, method, nonlinear_rows):
    got, ref, prob = _pair(form, f, method)
    assert prob.status == "optimal", prob.status
    assert _close(got, ref), (got, ref)
    # the loaded .values evaluate to the reported objective (CVXPY's own evaluation, no auxiliary column)
    assert _close(prob.value, got, 1e-7), (prob.value, got)
    res = prob.varopt_result
    n_user = sum(v.size for v in prob.variables())
    # the epigraph columns are stripped from the result (a bare max(e) <= r or norm_inf(e) <= r is written as the
    # rows e <= r, |e| <= r, without columns)
    assert len(res.x) == prob.varopt_program.n_user == n_user
    assert all(a.kind == "epigraph" for a in prob.varopt_program.aux)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("atom", sorted(CONVEX))
def test_convex_atoms_equal_clarabel_with_gop(atom, form):
    if form in ("le_constraint", "epigraph_variable") and atom in ("huber", "huber_default_M", "exp_of_max"):
        # a convex nonlinear constraint: gop's primal takes linear constraints only (refused, tested below)
        pytest.skip("gop takes linear constraints only")
    _check(FORMS[form], CONVEX[atom], "gop", False)


@pytest.mark.parametrize("form", sorted(CONCAVE_FORMS))
@pytest.mark.parametrize("atom", sorted(CONCAVE))
def test_concave_mirrors_equal_clarabel_with_gop(atom, form):
    _check(CONCAVE_FORMS[form], CONCAVE[atom], "gop", False)


def test_gop_takes_a_huber_constraint_through_the_tree():
    """``sum(huber(u)) <= r`` compiles (an epigraph with a quadratic row); gop's primal takes linear constraints only,
    so mode='auto' hands the program to the spatial tree (docs/gop.md §8i; it was refused by that rule before)."""
    x = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(C @ x), [CONVEX["huber"](x) <= 4.5, cp.norm_inf(x) <= 2])
    ref = prob.solve(solver="CLARABEL")
    got = prob.solve(method="gop")
    assert prob.status == "optimal"
    assert abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (got, ref)


@pytest.mark.parametrize("form", ["minimize", "maximize_negative", "le_constraint", "epigraph_variable"])
@pytest.mark.parametrize("atom", ["max", "norm_inf", "sum_largest_frac", "huber", "pos"])
def test_majorize_takes_the_epigraph_columns(atom, form):
    if form in ("le_constraint", "epigraph_variable") and atom == "huber":
        pytest.skip("majorize takes linear constraints only")
    _check(FORMS[form], CONVEX[atom], "majorize", False)


@pytest.mark.parametrize("penalty", ["norm_inf", "norm1", "norm_inf_constraint", "norm1_constraint"])
def test_majorize_logistic_with_norm_penalties_and_constraints(penalty):
    """Logistic regression with an L-inf penalty, an L-inf ball or an L1 ball: majorize equals Clarabel."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((30, 4))
    y = np.where(rng.standard_normal(30) + X @ np.array([1.0, -2.0, 0.5, 0.0]) > 0, 1.0, -1.0)
    vals = []
    for how in ("majorize", "CLARABEL"):
        w = cp.Variable(4)
        loss = cp.sum(cp.logistic(-cp.multiply(y, X @ w)))
        if penalty == "norm_inf":
            prob = cp.Problem(cp.Minimize(loss + 3.0 * cp.norm_inf(w)))
        elif penalty == "norm1":   # the L1 penalty: majorize lifts the objective's abs rows (varopt.program.abs_lift)
            prob = cp.Problem(cp.Minimize(loss + 2.0 * cp.norm1(w)))
        elif penalty == "norm_inf_constraint":
            prob = cp.Problem(cp.Minimize(loss), [cp.norm_inf(w) <= 0.4])
        else:
            prob = cp.Problem(cp.Minimize(loss), [cp.norm1(w) <= 0.8])
        vals.append(prob.solve(method=how) if how != "CLARABEL" else prob.solve(solver="CLARABEL"))
        if how == "majorize":
            assert _close(prob.value, vals[0], 1e-7)
    assert _close(vals[0], vals[1], 1e-6), vals


def test_ipsa_refuses_epigraph_columns_naming_the_atom():
    x = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x) + cp.norm_inf(x - 1)))
    with pytest.raises(ModelStructureError) as info:
        prob.solve(method="ipsa")
    msg = str(info.value)
    assert "norm_inf(" in msg and "epigraph" in msg and "use gop" in msg, msg


# --- refusals: the convex atom outside its convex position ------------------------------------------------------
BAD = {
    "maximized": (lambda f, x: (cp.Maximize(f(x)), []), "objective:", "opposite sign"),
    "negated_in_min": (lambda f, x: (cp.Minimize(-f(x) + C @ x), []), "objective:", "opposite sign"),
    "ge_row": (lambda f, x: (cp.Minimize(C @ x), [f(x) >= 1.5]), "constraint 0 (", "opposite sign"),
    "eq_row": (lambda f, x: (cp.Minimize(C @ x), [f(x) == 1.5]), "constraint 0 (", "equality or range"),
    "times_variable": (lambda f, x: (cp.Minimize(x[0] * f(x)), []), "objective:", "multiplied by a variable"),
    "squared": (lambda f, x: (cp.Minimize(cp.square(f(x) - 3.0)), []), "objective:", "argument of (...)^2"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("atom, text", [("max", "`max("), ("norm_inf", "`norm_inf("), ("pos", "`maximum("),
                                        ("sum_largest", "`sum_largest("), ("huber", "`huber(")])
def test_nonconvex_positions_are_refused_naming_atom_and_rule(atom, text, bad):
    build, where, why = BAD[bad]
    if atom == "huber" and bad == "squared":
        text, why = "huber(", "must be affine"   # square(sum(huber)): the square's argument is not affine (caught by the tracer)
    x = cp.Variable(4, name="x")
    obj, cons = build(CONVEX[atom], x)
    with pytest.raises(ModelStructureError) as info:
        compile_cvxpy(cp.Problem(obj, cons))
    msg = str(info.value)
    assert msg.startswith(where) and text in msg and why in msg, msg
    if why != "must be affine":
        assert "DCP" in msg and "minimised" in msg, msg


@pytest.mark.parametrize("atom", sorted(CONCAVE))
def test_minimised_concave_mirror_is_refused(atom):
    x = cp.Variable(4)
    with pytest.raises(ModelStructureError, match="opposite sign"):
        compile_cvxpy(cp.Problem(cp.Minimize(CONCAVE[atom](x))))


def test_relative_entropy_outside_its_domain_is_an_input_error():
    from varopt.errors import InputDataError
    x = cp.Variable(4)
    with pytest.raises(InputDataError, match="positive second argument"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.sum(cp.rel_entr(x + 3, np.array([1.0, 0.0, 1.0, 1.0]))))))


# --- the formulation itself: the completed columns give the atom's value at any point ---------------------------
@pytest.mark.parametrize("atom", sorted(CONVEX) + ["sum_largest_all", "sum_largest_one"])
def test_completed_columns_evaluate_the_atom(atom):
    """At random points, the compiled objective with the epigraph columns at their rule's value equals CVXPY's own
    evaluation of the atom (a wrong rule, piece or scaling shows here without any solver)."""
    f = CONVEX.get(atom) or {"sum_largest_all": lambda x: cp.sum_largest(_u(x), 6),
                             "sum_largest_one": lambda x: cp.sum_largest(_u(x), 1)}[atom]
    x = cp.Variable(4)
    expr = f(x)
    program, _ = compile_cvxpy(cp.Problem(cp.Minimize(expr)))
    rng = np.random.default_rng(3)
    for _ in range(5):
        x0 = 2.0 * rng.standard_normal(4)
        x.value = x0
        z = program.complete_aux(np.concatenate([x0, np.zeros(program.n - 4)]))
        assert np.isclose(program.objective.value(z), expr.value, rtol=1e-12, atol=1e-12), atom
        # the completed point satisfies the epigraph rows (a feasible lift, as the exactness argument needs)
        for c in program.constraints:
            v = c.body.value(z)
            assert c.lo - 1e-9 <= v <= c.hi + 1e-9, (c.name, v, c.lo, c.hi)


# --- rel_entr / kl_div / entr ----------------------------------------------------------------------------------
REL = {
    "rel_entr_const_y": lambda x: cp.sum(cp.rel_entr(x + 3, 2 * np.ones(4))),
    "kl_div_const_y": lambda x: cp.sum(cp.kl_div(x + 3, np.ones(4))) + C @ x,
    "rel_entr_const_x": lambda x: cp.sum(cp.rel_entr(np.array([0.0, 1.0, 2.0, 0.5]), x + 3)),
    "entr": lambda x: -cp.sum(cp.entr(x + 3)) + C @ x,
}


@pytest.mark.parametrize("atom", sorted(REL))
def test_relative_entropies_equal_clarabel(atom):
    vals = []
    for how in ("gop", "CLARABEL"):
        x = cp.Variable(4)
        prob = cp.Problem(cp.Minimize(REL[atom](x)), [cp.norm_inf(x) <= 2])
        vals.append(prob.solve(method=how) if how != "CLARABEL" else prob.solve(solver="CLARABEL"))
        if how == "gop":
            assert prob.status == "optimal"
            assert _close(prob.value, vals[0], 1e-7)
            # a constant argument is folded: no atom row multiplied by a variable
            assert all((g.mult < 0).all() for g in prob.varopt_program.objective.atoms)
    assert _close(vals[0], vals[1], 1e-6), vals


def test_relative_entropy_of_two_variable_arguments_takes_the_tree():
    """``kl_div(x, y)`` with both arguments variable is jointly convex (a perspective), but its rows ``x log x -
    x log y`` multiply an atom by one of its variables, outside GOP's class: mode='auto' takes the spatial tree
    (docs/gop.md §8i; it was refused before)."""
    x = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.kl_div(x + 3, 4 - x))), [cp.norm_inf(x) <= 2])
    ref = prob.solve(solver="CLARABEL")
    got = prob.solve(method="gop")
    assert prob.status == "optimal"
    assert abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (got, ref)
    with pytest.raises(ModelStructureError, match="multiplies an atom by one of its own variables"):
        prob.solve(method="gop", mode="gop")


def test_gop_term_text_of_a_constant_affine_part():
    """The message text of an atom row whose argument is a constant: ``-log(2)``, not ``-log( + 2)``."""
    from varopt.solvers.gop.partition import _affine_txt
    names = ["x", "y"]
    assert _affine_txt(names, [], [], 2.0) == "2"
    assert _affine_txt(names, [0, 1], [1.0, -2.0], -3.0) == "x - 2*y - 3"
    assert _affine_txt(names, [1], [-1.0]) == "-y"
    assert _affine_txt(names, [], []) == "0"


@pytest.mark.parametrize("norm", ["inf", 1])
def test_majorize_induced_matrix_norms(norm):
    """``cp.norm(X, 'inf')`` / ``cp.norm(X, 1)`` of a matrix are maxima of sums of ``abs``: epigraph columns whose
    rows majorize lifts again (its abs columns come after the epigraph columns; this raised a ValueError about the
    column order before)."""
    rng = np.random.default_rng(11)
    M = rng.standard_normal((3, 4))
    vals = []
    for how in ("majorize", "CLARABEL"):
        X = cp.Variable((3, 4))
        prob = cp.Problem(cp.Minimize(cp.norm(X - M, norm) + cp.sum(X)), [cp.abs(X) <= 1])
        vals.append(prob.solve(method=how) if how != "CLARABEL" else prob.solve(solver="CLARABEL"))
        if how == "majorize":
            assert _close(prob.value, vals[0], 1e-7)
    assert _close(vals[0], vals[1]), vals


def test_majorize_callback_sees_the_users_variables_only():
    """The epigraph columns (and majorize's own abs columns) never reach the user's callback."""
    x = cp.Variable(4)
    seen = []
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - 1) + cp.norm_inf(x)), [cp.norm1(x) <= 2])
    prob.solve(method="majorize", callback=lambda k, z, f: seen.append(np.size(z)))
    assert seen and set(seen) == {4}


def test_majorize_refuses_a_concave_abs_in_the_objective():
    """``-norm1`` is not a penalty: majorize does not lift it and names the nonsmooth row."""
    w = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w - 1) - 0.1 * cp.norm1(w)))
    with pytest.raises(ModelStructureError, match=r"majorize needs smooth terms and abs\(\.\.\.\)"):
        prob.solve(method="majorize")


SQUARED = {
    # the squared hinge loss of an SVM, and squares of nonnegative maxima: square is nondecreasing where t >= 0
    "squared_hinge": lambda w, X, y: cp.sum_squares(cp.pos(1 - cp.multiply(y, X @ w))) + cp.sum_squares(w),
    "square_norm_inf": lambda w, X, y: cp.square(cp.norm_inf(X @ w - y)) + cp.sum(w),
    "square_sum_pos": lambda w, X, y: cp.square(cp.sum(cp.pos(X @ w - y))) + cp.sum(w),
    "square_maximum_floor": lambda w, X, y: cp.sum(cp.square(cp.maximum(X @ w - y, 0.5))),
}


@pytest.mark.parametrize("method", ["gop", "majorize"])
@pytest.mark.parametrize("name", sorted(SQUARED))
def test_squares_of_nonnegative_maxima_equal_clarabel(name, method):
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((40, 5)), np.sign(rng.standard_normal(40))
    vals = []
    for how in (method, "CLARABEL"):
        w = cp.Variable(5)
        prob = cp.Problem(cp.Minimize(SQUARED[name](w, X, y)), [cp.norm_inf(w) <= 3])
        vals.append(prob.solve(method=how) if how != "CLARABEL" else prob.solve(solver="CLARABEL"))
        if how != "CLARABEL":
            assert _close(prob.value, vals[0], 1e-7)
    assert _close(vals[0], vals[1]), vals


@pytest.mark.parametrize("build", [lambda u: cp.square(cp.max(u)), lambda u: cp.sum(cp.square(cp.pos(u) - 1)),
                                   lambda u: cp.square(cp.pos(u[0]) - cp.pos(u[1]))])
def test_squares_of_possibly_negative_maxima_are_refused(build):
    x = cp.Variable(4)
    with pytest.raises(ModelStructureError, match=r"argument of \(\.\.\.\)\^2"):
        compile_cvxpy(cp.Problem(cp.Minimize(build(_u(x)))))


def test_majorize_start_is_the_users_point():
    """Option ``x0`` and CVXPY's ``warm_start=True`` give the user's variables only; the epigraph (and abs) columns are
    completed at their definitions (``x0`` of the user's length was refused before: the program counted the
    epigraph columns)."""
    x = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - 1) + cp.norm_inf(x)), [cp.norm1(x) <= 2])
    ref = cp.Problem(prob.objective, prob.constraints).solve(solver="CLARABEL")
    assert _close(prob.solve(method="majorize", x0=np.full(4, 0.1)), ref)
    assert _close(prob.solve(method="majorize", warm_start=True), ref)
    program = prob.varopt_program
    assert program.aux and np.isfinite(program.x0).all()   # the hint with its epigraph column completed
    with pytest.raises(varopt.errors.InvalidOptionError, match="has length 5, the program has 4 variables"):
        prob.solve(method="majorize", x0=np.zeros(5))


POWERS = {
    "power_of_pos": lambda x: cp.sum(cp.power(cp.pos(_u(x) + 3), 3)) + C @ x,
    "power_of_norm_inf": lambda x: cp.power(cp.norm_inf(_u(x)), 1.5) + C @ x,
    "inv_pos_of_bounded_max": lambda x: cp.inv_pos(8 - cp.max(_u(x))) + C @ x,
}


@pytest.mark.parametrize("name", sorted(POWERS))
def test_power_atoms_of_epigraph_columns_equal_clarabel(name):
    """power(p) rows (varopt.program.powers) of a maximum: nondecreasing in it, and their domain (u >= 0, or
    8 - t > 0) holds wherever the maximum is defined."""
    _check(FORMS["minimize"], lambda x: POWERS[name](x) - C @ x, "gop", False)


def test_power_with_a_domain_the_maximum_may_leave_is_refused():
    """``power(max(u), 3)`` is ``t^3`` on ``t >= 0``: over the epigraph ``t >= max(u)`` that is ``max(u, 0)^3``, not
    CVXPY's ``max(u)^3`` with ``max(u) >= 0`` -- a relaxation, refused."""
    x = cp.Variable(4)
    with pytest.raises(ModelStructureError, match=r"argument of \(\.\.\.\)\^3"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.power(cp.max(_u(x)), 3))))


def test_majorize_program_start_completes_epigraph_columns_without_a_projection(monkeypatch):
    """Without ``x0`` the start is the variables' values (here none: 0) with the epigraph columns at their definitions
    (``t = max(r, 0)`` for ``pos(r)``), which satisfies their rows: no projection QP. Before, ``t = 0`` violated
    ``t >= r`` and the start was projected by HiGHS's QP: 69 s of a 2,000-row pinball regression
    (benchmarks/cvxpy_epigraph_atoms.py). The optimum equals Clarabel's."""
    from varopt import lpqp

    def no_projection(*a, **k):
        raise AssertionError("the start was projected")

    monkeypatch.setattr(lpqp, "project", no_projection)   # majorize's QP layer is varopt.lpqp
    rng = np.random.default_rng(2)
    X = rng.standard_normal((60, 3))
    y = X @ rng.standard_normal(3) + rng.standard_t(2, 60)
    w = cp.Variable(3)
    r = X @ w - y
    for f in (cp.sum(cp.pos(r)) + 0.5 * cp.sum(r), cp.norm_inf(r), cp.sum_largest(r, 6)):
        v = cp.Problem(cp.Minimize(f)).solve(method="majorize")
        w.value = None
        assert _close(v, cp.Problem(cp.Minimize(f)).solve(solver="CLARABEL"))
        w.value = None


def test_majorize_user_start_on_epigraph_atoms_raises_no_numpy_warnings():
    """A user's start (``warm_start=True`` with the variables' values) on ``sum(pos(r))``: the step QP's working set
    holds columns without any curvature (the epigraph columns of an LP step), where the fast path's closed form is
    not finite and it declines to the QP layer. NumPy's 'invalid value encountered in matmul' reached the user as a
    RuntimeWarning from varopt's internals; the optimum equals Clarabel's."""
    import warnings
    rng = np.random.default_rng(2)
    X = rng.standard_normal((60, 3))
    y = X @ rng.standard_normal(3) + rng.standard_t(2, 60)
    w = cp.Variable(3)
    f = cp.sum(cp.pos(X @ w - y)) + 0.5 * cp.sum(X @ w - y)
    ref = cp.Problem(cp.Minimize(f), [w <= 3, w >= -3]).solve(solver="CLARABEL")
    for start in ([0.3, -2.0, 1.0], [10.0, 10.0, 10.0]):
        w.value = np.array(start)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            v = cp.Problem(cp.Minimize(f), [w <= 3, w >= -3]).solve(method="majorize", warm_start=True)
        assert _close(v, ref)


def test_quad_over_lin_of_a_nonnegative_maximum_over_a_variable_equals_clarabel():
    """``quad_over_lin(pos(u), s)`` with a variable ``s``: ``u^2/s`` is even and convex in ``u``, hence nondecreasing
    on ``u >= 0``, so the epigraph column of ``pos`` may be its numerator (it was refused as 'not a nondecreasing
    convex use', CVXPY's DCP accepts it); with ``pos(u) - 1`` (may be negative) it stays refused."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 3)), np.sign(rng.standard_normal(20))
    vals = []
    for how in ("gop", "CLARABEL"):
        w, s = cp.Variable(3), cp.Variable(pos=True)
        prob = cp.Problem(cp.Minimize(cp.quad_over_lin(cp.pos(1 - cp.multiply(y, X @ w)), s) + s
                                      + 0.1 * cp.sum_squares(w)), [s <= 10])
        vals.append(prob.solve(method=how) if how != "CLARABEL" else prob.solve(solver="CLARABEL"))
    assert _close(vals[0], vals[1]), vals
    x, s = cp.Variable(4), cp.Variable(pos=True)
    with pytest.raises(ModelStructureError, match=r"argument of \(\.\.\.\)\^2/\(\.\.\.\)"):
        compile_cvxpy(cp.Problem(cp.Minimize(cp.quad_over_lin(cp.pos(_u(x)) - 1, s) + s), [s <= 10]))
