"""The ``sasmc`` solver: inference by stochastic approximation with SMC particles and the
variance safeguard (Carbonetto 2009, ch. 3, Fig. 3.4; Carbonetto, King & Hamze 2009).

Minimises ``F(theta) = KL(p_theta || p_theta*)`` over a family (:mod:`.family`) that starts at
the uniform distribution (``theta_0 = 0``) and contains the target ``theta*``, with ipsa
(interior-point stochastic approximation, ch. 2) over ``theta`` and the stateful particle oracle
:class:`varopt.oracles.smc.SMCOracle`. One iteration (Fig. 3.4, with steps 7-9 of iteration
k - 1 done lazily by the oracle when ipsa asks for the gradient at ``theta_{k-1}``):

1. maximum step ``a_hat_k = 1/(k0 + k)^step_power`` (thesis: ``1/(1 + k)^0.65``);
2. gradient (3.26)/(3.30) from the weighted particles (new batch: move the population first);
3. damped BFGS update from a common-random-number secant pair (the same particles reweighted
   to ``theta_k``), ``gamma = damping``;
4. primal-dual search direction on the bounds (each ``theta_g`` between 0 and ``theta*_g``);
5. variance safeguard (:mod:`.safeguard`) through ipsa's ``step_cap`` hook, then ipsa's
   fraction-to-boundary rule (separate primal and dual steps);
6. ``theta_k = theta_{k-1} + a_k dtheta``.

After ``max_iter`` iterations the population is moved to ``theta_K``. The path
``theta_0, ..., theta_K`` was chosen from the particles, so their own SMC estimate is biased
(upwards: 4 x 4 torus at T = 2, 400 runs, mean Zhat/Z = 1.08 +- 0.012); with ``replay`` (default)
a fresh population is moved along the learned path and gives the estimates (mean 0.995 +- 0.012):

* the variational bound (3.45) ``c(theta*) >= c(theta_K) + <E_K[a], theta* - theta_K>`` is
  estimated with the recursion (3.46) for ``c(theta_K)`` and Rao-Blackwellised ``E_K[a]``
  (``info['log_partition_bound']`` and its standard error);
* with ``anneal_steps > 0`` a final annealing leg ``theta_K -> theta*`` (linear, same moves)
  continues the SMC estimate: ``Zhat`` over the whole path (``info['log_partition_annealed']``),
  and the particles then target ``p_theta*`` (marginals, correlations).

The replay population resamples **multinomially** whatever ``resampling`` says (that option is the
scheme of the stochastic-approximation population): the standard errors use the Lee & Whiteley
(2018) estimator, unbiased for Var(Zhat)/Z^2 under multinomial resampling only. With stratified
resampling it lost about 1/N of relative variance per resampling event: on a complete graph on 7
spins with the path held fixed it estimated half the variance (0.0064 against 0.0115 over 200
replays), and 17 % of runs were more than 2 SE off; multinomial: 0.0129 against 0.0111, 6 %, for
the same spread of Zhat (docs/sasmc.md, "Standard errors").

``log_partition`` is the annealed estimate when the leg is run, else the bound estimate.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ...core.run import Run
from ...errors import InvalidOptionError, SolverBugError
from ...options import Option, OptionSet, limit_options, positive, progress_options, start_options
from ...oracles.gibbs_kernel import ColourGibbs
from ...oracles.particles import RESAMPLING
from ...oracles.smc import SMCOracle
from ...program import Program
from ...program.energy import EnergyModel
from ...program.expression import Expression
from ...registry import Solver, register_solver
from ..energy_result import beta_option, finish, fraction_option, log_potential
from ..ipsa.iteration import IpsaRun
from ..ipsa.solver import OPTIONS as IPSA_OPTIONS
from .family import build_family
from .safeguard import safeguarded_step

#: the first ipsa iterate: theta_1 = START * theta* (strictly inside [0, theta*]; theta_0 = 0 is sampled)
START = 1e-3


def _open_unit(name, default, doc):
    return Option(name, default, doc, float, lambda v: v is not None and 0.0 < v < 1.0, "must lie in (0, 1)")


def _family(v):
    if isinstance(v, str) and v not in ("edges", "tied"):
        raise InvalidOptionError(f"option 'family' must be 'edges', 'tied', a mapping or a sequence of group "
                                 f"labels (got {v!r})")
    return v


#: largest family for which ``hessian='auto'`` takes dense BFGS: its d x d matrix costs O(d^3) per
#: step (a 30 x 30 torus, d = 1800: 0.75 s per step and 320 MB; a 100 x 100 one would need 3.2 GB per
#: copy), while the O(d) Barzilai-Borwein scaling was as accurate on 14 x 14 grids (docs/sasmc.md)
BFGS_MAX_PARAMETERS = 1000

OPTIONS = OptionSet(limit_options(max_iter=250) + progress_options(
    callback_doc="called as callback(iteration, theta) after every iteration; returning True stops the run "
                 "(status 'iteration_limit'; the estimates are still computed at the current theta)")
    + start_options()[1:] + [
    beta_option(),
    Option("family", "edges", "parameterisation: 'edges' (one theta per coupling and non-zero field), 'tied' "
           "(one per distinct coefficient), or user groups ({(name_i, name_j) or name: label}, or a "
           "sequence of labels for the couplings then the fields)", _family),
    Option("particles", 100, "number of particles", int, lambda v: v is not None and v >= 2,
           "must be an integer >= 2"),
    fraction_option("ess_threshold", 0.5, "resample when ESS < ess_threshold * particles, in (0, 1]"),
    Option("resampling", "stratified", "resampling scheme of the stochastic-approximation population (the replay "
           "population, which gives the estimates and their standard errors, resamples multinomially: the "
           "Lee-Whiteley standard error holds for multinomial resampling only)", RESAMPLING),
    Option("sweeps", 1, "Gibbs sweeps per move", int, positive, "must be a positive integer"),
    Option("safeguard", "quadratic", "variance safeguard: 'quadratic' (3.57), 'exact' (1-D bisection on the "
           "sample variance) or 'none'", ("quadratic", "exact", "none")),
    _open_unit("safeguard_beta", 0.75, "variance safeguard beta S_k <= S_{k-1} (3.54), in (0, 1)"),
    _open_unit("safeguard_xi", 0.9, "ESS safeguard xi sum W^2 <= 1/n (3.65), in (0, 1)"),
    Option("k0", 1.0, "maximum step a_k = 1/(k0 + k)^step_power", float, lambda v: v is not None and v >= 0,
           "must be >= 0"),
    Option("step_power", 0.65, "step-size exponent, in (0, 1]", float, lambda v: v is not None and 0 < v <= 1,
           "must lie in (0, 1]"),
    Option("hessian", "auto", "ipsa's Hessian approximation: bfgs (damped, common-random-number secants), bb, "
           f"diagonal, identity, or auto (bfgs up to {BFGS_MAX_PARAMETERS} parameters, bb above: bfgs keeps a "
           "dense d x d matrix and solves with it at every step)", ("auto", "bfgs", "bb", "diagonal", "identity")),
    _open_unit("damping", 0.75, "damping factor of the damped BFGS update, in (0, 1)"),
    Option("dual_step", "separate", "ipsa's primal and dual step lengths: 'separate' or 'same'",
           ("separate", "same")),
    Option("bounds", "target", "'target': each theta_g between 0 and theta*_g; 'none': unconstrained",
           ("target", "none")),
    Option("rao_blackwell", "auto", "Rao-Blackwellised weights (3.43) and gradients: 'auto' (when the coupling "
           "graph is two-colourable), 'on' or 'off' (naive weights 3.59)", ("auto", "on", "off")),
    Option("replay", True, "compute the estimates (bound, annealed Zhat, marginals) with fresh particles moved "
           "along the learned path theta_0, ..., theta_K (unbiased Zhat); False: from the adaptive population",
           bool),
    Option("anneal_steps", 100, "steps of the final annealing leg theta_K -> theta* (0: none; the marginals are "
           "then importance-reweighted to theta*)", int, lambda v: v is not None and v >= 0, "must be >= 0"),
])


def _hessian(choice, d):
    if choice != "auto":
        return choice
    return "bfgs" if d <= BFGS_MAX_PARAMETERS else "bb"


class _Cap:
    """ipsa's ``step_cap`` hook: the safeguarded step along ``dx`` from the current population."""

    def __init__(self, oracle, opts):
        self.oracle, self.opts = oracle, opts
        self.last = (math.nan, math.nan, math.nan)

    def __call__(self, x, dx, a_hat):
        o = self.oracle
        if not np.array_equal(x, o.theta_pop):
            raise SolverBugError("sasmc: the safeguard was asked at a theta the particles do not target")
        self.last = safeguarded_step(o.pop.weights(), o.directional(dx), a_hat, self.opts.safeguard_beta,
                                     self.opts.safeguard_xi, self.opts.safeguard)
        return self.last[0]


