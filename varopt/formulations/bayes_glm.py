r"""Negative log joints of Bayesian GLMs and Gaussian-process models, for the ``klprox`` solver.

Every builder returns the *normalized* negative log joint ``-log p(y, w)`` (so that ``-ELBO`` is a
bound on ``-log p(y)`` and equals it for a Gaussian likelihood), as a numpy-only
:class:`~varopt.program.Program` (:func:`glm_program`, :func:`gp_program`) or as a CVXPY problem /
Pyomo model with the same terms (:func:`build_cvxpy`, :func:`build_pyomo`).

Likelihoods of the linear predictor ``f_n = x_n^T w`` (Khan, Baque, Fleuret & Fua 2015, §5-6):

==============  ==========================================  ==================================
likelihood      ``-log p(y_n | f_n)``                        data
==============  ==========================================  ==================================
``logistic``    ``log(1 + exp f) - y f``                     ``y in {0, 1}``
``poisson``     ``exp f - y f + log Gamma(y + 1)``           ``y >= 0`` (counts; rates too)
``laplace``     ``|y - f| / b + log(2 b)``, ``b = s/sqrt 2``  ``s`` = noise std (GPML likLaplace)
``gaussian``    ``(y - f)^2 / (2 s^2) + log(2 pi s^2)/2``    ``s`` = noise std
``multinomial`` ``log sum_k exp f_k - f_y``, ``f_k = x^T w_k``  ``y in {0, ..., K-1}``
==============  ==========================================  ==================================

Multinomial (softmax) regression has one weight vector per class, ``W = [w_0 ... w_{K-1}]`` (D x K,
variables ``w[j,k]`` ordered class by class, ``W[:, k]`` contiguous as CVXPY stores a matrix
variable), each with the prior ``N(0, delta I)``.

Bayesian GLM: ``w ~ N(0, delta I)`` (intercept included as a column of ones when ``fit_intercept``,
with the same prior, as in the paper's a1a setup). Gaussian process: latent ``f = L v``,
``v ~ N(0, I)``, ``L L^T = K + jitter I`` with the squared-exponential kernel
``k(x, x') = sf^2 exp(-|x - x'|^2 / (2 ell^2))`` (GPML covSEiso; hyperparameters ``log ell``,
``log sf``). The whitened form keeps the prior well conditioned for every length scale (``K`` is
numerically singular at large ``ell``) and is the linear-basis-function view of §5 with
``phi(x_n) = L_n``; the solver's dual update (19) then works with ``L L^T = K``.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from ..errors import InputDataError
from ..program import AtomGroup, Expression, LseGroup, Program, QuadraticTerms

LIKELIHOODS = ("logistic", "poisson", "laplace", "gaussian", "multinomial")


def check_data(X, y, likelihood):
    """Validated float arrays; errors name the input (NaN/inf, empty, shapes, labels)."""
    if likelihood not in LIKELIHOODS:
        raise InputDataError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    if X.ndim != 2:
        raise InputDataError(f"X must be a 2-D array (samples x features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputDataError(f"X is empty (shape {X.shape}): at least one sample and one feature are needed")
    if y.size != X.shape[0]:
        raise InputDataError(f"y has {y.size} entries, X has {X.shape[0]} rows")
    if not np.all(np.isfinite(X)):
        raise InputDataError("X contains NaN or inf")
    if not np.all(np.isfinite(y)):
        raise InputDataError("y contains NaN or inf")
    if likelihood == "logistic" and not np.all((y == 0) | (y == 1)):
        raise InputDataError("logistic likelihood: y must hold 0/1 labels")
    if likelihood == "multinomial" and not np.all((y >= 0) & (y == np.round(y))):
        raise InputDataError("multinomial likelihood: y must hold class labels 0, 1, ..., K-1")
    # non-integer y >= 0 (rates y = counts / exposure, fitted with sample_weight = exposure, as scikit-learn's
    # PoissonRegressor takes them): the same -log likelihood, log y! read as log Gamma(y + 1)
    if likelihood == "poisson" and not np.all(y >= 0):
        raise InputDataError(f"poisson likelihood: y must be >= 0 (counts or rates), got min(y) = {y.min():g}")
    return X, y


def _positive(name, v):
    # numpy integers are numbers (a grid from np.arange); booleans are not
    if not (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
            and math.isfinite(v) and v > 0):
        raise InputDataError(f"{name} must be a positive finite number, got {v!r}")
    return float(v)


def n_classes(y, classes=None):
    """The number of classes K of multinomial labels ``y`` (at least ``max(y) + 1``)."""
    K = int(np.max(y)) + 1 if classes is None else int(classes)
    if K < 2 or np.max(y) >= K:
        raise InputDataError(f"multinomial likelihood: labels must lie in 0..{K - 1} with K >= 2 classes "
                             f"(got classes={classes!r}, largest label {int(np.max(y))})")
    return K


def multinomial_terms(F, y, K, weights=None):
    """``sum_n s_n (lse(F_n W) - F_n w_{y_n})``: one log-sum-exp group of K rows per sample (row ``(n, k)`` holds
    ``F_n`` in the columns of class ``k``), and the linear part; ``s``: sample weights (default 1)."""
    N, D = F.shape
    s = np.ones(N) if weights is None else weights
    Fs = sp.csr_matrix(F)
    A = sp.kron(Fs, sp.csr_matrix(np.ones((K, 1)))).tocsr()             # row n*K + k = F_n
    cols = (np.arange(N * K) % K)[:, None]                               # class of each row
    A = sp.csr_matrix((A.data, A.indices + D * np.repeat(cols.ravel(), np.diff(A.indptr)), A.indptr),
                      shape=(N * K, D * K))
    grp = LseGroup(A=A, b=np.zeros(N * K), seg=np.repeat(np.arange(N), K), coef=s.copy(), label=np.arange(N))
    Y = sp.csr_matrix((s, (np.arange(N), y.astype(int))), shape=(N, K))
    lin = -np.asarray((Fs.T @ Y).toarray()).ravel(order="F")            # -sum_n F_n in class y_n's columns
    return [grp], lin, 0.0


def likelihood_terms(F, y, likelihood, noise=1.0, classes=None, weights=None):
    """Program pieces of ``sum_n s_n (-log p(y_n | F_n w))``: ``(atom/lse groups, linear, constant)``; ``s``: sample
    weights (:func:`check_weights`; default 1: a weight of 2 is the sample twice)."""
    N, D = F.shape
    Fs = _csr(F)
    s = np.ones(N) if weights is None else weights
    if likelihood == "multinomial":
        return multinomial_terms(F, y, n_classes(y, classes), weights)
    if likelihood == "logistic":
        A = _interleave_empty_rows(Fs)
        grp = LseGroup(A=A, b=np.zeros(2 * N), seg=np.repeat(np.arange(N), 2), coef=s.copy(), label=np.arange(N))
        return [grp], -(Fs.T @ (y if weights is None else s * y)), 0.0
    if likelihood == "poisson":
        return [AtomGroup("exp", s.copy(), Fs, np.zeros(N), label=np.arange(N))], \
            -(Fs.T @ (y if weights is None else s * y)), float(np.sum(s * gammaln(y + 1.0)))
    sd = _positive("noise", noise)
    if likelihood == "laplace":
        b = sd / math.sqrt(2.0)
        return [AtomGroup("abs", s / b, -Fs, y, label=np.arange(N))], np.zeros(D), float(s.sum()) * math.log(2 * b)
    return [AtomGroup("square", s * (0.5 / sd ** 2), -Fs, y, label=np.arange(N))], np.zeros(D), \
        0.5 * float(s.sum()) * math.log(2 * math.pi * sd * sd)


def check_weights(weights, N):
    """Sample weights as a float array of ``N`` finite values >= 0 (None: no weights); errors name the input."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=float)
    if w.ndim == 0:
        w = np.full(N, float(w))
    if w.shape != (N,):
        raise InputDataError(f"sample_weight has shape {w.shape}, expected ({N},): one weight per sample")
    if not np.all(np.isfinite(w)):
        raise InputDataError("sample_weight contains NaN or inf")
    if np.any(w < 0):
        raise InputDataError("sample_weight must be >= 0 (a weight multiplies the sample's -log likelihood)")
    if not np.any(w > 0):
        raise InputDataError("sample_weight is zero for every sample: no data left to fit")
    return w


