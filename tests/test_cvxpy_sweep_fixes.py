"""Regressions of the CVXPY atom sweep (docs/atoms_coverage.md): each failed before its fix."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402,F401
from varopt.errors import ModelStructureError  # noqa: E402

C3 = np.array([0.5, -1.0, 2.0])
M23 = np.array([[1.0, 5.0, 2.0], [3.0, 1.0, 4.0]])


def _agree(build, methods=("gop", "majorize")):
    ref = build().solve(solver="CLARABEL")
    for method in methods:
        prob = build()
        got = prob.solve(method=method)
        assert prob.status == "optimal", (method, prob.status)
        assert abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (method, got, ref)
        assert abs(prob.value - got) <= 1e-7 * max(1.0, abs(got)), (method, prob.value, got)


def test_min_sum_largest_plus_squares_gop_does_not_step_onto_a_row():
    """gop's interior-point primal stepped onto a row (slack exactly 0) when its line search failed: the barrier's
    ``1/slack`` made the objective NaN ("GOP: the objective is NaN at a primal solution")."""
    _agree(lambda: (lambda x: cp.Problem(cp.Minimize(cp.sum_largest(x - C3, 2) + cp.sum_squares(x))))(
        cp.Variable(3, name="x")), methods=("gop",))


@pytest.mark.parametrize("axis", [0, 1])
def test_cummax_is_an_epigraph_of_prefix_maxima(axis):
    _agree(lambda: (lambda X: cp.Problem(cp.Minimize(cp.sum(cp.cummax(X - M23, axis=axis)) + cp.sum_squares(X))))(
        cp.Variable((2, 3), name="X")))


@pytest.mark.parametrize("w", [[2.0, 1.0], [2.0, -1.0, 0.5], [3.0, 1.0, 1.0, 0.0, -2.0, 0.0], [-1.0, -2.0]])
def test_dotsort_is_a_combination_of_sum_largest(w):
    def build():
        X = cp.Variable((2, 3), name="X")
        return cp.Problem(cp.Minimize(cp.dotsort(X - M23, np.array(w)) + cp.sum_squares(X)))
    _agree(build)


def test_dotsort_row_and_maximised_dotsort():
    _agree(lambda: (lambda x: cp.Problem(cp.Minimize(-C3 @ x), [cp.dotsort(x, np.array([2.0, 1.0])) <= 1,
                                                                 x >= -1]))(cp.Variable(3, name="x")))
    x = cp.Variable(3, name="x")
    with pytest.raises(ModelStructureError, match=r"dotsort.*it is convex, so it must be minimised"):
        cp.Problem(cp.Maximize(cp.dotsort(x, np.array([2.0, 1.0]))), [cp.abs(x) <= 1]).solve(method="gop")


def test_inv_prod_and_powers_of_geo_mean():
    """``cp.inv_prod(x)`` is CVXPY's ``power(geo_mean(x), -n)``: refused ("the argument geo_mean(...) of power must be
    affine") before; now one power of the mean's root column."""
    x = cp.Variable(3, name="x")
    prob = cp.Problem(cp.Minimize(cp.inv_prod(x) + cp.sum(x)))
    assert abs(prob.solve(method="gop") - 4.0) <= 1e-6     # x = 1: 1 + 3 (AM-GM)
    np.testing.assert_allclose(x.value, np.ones(3), atol=1e-4)
    _agree(lambda: (lambda x: cp.Problem(cp.Maximize(cp.power(cp.geo_mean(x), 0.5)), [C3 @ x <= 1, x <= 2]))(
        cp.Variable(3, name="x")), methods=("gop",))


@pytest.mark.parametrize("build, fragment", [
    (lambda: cp.lambda_min((lambda S: S + S.T)(cp.Variable((2, 2)))), r"`lambda_max` \(built by cp.lambda_max or "
                                                                     r"cp.lambda_min\).*semidefinite cone"),
    (lambda: -cp.sum(cp.cumprod(cp.Variable(2, pos=True))), r"`cumprod` is not supported by any varopt solver: it is a log-log \(DGP, gp=True\)"),
    (lambda: cp.ceil(cp.Variable()), r"`ceil` is not supported by any varopt solver: it is a quasiconvex/quasiconcave \(DQCP, qcp=True\)"),
    (lambda: cp.diff_pos(*[cp.Variable(pos=True)] * 2), r"`one_minus_pos` \(built by cp.diff_pos\)"),
])
def test_unsupported_atoms_say_why_and_which_function(build, fragment):
    with pytest.raises(ModelStructureError, match=fragment):
        cp.Problem(cp.Minimize(build())).solve(method="gop")


