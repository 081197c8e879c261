"""Moving weighted particles from one conditional mean field distribution to the next
(Carbonetto 2009, §4.3, Fig. 4.4, weights (4.23)).

A distribution of the sequence is ``log f(x) = theta.x + sum_e v_e x_i x_j`` (fields ``theta``,
couplings ``v`` on the model's edges, zero inside the blocks of its partition). Between
``f_{k-1}`` and ``f_k`` the tempered path ``f_gamma = f_{k-1}^(1-gamma) f_k^gamma`` (parameters
``(1 - gamma) p_{k-1} + gamma p_k``, gamma = t/T, ``temper_steps = T``) keeps zero couplings
inside every block B of the finer partition R_k (B lies in a block of R_{k-1}), so the random-scan
block kernel (4.11) over R_k is exact along the whole path. Step t moves each particle with the
kernel at gamma_t and multiplies its weight by (4.12)/(4.23):

    f_t(x') / f_{t-1}(x')  /  sum_B rho_B prod_{i in B} p_t(x'_i | x'_N(B)) / p_{t-1}(x'_i | x'_N(B)),

the weight of Del Moral, Doucet & Jasra's approximation of the optimal backward kernel (3.41): its
expectation under pi_{t-1} x K_t is ``Z_t / Z_{t-1}`` (so the product of weighted averages
estimates Z_k / Z_0 without bias), and it depends on the moved particle only. ``moves - 1`` further
random-scan moves at gamma_t follow (the target does not change: weight 1). Resampling
(stratified, below the ESS threshold) follows each reweighting (:class:`Particles`).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from ...oracles.block_gibbs import RandomScanBlocks, log_conditional


def coupling_matrix(model, v):
    n = model.n
    return sp.csr_matrix((np.r_[v, v], (np.r_[model.i, model.j], np.r_[model.j, model.i])), shape=(n, n))


def log_f(X, theta, J):
    """``theta.x + x^T J x / 2`` per row, and the local fields ``theta + J x``."""
    XJ = np.asarray(J.T @ X.T).T if X.shape[1] else np.zeros_like(X)
    return X @ theta + 0.5 * np.einsum("ij,ij->i", X, XJ), theta + XJ


def exact_weights(S, theta, J):
    """Normalised probabilities of the states ``S`` under ``f`` and ``log sum f``."""
    lf = log_f(S, theta, J)[0]
    c = float(logsumexp(lf))
    return np.exp(lf - c), c


def move_along_path(X, pop, labels, prev, new, steps, moves, threshold, rng, check=None, compiled=False):
    """Tempered SMC from ``prev = (theta, J)`` to ``new`` (module docstring); ``X`` is updated and
    returned (it may be a new array after resampling). ``check()`` returning True stops early.
    ``compiled``: the numba kernels of :mod:`.compiled` (bit-identical to this numpy reference)."""
    kernel = RandomScanBlocks(labels)
    (tp, Jp), (tn, Jn) = prev, new
    if compiled:
        out = _compiled_path(X, pop, kernel, prev, new, steps, moves, threshold, rng, check)
        if out is not None:
            return out
    for t in range(1, steps + 1):
        g0, g1 = (t - 1) / steps, t / steps
        theta_g, J_g = (1.0 - g1) * tp + g1 * tn, ((1.0 - g1) * Jp + g1 * Jn).tocsr()
        kernel.move(X, log_f(X, theta_g, J_g)[1], rng)
        lp, Ap = log_f(X, tp, Jp)
        ln, An = log_f(X, tn, Jn)
        D = log_conditional(X, (1.0 - g1) * Ap + g1 * An) - log_conditional(X, (1.0 - g0) * Ap + g0 * An)
        pop.reweight((g1 - g0) * (ln - lp) - kernel.log_mixture(D))
        idx = pop.resample(threshold)
        if idx is not None:
            X = X[idx]
        for _ in range(moves - 1):  # the target is unchanged: weight 1
            kernel.move(X, log_f(X, theta_g, J_g)[1], rng)
        if check is not None and check():
            return X, False
    return X, True


def _compiled_path(X, pop, kernel, prev, new, steps, moves, threshold, rng, check):
    """:func:`move_along_path` with the kernels of :mod:`.compiled`: the same random draws, in the same order,
    and the same arithmetic; None (before any draw) when the two coupling matrices' patterns differ."""
    from .compiled import move_blocks, site_tables, step_terms, up_tables
    (tp, Jp), (tn, Jn) = prev, new
    # rows of J^T (= columns of J, sorted): the order in which scipy's J.T @ X.T sums a local field
    Cp, Cn = Jp.tocsc(), Jn.tocsc()
    Cp.sort_indices()
    Cn.sort_indices()
    indptr, indices = Cp.indptr.astype(np.int64), Cp.indices.astype(np.int64)
    if not (np.array_equal(Cp.indptr, Cn.indptr) and np.array_equal(Cp.indices, Cn.indices)):
        return None  # the kernels blend the two matrices entry by entry (both come from coupling_matrix: same)
    dp, dn = np.ascontiguousarray(Cp.data, dtype=float), np.ascontiguousarray(Cn.data, dtype=float)
    tp, tn = np.ascontiguousarray(tp, dtype=float), np.ascontiguousarray(tn, dtype=float)
    labels = kernel.labels.astype(np.int64)
    buf = np.empty(int(kernel.sizes.max()) if kernel.sizes.size else 0)
    N, n = X.shape
    nb = kernel.sizes.size
    Yp, Yn, PB = np.empty((n, N)), np.empty((n, N)), np.empty((nb, N))
    L, dirty = np.empty((n, N)), np.ones((n, N), dtype=np.uint8)  # step_terms' cache of the log conditionals
    # sites whose 2^(degree + 1) spin patterns are at most half the particles: their log conditionals from tables
    maxdeg = min(10, int(np.log2(max(N, 1) / 2.0)) - 1)
    T0, T1 = np.empty((n, 1 << max(maxdeg + 1, 0))), np.empty((n, 1 << max(maxdeg + 1, 0)))
    site_tables(indptr, indices, dp, dn, tp, tn, 0.0, maxdeg, T0)
    # move tables (2^degree entries per site, rebuilt every tempering step) where the moves' site updates per step
    # (moves N sum |B|^2 / n) are at least twice the entries: the coarse partitions; sites of higher degree per particle
    deg = np.diff(indptr)
    small = deg[deg <= min(10, int(np.log2(max(N, 1))))]  # no table wider than the particle arrays
    updates = moves * N * float(kernel.sizes @ kernel.sizes) / max(n, 1)
    mdeg = int(small.max()) if small.size and updates >= 2.0 * float(np.exp2(small).sum()) else -1
    P = np.empty((n, 1 << max(mdeg, 0)))
    X = np.ascontiguousarray(X)

    def move(X, theta_g, data_g):  # RandomScanBlocks.move's draws
        site, U = kernel.draw(N, rng)
        move_blocks(X, site, U, labels, kernel.bptr, kernel.members, theta_g, indptr, indices, data_g, buf, dirty,
                    mdeg, P)

    for t in range(1, steps + 1):
        g0, g1 = (t - 1) / steps, t / steps
        theta_g, data_g = (1.0 - g1) * tp + g1 * tn, (1.0 - g1) * dp + g1 * dn
        up_tables(indptr, indices, data_g, theta_g, mdeg, P)
        move(X, theta_g, data_g)
        step_terms(np.ascontiguousarray(X.T), indptr, indices, dp, dn, tp, tn, g0, g1, labels, Yp, Yn, PB, L, dirty,
                   maxdeg, T0, T1)
        T0, T1 = T1, T0  # this step's g1 is the next one's g0
        # the log densities as log_f computes them, on the products' layout (particles x sites, F-ordered)
        lp = X @ tp + 0.5 * np.einsum("ij,ij->i", X, Yp.T)
        ln = X @ tn + 0.5 * np.einsum("ij,ij->i", X, Yn.T)
        pop.reweight((g1 - g0) * (ln - lp) - logsumexp(PB.T + kernel.log_rho, axis=1))
        idx = pop.resample(threshold)
        if idx is not None:
            X = X[idx]
            L, dirty = np.ascontiguousarray(L[:, idx]), np.ascontiguousarray(dirty[:, idx])
        for _ in range(moves - 1):  # the target is unchanged: weight 1
            move(X, theta_g, data_g)
        if check is not None and check():
            return X, False
    return X, True
