"""majorize on models written the way users write them (issue 12 acceptance; docs/majorize.md, "User forms").

Every constrained (and a few unconstrained) CVXPY / Pyomo form below is checked against an independent
reference: CVXPY + Clarabel on the same problem (objective to 1e-7 relative at majorize's default ``tol``, point to
1e-5 at ``tol=1e-12``), CVXPY's own ``violation()`` of the loaded point (at most 1e-8), Pyomo ``value()`` at the
loaded point, and the objective recomputed in numpy at every iterate the callback sees (monotone). Bad inputs must
give an error or a status that names the offending thing.
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import InputDataError, InvalidOptionError, ModelStructureError

RNG = np.random.default_rng(20261125)
N, D, K = 60, 6, 3
X = RNG.normal(size=(N, D))
Y01 = (RNG.random(N) < 1 / (1 + np.exp(-X @ RNG.normal(size=D)))).astype(float)
YPM = 2 * Y01 - 1
LAB = RNG.integers(0, K, N)
YK = np.eye(K)[LAB]
LAM = 0.1
A20 = RNG.normal(size=(20, D))
B20 = np.abs(RNG.normal(size=20)) * 0.2
XS = sp.csr_matrix(X * (np.abs(X) > 0.7))
CLARABEL = {"solver": "CLARABEL", "tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}
REF_OK = ("optimal", "optimal_inaccurate")   # Clarabel near its tight tolerances; the comparisons below decide
FTOL, XTOL, VTOL = 1e-7, 1e-5, 1e-8
NAN_SIDE = np.full(1, np.nan)   # a user's side that is NaN (an array: CVXPY keeps it as a constant)


def softplus(z):
    return np.logaddexp(0.0, z)


def logit_np(w, b=0.0, X=X):
    """The numpy objective of the +-1 form: sum softplus(-y (X w + b)) + LAM ||w||^2."""
    return softplus(-YPM * (X @ w + b)).sum() + LAM * w @ w


def logit(w, b=None, X=X, scale=1.0):
    z = X @ w + (0 if b is None else b)
    return scale * cp.sum(cp.logistic(cp.multiply(-YPM, z))) + LAM * cp.sum_squares(w)


def _values(variables):
    return np.concatenate([np.ravel(v.value, order="F") for v in variables])


def _violation(prob):
    return max([float(np.max(c.violation())) for c in prob.constraints] + [0.0])


def _check_cvxpy(make, monotone=None, **opts):
    """Solve ``make()``'s problem with majorize at the default tol (objective) and at tol=1e-12 (point) and once with
    Clarabel; the loaded point's violation by CVXPY; the numpy objective ``monotone(x)`` at every iterate."""
    prob, variables = make()
    f_ref = prob.solve(**CLARABEL)
    assert prob.status in REF_OK
    x_ref = _values(variables)

    prob, variables = make()
    its = []
    f = prob.solve(method="majorize", callback=lambda k, x, fk: its.append(np.array(x)) and False, **opts)
    assert prob.status == "optimal", prob.varopt_result.message
    assert abs(f - f_ref) <= FTOL * max(1.0, abs(f_ref)), (f, f_ref)
    assert _violation(prob) <= VTOL
    assert abs(prob.objective.value - f) <= 1e-9 * max(1.0, abs(f))      # CVXPY evaluates the loaded point
    if monotone is not None:
        fs = np.array([monotone(x) for x in its])
        assert np.all(np.diff(fs) <= 1e-12 * np.abs(fs[:-1])), fs

    prob, variables = make()
    f = prob.solve(method="majorize", tol=1e-12, **opts)
    assert prob.status == "optimal"
    assert _violation(prob) <= VTOL
    assert np.max(np.abs(_values(variables) - x_ref)) <= XTOL * max(1.0, np.max(np.abs(x_ref)))
    return prob


def _w(cons, start=None, **var):
    def make():
        w = cp.Variable(D, **var)
        if start is not None:
            w.value = start
        return cp.Problem(cp.Minimize(logit(w)), cons(w)), [w]
    return make


def _wb(cons):
    def make():
        w, b = cp.Variable(D), cp.Variable()
        return cp.Problem(cp.Minimize(logit(w, b)), cons(w, b)), [w, b]
    return make


SPARSE_A = sp.random(8, D, density=0.3, random_state=4, format="csr")
SQUARE = RNG.normal(size=(D, D))
DUP = np.ones(D)
ZERO_ROWS = np.zeros((3, D))
ZERO_ROWS[1] = 1.0

