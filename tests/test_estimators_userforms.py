"""varopt's estimators used as scikit-learn users use them, on scikit-learn's bundled data sets (no network):
pandas DataFrames and categorical / string labels, ``Pipeline(StandardScaler(), est)``, ``cross_val_score``,
``GridSearchCV``, pickling, and the natural scikit-learn counterpart as the reference (same ballpark, not equality,
except where the models coincide). Each test names what failed before its fix."""
import pickle
import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
pd = pytest.importorskip("pandas")
import scipy.sparse as sps  # noqa: E402
from sklearn import datasets  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.linear_model import LogisticRegression, PoissonRegressor  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score, cross_validate  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from varopt.errors import InputDataError  # noqa: E402
from varopt.estimators import (BayesianGMMVEM, BayesianLogisticRegression, BayesianMultinomialRegression,  # noqa: E402
                               BayesianPoissonRegression, ChainCRF, GPClassifier, GPRegressor,
                               L1LogisticRegression, MajorizeLogisticRegression, NotFittedError, SparseIsing)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


def _cv(est, X, y, **kw):
    return cross_val_score(make_pipeline(StandardScaler(), est), X, y, cv=StratifiedKFold(5), **kw).mean()


def _cv_accuracy_and_log_loss(est, X, y):
    """``_cv(est, X, y)`` and ``_cv(est, X, y, scoring="neg_log_loss")`` from one fit per fold (the same
    folds and fits: the two scores of each fitted fold)."""
    s = cross_validate(make_pipeline(StandardScaler(), est), X, y, cv=StratifiedKFold(5),
                       scoring=("accuracy", "neg_log_loss"))
    return s["test_accuracy"].mean(), s["test_neg_log_loss"].mean()


# --- classifiers ------------------------------------------------------------------------------------------------
def test_breast_cancer_dataframe_and_categorical_labels_as_logistic_regression():
    """Binary classifiers on a DataFrame with a categorical Series of label names: classes_ are the names, accuracy
    and log-loss within 0.02 of scikit-learn's LogisticRegression (same penalty: C = prior variance); the posterior
    mean at a wide prior points where the MAP does."""
    X, y = datasets.load_breast_cancer(return_X_y=True, as_frame=True)
    names = pd.Series(np.where(y == 1, "benign", "malignant"), dtype="category")
    ref = _cv(LogisticRegression(max_iter=5000), X, names)
    for est in (BayesianLogisticRegression(), BayesianLogisticRegression(prior_var=[0.1, 1.0, 10.0]),
                MajorizeLogisticRegression(), GPClassifier(log_ell=2.0, log_sf=1.0)):
        assert _cv(est, X, names) >= ref - 0.02, est
    ll = _cv(BayesianLogisticRegression(prior_var=[0.1, 1.0, 10.0]), X, y, scoring="neg_log_loss")
    assert ll >= _cv(LogisticRegression(max_iter=5000), X, y, scoring="neg_log_loss") - 0.02
    pipe = make_pipeline(StandardScaler().set_output(transform="pandas"),
                         BayesianLogisticRegression(prior_var=100.0)).fit(X, names)
    est = pipe[-1]
    assert list(est.classes_) == ["benign", "malignant"] and list(est.feature_names_in_) == list(X.columns)
    assert set(pipe.predict(X)) <= {"benign", "malignant"} and pipe.score(X, names) > 0.97
    np.testing.assert_allclose(pipe.predict_proba(X).sum(axis=1), 1.0, atol=1e-12)
    lr = LogisticRegression(C=100.0, max_iter=20000).fit(pipe[0].transform(X), names)
    assert np.corrcoef(est.coef_, lr.coef_.ravel())[0, 1] > 0.95


