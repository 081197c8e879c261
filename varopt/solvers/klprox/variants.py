r"""The proximal-point and the stochastic (minibatch) variants of the KL-proximal solver.

**Proximal point** (Khan, Baque, Fleuret & Fua 2015, section 3, eq. (2)): ``q_{k+1} = argmax_q L(q) -
KL(q || q_k) / beta``. With ``r = 1/(1 + beta)`` the subproblem's objective times ``1 - r`` is the -ELBO of
the tempered joint

    F'(w) = (1 - r) F(w) + r (-log q_k(w)),

whose Gaussian part has precision ``P' = (1 - r) P + r V_k^-1``, linear term ``(1 - r) c - r V_k^-1 m_k``,
and likelihood terms scaled by ``1 - r`` (docs/klprox.md, section 4b). Each subproblem is solved by the
proximal-gradient iterations (16)-(17) with the adaptive rule, started at ``q_k`` (where the KL term is 0):
they never raise the subproblem's objective, so ``-L(q_{k+1}) <= -L(q_{k+1}) + KL/beta <= -L(q_k)``: the
ELBO never decreases, however inexactly the subproblem is solved. The inner state maps back by
``V^-1 = P' + A^T Gt' A = P + A^T (r Gt_k + Gt') A``. Offered where the ELBO is a closed form (Gaussian,
Poisson ``exp``, Laplace ``abs`` terms), as in the paper's section 3.

**Stochastic** (``batch_size < N``): the linearization (13) of ``f = sum_n E[l_n]`` estimated from a batch
``B`` of likelihood terms drawn by :class:`varopt.oracles.Sampler` (seeded), scaled by ``N/|B|``:

    Lam+ = (1 - rho) Lam + rho (P + (N/|B|) A_B^T diag(gamma_B) A_B),
    m+   = m + rho Lam+^-1 g_hat,   g_hat = -(P m + c + A^T lin + (N/|B|) A_B^T alpha_B),

(the natural-parameter mean step, default for batches; ``mean_step='paper'`` uses (16),
``m+ = m + rho [rho P + (1 - rho) Lam]^-1 g_hat``, which overshoots on noisy batches of ``exp`` terms),

``rho = beta_k/(1 + beta_k)``, ``beta_k = beta (1 + k)^-step_decay`` (the natural-gradient SVI step of
Theorem 1 with Robbins-Monro steps for ``1/2 < step_decay <= 1``). The sampling units are the program's
finite-sum samples: terms (1-D rows, whole softmax groups with their J x J curvature blocks) sharing a
label (as :class:`varopt.oracles.FiniteSumOracle` reads the labels the builders and the CVXPY front-end
attach), else every term its own sample; ``N`` above is the number of samples. With ``|B| = N`` and ``step_decay = 0``
this is the deterministic update with ``step_rule='fixed'`` (``average=False``). A step whose result is not
finite or whose precision is not positive definite (a noisy batch can overflow ``exp`` terms) is retried
with half the step size, and the factor is kept for the later steps (``info['shrunk_steps']``). ``average=True`` returns
the average of the natural parameters ``(Lam, Lam m)`` over the second half of the ``max_iter`` steps
(Polyak-Ruppert tail averaging; an average of Gaussian natural parameters is a Gaussian). The precision ``Lam`` is held directly
(``O(|B| D^2 + D^3)`` per step, independent of N); the -ELBO is evaluated exactly, over all terms, at the
returned ``q``.
"""
from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ...errors import InvalidOptionError
from ...oracles import Sampler
from .posterior import FullGaussian, _chol, _tri

#: smallest step size of the stochastic safeguard
BETA_MIN = 1e-12

_LOG2PI = math.log(2.0 * math.pi)