# one-variable forms: the callback's x is w itself, so the numpy objective checks monotonicity
W_FORMS = {
    "w >= 0": _w(lambda w: [w >= 0]),
    "Variable(nonneg=True)": _w(lambda w: [], nonneg=True),
    "Variable(bounds=[-0.2, 0.3])": _w(lambda w: [], bounds=[-0.2, 0.3]),
    "Variable(bounds=vectors)": _w(lambda w: [], bounds=[-np.arange(1, D + 1) * 0.1, np.full(D, 0.25)]),
    "w[i] == 0": _w(lambda w: [w[0] == 0, w[3] == 0]),
    "sum(w) == 1": _w(lambda w: [cp.sum(w) == 1]),
    "simplex": _w(lambda w: [cp.sum(w) == 1, w >= 0]),
    "sparse A @ w <= b": _w(lambda w: [SPARSE_A @ w <= 0.05]),
    "lo <= A @ w <= hi": _w(lambda w: [-0.1 <= A20[:4] @ w, A20[:4] @ w <= 0.1]),
    "abs(w) <= u": _w(lambda w: [cp.abs(w) <= 0.2]),
    "abs(w) <= u vector": _w(lambda w: [cp.abs(w) <= np.linspace(0.05, 0.5, D)]),
    "norm_inf(w) <= t": _w(lambda w: [cp.norm_inf(w) <= 0.2]),
    "norm1(w) <= t": _w(lambda w: [cp.norm1(w) <= 0.5]),
    "sum(abs(w)) <= t": _w(lambda w: [cp.sum(cp.abs(w)) <= 0.5]),
    "t >= norm1(w)": _w(lambda w: [0.5 >= cp.norm1(w)]),
    "norm1(A w - 1) <= 1": _w(lambda w: [cp.norm1(A20[:3] @ w - 1) <= 1.0]),
    "norm1 with bounds and a row": _w(lambda w: [cp.norm1(w) <= 0.8, w >= -0.1, cp.sum(w[:3]) == 0.1]),
    "two norm1 constraints": _w(lambda w: [cp.norm1(w[:3]) <= 0.3, cp.norm1(w[3:]) <= 0.2]),
    "weighted abs with a linear term": _w(lambda w: [2 * cp.abs(w[0]) + 3 * cp.abs(w[1]) + w[2] <= 0.5]),
    "redundant rows": _w(lambda w: [w >= 0, w >= -1, cp.sum(w) <= 100, w <= 5]),
    "duplicated rows": _w(lambda w: [DUP @ w <= 0.3, DUP @ w <= 0.3, 2 * DUP @ w <= 0.6,
                                     cp.sum(w) == 0.1, cp.sum(w) == 0.1]),
    "rows with zero coefficients": _w(lambda w: [ZERO_ROWS @ w <= np.array([1.0, 0.2, 0.0])]),
    "equalities: a single point": _w(lambda w: [SQUARE @ w == np.ones(D)]),
    "bounds and a row: a single point": _w(lambda w: [w >= 0, cp.sum(w) <= 0]),
    "lo == hi as two rows": _w(lambda w: [cp.sum(w[:3]) >= 0.2, cp.sum(w[:3]) <= 0.2]),
    "degenerate vertex": _w(lambda w: [w >= 0, cp.sum(w) <= 0, w[0] + w[1] <= 0, w[1] - w[2] <= 0]),
    "chain w[1:] >= w[:-1]": _w(lambda w: [w[1:] >= w[:-1]]),
    "rows scaled by 1e3": _w(lambda w: [1e3 * cp.sum(w) == 1e3, 1e3 * w >= 0]),
    "start infeasible": _w(lambda w: [w >= 0, cp.sum(w) <= 1], start=np.full(D, 5.0)),
    "start far away": _w(lambda w: [w >= 0, cp.sum(w) <= 1], start=np.full(D, 1e6)),
    "start on the boundary": _w(lambda w: [w >= 0, cp.sum(w) <= 1], start=np.r_[1.0, np.zeros(D - 1)]),
    "start feasible": _w(lambda w: [w >= 0, cp.sum(w) <= 1], start=np.full(D, 0.1)),
    "start infeasible, chain rows": _w(lambda w: [w[1:] >= w[:-1] + 0.01], start=np.arange(D)[::-1] * 1.0),
}


@pytest.mark.parametrize("form", list(W_FORMS))
def test_cvxpy_one_variable_forms_equal_clarabel(form):
    _check_cvxpy(W_FORMS[form], monotone=logit_np)


