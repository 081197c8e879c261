r"""The two parameterizations of the Gaussian posterior ``q(w) = N(m, V)`` and their proximal steps.

Notation (docs/klprox.md): ``F(w) = 1/2 w^T P w + c^T w + k + sum_n l_n(a_n^T w + b_n)``, prior
``N(mu, Sigma)``, ``Sigma = P^-1``, ``mu = -P^-1 c``; for the current ``q`` every predictor is
``u_n ~ N(mt_n, vt_n)`` and ``alpha_n = dE[l_n]/dmt_n``, ``gamma_n = 2 dE[l_n]/dvt_n`` (our sign:
negative log-likelihoods, so ``gamma >= 0`` for convex ``l``). With ``r = 1/(1 + beta)``, the
closed-form step of Khan, Baque, Fleuret & Fua (2015) is

    (16)  m+ = [(1 - r) P + r V^-1]^-1 [(1 - r)(-c - A^T alpha) + r V^-1 m]
    (17)  V+^-1 = r V^-1 + (1 - r) (P + A^T diag(gamma) A)

and with ``V^-1 = P + A^T diag(gt) A`` (18) the covariance is carried by the pseudo-precisions
``gt+ = r gt + (1 - r) gamma``. (16) is rewritten as ``m+ = m + (1 - r) M^-1 g`` with
``M = P + r A^T diag(gt) A`` and ``g = -(P m + c + A^T alpha)`` (the ELBO's gradient in ``m``).

* :class:`FullGaussian`: ``m`` and the Cholesky factor of ``V^-1`` (D x D); for ``D`` small. With dense 1-D rows, a
  diagonal prior and ``N <= D`` (whitened GP models) the state is computed from ``B = I + G^1/2 St G^1/2`` (N x N)
  by Woodbury's identity instead (``FullGaussian._woodbury_state``), where its rounding allows.
* :class:`DualGaussian`: update (19) in the N-dimensional space of the predictors, for
  ``N < D`` (GP models): ``m = mu + Sigma A^T z``; with ``St = A Sigma A^T``,
  ``mt = mut + St z`` and (16) becomes ``z+ = (I + r G St)^-1 [r (I + G St) z - (1 - r) alpha]``,
  ``G = diag(gt)``, solved through ``B_r = I + (rG)^1/2 St (rG)^1/2``; ``vt = diag(St) -
  diag(St G^1/2 B^-1 G^1/2 St)`` with ``B = I + G^1/2 St G^1/2`` (Woodbury, as in eq. (19)).

Both give the Gaussian part of ``-ELBO`` (``E_q[1/2 w^T P w + c^T w + k] - H[q]``) as
``KL(q || N(mu, Sigma)) + C0``, ``C0 = k - 1/2 mu^T P mu - D/2 log 2 pi + 1/2 log det P`` (0 for a
normalized prior), and stationarity residuals: ``sqrt(g^T V g)`` for the mean and
``sum_n |gamma_n - gt_n| vt_n`` (a bound on ``||V^1/2 A^T diag(gamma - gt) A V^1/2||_F``) for the
covariance.
"""
from __future__ import annotations

import copy
import functools
import math
from types import SimpleNamespace

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.linalg import lapack
from scipy.linalg.blas import dsyrk, dtrmm

from ...errors import InputDataError


_LOG2PI = np.log(2.0 * np.pi)
_EPS = np.finfo(float).eps
#: largest estimated relative rounding error of a row's ``vt`` in the Woodbury state (FullGaussian._woodbury_state)
WOODBURY_ROW_TOL = 1e-12
#: largest ``eps ||B||`` of the Woodbury state: its mean solves and ``g^T V g`` lose about that much relative accuracy
WOODBURY_COND_TOL = 1e-8
#: rows of the Woodbury state's second form checked first (FullGaussian._probe)
WOODBURY_PROBE = 32
#: after k declined Woodbury states in a row the next min(2^k - 1, WOODBURY_BACKOFF) states are direct without an
#: attempt: at N >= 2000 a GP's rows are far narrower than their prior (many neighbours) and nearly every attempt is
#: declined (GP classification on moons: 26 of 26; Laplace: 36 of 37), each costing a Cholesky factor and trtri of B,
#: a third of a direct state; both forms are exact to 1e-12 (docs/klprox.md, section 3), so the choice changes rounding
#: only. 0: an attempt at every state
WOODBURY_BACKOFF = 16


# LAPACK directly: scipy's wrappers look the routine up and validate their arguments on every call (3-7 us each at
# D = 124-135, three or four calls a step); empty operands keep scipy's handling
def _lapack_info(routine, info, singular=None, base=1):
    """Raise for a LAPACK ``info``: ``LinAlgError`` (message ``singular`` with ``{k}`` the position, counted from
    ``base``) when positive, ``ValueError`` when negative (an illegal argument)."""
    if info > 0 and singular is not None:
        raise np.linalg.LinAlgError(singular.format(k=info - 1 + base))
    if info < 0:
        raise ValueError(f"LAPACK {routine}: illegal value in argument {-info}")


def _chol(M):
    """Lower Cholesky factor (upper triangle zero); ``LinAlgError`` when ``M`` is not positive definite."""
    if not M.size:
        return sla.cholesky(M, lower=True, check_finite=False)
    L, info = lapack.dpotrf(M, lower=1, clean=1)
    _lapack_info("dpotrf", info, "{k}-th leading minor not positive definite")
    return L


def _tri(L, B):
    """``L^-1 B`` for a lower-triangular ``L``."""
    if not (L.size and np.size(B)):
        return sla.solve_triangular(L, B, lower=True, check_finite=False)
    x, info = lapack.dtrtrs(L, B, lower=1)
    _lapack_info("dtrtrs", info, "singular matrix: resolution failed at diagonal {k}", base=0)
    return x


def _prior_tri(view, B, trans=False):
    """``Lp^-1 B`` (``trans``: ``Lp^-T B``) for the prior's lower Cholesky factor ``Lp``; a diagonal prior held by its
    diagonal (:meth:`.view.LikelihoodView.prior_sqrt`) multiplies by ``1 / sqrt(diag P)``: the numbers of LAPACK's
    triangular solve with the diagonal factor (it multiplies by the reciprocal of each diagonal entry), in ``N D``
    flops instead of ``N D^2`` and without the D x D factor."""
    s = view.prior_sqrt()
    if s is not None:
        r = 1.0 / s
        return B * (r[:, None] if np.ndim(B) == 2 else r)
    if trans:
        return sla.solve_triangular(view.P_chol, B, lower=True, trans="T", check_finite=False)
    return _tri(view.P_chol, B)


