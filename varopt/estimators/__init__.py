"""scikit-learn estimators on varopt's solvers (one base class, :mod:`.base`).

* :class:`L1LeastSquares`, :class:`L1LogisticRegression`: on-line L1-regularised learning with
  ``ipsa`` (Carbonetto 2009, §2.5), ``fit`` and ``partial_fit``;
* :class:`MajorizeLogisticRegression`: L2 logistic regression by bound majorization (Jebara &
  Choromanska 2012);
* :class:`ChainCRF`: linear-chain CRF fitted by majorization or L-BFGS;
* :class:`BayesianGMMVEM`: the variational-EM baseline for Bayesian Gaussian mixtures;
* :class:`BayesianLogisticRegression`, :class:`BayesianMultinomialRegression`,
  :class:`BayesianPoissonRegression`, :class:`GPClassifier`, :class:`GPRegressor`: Gaussian posteriors by
  KL-proximal VI (Khan, Baque, Fleuret & Fua 2015; module :mod:`.klprox`);
* :class:`SparseIsing`: sparse Ising learning by L1-penalised maximum likelihood with ``proxsg``
  (Honorio 2012; module :mod:`.sparse_ising`).
"""
from .base import NotFittedError, VaroptEstimator
from .l1 import L1LeastSquares, L1LogisticRegression
from .logistic import MajorizeLogisticRegression


_KLPROX = ("BayesianLogisticRegression", "BayesianMultinomialRegression", "BayesianPoissonRegression",
           "GPClassifier", "GPRegressor")


def __getattr__(name):
    # imported on first use: these pull in their solvers (and the CRF its feature code)
    if name in _KLPROX:
        from . import klprox
        return getattr(klprox, name)
    if name == "SparseIsing":
        from .sparse_ising import SparseIsing
        return SparseIsing
    if name == "ChainCRF":
        from .crf import ChainCRF
        return ChainCRF
    if name == "BayesianGMMVEM":
        from ..baselines.bgmm_vem import BayesianGMMVEM
        return BayesianGMMVEM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["VaroptEstimator", "NotFittedError", "L1LeastSquares", "L1LogisticRegression",
           "MajorizeLogisticRegression", "ChainCRF", "BayesianGMMVEM", "SparseIsing", *_KLPROX]
