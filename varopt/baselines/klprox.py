r"""Baselines of the KL-proximal solver, on the same likelihood view (Gaussian part + 1-D predictor terms).

* :func:`map_estimate`: the posterior mode by L-BFGS (scipy), ``min_w F(w)``.
* :func:`laplace`: the mode and ``V = (P + A^T diag(coef l''(u*)) A)^-1`` (Hessian at the mode).
* :func:`cholesky_vi`: full-Gaussian VI by L-BFGS over ``(m, C)``, ``V = C C^T`` with ``C`` lower
  triangular and ``log`` of its diagonal (the "Cholesky" method of Challis & Barber 2011 used in
  the paper's Table 2).
* :func:`mean_field_vi`: ``V = diag(s^2)`` by L-BFGS over ``(m, log s)``.

The variational baselines minimise the same ``-ELBO`` as the solver (:func:`neg_elbo`, the
closed forms / quadrature of :mod:`varopt.solvers.klprox.expectations`) with gradients
``d/dm = P(m - mu) + A^T alpha`` and ``d/dV = (P + A^T diag(gamma) A - V^-1) / 2``, chained through
the factor. Each returns a dict with ``m``, ``V``, ``neg_elbo``, ``iterations``, ``time``, and ``success``/``message``
(how L-BFGS-B ended; a run stopped with a gradient far from zero also warns: its answer is not an optimum).
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np
import scipy.optimize as so
import scipy.sparse as sp

from ..solvers.klprox.expectations import family_table

_LOG2PI = math.log(2 * math.pi)


def _terms(view, fams, mt, vt):
    lik, _, alpha, gamma = view.terms(fams, mt, vt)
    return lik, alpha, gamma


def _pattern(view, AX, AY):
    """Entries of ``AX AY^T`` on the view's pseudo-precision pattern (the predictor covariances)."""
    return np.einsum("ij,ij->i", AX[view.pat_i], AY[view.pat_j])


def neg_elbo(view, m, V, nodes=100):
    """``-ELBO = E_q[F] - H[q]`` at ``q = N(m, V)`` (dense ``V``)."""
    fams = family_table(nodes)
    mt = view.A @ m + view.b
    vt = _pattern(view, np.asarray(view.A @ V), view.A.toarray()) if view.N else np.zeros(0)
    lik = _terms(view, fams, mt, vt)[0]
    sign, logdet = np.linalg.slogdet(V)
    quad = 0.5 * m @ view.P @ m + 0.5 * float(np.sum(view.P * V)) + view.c @ m + view.k
    return quad + lik - 0.5 * (view.D * (1 + _LOG2PI) + logdet)


def _start(view):
    """The starting mean of every baseline (as the solver's): ``mu`` or 0, whichever has the lower
    ``-ELBO`` with ``V0^-1 = P + 1e-3 A^T A``; and that ``V0``."""
    H = view.P + 1e-3 * (view.A.T @ view.A)
    V0 = np.linalg.inv(H.toarray() if sp.issparse(H) else np.asarray(H))
    with np.errstate(all="ignore"):
        vals = [(neg_elbo(view, m, V0), k) for k, m in enumerate((view.mu, np.zeros(view.D)))]
    vals = [v for v in vals if np.isfinite(v[0])]
    return (view.mu if not vals or min(vals)[1] == 0 else np.zeros(view.D)), V0


def _lbfgs(fun, x0, gtol, maxiter, trace=None):
    """L-BFGS-B on ``fun`` (value and gradient); ``trace``: a list that receives ``(seconds, value)`` of every
    evaluation (for a time-to-accuracy comparison: the first evaluation within a tolerance of the optimum)."""
    t0 = time.perf_counter()
    if trace is not None:
        inner = fun

        def fun(x):
            out = inner(x)
            trace.append((time.perf_counter() - t0, float(out[0])))
            return out
    res = so.minimize(fun, x0, jac=True, method="L-BFGS-B",
                      options={"gtol": gtol, "ftol": 1e-15, "maxiter": maxiter, "maxcor": 30})
    res.far = _far(res)
    if res.far:
        # L-BFGS-B's own flag does not tell: 'ABNORMAL_TERMINATION_IN_LNSRCH' at the optimum (rounding), 'CONVERGENCE'
        # 2 iterations from a start where E[exp u] overflows (-ELBO 1e17); the gradient does
        warnings.warn(f"L-BFGS-B stopped far from a stationary point ({res.message}; value {float(res.fun):.6g}, largest "
                      f"gradient entry {float(np.max(np.abs(res.jac))):.3g}): the baseline's answer is not an optimum",
                      RuntimeWarning, stacklevel=3)
    return res, time.perf_counter() - t0


def _far(res):
    """A gradient entry above 1e-4 (1 + |value|), or not finite: whatever L-BFGS-B's flag says (from a start
    where the -ELBO overflows it reports 'CONVERGENCE: RELATIVE REDUCTION OF F' after 2 iterations)."""
    g = np.max(np.abs(res.jac)) if np.size(res.jac) else 0.0
    return bool(not (np.isfinite(g) and np.isfinite(res.fun) and g <= 1e-4 * (1.0 + abs(float(res.fun)))))