def _cho_solve(L, B):
    """``(L L^T)^-1 B`` from the lower Cholesky factor ``L``."""
    if not (L.size and np.size(B)):
        return sla.cho_solve((L, True), B, check_finite=False)
    x, info = lapack.dpotrs(L, B, lower=1)
    _lapack_info("dpotrs", info)
    return x


def _symmetrize(low):
    """The symmetric matrix with lower triangle ``low`` (whose strict upper triangle is zero)."""
    out = low + low.T
    flat = out.ravel(order="K")       # a view of the fresh (C- or Fortran-) contiguous sum
    if np.shares_memory(flat, out):   # square: the diagonal is every (n + 1)-th entry in either order
        flat[:: out.shape[0] + 1] *= 0.5
    else:
        out[np.diag_indices_from(out)] *= 0.5
    return out


def _sum(parts):
    """``float(np.sum(parts))`` of fewer than 8 floats without forming the array: the same additions in the same order
    (numpy adds so few values from the left)."""
    return float(sum(float(p) for p in parts))


#: _tri_inv splits a triangle larger than this into 2 x 2 blocks
TRI_INV_BLOCK = 96


def _tri_inv(L):
    """``L^-1`` of a lower-triangular ``L`` (D^3 / 3 flops; a solve against the identity costs D^3), its strict upper
    part zero; ``LinAlgError`` when ``L`` is singular.

    Above TRI_INV_BLOCK rows by the 2 x 2 block form ``[[L11, 0], [L21, L22]]^-1 = [[M11, 0], [-M22 L21 M11, M22]]``,
    ``Mii = Lii^-1`` recursively and the off-diagonal block by two triangular products (BLAS trmm): OpenBLAS's trtri
    runs at half the speed of its Cholesky factorization at these sizes (72 us against 34 us at D = 135, the heart GP's
    Woodbury state; 346 against 164 us at 253, housing), the block form at 52 and 222 us (docs/klprox.md, section 7).
    The same products summed in another order: the result differs from LAPACK's by rounding (~1e-16 relative)."""
    n = L.shape[0]
    if n <= TRI_INV_BLOCK:
        Linv, info = lapack.dtrtri(L, lower=1)   # the strict upper part of L (zeros, _chol) is left as it is
        return Linv if info == 0 else _tri(L, np.eye(n))
    h = n // 2
    M11, M22 = _tri_inv(L[:h, :h]), _tri_inv(L[h:, h:])
    # in Fortran order, as LAPACK's own result: the blocks (trtri's and trmm's results) are copied in by columns, and
    # trmm and lauum read L^-1 later without a transposed copy (17 against 22 us for the heart state's rows)
    out = np.zeros((n, n), order="F")
    out[:h, :h] = M11
    out[h:, h:] = M22
    out[h:, :h] = dtrmm(1.0, M11, dtrmm(-1.0, M22, L[h:, :h], lower=1), lower=1, side=1)
    return out


class _Base:
    def __init__(self, view, sparse_rows=False):
        self.view = view
        self.D, self.N = view.D, view.N
        # dense rows (GP models: A = L) are much faster as an ndarray than as a filled CSR matrix; rows handled by
        # their pairs (sparse_rows) only meet A in matrix-vector products, as fast from the CSR matrix (a1a, 12 %
        # filled: no 1.6 MB dense copy)
        dense = self.N * self.D and view.A.nnz > 0.1 * self.N * self.D and not sparse_rows
        self.A = view.dense_A() if dense else view.A
        # of a sparse A: a CSC view, made once (A^T alpha in every gradient; the view's, when it made one)
        self.A_T = view.A_T() if self.A is view.A else self.A.T
        # a square lower-triangular A (whitened GP models, A = L_K): A^T G A by a triangular product
        self.lower_square = bool(dense and self.N == self.D and not view.upper())
        self.mu = view.mu
        # (a zero prior mean, e.g. a GP's, adds nothing: mu^T P mu is a signed zero)
        quad = 0.0
        if np.any(self.mu):
            d = view.known_diagonal()   # a diagonal prior held by its diagonal (the dual form never forms P)
            quad = 0.5 * (self.mu * d) @ self.mu if d is not None and "P" not in view.__dict__ else \
                0.5 * self.mu @ self.P @ self.mu
        self.C0 = (view.k - quad - 0.5 * self.D * _LOG2PI + 0.5 * view.logdet_P())

    @property
    def P(self):
        """The prior precision (D x D; a diagonal one is formed on first use, :class:`.view.LikelihoodView`)."""
        return self.view.P

    @functools.cached_property
    def AT(self):
        """``A^T`` as a dense array (formed when first needed: the row-pair products of a sparse ``A`` never do); of a
        dense ``A`` its transpose as it is (a view: not to be modified)."""
        return self.A.T if isinstance(self.A, np.ndarray) else self.view.A.T.toarray()

    def start_kinds(self):
        """The ``at_prior_mean`` values of :meth:`start` that give distinct starts: the start at ``mu`` and the one
        nearest 0 coincide when ``mu = 0`` (e.g. a zero-mean GP prior; one evaluation saved)."""
        return (True, False) if np.any(self.mu) else (True,)

    def _block_gram(self, g):
        return _block_gram_of(self.view, self.A, g)

    def _AtGA(self, g):
        if self.N == 0:
            return np.zeros((self.D, self.D))
        if not self.view.diagonal:  # softmax groups: J x J blocks
            if isinstance(self.A, np.ndarray):
                return self._block_gram(g)
            Gm = self.view.curvature_matrix(g)
            out = self.A.T @ (Gm @ self.A)
            return out.toarray() if sp.issparse(out) else np.asarray(out)
        pairs = getattr(self, "pairs", None)
        if pairs is not None:
            return pairs.gram(g)
        if not sp.issparse(self.A):
            if np.all(g >= 0.0):     # A^T G A = B^T B, B = G^1/2 A: the symmetric rank-k update, half a product
                if self.lower_square:  # B lower triangular (whitened GP: A = L_K): LAPACK lauum, a third of syrk
                    # B in Fortran order as the transpose of A^T G^1/2 (no copy into LAPACK's layout); the strict
                    # upper part of the result is B's zeros
                    low = lapack.dlauum((self.AT * np.sqrt(g)).T, lower=1, overwrite_c=1)[0]
                else:
                    low = dsyrk(1.0, (np.sqrt(g)[:, None] * self.A).T, trans=0, lower=1)   # B^T: Fortran order
                return _symmetrize(low)
            return self.AT @ (g[:, None] * self.A)
        return (self.A.T @ sp.diags(g) @ self.A).toarray()