def _theta_program(labels, theta_star, bounds):
    d = theta_star.size
    lo = np.minimum(0.0, theta_star) if bounds == "target" else np.full(d, -np.inf)
    hi = np.maximum(0.0, theta_star) if bounds == "target" else np.full(d, np.inf)
    names = [f"theta[{lab}]" for lab in labels]
    return Program(names, lo, hi, Expression(d))


#: log-potential coefficients below this magnitude are dropped: ipsa's first iterate sits at
#: START * theta* inside [0, theta*], and below ~1e-150 the barrier terms (1/slack)^2 overflow; the
#: dropped terms move log Z by at most their summed magnitude (< 1e-100 (n + m)) and the marginals less
NEGLIGIBLE = 1e-100


def _drop_negligible(model):
    """``(model without its fields and couplings below NEGLIGIBLE in magnitude, number dropped)``."""
    small_h = (model.h != 0) & (np.abs(model.h) < NEGLIGIBLE)
    small_w = np.abs(model.w) < NEGLIGIBLE
    dropped = int(small_h.sum() + small_w.sum())
    if not dropped:
        return model, 0
    keep = ~small_w
    return EnergyModel(np.where(small_h, 0.0, model.h), model.i[keep], model.j[keep], model.w[keep], model.const,
                       model.names), dropped