def _split_sums():
    w, b = cp.Variable(D), cp.Variable()
    z = X @ w + b
    pos = YPM > 0
    obj = cp.sum(cp.logistic(-z[pos])) / N + cp.sum(cp.logistic(z[~pos])) / N + LAM * cp.sum_squares(w)
    return cp.Problem(cp.Minimize(obj), [w >= -0.1, cp.sum(w) <= 0.2]), [w, b]


def _zero_one():
    w, b = cp.Variable(D), cp.Variable()
    z = X @ w + b
    return cp.Problem(cp.Minimize(cp.sum(cp.logistic(z)) - Y01 @ z + LAM * cp.sum_squares(w)), [w <= 0.3]), [w, b]


def _sparse_x():
    w = cp.Variable(D)
    return cp.Problem(cp.Minimize(logit(w, X=XS)), [w >= 0]), [w]


def _multinomial(cons, scale=1.0 / N, **var):
    def make():
        W = cp.Variable((D, K), **var)
        Z = X @ W
        obj = cp.sum(cp.log_sum_exp(Z, axis=1)) - cp.sum(cp.multiply(YK, Z)) + 0.5 * cp.sum_squares(W)
        return cp.Problem(cp.Minimize(scale * obj), cons(W)), [W]
    return make


def _maximize():
    w = cp.Variable(D)
    return cp.Problem(cp.Maximize(-logit(w)), [w >= 0, cp.sum(w) <= 1]), [w]


def _norm_inf_variable():
    w, t = cp.Variable(D), cp.Variable()
    return cp.Problem(cp.Minimize(logit(w) + t), [cp.norm_inf(w) <= t]), [w, t]


def _norm1_variable():
    w, t = cp.Variable(D), cp.Variable()
    return cp.Problem(cp.Minimize(logit(w) + t), [t >= cp.norm1(w)]), [w, t]


OTHER_FORMS = {
    "A @ w <= b, 5 rows, intercept": _wb(lambda w, b: [A20[:5] @ w <= B20[:5]]),
    "A @ w <= b, 20 rows, intercept": _wb(lambda w, b: [A20 @ w <= B20]),
    "objective / N split into sums, intercept": _split_sums,
    "0-1 labels, intercept": _zero_one,
    "sparse X": _sparse_x,
    "multinomial W[:, 0] == 0, W >= -1": _multinomial(lambda W: [W[:, 0] == 0, W >= -1]),
    "multinomial sum(W, axis=1) == 0, W <= 0.5": _multinomial(lambda W: [cp.sum(W, axis=1) == 0, W <= 0.5]),
    "multinomial Variable((d, K), bounds=...)": _multinomial(lambda W: [], bounds=[-0.1, 0.2]),
    "multinomial Variable((d, K), nonpos=True)": _multinomial(lambda W: [], nonpos=True),
    "Maximize(-loss)": _maximize,
    "norm_inf(w) <= t, t a variable": _norm_inf_variable,
    "norm1(w) <= t, t a variable": _norm1_variable,
}


@pytest.mark.parametrize("form", list(OTHER_FORMS))
def test_cvxpy_other_forms_equal_clarabel(form):
    _check_cvxpy(OTHER_FORMS[form])


NW, DW = 30, 200
XW = np.random.default_rng(3).normal(size=(NW, DW)) / np.sqrt(DW)
YW = np.sign(np.random.default_rng(4).normal(size=NW))
AW = np.random.default_rng(5).normal(size=(15, DW))


def _wide(cons):
    def make():
        w = cp.Variable(DW)
        obj = cp.sum(cp.logistic(cp.multiply(-YW, XW @ w))) + 0.05 * cp.sum_squares(w)
        return cp.Problem(cp.Minimize(obj), cons(w)), [w]
    return make


WIDE_FORMS = {   # few samples, many parameters: the row-space (Woodbury) steps, bounds-only and dual Newton paths
    "w >= 0": _wide(lambda w: [w >= 0]),
    "w >= 0, sum(w) <= 1": _wide(lambda w: [w >= 0, cp.sum(w) <= 1]),
    "abs(w) <= u and three rows": _wide(lambda w: [cp.abs(w) <= 0.05, cp.sum(w[:50]) <= 0.1, cp.sum(w[50:100]) >= -0.1,
                                                   w[100:150] @ np.ones(50) == 0.2]),
    "15 dense rows and bounds": _wide(lambda w: [AW @ w <= 0.5, w >= -0.03, w <= 0.04]),
    "equality rows and bounds": _wide(lambda w: [AW[:5] @ w == 0.1, w >= -0.1]),
    "simplex": _wide(lambda w: [cp.sum(w) == 1, w >= 0]),
    "every other weight fixed": _wide(lambda w: [w[::2] == 0, cp.sum(w) <= 0.2]),
}


