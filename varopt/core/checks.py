"""Finite-value checks at the package boundary: one place that rejects NaN and inf with an
error naming the input (sparse matrices are checked on their stored values)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError

#: ||x|| beyond which a solver's iterates count as diverging (IPOPT's diverging_iterates_tol)
DIVERGING_ITERATES = 1e20


def require_finite(name: str, *arrays, allow_neginf: bool = False, error=InputDataError):
    """Raise ``error`` naming ``name`` when an array holds NaN or inf (``-inf`` allowed with
    ``allow_neginf``, e.g. the log of a zero base measure). ``name`` may be a function returning it (formatted
    only on the error: a compiled factorisation checks 3,000 lifted rows whose labels are Pyomo expressions)."""
    for a in arrays:
        data = a.data if sp.issparse(a) else np.asarray(a, dtype=float)
        if data.size and not np.isfinite(data).all():
            if allow_neginf and not (np.isnan(data).any() or (data == np.inf).any()):
                continue
            raise error(f"{name() if callable(name) else name} contains NaN or inf")
