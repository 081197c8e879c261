"""Hinges for ipsa and klprox: ``maximum(a, b)`` of two affine expressions as ``(a + b)/2 + |a - b|/2``.

ipsa and klprox list ``abs`` in ``Solver.native_atoms``; for them CVXPY's ``pos(u)``, ``maximum(u, 0)``, ``neg(u)``,
``maximum(u, v)`` and ``minimum(u, v)`` of affine ``u, v`` compile to a linear term and one ``abs`` row of ``u - v``
(exact), instead of the epigraph columns that both refused ("compiled as epigraph columns with inequality rows, which
this solver does not take"): the hinge-loss SVM was not solvable by ipsa, nor a hinge likelihood by klprox, while
the same loss written ``(u + abs(u))/2`` was. Checks: the compiled objective equals CVXPY's value of the user's
expression at random points; ipsa's optima equal Clarabel's and the loaded point evaluates to the reported objective;
klprox's posterior of ``pos(u)`` equals the posterior of the same loss written with ``abs`` in CVXPY and in Pyomo;
an atom that needs an affine argument still sees the epigraph column (its refusal text is unchanged); other solvers
still get the epigraph form."""

import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402,F401  (registers the solve methods)
from varopt.errors import ModelStructureError  # noqa: E402
from varopt.frontends.cvxpy_compile import compile_cvxpy  # noqa: E402
from cvxpy_solve import solve_fresh  # noqa: E402  (tests/cvxpy_solve.py)

N, D = 30, 4
_R = np.random.default_rng(7)
X = _R.standard_normal((N, D))
Y = np.sign(X @ _R.standard_normal(D) + 0.5 * _R.standard_normal(N))
Y[Y == 0] = 1.0
C = _R.uniform(0.5, 2.0, N)
NATIVE = ("sqpos", "abs")
IPSA = {"batch_size": 10 ** 9, "hessian": "exact", "step_power": 0, "max_iter": 300, "kkt_tol": 1e-10}


def _m(w):
    return cp.multiply(Y, X @ w)


#: losses written as users write them, each a hinge (or hinge-like) of affine expressions
LOSSES = {
    "pos": lambda w: cp.sum(cp.pos(1 - _m(w))),
    "maximum_u_0": lambda w: cp.sum(cp.maximum(1 - _m(w), 0)),
    "maximum_0_u": lambda w: cp.sum(cp.maximum(0, 1 - _m(w))),
    "neg": lambda w: cp.sum(cp.neg(_m(w) - 1)),
    "weighted": lambda w: C @ cp.pos(1 - _m(w)),
    "multiply_weights": lambda w: cp.sum(cp.multiply(C, cp.pos(1 - _m(w)))),
    "maximum_two_affine": lambda w: cp.sum(cp.maximum(1 - _m(w), -0.5 * _m(w))),
    "maximum_half": lambda w: cp.sum(cp.maximum(1 - _m(w), 0.5)),
    "stacked_with_zeros": lambda w: cp.sum(cp.hstack([cp.pos(1 - _m(w)), np.zeros(3)])),
    "epsilon_insensitive": lambda w: cp.sum(cp.pos(cp.abs(X @ w - Y) - 0.2)),
    "mean_hinge": lambda w: cp.sum(cp.pos(1 - _m(w))) / N,
}




@pytest.mark.parametrize("name", sorted(LOSSES))
def test_compiled_objective_equals_cvxpy_value(name):
    """The split program's objective (with any epigraph columns completed by their rule) equals CVXPY's value of
    the user's expression at random points (a wrong half, sign or weight shows here without a solver)."""
    w = cp.Variable(D)
    expr = LOSSES[name](w) + 0.5 * cp.sum_squares(w)
    program, _ = compile_cvxpy(cp.Problem(cp.Minimize(expr)), native_atoms=NATIVE)
    rng = np.random.default_rng(3)
    for _ in range(5):
        x0 = 2.0 * rng.standard_normal(D)
        w.value = x0
        z = program.complete_aux(np.concatenate([x0, np.zeros(program.n - D)]))
        assert np.isclose(program.objective.value(z), expr.value, rtol=1e-12, atol=1e-12), name


@pytest.mark.parametrize("name", ["pos", "maximum_u_0", "neg", "weighted", "maximum_two_affine"])
def test_hinges_reach_the_solver_without_epigraph_columns(name):
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(LOSSES[name](w) + 0.5 * cp.sum_squares(w)))
    split, _ = compile_cvxpy(prob, native_atoms=NATIVE)
    assert not split.aux and split.n == D
    lifted, _ = compile_cvxpy(prob)          # gop, majorize, ...: the epigraph columns as before
    assert lifted.aux and all(a.kind == "epigraph" for a in lifted.aux)


