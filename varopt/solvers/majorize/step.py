"""Algorithm 2 step 3 (Jebara & Choromanska 2012): minimise the quadratic majorizer over ``Lambda``.

At ``theta~`` with ``u = grad f(theta~)`` the bound gives ``f(theta~ + D) <= f(theta~) + m(D)``,

    m(D) = u^T D + 1/2 D^T (H + Sigma + rho I) D,

``Sigma`` the bound's curvature (Algorithm 1 / 3 / 4), ``rho`` the option ``ridge``. Without
constraints the minimiser is ``D = -(H + Sigma + rho I)^{-1} u``: Cholesky (:func:`psd_solve`,
minimum norm when singular), exact Woodbury ``Sigma = diag(Dg) + R^T R`` when the bound has few
rows (:func:`woodbury_solve`, or the matrix-free row-space form of the padded groups), or the
low-rank bound of Algorithm 4. With linear constraints and bounds it is a convex QP in ``D``
(:class:`.step_qp.StepQP`: warm-started active set, else varopt.lpqp); with the Woodbury step solver its
active set works on the factored row-space operator of :mod:`.step_operator` (``Q`` never formed). Every step also reports
``flat = ||(H + Sigma) D + u||``: the part of
``u`` outside the range of the curvature (nonzero means an unbounded objective, docs/majorize.md
section 2).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack
import scipy.sparse as sp

from ...errors import SolverBugError
from .bound import compute_bound, min_norm_solve
from .lowrank import LowRankSigma, diagonal_dominance
from .structured import StructuredSigma, cg_step, choose_step_solver, proximal_terms

#: largest relative gap between ``u^T x`` and ``x^T Sigma x`` of a row-space Woodbury solution ``Sigma x = u`` (they are
#: equal when it is exact); beyond it the step is taken by CG
WOODBURY_CHECK = 1e-6


def woodbury_solve(Dg, R, u):
    """Solve ``(diag(Dg) + R^T R) x = u`` with ``Dg >= 0``, ``R`` (K x n), ``K << n`` (dense ``R``: groups
    too large for the padded row-space form of :meth:`.groups.PaddedGroups.woodbury_solve`).

    Coordinates with ``Dg > 0`` (a) use the Woodbury identity
    ``(Da + Ra^T Ra)^{-1} = Da^{-1} - Da^{-1} Ra^T (I + Ra Da^{-1} Ra^T)^{-1} Ra Da^{-1}``; the few with
    ``Dg = 0`` (b, e.g. unpenalized intercepts) are eliminated by their Schur complement, solved in the
    minimum-norm sense (a singular complement is a flat direction of the bound).
    """
    a = Dg > 0
    b = ~a
    Da, Ra = Dg[a], R[:, a]
    RaD = Ra / Da
    C = np.eye(R.shape[0]) + RaD @ Ra.T
    cf = sla.cho_factor(C, check_finite=False)

    def winv(V):
        DV = V / Da[:, None]
        return DV - RaD.T @ sla.cho_solve(cf, Ra @ DV, check_finite=False)
    x = np.zeros_like(u)
    if not np.any(b):
        x[a] = winv(u[a][:, None])[:, 0]
        return x
    Rb = R[:, b]
    X1 = winv(np.column_stack([u[a], Ra.T @ Rb]))
    xa0, Y = X1[:, 0], X1[:, 1:]
    RbRa = Rb.T @ Ra
    Sb = Rb.T @ Rb - RbRa @ Y
    rhs = u[b] - RbRa @ xa0
    xb = min_norm_solve(*np.linalg.eigh(0.5 * (Sb + Sb.T)), rhs)
    x[b] = xb
    x[a] = xa0 - Y @ xb
    return x


def gram(R) -> np.ndarray:
    """Dense ``R^T R``: BLAS on a dense copy unless ``R`` is very sparse (sparse x sparse is slow when dense)."""
    if sp.issparse(R):
        K, d = R.shape
        if R.nnz > 0.02 * K * d and K * d <= 2e8:
            Rd = R.toarray()
            return Rd.T @ Rd
        return np.asarray((R.T @ R).toarray())
    return R.T @ R


def proximal_cholesky(Q, capped=True):
    """Upper Cholesky factor (LAPACK ``potrf``) of ``Q`` plus the proximal terms :func:`.structured.proximal_terms`
    (``1e-10`` of the largest diagonal entry, at most ``1e-8`` of each coordinate's own), or None. ``capped=False``:
    ``1e-10`` of the largest diagonal entry everywhere (the metric of option ``bound_reuse``'s trials, which are
    accepted by their own decrease test and not by this solve's accuracy: capped, they took 499 iterations where 31
    sufficed on 60 samples of 400 features of scales 1e-8..1e8).

    The proximal term keeps the majorizer a majorizer and lets Cholesky factor a singular bound (flat
    directions, e.g. a softmax's common intercept shift, get almost no step since the right-hand
    side is orthogonal to them). LAPACK directly: scipy's cho_factor/cho_solve wrappers cost more
    than the factorization itself on the small systems of most models."""
    n = Q.shape[0]
    Qe = Q.copy()
    Qe.flat[::n + 1] += proximal_terms(Q.diagonal(), capped)
    cf, info = lapack.dpotrf(Qe, lower=False, clean=False, overwrite_a=True)
    return cf if info == 0 else None


def psd_solve(Q, rhs):
    """Minimiser of ``1/2 D^T Q D - rhs^T D`` for PSD ``Q``: Cholesky, or the minimum-norm solution
    ``Q^+ rhs`` when ``Q`` is singular (flat directions of the bound, e.g. shifting every class
    intercept of a softmax). The majorizer value ``-1/2 rhs^T Q^+ rhs <= 0`` keeps the step monotone."""
    cf = proximal_cholesky(Q)
    if cf is not None:
        sol, info = lapack.dpotrs(cf, rhs)
        if info == 0 and np.all(np.isfinite(sol)):
            return sol
    lam, U = np.linalg.eigh(0.5 * (Q + Q.T))
    if lam[-1] < 0 or not np.all(np.isfinite(lam)):
        raise SolverBugError("majorize: the bound curvature is not positive semidefinite")
    return min_norm_solve(lam, U, rhs)


def dense_step(Q, u):
    """The unconstrained step ``D = -Q^{-1} u`` with ``(D, m(D), {"flat": ||Q D + u||})``."""
    step = psd_solve(Q, -u)
    Qs = Q @ step
    r = Qs + u
    return step, float(u @ step + 0.5 * step @ Qs), {"flat": math.sqrt(float(r @ r))}


def lowrank_sigma(R, Hsp, ridge, rank, n):
    """Algorithm 4: ``Sigma <= V^T S V + D`` from the bound rows ``R``, with ``D_0 = ridge`` plus the diagonal
    dominance bound of ``H`` (:class:`.lowrank.LowRankSigma`)."""
    L = LowRankSigma(n, rank, diagonal_dominance(Hsp) + ridge)
    if R is not None:
        L.add_rows(R)
    return L


def lowrank_step(L, u):
    """The unconstrained step ``D = -(V^T S V + D)^{-1} u`` by Woodbury: ``(D, m(D), {"flat": ...})``."""
    try:
        step = -L.solve(u)
    except np.linalg.LinAlgError:
        # singular diagonal: add the smallest proximal term that makes it invertible
        L.D = L.D + 1e-8 * max(1.0, float(np.max(L.D, initial=0.0)))
        step = -L.solve(u)
    Ls = L.matvec(step)
    return step, float(u @ step + 0.5 * step @ Ls), {"flat": float(np.linalg.norm(Ls + u))}


def majorizer_step(model, x, u, opts, qp, S=None):
    """Minimise the majorizer ``m(D) = u^T D + 1/2 D^T Sigma D`` of a :class:`.model.MajorizeModel` over
    the feasible set.

    Returns ``(D, m(D), info, FD)``; ``FD`` is the padded score image of ``D`` when it came for free
    (row-space Woodbury), else None. ``S`` are the padded scores at ``x`` (from
    :meth:`.model.MajorizeModel.evaluate`) when the padded row-space bound applies."""
    n = model.n
    ridge = opts.ridge
    R = None
    grp = model.groups
    T = None
    if grp is not None:
        T = grp.factors(S[0] if S is not None else grp.scores(x))
    # dense / row-space Woodbury / matrix-free CG / low-rank, by option or predicted cost (structured.py)
    path = choose_step_solver(model, opts, model.step_stats.get("cg_last"))
    exact_unc = not model.constrained and model.pos is not None and model.H_diagonal and path != "lowrank"
    model.last_bound = (x, path, None)  # the bound's matrix or operator at x (option bound_reuse, .reuse_metric)
    if T is not None and exact_unc and path == "cg":
        op = StructuredSigma(grp, T, model.Hd + ridge)
        model.last_bound = (x, path, op)
        D, mval, info = cg_step(op, u, rtol=opts.cg_tol)
        model.step_stats["cg_last"] = info["cg_iterations"]
        model.count_step("cg")
        return D, mval, info, None
    if T is not None and exact_unc and path == "woodbury":
        # exact Woodbury: Sigma = diag(Dg) + R^T R with few rows (d >> rows, e.g. SRBCT), matrix-free in
        # the row space of R (the dense K x d matrix R costs more than the rest of the iteration)
        try:
            x_sol, qv, Fx, Fx_err, flat = grp.woodbury_solve(T, model.Hd + ridge, u)
        except np.linalg.LinAlgError:
            x_sol = None
        # Sigma x = u gives u^T x = x^T Sigma x; features of scales 1e-8..1e8 make I + R Da^-1 R^T too ill-conditioned
        # for either (x_a = Da^-1 (u_a - Ra^T w) cancels): its step went uphill, was replaced by D = 0 and the run
        # stopped 'optimal' at the start. CG on the same operator (Jacobi-preconditioned) takes over.
        if x_sol is not None and abs(float(u @ x_sol) - qv) <= WOODBURY_CHECK * max(abs(float(u @ x_sol)), qv):
            model.count_step("woodbury")
            return -x_sol, float(-u @ x_sol + 0.5 * qv), {"flat": flat}, (-Fx, Fx_err)
        op = StructuredSigma(grp, T, model.Hd + ridge)
        model.last_bound = (x, "cg", op)
        D, mval, info = cg_step(op, u, rtol=opts.cg_tol)
        model.count_step("cg")
        return D, mval, info, None
    if model.constrained and path == "woodbury":
        # few bound rows, many parameters, constraints: the step QP on the factored row-space operator
        # (.step_operator; a Schur complement of the working set, Q never formed)
        from .step_operator import DenseRowCurvature, RowSpaceCurvature
        from .step_rows import MAX_ROWS
        model.count_step("woodbury")
        if T is not None:
            Dg = model.Hd + ridge
            op = RowSpaceCurvature(grp, T, Dg)
            def make_op(fixed):
                return RowSpaceCurvature(grp, T, Dg, fixed) if fixed.any() else op
            if not model.A.shape[0]:
                # bounds only: projected Newton (.step_bounds), many bounds per iteration, the held variables
                # eliminated from the row-space solve
                got = qp.solve_bounds(x, u, make_op, op.matvec)
                if got is not None:
                    return got
            elif model.A.shape[0] <= MAX_ROWS and _rows_newton_cheaper(model, grp):
                # bounds and a few rows, many bounds in the working set: the same inside a Newton method on the rows'
                # multipliers (.step_rows); with few bounds the active set's one solve per constraint costs less
                got = qp.solve_rows(x, u, make_op, op.matvec)
                if got is not None:
                    return got
        else:
            A, b, seg, coef = model.pos
            op = DenseRowCurvature(model.Hd + ridge, compute_bound(A, b, seg, x, coef).R)
        return qp.solve_operator(x, u, op)
    if T is not None and (path == "lowrank" or (not grp.dense_fits(grp.G, grp.c, grp.d)
                                                and grp.template is None)):
        R = grp.rows(T) if grp.dense_fits(grp.G, grp.c, grp.d) else grp.rows_sparse(T)
    elif T is None and model.pos is not None:
        A, b, seg, coef = model.pos
        R = compute_bound(A, b, seg, x, coef).R
    if path == "lowrank":
        model.count_step("lowrank")
        L = lowrank_sigma(R, model.H, ridge, opts.rank, n)
        if not model.constrained:
            return lowrank_step(L, u) + (None,)
        Q = L.dense()
    else:
        if exact_unc and R is not None and (path == "woodbury" or (opts.step_solver == "auto"
                                                                   and R.shape[0] < n // 2)):
            # exact Woodbury without the padded form (large groups, or dense R from sparse rows)
            model.count_step("woodbury")
            Dg = model.Hd + ridge
            Rd = R.toarray() if sp.issparse(R) else R
            step = -woodbury_solve(Dg, Rd, u)
            Sstep = Dg * step + Rd.T @ (Rd @ step)
            return step, float(u @ step + 0.5 * step @ Sstep), {"flat": float(np.linalg.norm(Sstep + u))}, None
        model.count_step("dense")
        if T is not None and R is None:
            Q = grp.sigma(T)  # fresh arrays: H is added in place
        elif R is not None:
            Q = gram(R)
        else:
            Q = np.zeros((n, n))
        Q = model.add_H(Q, ridge)
        model.last_bound = (x, path, Q)
    if not model.constrained:
        return dense_step(Q, u) + (None,)
    return qp.solve(x, u, Q)  # .step_qp.StepQP: warm active set, else the general QP layer


def _rows_newton_cheaper(model, grp):
    """Whether the step cost model (:func:`.structured.woodbury_step_qp_costs`) prices the bounds-and-rows Newton
    method below the active set for the next step QP."""
    from .structured import woodbury_step_qp_costs
    costs = woodbury_step_qp_costs(model, grp.G, grp.c, model.n)
    return "rows_newton" in costs and costs["rows_newton"] <= costs.get("active_set", np.inf)
