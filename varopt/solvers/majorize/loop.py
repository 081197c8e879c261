"""Algorithm 2 of Jebara & Choromanska (2012): the majorization loop, once, over any model.

Each iteration at ``theta~`` with ``u = grad f(theta~)`` minimises the majorizer
``m(D) = u^T D + 1/2 D^T (H + Sigma + rho I) D`` (step 3, :mod:`.step`), and
``f(theta~ + D) <= f(theta~) + m(D) <= f(theta~)`` makes the iteration monotone: both
inequalities are checked every iteration (:class:`~varopt.errors.SolverBugError` when ``f``
exceeds its majorizer by more than ``MONO_TOL`` relative). Every iteration then tries the
monotone secant/subspace extrapolation of :mod:`.extrapolate` (option ``extrapolate``; trials outside the
constraints are rejected and secant factors capped at the feasible one; beyond the
paper). With option ``bound_reuse = k >= 1`` (the default ``'auto'`` chooses it for compiled programs with a
dense or Kronecker-CG step) each iteration first tries a quasi-Newton step (L-BFGS pairs on the scaled last
bound, at most ``k`` moves old; with constraints on the face of the active bounds, capped to stay feasible),
accepted on sufficient decrease of the exact objective, else takes the bound step from a fresh ``Sigma``
(:mod:`.reuse`; compiled programs: the model's own step, extrapolated). Stopping: the relative decrease ``delta_k``, its extrapolated remainder
``delta_k rho / (1 - rho)`` (``rho`` the largest of the last ``RATE_WINDOW`` ratios ``delta_j / delta_{j-1}``,
linear convergence, Theorem 2) and the
relative step (``<= sqrt(tol)``) all small.

A *model* is what the loop runs over; it provides ``n``, ``constrained``, ``convex``, ``groups``
(padded groups whose score images let trial scores be combined, or None),
``evaluate(x, want_grad=False, scores=None, err=None) -> (f, grad or None, cache)``,
``gradient_at(x, cache)``, ``step(x, u, cache, opts, qp) -> (D, m(D), info, image)`` and
``final_value(x, f, cache)``. Two exist: :class:`.model.MajorizeModel` (a compiled program: its
log-sum-exp groups are the bound oracle) and :class:`.bound_oracle.OracleModel` (any bound oracle
plus a quadratic and a linear part). Limits, history, progress, the callback, the incumbent (kept
for ``KeyboardInterrupt``) and the :class:`~varopt.result.Result` come from the shared
:class:`~varopt.core.run.Run`.
"""
from __future__ import annotations

import math

import numpy as np

from ...core.checks import DIVERGING_ITERATES
from ...errors import InputDataError, SolverBugError
from .extrapolate import MEMORY, secant_extrapolate
from .line_metric import line_bound_step, line_curvature
from .recession import checked_outcome
from .reuse import ScaledCurvature, trial_kernels
from .step import dense_step

#: relative slack allowed between f(theta_new) and the majorizer (rounding only)
MONO_TOL = 1e-12
#: scores computed by linearity are recomputed exactly every this many iterations
REFRESH = 16
#: largest change of the objective (relative to max(1, |f|)) that the rounding of scores computed by
#: linearity may cause; beyond it the scores are recomputed exactly (two such values enter the 1e-12
#: bound check)
LIN_TOL = 2.5e-13
#: gradient left outside the range of the bound's curvature (relative to the first gradient's norm)
#: that means an unbounded objective (the objective is affine along flat directions of the bound)
FLAT_TOL = 1e-6
#: ratios of consecutive relative decreases whose largest is the convergence rate of the stopping test
RATE_WINDOW = 3
#: ||theta|| beyond which the iterates count as diverging (IPOPT's diverging_iterates_tol)
DIVERGED = DIVERGING_ITERATES


def _linear_scores(groups, S, img_step, images, limit):
    """``lin(a, b)`` for :func:`secant_extrapolate`: scores of ``x + a D + sum_j b_j s_j`` by linearity."""
    def lin(a, b):
        return groups.combine(S, [(a, img_step)] + list(zip(b, images)), limit)
    return lin