def _require_closed_form(view, fams):
    bad = [fams[k].name for k, _ in view.blocks if not fams[k].closed_form]
    if view.groups and not fams["softmax"].closed_form:
        bad.append("log-sum-exp (softmax, quadrature; softmax='bound' is closed form)")
    if bad:
        raise InvalidOptionError(f"klprox: algorithm='proximal-point' needs an ELBO in closed form (Gaussian, exp "
                                 f"(Poisson), abs (Laplace) terms); this model has {', '.join(sorted(set(bad)))} terms: "
                                 "use algorithm='proximal-gradient'")


def _tempered_view(view, st, r):
    """The view of ``F' = (1 - r) F + r (-log q_k)``, ``q_k = N(m_k, Lam_k^-1)`` (the subproblem of (2))."""
    Lam = st.L @ st.L.T
    m = st.m
    logdet = 2.0 * float(np.sum(np.log(np.diag(st.L))))
    P2 = (1.0 - r) * view.P + r * Lam
    P2 = 0.5 * (P2 + P2.T)
    k2 = (1.0 - r) * view.k + r * (0.5 * m @ Lam @ m - 0.5 * logdet + 0.5 * view.D * _LOG2PI)
    return dataclasses.replace(view, P=P2, c=(1.0 - r) * view.c - r * (Lam @ m), k=k2, coef=(1.0 - r) * view.coef,
                               lin=(1.0 - r) * view.lin, P_chol=np.linalg.cholesky(P2))


def proximal_point(kp):
    """The KL proximal-point iterations (2) over ``kp`` (a :class:`~.solver.KLProx` on the full form)."""
    from .solver import KLProx
    view, post, opts, run = kp.view, kp.post, kp.opts, kp.run
    _require_closed_form(view, kp.fams)
    st, _ = kp.start()
    cur = kp.state(st)
    r = 1.0 / (1.0 + opts.beta)
    inner_total, status, msg = 0, None, ""
    run.incumbent(post.mean(st), objective=cur.f)
    for _ in run.iterations():
        if max(cur.res) <= opts.gtol:
            status, msg = "converged", f"stationarity residuals {cur.res[0]:.2e}, {cur.res[1]:.2e} <= gtol"
            break
        iview = _tempered_view(view, cur.st, r)
        ikp = KLProx(iview, FullGaussian(iview), kp.fams, opts, None)
        icur = ikp.state(ikp.post._state(cur.st.m.copy(), (1.0 - r) * cur.st.gt))   # q_k itself
        ibeta, n_inner = 1.0, 0
        # at q_k the subproblem's gradient is (1 - r) times the ELBO's: solve it below that scale
        inner_tol = 0.1 * (1.0 - r) * opts.gtol
        for j in range(opts.inner_max_iter):
            if max(icur.res) <= inner_tol:
                break
            new, ibeta, ist, _, _ = ikp.advance(icur, ibeta, j)
            if ist is not None:        # flat to rounding or stalled: keep the last accepted point
                break
            icur, n_inner = new, n_inner + 1
        inner_total += n_inner
        new = kp.state(post._state(icur.st.m, r * cur.st.gt + icur.st.gt))
        if not new.f <= cur.f + kp.scale * 1e-14 or n_inner == 0:
            status, msg = "converged", (f"the proximal subproblem makes no progress (residuals {cur.res[0]:.2e}, "
                                        f"{cur.res[1]:.2e})")
            if max(cur.res) > 1e-6:
                status = "error"
            break
        cur = new
        run.incumbent(objective=cur.f)
        run.record(objective=cur.f, inner_iterations=n_inner, residual_mean=cur.res[0], residual_cov=cur.res[1])
    return kp.finish(cur, status, msg, inner_iterations=inner_total, beta=opts.beta)


class _PrecisionState(SimpleNamespace):
    """``q = N(m, Lam^-1)`` with ``Lam`` held directly (the stochastic variant); the methods of
    :class:`FullGaussian` read ``m``, ``L`` and ``W`` from it."""


