r"""Newton steps on the stationarity conditions of the ELBO for models whose likelihood is softmax rows only
(docs/klprox.md, section 4, "Newton steps on softmax rows").

The optimum of ``ELBO(m, V)`` has ``V^-1 = P + A^T Gamma A`` (18) with ``Gamma_n = 2 dE_n/dVt_n = coef_n E[hess l]``
of the optimum itself, so it solves, in the state's unknowns ``x = (m, Gt)`` (``Gt_n`` the symmetric J x J
pseudo-precision blocks, their upper triangles),

    R_m = g = -(P m + c + A^T alpha) = 0,     R_n = Gamma_n(mt_n, Vt_n) - Gt_n = 0,

``mt_n = A_n m + b_n``, ``Vt_n = A_n V A_n^T``, ``V = (P + sum_k A_k^T Gt_k A_k)^-1``. The natural step is the
fixed-point iteration of this system (``Gt <- Gamma``, ``m <- m + V g``), which contracts slowly on wide softmax rows.
Its Jacobian is exact from the Gaussian expectations (Bonnet's and Price's theorems once more):

    dalpha_n = Gamma_n dmt_n + (1/2) coef_n E[grad^3 l] : dVt_n,
    dGamma_n = coef_n E[grad^3 l] . dmt_n + (1/2) coef_n E[grad^4 l] : dVt_n,
    dmt_n = A_n dm,     dVt_n = -sum_k St_nk dGt_k St_kn,     St = A V A^T,

so ``dR_m = -(P + A^T Gamma A) dm - A^T dalpha_Vt`` and ``dR_n = dGamma_n - dGt_n``. The Newton step solves the dense
system of ``D + G J (J + 1) / 2`` unknowns; the solver tries it in place of the plain step and keeps it only when
it passes the exact-ELBO acceptance test, like every step.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla


def unknowns(view):
    """The size ``D + sum G J (J + 1) / 2`` of the Newton system of ``view`` (softmax groups only)."""
    return view.D + sum((rs.stop - rs.start) // J * J * (J + 1) // 2 for J, rs, _ in view.groups)


def newton_state(post, st, alpha, gamma, tensors):
    """The state ``x + dx`` of the Newton step from the evaluated state ``st`` (``alpha``, ``gamma`` and, per group,
    the ``(coef E[grad^3 l], coef E[grad^4 l])`` of ``tensors``); ``LinAlgError`` when the system is singular or the
    new precision is not positive definite."""
    view, A, D = post.view, post.A, post.D
    V = post.covariance(st)
    blocks, rows_m, rows_u, rhs_u, cols, fill = [], [], [], [], [], []
    St = A @ V @ A.T
    gram = post.P + post._AtGA(gamma)
    offset = D
    for (J, rs, ps), (T3, T4) in zip(view.groups, tensors):
        G = (rs.stop - rs.start) // J
        iu, ju = np.triu_indices(J)
        nu = iu.size
        S4 = St[rs, rs].reshape(G, J, G, J)
        # dVt_n[i, j] / dGt_k[a, b] = -St[ni, ka] St[kb, nj]; an upper-triangle unknown (a < b) moves both entries
        Si, Sj = S4[:, :, :, iu], S4[:, :, :, ju]                                    # (G, J, G, nu)
        Ku = -(Si[:, :, None] * Sj[:, None, :])                                      # (G, J, J, G, nu)
        off = iu != ju
        Ku[..., off] -= Sj[:, :, None][..., off] * Si[:, None, :][..., off]
        Ku = Ku.reshape(G, J * J, G * nu)
        Ag = A[rs].reshape(G, J, D)
        blocks.append((rs, 0.5 * np.matmul(T3.reshape(G, J, J * J), Ku).reshape(G * J, G * nu)))
        Jum = np.matmul(T3.reshape(G, J * J, J), Ag).reshape(G, J, J, D)[:, iu, ju].reshape(G * nu, D)
        Juu = 0.5 * np.matmul(T4.reshape(G, J * J, J * J), Ku).reshape(G, J, J, G * nu)[:, iu, ju]
        Juu = Juu.reshape(G * nu, G * nu)
        Juu.flat[:: G * nu + 1] -= 1.0
        rows_m.append(Jum)
        rows_u.append(Juu)
        Gam, Gt = gamma[ps].reshape(G, J, J), st.gt[ps].reshape(G, J, J)
        rhs_u.append((Gam - Gt)[:, iu, ju].ravel())
        cols.append((offset, G * nu))
        fill.append((ps, G, J, iu, ju))
        offset += G * nu
    n = offset
    Jac = np.zeros((n, n))
    Jac[:D, :D] = -gram
    for (rs, Za), (o, k) in zip(blocks, cols):
        Jac[:D, o:o + k] = -(A[rs].T @ Za)
    for Jum, Juu, (o, k) in zip(rows_m, rows_u, cols):
        Jac[o:o + k, :D] = Jum
        Jac[o:o + k, o:o + k] = Juu
    # groups couple through St: the off-diagonal group blocks of the covariance unknowns (several softmax groups)
    if len(view.groups) > 1:
        raise np.linalg.LinAlgError("Newton steps: one softmax group kind only")
    R = np.concatenate([post.gradient(st, alpha)] + rhs_u)
    dx = sla.solve(Jac, -R, check_finite=False)
    gt = st.gt.copy()
    for (ps, G, J, iu, ju), (o, k) in zip(fill, cols):
        blk = gt[ps].reshape(G, J, J)
        d = dx[o:o + k].reshape(G, -1)
        blk[:, iu, ju] += d
        blk[:, ju, iu] = blk[:, iu, ju]
        gt[ps] = blk.ravel()
    return post.state_of(st.m + dx[:D], gt)
