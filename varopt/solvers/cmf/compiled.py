"""Numba kernels of cmf's tempered block moves (option ``backend``; imported only when numba is installed and the
option allows it). :func:`.smc.move_along_path` with ``compiled=False`` is the reference path; these kernels give
bit-identical particles, weights and estimates (``tests/test_cmf_compiled.py``).

The reference step (Carbonetto 2009, Fig. 4.4, the random-scan kernel (4.11) and weights (4.23)) computes the local
fields of every site of every particle for each of its ``moves`` moves (one sparse product each) although a move
redraws one block per particle, and the expit of all of them; here a move computes the fields and conditionals of
the redrawn block's sites only (:func:`move_blocks`) and the weight (4.23) is one fused pass
(:func:`step_terms`). Bit-identity rests on the same operations in the same order:

* a local field ``h_i + sum_j J_ij x_j`` sums the products from 0.0 over the neighbours ``j`` in increasing order,
  as scipy's ``csc_matvecs`` does for ``J.T @ X.T`` (rows of ``J^T`` are columns of ``J``: ``J.tocsc()``);
* the tempered couplings ``(1 - g) J_p + g J_n`` entry by entry, as scipy's sparse sum of the two scaled matrices;
* ``expit`` and ``log_expit`` as scipy writes them, ``1 / (1 + exp(-x))`` and ``x - log1p(exp(x))`` (x < 0) or
  ``-log1p(exp(-x))``, with the same libm ``exp``/``log1p`` (numba calls the C library as scipy does);
* the per-block sums of the log-ratios in increasing site order (the indicator product of
  :meth:`.RandomScanBlocks.log_mixture`); everything else (random draws, the log densities' dot products, the
  log-sum-exp, reweighting, resampling) is the reference's own numpy code on arrays of the same layout.

A site's conditional depends on a particle only through the spins of the site and its ``d`` neighbours: where the
``2^d`` (moves: :func:`up_tables`) or ``2^(d+1)`` (weights: :func:`site_tables`) patterns are fewer than the
particles' evaluations, the kernels compute each pattern once, with the operations above in their order, and look
the particles' patterns up: the same numbers, one ``exp`` or ``log_expit`` per pattern instead of per particle.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit
from scipy.special import expit, log_expit


@njit(cache=True)
def _log_expit(x):
    if x < 0.0:
        return x - math.log1p(math.exp(x))
    return -math.log1p(math.exp(-x))


@njit(cache=True)
def _formulas(x, e, le):
    for k in range(x.size):
        e[k] = 1.0 / (1.0 + math.exp(-x[k]))
        le[k] = _log_expit(x[k])


@lru_cache(maxsize=1)
def matches_scipy():
    """Whether the kernels' ``expit``/``log_expit`` give scipy's numbers bit for bit on 40,000 arguments (a
    uniform grid over [-750, 750], random ones, zeros, the underflow edges): they share the C library's
    ``exp``/``log1p`` on the platforms measured; ``backend='auto'`` keeps the numpy path where they do not."""
    x = np.concatenate([np.linspace(-750.0, 750.0, 20001), np.random.default_rng(0).normal(scale=20.0, size=20000),
                        [0.0, -0.0, 1e-300, -1e-300, 36.7, -36.7, 709.8, -745.2]])
    e, le = np.empty_like(x), np.empty_like(x)
    _formulas(x, e, le)
    return bool(np.array_equal(e, expit(x)) and np.array_equal(le, log_expit(x)))


@njit(cache=True)
def _products(XT, indptr, indices, data, out):
    """``out[i] = sum_k data[k] XT[indices[k]]`` over row ``i`` of ``J^T`` (CSR), summed from 0.0 in order."""
    n, N = out.shape
    for i in range(n):
        row = out[i]
        for p in range(N):
            row[p] = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            a = data[k]
            src = XT[indices[k]]
            for p in range(N):
                row[p] += a * src[p]


@njit(cache=True)
def site_tables(indptr, indices, dp, dn, tp, tn, g, maxdeg, T):
    """``T[i, q] = log sigma(2 x_i a_i(g))`` for every site ``i`` of degree ``d <= maxdeg`` and every pattern ``q``
    of its spin and its neighbours' (bit ``r < d``: the r-th neighbour in increasing order is +1; bit ``d``:
    ``x_i = +1``), with :func:`step_terms`' operations in its order (the products from 0.0 over the neighbours,
    then the field, the blend, the ``log_expit``): the same numbers it computes per particle. A site of degree
    4 has 32 patterns against the 250 particles of a replicate."""
    n = tp.size
    c = 1.0 - g
    for i in range(n):
        s, e = indptr[i], indptr[i + 1]
        d = e - s
        if d > maxdeg:
            continue
        for q in range(1 << (d + 1)):
            accp = 0.0
            accn = 0.0
            for r in range(d):
                xj = 1.0 if (q >> r) & 1 else -1.0
                accp += dp[s + r] * xj
                accn += dn[s + r] * xj
            x2 = 2.0 * (1.0 if (q >> d) & 1 else -1.0)
            T[i, q] = _log_expit(x2 * (c * (tp[i] + accp) + g * (tn[i] + accn)))


@njit(cache=True)
def step_terms(XT, indptr, indices, dp, dn, tp, tn, g0, g1, labels, Yp, Yn, PB, L, dirty, maxdeg, T0, T1):
    """The products ``J_p x`` and ``J_n x`` of every particle (``Yp``, ``Yn``: sites x particles) and the per-block
    sums ``PB`` (blocks x particles) of ``D_i = log sigma(2 x_i a_i(g1)) - log sigma(2 x_i a_i(g0))``,
    ``a(g) = (1 - g)(t_p + J_p x) + g (t_n + J_n x)`` (:func:`.smc.move_along_path`). ``XT``: the particles,
    sites x particles.

    Sites of degree ``<= maxdeg`` look both terms up in :func:`site_tables` (``T0`` at g0, filled here ``T1`` at
    g1): one ``log_expit`` per pattern instead of one per particle. For the others ``L`` holds the previous
    step's ``log sigma(2 x_i a_i(g1))``: the previous g1 is this step's g0, so where neither ``x_i`` nor a
    neighbour changed since (``dirty`` is 0; :func:`move_blocks` sets it) it is this step's second term, the
    same number computed from the same operands. ``L`` is overwritten with this step's first term and ``dirty``
    cleared."""
    _products(XT, indptr, indices, dp, Yp)
    _products(XT, indptr, indices, dn, Yn)
    site_tables(indptr, indices, dp, dn, tp, tn, g1, maxdeg, T1)
    n, N = Yp.shape
    PB[:, :] = 0.0
    c0, c1 = 1.0 - g0, 1.0 - g1
    Q = np.empty(N, dtype=np.int64)
    for i in range(n):
        b = labels[i]
        s, e = indptr[i], indptr[i + 1]
        d = e - s
        if d <= maxdeg:
            for p in range(N):  # the pattern of every particle, one neighbour row at a time
                Q[p] = (1 << d) if XT[i, p] > 0.0 else 0
            for r in range(d):
                src = XT[indices[s + r]]
                bit = 1 << r
                for p in range(N):
                    Q[p] |= bit if src[p] > 0.0 else 0
            for p in range(N):
                PB[b, p] += T1[i, Q[p]] - T0[i, Q[p]]
                dirty[i, p] = 0
            continue
        for p in range(N):
            ap = tp[i] + Yp[i, p]
            an = tn[i] + Yn[i, p]
            x2 = 2.0 * XT[i, p]
            l1 = _log_expit(x2 * (c1 * ap + g1 * an))
            l0 = _log_expit(x2 * (c0 * ap + g0 * an)) if dirty[i, p] else L[i, p]
            PB[b, p] += l1 - l0
            L[i, p] = l1
            dirty[i, p] = 0


@njit(cache=True)
def up_tables(indptr, indices, data, theta, maxdeg, P):
    """``P[i, q] = sigma(2 a_i)`` for every site ``i`` of degree ``d <= maxdeg`` and every pattern ``q`` of its
    neighbours' spins (bit ``r``: the r-th neighbour in increasing order is +1), with :func:`move_blocks`'
    operations in its order: the numbers it computes per particle and site."""
    for i in range(theta.size):
        s, e = indptr[i], indptr[i + 1]
        d = e - s
        if d > maxdeg:
            continue
        for q in range(1 << d):
            acc = 0.0
            for r in range(d):
                acc += data[s + r] * (1.0 if (q >> r) & 1 else -1.0)
            P[i, q] = 1.0 / (1.0 + math.exp(-(2.0 * (theta[i] + acc))))


@njit(cache=True)
def move_blocks(X, site, U, labels, bptr, members, theta, indptr, indices, data, buf, dirty, maxdeg, P):
    """One random-scan move (4.11): particle ``p`` redraws the block of site ``site[p]``, each of its sites
    ``x_i = +1`` when its uniform ``< sigma(2 a_i)``, else -1, ``a_i = theta_i + sum_j J_ij x_j`` from the particle
    before the move (the block's sites do not interact). ``U`` holds the redrawn sites' uniforms particle after
    particle, each block's sites in increasing order (:meth:`.RandomScanBlocks.draw`). ``X`` (particles x sites)
    is changed in place; a site that changes marks itself and its neighbours in ``dirty`` (sites x particles).
    Sites of degree ``<= maxdeg`` look ``sigma(2 a_i)`` up in :func:`up_tables` (``P``, at this ``theta`` and
    ``data``): no ``exp`` per particle."""
    N = X.shape[0]
    u = 0
    for p in range(N):
        b = labels[site[p]]
        s, e = bptr[b], bptr[b + 1]
        xp = X[p]
        for q in range(s, e):
            i = members[q]
            k0, k1 = indptr[i], indptr[i + 1]
            if k1 - k0 <= maxdeg:
                pat = 0
                for k in range(k0, k1):
                    pat |= (1 << (k - k0)) if xp[indices[k]] > 0.0 else 0
                up = P[i, pat]
            else:
                acc = 0.0
                for k in range(k0, k1):
                    acc += data[k] * xp[indices[k]]
                up = 1.0 / (1.0 + math.exp(-(2.0 * (theta[i] + acc))))
            buf[q - s] = 1.0 if U[u] < up else -1.0
            u += 1
        for q in range(s, e):
            i = members[q]
            if xp[i] != buf[q - s]:
                xp[i] = buf[q - s]
                dirty[i, p] = 1
                for k in range(indptr[i], indptr[i + 1]):
                    dirty[indices[k], p] = 1
