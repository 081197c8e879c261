r"""scikit-learn style estimators over the ``klprox`` solver (Khan, Baque, Fleuret & Fua 2015).

* :class:`BayesianLogisticRegression` (binary, ``w ~ N(0, prior_var I)``, intercept with the same
  prior), :class:`BayesianMultinomialRegression` (softmax over K <= 4 classes, one weight vector per
  class), :class:`BayesianPoissonRegression`: Bayesian GLMs (:func:`.bayes_glm.glm_program`); ``fit`` takes
  ``sample_weight`` (each sample's -log likelihood times its weight).
* :class:`GPClassifier` (logistic likelihood; one-vs-rest for more than two classes) and :class:`GPRegressor` (``laplace`` or ``gaussian``
  likelihood): squared-exponential GP (:func:`.bayes_glm.gp_program`).

Hyperparameters given as lists (``prior_var``; ``log_ell``, ``log_sf``, ``log_noise``) are selected by
the ELBO (the marginal-likelihood bound, as in the paper) over their grid, each point warm-started from the
previous (GP: from its neighbours in every direction, in ``n_jobs`` processes; :mod:`.klprox_grid`); the fitted attributes are
``coef_``/``intercept_`` or ``f_mean_``, the posterior mean ``mean_``, covariance ``covariance_``,
``neg_elbo_`` (the paper's Neg-Log-Lik), ``grid_`` (value per grid point) and ``result_``.

Predictive distributions: for a predictor ``f* ~ N(mt, vt)``, logistic ``p(y=1) = E[sigmoid(f*)]``,
multinomial ``p(y=k) = E[softmax_k(f*)]`` over the K-dimensional predictor (the softmax rule of
:mod:`varopt.solvers.klprox.expectations` on the differences to class 0)
(quadrature of :mod:`varopt.solvers.klprox.expectations`), Poisson mean ``E[exp f*] = exp(mt + vt/2)``,
Laplace density ``E[exp(-|y - f*|/b)] / (2b)`` (closed form). GP: ``f* | v`` with ``f = L v``:
``a* = L^-1 k*``, ``mt = a*^T m``, ``vt = a*^T V a* + k** - |a*|^2``.
"""
from __future__ import annotations

import math
import sys
import warnings

import numpy as np
from scipy.special import log_ndtr

from ..core.threads import blas_threads, option_threads
from ..errors import InputDataError
from ..registry import get_solver
from ..solvers.klprox.expectations import MAX_SOFTMAX_DIM, family_table
from ..solvers.klprox.solver import SOFTMAX_INACCURATE
from .base import ClassifierMixin, RegressorMixin, VaroptEstimator, check_flag
from ..formulations.bayes_glm import (check_data, check_weights, design, glm_program, gp_factor, gp_program,
                                      se_kernel)
from .klprox_grid import LongGridWarning, accept_run, check_n_jobs, grid_search  # noqa: F401 (users filter it)


def _is_auto(v):
    return isinstance(v, str) and v == "auto"


def _grid(name, v):
    """A hyperparameter given as a number or a list of them (a grid), as a list of finite floats."""
    try:
        g = np.atleast_1d(np.asarray(v, dtype=float))
    except (TypeError, ValueError):
        g = None
    if g is None or g.ndim != 1 or g.size == 0 or not np.all(np.isfinite(g)):
        auto = "'auto', " if name in ("log_ell", "log_sf", "log_noise") else ""
        raise InputDataError(f"{name} must be {auto}a finite number or a non-empty list of them, got {v!r}")
    return list(g)