def _csr(F):
    """``sp.csr_matrix(F)``; of a dense ``F`` from its nonzeros in row-major order directly (the same arrays: sorted
    column indices, the index dtype scipy picks; scipy's route through a COO matrix took 0.1 ms at 135 x 135)."""
    if sp.issparse(F) or not isinstance(F, np.ndarray) or F.ndim != 2 or F.dtype != np.float64:
        return sp.csr_matrix(F)
    nz = F != 0
    rows, cols = np.nonzero(nz)
    idx = np.int32 if max(F.shape[1], rows.size) < np.iinfo(np.int32).max else np.int64
    indptr = np.zeros(F.shape[0] + 1, dtype=idx)
    np.cumsum(np.count_nonzero(nz, axis=1), out=indptr[1:])
    return sp.csr_matrix((F[nz], cols.astype(idx), indptr), shape=F.shape)


def _interleave_empty_rows(Fs):
    """The CSR matrix with rows ``0, F_0, 0, F_1, ...`` (the two entries ``log(exp 0 + exp u_n)`` of every logistic
    term) from ``F``'s own arrays: row ``2n + 1`` holds row ``n``'s entries, every even row none. The matrix scipy's
    stack and row selection made, without their machinery (0.2 ms of the 0.5 ms GP model on heart_statlog)."""
    N, D = Fs.shape
    indptr = np.empty(2 * N + 1, dtype=Fs.indptr.dtype)
    indptr[0::2] = Fs.indptr
    indptr[1::2] = Fs.indptr[:-1]
    return sp.csr_matrix((Fs.data.copy(), Fs.indices.copy(), indptr), shape=(2 * N, D))