class Majorization:
    """One run of Algorithm 2 over ``model`` (all per-solve state lives here)."""

    def __init__(self, model, opts, run, qp=None):
        self.model, self.opts, self.run, self.qp = model, opts, run, qp
        # with constraints the trials are kept inside Lambda (qp.feasible / qp.max_factor of .step_qp.StepQP)
        self.extrapolate = opts.extrapolate and (not model.constrained or hasattr(qp, "feasible"))
        self.u_next = None
        self.prev = []  # (step, gradient change) of recent iterations, most recent first: the subspace trial
        self.images = []  # their score images (F step, rounding bound), when the steps come with images
        self.rel_fs = []   # the last RATE_WINDOW + 1 relative decreases
        self.u_scale = None
        self._xx = None  # (x, float(x @ x)) of the last accepted point
        self.diverged = False  # stopped by the diverging-iterates rule (then the attainment check runs)
        # option backend: compiled trials and log-sum-exp evaluations on small programs (.compiled_trial, their
        # size limits), else the numpy path
        K = trial_kernels(getattr(opts, "backend", "numpy"))
        trials = K if K is not None and model.n <= K.MAX_N else None
        lse = model.use_kernels(K) if hasattr(model, "use_kernels") else False
        self.backend = "numba" if trials is not None or lse else "numpy"
        self.reuse = (ScaledCurvature(opts.bound_reuse, opts.reuse_metric, opts.reuse_pairs, trials)
                      if getattr(opts, "bound_reuse", 0) else None)

    def solve(self, x):
        """Run from the feasible start ``x``; the :class:`~varopt.result.Result` (internal sense)."""
        run = self.run
        f, _, S = self.model.evaluate(x)
        if not np.isfinite(f):
            raise InputDataError(f"the objective is not finite at the starting point ({f})")
        self.x, self.f, self.S, self.f0 = x, f, S, f
        run.incumbent(x, objective=f, upper=f)
        run.record(force=True, upper=f, objective=f, step=0.0)
        for it in run.iterations():
            stop = self.iterate(it)
            if stop is not None:
                run.stop(*stop)
        return self.finish()

    def finish(self):
        run = self.run
        if run.history[-1]["iteration"] != run.iteration:
            run.record(force=True, upper=self.f, objective=self.f)
        f = self.model.final_value(self.x, self.f, self.S)
        self._check_attained(f)
        if run.status == "unbounded":
            f = -np.inf  # x is the last iterate; the infimum is -inf
        return run.finish(x=self.x, objective=f, upper=f)

    #: the verdict of the attainment check (:mod:`.recession`): None when not run, else a dict for ``Result.info``
    attainment = None

    def _check_attained(self, f):
        """Before claiming ``optimal`` (or after diverging iterates, or at the iteration limit): is the infimum
        attained? A convex compiled model without curvature in some direction (no ridge on it, no bounds) can
        decrease strictly along a recession direction from every point (separable data in an unregularized
        logistic regression): then no minimizer exists, and the last iterate only approaches the infimum
        (:mod:`.recession`, one LP). Status ``numerical`` (finite infimum not attained; the last iterate is
        returned and loaded, docs/conventions.md) or ``unbounded`` (a ray of linear decrease)."""
        run, model = self.run, self.model
        check = getattr(model, "recession", None)
        if (check is None or not getattr(self.opts, "check_attained", True)
                or not (run.status in ("optimal", "iteration_limit") or self.diverged)):
            return
        names = getattr(getattr(model, "program", None), "names", None)
        status, message, self.attainment = checked_outcome(check, self.x, names, f, run.status, run.message)
        if (status, message) != (run.status, run.message):
            run.finish(status, message)

    # --- one iteration --------------------------------------------------------------------------------------------
    def iterate(self, it):
        """Algorithm 2 steps 2-3 and the checks; ``(status, message)`` to stop, else None."""
        model, opts, x, f, S = self.model, self.opts, self.x, self.f, self.S
        u = model.gradient_at(x, S) if self.u_next is None else self.u_next
        self.u_next = None
        scaled = None
        if self.reuse is None:
            step, mval, info, FD = model.step(x, u, S, opts, self.qp)
        else:
            # option bound_reuse (.reuse): a scaled trial on the last bound, else the bound step on a fresh one
            scaled = self.reuse.trial(model, x, u, f, opts, S, self.qp if model.constrained else None)
            FD = None
            if scaled is not None:
                step, mval, info = scaled[3], scaled[4], scaled[5]
            elif self.reuse.metric == "line" and not model.constrained:
                # matrix-free (.line_metric): Algorithm 2's step on the gradient's line; its L becomes the metric
                step, mval, info, FD, L = line_bound_step(model, x, u, S, opts)
                self.reuse.line_refresh(L)
            elif self.reuse.metric == "line":
                # with constraints Algorithm 2's own step (the step QP: the line step could leave Lambda); the
                # metric becomes the bound's curvature along u here, as after a line step
                step, mval, info, FD = model.step(x, u, S, opts, self.qp)
                if step is not None:
                    self.reuse.line_refresh(line_curvature(model, x, u, S, opts))
            elif hasattr(model, "reuse_metric"):
                # compiled program: Algorithm 2's step by its own solver (dense, CG, QP with constraints);
                # its bound becomes Sigma_ref
                step, mval, info, FD = model.step(x, u, S, opts, self.qp)
                if step is not None:
                    self.reuse.refresh(model, x, S, opts)
            else:
                step, mval, info = dense_step(model.bound_matrix(self.reuse.sigma_here(model, x), 1.0, opts), u)
        if step is None:
            return info, ("the majorizer QP is unbounded below over the constraints: along a feasible direction "
                          "where the bound has no curvature the objective decreases without bound"
                          if info == "unbounded" else f"QP subproblem failed ({info})")
        if self.u_scale is None:
            self.u_scale = max(1.0, math.sqrt(float(u @ u)))
        flat = info.pop("flat", 0.0)
        if flat > FLAT_TOL * self.u_scale and flat > 1e-3 * math.sqrt(float(u @ u)):
            # u has a component along which the bound's curvature vanishes: there every log Z_g and
            # the quadratic part are affine, so f is affine (concave with latent terms) with nonzero slope
            return "unbounded", (f"the objective is unbounded below: along a direction where the bound has no "
                                 f"curvature it is affine{'' if model.convex else ' or concave'} with slope {flat:.3g}")
        if scaled is not None:
            # accepted by its sufficient-decrease test (f_new < f); m_c is no majorizer: no bound check
            x_new, f_new, S_new = scaled[:3]
            lin, limit = False, LIN_TOL * max(1.0, abs(f))
        else:
            if mval > 0:
                # an inexact QP answer worse than D = 0: the majorizer says theta~ is optimal
                step, mval, FD = np.zeros(model.n), 0.0, None
            x_new, f_new, S_new, lin, limit = self._trial(it, x, f, S, step, mval, FD)
        # trials of bound_reuse already use the curvature of earlier iterates: only bound steps are extrapolated
        if self.extrapolate and mval < 0 and scaled is None:
            x_new, f_new, S_new, alpha = self._extrapolate(x, u, S, step, x_new, f_new, S_new, FD, lin, limit)
            step = x_new - x
            info = dict(info, alpha=alpha)
        stop = self._accept(x_new, f_new, S_new, step, mval, info)
        if self.reuse is not None and stop is None and self.run.status is None:
            # the pair (s, y) of this move is for the next trial: none follows a stop (converged, diverged, the
            # callback's), so neither the gradient at x_new nor the pair is computed then (the run's last gradient
            # was one of a small solve's ~16 evaluations; on large programs one full gradient)
            if self.u_next is None:
                self.u_next = model.gradient_at(x_new, S_new)
            self.reuse.moved(x_new - x, self.u_next - u, model, opts)
        return stop

    def _trial(self, it, x, f, S, step, mval, FD):
        """``f(x + D)`` (scores by linearity when safe) and the majorizer and monotonicity checks."""
        model = self.model
        x_new = x + step
        # scores by linearity save a feature product when their rounding bound moves f by less than
        # LIN_TOL (it does not when the image cancels, e.g. a tiny ridge); exact every REFRESH iterations
        lin = FD is not None and S is not None and it % REFRESH != 0
        limit = LIN_TOL * max(1.0, abs(f))
        sc = model.groups.combine(S, [(1.0, FD)], limit) if lin else None
        f_new, _, S_new = (model.evaluate(x_new) if sc is None else
                           model.evaluate(x_new, scores=sc[0], err=sc[1]))
        # rounding of f is relative to the size of its cancelling parts (model.magnitude: sum of log-partitions
        # against the data term), not to |f|: near the optimum of unscaled digits |f| = 17 while the parts are
        # 8e4 (39188 - 39182 + 11) and the check fired at a relative 1.5e-12 (tol=1e-14)
        scale = max(1.0, abs(f), getattr(model, "magnitude", 0.0))
        if self.opts.check_bound and f_new > f + mval + MONO_TOL * scale:
            raise SolverBugError(
                f"majorize: the objective {f_new!r} exceeds its majorizer {f + mval!r} at iteration {it} "
                f"(relative violation {(f_new - f - mval) / scale:.3g}); the bound is not an upper bound")
        if f_new > f + MONO_TOL * scale:
            raise SolverBugError(f"majorize: the objective increased from {f!r} to {f_new!r} at iteration {it}")
        return x_new, f_new, S_new, lin, limit

    def _extrapolate(self, x, u, S, step, x_new, f_new, S_new, FD, lin, limit):
        """The monotone secant/subspace extrapolation along ``step`` (:mod:`.extrapolate`)."""
        model, grp = self.model, self.model.groups
        img = grp.image(S, S_new) if FD is not None else None
        lin_fn = (_linear_scores(grp, S, img, self.images, limit)
                  if lin and img is not None and len(self.images) == len(self.prev) else None)

        constrained = model.constrained

        def trial(z, sc=None):
            if constrained and not self.qp.feasible(z):
                return np.inf, None, None  # outside Lambda: never better, never evaluated
            return model.evaluate(z, want_grad=True, scores=None if sc is None else sc[0],
                                  err=None if sc is None else sc[1])
        S_plain = S_new
        cap = self.qp.max_factor(x, step) if constrained else np.inf
        x_new, f_new, u_next, S_new, alpha = secant_extrapolate(
            trial, x, u, step, x_new, f_new, model.gradient_at(x_new, S_new), S_new, prev=self.prev, lin=lin_fn,
            max_factor=cap)
        self.u_next = u_next
        self.prev = [(x_new - x, u_next - u)] + self.prev[:MEMORY - 1]
        if img is not None:
            self.images = [img if S_new is S_plain else grp.image(S, S_new)] + self.images[:MEMORY - 1]
        else:
            self.images = []  # lengths differ from prev's until realigned: no linear trial meanwhile
        return x_new, f_new, S_new, alpha

    def _accept(self, x_new, f_new, S_new, step, mval, info):
        """Move to ``x_new``, record it, and test convergence and divergence."""
        run, x, f, tol = self.run, self.x, self.f, self.opts.tol
        rel_f = abs(f - f_new) / max(1.0, abs(f))
        # linear convergence: the remaining decrease is about df * rate / (1 - rate), with the slowest rate of the
        # last RATE_WINDOW ratios: quasi-Newton and extrapolated steps make the decreases irregular, and one lucky
        # ratio stopped unscaled digits at 1.8e-7 relative above the optimum with tol = 1e-8
        fs = self.rel_fs = (self.rel_fs + [rel_f])[-(RATE_WINDOW + 1):]
        rate = 0.0
        for a, b in zip(fs, fs[1:]):
            if a > 0 and b / a > rate:
                rate = b / a
        rate = min(rate, 0.999)
        rest = rel_f * rate / (1.0 - rate)
        # ||x||^2 is the last move's ||x_new||^2 (the divergence test below): one product per iteration, not two
        xx = self._xx[1] if self._xx is not None and self._xx[0] is x else float(x @ x)
        xx_new = float(x_new @ x_new)
        self._xx = (x_new, xx_new)
        rel_x = math.sqrt(float(step @ step)) / max(1.0, math.sqrt(xx))
        self.x, self.f, self.S = x_new, f_new, S_new
        run.incumbent(x_new, objective=f_new, upper=f_new)
        run.record(upper=f_new, objective=f_new, step=rel_x, majorizer_decrease=-mval, **info)
        if run.callback(x_new, f_new):
            return None  # the callback stopped the run (status set by Run.callback)
        if not xx_new <= DIVERGED * DIVERGED:
            self.diverged = True
            # monotone decrease with ||theta|| -> inf (IPOPT's "diverging iterates" rule): f is unbounded
            # below or its infimum is not attained (e.g. separable data without regularization)
            return "error", (f"diverging iterates: ||theta|| > {DIVERGED:g} while the objective decreased from "
                             f"{self.f0:.6g} to {f_new:.6g}; the objective is unbounded below or its "
                             "infimum is not attained (add regularization or bounds)")
        if rel_f <= tol and rest <= tol and rel_x <= math.sqrt(tol):
            # say why it stopped (docs/conventions.md: Pyomo's results.solver.message, the CLI's "message")
            return ("optimal" if self.model.convex else "converged"), (
                f"relative objective change {rel_f:.3g} and its extrapolated remainder {rest:.3g} <= tol={tol:g}, "
                f"relative step {rel_x:.3g} <= sqrt(tol)")
        return None
