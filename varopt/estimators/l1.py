"""scikit-learn estimators for on-line L1-regularised learning (Carbonetto 2009, §2.5), fitted by ``ipsa``.

:class:`L1LeastSquares` and :class:`L1LogisticRegression` build their program with the builders of
:mod:`varopt.formulations.l1` (objective and forms stated there) and fit it with the ``ipsa`` solver (``fit``: passes
over the data; ``partial_fit``: one on-line pass over new examples, continuing the step-size counter
and the primal-dual state).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputDataError
from ..formulations.l1 import (_check_X, _check_form, _check_y, l1_least_squares_program, l1_logistic_program,
                               weights_from_x)
from .base import ClassifierMixin, RegressorMixin, VaroptEstimator


class _L1Estimator(VaroptEstimator):
    _loss = None
    _is_classifier = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # the IPSA row oracles take CSR data (a1a, spam filtering)
        return tags
    _default_hessian = "identity"

    def __init__(self, alpha=1.0, form="split", fit_intercept=True, passes=1.0, k0=50.0, step_power=1.0,
                 batch_size=1, sampling="cyclic", hessian=None, sigma=0.5, sigma_power=1.0, seed=0,
                 solver_options=None):
        self.alpha = alpha
        self.form = form
        self.fit_intercept = fit_intercept
        self.passes = passes
        self.k0 = k0
        self.step_power = step_power
        self.batch_size = batch_size
        self.sampling = sampling
        self.hessian = hessian
        self.sigma = sigma
        self.sigma_power = sigma_power
        self.seed = seed
        self.solver_options = solver_options

    def _program(self, X, y):  # pragma: no cover - abstract
        raise NotImplementedError

    def _solve(self, X, y, passes, warm):
        from ..registry import get_solver
        import varopt.solvers.ipsa  # noqa: F401  (registers 'ipsa')

        _check_form(self.form)
        P = self._program(X, y)
        opts = dict(passes=passes, k0=self.k0, step_power=self.step_power, batch_size=self.batch_size,
                    sampling=self.sampling, hessian=self.hessian or self._default_hessian, sigma=self.sigma,
                    sigma_power=self.sigma_power, seed=self.seed, history_objective=False)
        opts.update(self.solver_options or {})
        if warm:
            opts.update(x0=self._x, z0=self._z, iteration_offset=self._k)
        res = get_solver("ipsa").solve(P, **opts)
        self._x, self._z, self._k = res.x.copy(), res.info["z"].copy(), int(res.info["k"])
        self.n_features_in_ = X.shape[1]
        self.coef_, self.intercept_ = weights_from_x(res.x, X.shape[1], self.form, self.fit_intercept)
        self.n_iter_ = self._k
        self.result_ = res
        return self

    def fit(self, X, y):
        """Fit from scratch: ``passes`` passes of IPSA over (X, y)."""
        for a in ("_x", "_z", "_k", "classes_"):
            self.__dict__.pop(a, None)
        X, y = self._validate(X, y, reset=True, accept_sparse="csr", classifier=self._is_classifier)
        X = _check_X(X)
        y = self._prepare_y(y, X.shape[0], fit=True)
        return self._solve(X, y, self.passes, warm=False)

    def partial_fit(self, X, y, classes=None):
        """One on-line pass over the new examples, continuing from the current state."""
        X, y = self._validate(X, y, reset=not hasattr(self, "_x"), accept_sparse="csr",
                              classifier=self._is_classifier)
        X = _check_X(X)
        if classes is not None and not hasattr(self, "classes_"):
            self._set_classes(classes)
        y = self._prepare_y(y, X.shape[0], fit=not hasattr(self, "_x"))
        warm = hasattr(self, "_x")
        if warm and X.shape[1] != self.n_features_in_:
            raise InputDataError(f"X has {X.shape[1]} features, the model was fitted with {self.n_features_in_}")
        return self._solve(X, y, 1.0, warm=warm)

    def _decision(self, X):
        self._check_fitted("coef_")
        X = _check_X(self._validate(X, reset=False, accept_sparse="csr", with_y=False))
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def _prepare_y(self, y, n, fit):
        return _check_y(y, n)

    def _set_classes(self, classes):
        pass


class L1LeastSquares(RegressorMixin, _L1Estimator):
    """On-line L1-regularised least squares (the regularised delta rule, 2.62-2.63 / 2.65-2.67):
    minimises ``(1/2n)||y - Xw - b||^2 + alpha ||w||_1`` with IPSA."""

    def _program(self, X, y):
        return l1_least_squares_program(X, y, self.alpha, self.form, self.fit_intercept)

    def predict(self, X):
        return self._decision(X)


class L1LogisticRegression(ClassifierMixin, _L1Estimator):
    """On-line L1-regularised logistic regression (§2.5.8): minimises
    ``(1/n) sum log(1 + exp(-y_i (a_i^T w + b))) + alpha ||w||_1`` with IPSA; default Hessian
    approximation: the running diagonal of §2.5.8."""

    _default_hessian = "diagonal"
    _is_classifier = True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # binary: y in {-1, +1} after relabelling
        return tags

    def decision_function(self, X):
        return self._decision(X)

    def _set_classes(self, classes):
        classes = np.unique(np.asarray(classes))
        if classes.size != 2:
            raise InputDataError(f"Only binary classification is supported: L1LogisticRegression got "
                                 f"{classes.size} classes")
        self.classes_ = classes

    def _prepare_y(self, y, n, fit):
        y = np.asarray(y).ravel()
        if y.size != n:
            raise InputDataError(f"y has {y.size} entries, X has {n} rows")
        if not hasattr(self, "classes_"):
            self._set_classes(y)
        bad = ~np.isin(y, self.classes_)
        if bad.any():
            raise InputDataError(f"y contains labels {np.unique(y[bad])[:3]} not in classes {self.classes_}")
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def _program(self, X, y):
        return l1_logistic_program(X, y, self.alpha, self.form, self.fit_intercept)

    def predict_proba(self, X):
        p1 = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X, threshold=0.5):
        return np.where(self.predict_proba(X)[:, 1] >= threshold, self.classes_[1], self.classes_[0])