def _program(names, F, y, likelihood, noise, prior_precision, prior_logdet, name, classes=None, weights=None):
    groups, lin, const = likelihood_terms(F, y, likelihood, noise, classes, weights)
    D = np.asarray(lin).size
    quad = QuadraticTerms(np.arange(D), np.arange(D), np.full(D, 0.5 * prior_precision), D)
    # -log N(w; 0, Sigma) = w^T Sigma^-1 w / 2 + (D log 2 pi + log det Sigma) / 2
    const += 0.5 * (D * math.log(2 * math.pi) + prior_logdet)
    atoms = [g for g in groups if isinstance(g, AtomGroup)]
    lse = [g for g in groups if isinstance(g, LseGroup)]
    obj = Expression(D, constant=const, linear=np.asarray(lin).ravel(), quadratic=quad, atoms=atoms, lse=lse)
    return Program(names, np.full(D, -np.inf), np.full(D, np.inf), obj, objective_name=name)


def design(X, fit_intercept=True):
    return np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X


def glm_program(X, y, likelihood="logistic", prior_var=1.0, noise=1.0, fit_intercept=True, classes=None,
                sample_weight=None) -> Program:
    """``-log p(y, w)`` of a Bayesian GLM with prior ``N(0, prior_var I)``; variables ``w[j]`` (and
    ``b``: the intercept, last); multinomial: ``w[j,k]`` (and ``b[k]``), class by class, ``classes``
    = K (default ``max(y) + 1``); ``sample_weight``: each sample's -log likelihood times its weight."""
    X, y = check_data(X, y, likelihood)
    weights = check_weights(sample_weight, X.shape[0])
    delta = _positive("prior_var", prior_var)
    F = design(X, fit_intercept)
    names = [f"w[{j}]" for j in range(X.shape[1])] + (["b"] if fit_intercept else [])
    if likelihood == "multinomial":
        K = n_classes(y, classes)
        names = [nm.replace("]", f",{k}]") if nm != "b" else f"b[{k}]" for k in range(K) for nm in names]
    return _program(names, F, y, likelihood, noise, 1.0 / delta, len(names) * math.log(delta), "neg_log_joint",
                    classes, weights)


def se_kernel(X1, X2, log_ell, log_sf):
    """Squared-exponential kernel ``sf^2 exp(-|x - x'|^2 / (2 ell^2))`` (GPML covSEiso)."""
    ell, sf2 = math.exp(log_ell), math.exp(2 * log_sf)
    d2 = np.maximum((X1 * X1).sum(1)[:, None] + (X2 * X2).sum(1)[None, :] - 2 * X1 @ X2.T, 0.0)
    return sf2 * np.exp(-0.5 * d2 / ell ** 2)


def gp_factor(X, log_ell, log_sf, jitter=1e-8):
    """Lower Cholesky factor of ``K + jitter * sf^2 I`` (relative jitter, raised until it factors)."""
    for name, v in (("log_ell", log_ell), ("log_sf", log_sf)):
        if not (isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(v)):
            raise InputDataError(f"{name} must be a finite number, got {v!r}")
    if not (isinstance(jitter, (int, float, np.integer, np.floating)) and math.isfinite(jitter) and jitter >= 0):
        raise InputDataError(f"jitter must be a finite number >= 0, got {jitter!r}")
    K = se_kernel(X, X, log_ell, log_sf)
    eps = jitter * math.exp(2 * log_sf)
    for _ in range(8):
        try:
            return np.linalg.cholesky(K + eps * np.eye(K.shape[0])), eps
        except np.linalg.LinAlgError:
            eps *= 10.0
    if jitter == 0:
        raise InputDataError("the kernel matrix is singular (e.g. duplicate rows of X) and jitter=0 cannot be raised; "
                             "use jitter > 0")
    raise InputDataError("the kernel matrix is not positive definite even with jitter; check X")