def _block_gram_of(view, A, g):
    """``A^T G A`` for a dense ``A`` and the (block-)diagonal ``G`` with pattern values ``g``: the 1-D rows' part
    ``A_1^T diag(g_1) A_1`` and, per softmax group, ``sum_g A_g^T G_g A_g`` as one product of the stacked (G J x D)
    rows with the stacked ``G_g A_g`` (the sparse N x N block matrix and its two sparse products cost 0.3-0.7 ms a step
    on wine, D = 42, 88 groups; this 0.05-0.2 ms)."""
    n1 = view.N - sum(rs.stop - rs.start for _, rs, _ in view.groups)
    A1 = A[:n1]
    out = A1.T @ (g[:n1, None] * A1)
    for J, rs, ps in view.groups:
        Ag = A[rs].reshape(-1, J, A.shape[1])
        GA = np.matmul(g[ps].reshape(-1, J, J), Ag)
        out += Ag.reshape(-1, A.shape[1]).T @ GA.reshape(-1, A.shape[1])
    return out


class _RowPairs:
    r"""The products ``a_ni a_nj`` (``i <= j``) of the nonzeros of every row of a sparse ``A``, for
    ``A^T diag(g) A = sum_n g_n a_n a_n^T`` and ``a_n^T V a_n`` in ``sum_n nnz_n^2 / 2`` operations instead of
    ``N D^2`` (a1a: 14.9 nonzeros of 124 per row, 1.9e5 pairs against 2.5e7 multiply-adds).

    Both are sparse matrix-vector products over the pairs: ``a_n^T V a_n = (Q vec(V))_n`` with ``Q`` (N x D^2)
    holding ``a_ni a_nj`` (doubled off the diagonal) at the lower-triangle entry ``(j, i)`` of row ``n`` (``vec``:
    Fortran order, so that a lower triangle from LAPACK is read in place), and the
    Gram matrix ``= (T + T^T) / 2`` with ``T = Q^T g`` (one triangle, off-diagonal entries doubled: a CSC
    product over ``Q``'s own arrays, scattered into a D^2 vector in the order of the rows; the same sums, to the
    last bit, as a transposed undoubled copy of ``Q``, whose construction cost 0.7 ms a solve on a1a)."""

    def __init__(self, A, D):
        A = sp.csr_matrix(A)
        if not A.has_canonical_format:          # sorted rows without duplicates (the view's are): else a sorted copy
            A = A.copy()
            A.sum_duplicates()
            A.sort_indices()
        nnz = A.indptr[1:] - A.indptr[:-1]
        ptr = np.concatenate([[0], np.cumsum(nnz * (nnz + 1) // 2)])    # pairs of the rows before row n
        # every fresh array of the pair count (1.9e5 on a1a) costs its page faults (~1 ms per 1.5 MB here): 32-bit
        # indices where they fit, and in place
        it = np.int32 if max(int(ptr[-1]), D * D) < 1 << 31 else np.int64
        ptr = ptr.astype(it)
        cnt = (A.indptr[1:].repeat(nnz) - np.arange(A.nnz)).astype(it)   # pairs (p, q >= p) in the row of entry p
        first = np.cumsum(cnt, dtype=it) - cnt                  # position of entry p's first pair, (p, p)
        # entry q of the pair: p + position among p's pairs (a repeat, not a gather through an index array)
        q = np.arange(int(ptr[-1]), dtype=it)
        q -= (first - np.arange(A.nnz, dtype=it)).repeat(cnt)
        self.D, self.N = D, A.shape[0]
        binary = bool(np.all(A.data == 1.0))                   # binary features (a1a): every product is 1
        # gathers through q by take: indexing with a 32-bit array first converts it to a fresh 64-bit copy (a1a: 0.28 ms
        # against 0.11 ms for this gather)
        val = None if binary else A.data.repeat(cnt) * A.data.take(q)
        # row n: a_ni a_nj at flat index i D + j, j >= i (sorted rows): the entry (i, j) of a C-ordered D x D array,
        # the lower entry (j, i) of a Fortran-ordered one (what quad() reads of a lower triangle from LAPACK)
        flat = A.indices.astype(it).take(q)
        del q
        flat += (A.indices.astype(it) * it(D)).repeat(cnt)
        # sum_i a_i^2 V_ii + 2 sum_{i<j} a_i a_j V_ij: 2 off the diagonal, 1 at each entry's first pair (p, p)
        val2 = np.full(flat.size, 2.0)
        val2[first] = 1.0
        if val is not None:
            val2 *= val
        self.Q = sp.csr_matrix((val2, flat, ptr), shape=(self.N, D * D))
        self.QT = self.Q.T                                      # a CSC view: no copy
        self._unit = None

    @staticmethod
    def worth(A, D):
        """Cheaper than the dense products (which run at BLAS speed: a margin of 50)."""
        if not sp.issparse(A) or A.shape[0] == 0:
            return False
        # sum_n nnz_n^2 >= nnz^2 / N (Cauchy-Schwarz): a filled CSR A (a GP's dense factor) is decided without its rows
        # (its nnz is the rows' stored entries, what the rule below counts)
        if A.format == "csr" and 25 * A.nnz ** 2 > A.shape[0] ** 2 * D ** 2:
            return False
        nnz = np.diff(sp.csr_matrix(A).indptr).astype(float)
        return float(np.sum(nnz * (nnz + 1) / 2)) * 50 <= A.shape[0] * float(D) ** 2

    def gram(self, g):
        low = (self.QT @ g).reshape(self.D, self.D)            # one triangle; off the diagonal: twice the Gram entry
        out = low + low.T
        out *= 0.5
        return out

    def unit_gram(self):
        """``A^T A`` (formed once: the view's split of section 1 and every uniform-curvature start use it)."""
        if self._unit is None:
            self._unit = self.gram(np.ones(self.N))
        return self._unit

    def quad(self, V):
        """``a_n^T V a_n`` for every row: ``V`` symmetric, or only its lower triangle held in a Fortran-ordered array
        (LAPACK's output: read in place)."""
        return self.Q @ V.ravel(order="F")


class _LowerState(SimpleNamespace):
    """A direct state that holds the lower triangle of ``V`` (``V_low``, zeros above: what the row pairs read); ``V``,
    the symmetric matrix, is formed when asked for (the returned covariance)."""

    @property
    def V(self):
        return _symmetrize(self.V_low)


class FullGaussian(_Base):
    """``q = N(m, V)`` with ``V^-1 = P + A^T diag(gt) A`` held by its Cholesky factor."""

    name = "full"
    magnitude = 0.0
    unit_prior = False

    def __init__(self, view, woodbury=False):
        worth = view.diagonal and (view.row_pairs is not None or _RowPairs.worth(view.A, view.D))   # the view built them
        super().__init__(view, sparse_rows=worth)
        known = view.known_diagonal()
        if known is not None:           # known diagonal (the view read the program's squares)
            self.P_diag = known.copy()
        else:
            d = np.diag(self.P)
            self.P_diag = d.copy() if np.count_nonzero(self.P) == np.count_nonzero(d) else None   # nothing off it
        if worth:   # built by the view for the split of section 1 when it had more rows than variables
            self.pairs = view.row_pairs if view.row_pairs is not None else _RowPairs(view.A, self.D)
        else:
            self.pairs = None
        # the state in the N-dimensional predictor space (_woodbury_state) for dense 1-D rows, a diagonal prior and
        # N <= D (whitened GP models): B = I + G^1/2 St G^1/2, St = A Sigma A^T formed once
        self.woodbury = bool(woodbury and view.diagonal and self.pairs is None and isinstance(self.A, np.ndarray)
                             and self.P_diag is not None and 0 < self.N <= self.D and np.all(self.P_diag > 0))
        self.vt_ratio = None           # vt / diag(St) of the last state computed (Woodbury: the probe's row order)
        self.declined = self.skip = 0  # Woodbury states declined in a row; direct states left before the next attempt
        if self.woodbury:
            self.Sd = 1.0 / self.P_diag                          # Sigma = P^-1 (diagonal)
            # Sigma = I (a whitened GP): the products Sigma x are x itself (skipped: x * 1.0 is x to the last bit)
            self.unit_prior = bool(np.all(self.Sd == 1.0))
            # A Sigma^1/2 (a whitened GP's prior is N(0, I): A itself, no product)
            ASh = self.A if np.all(self.Sd == 1.0) else self.A * np.sqrt(self.Sd)
            if self.lower_square:
                # C C^T of a lower-triangular C by LAPACK lauum (a third of syrk's flops): with J the reversal, J C J
                # is upper triangular and C C^T = J (J C J)(J C J)^T J; lauum leaves the upper triangle of U U^T
                up = lapack.dlauum(np.asfortranarray(ASh[::-1, ::-1]), lower=0, overwrite_c=1)[0]
                low = np.ascontiguousarray(up[::-1, ::-1])
            else:
                low = dsyrk(1.0, ASh, trans=0, lower=1)
            self.St = _symmetrize(low)
            self.St_diag = np.diag(self.St).copy()
            self.logdetP = float(np.sum(np.log(self.P_diag)))

    @functools.cached_property
    def ATf(self):
        """``A^T`` in Fortran order for ``trmm`` (the transpose of a C-ordered dense ``A`` as it is, no copy); formed
        when a direct dense-row state first needs it (a Woodbury state does not)."""
        return np.asfortranarray(self.A.T if isinstance(self.A, np.ndarray) else self.AT)

    def start(self, gamma0, at_prior_mean=True):
        """``V0^-1 = P + gamma0 A^T A``; the mean at the Gaussian part's mean ``mu`` or at 0."""
        m = self.mu.copy() if at_prior_mean else np.zeros(self.D)
        gt = float(gamma0) * self.view.eye()
        if self.pairs is not None:   # uniform pseudo-precisions: gamma0 A^T A from the Gram the view's split formed
            return self._direct_state(m, gt, gram=float(gamma0) * self.pairs.unit_gram())
        return self._state(m, gt)

    def state_of(self, m, gt):
        """The state of mean ``m`` and pseudo-precisions ``gt`` (``V^-1 = P + A^T G A``); ``LinAlgError`` when that
        precision is not positive definite."""
        return self._state(m, gt)

    def prior_var(self):
        """The prior's predictor covariances ``A Sigma A^T`` on the pattern, ``Sigma = P^-1`` diagonal, without a
        factorization; None for a prior that is not diagonal (then only a factored state has them)."""
        if self.P_diag is None or not np.all(self.P_diag > 0):
            return None
        v, Sd = self.view, 1.0 / self.P_diag
        if getattr(self, "St_diag", None) is not None:                 # Woodbury: diag(A Sigma A^T) formed once
            return self.St_diag.copy()
        if v.diagonal and sp.isspmatrix_csr(self.A):                   # sparse rows (a1a): sum_j a_nj^2 Sigma_jj
            A = self.A                     # (the squares on A's own pattern: no sparse product's structure pass)
            return sp.csr_matrix((np.square(A.data), A.indices, A.indptr), shape=A.shape) @ Sd
        return v.pattern_cov(np.sqrt(Sd)[:, None] * self.AT)

    def prior(self, vt):
        """The prior ``q = N(mu, Sigma)`` (pseudo-precisions 0, diagonal ``P``; ``vt`` from :meth:`prior_var`):
        ``(state, mt, gauss_part)``, the state holding only ``m`` and ``gt`` (what the natural step from it reads,
        :meth:`step` at ``r = 0``), and the Gaussian part ``E_q[-log N(w | mu, Sigma)] - H[q]`` (up to ``k``, ``c``) at
        ``q`` = the prior: ``tr(P Sigma) = D``, ``log det Sigma = -log det P`` (docs/klprox.md, section 4)."""
        v = self.view
        m = self.mu.copy()
        parts = (0.5 * m @ (self.P_diag * m), v.c @ m, v.k, 0.5 * self.D,
                 -0.5 * (-float(np.sum(np.log(self.P_diag))) + self.D * (1.0 + _LOG2PI)))
        self.magnitude = _sum(abs(p) for p in parts)
        return SimpleNamespace(m=m, gt=np.zeros(v.npat)), self.A @ m + v.b, _sum(parts)

    def _state(self, m, gt):
        if self.woodbury:
            if self.skip:
                self.skip -= 1
            else:
                st = self._woodbury_state(m, gt)
                if st is not None:
                    self.declined = 0
                    return st
                self.declined += 1
                self.skip = min(2 ** self.declined - 1, WOODBURY_BACKOFF) if WOODBURY_BACKOFF else 0
        return self._direct_state(m, gt)

    def _woodbury_state(self, m, gt):
        r"""The state from ``B = I + G^1/2 St G^1/2`` (N x N, ``St = A Sigma A^T``, ``G = diag(gt)``): with
        ``V = Sigma - Sigma A^T G^1/2 B^-1 G^1/2 A Sigma`` (Woodbury),

            vt_n = (1 - (B^-1)_nn) / gt_n,   tr(P V) = D - N + tr B^-1,   log det V = -log det P - log det B

        (docs/klprox.md, section 3): a Cholesky factor of ``B`` and ``trtri``, no Gram ``A^T G A`` and no ``trmm``.
        ``1 - (B^-1)_nn`` loses digits where ``gt_n vt_n << 1``: the rounding error of ``(B^-1)_nn`` is about
        ``eps ||B|| (B^-1)_nn`` (Cholesky's backward error ``eps ||B||``; ``B^-1 <= I``), so the relative error of
        ``vt_n`` is about ``eps ||B|| (B^-1)_nn / (1 - (B^-1)_nn)`` (measured against 40 digits: at most 0.6 of that,
        plus ``2.5 eps`` of the last subtraction and division). Rows where ``eps (4 + ||B||_F) (B^-1)_nn /
        (1 - (B^-1)_nn)`` exceeds ``WOODBURY_ROW_TOL`` take ``vt_n = St_nn - ||L_B^-1 G^1/2 St e_n||^2`` (relative error
        about ``2 eps sqrt(||B||) St_nn / vt_n``: cond(L_B) <= sqrt(||B||)); if that bound fails too, or
        ``eps ||B||_F`` exceeds ``WOODBURY_COND_TOL`` (the mean's Woodbury solves lose that much), or a
        pseudo-precision is negative: None, the direct state."""
        if not gt.min() >= 0.0:                                    # (also a NaN)
            return None
        sg = np.sqrt(gt)
        B = self._woodbury_B(sg)
        flat = B.T.ravel()                                         # (a view: B.T is C-contiguous)
        norm = math.sqrt(float(np.dot(flat, flat)))                # ||B||_F >= ||B||_2 (>= 1)
        if _EPS * norm > WOODBURY_COND_TOL:
            return None
        # factored in place (B is Fortran-ordered: no copy into LAPACK's layout); B itself is not kept (the paper's
        # mean step forms it again, _woodbury_B)
        LB, info = lapack.dpotrf(B, lower=1, clean=1, overwrite_a=1)
        if info != 0:
            _lapack_info("dpotrf", min(info, 0))                  # an illegal argument raises; not definite: None
            return None
        LBinv = _tri_inv(LB)
        binv = np.einsum("ij,ij->j", LBinv, LBinv)                 # diag(B^-1)
        one = 1.0 - binv
        with np.errstate(divide="ignore", invalid="ignore"):
            vt = one / gt
            bad = ~(_EPS * (4.0 + norm) * binv <= WOODBURY_ROW_TOL * one)    # also gt = 0 (0 / 0)
        if bad.any():
            rows = np.flatnonzero(bad)
            if rows.size > 2 * WOODBURY_PROBE:
                # the rows narrowest relative to their prior at the last state (the first: by this state's first form)
                hint = self.vt_ratio if self.vt_ratio is not None else vt / self.St_diag
                if not self._probe(LBinv, sg, norm, rows, hint):
                    return None
            # L_B^-1 G^1/2 St e_n of the flagged rows (a triangular product: L_B^-1's strict upper part is zero); St is
            # symmetric: its rows gathered (contiguous copies) and transposed, the Fortran-ordered operand trmm reads
            # in place (a gather of columns and f2py's copy into Fortran order before)
            U = dtrmm(1.0, LBinv, (self.St[rows] * sg).T, lower=1)
            d = self.St_diag[rows]
            v1 = d - np.einsum("ij,ij->j", U, U)
            if not (2.0 * _EPS * math.sqrt(norm) * d <= WOODBURY_ROW_TOL * v1).all():
                return None
            vt[rows] = v1
        self.vt_ratio = vt / self.St_diag
        return SimpleNamespace(m=m, gt=gt, L=None, Lam=None, Linv=None, V=None, vt=vt, LB=LB, LBinv=LBinv,
                               binv=binv, sg=sg)

    def _probe(self, LBinv, sg, norm, rows, hint):
        """Whether the WOODBURY_PROBE rows among ``rows`` most likely to fail the second form's rounding bound (the
        narrowest relative to their prior, ``hint``: ``vt / diag(St)`` at the last state computed) pass it: a state
        that fails is declined at ``WOODBURY_PROBE N^2`` flops instead of the triangular product of every flagged row
        (N^3 when all are: a Laplace GP, whose rows far from the kink have sites ~1e-12, fails at nearly every state;
        45 % of the solve at N = 2000). Only the order of the checks changes: a state passes exactly when it passed
        before, with the same numbers (the probe's rows are computed again with the others)."""
        probe = rows[np.argsort(hint[rows], kind="stable")[:WOODBURY_PROBE]]      # (NaN last)
        U = dtrmm(1.0, LBinv, (self.St[probe] * sg).T, lower=1)
        d = self.St_diag[probe]
        v1 = d - np.einsum("ij,ij->j", U, U)
        return bool((2.0 * _EPS * math.sqrt(norm) * d <= WOODBURY_ROW_TOL * v1).all())

    def _woodbury_B(self, sg):
        """``B = I + G^1/2 St G^1/2`` (``sg = G^1/2``) in Fortran order: formed as the transpose of
        ``(St_ij sg_i) sg_j``, which is ``(St_ij sg_j) sg_i`` entry for entry (``St`` is symmetric to the last bit),
        the numbers of the C-ordered product before."""
        Bt = self.St * sg[:, None]
        Bt *= sg
        Bt.flat[:: self.N + 1] += 1.0
        return Bt.T

    def _direct_state(self, m, gt, gram=None):
        Lam = self.P + (self._AtGA(gt) if gram is None else gram)
        L = _chol(Lam)
        Linv = _tri_inv(L)
        if self.pairs is not None:
            # sparse rows (a1a): the lower triangle of V = L^-T L^-1 (LAPACK lauum, D^3 / 3 flops against 2 D^3 of the
            # product), then a_n^T V a_n from the products of each row's nonzeros, which read that triangle only
            low = lapack.dlauum(Linv, lower=1)[0]      # Linv's strict upper part: zeros (_tri_inv)
            return _LowerState(m=m, gt=gt, L=L, Lam=Lam, Linv=Linv, V_low=low, vt=self.pairs.quad(low), LB=None)
        elif self.N:
            # dense rows (GP models: A = L_K): W = L^-1 A^T (a triangular product, N D^2 flops, half of A V) and vt
            # on the pattern from W^T W, a sum of squares: nothing cancels (the entries of A V A^T summed from A V
            # lost digits on housing at sf = e^4, where the step rule then stalled); V only when asked for. tr(P V)
            # from the same L^-1 (gauss_part), not as D - gt^T vt (V Lam = I): that identity is exact only for the
            # exact V, and with vt's errors (cond(L) eps) amplified by large pseudo-precisions it made the ELBO
            # noisy beyond its rounding level (housing at sf = e^6: (16) stalled at the iteration limit)
            V = None
            vt = self.view.pattern_cov(dtrmm(1.0, Linv, self.ATf, lower=1))
            if self.woodbury:
                self.vt_ratio = vt / self.St_diag
        else:
            V, vt = Linv.T @ Linv, np.zeros(0)
        return SimpleNamespace(m=m, gt=gt, L=L, Lam=Lam, Linv=Linv, V=V, vt=vt, LB=None)

    def _factor(self, st):
        """The Cholesky factor of ``V^-1 = P + A^T G A`` (formed for a Woodbury state when first asked for: the
        returned covariance and predictions come from it, without the Woodbury form's cancellation)."""
        if st.L is None:
            st.L = _chol(self.P + self._AtGA(st.gt))
        return st.L

    def _vmul(self, st, x):
        """``V x``; for a Woodbury state ``Sigma x - Sigma A^T G^1/2 B^-1 G^1/2 A Sigma x``."""
        if getattr(st, "LB", None) is None:
            return _cho_solve(st.L, x)
        return self._woodbury_solve(st.LB, st.sg, x)

    def _woodbury_solve(self, LB, sg, x, prior=None):
        """``(P + A^T S A)^-1 x`` with ``S = diag(sg^2)`` and ``LB`` the Cholesky factor of ``I + S^1/2 St S^1/2``;
        ``prior``: ``(Sigma x, A Sigma x)`` when known (:meth:`_sigma_g`)."""
        Sx, ASx = self._sigma_x(x) if prior is None else prior
        h = _cho_solve(LB, sg * ASx)
        y = self.A_T @ (sg * h)
        return Sx - (y if self.unit_prior else self.Sd * y)

    def _sigma_x(self, x):
        """``(Sigma x, A Sigma x)`` (Woodbury states: the prior's side of every solve)."""
        Sx = x if self.unit_prior else self.Sd * x
        return Sx, self.A @ Sx

    def _sigma_g(self, st, g):
        """:meth:`_sigma_x` of the gradient ``g`` at ``st``, kept on the state: the residuals and the next natural
        step both start from it (one product with ``A`` a step instead of two)."""
        memo = getattr(st, "sigma_g", None)
        if memo is not None and memo[0] is g:
            return memo[1]
        out = self._sigma_x(g)
        st.sigma_g = (g, out)
        return out

    def warm(self, m, gt, alpha, mt=None):
        """Starts from a previous solution: its mean ``m`` as it is, and (given its predictor means ``mt``) its
        Gaussian sites, which carry over to a changed prior such as a new GP kernel (docs/klprox.md, section 3)."""
        out = [self._state(m.copy(), gt.copy())]
        if mt is not None:
            # the same precision P + A^T G A (a state's factors depend on gt only) with the sites' mean: a copy of the
            # first state, not a second factorization of the same matrix (a grid point warm-started from three
            # neighbours factored six times)
            st = copy.copy(out[0])
            st.m = self._vmul(st, -self.view.c + self.AT @ _site_shift(self.view, gt, alpha, mt))
            out.append(st)
        return out

    def predictors(self, st):
        vt = getattr(st, "vt", None)          # states of the stochastic variant carry W = L^-1 A^T instead
        return self.A @ st.m + self.view.b, self.view.pattern_cov(st.W) if vt is None else vt

    def gauss_part(self, st):
        # computed directly (not as KL + C0): no cancellation between large prior-mean terms
        m, v = st.m, self.view
        if getattr(st, "LB", None) is not None:
            # Woodbury state: tr(P V) = D - tr(G^1/2 B^-1 G^1/2 St) = D - N + tr B^-1; log det V = -log det P B
            trPV = self.D - self.N + float(st.binv.sum())
            logdetV = -self.logdetP - 2.0 * float(np.log(st.LB.diagonal()).sum())
            a, b, c = float(0.5 * m @ (m if self.unit_prior else self.P_diag * m)), float(v.c @ m), float(v.k)
            d, e = 0.5 * trPV, -0.5 * (logdetV + self.D * (1.0 + _LOG2PI))
            # _sum's additions from the left, written out (no generators on the path of every evaluation)
            self.magnitude = 0 + abs(a) + abs(b) + abs(c) + abs(d) + abs(e)
            return 0 + a + b + c + d + e
        Linv = st.Linv if getattr(st, "Linv", None) is not None else _tri_inv(st.L)
        if self.P_diag is not None:   # tr(P V) = sum_j P_jj ||L^-1 e_j||^2: no D^3 product for a diagonal prior
            trPV = float(np.einsum("ij,ij->j", Linv, Linv) @ self.P_diag)
        else:
            trPV = float(np.sum(Linv * (Linv @ self.P)))
        logdetV = -2.0 * float(np.sum(np.log(np.diag(st.L))))
        parts = (0.5 * m @ self.P @ m, v.c @ m, v.k, 0.5 * trPV, -0.5 * (logdetV + self.D * (1.0 + _LOG2PI)))
        self.magnitude = _sum(abs(p) for p in parts)
        return _sum(parts)

    def gradient(self, st, alpha):
        # kept on the state for the same (m, alpha): residuals() and the next step() both need it
        memo = getattr(st, "grad", None)
        if memo is not None and memo[0] is st.m and memo[1] is alpha:
            return memo[2]
        Pm = self.P_diag * st.m if getattr(self, "P_diag", None) is not None else self.P @ st.m
        g = -(Pm + self.view.c + self.A_T @ alpha)
        st.grad = (st.m, alpha, g)
        return g

    def newton_direction(self, st, alpha, mean_gamma):
        """``(P + A^T Gm A)^-1 g``: the Newton direction of a decoupled view's mean part (``Gm`` its exact Hessian on
        the pattern, :meth:`LikelihoodView.mean_curvature`); independent of the step size, so formed once per
        iterate and shared by its trials (:meth:`step`'s ``mean_dir``)."""
        g = self.gradient(st, alpha)
        return sla.cho_solve((_chol(self.P + self._AtGA(mean_gamma)), True), g, check_finite=False)

    def step(self, st, alpha, gamma, r, natural=False, mean_dir=None):
        g = self.gradient(st, alpha)
        gt = r * st.gt + (1.0 - r) * gamma
        if mean_dir is not None:  # Newton mean step of a decoupled view: m+ = m + (1 - r) (P + A^T Gm A)^-1 g
            new = self._state(st.m, gt)
            new.m = st.m + (1.0 - r) * mean_dir
            return new
        if natural:  # natural-parameter form: m+ = m + (1 - r) V+ g
            new = self._state(st.m, gt)
            if getattr(new, "LB", None) is not None:   # Woodbury: Sigma g and A Sigma g as the residuals at st formed them
                Vg = self._woodbury_solve(new.LB, new.sg, g, self._sigma_g(st, g))
            else:
                Vg = self._vmul(new, g)
            new.m = st.m + (1.0 - r) * Vg
            return new
        # M = P + r A^T diag(gt) A = (1 - r) P + r V^-1: the state's precision, no second O(N D^2) product
        Lam = getattr(st, "Lam", None)
        if getattr(st, "LB", None) is not None and r > 0:
            # Woodbury: M^-1 through B_r = I + r G^1/2 St G^1/2 = r B + (1 - r) I
            Br = r * self._woodbury_B(st.sg)
            Br.flat[:: self.N + 1] += 1.0 - r
            dm = self._woodbury_solve(_chol(Br), np.sqrt(r) * st.sg, g)
            return self._state(st.m + (1.0 - r) * dm, gt)
        if r <= 0:
            M = self.P
        elif Lam is not None:
            M = (1.0 - r) * self.P + r * Lam
        else:
            M = self.P + r * self._AtGA(st.gt)
        dm = _cho_solve(_chol(M), g)
        return self._state(st.m + (1.0 - r) * dm, gt)

    def residuals(self, st, alpha, gamma, vt):
        if getattr(st, "LB", None) is not None:
            # g^T V g = g^T Sigma g - ||L_B^-1 G^1/2 A Sigma g||^2 (relative error ~ eps ||B|| <= WOODBURY_COND_TOL)
            g = self.gradient(st, alpha)
            # a state whose exp rows overflow (a wide prior's start, E[exp u] ~ 1e76) has an infinite gradient: its
            # residual is inf or nan (such states are rejected by the ELBO test), not a warning to the user
            with np.errstate(over="ignore", invalid="ignore"):
                Sg, ASg = self._sigma_g(st, g)
                u = st.LBinv @ (st.sg * ASg)
                rm = float(g @ Sg - u @ u)
            return (float(np.sqrt(rm if rm > 0 else (0.0 if rm <= 0 else math.inf))),
                    self.view.curvature_residual(gamma, st.gt, vt))
        g = _tri(st.L, self.gradient(st, alpha))
        if st.gt is None:  # precision held directly (stochastic variant): ||L^-1 (P + A^T Gamma A) L^-T - I||_F
            R = _tri(st.L, _tri(st.L, self.P + self._AtGA(gamma)).T)
            return float(np.sqrt(g @ g)), float(np.linalg.norm(R - np.eye(self.D)))
        return float(np.sqrt(g @ g)), self.view.curvature_residual(gamma, st.gt, vt)

    def mean(self, st):
        return st.m

    def covariance(self, st):
        if getattr(st, "V", None) is not None:
            return _symmetrize(np.tril(st.V))
        Linv = st.Linv if getattr(st, "Linv", None) is not None else _tri_inv(self._factor(st))
        # V = L^-T L^-1 by LAPACK lauum (its lower triangle, D^3 / 3 flops against 2 D^3 of the product); Linv's
        # strict upper part is zero (_tri_inv of a factor from _chol)
        return _symmetrize(lapack.dlauum(Linv, lower=1)[0])

    def predict(self, st, A_new, b_new=0.0):
        """Mean and variance of ``A_new w + b_new`` under ``q``."""
        A_new, b_new = _new_rows(A_new, b_new, self.D)
        Wn = _tri(self._factor(st), A_new.T.toarray() if sp.issparse(A_new) else A_new.T)
        return np.asarray(A_new @ st.m).ravel() + b_new, np.einsum("ij,ij->j", Wn, Wn)


def _new_rows(A_new, b_new, D, dense=False):
    """``info['predict']``'s arguments checked: ``A_new`` one row (length ``D``) or ``n x D`` (dense or sparse), ``b_new``
    a scalar or ``n`` offsets, all finite. A wrong width otherwise reaches LAPACK (an "illegal value" error and a line
    on stderr) or broadcasts silently; a NaN row would come back as NaN."""
    A_new = sp.csr_matrix(A_new) if sp.issparse(A_new) else np.atleast_2d(np.asarray(A_new, dtype=float))
    if A_new.ndim != 2 or A_new.shape[1] != D:
        raise InputDataError(f"klprox predict: A_new must have {D} columns (one per variable, in the order of "
                             f"result.names), got {A_new.shape[1] if A_new.ndim == 2 else A_new.ndim} "
                             f"(shape {A_new.shape})")
    b = np.asarray(b_new, dtype=float)
    if b.ndim > 1 or (b.ndim == 1 and b.shape[0] != A_new.shape[0]):
        raise InputDataError(f"klprox predict: b_new must be a number or one offset per row of A_new "
                             f"({A_new.shape[0]} rows), got shape {b.shape}")
    for name, vals in (("A_new", A_new.data if sp.issparse(A_new) else A_new), ("b_new", b)):
        bad = ~np.isfinite(vals)
        if np.any(bad):
            at = np.argwhere(bad)[0]
            if name == "A_new" and sp.issparse(A_new):
                coo = A_new.tocoo()
                at = (int(coo.row[at[0]]), int(coo.col[at[0]]))
            else:
                at = tuple(int(i) for i in at)
            what = "NaN" if np.isnan(vals[bad].flat[0]) else "inf"
            raise InputDataError(f"klprox predict: {name} contains {what} (first at index {at})")
    if dense and sp.issparse(A_new):
        A_new = A_new.toarray()
    return A_new, b


def _site_shift(view, gt, alpha, mt):
    r"""``nu = G (mt - b) - alpha``: the linear coefficients of the Gaussian sites ``exp(-1/2 u^T G u + nu^T u)``,
    ``u = A w``, that reproduce a stationary ``q`` from the prior (``V^-1 = P + A^T G A`` (18) and, with
    ``P m + c + A^T alpha = 0``, ``V^-1 m = -c + A^T nu``). Per row, like EP's site parameters, they do not
    depend on the prior, so they carry a solution over to a changed prior (a GP kernel)."""
    shift = mt - view.b
    Gs = gt * shift if view.diagonal else view.curvature_matrix(gt) @ shift
    return Gs - alpha


def _half(view, g):
    """``G^1/2`` of pseudo-precisions on the pattern: a vector (1-D rows) or a sparse block-diagonal matrix."""
    if view.diagonal:
        return np.sqrt(g)
    return view.curvature_matrix(view.pattern_sqrt(g))


def _hmul(h, X):
    """``G^1/2 X`` for the two forms of :func:`_half`."""
    if isinstance(h, np.ndarray):
        return h[:, None] * X if X.ndim == 2 else h * X
    return np.asarray(h @ X)


class DualGaussian(_Base):
    """``q`` held by ``(z, gt)`` in the N-dimensional predictor space (update (19)); softmax groups carry J x J
    pseudo-precision blocks, whose symmetric square roots replace ``G^1/2`` (docs/klprox.md, section 3)."""

    name = "dual"
    magnitude = 0.0

    def __init__(self, view):
        super().__init__(view)
        self.Y = _prior_tri(view, self.AT)                       # Lp^-1 A^T, so St = Y^T Y
        self.St = self.Y.T @ self.Y
        self.mut = self.A @ self.mu + view.b
        self.n1 = view.N - sum(rs.stop - rs.start for _, rs, _ in view.groups)   # 1-D rows (pattern = diagonal)

    def start(self, gamma0, at_prior_mean=True):
        """``V0^-1 = P + gamma0 A^T A``; the mean at ``mu`` (``z = 0``), or the point of ``mu + Sigma A^T z``
        nearest 0 in the prior metric (``St z = -A mu``: predictors at ``b``)."""
        z = np.zeros(self.N)
        if not at_prior_mean and self.N:
            z = np.linalg.lstsq(self.St, -(self.A @ self.mu), rcond=None)[0]
        return self._state(z, float(gamma0) * self.view.eye())

    def _state(self, z, gt):
        v = self.view
        sg = _half(v, gt)
        S1 = _hmul(sg, self.St)                              # G^1/2 St
        B = np.eye(self.N) + _hmul(sg, S1.T)
        L = _chol(B)
        U = _tri(L, S1)                                      # L^-1 G^1/2 St
        Linv = _tri(L, np.eye(self.N))
        binv = np.einsum("ij,ij->j", Linv, Linv)             # diag(B^-1)
        # vt = diag(St) - diag(U^T U) cancels when the posterior is much narrower than the prior; then
        # the identity St - St G^1/2 B^-1 G^1/2 St = G^-1/2 (I - B^-1) G^-1/2 is used (entries of B^-1 <= 1);
        # for 1-D rows only (the softmax blocks use the first form)
        if v.diagonal:
            vt1 = np.diag(self.St) - np.einsum("ij,ij->j", U, U)
        else:
            vt1 = self.St[v.pat_i, v.pat_j] - np.einsum("ij,ij->j", U[:, v.pat_i], U[:, v.pat_j])
        n1 = self.n1
        d1 = np.diag(self.St)[:n1]
        with np.errstate(divide="ignore", invalid="ignore"):
            vt2 = (1.0 - binv[:n1]) / gt[:n1]
        vt = vt1.copy()
        vt[:n1] = np.where(vt1[:n1] > 0.5 * d1, vt1[:n1], vt2)
        return SimpleNamespace(z=z, gt=gt, sg=sg, L=L, U=U, binv=binv, vt=vt)

    def _gmul(self, gt, v):
        return gt * v if self.view.diagonal else self.view.curvature_matrix(gt) @ v

    def warm(self, m, gt, alpha, mt=None):
        out = [self._state(-alpha, gt.copy())]              # the fixed point has z = -alpha
        if mt is not None:  # the previous Gaussian sites: (I + G St) z = nu - G A mu  (docs/klprox.md, section 3)
            st = copy.copy(out[0])                          # the same factors (FullGaussian.warm)
            y = _site_shift(self.view, gt, alpha, mt) - self._gmul(gt, self.A @ self.mu)
            st.z = y - _hmul(st.sg, _cho_solve(st.L, _hmul(st.sg, self.St @ y)))
            out.append(st)
        return out

    def predictors(self, st):
        return self.mut + self.St @ st.z, st.vt

    def gauss_part(self, st):
        tr = self.N - float(np.sum(st.binv))                 # tr(G^1/2 B^-1 G^1/2 St) = N - tr(B^-1)
        logdetB = 2.0 * float(np.sum(np.log(np.diag(st.L))))
        # z^T St z as |Y z|^2 (St = Y^T Y): a sum of squares. As z @ St @ z it came out negative (-5.8e12) for a z of
        # size 1e6 in St's null space (more rows than variables, N > D, forced 'dual': St has rank D; its rounding
        # errors are indefinite there), and the step rule accepted that state for its "lower" -ELBO (section 6c)
        Yz = self.Y @ st.z
        parts = (0.5 * float(Yz @ Yz), -0.5 * tr, 0.5 * logdetB, self.C0)
        self.magnitude = _sum(abs(p) for p in parts)
        return _sum(parts)

    def step(self, st, alpha, gamma, r, natural=False):
        if natural:  # m+ = m + (1 - r) V+ g, g = -A^T (z + alpha): z+ = z - (1 - r) (I + G+ St)^-1 (z + alpha)
            new = self._state(st.z, r * st.gt + (1.0 - r) * gamma)
            y = st.z + alpha
            x = y - _hmul(new.sg, _cho_solve(new.L, _hmul(new.sg, self.St @ y)))
            new.z = st.z - (1.0 - r) * x
            return new
        # z+ = (I + rG St)^-1 [r (I + G St) z - (1 - r) alpha] = z - (1 - r) (I + rG St)^-1 (z + alpha): the
        # increment from the stationarity residual z + alpha, not as a difference of two vectors of size |G St z|
        # (with a wide prior, G St ~ 1e3 on Colon, that difference made small steps pure rounding)
        y = st.z + alpha
        sr = _half(self.view, r * st.gt)
        Br = np.eye(self.N) + _hmul(sr, _hmul(sr, self.St).T)
        x = y - _hmul(sr, _cho_solve(_chol(Br), _hmul(sr, self.St @ y)))
        return self._state(st.z - (1.0 - r) * x, r * st.gt + (1.0 - r) * gamma)

    def residuals(self, st, alpha, gamma, vt):
        d = st.z + alpha                                     # g = -A^T (z + alpha)
        Ud = st.U @ d
        gVg = max(float(d @ self.St @ d - Ud @ Ud), 0.0)
        return float(np.sqrt(gVg)), self.view.curvature_residual(gamma, st.gt, vt)

    def _SA(self):
        return _prior_tri(self.view, self.Y, trans=True)

    def mean(self, st):
        return self.mu + self._SA() @ st.z

    def covariance(self, st):
        s = self.view.prior_sqrt()
        Sigma = _cho_solve(self.view.P_chol, np.eye(self.D)) if s is None else np.diag((1.0 / s) * (1.0 / s))
        F = _tri(st.L, _hmul(st.sg, self._SA().T))          # L^-1 G^1/2 A Sigma
        # exactly symmetric (the difference of two products is symmetric only to rounding): users factor it and
        # sample from it with routines that test symmetry
        return _symmetrize(np.tril(Sigma - F.T @ F))

    def predict(self, st, A_new, b_new=0.0):
        A_new, b_new = _new_rows(A_new, b_new, self.D, dense=True)
        Yn = _prior_tri(self.view, A_new.T)                  # Lp^-1 a^T
        F = _tri(st.L, _hmul(st.sg, self.Y.T @ Yn))          # L^-1 G^1/2 A Sigma a^T
        var = np.einsum("ij,ij->j", Yn, Yn) - np.einsum("ij,ij->j", F, F)
        return A_new @ self.mean(st) + b_new, var
