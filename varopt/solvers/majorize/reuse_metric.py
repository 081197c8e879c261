"""Reference matrices ``P`` of option ``bound_reuse`` (:mod:`.reuse`): the bound's curvature at an earlier iterate.

A trial of :class:`.reuse.ScaledCurvature` needs ``P^{-1} v`` (its initial matrix ``B_0 = c P`` and the guaranteed
decrease ``1/2 u^T P^{-1} u`` of its acceptance test) and ``||P w - u||`` (``u`` outside the range of ``P``: a flat
direction of the bound, left to the bound step's unboundedness test). Two kinds:

* :class:`DenseMetric`: ``P = H + Sigma + rho I`` (Algorithm 1's ``Sigma``, the matrix of Algorithm 2's dense
  step), one Cholesky factor with the step's relative ``1e-10`` proximal term;
* :class:`KronMetric`: class-template features (multinomial logistic regression) with the same regularizer in
  every class block: the Kronecker approximation ``Pbar = I_K (x) B + Mbar (x) C`` of ``H + rho I + Sigma``
  that preconditions the CG step (docs/majorize.md section 1b), whose inverse costs ``O(K^2 d' + K d'^2)``
  instead of the ~20 matrix-free products of an exact solve. ``Pbar`` is not the bound (``Mbar`` averages the
  samples' ``M_g``), so the acceptance test then guarantees ``1/2 u^T Pbar^{-1} u`` instead of the bound
  step's decrease; convergence needs only that the test's matrix has eigenvalues bounded on the level set
  (docs/majorize.md section 2), which ``Pbar`` has (``Mbar <= max_g M_g``, ``omega <= 1/4``).

A compiled program's :meth:`.model.MajorizeModel.reuse_metric` builds the one matching the step solver it
would use (and reuses the matrix or operator of the bound step just taken at the same point).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg import lapack

from .step import proximal_cholesky


class DenseMetric:
    """``P`` dense, its proximal Cholesky factor; ``ok`` is False when that fails."""

    kind = "dense"

    def __init__(self, P, exact=True):
        self.P = P
        self.exact = exact  # True: the matrix of Algorithm 2's step; False: the Hessian (the first metric)
        self.cf = proximal_cholesky(P, capped=False)
        self.ok = self.cf is not None

    def solve(self, v):
        return lapack.dpotrs(self.cf, v)[0]

    def residual(self, w, u):
        """``||P w - u||``."""
        r = self.P @ w - u
        return math.sqrt(float(r @ r))

    def restricted(self, F):
        """``P_FF`` (the free variables of a constrained trial), factored once per free set; None if singular."""
        key = F.tobytes()
        got = self._sub.get(key) if hasattr(self, "_sub") else None
        if got is None:
            idx = np.flatnonzero(F)
            got = DenseMetric(self.P[idx[:, None], idx], self.exact)  # P[np.ix_(F, F)] without np.ix_'s wrapper
            self._sub = {key: got}
        return got if got.ok else None


class LineMetric:
    """``P = L I`` with ``L = u^T (H + Sigma + rho I) u / u^T u``: the bound's curvature along the gradient ``u`` at the
    reference point (bound oracles that give ``V^T Sigma V`` without forming ``Sigma``, e.g. the chain CRF's
    junction tree; only with ``reuse_metric='scalar'`` and a positive definite ``H + rho I``).

    ``-u / L`` is Algorithm 2's step restricted to the line ``theta + a u`` (Theorem 1 on that line), and
    ``1/2 u^T u / L`` its guaranteed decrease, which the acceptance test of :mod:`.reuse` then asks a fraction
    of (``L <= lambda_max(H + Sigma + rho I)``, so the convergence argument there holds). ``H + rho I`` positive
    definite: the bound has no flat direction, so the range test is void (``residual`` 0)."""

    kind = "line"
    exact = False

    def __init__(self, L):
        self.L = float(L)
        self.ok = math.isfinite(self.L) and self.L > 0

    def solve(self, v):
        return v / self.L

    def residual(self, w, u):
        return 0.0

    def restricted(self, F):
        """``(L I)_FF = L I`` (the free variables of a constrained trial)."""
        return self


class KronMetric:
    """``Pbar`` of the CG step's Kronecker preconditioner (:class:`.structured.StructuredSigma`)."""

    kind = "kron"
    exact = False  # an approximation of the bound

    def __init__(self, op):
        self.op = op
        self.ok = op.kron_parts() is not None

    def solve(self, v):
        return self.op.precondition(v)

    def residual(self, w, u):
        """``||Pbar0 w - u||`` with ``Pbar0`` = ``Pbar`` without its regularization: as the dense metric's residual
        (computed with ``P`` itself, not with the proximal term of its Cholesky factor), it is large when ``u``
        has a component along a flat direction of the bound."""
        r = self.op.precondition_matvec(w, regularized=False) - u
        return math.sqrt(float(r @ r))

    def restricted(self, F):
        """``Pbar_FF`` for a few fixed variables ``C`` (constrained trials): by the bordered system,
        ``Pbar_FF^{-1} v = (Pbar^{-1} v~ - Pbar^{-1} E (E^T Pbar^{-1} E)^{-1} E^T Pbar^{-1} v~)_F`` with ``v~`` = ``v``
        on ``F``, 0 on ``C``, ``E`` the unit columns of ``C`` (``|C|`` solves once per free set)."""
        C = np.flatnonzero(~F)
        if C.size > MAX_FIXED:
            return None
        key = F.tobytes()
        got = self._sub.get(key) if hasattr(self, "_sub") else None
        if got is None:
            got = _RestrictedKron(self, F, C)
            self._sub = {key: got}
        return got if got.ok else None


#: fixed variables up to which the Kronecker metric is restricted by the bordered system
MAX_FIXED = 50


class _RestrictedKron:
    """``Pbar_FF`` of :meth:`KronMetric.restricted`."""

    kind = "kron"
    exact = False

    def __init__(self, met, F, C):
        self.met, self.F, self.C = met, F, C
        n = F.size
        E = np.zeros((n, C.size))
        E[C, np.arange(C.size)] = 1.0
        self.PE = np.column_stack([met.solve(E[:, k]) for k in range(C.size)]) if C.size else np.zeros((n, 0))
        S = self.PE[C]  # E^T Pbar^{-1} E
        cf = proximal_cholesky(0.5 * (S + S.T)) if C.size else None
        self.cf = cf
        self.ok = C.size == 0 or cf is not None

    def solve(self, v):
        vt = np.zeros(self.F.size)
        vt[self.F] = v
        w = self.met.solve(vt)
        if self.C.size:
            w = w - self.PE @ lapack.dpotrs(self.cf, w[self.C])[0]
        return w[self.F]

    def residual(self, w, u):
        wt = np.zeros(self.F.size)
        wt[self.F] = w
        r = self.met.op.precondition_matvec(wt, regularized=False)[self.F] - u
        return math.sqrt(float(r @ r))
