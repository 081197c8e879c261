"""An independent full-Gaussian VI reference for the klprox user-form tests (plain numpy/scipy, none of varopt).

A model is ``F(w) = 1/2 w^T P w + c^T w + k + sum_g sum_n coef_gn l_g(A_gn w + b_gn)`` written out by the test from the
user's arrays; ``-ELBO(m, V) = E_q[F] - H[q]`` (``H = 1/2 logdet(2 pi e V)``) with

* ``softplus``: probabilists' Gauss-Hermite with 160 nodes for predictor standard deviations up to 2, a split
  Gauss-Legendre rule beyond (:func:`_e_softplus`);
* ``exp``, ``abs``, ``square``: closed forms;
* ``softmax`` groups (``log sum_k exp(u_k)`` of a K-vector ``u = B w + b``): ``u_0 + log(1 + sum_j exp(u_j - u_0))``,
  the second part by a tensor Gauss-Hermite rule over the K-1 whitened directions (``nodes_soft`` per direction);

minimised over ``(m, C)``, ``V = C C^T``, ``C`` lower triangular with a log diagonal, by scipy's L-BFGS with exact
gradients (Bonnet's and Price's theorems: ``dE/dm = E[grad l]``, ``dE/dV = E[hess l] / 2``), then polished by Newton
steps on the stationarity conditions ``V^-1 = P + sum A^T E[l''] A`` (fixed point of the covariance) and
``P m + c + sum A^T E[l'] = 0``.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import scipy.optimize as so
from scipy.special import expit, logsumexp, ndtr

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(160)
_GH_W = _GH_W / math.sqrt(2 * math.pi)


_GL_X, _GL_W = np.polynomial.legendre.leggauss(400)
_GL_X, _GL_W = 20.0 * (_GL_X + 1.0), 20.0 * _GL_W        # [0, 40]


def _e_softplus(m, v):
    """``E[softplus(u)]``, ``E[sigmoid(u)]``, ``E[sigmoid'(u)]``: Gauss-Hermite for sd <= 2; wider rows as
    ``softplus(u) = max(u, 0) + log1p(e^-|u|)`` (the first in closed form, the second, which decays like e^-|u|, by a
    400-node Gauss-Legendre rule on each half line, |u| <= 40)."""
    E, d1, d2 = np.empty_like(m), np.empty_like(m), np.empty_like(m)
    s = np.sqrt(v)
    narrow = s <= 2.0
    if narrow.any():
        u = m[narrow, None] + s[narrow, None] * _GH_X[None, :]
        sg = expit(u)
        E[narrow] = np.logaddexp(0.0, u) @ _GH_W
        d1[narrow] = sg @ _GH_W
        d2[narrow] = (sg * (1 - sg)) @ _GH_W
    wide = ~narrow
    if wide.any():
        mm, ss = m[wide, None], s[wide, None]
        x = _GL_X[None, :]
        pos = np.exp(-0.5 * ((x - mm) / ss) ** 2) / (ss * math.sqrt(2 * math.pi))    # density at +x
        neg = np.exp(-0.5 * ((-x - mm) / ss) ** 2) / (ss * math.sqrt(2 * math.pi))   # density at -x
        g = np.log1p(np.exp(-x))
        t = expit(-x)                                 # sigmoid(-|u|)
        z = mm[:, 0] / ss[:, 0]
        phi = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        E[wide] = mm[:, 0] * ndtr(z) + ss[:, 0] * phi + (g * (pos + neg)) @ _GL_W
        # sigmoid(u) = 1{u > 0} - sigmoid(-|u|) for u > 0, sigmoid(-|u|) for u < 0
        d1[wide] = ndtr(z) + (t * (neg - pos)) @ _GL_W
        d2[wide] = (t * (1 - t) * (pos + neg)) @ _GL_W
    return E, d1, d2


def _e_exp(m, v):
    e = np.exp(m + v / 2)
    return e, e, e


def _e_abs(m, v):
    s = np.sqrt(v)
    z = m / s
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    E = s * 2 * pdf + m * (2 * ndtr(z) - 1)
    return E, 2 * ndtr(z) - 1, 2 * pdf / s


def _e_square(m, v):
    return m * m + v, 2 * m, np.full_like(m, 2.0)


SCALAR = {"softplus": _e_softplus, "exp": _e_exp, "abs": _e_abs, "square": _e_square}


class Model:
    """``F(w)``: ``P`` (D x D), ``c``, ``k`` and likelihood groups ``(kind, A, b, coef)``; ``kind`` one of
    :data:`SCALAR` (A: N x D) or ``'softmax'`` (A: N x K x D, b: N x K)."""

    def __init__(self, P, c=None, k=0.0, nodes_soft=24):
        self.P = np.asarray(P, float)
        self.D = self.P.shape[0]
        self.c = np.zeros(self.D) if c is None else np.asarray(c, float)
        self.k = float(k)
        self.groups = []
        x, w = np.polynomial.hermite_e.hermegauss(nodes_soft)
        self._soft = (x, w / math.sqrt(2 * math.pi))

    def add(self, kind, A, b=None, coef=None):
        A = np.asarray(A, float)
        n = A.shape[0]
        b = np.zeros(A.shape[:-1]) if b is None else np.broadcast_to(np.asarray(b, float), A.shape[:-1]).copy()
        coef = np.ones(n) if coef is None else np.broadcast_to(np.asarray(coef, float), (n,)).copy()
        self.groups.append((kind, A, b, coef))
        return self

    def value(self, w):
        """``F(w)`` directly."""
        tot = 0.5 * w @ self.P @ w + self.c @ w + self.k
        fn = {"softplus": lambda u: np.logaddexp(0, u), "exp": np.exp, "abs": np.abs, "square": np.square}
        for kind, A, b, coef in self.groups:
            u = A @ w + b
            tot += coef @ (logsumexp(u, axis=1) if kind == "softmax" else fn[kind](u))
        return float(tot)

    def _softmax(self, A, b, coef, m, V):
        """``sum_n coef_n E[lse(u_n)]`` and its gradients in ``m`` and ``V``: ``lse(u) = u_0 + log(1 + sum_j e^{d_j})``,
        ``d_j = u_j - u_0``, the second part by the tensor rule over the K-1 whitened directions of ``d``."""
        x, wq = self._soft
        K = A.shape[1]
        grid = np.array(list(itertools.product(range(x.size), repeat=K - 1)))
        Z = x[grid]                                   # (Q, K-1)
        W = np.prod(wq[grid], axis=1)                 # (Q,)
        E = 0.0
        gm = np.zeros(self.D)
        gV = np.zeros((self.D, self.D))
        for n in range(A.shape[0]):
            B = A[n, 1:] - A[n, :1]
            mu = B @ m + b[n, 1:] - b[n, 0]
            S = B @ V @ B.T
            lam, Q = np.linalg.eigh(0.5 * (S + S.T))
            R = Q * np.sqrt(np.maximum(lam, 0.0))
            U = mu[None, :] + Z @ R.T                 # (Q, K-1)
            full = np.hstack([np.zeros((U.shape[0], 1)), U])
            lse = logsumexp(full, axis=1)
            p = np.exp(U - lse[:, None])
            E += coef[n] * (W @ lse + A[n, 0] @ m + b[n, 0])
            g = W @ p
            H = np.diag(g) - np.einsum("q,qi,qj->ij", W, p, p)
            gm += coef[n] * (A[n, 0] + B.T @ g)
            gV += coef[n] * 0.5 * B.T @ H @ B
        return E, gm, gV

    def expectations(self, m, V):
        """``E_q[sum of the likelihood terms]``, its gradient in ``m`` and in ``V`` (symmetric)."""
        E = 0.0
        gm = np.zeros(self.D)
        gV = np.zeros((self.D, self.D))
        for kind, A, b, coef in self.groups:
            if kind == "softmax":
                e, a, g = self._softmax(A, b, coef, m, V)
                E, gm, gV = E + e, gm + a, gV + g
                continue
            mt = A @ m + b
            vt = np.einsum("nd,de,ne->n", A, V, A)
            e, d1, d2 = SCALAR[kind](mt, np.maximum(vt, 1e-300))
            E += coef @ e
            gm += A.T @ (coef * d1)
            gV += 0.5 * (A.T * (coef * d2)) @ A
        return E, gm, gV

    def neg_elbo(self, m, V):
        E = self.expectations(m, V)[0]
        sign, logdet = np.linalg.slogdet(V)
        assert sign > 0
        quad = 0.5 * m @ self.P @ m + 0.5 * np.sum(self.P * V) + self.c @ m + self.k
        return float(quad + E - 0.5 * (self.D * (1 + math.log(2 * math.pi)) + logdet))

    def _unpack(self, x):
        D = self.D
        m = x[:D]
        C = np.zeros((D, D))
        C[np.tril_indices(D)] = x[D:]
        C[np.diag_indices(D)] = np.exp(np.diag(C))
        return m, C

    def fit(self, m0=None, gtol=1e-11, newton=30):
        """The ``-ELBO`` optimum ``(m, V, -ELBO)``."""
        D = self.D
        tri = np.tril_indices(D)
        diag = tri[0] == tri[1]

        # whitened by the prior: m = L0 mw, C = L0 Cw (L0 L0^T = P^-1), so that L-BFGS sees a unit prior (GP priors
        # with condition numbers of 1e6 took thousands of iterations in the plain coordinates)
        L0 = np.linalg.cholesky(np.linalg.inv(self.P))

        def unpack(x):
            mw, Cw = self._unpack(x)
            return L0 @ mw, L0 @ Cw, Cw

        def fun(x):
            m, C, Cw = unpack(x)
            V = C @ C.T
            E, gm, gV = self.expectations(m, V)
            sign, logdet = np.linalg.slogdet(V)
            f = (0.5 * m @ self.P @ m + 0.5 * np.sum(self.P * V) + self.c @ m + self.k + E
                 - 0.5 * (D * (1 + math.log(2 * math.pi)) + logdet))
            dm = self.P @ m + self.c + gm
            dV = 0.5 * self.P + gV                   # the entropy's -V^-1/2 enters through dC below
            dC = 2 * dV @ C - np.linalg.inv(C).T     # d/dC of tr(dV C C^T) - log det C
            g = (L0.T @ dC)[tri].copy()              # chained through C = L0 Cw
            g[diag] *= np.diag(Cw)                   # log diagonal
            return f, np.concatenate([L0.T @ dm, g])

        x0 = np.concatenate([np.zeros(D) if m0 is None else np.linalg.solve(L0, m0), np.zeros(tri[0].size)])
        x0[D:][diag] = math.log(0.5)
        r = so.minimize(fun, x0, jac=True, method="L-BFGS-B",
                        options=dict(maxiter=20000, maxfun=40000, gtol=gtol, ftol=1e-16, maxcor=30))
        m, C, _ = unpack(r.x)
        V = C @ C.T
        # polish: natural-gradient steps of length 1 (V^-1 <- P + 2 dE/dV, a Newton step of the mean), kept while they
        # lower the residuals of the optimum's conditions without raising the -ELBO beyond its rounding
        best, res = self.neg_elbo(m, V), self._residual(m, V)
        for _ in range(newton):
            E, gm, gV = self.expectations(m, V)
            Vn = np.linalg.inv(self.P + 2 * gV)
            Vn = 0.5 * (Vn + Vn.T)
            mn = m - Vn @ (self.P @ m + self.c + gm)
            try:
                f = self.neg_elbo(mn, Vn)
            except AssertionError:
                break
            rn = self._residual(mn, Vn)
            if not (f <= best + 1e-11 * max(1.0, abs(best)) and rn < res):
                break
            m, V, best, res = mn, Vn, min(f, best), rn
        return m, V, self.neg_elbo(m, V)

    def _residual(self, m, V):
        """Natural-gradient size of the optimum's conditions: ``sqrt(g^T V g)`` of the mean's gradient plus the
        Frobenius norm of ``C^T (V^-1 - P - 2 dE/dV) C`` (``V = C C^T``): invariant to the prior's scaling."""
        E, gm, gV = self.expectations(m, V)
        g = self.P @ m + self.c + gm
        C = np.linalg.cholesky(V)
        R = C.T @ (np.linalg.inv(V) - self.P - 2 * gV) @ C
        return math.sqrt(max(g @ V @ g, 0.0)) + np.linalg.norm(R)

    def stationarity(self, m, V):
        """Residuals of the optimum's conditions at ``(m, V)``: the mean's gradient and ``V^-1 - P - 2 dE/dV``."""
        E, gm, gV = self.expectations(m, V)
        return (np.max(np.abs(self.P @ m + self.c + gm)),
                np.max(np.abs(np.linalg.inv(V) - self.P - 2 * gV)))


def conjugate(P, c, k=0.0):
    """Exact posterior of ``F(w) = 1/2 w^T P w + c^T w + k`` (a Gaussian likelihood): mean, covariance and
    ``-log int exp(-F) dw`` (= the -ELBO at the exact posterior)."""
    P = np.asarray(P, float)
    V = np.linalg.inv(P)
    m = -V @ c
    D = P.shape[0]
    sign, logdet = np.linalg.slogdet(P)
    logZ = 0.5 * c @ V @ c - k + 0.5 * D * math.log(2 * math.pi) - 0.5 * logdet
    return m, V, -logZ