@pytest.mark.parametrize("flag", ["gp", "qcp"])
def test_gp_and_qcp_flags_are_refused_by_name(flag):
    a, b = cp.Variable(pos=True, name="a"), cp.Variable(pos=True, name="b")
    prob = cp.Problem(cp.Minimize(a * b + 1 / a), [a * b <= 4, a >= 0.5, a <= 10, b >= 0.25, b <= 10])
    with pytest.raises(ModelStructureError, match=f"with {flag}=True: varopt's solvers do not apply"):
        prob.solve(method="gop", **{flag: True})
    # False is CVXPY's default: the problem as written (gop solves the products and ratio globally)
    assert abs(prob.solve(method="gop", **{flag: False}) - prob.solve(gp=True)) <= 1e-6


def test_majorize_refusals_name_the_term_and_gop():
    x = cp.Variable(3, name="x")
    with pytest.raises(ModelStructureError, match=r"'xlogx' atom, terms \(u\)\*log\(u\).*gop takes such terms"):
        cp.Problem(cp.Maximize(cp.sum(cp.entr(x))), [cp.sum(x) == 1]).solve(method="majorize")
    with pytest.raises(ModelStructureError, match=r"constraint 'c0' is nonlinear.*gop takes nonlinear constraints"):
        cp.Problem(cp.Minimize(C3 @ x), [cp.sum_squares(x) <= 1]).solve(method="majorize")


def test_mixed_norm_row_closes_without_abs_rows_of_norm_columns():
    """``mixed_norm(X, 2, 1) <= 1`` is ``norm1`` of the row norms' ``sqrt`` columns (>= 0): the ``abs`` rows of those
    columns kept gop's tree at the time limit (user_limit after 20 s; the default has none). ``|t| = t`` for a
    column the bounds keep >= 0."""
    M = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -2.0]])

    def build():
        X = cp.Variable((3, 2), name="X")
        return cp.Problem(cp.Minimize(-cp.sum(cp.multiply(M, X))), [cp.mixed_norm(X, 2, 1) <= 1, cp.abs(X) <= 2])
    ref = build().solve(solver="CLARABEL")
    prob = build()
    got = prob.solve(method="gop", time_limit=10)
    assert prob.status == "optimal" and abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (prob.status, got, ref)
    assert all(g.kind != "abs" for c in prob.varopt_program.constraints if c.name == "c0" for g in c.body.atoms)


def test_logistic_row_refusal_names_both_methods():
    # (refused before docs/gop.md §13e, naming both methods; the direct convex path now solves it)
    x = cp.Variable(3, name="x")
    prob = cp.Problem(cp.Minimize(-cp.sum(x)), [cp.sum(cp.logistic(x)) <= 2, cp.abs(x) <= 2])
    ref = cp.Problem(cp.Minimize(-cp.sum(x)), [cp.sum(cp.logistic(x)) <= 2, cp.abs(x) <= 2]).solve(solver="CLARABEL")
    got = prob.solve(method="gop")
    assert prob.status == "optimal" and abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (got, ref)
    # with mode='gop' (no convex path) the refusal still names the row
    with pytest.raises(ModelStructureError, match=r"nonlinear in the primal block"):
        prob.solve(method="gop", mode="gop")


def test_unbounded_convex_objective_is_reported_unbounded_with_its_ray():
    """``min sum(exp(x)) - c x`` with a negative ``c_i`` is unbounded below (Clarabel: unbounded); gop raised
    ``SolverBugError`` (an internal invariant) "a non-connected primal variable ... has a nonzero Lagrangian gradient",
    then a model error asking for bounds; the convex path now reports it unbounded with the ray ``x[1] -> -inf``
    (``exp`` is bounded along it: its recession function vanishes for a decreasing argument)."""
    x = cp.Variable(3, name="x")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(x)) - C3 @ x))
    prob.solve(method="gop")
    assert prob.status == "unbounded"
    ray = prob.varopt_result.info["unbounded_ray"]
    assert set(ray) == {"x[1]"} and ray["x[1]"] < 0, ray
    ref = cp.Problem(cp.Minimize(cp.sum(cp.exp(x)) - C3 @ x))
    ref.solve(solver="CLARABEL")
    assert ref.status == "unbounded"


def test_ipsa_takes_a_lower_bound_on_a_concave_body():
    """``log(x) >= 0.5`` is the convex row ``-log(x) <= -0.5``; ipsa refused every lower bound on a nonlinear body
    as "non-convex". Its point is feasible (ipsa is a stochastic method: ``user_limit`` at its pass limit, not the
    optimum), and a lower bound on a convex body stays refused."""
    x = cp.Variable(3, name="x")
    prob = cp.Problem(cp.Minimize(cp.sum(x)), [cp.log(x) >= 0.5])
    ref = 3 * np.exp(0.5)
    got = prob.solve(method="ipsa", seed=0)
    assert prob.status in ("optimal", "optimal_inaccurate", "user_limit"), prob.status
    assert float(np.max(prob.constraints[0].violation())) <= 1e-9 and got >= ref - 1e-9, (got, ref)
    with pytest.raises(ModelStructureError, match="lower bound on a nonlinear body that is not concave"):
        cp.Problem(cp.Minimize(cp.sum(x)), [cp.sum_squares(x) >= 1, x >= 0]).solve(method="ipsa")
