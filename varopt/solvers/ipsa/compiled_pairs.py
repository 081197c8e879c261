"""Numba kernel of the IPSA step at batch size 1 for variable pairs with linear rows (the L1 box form
``-u_j <= w_j <= u_j`` of Carbonetto 2009, eqs. 2.64-2.65, and any other problem of that shape).

Covered (:func:`pair_layout`): bounds on any variables, linear rows of one or two variables whose
reduced system is block diagonal with blocks of at most two variables (:class:`.ReducedSystem`, mode
``blocks``), every 2-block with the same number ``R`` of rows and no row on a 1-block; ``B``
diagonal. Then (2.20), ``(B + J^T diag(z/s) J) dx = -(g + mu J^T (1/s))``, is one 2x2 system per
pair ``(p, q)`` and a scalar equation per other variable:

    a = sum_r G_rp^2 d_r + B_p + (bounds of p),  b = sum_r G_rp G_rq d_r,  e = sum_r G_rq^2 d_r + B_q + ...
    det = a e - b^2,   dx_p = (e r_p - b r_q) / det,   dx_q = (a r_q - b r_p) / det

with ``d = z/s`` and ``r = -(g + mu J^T (1/s))``; then ``dz = mu/s - z + diag(z/s) J dx`` (2.21).

Layout: the caller permutes the variables (first variables of the pairs, their second variables,
the rest) and the constraints (bounds, then row ``q`` of every pair for ``q = 0..R-1``), so that
every phase of a step is a flat loop over contiguous slices that LLVM vectorises (with two rows per
pair, ``R = 2``, the box form, the whole direction is one such loop over the pairs, which writes one
array: LLVM vectorises a loop only while the run-time overlap checks between the arrays it writes
and the others stay few — one written array and a dozen read ones, not five written ones), as in
:mod:`.compiled_bounds` (which this kernel follows otherwise: the sample's gradient on its
nonzeros, trial points in spare buffers swapped in when accepted). The general kernel of
:mod:`.compiled` walks compressed sparse rows with an inner loop per row and variable (3-4 times
slower per step on the box form). Loops index slices (``sn[o + lo:o + hi][b]``) rather than
offsets (``sn[o + lo + b]``): with an offset LLVM cannot rule out a negative (wrapped-around) index
and keeps the loop scalar.

Same formulas and, per entry, the same order as the numpy path: a pair's sums over its rows in
ascending row order from ``0.0`` (scipy's sparse products; a row missing one variable of the pair
adds ``+0.0``; two-term sums such as ``G_r dx`` do not depend on the order), the 2x2 solve of
:meth:`.ReducedSystem.solve` (its ``c`` equals ``b``: same products, same order), the rounding
margins ``2 (t + 2) eps (|h| + ...)`` of :meth:`.ConstraintSet.interior` (their screen
``2 (t + 2) eps (|h_r| + ||G_r||_1 max|x|)``, when every row has the same factors, with an upper bound
``xcap >= max|x|`` counted in the trial point's pass instead of ``max|x|``: it flags every row the exact
screen flags, and a flagged row goes to the exact test, so the decisions are the same; a1a box form,
kernel only: -6 to -9 % per step, 2026-11-26); ``s^T z`` and ``s^T s`` as in :mod:`.compiled_bounds`. Anything that makes the numpy path raise returns ``code = 1`` before
the state changes (the caller replays the iteration on the numpy path). Packed parameters and
history records as in :mod:`.compiled`. Compiled once per Hessian (:data:`RUN_PAIRS`, the Hessian a
constant: the other Hessians' code folded away; on the a1a box form, kernel only, same process:
-11 to -16 % per step with the identity, -12 % with damped BB, -5 % with the running diagonal;
same iterates), as :mod:`.compiled_bounds`.
"""
from __future__ import annotations

import math

import numpy as np

from .compiled_bounds import _dot, _max4, _maxabs4, _min4, bb_commit, bb_commit_q, lin_plus_q, sample_gradient
from .kernel_steps import (MAX_BACKTRACKS, all_finite, backtrack, boundary_steps, copy_into, fill, group_width,
                           per_hessian, running_diagonal_q, save_record, step_lengths, step_stats)