@pytest.mark.parametrize("loader", [datasets.load_iris, datasets.load_wine])
def test_three_classes_with_string_labels(loader):
    """Iris and wine, y a categorical Series of species names: BayesianMultinomialRegression in a pipeline within
    0.03 of LogisticRegression (accuracy) and 0.05 (log-loss); a GridSearchCV over its prior variance; GPClassifier
    one-vs-rest against GaussianProcessClassifier; the binary estimators refuse three classes by name."""
    data = loader(as_frame=True)
    X = data.data
    y = pd.Series(np.asarray(data.target_names)[data.target], dtype="category")
    (acc, ll), (acc_ref, ll_ref) = (_cv_accuracy_and_log_loss(e, X, y)
                                    for e in (BayesianMultinomialRegression(), LogisticRegression(max_iter=5000)))
    assert acc >= acc_ref - 0.03
    assert ll >= ll_ref - 0.05
    gs = GridSearchCV(make_pipeline(StandardScaler(), BayesianMultinomialRegression()),
                      {"bayesianmultinomialregression__prior_var": [0.1, 1.0, 10.0]}, cv=3).fit(X, y)
    assert set(gs.predict(X)) <= set(data.target_names) and gs.score(X, y) > 0.95
    np.testing.assert_allclose(gs.predict_proba(X).sum(axis=1), 1.0, atol=1e-12)
    for est in (BayesianLogisticRegression(), L1LogisticRegression()):
        with pytest.raises(InputDataError, match="Only binary classification"):
            est.fit(X, y)
    # GPClassifier one-vs-rest, as GaussianProcessClassifier (before: "Only binary classification" on iris)
    from sklearn.gaussian_process import GaussianProcessClassifier
    gpc = GPClassifier(log_ell=[0.5, 1.5], log_sf=[1.0, 2.0])
    (acc, ll), (acc_ref, ll_ref) = (_cv_accuracy_and_log_loss(e, X, y)
                                    for e in (gpc, GaussianProcessClassifier(random_state=0)))
    assert acc >= acc_ref - 0.03
    assert ll >= ll_ref - 0.05
    pipe = make_pipeline(StandardScaler(), gpc).fit(X, y)
    assert len(pipe[-1].estimators_) == 3 and set(pipe.predict(X)) <= set(data.target_names)
    np.testing.assert_allclose(pipe.predict_proba(X).sum(axis=1), 1.0, atol=1e-12)
    binary = pipe[-1].fit(pipe[0].transform(X)[y != y.cat.categories[0]], y[y != y.cat.categories[0]])
    assert not hasattr(binary, "estimators_") and binary.classes_.size == 2    # a refit on two classes is binary


def test_digits_ten_classes_and_string_labels_of_make_classification():
    """Ten digit classes (Boehning's bound) within 0.03 of LogisticRegression; make_classification with string labels
    gives string classes_ and predictions for every classifier."""
    X, y = datasets.load_digits(return_X_y=True)
    X, y = X[:300], y[:300]
    assert _cv(BayesianMultinomialRegression(), X, y) >= _cv(LogisticRegression(max_iter=5000), X, y) - 0.03
    Xc, yc = datasets.make_classification(200, 6, n_informative=4, random_state=0)
    ys = np.array(["no", "yes"])[yc]
    for est in (BayesianLogisticRegression(), GPClassifier(log_ell=1.0, log_sf=1.0), MajorizeLogisticRegression(),
                L1LogisticRegression(alpha=0.01)):
        est.fit(Xc, ys)
        assert list(est.classes_) == ["no", "yes"] and set(est.predict(Xc)) <= {"no", "yes"}
        assert est.score(Xc, ys) > 0.65


