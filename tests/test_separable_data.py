"""No 'optimal' where no minimizer exists: logistic models without penalty on separable data.

Unpenalized binary logistic regression on linearly separable data (scikit-learn's full breast cancer set; a small
synthetic set; a quasi-separable 1-d set with a tie) has no minimizer (the infimum 0 is approached as ||w|| -> inf;
Albert and Anderson 1984). majorize and proxsg must say so (status ``numerical`` with "not attained", the last iterate
loaded; docs/majorize.md "Separable data") through CVXPY, Pyomo and the estimator (a ConvergenceWarning naming the
separation). Separability is decided independently by scipy's ``linprog`` (``y_i (x_i^T w + b) >= 1`` feasible), and
the direction the solver reports is checked on the data. Non-separable data (one flipped label) and penalized models
must still be ``optimal`` / ``converged`` with Clarabel's answer, the check having found the minimum attained.
"""
import warnings

import numpy as np
import pytest
import scipy.optimize as so

cp = pytest.importorskip("cvxpy")
pe = pytest.importorskip("pyomo.environ")
sklearn = pytest.importorskip("sklearn")
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

import varopt  # noqa: F401
from varopt.estimators import MajorizeLogisticRegression
from varopt.formulations.logistic import logistic_program
from varopt.registry import get_solver
from varopt.solvers.majorize.model import MajorizeModel
from varopt.solvers.majorize.recession import attained_certificate, recession_direction


def _bc():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), 2 * y - 1


def _synthetic(flip=False):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 3))
    s = X @ np.array([1.0, -2.0, 0.5]) + 0.3
    y = np.where(s > 0, 1, -1)
    if flip:   # the sample deepest in class +1 labelled -1: no longer separable
        y[np.argmax(s)] = -1
    return X, y


def separable(X, y):
    """Independent reference: is ``y_i (x_i^T w + b) >= 1`` feasible? (scipy's HiGHS, not varopt's LP layer)."""
    A = -(y[:, None] * np.hstack([X, np.ones((X.shape[0], 1))]))
    r = so.linprog(np.zeros(X.shape[1] + 1), A_ub=A, b_ub=-np.ones(X.shape[0]), bounds=(None, None),
                   method="highs")
    assert r.status in (0, 2)
    return r.status == 0


def _check_direction(X, y, v):
    """The reported direction weakly separates the data, strictly for some samples (checked on the data)."""
    m = y * (X @ v[:-1] + v[-1])
    scale = np.abs(X).sum(axis=1).max()
    assert m.min() >= -1e-8 * scale and m.max() > 1e-3


def _cvxpy(X, y, lam=0.0, l1=False):
    w, b = cp.Variable(X.shape[1]), cp.Variable()
    loss = cp.sum(cp.logistic(-cp.multiply(y, X @ w + b))) / X.shape[0]
    pen = 0 if lam == 0 else (lam * cp.norm1(w) if l1 else lam * cp.sum_squares(w))
    return cp.Problem(cp.Minimize(loss + pen)), w, b


def _not_attained(res):
    return (res.status == "numerical" and "not attained" in res.message
            and res.info["attainment"]["verdict"] == "not_attained")


