"""varopt's estimators follow scikit-learn's conventions (checked with scikit-learn's own tools)."""
import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from varopt.estimators import (BayesianGMMVEM, ChainCRF, L1LeastSquares, L1LogisticRegression,  # noqa: E402
                               MajorizeLogisticRegression, NotFittedError, SparseIsing)
from varopt.estimators.klprox import (BayesianLogisticRegression, BayesianMultinomialRegression,  # noqa: E402
                                      BayesianPoissonRegression, GPClassifier, GPRegressor)

# checks whose generated data cannot reach these estimators (what they do check is in test_estimators_userforms.py)
_GENERIC = ("check_dict_unchanged", "check_dont_overwrite_parameters", "check_dtype_object",
            "check_f_contiguous_array_estimator", "check_fit2d_1feature", "check_fit2d_1sample",
            "check_fit2d_predict1d", "check_methods_sample_order_invariance", "check_methods_subset_invariance",
            "check_n_features_in", "check_n_features_in_after_fitting")
_ON_ARRAYS = _GENERIC + (
    "check_estimators_dtypes", "check_estimators_fit_returns_self", "check_estimators_nan_inf",
    "check_estimators_overwrite_params", "check_estimators_pickle", "check_fit_check_is_fitted",
    "check_fit_idempotent", "check_fit_score_takes_y", "check_pipeline_consistency",
    "check_positive_only_tag_during_fit", "check_readonly_memmap_input")
_UNIVARIATE = "one-dimensional model: the check indexes X[:, j] after passing the 1-D X[:, 0] of one_d_array"
_EXPECTED = {
    # 1-D data is the data itself (documented; the one_d_array tag, as IsotonicRegression)
    "BayesianGMMVEM": {**{c: _UNIVARIATE for c in _GENERIC}, "check_fit1d": "1-D X is the data (documented)",
                       "check_estimator_sparse_array": "the check builds a 1-D sparse array, which scipy refuses"},
    "SparseIsing": {**{c: "spin data only (-1/+1 or 0/1): the check fits on real-valued X" for c in _ON_ARRAYS},
                    **{c: "spin data only: the check's sparse X is real-valued" for c in (
                        "check_estimator_sparse_array", "check_estimator_sparse_matrix",
                        "check_estimator_sparse_tag", "check_sparsify_coefficients")}},
    "ChainCRF": {**{c: "sequence model: the check's y holds one label per sample, not a tag list per sentence"
                    for c in _ON_ARRAYS},
                 "check_complex_data": "sequence model: y is not a list of tag lists",
                 "check_estimators_empty_data_messages": "sequence model: y is not a list of tag lists"},
}


@parametrize_with_checks([L1LeastSquares(alpha=0.01), L1LogisticRegression(alpha=0.01),
                          MajorizeLogisticRegression(max_iter=50, tol=1e-6),
                          # klprox: before, 21 of 56 checks failed for the logistic one (no score, 3-class data,
                          # sparse input, pickling the result's predictive closure), 3 for the GP regressor
                          BayesianLogisticRegression(), GPRegressor(likelihood="gaussian"),
                          # huntg: before, the 1-class message (multinomial), 9 checks (Poisson: real y >= 0
                          # refused), 28 (GMM: no validation, 1-D only), SparseIsing not an estimator (no tags)
                          BayesianMultinomialRegression(), BayesianPoissonRegression(prior_var=[0.1, 1.0]),
                          GPClassifier(log_ell=0.0, log_sf=1.0),
                          GPRegressor(likelihood="laplace", log_ell=[-0.5, 0.5], log_sf=0.0, log_noise=-1.0),
                          BayesianLogisticRegression(prior_var=[0.1, 10.0]), BayesianGMMVEM(n_restarts=3),
                          SparseIsing(), ChainCRF(max_iter=5)],
                         expected_failed_checks=lambda est: _EXPECTED.get(type(est).__name__, {}))
def test_sklearn_check_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)


def _data(seed=0, n=80, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = np.array([1.5, 0.0, -2.0, 0.0, 0.5])[:d]
    return X, X @ w + 0.1 * rng.normal(size=n), (X @ w + 0.3 * rng.normal(size=n) > 0).astype(int)


def test_grid_search_and_pipeline_on_l1_least_squares():
    X, y, _ = _data()
    gs = GridSearchCV(make_pipeline(StandardScaler(), L1LeastSquares(passes=20)),
                      {"l1leastsquares__alpha": [0.001, 0.01, 0.1]}, cv=3).fit(X, y)
    assert gs.best_params_["l1leastsquares__alpha"] in (0.001, 0.01, 0.1)
    assert gs.score(X, y) > 0.9


def test_grid_search_on_majorize_logistic_regression():
    X, _, c = _data(1)
    gs = GridSearchCV(MajorizeLogisticRegression(), {"C": [0.01, 1.0]}, cv=3).fit(X, c)
    assert gs.best_estimator_.coef_.shape == (1, 5) and gs.score(X, c) > 0.8


def test_clone_keeps_hyperparameters_and_drops_the_fit():
    est = L1LogisticRegression(alpha=0.2, passes=3, seed=5)
    X, _, c = _data(2)
    est.fit(X, c)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "coef_")
    with pytest.raises(NotFittedError):
        twin.predict(X)