@pytest.mark.parametrize("form", list(WIDE_FORMS))
def test_cvxpy_wide_forms_equal_clarabel(form):
    _check_cvxpy(WIDE_FORMS[form])


def test_parameter_in_a_right_hand_side_resolved():
    """A cp.Parameter on a constraint's side, re-solved at several values (and back): each equals Clarabel."""
    w, p = cp.Variable(D), cp.Parameter(nonneg=True)
    prob = cp.Problem(cp.Minimize(logit(w)), [cp.sum(w) <= p, w >= 0])
    for value in (0.3, 1.0, 0.3, 0.0):
        p.value = value
        f = prob.solve(method="majorize", tol=1e-12)
        x, viol = w.value.copy(), _violation(prob)
        f_ref = prob.solve(**CLARABEL)
        assert abs(f - f_ref) <= FTOL * abs(f_ref) and viol <= VTOL
        assert np.max(np.abs(x - w.value)) <= XTOL


def test_result_objects():
    """prob.status / value / solver_stats / varopt_result agree with each other and with CVXPY's evaluation."""
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(logit(w)), [w >= 0, cp.sum(w) <= 1])
    f = prob.solve(method="majorize")
    r = prob.varopt_result
    assert prob.status == "optimal" and r.status == "optimal" and r.info["constrained"]
    assert f == pytest.approx(prob.value, rel=1e-14) and f == pytest.approx(r.objective, rel=1e-14)
    assert prob.value == pytest.approx(logit_np(w.value), rel=1e-12)
    assert prob.solver_stats.solver_name == "majorize" and prob.solver_stats.num_iters == r.iterations >= 1
    hist = [h["objective"] for h in r.history]
    assert hist[-1] == pytest.approx(f, rel=1e-15) and np.all(np.diff(hist) <= 1e-12 * np.abs(hist[:-1]))
    assert np.array_equal(r.x, w.value)


def test_norm1_callback_and_x0_see_the_users_variables():
    """With norm1(w) <= t lifted to new columns, the callback, x0 and the result hold the user's D variables."""
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(logit(w)), [cp.norm1(w) <= 0.5])
    sizes = []
    prob.solve(method="majorize", x0=np.full(D, 0.01), callback=lambda k, x, f: sizes.append(np.size(x)) and False)
    assert set(sizes) == {D} and prob.varopt_result.x.shape == (D,) and prob.varopt_result.info["abs_columns"] == D
    assert np.abs(w.value).sum() <= 0.5 + 1e-9
    with pytest.raises(InvalidOptionError, match="option 'x0' has length 12, the program has 6 variables"):
        prob.solve(method="majorize", x0=np.zeros(2 * D))


# --- Pyomo: the same models, CVXPY + Clarabel as the reference, Pyomo value() at the loaded point -----------------

def _pyomo(within=pyo.Reals, bounds=None, intercept=False, sense="min", expression=False, softplus_form="log1p"):
    m = pyo.ConcreteModel()
    m.I, m.N = pyo.RangeSet(0, D - 1), pyo.RangeSet(0, N - 1)
    m.w = pyo.Var(m.I, within=within, bounds=bounds)
    if intercept:
        m.b = pyo.Var()

    def margin(m, n):
        return float(YPM[n]) * (sum(float(X[n, j]) * m.w[j] for j in m.I) + (m.b if intercept else 0))
    if expression:
        m.z = pyo.Expression(m.N, rule=margin)
        z = lambda n: m.z[n]
    else:
        z = lambda n: margin(m, n)
    if softplus_form == "log1p":
        loss = sum(pyo.log(1 + pyo.exp(-z(n))) for n in m.N)
    else:
        loss = sum(pyo.log(pyo.exp(0) + pyo.exp(-z(n))) for n in m.N)
    reg = LAM * sum(m.w[j] ** 2 for j in m.I)
    if sense == "min":
        m.obj = pyo.Objective(expr=loss + reg, sense=pyo.minimize)
    else:
        m.obj = pyo.Objective(expr=-(loss + reg), sense=pyo.maximize)
    return m


def _with(build, add):
    def make():
        m = build()
        add(m)
        return m
    return make


def _rows20(m):
    m.R = pyo.RangeSet(0, 19)
    m.rows = pyo.Constraint(m.R, rule=lambda m, i: sum(float(A20[i, j]) * m.w[j] for j in m.I) <= float(B20[i]))


def _range_list(m):
    m.c = pyo.ConstraintList()
    for j in m.I:
        m.c.add(pyo.inequality(-0.2, m.w[j], 0.3))


