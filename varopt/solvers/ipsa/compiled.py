"""Numba kernels of the IPSA step at batch size 1 (imported only when numba is installed).

:func:`run_chunk` performs up to ``rows.size`` iterations of :meth:`.IpsaRun.step` (Carbonetto
2009, Fig. 2.1 steps 1-7) in compiled code, for the cases :mod:`.fast` admits: a finite sum of
``square`` atom rows (least squares), squared hinges ``max(u, 0)^2`` (``sqpos`` rows: the L2-SVM) or
log-sum-exp groups (logistic, multinomial) read off the program objective, one row/group per sample; bounds and linear rows whose reduced system (2.20)
is diagonal or block diagonal (``ReducedSystem.mode`` ``diag`` / ``blocks``); identity, damped
Barzilai-Borwein (2.45) or running-diagonal (§2.5.8) Hessians. Every formula is the numpy
path's, evaluated in the same order where the order is ours (reductions done by BLAS in the numpy
path may round differently: ~1e-16 relative per step).

Anything that makes the numpy path raise (non-finite gradient or direction, a dual variable
leaving ``z > 0``) is not handled here: the kernel returns *before* changing any state
(``code = 1``) and the caller replays that iteration on the numpy path, which raises the same error.

Packed parameters (see :mod:`.fast`): ``fp = (k0, step_power, sigma, ks, sigma_power, mu_min,
step_fraction, inv_m, weight, beta_min, d_min)``, ``ip = (n, m, kind, lower_only, n_lb, n_ub, n_lin,
mode, hessian, dual_same)``, float state ``st = (ap, ad, a_prim, a_dual, mu, beta, sum_step_ratio)``,
int state ``sti = (k, n_bt, backtracks, steps, boundary_limited, bb_skipped)``. History records
(iteration ``it0 + it + 1`` a multiple of ``every``) go to ``rec`` as ``(k, mu, eta, ap, ad, a_prim,
a_dual, n_bt)`` and, when ``rec_x`` has rows, the iterate to ``rec_x``. Bounds-only problems run the
fused kernel of :mod:`.compiled_bounds` instead.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .kernel_steps import (MAX_BACKTRACKS, backtrack, bb_secant, boundary_steps, copy_into, fill, row_gradient,
                           save_record, step_lengths, step_stats)

EPS = float(np.finfo(float).eps)


@njit(cache=True, inline='always')
def _rowdot(ptr, idx, val, r, x):
    acc = 0.0
    for p in range(ptr[r], ptr[r + 1]):
        acc += val[p] * x[idx[p]]
    return acc


@njit(cache=True, inline='always')
def _gradient(kind, r, x, lin, qd, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, g, want_h, h, Bm):
    """``g = lin + weight * grad f_r(x)`` and (``want_h``) ``h = weight * diag Hess f_r(x)`` of sample
    row ``r`` (:class:`varopt.oracles.rows._AtomRows` / ``_LseRows``); with a diagonal quadratic term
    ``Q = diag(qd)`` (``qd`` empty when there is none) ``g = (lin + Q x) + weight * grad f_r(x)`` and
    ``h = qd + weight * diag Hess f_r(x)``, the numpy path's order (:class:`varopt.oracles.FiniteSumOracle`;
    scipy's CSR product sums each row of ``Q x`` from 0.0)."""
    n = x.size
    for j in range(n):
        g[j] = 0.0
    if want_h:
        for j in range(n):
            h[j] = 0.0
            Bm[j] = 0.0
    sv = np.empty(0 if kind != 1 else lse_ptr[r + 1] - lse_ptr[r])  # scratch of a log-sum-exp group only
    cw = row_gradient(kind, r, x, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, g, want_h, h, Bm, sv)
    if kind == 1 and want_h:  # a log-sum-exp group (kind 1) completes its diagonal
        for j in range(n):
            h[j] = h[j] - cw * (Bm[j] * Bm[j])
    if qd.size:
        for j in range(n):
            g[j] = (lin[j] + (0.0 + qd[j] * x[j])) + g[j]
        if want_h:
            for j in range(n):
                h[j] = qd[j] + h[j]
    else:
        for j in range(n):
            g[j] = lin[j] + g[j]


@njit(cache=True, inline='always')
def _slack(ip, x, s, lb_idx, lb, ub_idx, ub, G_ptr, G_idx, G_val, hh):
    n_lb, n_ub, n_lin = ip[4], ip[5], ip[6]
    if ip[3]:
        for i in range(n_lb):
            s[i] = x[i] - lb[i]
        return
    for i in range(n_lb):
        s[i] = x[lb_idx[i]] - lb[i]
    for i in range(n_ub):
        s[n_lb + i] = ub[i] - x[ub_idx[i]]
    o = n_lb + n_ub
    for r in range(n_lin):
        s[o + r] = hh[r] - _rowdot(G_ptr, G_idx, G_val, r, x)


