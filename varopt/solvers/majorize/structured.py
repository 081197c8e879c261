"""Matrix-free majorizer steps: preconditioned CG on ``Sigma = sum_g F_g^T M_g F_g`` (never formed).

Algorithm 1's curvature of the padded groups (:mod:`.groups`) is ``sum_g c_g Sigma_g = sum_g F_g^T M_g F_g``
with ``M_g = T_g^T T_g`` (``c x c``). A product ``Sigma v`` costs two feature products and ``G c^2`` flops:

    s = F v  (scores of v),   t_g = T_g^T (T_g s_g),   Sigma v = F^T t,

against ``G (c-1) d^2`` for forming ``Sigma`` densely. For **class-template** features (multinomial
logistic regression: row ``y`` of group ``g`` is ``x_g`` placed in the column block of ``y``, so
``c_g Sigma_g = M_g (x) x_g x_g^T``, a Kronecker product per sample; docs/majorize.md section 1b)
the feature products are two GEMMs, ``U = X V^T`` and ``X^T B`` (``V`` the ``K x d'`` class blocks of
``v``): ``O(G d' K)`` per product instead of ``O(G d'^2 K^2)`` to form the ``(d' K)^2`` matrix.

The step solves ``(H + rho I + Sigma + diag(eps)) D = -u`` by preconditioned conjugate gradients with the
same proximal terms ``eps`` (:func:`proximal_terms`: ``1e-10 max diag(H + rho I + Sigma)``, capped at ``1e-8`` of
each coordinate's own diagonal entry) as the dense path
(:func:`.step.psd_solve`), so both
paths compute the same step up to the CG tolerance. Every CG iterate ``D_k`` lowers the majorizer
``m(D) = u^T D + 1/2 D^T (H + Sigma) D`` (CG minimises it over growing Krylov spaces from ``D_0 = 0``),
and ``m(D)`` is evaluated with one more exact product: any iterate keeps Algorithm 2 monotone.

Preconditioners. Class templates with a regularizer that is the same in every class block
(``H = I_K (x) diag(h)`` on the template columns, e.g. a ridge with unpenalized intercepts):
the Kronecker approximation

    P = I_K (x) B + Mbar (x) C,   B = diag(h) + delta I,  C = X^T X,  Mbar = sum_g |x_g|^2 M_g / sum_g |x_g|^2

(exact when every ``M_g`` is the same), inverted through the generalized eigenpairs ``C V = (B + C) V Gamma``
(once per solve, ``V^T (B + C) V = I``) and the ``K x K`` eigenpairs ``Mbar = U Lambda U^T`` (every step):
``P^{-1} R = V [ (U^T R V) / (1 - Gamma + Lambda Gamma) ]`` mapped back by ``U``, ``O(K^2 d' + K d'^2)``.
Otherwise the diagonal of ``H + Sigma`` (Jacobi).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ...errors import InvalidOptionError
from .step_qp import MAX_DENSE_ROWS
from .step_rows import MAX_ROWS

#: CG stops when the residual of (Q + eps I) D = -u is below this, relative to ||u||
CG_RTOL = 1e-13
#: CG tolerances up to this one solve the step tightly enough for the unboundedness test on its residual
FLAT_RTOL = 1e-8
#: largest number of CG iterations per step (then the last iterate is used: still monotone)
CG_MAXIT = 1000
#: CG iterations assumed for the cost prediction before any step has been measured
CG_GUESS = 25
#: cost of a flop outside one large GEMM (Cholesky, CG's products, batched small matmuls) relative to the dense
#: Sigma's formation GEMM (measured on digits: about 23 GFlop/s there, 9 GFlop/s in CG steps and Cholesky)
SLOW_FLOP = 2.5
#: flop-equivalent of the Python/numpy overhead of one CG iteration and of one dense step (measured on the
#: 2-core benchmark machine: about 40 us per CG iteration and 150 us per dense step at ~5 GFlop/s)
CG_OVERHEAD = 2.0e5
DENSE_OVERHEAD = 7.5e5


class StructuredSigma:
    """``H + rho I + Sigma`` as an operator for the padded groups ``grp`` at the factors ``T`` (one step)."""

    def __init__(self, grp, T, Dg):
        self.grp, self.T, self.Dg = grp, T, Dg
        tpl = grp.template
        self.template = tpl is not None
        if self.template:
            rows = tpl[0]
            kc = _kron_cache(grp)
            self.cmat = kc["cmat"]
            self._Tr = Tr = T if len(rows) == T.shape[2] else T[:, :, rows]  # (G, c-1, K)
            self._M = None  # M_g = T_g^T T_g on the used rows, formed by the first matvec (CG steps only)
            self.X = kc["X"]
            self.XT = kc["XT"]
            # diag(Sigma) on the template columns: sum_g M_g[y, y] x_g^2, M_g[y, y] = sum_i T_g[i, y]^2
            mdiag = np.einsum("giy,giy->gy", Tr, Tr)
            dS = np.zeros(grp.d)
            dS[self.cmat] = (kc["X2T"] @ mdiag).T
        else:
            F = grp.dense if grp.dense_fits(grp.G, grp.c, grp.d) else None
            if F is not None:
                R = np.matmul(T, F)
                dS = np.einsum("gid,gid->d", R, R)
            else:
                R = grp.rows_sparse(T)
                dS = np.asarray(R.multiply(R).sum(axis=0)).ravel()
        self.diag_sigma = dS
        dq = Dg + dS
        self.eps = proximal_terms(dq)
        self._prec = None

    # --- the operator -------------------------------------------------------------------------------------------
    @property
    def M(self):
        """``(G, K, K)``: ``M_g = T_g^T T_g`` on the used rows (a batched product of small matrices: the preconditioner
        and the trials of option ``bound_reuse`` need only its weighted mean and diagonal)."""
        if self._M is None:
            Tr = self._Tr
            self._M = np.matmul(Tr.transpose(0, 2, 1), Tr)
        return self._M

    def sigma_matvec(self, v):
        """``Sigma v`` (the bound's curvature only)."""
        if self.template:
            U = self.X @ v[self.cmat].T  # (G, K): x_g^T v_y
            B = np.matmul(self.M, U[:, :, None])[:, :, 0]  # (G, K): M_g U_g
            out = np.zeros_like(v)
            out[self.cmat] = (self.XT @ B).T
            return out
        grp, T = self.grp, self.T
        s = grp.fmul(v).reshape(grp.G, grp.c, 1)
        t = np.matmul(T.transpose(0, 2, 1), np.matmul(T, s))
        return grp.ftmul(t.reshape(grp.G, grp.c))

    def matvec(self, v):
        """``(H + rho I + Sigma) v``."""
        return self.Dg * v + self.sigma_matvec(v)

    # --- preconditioner -------------------------------------------------------------------------------------------
    def precondition(self, r):
        """``P^{-1} r`` (Kronecker when the regularizer is the same in every class block, else Jacobi)."""
        if self._prec is None:
            self._prec = self._build_prec()
        return self._prec(r)

    def kron_parts(self):
        """``(U, V, den, W)`` of the Kronecker preconditioner ``Pbar`` (``Mbar = U Lambda U^T``, ``C V = (B + C) V
        Gamma``, ``den = 1 - Gamma + Lambda Gamma``, ``W = B + C``), or None when it does not apply (Jacobi)."""
        if self._prec is None:
            self._prec = self._build_prec()
        return self._kron

    def precondition_matvec(self, v, regularized=True):
        """``Pbar v``: ``Y B + Mbar Y C = U [(U^T Y W V) * den] V^T W`` on the template columns (``V^{-1} = V^T W``),
        the diagonal ``dq`` elsewhere (option ``bound_reuse``'s residual test, :mod:`.reuse_metric`).
        ``regularized=False``: without the ``delta`` of ``B`` and the ``eps`` of ``dq`` (the flat directions of
        the bound stay flat, so the range test sees them)."""
        U, V, den, W = self.kron_parts()
        out = self._dq * v
        out[self.cmat] = U @ (((U.T @ v[self.cmat] @ W @ V) * den) @ V.T @ W)
        if not regularized:
            out -= self.eps * v
            out[self.cmat] -= (self._kron_delta - self.eps[self.cmat]) * v[self.cmat]
        return out

    _kron = None

    def _build_prec(self):
        dq = self.Dg + self.diag_sigma + self.eps
        self._dq = dq
        jac = 1.0 / dq
        if not self.template:
            return lambda r: jac * r
        h = self.Dg[self.cmat]  # (K, d')
        if not np.all(h == h[0]) or not kron_preconditioner_fits(self.grp):
            return lambda r: jac * r
        kc = _kron_cache(self.grp)
        V, gam = _generalized_pairs(kc, h[0], float(self.eps.max(initial=0.0)))
        w = kc["w"]
        Mbar = self._mbar(w)
        lam, U = np.linalg.eigh(0.5 * (Mbar + Mbar.T))
        lam = np.maximum(lam, 0.0)
        den = 1.0 - gam[None, :] + lam[:, None] * gam[None, :]  # > 0: gam < 1 since B > 0
        cmat = self.cmat
        self._kron = (U, V, den, kc["pairs"][h[0].tobytes()][2])
        self._kron_delta = kc["pairs"][h[0].tobytes()][3]

        def apply(r):
            out = jac * r  # columns outside the template: Q is diagonal there
            Z = (U.T @ r[cmat] @ V) / den
            out[cmat] = U @ Z @ V.T
            return out
        return apply


    def _mbar(self, w):
        """``Mbar = sum_g w_g M_g``; with ``M_g = T_g^T T_g``: ``Tw^T Tw``, ``Tw`` the stacked ``sqrt(w_g) T_g`` (one GEMM,
        no ``(G, K, K)`` tensor)."""
        Tr = self._Tr
        K = Tr.shape[2]
        Tw = (Tr * np.sqrt(w)[:, None, None]).reshape(-1, K)
        return Tw.T @ Tw


class KronHessian(StructuredSigma):
    """The Kronecker approximation ``I_K (x) B + Mbar (x) C`` of the objective's **Hessian** (not of the bound) for
    class-template features: the first metric of option ``bound_reuse`` (docs/majorize.md section 2).

    The Hessian of ``c_g log Z_g`` is ``F_g^T (diag(W_g) - W_g W_g^T / c_g) F_g`` with the softmax weights
    ``W_g = c_g p_g`` of :meth:`.groups.PaddedGroups.value_weights`, i.e. ``M_g = diag(W_g) - W_g W_g^T / c_g`` in place
    of the bound's ``T_g^T T_g``: no factors ``T``, and ``Mbar = diag(sum_g w_g W_g) - Ww^T Ww`` (``Ww`` the rows
    ``sqrt(w_g / c_g) W_g``) is one ``G x K`` GEMM. Only the preconditioner's solve and product exist (no CG)."""

    def __init__(self, grp, W, Dg):
        self.grp, self.T, self.Dg = grp, None, Dg
        rows = grp.template[0]
        kc = _kron_cache(grp)
        self.template = True
        self.cmat, self.X, self.XT = kc["cmat"], kc["X"], kc["XT"]
        Wr = W if len(rows) == W.shape[1] else W[:, rows]
        self._Wr = Wr
        self._Tr = None
        mdiag = Wr - Wr * Wr / grp.coef[:, None]  # M_g[y, y] = W_gy (1 - p_gy) >= 0
        dS = np.zeros(grp.d)
        dS[self.cmat] = (kc["X2T"] @ mdiag).T
        self.diag_sigma = dS
        self.eps = proximal_terms(Dg + dS)
        self._prec = None

    @property
    def M(self):
        raise NotImplementedError("KronHessian approximates the Hessian for trials only (no CG matvec)")

    def _mbar(self, w):
        Wr = self._Wr
        Ww = Wr * np.sqrt(w / self.grp.coef)[:, None]
        return np.diag(w @ Wr) - Ww.T @ Ww


def proximal_terms(dq, capped=True):
    """The proximal term added to each diagonal entry ``dq_j`` of the majorizer's curvature:
    ``min(1e-10 max_i dq_i, 1e-8 dq_j)``, and ``1e-10 max_i dq_i`` where ``dq_j = 0`` (a flat coordinate of the bound).

    ``1e-10 max_i dq_i`` alone swamped the curvature of every coordinate below ``1e-10`` of the largest (features of
    scale 1 next to features of scale 1e8, or a ridge of 1e12 next to an unpenalized intercept): the step barely
    moved those coordinates (1000 iterations to the limit) or its residual there read as a flat direction (status
    ``unbounded`` on a problem with a finite optimum). The cap ``1e-8 dq_j`` keeps each term below ``1e-8`` of its own
    coordinate's curvature and leaves the term unchanged wherever ``dq_j >= 0.01 max_i dq_i``."""
    d = np.abs(dq)
    top = 1e-10 * max(float(d.max(initial=0.0)), 1e-300)
    return np.where(d > 0, np.minimum(top, 1e-8 * d), top) if capped else np.full(d.shape, top)


def _kron_cache(grp):
    """Per-solve constants of the class-template operator (cached on the padded groups)."""
    kc = getattr(grp, "_kron", None)
    if kc is None:
        _, cols, X = grp.template
        if sp.issparse(X):  # sparse template features (.templates.DENSE_FRACTION) stay sparse
            X2 = X.multiply(X).tocsr()
            sq = np.asarray(X2.sum(axis=1)).ravel()
            kc = {"X": X, "XT": X.T.tocsr(), "X2T": X2.T.tocsr(), "C": (X.T @ X).toarray()}
        else:
            X = np.ascontiguousarray(X, dtype=float)
            sq = np.einsum("gj,gj->g", X, X)
            kc = {"X": X, "XT": np.ascontiguousarray(X.T), "X2T": np.ascontiguousarray((X * X).T), "C": X.T @ X}
        kc.update({"cmat": np.asarray(cols, dtype=np.int64), "w": sq / max(float(sq.sum()), 1e-300), "pairs": {}})
        grp._kron = kc
    return kc


def _generalized_pairs(kc, h, eps):
    """``(V, gamma)`` with ``C V = (B + C) V diag(gamma)``, ``V^T (B + C) V = I``, ``B = diag(h) + delta I``."""
    key = h.tobytes()
    got = kc["pairs"].get(key)
    if got is None:
        C = kc["C"]
        delta = max(eps, 1e-10 * max(float(h.max(initial=0.0)), float(np.diag(C).max(initial=0.0)), 1e-300))
        W = C.copy()
        W.flat[::C.shape[0] + 1] += h + delta
        gam, V = sla.eigh(C, W, check_finite=False)
        got = (V, np.clip(gam, 0.0, 1.0 - 1e-16), W, delta)
        kc["pairs"] = {key: got}  # one regularizer per solve
    return got[:2]


def cg_step(op, u, rtol=CG_RTOL, maxit=CG_MAXIT):
    """Minimise ``m(D) = u^T D + 1/2 D^T Q D`` by PCG on ``(Q + eps I) D = -u`` (``Q = op``).

    Returns ``(D, m(D), info)`` with ``info = {"flat": ||Q D + u||, "cg_iterations": k}``; ``flat`` is 0 when CG
    stopped at ``maxit`` or ``rtol > FLAT_RTOL`` (an inexact step is still a descent step of the majorizer, but
    its residual says nothing about flat directions)."""
    eps = op.eps
    n = u.size
    x = np.zeros(n)
    r = -u.copy()
    un = math.sqrt(float(u @ u))
    if un == 0.0:
        return x, 0.0, {"flat": 0.0, "cg_iterations": 0}
    z = op.precondition(r)
    p = z.copy()
    rz = float(r @ z)
    k = 0
    converged = False
    while k < maxit:
        Ap = op.matvec(p) + eps * p
        pAp = float(p @ Ap)
        if not pAp > 0:
            break
        a = rz / pAp
        x += a * p
        r -= a * Ap
        k += 1
        if math.sqrt(float(r @ r)) <= rtol * un:
            converged = True
            break
        z = op.precondition(r)
        rz_new = float(r @ z)
        p *= rz_new / rz
        p += z
        rz = rz_new
    Qx = op.matvec(x)
    res = Qx + u
    mval = float(u @ x + 0.5 * (x @ Qx))
    if mval > 0:  # rounding on a flat problem: no step is the majorizer's minimiser
        x, mval = np.zeros(n), 0.0
    # the residual measures the gradient outside the curvature's range (unbounded objectives) only when the
    # step was solved to a tight tolerance; loose steps leave unbounded problems to the divergence rule
    exact = converged and rtol <= FLAT_RTOL
    return x, mval, {"flat": math.sqrt(float(res @ res)) if exact else 0.0, "cg_iterations": k}


# --- choosing the step solver by predicted cost ---------------------------------------------------------------------
#: the low-rank bound (Algorithm 4) needed about 4x the iterations of the exact bound (SRBCT, docs/majorize.md s5)
LOWRANK_ITER_FACTOR = 4.0
#: flop-equivalent of one rank-one update of Algorithm 4 in Python (about 15 us)
LOWRANK_UPDATE_OVERHEAD = 7.5e4
#: largest dense n x n (or Woodbury K x K) matrix the automatic choice will form (1 GB)
DENSE_MAX_ENTRIES = 1.25e8
#: programs with at most this many parameters are costed without detecting class templates
SMALL_N = 256


def kron_preconditioner_fits(grp) -> bool:
    """The Kronecker preconditioner is used when applying it costs at most about a matvec (``d' <= 2 G``) and its
    one-off generalized eigenproblem is small (``d' <= 3000``)."""
    tpl = grp.template
    if tpl is None:
        return False
    dp = tpl[2].shape[1]
    return dp <= 2 * grp.G and dp <= 3000


def predicted_costs(model, opts, cg_iterations=None):
    """Predicted flops of one majorizer step by each applicable solver (``{"dense", "woodbury", "cg", "lowrank"}``).

    dense: forming ``Sigma`` (class templates ``2 K^2 G d'^2``, else ``2 G (c-1) n^2``) + Cholesky ``n^3/3``;
    woodbury: the row-space capacitance ``2 G^2 c^2 (c-1)`` + its Cholesky ``(G (c-1))^3 / 3`` + ``4 G c n``;
    cg: iterations x (matvec ``4 G d' K + 4 G (c-1) K`` for templates (``4 nnz(X) K + ...`` when sparse), else ``4 nnz(F) + 4 G c (c-1)``, plus the
    preconditioner), the iterations measured on the previous step (``CG_GUESS`` before); lowrank (only with
    ``bound='auto'``): ``G (c-1)`` sequential rank-one updates, times ``LOWRANK_ITER_FACTOR`` more iterations.
    Flops outside the formation GEMM count ``SLOW_FLOP`` times; each solver gets its per-call overhead in
    flop-equivalents. Solvers that do not apply are left out."""
    grp, n = model.groups, model.n
    out = {}
    exact = opts.bound in ("full", "auto")
    if grp is None:
        out["dense"] = DENSE_OVERHEAD
        return out
    G, c = grp.G, grp.c
    # small programs: skip the (one-off, ~ms) template detection; the generic costs are upper bounds
    tpl = grp.template if (n > SMALL_N or grp._template is not False) else None
    # with constraints the step QP needs the dense curvature whatever the bound, so bound='full' keeps
    # it (dropping it would silently swap in the looser low-rank bound and still form an n x n matrix)
    if exact and (n * n <= DENSE_MAX_ENTRIES or (model.constrained and opts.bound == "full")):
        if tpl is not None and (grp._dense2 is None or c >= 8):  # as PaddedGroups.sigma decides
            K, dp = len(tpl[0]), tpl[2].shape[1]
            packed = G * dp * (dp + 1) / 2 <= grp.PACKED_LIMIT  # PaddedGroups._sigma_template's packed GEMM
            form = (0.5 if packed else 2.0) * K * (K + packed) * G * dp * (dp + packed)
        else:
            form = 2.0 * G * (c - 1) * n * n
        out["dense"] = form + SLOW_FLOP * n ** 3 / 3.0 + DENSE_OVERHEAD
    if model.constrained and model.H_diagonal and exact and model.pos is not None:
        woodbury = _constrained_woodbury_cost(model, G, c, n)
        if woodbury is not None:
            out["woodbury"] = woodbury
    if model.constrained or not model.H_diagonal:
        if opts.bound == "auto" or "dense" not in out:
            out["lowrank"] = _lowrank_cost(G, c, n, opts.rank)
        return out
    if exact:
        rows = G * (c - 1)
        if rows * rows <= DENSE_MAX_ENTRIES:
            out["woodbury"] = (SLOW_FLOP * (2.0 * G * G * c * c * (c - 1) + rows ** 3 / 3.0 + 4.0 * G * c * n)
                               + DENSE_OVERHEAD)
        its = CG_GUESS if cg_iterations is None else max(int(cg_iterations), 1)
        if tpl is not None:
            K, dp = len(tpl[0]), tpl[2].shape[1]
            mv = 4.0 * (tpl[2].nnz if sp.issparse(tpl[2]) else G * dp) * K + 4.0 * G * (c - 1) * K
            pre = 4.0 * (K * K * dp + K * dp * dp) if kron_preconditioner_fits(grp) else 2.0 * n
        else:
            mv = 4.0 * grp.Apad.nnz + 4.0 * G * c * (c - 1)
            pre = 2.0 * n
        out["cg"] = its * (SLOW_FLOP * (mv + pre) + CG_OVERHEAD) + SLOW_FLOP * 2.0 * G * (c - 1) * c
    if opts.bound == "auto":
        out["lowrank"] = _lowrank_cost(G, c, n, opts.rank)
    return out


#: bounds beyond the last working set's that the constrained Woodbury cost expects to enter the next one
WORKING_SET_MARGIN = 32
#: projected-Newton iterations the bounds-only Woodbury step is costed at (.step_bounds)
PN_GUESS = 8
#: ... and the step with bounds and a few rows, in units of the bounds-only one (.step_rows: a few dual Newton steps,
#: each a warm-started box solve, mostly of one or two iterations)
ROWS_GUESS = 2


def _constrained_woodbury_cost(model, G, c, n):
    """Predicted flops of a constrained row-space Woodbury step (:mod:`.step_operator`): the cheaper of the step QP's
    methods that apply (:func:`woodbury_step_qp_costs`); None when none does (the dense step QP then)."""
    costs = woodbury_step_qp_costs(model, G, c, n)
    return min(costs.values()) if costs else None


def woodbury_step_qp_costs(model, G, c, n):
    """Predicted flops of the constrained row-space Woodbury step by each method that applies (empty when the active
    set would keep more rows than its dense copy allows):

    * ``'projected_newton'`` (bounds only, :mod:`.step_bounds`): ``PN_GUESS`` iterations of a capacitance and two
      feature products, whatever the number of active bounds;
    * ``'rows_newton'`` (bounds and at most :data:`.step_rows.MAX_ROWS` rows, :mod:`.step_rows`): ``ROWS_GUESS``
      times that, with the ``m`` columns of the free block's solve per dual step;
    * ``'active_set'`` (rows): the capacitance and its Cholesky as unconstrained, plus one solve (two feature products,
      two triangular solves) for the gradient and for each constraint that can enter the working set: the rows, and
      the bounds of the last working set (``model.working_set_hint``: those active at the start, then those of the
      last step QP) plus ``WORKING_SET_MARGIN`` (without a hint: every finitely bounded variable; before 2026-11-24
      always that, so a box on all 9236 SRBCT parameters, inactive at the optimum, chose the dense step: 35 s for two
      iterations)."""
    rows = G * (c - 1)
    m = model.A.shape[0]
    if rows * rows > DENSE_MAX_ENTRIES or m > MAX_DENSE_ROWS:
        return {}
    capacitance = 2.0 * G * G * c * c * (c - 1) + rows ** 3 / 3.0
    if not m:
        return {"projected_newton": SLOW_FLOP * PN_GUESS * (capacitance + 8.0 * G * c * n) + DENSE_OVERHEAD}
    out = {}
    if m <= MAX_ROWS:
        out["rows_newton"] = (SLOW_FLOP * ROWS_GUESS * PN_GUESS * (capacitance + (8.0 + 4.0 * m) * G * c * n)
                              + DENSE_OVERHEAD)
    bounded = model.n_bounded   # (MajorizeModel counts them once; the bounds never change)
    hint = model.working_set_hint   # bounds in the last working set (or active at the start)
    k = min(m + (bounded if hint is None else min(bounded, hint + WORKING_SET_MARGIN)), n)
    solve = 4.0 * G * c * n + 2.0 * rows * rows
    out["active_set"] = SLOW_FLOP * (capacitance + (k + 1) * solve + 2.0 * k * k * n) + DENSE_OVERHEAD
    return out


def _lowrank_cost(G, c, n, k):
    return LOWRANK_ITER_FACTOR * G * (c - 1) * (LOWRANK_UPDATE_OVERHEAD + 4.0 * n * k + 10.0 * (k + 1) ** 3)


def choose_step_solver(model, opts, cg_iterations=None) -> str:
    """``'dense' | 'woodbury' | 'cg' | 'lowrank'`` for the next step: the option when it is not ``'auto'``
    (checked for applicability by :func:`check_step_solver`), else the cheapest by :func:`predicted_costs`."""
    if opts.bound == "lowrank":
        return "lowrank"
    if opts.step_solver != "auto":
        return opts.step_solver
    # the costs depend on the model (fixed), the options below, the CG iterations, the working-set hint and whether
    # class templates were detected: the last choice is kept for its key (a small solve asks 3-4 times at set-up)
    grp = getattr(model, "groups", None)
    key = (opts.bound, opts.rank, cg_iterations, getattr(model, "working_set_hint", None),
           grp is not None and grp._template is not False)
    last = getattr(model, "_step_choice", None)
    if last is not None and last[0] == key:
        return last[1]
    costs = predicted_costs(model, opts, cg_iterations)
    choice = min(costs, key=costs.get)
    model._step_choice = (key, choice)
    return choice


def check_step_solver(model, opts):
    """Reject an explicit ``step_solver`` the program cannot use (message names why)."""
    s = opts.step_solver
    if s in ("auto", "dense"):
        return
    if opts.bound == "lowrank":
        raise InvalidOptionError(f"step_solver={s!r} solves the full bound; bound='lowrank' has its own "
                                 "Woodbury solve (use step_solver='auto')")
    if model.constrained and s != "woodbury":
        raise InvalidOptionError(f"step_solver={s!r} needs an unconstrained problem: with linear constraints or "
                                 "bounds the step is a QP on the dense curvature or, with 'woodbury', on the "
                                 "bound's row space (use 'auto', 'dense' or 'woodbury')")
    if not model.H_diagonal:
        raise InvalidOptionError(f"step_solver={s!r} needs a diagonal quadratic part (e.g. a ridge penalty)")
    if model.pos is None:
        raise InvalidOptionError(f"step_solver={s!r}: the objective has no partition functions to bound")
    if s == "cg" and model.groups is None:
        raise InvalidOptionError("step_solver='cg' needs partition functions with at most "
                                 f"{model.PADDED_MAX_ROWS} configurations each (the padded row-space form)")