# not split: the epsilon-insensitive loss pos(|u| - eps), a maximum of a non-affine piece (its epigraph form stays)
@pytest.mark.parametrize("name", sorted(set(LOSSES) - {"epsilon_insensitive"}))
def test_ipsa_solves_hinge_losses_to_clarabels_optimum(name):
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(LOSSES[name](w) + 0.5 * cp.sum_squares(w)))
    ref = prob.solve(solver="CLARABEL")
    r = solve_fresh(prob, "ipsa", **IPSA)
    assert r.status == "converged", (name, r.status, r.message)
    assert abs(prob.objective.value - ref) <= 1e-7 * max(1.0, abs(ref)), (name, prob.objective.value, ref)
    assert abs(r.objective - prob.objective.value) <= 1e-9 * max(1.0, abs(ref))


def test_ipsa_hinge_in_a_constraint_and_a_concave_minimum_in_a_maximised_objective():
    w = cp.Variable(D)
    cons = [cp.sum(cp.pos(1 - _m(w))) <= 0.5 * N]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), cons)
    ref = prob.solve(solver="CLARABEL")
    r = solve_fresh(prob, "ipsa", **IPSA)
    assert r.status == "converged" and abs(prob.objective.value - ref) <= 1e-7 * max(1.0, ref)
    assert cons[0].violation() <= 1e-9
    # the concave mirror: maximise sum(min(m, 1)) - |w|^2 (a "capped margin")
    cap = cp.Problem(cp.Maximize(cp.sum(cp.minimum(_m(w), 1)) - cp.sum_squares(w)))
    ref = cap.solve(solver="CLARABEL")
    r = solve_fresh(cap, "ipsa", **IPSA)
    assert r.status == "converged" and abs(cap.objective.value - ref) <= 1e-7 * max(1.0, abs(ref))


def test_a_minimum_in_a_minimised_objective_is_refused():
    """``minimum`` is concave: ``-|a - b|/2`` in a minimised objective is refused (as its epigraph form was)."""
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w) + cp.sum(cp.minimum(_m(w), 1))))
    for method in ("ipsa", "klprox"):
        with pytest.raises(ModelStructureError):
            solve_fresh(prob, method, **(IPSA if method == "ipsa" else {}))


def test_an_atom_that_needs_an_affine_argument_still_gets_the_column():
    """``sqrt(sum(pos(u)))`` and ``exp(max(u, 0.5))``: the hinge inside an atom that needs an affine argument is
    traced again as its epigraph column, so the message is the one the epigraph form gave (not "must be affine")."""
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(cp.maximum(0.3 * (X @ w), 0.5))) + cp.sum_squares(w)))
    with pytest.raises(ModelStructureError) as e:
        solve_fresh(prob, "ipsa", **IPSA)
    assert "must be affine" not in str(e.value) and "epigraph" in str(e.value)
    assert solve_fresh(prob, "gop", time_limit=60).status == "optimal"


def test_klprox_hinge_posterior_equals_the_abs_form_in_cvxpy_and_pyomo():
    """``pos(u)`` and ``(u + abs(u))/2`` are the same function, so klprox's Gaussian posterior must be the same:
    CVXPY's hinge, CVXPY's abs form and Pyomo's abs form (Pyomo has no ``max``)."""
    pe = pytest.importorskip("pyomo.environ")
    w = cp.Variable(D)
    u = 1 - _m(w)
    hinge = cp.Problem(cp.Minimize(cp.sum(cp.pos(u)) + 0.5 * cp.sum_squares(w)))
    absform = cp.Problem(cp.Minimize(cp.sum(u + cp.abs(u)) / 2 + 0.5 * cp.sum_squares(w)))
    rh, ra = solve_fresh(hinge, "klprox"), solve_fresh(absform, "klprox")
    m = pe.ConcreteModel()
    m.w = pe.Var(range(D), initialize=0.0)
    us = [1 - Y[n] * sum(X[n, j] * m.w[j] for j in range(D)) for n in range(N)]
    m.obj = pe.Objective(expr=sum((us[n] + abs(us[n])) / 2 for n in range(N)) + 0.5 * sum(m.w[j] ** 2 for j in range(D)))
    rp = pe.SolverFactory("klprox").solve(m).varopt_result
    assert rh.status == ra.status == rp.status == "converged"
    for other in (ra, rp):
        np.testing.assert_allclose(rh.x, other.x, atol=1e-9)
        np.testing.assert_allclose(rh.info["covariance"], other.info["covariance"], atol=1e-9)
        assert abs(rh.objective - other.objective) <= 1e-10 * abs(rh.objective)


def test_ipsa_hinge_svm_past_the_dense_size_solves_through_the_sparse_system():
    """N = 1600 samples: the lifted program has N + d > 1500 columns, so the reduced system (2.20) takes the sparse
    LU (an arrow matrix: a diagonal N x N block bordered by d dense rows), ordered by minimum degree on M + M^T."""
    rng = np.random.default_rng(11)
    n, d = 1600, 5
    Xl = rng.standard_normal((n, d))
    yl = np.sign(Xl @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n))
    w = cp.Variable(d)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.pos(1 - cp.multiply(yl, Xl @ w))) / n + 0.05 * cp.sum_squares(w)))
    ref = prob.solve(solver="CLARABEL")
    r = solve_fresh(prob, "ipsa", **IPSA)
    assert r.status == "converged" and abs(prob.objective.value - ref) <= 1e-7 * max(1.0, abs(ref))
