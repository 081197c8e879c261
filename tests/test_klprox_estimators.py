"""klprox estimators: sklearn conventions, ELBO grid selection, predictive distributions against sklearn's GP
regressor and numerical integration."""
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit

from varopt.errors import InputDataError
from varopt.estimators.klprox import (BayesianLogisticRegression, BayesianMultinomialRegression,
                                      BayesianPoissonRegression, GPClassifier,
                                      GPRegressor, log_loss_bits)


def _clf_data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(rng.uniform(size=n) < expit(2 * X[:, 0] - X[:, 1]), "yes", "no")
    return X, y


def test_logistic_estimator_selects_prior_variance_by_elbo():
    X, y = _clf_data()
    est = BayesianLogisticRegression(prior_var=[0.01, 1.0, 100.0]).fit(X, y)
    vals = dict(est.grid_)
    assert est.prior_var_ == min(vals, key=vals.get) and est.neg_elbo_ == min(vals.values())
    assert set(est.get_params()) == {"prior_var", "fit_intercept", "solver_options"}
    P = est.predict_proba(X)
    assert P.shape == (120, 2) and np.allclose(P.sum(1), 1) and np.all((P > 0) & (P < 1))
    assert np.mean(est.predict(X) == y) > 0.75
    assert est.coef_.shape == (2,) and est.covariance_.shape == (3, 3)
    assert log_loss_bits(P[np.arange(120), (y == "yes").astype(int)]) < 1.0
    with pytest.raises(InputDataError):
        est.predict_proba(np.ones((2, 3)))
    with pytest.raises(InputDataError, match="two classes"):
        BayesianLogisticRegression().fit(X, np.zeros(120))


def test_poisson_estimator_predicts_the_posterior_predictive_mean():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 2))
    y = rng.poisson(np.exp(0.5 + X @ np.array([0.4, -0.3])))
    est = BayesianPoissonRegression(prior_var=4.0).fit(X, y)
    np.testing.assert_allclose(est.coef_, [0.4, -0.3], atol=0.15)
    assert np.all(est.predict(X) > 0)


