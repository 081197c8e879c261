"""Positive-semidefiniteness of ``Q`` and the lower triangle HiGHS takes.
"""
from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from ..core.threads import one_thread_above
from ..errors import InputDataError
from .checks import _matrix


_PSD_CHECK_DENSE_N = 800


def _is_psd(M, scale):
    """True if ``M`` (symmetric, sparse) is PSD up to ``1e-9 * scale``, or too big to check."""
    n = M.shape[0]
    d = M.diagonal()
    off = np.asarray(abs(M).sum(axis=1)).ravel() - np.abs(d)
    if (d >= off).all():  # diagonally dominant with d >= 0 (Gershgorin)
        return True
    if n > _PSD_CHECK_DENSE_N:
        return True
    import scipy.linalg as sla
    try:
        with one_thread_above(n):
            sla.cholesky(M.toarray() + 1e-9 * scale * np.eye(n), lower=True, check_finite=False)
        return True
    except sla.LinAlgError:
        return _min_eig(M) >= -1e-9 * scale


def _min_eig(Q):
    """Smallest eigenvalue of the symmetric sparse ``Q`` (dense for n <= 2000, else Lanczos)."""
    n = Q.shape[0]
    if n <= 2000:
        with one_thread_above(n):
            return float(np.linalg.eigvalsh(Q.toarray())[0])
    import scipy.sparse.linalg as spla
    try:
        return float(spla.eigsh(Q.tocsc().astype(float), k=1, which="SA", tol=1e-8,
                                return_eigenvectors=False, maxiter=20 * n)[0])
    except spla.ArpackNoConvergence:
        return 0.0


def _hessian_lower(Q, n, name="Q"):
    """Validate a full symmetric PSD-looking ``Q`` and return its lower triangle (csc) or None."""
    if Q is None:
        return None
    M = _matrix(name, Q, n, fmt="csc", m=n)
    if M.nnz == 0:
        return None
    asym = abs(M - M.T)
    scale = max(1.0, float(abs(M).max()))
    if asym.nnz and float(asym.max()) > 1e-10 * scale:
        raise InputDataError(f"{name}: not symmetric (max |Q - Q^T| = {float(asym.max()):.3g}); "
                             "pass the full symmetric matrix of 1/2 x'Qx")
    M = ((M + M.T) * 0.5).tocsc()
    d = M.diagonal()
    if (d < -1e-12 * scale).any():
        j = int(np.argmin(d))
        raise InputDataError(f"{name}: not positive semidefinite (Q[{j},{j}] = {d[j]:.3g} < 0)")
    if not _is_psd(M, scale):
        lam = _min_eig(M)
        raise InputDataError(f"{name}: not positive semidefinite (smallest eigenvalue {lam:.3g})")
    L = sp.tril(M, format="csc")
    L.sum_duplicates()
    L.eliminate_zeros()
    L.sort_indices()
    return L