# --- regressors -------------------------------------------------------------------------------------------------
def test_diabetes_gp_regressor_return_std_equals_scikit_learn():
    """``predict(X, return_std=True / return_cov=True)`` as scikit-learn's GaussianProcessRegressor (the same
    fixed kernel and noise: equal to 1e-9; before: TypeError on return_std); R^2 of the 'auto' grid in a
    pipeline within 0.05 of GaussianProcessRegressor with a fitted RBF + white-noise kernel."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    X, y = datasets.load_diabetes(return_X_y=True, as_frame=True)
    Xs = StandardScaler().fit_transform(X)[:120]
    ys = (y.values[:120] - y.values[:120].mean()) / y.values[:120].std()
    le, ls, ln = 1.2, 0.1, -0.7
    ours = GPRegressor(likelihood="gaussian", log_ell=le, log_sf=ls, log_noise=ln, jitter=0.0).fit(Xs[:100], ys[:100])
    ref = GaussianProcessRegressor(C(np.exp(2 * ls), "fixed") * RBF(np.exp(le), "fixed"), alpha=np.exp(2 * ln),
                                   optimizer=None).fit(Xs[:100], ys[:100])
    for kw in ({"return_std": True}, {"return_cov": True}):
        for a, b in zip(ours.predict(Xs[100:], **kw), ref.predict(Xs[100:], **kw)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    with pytest.raises(RuntimeError, match="At most one"):
        ours.predict(Xs[100:], return_std=True, return_cov=True)
    kf = sklearn.model_selection.KFold(3)
    sk = cross_val_score(make_pipeline(StandardScaler(), GaussianProcessRegressor(
        C() * RBF(3.0) + WhiteKernel(), normalize_y=True, random_state=0)), X[:240], y[:240], cv=kf).mean()
    for lik in ("gaussian", "laplace"):
        r2 = cross_val_score(make_pipeline(StandardScaler(), GPRegressor(likelihood=lik,
                                                                         log_ell=[1.0, 2.0])),
                             X[:240], y[:240] - y[:240].mean(), cv=kf).mean()
        assert r2 >= sk - 0.05, (lik, r2, sk)


def test_poisson_regression_on_counts_and_rates_as_poisson_regressor():
    """Counts derived from the diabetes target: the posterior mean at a wide prior equals PoissonRegressor's fit to
    0.02 (the same penalty: alpha = 1 / (n prior_var)), R^2 and mean Poisson deviance within 0.02 of it in a
    pipeline. Rates ``counts / exposure`` with ``sample_weight = exposure`` (PoissonRegressor's form; before: refused
    as not integer) give the exposure model's coefficients; y < 0 is refused naming y."""
    X, y = datasets.load_diabetes(return_X_y=True, as_frame=True)
    counts = np.round(y / 25)
    Xs = StandardScaler().fit_transform(X)
    ours = BayesianPoissonRegression(prior_var=100.0).fit(Xs, counts)
    ref = PoissonRegressor(alpha=1 / (100 * len(y)), max_iter=10000, tol=1e-12).fit(Xs, counts)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=0, atol=0.02)
    kf = sklearn.model_selection.KFold(5)
    for scoring in (None, "neg_mean_poisson_deviance"):
        a = cross_val_score(make_pipeline(StandardScaler(), BayesianPoissonRegression()), X, counts, cv=kf,
                            scoring=scoring).mean()
        b = cross_val_score(make_pipeline(StandardScaler(), PoissonRegressor(alpha=1e-4, max_iter=1000)), X, counts,
                            cv=kf, scoring=scoring).mean()
        assert a >= b - 0.02, (scoring, a, b)
    rng = np.random.default_rng(0)
    exposure = rng.uniform(0.5, 3.0, len(y))
    rate = rng.poisson(exposure * np.exp(0.3 * Xs[:, 2] + 0.2 * Xs[:, 8] + 1.0)) / exposure
    ours = BayesianPoissonRegression(prior_var=100.0).fit(Xs, rate, sample_weight=exposure)
    ref = PoissonRegressor(alpha=1 / (100 * exposure.sum()), max_iter=10000, tol=1e-12).fit(Xs, rate,
                                                                                           sample_weight=exposure)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=0, atol=0.01)
    with pytest.raises(InputDataError, match=r"y must be >= 0"):
        BayesianPoissonRegression().fit(Xs, y - y.mean())


# --- the Bayesian GMM -------------------------------------------------------------------------------------------
def test_bgmm_on_iris_petal_length_as_bayesian_gaussian_mixture():
    """One feature of iris as a 1-D array, a Series and a one-column DataFrame: the same fit; two components split
    setosa off as scikit-learn's BayesianGaussianMixture does (adjusted Rand index > 0.9 with it). Before: no
    validation (a two-column X, NaN, sparse input failed with the wrong message or none), no ``predict``, an
    AttributeError instead of NotFittedError."""
    from sklearn.metrics import adjusted_rand_score
    from sklearn.mixture import BayesianGaussianMixture
    X, species = datasets.load_iris(return_X_y=True, as_frame=True)
    col = X[["petal length (cm)"]]
    col = (col - col.mean()) / col.std()
    est = BayesianGMMVEM(2, variance="learned", n_restarts=10, seed=3)
    fits = [clone(est).fit(v) for v in (col, col.iloc[:, 0], col.to_numpy().ravel(), col.to_numpy())]
    for f in fits[1:]:
        np.testing.assert_array_equal(f.means_, fits[0].means_)
    assert fits[0].n_features_in_ == 1 and list(fits[0].feature_names_in_) == ["petal length (cm)"]
    lab = fits[0].predict(col)
    ref = BayesianGaussianMixture(n_components=2, random_state=0).fit(col).predict(col)
    assert adjusted_rand_score(lab, ref) > 0.9 and adjusted_rand_score(lab, species == 0) > 0.9
    np.testing.assert_allclose(fits[0].predict_proba(col).sum(axis=1), 1.0, atol=1e-12)
    assert np.array_equal(pickle.loads(pickle.dumps(fits[0])).predict(col), lab)
    # score: the mixture's log predictive density (before: no score, so GridSearchCV could not select n_components)
    from scipy.stats import norm
    from sklearn.mixture import GaussianMixture
    from sklearn.model_selection import KFold
    g = fits[0]
    sd = np.sqrt(1 / g.params_["tau"] + (g.params_["w"] / g.params_["tau"] if "w" in g.params_ else 0.0))
    dens = (g.weights_ * norm.pdf(col.to_numpy(), g.means_, sd)).sum(axis=1)
    np.testing.assert_allclose(g.score_samples(col), np.log(dens), rtol=1e-12)
    assert abs(g.score(col) - GaussianMixture(2, covariance_type="tied", random_state=0).fit(col).score(col)) < 0.01
    gs = GridSearchCV(BayesianGMMVEM(variance="learned", n_restarts=5), {"n_components": [1, 2]},
                      cv=KFold(3, shuffle=True, random_state=0)).fit(col)
    assert gs.best_params_ == {"n_components": 2}
    with pytest.raises(NotFittedError):
        clone(est).predict(col)
    for bad, msg in ((X.iloc[:, :2], "one-dimensional data.*2 columns"), (np.r_[col.to_numpy().ravel(), np.nan],
                                                                            "NaN"),
                     (sps.csr_matrix(col.to_numpy()), "[Ss]parse")):
        with pytest.raises((ValueError, TypeError), match=msg):
            clone(est).fit(bad)
    with pytest.raises(ValueError, match="features"):
        fits[0].predict(X.iloc[:, :2].to_numpy())


