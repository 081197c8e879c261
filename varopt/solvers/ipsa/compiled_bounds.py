"""Numba kernel of the IPSA step at batch size 1 for bound constraints only (the L1 split form).

``run_bounds_identity``, ``run_bounds_bb``, ``run_bounds_diagonal`` (one compilation
of :func:`_run_bounds` per Hessian, :data:`RUN_BOUNDS`) perform up to ``rows.size`` iterations of
:meth:`.IpsaRun.step` (Carbonetto 2009, Fig. 2.1 steps 1-7) when ``c(x) <= 0`` holds bounds only (lower ``lb_i - x_j <= 0``, upper
``x_j - ub_i <= 0``) and ``B`` is diagonal, so that the reduced system (2.20) is diagonal:

    dx_j = (-g_j - mu (J^T (1/s))_j) / (B_j + (J^T diag(z/s) J)_jj)
    dz_i = mu/s_i - z_i + (z_i/s_i) (J dx)_i                                   (2.21)

Same formulas, same evaluation order per entry as the numpy path (:mod:`.direction`,
:mod:`.constraints`); what differs is how the work is laid out, not what is computed:

* the sample's gradient (and, for the running diagonal, its Hessian diagonal) is scattered into
  zeroed scratch vectors on the sample's nonzeros only, and ``g_j = lin_j + scratch_j`` is read
  in the pass that needs it (off the sample's nonzeros that is ``lin_j + 0.0``, as in numpy);
* a step is two kinds of passes over contiguous vectors: the direction (elementwise
  divisions, vectorised by LLVM) with the fraction-to-boundary minima, and the trial point
  ``x + a dx`` with its slacks, the interior test, ``z + a dz``, the next ``eta = s^T z`` and
  (damped BB) ``s^T s``; the point is written to spare buffers which are swapped in when
  accepted, so a rejected trial or an error leaves the state untouched;
* minima/maxima run on four accumulators (exact in any order); the sums ``s^T z`` and
  ``s^T s`` are summed in the order LLVM's vectoriser picks (``fastmath`` reassociation on
  those two sums only), like the BLAS dot product of the numpy path, whose order is another
  one (~1e-16 relative);
* the damped BB curvature ``s^T y`` sums over the sample's nonzeros only: elsewhere
  ``y_j = lin_j - lin_j = 0`` exactly.

With ``prefix`` (slack ``i`` is the lower bound of variable ``i``, ``i < m``; free variables
after them: the L1 split form with or without an intercept) the passes read no index arrays.

Anything that makes the numpy path raise returns ``code = 1`` before the state changes; the
caller replays that iteration on the numpy path (see :mod:`.compiled`). History records
(iteration ``it0 + it + 1`` a multiple of ``every``) are written to ``rec`` as ``(k, mu, eta, ap,
ad, a_prim, a_dual, n_bt)`` and, when ``rec_x`` has rows, the iterate to ``rec_x``. Packed
parameters ``fp``, ``ip``, ``st``, ``sti`` as in :mod:`.compiled`.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .kernel_steps import (MAX_BACKTRACKS, all_finite, backtrack, bb_secant, boundary_steps, copy_into, fill,
                           group_width, per_hessian, row_gradient, running_diagonal_q, save_record, step_lengths,
                           step_stats)



@njit(cache=True, error_model="numpy", inline="always")
def sample_gradient(kind, r, x, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, gs, want_h, hs, Bm, sv,
                    S_ptr, S_idx):
    """Add ``weight * grad f_r(x)`` to ``gs`` and (``want_h``) ``weight * diag Hess f_r(x)`` to ``hs``
    (both zero on the sample's coordinates ``S_idx[S_ptr[r]:S_ptr[r + 1]]`` on entry), the formulas
    of :func:`.compiled._gradient`."""
    cw = row_gradient(kind, r, x, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, gs, want_h, hs, Bm, sv)
    if kind == 1 and want_h:  # a log-sum-exp group (kind 1) completes its diagonal
        for q in range(S_ptr[r], S_ptr[r + 1]):
            j = S_idx[q]
            hs[j] = hs[j] - cw * (Bm[j] * Bm[j])


@njit(cache=True)
def group_support(A_ptr, A_idx, lse_ptr, n):
    """``(S_ptr, S_idx)``: the distinct coordinates of the rows of each log-sum-exp group."""
    G = lse_ptr.size - 1
    mark = np.full(n, -1, dtype=np.int64)
    S_ptr = np.zeros(G + 1, dtype=np.int64)
    S_idx = np.empty(A_ptr[lse_ptr[G]] - A_ptr[lse_ptr[0]], dtype=np.int64)
    c = 0
    for r in range(G):
        for k in range(lse_ptr[r], lse_ptr[r + 1]):
            for p in range(A_ptr[k], A_ptr[k + 1]):
                j = A_idx[p]
                if mark[j] != r:
                    mark[j] = r
                    S_idx[c] = j
                    c += 1
        S_ptr[r + 1] = c
    return S_ptr, S_idx[:c].copy()


@njit(cache=True, error_model="numpy", fastmath={"reassoc"})
def _dot(a, b, n):
    """``a[:n] @ b[:n]`` summed in the order the vectoriser picks (as a BLAS dot product does;
    exact to rounding, not the numpy path's order)."""
    c = 0.0
    for i in range(n):
        c += a[i] * b[i]
    return c


@njit(cache=True, error_model="numpy", fastmath={"reassoc"})
def _sqdist(a, b, n):
    """``||a[:n] - b[:n]||^2`` (summed as :func:`_dot`)."""
    c = 0.0
    for i in range(n):
        e = a[i] - b[i]
        c += e * e
    return c


@njit(cache=True, inline="always")
def bb_commit(xn, x, gs, gs2, S_idx, q0, q1_, lin, st, sti, ahat, beta_min, n):
    """Damped BB's secant pair at an accepted step (shared by both kernels), the sample's gradient at the new
    point ``xn`` being in ``gs2`` (scattered by the kernel before its pass over the duals, whose vector work
    then overlaps that latency-bound chain: measured -7 % per step on a1a): one pass over the sample's
    coordinates for finiteness, ``s^T y`` and the reset of ``gs2`` for the next sample; the update is skipped
    when the new gradient is not finite."""
    fin = True
    sy = 0.0
    for q in range(q0, q1_):
        j = S_idx[q]
        g2j = lin[j] + gs2[j]
        gs2[j] = 0.0
        fin = fin and math.isfinite(g2j)
        sy += (xn[j] - x[j]) * (g2j - (lin[j] + gs[j]))
    if fin:
        bb_secant(st, sti, ahat, sy, _sqdist(xn, x, n), beta_min)


@njit(cache=True, inline="always")
def bb_commit_q(xn, x, gs, gs2, S_idx, q0, q1_, lin, qd, lq, st, sti, ahat, beta_min, n):
    """:func:`bb_commit` with a diagonal quadratic term ``qd`` (``lq = lin + Q x`` at the old point): ``y_j =
    g(xn)_j - g(x)_j`` is ``qd_j (xn_j - x_j)`` off the sample's coordinates, no longer 0, so ``s^T y`` and the
    finiteness test run over all ``n`` entries (as the numpy path's ``s @ y``, summed in another order: ~1e-16
    relative); ``g(xn)_j = (lin_j + (0 + qd_j xn_j)) + gs2_j``, the numpy path's ``(lin + Q @ xn) + sampled``."""
    fin = True
    sy = 0.0
    for j in range(n):
        g2j = (lin[j] + (0.0 + qd[j] * xn[j])) + gs2[j]
        fin = fin and math.isfinite(g2j)
        sy += (xn[j] - x[j]) * (g2j - (lq[j] + gs[j]))
    for q in range(q0, q1_):
        gs2[S_idx[q]] = 0.0
    if fin:
        bb_secant(st, sti, ahat, sy, _sqdist(xn, x, n), beta_min)


@njit(cache=True, inline="always")
def lin_plus_q(lq, lin, qd, x, n):
    """``lq = lin + Q x`` for a diagonal ``Q = diag(qd)``, entry by entry as the numpy path's ``g = lin.copy();
    g += Q @ x`` (scipy's CSR product sums each row from 0.0: ``0.0 + qd_j x_j``)."""
    for j in range(n):
        lq[j] = lin[j] + (0.0 + qd[j] * x[j])


@njit(cache=True, error_model="numpy", inline="always")
def _min4(a, n):
    c0 = c1 = c2 = c3 = np.inf
    n4 = n - n % 4
    for i in range(0, n4, 4):
        c0 = a[i] if a[i] < c0 else c0
        c1 = a[i + 1] if a[i + 1] < c1 else c1
        c2 = a[i + 2] if a[i + 2] < c2 else c2
        c3 = a[i + 3] if a[i + 3] < c3 else c3
    for i in range(n4, n):
        c0 = a[i] if a[i] < c0 else c0
    return min(min(c0, c1), min(c2, c3))


@njit(cache=True, error_model="numpy", inline="always")
def _max4(a, n):
    c0 = c1 = c2 = c3 = -np.inf
    n4 = n - n % 4
    for i in range(0, n4, 4):
        c0 = a[i] if a[i] > c0 else c0
        c1 = a[i + 1] if a[i + 1] > c1 else c1
        c2 = a[i + 2] if a[i + 2] > c2 else c2
        c3 = a[i + 3] if a[i + 3] > c3 else c3
    for i in range(n4, n):
        c0 = a[i] if a[i] > c0 else c0
    return max(max(c0, c1), max(c2, c3))


@njit(cache=True, error_model="numpy", inline="always")
def _maxabs4(a, n):
    """``max(|a[:n]|)`` (0 when empty; exact in any order), on four accumulators."""
    c0 = c1 = c2 = c3 = 0.0
    n4 = n - n % 4
    for i in range(0, n4, 4):
        v0, v1, v2, v3 = abs(a[i]), abs(a[i + 1]), abs(a[i + 2]), abs(a[i + 3])
        c0 = v0 if v0 > c0 else c0
        c1 = v1 if v1 > c1 else c1
        c2 = v2 if v2 > c2 else c2
        c3 = v3 if v3 > c3 else c3
    for i in range(n4, n):
        v0 = abs(a[i])
        c0 = v0 if v0 > c0 else c0
    return max(max(c0, c1), max(c2, c3))


#: the Hessian of a compiled copy of :func:`_run_bounds` (0 identity, 1 damped BB, 2 running diagonal): each copy
#: has its own value (:func:`.kernel_steps.per_hessian`)
HESS = 0


def _run_bounds(fp, ip, st, sti, x0, s0, z0, lin0, qd, Bvec0, rows, A_ptr, A_idx, A_val, ab, coef, lse_ptr,
                S_ptr, S_idx, svar, ssg, sbnd, prefix, it0, every, rec, rec_x, trace_x, trace_z):
    """Up to ``rows.size`` IPSA iterations in place; returns ``(done, code, records)`` (module docstring);
    the Hessian ``HESS`` is a constant of each compiled copy (:data:`RUN_BOUNDS`)."""
    hess = HESS
    k0, step_power, sigma, ks, sigma_power, mu_min, frac, inv_m, weight, beta_min, d_min = (
        fp[0], fp[1], fp[2], fp[3], fp[4], fp[5], fp[6], fp[7], fp[8], fp[9], fp[10])
    n, m, kind, same = ip[0], ip[1], ip[2], ip[9]
    if not (all_finite(lin0) and all_finite(qd)):
        return 0, 1, 0
    # a diagonal quadratic term Q = diag(qd) outside the sampled rows (empty when there is none): the passes
    # below read lin = lin0 + Q x, refreshed at each step (lin0 itself without one)
    hasq = qd.size > 0
    # (a buffer in both cases rather than a choice between two arrays, which cost the damped-BB step 5-9 % without
    # Q on a1a; likely LLVM's aliasing of a fresh array, not checked)
    lin = np.empty(n)
    copy_into(lin, lin0)
    gs, hs, gs2, Bm = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    sv = np.empty(group_width(lse_ptr))
    dx, t, bd, xn, Dn = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    inv, d, dz, q1, q2, sn, zn, Jdx = (np.empty(m), np.empty(m), np.empty(m), np.empty(m), np.empty(m),
                                       np.empty(m), np.empty(m), np.empty(m))
    x, s, z, Bv = x0, s0, z0, Bvec0
    flip = False
    nrec = 0
    eta = _dot(s, z, m)
    beta_filled = np.nan
    due = every - it0 % every  # iterations to the next history record
    done = rows.size
    code = 0
    for it in range(rows.size):
        r = rows[it]
        k = sti[0] + 1
        ahat = float(k0 + k) ** -step_power
        # x ** 1.0 == x exactly (libm pow is within 0.52 ulp, x is representable): no pow call
        # for the default sigma_power
        sig = sigma * (ks / (ks + k)) if sigma_power == 1.0 else sigma * (ks / (ks + k)) ** sigma_power
        mu = max(mu_min, sig * eta * inv_m) if m else 0.0
        q0, q1_ = S_ptr[r], S_ptr[r + 1]
        if hasq:
            lin_plus_q(lin, lin0, qd, x, n)
        sample_gradient(kind, r, x, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, gs, hess == 2, hs, Bm, sv,
                        S_ptr, S_idx)
        # a non-finite g_j makes dx_j non-finite (checked below): no separate test
        hfin = True
        if hess == 2:  # the Hessian diagonal qd + hs is finite off the sample's coordinates (qd is finite)
            for q in range(q0, q1_):
                if not math.isfinite(hs[S_idx[q]] + (qd[S_idx[q]] if hasq else 0.0)):
                    hfin = False
        # B: identity (Bvec), damped BB (beta), running diagonal (Dn, committed with the step)
        if hess == 0:
            Bc = Bv
        else:
            Bc = Dn
            if hess == 1:
                # B = beta I: the prefix layout reads the scalar (its own loops below); the indexed
                # one reads Dn, refilled only when beta moved
                if not prefix and st[5] != beta_filled:
                    beta_filled = st[5]
                    for j in range(n):
                        Dn[j] = beta_filled
            elif hfin and hasq:  # h = Q.diagonal() + sampled, the numpy path's order
                running_diagonal_q(Dn, Bv, qd, hs, ahat, d_min, n)
            elif hfin:
                a1 = 1.0 - ahat
                for j in range(n):  # finite operands: these selects are np.maximum
                    hj = hs[j]
                    v = a1 * Bv[j] + ahat * (hj if hj > 0.0 else 0.0)
                    Dn[j] = v if v > d_min else d_min
            else:
                copy_into(Dn, Bv)
        # direction (2.20) and dual direction (2.21); short loops over few arrays, which LLVM
        # vectorises (the divisions dominate the step)
        for i in range(m):
            v = 1.0 / s[i]
            inv[i] = v
            d[i] = z[i] * v
        nbad = 0
        if prefix and hess == 1:  # B = beta I: the same loops with the scalar (a select in the
            # loop would keep LLVM from vectorising it)
            beta = st[5]
            for j in range(m):
                v = (-(lin[j] + gs[j]) - mu * (0.0 - inv[j])) / (beta + (0.0 + d[j]))
                dx[j] = v
                nbad += 0 if math.isfinite(v) else 1
            for j in range(m, n):
                v = (-(lin[j] + gs[j]) - mu * 0.0) / (beta + 0.0)
                dx[j] = v
                nbad += 0 if math.isfinite(v) else 1
        elif prefix:
            for j in range(m):
                v = (-(lin[j] + gs[j]) - mu * (0.0 - inv[j])) / (Bc[j] + (0.0 + d[j]))
                dx[j] = v
                nbad += 0 if math.isfinite(v) else 1
            for j in range(m, n):
                v = (-(lin[j] + gs[j]) - mu * 0.0) / (Bc[j] + 0.0)
                dx[j] = v
                nbad += 0 if math.isfinite(v) else 1
        else:
            fill(t, 0.0)
            fill(bd, 0.0)
            for i in range(m):  # lower bounds first, then upper: the numpy path's order
                j = svar[i]
                t[j] -= ssg[i] * inv[i]
                bd[j] += d[i]
            for j in range(n):
                v = (-(lin[j] + gs[j]) - mu * t[j]) / (Bc[j] + bd[j])
                dx[j] = v
                nbad += 0 if math.isfinite(v) else 1
        if nbad:
            done, code = it, 1
            break
        a_dual = a_prim = np.inf
        if m:
            if prefix:  # J dx = -dx
                for i in range(m):
                    dz[i] = mu * inv[i] - z[i] + d[i] * -dx[i]
                for i in range(m):
                    q2[i] = -dx[i] * inv[i]
            else:
                for i in range(m):
                    Jdx[i] = -(ssg[i] * dx[svar[i]])
                for i in range(m):
                    dz[i] = mu * inv[i] - z[i] + d[i] * Jdx[i]
                for i in range(m):
                    q2[i] = Jdx[i] * inv[i]
            for i in range(m):
                q1[i] = dz[i] / z[i]
            tmin = _min4(q1, m)
            rmax = _max4(q2, m)
            a_prim, a_dual = boundary_steps(tmin, rmax, frac, a_prim, a_dual)
        ap, ad = step_lengths(ahat, a_prim, a_dual, same)
        n_bt = 0
        while True:  # Fig. 2.1 step 5
            ok = 0
            if prefix:
                for i in range(m):
                    v = x[i] + ap * dx[i]
                    xn[i] = v
                    v = v - sbnd[i]
                    sn[i] = v
                    ok += 1 if v > 0.0 else 0
                for j in range(m, n):
                    xn[j] = x[j] + ap * dx[j]
            else:
                for j in range(n):
                    xn[j] = x[j] + ap * dx[j]
                for i in range(m):
                    v = ssg[i] * (xn[svar[i]] - sbnd[i])  # ub - x = -(x - ub) exactly
                    sn[i] = v
                    ok += 1 if v > 0.0 else 0
            if ok == m:  # (m = 0: no constraints, the full step)
                break
            ap, ad, n_bt = backtrack(ap, ad, same, n_bt)
            if n_bt > MAX_BACKTRACKS:
                copy_into(xn, x)
                copy_into(sn, s)
                break
        if hess == 1 and ap > 0:  # damped BB: the sample's gradient at the new point, for bb_commit
            sample_gradient(kind, r, xn, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, gs2, False, hs, Bm, sv,
                            S_ptr, S_idx)
        eta_new = 0.0
        if m:
            ok = 0
            for i in range(m):
                v = z[i] + ad * dz[i]
                zn[i] = v
                ok += 1 if v > 0.0 else 0
            if ok != m:
                done, code = it, 1
                break
            eta_new = _dot(sn, zn, m)
        # --- commit ---------------------------------------------------------------------------
        if hess == 1 and ap > 0 and hasq:
            bb_commit_q(xn, x, gs, gs2, S_idx, q0, q1_, lin0, qd, lin, st, sti, ahat, beta_min, n)
        elif hess == 1 and ap > 0:
            bb_commit(xn, x, gs, gs2, S_idx, q0, q1_, lin, st, sti, ahat, beta_min, n)
        step_stats(st, sti, k, n_bt, ap, ad, a_prim, a_dual, mu, ahat)
        x, xn = xn, x
        s, sn = sn, s
        z, zn = zn, z
        if hess == 2:
            Bv, Dn = Dn, Bv
        flip = not flip
        eta = eta_new
        for q in range(q0, q1_):
            gs[S_idx[q]] = 0.0
        if hess == 2:
            for q in range(q0, q1_):
                hs[S_idx[q]] = 0.0
                Bm[S_idx[q]] = 0.0
        if trace_x.shape[0] > it:
            copy_into(trace_x[it], x)
            copy_into(trace_z[it], z)
        due -= 1
        if due == 0 and nrec < rec.shape[0]:
            nrec = save_record(rec, rec_x, nrec, k, mu, eta, ap, ad, a_prim, a_dual, n_bt, x)
        if due == 0:
            due = every
    if flip:
        copy_into(x0, x)
        copy_into(s0, s)
        copy_into(z0, z)
        if hess == 2:
            copy_into(Bvec0, Bv)
    return done, code, nrec



#: the kernel of each Hessian (index ``fast.HESSIANS[name]``): ``run_bounds_identity``, ``run_bounds_bb``,
#: ``run_bounds_diagonal`` (:func:`.kernel_steps.per_hessian`)
RUN_BOUNDS = per_hessian("run_bounds", _run_bounds)
