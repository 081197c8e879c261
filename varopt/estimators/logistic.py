"""L2 logistic regression fitted by bound majorization (Jebara & Choromanska 2012), solver ``majorize``."""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import InputDataError
from ..formulations.logistic import _check_xy, logistic_program, unpack
from .base import ClassifierMixin, ConvergenceWarning, VaroptEstimator, accept_result, check_flag


class MajorizeLogisticRegression(ClassifierMixin, VaroptEstimator):
    """scikit-learn-style L2 logistic regression fitted by bound majorization (solver ``majorize``).

    ``C`` has scikit-learn's meaning (``lam = 1 / C``); ``step_solver`` is the solver option of that name
    (``'auto'``: dense, row-space Woodbury or matrix-free CG by predicted cost). After :meth:`fit`: ``coef_``
    (``(1, d)`` binary, ``(C, d)`` multinomial), ``intercept_``, ``classes_``, ``result_``.
    """

    def __init__(self, C: float = 1.0, fit_intercept: bool = True, tol: float = 1e-8, max_iter: int = 1000,
                 bound: str = "full", rank: int = 8, verbose: bool = False, step_solver: str = "auto"):
        self.C, self.fit_intercept, self.tol, self.max_iter = C, fit_intercept, tol, max_iter
        self.bound, self.rank, self.verbose, self.step_solver = bound, rank, verbose, step_solver

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True      # the program's rows are sparse (formulations.logistic)
        return tags

    def fit(self, X, y, sample_weight=None):
        """Fit; ``sample_weight`` (``n_samples`` values >= 0, scikit-learn's meaning) multiplies each sample's
        loss, so that an integer weight equals repeating the sample."""
        from ..registry import get_solver
        import varopt.solvers.majorize  # noqa: F401  (registers the solver even if varopt/__init__ did not)
        X, y = self._validate(X, y, reset=True, accept_sparse="csr", classifier=True)
        X, y = _check_xy(X, y)
        if np.unique(y).size < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes; got 1 class")
        if isinstance(self.C, (bool, np.bool_)) or not isinstance(self.C, numbers.Real) or not self.C > 0:
            raise InputDataError(f"C must be a positive number, got {self.C!r}")
        check_flag("fit_intercept", self.fit_intercept)
        self.classes_ = np.unique(y)
        prog = logistic_program(X, y, 1.0 / self.C, self.fit_intercept, self.classes_, sample_weight)
        self.program_ = prog
        res = get_solver("majorize").solve(prog, tol=self.tol, max_iter=self.max_iter, bound=self.bound,
                                           rank=self.rank, verbose=self.verbose, step_solver=self.step_solver)
        if res.status == "numerical" and res.info.get("attainment", {}).get("verdict") == "not_attained":
            # separable classes and C = inf: no maximum-likelihood estimate exists (the solver's LP found a direction
            # of strict improvement); keep the last iterate, warn as scikit-learn's solvers do when they cannot converge
            import warnings
            warnings.warn(f"{type(self).__name__}(C=inf): the classes are separable by the features (complete or "
                          "quasi-complete separation), so the unpenalized likelihood has no maximizer and the "
                          "coefficients grow without bound (here ||coef|| = "
                          f"{float(np.linalg.norm(res.x)):.3g}); coef_ is the last iterate. Use a finite C "
                          f"(a ridge penalty). Solver: {res.message}", ConvergenceWarning, stacklevel=2)
            self.result_ = res
        else:
            self.result_ = accept_result(res, "majorize")   # an iteration limit warns, as scikit-learn's solvers do
        self.coef_, self.intercept_ = unpack(res.x, X.shape[1], self.classes_.size, self.fit_intercept)
        self.n_iter_ = res.iterations
        return self

    def decision_function(self, X):
        self._check_fitted("coef_")
        X = self._validate(X, reset=False, accept_sparse="csr", with_y=False)
        Z = X @ self.coef_.T + self.intercept_
        return Z.ravel() if self.classes_.size == 2 else Z

    def predict_proba(self, X):
        self._check_fitted("coef_")
        Z = self.decision_function(X)
        if self.classes_.size == 2:
            p1 = 0.5 * (1.0 + np.tanh(0.5 * Z))
            return np.column_stack([1.0 - p1, p1])
        Z = Z - Z.max(axis=1, keepdims=True)
        E = np.exp(Z)
        return E / E.sum(axis=1, keepdims=True)

    def predict(self, X):
        self._check_fitted("coef_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
