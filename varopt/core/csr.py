"""csr matrices built from their arrays without scipy's constructor.

scipy's ``csr_matrix((data, indices, indptr), shape)`` costs about 25 us in scipy 1.17 (the index-dtype search and
the format checks); compiling a small problem and setting up its solver builds dozens of csr matrices from arrays
that are valid by construction. :func:`csr_unchecked` sets the arrays directly; :data:`csr_raw` is it when the
self-test :func:`unchecked_works` passes on this scipy at import, else scipy's checked constructor.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

_INT32_MAX = np.iinfo(np.int32).max

try:
    from scipy.sparse._base import MAXPRINT as _MAXPRINT
except ImportError:  # pragma: no cover - other scipy layouts use the checked constructor
    _MAXPRINT = 50


def csr_checked(data, indices, indptr, shape):
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def csr_unchecked(data, indices, indptr, shape):
    """The csr matrix with these arrays, without scipy's constructor. The caller guarantees a valid csr structure
    (``indptr`` nondecreasing from 0 with one entry per row plus one, ``indices`` in range); index arrays get the
    dtype scipy's constructor would choose (int32 when everything fits)."""
    rows, cols = int(shape[0]), int(shape[1])
    idx = np.int32 if max(rows, cols, len(indices)) < _INT32_MAX else np.int64
    M = sp.csr_matrix.__new__(sp.csr_matrix)
    M._shape = (rows, cols)
    M.maxprint = _MAXPRINT
    M.data = np.asarray(data, dtype=float)
    M.indices = np.asarray(indices, dtype=idx)
    M.indptr = np.asarray(indptr, dtype=idx)
    return M


def unchecked_works(unchecked=csr_unchecked, checked=csr_checked):
    """Whether this scipy's csr matrices work when built by ``unchecked`` (it sets scipy's private attributes; a
    scipy whose layout differs falls back to the checked constructor)."""
    try:
        args = (np.array([1.0, 2.0, 3.0]), np.array([1, 0, 3]), np.array([0, 1, 1, 3]), (3, 4))
        ref, new = checked(*args), unchecked(*args)
        v = np.array([1.0, -2.0, 0.5, 4.0])
        # the same instance attributes as the constructor sets (a scipy that adds one falls back), same dtypes
        ok = (type(new) is type(ref) and set(vars(new)) == set(vars(ref))
              and all(getattr(new, a).dtype == getattr(ref, a).dtype for a in ("data", "indices", "indptr"))
              and new.shape == ref.shape and new.nnz == ref.nnz
              and np.array_equal(new.toarray(), ref.toarray()) and np.array_equal(new @ v, ref @ v)
              and np.array_equal((new.T @ ref + new.T @ new).toarray(), 2 * (ref.T @ ref).toarray())
              and np.array_equal(new[[2, 0]].toarray(), ref[[2, 0]].toarray())
              and new.has_canonical_format == ref.has_canonical_format)
        new.check_format(full_check=True)
        return bool(ok)
    except Exception:  # noqa: BLE001 -- any failure means: use scipy's constructor
        return False


csr_raw = csr_unchecked if unchecked_works() else csr_checked


def ranges(starts, counts):
    """Concatenation of ``arange(s, s + c)`` for every (s, c), vectorized."""
    counts = np.asarray(counts, dtype=np.int64)
    ends = counts.cumsum()
    total = int(ends[-1]) if ends.size else 0
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # entry t of range k is starts[k] + (t - first position of range k): one repeat of the per-range shift
    # (starts - first positions) over all entries instead of two (integers: the same values)
    return (np.asarray(starts, dtype=np.int64) - (ends - counts)).repeat(counts) + np.arange(total, dtype=np.int64)


def take_rows(M, rows):
    """``M[rows]`` for a csr ``M`` and an integer array ``rows`` (repeats allowed) from the arrays (scipy's row
    indexing costs tens of microseconds on small matrices); the rows keep their order within, so a canonical ``M``
    gives a canonical result."""
    rows = np.asarray(rows, dtype=np.int64)
    k = rows.size
    if k and rows[0] >= 0 and int(rows[-1]) - int(rows[0]) == k - 1 and (k == 1 or not np.count_nonzero(rows[1:] <= rows[:-1])):
        # consecutive rows r0 .. r0 + k - 1 (a slice, the rows left after singleton rows leave): one block of
        # the arrays, copied (the result owns its arrays, as the gather below gives)
        r0 = int(rows[0])
        s, e = int(M.indptr[r0]), int(M.indptr[r0 + k])
        indptr = M.indptr[r0:r0 + k + 1].astype(np.int64)
        indptr -= s
        return csr_raw(M.data[s:e].copy(), M.indices[s:e].copy(), indptr, (k, M.shape[1]))
    # the rows' entries: ranges(starts, counts) with the starts gathered once and the result's indptr (the
    # counts' cumulative sums) as the ranges' first positions (numpy calls cost ~1-2 us each at these sizes)
    starts = M.indptr[rows]
    counts = M.indptr[rows + 1] - starts
    indptr = np.zeros(k + 1, dtype=np.int64)
    counts.cumsum(out=indptr[1:])
    idx = (starts - indptr[:-1]).repeat(counts) + np.arange(int(indptr[-1]), dtype=np.int64)
    return csr_raw(M.data[idx], M.indices[idx], indptr, (k, M.shape[1]))


def dense_to_csr(val):
    """The csr matrix of the 2-D array ``val`` (stored zeros left out), from its arrays: scipy's ``csr_matrix(val)``
    (which goes through coo) to the last bit. A dense ``val`` without zeros (a data matrix) takes no mask gathers:
    its column indices repeat ``0 .. q-1``. The result owns its arrays (never a view of ``val``)."""
    p, q = val.shape
    nz = val != 0
    if np.count_nonzero(nz) == nz.size:
        # (the column numbers by a 2-D repeat: np.tile's wrapper costs twice as much on these sizes)
        return csr_raw(np.array(val, dtype=float).reshape(-1), np.arange(q)[None, :].repeat(p, axis=0).ravel(),
                       np.arange(p + 1) * q, (p, q))
    flat = np.flatnonzero(nz)  # row-major positions: row flat // q, column flat % q
    # (the column as flat - (flat // q) q: numpy's integer % costs twice a floor division and a product)
    return csr_raw(val[nz], flat - (flat // q) * q, np.searchsorted(flat, np.arange(p + 1) * q), (p, q))
