"""Independent full-Gaussian VI reference (written from scratch for the held-out review).

Model: F(w) = 0.5 (w-mu)^T P (w-mu) + g^T w + k0 + sum_blocks sum_n c_n * l_fam(a_n^T w + b_n)
-ELBO(m, V) = E_q[F] - 0.5 log det(2 pi e V).
Optimised by L-BFGS over (m, L), V = L L^T, then polished by damped fixed-point (natural) steps.
"""
import numpy as np
import scipy.optimize as so
import scipy.special as sp
from scipy import integrate

_HX, _HW = np.polynomial.hermite_e.hermegauss(200)
_HW = _HW / np.sqrt(2 * np.pi)
_LX, _LW = np.polynomial.legendre.leggauss(4000)
_LX = _LX * 14.0
_LW = _LW * 14.0 * np.exp(-0.5 * _LX ** 2) / np.sqrt(2 * np.pi)


def _f(fam, u):
    if fam == "logistic":
        return np.logaddexp(0, u), sp.expit(u), sp.expit(u) * sp.expit(-u)
    if fam == "probit":  # -log Phi(u)
        lp = sp.log_ndtr(u)
        r = np.exp(-0.5 * u * u - 0.5 * np.log(2 * np.pi) - lp)  # phi/Phi
        return -lp, -r, r * (u + r)
    if fam == "sqhinge":  # max(u,0)^2
        return np.maximum(u, 0) ** 2, 2 * np.maximum(u, 0), 2.0 * (u > 0)
    raise ValueError(fam)


def expect(fam, mt, vt):
    """E[l(u)], dE/dmt, dE/dvt for u ~ N(mt, vt)."""
    s = np.sqrt(vt)
    if fam == "exp":
        e = np.exp(mt + vt / 2)
        return e, e, e / 2
    if fam == "abs":
        z = mt / s
        Phi, phi = sp.ndtr(z), np.exp(-z * z / 2) / np.sqrt(2 * np.pi)
        return mt * (2 * Phi - 1) + 2 * s * phi, 2 * Phi - 1, phi / s
    if fam == "sq":
        return mt ** 2 + vt, 2 * mt, np.ones_like(mt)
    if fam == "sqhinge":
        z = mt / s
        Phi, phi = sp.ndtr(z), np.exp(-z * z / 2) / np.sqrt(2 * np.pi)
        return (mt ** 2 + vt) * Phi + mt * s * phi, 2 * (mt * Phi + s * phi), Phi
    x, w = (_HX, _HW) if np.max(s, initial=0) <= 1.5 else (_LX, _LW)
    u = mt[:, None] + s[:, None] * x[None, :]
    f0, f1, f2 = _f(fam, u)
    return f0 @ w, f1 @ w, 0.5 * (f2 @ w)


def expect_adaptive(fam, mt, vt):
    out = []
    for m_, v_ in zip(mt, vt):
        s = np.sqrt(v_)
        g = lambda z: _f(fam, np.array(m_ + s * z))[0] * np.exp(-z * z / 2) / np.sqrt(2 * np.pi)
        pts = [(-m_ / s)] if abs(m_ / s) < 30 else None
        val = integrate.quad(g, -40, 40, points=pts, epsabs=1e-14, epsrel=1e-13, limit=400)[0]
        out.append(val)
    return np.array(out)