def _two_sided(m, start=None):
    m.c = pyo.Constraint(range(4), rule=lambda m, i: pyo.inequality(-0.1, sum(float(A20[i, j]) * m.w[j]
                                                                              for j in m.I), 0.1))
    if start is not None:
        for j in m.I:
            m.w[j].value = start


def _fix(m):
    m.w[0].fix(0.1)
    m.w[3].fix(0)


def _fix_eq(m):
    m.w[0].fix(0.1)
    m.e = pyo.Constraint(expr=m.w[3] == 0)


PYOMO_FORMS = {   # name: (model builder, the same problem's CVXPY constraints on (w, b))
    "NonNegativeReals": (lambda: _pyomo(within=pyo.NonNegativeReals), lambda w, b: [w >= 0]),
    "NonNegativeReals, maximize": (lambda: _pyomo(within=pyo.NonNegativeReals, sense="max"), lambda w, b: [w >= 0]),
    "Expression components": (lambda: _pyomo(within=pyo.NonNegativeReals, expression=True), lambda w, b: [w >= 0]),
    "log(exp(0) + exp(.))": (lambda: _pyomo(within=pyo.NonNegativeReals, softplus_form="lse"),
                             lambda w, b: [w >= 0]),
    "indexed Constraint w[j] >= 0": (_with(_pyomo, lambda m: setattr(m, "c", pyo.Constraint(
        m.I, rule=lambda m, j: m.w[j] >= 0))), lambda w, b: [w >= 0]),
    "bounds=(-0.2, 0.3)": (lambda: _pyomo(bounds=(-0.2, 0.3)), lambda w, b: [w >= -0.2, w <= 0.3]),
    "ConstraintList of ranges": (_with(_pyomo, _range_list), lambda w, b: [w >= -0.2, w <= 0.3]),
    "simplex, equality": (_with(lambda: _pyomo(within=pyo.NonNegativeReals), lambda m: setattr(
        m, "s", pyo.Constraint(expr=sum(m.w[j] for j in m.I) == 1))), lambda w, b: [cp.sum(w) == 1, w >= 0]),
    "simplex, maximize": (_with(lambda: _pyomo(within=pyo.NonNegativeReals, sense="max"), lambda m: setattr(
        m, "s", pyo.Constraint(expr=sum(m.w[j] for j in m.I) == 1))), lambda w, b: [cp.sum(w) == 1, w >= 0]),
    "20 indexed rows, intercept": (_with(lambda: _pyomo(intercept=True), _rows20), lambda w, b: [A20 @ w <= B20]),
    "fixed variables": (_with(lambda: _pyomo(bounds=(-0.5, None)), _fix),
                        lambda w, b: [w[0] == 0.1, w[3] == 0, w >= -0.5]),
    "fixed variable and an equality": (_with(lambda: _pyomo(bounds=(-0.5, None)), _fix_eq),
                                       lambda w, b: [w[0] == 0.1, w[3] == 0, w >= -0.5]),
    "abs(w[j]) <= u": (_with(_pyomo, lambda m: setattr(m, "c", pyo.Constraint(
        m.I, rule=lambda m, j: abs(m.w[j]) <= 0.2))), lambda w, b: [cp.abs(w) <= 0.2]),
    "sum(abs(w[j])) <= t": (_with(_pyomo, lambda m: setattr(m, "c", pyo.Constraint(
        expr=sum(abs(m.w[j]) for j in m.I) <= 0.5))), lambda w, b: [cp.norm1(w) <= 0.5]),
    "t >= sum(abs(w[j]))": (_with(_pyomo, lambda m: setattr(m, "c", pyo.Constraint(
        expr=0.5 >= sum(abs(m.w[j]) for j in m.I)))), lambda w, b: [cp.norm1(w) <= 0.5]),
    "two-sided rows": (_with(_pyomo, _two_sided), lambda w, b: [-0.1 <= A20[:4] @ w, A20[:4] @ w <= 0.1]),
    "two-sided rows, infeasible start": (_with(_pyomo, lambda m: _two_sided(m, 5.0)),
                                         lambda w, b: [-0.1 <= A20[:4] @ w, A20[:4] @ w <= 0.1]),
}


def _pyomo_violation(m):
    v = [0.0]
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if c.has_lb():
            v.append(pyo.value(c.lower) - body)
        if c.has_ub():
            v.append(body - pyo.value(c.upper))
    for x in m.component_data_objects(pyo.Var):
        if x.lb is not None:
            v.append(x.lb - x.value)
        if x.ub is not None:
            v.append(x.value - x.ub)
    return max(v)


