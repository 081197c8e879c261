"""The split ``f = g + h`` of a program objective: smooth part ``g`` and separable penalty ``h``.

``h`` is read off the model and must have a closed-form proximal operator. Per variable ``j``
(every term acting on one variable only)::

    h_j(x_j) = l1_j |x_j - c_j| + l2_j x_j^2 + indicator(lb_j <= x_j <= ub_j)

* ``l1``: rows ``coef * |a x_j + b|`` of the nonsmooth atoms (``abs``; ``cp.norm1``, ``cp.abs``,
  Pyomo ``abs``), ``|a x_j + b| = |a| |x_j + b/a|``, so ``l1_j = coef |a|``, ``c_j = -b/a``;
* ``l2`` (elastic net): multiplier-free rows ``coef (a x_j)^2`` of the quadratic atom on a variable
  that also carries an ``l1`` row (on other variables they stay in the smooth part);
* the box: variable bounds (nonnegativity is ``lb = 0``).

**Prox** (Parikh & Boyd 2014, §6.5): for step ``t`` the 1-D problem
``argmin_x (x - v)^2/2 + t h_j(x)`` has the solution

    x = clip( c + soft(v/(1 + 2 t l2) - c', t l1/(1 + 2 t l2)) ... )

worked out as follows: with ``s = 1 + 2 t l2`` the objective is ``s/2 (x - v/s)^2 + t l1 |x - c|``
(+ const), whose minimiser is ``c + S(v/s - c, t l1/s)``, ``S(u, k) = sign(u) max(|u| - k, 0)``;
for a 1-D convex function restricted to an interval the minimiser is the clip of the unrestricted
one (the objective is unimodal). Two rows on one variable with different centres ``c`` have no
one-line prox here and are rejected, as is any nonsmooth row coupling variables (``|x - y|``),
a nonsmooth row with a multiplier variable, a negative coefficient (nonconvex) or a nonsmooth
term in a constraint.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError
from ...program import AtomGroup, Expression
from ...program.atoms import ATOMS


def _row_text(kind, A, b, r, names):
    cols, vals = A.indices[A.indptr[r]:A.indptr[r + 1]], A.data[A.indptr[r]:A.indptr[r + 1]]
    u = " + ".join(f"{v:g}*{names[c]}" for c, v in zip(cols, vals)) or "0"
    if b[r]:
        u += f" + {b[r]:g}"
    return ATOMS[kind].text.format(u=u)


class SeparablePenalty:
    """``h(x) = sum_j l1_j |x_j - c_j| + l2_j x_j^2`` on the box ``[lb, ub]`` (module docstring)."""

    def __init__(self, l1, center, l2, lb, ub):
        self.l1, self.center, self.l2 = (np.asarray(a, dtype=float) for a in (l1, center, l2))
        self.lb, self.ub = np.asarray(lb, dtype=float), np.asarray(ub, dtype=float)
        self._l2_idx = np.flatnonzero(self.l2)  # value(): 0 * x^2 is NaN once x^2 overflows (a far start)

    @property
    def n(self):
        return self.l1.size

    def subset(self, idx) -> "SeparablePenalty":
        """The penalty of the variables ``idx`` alone (``h`` is separable)."""
        return SeparablePenalty(self.l1[idx], self.center[idx], self.l2[idx], self.lb[idx], self.ub[idx])

    def settled(self, x, v) -> np.ndarray:
        """Variables held at a kink of ``h`` or at a bound whose least-norm subgradient entry ``v_j``
        is 0: no model step moves them unless the other variables change their gradient."""
        u = x - self.center
        return (((u == 0) & (self.l1 > 0)) | (x <= self.lb) | (x >= self.ub)) & (v == 0)

    def value(self, x) -> float:
        """``h(x)`` (``+inf`` outside the box)."""
        x = np.asarray(x, dtype=float)
        if (x < self.lb).any() or (x > self.ub).any():
            return np.inf
        q = x[self._l2_idx]
        return float(self.l1 @ np.abs(x - self.center) + self.l2[self._l2_idx] @ (q * q))

    def prox(self, v, t) -> np.ndarray:
        """``argmin_x ||x - v||^2/2 + t h(x)`` (``t`` a scalar step or an array per variable)."""
        s = 1.0 + 2.0 * t * self.l2
        u = v / s - self.center
        k = t * self.l1 / s
        x = self.center + np.sign(u) * np.maximum(np.abs(u) - k, 0.0)
        return np.clip(x, self.lb, self.ub)

    def min_norm_subgradient(self, x, grad) -> np.ndarray:
        """The element of least norm of ``grad + dh(x)`` (the optimality residual of ``g + h`` at
        ``x``; zero iff ``x`` is optimal). Per variable the subdifferential is the interval
        ``q + l1 [-1, 1]`` at the kink (``q = grad + 2 l2 x``; the point ``q + l1 sign(x - c)``
        elsewhere), extended to ``-inf`` at ``lb`` and ``+inf`` at ``ub`` (the normal cone); its
        least-norm element is ``clip(0, lo, hi)``."""
        x = np.asarray(x, dtype=float)
        q = np.asarray(grad, dtype=float) + 2.0 * self.l2 * x
        u = x - self.center
        kink = (u == 0) & (self.l1 > 0)
        lo = np.where(kink, q - self.l1, q + self.l1 * np.sign(u))
        hi = np.where(kink, q + self.l1, lo)
        lo = np.where(x <= self.lb, -np.inf, lo)
        hi = np.where(x >= self.ub, np.inf, hi)
        return np.clip(0.0, lo, hi)

    def support(self, x, tol=0.0) -> np.ndarray:
        """Indices of the penalised variables away from their centre (the selected support)."""
        pen = self.l1 > 0
        return np.flatnonzero(pen & (np.abs(np.asarray(x) - self.center) > tol))


def split_objective(program, solver="proxsg"):
    """``(smooth Expression, SeparablePenalty)`` of ``program`` (module docstring), or a
    :class:`ModelStructureError` naming the term without a closed-form prox."""
    names, n, obj = program.names, program.n, program.objective
    where = f"objective '{program.objective_name}'"
    for con in program.constraints:
        kinds = [g.kind for g in con.body.atoms if not ATOMS[g.kind].smooth]
        if kinds:
            raise ModelStructureError(
                f"constraint '{con.name}': a nonsmooth term ({ATOMS[kinds[0]].text.format(u='.')}) in a "
                f"constraint; solver '{solver}' takes nonsmooth terms only as a separable penalty in the objective")
        raise ModelStructureError(
            f"constraint '{con.name}': solver '{solver}' takes variable bounds only (a linear constraint on one "
            "variable counts as a bound; the projection onto a general constraint has no closed form); write "
            "the restriction as bounds or use 'ipsa'")
    l1, center, l2 = np.zeros(n), np.zeros(n), np.zeros(n)
    has_c = np.zeros(n, dtype=bool)
    smooth_groups, quad_groups = [], []
    for g in obj.atoms:
        kern = ATOMS[g.kind]
        if kern.smooth:
            (quad_groups if kern.quadratic else smooth_groups).append(g)
            continue
        A = sp.csr_matrix(g.A)
        A.eliminate_zeros()

        def text(r, g=g, A=A):  # a row's text, formatted only for an error message
            return _row_text(g.kind, A, g.b, r, names)

        for r in range(len(g)):
            nnz = A.indptr[r + 1] - A.indptr[r]
            if g.mult[r] >= 0:
                raise ModelStructureError(
                    f"{where}: the nonsmooth term {names[g.mult[r]]}*{text(r)} has a variable multiplier; solver "
                    f"'{solver}' needs a separable penalty with a closed-form prox (no known prox for it)")
            if nnz == 0:
                continue  # |b|: a constant
            if nnz > 1:
                raise ModelStructureError(
                    f"{where}: the nonsmooth term {text(r)} couples {nnz} variables; solver '{solver}' needs a "
                    "separable penalty (each nonsmooth term on one variable) with a closed-form prox; a "
                    "nonsmooth term cannot be part of the smooth part")
            if g.coef[r] < 0:
                raise ModelStructureError(f"{where}: the nonsmooth term {g.coef[r]:g}*{text(r)} has a negative "
                                          "coefficient (nonconvex); no proximal operator")
            j = A.indices[A.indptr[r]]
            a = A.data[A.indptr[r]]
            c = -g.b[r] / a
            if has_c[j] and l1[j] > 0 and g.coef[r] > 0 and not np.isclose(c, center[j], rtol=0, atol=1e-15):
                raise ModelStructureError(
                    f"{where}: variable '{names[j]}' carries two nonsmooth terms with different kinks "
                    f"({center[j]:g} and {c:g}); no one-line prox is known for their sum")
            if g.coef[r] > 0:
                l1[j] += g.coef[r] * abs(a)
                center[j], has_c[j] = c, True
    # elastic net: pure squares (a x_j)^2 of a penalised variable go to the prox
    for g in quad_groups:
        A = sp.csr_matrix(g.A)
        A.eliminate_zeros()
        nnz = np.diff(A.indptr)
        one = np.flatnonzero((nnz == 1) & (g.mult < 0) & (g.b == 0) & (g.coef >= 0))
        cols = A.indices[A.indptr[one]]
        ok = (l1[cols] > 0) & (center[cols] == 0)
        one, cols = one[ok], cols[ok]
        take = np.zeros(len(g), dtype=bool)
        take[one] = True
        np.add.at(l2, cols, g.coef[one] * A.data[A.indptr[one]] ** 2)
        if (~take).any():
            keep = np.flatnonzero(~take)
            smooth_groups.append(AtomGroup(g.kind, g.coef[keep], g.A[keep], g.b[keep], g.mult[keep],
                                           label=None if g.label is None else np.asarray(g.label)[keep]))
    smooth = Expression(n, obj.constant, obj.linear.copy(), obj.quadratic, smooth_groups, list(obj.lse))
    return smooth, SeparablePenalty(l1, center, l2, program.lb, program.ub)