def _status(res):
    """The fields every baseline returns on how L-BFGS-B ended."""
    return {"success": not res.far, "message": str(res.message)}


def map_estimate(view, gtol=1e-9, maxiter=20000):
    fams = family_table(8)

    def fun(w):
        u = view.A @ w + view.b
        lik, a, _ = _terms(view, fams, u, 1e-300 * view.eye())
        return 0.5 * w @ view.P @ w + view.c @ w + view.k + lik, view.P @ w + view.c + view.A.T @ a

    res, t = _lbfgs(fun, _start(view)[0], gtol, maxiter)
    return {"m": res.x, "value": float(res.fun), "iterations": int(res.nit), "time": t, **_status(res)}


def laplace(view, gtol=1e-9):
    """Laplace approximation at the MAP (``l''`` from the zero-variance limit of the expectations)."""
    out = map_estimate(view, gtol)
    fams = family_table(8)
    u = view.A @ out["m"] + view.b
    _, _, gam = _terms(view, fams, u, 1e-30 * view.eye())
    H = view.P + (view.A.T @ view.curvature_matrix(gam) @ view.A)
    H = H.toarray() if sp.issparse(H) else np.asarray(H)
    out["V"] = np.linalg.inv(H)
    out["neg_elbo"] = neg_elbo(view, out["m"], out["V"])
    return out


def cholesky_vi(view, gtol=1e-9, maxiter=50000, nodes=100, trace=None):
    fams = family_table(nodes)
    D = view.D
    il = np.tril_indices(D)
    diag = il[0] == il[1]
    # the feature matrix as a user would hold it: sparse products when it is sparse (a1a: 12 % filled),
    # dense ones otherwise
    A = view.A
    Ad = A.tocsr() if sp.issparse(A) and A.nnz < 0.3 * A.shape[0] * A.shape[1] else (
        A.toarray() if sp.issparse(A) else np.asarray(A))

    def unpack(x):
        C = np.zeros((D, D))
        vals = x[D:].copy()
        vals[diag] = np.exp(vals[diag])
        C[il] = vals
        return x[:D], C

    def fun(x):
        m, C = unpack(x)
        AC = np.asarray(Ad @ C)
        mt, vt = np.asarray(Ad @ m).ravel() + view.b, _pattern(view, AC, AC)
        lik, a, g = _terms(view, fams, mt, vt)
        PC = view.P @ C
        f = (0.5 * m @ view.P @ m + view.c @ m + view.k + 0.5 * float(np.sum(C * PC)) + lik
             - 0.5 * D * (1 + _LOG2PI) - float(np.sum(x[D:][diag])))
        gm = view.P @ m + view.c + np.asarray(Ad.T @ a).ravel()
        GC = PC + np.asarray(Ad.T @ (view.curvature_matrix(g) @ AC))   # d f / d C (lower triangle), before the log-diagonal
        gC = GC[il]
        gC[diag] = gC[diag] * np.diag(C) - 1.0
        return f, np.concatenate([gm, gC])

    m0, V0 = _start(view)
    C0 = np.linalg.cholesky(V0)
    x0 = np.concatenate([m0, C0[il]])
    x0[D:][diag] = np.log(np.diag(C0))
    res, t = _lbfgs(fun, x0, gtol, maxiter, trace)
    m, C = unpack(res.x)
    return {"m": m, "V": C @ C.T, "neg_elbo": float(res.fun), "iterations": int(res.nit), "evaluations": int(res.nfev),
            "time": t, **_status(res)}


def mean_field_vi(view, gtol=1e-9, maxiter=50000, nodes=100, trace=None):
    fams = family_table(nodes)
    D = view.D
    A2 = view.A[view.pat_i].multiply(view.A[view.pat_j]).tocsr()   # vt = A2 s^2 on the pattern
    dP = np.diag(view.P)

    def fun(x):
        m, ls = x[:D], x[D:]
        s2 = np.exp(2 * ls)
        mt, vt = view.A @ m + view.b, A2 @ s2
        lik, a, g = _terms(view, fams, mt, vt)
        f = (0.5 * m @ view.P @ m + view.c @ m + view.k + 0.5 * dP @ s2 + lik
             - 0.5 * D * (1 + _LOG2PI) - float(np.sum(ls)))
        gm = view.P @ m + view.c + view.A.T @ a
        gs = (dP + A2.T @ g) * s2 - 1.0
        return f, np.concatenate([gm, gs])

    m0, V0 = _start(view)
    x0 = np.concatenate([m0, 0.5 * np.log(np.diag(V0))])
    res, t = _lbfgs(fun, x0, gtol, maxiter, trace)
    return {"m": res.x[:D], "V": np.diag(np.exp(2 * res.x[D:])), "neg_elbo": float(res.fun),
            "iterations": int(res.nit), "evaluations": int(res.nfev), "time": t, **_status(res)}
