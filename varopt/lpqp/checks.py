"""Validation of the LP/QP data: vectors, matrices, bounds and index lists, with errors naming the input.
"""
from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError
from .errors import INF


def _vector(name, v, n, default, *, allow_pinf=False, allow_ninf=False):
    """Return ``v`` as a float array of length ``n`` (scalars broadcast, None -> default)."""
    if v is None:
        return np.full(n, default, dtype=float)
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError) as e:
        raise InputDataError(f"{name}: cannot convert to a float array ({e})") from None
    if a.ndim == 0:
        a = np.full(n, float(a))
    a = a.reshape(-1) if a.ndim == 2 and 1 in a.shape else a
    if a.ndim != 1 or a.shape[0] != n:
        raise InputDataError(f"{name}: expected shape ({n},), got {np.shape(v)}")
    if np.isnan(a).any():
        raise InputDataError(f"{name}: contains NaN at index {int(np.flatnonzero(np.isnan(a))[0])}")
    if not allow_pinf and (a == INF).any():
        raise InputDataError(f"{name}: contains +inf at index {int(np.flatnonzero(a == INF)[0])}")
    if not allow_ninf and (a == -INF).any():
        raise InputDataError(f"{name}: contains -inf at index {int(np.flatnonzero(a == -INF)[0])}")
    return np.ascontiguousarray(a, dtype=float)


def _matrix(name, A, n, fmt="csc", m=None):
    """Return ``A`` as a scipy sparse matrix (``fmt``) with ``n`` columns, finite entries."""
    if sp.issparse(A):
        M = A.asformat(fmt).astype(float, copy=True)
    else:
        try:
            D = np.asarray(A, dtype=float)
        except (TypeError, ValueError) as e:
            raise InputDataError(f"{name}: cannot convert to a float matrix ({e})") from None
        if D.ndim == 1 and m is None:
            D = D.reshape(1, -1)
        if D.ndim != 2:
            raise InputDataError(f"{name}: expected a 2-D matrix, got shape {D.shape}")
        if np.isnan(D).any() or np.isinf(D).any():
            raise InputDataError(f"{name}: contains NaN or inf")
        M = sp.csc_matrix(D) if fmt == "csc" else sp.csr_matrix(D)
    if M.shape[1] != n or (m is not None and M.shape[0] != m):
        want = f"({m if m is not None else 'm'}, {n})"
        raise InputDataError(f"{name}: expected shape {want}, got {M.shape}")
    if M.nnz and not np.isfinite(M.data).all():
        raise InputDataError(f"{name}: contains NaN or inf")
    M.sum_duplicates()
    M.eliminate_zeros()
    M.sort_indices()
    return M


def _bounds(name_lo, name_hi, lo, hi, n):
    lo = _vector(name_lo, lo, n, -INF, allow_ninf=True)
    hi = _vector(name_hi, hi, n, INF, allow_pinf=True)
    return lo, hi


def _index(name, idx, size):
    a = np.atleast_1d(np.asarray(idx))
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InputDataError(f"{name}: expected integer indices, got {idx!r}")
    a = a.astype(np.int64)
    if a.size and (a.min() < -size or a.max() >= size):
        raise InputDataError(f"{name}: index out of range for size {size}")
    a = np.where(a < 0, a + size, a)
    if np.unique(a).size != a.size:
        raise InputDataError(f"{name}: duplicate indices")
    return a


#: Q is checked for PSD at model build (Gershgorin, else a dense Cholesky of Q + delta I)
#: up to this size; larger non-diagonally-dominant Q are checked only when HiGHS calls them
#: non-convex (see ``_min_eig``)
