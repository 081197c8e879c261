"""Hessian approximations ``B`` for the IPSA direction (thesis §2.4 and §2.5.8).

All of them keep ``B`` symmetric positive definite, which makes the reduced matrix of
(2.20) positive definite for convex constraints.

* :class:`Identity` -- ``B = I`` (the "primal-dual steepest descent" of §2.4, used for all
  experiments of §2.5.7).
* :class:`DampedBB` -- ``B = beta I`` with the Robbins-Monro update of the secant residual
  (eq. 2.45): ``beta <- beta - a_k (beta - s^T y / s^T s)``, skipped when it would make ``beta``
  very small (``beta_new < beta_min``).
* :class:`DampedBFGS` -- dense BFGS with Powell damping (§2.4.2), errata fixed:
  ``B+ = B + y y^T/<y, s> - B s s^T B/<s, B s>`` (the thesis' (2.46) prints ``+`` for the last
  term); ``det B+ = det B <y, s>/<s, B s>`` (the thesis' (2.50)-(2.51) print ``<y, B s>`` in
  the denominator); damping ``y <- t y + (1 - t) B s`` with the largest ``t in [0, 1]`` such
  that ``<y_t, s> >= gamma <s, B s>``, i.e. ``t = (1-gamma)<s,Bs>/(<s,Bs> - <y,s>)`` (2.52),
  ``t = 1`` when (2.53) holds; in the stochastic setting ``t`` is also capped by ``a_k``.
  The derivations are in ``docs/ipsa.md``.
* :class:`RunningDiagonal` -- the diagonal of the Hessian estimated on-line (§2.5.8):
  ``D <- (1 - a_k) D + a_k h_k`` with ``h_k`` an unbiased estimate of the Hessian diagonal from
  the oracle (or, when the oracle has none, the per-coordinate secant ``y_i / s_i`` clipped
  to ``[d_min, d_max]``), floored at ``d_min``.
* :class:`Exact` -- the Hessian of the sampled objective (deterministic part plus the scaled
  batch rows); with a full batch this is the true Hessian and IPSA is a primal-dual
  interior-point method.

``s`` is the difference of two iterates and ``y`` the difference of the gradients at the two
iterates evaluated on the *same* sample (common random numbers), see :mod:`varopt.oracles.protocol`.
"""
from __future__ import annotations

import numpy as np


class Identity:
    diagonal = True
    needs_secant = False

    def __init__(self, n, scale=1.0):
        self.B = np.full(n, float(scale))

    def matrix(self, x, oracle, batch, a):
        return self.B

    def update(self, s, y, a):
        pass


class DampedBB:
    diagonal = True
    needs_secant = True

    def __init__(self, n, beta0=1.0, beta_min=1e-8):
        self.n = n
        self.beta = float(beta0)
        self.beta_min = beta_min
        self.skipped = 0

    def matrix(self, x, oracle, batch, a):
        return np.full(self.n, self.beta)

    def update(self, s, y, a):
        ss = float(s @ s)
        if ss <= 1e-300:
            return
        new = self.beta - a * (self.beta - float(s @ y) / ss)  # (2.45)
        if not np.isfinite(new) or new < self.beta_min:
            self.skipped += 1
            return
        self.beta = new


class DampedBFGS:
    diagonal = False
    needs_secant = True

    def __init__(self, n, gamma=0.8, cap_by_step=True, scale=1.0):
        self.B = np.eye(n) * float(scale)
        self.gamma = gamma
        self.cap = cap_by_step
        self.damped = 0
        self.skipped = 0

    def matrix(self, x, oracle, batch, a):
        return self.B

    @staticmethod
    def damping_factor(sBs, ys, gamma):
        """Largest ``t in [0, 1]`` with ``t <y,s> + (1-t) <s,Bs> >= gamma <s,Bs>`` (2.52)-(2.53)."""
        if ys >= gamma * sBs:
            return 1.0
        return (1.0 - gamma) * sBs / (sBs - ys)

    def update(self, s, y, a):
        Bs = self.B @ s
        sBs = float(s @ Bs)
        if not (sBs > 1e-300) or not np.all(np.isfinite(y)):
            self.skipped += 1
            return
        ys = float(y @ s)
        t = self.damping_factor(sBs, ys, self.gamma)
        if self.cap:
            t = min(t, a)
        if t < 1.0:
            self.damped += 1
        yd = t * y + (1.0 - t) * Bs
        yds = float(yd @ s)  # >= gamma sBs > 0 by construction, so B stays positive definite
        if yds <= 0:
            self.skipped += 1
            return
        self.B = self.B + np.outer(yd, yd) / yds - np.outer(Bs, Bs) / sBs  # (2.46), erratum fixed
        self.B = 0.5 * (self.B + self.B.T)


class RunningDiagonal:
    diagonal = True

    def __init__(self, n, d0=1.0, d_min=1e-6, d_max=1e8, has_oracle_diag=True):
        self.D = np.full(n, float(d0))
        self.d_min, self.d_max = d_min, d_max
        self.use_oracle = has_oracle_diag
        self.needs_secant = not has_oracle_diag

    def matrix(self, x, oracle, batch, a):
        if self.use_oracle:
            # D_k = (1 - a_k) D_{k-1} + a_k h_k: with a_k = 1/(k0 + k) this is the average of the
            # estimates so far with a prior weight k0 on d0, i.e. the diagonal of the full objective
            h = oracle.hessian_diag(x, batch)
            if np.all(np.isfinite(h)):
                self.D = (1.0 - a) * self.D + a * np.maximum(h, 0.0)
                np.maximum(self.D, self.d_min, out=self.D)
        return self.D

    def update(self, s, y, a):
        if not self.use_oracle:
            ok = np.abs(s) > 1e-12
            if not np.any(ok):
                return
            est = np.clip(y[ok] / s[ok], self.d_min, self.d_max)
            self.D[ok] = (1.0 - a) * self.D[ok] + a * est
        np.maximum(self.D, self.d_min, out=self.D)


class Exact:
    diagonal = False
    needs_secant = False

    def __init__(self, n):
        self.n = n

    def matrix(self, x, oracle, batch, a):
        return oracle.hessian(x, batch)

    def update(self, s, y, a):
        pass