def gp_program(X, y, likelihood="logistic", log_ell=0.0, log_sf=0.0, noise=1.0, jitter=1e-8):
    """``(program, L, eps)``: the whitened GP negative log joint in ``v`` (``f = L v``)."""
    X, y = check_data(X, y, likelihood)
    L, eps = gp_factor(X, log_ell, log_sf, jitter)
    names = [f"v[{n}]" for n in range(X.shape[0])]
    return _program(names, L, y, likelihood, noise, 1.0, 0.0, "gp_neg_log_joint"), L, eps


def build_cvxpy(F, y, likelihood="logistic", prior_var=1.0, noise=1.0, classes=None):
    """The same negative log joint over ``w`` with design matrix ``F`` as a CVXPY problem: ``(prob, w)``
    (multinomial: ``w`` is the D x K matrix ``W``, the likelihood ``sum(log_sum_exp(F W, axis=1)) -
    sum(Y * (F W))``)."""
    import cvxpy as cp
    F, y = check_data(F, y, likelihood)
    prior_var = _positive("prior_var", prior_var)
    N, D = F.shape
    if likelihood == "multinomial":
        K = n_classes(y, classes)
        W = cp.Variable((D, K), name="W")
        U = F @ W
        Y = np.eye(K)[y.astype(int)]
        lik = cp.sum(cp.log_sum_exp(U, axis=1)) - cp.sum(cp.multiply(Y, U))
        prior = cp.sum_squares(W) / (2 * prior_var) + 0.5 * D * K * math.log(2 * math.pi * prior_var)
        return cp.Problem(cp.Minimize(lik + prior)), W
    w = cp.Variable(D, name="w")
    f = F @ w
    groups, lin, const = likelihood_terms(F, y, likelihood, noise)
    if likelihood == "logistic":
        lik = cp.sum(cp.logistic(f)) - y @ f
    elif likelihood == "poisson":
        lik = cp.sum(cp.exp(f)) - y @ f
    elif likelihood == "laplace":
        lik = cp.sum(cp.abs(y - f)) * (math.sqrt(2.0) / noise)
    else:
        lik = cp.sum_squares(y - f) / (2 * noise ** 2)
    prior = cp.sum_squares(w) / (2 * prior_var) + 0.5 * D * math.log(2 * math.pi * prior_var)
    return cp.Problem(cp.Minimize(lik + prior + const)), w


def build_pyomo(F, y, likelihood="logistic", prior_var=1.0, noise=1.0, classes=None):
    """The same negative log joint as a Pyomo model (variables ``m.w``), written as a user would
    (multinomial: ``m.w[k, j]``, the likelihood ``log(sum_k exp(f_k)) - f_y`` per sample)."""
    import pyomo.environ as pe
    F, y = check_data(F, y, likelihood)
    prior_var = _positive("prior_var", prior_var)
    N, D = F.shape
    if likelihood == "multinomial":
        K = n_classes(y, classes)
        m = pe.ConcreteModel()
        m.w = pe.Var(range(K), range(D))
        f = [[sum(F[n, j] * m.w[k, j] for j in range(D) if F[n, j] != 0) for k in range(K)] for n in range(N)]
        lik = sum(pe.log(sum(pe.exp(f[n][k]) for k in range(K))) - f[n][int(y[n])] for n in range(N))
        prior = (sum(m.w[k, j] ** 2 for k in range(K) for j in range(D)) / (2 * prior_var)
                 + 0.5 * D * K * math.log(2 * math.pi * prior_var))
        m.obj = pe.Objective(expr=lik + prior)
        return m
    _, _, const = likelihood_terms(F, y, likelihood, noise)
    m = pe.ConcreteModel()
    m.w = pe.Var(range(D))
    f = [sum(F[n, j] * m.w[j] for j in range(D) if F[n, j] != 0) for n in range(N)]
    if likelihood == "logistic":
        lik = sum(pe.log(1 + pe.exp(f[n])) - y[n] * f[n] for n in range(N))
    elif likelihood == "poisson":
        lik = sum(pe.exp(f[n]) - y[n] * f[n] for n in range(N))
    elif likelihood == "laplace":
        lik = sum(abs(y[n] - f[n]) for n in range(N)) * (math.sqrt(2.0) / noise)
    else:
        lik = sum((y[n] - f[n]) ** 2 for n in range(N)) / (2 * noise ** 2)
    prior = sum(m.w[j] ** 2 for j in range(D)) / (2 * prior_var) + 0.5 * D * math.log(2 * math.pi * prior_var)
    m.obj = pe.Objective(expr=lik + prior + const)
    return m