EPS = float(np.finfo(float).eps)


def pair_layout(cons, system):
    """The kernel's layout for ``cons`` and ``system`` (mode ``blocks``), or None when the rows do
    not form it: blocks of at most two variables, every 2-block with the same number ``R`` of rows
    (each on one or both of its variables), no rows on the 1-blocks.

    Returns ``(px, pc, (n2, ...))``: the variables in the kernel's order ``px`` (first variables of
    the 2-blocks, their second variables, the 1-blocks), the constraints in its order ``pc``
    (bounds as they are, then row ``q`` of every block for ``q = 0..R-1``, a block's rows in
    ascending order), the number of 2-blocks and the per-row arrays ``(c0, c1, t00, t01, t11, h, |h|, margin factor,
    ||G_r||_1)`` in that order, ``c0``/``c1`` the row's coefficients on the block's first/second
    variable (0 where the row misses it) and ``t..`` their products (the entries of the block
    matrix ``T`` of :class:`.ReducedSystem`, computed the same way)."""
    G = cons.G.tocsr()
    nl = G.shape[0]
    groups = {sz: idx for sz, idx, _ in system.groups}
    if nl == 0 or max(groups) > 2 or 2 not in groups:
        return None
    pair = np.asarray(groups[2], dtype=np.int64)
    single = np.asarray(groups.get(1, np.zeros((0, 1), dtype=np.int64))[:, 0], dtype=np.int64)
    n2 = pair.shape[0]
    block = np.full(cons.n, -1, dtype=np.int64)
    local = np.zeros(cons.n, dtype=np.int64)
    block[pair[:, 0]], block[pair[:, 1]], local[pair[:, 1]] = np.arange(n2), np.arange(n2), 1
    cnt = np.diff(G.indptr)
    rid = np.repeat(np.arange(nl), cnt)
    rb = block[G.indices]
    first = rb[G.indptr[:-1]]
    if np.any(first < 0) or np.any(rb != first[rid]):  # a row on a 1-block (or across blocks)
        return None
    per = np.bincount(first, minlength=n2)
    R = int(per[0])
    if np.any(per != R):
        return None
    # rows of block b in ascending order (stable sort by block) -> slot q: constraint o + q n2 + b
    order = np.argsort(first, kind="stable")
    slot_rows = order.reshape(n2, R).T.ravel()  # [q * n2 + b] -> row
    C = np.zeros((nl, 2))
    C[rid, local[G.indices]] = G.data
    c0, c1 = C[slot_rows, 0].copy(), C[slot_rows, 1].copy()
    o = cons.n_lb + cons.n_ub
    px = np.concatenate([pair[:, 0], pair[:, 1], single])
    pc = np.concatenate([np.arange(o), o + slot_rows])
    h = np.asarray(cons.h, dtype=float)[slot_rows]
    # slack_margin(t, scale) = 2 (t + 2) eps scale; 2 (t + 2) eps is exact (an integer times a power of 2)
    marg = 2.0 * (np.asarray(cons.G_terms, dtype=float)[slot_rows] + 2.0) * EPS
    return px, pc, (n2, c0, c1, c0 * c0, c0 * c1, c1 * c1, h, np.abs(h), marg,
                    np.asarray(cons.G_norm1, dtype=float)[slot_rows])


#: the Hessian of a compiled copy of :func:`_run_pairs` (0 identity, 1 damped BB, 2 running diagonal): each copy
#: has its own value (:func:`.kernel_steps.per_hessian`)
HESS = 0