class _Base(VaroptEstimator):
    """scikit-learn conventions through :class:`.base.VaroptEstimator` (``get_params``/``set_params``, ``clone``,
    ``score`` from the classifier/regressor mixin, ``NotFittedError``, scikit-learn's input validation; sparse
    ``X`` is accepted and densified: the solver's covariance is dense in the weights anyway)."""

    _solver_options: dict = None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _inputs(self, X, y):
        """``(X, y)`` validated as scikit-learn does (``n_features_in_`` set); ``X`` dense float."""
        X, y = self._validate(X, y, reset=True, accept_sparse=True, classifier=isinstance(self, ClassifierMixin))
        return (X.toarray() if hasattr(X, "toarray") else X), y

    def _new_inputs(self, X, fitted_attr):
        """New inputs to predict at: fitted estimator, same number of features, finite, dense."""
        self._check_fitted(fitted_attr)
        X = self._validate(X, reset=False, accept_sparse=True, with_y=False)
        return X.toarray() if hasattr(X, "toarray") else X

    def _default_options(self) -> dict:
        """Solver options this estimator sets unless ``solver_options`` gives them."""
        return {}

    def _options(self, warm=None) -> dict:
        opts = dict(self.solver_options or {})
        for k, v in self._default_options().items():
            opts.setdefault(k, v)
        if warm is not None:
            opts.setdefault("warm_start", warm)  # the previous grid point: a start, kept only if better
        return opts

    def _solve(self, program, warm=None):
        opts = self._options(warm)
        return accept_run(get_solver("klprox").solve(program, **opts), opts)


class _GLM(_Base):
    likelihood = ""
    _classes = None

    def __init__(self, prior_var=1.0, fit_intercept=True, solver_options=None):
        self.prior_var = prior_var
        self.fit_intercept = fit_intercept
        self.solver_options = solver_options

    def fit(self, X, y, sample_weight=None):
        """Fit the posterior; ``sample_weight`` (n_samples values >= 0) multiplies each sample's -log likelihood
        (a weight of 2 is the sample twice, 0 leaves it out)."""
        check_flag("fit_intercept", self.fit_intercept)
        X, y = self._inputs(X, y)
        self._sample_weight = check_weights(sample_weight, X.shape[0])
        return self._fit(X, self._targets(y))

    def _targets(self, y):
        """The likelihood's numeric targets of validated labels ``y`` (classifiers set ``classes_``)."""
        return y

    def _fit(self, X, y):
        X, y = check_data(X, y, self.likelihood)
        best, self.grid_, r = None, [], None
        for d in _grid("prior_var", self.prior_var):
            r = self._solve(glm_program(X, y, self.likelihood, prior_var=d, fit_intercept=self.fit_intercept,
                                        classes=self._classes, sample_weight=getattr(self, "_sample_weight", None)), r)
            self.grid_.append((d, r.objective))
            if best is None or r.objective < best[1].objective:
                best = (d, r)
        self.prior_var_, self.result_ = best
        r = self.result_
        self.mean_, self.covariance_, self.neg_elbo_ = r.x, r.info["covariance"], r.objective
        d = X.shape[1]
        self.coef_, self.intercept_ = r.x[:d], (r.x[d] if self.fit_intercept else 0.0)
        self.n_features_in_ = d
        return self

    def _design(self, X):
        """The checked design matrix of new inputs (intercept column included)."""
        return design(self._new_inputs(X, "mean_"), self.fit_intercept)

    def _predictor(self, X):
        F = self._design(X)
        return F @ self.mean_, np.einsum("ij,jk,ik->i", F, self.covariance_, F)


class _BinaryLogistic:
    """Two labels in ``classes_``, a logistic likelihood of the latent predictor ``f`` (``_latent(X)``: its
    posterior mean and variance), and ``p(y = classes_[1] | x) = E_q[sigmoid(f)]``."""

    likelihood = "logistic"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False      # two labels; BayesianMultinomialRegression for more
        return tags

    def _targets(self, y):
        return self._binary_targets(y)

    def _binary_targets(self, y):
        y = np.asarray(y)
        self.classes_ = np.unique(y)
        n = self.classes_.size
        if n > 2:   # scikit-learn's wording for binary-only classifiers
            raise InputDataError(f"Only binary classification is supported. y has {n} classes "
                                 "(BayesianMultinomialRegression fits more)")
        if n < 2:
            raise InputDataError(f"binary classification needs two classes, got {n} class{'' if n == 1 else 'es'}")
        return (y == self.classes_[1]).astype(float)

    def predict_proba(self, X):
        mt, vt = self._latent(X)
        p = family_table()["logistic"].expect(mt, np.maximum(vt, 1e-300))[1]
        return np.column_stack([1 - p, p])

    def predict(self, X):
        p1 = self.predict_proba(X)[:, 1]      # first: it checks that the estimator is fitted
        return self.classes_[(p1 > 0.5).astype(int)]


