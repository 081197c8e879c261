"""Section 4: Jensen bound for log-sum-exp terms that enter the minimised objective with a negative sign.

In a latent likelihood (Eq. 2) each sample contributes ``log sum_m exp(theta^T f_{j,y_j,m})``
to the log-likelihood being *maximised*; minimising the negative log-likelihood puts it in
the program with a negative coefficient ``c < 0``. With ``eta_m`` the softmax weights at
``theta~``, Jensen's inequality (concavity of log) gives

    log sum_m exp(s_m(theta)) >= sum_m eta_m s_m(theta) - sum_m eta_m log eta_m,

with equality at ``theta = theta~`` and the same gradient there. Multiplied by ``c < 0`` this
is an *upper* bound, linear in ``theta`` (``s_m`` is affine), so together with the Algorithm 1
quadratic bound on the denominators every majorization step is still a QP (the paper's
``mu~ = sum_j (mu_j - sum_m eta_{j,m} f_{j,y_j,m})``).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def jensen_linear(A, b, seg, coef, theta):
    """Linear majorizer of ``sum_g c_g log sum_{k in g} exp(A_k theta + b_k)`` for ``c_g < 0``.

    Returns ``(g, k)`` with ``sum_g c_g lse_g(theta) <= g^T theta + k`` for all ``theta`` and
    equality at ``theta``. ``g = sum_g c_g sum_k eta_k A_k``, ``k = sum_g c_g (eta^T b - eta^T log eta)``.
    """
    A = sp.csr_matrix(A)
    b = np.asarray(b, dtype=float)
    seg = np.asarray(seg, dtype=np.int64)
    coef = np.asarray(coef, dtype=float)
    if np.any(coef > 0):
        raise ValueError("the Jensen bound majorizes only terms with a negative coefficient")
    s = A @ theta + b
    G = coef.size
    mx = np.full(G, -np.inf)
    np.maximum.at(mx, seg, s)
    e = np.exp(s - mx[seg])
    tot = np.bincount(seg, weights=e, minlength=G)
    eta = e / tot[seg]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = np.where(eta > 0, eta * np.log(eta), 0.0)
    cw = coef[seg]
    g = np.asarray(A.T @ (cw * eta)).ravel()
    k = float(np.sum(cw * (eta * np.where(np.isfinite(b), b, 0.0) - ent)))
    return g, k