@pytest.mark.parametrize("form", list(PYOMO_FORMS))
def test_pyomo_forms_equal_clarabel(form):
    build, cons = PYOMO_FORMS[form]
    probe = build()
    intercept = hasattr(probe, "b")
    w, b = cp.Variable(D), cp.Variable()
    ref = cp.Problem(cp.Minimize(logit(w, b if intercept else None)), cons(w, b))
    f_ref = ref.solve(**CLARABEL)
    for tol in (None, 1e-12):
        m = build()
        res = pyo.SolverFactory("majorize").solve(m, **({} if tol is None else {"tol": tol}))
        assert res.solver.termination_condition == pyo.TerminationCondition.optimal
        assert res.solver.status == pyo.SolverStatus.ok
        f = pyo.value(m.obj)   # the user's sense: maximised forms hold -f_ref
        assert abs(abs(f) - f_ref) <= FTOL * abs(f_ref)
        assert abs(f - res.varopt_result.objective) <= 1e-9 * abs(f)
        assert _pyomo_violation(m) <= VTOL
        if tol is not None:
            x = np.array([pyo.value(m.w[j]) for j in m.I])
            assert np.max(np.abs(x - w.value)) <= XTOL


# --- a latent (non-convex) likelihood with a bound and a row ------------------------------------------------------

def test_pyomo_latent_likelihood_with_bounds_and_a_row():
    """Section 4's latent likelihood (maximised, Pyomo) with box bounds on theta and sum(nu) == 0: every iterate the
    callback sees is feasible and the numpy negative log-likelihood decreases; the point is a constrained stationary
    point (scipy's trust-constr from it finds nothing lower)."""
    from scipy.optimize import Bounds, LinearConstraint, minimize

    from varopt.formulations.latent_likelihood import build_pyomo
    rng = np.random.default_rng(0)
    Xl = rng.normal(size=(30, 2))
    yl = (Xl[:, 0] * Xl[:, 1] > 0).astype(int)
    M, C, d, lam = 2, 2, 2, 0.1
    nth = C * M * d

    def negll(z):
        th, nu = z[:nth].reshape(C, M, d), z[nth:].reshape(C, M)
        S = np.einsum("jd,ckd->jck", Xl, th) + nu[None]
        return -(logsumexp(S[np.arange(len(yl)), yl], axis=1) - logsumexp(S.reshape(len(yl), -1), axis=1)).sum() \
            + lam / 2 * z @ z
    mdl = build_pyomo(Xl, yl, M, lam=lam)
    vs = list(mdl.theta.values()) + list(mdl.nu.values())
    for v, val in zip(vs, rng.normal(size=len(vs)) * 0.1):
        v.set_value(float(val))
    for v in mdl.theta.values():
        v.setlb(-0.5)
        v.setub(0.5)
    mdl.row = pyo.Constraint(expr=sum(mdl.nu.values()) == 0)
    its = []
    res = pyo.SolverFactory("majorize").solve(mdl, tol=1e-12, max_iter=2000,
                                              callback=lambda k, x, f: its.append(np.array(x)) and False)
    assert res.solver.termination_condition == pyo.TerminationCondition.locallyOptimal
    z = np.array([pyo.value(v) for v in vs])
    assert pyo.value(mdl.obj) == pytest.approx(-negll(z), rel=1e-12)
    fs = np.array([negll(x) for x in its])
    assert len(fs) > 5 and np.all(np.diff(fs) <= 1e-12 * np.abs(fs[:-1]))
    assert all(np.abs(x[:nth]).max() <= 0.5 and abs(x[nth:].sum()) <= 1e-9 for x in its)
    lb = np.r_[np.full(nth, -0.5), np.full(C * M, -np.inf)]
    ref = minimize(negll, z, method="trust-constr", bounds=Bounds(lb, -lb),
                   constraints=[LinearConstraint(np.r_[np.zeros(nth), np.ones(C * M)][None], 0, 0)],
                   options={"gtol": 1e-12, "xtol": 1e-14, "maxiter": 3000})
    assert ref.fun >= negll(z) - 1e-7 and np.max(np.abs(ref.x - z)) <= 1e-3


# --- bad inputs: an error or a status naming the thing ------------------------------------------------------------

def _bad(cons=(), X=X, y=YPM, extra=0):
    w = cp.Variable(D)
    return cp.Problem(cp.Minimize(cp.sum(cp.logistic(cp.multiply(-y, X @ w))) + LAM * cp.sum_squares(w) + extra),
                      cons(w) if callable(cons) else list(cons)), w


