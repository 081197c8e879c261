"""The squared hinge atom ``sqpos`` (``max(u, 0)^2``): its kernel against brute force, its CVXPY recognition for the
solvers that list it in ``native_atoms`` (ipsa, klprox), and that every other solver still receives the epigraph
program (no auxiliary column may appear or disappear for them)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: F401  (registers the solve methods)
from varopt.errors import ModelStructureError
from varopt.frontends.cvxpy_compile import compile_cvxpy
from varopt.program.atoms import ATOMS
from varopt.registry import get_solver

K = ATOMS["sqpos"]
RNG = np.random.default_rng(20261126)
X = RNG.standard_normal((12, 3))
Y = np.sign(X @ np.array([1.0, -1.0, 0.5]) + 0.3 * RNG.standard_normal(12))
NATIVE = {"sqpos"}


# --- the kernel -----------------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_value_and_derivatives_against_their_definitions(u):
    a = np.array([u])
    p = max(u, 0.0)
    assert K.value(a)[0] == p * p
    assert K.d1(a)[0] == 2.0 * p
    assert K.d2(a)[0] == (2.0 if u > 0 else 0.0)
    if abs(u) > 1e-3:   # away from the kink: central differences of value and slope
        h = 1e-6 * max(1.0, abs(u))
        assert abs((K.value(a + h) - K.value(a - h))[0] / (2 * h) - K.d1(a)[0]) <= 1e-6 * max(1.0, abs(u))
        assert abs((K.d1(a + h) - K.d1(a - h))[0] / (2 * h) - K.d2(a)[0]) <= 1e-6


def test_kernel_facts():
    """C^1 (smooth) with a jump of g'' at 0 (twice_smooth False); nondecreasing; exact recession: g(u + t s) - g(u)
    over t tends to 0 for s <= 0 and grows without bound for s > 0; sublevel sets (-inf, sqrt(th)]."""
    assert K.smooth and not K.twice_smooth and K.convex and K.monotone == 1 and not K.quadratic
    assert K.domain == (-np.inf, np.inf, False) and not K.max_of_pm_u
    for s in (-1.0, 0.0, 1.0):
        slope = [(K.value(np.array([0.3 + t * s])) - K.value(np.array([0.3])))[0] / t for t in (1e3, 1e6)]
        if s <= 0:
            assert abs(slope[-1]) < 1e-6 and K.recession == -1
        else:
            assert slope[-1] > 1e5
    u = np.linspace(-5, 5, 20001)
    for th in (0.0, 0.5, 4.0):
        lo, hi = K.sublevel(th)
        inside = u[K.value(u) <= th]
        assert lo == -np.inf and hi >= inside.max() and hi - np.sqrt(th) < 1e-9
    assert K.sublevel(-1.0) is None and K.sublevel(np.inf) is None
    # interval bounds on a grid (also done for every kind by tests/test_atoms.py), and with infinite ends
    assert K.interval_min(np.array([-np.inf]), np.array([-1.0]))[0] == 0.0
    assert K.interval_min(np.array([2.0]), np.array([np.inf]))[0] == 4.0
    assert K.interval_max(np.array([-3.0]), np.array([-1.0]))[0] == 0.0
    assert K.interval_max(np.array([-3.0]), np.array([np.inf]))[0] == np.inf


# --- CVXPY recognition ------------------------------------------------------------------------------------------
def _margin(w):
    return 1 - cp.multiply(Y, X @ w)


FORMS = {
    "square_pos": lambda w: cp.sum(cp.square(cp.pos(_margin(w)))),
    "power_pos": lambda w: cp.sum(cp.power(cp.pos(_margin(w)), 2)),
    "pos_pow": lambda w: cp.sum(cp.pos(_margin(w)) ** 2),
    "square_maximum": lambda w: cp.sum(cp.square(cp.maximum(_margin(w), 0))),
    "maximum_zero_first": lambda w: cp.sum(cp.maximum(0, _margin(w)) ** 2),
    "square_neg": lambda w: cp.sum(cp.square(cp.neg(-_margin(w)))),
    "square_minus_pos": lambda w: cp.sum(cp.square(-cp.pos(_margin(w)))),
    "sum_squares": lambda w: cp.sum_squares(cp.pos(_margin(w))),
    "quad_over_lin": lambda w: cp.quad_over_lin(cp.pos(_margin(w)), 2.5),
    "scaled_inside": lambda w: cp.sum(cp.square(3 * cp.pos(_margin(w)))),
    "elementwise_scale": lambda w: cp.sum(cp.square(cp.multiply(np.arange(1.0, 13.0), cp.pos(_margin(w))))),
    "scaled_outside": lambda w: 0.25 * cp.sum(cp.square(cp.pos(_margin(w)))),
    "matrix": lambda w: cp.sum(cp.square(cp.pos(cp.reshape(_margin(w), (3, 4), order="F")))),
    "axis_sum": lambda w: cp.sum(cp.sum(cp.square(cp.pos(cp.reshape(_margin(w), (3, 4), order="F"))), axis=0)),
    "log_normcdf": lambda w: -cp.sum(cp.log_normcdf(cp.multiply(Y, X @ w))),
    "log_normcdf_matrix": lambda w: -cp.sum(cp.log_normcdf(cp.reshape(cp.multiply(Y, X @ w), (4, 3), order="F"))),
}


#: forms the epigraph position check refuses (the square of -t is not nondecreasing in t): unchanged for the solvers
#: without the atom, solved by those with it
EPIGRAPH_REFUSES = {"square_minus_pos"}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_form_compiles_to_sqpos_rows_only_for_native_solvers(name):
    """With native_atoms: no auxiliary column, no row, only sqpos atoms, and the objective equal to CVXPY's own
    value at random points (brute force by CVXPY's numeric evaluation). Without: the epigraph program."""
    w = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(FORMS[name](w) + 0.5 * cp.sum_squares(w)))
    prog, _ = compile_cvxpy(prob, native_atoms=NATIVE)
    assert prog.n == 3 and not prog.aux and not prog.constraints
    assert {g.kind for g in prog.objective.atoms} == {"sqpos", "square"}
    rows = sum(g.coef.size for g in prog.objective.atoms if g.kind == "sqpos")
    assert rows == (7 * 12 if name.startswith("log_normcdf") else 12)
    for _ in range(5):
        wv = 2.0 * RNG.standard_normal(3)
        w.value = wv
        assert abs(prog.objective.value(wv) - prob.objective.value) <= 1e-11 * max(1.0, abs(prob.objective.value))
    if name in EPIGRAPH_REFUSES:
        with pytest.raises(ModelStructureError, match="not a nondecreasing convex use"):
            compile_cvxpy(prob)
        return
    lifted, _ = compile_cvxpy(prob)
    assert lifted.n > 3 and lifted.aux and all(a.kind == "epigraph" for a in lifted.aux)
    assert "sqpos" not in {g.kind for g in lifted.objective.atoms}


