"""The iterations of ``proxsg`` (Honorio 2012, §3; docs/proxsg.md) for ``min g(x) + h(x)``.

* **PB** basic proximal gradient (Schmidt, Le Roux & Bach 2011): ``x+ = prox_{h/L}(x - grad/L)``,
  constant step ``1/L``; output the last point. Error term (13): ``K A^2``.
* **PA** accelerated proximal gradient (FISTA, Beck & Teboulle 2009): the same step at the
  extrapolated point ``y = x_k + (t_{k-1} - 1)/t_k (x_k - x_{k-1})``; output the last point.
  Error term (14): ``K^2 A^2``; optional adaptive restart (O'Donoghue & Candès 2015).
* **FB / FR / FL** forward-backward splitting (Duchi & Singer 2009) with the decreasing step
  ``eta_k = beta / (G k^r)`` (Theorems 6-8): ``x_{k+1/2} = x_k - eta_k grad``,
  ``x_{k+1} = prox_{eta_{k+1} h}(x_{k+1/2})``; FB outputs the average of the visited points
  ``x_1..x_K`` (Theorem 7), FR the ``eta``-weighted average (robust, Theorem 6), FL the last point,
  FU a visited point ``x_k`` with ``k`` uniform on ``1..K`` (Theorem 8: ``f(x_k) - f*`` bounded with
  probability ``1 - delta`` by ``1/delta`` times Theorem 7's bound, Markov's inequality). Every FBS run
  keeps the random point by reservoir sampling (replace the kept point by ``x_k`` with probability
  ``1/k``: uniform over ``1..K`` whatever ``K`` the run stops at) from its own random stream, so the
  gradient samples and the other outputs do not depend on it. The sampled gradients are averaged
  over the last half of the run (``grad_average``, for ``sparsify='gradient'``).

With exact gradients and values PB/PA find ``L`` by backtracking (``g(p) <= g(y) + grad.(p - y)
+ L/2 |p - y|^2``), starting from the Lipschitz hint, which is shrunk by 0.8 per iteration until the first backtrack; they stop when the prox-gradient mapping
``L (y - p)`` is below ``kkt_tol`` (relative to ``max(1, |grad|)``).
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InvalidOptionError


class Averager:
    """Weighted average of the visited points: over all of them (``'all'``, the paper) or over at
    least the last half (``'suffix'``: two windows restarted at powers of two; Rakhlin, Shamir &
    Sridharan 2012), in O(n) memory."""

    def __init__(self, n, mode):
        self.mode = mode
        self.s = [np.zeros(n), np.zeros(n)]
        self.w = [0.0, 0.0]
        self.count = 0

    def add(self, x, w):
        self.count += 1
        if self.mode == "suffix" and self.count >= 2 and (self.count & (self.count - 1)) == 0:
            self.s, self.w = [self.s[1], np.zeros_like(self.s[1])], [self.w[1], 0.0]
        self.s[1] = self.s[1] + w * x
        self.w[1] += w

    def value(self):
        return (self.s[0] + self.s[1]) / (self.w[0] + self.w[1])


class ProxRun:
    """One ``proxsg`` solve on the shared run loop (module docstring)."""

    def __init__(self, src, pen, opts, run, x0, method):
        self.src, self.pen, self.opts, self.run, self.method = src, pen, opts, run, method
        self.x = x0
        self.info = {"method": method}
        self.can_value = src.value(x0) is not None

    def objective(self, x):
        v = self.src.value(x)
        return None if v is None else v + self.pen.value(x)

    # --- step-size rules ------------------------------------------------------------------
    def lipschitz(self):
        o = self.opts
        if o.step is not None:
            return 1.0 / o.step, False
        if o.lipschitz is not None:
            return o.lipschitz, False
        L = self.src.lipschitz_hint(self.x)
        backtrack = o.backtrack and self.src.exact and self.can_value
        if L is None or not L > 0:
            if not backtrack:
                raise InvalidOptionError(
                    f"proxsg method {self.method}: no Lipschitz estimate of the smooth gradient is available "
                    "(the oracle has no 'lipschitz' and gives no exact values for backtracking); pass "
                    "'lipschitz' or 'step'")
            L = 1.0
        return L, backtrack

    def grad_bound(self, g0):
        o = self.opts
        if o.grad_bound is not None:
            return o.grad_bound
        G = getattr(self.src.oracle, "gradient_bound", None)
        if G is not None:
            return float(G)
        return max(float(np.linalg.norm(g0)), float(np.linalg.norm(self.pen.l1)), 1e-12)

    # --- the methods ----------------------------------------------------------------------
    def _converged(self, y, p, L, g):
        if not self.src.exact:
            return False
        res = L * float(np.max(np.abs(y - p))) if p.size else 0.0
        return res <= self.opts.kkt_tol * max(1.0, float(np.max(np.abs(g))) if g.size else 1.0)

    def _prox_step(self, y, g, L, backtrack, gy):
        """``p = prox_{h/L}(y - g/L)`` with backtracking on ``L``; returns ``(p, L, g(p))`` (``g(p)`` None
        without backtracking). ``L > 1e300`` ends the search: the caller treats it as a failure (a NaN ``g(p)``
        never passes the test, and the step it leaves, ``~1e-300``, made the residual test pass)."""
        while True:
            p = self.pen.prox(y - g / L, 1.0 / L)
            if not backtrack:
                return p, L, None
            d = p - y
            gp = self.src.value(p)
            if gp <= gy + g @ d + 0.5 * L * (d @ d) + 1e-12 * max(1.0, abs(gy)) or L > 1e300:
                return p, L, gp
            L *= 2.0

    def _diverged(self, k, where, value, x_ok, at_start=False):
        """Status and message of a run whose objective stopped being a finite number (``value`` at ``where``):
        the iterates ran off (a smooth part unbounded below along them, e.g. not convex: the descent lemma
        holds trivially for a concave ``g``, so backtracking never stops them), or the backtracking found no
        step. The last iterate with a finite objective is the output, with status ``numerical``."""
        size = float(np.max(np.abs(where))) if where.size else 0.0
        if math.isfinite(value):
            what = f"backtracking raised L above 1e300 at iteration {k} without a descent step"
        elif at_start:
            return "numerical", (f"the objective is not finite at the starting point (value {value:.6g}, |x|_inf = "
                                 f"{size:.3g}); start elsewhere (option x0 or the variables' values)"), x_ok
        else:
            what = (f"the objective is not finite at iteration {k} (value {value:.6g}, |x|_inf = {size:.3g}): the "
                    "iterates diverged (is the smooth part convex and bounded below? proxsg's convergence needs a "
                    "convex smooth part, Honorio 2012)")
        return "numerical", what + "; the last iterate with a finite objective is returned", x_ok

    def proximal_gradient(self, accelerated):
        run, src, o = self.run, self.src, self.opts
        L, backtrack = self.lipschitz()
        self.info["lipschitz_initial"] = L
        x = self.x
        y, t, shrink = x.copy(), 1.0, True
        x_ok = x  # the last iterate whose objective is known finite (the output if the values stop being finite)
        for k in run.iterations():
            g, _ = src.grad(y, k)
            gy = src.value(y) if backtrack else None
            if backtrack and shrink:
                L *= 0.8  # from a loose hint, shrink L until the first backtrack (monotone after it)
            L_before = L
            p, L, gp = self._prox_step(y, g, L, backtrack, gy)
            if backtrack and not (math.isfinite(gy) and math.isfinite(gp) and L <= 1e300):
                self.x, self.info["lipschitz"] = x_ok, L
                return self._diverged(k, y if not math.isfinite(gy) else p, gy if not math.isfinite(gy) else gp,
                                      x_ok, at_start=k == 1 and not math.isfinite(gy))
            x_ok = p if backtrack else x_ok
            shrink = shrink and L == L_before
            done = self._converged(y, p, L, g)
            if accelerated:
                t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
                if o.restart and (y - p) @ (p - x) > 0:
                    t, t_new = 1.0, 1.0
                y = p + ((t - 1.0) / t_new) * (p - x)
                t = t_new
            else:
                y = p
            x = p
            self._report(x, x, k, step=1.0 / L)
            if run.callback(x):
                break
            if done:
                self.x = x
                self.info["lipschitz"] = L
                return "converged", f"prox-gradient residual below kkt_tol={o.kkt_tol:g}", x
        self.info["lipschitz"] = L
        self.x = x
        return None, None, x

    def splitting(self):
        run, src, o, pen = self.run, self.src, self.opts, self.pen
        x = self.x
        g, batch = src.grad(x, 1)
        G = self.grad_bound(g)
        eta0 = o.step if o.step is not None else o.beta / G
        self.info.update(grad_bound=G, step0=eta0, r=o.r)
        uni, wtd = Averager(x.size, o.average), Averager(x.size, o.average)
        pick = np.random.default_rng(np.random.SeedSequence(o.seed).spawn(2)[1])  # Theorem 8's random index
        gavg = Averager(x.size, "suffix")  # the sampled gradients over the last half (sparsify='gradient')
        self.random_point, self.random_index, self.iterations = x, 1, 0
        for k in run.iterations():
            if k > 1:
                g, batch = src.grad(x, k)
            eta = eta0 / k ** o.r
            uni.add(x, 1.0)
            wtd.add(x, eta)
            gavg.add(g, 1.0)
            self.grad_average = gavg
            if k > 1 and pick.random() * k < 1.0:
                self.random_point, self.random_index = x, k
            self.iterations = k
            x_new = pen.prox(x - eta * g, eta0 / (k + 1) ** o.r)
            done = self._converged(x, pen.prox(x - eta * g, eta), 1.0 / eta, g) and self.method == "FL"
            x = x_new
            out = {"FB": uni, "FR": wtd}.get(self.method)
            self.avg = (uni, wtd)
            shown = out.value() if out is not None else (self.random_point if self.method == "FU" else x)
            self._report(shown, x, k, step=eta)
            if run.callback(x):
                break
            if done:
                self.x = x
                return "converged", f"prox-gradient residual below kkt_tol={o.kkt_tol:g}", x
        self.x = x
        return None, None, x

    def _report(self, out, last, k, objective=None, **fields):
        """Record iteration ``k`` (``objective``: the caller's value of the objective at ``out``, when
        it has one, spares an evaluation)."""
        run = self.run
        S = self.src.size(k)
        obj = None
        if run.due() and self.opts.history_objective and self.can_value:
            obj = self.objective(out) if objective is None else objective
            if out is not last:
                fields["objective_last"] = self.objective(last)
        run.incumbent(out, objective=obj)
        if obj is None:
            run.objective = None
        # the iterate's penalised nonzeros: a sampled run's visible progress, in the history whether or not
        # progress lines are shown (O(n), as the step itself)
        fields["nonzeros"] = int(self.pen.support(last).size)
        run.record(objective=obj, samples=S, **fields)
