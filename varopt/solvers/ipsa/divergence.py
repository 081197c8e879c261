"""Runaway iterates: the test that stops an unstable IPSA run with status ``error``.

A maximum step that is too long for the curvature (``step_power=0`` and ``hessian='identity'``:
``a_k = 1`` on a least-squares term with ``||A||^2 > 1``) makes the stochastic-approximation
iteration unstable: the iterates and the objective grow by orders of magnitude while the run goes
on to its iteration limit and reports an ordinary ``iteration_limit`` / ``pass_limit``. The
Robbins-Monro conditions of Carbonetto (2009, §2.3) hold only for decreasing steps; nothing in the
method detects a step size that is simply too long, so the run is watched instead. A run is
declared diverged, by any of three rules that a stable run does not meet:

1. an iterate with a NaN or infinite component;
2. ``||x||_inf > DIVERGING_ITERATES`` (1e20, IPOPT's ``diverging_iterates_tol``, as majorize);
3. with the program's own objective as the gradient source (no user oracle, whose objective the
   program may not hold):

   * the iterate has moved ``X_GROWTH`` (1e6) times past the scale of the start,
     ``||x||_inf > X_GROWTH (1 + ||x_0||_inf)``, to a point whose objective is above the start's (a
     feasible start is better than where the run went; a minimum far away, or an objective unbounded
     below, has a lower objective there and is left alone); each such test raises the threshold
     tenfold, so a run drifting far on purpose pays one objective evaluation per decade;
   * a history record's objective (the run evaluates it at its records unless
     ``history_objective=False``: no evaluation is added) is above the best recorded one by more
     than ``F_GROWTH (1 + max(|f_best|, |f_0|))`` (F_GROWTH = 1e4).

Over the runs of the test suite (tests/test_ipsa*.py, sasmc, the L1 estimators, the examples) the
largest ratios met were 16 (``||x||_inf`` over the start's scale) and 0.11 (objective rise over
its scale): the thresholds are five orders of magnitude away from a stable run.

The test reads the state only: the iterates of a run it does not stop are unchanged. The numpy
loop tests after every iteration (one ``max |x|``: n operations against the step's O(n m)), the
compiled loop after every kernel call and before replaying an iteration the kernel refused.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ...core.checks import DIVERGING_ITERATES

#: growth factors of the rules 3: iterate scale, objective rise (no stable run comes near either)
X_GROWTH, F_GROWTH = 1e6, 1e4


class DivergedWarning(RuntimeWarning):
    """An IPSA run stopped because its iterates or objective ran away (status ``error``)."""


class DivergenceWatch:
    """The rules of the module docstring for one :class:`.IpsaRun` (made after its start)."""

    def __init__(self, r):
        self.r = r
        x0 = r.x
        self.x0_scale = 1.0 + (float(np.max(np.abs(x0))) if x0.size else 0.0)
        self.trigger = X_GROWTH * self.x0_scale
        self.own = r.opts.oracle is None
        # the start's objective, evaluated when a rule first needs it (most runs never do: with
        # history_objective=False that is one objective evaluation saved per solve, 0.1 ms on a1a)
        self._x0 = x0.copy() if self.own else None
        self._f0_known = not self.own
        self._f0 = self.f_best = None
        self.seen = 0   # history entries already read

    @property
    def f0(self):
        """The objective at the start (None with a user oracle or when it is not finite)."""
        if not self._f0_known:
            f0 = self.r.objective(self._x0)
            self._f0 = self.f_best = f0 if f0 is not None and math.isfinite(f0) else None
            self._f0_known, self._x0 = True, None
        return self._f0

    def check(self, x):
        """The message of the first rule ``x`` (and the history) meets, or None."""
        xmax = float(np.max(np.abs(x))) if x.size else 0.0
        if not math.isfinite(xmax):
            bad = int(np.flatnonzero(~np.isfinite(x))[0])
            return f"a non-finite iterate ({self.r.program.names[bad]!r} = {x[bad]})"
        if xmax > DIVERGING_ITERATES:
            return f"||x||_inf = {xmax:.3g} > {DIVERGING_ITERATES:g}"
        if not self.own:
            return None
        if xmax > self.trigger:
            if self.f0 is None:
                return None
            self.trigger *= 10.0
            f = self.r.objective(x)
            if f is None or not math.isfinite(f) or f > self.f0:
                shown = "not finite" if f is None or not math.isfinite(f) else f"{f:.6g}"
                return (f"||x||_inf = {xmax:.3g}, {X_GROWTH:g} times past the start's scale {self.x0_scale:.3g}, "
                        f"at objective {shown} above the start's {self.f0:.6g}")
        return self._history()

    def _history(self):
        hist = self.r.run.history
        for h in hist[self.seen:]:
            f = h.get("objective")
            if f is None:
                continue
            if self.f0 is None:
                return None
            f = float(f)
            if not math.isfinite(f):
                return f"objective {f} at iteration {h['iteration']}"
            if f > self.f_best + F_GROWTH * (1.0 + max(abs(self.f_best), abs(self.f0))):
                return (f"objective {f:.6g} at iteration {h['iteration']}, orders of magnitude above the best "
                        f"{self.f_best:.6g} (start {self.f0:.6g})")
            self.f_best = min(self.f_best, f)
        self.seen = len(hist)
        return None

    def stop(self, why):
        """Stop the run with status ``error`` and a warning that say why and what to change."""
        opts, r = self.r.opts, self.r
        hint = divergence_hint(opts, why)
        msg = (f"diverging iterates at iteration {r.it}: {why} (step_power={opts.step_power:g}, k0={opts.k0:g}, "
               f"hessian={opts.hessian!r}); {hint}")
        warnings.warn(f"ipsa: {msg}", DivergedWarning, stacklevel=2)
        r.run.stop("error", msg)


def divergence_hint(opts, why):
    """What to change after a divergence ``why`` (a message of :meth:`DivergenceWatch.check`): only the step
    options not already at the remedy (a decreasing step is no advice when ``step_power > 0``), and, when the rule
    that fired does not see the objective grow (a non-finite or huge iterate), the model itself: an objective
    unbounded below on the feasible set also makes the iterates run away, and no step size helps there."""
    fixes = []
    if opts.step_power <= 0:
        fixes.append("a decreasing step (step_power > 0, e.g. the default 1)")
    fixes.append(f"a larger k0 (now {opts.k0:g})")
    if opts.hessian == "identity":
        fixes.append("a scaled Hessian (hessian='bb', 'diagonal' or 'exact')")
    hint = ("the maximum step a_k = 1/(k0 + k)^step_power may be too long for the curvature: try "
            + ", ".join(fixes[:-1]) + (" or " if len(fixes) > 1 else "") + fixes[-1])
    if "above the start" not in why and "above the best" not in why:
        hint += ("; if the objective decreases without bound along these iterates, the model is unbounded below on "
                 "its feasible set (a missing bound, constraint or penalty), which no step size fixes")
    return hint