def test_chain_crf_hyperparameters_live_in_init_and_fit_does_not_change_them():
    X = [["Juan", "vive", "en", "Madrid"], ["hola"]]
    Y = [["B-PER", "O", "O", "B-LOC"], ["O"]]
    crf = ChainCRF(lam=0.5, method="lbfgs", max_iter=5)
    params = crf.get_params()
    assert {"method", "tol", "max_iter", "time_limit", "labels", "templates"} <= set(params)
    crf.fit(X, Y)
    assert crf.get_params() == params and crf.labels is None and crf.labels_ == ["B-LOC", "B-PER", "O"]
    assert clone(crf).get_params() == params
    with pytest.warns(DeprecationWarning, match="ChainCRF"):
        ChainCRF(lam=0.5).fit(X, Y, method="lbfgs", max_iter=2)


def test_bgmm_vem_takes_a_column_and_clones():
    x = np.r_[np.zeros(5), 3 * np.ones(5)] + 0.01 * np.arange(10)
    est = BayesianGMMVEM(2, n_restarts=3, seed=1)
    a = est.fit(x.reshape(-1, 1))
    assert a is est and np.isfinite(est.neg_elbo_)
    assert clone(est).get_params() == est.get_params()


def test_majorize_logistic_regression_takes_sparse_X_and_checks_C():
    """scipy.sparse X gives the dense fit (binary and multinomial; before: TypeError "dense data is required");
    a C that is not a positive number is an InputDataError naming C (before: TypeError from '>')."""
    import scipy.sparse as sp

    from varopt.errors import InputDataError
    X, _, yb = _data()
    X[np.abs(X) < 0.5] = 0.0
    ym = np.digitize(X[:, 0] - X[:, 2], [-0.5, 0.5])
    for y in (yb, ym):
        dense = MajorizeLogisticRegression().fit(X, y)
        sparse = MajorizeLogisticRegression().fit(sp.csr_matrix(X), y)
        assert np.allclose(sparse.coef_, dense.coef_, atol=1e-9) and np.allclose(sparse.intercept_, dense.intercept_,
                                                                                 atol=1e-9)
        assert np.allclose(sparse.predict_proba(sp.csc_matrix(X)), dense.predict_proba(X), atol=1e-9)
    for C in ("1", None, -1.0, float("nan")):
        with pytest.raises(InputDataError, match="C must be a positive number"):
            MajorizeLogisticRegression(C=C).fit(X, yb)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("sparse", [False, True])
def test_majorize_logistic_regression_sample_weight(n_classes, sparse):
    """``sample_weight`` as in scikit-learn: integer weights equal repeating the samples, weight 0 equals leaving the
    sample out, and the fit equals scikit-learn's LogisticRegression with the same weights (lbfgs, tight tol)."""
    import scipy.sparse as sps
    from sklearn.linear_model import LogisticRegression
    rng = np.random.default_rng(7 + n_classes)
    X = rng.normal(size=(60, 4))
    y = np.argmax(X[:, :n_classes] + 0.8 * rng.normal(size=(60, n_classes)), axis=1)
    s = rng.integers(0, 4, size=60).astype(float)
    Xf = sps.csr_matrix(X) if sparse else X
    kw = dict(C=0.7, tol=1e-12, max_iter=5000)
    fit_w = MajorizeLogisticRegression(**kw).fit(Xf, y, sample_weight=s)
    rep = np.repeat(np.arange(60), s.astype(int))
    fit_r = MajorizeLogisticRegression(**kw).fit(Xf[rep], y[rep])
    np.testing.assert_allclose(fit_w.coef_, fit_r.coef_, rtol=0, atol=1e-7)
    # (multinomial intercepts are unpenalized, so only their differences are identified)
    centre = (lambda b: b - b.mean()) if n_classes > 2 else (lambda b: b)
    np.testing.assert_allclose(centre(fit_w.intercept_), centre(fit_r.intercept_), rtol=0, atol=1e-7)
    ref = LogisticRegression(C=0.7, tol=1e-12, max_iter=10000).fit(X, y, sample_weight=s)
    np.testing.assert_allclose(fit_w.coef_, ref.coef_, rtol=0, atol=1e-5)
    np.testing.assert_allclose(fit_w.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-6)


def test_majorize_logistic_regression_bad_sample_weight():
    X, _, c = _data(3)
    for bad, msg in [(np.ones(3), "shape"), (np.full(80, np.nan), "NaN"), (-np.ones(80), ">= 0"),
                     (np.zeros(80), "zero for every sample")]:
        with pytest.raises(ValueError, match=msg):
            MajorizeLogisticRegression().fit(X, c, sample_weight=bad)
