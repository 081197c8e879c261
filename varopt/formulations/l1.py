"""On-line L1-regularised learning (thesis §2.5): models and scikit-learn-style estimators.

Objective (per-example average loss plus L1 penalty, ``alpha = lambda/n`` of eq. 2.56)::

    F(w, b) = (1/n) sum_i loss_i(w, b) + alpha ||w||_1
    squared:  loss_i = (y_i - a_i^T w - b)^2 / 2                          (2.54-2.56)
    logistic: loss_i = log(1 + exp(-y_i (a_i^T w + b))),  y_i in {-1, +1}  (2.72-2.74)

Two smooth constrained forms (§2.5.4):

* ``form='split'``: ``w = w+ - w-`` with ``w+, w- >= 0`` and penalty ``alpha 1^T (w+ + w-)`` (2.61):
  bound constraints only, so an IPSA step costs O(m) (diagonal reduced system 2.62-2.63);
* ``form='box'``: auxiliary ``u`` with ``-u <= w <= u`` and penalty ``alpha 1^T u`` (2.64):
  2m linear rows, a 2x2 block per feature in (2.65), also O(m) per step.

Builders: ``*_pyomo`` (Pyomo ``ConcreteModel``), ``*_cvxpy`` (``cvxpy.Problem``) and
``*_program`` (a :class:`~varopt.program.Program` straight from arrays, for large or sparse
data). Each sample is one row of a ``square`` atom group (least squares) or one group of a
log-sum-exp group with entries ``{0, -y_i(a_i^T w + b)}`` (logistic), so the IPSA finite-sum
oracle sees the samples. The intercept ``b`` is free and not penalised.

Estimators :class:`L1LeastSquares` and :class:`L1LogisticRegression` fit with the ``ipsa`` solver
(``fit``: passes over the data until the training objective stops improving, or exactly ``passes``
on-line passes; ``partial_fit``: one on-line pass over new examples, continuing the step-size counter
and the primal-dual state).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError
from ..program import AtomGroup, Constraint, Expression, LseGroup, Program

FORMS = ("split", "box")


def _check_X(X, name="X"):
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=float)
        if not np.all(np.isfinite(X.data)):
            raise InputDataError(f"{name} contains NaN or inf")
        return X
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise InputDataError(f"{name} must be a 2-d array, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise InputDataError(f"{name} contains NaN or inf")
    return X


def _check_y(y, n, name="y"):
    y = np.asarray(y, dtype=float).ravel()
    if y.size != n:
        raise InputDataError(f"{name} has {y.size} entries, X has {n} rows")
    if not np.all(np.isfinite(y)):
        raise InputDataError(f"{name} contains NaN or inf")
    return y


def _inputs(X, y, alpha, form, pm1=False):
    """Validated ``(X, y, alpha)`` of the L1 builders (``y`` in {-1, +1} when ``pm1``; ``X`` dense or sparse)."""
    _check_form(form)
    X = _check_X(X)
    y = _check_y(y, X.shape[0])
    return X, (_labels_pm1(y) if pm1 else y), _check_alpha(alpha)


def _check_form(form):
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")


def _check_alpha(alpha):
    alpha = float(alpha)
    if not np.isfinite(alpha) or alpha < 0:
        raise InputDataError(f"alpha must be finite and >= 0, got {alpha}")
    return alpha


# --- layout of the variables ---------------------------------------------------------------
def variable_layout(m, form, fit_intercept):
    """Names and bounds: split -> (w+_j, w-_j, [b]); box -> (w_j, u_j, [b])."""
    if form == "split":
        names = [f"wp[{j}]" for j in range(m)] + [f"wm[{j}]" for j in range(m)]
        lb = np.zeros(2 * m)
    else:
        names = [f"w[{j}]" for j in range(m)] + [f"u[{j}]" for j in range(m)]
        lb = np.full(2 * m, -np.inf)
    if fit_intercept:
        names.append("b")
        lb = np.append(lb, -np.inf)
    return names, lb, np.full(lb.size, np.inf)


def weights_from_x(x, m, form, fit_intercept):
    """(w, b) from a program solution vector."""
    x = np.asarray(x, dtype=float)
    w = x[:m] - x[m:2 * m] if form == "split" else x[:m].copy()
    return w, (float(x[2 * m]) if fit_intercept else 0.0)


def _design(X, form, fit_intercept):
    """Matrix D with D x = X w + b in program variables."""
    n, m = X.shape
    if sp.issparse(X):
        blocks = [X, -X if form == "split" else sp.csr_matrix((n, m))]
        if fit_intercept:
            blocks.append(sp.csr_matrix(np.ones((n, 1))))
        return sp.hstack(blocks).tocsr()
    blocks = [X, -X if form == "split" else np.zeros((n, m))]
    if fit_intercept:
        blocks.append(np.ones((n, 1)))
    return sp.csr_matrix(np.hstack(blocks))


def _check_penalty_weights(weights, m):
    """Per-feature multipliers ``c_j`` of ``alpha`` (penalty ``alpha sum_j c_j |w_j|``): positive and finite."""
    if weights is None:
        return 1.0
    c = np.asarray(weights, dtype=float).ravel()
    if c.size != m or not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise InputDataError(f"penalty_weights must be {m} positive finite numbers (one per feature)")
    return c


def _penalty_and_constraints(m, form, alpha, nvar, weights=None):
    lin = np.zeros(nvar)
    cons = []
    pen = alpha * _check_penalty_weights(weights, m)
    if form == "split":
        lin[:m] = pen
        lin[m:2 * m] = pen
    else:
        lin[m:2 * m] = pen
        # two nonzeros per row, stored sparse (indices ascending, as a dense row's nonzeros read)
        for j in range(m):
            idx = np.array([j, m + j])
            cons.append(Constraint(f"lower[{j}]", Expression(nvar, linear=(idx, np.array([1.0, 1.0]))), 0.0,
                                   np.inf))  # -u <= w
            cons.append(Constraint(f"upper[{j}]", Expression(nvar, linear=(idx, np.array([1.0, -1.0]))), -np.inf,
                                   0.0))  # w <= u
    return lin, cons


def l1_least_squares_program(X, y, alpha, form="split", fit_intercept=False, penalty_weights=None) -> Program:
    """Program for ``(1/2n)||y - Xw - b||^2 + alpha ||w||_1`` in the chosen form (2.56, 2.61/2.64);
    ``penalty_weights`` ``c`` (one positive number per feature) makes the penalty ``alpha sum_j c_j |w_j|``
    (the same objective on rescaled columns: ``x_j / s_j`` with ``c_j = 1 / s_j`` for ``w_j s_j``)."""
    X, y, alpha = _inputs(X, y, alpha, form)
    n, m = X.shape
    names, lb, ub = variable_layout(m, form, fit_intercept)
    D = _design(X, form, fit_intercept)
    lin, cons = _penalty_and_constraints(m, form, alpha, len(names), penalty_weights)
    # rows (1/2n) (y_i - D_i x)^2: u_i = -D_i x + y_i
    e = Expression(len(names), linear=lin,
                   atoms=[AtomGroup("square", np.full(n, 0.5 / n), -D, y, label=np.arange(n))])
    x0 = np.full(len(names), np.nan)
    return Program(names, lb, ub, e, cons, objective_name="l1_least_squares", x0=x0)


def _logistic_lse(D, y):
    n = D.shape[0]
    # group i: log(exp(0) + exp(-y_i D_i x)); rows interleaved (0-row, data row)
    Dy = sp.diags(-y) @ D
    Z = sp.csr_matrix((n, D.shape[1]))
    rows = sp.vstack([Z, Dy]).tocsr()
    perm = np.empty(2 * n, dtype=np.int64)
    perm[0::2] = np.arange(n)
    perm[1::2] = n + np.arange(n)
    return rows[perm], np.repeat(np.arange(n), 2)


def _labels_pm1(y):
    y = np.asarray(y).ravel()
    vals = np.unique(y)
    if not set(vals.tolist()) <= {-1.0, 1.0}:
        raise InputDataError(f"logistic labels must be -1/+1 here (got {vals[:5]})")
    return y.astype(float)


def l1_logistic_program(X, y, alpha, form="split", fit_intercept=True, penalty_weights=None) -> Program:
    """Program for ``(1/n) sum log(1 + exp(-y_i (a_i^T w + b))) + alpha ||w||_1``; ``y in {-1, +1}``;
    ``penalty_weights`` as in :func:`l1_least_squares_program`."""
    X, y, alpha = _inputs(X, y, alpha, form, pm1=True)
    n, m = X.shape
    names, lb, ub = variable_layout(m, form, fit_intercept)
    D = _design(X, form, fit_intercept)
    lin, cons = _penalty_and_constraints(m, form, alpha, len(names), penalty_weights)
    rows, seg = _logistic_lse(D, y)
    g = LseGroup(rows, np.zeros(2 * n), seg, np.full(n, 1.0 / n), label=np.arange(n))
    return Program(names, lb, ub, Expression(len(names), linear=lin, lse=[g]), cons,
                   objective_name="l1_logistic")


# --- Pyomo and CVXPY builders --------------------------------------------------------------------
def _row_terms(X):
    """``[(cols, vals)]`` of the nonzeros of every row of ``X`` (dense or sparse; never densified)."""
    X = sp.csr_matrix(X)
    X.eliminate_zeros()
    return [(X.indices[X.indptr[i]:X.indptr[i + 1]].tolist(), X.data[X.indptr[i]:X.indptr[i + 1]].tolist())
            for i in range(X.shape[0])]


def _pyomo_l1_weights(M, m, form, fit_intercept):
    """Declare the weights of a Pyomo L1 model in one of the two §2.5.4 forms.

    Returns ``(w, pen, b)``: ``w[j]`` as an expression (``wp - wm`` or ``w``), the L1 penalty
    expression (``sum(wp + wm)`` or ``sum(u)``) and the intercept (a Var, or 0)."""
    import pyomo.environ as pyo

    M.J = pyo.RangeSet(0, m - 1)
    if form == "split":
        M.wp = pyo.Var(M.J, within=pyo.NonNegativeReals, initialize=1.0)
        M.wm = pyo.Var(M.J, within=pyo.NonNegativeReals, initialize=1.0)
        w = {j: M.wp[j] - M.wm[j] for j in range(m)}
        pen = sum(M.wp[j] + M.wm[j] for j in range(m))
    else:
        M.w = pyo.Var(M.J, initialize=0.0)
        M.u = pyo.Var(M.J, initialize=1.0)
        M.lower = pyo.Constraint(M.J, rule=lambda M, j: M.w[j] + M.u[j] >= 0)
        M.upper = pyo.Constraint(M.J, rule=lambda M, j: M.w[j] - M.u[j] <= 0)
        w = {j: M.w[j] for j in range(m)}
        pen = sum(M.u[j] for j in range(m))
    b = 0
    if fit_intercept:
        M.b = pyo.Var(initialize=0.0)
        b = M.b
    return w, pen, b

def l1_least_squares_pyomo(X, y, alpha, form="split", fit_intercept=False):
    """Pyomo model of (2.56) in form ``split`` (vars ``wp``, ``wm`` >= 0) or ``box`` (vars ``w``, ``u``,
    constraints ``lower[j]: w_j + u_j >= 0``, ``upper[j]: w_j - u_j <= 0``); intercept ``b`` if asked."""
    import pyomo.environ as pyo

    X, y, alpha = _inputs(X, y, alpha, form)
    n, m = X.shape
    M = pyo.ConcreteModel(name="l1_least_squares")
    w, pen, b = _pyomo_l1_weights(M, m, form, fit_intercept)
    loss = sum((float(y[i]) - sum(v * w[j] for j, v in zip(*row)) - b) ** 2
               for i, row in enumerate(_row_terms(X)))
    M.obj = pyo.Objective(expr=loss / (2.0 * n) + alpha * pen, sense=pyo.minimize)
    return M


def l1_logistic_pyomo(X, y, alpha, form="split", fit_intercept=True):
    """Pyomo model of ``(1/n) sum log(1 + exp(-y_i (a_i^T w + b))) + alpha ||w||_1``, ``y in {-1,+1}``."""
    import pyomo.environ as pyo

    X, y, alpha = _inputs(X, y, alpha, form, pm1=True)
    n, m = X.shape
    M = pyo.ConcreteModel(name="l1_logistic")
    w, pen, b = _pyomo_l1_weights(M, m, form, fit_intercept)
    loss = sum(pyo.log(1 + pyo.exp(-float(y[i]) * (sum(v * w[j] for j, v in zip(*row)) + b)))
               for i, row in enumerate(_row_terms(X)))
    M.obj = pyo.Objective(expr=loss / n + alpha * pen, sense=pyo.minimize)
    return M



def _cvxpy_l1_weights(m, form):
    """CVXPY weights in one of the two §2.5.4 forms: ``(vars, constraints, w, penalty)``."""
    import cvxpy as cp

    v = {}
    cons = []
    if form == "split":
        v["wp"] = cp.Variable(m, nonneg=True, name="wp")
        v["wm"] = cp.Variable(m, nonneg=True, name="wm")
        w = v["wp"] - v["wm"]
        pen = cp.sum(v["wp"] + v["wm"])
    else:
        v["w"] = cp.Variable(m, name="w")
        v["u"] = cp.Variable(m, name="u")
        cons = [-v["u"] <= v["w"], v["w"] <= v["u"]]
        w = v["w"]
        pen = cp.sum(v["u"])
    return v, cons, w, pen

def _cvxpy_l1_affine(X, form, fit_intercept):
    """``(vars, constraints, X w [+ b], penalty)`` for the CVXPY L1 builders."""
    import cvxpy as cp

    v, cons, w, pen = _cvxpy_l1_weights(X.shape[1], form)
    pred = X @ w
    if fit_intercept:
        v["b"] = cp.Variable(name="b")
        pred = pred + v["b"]
    return v, cons, pred, pen


def l1_least_squares_cvxpy(X, y, alpha, form="split", fit_intercept=False):
    """CVXPY problem of (2.56); returns ``(problem, variables)`` with variables a dict
    (``wp``, ``wm`` or ``w``, ``u``; ``b``)."""
    import cvxpy as cp

    X, y, alpha = _inputs(X, y, alpha, form)
    n, m = X.shape
    v, cons, pred, pen = _cvxpy_l1_affine(X, form, fit_intercept)
    obj = cp.sum(cp.square(y - pred)) / (2.0 * n) + alpha * pen
    return cp.Problem(cp.Minimize(obj), cons), v


def l1_logistic_cvxpy(X, y, alpha, form="split", fit_intercept=True):
    """CVXPY problem ``(1/n) sum logistic(-y_i (a_i^T w + b)) + alpha ||w||_1``; returns ``(problem, vars)``."""
    import cvxpy as cp

    X, y, alpha = _inputs(X, y, alpha, form, pm1=True)
    n, m = X.shape
    v, cons, s, pen = _cvxpy_l1_affine(X, form, fit_intercept)
    obj = cp.sum(cp.logistic(cp.multiply(-y, s))) / n + alpha * pen
    return cp.Problem(cp.Minimize(obj), cons), v




def __getattr__(name):
    """The estimators live in :mod:`varopt.estimators`; this older import path still works."""
    if name in ("L1LeastSquares", "L1LogisticRegression"):
        from ..estimators import l1 as _est
        return getattr(_est, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