@pytest.mark.parametrize("expr", [
    lambda w: cp.sum(cp.square(cp.maximum(_margin(w), 0.5))),        # not a hinge at 0
    lambda w: cp.sum(cp.square(cp.maximum(_margin(w), 0, -w[0]))),  # three pieces
    lambda w: cp.sum(cp.square(cp.pos(cp.max(_margin(w))))),         # non-affine argument
    lambda w: cp.sum(cp.square(cp.pos(_margin(w)) + 1)),             # a shifted hinge
])
def test_other_squares_of_maxima_keep_the_epigraph(expr):
    w = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(expr(w) + 0.5 * cp.sum_squares(w)))
    prog, _ = compile_cvxpy(prob, native_atoms=NATIVE)
    assert prog.aux and "sqpos" not in {g.kind for g in prog.objective.atoms}
    base, _ = compile_cvxpy(prob)
    assert prog.n == base.n and len(prog.constraints) == len(base.constraints)


def test_sqpos_in_a_constraint_row():
    w = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), [cp.sum_squares(cp.pos(_margin(w))) <= 4.0])
    prog, _ = compile_cvxpy(prob, native_atoms=NATIVE)
    assert not prog.aux and [g.kind for g in prog.constraints[0].body.atoms] == ["sqpos"]


def test_which_solvers_take_the_atom():
    """ipsa and klprox take sqpos; gop, majorize, proxsg and the energy solvers do not (they get the epigraph)."""
    assert "sqpos" in get_solver("ipsa").native_atoms and "sqpos" in get_solver("klprox").native_atoms
    for name in ("gop", "majorize", "proxsg", "exact", "meanfield", "sasmc"):
        assert "sqpos" not in get_solver(name).native_atoms, name


