r"""The likelihood view of a compiled program: a Gaussian prior plus terms of 1-D linear predictors.

The KL-proximal solver (Khan, Baque, Fleuret & Fua 2015, section 4-5) splits a negative log joint
into its conjugate part, kept exactly, and the non-conjugate terms, linearized. Read from the
canonical program (:mod:`varopt.program`)::

    F(w) = 1/2 w^T P w + c^T w + k  +  sum_n coef_n l_n(a_n^T w + b_n)

* the **Gaussian part** ``1/2 w^T P w + c^T w + k`` collects the constant, the linear terms, the
  quadratic terms and every multiplier-free ``square`` row (a Gaussian likelihood is conjugate,
  so it is part of the "prior" of the split, eq. (6)); ``P`` must be positive definite: the
  prior ``N(mu, Sigma)`` has ``Sigma = P^-1``, ``mu = -P^-1 c``;
* the part of the linear terms that is a combination of the rows' predictors (``-y f``) joins the
  rows: ``coef l(u) + lin u``;
* every other row must be ``coef * l(a^T w + b)`` with ``coef > 0``, no variable multiplier, and
  ``l`` a family of :mod:`.expectations`: ``exp`` (Poisson), ``abs`` (Laplace), and two-entry
  log-sum-exp groups ``log(exp(a0 w + b0) + exp(a1 w + b1))`` = ``(a0 w + b0) + softplus(u)``,
  ``u = (a1 - a0) w + b1 - b0`` (how both front-ends compile ``cp.logistic`` and
  ``log(1 + exp(.))``); the affine part moves into ``c``;
* softmax groups of K = 3 or 4 entries: ``lse(u) = u_b + log(1 + sum_j exp(u_j - u_b))``, a
  (K-1)-dimensional predictor (``groups``) whose pseudo-precisions are (K-1) x (K-1) blocks (the
  ``pat_i, pat_j`` pattern; docs/klprox.md, section 3).

Anything else raises :class:`~varopt.errors.ModelStructureError` naming the objective, the term
and the reason: constraints, finite bounds, ``log``/``x log x``/``u^2/v`` rows (no 1-D Gaussian
expectation), products with a variable, softmax groups of more than four entries, negative
coefficients, a quadratic part that is not positive definite or a variable without a prior.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.linalg import lapack
from scipy.special import logsumexp

from ...errors import ModelStructureError
from .expectations import MAX_SOFTMAX_DIM

LOGISTIC = "logistic"
_EPS = np.finfo(float).eps


@dataclass
class LikelihoodView:
    """``F(w) = 1/2 w^T P w + c^T w + k + sum_n coef_n l_n(A_n w + b_n)`` (see the module doc)."""

    names: list
    P: np.ndarray
    c: np.ndarray
    k: float
    A: sp.csr_matrix
    b: np.ndarray
    coef: np.ndarray
    #: ``[(family kind, slice of rows)]``, rows of one family contiguous
    blocks: list = field(default_factory=list)
    #: linear part of each row: the term is ``coef_n l_n(u_n) + lin_n u_n``
    lin: np.ndarray = None
    #: (with a diagonal prior read from the program's squares: formed from :meth:`prior_sqrt` on first use)
    P_chol: np.ndarray = field(default_factory=lambda: None)
    objective_name: str = "objective"
    #: ``[(J, rows slice, pattern slice)]``: softmax groups (J rows each, after the 1-D rows)
    groups: list = field(default_factory=list)
    #: row/column of every pseudo-precision entry: the diagonal, then the J x J block of every group
    pat_i: np.ndarray = None
    pat_j: np.ndarray = None
    #: finite-sum sample label of every term (1-D rows, then softmax groups), from the program's group labels
    #: (how :class:`varopt.oracles.FiniteSumOracle` groups rows into samples); None when a group has none
    term_labels: np.ndarray = None
    #: the products of each row's nonzeros (``posterior._RowPairs``) when the view built them (sparse 1-D rows with
    #: more rows than variables: their Gram matrix serves the split of section 1, and the full form reuses them)
    row_pairs: object = None

    @property
    def D(self) -> int:
        lazy = self.__dict__.get("_lazy_diag")
        return lazy.size if lazy is not None and "P" not in self.__dict__ else self.P.shape[0]

    # --- a diagonal prior without its D x D matrices ----------------------------------------------------------------
    # A GLM's prior N(0, prior_var I) over D weights is diagonal; likelihood_view keeps its diagonal only, and ``P`` and
    # ``P_chol`` (D x D) are formed on first use: the full form needs ``P`` anyway (V^-1 = P + A^T G A), the dual form of
    # update (19) never (N = 200 rows, D = 20,000 weights: the two matrices took 6.4 GB and the triangular solve
    # Lp^-1 A^T, D^2 N flops, most of the time; with a diagonal factor it is a scaling, the same numbers).
    def _set_diagonal_prior(self, d):
        """Hold the prior ``P = diag(d)`` by ``d`` (``P`` and ``P_chol`` formed when first read)."""
        self.__dict__.pop("P", None)
        self.__dict__.pop("P_chol", None)
        self.__dict__["_lazy_diag"] = d

    def __getattr__(self, name):
        lazy = self.__dict__.get("_lazy_diag")
        if lazy is None or name not in ("P", "P_chol"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        if name == "P":
            P = self.__dict__["P"] = self.__dict__["_made_P"] = np.diag(lazy)
            self.__dict__["_P_diag"] = (P, lazy)
            return P
        s = self.prior_sqrt()
        L = self.__dict__["P_chol"] = self.__dict__["_made_chol"] = None if s is None else np.diag(s)
        return L

    def prior_sqrt(self):
        """``sqrt(diag P)``, the diagonal of ``P_chol``, when the prior was held by its positive diagonal (see
        :meth:`_set_diagonal_prior`) and ``P_chol`` has not been replaced since; else None. (As ``P_chol`` itself, it is
        the factor of the prior the view was made with, whatever ``P`` is set to later.)"""
        got = self.__dict__
        lazy = got.get("_lazy_diag")
        if lazy is None or ("P_chol" in got and got["P_chol"] is not got.get("_made_chol")):
            return None
        s = got.get("_sqrt")
        if s is None:
            s = got["_sqrt"] = np.sqrt(lazy) if np.all(lazy > 0) else False
        return None if s is False else s

    def dense_A(self) -> np.ndarray:
        """``A`` as a C-ordered dense array, formed once per ``A`` (the split of section 1 and the full form's dense rows
        both read it: two conversions took 0.1 ms of a 3 ms GP solve); shared: not to be modified."""
        memo = self.__dict__.get("_dense_A")
        if memo is None or memo[0] is not self.A:
            memo = (self.A, self.A.toarray())
            self.__dict__["_dense_A"] = memo
        return memo[1]

    def A_T(self):
        """``A^T`` (of a sparse ``A`` a CSC view), formed once per ``A``: the split of section 1 multiplies by it up to
        four times and the full form in every gradient (scipy's transpose builds a new matrix object each time)."""
        memo = self.__dict__.get("_A_T")
        if memo is None or memo[0] is not self.A:
            memo = (self.A, self.A.T)
            self.__dict__["_A_T"] = memo
        return memo[1]

    def known_diagonal(self):
        """The diagonal of ``P`` when ``likelihood_view`` read from the program's quadratic terms (squares only: GLM
        and whitened GP priors) that this ``P`` is diagonal, without a pass over it; None when unknown (``P`` may still
        be diagonal) or when ``P`` has been replaced since (a tempered view, a test)."""
        if "P" not in self.__dict__ and self.__dict__.get("_lazy_diag") is not None:
            return self.__dict__["_lazy_diag"]
        memo = self.__dict__.get("_P_diag")
        return memo[1] if memo is not None and memo[0] is self.P else None

    def upper(self) -> bool:
        """Whether ``A`` has a nonzero above its diagonal (:func:`upper_entries`), computed once per ``A``."""
        memo = self.__dict__.get("_upper")
        if memo is None or memo[0] is not self.A:
            memo = (self.A, upper_entries(self.A))
            self.__dict__["_upper"] = memo
        return memo[1]

    @property
    def N(self) -> int:
        return self.b.size

    @property
    def mu(self) -> np.ndarray:
        """Prior mean ``-P^-1 c``."""
        if not np.any(self.c):        # c = 0 (GP models, every row took its linear part): no solve; -0 as the solve's
            return -np.zeros(self.D)
        s = self.prior_sqrt()
        if s is not None:             # cho_solve's two triangular solves with the diagonal factor (LAPACK multiplies by
            r = 1.0 / s               # the reciprocal of a diagonal entry: the same numbers)
            return -((self.c * r) * r)
        return -sla.cho_solve((self.P_chol, True), self.c)

    def logdet_P(self) -> float:
        s = self.prior_sqrt()
        return 2.0 * float(np.sum(np.log(np.diag(self.P_chol) if s is None else s)))

    def value(self, w) -> float:
        """``F(w)`` from the view (checked against the program's own evaluation in the tests)."""
        from .expectations import family_table
        fam = family_table(8)
        u = self.A @ w + self.b
        tot = 0.5 * w @ self.P @ w + self.c @ w + self.k + float(self.lin @ u)
        for kind, sl in self.blocks:
            # l(u) is the variance-0 limit of its Gaussian expectation
            tot += float(self.coef[sl] @ fam[kind].expect(u[sl], np.full(u[sl].size, 1e-300))[0])
        for J, rs, _ in self.groups:
            d = u[rs].reshape(-1, J)
            tot += float(self.coef[rs][::J] @ np.logaddexp(0.0, logsumexp(d, axis=1)))
        return tot

    def _reflect(self, fam, mt, vt, sl):
        """Rows ``l(u) - t u`` (``t = -lin/coef``) of a family with ``l(u) - u = l(-u)`` (softplus), evaluated as
        ``(1 - t) l(u) + t l(-u)``: for ``t`` in ``[0, 1]`` (labels, also fractional ones) both parts are >= 0 and
        nothing cancels. ``E[softplus(u)] - m`` for a confidently classified row (``m`` = 2e4 on Colon with a wide
        prior, docs/klprox.md, section 7) loses every digit below ``eps * m``; with ``-t u`` added outside, the
        ELBO's rounding grew with the predictor means and stopped the step rule at residuals of 1e-5. Returns
        ``E``, ``dE/dm``, ``dE/dv`` of the whole row divided by ``coef``; rows with ``t`` outside ``[0, 1]`` add
        ``-t u`` to ``l(u)``."""
        t, sgn = self._reflect_t(sl)
        v = np.maximum(vt, 1e-300)
        if sgn is not None:
            # 0/1 labels: each row is l(u) or l(-u), one call with the means reflected (E[l(-u)] = E(-mt, vt))
            E, d1, d2 = fam.expect(sgn * mt, v)
            return E, sgn * d1, d2
        if hasattr(fam, "expect_pair"):
            return self._reflect_pair(fam, mt, v, t)
        refl, plain = (t > 0.0) & (t <= 1.0), t < 1.0     # rows needing l(-u), l(u)
        E, d1, d2 = np.zeros_like(mt), np.zeros_like(mt), np.zeros_like(mt)
        if plain.any():
            w = np.where((t >= 0.0) & (t <= 1.0), 1.0 - t, 1.0)[plain]
            e, a, g = fam.expect(mt[plain], v[plain])
            out = ~((t >= 0.0) & (t <= 1.0))[plain]       # t < 0: l(u) - t u directly
            E[plain] = w * e - np.where(out, t[plain] * mt[plain], 0.0)
            d1[plain] = w * a - np.where(out, t[plain], 0.0)
            d2[plain] = w * g
        big = t > 1.0
        if big.any():
            e, a, g = fam.expect(mt[big], v[big])
            E[big], d1[big], d2[big] = e - t[big] * mt[big], a - t[big], g
        if refl.any():
            tt = np.minimum(t[refl], 1.0)
            e, a, g = fam.expect(-mt[refl], v[refl])
            E[refl] += tt * e
            d1[refl] -= tt * a
            d2[refl] += tt * g
        return E, d1, d2

    def _reflect_t(self, sl):
        """``t = -lin/coef`` of the rows ``sl`` and, when every ``t`` is 0 or 1, the signs ``1 - 2t`` (None otherwise);
        formed once per ``lin`` and ``coef`` (fixed once the view is built; five passes of every evaluation before)."""
        memo = self.__dict__.setdefault("_reflect_memo", {})
        got = memo.get((sl.start, sl.stop))
        if got is None or got[0] is not self.lin or got[1] is not self.coef:
            t = -self.lin[sl] / self.coef[sl]
            got = (self.lin, self.coef, t, 1.0 - 2.0 * t if np.all((t == 0.0) | (t == 1.0)) else None)
            memo[(sl.start, sl.stop)] = got
        return got[2], got[3]

    @staticmethod
    def _reflect_pair(fam, mt, v, t):
        """:meth:`_reflect` with each row's quadrature made once, all rows in one call of ``fam.expect_pair``
        (``E[l(u)]`` and ``E[l(-u)]`` from one set of node values) weighted per row: ``(1 - t, t)`` for ``t`` in
        ``[0, 1]``, ``(1, 0)`` and ``-t u`` for the others (``l(u) - t u``). Before, rows with a fractional ``t``
        (a1a's minimum-norm split: 1202 of 1605) were integrated twice, and the rest in a second and third call."""
        inside = (t >= 0.0) & (t <= 1.0)
        wn = np.where(inside, t, 0.0)                     # weight of l(-u)
        wp = 1.0 - wn                                     # weight of l(u)
        s = np.where(inside, 0.0, -t)                     # rows l(u) - t u
        ep, ap, g, en, an = fam.expect_pair(mt, v)
        return wp * ep + wn * en + s * mt, wp * ap - wn * an + s, g

    # --- the pattern of the pseudo-precisions: the diagonal for 1-D rows, a J x J block per softmax group

    @property
    def npat(self) -> int:
        return self.pat_i.size

    @property
    def diagonal(self) -> bool:
        """Only 1-D predictors: pseudo-precisions are a vector (the paper's gamma-tilde)."""
        return not self.groups

    def eye(self) -> np.ndarray:
        """The identity on the pattern (``gamma0 * eye()`` starts the pseudo-precisions)."""
        return (self.pat_i == self.pat_j).astype(float)

    def curvature_matrix(self, g):
        """The N x N (block-)diagonal matrix with pattern values ``g``."""
        return sp.csr_matrix((g, (self.pat_i, self.pat_j)), shape=(self.N, self.N))

    def pattern_sqrt(self, g):
        """Pattern values of the symmetric square root of the (block-)diagonal matrix with values ``g``."""
        n1 = self.N - sum(rs.stop - rs.start for _, rs, _ in self.groups)
        out = np.empty_like(g)
        out[:n1] = np.sqrt(np.maximum(g[:n1], 0.0))
        for J, _, ps in self.groups:
            blk = g[ps].reshape(-1, J, J)
            lam, Q = np.linalg.eigh(0.5 * (blk + np.swapaxes(blk, 1, 2)))
            out[ps] = ((Q * np.sqrt(np.maximum(lam, 0.0))[:, None, :]) @ np.swapaxes(Q, 1, 2)).ravel()
        return out

    def pattern_cov(self, W):
        """Entries of ``W^T W`` (= ``A V A^T`` when ``V = Lam^-1``, ``W = L^-1 A^T``) on the pattern."""
        if self.diagonal:
            return np.einsum("ij,ij->j", W, W)
        n1 = self.N - sum(rs.stop - rs.start for _, rs, _ in self.groups)
        out = np.empty(self.npat)
        out[:n1] = np.einsum("ij,ij->j", W[:, :n1], W[:, :n1])
        for J, rs, ps in self.groups:   # the J x J blocks of each group, in the pattern's (group, i, j) order
            Wg = W[:, rs].reshape(W.shape[0], -1, J)
            out[ps] = np.einsum("dgi,dgj->gij", Wg, Wg).ravel()
        return out

    def curvature_residual(self, gamma, gt, vt):
        """``sum_n ||Vt_n^1/2 (Gamma_n - Gt_n) Vt_n^1/2||_F`` (1-D rows: ``|gamma_n - gt_n| vt_n``), a bound on
        ``||V^1/2 A^T (Gamma - Gt) A V^1/2||_F``: the covariance part of the natural gradient."""
        if not self.groups:                  # 1-D rows only: the first sum below over every row
            return float((np.abs(gamma - gt) * vt).sum())
        n1 = self.N - sum(rs.stop - rs.start for _, rs, _ in self.groups)
        tot = float(np.sum(np.abs(gamma[:n1] - gt[:n1]) * vt[:n1]))
        for J, _, ps in self.groups:
            Dg = (gamma[ps] - gt[ps]).reshape(-1, J, J)
            Vg = vt[ps].reshape(-1, J, J)
            M = Dg @ Vg
            tot += float(np.sum(np.sqrt(np.maximum(np.einsum("gij,gji->g", M, M), 0.0))))
        return tot

    def decoupled(self, fams) -> bool:
        """Whether ``E_q[sum_n l_n]`` is ``f(mt) + <Gamma, Vt>/2`` with a constant ``Gamma`` (families with
        ``separable``: Gaussian ``u^2`` rows and softmax groups under Boehning's bound), at least one group. The mean and the
        covariance then separate in the ELBO, and the mean's part is smooth with the exact Hessian of
        :meth:`mean_curvature` (docs/klprox.md, "Newton mean step")."""
        if not self.groups or not getattr(fams["softmax"], "separable", False):
            return False
        return all(getattr(fams[kind], "separable", False) for kind, _ in self.blocks)

    def mean_curvature(self, fams, mt, gamma):
        """Pattern values of ``d^2 E/dmt^2`` for a :meth:`decoupled` view: ``gamma`` on the 1-D (``u^2``) rows, where
        it is exact, and ``coef * (diag(p) - p p^T)`` on the groups."""
        out = gamma.copy()
        fam = fams["softmax"]
        for J, rs, ps in self.groups:
            cf = self.coef[rs][::J]
            out[ps] = (cf[:, None, None] * fam.mean_hessian(mt[rs].reshape(-1, J))).ravel()
        return out

    def stiff_variance(self, fams) -> bool:
        """Whether the fixed-point Newton step applies (the solver's ``NEWTON_FP``): 1-D rows only, every family with
        closed-form third and fourth expected derivatives (``Family.higher_moments``), and at least one ``exp`` row
        (``Family.variance_stiff``), whose expectation ``exp(mt + vt/2)`` grows exponentially with the predictor
        variance."""
        return (self.diagonal and not self.groups
                and any(getattr(fams[kind], "variance_stiff", False) for kind, _ in self.blocks)
                and all(getattr(fams[kind], "higher_moments", False) for kind, _ in self.blocks))

    def higher_terms(self, fams, mt, vt):
        """``(t3, t4)`` per row, ``coef * E[l^(3)]`` and ``coef * E[l^(4)]`` (the linear parts have none), for a view with
        :meth:`stiff_variance`: ``d alpha/d mt = gamma``, ``d alpha/d vt = t3/2``, ``d gamma/d mt = t3``,
        ``d gamma/d vt = t4/2``."""
        t3, t4 = np.empty(self.N), np.empty(self.N)
        for kind, sl in self.blocks:
            e3, e4 = fams[kind].higher(mt[sl], np.maximum(vt[sl], 1e-300))
            t3[sl], t4[sl] = self.coef[sl] * e3, self.coef[sl] * e4
        return t3, t4

    def terms(self, fams, mt, vt):
        """``(sum_n E[coef_n l_n + lin_n u_n], magnitude, alpha, gamma)`` at predictor means ``mt`` and pattern
        covariances ``vt``: ``alpha = dE/dmt`` (N), ``gamma = 2 dE/dVt`` on the pattern."""
        # one block of every row (a GLM, a GP): its arrays are alpha and gamma themselves (no copies into slices)
        whole = len(self.blocks) == 1 and not self.groups and self.blocks[0][1] == slice(0, self.N)
        alpha, gamma = (None, None) if whole else (np.empty(self.N), np.empty(self.npat))
        lik = mag = 0.0
        for kind, sl in self.blocks:
            fam, cf = fams[kind], self.coef[sl]
            if getattr(fam, "reflects", False):   # the rows hold their linear part (cancellation-free; _reflect)
                E, d1, d2 = self._reflect(fam, mt[sl], vt[sl], sl)
                a = cf * d1
            else:
                E, d1, d2 = fam.expect(mt[sl], np.maximum(vt[sl], 1e-300))
                lin = self.lin[sl]
                lik += float(lin @ mt[sl])
                mag += float(np.abs(lin) @ np.abs(mt[sl]))
                a = cf * d1 + lin
            lik += float(cf @ E)
            mag += float(cf @ np.abs(E))
            if whole:
                alpha, gamma = a, (2.0 * cf) * d2
            else:
                alpha[sl], gamma[sl] = a, (2.0 * cf) * d2
        for J, rs, ps in self.groups:
            E, d1, d2 = fams["softmax"].expect_group(mt[rs].reshape(-1, J), vt[ps].reshape(-1, J, J))
            cf = self.coef[rs][::J]
            lik += float(cf @ E) + float(self.lin[rs] @ mt[rs])
            mag += float(cf @ np.abs(E)) + float(np.abs(self.lin[rs]) @ np.abs(mt[rs]))
            alpha[rs] = (cf[:, None] * d1).ravel() + self.lin[rs]
            gamma[ps] = (2.0 * cf[:, None, None] * d2).ravel()
        return lik, mag, alpha, gamma


def _fail(where, what, why):
    raise ModelStructureError(f"klprox: {where}: {what} {why}. The KL-proximal solver needs a negative log "
                              "joint = a Gaussian prior (a positive definite quadratic) + terms c*l(a^T w + b), "
                              "c > 0, with l one of log(1 + exp(u)), exp(u), abs(u), u**2, max(u, 0)**2 (squared hinges of an affine u, "
                              "cp.log_normcdf), or log-sum-exp rows of up to 4 entries")


def likelihood_view(program, families) -> LikelihoodView:
    """Split ``program`` (a compiled minimisation) into a Gaussian part and likelihood rows."""
    where = f"objective {program.objective_name!r}"
    program.check_finite()
    if program.constraints:
        _fail(where, f"the model has constraints (first: {program.constraints[0].name!r});", "this is not allowed")
    finite = np.isfinite(program.lb) | np.isfinite(program.ub)
    if finite.any():
        _fail(where, f"variable {program.names[int(np.flatnonzero(finite)[0])]!r} has a finite bound;",
              "posterior variables must be unbounded")
    e = program.objective
    D = program.n
    symmetric = True          # H + H^T of _dense_hessian: symmetric to the last bit, (H + H^T) / 2 = H
    squares = bool(len(e.quadratic)) and np.array_equal(e.quadratic.i, e.quadratic.j)   # H diagonal (until a term adds)
    # a diagonal H is held by its diagonal (the entries _dense_hessian writes) until a quadratic term needs the matrix
    H = _dense_hessian(e.quadratic, D) if not squares else None
    if squares:
        hd = np.zeros(D)
        hd[e.quadratic.i] = e.quadratic.v + e.quadratic.v
    c = e.linear.copy()
    k = e.constant
    rows = {}  # kind -> list of (A, b, coef)
    texts = {LOGISTIC: "log-sum-exp (cp.logistic, log(1 + exp(u)) or a softmax row)"}
    soft = {}  # J -> list of (A, b, coef per group): softmax groups of J + 1 entries
    for g in e.atoms:
        kern = g.kernel
        text = kern.text.format(u="a^T w + b", v="a2^T w + b2")
        if np.any(g.mult >= 0):
            r = int(np.flatnonzero(g.mult >= 0)[0])
            _fail(where, f"the term {program.names[g.mult[r]]}*{text} (row {r})",
                  "is a product with a variable, not a function of an affine predictor")
        if kern.quadratic:
            if H is None:
                H = np.diag(hd)
            H = H + _square_gram(g.A, 2.0 * g.coef)
            symmetric = False
            c = c + np.asarray(g.A.T @ (2.0 * g.coef * g.b)).ravel()
            k += float(np.sum(g.coef * g.b * g.b))
            continue
        if kern.arity != 1:
            _fail(where, f"the term {text}", "depends on two affine maps, not on one linear predictor")
        if g.kind not in families:
            _fail(where, f"the term {text}", "has no Gaussian expectation available to klprox "
                  "(it is not defined for every value of a Gaussian predictor)")
        texts[g.kind] = text      # the sign is checked per row once the rows of a kind are summed (below)
        rows.setdefault(g.kind, []).append((g.A, g.b, g.coef, g.label, False))
    for grp in e.lse:
        if np.any(grp.mult >= 0):
            _fail(where, "a log-sum-exp term multiplied by a variable", "is not a function of an affine predictor")
        sizes = np.diff(np.append(grp.starts, grp.seg.size))
        # softmax groups (3 or more entries) are checked here; two-entry groups (logistic rows) after their rows of
        # the same predictor are summed, one-entry groups are linear
        _positive(where, texts[LOGISTIC], grp.coef[sizes > 2], program.maximize)
        jmax = families["softmax"].max_dim if "softmax" in families else MAX_SOFTMAX_DIM
        if jmax is not None and np.any(sizes > jmax + 1):
            g0 = int(np.flatnonzero(sizes > jmax + 1)[0])
            _fail(where, f"the log-sum-exp group {g0} has {sizes[g0]} entries;",
                  f"softmax groups of more than {jmax + 1} entries (classes) have no accurate expectation here: it "
                  f"is a {sizes[g0] - 1}-dimensional integral, beyond the tensor quadrature; option softmax='bound' "
                  "(Boehning's bound: a lower bound on the ELBO) accepts any number")
        wide = sizes > 2
        for K in (np.unique(sizes[wide]) if wide.any() else ()):
            c, k = _softmax_rows(grp, np.flatnonzero(sizes == K), int(K), c, k, soft)
        i0 = grp.starts
        small = sizes <= 2
        one = sizes == 1
        coef = grp.coef[small]
        i0 = i0[small]
        # the base row (a constant one when there is one, e.g. the 0 of log(1 + exp(u))) moves into c
        two = ~one[small]
        base = i0.copy()
        other = i0 + 1
        nnz = np.diff(grp.A.indptr)
        swap = two & (nnz[np.minimum(other, grp.seg.size - 1)] == 0) & (nnz[base] > 0)
        base[swap], other[swap] = other[swap], base[swap]
        # base rows without variables (the 0 of log(1 + exp(u)), every GP or GLM classification row): nothing to
        # move into c or to subtract (the sparse row selections and difference took ~0.2 ms of a 4 ms GP solve)
        empty_base = not np.any(nnz[base])
        c = c + (0.0 if empty_base else np.asarray(grp.A[base].T @ coef).ravel())
        k += float(coef @ grp.b[base])
        if two.any():
            A2 = _rows(grp.A, other[two], nnz) if empty_base else grp.A[other[two]]
            if empty_base:
                if not A2.data.all():     # as the difference would: stored zeros dropped (none: no call)
                    A2.eliminate_zeros()
            else:
                A2 = A2 - grp.A[base[two]]
            lab = None if grp.label is None else np.asarray(grp.label)[small][two]
            rows.setdefault(LOGISTIC, []).append((A2, grp.b[other[two]] - grp.b[base[two]], coef[two], lab, True))
    blocks, As, bs, cs, start = [], [], [], [], 0
    labels = []   # the finite-sum sample label of every term (1-D row, softmax group); None when unknown
    for kind, parts in rows.items():
        A = _stack([p[0] for p in parts], fresh=all(p[4] for p in parts))
        b = np.concatenate([p[1] for p in parts])
        cf = np.concatenate([p[2] for p in parts])
        lab = None if any(p[3] is None for p in parts) else np.concatenate([p[3] for p in parts])
        if np.any(cf < 0):
            # a term subtracted from a sum that holds it (leave-one-out: nlj - l(z_i)); rows of one predictor summed
            A, b, cf, lab = _merge_rows(A, b, cf, lab)
            _positive(where, texts[kind], cf, program.maximize)
        keep = cf > 0
        labels.append(None if lab is None else lab[keep])
        if not keep.all():
            A, b, cf = A[keep], b[keep], cf[keep]
        if b.size:
            blocks.append((kind, slice(start, start + b.size)))
            As.append(A), bs.append(b), cs.append(cf)
            start += b.size
    # softmax groups after the scalar rows: J consecutive rows per group, a J x J block of the pattern
    groups, pi, pj = [], [np.arange(start)], [np.arange(start)]
    pstart = start
    for J in sorted(soft):
        A = sp.vstack([p[0] for p in soft[J]]).tocsr()
        b = np.concatenate([p[1] for p in soft[J]])
        cf = np.concatenate([p[2] for p in soft[J]])
        keep = np.repeat(cf > 0, J)
        labels.append(None if any(p[3] is None for p in soft[J]) else np.concatenate([p[3] for p in soft[J]])[cf > 0])
        A, b, cf = A[keep], b[keep], cf[cf > 0]
        G = cf.size
        if not G:
            continue
        r0 = start + J * np.arange(G)
        ii = r0[:, None, None] + np.arange(J)[None, :, None] + np.zeros((1, 1, J), dtype=int)
        jj = r0[:, None, None] + np.arange(J)[None, None, :] + np.zeros((1, J, 1), dtype=int)
        pi.append(ii.ravel()), pj.append(jj.ravel())
        groups.append((J, slice(start, start + G * J), slice(pstart, pstart + G * J * J)))
        As.append(A), bs.append(b), cs.append(np.repeat(cf, J))
        start += G * J
        pstart += G * J * J
    A = _stack(As, fresh=True) if As else sp.csr_matrix((0, D))
    P = None if H is None else (H if symmetric else 0.5 * (H + H.T))
    view = LikelihoodView(list(program.names), P, c, k, A, np.concatenate(bs) if bs else np.zeros(0),
                          np.concatenate(cs) if cs else np.zeros(0), blocks, objective_name=program.objective_name)
    if P is None:
        view._set_diagonal_prior(hd)
    view.groups = groups
    view.term_labels = None if any(lb is None for lb in labels) else (
        np.concatenate(labels) if labels else np.zeros(0))
    view.pat_i, view.pat_j = np.concatenate(pi), np.concatenate(pj)
    if squares and symmetric and P is not None:   # no quadratic likelihood term added to H
        view.__dict__["_P_diag"] = (P, np.diag(P).copy())
    _rows_take_linear_terms(view)
    if P is None and np.all(hd > 0):
        return view               # P_chol = diag(sqrt(hd)), formed if ever read (LikelihoodView.prior_sqrt)
    view.P_chol = _prior_cholesky(view.P, program.names, where, view.known_diagonal(), program.maximize)
    return view


#: quadratic rows filled above this fraction take the dense Gram (_square_gram)
DENSE_GRAM_FILL = 0.1


def _filled(A) -> bool:
    """Whether the rows ``A`` store more than DENSE_GRAM_FILL of their entries (dense data, a GP's kernel factor)."""
    N, D = A.shape
    return bool(N and D and A.nnz > DENSE_GRAM_FILL * N * D)


def _square_gram(A, w=None, dense=None):
    """``A^T diag(w) A`` (dense; ``w`` None: ``A^T A``), e.g. the rows of a quadratic likelihood term (``w`` twice their
    coefficients) or the normal equations of the linear terms' split (:func:`_rows_take_linear_terms`): by BLAS when
    ``A`` is filled (:func:`_filled`; ``dense``: its dense copy when one is kept), else by scipy's sparse product. The
    sparse product of a filled matrix is a scalar triple loop: 2.1 s of a 3.1 s Gaussian GP fit at N = 2000
    (``A = L_K / noise``, lower triangular; docs/klprox.md, section 7, "GP estimators at N = 500-4000"), 2.7 s against
    0.3 s for a logistic regression at N = 50,000, D = 201. With ``w >= 0`` it is ``B^T B``, ``B = diag(w)^1/2 A``:
    LAPACK ``lauum`` (``B^T B`` of a triangular ``B``, D^3 / 3 flops) for a square lower-triangular ``A``, else the
    symmetric rank-k update ``syrk``; the same sums as the sparse product up to their order (rounding)."""
    N, D = A.shape
    if not (_filled(A) and (w is None or np.all(w >= 0.0))):
        return (A.T @ A if w is None else A.T @ sp.diags(w) @ A).toarray()
    from .posterior import _symmetrize      # (posterior imports this module)
    B = A.toarray() if dense is None else dense
    if w is not None:
        B = B * np.sqrt(w)[:, None] if B is dense else np.multiply(B, np.sqrt(w)[:, None], out=B)
    if N == D and not upper_entries(A):
        low = lapack.dlauum(np.asfortranarray(B), lower=1, overwrite_c=int(B is not dense))[0]
    else:
        from scipy.linalg.blas import dsyrk
        low = dsyrk(1.0, B.T, trans=0, lower=1)          # B^T B: B^T is B's Fortran-ordered view
    return _symmetrize(np.tril(low))


def _dense_hessian(quad, D):
    """The dense Hessian ``U + U^T`` of the quadratic terms (``U``: their upper-triangular coefficients, one entry per
    pair): the same numbers as the sparse sum's ``toarray()`` (the diagonal ``2 v``, off it ``v + 0``), without it;
    squares only (a diagonal prior): ``v + v`` on the diagonal, no transposed pass."""
    H = np.zeros((D, D))
    if len(quad):
        if np.array_equal(quad.i, quad.j):
            H.flat[quad.i * (D + 1)] = quad.v + quad.v
        else:
            H[quad.i, quad.j] = quad.v
            H += H.T
    return H


def _rows(A, sel, nnz):
    """``A[sel]`` (a fresh CSR matrix); when ``sel`` increases and every row outside it is empty (the feature rows of
    two-entry log-sum-exp groups whose other row is the constant 0), a copy of the contiguous block of ``A``'s arrays
    with the selected rows' pointers, without scipy's fancy indexing (0.03-0.07 ms on a1a and the heart GP)."""
    p = A.indptr
    if sel.size and np.all(sel[1:] > sel[:-1]) and int(np.sum(nnz[sel])) == int(p[-1]):
        lo = p[sel[0]]
        indptr = np.empty(sel.size + 1, dtype=p.dtype)
        indptr[0] = 0
        np.subtract(p[sel + 1], lo, out=indptr[1:])
        return sp.csr_matrix((A.data[lo:].copy(), A.indices[lo:].copy(), indptr), shape=(sel.size, A.shape[1]))
    return A[sel]


def _merge_rows(A, b, cf, lab):
    """Rows with the same affine predictor (equal entries of ``A`` and ``b``) as one row with the summed coefficient:
    ``c1 l(u) + c2 l(u) = (c1 + c2) l(u)``, so a likelihood term subtracted from a sum that contains it (a
    leave-one-out model, a down-weighted sample) leaves a row of net coefficient 0 or c1 + c2 > 0 instead of a
    "negative coefficient" error. Called only when some coefficient is negative; the rows keep their first order."""
    A = sp.csr_matrix(A, copy=True)
    A.sum_duplicates()
    A.sort_indices()
    A.eliminate_zeros()
    first, where = {}, np.empty(b.size, dtype=np.int64)
    for r in range(b.size):
        lo, hi = A.indptr[r], A.indptr[r + 1]
        key = (float(b[r]), A.indices[lo:hi].tobytes(), A.data[lo:hi].tobytes())
        where[r] = first.setdefault(key, len(first))
    heads = np.unique(where, return_index=True)[1]        # the first row of every predictor (labels in that order)
    merged = np.zeros(len(first))
    np.add.at(merged, where, cf)
    return A[heads], b[heads], merged, (None if lab is None else np.asarray(lab)[heads])


def _stack(mats, fresh=False):
    """``sp.vstack(mats)`` in CSR form; of one CSR matrix a plain copy (what the stack makes, without its machinery), or
    the matrix itself when it is ``fresh`` (made here from the program's arrays, shared with nothing: the two copies of
    a1a's 24k entries took 0.07 ms of a 3.5 ms solve)."""
    if len(mats) == 1 and sp.isspmatrix_csr(mats[0]):
        return mats[0] if fresh else mats[0].copy()
    return sp.vstack(mats).tocsr()


def _softmax_rows(grp, gsel, K, c, k, soft):
    """Groups ``gsel`` of ``K`` entries: ``lse(u) = u_base + log(1 + sum_j exp(u_j - u_base))``; the base
    entry (one with no variable when there is one, else the first) joins ``c``/``k``, the differences
    form a (K-1)-dimensional predictor."""
    idx = grp.starts[gsel][:, None] + np.arange(K)[None, :]              # (G, K) row numbers
    nnz = np.diff(grp.A.indptr)[idx]
    pos = np.where((nnz == 0).any(axis=1), np.argmax(nnz == 0, axis=1), 0)
    base = idx[np.arange(idx.shape[0]), pos]
    others = np.array([np.delete(r, p) for r, p in zip(idx, pos)]).reshape(-1, K - 1)
    coef = grp.coef[gsel]
    c = c + np.asarray(grp.A[base].T @ coef).ravel()
    k += float(coef @ grp.b[base])
    rb = np.repeat(base, K - 1)
    A = grp.A[others.ravel()] - grp.A[rb]
    lab = None if grp.label is None else np.asarray(grp.label)[gsel]
    soft.setdefault(K - 1, []).append((A, grp.b[others.ravel()] - grp.b[rb], coef, lab))
    return c, k


def _rows_take_linear_terms(view):
    """Move the part of ``c`` in the range of ``A^T`` into the rows (``c = c0 + A^T t``: the term
    ``t_n (u_n - b_n)``, e.g. the ``-y f`` of a logistic or Poisson likelihood). The split is the
    same joint; it keeps the prior mean ``-P^-1 c0`` at the scale of the model (with ``-y f`` in
    the Gaussian part, the mean and the KL term grow like ``delta X^T y`` and ``-ELBO`` would be a
    difference of large numbers)."""
    view.lin = np.zeros(view.N)
    if view.N == 0 or not np.any(view.c):
        return
    # more rows than variables (a GLM: a1a, 1605 x 124): the normal equations, 2 ms against 10-40 ms of gelsy
    gram = None
    if view.N > view.D and view.diagonal:
        from .posterior import _RowPairs      # (posterior imports this module)
        if _RowPairs.worth(view.A, view.D):
            # A^T A from the row pairs (a1a: 0.13 ms against 0.54 ms of scipy's sparse product), which the full
            # form then reuses; the same sums of the same products (binary features: the same integers)
            view.row_pairs = _RowPairs(view.A, view.D)
            gram = view.row_pairs.unit_gram()
    if view.N > view.D and gram is None and _filled(view.A) and view.N * float(view.D) ** 2 >= DENSE_GRAM_FLOPS:
        # a large filled A (dense data): from the dense copy the full form reads as well (posterior._Base)
        gram = _square_gram(view.A, dense=view.dense_A())
    t = _min_norm_normal(view.A, view.c, gram, view.A_T()) if view.N > view.D else None
    At = None
    if t is None:
        At = view.dense_A().T
        if At.shape[0] == At.shape[1] and _full_rank_upper(At, view):
            # A^T upper triangular and of full rank (whitened GP models, A = L_K): the unique solution, a D^2 solve
            # LAPACK trtrs directly (what solve_triangular calls for this Fortran-ordered At, without its wrapper:
            # 0.03 ms of a heart solve's set-up)
            t, info = lapack.dtrtrs(At, view.c, lower=0)
            if info != 0:
                t = sla.solve_triangular(At, view.c, lower=False, check_finite=False)   # raises as before
        else:
            # the minimum-norm least-squares solution by a complete orthogonal factorization (LAPACK gelsy), with
            # numpy's rank cut-off; the SVD route (gelsd) gives the same t and took half of a small GP solve's set-up
            # (2 of 4 ms at N = D = 135, heart_statlog)
            cut = np.finfo(float).eps * max(At.shape)
            t = sla.lstsq(At, view.c, cond=cut, lapack_driver="gelsy", check_finite=False)[0]
    # labels come out of the least squares as y +- 1e-16; the exact values (ratios -t/coef that are integers to
    # 1e-12) are the same decomposition (c0 takes the difference) and let the logistic rows reflect exactly
    ratio = -t / np.where(view.coef > 0, view.coef, 1.0)
    near = np.round(ratio)
    snap = (view.coef > 0) & (np.abs(ratio - near) <= 1e-12 * np.maximum(1.0, np.abs(near)))
    t = np.where(snap, -near * view.coef, t)
    c0 = view.c - (At @ t if At is not None else np.asarray(view.A_T() @ t).ravel())
    # ||c0|| <= 1e-12 ||c||: np.linalg.norm's sqrt(x . x) without its wrapper
    if math.sqrt(float(c0 @ c0)) <= 1e-12 * math.sqrt(float(view.c @ view.c)):
        c0[:] = 0.0
    view.c, view.lin = c0, t
    view.k -= float(t @ view.b)


def upper_entries(A):
    """Whether the sparse ``A`` has a nonzero above its diagonal (read from its structure: no dense triangle)."""
    if not (sp.issparse(A) and A.format == "csr"):   # a CSR matrix is read as it is (no constructor's checks)
        A = sp.csr_matrix(A)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    return bool(np.any((A.indices > rows) & (A.data != 0)))


def _full_rank_upper(At, view):
    """``At = A^T`` (dense) is upper triangular (read from the sparse ``A``'s structure) with a diagonal of full rank."""
    cut = _EPS * max(At.shape)
    d = np.abs(np.diag(At))
    return bool(d.size and d.min() > cut * d.max() and not view.upper())


#: _rows_take_linear_terms forms A^T A of a filled A by a dense product from this many N D^2 on (below, scipy's sparse
#: product: its sums, in row order, are the numbers small models have always had)
DENSE_GRAM_FLOPS = 1e8

#: _min_norm_normal accepts its solution when ``||c - A^T t|| <= MIN_NORM_RESIDUAL ||c||`` (gelsy reaches ~1e-15)
MIN_NORM_RESIDUAL = 1e-14


def _min_norm_normal(A, c, gram=None, AT=None):
    r"""The minimum-norm solution ``t`` of ``A^T t = c`` for a tall ``A`` (N > D) from the D x D normal equations, or
    None (then the caller's orthogonal factorization decides).

    Every ``t = A z`` lies in the range of ``A``, the orthogonal complement of the null space of ``A^T``; one that
    solves ``A^T t = c`` is therefore *the* minimum-norm solution. ``z`` solves ``A^T A z = c`` by a pivoted
    Cholesky factorization (LAPACK pstrf, which also finds the rank of the rank-deficient Gram matrices of one-hot
    features: 98 of 124 on a1a) restricted to its pivots, refined twice on the residual (the normal equations square
    the condition number). The result is returned only when its residual is at the level of an orthogonal
    factorization (:data:`MIN_NORM_RESIDUAL`): ill-conditioned ``A`` (or ``c`` outside the range of ``A^T``) fall
    back to gelsy. ``AT``: ``A^T`` when the caller has it."""
    D = A.shape[1]
    AT = A.T if AT is None else AT
    if gram is not None:     # A^T A given (from the row pairs)
        G = gram
    else:
        G = np.asarray((AT @ A).todense()) if sp.issparse(A) else AT @ A
    L, piv, rank, info = lapack.dpstrf(G, lower=1)
    if info < 0 or rank == 0:
        return None
    piv = piv[:rank] - 1                                  # LAPACK's pivots are 1-based
    Lr = L[:rank, :rank]
    cn = np.linalg.norm(c)

    def solve(rhs):
        z = np.zeros(D)
        z[piv] = sla.cho_solve((Lr, True), rhs[piv], check_finite=False)
        return np.asarray(A @ z).ravel()

    t = solve(c)
    for refine in range(3):
        res = c - np.asarray(AT @ t).ravel()
        if not np.all(np.isfinite(res)):
            return None
        if np.linalg.norm(res) <= MIN_NORM_RESIDUAL * cn:
            return t
        if refine < 2:
            t = t + solve(res)
    return None


def _positive(where, text, coef, maximize=False):
    if np.any(coef < 0):
        r = int(np.flatnonzero(coef < 0)[0])
        _fail(where, f"the term {text} (term {r} of its kind) has the negative coefficient {coef[r]:g};",
              "a likelihood term -log p must enter with a positive coefficient" + _sense_hint(maximize))


def _sense_hint(maximize):
    """For a maximized objective, what klprox reads: a sign slip (``Maximize`` of the negative log joint) shows as
    negative likelihood coefficients or a negative definite prior, and the message says so."""
    if not maximize:
        return ""
    return (" (the objective is maximized: klprox reads its negative as the negative log joint, so write "
            "Maximize(log joint) = Maximize(-(negative log joint)), or Minimize(negative log joint))")


def _prior_cholesky(P, names, where, diag=None, maximize=False):
    """Lower Cholesky factor of ``P``; a clear error for a missing or indefinite Gaussian prior. ``diag``: ``P``'s
    diagonal when ``P`` is known to be diagonal (:meth:`LikelihoodView.known_diagonal`; the checks then read it only)."""
    if P.shape[0] == 0:
        _fail(where, "the model", "has no variables")
    if diag is not None and np.all(diag > 0):
        return np.diag(np.sqrt(diag))
    free = np.flatnonzero(~np.any(P != 0, axis=1))
    if free.size:
        shown = ", ".join(repr(names[j]) for j in free[:5]) + (" ..." if free.size > 5 else "")
        raise ModelStructureError(f"klprox: {where}: no Gaussian prior on {shown}: the quadratic part of the "
                                  "negative log joint (e.g. lam/2*sum(w**2), cp.quad_form(w, Kinv)) must involve every "
                                  "variable and be positive definite; an improper flat prior (e.g. an unpenalized "
                                  "intercept) is not a Gaussian: give it a wide one, e.g. + b**2/(2*100)")
    d = np.diag(P)
    if np.all(d > 0) and np.count_nonzero(P) == np.count_nonzero(d):
        # diagonal (GLM and whitened GP priors): the factor LAPACK computes, sqrt(P_jj), without the D^3/3 factorization
        return np.diag(np.sqrt(d))
    try:
        return np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        lam = np.linalg.eigvalsh(P)
        raise ModelStructureError(f"klprox: {where}: the Gaussian prior (the quadratic part of the negative log "
                                  f"joint) is not positive definite: smallest eigenvalue {lam[0]:.3g}, largest "
                                  f"{lam[-1]:.3g}; the prior precision must be symmetric positive definite"
                                  f"{_sense_hint(maximize)}") from None
