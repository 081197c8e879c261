"""scikit-learn-style sparse Ising learner: L1-penalised maximum likelihood fitted by ``proxsg``.

``SparseIsing(rho=1/16, gradient='auto', ...)``: ``fit(X)`` solves problem (2) of Honorio 2012
(:mod:`.sparse_ising`) with ``log Z``'s gradient from the exact oracle (enumeration, ``n <= 20``;
``gradient='auto'`` picks it there, and ``variant='auto'`` is then proximal Newton ``PN``, which
ends with a certificate: least-norm subgradient and gap estimate in ``result_.info``) or the Gibbs
sampler (mean-field start, ``n_sweeps`` sweeps, ``samples`` chains growing by ``schedule``;
``variant='auto'`` is FB). FB's output, the average of the iterates (Honorio 2012, Theorem 7), is
dense (every pair is nonzero somewhere on the path); a sparse answer: ``sparsify='prox'`` (the
average moved by one proximal step of the last step size, objective within ``eta_{K+1} G^2/2`` of
the average's), ``sparsify='gradient'`` (a proximal-gradient step from the average with the mean of
the last half's sampled gradients: a pair is kept when ``|W_ij/eta_1 - gbar_ij| > rho``, a test on
averaged moments; the sparsest of these in the benchmarks), ``variant='FU'`` (a uniformly random visited point, Theorem 8) or ``'FL'`` (the last
point); every FBS fit keeps all of them in ``result_.info`` (``average``, ``last``, ``random``).
Fitted: ``coef_`` (W, symmetric, zero diagonal; ``x^T W x = sum_e J_e x_i x_j``), ``intercept_`` (b), ``adjacency_`` (``W != 0``), ``theta_``
(``(b, J)`` of :mod:`varopt.oracles.ising`), ``result_``, ``n_iter_``. ``score(X)``: the exact
average log-likelihood (enumeration, ``n <= 26``).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputDataError
from ..formulations.sparse_ising import ising_program, spin_moments
from .base import LIMITS, VaroptEstimator, accept_result


class SparseIsing(VaroptEstimator):
    """Sparse Ising model learned from spins ``X`` in {-1, +1} (or {0, 1}) by L1-penalised maximum likelihood
    ``min log Z(b, J) - b.mu_hat - J.s_hat + rho sum_e |J_e|`` (problem (2) of Honorio 2012) with ``proxsg``;
    the options and the fitted attributes (``coef_``, ``intercept_``, ``adjacency_``, ``theta_``, ``result_``,
    ``n_iter_``, ``n_features_in_``) are described in the module docstring
    (``help(varopt.estimators.sparse_ising)``). scikit-learn conventions through :class:`.base.VaroptEstimator`
    (``get_params``/``set_params``, ``clone``, scikit-learn's input validation, ``NotFittedError``); ``y`` is
    ignored (unsupervised, as scikit-learn's ``GraphicalLasso``)."""

    def __init__(self, rho=1.0 / 16, gradient="auto", variant="auto", schedule="log", samples=None,
                 n_sweeps=5, init="meanfield", max_iter=None, penalize_bias=False, sparsify="none", seed=0,
                 solver_options=None):
        self.rho = rho
        self.gradient = gradient
        self.variant = variant
        self.schedule = schedule
        self.samples = samples
        self.n_sweeps = n_sweeps
        self.init = init
        self.max_iter = max_iter
        self.penalize_bias = penalize_bias
        self.sparsify = sparsify
        self.seed = seed
        self.solver_options = solver_options

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True      # 0/1 data are often stored sparse (their moments from sparse products)
        return tags

    def _oracle(self, n, data_mean):
        from ..oracles.ising import IsingExactOracle, IsingGibbsOracle
        kind = self.gradient
        if kind not in ("auto", "exact", "gibbs"):
            raise ValueError(f"gradient must be 'auto', 'exact' or 'gibbs' (got {kind!r})")
        if kind == "auto":
            kind = "exact" if n <= 20 else "gibbs"
        if kind == "exact":
            return IsingExactOracle(n, data_mean=data_mean)
        exact = IsingExactOracle(n, data_mean=data_mean) if n <= 16 else None
        return IsingGibbsOracle(n, data_mean=data_mean, n_chains=self._samples(), n_sweeps=self.n_sweeps,
                                init=self.init, exact_values=exact)

    def _samples(self):
        """Chains of the Gibbs oracle: 100 when not given; ``samples=0`` is refused downstream (it was
        replaced by 100 without a word)."""
        return 100 if self.samples is None else self.samples

    def fit(self, X, y=None):
        import varopt
        if isinstance(self.rho, (bool, np.bool_)) or not isinstance(self.rho, (int, float, np.integer, np.floating)) \
                or not np.isfinite(self.rho) or self.rho <= 0:
            raise InputDataError(f"rho must be a positive number (got {self.rho!r})")
        # scikit-learn's checks first (NaN/inf, complex, empty, n_features_in_, feature names), then the spin values
        mu, s = spin_moments(self._validate(X, reset=True, accept_sparse=True, with_y=False),
                             penalize_bias=self.penalize_bias)
        n = mu.size
        prog = ising_program(None, self.rho, self.penalize_bias, data_moments=(mu, s))
        oracle = self._oracle(n, None)
        variant = self.variant
        if variant == "auto":
            variant = "PN" if oracle.exact else "FB"
        opts = dict(oracle=oracle, oracle_adds_objective=True, variant=variant, seed=self.seed)
        if oracle.exact:
            opts.update(restart=True)
        else:
            opts.update(schedule=self.schedule, samples=self._samples())
        if self.sparsify != "none":
            opts.update(sparsify=self.sparsify)
        # None is the default; 0 is the user's value and reaches proxsg's validation (``or`` replaced it silently)
        opts["max_iter"] = (5000 if oracle.exact else 1000) if self.max_iter is None else self.max_iter
        opts.update(self.solver_options or {})
        res = varopt.get_solver("proxsg").solve(prog, **opts)
        if res.x is None:
            raise InputDataError(f"proxsg returned no point ({res.status}: {res.message})")
        # scikit-learn's convention (as MajorizeLogisticRegression): a limit reached before the convergence test
        # passed keeps the fit with a ConvergenceWarning. Only runs that have such a test (exact gradients; PB, PA,
        # PN, FL): with sampled gradients, or FB/FR/FU's averages, the iteration budget is the normal end.
        has_test = oracle.exact and opts.get("variant") in ("PB", "PA", "PN", "FL")
        if res.status in LIMITS:
            accept_result(res, "proxsg", where=" in SparseIsing.fit", warn=has_test)
        self.result_ = res
        self.n_iter_ = res.iterations
        self._set_theta(np.asarray(res.x, dtype=float), n)
        self.n_features_in_ = n
        return self

    def _set_theta(self, theta, n):
        a, b = np.triu_indices(n, 1)
        self.theta_ = theta
        self.intercept_ = theta[:n].copy()
        W = np.zeros((n, n))
        W[a, b] = W[b, a] = theta[n:] / 2.0
        self.coef_ = W
        self.adjacency_ = W != 0

    def score(self, X, y=None):
        """Exact average log-likelihood of ``X`` under the fitted model (enumeration)."""
        from ..oracles.ising import IsingExactOracle
        self._check_fitted("theta_")     # NotFittedError (an AttributeError too, as before)
        mu, s = spin_moments(self._validate(X, reset=False, accept_sparse=True, with_y=False), penalize_bias=True,
                             warn=False)
        # theta . mean phi(X) - log Z (IsingExactOracle.log_likelihood from the moments; sparse data stay sparse)
        return float(np.r_[mu, s] @ self.theta_) - IsingExactOracle(self.n_features_in_).log_partition(self.theta_)
