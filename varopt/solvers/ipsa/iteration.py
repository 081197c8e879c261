"""One IPSA solve (Carbonetto 2009, Fig. 2.1) as a per-solve object on the shared run loop.

:class:`IpsaRun` holds everything a solve changes: the iterate ``x``, slacks ``s = -c(x)``, duals
``z``, the step counter ``k``, the Hessian approximation and the statistics. One iteration
(:meth:`IpsaRun.step`) is steps 1-7 of the solver's module docstring; :meth:`IpsaRun.solve` runs
them until a limit, the user's callback, a stream's end or (exact gradients) the KKT test stops
it. History, progress, the callback, the incumbent kept for Ctrl-C and the
:class:`~varopt.result.Result` come from :class:`~varopt.core.run.Run`.
"""
from __future__ import annotations

import math

import numpy as np

from ...core.run import Run
from ...errors import InputDataError, InvalidOptionError, SolverBugError
from ...oracles import FiniteSumOracle, Oracle, UserOracle
from . import hessian as hs
from .constraints import ConstraintSet
from .direction import ReducedSystem
from .divergence import DivergenceWatch, divergence_hint
from .fast import select as select_backend
from .start import strictly_feasible_start

#: backtracking halvings before the step is abandoned (x stays where it is)
MAX_BACKTRACKS = 60


class IpsaOracleError(InputDataError):
    """The gradient oracle returned NaN/inf; ``x``, ``z`` and ``result`` hold the last good iterate."""

    def __init__(self, msg, iteration, x, z, result):
        super().__init__(msg)
        self.iteration, self.x, self.z, self.result = iteration, x, z, result


def make_hessian(kind, n, oracle, opts):
    """The Hessian approximation ``B`` of option ``hessian`` (:mod:`.hessian`)."""
    if kind == "identity":
        return hs.Identity(n)
    if kind == "bb":
        return hs.DampedBB(n)
    if kind == "bfgs":
        return hs.DampedBFGS(n, gamma=opts.bfgs_gamma)
    if kind == "diagonal":
        return hs.RunningDiagonal(n, d_min=opts.diag_min, has_oracle_diag=oracle.has_hessian_diag)
    if not oracle.has_hessian:
        raise InvalidOptionError("hessian='exact' needs the program's objective as the oracle "
                                 "(a user or stream oracle provides no Hessian)")
    return hs.Exact(n)


def _oracle_for(program, opts):
    if opts.oracle is None:
        return FiniteSumOracle(program.objective)
    if isinstance(opts.oracle, Oracle):
        return opts.oracle
    return UserOracle(opts.oracle)