@register_solver
class StochasticApproximationSMC(Solver):
    name = "sasmc"
    summary = ("stochastic approximation of KL(p_theta || p) with SMC particles and the variance safeguard, on "
               "ipsa (Carbonetto 2009, ch. 3): log Z bound and annealed estimate, marginals")
    accepts_binary = True
    options = OPTIONS

    def _solve(self, program, opts, run):
        model = log_potential(program, opts, self.name)
        n = model.n
        # the family is built on the model without negligible terms; the outputs use the model itself
        reduced, negligible = _drop_negligible(model)
        ei, ej, fi, group, theta_star, labels = build_family(reduced, opts.family)
        base = model.const
        if theta_star.size == 0:  # independent uniform spins
            return finish(run, program, opts, model, base + n * math.log(2.0), np.zeros(n), np.zeros(model.m), se=0.0,
                          status="converged", message="no couplings or fields: uniform distribution")
        rb = {"auto": None, "on": True, "off": False}[opts.rao_blackwell]
        try:
            oracle = SMCOracle(n, ei, ej, fi, group, theta_star, opts.particles, rb, opts.ess_threshold,
                               opts.resampling, opts.sweeps)
        except ValueError as exc:
            raise InvalidOptionError(f"option 'rao_blackwell': {exc}") from None
        cap = _Cap(oracle, opts)
        tprog = _theta_program(labels, theta_star, opts.bounds)
        iopts = IPSA_OPTIONS.validate(dict(
            max_iter=None, oracle=oracle, hessian=_hessian(opts.hessian, theta_star.size), bfgs_gamma=opts.damping,
            k0=opts.k0,
            step_power=opts.step_power, dual_step=opts.dual_step, seed=opts.seed, history_objective=False,
            step_cap=None if opts.safeguard == "none" else cap,
            x0=START * theta_star if opts.bounds == "target" else np.zeros(theta_star.size)))
        ipsa = IpsaRun(tprog, iopts, Run("ipsa", iopts))  # starts the oracle: theta_0 = 0, exact samples
        lo, hi = tprog.lb, tprog.ub
        run.max_iter = opts.max_iter
        if opts.history_every is None:
            run.history_every = max(1, opts.max_iter // 100)
        steps = []
        for k in run.iterations():
            ipsa.step(oracle.next_batch())
            theta = ipsa.x
            if opts.bounds == "target" and not (np.all(theta > lo) and np.all(theta < hi)):
                raise SolverBugError(f"sasmc iteration {k}: theta left the open box (0, theta*)")
            steps.append((ipsa.ap, *cap.last))
            if run.due() or run.progress.active:
                bound, _ = self._bound(oracle, theta_star)
                run.record(objective=-bound / opts.beta, ess=oracle.pop.ess(), step=ipsa.ap, a_var=cap.last[1],
                           a_ess=cap.last[2], theta_mean=float(theta.mean()))
            if run.callback(theta.copy()):
                break
            if k == 1:
                t_first = run.elapsed()
            elif opts.time_limit is not None and run.status is None and \
                    self._legs_need_the_rest(run, opts, oracle, t_first):
                run.stop("time_limit", f"time_limit={opts.time_limit:g} s: the steps stopped at {run.elapsed():.3g} s "
                         "to leave time for the final legs (replay, annealing)")
                break
        status, message = run.status or "converged", run.message
        if status == "iteration_limit" and len(steps) == opts.max_iter and message.startswith("max_iter"):
            status, message = "converged", "planned iterations done"  # the run did what it was asked
        oracle.move_to(ipsa.x)  # Fig. 3.4 steps 7-9 of the last iteration
        theta_K = oracle.theta_pop.copy()
        info = {"theta": theta_K, "theta_star": theta_star, "theta_labels": labels,
                "rao_blackwellized": oracle.rb, "family_size": theta_star.size, "negligible_terms": negligible,
                "sa_iterations": len(steps), "sa_resamples": oracle.pop.resamples, "sa_final_ess": oracle.pop.ess(),
                "steps": np.array(steps).reshape(-1, 4)}
        if opts.replay:  # fresh particles along the learned path: the estimates do not depend on the
            # particles that chose the path (the adaptive population overestimates Z: docs/sasmc.md)
            info["log_partition_bound_adaptive"] = base + self._bound(oracle, theta_star)[0]
            # multinomial: the Lee-Whiteley variance is unbiased only for it (module doc)
            oracle = oracle.replay(np.random.default_rng((opts.seed, 0x5A5C)), resampling="multinomial")
        else:
            warnings.warn("sasmc: replay=False: the standard errors treat the path as fixed, but it was chosen from "
                          "the same particles (and their Zhat is biased upwards); use replay=True for honest ones",
                          RuntimeWarning, stacklevel=2)
        bound, bound_se = self._bound(oracle, theta_star)
        bound += base
        info.update({"log_partition_bound": bound, "log_partition_bound_se": bound_se})
        if opts.anneal_steps > 0:
            for lam in np.arange(1, opts.anneal_steps + 1) / opts.anneal_steps:
                oracle.move_to(theta_K + lam * (theta_star - theta_K) if lam < 1 else theta_star)
            log_z = base + oracle.log_normalizer()
            se = math.sqrt(oracle.pop.relative_variance())
            W = oracle.pop.weights()
            kernel = oracle.kernel
            info["log_partition_annealed"] = log_z
        else:
            log_z, se = bound, bound_se
            W = oracle.weights_at(theta_star)
            h, _ = oracle.coefficients(theta_star)
            kernel = ColourGibbs(h, model.J, classes=oracle.classes)
        X = oracle.X
        means = W @ kernel.conditional_means(X)
        corr = W @ (X[:, model.i] * X[:, model.j])
        up = W @ (X.mean(axis=1) > 0)
        info.update({"final_ess": 1.0 / float(W @ W), "resamples": oracle.pop.resamples,
                     "up_fraction": float(up), "up_particles": int((X.mean(axis=1) > 0).sum())})
        msg = (f"{len(steps)} stochastic-approximation steps ({message or status}), {opts.particles} particles, "
               f"{oracle.pop.resamples} resampling events")
        return finish(run, program, opts, model, log_z, means, corr, se=se, status=status, message=msg, info=info)

    @staticmethod
    def _legs_need_the_rest(run, opts, oracle, t_first):
        """True when the legs after the steps would end past ``time_limit``: the replay moves a fresh
        population along the whole path (one move per step so far) and the annealing leg makes
        ``anneal_steps`` more; each move is costed at the mean time of a step (which also computes a
        gradient: an overestimate; the first step, which starts the population, is left out: ``t_first``
        is the clock after it). Without this, the limit bounded only the steps: a 100 x 100 torus
        at T = 0.1 with ``time_limit=20`` returned after 39 s."""
        moves = len(getattr(oracle, "path", ())) if opts.replay else 0
        per_step = (run.elapsed() - t_first) / (run.iteration - 1)
        return run.elapsed() + per_step * (moves + opts.anneal_steps) >= opts.time_limit

    @staticmethod
    def _bound(oracle, theta_star):
        """(3.45) at ``theta_pop`` with (3.46) and Rao-Blackwellised statistics; its standard error."""
        abar, m = oracle.mean_stats()
        delta = oracle.G @ (theta_star - oracle.theta_pop)
        val = oracle.log_normalizer() + float(abar @ delta)
        se = math.sqrt(oracle.pop.relative_variance() + oracle.clustered_se(m @ delta) ** 2)
        return val, se
