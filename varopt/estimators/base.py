"""The one base class of varopt's estimators (scikit-learn conventions).

* hyperparameters are the keyword arguments of ``__init__``, stored unchanged under the same
  names (so ``get_params``/``set_params``, ``sklearn.base.clone``, ``GridSearchCV`` and pipelines
  work); nothing is validated or derived in ``__init__``;
* ``fit(X, y)`` validates, fits and returns ``self``; fitted attributes end in ``_``;
* ``partial_fit`` where on-line learning makes sense.

With scikit-learn installed the classes derive from :class:`sklearn.base.BaseEstimator` (and its
regressor/classifier mixins, so ``score`` is the usual R^2 / accuracy); without it a small
fallback gives the same ``get_params``/``set_params``/``score`` behaviour.
"""
from __future__ import annotations

import inspect

import numpy as np

from ..errors import InputDataError

try:  # scikit-learn is optional
    from sklearn.base import BaseEstimator as _Base
    from sklearn.base import ClassifierMixin, RegressorMixin
    from sklearn.exceptions import ConvergenceWarning, NotFittedError
    HAVE_SKLEARN = True
except ImportError:  # pragma: no cover - exercised only without scikit-learn
    HAVE_SKLEARN = False

    class NotFittedError(ValueError, AttributeError):
        """The estimator is used before ``fit`` (scikit-learn's exception when it is installed)."""

    class ConvergenceWarning(UserWarning):
        """A fit stopped at a limit before its convergence test (scikit-learn's warning when it is installed)."""

    class _Base:
        @classmethod
        def _get_param_names(cls):
            sig = inspect.signature(cls.__init__)
            return sorted(p.name for p in sig.parameters.values()
                          if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))

        def get_params(self, deep=True):
            return {k: getattr(self, k) for k in self._get_param_names()}

        def set_params(self, **params):
            valid = self._get_param_names()
            for k, v in params.items():
                if k not in valid:
                    raise ValueError(f"invalid parameter {k!r} for estimator {type(self).__name__}; "
                                     f"valid parameters: {valid}")
                setattr(self, k, v)
            return self

        def __repr__(self):
            args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
            return f"{type(self).__name__}({args})"

    class RegressorMixin:
        _estimator_type = "regressor"

        def score(self, X, y, sample_weight=None):
            y = np.asarray(y, dtype=float).ravel()
            r = y - self.predict(X)
            return 1.0 - float(r @ r) / float(((y - y.mean()) ** 2).sum())

    class ClassifierMixin:
        _estimator_type = "classifier"

        def score(self, X, y, sample_weight=None):
            return float(np.mean(self.predict(X) == np.asarray(y).ravel()))


#: statuses of a run stopped at a limit: its last iterate is kept with a ConvergenceWarning
LIMITS = ("iteration_limit", "time_limit", "pass_limit")


def check_flag(name, value):
    """``value`` as a bool when it is one (Python or numpy); InputDataError otherwise (a string such as 'False' is
    truthy, so ``fit_intercept='False'`` silently fitted an intercept; scikit-learn rejects it)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputDataError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_magnitude(name, a):
    """``a`` (dense or sparse, finite) unless its squares overflow: InputDataError naming ``name`` when
    ``max|a|^2 * max(a.shape)`` exceeds the largest float64 (entries beyond about 1e150). scikit-learn's validation
    accepts any finite value, and such entries then overflowed in a Gram matrix, a kernel distance or a column scale,
    where the error named a solver bug ('the bound curvature is not positive semidefinite') or an option the user never
    set ('log_ell must be a finite number, got inf', 'penalty_weights must be ... finite')."""
    import scipy.sparse as sp
    v = a.tocoo().data if sp.issparse(a) else np.asarray(a)
    # max and min, not abs(v).max(): no temporary copy of the data (400 MB at 1e5 x 500)
    amax = max(abs(float(v.max())), abs(float(v.min()))) if v.size else 0.0
    with np.errstate(over="ignore"):
        ok = np.isfinite(amax * amax * max(max(np.shape(a)), 1))
    if not ok:
        raise InputDataError(f"{name} has entries of magnitude up to {amax:.3g}: their squares overflow float64 "
                             f"(largest {np.finfo(float).max:.3g}); rescale {name} (e.g. change its units or use "
                             "sklearn.preprocessing.StandardScaler)")
    return a


def accept_result(r, solver, where="", kept="the fit is the last iterate", warn=True):
    """``r`` when it converged or stopped at a limit (scikit-learn's convention: keep the fit, warn with a
    ConvergenceWarning unless ``warn`` is False); RuntimeError naming ``solver`` otherwise."""
    if r.success:
        return r
    if r.status in LIMITS and r.x is not None:
        if warn:
            import warnings
            warnings.warn(f"{solver} stopped at a limit before converging{where}: {r.status} ({r.message}); {kept}",
                          ConvergenceWarning, stacklevel=3)
        return r
    raise RuntimeError(f"{solver} did not converge{where}: {r.status} ({r.message})")


class VaroptEstimator(_Base):
    """Base of every varopt estimator (see the module docstring)."""

    def _validate(self, X, y=None, reset=True, accept_sparse=False, classifier=False, with_y=True):
        """scikit-learn's input validation (2-d, finite, real, non-empty, ``n_features_in_`` set on
        ``reset`` and checked otherwise, a missing ``y`` named); a plain check without scikit-learn."""
        try:  # scikit-learn >= 1.6; older versions take the plain checks below
            from sklearn.utils.validation import validate_data
        except ImportError:
            validate_data = None
        if HAVE_SKLEARN and validate_data is not None:
            from sklearn.utils.multiclass import check_classification_targets

            from ..errors import InputDataError
            try:
                if not with_y:
                    return check_magnitude("X", validate_data(self, X, reset=reset, accept_sparse=accept_sparse,
                                                              dtype=np.float64))
                X, y = validate_data(self, X, y, reset=reset, accept_sparse=accept_sparse, dtype=np.float64,
                                     y_numeric=not classifier)
                if classifier:
                    check_classification_targets(y)
            except InputDataError:
                raise
            except ValueError as exc:  # scikit-learn's message, as varopt's input error (a ValueError)
                raise InputDataError(str(exc)) from exc
            check_magnitude("X", X)
            if not classifier:
                check_magnitude("y", y)
            return X, y
        X = np.asarray(X, dtype=float)  # pragma: no cover - without scikit-learn >= 1.6
        if X.ndim != 2 or X.shape[0] == 0 or not np.all(np.isfinite(X)):
            raise ValueError(f"X must be a non-empty finite 2-d array, got shape {X.shape}")
        if reset:
            self.n_features_in_ = X.shape[1]
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the estimator was fitted with {self.n_features_in_}")
        if not with_y:
            return X
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        return X, np.asarray(y).ravel()

    def _check_fitted(self, attr="result_"):
        if not hasattr(self, attr):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit first")


__all__ = ["VaroptEstimator", "RegressorMixin", "ClassifierMixin", "NotFittedError", "ConvergenceWarning",
           "HAVE_SKLEARN"]
