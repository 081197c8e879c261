"""Step bookkeeping shared by the two compiled ipsa loops (:mod:`.compiled`, :mod:`.compiled_bounds`).

Numba helpers inlined into both kernels (``inline='always'``: no call at run time), each the same
arithmetic, in the same order, as the numpy reference in :mod:`.iteration`:

* :func:`step_lengths`: the primal and dual step lengths of Fig. 2.1 step 4, ``min(a_hat_k, a_prim)``
  and ``min(a_hat_k, a_dual)``, or their common minimum when one step length serves both;
* :func:`bb_secant`: the damped Barzilai–Borwein update (2.45) of the scalar Hessian, rejected (and
  counted) when it is not finite or falls below ``beta_min``;
* :func:`step_stats`, :func:`save_record`: the per-step statistics and one history record.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .iteration import MAX_BACKTRACKS  # noqa: F401  (one value for the numpy path and both kernels)


@njit(cache=True, inline="always")
def step_lengths(ahat, a_prim, a_dual, same):
    if same:
        a = min(ahat, a_dual, a_prim)
        return a, a
    return min(ahat, a_prim), min(ahat, a_dual)


@njit(cache=True, inline="always")
def bb_secant(st, sti, ahat, sy, ss, beta_min):
    if ss > 1e-300:
        beta = st[5]
        new = beta - ahat * (beta - sy / ss)  # (2.45)
        if not np.isfinite(new) or new < beta_min:
            sti[5] += 1
        else:
            st[5] = new


@njit(cache=True, inline="always")
def step_stats(st, sti, k, n_bt, ap, ad, a_prim, a_dual, mu, ahat):
    sti[0] = k
    sti[1] = n_bt
    sti[2] += n_bt
    sti[3] += 1
    if ap < ahat * (1 - 1e-12):
        sti[4] += 1
    st[0], st[1], st[2], st[3], st[4] = ap, ad, a_prim, a_dual, mu
    st[6] += ap / ahat


@njit(cache=True, inline="always")
def save_record(rec, rec_x, nrec, k, mu, eta, ap, ad, a_prim, a_dual, n_bt, x):
    rec[nrec, 0], rec[nrec, 1], rec[nrec, 2], rec[nrec, 3] = k, mu, eta, ap
    rec[nrec, 4], rec[nrec, 5], rec[nrec, 6], rec[nrec, 7] = ad, a_prim, a_dual, n_bt
    if rec_x.shape[0] > nrec:
        rec_x[nrec, :] = x
    return nrec + 1
