"""Numba kernels of majorize's per-iteration small-array work on dense metrics (option ``backend``; imported only
when numba is installed and the option allows it; :mod:`.reuse` and :mod:`.model` keep the numpy path as the
reference).

A quasi-Newton trial of :meth:`.reuse.ScaledCurvature.trial` on a small program is a few dozen numpy calls of
0.5-2 us each on arrays of ten to a hundred entries (docs/majorize.md section 6.0i): the free set, the metric's
solve and range test, the L-BFGS pairs restricted to the free set, the two-loop recursion (Nocedal & Wright 2006,
Alg. 7.4) with ``B_0^{-1} = P_FF^{-1} / c``, the scatter back to every variable, the ratio test and the feasibility
test on the finite sides ``G z >= g`` of :class:`.step_qp.StepQP`; then the evaluation's log-sum-exp and the new
pair's products. Here:

* :func:`qn_direction` (one call while the free set stays the same): the free set of :func:`.reuse.free_set`
  (:func:`free_mask`: the same comparisons; the NaN tolerances of infinite bounds compare False as in numpy); with
  the upper Cholesky factor ``U`` of ``P_FF`` (plus the proximal term, computed by the numpy path's
  :class:`.reuse_metric.DenseMetric` once per free set), ``w = P_FF^{-1} u_F`` by the two triangular solves of
  LAPACK's ``potrs``, the guarantee ``u_F^T w / 2``, the range test ``||P_FF w - u_F||``, the pairs on ``F`` (those
  without positive curvature there dropped, as :func:`.reuse._restricted_pairs`), the two-loop recursion in its
  vector form, ``r`` scattered to every variable, the slope ``-u^T r``, the largest feasible factor of ``D = -r``
  (:meth:`.step_qp.StepQP.max_factor`) and, when that is at least 1, the feasibility test of ``x + D``
  (:meth:`.step_qp.StepQP.feasible`);
* :func:`pair_products`: the products of a new L-BFGS pair and the secant scale's ``y^T P^{-1} y``;
* :func:`lse_value_weights`: the log-sum-exp values and softmax weights of every evaluation; with dense padded
  features and a diagonal quadratic part the whole evaluation (:func:`dense_value`) and the gradient
  (:func:`dense_gradient`), their feature products by BLAS as in numpy.

Same formulas and comparisons as the numpy path; the sums run in loop order where BLAS and LAPACK pick theirs, and
``exp``/``log`` are libm's instead of numpy's, so results agree to rounding (~1e-16 relative per operation;
``tests/test_majorize_compiled.py`` checks 1e-12 on random trials and the same iterations on whole fits). The pairs
live in a ring buffer (slot of pair ``i``, most recent first: ``(head - i) mod memory``) kept by
:meth:`.reuse.ScaledCurvature.moved`.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

#: the trial kernels run on programs of at most this many variables: their solves and products are loops (O(n^2)
#: scalar operations) where the numpy path calls LAPACK/BLAS; measured (tests' random states, 2-core machine): 3-8x
#: faster at n = 20-60, about even at n = 200, 2x slower at n = 500
MAX_N = 100
#: ... and the log-sum-exp kernel on at most this many scores (G x c): libm's exp per entry against numpy's vectorised
#: one; measured: 2.3x faster at 155 x 2, even at 569 x 2, 1.6x slower at 1797 x 10
MAX_SCORES = 1024

#: return codes of :func:`qn_direction`: a direction; no trial (a non-finite guarantee or slope, or ``u_F`` outside
#: the range of ``P_FF``: the bound step decides); every variable held at a bound; the free set is not the one the
#: factor passed belongs to (the mask is written, the caller factors ``P_FF`` and calls again)
OK, NO_TRIAL, HELD, NEW_FREE = 0, 1, 2, 3


@njit(cache=True)
def free_mask(x, u, lb, ub, tl, tu, F):
    """``F[j]`` = not (at ``lb`` with ``u_j > 0`` or at ``ub`` with ``u_j < 0``): :func:`.reuse.free_set` (the same
    comparisons; the NaN tolerances of infinite bounds compare False as in numpy); returns the number of free ones."""
    k = 0
    for j in range(x.size):
        held = (x[j] - lb[j] <= tl[j] and u[j] > 0) or (ub[j] - x[j] <= tu[j] and u[j] < 0)
        F[j] = not held
        if not held:
            k += 1
    return k


@njit(cache=True, inline="always")
def _potrs(U, b, out):
    """``(U^T U)^{-1} b`` for the upper triangular ``U`` (the lower triangle is not read)."""
    k = b.size
    for i in range(k):
        t = b[i]
        for p in range(i):
            t -= U[p, i] * out[p]
        out[i] = t / U[i, i]
    for i in range(k - 1, -1, -1):
        t = out[i]
        for p in range(i + 1, k):
            t -= U[i, p] * out[p]
        out[i] = t / U[i, i]


@njit(cache=True)
def qn_direction(u, x, bounds, F, known, Fidx, U, PF, Sb, Yb, rhob, head, m, c, flat_tol, G, g, g_tol, r, z):
    """The trial's direction ``r = B^{-1} u`` on the free variables (zero elsewhere, written to ``r``) and its point.

    ``bounds = (lb, ub, tl, tu)`` (arrays of length 0 without constraints: every variable free): the free set is
    computed into a local mask; unless ``known`` and equal to ``F``, it is copied to ``F`` and :data:`NEW_FREE`
    returned. ``Fidx``: the indices of ``F``; ``U``/``PF``: the factor and the matrix ``P_FF``; the pairs: rows
    ``(head - i) mod memory`` of ``Sb``, ``Yb`` (``rhob`` their ``1 / s^T y``), ``i < m``, most recent first, restricted
    to ``F`` when some variable is held (else the stored ``rho`` is used, as the numpy path does). ``G``, ``g``: the
    finite sides (zero rows: no constraints), ``g_tol`` those of the feasibility test. Returns ``(code, guaranteed,
    slope, factor, feasible)``: ``factor`` the largest feasible multiple of ``D = -r`` (``inf`` when no side is
    approached); when it is at least 1, ``z = x + D`` and ``feasible`` whether ``G z >= g_tol``."""
    n = u.size
    lb, ub, tl, tu = bounds
    restrict = False
    if lb.size:
        newF = np.empty(n, dtype=np.bool_)
        free = free_mask(x, u, lb, ub, tl, tu, newF)
        if free == 0:
            return HELD, 0.0, 0.0, 0.0, False
        same = known
        for j in range(n):
            if newF[j] != F[j]:
                same = False
                F[j] = newF[j]
        if not same:
            return NEW_FREE, 0.0, 0.0, 0.0, False
        restrict = free != n
    k = Fidx.size
    memory = Sb.shape[0]
    uf = np.empty(k)
    for i in range(k):
        uf[i] = u[Fidx[i]]
    w = np.empty(k)
    _potrs(U, uf, w)
    gu = 0.0
    uu = 0.0
    for i in range(k):
        gu += uf[i] * w[i]
        uu += uf[i] * uf[i]
    guaranteed = 0.5 * gu
    if not math.isfinite(guaranteed):
        return NO_TRIAL, guaranteed, 0.0, 0.0, False
    res = 0.0
    for i in range(k):
        t = -uf[i]
        for p in range(k):
            t += PF[i, p] * w[p]
        res += t * t
    if math.sqrt(res) > flat_tol * math.sqrt(uu):
        return NO_TRIAL, guaranteed, 0.0, 0.0, False
    # the pairs on F: (slot, rho) of those kept, most recent first
    slots = np.empty(m, dtype=np.int64)
    rho = np.empty(m)
    kept = 0
    for i in range(m):
        sl = (head - i) % memory
        if restrict:
            sy = 0.0
            ss = 0.0
            yy = 0.0
            for q in range(k):
                j = Fidx[q]
                sj = Sb[sl, j]
                yj = Yb[sl, j]
                sy += sj * yj
                ss += sj * sj
                yy += yj * yj
            if not sy > 1e-12 * math.sqrt(ss * yy):
                continue
            rho[kept] = 1.0 / sy
        else:
            rho[kept] = rhob[sl]
        slots[kept] = sl
        kept += 1
    rf = np.empty(k)
    if kept == 0:
        for i in range(k):
            rf[i] = w[i] / c
    else:
        # two-loop recursion (Nocedal & Wright 2006, Alg. 7.4) on F, initial inverse P_FF^{-1} / c
        a = np.empty(kept)
        q = uf.copy()
        for i in range(kept):
            sl = slots[i]
            t = 0.0
            for p in range(k):
                t += Sb[sl, Fidx[p]] * q[p]
            a[i] = rho[i] * t
            for p in range(k):
                q[p] -= a[i] * Yb[sl, Fidx[p]]
        _potrs(U, q, rf)
        for i in range(k):
            rf[i] = rf[i] / c
        for i in range(kept - 1, -1, -1):
            sl = slots[i]
            t = 0.0
            for p in range(k):
                t += Yb[sl, Fidx[p]] * rf[p]
            b = rho[i] * t
            for p in range(k):
                rf[p] += (a[i] - b) * Sb[sl, Fidx[p]]
    for j in range(n):
        r[j] = 0.0
    slope = 0.0
    for i in range(k):
        j = Fidx[i]
        r[j] = rf[i]
        slope -= u[j] * rf[i]
    if not math.isfinite(slope):
        return NO_TRIAL, guaranteed, slope, 0.0, False
    factor = np.inf
    for s in range(G.shape[0]):
        gd = 0.0
        gx = 0.0
        for j in range(n):
            gd -= G[s, j] * r[j]
            gx += G[s, j] * x[j]
        if gd < 0:
            t = (g[s] - gx) / gd
            factor = min(factor, t)
    factor = max(factor, 0.0)
    feasible = False
    if factor >= 1.0:
        for j in range(n):
            z[j] = x[j] - r[j]
        feasible = True
        for s in range(G.shape[0]):
            gz = 0.0
            for j in range(n):
                gz += G[s, j] * z[j]
            if not gz >= g_tol[s]:
                feasible = False
                break
    return OK, guaranteed, slope, factor, feasible


@njit(cache=True)
def pair_products(s, y, U):
    """``(s^T y, s^T s, y^T y, y^T P^{-1} y)`` of a new pair (:meth:`.reuse.ScaledCurvature.moved`; ``P = U^T U``)."""
    sy = 0.0
    ss = 0.0
    yy = 0.0
    for j in range(s.size):
        sy += s[j] * y[j]
        ss += s[j] * s[j]
        yy += y[j] * y[j]
    v = np.empty(y.size)
    _potrs(U, y, v)
    ypy = 0.0
    for j in range(y.size):
        ypy += y[j] * v[j]
    return sy, ss, yy, ypy


@njit(cache=True)
def lse_value_weights(S, coef, W):
    """:meth:`.groups.PaddedGroups.value_weights` in one pass: ``W[g] = c_g softmax(S[g])`` (written to ``W``) and
    ``sum_g c_g log Z_g`` with ``log Z_g = max_g + log sum_j exp(S[g, j] - max_g)``. Returns ``(ok, value)``; not ok
    (``W`` then partly written) for a NaN or ``+inf`` score or a group whose scores are all ``-inf``, which the numpy
    path reports."""
    G, c = S.shape
    lz = np.empty(G)  # log Z_g; their weighted sum by BLAS as numpy's ``coef @ (smax + log(tot))``
    for g in range(G):
        m = -np.inf
        for j in range(c):
            s = S[g, j]
            if not s < np.inf:  # NaN or +inf
                return False, 0.0
            m = max(m, s)
        if m == -np.inf:
            return False, 0.0
        tot = 0.0
        for j in range(c):
            e = math.exp(S[g, j] - m)
            W[g, j] = e
            tot += e
        f = coef[g] / tot
        for j in range(c):
            W[g, j] = W[g, j] * f
        lz[g] = m + math.log(tot)
    return True, np.dot(coef, lz)


@njit(cache=True)
def dense_value(x, Hd, cv, k, F2, logh, coef, S, have_scores, W, want_grad, g):
    """:meth:`.model.MajorizeModel.evaluate` on dense padded features ``F2`` ((G c) x n) and a diagonal quadratic part:
    ``f = k + c^T x + x^T diag(Hd) x / 2 + sum_g c_g log Z_g`` in that order, the scores ``S = F2 x + log h`` (the
    product by BLAS as in numpy; given in ``S`` when ``have_scores``: scores by linearity), the weights ``W`` and, when
    ``want_grad``, ``g = (c + Hd x) + F2^T vec(W)`` written. Every evaluation of a run goes through here (with or
    without given scores or a gradient), so that ``f`` is rounded the same way along the run (the monotonicity checks
    compare values at the rounding level). Returns ``(ok, f, magnitude)`` (``magnitude`` the size of the cancelling
    parts, as the numpy path's); not ok: the numpy path reports the scores."""
    # the sums by BLAS as numpy's ``c @ x`` and ``x @ (Hd * x)``: f is rounded as on the numpy path (sequential sums
    # round differently, and near the rounding floor of a tight tol that changed accepted trials)
    cx = np.dot(cv, x)
    hx = 0.5 * np.dot(x, Hd * x)
    G, c = logh.shape
    if not have_scores:
        s = np.dot(F2, x)
        for i in range(G):
            for j in range(c):
                S[i, j] = s[i * c + j] + logh[i, j]
    ok, pv = lse_value_weights(S, coef, W)
    if not ok:
        return False, 0.0, 0.0
    if want_grad:
        dense_gradient(x, Hd, cv, F2, W, g)
    return True, k + cx + hx + pv, abs(k) + abs(cx) + abs(hx) + abs(pv)


@njit(cache=True)
def dense_gradient(x, Hd, cv, F2, W, g):
    """:meth:`.model.MajorizeModel.gradient_at` on dense padded features: ``g = c + Hd x + F2^T vec(W)`` (written)."""
    t = np.dot(W.reshape(-1), F2)
    for j in range(x.size):
        g[j] = (cv[j] + Hd[j] * x[j]) + t[j]