# --- SparseIsing ------------------------------------------------------------------------------------------------
def _spins(n=8):
    """Spins from breast-cancer features: each of the first ``n`` above its median (+1) or not (-1)."""
    X = datasets.load_breast_cancer(as_frame=True).data.iloc[:, :n]
    return (X > X.median()).astype(int) * 2 - 1


def test_sparse_ising_follows_scikit_learn_conventions_on_spin_data():
    """SparseIsing was a plain class (no tags: scikit-learn's check_estimator and clone-based tools raised). Now:
    get_params/clone, fit returns self and leaves its parameters unchanged, n_features_in_ and feature names of a
    DataFrame, the same fit from sparse 0/1 data and from shuffled rows, pickling, NotFittedError before fit, NaN and
    a wrong column count refused by name; the exact log-likelihood beats the independent-spins model's."""
    S = _spins()
    est = SparseIsing(rho=0.05)
    params = est.get_params()
    assert est.fit(S) is est and est.get_params() == params and clone(est).get_params() == params
    assert est.n_features_in_ == 8 and list(est.feature_names_in_) == list(S.columns)
    perm = np.random.default_rng(1).permutation(len(S))
    again = clone(est).fit(S.to_numpy()[perm])
    np.testing.assert_allclose(again.coef_, est.coef_, rtol=0, atol=1e-8)
    sparse01 = clone(est).fit(sps.csr_matrix((S.to_numpy() > 0).astype(float)))
    np.testing.assert_allclose(sparse01.coef_, est.coef_, rtol=0, atol=1e-8)
    twin = pickle.loads(pickle.dumps(est))
    assert twin.score(S) == est.score(S)
    p = (S.to_numpy() > 0).mean(axis=0)
    independent = float(np.sum(p * np.log(p) + (1 - p) * np.log(1 - p)))
    assert est.score(S) > independent + 0.5          # correlated features: pairs carry information
    with pytest.raises(NotFittedError):
        SparseIsing().score(S)
    bad = S.to_numpy().astype(float)
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clone(est).fit(bad)
    with pytest.raises(ValueError, match="features"):
        est.score(S.to_numpy()[:, :5])
    for rho in (0.0, "0.1", float("nan"), True):
        with pytest.raises(InputDataError, match="rho must be a positive number"):
            SparseIsing(rho=rho).fit(S)


# --- ChainCRF ---------------------------------------------------------------------------------------------------
def _corpus(n, seed):
    """Tagged sentences of a small seeded grammar (ambiguous words: 'run', 'light')."""
    rng = np.random.default_rng(seed)
    lex = {"DET": ["the", "a", "this"], "ADJ": ["big", "red", "old", "light"], "NOUN": ["dog", "car", "run", "light"],
           "VERB": ["sees", "runs", "likes", "run", "light"], "NUM": ["2", "17", "300"], "PROPN": ["Anna", "Bob"]}
    X, Y = [], []
    for _ in range(n):
        tags = ["PROPN"] if rng.random() < 0.4 else ["DET"] + ["ADJ"] * int(rng.integers(0, 3)) + ["NOUN"]
        tags += ["VERB"] + (["NUM", "NOUN"] if rng.random() < 0.3 else ["DET", "NOUN"])
        X.append([str(rng.choice(lex[t])) for t in tags])
        Y.append(tags)
    return X, Y


