"""Step bookkeeping shared by the two compiled ipsa loops (:mod:`.compiled`, :mod:`.compiled_bounds`).

Numba helpers inlined into both kernels (``inline='always'``: no call at run time), each the same
arithmetic, in the same order, as the numpy reference in :mod:`.iteration`:

* :func:`step_lengths`: the primal and dual step lengths of Fig. 2.1 step 4, ``min(a_hat_k, a_prim)``
  and ``min(a_hat_k, a_dual)``, or their common minimum when one step length serves both;
* :func:`bb_secant`: the damped Barzilai–Borwein update (2.45) of the scalar Hessian, rejected (and
  counted) when it is not finite or falls below ``beta_min``;
* :func:`step_stats`, :func:`save_record`: the per-step statistics and one history record;
* :func:`row_gradient`: ``weight * grad f_r(x)`` of one sample row (and its Hessian diagonal before
  the log-sum-exp correction), added onto the row's coordinates only; the row's kind (square atom,
  log-sum-exp group, squared hinge) is a run-time integer, so each kernel keeps one compiled signature.
"""
from __future__ import annotations

import math
import types

import numpy as np
from numba import njit

from .fast import HESSIANS
from .iteration import MAX_BACKTRACKS  # one value for the numpy path and both kernels


@njit(cache=True, inline="always")
def boundary_steps(tmin, rmax, frac, a_prim, a_dual):
    """The fraction-to-boundary step lengths (Fig. 2.1 step 4): ``frac / -min_i dz_i/z_i`` when some
    dual decreases, ``frac / max_i (J dx)_i/s_i`` when some slack does; else unchanged."""
    if tmin < 0:
        a_dual = frac / -tmin
    if rmax > 0:
        a_prim = frac / rmax
    return a_prim, a_dual


@njit(cache=True, inline="always")
def step_lengths(ahat, a_prim, a_dual, same):
    if same:
        a = min(ahat, a_dual, a_prim)
        return a, a
    return min(ahat, a_prim), min(ahat, a_dual)


@njit(cache=True, inline="always")
def backtrack(ap, ad, same, n_bt):
    """One halving of Fig. 2.1 step 5 (the dual step follows when one length serves both); after
    ``MAX_BACKTRACKS`` halvings both steps are 0 (the caller keeps the old point)."""
    ap *= 0.5
    if same:
        ad = ap
    n_bt += 1
    if n_bt > MAX_BACKTRACKS:
        ap = ad = 0.0
    return ap, ad, n_bt


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
def running_diagonal_q(Dn, Bv, qd, hs, ahat, d_min, n):
    """The running diagonal (§2.5.8) with a diagonal quadratic term ``qd`` outside the sampled rows:
    ``Dn = max((1 - ahat) Bv + ahat max(qd + hs, 0), d_min)``, ``h = Q.diagonal() + sampled`` in the numpy path's
    order (the bounds and pairs kernels)."""
    a1 = 1.0 - ahat
    for j in range(n):
        hj = qd[j] + hs[j]
        v = a1 * Bv[j] + ahat * (hj if hj > 0.0 else 0.0)
        Dn[j] = v if v > d_min else d_min


@njit(cache=True, inline="always")
def all_finite(a):
    """True when no entry of ``a`` is NaN or inf (a kernel's data checked once before its passes)."""
    for j in range(a.size):
        if not math.isfinite(a[j]):
            return False
    return True


@njit(cache=True, inline="always")
def group_width(lse_ptr):
    """The largest log-sum-exp group (at least 1): the size of the kernels' scratch vector ``sv``."""
    width = 1
    for q in range(lse_ptr.size - 1):
        width = max(width, lse_ptr[q + 1] - lse_ptr[q])
    return width


@njit(cache=True)
def copy_into(dst, src):
    """``dst[:] = src`` (same sizes) as an explicit loop: a slice assignment makes numba compile its
    broadcasting ``setitem`` and the function raising its shape-mismatch error at every use, 0.2-0.4 s of the
    cold compile each; this compiles once per signature (and LLVM inlines it)."""
    for i in range(dst.size):
        dst[i] = src[i]


@njit(cache=True)
def fill(dst, v):
    """``dst[:] = v`` as an explicit loop (see :func:`copy_into`)."""
    for i in range(dst.size):
        dst[i] = v


@njit(cache=True, inline="always")
def save_record(rec, rec_x, nrec, k, mu, eta, ap, ad, a_prim, a_dual, n_bt, x):
    rec[nrec, 0], rec[nrec, 1], rec[nrec, 2], rec[nrec, 3] = k, mu, eta, ap
    rec[nrec, 4], rec[nrec, 5], rec[nrec, 6], rec[nrec, 7] = ad, a_prim, a_dual, n_bt
    if rec_x.shape[0] > nrec:
        copy_into(rec_x[nrec], x)
    return nrec + 1