class IpsaRun:
    """All per-solve state of one IPSA run (see the module docstring)."""

    def __init__(self, program, opts, run):
        self.program, self.opts, self.run = program, opts, run
        self.n = n = program.n
        self.cons = cons = ConstraintSet(program)
        self.m = m = cons.m
        self.oracle = oracle = _oracle_for(program, opts)
        oracle.start(np.random.default_rng(opts.seed), opts.batch_size, opts.sampling)
        self.add_prog = opts.oracle is not None and opts.oracle_adds_objective
        self.N = N = oracle.n_samples
        self.stream = getattr(oracle, "next_batch", None) is not None and hasattr(oracle, "exhausted")
        self._limits()
        self.x = strictly_feasible_start(cons, program, opts.x0)
        self.s = cons.slack(self.x)
        self.z = self._initial_duals()
        self.hess = make_hessian(opts.hessian, n, oracle, opts)
        self.system = ReducedSystem(cons, diagonal_hessian=self.hess.diagonal)
        self.exact = bool(oracle.exact)
        # sigma_k = sigma_0 (ks/(ks + k))^q; ks >= 1 keeps the schedule alive for k0 = 0
        self.ks = max(opts.k0, 1.0)
        run.history_every = opts.history_every or max(1, (self.total or 1000) // 200)
        self.stats = {"steps": 0, "boundary_limited": 0, "backtracks": 0, "sum_step_ratio": 0.0, "mu_held": 0}
        self.it, self.k = 0, opts.iteration_offset
        self.ap = self.ad = 0.0
        self.a_prim = self.a_dual = np.inf
        self.mu = 0.0
        self.n_bt = 0
        self.inv_m = 1.0 / m if m else 0.0
        self.it_per_pass = math.ceil(N / opts.batch_size) if N else None
        self.backend_note = None
        self.watch = DivergenceWatch(self)
        self.fast = select_backend(self)

    def _limits(self):
        """``total``: the iteration cap from ``max_iter`` and ``passes`` (defaults: 10 passes over a
        finite sum, else 1000 iterations, unless a time limit or a stream ends the run)."""
        opts, N = self.opts, self.N
        max_iter, passes = opts.max_iter, opts.passes
        # no stopping rule given: the limit below is ours, and the message of a run it ends says so
        self.defaulted = max_iter is None and passes is None and opts.time_limit is None and not self.stream
        if self.defaulted:
            if N:
                passes = 10.0
            else:
                max_iter = 1000
        it_per_pass = math.ceil(N / opts.batch_size) if N else None
        self.limit_pass = math.ceil(passes * it_per_pass - 1e-9) if (passes is not None and N) else None
        if passes is not None and not N and max_iter is None and opts.time_limit is None and not self.stream:
            max_iter = 1000  # passes are meaningless without a finite sum
        self.passes, self.max_iter = passes, max_iter   # the effective limits, for the stop message
        caps = [v for v in (max_iter, self.limit_pass) if v is not None]
        self.total = min(caps) if caps else None

    def _initial_duals(self):
        z0, m, cons = self.opts.z0, self.m, self.cons
        if np.ndim(z0) == 0:
            return np.full(m, float(z0))
        z = np.asarray(z0, dtype=float).ravel().copy()
        if z.size != m:
            raise InvalidOptionError(f"z0 has length {z.size}, ipsa has m = {m} inequality constraints "
                                     f"({cons.n_lb} lower bounds, {cons.n_ub} upper bounds, {cons.n_lin} linear "
                                     f"rows, {cons.n_nl} nonlinear)")
        return z

    # --- bookkeeping ----------------------------------------------------------------------------
    def objective(self, xv):
        try:
            # a runaway iterate overflows to inf, which the divergence watch reports (no numpy warning too)
            with np.errstate(over="ignore", invalid="ignore"):
                return float(self.program.objective.value(xv))
        except Exception:  # noqa: BLE001 - a user-oracle program may have no evaluable objective
            return None

    def record(self, force=False):
        if not (force or self.run.due()):
            return
        self.record_values(force, self.k, self.x, float(self.s @ self.z), self.mu, self.ap, self.ad,
                           self.a_prim, self.a_dual, self.n_bt)

    def record_values(self, force, k, x, eta, mu, ap, ad, a_prim, a_dual, n_bt):
        """History entry of iteration ``self.it`` from the given state."""
        self.run.record(force, **self.history_fields(self.it, k, x, eta, mu, ap, ad, a_prim, a_dual, n_bt))

    def history_fields(self, it, k, x, eta, mu, ap, ad, a_prim, a_dual, n_bt):
        """The fields of the history entry of iteration ``it`` (counter ``k``) from the given state."""
        return self.history_fields_batch([it], [(k, mu, eta, ap, ad, a_prim, a_dual, n_bt)], [x])[0]

    def history_fields_batch(self, its, rows, xs, stamped=False):
        """The fields of the history entries of iterations ``its``, each from a state ``(k, mu, eta, ap,
        ad, a_prim, a_dual, n_bt)`` of ``rows`` and an iterate of ``xs`` (read only when the objective is
        recorded; the compiled loop passes the values its kernel saved, a few hundred per solve: the
        options are read once per batch). ``stamped``: whole entries for ``Run.record_batch(...,
        stamped=True)``, the keys of ``Run.HEAD`` first (time None, set there)."""
        opts, m, ipp = self.opts, self.m, self.it_per_pass
        sigma, ks, sigma_power, k0, step_power = opts.sigma, self.ks, opts.sigma_power, opts.k0, opts.step_power
        objective = self.objective if opts.history_objective else None
        out = [{"iteration": it, "time": None, "lower": None, "upper": None,
                "objective": objective(x) if objective is not None else None,
                "mu": mu, "eta": eta, "duality_measure": eta / m if m else 0.0,
                "sigma": sigma * (ks / (ks + k)) ** sigma_power,
                "step": ap, "step_dual": ad,
                "step_max": (k0 + k) ** -step_power if k0 + k > 0 else 1.0,
                "ftb_primal": a_prim, "ftb_dual": a_dual, "backtracks": n_bt,
                "passes": (it / ipp) if ipp else None}
               for it, (k, mu, eta, ap, ad, a_prim, a_dual, n_bt), x in zip(its, rows, xs)]
        if stamped:
            return out
        return [{k: v for k, v in h.items() if k not in Run.HEAD} for h in out]

    def result(self, status=None, message=None):
        stats = self.stats
        return self.run.finish(status, message, x=self.x.copy(), objective=self.objective(self.x),
                               info={"z": self.z.copy(), "slack": self.s.copy(), "constraint_names": self.cons.names,
                                     "mu": self.mu, "eta": float(self.s @ self.z), "k": self.k, "n_samples": self.N,
                                     "passes": (self.it / self.it_per_pass) if self.it_per_pass else None,
                                     "hessian": self.opts.hessian, "system": self.system.mode,
                                     "backend": self.backend_note,
                                     "mean_step_ratio": stats["sum_step_ratio"] / max(1, stats["steps"]),
                                     "boundary_limited_steps": stats["boundary_limited"],
                                     "backtracks": stats["backtracks"],
                                     "mu_held_steps": stats["mu_held"],
                                     "bb_beta": getattr(self.hess, "beta", None)})

    # --- the loop ---------------------------------------------------------------------------------
    def solve(self):
        if self.fast is not None:
            return self.fast.solve()
        run = self.run
        run.incumbent(self.x)
        self.record()
        while not self._stopped():
            batch = self.oracle.next_batch()
            if self.stream and self.oracle.exhausted:
                run.stop("pass_limit", "stream exhausted")
                break
            self.step(batch)
            self.it = run.iteration = self.it + 1
            run.incumbent(self.x)
            if self.callback_due() and run.callback(self.x, self.z, self.s):
                break
            self.record()
            if self.diverged():
                break
            if self.exact and self.opts.kkt_tol > 0 and self._kkt_holds(batch):
                run.stop("converged", "KKT conditions hold to tol with exact gradients")
                break
        self.record(force=True)
        return self.result()

    def callback_due(self) -> bool:
        """Whether the user's callback is called after this iteration (option ``callback_every``)."""
        return self.it % self.opts.callback_every == 0

    def diverged(self) -> bool:
        """True (and the run stopped with status ``error`` and a warning) when the iterates ran away
        (:mod:`.divergence`)."""
        why = self.watch.check(self.x)
        if why is None:
            return False
        self.watch.stop(why)
        return True

    def _stopped(self) -> bool:
        run, it, opts = self.run, self.it, self.opts
        if self.total is not None and it >= self.total:
            by_pass = self.limit_pass is not None and it >= self.limit_pass
            unmet = "; the KKT conditions were not met" if self.exact and opts.kkt_tol > 0 else ""
            # say which limit ended the run (a plain QP written as sum_squares is a finite sum of its rows: the
            # default 10 passes over 3 rows are 30 iterations), and when it was not the user's
            msg = (f"{self.passes:g} passes over the {self.N} terms of the finite sum ({it} iterations) done{unmet}"
                   if by_pass else f"max_iter={self.max_iter} reached{unmet}")
            if self.defaulted or opts.max_iter is None and not by_pass:
                msg += " (default when no stopping rule is given: set passes, max_iter or time_limit)"
            if unmet and opts.oracle is None and opts.step_power > 0:
                # nothing is sampled, yet the steps shrink as 1/(k0 + k)^p (Robbins-Monro, for noisy gradients): over
                # 1000 steps they sum to ln(1050/50) = 3 with the defaults (docs/ipsa.md, "Active nonlinear rows")
                msg += ("; the gradients are exact (nothing is sampled): step_power=0 with hessian='exact' (or "
                        "'bfgs') is the deterministic interior-point method, whose steps do not shrink")
            run.stop("pass_limit" if by_pass else "iteration_limit", msg)
            return True
        # the clock every 16 iterations: per-sample steps take microseconds
        if opts.time_limit is not None and (it & 15) == 0 and run.elapsed() > opts.time_limit:
            run.stop("time_limit", f"time limit {opts.time_limit:g} s")
            return True
        return False

    def gradient(self, x, batch):
        """The oracle's gradient at ``x`` (plus the program objective's with ``oracle_adds_objective``),
        checked for shape and finiteness."""
        n, it = self.n, self.it
        g = np.asarray(self.oracle.gradient(x, batch), dtype=float)
        if g.shape != (n,):
            g = g.ravel() if g.size == n else g
            if g.shape != (n,):
                raise InputDataError(f"ipsa iteration {it + 1}: the gradient oracle returned shape {np.shape(g)}, "
                                     f"expected ({n},)")
        if self.add_prog:
            g = g + self.program.objective.gradient(x)
        if not np.isfinite(g).all():
            bad = int(np.flatnonzero(~np.isfinite(g))[0])
            msg = (f"ipsa iteration {it + 1}: the gradient oracle returned a non-finite value "
                   f"(component {bad}, {self.program.names[bad]!r}); the last good iterate is kept in the error's "
                   "x / result")
            if self.opts.oracle is None:
                # the program's own terms overflowed (exp of a large argument): not a faulty oracle, but iterates
                # that ran to where the model overflows in double precision
                xmax = float(np.max(np.abs(x))) if x.size else 0.0
                scale = self.watch.x0_scale
                why = (f"the iterates ran to {xmax:.3g}, {xmax / scale:.3g} times the start's scale {scale:.3g}; "
                       + divergence_hint(self.opts, "a non-finite gradient")) if xmax > 100.0 * scale else (
                    "the data or the terms' constants are too large for double precision at this iterate")
                msg = (f"ipsa iteration {it + 1}: the objective's sampled gradient is not finite (component {bad}, "
                       f"{self.program.names[bad]!r}) at an iterate with ||x||_inf = {xmax:.3g}: the model's terms "
                       f"overflow there ({why}). The last good iterate is kept in the error's x / result")
            raise IpsaOracleError(msg, it + 1, self.x.copy(), self.z.copy(), self.result("error", msg))
        return g

    def step(self, batch):
        """Fig. 2.1 steps 1-7 at the current iterate; returns the gradient observation."""
        opts, cons, m, x, s, z = self.opts, self.cons, self.m, self.x, self.s, self.z
        self.k += 1
        k = self.k
        ahat = (opts.k0 + k) ** -opts.step_power
        sig = opts.sigma * (self.ks / (self.ks + k)) ** opts.sigma_power
        eta = float(s @ z)
        mu = max(opts.mu_min, sig * eta * self.inv_m) if m else 0.0
        if cons.n_nl and opts.centrality_guard and self.mu > 0 and self._off_centre():
            mu = max(mu, self.mu)  # re-centre on the previous barrier problem before lowering mu
            self.stats["mu_held"] += 1
        self.mu = mu

        g = self.gradient(x, batch)
        B = self.hess.matrix(x, self.oracle, batch, ahat)
        Jnl = Wnl = None
        if cons.n_nl:
            Jnl = cons.nonlinear_jacobian(x)
            Wnl = cons.nonlinear_hessian(x, z[cons.sl_nl])
        # one division per slack: d = z/s, mu/s and (J dx)/s multiply by 1/s (the compiled
        # kernels evaluate the same products; docs/ipsa.md, "Reciprocals")
        inv = 1.0 / s
        d = z * inv
        rhs = -g
        if m:
            rhs = rhs - mu * cons.JT_dot(inv, Jnl)
        try:
            dx = self.system.solve(B, d, rhs, Wnl, Jnl)
        except SolverBugError:
            if opts.hessian == "exact":
                raise self._singular_exact() from None
            raise
        if not np.isfinite(dx).all():
            if opts.hessian == "exact":
                raise self._singular_exact()
            raise SolverBugError(f"ipsa iteration {self.it + 1}: non-finite search direction")
        if m:
            Jdx = cons.J_dot(dx, Jnl)
            dz = mu * inv - z + d * Jdx  # (2.21)
            # largest step to z >= 0: 1 / max_i(-dz_i / z_i) (one reduction, no boolean indexing)
            tmin = float((dz / z).min())
            self.a_dual = opts.step_fraction / -tmin if tmin < 0 else np.inf
            self.a_prim = cons.max_primal_step(inv, Jdx, opts.step_fraction)
        else:
            dz = z
            self.a_dual = self.a_prim = np.inf
        a_max = ahat
        if getattr(opts, "step_cap", None) is not None:  # e.g. sasmc's variance safeguard
            cap = float(opts.step_cap(x, dx, ahat))
            if not cap >= 0:
                raise InputDataError(f"ipsa iteration {self.it + 1}: step_cap returned {cap!r}, expected >= 0")
            a_max = min(ahat, cap)
        if opts.dual_step == "same":
            self.ap = self.ad = min(a_max, self.a_dual, self.a_prim)
        else:
            self.ap, self.ad = min(a_max, self.a_prim), min(a_max, self.a_dual)
        x_new, s_new = self._backtrack(dx)
        stats = self.stats
        stats["backtracks"] += self.n_bt
        stats["steps"] += 1
        stats["sum_step_ratio"] += self.ap / ahat
        if self.ap < ahat * (1 - 1e-12):
            stats["boundary_limited"] += 1
        if m:
            self.z = z + self.ad * dz
            if not self.z.min() > 0:
                raise SolverBugError(f"ipsa iteration {self.it + 1}: a dual variable left z > 0")
        if self.hess.needs_secant and self.ap > 0:
            g2 = np.asarray(self.oracle.gradient(x_new, batch), dtype=float).ravel()
            if self.add_prog:
                g2 = g2 + self.program.objective.gradient(x_new)
            if np.all(np.isfinite(g2)):
                self.hess.update(x_new - x, g2 - g, ahat)
        else:
            self.hess.update(x_new - x, None, ahat)
        self.x, self.s = x_new, s_new
        return g

    def _off_centre(self) -> bool:
        """The centrality guard (option ``centrality_guard``; docs/ipsa.md, "Active nonlinear rows: centring
        safeguard"): True when the last step, aimed at ``s_i z_i = mu`` on every row (2.21), was cut by the
        backtracking on the nonlinear rows (its linearisation overestimated their slack) or left a nonlinear row
        with ``s_i z_i < mu/2``. The Newton step of (2.20) only sees ``c`` to first order; on a curved row the
        curvature term ``a^2 dx^T (Hess c) dx / 2`` must stay below the slack, so a slack driven to ~mu_min while
        the tangential move still has length O(1) cuts every later step to ``a ~ sqrt(s)`` (the jam). Keeping
        ``mu`` is the monotone barrier rule (Fiacco-McCormick; Nocedal and Wright 2006, §19.3): the next steps
        solve the same barrier problem, whose centre has ``s_i = mu/z_i``, and (2.18) resumes once a full step
        lands in the neighbourhood ``s_i z_i >= mu/2`` (the one-sided neighbourhood of path-following methods,
        Nocedal and Wright §14.1, with gamma = 1/2 of the previous target)."""
        if self.n_bt > 0:
            return True
        sl = self.cons.sl_nl
        return float((self.s[sl] * self.z[sl]).min()) < 0.5 * self.mu

    def _singular_exact(self):
        """The error for a singular reduced system under ``hessian='exact'``: the other approximations are
        positive definite by construction, the sampled objective's Hessian need not be (a term of one
        variable, a linear term, a rank-deficient least squares) and nothing bounds the flat directions."""
        sampled = (f"the batch of {self.opts.batch_size} sampled term(s) of the objective's {self.N}"
                   if self.N and self.opts.batch_size < self.N else "the objective")
        return InvalidOptionError(
            f"ipsa iteration {self.it + 1}: hessian='exact' gives a singular Newton system (2.20): {sampled} has no "
            "curvature along a direction that no constraint bounds; use a positive definite approximation "
            "(hessian='bfgs', 'bb', 'diagonal' or 'identity')" + (", or batch_size >= the number of terms "
                                                                  f"({self.N}) for the full Hessian"
                                                                  if self.N and self.opts.batch_size < self.N else ""))

    def _backtrack(self, dx):
        """Fig. 2.1 step 5: halve the step until every slack exceeds its rounding margin
        (:meth:`.ConstraintSet.interior`); after ``MAX_BACKTRACKS`` halvings the step is 0."""
        cons, m, x, s = self.cons, self.m, self.x, self.s
        self.n_bt = 0
        while True:
            x_new = x + self.ap * dx
            s_new = cons.slack(x_new) if m else s
            if not m or cons.interior(x_new, s_new):
                return x_new, s_new
            # nonlinear constraints, or round-off at a linear boundary
            self.ap *= 0.5
            if self.opts.dual_step == "same":
                self.ad = self.ap
            self.n_bt += 1
            if self.n_bt > MAX_BACKTRACKS:
                self.ap = self.ad = 0.0
                return x, s

    def _kkt_holds(self, batch):
        """With exact gradients: ``||grad f + J^T z||`` and ``eta/m`` small relative to their scales."""
        opts, cons, m, x, z, s = self.opts, self.cons, self.m, self.x, self.z, self.s
        gx = np.asarray(self.oracle.gradient(x, batch), dtype=float).ravel()
        if self.add_prog:
            gx = gx + self.program.objective.gradient(x)
        Jnl2 = cons.nonlinear_jacobian(x) if cons.n_nl else None
        r = gx + (cons.JT_dot(z, Jnl2) if m else 0.0)
        scale = 1.0 + float(np.max(np.abs(gx)))
        fx = self.objective(x)
        return bool(np.max(np.abs(r)) <= opts.kkt_tol * scale
                    and (not m or float(s @ z) <= max(opts.kkt_tol * (1.0 + abs(fx if fx is not None else 0.0)),
                                                      1.5 * m * opts.mu_min)))
