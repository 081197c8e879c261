"""The conditional mean field objective (4.13)-(4.20) of Carbonetto 2009, §4.3, and its solve.

Target ``log p(x) = h.x + sum_e w_e x_i x_j + const`` (spins; h = theta*, w = theta*_ij). For a
partition R the conditional mean field distribution p(x; theta) has fields theta_i, couplings 0
inside blocks and couplings theta_ij on the connecting edges C_R. Given the blanket x_N(A), the
conditional of block A is the product of ``p(x_i | x_N(A)) = (1 + x_i mu_i)/2`` with

    mu_i = tanh(t_i),   t_i = theta_i + sum_{j in N(i) \\ A} theta_ij x_j             (4.15)

and F_A is the naive mean-field lower bound on the log-normaliser of the *target* conditional
p(x_A | x_N(A); theta*), with this product as the approximating family (reading adopted in
docs/cmf.md; it is the one whose gradient is (4.18)):

    F_A = sum_{i in A} b_i mu_i + sum_{(i,j) in E(A)} w_ij mu_i mu_j + sum_{i in A} H(mu_i),
    b_i = h_i + sum_{j in N(i) \\ A} w_ij x_j        (the target's effective field, "theta~*_i")

with ``H(tanh t) = log 2cosh t - t tanh t``. The objective of (4.13) is
``sum_A sum_s lambda_s F_A(theta, x^(s)_N(A))`` over weighted configurations (particles, or all
states in exact mode). With ``r_i = b_i + sum_{j in A} w_ij mu_j - t_i`` (= dF_A/dmu_i),

    dF/dtheta_i    = sum_s lambda_s sech^2(t_i) r_i                                   (4.18)
    dF/dtheta_ij   = sum_s lambda_s [x_j sech^2(t_i) r_i + x_i sech^2(t_j) r_j]     (4.19, 4.20)
    d2F/dtheta_i dtheta_k = sum_s lambda_s [sech^2 t_i w_ik sech^2 t_k
                                            - delta_ik sech^2 t_i (1 + 2 mu_i r_i)].

With the connecting edges fixed at the target (default) the objective separates over blocks and
each block is solved by a modified Newton method (analytic gradient and Hessian, made negative definite by
a multiple of the identity or by |eigenvalues|: :func:`ascent_direction`; line search) started at the target
fields; with ``edges='optimize'`` fields and connecting couplings are solved jointly by L-BFGS (quasi-Newton)
started at the target.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.optimize import minimize

from ...core.threads import one_thread_above


def log2cosh(t):
    """``log 2cosh t = |t| + log1p(exp(-2|t|))`` (no overflow; half the time of ``logaddexp(t, -t)``)."""
    a = np.abs(t)
    return a + np.log1p(np.exp(-2.0 * a))


def block_value(theta_a, E, B, Jin, lam):
    """``sum_s lam_s F_A`` at the fields ``theta_a`` of one block with fixed edges, and the intermediates
    ``(t, mu, mu Jin)`` its derivatives (:func:`block_derivatives`) reuse.

    ``E`` (N x m): the boundary part of t (sum over connecting edges of theta_ij x_j), ``B``: the
    target's effective fields b, ``Jin``: target couplings inside the block (m x m, symmetric; dense, or
    scipy sparse on sparse blocks: :func:`block_couplings`)."""
    t = theta_a + E
    mu = np.tanh(t)
    muJ = mu @ Jin if isinstance(Jin, np.ndarray) else np.asarray(Jin @ mu.T).T
    F = lam @ (B * mu + 0.5 * mu * muJ + log2cosh(t) - t * mu).sum(axis=1)
    return float(F), (t, mu, muJ)


def block_derivatives(state, B, Jin, lam):
    """Gradient (4.18) and Hessian (dense) in the fields from the intermediates of :func:`block_value`.

    The coupling part ``sum_s lam_s sech^2 t_i w_ik sech^2 t_k`` is nonzero on the block's edges only: on a
    sparse ``Jin`` it is computed there (N x edges products instead of an m x N x m matrix product)."""
    t, mu, muJ = state
    r = B + muJ - t
    s2 = 1.0 - mu * mu
    g = lam @ (s2 * r)
    Ls = s2 * lam[:, None]
    if isinstance(Jin, np.ndarray):
        Hm = (Ls.T @ s2) * Jin
    else:
        C = Jin.tocoo()
        Hm = np.zeros((s2.shape[1], s2.shape[1]))
        Hm[C.row, C.col] = C.data * np.einsum("si,si->i", Ls[:, C.row], s2[:, C.col])
    Hm[np.diag_indices_from(Hm)] -= lam @ (s2 * (1.0 + 2.0 * mu * r))
    return g, Hm


def block_couplings(m, i, j, w):
    """The couplings ``w`` of the edges ``(i, j)`` (each once, local indices) of a block of ``m`` spins as
    :func:`block_value` takes them: scipy CSR on blocks of 64 spins or more with at most a quarter of the
    entries nonzero (lattices: products over the edges), else a dense symmetric array (BLAS products win on
    dense blocks, and scipy's per-call overhead on small ones)."""
    r, c, v = np.r_[i, j], np.r_[j, i], np.r_[w, w]
    if m >= 64 and r.size * 4 <= m * m:
        return sp.csr_matrix((v, (r, c)), shape=(m, m))
    J = np.zeros((m, m))
    np.add.at(J, (r, c), v)
    return J


def block_terms(theta_a, E, B, Jin, lam):
    """Value, gradient and Hessian of ``sum_s lam_s F_A`` in the fields of one block with fixed edges
    (:func:`block_value`, :func:`block_derivatives`)."""
    F, state = block_value(theta_a, E, B, Jin, lam)
    return (F, *block_derivatives(state, B, Jin, lam))


#: the shift of :func:`ascent_direction` for this many Newton iterations of a block, then the |eigenvalue| modification
SHIFT_ITERATIONS = 30
#: negative curvature below this many beta: the |eigenvalue| modification (a shift stalls on such nearly flat ridges)
FLAT = 16.0


def ascent_direction(g, Hm, shift=True):
    """An ascent direction ``d = M^-1 g`` of F from its gradient ``g`` and Hessian ``Hm``, ``M`` positive
    definite, and which ``M`` it is (``'newton'``, ``'eigen'`` or ``'shift'``), ``beta`` = 1e-3 times the largest
    entry of -Hm:

    * ``'newton'``: ``M = -Hm`` when it has a Cholesky factor (the Hessian is negative definite);
    * ``'eigen'``: when ``-Hm + FLAT beta I`` has one (negative curvature below 1.6 % of the largest entry), or
      ``shift`` is False: ``M = V |Lambda| V^T`` from the eigendecomposition of -Hm, eigenvalues floored at 1e-6
      of the largest (Nocedal & Wright 2006, §3.4). A shift would cut the steps along these nearly flat
      directions to ``g_i / tau``: on ridges that rise slowly towards saturated spins that stalled solves on
      the 12 x 12 grid and the 30 x 30 torus (no convergence in 200 iterations; with this rule 102, with
      the eigenvalue modification alone 35);
    * ``'shift'``: ``M = -Hm + tau I`` with the smallest ``tau`` of ``max(2 FLAT beta, beta - min_i(-Hm_ii))``,
      doubling, that has a Cholesky factor (Algorithm 3.3, "Cholesky with added multiple of the identity").
      Started at the target fields, the Hessians of the 30 x 30 torus's blocks of 450 spins have up to a
      hundred positive eigenvalues; with the eigenvalue modification alone their solves took 80 iterations
      of a dense eigendecomposition each, with the shift 14-19 mostly Cholesky iterations, ending at a
      larger F (378.14 and 378.07 against 373.12 and 377.68).

    Returns ``(d, tau, kind)`` (``tau`` = 0 for 'newton' and 'eigen'); ``d`` is None when no shift up to 1e300
    has a factor."""
    A = -Hm
    m = g.size
    beta = 1e-3 * max(float(np.abs(A).max(initial=0.0)), 1e-12)
    diag = np.diag_indices(m)

    def factor(tau):
        S = A.copy()
        S[diag] += tau
        try:
            return cho_factor(S, check_finite=False)
        except LinAlgError:
            return None

    if (c := factor(0.0)) is not None:
        return cho_solve(c, g, check_finite=False), 0.0, "newton"
    if not shift or factor(FLAT * beta) is not None:
        lam_, V = np.linalg.eigh(A)
        lam_ = np.maximum(np.abs(lam_), 1e-6 * max(float(np.abs(lam_).max(initial=0.0)), 1e-12))
        return V @ ((V.T @ g) / lam_), 0.0, "eigen"
    tau = max(2.0 * FLAT * beta, beta - float(A.diagonal().min(initial=np.inf)))
    while tau < 1e300:
        if (c := factor(tau)) is not None:
            return cho_solve(c, g, check_finite=False), tau, "shift"
        tau *= 2.0
    return None, tau, "shift"


def solve_block(theta0, E, B, Jin, lam, max_iter, tol):
    """Maximise the block objective from ``theta0`` by a modified Newton method (the Hessian of -F shifted
    by a multiple of the identity that makes it positive definite for the first ``SHIFT_ITERATIONS``
    iterations, the eigenvalue modification where the negative curvature is small and after them:
    :func:`ascent_direction`; Nocedal & Wright 2006, §3.4) and a
    backtracking (Armijo) line search. Returns ``(theta, ok, iterations)``; converged when
    ``max |grad| <= tol * max(1, |F|)`` or the Newton decrement is at the rounding level of F; ``ok`` is False
    when the gradient is not below ``tol`` after ``max_iter`` iterations or anything is not finite (the caller
    then keeps its previous parameters)."""
    x = np.array(theta0, dtype=float)
    with np.errstate(all="ignore"):
        F, g, Hm = block_terms(x, E, B, Jin, lam)
        for it in range(1, max_iter + 1):
            if not (np.isfinite(F) and np.isfinite(g).all() and np.isfinite(Hm).all()):
                return np.array(theta0, dtype=float), False, it
            scale = max(1.0, abs(F))
            if float(np.abs(g).max(initial=0.0)) <= tol * scale:
                return x, True, it - 1
            d = ascent_direction(g, Hm, shift=it <= SHIFT_ITERATIONS)[0]
            if d is None or not np.isfinite(d).all():
                return np.array(theta0, dtype=float), False, it
            slope = float(g @ d)
            if slope <= 1e-15 * scale:  # Newton decrement at the rounding level of F: stationary
                return x, True, it - 1
            step = 1.0
            while True:
                # the derivatives only at the accepted point: most trial points are rejected on large blocks
                Fn, state = block_value(x + step * d, E, B, Jin, lam)
                if np.isfinite(Fn) and Fn >= F + 1e-4 * step * slope:
                    gn, Hn = block_derivatives(state, B, Jin, lam)
                    break
                step *= 0.5
                if step < 1e-12:
                    ok = float(np.abs(g).max(initial=0.0)) <= 1e3 * tol * scale
                    return (x if ok else np.array(theta0, dtype=float)), ok, it
            x = x + step * d
            F, g, Hm = Fn, gn, Hn
    ok = bool(np.isfinite(F)) and float(np.abs(g).max(initial=0.0)) <= tol * max(1.0, abs(F))
    return (x if ok else np.array(theta0, dtype=float)), ok, max_iter


def _accepted(res, tol):
    # trust-region and line-search methods stop with "precision loss" at a stationary point when
    # tol is near machine precision; a small enough gradient counts as converged
    if not (np.isfinite(res.x).all() and np.isfinite(res.fun) and np.isfinite(res.jac).all()):
        return False
    return bool(res.success) or float(np.abs(res.jac).max(initial=0.0)) <= 1e3 * tol


class ConditionalObjective:
    """(4.13) for one partition (labels) and weighted configurations ``X`` (N x n), ``lam`` (N)."""

    def __init__(self, model, labels, X, lam):
        self.model, self.labels, self.X, self.lam = model, labels, X, lam
        i, j, w = model.i, model.j, model.w
        inside = labels[i] == labels[j]
        n = model.n
        self.conn = np.flatnonzero(~inside)
        self.Jout = sp.csr_matrix((np.r_[w[~inside], w[~inside]], (np.r_[i[~inside], j[~inside]],
                                                                    np.r_[j[~inside], i[~inside]])), shape=(n, n))
        self.Jin = sp.csr_matrix((np.r_[w[inside], w[inside]], (np.r_[i[inside], j[inside]],
                                                                 np.r_[j[inside], i[inside]])), shape=(n, n))
        self.XJout = np.asarray(self.Jout.T @ X.T).T if X.shape[0] else np.zeros((0, n))

    def value(self, theta, conn_w=None):
        """The objective at fields ``theta`` and connecting couplings ``conn_w`` (default: target)."""
        return self._joint(np.r_[theta, self.model.w[self.conn] if conn_w is None else conn_w])[0]

    def solve_fields(self, start, fallback, max_iter, tol):
        """Fields maximising (4.13) with the connecting edges at the target, block by block."""
        theta = np.array(start, dtype=float)
        failed, iters = [], 0
        B_all = self.model.h + self.XJout
        m, n = self.model, self.model.n
        blocks, inv, sizes = np.unique(self.labels, return_inverse=True, return_counts=True)
        # sites grouped by block (increasing inside), their local indices, the inside edges grouped by block:
        # slicing the sparse couplings per block cost as much as the solves of the small blocks
        order = np.argsort(inv, kind="stable")
        start = np.r_[0, np.cumsum(sizes)]
        local = np.empty(n, dtype=np.int64)
        local[order] = np.arange(n) - start[inv[order]]
        inside = np.flatnonzero(self.labels[m.i] == self.labels[m.j])
        inside = inside[np.argsort(inv[m.i[inside]], kind="stable")]
        bounds = np.searchsorted(inv[m.i[inside]], np.arange(blocks.size + 1))
        # Cholesky factors of blocks of hundreds of spins: a multi-threaded BLAS on a shared machine is slower
        with one_thread_above(int(sizes.max(initial=0))):
            for k, b in enumerate(blocks):
                a = order[start[k]:start[k + 1]]
                e = inside[bounds[k]:bounds[k + 1]]
                Jin = block_couplings(a.size, local[m.i[e]], local[m.j[e]], m.w[e])
                th, ok, it = solve_block(theta[a], self.XJout[:, a], B_all[:, a], Jin, self.lam, max_iter, tol)
                iters += it
                theta[a] = th if ok else fallback[a]
                if not ok:
                    failed.append(int(b))
        return theta, failed, iters

    def _joint(self, p):
        m, X, lam = self.model, self.X, self.lam
        n = m.n
        theta, v = p[:n], p[n:]
        ci, cj = m.i[self.conn], m.j[self.conn]
        Jv = sp.csr_matrix((np.r_[v, v], (np.r_[ci, cj], np.r_[cj, ci])), shape=(n, n))
        t = theta + np.asarray(Jv.T @ X.T).T
        B = m.h + self.XJout
        mu = np.tanh(t)
        muJ = np.asarray(self.Jin.T @ mu.T).T
        F = lam @ (B * mu + 0.5 * mu * muJ + log2cosh(t) - t * mu).sum(axis=1)
        S = (1.0 - mu * mu) * (B + muJ - t)
        g_theta = lam @ S
        g_v = lam @ (S[:, ci] * X[:, cj] + S[:, cj] * X[:, ci])
        return float(F), np.r_[g_theta, g_v]

    def solve_joint(self, start, fallback, max_iter, tol):
        """Fields and connecting couplings jointly (L-BFGS); returns ``(theta, conn_w, ok, iterations)``."""
        x0 = np.r_[start, self.model.w[self.conn]]

        def fun(p):
            F, g = self._joint(p)
            return -F, -g

        with np.errstate(all="ignore"):
            res = minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": tol})
        ok = _accepted(res, tol)
        n = self.model.n
        if not ok:
            return np.array(fallback, dtype=float), self.model.w[self.conn].copy(), False, int(res.nit)
        return res.x[:n], res.x[n:], True, int(res.nit)