@pytest.mark.parametrize("method", ["gop", "majorize"])
def test_non_native_solvers_receive_the_epigraph_program(method):
    """The program a non-native solver solves is the one compile_cvxpy builds without native atoms, column for
    column and row for row, and its answer equals Clarabel's on the L2-SVM and the probit model."""
    w = cp.Variable(3)
    for obj in (cp.sum_squares(cp.pos(_margin(w))), -cp.sum(cp.log_normcdf(cp.multiply(Y, X @ w)))):
        prob = cp.Problem(cp.Minimize(obj + 0.5 * cp.sum_squares(w)))
        ref = prob.solve(solver="CLARABEL")
        prob.solve(method=method, warm_start=False)   # not from Clarabel's point
        got = prob.varopt_program
        base, _ = compile_cvxpy(prob)
        assert got.names == base.names and len(got.constraints) == len(base.constraints)
        assert [a.kind for a in got.aux] == [a.kind for a in base.aux] and got.aux
        z = RNG.standard_normal(base.n)
        assert got.objective.value(z) == base.objective.value(z)
        for c1, c2 in zip(got.constraints, base.constraints):
            assert c1.body.value(z) == c2.body.value(z) and (c1.lo, c1.hi) == (c2.lo, c2.hi)
        assert abs(prob.value - ref) <= 1e-6 * max(1.0, abs(ref))


@pytest.mark.parametrize("with_bound", [False, True])
def test_a_program_holding_sqpos_rows_given_directly(with_bound):
    """A Program built with sqpos rows (here by compile_cvxpy(native_atoms=...); any caller may build one) handed to
    a solver without the atom in native_atoms: gop (convex atom, by the kernel table) and proxsg (C^1, smooth) equal
    Clarabel; majorize refuses it by name."""
    w = cp.Variable(3)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(cp.pos(_margin(w))) + 0.5 * cp.sum_squares(w)),
                      [w >= 0] if with_bound else [])
    ref = prob.solve(solver="CLARABEL")
    prog, _ = compile_cvxpy(prob, native_atoms=NATIVE)
    for name in ("gop", "proxsg"):
        r = get_solver(name).solve(prog)
        assert r.status in ("optimal", "converged") and abs(r.objective - ref) <= 1e-6 * max(1.0, abs(ref)), name
    with pytest.raises(ModelStructureError, match="sqpos"):
        get_solver("majorize").solve(prog)


def test_varopt_solvers_names_the_atom(capsys):
    from varopt.cli import main
    main(["solvers", "klprox"])
    out = capsys.readouterr().out
    assert "atoms taken as such: abs (abs(u)), sqpos (pos(u)^2)" in out and "(hinges pos(u), maximum(u, 0), neg(u))" in out
    main(["solvers", "gop"])
    assert "sqpos" not in capsys.readouterr().out


@pytest.mark.parametrize("shape", [(12,), (4, 3)])
def test_log_normcdf_rows_are_labelled_by_data_entry(shape):
    """The seven pieces of entry j of x share the label of entry j (first-axis index, as for any elementwise atom of
    x): the finite-sum samples of ipsa's and klprox's batch_size are data points, not pieces."""
    x = cp.Variable(shape)
    prog, _ = compile_cvxpy(cp.Problem(cp.Minimize(-cp.sum(cp.log_normcdf(x)))), native_atoms=NATIVE)
    (g,) = prog.objective.atoms
    assert g.coef.size == 7 * x.size
    # the row's variable (C-order column of x) and its label agree: label = first-axis index of that entry
    cols = np.array([g.A[r].indices[0] for r in range(g.coef.size)])
    first = np.unravel_index(cols, shape, order="C")[0]
    np.testing.assert_array_equal(g.label, first)
    assert np.all(np.bincount(g.label) == 7 * (x.size // shape[0]))
