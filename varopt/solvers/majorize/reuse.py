"""Quasi-Newton steps on a reused, scaled bound, with Algorithm 2's step as fallback (option ``bound_reuse``).

Beyond the paper. Algorithm 2 (Jebara & Choromanska 2012) computes a fresh bound ``Sigma`` at every
iterate and steps ``D = -(H + Sigma + rho I)^{-1} u``; ``f(x + D) <= f(x) + m(D) < f(x)`` by
Theorem 1. For a chain CRF the junction-tree ``Sigma`` (Algorithm 3) costs about three
value-and-gradient evaluations and over-estimates the Hessian several times, so the steps are short
and expensive. With ``bound_reuse = k >= 1`` each iteration first tries the step of the model

    q(D) = u^T D + 1/2 D^T B D,    B = L-BFGS update of  B_0 = c P,   P = H + Sigma_ref + rho I,

``Sigma_ref`` the last computed bound (at most ``k`` moves old, ``P`` is the matrix of Algorithm 2's
step on it), ``0 < c <= 1`` the scale ``c = y^T P^{-1} y / s^T y`` of the latest step ``s`` and
gradient change ``y`` (``C0`` before the first step), and the L-BFGS pairs of the last ``PAIRS``
moves (two-loop recursion, Nocedal & Wright 2006 Alg. 7.4, with ``B_0^{-1} = P^{-1} / c`` from one
Cholesky factor per bound). The scale is the bound's analogue of L-BFGS's ``gamma = s^T y / y^T y``:
with the mean Hessian ``A`` along the step (``y = A s``) it is the ``P^{-1}``-weighted mean of ``A``
relative to ``P`` and, by Cauchy-Schwarz, at least the Rayleigh ratio ``s^T y / s^T P s`` -- the
conservative one of the two secant estimates (the Rayleigh ratio along the last, often flat, step gave
steps too long elsewhere and many rejections). ``P`` dominates the Hessian (Theorem 1), so ``c <= 1``
up to the variation of the Hessian since the bound was computed; it is clipped to ``[C_MIN, 1]``. The trial ``x + D`` is accepted only when the exact objective decreases
by a fixed fraction of what the *bound step* on ``Sigma_ref`` guarantees,

    f(x) - f(x + D) >= ETA * 1/2 u^T (H + Sigma_ref + rho I)^{-1} u,                        (*)

With ``reuse_metric='scalar'`` the initial matrix is L-BFGS's own, ``B_0 = (y^T y / s^T y) I`` (``c P``
until the first pair): the bound then serves only the test (*) and the fallback. Measured on the
chain CRF (docs/majorize.md section 6) the junction-tree ``P`` is a *worse* initial matrix than the
scalar one (its over-count across separator states is far from uniform), so the CRF uses
``'scalar'``. If (*) fails, the iteration takes Algorithm 2's bound step from a *fresh* ``Sigma`` at ``x`` (always a
decrease, checked against its majorizer as before) and ``c`` is doubled. Every iterate has a lower
objective than the previous one. Convergence: every iteration decreases ``f`` by at least
``ETA/2 u^T (H + Sigma' + rho I)^{-1} u >= ETA/2 ||u||^2 / (||H|| + ||Sigma'|| + rho)`` for a bound
``Sigma'`` computed at an earlier iterate (a rejected trial is followed by the bound step itself,
which gives ``1/2 u^T (H + Sigma + rho I)^{-1} u``); the bounds are bounded on the level set, so for
``f`` bounded below ``sum ||u_k||^2 < inf`` and ``u_k -> 0`` as in Algorithm 2.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from ...errors import InputDataError
from .step import proximal_cholesky

#: fraction (*) of the bound step's guaranteed decrease that an accepted trial must achieve
ETA = 1e-2
#: the first scale (the chain CRF's junction-tree bound over-estimates the Hessian several times)
C0 = 0.5
#: smallest scale (keeps B_0 within a factor 1000 of the bound's matrix)
C_MIN = 1e-3
#: shortened trials (quadratic interpolation) before the bound-step fallback
BACKTRACK = 2
#: relative part of u outside the range of H + Sigma_ref + rho I that sends the iteration to the bound step
FLAT = 1e-6
#: L-BFGS pairs kept
PAIRS = 10


def _solve(cf, v):
    return lapack.dpotrs(cf, v)[0]


class ScaledCurvature:
    """State of the reused, scaled bound of one run (see the module docstring).

    ``age`` counts the moves since ``Sigma_ref`` was computed (0: it is the bound at the current iterate)."""

    def __init__(self, reuse: int, metric: str = "bound"):
        self.reuse, self.metric = int(reuse), metric
        self.gamma = None
        self.c = C0
        self.sigma = None  # Sigma_ref
        self.age = 0
        self.P = self.cf_bound = None  # P = H + Sigma_ref + rho I and its Cholesky factor
        self.pairs = []  # (s, y, 1 / s^T y), most recent first
        self.stats = {"trials": 0, "accepted": 0, "backtracks": 0, "rejected": 0, "bounds": 0}

    def sigma_here(self, model, x):
        """The bound at the current iterate ``x`` (computed unless ``Sigma_ref`` already is)."""
        if self.sigma is None or self.age > 0:
            self.sigma, self.age = model.sigma_at(x), 0
            self.cf_bound = None
            self.stats["bounds"] += 1
        return self.sigma

    def moved(self, s, y, model, opts):
        """The iterate moved by ``s`` with gradient change ``y`` (an accepted trial or a bound step)."""
        self.age += 1
        sy = float(s @ y)
        if not sy > 1e-12 * float(np.sqrt((s @ s) * (y @ y))):
            return  # no positive curvature along s (rounding or nonconvexity): no pair
        self.pairs = [(s, y, 1.0 / sy)] + self.pairs[:PAIRS - 1]
        if self.cf_bound is not None:
            self.c = float(np.clip(float(y @ _solve(self.cf_bound, y)) / sy, C_MIN, 1.0))
        self.gamma = sy / float(y @ y)

    def trial(self, model, x, u, f, opts):
        """Try the quasi-Newton step at ``x``; ``(x_new, f_new, S_new, D, q(D), info)`` if accepted, else None.

        After ``reuse`` moves the bound is recomputed at ``x`` first. None means: take Algorithm 2's
        bound step on :meth:`sigma_here`."""
        if self.sigma is None or self.age >= self.reuse:
            self.sigma_here(model, x)
        if self.cf_bound is None:
            self.P = model.bound_matrix(self.sigma, 1.0, opts)
            self.cf_bound = proximal_cholesky(self.P)
            if self.cf_bound is None:
                return None
        w = _solve(self.cf_bound, u)
        if np.linalg.norm(self.P @ w - u) > FLAT * np.linalg.norm(u):
            # u leaves the range of the bound's curvature: possibly unbounded along a flat direction,
            # which the bound step's own check (docs/majorize.md section 2) decides on a fresh bound
            return None
        guaranteed = 0.5 * float(u @ w)
        # two-loop recursion: r = B^{-1} u
        q = u.copy()
        alphas = []
        for s, y, rho in self.pairs:
            a = rho * float(s @ q)
            alphas.append(a)
            q -= a * y
        if self.metric == "scalar" and self.pairs:
            r = self.gamma * q
            metric = {"gamma": self.gamma}
        else:
            r = _solve(self.cf_bound, q) / self.c
            metric = {"scale": self.c}
        for (s, y, rho), a in zip(reversed(self.pairs), reversed(alphas)):
            r += (a - rho * float(y @ r)) * s
        if not np.all(np.isfinite(r)):
            return None
        self.stats["trials"] += 1
        D = -r
        qval = -0.5 * float(u @ r)
        slope = -float(u @ r)  # phi'(0) of phi(a) = f(x + a D)
        a = 1.0
        for k in range(BACKTRACK + 1):
            try:
                f_new, _, S_new = model.evaluate(x + a * D)
            except InputDataError:
                f_new, S_new = np.inf, None  # scores overflowing along an over-long step: shorter
            if guaranteed > 0 and slope < 0 and f - f_new >= ETA * guaranteed:
                self.stats["accepted"] += 1
                Da = a * D
                return x + Da, f_new, S_new, Da, a * slope + 0.5 * a * a * -slope, dict(
                    metric, flat=0.0, bound_age=self.age, ratio=(f - f_new) / -qval, backtracks=k)
            if not slope < 0 or k == BACKTRACK:
                break
            # minimiser of the quadratic through phi(0), phi'(0), phi(a), kept in [0.1 a, 0.5 a]
            curv = (f_new - f - a * slope) / (a * a) if np.isfinite(f_new) else np.inf
            a_new = -slope / (2.0 * curv) if curv > 0 else 0.5 * a
            a = float(np.clip(a_new, 0.1 * a, 0.5 * a))
            self.stats["backtracks"] += 1
        self.c = min(1.0, 2.0 * self.c)
        self.stats["rejected"] += 1
        return None
