"""Sparse Ising model learning by L1-penalised maximum likelihood (Honorio 2012, problem (2)).

Data ``X`` (``T x n``) in ``{-1, +1}`` or ``{0, 1}`` (0 read as -1). Parameters ``b`` (n) and the
couplings ``J_e`` of every pair ``i < j`` (``numpy.triu_indices`` order), i.e. ``W`` symmetric with
zero diagonal, ``J_e = 2 W_ij`` (:mod:`varopt.oracles.ising`). The problem

    min  log Z(b, J) - b.mu_hat - J.s_hat + rho sum_e |J_e|   (= L(W, b) + rho ||W||_1, both triangles)

with ``mu_hat`` the column means and ``s_hat_e`` the mean of ``x_i x_j``; ``b`` unpenalised (with
``penalize_bias``: ``+ rho |b|_1``). A constant column (``|mu_hat_i| = 1``) violates Assumption 1
(``b_i`` unbounded) and raises :class:`InputDataError` unless ``b`` is penalised.

:func:`ising_program` builds the compiled program (the linear data term and the ``abs`` penalty;
``log Z`` comes from an oracle with ``oracle_adds_objective=True``); :func:`ising_cvxpy` /
:func:`ising_pyomo` write the same model (with ``explicit=True`` the log-partition as an explicit
log-sum-exp over all ``2^n`` states, for small ``n``). The estimator is in :mod:`varopt.estimators.sparse_ising`.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError
from ..program.energy import spin_states


def _spin_array(X, name):
    """``(A, pm)``: the data as a float array (not copied when it is one) and True when its values are -1/+1,
    False when 0/1; :class:`InputDataError` naming the first bad entry otherwise. The value test reads
    boolean masks (an eighth of the data each); the NaN scan and the sort of ``np.unique`` run only on the
    error path."""
    if sp.issparse(X):  # 0/1 data are often stored sparse (zeros are the -1 spins)
        X = X.toarray()
    try:
        A = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise InputDataError(f"{name} must be a numeric array of -1/+1 or 0/1 values") from None
    if A.ndim != 2:
        raise InputDataError(f"{name} must be 2-dimensional (samples x variables), got shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise InputDataError(f"{name} is empty (shape {A.shape}); at least one sample of at least one variable "
                             "is needed")
    one = A == 1.0
    if np.all(one | (A == -1.0)):
        return A, True
    if np.all(one | (A == 0.0)):
        return A, False
    bad = ~np.isfinite(A)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputDataError(f"{name}[{r}, {c}] is {A[r, c]} (NaN or inf)")
    vals = np.unique(A)
    other = [v for v in vals if v not in (-1.0, 0.0, 1.0)]
    v = other[0] if other else 0.0
    r, c = np.argwhere(A == v)[0]
    raise InputDataError(f"{name}[{r}, {c}] = {A[r, c]:g}: data must be all -1/+1 or all 0/1"
                         + (" (both 0 and -1 occur)" if not other else ""))


def _check_constant(plus, N, name):
    """Assumption 1 of Honorio 2012 from the count ``plus`` of +1 spins per column."""
    const = np.flatnonzero((plus == 0) | (plus == N))
    if const.size:
        k = int(const[0])
        raise InputDataError(
            f"{name}: column {k} is constant ({1.0 if plus[k] == N else -1.0:+g} in every sample); its bias is "
            "unbounded in the maximum-likelihood problem (Honorio 2012, Assumption 1); drop the column or "
            "penalise the bias (penalize_bias=True)")


def check_spins(X, name="X", penalize_bias=False):
    """Validated spin data (float array of -1/+1) from ``X`` in {-1, +1} or {0, 1}."""
    A, _ = _spin_array(X, name)
    S = np.where(A > 0, 1.0, -1.0)
    if not penalize_bias:
        _check_constant(np.count_nonzero(S > 0, axis=0), S.shape[0], name)
    return S


class IdenticalColumnsWarning(UserWarning):
    """Two spin columns equal (or opposite) in every sample: their coupling is set by the penalty alone."""


def moments(S, warn=True):
    """``(mu_hat, s_hat)``: column means and pair means ``mean(x_i x_j)`` over ``triu_indices``.

    ``|s_hat_e| = 1`` (columns ``i``, ``j`` equal or opposite in every sample) puts the pair moment on the
    boundary of the marginal polytope: the unpenalised likelihood grows without bound as ``J_e -> +-inf``
    (as a constant column's bias, Honorio 2012, Assumption 1), and the L1 optimum has ``|J_e|`` set by
    ``rho`` alone. Not an error (the penalised problem has a solution, and ``N < p`` data often have such
    pairs): an :class:`IdenticalColumnsWarning` naming the first pair and the count (``warn``)."""
    n = S.shape[1]
    a, b = np.triu_indices(n, 1)
    C = S.T @ S / S.shape[0]
    s = C[a, b]
    if warn:
        _warn_identical(s, a, b)
    return S.mean(axis=0), s


def _warn_identical(s, a, b, stacklevel=4):
    edge = np.flatnonzero(np.abs(s) == 1.0)
    if edge.size:
        import warnings
        i, j = int(a[edge[0]]), int(b[edge[0]])
        how = "equal" if s[edge[0]] > 0 else "opposite"
        warnings.warn(f"columns {i} and {j} are {how} in every sample ({edge.size} such pair"
                      f"{'s' if edge.size > 1 else ''}): the maximum-likelihood coupling of such a pair is "
                      "infinite and the penalty rho alone sets its size; drop duplicate columns",
                      IdenticalColumnsWarning, stacklevel=stacklevel)


def spin_moments(X, name="X", penalize_bias=False, warn=True):
    """``(mu_hat, s_hat)`` of validated spin data (:func:`check_spins`, :func:`moments`) without a copy of
    the data: -1/+1 data are read as they are; for 0/1 data ``B`` (dense, or sparse with every stored
    value 0 or 1: the zeros are the -1 spins), ``c = B^T 1`` and ``C = B^T B`` with ``x = 2B - 1`` give
    ``N mu_i = 2 c_i - N`` and ``N mean(x_i x_j) = 4 C_ij - 2 c_i - 2 c_j + N``: integers, so the moments
    are bitwise those of the ``check_spins`` copy (a sparse 1e5 x 500 matrix of 5 % ones: 29 MB stored,
    400 MB per dense copy, of which the earlier path made two). Other sparse data are densified (and get
    the dense path's errors)."""
    if sp.issparse(X) and X.ndim == 2 and 0 not in X.shape:
        B = sp.csr_matrix(X, dtype=float)
        if np.all((B.data == 0.0) | (B.data == 1.0)):
            B.eliminate_zeros()
            return _moments01(B, name, penalize_bias, warn)
    A, pm = _spin_array(X, name)
    if not pm:
        return _moments01(A, name, penalize_bias, warn)
    if not penalize_bias:
        _check_constant(np.count_nonzero(A > 0, axis=0), A.shape[0], name)
    return moments(A, warn=warn)


def _moments01(B, name, penalize_bias, warn):
    N, n = B.shape
    c = np.asarray(B.sum(axis=0)).ravel()
    if not penalize_bias:
        _check_constant(c, N, name)
    a, b = np.triu_indices(n, 1)
    C = B.T @ B
    C = C.toarray() if sp.issparse(C) else C
    s = (4.0 * C[a, b] - 2.0 * c[a] - 2.0 * c[b] + N) / N
    if warn:
        _warn_identical(s, a, b)
    return (2.0 * c - N) / N, s


def ising_program(S, rho, penalize_bias=False, data_moments=None):
    """The compiled program (variables ``b[i]``, ``J[i,j]``) of the data term and the penalty; ``data_moments``:
    ``(mu_hat, s_hat)`` already computed (then ``S`` is not read)."""
    from ..program import AtomGroup, Expression, Program
    # O(N n^2): the one pass over the data of a fit
    mu, s = moments(S) if data_moments is None else data_moments
    n = mu.size
    a, b = np.triu_indices(n, 1)
    p = n + a.size
    names = [f"b[{i}]" for i in range(n)] + [f"J[{i},{j}]" for i, j in zip(a, b)]
    pen = np.arange(p) if penalize_bias else np.arange(n, p)
    A = sp.csr_matrix((np.ones(pen.size), (np.arange(pen.size), pen)), shape=(pen.size, p))
    expr = Expression(p, 0.0, -np.r_[mu, s], atoms=[AtomGroup("abs", np.full(pen.size, float(rho)), A,
                                                              np.zeros(pen.size))])
    return Program(names, np.full(p, -np.inf), np.full(p, np.inf), expr, [], objective_name="ising_l1_ml")


def ising_cvxpy(S, rho, explicit=False, penalize_bias=False):
    """CVXPY problem ``(prob, b, J)``; ``explicit``: ``log Z`` as ``log_sum_exp`` over the 2^n states."""
    import cvxpy as cp
    n = S.shape[1]
    mu, s = moments(S)
    b, J = cp.Variable(n, name="b"), cp.Variable(n * (n - 1) // 2, name="J")
    f = -(mu @ b) - (s @ J) + rho * cp.norm1(J) + (rho * cp.norm1(b) if penalize_bias else 0)
    if explicit:
        X = spin_states(n)
        a, c = np.triu_indices(n, 1)
        f = f + cp.log_sum_exp(X @ b + (X[:, a] * X[:, c]) @ J)
    return cp.Problem(cp.Minimize(f)), b, J


def ising_pyomo(S, rho, explicit=False, penalize_bias=False):
    """Pyomo model with ``b[i]``, ``J[k]`` (pair ``k`` of ``triu_indices``) and the same objective."""
    import pyomo.environ as pyo
    n = S.shape[1]
    mu, s = moments(S)
    a, c = np.triu_indices(n, 1)
    m = pyo.ConcreteModel()
    m.b = pyo.Var(range(n), initialize=0.0)
    m.J = pyo.Var(range(a.size), initialize=0.0)
    f = -sum(float(mu[i]) * m.b[i] for i in range(n)) - sum(float(s[k]) * m.J[k] for k in range(a.size))
    f = f + rho * sum(abs(m.J[k]) for k in range(a.size))
    if penalize_bias:
        f = f + rho * sum(abs(m.b[i]) for i in range(n))
    if explicit:
        X = spin_states(n)
        P = X[:, a] * X[:, c]
        f = f + pyo.log(sum(pyo.exp(sum(float(X[t, i]) * m.b[i] for i in range(n))
                                    + sum(float(P[t, k]) * m.J[k] for k in range(a.size)))
                            for t in range(X.shape[0])))
    m.obj = pyo.Objective(expr=f)
    return m