class BayesianLogisticRegression(_BinaryLogistic, ClassifierMixin, _GLM):
    """Binary Bayesian logistic regression; labels ``y`` in ``classes_`` (two values)."""

    def _latent(self, X):
        return self._predictor(X)


class BayesianMultinomialRegression(ClassifierMixin, _GLM):
    """Bayesian multinomial (softmax) logistic regression: ``p(y = k | x, W) = softmax(W^T x)_k``, one weight
    vector per class with prior ``N(0, prior_var I)`` (and intercepts). ``coef_`` is K x n_features and
    ``intercept_`` has K entries (scikit-learn's layout); ``mean_``/``covariance_`` are over the weights
    class by class. For K <= 4 the ELBO's softmax expectation is a (K-1)-dimensional quadrature; for more
    classes the fit uses Boehning's quadratic bound on the log-sum-exp (``softmax='bound'``: it maximises a lower
    bound on the ELBO, whose mean is the MAP estimate and whose covariance is the inverse of the prior precision
    plus the bound's constant curvature; Boehning 1992, docs/klprox.md "Newton mean step"), and ``predict_proba``
    uses a fixed-seed Sobol rule. ``softmax_`` says which was used; ``solver_options={'softmax': ...}``
    overrides the choice."""

    likelihood = "multinomial"

    def _targets(self, y):
        self.classes_, codes = np.unique(np.asarray(y), return_inverse=True)
        if self.classes_.size < 2:
            n = self.classes_.size   # scikit-learn's wording ("1 class"), which its checks and users look for
            raise InputDataError(f"classification needs at least two classes, got {n} class{'' if n == 1 else 'es'}")
        self._classes = self.classes_.size
        return codes.astype(float)

    def _default_options(self):
        return {"softmax": "bound"} if self._classes - 1 > MAX_SOFTMAX_DIM else {}

    def _solve(self, program, warm=None):
        """The klprox run; under the default quadrature, a run that fails (status ``error``) where the quadrature is
        inaccurate at its last posterior (predictor standard deviations in the tens to hundreds: nearly separable
        classes under a wide prior) is repeated with Boehning's bound, with a RuntimeWarning (the quadrature cannot
        resolve that ELBO; the bound's objective is an upper bound on -ELBO, compared as such across a prior_var grid)."""
        opts = self._options(warm)
        r = get_solver("klprox").solve(program, **opts)
        err = r.info.get("softmax_quadrature_error")
        if (r.status == "error" and "softmax" not in (self.solver_options or {}) and err is not None
                and err > SOFTMAX_INACCURATE * max(1.0, abs(r.objective))):
            warnings.warn(f"BayesianMultinomialRegression: the softmax quadrature cannot resolve this ELBO (largest "
                          f"predictor standard deviation {r.info['softmax_sd_max']:.3g}, -ELBO error {err:.1e}; klprox: "
                          f"{r.message}); fitted with softmax='bound' instead (Boehning's bound: an upper bound on "
                          "-ELBO). A smaller prior_var keeps the quadrature; solver_options={'softmax': 'bound'} skips "
                          "the attempt", RuntimeWarning, stacklevel=4)
            opts["softmax"] = "bound"
            r = get_solver("klprox").solve(program, **opts)
        return accept_run(r, opts)

    def _fit(self, X, y):
        super()._fit(X, y)
        self.softmax_ = self.result_.info.get("softmax", "quadrature")
        return self

    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight)
        K, d = self.classes_.size, self.n_features_in_
        Wm = self.mean_.reshape(K, -1)
        self.coef_ = Wm[:, :d]
        self.intercept_ = Wm[:, d] if self.fit_intercept else np.zeros(K)
        return self

    def _predictors(self, X):
        """Mean (n, K) and covariance (n, K, K) of the class scores ``f*_k = x^T w_k (+ b_k)``."""
        F = self._design(X)
        K, p = self.classes_.size, F.shape[1]
        mt = F @ self.mean_.reshape(K, p).T
        C = self.covariance_.reshape(K, p, K, p)
        Vt = np.einsum("nj,kjlm,nm->nkl", F, C, F)
        return mt, Vt

    def predict_proba(self, X):
        mt, Vt = self._predictors(X)
        # differences to class 0: d = T f with T = [-1 | I]; E[softmax] of (0, d) is E[softmax(f)]
        K = mt.shape[1]
        if K - 1 > MAX_SOFTMAX_DIM:
            return _qmc_softmax(mt, Vt)
        T = np.hstack([-np.ones((K - 1, 1)), np.eye(K - 1)])
        fam = family_table()["softmax"]
        _, p, _ = fam.expect_group(mt @ T.T, np.einsum("ij,njk,lk->nil", T, Vt, T))
        return np.column_stack([1.0 - p.sum(axis=1), p])

    def predict(self, X):
        k = np.argmax(self.predict_proba(X), axis=1)      # first: it checks that the estimator is fitted
        return self.classes_[k]


