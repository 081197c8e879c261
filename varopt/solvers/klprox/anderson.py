r"""Anderson-extrapolated steps of the KL-proximal iteration (models with softmax rows; docs/klprox.md, section 4).

At ``beta -> inf`` the natural step is the fixed-point map ``T(m, gt) = (m + V(gamma) g, gamma)`` (``gamma``, ``g``
the expected curvatures and the ELBO's gradient in ``m`` at the current ``q``, ``V(gamma)^-1 = P + A^T Gamma A``);
its fixed points are the stationary points of the ELBO. On softmax rows with wide predictors it contracts slowly
(wine, K = 3, delta = 1: residuals x0.88 per step at beta = 20, x0.67 for (16) at beta = 1). Anderson acceleration
(Anderson 1965; "type II" in the form of Walker & Ni 2011, eq. (1.2)-(1.3)) keeps the last ``memory + 1`` pairs
``(x_i, T(x_i))``, ``f_i = T(x_i) - x_i``, and proposes

    x+ = T(x_k) - dT theta,    theta = argmin || f_k - dF theta ||_2,

``dF``, ``dT`` the differences of consecutive ``f_i`` and ``T(x_i)`` (an extrapolation that cancels the slowly
contracting directions seen in the last steps). The solver evaluates the proposal *instead of* a plain step and keeps
it only when it passes the same exact-ELBO acceptance test; otherwise the memory is cleared and the plain damped step
is taken (one evaluation lost). ``T`` costs one precision factorization (no likelihood evaluation): on softmax rows
the quadrature is the cost of a step (docs/klprox.md, section 2b), so an accepted proposal is a step at the price of
one evaluation.
"""
from __future__ import annotations

import numpy as np

#: relative singular-value cut-off of the least-squares problem for theta (nearly dependent differences near the
#: optimum, where f_i are at the rounding level)
RCOND = 1e-12


class AndersonSteps:
    """The memory and the proposals of :mod:`.anderson` over one :class:`~.posterior.FullGaussian`."""

    def __init__(self, post, memory):
        self.post, self.memory = post, int(memory)
        self.X, self.T = [], []
        #: proposals accepted by the solver (``info['anderson_steps']``)
        self.accepted = 0

    def reset(self):
        """Forget the pairs (after a rejected proposal: the linear model they carry did not hold)."""
        self.X, self.T = [], []

    def propose(self, cur):
        """The extrapolated state from the evaluated state ``cur`` (``st``, ``alpha``, ``gamma``), or None while
        fewer than two pairs are held or when the proposal's precision is not positive definite."""
        st = cur.st
        try:
            t = self.post.step(st, cur.alpha, cur.gamma, 0.0, natural=True)   # T(x_k): r = 0, the undamped step
        except np.linalg.LinAlgError:
            self.reset()
            return None
        self.X.append(np.concatenate([st.m, st.gt]))
        self.T.append(np.concatenate([t.m, t.gt]))
        if len(self.X) > self.memory + 1:
            del self.X[0], self.T[0]
        if len(self.X) < 2:
            return None
        T = np.array(self.T)
        F = T - np.array(self.X)
        theta = np.linalg.lstsq(np.diff(F, axis=0).T, F[-1], rcond=RCOND)[0]
        x = T[-1] - np.diff(T, axis=0).T @ theta
        D = st.m.size
        try:
            return self.post.state_of(x[:D], x[D:])
        except np.linalg.LinAlgError:     # extrapolated pseudo-precisions with an indefinite precision
            self.reset()
            return None