@pytest.mark.parametrize("cons", [lambda w: [w[0] >= 1, w[0] <= 0], lambda w: [cp.sum(w) == 1, w <= 0],
                                  lambda w: [w[0] + w[1] == 1, w[0] + w[1] == 2],
                                  lambda w: [w[0] + w[1] == 1, w[1] + w[2] == 1, w[0] - w[2] == 1],
                                  lambda w: [cp.norm1(w) <= -1]],
                         ids=["bounds", "sum == 1, w <= 0", "inconsistent equalities", "three equalities", "norm1 < 0"])
def test_infeasible_constraints_are_reported(cons):
    prob, _ = _bad(cons)
    prob.solve(method="majorize")
    assert prob.status == "infeasible" and prob.value == np.inf
    assert prob.varopt_result.message == "the linear constraints and bounds are infeasible"


def test_infeasible_pyomo_reported():
    m = _pyomo()
    m.c1 = pyo.Constraint(expr=m.w[0] >= 1)
    m.c2 = pyo.Constraint(expr=m.w[0] <= 0)
    res = pyo.SolverFactory("majorize").solve(m)
    assert res.solver.termination_condition == pyo.TerminationCondition.infeasible
    assert "infeasible" in res.solver.message


def _with_nan(a, idx, value=np.nan):
    a = np.array(a, dtype=float)
    a[idx] = value
    return a


@pytest.mark.parametrize("make, match", [
    (lambda: _bad(lambda w: [w >= 0], X=_with_nan(X, (3, 2))), r"objective: constant .* contains NaN \(first at index \(3, 2\)\)"),
    (lambda: _bad(lambda w: [w >= 0], X=_with_nan(X, (3, 2), np.inf)), r"contains inf \(first at index \(3, 2\)\)"),
    (lambda: _bad(lambda w: [w >= 0], y=_with_nan(YPM, 0)), r"objective: constant .* contains NaN"),
    (lambda: _bad(lambda w: [_with_nan(np.ones(D), 2) @ w <= 1]), r"constraint 0 .* contains NaN"),
    (lambda: _bad(lambda w: [cp.sum(w) <= NAN_SIDE]), r"constraint 0 .* contains NaN"),
    (lambda: _bad(lambda w: [w <= _with_nan(np.ones(D), 0)]), r"constraint 0 .* contains NaN"),
], ids=["NaN in X", "inf in X", "NaN in y", "NaN in a row", "NaN side", "NaN bound"])
def test_nan_and_inf_data_named(make, match):
    prob, _ = make()
    with pytest.raises(InputDataError, match=match):
        prob.solve(method="majorize")


def test_pyomo_nan_bound_named():
    m = _pyomo()
    m.w[0].setub(float("nan"))
    with pytest.raises(InputDataError, match=r"variable 'w\[0\]': invalid bound"):
        pyo.SolverFactory("majorize").solve(m)


def test_unbounded_objective_reported():
    """A linear term on a variable with no curvature and no bound that way: the step QP is unbounded."""
    u = cp.Variable(2)
    prob, _ = _bad(lambda w: [w >= 0, u[0] + u[1] <= 5], extra=u[0] - u[1])
    prob.solve(method="majorize")
    assert prob.status == "unbounded" and prob.value == -np.inf
    assert "unbounded below over the constraints" in prob.varopt_result.message
    m = _pyomo()
    m.u = pyo.Var()
    m.obj.expr = m.obj.expr + m.u
    m.c = pyo.Constraint(expr=m.u <= 3)
    res = pyo.SolverFactory("majorize").solve(m)
    assert res.solver.termination_condition == pyo.TerminationCondition.unbounded


@pytest.mark.parametrize("cons, match", [
    (lambda w: [cp.sum_squares(w) >= 1], "constraint 'c0' is nonlinear"),
    (lambda w: [cp.sum_squares(w) <= 1], "constraint 'c0' is nonlinear"),
    (lambda w: [cp.norm1(w) >= 1], r"constraint c0: majorize needs smooth terms and abs\(\.\.\.\)"),
], ids=["nonconvex quadratic", "convex quadratic", "norm1 >= 1"])
def test_unsupported_constraints_named(cons, match):
    prob, _ = _bad(cons)
    with pytest.raises(ModelStructureError, match=match):
        prob.solve(method="majorize")


def test_unsupported_atoms_named():
    w = cp.Variable(D)
    # (huber is an epigraph column with a square row, which majorize takes: tests/test_cvxpy_epigraph.py)
    with pytest.raises(ModelStructureError, match="the atom `cumprod` is not supported"):
        cp.Problem(cp.Minimize(logit(w) + cp.sum(cp.cumprod(w)))).solve(method="majorize")
    with pytest.raises(ModelStructureError, match="'xlogx' atom"):
        cp.Problem(cp.Minimize(logit(w) - cp.sum(cp.entr(w))), [w >= 0]).solve(method="majorize")
    with pytest.raises(ModelStructureError, match="concave quadratic"):
        cp.Problem(cp.Maximize(logit(w)), [w >= 0]).solve(method="majorize")


