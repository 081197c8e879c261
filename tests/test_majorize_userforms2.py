"""majorize on more models written the way users write them (bug hunt, branch hunta; docs/majorize.md).

Each test reproduces a failure found with a user-style model and checks the fixed behaviour against an independent
reference (CVXPY + Clarabel, CVXPY's own evaluation of the loaded point).
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import InvalidOptionError

RNG = np.random.default_rng(20261125)
N, D = 40, 4
X = RNG.normal(size=(N, D))
YPM = np.where(RNG.random(N) < 0.5, -1.0, 1.0)
CLARABEL = {"solver": "CLARABEL", "tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def _logit(w):
    return cp.sum(cp.logistic(-cp.multiply(YPM, X @ w))) + cp.sum_squares(w)


def test_duals_of_an_earlier_solve_by_another_solver_are_cleared():
    """A user compares solvers on one problem: after majorize, ``dual_value`` held Clarabel's multipliers of the
    previous solve (varopt returns none), so they looked like majorize's own."""
    w = cp.Variable(D)
    cons = [w >= 0, cp.sum(w) <= 0.3]
    prob = cp.Problem(cp.Minimize(_logit(w)), cons)
    f_ref = prob.solve(**CLARABEL)
    assert all(c.dual_value is not None for c in cons)
    f = prob.solve(method="majorize", tol=1e-12)
    assert abs(f - f_ref) <= 1e-9 * abs(f_ref)
    assert all(c.dual_value is None for c in cons)


def _pyomo_logit():
    m = pyo.ConcreteModel()
    m.J = pyo.RangeSet(0, D - 1)
    m.w = pyo.Var(m.J)
    m.obj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-float(YPM[i]) * sum(float(X[i, j]) * m.w[j] for j in m.J)))
                                   for i in range(N)) + sum(m.w[j] ** 2 for j in m.J))
    return m


@pytest.mark.parametrize("name", ["majorize", "klprox"])
def test_pyomo_timelimit_keyword_is_the_time_limit(name):
    """``solve(m, timelimit=...)`` is Pyomo's own keyword (OptSolver.solve; CBC, CPLEX, GLPK honour it): it was
    'unknown option'. It is the solver's ``time_limit``; None is no limit; both names at once are an error."""
    m = _pyomo_logit()
    res = pyo.SolverFactory(name).solve(m, timelimit=1e-9)
    assert res.solver.termination_condition == pyo.TerminationCondition.maxTimeLimit
    assert res.varopt_result.status == "time_limit"
    res = pyo.SolverFactory(name).solve(m, timelimit=None)
    assert res.varopt_result.status in ("optimal", "converged")
    with pytest.raises(InvalidOptionError, match="'timelimit' .* and 'time_limit' are the same option"):
        pyo.SolverFactory(name).solve(m, timelimit=1.0, time_limit=2.0)
    with pytest.raises(InvalidOptionError, match="option 'time_limit': must be positive"):
        pyo.SolverFactory(name).solve(m, timelimit=-1)


def test_logistic_estimator_stopped_at_its_iteration_limit_warns():
    """``MajorizeLogisticRegression(max_iter=2).fit`` returned the unconverged coefficients silently; scikit-learn's
    solvers (and varopt's klprox estimators) warn with a ConvergenceWarning and keep the last iterate."""
    from varopt.estimators.base import ConvergenceWarning
    from varopt.estimators.logistic import MajorizeLogisticRegression
    y = (YPM > 0).astype(int)
    with pytest.warns(ConvergenceWarning, match=r"majorize stopped at a limit .*iteration_limit"):
        est = MajorizeLogisticRegression(max_iter=2).fit(X, y)
    assert est.result_.status == "iteration_limit" and np.all(np.isfinite(est.coef_))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        MajorizeLogisticRegression().fit(X, y)


@pytest.mark.parametrize("make", ["majorize", "klprox"])
def test_estimator_fit_intercept_must_be_a_boolean(make):
    """``fit_intercept='False'`` (a string from a config file) is truthy: the fit had an intercept, silently."""
    from varopt.errors import InputDataError
    from varopt.estimators import BayesianLogisticRegression
    from varopt.estimators.logistic import MajorizeLogisticRegression
    cls = MajorizeLogisticRegression if make == "majorize" else BayesianLogisticRegression
    y = (YPM > 0).astype(int)
    with pytest.raises(InputDataError, match="fit_intercept must be True or False, got 'False'"):
        cls(fit_intercept="False").fit(X, y)
    assert cls(fit_intercept=np.bool_(False)).fit(X, y).intercept_ == 0.0


def test_cvxpy_log_of_a_sum_of_exponentials_equals_clarabel_on_the_logistic_form():
    """``cp.log(1 + cp.exp(z))`` and ``cp.log(cp.sum(cp.exp(u)))`` per sample were rejected ('must be affine'); they
    are log-sum-exp groups: majorize equals Clarabel on the same model written with cp.logistic / cp.log_sum_exp."""
    w = cp.Variable(D)
    z = -cp.multiply(YPM, X @ w)
    ref = cp.Problem(cp.Minimize(cp.sum(cp.logistic(z)) + cp.sum_squares(w)), [w >= 0, cp.sum(w) <= 0.3])
    f_ref, w_ref = ref.solve(**CLARABEL), w.value.copy()
    prob = cp.Problem(cp.Minimize(cp.sum(cp.log(1 + cp.exp(z))) + cp.sum_squares(w)), [w >= 0, cp.sum(w) <= 0.3])
    f = prob.solve(method="majorize", tol=1e-12)
    assert prob.status == "optimal" and abs(f - f_ref) <= 1e-9 * abs(f_ref)
    assert np.max(np.abs(w.value - w_ref)) <= 1e-6
    K = 3
    lab = np.arange(N) % K
    W = cp.Variable((D, K))
    Z = X @ W
    picked = sum(Z[i, lab[i]] for i in range(N))
    ref = cp.Problem(cp.Minimize(cp.sum(cp.log_sum_exp(Z, axis=1)) - picked + cp.sum_squares(W)), [W >= -0.2])
    f_ref = ref.solve(**CLARABEL)
    prob = cp.Problem(cp.Minimize(sum(cp.log(cp.sum(cp.exp(Z[i, :]))) for i in range(N)) - picked
                                  + cp.sum_squares(W)), [W >= -0.2])
    f = prob.solve(method="majorize", tol=1e-12)
    assert prob.status == "optimal" and abs(f - f_ref) <= 1e-9 * abs(f_ref)


def test_infinite_current_value_is_named_as_the_variable_not_x0():
    """``w.value = [inf, 0, ...]`` left by a user was reported as "starting point x0 contains inf" (no x0 was
    passed); the message names the variable entry and says what to do."""
    from varopt.errors import InputDataError
    if tuple(int(p) for p in cp.__version__.split(".")[:2]) < (1, 9):
        pytest.skip("CVXPY < 1.9 refuses a non-finite Variable.value itself (ValueError: Variable value must be real)")
    w = cp.Variable(D, name="w")
    w.value = np.r_[np.inf, np.zeros(D - 1)]
    prob = cp.Problem(cp.Minimize(_logit(w)), [w <= 1])
    with pytest.raises(InputDataError, match=r"current values\) is inf at 'w\[0\]'.*pass option x0"):
        prob.solve(method="majorize")
    f = prob.solve(method="majorize", x0=np.zeros(D))
    assert prob.status == "optimal" and abs(f - cp.Problem(cp.Minimize(_logit(w)), [w <= 1]).solve(**CLARABEL)) <= 1e-7 * f