class _Terms:
    """The likelihood terms of a view as sampling units: every 1-D row, and every softmax group (J rows)."""

    def __init__(self, view):
        self.view = view
        self.n1 = view.N - sum(rs.stop - rs.start for _, rs, _ in view.groups)
        self.offsets = [self.n1]
        for J, rs, _ in view.groups:
            self.offsets.append(self.offsets[-1] + (rs.stop - rs.start) // J)
        self.T = self.offsets[-1]
        # samples: the program's finite-sum labels (rows of one data point share a label, as
        # FiniteSumOracle reads them), else every term its own sample
        lab = view.term_labels
        if lab is not None and lab.size == self.T:
            _, self.sample_of = np.unique(lab, return_inverse=True)
        else:
            self.sample_of = np.arange(self.T)
        self.S = int(self.sample_of.max()) + 1 if self.T else 0
        order = np.argsort(self.sample_of, kind="stable")
        self._order, self._ptr = order, np.searchsorted(self.sample_of[order], np.arange(self.S + 1))

    def of_samples(self, drawn, counts):
        """Terms of the drawn samples and their weights ``count * S / |B|``."""
        sizes = self._ptr[drawn + 1] - self._ptr[drawn]
        idx = np.concatenate([self._order[self._ptr[d]:self._ptr[d + 1]] for d in drawn]) if drawn.size else drawn
        w = np.repeat(counts * (self.S / counts.sum()), sizes)
        o = np.argsort(idx, kind="stable")
        return idx[o], w[o]

    def batch(self, fams, terms, w, A, m, L):
        """``(A_B, alpha_hat, Gamma_hat)`` of the drawn terms with weights ``w``: rows of A, the weighted
        ``coef E[l']`` per row and the weighted ``coef E[l'']`` as a block-diagonal sparse matrix."""
        v = self.view
        parts = []                                                   # (rows, a_hat, block rows, cols, vals)
        one = terms < self.n1
        rows1, w1 = terms[one], w[one]
        if rows1.size:
            mt = A[rows1] @ m + v.b[rows1]
            W1 = _tri(L, A[rows1].T.toarray())
            vt = np.maximum(np.einsum("ij,ij->j", W1, W1), 1e-300)
            d1, d2 = np.empty(rows1.size), np.empty(rows1.size)
            for kind, sl in v.blocks:
                sel = (rows1 >= sl.start) & (rows1 < sl.stop)
                if sel.any():
                    _, d1[sel], d2[sel] = fams[kind].expect(mt[sel], vt[sel])
            cf = v.coef[rows1]
            k = np.arange(rows1.size)
            parts.append((rows1, w1 * cf * d1, k, k, w1 * 2.0 * cf * d2))
        for (J, rs, _), lo, hi in zip(v.groups, self.offsets[:-1], self.offsets[1:]):
            sel = (terms >= lo) & (terms < hi)
            if not sel.any():
                continue
            g, wg = terms[sel] - lo, w[sel]
            rows = (rs.start + J * g[:, None] + np.arange(J)[None, :]).ravel()
            AB = A[rows]
            mt = (AB @ m + v.b[rows]).reshape(-1, J)
            WB = _tri(L, AB.T.toarray()).reshape(L.shape[0], -1, J)
            Vt = np.einsum("dgi,dgj->gij", WB, WB)
            _, d1, d2 = fams["softmax"].expect_group(mt, Vt)
            cf = v.coef[rows[::J]]
            G = g.size
            bi = (J * np.arange(G)[:, None, None] + np.arange(J)[None, :, None] + np.zeros((1, 1, J), int)).ravel()
            bj = (J * np.arange(G)[:, None, None] + np.arange(J)[None, None, :] + np.zeros((1, J, 1), int)).ravel()
            parts.append((rows, ((wg * cf)[:, None] * d1).ravel(), bi, bj, ((2.0 * wg * cf)[:, None, None] * d2).ravel()))
        rows = np.concatenate([p[0] for p in parts])
        a_hat = np.concatenate([p[1] for p in parts])
        off, bi, bj = 0, [], []
        for p in parts:
            bi.append(p[2] + off), bj.append(p[3] + off)
            off += p[0].size
        Gm = sp.csr_matrix((np.concatenate([p[4] for p in parts]), (np.concatenate(bi), np.concatenate(bj))),
                           shape=(rows.size, rows.size))
        return A[rows], a_hat, Gm


def stochastic(kp):
    """Minibatch KL proximal-gradient steps (module doc); the -ELBO is evaluated exactly at the end."""
    view, post, opts, run = kp.view, kp.post, kp.opts, kp.run
    N = view.N
    if N == 0:
        return kp.solve()
    A = view.A.tocsr()
    AT_lin = np.asarray(A.T @ view.lin).ravel()
    terms = _Terms(view)
    rng = np.random.default_rng(opts.seed)
    sampler = Sampler(terms.S, opts.batch_size, opts.sampling, rng)
    st0, _ = kp.start()
    m = st0.m.copy()
    Lam = st0.L @ st0.L.T
    run.incumbent(m, objective=math.nan)
    # tail averaging of the natural parameters (Lam, Lam m) over the second half of the planned steps
    avg_from = (opts.max_iter // 2 + 1) if (opts.average and opts.max_iter) else None
    acc_L, acc_e, n_avg = np.zeros_like(Lam), np.zeros(view.D), 0
    scale, shrunk, status, msg = 1.0, 0, None, ""
    natural = opts.mean_step != "paper"         # 'auto' is the natural step here
    for it in run.iterations():
        B = sampler.next()
        drawn, counts = np.unique(B, return_counts=True)
        tsel, wts = terms.of_samples(drawn, counts)
        with np.errstate(over="ignore", invalid="ignore"):
            AB, a_hat, Gm = terms.batch(kp.fams, tsel, wts, A, m, _chol(Lam))
            g = -(view.P @ m + view.c + AT_lin + np.asarray(AB.T @ a_hat).ravel())
            curv = np.asarray(AB.T @ (Gm @ AB.toarray()))
        while True:
            # a noisy step can leave the domain (exp terms overflow, Lam loses definiteness): the step size is
            # halved, for this and all later steps, until the new q is finite and Lam positive definite
            beta = opts.beta * scale * (1.0 + (it - 1)) ** (-opts.step_decay)
            rho = beta / (1.0 + beta)
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    Lam2 = (1.0 - rho) * Lam + rho * (view.P + curv)
                    Lam2 = 0.5 * (Lam2 + Lam2.T)
                    # natural: preconditioned by the new precision (batch curvature included); paper: (16)
                    M = Lam2 if natural else rho * view.P + (1.0 - rho) * Lam
                    m2 = m + rho * sla.cho_solve((_chol(M), True), g, check_finite=False)
                    ok = bool(np.all(np.isfinite(m2)) and np.all(np.isfinite(Lam2)))
                    if ok:
                        _chol(Lam2)
            except (np.linalg.LinAlgError, ValueError):
                ok = False
            if ok:
                break
            scale *= 0.5
            shrunk += 1
            if beta < BETA_MIN:
                status, msg = "error", (f"stochastic step {it} has no finite step with beta >= {BETA_MIN:g} (the batch "
                                        "gradient overflows): use a smaller beta, a larger batch_size or rescale the data")
                break
        if status is not None:
            break
        m, Lam = m2, Lam2
        if avg_from is not None and it >= avg_from:
            acc_L += Lam
            acc_e += Lam @ m
            n_avg += 1
        run.record(beta=beta, batch=int(B.size))
    if n_avg:
        Lam = acc_L / n_avg
        m = sla.cho_solve((_chol(Lam), True), acc_e / n_avg, check_finite=False)
    L = _chol(Lam)
    st = _PrecisionState(m=m, L=L, W=_tri(L, post.AT), gt=None)
    cur = kp.state(st)
    run.incumbent(m, objective=cur.f)
    return kp.finish(cur, status, msg, beta=beta, batch_size=opts.batch_size, sampling=opts.sampling,
                     averaged_steps=n_avg, shrunk_steps=shrunk, samples=terms.S)
