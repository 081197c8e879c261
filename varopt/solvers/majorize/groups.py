"""Padded, row-space form of Algorithm 1 for many small partition functions (the solver's hot path).

Every group ``g`` (``c_g <= c`` configurations, features ``F_g`` (c x d), log base measure
``log h_g``) is padded to ``c`` rows (zero features, ``log h = -inf``). Algorithm 1's curvature
of group ``g`` lives in the span of its rows: with the configurations enumerated in decreasing
score order and the prefix softmax weights ``P_ij = alpha_j / z_{i-1}`` (``j < i``),

    l_i = f_i - mu_{i-1} = F_g^T (e_i - P_i),    Sigma_g = sum_i omega_i l_i l_i^T = F_g^T T_g^T T_g F_g,

    T_g[i - 1, :] = sqrt(c_g omega_i) (e_i - P_i)^T       (i = 2..c; the first term has omega = 0),

so the ``(c - 1) x c`` factor ``T_g`` depends on the ``c`` scores only, never on ``d``. The solver
needs three things from it, each a few BLAS calls for all groups at once:

* dense ``sum_g c_g Sigma_g = R^T R`` with ``R = [T_g F_g]_g`` (generic features);
* the same sum by blocks ``X^T diag(M_ab) X`` when every group's rows are copies of one feature
  vector ``x_g`` placed in per-row column blocks (multinomial logistic regression, any
  "class-template" features; ``M_g = T_g^T T_g``) -- ``c - 1`` times fewer flops;
* ``R D^{-1} R^T = T (F D^{-1} F^T) T^T`` from a Gram matrix computed once per solve (Woodbury,
  few groups and many parameters).

Everything is computed from the scores ``s = theta^T f + log h`` in log space
(``log(alpha_i / z_{i-1}) = s_i - logaddexp(s_1..s_{i-1})``, ``P_ij = exp(s_j - log z_{i-1}) <= 1``),
so huge and tiny ``alpha`` never overflow. The order changes ``Sigma`` only, never ``z`` or
``mu``, and every order gives a valid bound (Theorem 1); decreasing score order, as in
:func:`~varopt.solvers.majorize.bound.compute_bound`, gave the tighter bound (wine: relative gap
5e-6 after 3 iterations against 5e-5 in the given order). Tested against the literal
transcription of Algorithm 1 run on the sorted configurations.
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ...errors import InputDataError
from .bound import min_norm_solve, omega
from .capacitance import gram_generic, gram_template
from .templates import detect_template, sigma_template

EPS = np.finfo(float).eps


@functools.lru_cache(maxsize=64)
def _lower_mask(c):
    """The ``(c - 1) x c`` mask of ``j < i`` (rows ``i = 1 .. c - 1``), read-only: shared by every group set of
    ``c`` configurations."""
    M = np.tril(np.ones((c, c)), -1)[1:]
    M.flags.writeable = False
    return M


_FIRST = np.ones(1, dtype=bool)  # the first row starts a group (a constant: a Python list is converted per call)


class PaddedGroups:
    """The positive log-sum-exp groups of a program, padded to equal size ``c``.

    ``A`` (K x d, CSR), ``b`` (K,), ``seg`` sorted group ids, ``coef`` (G,) positive weights.
    """

    #: largest ``G * c * d`` kept as a dense padded feature tensor (the generic ``R`` path)
    DENSE_LIMIT = 3e7

    def __init__(self, A, b, seg, coef):
        if not (sp.issparse(A) and A.format == "csr" and A.dtype == np.float64):
            A = sp.csr_matrix(A, dtype=float)
        seg = np.asarray(seg, dtype=np.int64)
        K, d = A.shape
        if K == 0:
            raise InputDataError("empty Omega: a partition function with no configurations")
        starts = np.flatnonzero(np.concatenate((_FIRST, seg[1:] != seg[:-1])))
        G = starts.size
        # the largest group (starts[1:] - starts[:-1] and the last group's size: no np.diff / np.append wrappers)
        c = max(int((starts[1:] - starts[:-1]).max(initial=0)), K - int(starts[-1]))
        self.G, self.c, self.d = G, c, d
        self._unpadded = G * c == K   # every group has c rows: the padded rows are the original rows, in order
        self.coef = np.asarray(coef, dtype=float).ravel()
        if G * c == K:  # equal sizes: the padded rows are the rows, in order
            logh = np.array(b, dtype=float)
        else:
            flat = seg * c + (np.arange(K) - starts[seg])  # padded row of every original row
            logh = np.full(G * c, -np.inf)
            logh[flat] = np.asarray(b, dtype=float)
        self.logh = logh.reshape(G, c)
        if G * c == K:  # equal sizes: no padding
            self.Apad = A
        else:
            P = sp.csr_matrix((np.ones(K), (flat, np.arange(K))), shape=(G * c, K))
            self.Apad = (P @ A).tocsr()  # (G c) x d, padded rows are empty
        self._AT = None
        self._dense = None
        # small, not very sparse features: dense BLAS matvecs beat sparse ones
        self._dense2 = (self.dense.reshape(G * c, d)
                        if G * c * d <= 2e6 and self.Apad.nnz >= 0.1 * G * c * d else None)
        # padded rows without features (the 0 row of every logistic loss log(1 + e^z)): the dense products skip them
        self._dense2_rows = None
        if self._dense2 is not None and G * c * d >= 1e5:  # (on small features the scatter costs more)
            keep = np.flatnonzero(np.diff(self.Apad.indptr) > 0)
            if keep.size <= 0.9 * G * c:
                self._dense2_rows, self._dense2 = keep, np.ascontiguousarray(self._dense2[keep])
        self._template = False  # not detected yet
        self._diff = None
        self._live = None
        self._gram_key = None
        self._gram = None
        # the sorted-order machinery of factors() (two configurations, every binary logistic loss, have a closed form)
        self._lower = self._gather_index = self._flat_base = None
        if c != 2:
            self._lower = _lower_mask(c)  # (c-1, c): j < i
            self._gather_index = (np.arange(G)[:, None, None], np.arange(max(c - 1, 0))[None, :, None])
            # flat position of T[g, i, 0] in a (G, c-1, c) array (factors' scatter to the original row order)
            self._flat_base = ((np.arange(G)[:, None] * max(c - 1, 0) + np.arange(max(c - 1, 0))[None, :])
                               * c)[:, :, None]

    @property
    def AT(self):
        """``Apad^T`` as a CSC view: its products are as fast as a converted CSR copy's, and the
        conversion (milliseconds on large feature sets) is saved."""
        if self._AT is None:
            self._AT = self.Apad.T
        return self._AT

    @property
    def template(self):
        """Class-template structure (see :meth:`_detect_template`), detected on first use."""
        if self._template is False:
            self._template = self._detect_template()
        return self._template

    # --- structure -------------------------------------------------------------------------------------------
    def _detect_template(self):
        """Class-template structure of the padded features (:func:`.templates.detect_template`)."""
        found = detect_template(self.Apad, self.c, self.d, self.G)
        if found is None:
            return None
        rows, cols, X = found
        allc = np.concatenate(cols)
        self._template_identity = bool(allc.size == self.d and np.array_equal(allc, np.arange(self.d)))
        self._cmat = np.asarray(cols, dtype=np.int64)
        self._rows = np.asarray(rows, dtype=np.int64)
        return found

    @property
    def dense(self) -> np.ndarray:
        """``(G, c, d)`` dense padded features (built on first use)."""
        if self._dense is None:
            self._dense = self.Apad.toarray().reshape(self.G, self.c, self.d)
        return self._dense

    def dense_rows(self):
        """The features as a dense ``K x d`` array in the original row order, when a dense copy is already held
        and no group was padded (else None): the attainment check reads its columns from it (:mod:`.recession`)."""
        return self._dense2 if self._unpadded and self._dense2_rows is None else None

    @classmethod
    def dense_fits(cls, G, c, d) -> bool:
        return G * c * d <= cls.DENSE_LIMIT

    # --- values ------------------------------------------------------------------------------------------------
    def scores(self, theta) -> np.ndarray:
        """``(G, c)`` scores ``theta^T f + log h`` (``-inf`` on padding)."""
        return self.fmul(theta) + self.logh

    def fmul(self, z) -> np.ndarray:
        """``(G, c)`` products ``F_g z`` of the padded features (0 on padding)."""
        F2 = self._dense2
        if F2 is None and self._template_fast():
            # class templates: one dense GEMM X Z^T instead of a sparse product with K copies of X
            S = np.zeros((self.G, self.c))
            S[:, self._rows] = self._template[2] @ z[self._cmat].T
            return S
        if F2 is not None and self._dense2_rows is not None:
            S = np.zeros(self.G * self.c)
            S[self._dense2_rows] = F2 @ z
            return S.reshape(self.G, self.c)
        return (F2 @ z if F2 is not None else self.Apad @ z).reshape(self.G, self.c)

    def ftmul(self, W) -> np.ndarray:
        """``sum_g F_g^T W_g`` (``W`` of shape ``(G, c)``: the transpose of :meth:`fmul`)."""
        F2 = self._dense2
        if F2 is None and self._template_fast():
            out = np.zeros(self.d)
            out[self._cmat] = (self._template[2].T @ W[:, self._rows]).T
            return out
        W = W.reshape(-1)
        if F2 is not None and self._dense2_rows is not None:
            return F2.T @ W[self._dense2_rows]
        return F2.T @ W if F2 is not None else self.AT @ W

    def _template_fast(self) -> bool:
        """Class-template products on large problems (the detection, linear in the nonzeros, runs once) with dense
        template features (sparse ones: the padded features' sparse products cost the same ``nnz`` flops)."""
        if self._template is False:
            if self.Apad.nnz < 1e5:
                return False
            self._template = self._detect_template()
        return self._template is not None and not sp.issparse(self._template[2])

    def value_weights(self, S):
        """``(sum_g c_g log Z_g, W)`` with ``W = c_g p_g(y)`` (softmax weights) from the scores."""
        # column loops: numpy reductions along a short last axis are slow (two columns, every binary logistic loss:
        # one call each for the maximum and the sum, the same arithmetic)
        two = self.c == 2
        if two:
            smax = np.maximum(S[:, 0], S[:, 1])
        else:
            smax = S[:, 0].copy()
            for j in range(1, self.c):
                np.maximum(smax, S[:, j], out=smax)
        top = smax.max()
        if not top < np.inf:
            raise InputDataError("scores theta^T f(y) + log h(y) are NaN or +inf (check the features and theta)")
        if smax.min() == -np.inf:
            g = int(np.flatnonzero(np.isneginf(smax))[0])
            raise InputDataError(f"partition function {g} is identically zero (every h(y) = 0)")
        W = np.exp(S - smax[:, None])
        if two:
            tot = W[:, 0] + W[:, 1]
        else:
            tot = W[:, 0].copy()
            for j in range(1, self.c):
                tot += W[:, j]
        W *= (self.coef / tot)[:, None]
        return float(self.coef @ (smax + np.log(tot))), W

    @property
    def live(self) -> np.ndarray:
        """``(G, c)`` mask of the configurations with ``h > 0`` (not padding)."""
        if self._live is None:
            self._live = np.isfinite(self.logh)
        return self._live

    def value_error(self, err) -> float:
        """Bound on the change of ``sum_g c_g log Z_g`` when the scores move by at most ``err``
        elementwise (log-sum-exp is 1-Lipschitz in the max norm); rows with ``h = 0`` do not count."""
        e = np.where(self.live, err, 0.0)
        m = e[:, 0].copy()
        for j in range(1, self.c):
            np.maximum(m, e[:, j], out=m)
        return float(self.coef @ m)

    # --- scores by linearity (theta -> scores is affine) ------------------------------------------------------------
    def image(self, S0, S1):
        """``(F step, rounding bound)`` from the caches ``(scores, weights, err)`` at both ends of a step
        (0 on rows with ``h = 0``, whose scores stay ``-inf``)."""
        with np.errstate(invalid="ignore"):
            img = S1[0] - S0[0]
        img[np.isnan(img)] = 0.0
        err = EPS * np.abs(img)
        for Sx in (S0, S1):
            if Sx[2] is not None:
                err += Sx[2]
        return img, err

    def combine(self, S, terms, limit):
        """Scores ``s + sum_j a_j img_j`` (``terms = [(a_j, (img_j, err_j))]``) with their rounding bound,
        or None when that bound could move ``sum_g c_g log Z_g`` by more than ``limit``."""
        live = self.live
        s = S[0].copy()
        err = EPS * np.abs(np.where(live, s, 0.0)) if S[2] is None else S[2].copy()
        for a, (img, ierr) in terms:
            s += a * img
            err += abs(a) * (ierr + EPS * np.abs(img))
        err += EPS * np.abs(np.where(live, s, 0.0))
        if self.value_error(err) > limit:
            return None
        return s, err

    def gradient(self, W):
        """``sum_g c_g E_g[f]`` from the weights of :meth:`value_weights`."""
        return self.ftmul(W)

    # --- Algorithm 1 in row space -------------------------------------------------------------------------------
    def factors(self, S, hessian=False) -> np.ndarray:
        """``T`` (G, c - 1, c) with ``c_g Sigma_g = F_g^T T_g^T T_g F_g`` (columns in the original row order).

        ``hessian=True``: the same rows ``e_i - P_i`` with the weights of the **Hessian** of ``c_g log Z_g`` instead of
        the bound's ``omega_i``. The covariance of ``f`` under ``p`` splits by the last configuration like the
        recursion of Algorithm 1 (``pi_i = alpha_i / z_i``): ``Cov_i = (1 - pi_i) Cov_{i-1} + pi_i (1 - pi_i) l_i l_i^T``,
        so ``Cov = sum_i pi_i (1 - pi_i) prod_{j > i} (1 - pi_j) l_i l_i^T`` and the telescoping product gives the
        weight ``alpha_i z_{i-1} / (z_i z_c)`` (docs/majorize.md section 2; ``T^T T = diag(W) - W W^T / c_g``)."""
        c = self.c
        if c == 2:
            # two configurations: P_21 = 1, so T_g = sqrt(c_g omega(s_1 - s_2)) (e_2 - e_1) up to sign
            # (r is never nan: value_weights rejects +inf scores and groups with both scores -inf)
            if hessian:
                d = np.abs(S[:, 0] - S[:, 1])
                e = np.exp(-d)
                a = np.sqrt(self.coef * e) / (1.0 + e)  # sqrt(c_g p_1 p_2)
            else:
                a = np.sqrt(self.coef * omega(S[:, 0] - S[:, 1]))
            T = np.empty((self.G, 1, 2))
            T[:, 0, 0] = a
            np.negative(a, out=T[:, 0, 1])
            return T
        # decreasing scores (as compute_bound): the dominant configurations come first and the small
        # ones get small omega; a tighter Sigma than the given order (fewer iterations, measured)
        order = np.argsort(-S, axis=1, kind="stable")
        gi, ii = self._gather_index
        Ss = S[gi[:, :, 0], order]
        ls = Ss - Ss[:, :1]  # log(alpha_i / alpha_max) <= 0, -inf on padding (the top score is finite)
        w = np.exp(ls)
        cum = w.copy()  # prefix sums >= 1 (column loop: faster than cumsum on a short axis)
        for k in range(1, c):
            cum[:, k] += cum[:, k - 1]
        # log(alpha_i / z_{i-1}); -inf on padding (omega = 0), never nan: top is finite, cum >= 1
        if hessian:
            # alpha_i z_{i-1} / (z_i z_c) relative to alpha_max: w_i cum_{i-1} / (cum_i cum_c) (0 on padding)
            a = np.sqrt(self.coef[:, None] * w[:, 1:] * cum[:, :-1] / (cum[:, 1:] * cum[:, -1:]))
        else:
            r = ls[:, 1:] - np.log(cum[:, :-1])
            a = np.sqrt(self.coef[:, None] * omega(r))
        # Ts = a (e_i - P_i): the prefix weights scaled by -a_i / z_{i-1} (two passes over (G, c-1, c)), then a_i
        # on the shifted diagonal
        Ts = w[:, None, :] * self._lower
        Ts *= (-a / cum[:, :-1])[:, :, None]
        Ts[:, ii[0, :, 0], ii[0, :, 0] + 1] += a
        # back to the original row order: T[g, i, order[g, j]] = Ts[g, i, j], by flat positions (faster than a 3-index
        # fancy assignment)
        T = np.empty_like(Ts)
        T.reshape(-1)[(self._flat_base + order[:, None, :]).reshape(-1)] = Ts.reshape(-1)
        return T

    def rows(self, T) -> np.ndarray:
        """Dense ``R`` ((G (c-1)) x d): ``sum_g c_g Sigma_g = R^T R``."""
        return np.matmul(T, self.dense).reshape(-1, self.d)

    def sigma(self, T) -> np.ndarray:
        """Dense ``sum_g c_g Sigma_g`` (d x d)."""
        if (self._dense2 is None or self.c >= 8) and self.template is not None:
            # class-template blocks: (c - 1) times fewer flops; worth its overhead on large problems
            return self._sigma_template(T)
        if self.c == 2 and self._dense2 is not None:
            # two configurations: T_g = a_g (1, -1) (see factors), so R_g = a_g (f_g1 - f_g2)
            if self._diff is None:
                self._diff = self.dense[:, 0, :] - self.dense[:, 1, :]
            t = T[:, 0, 0]
            return self._diff.T @ (self._diff * (t * t)[:, None])
        R = self.rows(T)
        return R.T @ R

    def _sigma_template(self, T):
        return sigma_template(self, T)

    #: largest G d' (d'+1) / 2 kept as the packed products x_gi x_gj of the class-template Sigma
    PACKED_LIMIT = 2e7

    # --- Woodbury pieces -----------------------------------------------------------------------------------------
    def gram(self, cols, dinv, fixed=None) -> np.ndarray:
        """``F_a diag(dinv) F_a^T`` ((G c) x (G c)) over the columns ``cols`` (cached per solve). ``_gram_b`` gets the
        columns outside ``cols`` (the unpenalized ones), except those of the bool mask ``fixed`` (variables held at a
        bound, eliminated: :mod:`.step_bounds`).

        Class templates: one SYRK per distinct class weight vector (:func:`.gram.gram_template`); otherwise per pair
        of padded row positions ``(y, y')`` on the columns both use (:func:`.gram.gram_generic`)."""
        key = (cols.tobytes(), dinv.tobytes(), None if fixed is None else np.packbits(fixed).tobytes())
        if self._gram_key != key:
            G, c, d = self.G, self.c, self.d
            w = np.zeros(d)
            w[cols] = dinv
            Gm = gram_template(self, w) if self.template is not None else gram_generic(self, w)
            self._gram = Gm.reshape(G * c, G * c)
            self._abs_gram = np.abs(self._gram)
            b = np.flatnonzero(w == 0) if fixed is None else np.flatnonzero((w == 0) & ~fixed)
            self._gram_b = (b, self.Apad[:, b].toarray().reshape(G, c, b.size))
            self._gram_key = key
        return self._gram

    def congruence(self, T, Gm) -> np.ndarray:
        """``T Gm T^T`` for the block-diagonal ``T`` ((G (c-1)) x (G (c-1)))."""
        G, c = self.G, self.c
        # batched matmuls: several times faster than the equivalent einsums
        Y = np.matmul(T, Gm.reshape(G, c, G * c))  # (G, c-1, G c)
        Y = Y.reshape(G * (c - 1), G, c).transpose(1, 0, 2)  # (G, G (c-1), c)
        Z = np.matmul(Y, T.transpose(0, 2, 1))  # (G, G (c-1), c-1)
        return Z.transpose(1, 0, 2).reshape(G * (c - 1), G * (c - 1))

    def woodbury_solve(self, T, Dg, u):
        """``(x, x^T Sigma x, F x, err, ||Sigma x - u||)`` with ``Sigma x = u``, ``Sigma = diag(Dg) + R^T R``, ``R = blockdiag(T_g) F``.

        Matrix-free, in the row space of ``R`` (``K = G (c-1)`` rows, ``K << d``): with ``a = {Dg > 0}``,
        ``P = Da^-1`` and ``C = I + Ra P Ra^T = I + T (F_a P F_a^T) T^T`` (cached Gram matrix),
        eliminating ``x_a`` by Woodbury and the few ``Dg = 0`` coordinates ``b`` (unpenalized
        intercepts) by their Schur complement ``Sb = Rb^T C^-1 Rb`` (push-through identity) gives

            r0 = Ra P u_a,  x_b = Sb^+ (u_b - Rb^T C^-1 r0),  w = C^-1 (r0 + Rb x_b),
            x_a = P (u_a - Ra^T w),   and   R x = w,

        so ``x^T Sigma x = sum_a Dg x_a^2 + ||w||^2``, and the padded image ``F x = F z - Gm T^T w + F_b x_b``
        (``z = P u_a``) comes without another feature product. Two feature products (``F z`` and ``F^T v``),
        never the dense ``K x d`` matrix ``R``. ``Sb^+`` is the minimum-norm solution (a singular
        complement is a flat direction of the bound, e.g. a common intercept shift)."""
        G, c = self.G, self.c
        a = Dg > 0
        cols = np.flatnonzero(a)
        Gm = self.gram(cols, 1.0 / Dg[cols])
        C = self.congruence(T, Gm)
        C[np.diag_indices_from(C)] += 1.0
        cf = sla.cho_factor(C, check_finite=False)
        z = np.where(a, u / np.where(a, Dg, 1.0), 0.0)
        Fz = self.fmul(z)
        r0 = np.matmul(T, Fz[:, :, None]).ravel()
        b, Fb = self._gram_b
        x = np.empty_like(u)
        if b.size:
            Rb = np.matmul(T, Fb).reshape(G * (c - 1), b.size)
            CiRb = sla.cho_solve(cf, Rb, check_finite=False)
            rhs = u[b] - CiRb.T @ r0
            if b.size <= Rb.shape[0]:
                Sb = Rb.T @ CiRb
                lam, U = np.linalg.eigh(0.5 * (Sb + Sb.T))
            else:
                # many unpenalized coordinates: Sb = M^T M with M = L^-1 Rb (K x nb, K < nb), so its
                # eigenpairs come from the thin SVD of M in O(K^2 nb), not an nb x nb eigensolve
                M = sla.solve_triangular(cf[0], Rb, trans="T", lower=cf[1], check_finite=False)
                _, sv, Vt = np.linalg.svd(M, full_matrices=False)
                lam, U = sv[::-1] ** 2, Vt[::-1].T
            xb = min_norm_solve(lam, U, rhs)
            x[b] = xb
            w = sla.cho_solve(cf, r0 + Rb @ xb, check_finite=False)
        else:
            w = sla.cho_solve(cf, r0, check_finite=False)
        v = np.matmul(w.reshape(G, 1, c - 1), T).ravel()
        RTw = self.ftmul(v.reshape(G, c))
        x[cols] = (u[cols] - RTw[cols]) / Dg[cols]
        # the image F x in score space for free: F_a x_a = F_a P u_a - (F_a P F_a^T) v = F z - Gm v
        Fx = Fz.ravel() - Gm @ v
        # rounding bound of the image (cancellation when Dg is small: Gm ~ 1 / Dg), typical sqrt(n) growth
        err = np.abs(Fz.ravel()) + np.sqrt(G * c) * (self._abs_gram @ np.abs(v))
        if b.size:
            Fx += (Fb @ x[b]).ravel()
            err += np.sqrt(b.size) * (np.abs(Fb) @ np.abs(x[b])).ravel()
        # Sigma x - u vanishes on a by construction; on b it is the part of u_b the minimum-norm
        # solution left out (u outside the range of Sigma: the bound is flat there)
        resid = float(np.linalg.norm(RTw[b] - u[b])) if b.size else 0.0
        err *= EPS
        return x, float(Dg[cols] @ (x[cols] * x[cols]) + w @ w), Fx.reshape(G, c), err.reshape(G, c), resid

    def rows_sparse(self, T) -> sp.csr_matrix:
        """Sparse ``R`` = blockdiag(T_g) @ padded features (when the dense tensor is too large)."""
        G, c = self.G, self.c
        ri = np.repeat(np.arange(G * (c - 1)), c)
        ci = (np.arange(G)[:, None, None] * c + np.arange(c)[None, None, :]).repeat(c - 1, axis=1).ravel()
        Tb = sp.csr_matrix((T.ravel(), (ri, ci)), shape=(G * (c - 1), G * c))
        return (Tb @ self.Apad).tocsr()