class Model:
    def __init__(self, P, mu=None, g=None, k0=0.0):
        self.P = np.asarray(P, float)
        D = self.P.shape[0]
        self.D = D
        self.mu = np.zeros(D) if mu is None else np.asarray(mu, float)
        self.g = np.zeros(D) if g is None else np.asarray(g, float)
        self.k0 = k0
        self.blocks = []   # (fam, A, b, c)

    def add(self, fam, A, b=None, c=None):
        A = np.atleast_2d(np.asarray(A, float))
        N = A.shape[0]
        b = np.zeros(N) if b is None else np.broadcast_to(np.asarray(b, float), (N,)).copy()
        c = np.ones(N) if c is None else np.broadcast_to(np.asarray(c, float), (N,)).copy()
        self.blocks.append((fam, A, b, c))
        return self

    def F(self, w):
        d = w - self.mu
        val = 0.5 * d @ self.P @ d + self.g @ w + self.k0
        for fam, A, b, c in self.blocks:
            u = A @ w + b
            val += c @ {"exp": np.exp, "abs": np.abs, "sq": np.square}.get(fam, lambda u: _f(fam, u)[0])(u)
        return val

    def nelbo(self, m, V, adaptive=False):
        d = m - self.mu
        val = 0.5 * d @ self.P @ d + 0.5 * np.trace(self.P @ V) + self.g @ m + self.k0
        for fam, A, b, c in self.blocks:
            mt, vt = A @ m + b, np.einsum("ij,jk,ik->i", A, V, A)
            E = expect_adaptive(fam, mt, vt) if (adaptive and fam in ("logistic", "probit")) else expect(fam, mt, vt)[0]
            val += c @ E
        sign, ld = np.linalg.slogdet(V)
        return val - 0.5 * ld - 0.5 * self.D * (1 + np.log(2 * np.pi))

    def grads(self, m, V):
        gm = self.P @ (m - self.mu) + self.g
        GV = 0.5 * self.P.copy()
        for fam, A, b, c in self.blocks:
            mt, vt = A @ m + b, np.einsum("ij,jk,ik->i", A, V, A)
            _, dm, dv = expect(fam, mt, vt)
            gm += A.T @ (c * dm)
            GV += A.T @ ((c * dv)[:, None] * A)
        return gm, GV

    def fit(self, m0=None, iters=20000, polish=200):
        D = self.D
        tril = np.tril_indices(D)
        P = self.P
        # start from the prior
        L0 = np.linalg.cholesky(np.linalg.inv(P))
        m0 = self.mu.copy() if m0 is None else m0

        def unpack(x):
            m = x[:D]
            L = np.zeros((D, D))
            L[tril] = x[D:]
            return m, L

        def fun(x):
            m, L = unpack(x)
            V = L @ L.T
            if np.any(np.diag(L) == 0):
                return np.inf, np.zeros_like(x)
            val = self.nelbo(m, V)
            gm, GV = self.grads(m, V)
            gL = 2 * GV @ L - np.diag(1 / np.diag(L))
            return val, np.concatenate([gm, gL[tril]])

        x = np.concatenate([m0, L0[tril]])
        r = so.minimize(fun, x, jac=True, method="L-BFGS-B",
                        options=dict(maxiter=iters, maxfun=2 * iters, gtol=1e-13, ftol=1e-16, maxcor=30))
        m, L = unpack(r.x)
        V = L @ L.T
        # polish: damped fixed point V^-1 = 2 GV, Newton-like mean step, accept when -ELBO does not rise
        f = self.nelbo(m, V)
        for _ in range(polish):
            gm, GV = self.grads(m, V)
            Vn = np.linalg.inv(2 * GV)
            Vn = 0.5 * (Vn + Vn.T)
            mn = m - Vn @ gm
            ok = False
            for t in (1.0, 0.5, 0.25, 0.1, 0.03):
                mt_ = m + t * (mn - m)
                Lam = (1 - t) * np.linalg.inv(V) + t * np.linalg.inv(Vn)
                Vt = np.linalg.inv(Lam)
                Vt = 0.5 * (Vt + Vt.T)
                ft = self.nelbo(mt_, Vt)
                if np.isfinite(ft) and ft <= f + 1e-15 * abs(f):
                    m, V, f, ok = mt_, Vt, ft, True
                    break
            if not ok:
                break
        return m, V, f

    def residual(self, m, V):
        gm, GV = self.grads(m, V)
        C = np.linalg.cholesky(V)
        return float(np.sqrt(max(gm @ V @ gm, 0))), float(np.linalg.norm(C.T @ (np.linalg.inv(V) - 2 * GV) @ C))