@njit(cache=True, inline='always')
def _interior(ip, x, s, G_ptr, G_idx, G_val, hh, G_terms, G_norm1):
    """:meth:`.ConstraintSet.interior` (no nonlinear block)."""
    if s.size == 0:
        return True
    if not s.min() > 0:
        return False
    n_lin = ip[6]
    if n_lin:
        o = ip[4] + ip[5]
        xinf = 0.0
        for j in range(x.size):
            if abs(x[j]) > xinf:
                xinf = abs(x[j])
        for r in range(n_lin):
            sl = s[o + r]
            hl = abs(hh[r])
            if sl <= 2.0 * (G_terms[r] + 2.0) * EPS * (hl + G_norm1[r] * xinf):
                acc = 0.0
                for p in range(G_ptr[r], G_ptr[r + 1]):
                    acc += abs(G_val[p]) * abs(x[G_idx[p]])
                if sl <= 2.0 * (G_terms[r] + 2.0) * EPS * (hl + acc):
                    return False
    return True


@njit(cache=True, inline='always')
def _solve_blocks(flat, rhs, dx, blk_ptr, blk_vars, blk_off):
    for b in range(blk_off.size):
        p0 = blk_ptr[b]
        sz = blk_ptr[b + 1] - p0
        off = blk_off[b]
        if sz == 1:
            i = blk_vars[p0]
            dx[i] = rhs[i] / flat[off]
        elif sz == 2:
            i0, i1 = blk_vars[p0], blk_vars[p0 + 1]
            a, bb, c, e = flat[off], flat[off + 1], flat[off + 2], flat[off + 3]
            det = a * e - bb * c
            dx[i0] = (e * rhs[i0] - bb * rhs[i1]) / det
            dx[i1] = (a * rhs[i1] - c * rhs[i0]) / det
        else:  # Gaussian elimination with partial pivoting (LAPACK gesv's algorithm)
            M = flat[off:off + sz * sz].copy().reshape(sz, sz)
            v = np.empty(sz)
            for i in range(sz):
                v[i] = rhs[blk_vars[p0 + i]]
            for col in range(sz):
                piv = col
                for i in range(col + 1, sz):
                    if abs(M[i, col]) > abs(M[piv, col]):
                        piv = i
                if piv != col:
                    for j in range(sz):
                        M[col, j], M[piv, j] = M[piv, j], M[col, j]
                    v[col], v[piv] = v[piv], v[col]
                for i in range(col + 1, sz):
                    f = M[i, col] / M[col, col]
                    for j in range(col + 1, sz):
                        M[i, j] -= f * M[col, j]
                    v[i] -= f * v[col]
            for i in range(sz - 1, -1, -1):
                acc = v[i]
                for j in range(i + 1, sz):
                    acc -= M[i, j] * v[j]
                v[i] = acc / M[i, i]
                dx[blk_vars[p0 + i]] = v[i]