def _run_pairs(fp, ip, st, sti, x0, s0, z0, lin0, qd, Bvec0, rows, A_ptr, A_idx, A_val, ab, coef, lse_ptr,
               S_ptr, S_idx, svar, ssg, sbnd, n2, c0, c1, t00, t01, t11, hh, r_habs, r_marg, r_norm1,
               it0, every, rec, rec_x, trace_x, trace_z):
    """Up to ``rows.size`` IPSA iterations in place, in the layout of :func:`pair_layout` (variables,
    constraints, ``lin``, ``B``, ``A_idx``, ``S_idx`` and ``svar`` permuted by the caller); returns
    ``(done, code, records)`` (module docstring). The Hessian ``HESS`` is a constant of each compiled copy
    (:data:`RUN_PAIRS`)."""
    hess = HESS
    k0, step_power, sigma, ks, sigma_power, mu_min, frac, inv_m, weight, beta_min, d_min = (
        fp[0], fp[1], fp[2], fp[3], fp[4], fp[5], fp[6], fp[7], fp[8], fp[9], fp[10])
    n, m, kind, same = ip[0], ip[1], ip[2], ip[9]
    nb, nl = svar.size, c0.size
    o = nb  # constraint of row slot q * n2 + b: o + q * n2 + b
    R = nl // n2
    if not (all_finite(lin0) and all_finite(qd)):
        return 0, 1, 0
    # a diagonal quadratic term Q = diag(qd) (permuted as lin; empty when there is none): the passes below read
    # lin = lin0 + Q x, refreshed at each step (lin0 itself without one), as in compiled_bounds
    hasq = qd.size > 0
    # (a buffer in both cases rather than a choice between two arrays, which cost the damped-BB step 5-9 % without
    # Q on a1a; likely LLVM's aliasing of a fresh array, not checked)
    lin = np.empty(n)
    copy_into(lin, lin0)
    gs, hs, gs2, Bm = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    sv = np.empty(group_width(lse_ptr))
    dx, xn, Dn = np.empty(n), np.empty(n), np.empty(n)
    t, bd = np.zeros(n), np.zeros(n)  # zero off the bounded variables for good (re-zeroed per step on them)
    tl0, tl1, Ma, Mb, Me = np.empty(n2), np.empty(n2), np.empty(n2), np.empty(n2), np.empty(n2)
    inv, d, dz, q1, q2, sn, zn, Jdx = (np.empty(m), np.empty(m), np.empty(m), np.empty(m), np.empty(m),
                                       np.empty(m), np.empty(m), np.empty(m))
    x, s, z, Bv = x0, s0, z0, Bvec0
    # views made once (a slice costs ~15 cycles; a step used ~40): the two rows of every pair when R = 2
    # (slot q n2 + b), the pairs' first/second variables; the views of the swapped buffers are swapped with them
    c00, c01, c10, c11 = c0[:n2], c0[n2:2 * n2], c1[:n2], c1[n2:2 * n2]
    h0, h1 = hh[:n2], hh[n2:2 * n2]
    mg0, mg1, ha0, ha1, nm0, nm1 = (r_marg[:n2], r_marg[n2:2 * n2], r_habs[:n2], r_habs[n2:2 * n2], r_norm1[:n2],
                                    r_norm1[n2:2 * n2])
    i0, i1, w0, w1, J0, J1 = (inv[o:o + n2], inv[o + n2:o + 2 * n2], d[o:o + n2], d[o + n2:o + 2 * n2],
                              Jdx[o:o + n2], Jdx[o + n2:o + 2 * n2])
    lin1, gs1, t1, bd1, dx1 = lin[n2:2 * n2], gs[n2:2 * n2], t[n2:2 * n2], bd[n2:2 * n2], dx[n2:2 * n2]
    lin2, gs2_, t2, bd2, dx2 = lin[2 * n2:], gs[2 * n2:], t[2 * n2:], bd[2 * n2:], dx[2 * n2:]
    x1, xn1 = x[n2:2 * n2], xn[n2:2 * n2]
    sr0, sr1, snr0, snr1 = s[o:o + n2], s[o + n2:o + 2 * n2], sn[o:o + n2], sn[o + n2:o + 2 * n2]
    Bv1, Bv2, Dn1, Dn2 = Bv[n2:2 * n2], Bv[2 * n2:], Dn[n2:2 * n2], Dn[2 * n2:]
    # every row with the same screen factors (the box form: h = 0, coefficients +-1, two terms): the screen
    # bound is one scalar per trial point, the same products as each row's, and the R = 2 slack loops compare
    # with it instead of reading three arrays (kernel only, a1a: -50 ns of ~730 per step)
    uniform = nl > 0
    for q in range(nl):
        uniform = uniform and r_marg[q] == r_marg[0] and r_habs[q] == r_habs[0] and r_norm1[q] == r_norm1[0]
    # an upper bound of max|x| at the trial points, for the uniform screen below: 2 max|x| when last taken
    # (a trial point with a larger entry takes max|x| itself)
    xcap = 2.0 * _maxabs4(x, n) if R == 2 and uniform else 0.0
    flip = False
    nrec = 0
    eta = _dot(s, z, m)
    beta_filled = np.nan
    due = every - it0 % every
    done = rows.size
    code = 0
    for it in range(rows.size):
        r = rows[it]
        k = sti[0] + 1
        ahat = float(k0 + k) ** -step_power
        sig = sigma * (ks / (ks + k)) if sigma_power == 1.0 else sigma * (ks / (ks + k)) ** sigma_power
        mu = max(mu_min, sig * eta * inv_m)
        q0, q1_ = S_ptr[r], S_ptr[r + 1]
        if hasq:
            lin_plus_q(lin, lin0, qd, x, n)
        sample_gradient(kind, r, x, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, gs, hess == 2, hs, Bm, sv,
                        S_ptr, S_idx)
        hfin = True
        if hess == 2:  # the Hessian diagonal qd + hs is finite off the sample's coordinates (qd is finite)
            for q in range(q0, q1_):
                if not math.isfinite(hs[S_idx[q]] + (qd[S_idx[q]] if hasq else 0.0)):
                    hfin = False
        if hess == 0:
            Bc, Bc1, Bc2 = Bv, Bv1, Bv2
        else:
            Bc, Bc1, Bc2 = Dn, Dn1, Dn2
            if hess == 1:
                if st[5] != beta_filled:
                    beta_filled = st[5]
                    for j in range(n):
                        Dn[j] = beta_filled
            elif hfin and hasq:  # h = Q.diagonal() + sampled, the numpy path's order
                running_diagonal_q(Dn, Bv, qd, hs, ahat, d_min, n)
            elif hfin:
                a1 = 1.0 - ahat
                for j in range(n):
                    hj = hs[j]
                    v = a1 * Bv[j] + ahat * (hj if hj > 0.0 else 0.0)
                    Dn[j] = v if v > d_min else d_min
            else:
                copy_into(Dn, Bv)
        for i in range(m):
            v = 1.0 / s[i]
            inv[i] = v
            d[i] = z[i] * v
        nbad = 0
        # J^T (1/s) and the bound diagonal: bounds (lower then upper, the numpy path's order) ...
        for i in range(nb):
            j = svar[i]
            t[j] = 0.0
            bd[j] = 0.0
        for i in range(nb):
            j = svar[i]
            t[j] -= ssg[i] * inv[i]
            bd[j] += d[i]
        if R == 2:  # the box form: (2.20) for every pair in one loop (LLVM vectorises it), with
            # t.. = c.c recomputed (the same products as pair_layout's) and the sums over the two rows
            # from 0.0 as below
            for b in range(n2):
                v0, v1, u0, u1 = i0[b], i1[b], w0[b], w1[b]
                a0, a1, e0, e1 = c00[b], c01[b], c10[b], c11[b]
                r0 = -(lin[b] + gs[b]) - mu * (t[b] + ((0.0 + a0 * v0) + a1 * v1))
                r1 = -(lin1[b] + gs1[b]) - mu * (t1[b] + ((0.0 + e0 * v0) + e1 * v1))
                a = ((0.0 + (a0 * a0) * u0) + (a1 * a1) * u1) + (Bc[b] + bd[b])
                e = ((0.0 + (e0 * e0) * u0) + (e1 * e1) * u1) + (Bc1[b] + bd1[b])
                bb = (0.0 + (a0 * e0) * u0) + (a1 * e1) * u1
                det = a * e - bb * bb
                v0 = (e * r0 - bb * r1) / det
                v1 = (a * r1 - bb * r0) / det
                dx[b] = v0
                dx1[b] = v1
                nbad += (0 if math.isfinite(v0) else 1) + (0 if math.isfinite(v1) else 1)
        else:
            # ... then each block's rows in ascending order (slot-major: flat loops over the blocks);
            # the block matrix [a b; b e] of (2.20): T d summed in the same order
            fill(tl0, 0.0)
            fill(tl1, 0.0)
            fill(Ma, 0.0)
            fill(Mb, 0.0)
            fill(Me, 0.0)
            # (slices, not offset indices: loops over a slice with a range index are contiguous to LLVM)
            for q in range(R):
                lo, hi = q * n2, (q + 1) * n2
                iq, dq = inv[o + lo:o + hi], d[o + lo:o + hi]
                c0q, c1q, t00q, t01q, t11q = c0[lo:hi], c1[lo:hi], t00[lo:hi], t01[lo:hi], t11[lo:hi]
                for b in range(n2):
                    vi = iq[b]
                    vd = dq[b]
                    tl0[b] += c0q[b] * vi
                    tl1[b] += c1q[b] * vi
                    Ma[b] += t00q[b] * vd
                    Mb[b] += t01q[b] * vd
                    Me[b] += t11q[b] * vd
            for b in range(n2):
                r0 = -(lin[b] + gs[b]) - mu * (t[b] + tl0[b])
                r1 = -(lin1[b] + gs1[b]) - mu * (t1[b] + tl1[b])
                a = Ma[b] + (Bc[b] + bd[b])
                e = Me[b] + (Bc1[b] + bd1[b])
                bb = Mb[b]
                det = a * e - bb * bb
                dx[b] = (e * r0 - bb * r1) / det
                dx1[b] = (a * r1 - bb * r0) / det
        for j in range(n - 2 * n2):  # 1-blocks (no rows): T d = 0, J^T v gets + 0.0
            v = (-(lin2[j] + gs2_[j]) - mu * (t2[j] + 0.0)) / (0.0 + (Bc2[j] + bd2[j]))
            dx2[j] = v
            nbad += 0 if math.isfinite(v) else 1
        for j in range(2 * n2 if R != 2 else 0):  # a non-finite g_j makes its block's dx non-finite
            nbad += 0 if math.isfinite(dx[j]) else 1
        if nbad:
            done, code = it, 1
            break
        for i in range(nb):
            Jdx[i] = -(ssg[i] * dx[svar[i]])
        if R == 2:
            for b in range(n2):
                J0[b] = c00[b] * dx[b] + c10[b] * dx1[b]
                J1[b] = c01[b] * dx[b] + c11[b] * dx1[b]
        for q in range(R if R != 2 else 0):  # two-term sums: the order of the terms does not matter
            lo, hi = q * n2, (q + 1) * n2
            Jq, c0q, c1q = Jdx[o + lo:o + hi], c0[lo:hi], c1[lo:hi]
            for b in range(n2):
                Jq[b] = c0q[b] * dx[b] + c1q[b] * dx1[b]
        for i in range(m):
            dz[i] = mu * inv[i] - z[i] + d[i] * Jdx[i]  # (2.21)
        for i in range(m):
            q1[i] = dz[i] / z[i]
        for i in range(m):
            q2[i] = Jdx[i] * inv[i]
        a_prim, a_dual = boundary_steps(_min4(q1, m), _max4(q2, m), frac, np.inf, np.inf)
        ap, ad = step_lengths(ahat, a_prim, a_dual, same)
        n_bt = 0
        while True:  # Fig. 2.1 step 5
            big = 0
            if R == 2 and uniform:  # count the entries above xcap in the same pass
                for j in range(n):
                    v = x[j] + ap * dx[j]
                    xn[j] = v
                    big += 1 if abs(v) > xcap else 0
            else:
                for j in range(n):
                    xn[j] = x[j] + ap * dx[j]
            ok = 0
            for i in range(nb):
                v = ssg[i] * (xn[svar[i]] - sbnd[i])
                sn[i] = v
                ok += 1 if v > 0.0 else 0
            if R == 2:  # the slacks with the screen of the rounding margins below (``close``) in the same
                # loops: a slack above its screen bound (>= 0) is positive
                close = 0
                if uniform:
                    # screen with xcap >= max|x| when no entry exceeds it: it flags every row the screen with
                    # max|x| flags (the bound grows with it), and a flagged row goes to the exact test below, so
                    # the decisions are the same; one pass over x saved
                    if big:
                        xcap = 2.0 * _maxabs4(xn, n)
                    bound = r_marg[0] * (r_habs[0] + r_norm1[0] * xcap)
                    for b in range(n2):
                        v = h0[b] - (c00[b] * xn[b] + c10[b] * xn1[b])
                        snr0[b] = v
                        close += 1 if v <= bound else 0
                    for b in range(n2):
                        v = h1[b] - (c01[b] * xn[b] + c11[b] * xn1[b])
                        snr1[b] = v
                        close += 1 if v <= bound else 0
                else:
                    xinf = _maxabs4(xn, n)
                    for b in range(n2):
                        v = h0[b] - (c00[b] * xn[b] + c10[b] * xn1[b])
                        snr0[b] = v
                        close += 1 if v <= mg0[b] * (ha0[b] + nm0[b] * xinf) else 0
                    for b in range(n2):
                        v = h1[b] - (c01[b] * xn[b] + c11[b] * xn1[b])
                        snr1[b] = v
                        close += 1 if v <= mg1[b] * (ha1[b] + nm1[b] * xinf) else 0
                if close == 0 and ok == nb:
                    break
                for q in range(nl):
                    ok += 1 if sn[o + q] > 0.0 else 0
            xn1_ = xn[n2:2 * n2] if R != 2 else xn1
            for q in range(R if R != 2 else 0):
                lo, hi = q * n2, (q + 1) * n2
                snq, hq, c0q, c1q = sn[o + lo:o + hi], hh[lo:hi], c0[lo:hi], c1[lo:hi]
                for b in range(n2):
                    v = hq[b] - (c0q[b] * xn[b] + c1q[b] * xn1_[b])
                    snq[b] = v
                    ok += 1 if v > 0.0 else 0
            if ok == m:  # rounding margins of the rows: screen with ||G_q||_1 max|x| (no branch), then exact
                xinf = _maxabs4(xn, n)
                snl = sn[o:]
                close = 0
                for q in range(nl):
                    close += 1 if snl[q] <= r_marg[q] * (r_habs[q] + r_norm1[q] * xinf) else 0
                if close:
                    close = 0
                    for q in range(nl):
                        sl = snl[q]
                        if sl <= r_marg[q] * (r_habs[q] + r_norm1[q] * xinf):
                            b = q % n2
                            sc = abs(c0[q]) * abs(xn[b]) + abs(c1[q]) * abs(xn1_[b])
                            close += 1 if sl <= r_marg[q] * (r_habs[q] + sc) else 0
                if close == 0:
                    break
            ap, ad, n_bt = backtrack(ap, ad, same, n_bt)
            if n_bt > MAX_BACKTRACKS:
                copy_into(xn, x)
                copy_into(sn, s)
                break
        if hess == 1 and ap > 0:  # damped BB: the sample's gradient at the new point, for bb_commit
            sample_gradient(kind, r, xn, A_ptr, A_idx, A_val, ab, coef, lse_ptr, weight, gs2, False, hs, Bm, sv,
                            S_ptr, S_idx)
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
        x1, xn1 = xn1, x1
        s, sn = sn, s
        sr0, sr1, snr0, snr1 = snr0, snr1, sr0, sr1
        z, zn = zn, z
        if hess == 2:
            Bv, Dn = Dn, Bv
            Bv1, Bv2, Dn1, Dn2 = Dn1, Dn2, Bv1, Bv2
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


#: the kernel of each Hessian (index ``fast.HESSIANS[name]``): ``run_pairs_identity``, ``run_pairs_bb``,
#: ``run_pairs_diagonal`` (:func:`.kernel_steps.per_hessian`, as :data:`.compiled_bounds.RUN_BOUNDS`)
RUN_PAIRS = per_hessian("run_pairs", _run_pairs)
