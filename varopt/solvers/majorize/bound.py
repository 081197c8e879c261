"""Algorithm 1 (ComputeBound) of Jebara & Choromanska (NIPS 2012), in log space and vectorized.

For a partition function ``Z(theta) = sum_{y in Omega} h(y) exp(theta^T f(y))`` and a point
``theta~`` Algorithm 1 returns ``z, mu, Sigma`` with (Theorem 1)

    Z(theta) <= z exp( 1/2 (theta - theta~)^T Sigma (theta - theta~) + (theta - theta~)^T mu ).

Running the loop over ``y_1, ..., y_n`` (``alpha_i = h(y_i) exp(theta~^T f(y_i))``,
``z_{i} = z_{i-1} + alpha_i``, ``mu_i`` the ``alpha``-weighted mean of ``f(y_1..y_i)``):

    l_i     = f(y_i) - mu_{i-1}
    Sigma  += omega(log(alpha_i / z_{i-1})) l_i l_i^T,   omega(r) = tanh(r / 2) / (2 r)

with the limits of the paper's footnote 3: ``omega(0) = 1/4`` and ``omega -> 0`` as ``z -> 0+``
(the first term, ``r = +inf``). ``omega`` is even, ``0 < omega <= 1/4``.

Everything is computed from the *scores* ``s_i = log alpha_i = theta~^T f(y_i) + log h(y_i)``:
``log(alpha_i / z_{i-1}) = s_i - logsumexp(s_1..s_{i-1})``, so neither huge nor tiny ``alpha``
overflows. The vectorized form orders each group by decreasing score (the paper notes the
ordering only changes ``Sigma``, never ``z`` or ``mu``); then every prefix sum of
``exp(s_j - s_max)`` is ``>= 1`` and no prefix mean is a ``0/0``.

Writing the prefix means as ``mu_{i-1} = sum_{j<i} P_ij f(y_j)`` (``P`` strictly lower
triangular, rows are prefix softmax weights), the rows ``r_i = sqrt(c omega_i) l_i`` of all
groups are ``R = T F`` with the sparse block-diagonal ``T = blockdiag(diag(sqrt(c omega)) (I - P))``,
and ``sum_g c_g Sigma_g = R^T R``. That is the hot path of the solver: a few sparse products per
iteration, no Python loop over groups or rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ...errors import InputDataError

#: below this |r| the series 1/4 - r^2/48 + r^4/480 replaces tanh(r/2)/(2r) (error < 1e-17)
_SERIES_CUT = 1e-3


def omega(r):
    """``tanh(r/2) / (2 r)`` with ``omega(0) = 1/4`` and ``omega(+-inf) = 0`` (footnote 3).

    Even in ``r``; exact series near 0, and for ``|r| -> inf`` it decays like ``1 / (2|r|)``.
    """
    a = np.abs(np.asarray(r, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # tanh(inf) / inf = 0 is the footnote's limit; the series covers 0 / 0
        out = np.tanh(0.5 * a) / (2.0 * a)
        small = a < _SERIES_CUT
        if small.any():  # the series only where needed: this is on the solver's hot path
            if out.ndim == 0:
                return np.float64(0.25 - a * a / 48.0 + a ** 4 / 480.0)
            r2 = a[small] ** 2
            out[small] = 0.25 - r2 / 48.0 + r2 * r2 / 480.0
        return out


def min_norm_solve(lam, U, rhs):
    """``A^+ rhs`` from the eigenpairs ``(lam, U)`` of a PSD ``A`` (ascending ``lam``); eigenvalues below
    ``1e-12`` of the largest count as zero (flat directions of a bound get no step)."""
    keep = lam > 1e-12 * max(lam[-1], 1e-300)
    return U[:, keep] @ ((U[:, keep].T @ rhs) / lam[keep])


@dataclass
class BoundParts:
    """Bound of a set of log-sum-exp groups at ``theta~``.

    ``logz[g] = log z_g`` (the exact log-partition value), ``mu`` rows are the exact gradients
    ``d log Z_g / d theta`` (dense ``G x d`` only when requested), ``R`` (sparse ``K x d``) holds the
    rows ``sqrt(c_g omega_i) l_i`` so that ``sum_g c_g Sigma_g = R^T R``, and ``omega`` the per-row
    factors in the *original* row order.
    """

    logz: np.ndarray
    R: sp.csr_matrix
    omega: np.ndarray
    T: sp.csr_matrix
    mu: np.ndarray = None

    def sigma(self) -> np.ndarray:
        """Dense ``sum_g c_g Sigma_g``."""
        return np.asarray((self.R.T @ self.R).toarray()) if sp.issparse(self.R) else self.R.T @ self.R


def _padded_index(seg: np.ndarray, starts: np.ndarray, K: int):
    """(G, nmax) matrix of row indices per group (``-1`` padding) and the group sizes."""
    G = starts.size
    sizes = np.diff(np.append(starts, K))
    nmax = int(sizes.max()) if G else 0
    pos = np.arange(K) - starts[seg]
    idx = np.full((G, nmax), -1, dtype=np.int64)
    idx[seg, pos] = np.arange(K)
    return idx, sizes


def compute_bound(A, b, seg, theta, coef=None, want_mu: bool = False) -> BoundParts:
    """Algorithm 1 for every group ``g`` of ``log sum_{k: seg_k = g} exp(A_k theta + b_k)`` at once.

    ``A`` (K x d, rows ``f(y)``), ``b`` (``log h(y)``, ``-inf`` allowed for ``h = 0``), ``seg``
    sorted group ids ``0..G-1``, ``coef`` positive weights ``c_g`` (default 1). Groups are
    enumerated in decreasing score order (see module docstring).
    """
    A = sp.csr_matrix(A, dtype=float)
    b = np.asarray(b, dtype=float).ravel()
    seg = np.asarray(seg, dtype=np.int64).ravel()
    theta = np.asarray(theta, dtype=float).ravel()
    K = A.shape[0]
    if K == 0:
        raise InputDataError("empty Omega: a partition function with no configurations")
    starts = np.flatnonzero(np.r_[True, np.diff(seg) != 0])
    G = starts.size
    coef = np.ones(G) if coef is None else np.asarray(coef, dtype=float).ravel()
    s = A @ theta + b
    if np.any(np.isnan(s)) or np.any(s == np.inf):
        raise InputDataError("scores theta^T f(y) + log h(y) are NaN or +inf (check the features and theta)")
    idx, sizes = _padded_index(seg, starts, K)
    S = np.where(idx >= 0, s[np.maximum(idx, 0)], -np.inf)
    # decreasing scores; ties keep the given order (stable)
    order = np.argsort(-S, axis=1, kind="stable")
    idx = np.take_along_axis(idx, order, axis=1)
    S = np.take_along_axis(S, order, axis=1)
    smax = S[:, :1]
    if np.any(np.isneginf(smax)):
        g = int(np.flatnonzero(np.isneginf(smax[:, 0]))[0])
        raise InputDataError(f"partition function {g} is identically zero (every h(y) = 0)")
    with np.errstate(invalid="ignore"):
        ls = S - smax  # log(alpha / alpha_max) <= 0
    w = np.exp(ls)  # 0 for padding and h = 0
    cum = np.cumsum(w, axis=1)  # >= 1 everywhere
    logcum_prev = np.full_like(cum, -np.inf)
    logcum_prev[:, 1:] = np.log(cum[:, :-1])
    with np.errstate(invalid="ignore"):
        r = ls - logcum_prev  # log(alpha_i / z_{i-1}); +inf for the first, nan/-inf on padding
    om = np.where(idx >= 0, omega(np.where(np.isnan(r), np.inf, r)), 0.0)
    logz = smax[:, 0] + np.log(cum[:, -1])
    # T = blockdiag(diag(sqrt(c omega)) (I - P)): row i has +a_i at i and -a_i w_j / cum_{i-1} at j < i
    a = np.sqrt(np.maximum(coef[:, None], 0.0) * om)
    nmax = S.shape[1]
    rows, cols, vals = [], [], []
    valid = idx >= 0
    keep = valid & (a > 0)
    rows.append(idx[keep]); cols.append(idx[keep]); vals.append(a[keep])
    if nmax > 1:
        # pairs (i, j) with j < i inside a group; P_ij = w_j / cum_{i-1}
        ii, jj = np.tril_indices(nmax, -1)
        Wp = w[:, jj] / cum[:, ii - 1]
        V = -a[:, ii] * Wp
        m = (idx[:, ii] >= 0) & (idx[:, jj] >= 0) & (V != 0)
        rows.append(idx[:, ii][m]); cols.append(idx[:, jj][m]); vals.append(V[m])
    T = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(K, K))
    R = (T @ A).tocsr()
    om_rows = np.zeros(K)
    om_rows[idx[valid]] = om[valid]
    mu = None
    if want_mu:
        p = np.exp(s - logz[seg])
        mu = np.asarray((sp.csr_matrix((p, (seg, np.arange(K))), shape=(G, K)) @ A).toarray())
    return BoundParts(logz=logz, R=R, omega=om_rows, T=T, mu=mu)


def compute_bound_reference(F, logh, theta):
    """Algorithm 1 exactly as printed, one ``y`` at a time (given order), in log space.

    ``F`` (n x d) dense features, ``logh`` (n,) log base measure. Returns ``(log z, mu, Sigma)``.
    A slow, literal transcription used to test :func:`compute_bound`.
    """
    F = np.asarray(F, dtype=float)
    d = F.shape[1]
    logz = -np.inf  # z -> 0+
    mu = np.zeros(d)
    Sigma = np.zeros((d, d))  # z I with z -> 0+
    for fy, lh in zip(F, np.asarray(logh, dtype=float)):
        la = lh + float(theta @ fy)  # log alpha
        if la == -np.inf:
            continue
        l = fy - mu
        Sigma += omega(la - logz) * np.outer(l, l)
        mu = mu + np.exp(la - np.logaddexp(logz, la)) * l  # alpha / (z + alpha)
        logz = np.logaddexp(logz, la)
    return logz, mu, Sigma


def log_bound_value(logz, mu, Sigma, delta):
    """``log( z exp(1/2 D^T Sigma D + D^T mu) )`` for ``D = theta - theta~``."""
    delta = np.asarray(delta, dtype=float)
    return float(logz + 0.5 * delta @ (Sigma @ delta) + delta @ mu)