@njit(cache=True)
def run_chunk(fp, ip, st, sti, x, s, z, lin, qd, Bvec, rows,
              A_ptr, A_idx, A_val, ab, coef, lse_ptr,
              lb_idx, lb, ub_idx, ub, G_ptr, G_idx, G_val, hh, GT_ptr, GT_idx, GT_val, G_terms, G_norm1,
              T_ptr, T_idx, T_val, diag_pos, blk_ptr, blk_vars, blk_off, it0, every, rec, rec_x, trace_x, trace_z):
    """Up to ``rows.size`` IPSA iterations in place; returns ``(done, code, records)`` (module docstring)."""
    k0, step_power, sigma, ks, sigma_power, mu_min, frac, inv_m, weight, beta_min, d_min = (
        fp[0], fp[1], fp[2], fp[3], fp[4], fp[5], fp[6], fp[7], fp[8], fp[9], fp[10])
    n, m, kind, lower_only, n_lb, n_ub, n_lin, mode, hess, same = (
        ip[0], ip[1], ip[2], ip[3], ip[4], ip[5], ip[6], ip[7], ip[8], ip[9])
    g, g2, h, Bm, B = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    rhs, dx, bd, tmp, x_new, Dn = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    d, Jdx, dz, s_new, z_new, inv = np.empty(m), np.empty(m), np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    flat = np.empty(T_ptr.size - 1)
    o_lin = n_lb + n_ub
    nrec = 0
    for it in range(rows.size):
        r = rows[it]
        k = sti[0] + 1
        ahat = float(k0 + k) ** -step_power
        sig = sigma * (ks / (ks + k)) ** sigma_power
        eta = 0.0
        for i in range(m):
            eta += s[i] * z[i]
        mu = max(mu_min, sig * eta * inv_m) if m else 0.0
        _gradient(kind, r, x, lin, qd, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, g, hess == 2, h, Bm)
        nbad = 0
        for j in range(n):  # no temporary array
            nbad += 0 if math.isfinite(g[j]) else 1
        if nbad:
            return it, 1, nrec
        if hess == 0:
            copy_into(B, Bvec)
        elif hess == 1:
            fill(B, st[5])
        else:
            if np.isfinite(h).all():
                for j in range(n):
                    Dn[j] = max((1.0 - ahat) * Bvec[j] + ahat * max(h[j], 0.0), d_min)
            else:
                copy_into(Dn, Bvec)
            copy_into(B, Dn)
        for i in range(m):
            inv[i] = 1.0 / s[i]
            d[i] = z[i] * inv[i]
        # rhs = -g - mu J^T (1/s)
        if lower_only:
            for j in range(n):
                rhs[j] = -g[j] - mu * -inv[j]
                bd[j] = d[j]
        else:
            for j in range(n):
                tmp[j] = 0.0
                bd[j] = 0.0
            for i in range(n_lb):
                tmp[lb_idx[i]] -= inv[i]
                bd[lb_idx[i]] += d[i]
            for i in range(n_ub):
                tmp[ub_idx[i]] += inv[n_lb + i]
                bd[ub_idx[i]] += d[n_lb + i]
            for j in range(n):
                acc = 0.0
                for p in range(GT_ptr[j], GT_ptr[j + 1]):
                    acc += GT_val[p] * inv[o_lin + GT_idx[p]]
                if GT_ptr[j + 1] > GT_ptr[j]:
                    tmp[j] = tmp[j] + acc
                rhs[j] = -g[j] - mu * tmp[j] if m else -g[j]
        if mode == 0:
            for j in range(n):
                dx[j] = rhs[j] / (B[j] + bd[j])
        else:
            for q in range(flat.size):
                acc = 0.0
                for p in range(T_ptr[q], T_ptr[q + 1]):
                    acc += T_val[p] * d[o_lin + T_idx[p]]
                flat[q] = acc
            for j in range(n):
                flat[diag_pos[j]] += B[j] + bd[j]
            _solve_blocks(flat, rhs, dx, blk_ptr, blk_vars, blk_off)
        nbad = 0
        for j in range(n):  # no temporary array
            nbad += 0 if math.isfinite(dx[j]) else 1
        if nbad:
            return it, 1, nrec
        a_dual = a_prim = np.inf
        if m:
            if lower_only:
                for i in range(m):
                    Jdx[i] = -dx[i]
            else:
                for i in range(n_lb):
                    Jdx[i] = -dx[lb_idx[i]]
                for i in range(n_ub):
                    Jdx[n_lb + i] = dx[ub_idx[i]]
                for q in range(n_lin):
                    Jdx[o_lin + q] = _rowdot(G_ptr, G_idx, G_val, q, dx)
            tmin = np.inf
            rmax = -np.inf
            for i in range(m):
                dz[i] = mu * inv[i] - z[i] + d[i] * Jdx[i]  # (2.21)
                tmin = min(tmin, dz[i] / z[i])
                rmax = max(rmax, Jdx[i] * inv[i])
            a_prim, a_dual = boundary_steps(tmin, rmax, frac, a_prim, a_dual)
        ap, ad = step_lengths(ahat, a_prim, a_dual, same)
        n_bt = 0
        while True:  # Fig. 2.1 step 5
            for j in range(n):
                x_new[j] = x[j] + ap * dx[j]
            if not m:
                break
            _slack(ip, x_new, s_new, lb_idx, lb, ub_idx, ub, G_ptr, G_idx, G_val, hh)
            if _interior(ip, x_new, s_new, G_ptr, G_idx, G_val, hh, G_terms, G_norm1):
                break
            ap, ad, n_bt = backtrack(ap, ad, same, n_bt)
            if n_bt > MAX_BACKTRACKS:
                copy_into(x_new, x)
                copy_into(s_new, s)
                break
        if m:
            zmin = np.inf
            for i in range(m):
                z_new[i] = z[i] + ad * dz[i]
                zmin = min(zmin, z_new[i])
            if not zmin > 0:
                return it, 1, nrec
        # --- commit ---------------------------------------------------------------------------
        if hess == 1 and ap > 0:
            _gradient(kind, r, x_new, lin, qd, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, g2, False, h, Bm)
            if np.isfinite(g2).all():
                ss = 0.0
                sy = 0.0
                for j in range(n):
                    sj = x_new[j] - x[j]
                    ss += sj * sj
                    sy += sj * (g2[j] - g[j])
                bb_secant(st, sti, ahat, sy, ss, beta_min)
        elif hess == 2:
            copy_into(Bvec, Dn)
        step_stats(st, sti, k, n_bt, ap, ad, a_prim, a_dual, mu, ahat)
        copy_into(x, x_new)
        if m:
            copy_into(s, s_new)
            copy_into(z, z_new)
        if trace_x.shape[0] > it:
            trace_x[it] = x
            trace_z[it] = z
        if (it0 + it + 1) % every == 0 and nrec < rec.shape[0]:
            eta = 0.0
            for i in range(m):
                eta += s[i] * z[i]
            nrec = save_record(rec, rec_x, nrec, k, mu, eta, ap, ad, a_prim, a_dual, n_bt, x)
    return rows.size, 0, nrec