@njit(cache=True, inline="always")
def row_gradient(kind, r, x, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, g, want_h, h, Bm, sv):
    """Add ``weight * grad f_r(x)`` to ``g`` and (``want_h``) the first part of ``weight * diag Hess
    f_r(x)`` to ``h`` on the coordinates of sample row ``r`` (:class:`varopt.oracles.rows._AtomRows`
    / ``_LseRows``); ``sv`` is scratch of the group's size.

    ``kind`` (:data:`.fast.ROW_KINDS`): 0 square atom ``coef (a^T x + b)^2``: ``g += 2 c w u a``, ``h += 2 c w a^2``
    (complete). 2 squared hinge ``coef max(a^T x + b, 0)^2`` (the L2-SVM loss; Mangasarian 2002):
    ``g += 2 c w max(u, 0) a``, ``h += 2 c w [u > 0] a^2`` (complete; the one-sided ``g''`` of
    :class:`varopt.program.atoms.SqPos`, 0 at ``u = 0``). 1 log-sum-exp group
    ``coef log sum_k exp(a_k^T x + b_k)`` with softmax ``p``: ``g += c w sum_k p_k a_k``,
    ``h += c w sum_k p_k a_k^2`` and ``Bm += sum_k p_k a_k``; the caller completes the diagonal with
    ``h_j -= c w Bm_j^2`` on the coordinates it tracks, ``c w`` being the returned value (0 for an
    atom row)."""
    if kind != 1:  # one atom row: u = a_r^T x + b_r
        u = 0.0
        for p in range(A_ptr[r], A_ptr[r + 1]):
            u += A_val[p] * x[A_idx[p]]
        u = u + ab[r]
        cw = coef[r] * weight
        if kind == 0:  # coef * u^2
            d1, d2 = 2.0 * u, 2.0
        else:  # coef * max(u, 0)^2: np.maximum(u, 0.0) (a NaN u stays NaN, so the step is declined and the
            # numpy path raises) and np.where(u > 0, 2.0, 0.0), as SqPos.d1 / d2 on the numpy path
            d1 = 2.0 * (0.0 if u <= 0.0 else u)
            d2 = 2.0 if u > 0.0 else 0.0
        w = cw * d1
        for p in range(A_ptr[r], A_ptr[r + 1]):
            g[A_idx[p]] += A_val[p] * w
        if want_h:
            hw = cw * d2
            for p in range(A_ptr[r], A_ptr[r + 1]):
                v = A_val[p]
                h[A_idx[p]] += v * v * hw
        return 0.0
    k0, k1 = lse_ptr[r], lse_ptr[r + 1]  # log-sum-exp group r
    mx = -np.inf
    for k in range(k0, k1):
        acc = 0.0
        for p in range(A_ptr[k], A_ptr[k + 1]):
            acc += A_val[p] * x[A_idx[p]]
        sv[k - k0] = acc + ab[k]
        if sv[k - k0] > mx:
            mx = sv[k - k0]
    tot = 0.0
    for k in range(k1 - k0):
        sv[k] = math.exp(sv[k] - mx)
        tot += sv[k]
    cw = coef[r] * weight * 1.0
    for k in range(k0, k1):
        pk = sv[k - k0] / tot
        w = pk * cw
        for p in range(A_ptr[k], A_ptr[k + 1]):
            j = A_idx[p]
            v = A_val[p]
            g[j] += v * w
            if want_h:
                h[j] += v * v * w
                Bm[j] += pk * v
    return cw


def per_hessian(prefix, func):
    """One compiled kernel per Hessian, in the order of ``fast.HESSIANS``: copies of ``func`` (same code) whose
    global ``HESS`` is the Hessian (0 identity, 1 damped BB, 2 running diagonal). Numba freezes a global as a
    constant, so LLVM folds the other two Hessians' code away (measured on a1a, kernel only, same process:
    identity -15 %, damped BB -10 %, diagonal -5 % per step against one compilation reading the Hessian from
    ``ip[8]``; same iterates). Each copy is named ``<prefix>_<hessian>`` (its own cache entry) and compiled on
    its first call. A copy rather than a wrapper calling an ``inline='always'`` kernel: numba's IR inlining of
    the whole kernel into each wrapper cost about half of the cold compile."""
    kernels = []
    for name, hess in sorted(HESSIANS.items(), key=lambda kv: kv[1]):
        glb = dict(func.__globals__, HESS=hess)
        f = types.FunctionType(func.__code__, glb, f"{prefix}_{name}", func.__defaults__, func.__closure__)
        f.__qualname__, f.__module__, f.__doc__ = f.__name__, func.__module__, func.__doc__
        kernels.append(njit(cache=True, error_model="numpy")(f))
    return tuple(kernels)