def _qmc_softmax(mt, Vt, m=14):
    """``E[softmax(f)]``, ``f ~ N(mt_n, Vt_n)``, for K > 4 classes (fitted with ``softmax='bound'``): a
    scrambled Sobol rule of ``2^m`` points with a fixed seed (deterministic; error ~1e-4), since the tensor
    rule does not reach its accuracy beyond 4 classes."""
    from scipy.stats import norm, qmc
    K = mt.shape[1]
    Z = norm.ppf(qmc.Sobol(K, scramble=True, seed=0).random_base2(m))
    lam, Q = np.linalg.eigh(0.5 * (Vt + np.swapaxes(Vt, 1, 2)))
    S = Q * np.sqrt(np.maximum(lam, 0.0))[:, None, :]          # Vt_n = S_n S_n^T
    out = np.empty_like(mt)
    step = max(1, 2 ** 22 // (Z.shape[0] * K))                # rows per chunk: about 32 MB of samples
    for a in range(0, mt.shape[0], step):
        F = mt[a:a + step, None, :] + np.einsum("pk,njk->npj", Z, S[a:a + step])
        F -= F.max(axis=2, keepdims=True)
        np.exp(F, out=F)
        F /= F.sum(axis=2, keepdims=True)
        out[a:a + step] = F.mean(axis=1)
    return out


class BayesianPoissonRegression(RegressorMixin, _GLM):
    """Bayesian Poisson regression with the log link: ``y_n ~ Poisson(exp(x_n^T w + b))``, prior
    ``w ~ N(0, prior_var I)`` (the intercept too when ``fit_intercept``); the Gaussian posterior of the -log joint
    ``sum_n [exp(f_n) - y_n f_n] + |w|^2 / (2 prior_var)`` by KL-proximal VI (Khan, Baque, Fleuret & Fua 2015).
    ``y`` holds counts, or rates (any ``y >= 0``, as scikit-learn's ``PoissonRegressor``: ``y = counts / exposure``
    with ``sample_weight = exposure`` gives the counts' fit; ``log y!`` of the ELBO is then ``log Gamma(y + 1)``).
    Fitted: ``coef_``, ``intercept_``, ``mean_``, ``covariance_``, ``neg_elbo_``, ``grid_``, ``result_``;
    ``predict`` is the posterior predictive mean ``exp(mt + vt/2)``."""
    likelihood = "poisson"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True      # y >= 0 (scikit-learn's PoissonRegressor sets the same tag)
        return tags

    def predict(self, X):
        """Posterior predictive mean ``E[exp f*]``."""
        mt, vt = self._predictor(X)
        return np.exp(mt + 0.5 * vt)


def _stderr_line(line):
    """A progress line of ``verbose`` (stderr, flushed: a long grid shows each point as it ends)."""
    print(line, file=sys.stderr, flush=True)


def _gp_build(X, y, likelihood, jitter, log_ell, log_sf, log_noise):
    """The whitened GP program at one grid point (module level: sent to the grid's worker processes)."""
    return gp_program(X, y, likelihood, log_ell, log_sf, math.exp(log_noise), jitter)[0]


#: ``"auto"`` grids, as offsets (natural log) from the data's scales; see :func:`auto_grid`
AUTO_ELL = (-1.0, -0.5, 0.0, 0.5, 1.0)
AUTO_SF_CLASSIFIER = (0.0, 1.0, 2.0, 3.0)
AUTO_SF_REGRESSOR = (-1.0, 0.0)
AUTO_NOISE = (-3.0, -2.0, -1.0, 0.0)
#: rows used for the median distance of the ``"auto"`` length scale (evenly spaced, so the grid is deterministic)
AUTO_ROWS = 1000


def median_distance(X):
    """The median of the nonzero Euclidean distances between rows of ``X`` (at most :data:`AUTO_ROWS` evenly spaced
    rows); ``1.0`` when all rows coincide."""
    from scipy.spatial.distance import pdist
    if X.shape[0] > AUTO_ROWS:
        X = X[np.linspace(0, X.shape[0] - 1, AUTO_ROWS).round().astype(int)]
    d = pdist(X) if X.shape[0] > 1 else np.zeros(0)
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def auto_grid(name, X, y, classifier):
    """The ``"auto"`` grid of a GP hyperparameter (natural logs), selected by the ELBO like any grid.

    * ``log_ell``: ``log`` of the median distance between training inputs (the usual median heuristic) plus
      :data:`AUTO_ELL` — a fixed length of 1 on inputs of many standardized features makes every pair of inputs
      nearly uncorrelated (30 features: ``k(x, x') ~ e^-30``) and the predictions revert to the prior.
    * ``log_sf``: classifier :data:`AUTO_SF_CLASSIFIER` (latent scales 1, e, e², e³ on the logit scale); regressor
      ``log std(y)`` plus :data:`AUTO_SF_REGRESSOR`.
    * ``log_noise`` (regressor): ``log std(y)`` plus :data:`AUTO_NOISE` (noise 5 %–100 % of the spread of ``y``).
    The GP prior has mean zero: centre ``y`` of a regression (as ``GaussianProcessRegressor``'s ``normalize_y``)."""
    if name == "log_ell":
        return list(math.log(median_distance(X)) + np.asarray(AUTO_ELL))
    if name == "log_sf" and classifier:
        return list(AUTO_SF_CLASSIFIER)
    sd = float(np.std(y))
    base = math.log(sd) if sd > 0 else 0.0
    return list(base + np.asarray(AUTO_SF_REGRESSOR if name == "log_sf" else AUTO_NOISE))


class _GP(_Base):
    """Grids of ``log_ell x log_sf x log_noise`` are solved by :func:`.klprox_grid.grid_search`: each point
    warm-started from its solved neighbours in every direction, in ``n_jobs`` processes (the same values as
    serially), to stationarity residuals 1e-4 (-ELBO within ~1e-8 of each point's optimum), and the selected point
    continued to the solver's ``gtol``. ``"auto"`` (the default) is a grid around the data's scales
    (:func:`auto_grid`): 20 fits for the classifier, 40 for the regressor; numbers instead of ``"auto"`` give one fit.

    Cost: every klprox iteration factors N x N matrices (a Cholesky factor, its inverse and a triangular product:
    about ``2 N^3`` flops), and a fit takes 5-80 iterations per grid point (Laplace and large ``log_sf`` the most).
    Measured on one BLAS thread (friedman1, 5 features; moons), whole ``"auto"`` grids: N = 500 in 0.7 s (Gaussian),
    4-5 s (classifier, Laplace); N = 1000 in 4 s, 24-34 s; one grid point at N = 2000 in 1 s / 10-15 s, at
    N = 4000 about 8x that. ``verbose=True`` prints a line per grid point (value, iterations, time, time left) to
    stderr; a grid whose first point predicts more than a minute warns (``LongGridWarning``) with the estimate.
    ``n_jobs`` spreads the points over processes."""

    likelihood = ""

    def __init__(self, log_ell="auto", log_sf="auto", log_noise="auto", jitter=1e-8, solver_options=None,
                 n_jobs=None, verbose=False):
        self.log_ell, self.log_sf, self.log_noise = log_ell, log_sf, log_noise
        self.jitter = jitter
        self.solver_options = solver_options
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _fit(self, X, y):
        X, y = check_data(X, y, self.likelihood)
        check_n_jobs(self.n_jobs)
        clf = isinstance(self, ClassifierMixin)
        grids = tuple([0.0] if k == "log_noise" and clf        # unused by the logistic likelihood
                      else auto_grid(k, X, y, clf) if _is_auto(getattr(self, k))
                      else _grid(k, getattr(self, k)) for k in ("log_ell", "log_sf", "log_noise"))
        if not (isinstance(self.verbose, (bool, np.bool_, int, np.integer)) and self.verbose >= 0):
            raise InputDataError(f"verbose must be True, False or an integer >= 0, got {self.verbose!r}")
        names = ("log_ell", "log_sf") if clf else ("log_ell", "log_sf", "log_noise")
        self.grid_, best, self.result_ = grid_search(_gp_build, (X, y, self.likelihood, self.jitter), grids,
                                                     self.solver_options, self.n_jobs,
                                                     _stderr_line if self.verbose else None, names,
                                                     f"{type(self).__name__}(N={X.shape[0]})")
        self.log_ell_, self.log_sf_, self.log_noise_ = best
        with blas_threads(option_threads((self.solver_options or {}).get("blas_threads"), 1)):   # as the grid's
            self.L_ = gp_factor(X, self.log_ell_, self.log_sf_, self.jitter)[0]
        r = self.result_
        self.X_train_ = X
        self.mean_, self.covariance_, self.neg_elbo_ = r.x, r.info["covariance"], r.objective
        self.f_mean_ = self.L_ @ r.x
        return self

    def latent(self, X):
        """Mean and variance of the latent ``f(x)`` at new inputs."""
        X = self._new_inputs(X, "X_train_")
        import scipy.linalg as sla
        Ks = se_kernel(self.X_train_, X, self.log_ell_, self.log_sf_)
        a = sla.solve_triangular(self.L_, Ks, lower=True)                 # L^-1 k*, one column per input
        mt = a.T @ self.mean_
        kss = math.exp(2 * self.log_sf_)
        vt = np.einsum("ij,ik,kj->j", a, self.covariance_, a) + kss - np.einsum("ij,ij->j", a, a)
        return mt, np.maximum(vt, 0.0)


class GPClassifier(_BinaryLogistic, ClassifierMixin, _GP):
    """GP classification with a logistic likelihood (``log_noise`` unused); grids, ``n_jobs`` and ``verbose`` as in
    :class:`GPRegressor`. More than two classes are fitted one-vs-rest, as scikit-learn's
    ``GaussianProcessClassifier`` does: ``estimators_`` holds one binary GP per class (class ``k`` against the
    others, its own hyperparameters selected on its grid), ``predict_proba`` normalises their ``p(y = k)``, and
    ``neg_elbo_`` is their sum; the binary fit's attributes (``mean_``, ``log_ell_``, ...) are those of each
    ``estimators_[k]``."""

    def __init__(self, log_ell="auto", log_sf="auto", jitter=1e-8, solver_options=None, n_jobs=None, verbose=False):
        super().__init__(log_ell, log_sf, 0.0, jitter, solver_options, n_jobs, verbose)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True        # one-vs-rest
        return tags

    def fit(self, X, y):
        X, y = self._inputs(X, y)
        classes = np.unique(y)
        if classes.size <= 2:
            self.__dict__.pop("estimators_", None)
            return self._fit(X, self._binary_targets(y))
        for a in ("mean_", "covariance_", "L_", "X_train_", "f_mean_", "result_", "grid_", "log_ell_", "log_sf_",
                  "log_noise_"):
            self.__dict__.pop(a, None)                 # a previous binary fit's: they no longer describe the model
        self.classes_ = classes
        self.estimators_ = []
        for c in classes:
            est = GPClassifier(**self.get_params())
            est.n_features_in_ = self.n_features_in_
            est.classes_ = np.array([0, 1])
            self.estimators_.append(est._fit(X, (y == c).astype(float)))
        self.neg_elbo_ = float(sum(e.neg_elbo_ for e in self.estimators_))
        return self

    def predict_proba(self, X):
        if not hasattr(self, "estimators_"):
            return super().predict_proba(X)
        self._check_fitted("estimators_")
        X = self._new_inputs(X, "estimators_")
        P = np.column_stack([e.predict_proba(X)[:, 1] for e in self.estimators_])
        return P / P.sum(axis=1, keepdims=True)

    def predict(self, X):
        if not hasattr(self, "estimators_"):
            return super().predict(X)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def _latent(self, X):
        return self.latent(X)


class GPRegressor(RegressorMixin, _GP):
    """GP regression with a ``laplace`` (noise std ``exp(log_noise)``) or ``gaussian`` likelihood. Lists of
    ``log_ell``, ``log_sf``, ``log_noise`` form a grid selected by the ELBO; ``n_jobs`` (scikit-learn's
    convention) solves it in that many processes with the serial fit's values; ``verbose`` prints a line per grid
    point. Cost: O(N^3) per iteration and grid point (see the class's base, ``_GP``: N = 1000 with the default grid
    takes about 4 s Gaussian and 35 s Laplace on one core)."""

    def __init__(self, likelihood="laplace", log_ell="auto", log_sf="auto", log_noise="auto", jitter=1e-8,
                 solver_options=None, n_jobs=None, verbose=False):
        super().__init__(log_ell, log_sf, log_noise, jitter, solver_options, n_jobs, verbose)
        self.likelihood = likelihood

    def fit(self, X, y):
        if self.likelihood not in ("laplace", "gaussian"):
            raise InputDataError(f"GPRegressor likelihood must be 'laplace' or 'gaussian', got {self.likelihood!r}")
        return self._fit(*self._inputs(X, y))

    def predict(self, X, return_std=False, return_cov=False):
        """Posterior mean of the latent ``f`` at ``X``; with ``return_std`` also its standard deviation, with
        ``return_cov`` its covariance (scikit-learn's ``GaussianProcessRegressor.predict``, which leaves the noise
        of its ``alpha`` out the same way; :meth:`log_predictive_density` includes the likelihood).
        ``cov(f*) = K** - A^T A + A^T V A`` with ``A = L^-1 K(X_train, X)``."""
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        if not return_cov:
            mt, vt = self.latent(X)
            return (mt, np.sqrt(vt)) if return_std else mt
        import scipy.linalg as sla
        X = self._new_inputs(X, "X_train_")
        a = sla.solve_triangular(self.L_, se_kernel(self.X_train_, X, self.log_ell_, self.log_sf_), lower=True)
        cov = se_kernel(X, X, self.log_ell_, self.log_sf_) - a.T @ a + a.T @ self.covariance_ @ a
        return a.T @ self.mean_, 0.5 * (cov + cov.T)

    def log_predictive_density(self, X, y):
        """``log p(y* | data)`` per test point under ``q`` (closed forms)."""
        mt, vt = self.latent(X)
        y = np.asarray(y, dtype=float)
        s = math.exp(self.log_noise_)
        if self.likelihood == "gaussian":
            v = vt + s * s
            return -0.5 * (np.log(2 * math.pi * v) + (y - mt) ** 2 / v)
        return laplace_log_predictive(y, mt, vt, s)


def laplace_log_predictive(y, mt, vt, s):
    """``log E[p(y | f)]`` for the Laplace likelihood with standard deviation ``s`` and
    ``f ~ N(mt, vt)``: ``E[exp(-|y - f|/b)]/(2b)``, ``b = s/sqrt(2)``, as two one-sided Gaussian
    integrals in log space."""
    b = s / math.sqrt(2.0)
    sd = np.sqrt(np.maximum(vt, 1e-300))
    d = y - mt
    t1 = -d / b + vt / (2 * b * b) + log_ndtr(d / sd - sd / b)
    t2 = d / b + vt / (2 * b * b) + log_ndtr(-d / sd - sd / b)
    return np.logaddexp(t1, t2) - math.log(2 * b)


def log_loss_bits(p_true):
    """The paper's log-loss ``-sum_n log2 p_n / N`` (1 = coin flipping for binary labels)."""
    p_true = np.asarray(p_true, dtype=float)
    return float(-np.mean(np.log2(np.maximum(p_true, 1e-300))))
