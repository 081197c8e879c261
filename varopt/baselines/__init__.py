"""Classical baselines the solvers are compared with (never used by a solver).

* :mod:`.bgmm_vem`: variational EM (CAVI) for the Bayesian Gaussian mixture, and its estimator
  ``BayesianGMMVEM`` (also importable from :mod:`varopt.estimators`);
* :mod:`.klprox`: MAP, Laplace, full-Gaussian (Cholesky) and mean-field VI on the KL-proximal
  likelihood view (Khan, Baque, Fleuret & Fua 2015);
* :mod:`.gp_ep`, :mod:`.ep_tilted`: expectation propagation for GP models (Rasmussen & Williams 2006);
* :mod:`.l1_online`: on-line L1 methods of Carbonetto (2009, §2.5.5-2.5.7).
"""