def conjugate(P, mu, X, y, s2):
    """Exact posterior of w ~ N(mu, P^-1), y ~ N(Xw, s2 I); -log p(y) (all constants)."""
    Lam = P + X.T @ X / s2
    V = np.linalg.inv(Lam)
    m = V @ (P @ mu + X.T @ y / s2)
    C = X @ np.linalg.solve(P, X.T) + s2 * np.eye(len(y))
    r = y - X @ mu
    nlml = 0.5 * r @ np.linalg.solve(C, r) + 0.5 * np.linalg.slogdet(C)[1] + 0.5 * len(y) * np.log(2 * np.pi)
    return m, V, nlml


class SoftmaxModel(Model):
    """F(W) = sum_n [lse(W^T x_n) - y_n^T W^T x_n] + |W|^2/(2 s2), vec row-major (j, k) -> j*K + k."""

    def __init__(self, X, Y, s2, nodes=24, free=None):
        X = np.asarray(X, float); Y = np.asarray(Y, float)
        N, D = X.shape; K = Y.shape[1]
        self.X, self.Y, self.K = X, Y, K
        E = np.eye(K) if free is None else np.eye(K)[:, free]
        self.As = np.stack([np.kron(X[n][:, None], E.T).T for n in range(N)])  # (N, K, D*len(free))
        super().__init__(np.eye(self.As.shape[2]) / s2, g=-np.einsum("nkd,nk->d", self.As, Y))
        x, w = np.polynomial.hermite_e.hermegauss(nodes)
        w = w / np.sqrt(2 * np.pi)
        grids = np.meshgrid(*([x] * K), indexing="ij")
        self.Z = np.stack([g.ravel() for g in grids], 1)            # (n^K, K)
        ws = np.meshgrid(*([w] * K), indexing="ij")
        self.Wt = np.prod(np.stack([g.ravel() for g in ws], 1), 1)
        keep = self.Wt > 1e-20
        self.Z, self.Wt = self.Z[keep], self.Wt[keep]

    def _e(self, m, V):
        mt = np.einsum("nkd,d->nk", self.As, m)
        Vt = np.einsum("nkd,de,nle->nkl", self.As, V, self.As)
        E = np.zeros(len(mt)); Ep = np.zeros_like(mt); EH = np.zeros_like(Vt)
        for n in range(len(mt)):
            ev, Q = np.linalg.eigh(Vt[n])
            C = Q * np.sqrt(np.clip(ev, 0, None))
            U = mt[n] + self.Z @ C.T
            mx = U.max(1, keepdims=True)
            lse = (mx[:, 0] + np.log(np.exp(U - mx).sum(1)))
            p = np.exp(U - lse[:, None])
            E[n] = self.Wt @ lse
            Ep[n] = self.Wt @ p
            EH[n] = np.diag(Ep[n]) - np.einsum("i,ik,il->kl", self.Wt, p, p)
        return mt, E, Ep, EH

    def nelbo(self, m, V, adaptive=False):
        d = m - self.mu
        val = 0.5 * d @ self.P @ d + 0.5 * np.trace(self.P @ V) + self.g @ m + self.k0
        _, E, _, _ = self._e(m, V)
        sign, ld = np.linalg.slogdet(V)
        return val + E.sum() - 0.5 * ld - 0.5 * self.D * (1 + np.log(2 * np.pi))

    def grads(self, m, V):
        gm = self.P @ (m - self.mu) + self.g
        GV = 0.5 * self.P.copy()
        _, E, Ep, EH = self._e(m, V)
        gm += np.einsum("nkd,nk->d", self.As, Ep)
        GV += 0.5 * np.einsum("nkd,nkl,nle->de", self.As, EH, self.As)
        return gm, GV