@pytest.mark.parametrize("opts, match", [
    ({"tol": -1}, "option 'tol': must be positive"),
    ({"tol": np.nan}, "option 'tol' must not be NaN"),
    ({"max_iter": 0}, "option 'max_iter': must be positive"),
    ({"bound_reuse": "x"}, "option 'bound_reuse': invalid value 'x'"),
    ({"bound_reuse": -1}, "option 'bound_reuse': invalid value -1"),
    ({"tolerance": 1e-3}, "unknown option 'tolerance'"),
    ({"x0": np.zeros(3)}, "option 'x0' has length 3, the program has 6 variables"),
])
def test_bad_options_named(opts, match):
    prob, _ = _bad(lambda w: [w >= 0, cp.sum(w) <= 1])
    with pytest.raises(InvalidOptionError, match=match):
        prob.solve(method="majorize", **opts)


def test_active_set_warm_start_never_holds_an_infinite_side():
    """A column at its finite lower bound whose dual from the general layer is a rounding-size negative number
    (HiGHS answers -1e-17 for 0) was seeded as 'held at its upper bound' +inf (|x - inf| <= tol * inf holds), every
    later fast solve then met NaN and declined, so each step went to HiGHS again. Infinite sides are never held."""
    from varopt.lpqp.active_set import ActiveSetQP
    from varopt.lpqp.result import LPResult
    rng = np.random.default_rng(1)
    n = 4
    M = rng.normal(size=(n, n))
    Q = M @ M.T + np.eye(n)
    A = np.ones((1, n))
    rlo, rhi = np.array([-np.inf]), np.array([1.0])
    lb, ub = np.zeros(n), np.full(n, np.inf)
    qp = ActiveSetQP(A)
    x = np.array([0.0, 0.2, 0.3, 0.1])
    qp.seed(LPResult("optimal", x=x, row_duals=np.array([-1e-17]), col_duals=np.array([-1e-17, 0, 0, 0])),
            rlo, rhi, lb, ub)
    assert qp.cols == {} and qp.rows == {}
    qp.rows, qp.cols = {0: -1}, {0: -1}      # a working set that names the infinite sides must be dropped at the start
    c = -Q @ np.array([0.1, 0.2, 0.3, 0.1])
    res = qp.solve(Q, c, rlo, rhi, lb, ub, np.zeros(n))
    assert res is not None and np.allclose(res.x, [0.1, 0.2, 0.3, 0.1], atol=1e-9)


@pytest.mark.parametrize("form", ["norm1(w) <= t", "norm1(A w - 1) <= 1", "weighted abs with a linear term",
                                  "duplicated rows", "norm1 with bounds and a row"])
def test_flat_columns_and_duplicated_rows_take_the_fast_path(form):
    """norm1's columns s >= |w| have no curvature and duplicated rows are dependent when held: every step QP is
    answered by the active set (it fell back to HiGHS on every step: 5-16 HiGHS QPs per solve). ``bound_reuse=0``:
    a step QP at every iteration (with the trials on the held rows' null space, docs/majorize.md section 2b, these
    forms take few or no step QPs)."""
    prob, _ = W_FORMS[form]()
    prob.solve(method="majorize", tol=1e-12, bound_reuse=0)
    st = prob.varopt_result.info["step_qp"]
    assert st["fallback"] == 0 and st["active_set"] >= 1


def test_t_in_norm_inf_takes_the_fast_path():
    prob, _ = OTHER_FORMS["norm_inf(w) <= t, t a variable"]()
    prob.solve(method="majorize", tol=1e-12)
    st = prob.varopt_result.info["step_qp"]
    assert st["fallback"] == 0 and st["active_set"] >= 1


def test_norm1_interrupted_run_returns_the_users_variables():
    """Ctrl-C (a KeyboardInterrupt in the callback) returns the last iterate: the user's D variables, feasible."""
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(logit(w)), [cp.norm1(w) <= 0.5])

    def stop(k, x, f):
        if k >= 2:
            raise KeyboardInterrupt
    prob.solve(method="majorize", callback=stop)
    assert prob.varopt_result.status == "interrupted" and prob.varopt_result.x.shape == (D,)
    assert np.abs(w.value).sum() <= 0.5 + 1e-9