def test_gp_regressor_gaussian_matches_sklearn_predictions():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    rng = np.random.default_rng(2)
    X = rng.uniform(-3, 3, size=(50, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=50)
    est = GPRegressor("gaussian", log_ell=0.0, log_sf=0.0, log_noise=math.log(0.1)).fit(X, y)
    eps = 1e-8
    gpr = GaussianProcessRegressor(ConstantKernel(1.0, "fixed") * RBF(1.0, "fixed"), alpha=0.01 + eps,
                                   optimizer=None).fit(X, y)
    Xt = np.linspace(-3, 3, 7)[:, None]
    mu, sd = gpr.predict(Xt, return_std=True)
    mt, vt = est.latent(Xt)
    np.testing.assert_allclose(mt, mu, atol=1e-7)
    np.testing.assert_allclose(vt, sd ** 2, atol=1e-7)
    assert abs(est.neg_elbo_ + gpr.log_marginal_likelihood_value_) <= 1e-9 * abs(est.neg_elbo_)


def test_gp_regressor_laplace_predictive_density_and_grid():
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(40, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.laplace(size=40)
    est = GPRegressor("laplace", log_ell=[-1.0, 0.0, 1.0], log_sf=[0.0], log_noise=[-2.0, -1.0]).fit(X, y)
    assert len(est.grid_) == 6 and est.neg_elbo_ == min(v for _, v in est.grid_)
    Xt, yt = np.array([[0.3], [2.0]]), np.array([0.2, 1.4])
    lp = est.log_predictive_density(Xt, yt)
    mt, vt = est.latent(Xt)
    b = math.exp(est.log_noise_) / math.sqrt(2)
    for k in range(2):
        s = math.sqrt(vt[k])
        f = lambda u: math.exp(-abs(yt[k] - u) / b) / (2 * b) * math.exp(-0.5 * ((u - mt[k]) / s) ** 2) / (s * math.sqrt(2 * math.pi))
        ref = integrate.quad(f, mt[k] - 30 * s, mt[k] + 30 * s, points=[yt[k]], epsabs=0, epsrel=1e-12, limit=200)[0]
        assert abs(lp[k] - math.log(ref)) <= 1e-9


def test_gp_classifier_latent_at_training_inputs_and_probabilities():
    X, y = _clf_data(80, seed=4)
    est = GPClassifier(log_ell=[0.0, 1.0], log_sf=[0.0, 1.0]).fit(X, y)
    mt, vt = est.latent(X)
    np.testing.assert_allclose(mt, est.f_mean_, atol=1e-6)
    P = est.predict_proba(X)
    assert np.all((P > 0) & (P < 1)) and np.mean(est.predict(X) == y) > 0.75


def test_gp_grid_in_two_processes_equals_the_serial_fit():
    """n_jobs=2 solves grid points whose neighbours are solved in worker processes, from the same warm starts
    as the serial order: every grid value, the selection and the posterior are bit-identical."""
    from varopt.errors import InvalidOptionError
    rng = np.random.default_rng(5)
    X = rng.uniform(-3, 3, size=(40, 2))
    y = np.sin(X[:, 0]) - 0.5 * X[:, 1] + 0.1 * rng.laplace(size=40)
    kw = dict(log_ell=[-0.5, 0.5, 1.5], log_sf=[-0.5, 0.5], log_noise=[-2.0, -1.0])
    a = GPRegressor("laplace", **kw).fit(X, y)
    b = GPRegressor("laplace", n_jobs=2, **kw).fit(X, y)
    assert len(a.grid_) == 12 and a.grid_ == b.grid_
    assert (a.log_ell_, a.log_sf_, a.log_noise_) == (b.log_ell_, b.log_sf_, b.log_noise_)
    assert np.array_equal(a.mean_, b.mean_) and np.array_equal(a.covariance_, b.covariance_)
    assert a.neg_elbo_ == b.neg_elbo_ == min(v for _, v in a.grid_)
    assert b.get_params()["n_jobs"] == 2
    # every point is at the optimum a cold start reaches
    cold = GPRegressor("laplace", log_ell=a.log_ell_, log_sf=a.log_sf_, log_noise=a.log_noise_).fit(X, y)
    assert abs(cold.neg_elbo_ - a.neg_elbo_) <= 1e-9 * abs(a.neg_elbo_)
    for bad in (0, 1.5, "2"):
        with pytest.raises(InvalidOptionError, match="n_jobs"):
            GPRegressor("laplace", n_jobs=bad).fit(X, y)


def test_estimators_follow_scikit_learn_conventions():
    """score, NotFittedError, cross-validation and grid search, sparse X, NaN labels named as such (before:
    no ``score`` (cross_val_score refused the estimator), no ``__sklearn_tags__`` (GridSearchCV failed),
    ``AttributeError`` before fit, sparse ``X`` crashed ``predict``, NaN labels counted as a third class)."""
    import scipy.sparse as sp
    from sklearn.model_selection import GridSearchCV, cross_val_score

    from varopt.estimators.base import NotFittedError
    X, y = _clf_data()
    est = BayesianLogisticRegression().fit(X, y)
    assert est.score(X, y) == np.mean(est.predict(X) == y)
    assert cross_val_score(BayesianLogisticRegression(), X, y, cv=3).shape == (3,)
    gs = GridSearchCV(BayesianLogisticRegression(), {"prior_var": [0.1, 1.0]}, cv=2, scoring="neg_log_loss")
    assert gs.fit(X, y).best_params_["prior_var"] in (0.1, 1.0)
    sparse = BayesianLogisticRegression().fit(sp.csr_matrix(X), y)
    assert np.allclose(sparse.predict_proba(sp.csr_matrix(X)), est.predict_proba(X), rtol=0, atol=1e-12)
    for E in (BayesianLogisticRegression, BayesianMultinomialRegression, GPClassifier):
        with pytest.raises(NotFittedError):
            E().predict(X)
    yn = (y == "yes").astype(float)
    yn[3] = np.nan
    with pytest.raises(InputDataError, match="y contains NaN"):
        BayesianLogisticRegression().fit(X, yn)
    rng = np.random.default_rng(5)
    Xr = rng.normal(size=(30, 2))
    reg = GPRegressor(likelihood="gaussian").fit(Xr, Xr[:, 0] + 0.1 * rng.normal(size=30))
    assert reg.score(Xr, Xr[:, 0]) > 0.5


def test_fitted_estimators_and_results_pickle():
    """A fitted estimator (and its klprox Result, whose ``info['predict']`` was a closure) survives pickling with
    the same predictions: joblib.dump of a model, GridSearchCV(n_jobs=2)."""
    import pickle

    from varopt.formulations.bayes_glm import design, glm_program
    from varopt.registry import get_solver
    X, y = _clf_data(60)
    for est in (BayesianLogisticRegression(), BayesianMultinomialRegression(), GPClassifier()):
        est.fit(X, y)
        again = pickle.loads(pickle.dumps(est))
        assert np.array_equal(again.predict_proba(X), est.predict_proba(X))
    yb = (y == "yes").astype(float)
    for par in ("full", "dual"):
        r = get_solver("klprox").solve(glm_program(X, yb), parameterization=par)
        mean, var = pickle.loads(pickle.dumps(r)).info["predict"](design(X))
        assert np.array_equal(mean, r.info["predict"](design(X))[0]) and np.all(var > 0)


def test_bad_hyperparameters_are_named():
    """NaN/empty/non-numeric grids and a negative jitter are errors naming the hyperparameter (before: "abs affine
    data contains NaN", "kernel matrix is not positive definite", a TypeError from unpacking an empty grid)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=12)
    for kw, name in (({"log_ell": float("nan")}, "log_ell"), ({"log_sf": []}, "log_sf"),
                     ({"log_noise": [0.0, float("inf")]}, "log_noise"), ({"jitter": -1.0}, "jitter")):
        with pytest.raises(InputDataError, match=name):
            GPRegressor(**kw).fit(X, y)
    with pytest.raises(InputDataError, match="jitter=0"):
        GPRegressor(jitter=0.0).fit(np.vstack([X, X]), np.r_[y, y])
    for pv in ([], "a", float("nan")):
        with pytest.raises(InputDataError, match="prior_var"):
            BayesianLogisticRegression(prior_var=pv).fit(X, y > 0)


def test_limits_keep_the_fit_with_a_convergence_warning():
    """A fit stopped at max_iter keeps its last posterior with scikit-learn's ConvergenceWarning, and a stochastic
    fit (``batch_size``: always max_iter steps by design) is a plain fit (before: RuntimeError "klprox did not
    converge: iteration_limit" for both, so the estimators could not use the stochastic variant)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    X, y = _clf_data(300)
    exact = BayesianLogisticRegression().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sgd = BayesianLogisticRegression(solver_options={"batch_size": 30, "max_iter": 300}).fit(X, y)
    assert sgd.result_.status == "iteration_limit"
    assert abs(sgd.neg_elbo_ - exact.neg_elbo_) < 1e-2 * abs(exact.neg_elbo_)
    with pytest.warns(ConvergenceWarning, match="iteration_limit"):
        short = BayesianLogisticRegression(solver_options={"max_iter": 2}).fit(X, y)
    assert short.neg_elbo_ >= exact.neg_elbo_ and short.predict_proba(X).shape == (300, 2)


def test_auto_grids_follow_the_data_scales():
    """The default ``"auto"`` grids: log_ell around the log median distance between inputs, log_sf/log_noise around
    log std(y). Checked against an independent computation of the heuristic, by equivariance (scaling X by c shifts
    log_ell_ by log c; scaling y by c shifts log_sf_ and log_noise_ by log c, with the same predictions up to c), and
    by what the default is for: on 30 standardized features a fixed length 1 predicts coin flips."""
    from scipy.spatial.distance import pdist
    from sklearn.datasets import make_classification

    from varopt.estimators.klprox import AUTO_ELL, AUTO_NOISE, AUTO_SF_CLASSIFIER, AUTO_SF_REGRESSOR, median_distance
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.2 * rng.normal(size=40)
    a = GPRegressor("gaussian").fit(X, y)
    ell = np.log(np.median(pdist(X))) + np.array(AUTO_ELL)
    sf = np.log(np.std(y)) + np.array(AUTO_SF_REGRESSOR)
    nz = np.log(np.std(y)) + np.array(AUTO_NOISE)
    pts = np.array([p for p, _ in a.grid_])
    assert pts.shape == (ell.size * sf.size * nz.size, 3)
    np.testing.assert_allclose(np.unique(pts[:, 0]), ell, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.unique(pts[:, 1]), sf, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.unique(pts[:, 2]), nz, rtol=0, atol=1e-12)
    c = 10.0
    b = GPRegressor("gaussian").fit(c * X, y)
    assert abs(b.log_ell_ - a.log_ell_ - math.log(c)) <= 1e-9 and (b.log_sf_, b.log_noise_) == (a.log_sf_, a.log_noise_)
    np.testing.assert_allclose(b.predict(c * X[:5]), a.predict(X[:5]), rtol=1e-6, atol=1e-8)
    s = GPRegressor("gaussian").fit(X, c * y)
    assert abs(s.log_sf_ - a.log_sf_ - math.log(c)) <= 1e-9 and abs(s.log_noise_ - a.log_noise_ - math.log(c)) <= 1e-9
    assert s.log_ell_ == a.log_ell_
    np.testing.assert_allclose(s.predict(X[:5]), c * a.predict(X[:5]), rtol=1e-6, atol=1e-8)
    # classifier: log_sf from its fixed grid, log_noise unused
    Xc, yc = make_classification(120, 30, n_informative=8, random_state=0)
    Xc = (Xc - Xc.mean(0)) / Xc.std(0)
    tr, te = np.arange(0, 120, 2), np.arange(1, 120, 2)
    auto = GPClassifier().fit(Xc[tr], yc[tr])
    assert sorted({p[1] for p, _ in auto.grid_}) == list(AUTO_SF_CLASSIFIER) and {p[2] for p, _ in auto.grid_} == {0.0}
    assert median_distance(Xc[tr]) == np.median(pdist(Xc[tr]))
    assert np.min(np.abs(np.log(np.median(pdist(Xc[tr]))) + np.array(AUTO_ELL) - auto.log_ell_)) <= 1e-12
    fixed = GPClassifier(log_ell=0.0, log_sf=0.0).fit(Xc[tr], yc[tr])
    def bits(est):
        p = est.predict_proba(Xc[te])[np.arange(te.size), yc[te]]
        return log_loss_bits(p)
    assert bits(fixed) > 0.95 and bits(auto) < 0.75


def test_median_distance_rows_and_ties():
    from scipy.spatial.distance import pdist

    from varopt.estimators.klprox import AUTO_ROWS, median_distance
    assert median_distance(np.ones((5, 2))) == 1.0 and median_distance(np.zeros((1, 3))) == 1.0
    X = np.r_[np.zeros((10, 1)), np.ones((3, 1))]            # most pairs coincide: the nonzero distances count
    assert median_distance(X) == 1.0
    X = np.random.default_rng(0).normal(size=(AUTO_ROWS + 500, 2))
    rows = np.linspace(0, X.shape[0] - 1, AUTO_ROWS).round().astype(int)
    assert median_distance(X) == np.median(pdist(X[rows]))
    for bad in ("Auto", "median", None):
        with pytest.raises(InputDataError, match="log_ell must be 'auto'"):
            GPClassifier(log_ell=bad).fit(X[:20], (X[:20, 0] > 0).astype(int))
