"""scikit-learn estimators on varopt's solvers (one base class, :mod:`.base`).

* :class:`L1LeastSquares`, :class:`L1LogisticRegression`: on-line L1-regularised learning with
  ``ipsa`` (Carbonetto 2009, §2.5), ``fit`` and ``partial_fit``;
* :class:`MajorizeLogisticRegression`: L2 logistic regression by bound majorization (Jebara &
  Choromanska 2012);
* :class:`ChainCRF`: linear-chain CRF fitted by majorization or L-BFGS;
* :class:`BayesianGMMVEM`: the variational-EM baseline for Bayesian Gaussian mixtures.
"""
from .base import NotFittedError, VaroptEstimator
from .l1 import L1LeastSquares, L1LogisticRegression
from .logistic import MajorizeLogisticRegression


def __getattr__(name):
    # the CRF and the BGMM baseline live with their formulations (large feature/ELBO code)
    if name == "ChainCRF":
        from ..formulations.crf import ChainCRF
        return ChainCRF
    if name == "BayesianGMMVEM":
        from ..formulations.bgmm_vem import BayesianGMMVEM
        return BayesianGMMVEM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["VaroptEstimator", "NotFittedError", "L1LeastSquares", "L1LogisticRegression",
           "MajorizeLogisticRegression", "ChainCRF", "BayesianGMMVEM"]