@pytest.mark.parametrize("data", ["bc", "synthetic"])
def test_cvxpy_majorize_separable_not_optimal(data):
    X, y = _bc() if data == "bc" else _synthetic()
    assert separable(X, y)
    prob, w, b = _cvxpy(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CVXPY's "may be inaccurate" for user_limit
        prob.solve(method="majorize")
    res = prob.varopt_result
    assert prob.status == "user_limit" and _not_attained(res), (prob.status, res.status, res.message)
    assert w.value is not None and np.allclose(w.value, res.x[:-1])   # the last iterate is loaded
    _check_direction(X, y, res.info["attainment"]["direction"])
    # the last iterate separates the training data (it approaches the infimum 0)
    assert (y * (X @ w.value + b.value) > 0).all()


def test_cvxpy_majorize_option_off_keeps_old_answer():
    """check_attained=False is the solver without the check: it claims 'optimal' here (what the check prevents)."""
    X, y = _synthetic()
    prob, _, _ = _cvxpy(X, y)
    prob.solve(method="majorize", check_attained=False)
    assert prob.status == "optimal" and "attainment" not in prob.varopt_result.info


def test_quasi_separable_tie():
    """Quasi-complete separation: w x >= 0 on every sample with ties at x = 0 (two samples of both classes):
    still no minimizer (w -> inf); flipping the outer labels makes it attained."""
    x = np.array([[-2.0], [-1.0], [0.0], [0.0], [1.0], [2.0]])
    y = np.array([0, 0, 0, 1, 1, 1])
    assert not separable(x, 2 * y - 1)     # not completely separable ...
    res = get_solver("majorize").solve(logistic_program(x, y, 0.0, True))
    assert _not_attained(res), (res.status, res.message)
    v = res.info["attainment"]["direction"]
    _check_direction(x, 2 * y - 1, v)      # ... but quasi-separable
    y2 = np.array([0, 1, 0, 1, 0, 1])
    res = get_solver("majorize").solve(logistic_program(x, y2, 0.0, True))
    assert res.status == "optimal" and res.info["attainment"]["verdict"] == "attained"


def test_pyomo_majorize_bc_not_optimal():
    X, y = _bc()
    n, d = X.shape
    m = pe.ConcreteModel()
    m.J = pe.RangeSet(0, d - 1)
    m.w = pe.Var(m.J)
    m.b = pe.Var()
    m.obj = pe.Objective(expr=sum(pe.log(1 + pe.exp(-float(y[i]) * (sum(float(X[i, j]) * m.w[j] for j in range(d))
                                                                    + m.b))) for i in range(n)))
    r = pe.SolverFactory("majorize").solve(m)
    assert not pe.check_optimal_termination(r)
    assert str(r.solver.termination_condition) == "other" and "not attained" in r.solver.message
    wv = np.array([pe.value(m.w[j]) for j in range(d)])
    assert (y * (X @ wv + pe.value(m.b)) > 0).all()     # the last iterate, loaded
    _check_direction(X, y, r.varopt_result.info["attainment"]["direction"])


@pytest.mark.parametrize("data", ["bc", "synthetic"])
def test_estimator_separable_warns(data):
    X, y = _bc() if data == "bc" else _synthetic()
    with pytest.warns(ConvergenceWarning, match="separable"):
        est = MajorizeLogisticRegression(C=np.inf).fit(X, y)
    assert est.result_.status == "numerical" and (est.predict(X) == y).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # C < inf: a minimizer exists, no warning
        est = MajorizeLogisticRegression(C=1.0).fit(X, y)
    assert est.result_.status == "optimal"


def test_multinomial_iris_unpenalized():
    """Iris: setosa is linearly separable from the rest, so the unpenalized multinomial likelihood has no
    maximizer; with a ridge it has one (Clarabel's objective)."""
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    res = get_solver("majorize").solve(logistic_program(X, y, 0.0, True))
    assert _not_attained(res), (res.status, res.message)
    v = res.info["attainment"]["direction"]
    K, d = 3, X.shape[1]
    Z = X @ v[:K * d].reshape(K, d).T + v[K * d:]       # class scores along v
    gap = Z.max(axis=1) - Z[np.arange(len(y)), y]
    assert gap.max() <= 1e-8 * np.abs(Z).max()          # no sample's true class falls behind along v ...
    assert (Z.max(axis=1)[:, None] - Z > 1e-3).any()     # ... and some class strictly falls behind
    lam = 0.1
    res = get_solver("majorize").solve(logistic_program(X, y, lam, True))
    W, B = cp.Variable((K, d)), cp.Variable(K)
    S = X @ W.T + np.ones((len(y), 1)) @ B[None, :]
    Y = np.eye(K)[y]
    prob = cp.Problem(cp.Minimize(cp.sum(cp.log_sum_exp(S, axis=1)) - cp.sum(cp.multiply(Y, S))
                                  + lam / 2 * cp.sum_squares(W)))
    prob.solve(solver=cp.CLARABEL)
    assert res.status == "optimal" and res.info["attainment"]["verdict"] == "attained"
    assert abs(res.objective - prob.value) <= 1e-6 * max(1.0, abs(prob.value))


@pytest.mark.parametrize("case", ["flipped", "ridge", "l1"])
def test_minimizer_exists_still_optimal(case):
    """Non-separable data (one flipped label) without penalty, and penalized separable data: 'optimal' with Clarabel's
    answer, the check run and finding the minimum attained."""
    X, y = _synthetic(flip=True) if case == "flipped" else _bc()
    if case == "flipped":
        assert not separable(X, y)
    lam = {"flipped": 0.0, "ridge": 1e-3, "l1": 0.01}[case]
    prob, _, _ = _cvxpy(X, y, lam, l1=case == "l1")
    ref = prob.solve(solver=cp.CLARABEL)
    prob.solve(method="majorize")
    res = prob.varopt_result
    assert prob.status == "optimal" and res.info["attainment"]["verdict"] == "attained", res.message
    assert abs(res.objective - ref) <= 1e-6 * max(1.0, abs(ref))
    prob.solve(method="proxsg", variant="PN")
    res = prob.varopt_result
    assert res.status == "converged" and res.info["attainment"]["verdict"] == "attained", res.message
    assert abs(res.objective - ref) <= 1e-6 * max(1.0, abs(ref))


@pytest.mark.parametrize("variant", ["PN", "PA"])
def test_proxsg_separable_not_converged(variant):
    X, y = _bc()
    prob, _, _ = _cvxpy(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prob.solve(method="proxsg", variant=variant)
    res = prob.varopt_result
    # PA may also stop at its iteration limit: then the message says why it could not converge
    assert prob.status == "user_limit" and res.status in ("numerical", "iteration_limit"), res.status
    assert "not attained" in res.message and res.info["attainment"]["verdict"] == "not_attained"
    _check_direction(X, y, res.info["attainment"]["direction"])


def test_certificate_agrees_with_lp():
    """The dual certificate (no LP) never contradicts the LP: on random data sets from separable to overlapping,
    whenever the certificate says 'attained' the LP finds no direction, and separable sets (scipy's LP) always
    get a direction."""
    rng = np.random.default_rng(11)
    seen = {"cert": 0, "lp_dir": 0}
    for trial in range(30):
        n, d = int(rng.integers(8, 40)), int(rng.integers(1, 5))
        X = rng.normal(size=(n, d))
        noise = [0.0, 0.3, 2.0][trial % 3]
        y = np.where(X @ rng.normal(size=d) + noise * rng.normal(size=n) > 0, 1, 0)
        if y.min() == y.max():
            continue
        prog = logistic_program(X, y, 0.0, True)
        res = get_solver("majorize").solve(prog, check_attained=False, max_iter=300)
        model = MajorizeModel(prog)
        cert = attained_certificate(*model.pos[:4], model.c, res.x, model.Hd > 0)
        rec = recession_direction(model)
        sep = separable(X, 2 * y - 1)
        if sep:
            assert rec is not None and rec.kind == "not_attained"
        if cert:
            seen["cert"] += 1
            assert rec is None
        if rec is not None:
            seen["lp_dir"] += 1
            _check_direction(X, 2 * y - 1, rec.v)
    assert seen["cert"] >= 5 and seen["lp_dir"] >= 5, seen