def _word2features(sent, i):
    """The scikit-learn-crfsuite tutorial's feature dict of token i (strings, booleans, a float)."""
    w = sent[i]
    f = {"bias": 1.0, "word.lower()": w.lower(), "word[-3:]": w[-3:], "word.istitle()": w.istitle(),
         "word.isdigit()": w.isdigit()}
    if i > 0:
        f["-1:word.lower()"] = sent[i - 1].lower()
    else:
        f["BOS"] = True
    if i < len(sent) - 1:
        f["+1:word.lower()"] = sent[i + 1].lower()
    else:
        f["EOS"] = True
    return f


def _names(sent, t):
    """Template giving the feature names the dict of ``_word2features`` holds (value 1 each), for the reference."""
    out = []
    for k, v in _word2features(sent, t).items():
        if isinstance(v, str):
            out.append(f"{k}:{v}")
        elif v:
            out.append(k)
    return out


def test_chain_crf_takes_scikit_learn_crfsuite_feature_dicts():
    """X as a list of sentences of feature dicts, y as lists of label strings (scikit-learn-crfsuite's format): the
    fit equals the one from templates giving the same features (before: each dict became the one opaque feature
    'w={...}', a different, memorising model); cross_val_score and GridSearchCV over lam work on the lists; the
    fitted CRF pickles (before: its default template was a local function); a per-token LogisticRegression on the
    same dicts is no better; a classifier's y, NaN feature values and other value types are refused by name."""
    from sklearn.feature_extraction import DictVectorizer
    S, T = _corpus(150, 0)
    St, Tt = _corpus(80, 1)
    Xd = [[_word2features(s, i) for i in range(len(s))] for s in S]
    Xt = [[_word2features(s, i) for i in range(len(s))] for s in St]
    crf = ChainCRF(method="lbfgs", lam=0.5, max_iter=200, tol=1e-12).fit(Xd, T)
    ref = ChainCRF(method="lbfgs", lam=0.5, max_iter=200, tol=1e-12, templates=[_names]).fit(S, T)
    assert crf.vocab_ == ref.vocab_
    np.testing.assert_allclose(crf.theta_, ref.theta_, rtol=0, atol=1e-6)
    assert crf.predict(Xt) == ref.predict(St)
    names = ChainCRF(method="lbfgs", lam=0.5, max_iter=200, tol=1e-12).fit(
        [[_names(s, i) for i in range(len(s))] for s in S], T)        # python-crfsuite's list-of-names items
    np.testing.assert_allclose(names.theta_, ref.theta_, rtol=0, atol=1e-6)
    acc = crf.score(Xt, Tt)
    dv = DictVectorizer()
    flat = lambda seqs: [item for seq in seqs for item in seq]      # noqa: E731
    lr = LogisticRegression(max_iter=2000).fit(dv.fit_transform(flat(Xd)), flat(T))
    assert acc >= lr.score(dv.transform(flat(Xt)), flat(Tt)) - 1e-9 and acc > 0.9
    assert cross_val_score(ChainCRF(method="lbfgs", max_iter=50), Xd, T, cv=3).mean() > 0.9
    gs = GridSearchCV(ChainCRF(method="lbfgs", max_iter=50), {"lam": [0.01, 1.0]}, cv=3).fit(Xd, T)
    assert gs.best_params_["lam"] in (0.01, 1.0)
    plain = ChainCRF(max_iter=20).fit(S, T)
    assert pickle.loads(pickle.dumps(plain)).predict(St) == plain.predict(St)
    for X, Y, msg in ((np.zeros((3, 4)), np.zeros(3), r"Y\[0\] must be a list of tags"),
                      ([[{"w": float("nan")}]], [["A"]], "feature 'w' of token 0 has the value nan"),
                      ([[{"w": object()}]], [["A"]], "value of type object"),
                      (sps.csr_matrix(np.ones((2, 2))), [["A", "B"]] * 2, "sparse input is not supported")):
        with pytest.raises(InputDataError, match=msg):
            ChainCRF(max_iter=2).fit(X, Y)
