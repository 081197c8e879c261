r"""The ``klprox`` solver: KL-proximal variational inference with a Gaussian posterior.

Khan, Baque, Fleuret & Fua (2015), "Kullback-Leibler Proximal Variational Inference": the model's
objective is read as a negative log joint ``F(w)`` = Gaussian prior + likelihood terms of 1-D
linear predictors (:mod:`.view`); the solver maximises

    ELBO(m, V) = -E_q[F(w)] + H[q],    q = N(m, V),

by the KL proximal-gradient steps (16)-(19) (:mod:`.posterior`), with the expectations of
:mod:`.expectations`. The value returned as the objective is ``-ELBO`` (the paper's
"Neg-Log-Lik", in the program's minimisation sense; ``-ELBO >= -log p(y)``); the point loaded into
the model is the posterior mean, ``info['covariance']`` the posterior covariance,
``info['predict'](A_new, b_new)`` the mean and variance of new predictors ``A_new w + b_new``.

Step rule. Fixed steps diverge on real data (a1a with beta = 1 and a large prior variance;
housing with the Laplace likelihood at beta >= 0.5), so the default rule is adaptive: a step is
accepted only when the ELBO, computed to quadrature accuracy at the proposed ``q``, does not
decrease; otherwise ``beta`` is halved (``shrink``) and the step recomputed; after a step accepted
at its first ``beta``, ``beta`` grows (``grow``) up to ``beta_max``, but for REGROW_WINDOW iterations after a rejected
trial not back to the rejected size (no grow-reject-shrink cycles). As ``beta -> 0`` the step is a small natural-
gradient step (Theorem 1 of the paper: length ``beta/(1 + beta)``), so a non-stationary point
always has an accepted ``beta``. Near the optimum the ELBO changes by less than the rounding of its
sum (``1e-14`` times the magnitudes added up, ``info['rounding']``): such a step is accepted when it
lowers the stationarity residual, and a rejected one at small residuals ends the run as converged.
``step_rule='fixed'`` runs the paper's constant ``beta``. With the natural mean step and the default cap, a step
that cuts the largest residual to ``2 r`` or less (``r = 1/(1 + beta)``: the damping, not the problem, sets the
rate) raises the cap (DAMPED; docs/klprox.md, section 4); a rejected trial returns it to 10. From a cold start whose
predictor standard deviations are all at most FIRST_SD (the posterior near the prior), the first FIRST_STEPS steps
are tried at FIRST_BETA (Newton-like natural-gradient steps); a rejected trial falls back to ``beta``. Near the
prior (sd <= PRIOR_SD) the start is the undamped natural step from the prior itself, whose predictive moments need no
factorization (PRIOR_STEP), when it lowers -ELBO below the prior's; it stands for the first optimistic step.

Mean step (``mean_step='auto'``). The natural-parameter form ``m+ = m + (1 - r) V+ g`` (natural-gradient
VI with step ``1 - r``; at ``beta -> inf`` the Newton-like NGD step of learning rate 1), with ``beta`` up to
10, first; the paper's (16) (``beta <= 1``) when its residuals stop falling 10x per 20 iterations (the slow
tail of GP classification with a large signal variance), and back when (16) stalls. Both steps pass the same
exact-ELBO acceptance test and have the same fixed points (docs/klprox.md, section 4).

Newton steps on the fixed-point equations (NEWTON_FP). On ``exp`` (Poisson) rows pushed far below zero by a wide prior
``E[exp u] = exp(mt + vt/2)`` makes the covariance map stiff (slope ``-gamma vt^2 / 2``) and couples the mean and the
variance along ``mt + vt/2``; there the step tried first is Newton's on ``g = 0``, ``gamma(m, gt) = gt`` in
``(m, log gt)`` (Price's theorem for the derivatives), at lengths 1, 1/2, ... under the same exact-ELBO test
(docs/klprox.md, section 4).

Anderson steps (:mod:`.anderson`). On softmax rows under the quadrature (the deterministic adaptive method with
``mean_step='auto'``, full parameterization) the step tried first is Anderson's extrapolation of the last pairs of the
undamped natural step; it replaces the plain step when it passes the same exact-ELBO test (docs/klprox.md, section 4).

Softmax rows under the quadrature (RESOLVE): the run also stops, as converged, when the residuals are within the
quadrature's own error of the gradients they are made of (estimated with 1.5x the nodes): below it the steps that lower
them raise the rule's -ELBO and ``gtol`` is unreachable (docs/klprox.md, section 4, "Stopping at the quadrature's
accuracy").

Variants (:mod:`.variants`): ``algorithm='proximal-point'`` (the paper's section 3, eq. (2), for closed-form
ELBOs) and ``batch_size`` (stochastic minibatch steps).
"""
from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import numpy as np

from ...core.threads import blas_threads, option_threads
from ...errors import InputDataError, InvalidOptionError
from ...options import (
    Option,
    OptionSet,
    common_options,
    nonnegative,
    positive,
    progress_options,
    seed_option,
    thread_options,
)
from ...registry import PREDICTOR_ATOMS, Solver, register_solver
from .anderson import AndersonSteps
from .expectations import SoftmaxBoundFamily, SoftmaxFamily, family_table
from .posterior import DualGaussian, FullGaussian
from .variants import proximal_point, stochastic
from .view import likelihood_view

#: changes of -ELBO within ROUNDING * (sum of the magnitudes added up) are rounding: such a step is accepted
#: when it lowers the stationarity residual; rejected at residuals <= FLAT_RESIDUAL it ends the run
ROUNDING = 1e-14
FLAT_RESIDUAL = 1e-6
#: when no step size raises the ELBO (rounding everywhere), residuals up to this count as converged (a
#: covariance residual e bounds the natural-gradient norm, so the ELBO is within about e^2 of its optimum)
STALL_RESIDUAL = 1e-3
#: below this step size a rejected step means the ELBO cannot be raised beyond rounding
BETA_MIN = 1e-12
#: CRAWL_STEPS accepted steps in a row with beta below CRAWL_BETA, none of which lowers -ELBO by more than its
#: rounding, end the run like BETA_MIN does: an ill-conditioned prior (a GP prior written as quad_form(f, K^-1)
#: with a small jitter) floors the residuals at ~1e-6-1e-5, where only steps of beta ~ 1e-10 pass the
#: acceptance test (by lowering the residual, not the ELBO), and the run would otherwise crawl to max_iter
CRAWL_BETA = 1e-6
CRAWL_STEPS = 20
#: mean_step='auto': every SWITCH_WINDOW iterations, the paper's mean step (16) is replaced by the natural
#: one when the largest residual has not fallen below SWITCH_RATIO of its value SWITCH_WINDOW iterations
#: earlier (both steps pass the same exact-ELBO acceptance test and have the same fixed points; (16)
#: with the old precision crawls on some wide-prior problems: Colon at delta = 1.61, 1887 iterations
#: against 166, and GP classification on heart_statlog, which did not converge in 20,000)
SWITCH_WINDOW, SWITCH_RATIO = 50, 0.5
#: mean_step='auto': the mean step the deterministic method starts with ('paper' or 'natural'), the default
#: step-size cap of the natural step, and its stall test: every NATURAL_WINDOW iterations of natural steps,
#: back to (16) when the largest residual has not fallen below NATURAL_RATIO of its value NATURAL_WINDOW
#: iterations earlier (the natural step's slow tail: GP classification with a large signal variance, softmax
#: regression on nearly separable classes; a 10-iteration window took 6878 + 340 iterations over the heart, housing,
#: a1a, Colon and wine grids of docs/klprox.md section 4 against 7084 + 439 with 20)
AUTO_FIRST = "natural"
NATURAL_BETA_MAX = 10.0
NATURAL_WINDOW, NATURAL_RATIO = 10, 0.1
#: the default cap of the natural step is raised (by the factor grow per step, up to NATURAL_BETA_MAX * BOOST_MAX)
#: while the steps are limited by the damping, not by the problem: a step accepted at the cap that cuts the
#: largest residual to at most DAMPED * r, r = 1/(1 + beta) (a step of length 1 - r from the fixed point
#: iteration gt <- gamma, m <- m + V g cuts it to about r + rho, rho the iteration's own contraction rate;
#: rho < r: the cap, not the problem, sets the rate); a rejected trial returns it to NATURAL_BETA_MAX.
#: After a step cutting it to at most r the next beta grows by grow^2. Steps pass the same exact-ELBO test
#: (docs/klprox.md, section 4: a1a at delta = 0.001, 12 -> 10 iterations)
DAMPED, BOOST_MAX = 2.0, 100.0
#: adaptive rule: for REGROW_WINDOW iterations after a trial step is rejected at beta_r, beta does not grow back to
#: beta_r or above (a step accepted at once still grows beta below it). Without it, a problem whose steps pass at
#: beta_r / 2 and fail at beta_r cycles grow, reject, shrink: wine at delta = 3 spent 31 of its 99 evaluations on
#: such rejected trials (docs/klprox.md, section 4). Every accepted step passes the same exact-ELBO test. 0: off
REGROW_WINDOW = 5
#: optimistic first steps (the deterministic adaptive natural step with the default cap and no ``beta`` given, from a
#: cold start where every predictor's standard deviation is at most FIRST_SD, the scale on which the curvature of the
#: logistic, Poisson and softmax terms changes: the likelihood is near its quadratic model there): the first
#: FIRST_STEPS steps are tried at FIRST_BETA (r ~ 1e-3: natural-gradient VI at learning rate ~1, Newton-like), the
#: largest size the default cap can reach (NATURAL_BETA_MAX * BOOST_MAX). A rejected trial falls back to the ``beta``
#: option (1) and the default cap at once (one wasted evaluation); after the last of them the cap stays raised only
#: when that step was damping-limited (DAMPED), else it returns to NATURAL_BETA_MAX. a1a at delta = 0.001: -ELBO within
#: 1e-6 after 2 steps against 4. Ungated (every cold start) the wide priors lost (a1a delta >= 2.8, wine), hence
#: the gate (docs/klprox.md, section 4; 3 instead of 1 saved iterations on logistic and softmax grids but cost a rejected
#: trial on 16 of 36 Poisson models, where the undamped step overshoots the log-rate). 0: off
FIRST_STEPS = 2
FIRST_BETA = NATURAL_BETA_MAX * BOOST_MAX
FIRST_SD = 1.0
#: Anderson-extrapolated steps (:mod:`.anderson`) on models with softmax rows under the quadrature (the deterministic
#: adaptive method with mean_step='auto', full parameterization): the memory (pairs of the fixed-point map kept); a
#: proposal replaces the plain step when it passes the exact-ELBO test (wine delta = 1: 52 -> 21 iterations,
#: docs/klprox.md, section 4). 0: off
ANDERSON_MEMORY = 5
#: a run where no step size raises the ELBO (adaptive rule) restarts cold with gamma0 raised
#: RESTART_FACTOR times, at most RESTARTS times: a finite start can still be useless (D >> N Poisson regression with
#: a unit prior: E[exp u] ~ 1e76 at gamma0 = 1e-3, whose steps' precisions do not factor; docs/klprox.md, section 6c)
RESTARTS, RESTART_FACTOR = 3, 100.0
#: the start from the prior (the deterministic adaptive natural step with the default cap, a cold start with the default
#: gamma0 and beta, a diagonal prior with mean 0, every prior predictor's standard deviation <= PRIOR_SD): the
#: expectations at the prior's predictive moments (no factorization: diag(A Sigma A^T)), the undamped natural step T from
#: there (pseudo-precisions = the expected curvature there, the mean one Newton-like step from mu: a Laplace-like site
#: update), kept when its exact -ELBO is below the prior's; the factorization of the gamma0 start is saved, and T stands
#: for the first of the FIRST_STEPS optimistic steps where those apply (sd <= FIRST_SD), else the run goes on at the cap.
#: Otherwise the gamma0 start as before (docs/klprox.md, section 4). Wider priors keep the gamma0 start: there T from the
#: gamma0 start saves iterations but not evaluations, and T from the prior is a worse start on GP models (gamma0 = 1e-3
#: shrinks wide GP predictors: ||gamma0 K|| ~ 5 on heart); PRIOR_SD = 3 took fewer or as many evaluations than main at
#: every point of the heart, housing, a1a, wine, breast cancer and 36 Poisson models. 0: off
PRIOR_STEP = 1
PRIOR_SD = 3.0
#: softmax rows under the quadrature: the run stops as converged when both natural-gradient residuals are at most
#: RESOLVE times the quadrature's own error of the gradients they are made of (estimated at the current q as the change
#: of those residual norms' gradients with 1.5x the nodes per dimension, :meth:`KLProx._resolution`). Below it the
#: residuals measure the rule, not the posterior: the rule's gradients (Price's E[hess l] by quadrature) are not the
#: exact derivatives of its ELBO value, so the steps that lower them raise the quadrature's -ELBO and are rejected, and
#: gtol is unreachable (digits, 4 classes: residuals 3e-4 against a gradient error 5e-4 after 18 iterations, then
#: 1730 steps of beta = 0.005, each raising -ELBO by 3e-11; docs/klprox.md, section 4). 3: the difference with a 1.5x
#: richer rule underestimates the error of a rule converging at an algebraic rate O(n^-p) by 1/(1 - 1.5^-p), 3 for p = 1
#: (wide predictors, sd ~40: the kink of log-sum-exp is then narrower than the node spacing)
RESOLVE = 3.0
#: the a-posteriori check at the returned q warns when the softmax quadrature's -ELBO changes by more than this
#: (relative to max(1, |-ELBO|)) with 1.5x the nodes
SOFTMAX_INACCURATE = 1e-9
#: the estimate is made at iterations whose step does not lower -ELBO beyond its rounding (where the rule's error may be
#: what stops the steps; checked at every rejected trial too, wine fold 4 at delta = 100 stopped 8e-5 above the value
#: main reaches at gtol), at most every RESOLUTION_EVERY iterations unless the last estimate says stop; a stop always uses
#: an estimate at the state it returns
RESOLUTION_EVERY = 10
#: the mean's residual may instead promise a gain of -ELBO below the value's error (res_m^2 / 2 <= it) when the run
#: stalls: the error / crawl stops, or a step accepted at beta < STALL_BETA (length below 1e-3 of the natural step) that
#: does not lower -ELBO beyond its rounding
STALL_BETA = 1e-3

#: the fixed-point Newton step (models whose rows are exp (Poisson) and squares, the deterministic adaptive method with
#: mean_step='auto', the full parameterization, N + D <= NEWTON_FP_MAX; docs/klprox.md, section 4, "Newton steps on the
#: fixed-point equations"). Why: E[exp u] = exp(mt + vt/2) grows exponentially with the predictor variance, so the map
#: gt <- gamma has the slope -gamma vt^2/2 (about -50 at vt ~ 100: damped steps pass only at beta <~ 2/50) and the
#: alternation of the mean and covariance updates contracts at about vt/(vt + 2) (the likelihood depends on mt + vt/2
#: only): all-zero Poisson counts under prior variance 1e3 took 6095 iterations. The step solves the linearised
#: equations g(m, gt) = 0, gamma(m, gt) = gt jointly, in (m, log gt) (a pseudo-precision never changes sign), each log
#: moved by at most NEWTON_FP_LOG, tried at lengths 1, 1/2, ... down to NEWTON_FP_MIN under the exact-ELBO test; when none
#: passes the plain step is taken and the Newton step is not tried for the next 1, 2, 4, ... NEWTON_FP_BACKOFF iterations
#: (far from the optimum, where it fails, it costs few evaluations). 0: off
NEWTON_FP = 1
NEWTON_FP_MAX = 600
NEWTON_FP_LOG = 5.0
NEWTON_FP_MIN = 0.1
NEWTON_FP_BACKOFF = 16
#: the Newton step is tried only at iterates where the covariance map is stiff: max_n (t4_n vt_n^2 / 2) gt_n / gamma_n
#: >= NEWTON_FP_STIFF (-d log gamma_n / d log gt_n, the slope of the map gt <- gamma on its own row; above 1 the undamped
#: step overshoots; with gt, not gamma: a cold start's gt = gamma0 << gamma is far from the fixed point). Below it
#: the damped steps are fast and cheaper than the Newton system (the 36 Poisson models of benchmarks/klprox_step_rules.py,
#: delta <= 1, never reach it: trajectories unchanged)
NEWTON_FP_STIFF = 1.0
#: parameterization='auto' on N < D: the full form (whose (m, gt) the Newton step works on) instead of the dual one when the
#: Newton step applies and N + D <= NEWTON_FP_SWITCH. Beyond it the full form's D x D factors cost more than the dual
#: steps save where the map is not stiff (N = 20, D = 200 / 500, delta = 1: 2x / 4x the time of the dual run), so the
#: dual form (and its slow tail under wide priors) is kept there
NEWTON_FP_SWITCH = 150


#: klprox's reading of a term compiled with auxiliary columns (max/pos/huber epigraphs; a log, power or root of a
#: non-affine argument such as a Student-t log(1 + r^2/nu)): a likelihood without a Gaussian expectation here, where
#: the generic message points to gop, which returns a point, not a posterior. Squared hinges of an affine argument
#: (square(pos(u)), and CVXPY's cp.log_normcdf, a probit, built from them) are sqpos rows, not epigraphs.
LIKELIHOOD_HINT = ("klprox reads each term as a likelihood of an affine predictor and has no Gaussian expectation "
                   "for this one. The likelihoods klprox reads: squared hinges of an affine u (cp.square(cp.pos(u)), "
                   "cp.sum_squares(cp.pos(u)), and cp.log_normcdf, CVXPY's piecewise-quadratic probit), "
                   "cp.logistic or log(1 + exp(u)), log-sum-exp rows (softmax), exp (Poisson), abs (Laplace) and "
                   "squares (Gaussian)")


class Cur(NamedTuple):
    """An evaluated posterior state: ``-ELBO``, ``alpha``, ``gamma``, predictor moments, residuals."""

    st: object
    f: float
    alpha: np.ndarray
    gamma: np.ndarray
    mt: np.ndarray
    vt: np.ndarray
    res: tuple


def _warm(v):
    """Validate the ``warm_start`` option: a Result (its ``x`` and ``info``), a dict of arrays, or a list of
    them (e.g. the neighbours of a grid point in each hyperparameter direction)."""
    if v is None:
        return None
    many = isinstance(v, (list, tuple))
    out = [_warm_one(w) for w in (v if many else [v])]
    if many and not out:
        raise InvalidOptionError("option 'warm_start' is an empty list (use None for no warm start)")
    return out


def _warm_one(v):
    d = dict(v.info, x=v.x) if hasattr(v, "info") and hasattr(v, "x") else v
    try:
        out = {k: np.asarray(d[k], dtype=float).ravel() for k in ("x", "pseudo_precisions", "alpha")}
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidOptionError("option 'warm_start' must be a klprox Result or a dict with arrays 'x', "
                                 f"'pseudo_precisions' and 'alpha', or a list of them ({exc})") from None
    if not all(np.all(np.isfinite(a)) for a in out.values()):
        raise InvalidOptionError("option 'warm_start' holds NaN or inf")
    if d.get("predictor_mean") is not None:     # with it, the warm start's Gaussian sites are a second start
        out["predictor_mean"] = np.asarray(d["predictor_mean"], dtype=float).ravel()
        if not np.all(np.isfinite(out["predictor_mean"])):
            raise InvalidOptionError("option 'warm_start' holds NaN or inf")
    out["hint"] = bool(d.get("hint", False))   # CVXPY's warm_start=True: used only where its sizes fit (warm())
    beta = d.get("beta")
    if beta is not None:           # the step size the previous run ended with: the first step size from there
        beta = float(beta)
        if not (math.isfinite(beta) and beta > 0):
            raise InvalidOptionError(f"option 'warm_start': 'beta' must be positive, got {beta}")
        out["beta"] = beta
    return out


@register_solver
class KLProxSolver(Solver):
    name = "klprox"
    summary = ("KL-proximal variational inference: Gaussian posterior N(m, V) of a Gaussian prior times "
               "likelihoods of linear predictors (Khan, Baque, Fleuret & Fua 2015)")
    #: square(pos(u)) (CVXPY's log_normcdf, a probit) as one sqpos likelihood row of an affine u, whose Gaussian
    #: expectation is closed-form (expectations.SqPosFamily); the epigraph form has none
    native_atoms = PREDICTOR_ATOMS
    options = OptionSet(common_options(max_iter=2000) + [
        Option("beta", 1.0, "step size beta > 0 of the proximal steps (16)-(19) (r = 1/(1 + beta)): the first "
               "step of the adaptive rule, or the constant step of step_rule='fixed' (the paper uses 0.25 for "
               "logistic and 1 for Laplace likelihoods)", float, positive, "must be positive"),
        Option("step_rule", "adaptive", "'adaptive': accept a step only when the exactly computed ELBO does not "
               "decrease, else shrink beta; grow beta after success. 'fixed': constant beta (may diverge)",
               ("adaptive", "fixed")),
        Option("mean_step", "auto", "'paper': the mean update (16), m+ = m + (1-r) [P + r A^T diag(gt) A]^-1 g; "
               "'natural': the natural-parameter (natural-gradient) form m+ = m + (1-r) V+ g, preconditioned by the "
               "new precision including the likelihood curvature (Newton-like as beta grows); 'auto': for the "
               "deterministic adaptive method 'natural' first, switching to 'paper' when the natural step stalls "
               "(the residuals not reduced 10x over 20 iterations) and back when (16) stalls (not halved over 50 "
               "iterations; result.info['mean_step_switches'], and 'mean_step_switched_at' for the first switch to "
               "'natural'); 'paper' for step_rule='fixed' and the proximal-point subproblems; 'natural' for "
               "stochastic steps (batch_size), where (16) with the old precision overshoots on noisy batches",
               ("auto", "paper", "natural")),
        Option("grow", 2.0, "factor applied to beta after a step accepted at its first beta (adaptive rule; for 5 "
               "iterations after a rejected trial, beta grows only up to shrink times the rejected beta)", float,
               lambda v: v >= 1, "must be >= 1"),
        Option("shrink", 0.5, "factor applied to beta after a rejected step (adaptive rule)", float,
               lambda v: 0 < v < 1, "must be in (0, 1)"),
        Option("beta_max", None, "largest step size of the adaptive rule; None: 1 for the mean step (16) (beta = 1 "
               "is the natural-gradient step of length 1/2, Newton-like for likelihood-dominated directions; larger "
               "steps overshoot there) and 10 for the natural mean step, raised (up to 1000) while its accepted steps cut the "
               "residuals to at most 2/(1 + beta) (damping-limited) and reset by a rejected step", float, positive,
               "must be positive or None"),
        Option("gtol", 1e-8, "stop when the natural-gradient residuals of the mean (sqrt(g^T V g)) and of the "
               "covariance (sum_n |gamma_n - gt_n| vt_n) are both <= gtol (softmax rows under the quadrature: or when "
               "they are within 3x the quadrature's own error of those gradients, info['softmax_gradient_error'])",
               float, positive, "must be positive"),
        Option("parameterization", "auto", "'full': N(m, V) with a D x D precision factor (updates (16)-(17)); "
               "'dual': the N-dimensional predictor space of update (19) (N < D, e.g. Gaussian processes); "
               "'auto': dual when there are fewer likelihood terms than variables (but full for models of exp and "
               "square rows with N + D <= 150 under the default rule: Newton steps on stiff Poisson tails)",
               ("auto", "full", "dual")),
        Option("quadrature_nodes", 100, "Gauss-Hermite nodes of the logistic expectation for predictor variances "
               "<= 2 (larger variances use a graded Gauss-Legendre rule)", int, lambda v: v >= 20,
               "must be >= 20"),
        Option("gamma0", 1e-3, "initial pseudo-precision of every likelihood term (V0^-1 = P + gamma0 A^T A); by "
               "default, where the prior's predictors are narrow (sd <= 3) and the undamped natural step from the prior "
               "lowers -ELBO, the run starts from that step instead (given: always this start)",
               float, nonnegative, "must be >= 0"),
        Option("warm_start", None, "start from a previous klprox solution of a model with the same rows (e.g. the "
               "previous value of a hyperparameter sweep): its Result, or a dict with 'x', 'pseudo_precisions' and "
               "'alpha' (optional: 'predictor_mean', 'beta', its last step size, and 'hint': True, a start used only "
               "when its sizes fit this model, as CVXPY's warm_start=True passes it), or a list of them (e.g. the "
               "solved neighbours of a grid point). Each gives its mean and pseudo-precisions as a start and, with "
               "the predictor means, its Gaussian sites under this model's prior (which carry over to a changed "
               "prior such as a new GP kernel); the start with the lowest -ELBO here is used (the default starts "
               "included), "
               "and with the adaptive rule a warm start's last step size (capped by beta_max) is the first one", _warm),
        Option("softmax", "quadrature", "expectation of log-sum-exp (multinomial) rows: 'quadrature' (the exact "
               "ELBO, tensor Gauss-Hermite, up to 4 classes) or 'bound' (Boehning's quadratic bound, any number of "
               "classes: the objective is then an upper bound on -ELBO)", ("quadrature", "bound")),
        Option("algorithm", "proximal-gradient", "'proximal-gradient': linearize the likelihood terms, closed-form "
               "steps (16)-(19) (any model); 'proximal-point': the KL proximal-point method (2) of the paper's "
               "section 3, each subproblem solved by proximal-gradient steps from the previous q (the ELBO never "
               "decreases); only where the ELBO is a closed form (Gaussian, exp, abs terms); beta is then the "
               "proximal-point step", ("proximal-gradient", "proximal-point")),
        Option("inner_max_iter", 200, "algorithm='proximal-point': most proximal-gradient steps per subproblem",
               int, lambda v: v >= 1, "must be >= 1"),
        Option("batch_size", None, "None: all likelihood terms every step (deterministic). k >= 1: stochastic "
               "steps from batches of k terms scaled by N/k (natural-gradient SVI), beta_k = beta (1 + k)^-step_decay; "
               "runs max_iter steps and returns the exact -ELBO at the last q", int, lambda v: v >= 1,
               "must be a positive integer or None"),
        Option("sampling", "permutation", "batch_size: how batches are drawn (varopt.oracles.Sampler): "
               "'permutation' (a fresh random order every pass), 'cyclic', 'uniform' (with replacement)",
               ("permutation", "cyclic", "uniform")),
        Option("step_decay", 0.6, "batch_size: beta_k = beta (1 + k)^-step_decay (0: constant; in (1/2, 1] the "
               "steps satisfy the Robbins-Monro conditions)", float, lambda v: 0 <= v <= 1, "must be in [0, 1]"),
        seed_option("seed of the batch sampling (batch_size): runs are reproducible from it"),
        Option("average", True, "batch_size: return the average of the natural parameters (V^-1, V^-1 m) over the "
               "second half of the max_iter steps (tail averaging; False: the last iterate)", bool),
        Option("max_dense_covariance", 5000, "return info['covariance'] as a dense array when D is at most this "
               "(info['predict'] and the factor are always returned)", int, nonnegative, "must be >= 0"),
    ] + progress_options("called as callback(iteration, m, neg_elbo) after every iteration; returning True "
                         "stops the run")[1:]
      + thread_options("1 thread: the dense factorizations here are small, and threads contending for shared "
                       "cores made them 30 times slower"))

    def _solve(self, program, opts, run):
        program.require_no_aux("klprox", hint=LIKELIHOOD_HINT)
        fams = family_table(opts.quadrature_nodes)
        if opts.softmax == "bound":
            fams["softmax"] = SoftmaxBoundFamily()
        with blas_threads(option_threads(opts.blas_threads, 1)):
            view = likelihood_view(program, fams)
            kind = opts.parameterization
            variant = opts.batch_size is not None or opts.algorithm == "proximal-point"
            if opts.batch_size is not None and opts.algorithm == "proximal-point":
                raise InvalidOptionError("klprox: option 'batch_size' (stochastic steps) applies to "
                                         "algorithm='proximal-gradient' only")
            if opts.batch_size is not None and opts.max_iter is None and opts.time_limit is None:
                raise InvalidOptionError("klprox: stochastic steps (batch_size) run until max_iter or time_limit; "
                                         "set one of them")
            if variant and kind == "dual":
                raise InvalidOptionError("klprox: algorithm='proximal-point' and batch_size use the full "
                                         "parameterization: use parameterization='full' or 'auto'")
            if kind == "auto":
                # the fixed-point Newton step (NEWTON_FP) works on the full form's (m, gt); where it applies it
                # replaces the dual form's damped steps (Poisson, N = 23 < D = 35: 3588 dual iterations against 102)
                newton = (NEWTON_FP and opts.mean_step == "auto" and opts.step_rule == "adaptive" and not variant
                          and view.stiff_variance(fams) and view.N + view.D <= NEWTON_FP_SWITCH)
                kind = "dual" if view.N < view.D and not variant and not newton else "full"
            # the full form's state in the predictor space (Woodbury) for the proximal-gradient iterations; the
            # variants read the precision's factor of every state
            post = DualGaussian(view) if kind == "dual" else FullGaussian(view, woodbury=not variant)
            kp = KLProx(view, post, fams, opts, run)
            if opts.batch_size is not None:
                return stochastic(kp)
            if opts.algorithm == "proximal-point":
                return proximal_point(kp)
            return kp.solve()


class KLProx:
    """One solve: the proximal iterations with the step rule, over one posterior parameterization."""

    def __init__(self, view, post, fams, opts, run):
        self.view, self.post, self.fams, self.opts, self.run = view, post, fams, opts, run
        # 'auto': AUTO_FIRST for the deterministic adaptive method (the proximal-point inner solves and the fixed
        # step keep (16), the paper's iteration as stated)
        self.auto = (opts.mean_step == "auto" and opts.step_rule == "adaptive" and opts.batch_size is None
                     and opts.algorithm == "proximal-gradient")
        self.natural = opts.mean_step == "natural" or (self.auto and AUTO_FIRST == "natural")
        self.switched_at = None                        # first iteration where 'auto' switched (16) -> natural
        # the natural step's mean preconditioned by the mean's exact Hessian where the ELBO separates (Boehning's
        # softmax bound: the preconditioner V+ holds the bound's constant curvature, far above the true one on nearly
        # separable classes; the natural step then crawls)
        self.newton = isinstance(post, FullGaussian) and view.decoupled(fams)
        self.switches = []                             # (iteration, mean step from there) of every switch
        # DAMPED: the default cap of the deterministic adaptive natural step grows while the steps are damping-limited
        self.boostable = (opts.beta_max is None and opts.step_rule == "adaptive" and opts.batch_size is None
                          and opts.algorithm == "proximal-gradient" and opts.mean_step in ("auto", "natural"))
        self.boost = 1.0                               # factor on the default natural cap
        self.accepted = 0                              # steps accepted by advance()
        self.rejected_at = None                        # (iteration, beta) of the last rejected trial (REGROW_WINDOW)
        self.first_steps = 0                           # optimistic first steps left (FIRST_STEPS; set by solve())
        self.restarts = 0                              # cold restarts with a raised gamma0 (RESTARTS)
        self.gamma0 = opts.gamma0                      # the start's gamma0 (start() raises it)
        self.prior_evaluations = 0                     # evaluations of the prior for PRIOR_STEP (0 or 1)
        self.prior_near = False                        # PRIOR_STEP's start taken with every prior sd <= FIRST_SD
        # Anderson-extrapolated steps (ANDERSON_MEMORY): softmax rows under the quadrature, where an evaluation is the
        # cost of a step (a separable view has the Newton mean step instead)
        self.anderson = (AndersonSteps(post, ANDERSON_MEMORY) if ANDERSON_MEMORY and self.auto and view.groups
                         and not self.newton and not fams["softmax"].bound and isinstance(post, FullGaussian) else None)
        # NEWTON_FP: the fixed-point Newton step on exp (Poisson) rows; skip / backoff: iterations left without it, the
        # next wait after a failure
        self.fp_newton = bool(NEWTON_FP and self.auto and isinstance(post, FullGaussian) and view.stiff_variance(fams)
                              and view.N + view.D <= NEWTON_FP_MAX)
        self.fp_skip, self.fp_backoff, self.fp_accepted = 0, 1, 0
        # RESOLVE: the adaptive rule on softmax rows under the quadrature stops at the rule's accuracy
        self.resolve = bool(RESOLVE and view.groups and not fams["softmax"].bound and opts.step_rule == "adaptive")
        self.resolution = None                         # (state, iteration, value error, mean and covariance errors)

    @property
    def beta_max(self):
        """The step-size cap: the option, else 1 for (16) and NATURAL_BETA_MAX for the natural step."""
        if self.opts.beta_max is not None:
            return self.opts.beta_max
        return NATURAL_BETA_MAX * self.boost if self.natural else 1.0

    def _damped(self, beta, ratio):
        """After a step accepted at ``beta`` that cut the largest residual by ``ratio``: whether the step was limited
        by the damping (DAMPED; the natural step with the default cap only); if so at the cap, the cap is raised."""
        if not (self.natural and self.boostable):
            return False
        if ratio > DAMPED / (1.0 + beta):
            return False
        if beta >= self.beta_max:
            self.boost = min(self.boost * self.opts.grow, BOOST_MAX)
        return ratio <= 1.0 / (1.0 + beta)

    def _grown(self, beta, factor, it):
        """The step size after a step accepted at once at ``beta``: ``beta * factor`` up to the cap, but below a step
        size rejected in the last REGROW_WINDOW iterations (``beta`` itself when that leaves no growth)."""
        new = min(beta * factor, self.beta_max)
        if self.rejected_at is not None and it - self.rejected_at[0] < REGROW_WINDOW:
            below = self.rejected_at[1] * self.opts.shrink
            if new > below:
                new = max(min(beta, self.beta_max), below)
        return new

    def _anderson(self, cur):
        """``(next state, proposed)``: the Anderson proposal from ``cur`` (:mod:`.anderson`) when its -ELBO is below
        ``cur``'s by more than the rounding of the sum, or within that rounding and it lowers the largest residual; else
        None (``proposed``: whether a rejected proposal cost an evaluation; the memory is then cleared)."""
        acc, post = self.anderson, self.post
        st2 = acc.propose(cur)
        if st2 is None:
            return None, False
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                f2, a2, g2, mt2, vt2 = self.evaluate(st2)
        except np.linalg.LinAlgError:
            f2 = math.nan
        if math.isfinite(f2) and f2 - cur.f <= ROUNDING * self.scale:
            res2 = post.residuals(st2, a2, g2, vt2)
            # a change of -ELBO within its rounding: the residual decides (both ways, so that the decision does not
            # hang on the last bits of the sum)
            if cur.f - f2 > ROUNDING * self.scale or max(res2) < max(cur.res):
                self.accepted += 1
                acc.accepted += 1
                return Cur(st2, f2, a2, g2, mt2, vt2, res2), True
        acc.reset()
        return None, True

    def _stiff(self, cur):
        """Whether the covariance map is stiff at ``cur`` (NEWTON_FP_STIFF): ``max_n (t4_n vt_n^2 / 2) gt_n / gamma_n``,
        the slope ``-d log gamma_n / d log gt_n`` of the map ``gt <- gamma`` on its own row in the Newton step's
        coordinates, at least NEWTON_FP_STIFF. (At a start far from the optimum, gt << gamma: not stiff yet.)"""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            t4 = self.view.higher_terms(self.fams, cur.mt, cur.vt)[1]
            slope = 0.5 * t4 * np.square(cur.vt) * cur.st.gt / cur.gamma
            slope = float(np.max(np.where(cur.gamma > 0, slope, 0.0), initial=0.0))
        return not slope < NEWTON_FP_STIFF

    def _fp_direction(self, cur):
        """The Newton direction ``(dm, d log gt)`` of the fixed-point equations ``R_m = g = -(P m + c + A^T alpha) = 0``,
        ``R_g = gamma - gt = 0`` at ``cur`` (NEWTON_FP). With ``Vt = A V A^T``, ``S = Vt * Vt`` (elementwise:
        ``d vt_n = -sum_k S_nk d gt_k``) and Price's theorem (``t3``, ``t4`` of :meth:`LikelihoodView.higher_terms`)

            dR_m = -(P + A^T diag(gamma) A) dm + A^T diag(t3) S dgt / 2
            dR_g = diag(t3) A dm - (diag(t4) S / 2 + I) dgt,

        solved for ``dgt = gt * d log gt`` (the columns scaled by ``gt``: pseudo-precisions spread over many decades)."""
        post, view = self.post, self.view
        A = view.A.toarray() if hasattr(view.A, "toarray") else np.asarray(view.A)
        V = post.covariance(cur.st)
        t3, t4 = view.higher_terms(self.fams, cur.mt, cur.vt)
        S = np.square((A @ V) @ A.T)
        gt = cur.st.gt
        N, D = A.shape
        J = np.empty((D + N, D + N))
        J[:D, :D] = -(post.P + (A.T * cur.gamma) @ A)
        J[:D, D:] = (0.5 * (A.T * t3) @ S) * gt
        J[D:, :D] = t3[:, None] * A
        J[D:, D:] = -(0.5 * t4[:, None] * S) * gt
        J[D:, D:][np.diag_indices(N)] -= gt
        rhs = -np.concatenate([post.gradient(cur.st, cur.alpha), cur.gamma - gt])
        dx = np.linalg.solve(J, rhs)
        return dx[:D], dx[D:]

    def _fp_newton(self, cur):
        """``(next state or None, rejected trials)``: the fixed-point Newton step (NEWTON_FP) from ``cur`` at lengths
        1, 1/2, ... >= NEWTON_FP_MIN, the first that lowers -ELBO beyond the rounding of its sum (or within it and lowers
        the largest residual, as every step of the rule); None (and the backoff) when none does."""
        rejected = 0
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                dm, dl = self._fp_direction(cur)
        except (np.linalg.LinAlgError, ValueError):
            dm = None
        t = 1.0
        while dm is not None and np.all(np.isfinite(dm)) and np.all(np.isfinite(dl)) and t >= NEWTON_FP_MIN:
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    st2 = self.post.state_of(cur.st.m + t * dm,
                                             cur.st.gt * np.exp(np.clip(t * dl, -NEWTON_FP_LOG, NEWTON_FP_LOG)))
                    f2, a2, g2, mt2, vt2 = self.evaluate(st2)
            except np.linalg.LinAlgError:
                f2 = math.nan
            if math.isfinite(f2) and f2 - cur.f <= ROUNDING * self.scale:
                res2 = self.post.residuals(st2, a2, g2, vt2)
                if cur.f - f2 > ROUNDING * self.scale or max(res2) < max(cur.res):
                    self.accepted += 1
                    self.fp_accepted += 1
                    self.fp_backoff = 1
                    return Cur(st2, f2, a2, g2, mt2, vt2, res2), rejected
            rejected += 1
            t *= 0.5
        self.fp_skip = self.fp_backoff
        self.fp_backoff = min(2 * self.fp_backoff, NEWTON_FP_BACKOFF)
        return None, rejected

    def _near_quadratic(self, cur):
        """Whether every predictor's standard deviation at the start is at most FIRST_SD (the scale on which the
        curvature of the logistic, Poisson and softmax terms changes): the likelihood is then close to its quadratic
        model over the start's spread and the undamped natural step is Newton-like."""
        return self._narrow(cur.vt)

    def _narrow(self, vt, sd=None):
        v = self.view
        diag = vt if v.diagonal else vt[v.pat_i == v.pat_j]
        return not diag.size or float(np.max(diag)) <= (FIRST_SD if sd is None else sd) ** 2

    def _prior_start(self):
        """The start of PRIOR_STEP, or None when it does not apply or T(prior) is not better than the prior: where every
        prior predictor's standard deviation is at most PRIOR_SD (``self.prior_near``: at most FIRST_SD, the gate of the
        optimistic first steps, T being the first of them), the prior ``N(mu, Sigma)`` is evaluated exactly from its
        predictive moments (no factorization),
        the undamped natural step ``T`` from it (the pseudo-precisions become the expected curvature gamma there, the
        mean ``mu + V(gamma) g``) is evaluated, and kept when its -ELBO is below the prior's (the prior is the start's
        state: the ELBO does not decrease from it)."""
        opts, post, given = self.opts, self.post, self.opts.given
        if not (PRIOR_STEP and self.natural and self.boostable and opts.warm_start is None and "beta" not in given
                and "gamma0" not in given and isinstance(post, FullGaussian) and post.start_kinds() == (True,)):
            return None
        vt = post.prior_var()
        if vt is None or not (FIRST_STEPS and self._narrow(vt, PRIOR_SD)):
            return None
        ps, mt, gp = post.prior(vt)
        self.prior_evaluations = 1
        with np.errstate(over="ignore", invalid="ignore"):
            lik, mag, alpha, gamma = self.view.terms(self.fams, mt, vt)
            f0 = gp + lik
            self.scale = mag + post.magnitude + 1.0
            if not (math.isfinite(f0) and np.all(np.isfinite(alpha)) and np.all(np.isfinite(gamma))):
                return None
            try:
                st = post.step(ps, alpha, gamma, 0.0, natural=True)
                f, a, g, mt1, vt1 = self.evaluate(st)
            except np.linalg.LinAlgError:
                return None
        if not (math.isfinite(f) and f < f0):
            return None
        self.start_beta, self.start_warm, self.gamma0 = opts.beta, False, opts.gamma0
        self.prior_near = self._narrow(vt)
        return Cur(st, f, a, g, mt1, vt1, post.residuals(st, a, g, vt1))

    def _first_done(self, beta, damped):
        """The step size after an accepted optimistic first step (FIRST_STEPS): FIRST_BETA again while some are left;
        after the last, the raised cap is kept only when that step was damping-limited, else the default cap."""
        self.first_steps -= 1
        if self.first_steps:
            return beta
        if not damped:
            self.boost = 1.0
        return min(beta, self.beta_max)

    def evaluate(self, st):
        """``(neg_elbo, alpha, gamma, mt, vt)`` at the posterior state ``st``; ``self.scale`` is the sum of
        the magnitudes added up (the rounding level of ``neg_elbo`` is ``eps * scale``)."""
        mt, vt = self.post.predictors(st)
        lik, mag, alpha, gamma = self.view.terms(self.fams, mt, vt)
        gp = self.post.gauss_part(st)
        self.scale = mag + self.post.magnitude + 1.0
        v = self.view
        if np.any((vt if v.diagonal else vt[v.pat_i == v.pat_j]) < 0):
            # a negative predictor variance: the state's arithmetic has failed (the dual form's B = I + G^1/2 St G^1/2
            # at pseudo-precisions ~1e12 over a rank-deficient St); no Gaussian has it, so the state is not finite
            # (rejected by the step rule, as a logistic or Laplace row's sqrt(vt) already made it; an exp row took it)
            return math.nan, alpha, gamma, mt, vt
        return gp + lik, alpha, gamma, mt, vt

    def start(self, gamma0=None, warm=True):
        """The better of two starts (mean at the Gaussian part's mean ``mu``, which includes linear
        likelihood terms such as ``-y f``, or at 0; one when they coincide, e.g. a zero-mean GP prior), with
        ``V0^-1 = P + gamma0 A^T A`` (``gamma0``: the option unless given); ``gamma0`` is raised while ``-ELBO`` is not
        finite (e.g. ``exp`` of a wide prior predictor overflows); ``warm``: the ``warm_start`` option's starts too.
        ``self.gamma0`` is the value used."""
        g0 = self.opts.gamma0 if gamma0 is None else gamma0
        warm = self.warm() if warm else []
        self.start_beta = self.opts.beta
        self.start_warm = False
        for _ in range(12):
            best = None
            with np.errstate(over="ignore", invalid="ignore"):
                try:
                    starts = [(self.post.start(g0, at_mu), self.opts.beta) for at_mu in self.post.start_kinds()]
                except np.linalg.LinAlgError as exc:
                    raise self._precision_error(g0, exc) from None
                for st, beta in starts + warm:
                    ev = self.evaluate(st)
                    if math.isfinite(ev[0]) and (best is None or ev[0] < best[1][0]):
                        best, self.start_beta = (st, ev), beta
                        self.start_warm = not any(st is s for s, _ in starts)
            if best is not None:
                self.gamma0 = g0
                return best
            g0 = max(10.0 * g0, 1.0) * 10.0
        raise InputDataError("klprox: -ELBO is not finite at any starting point: a likelihood term overflows "
                             "(e.g. exp of a large predictor); rescale the data")

    def _precision_error(self, g0, exc):
        """The start's precision ``P + gamma0 A^T A`` does not factor: an InputDataError saying why (the likelihood's
        rows dwarf the prior: features of scale 1e8 in BayesianMultinomialRegression, whose softmax leaves the prior
        alone along the shift of every class's weights, raised numpy's bare 'leading minor not positive definite')."""
        A = self.view.A
        amax = float(abs(A).max()) if A.shape[0] and A.shape[1] else 0.0
        pmax = float(np.abs(np.asarray(self.view.P.diagonal())).max(initial=0.0))
        return InputDataError(
            f"klprox: the posterior precision P + gamma0 A^T A is not numerically positive definite at the start "
            f"({exc}): the likelihood's rows reach {amax:.3g} in absolute value against a prior precision of at most "
            f"{pmax:.3g}, beyond what double precision resolves (about 1e16 between its largest and smallest "
            f"curvature); rescale the features (e.g. sklearn.preprocessing.StandardScaler) or use a narrower prior")

    def restart(self, cur):
        """A cold start with ``gamma0`` raised RESTART_FACTOR times (RESTARTS at most), for a run where no step size
        raises the ELBO, or None. The usual cause is a start that is finite but useless: an ``exp`` row of a wide prior
        predictor (D >> N Poisson regression, delta = 1: predictor variances ~350 at gamma0 = 1e-3) has
        ``E[exp u] ~ 1e76``, and the precisions ``P + A^T diag(gamma) A`` of the steps from there are too
        ill-conditioned to factor, or lead to states no step leaves (docs/klprox.md, section 6c). A restart whose start
        is worse than ``cur`` is not taken (the ELBO never decreases along the run, restarts included)."""
        if self.restarts >= RESTARTS or self.opts.step_rule != "adaptive":
            return None
        self.restarts += 1
        g0 = max(self.gamma0, 1e-3) * RESTART_FACTOR
        st, (f, alpha, gamma, mt, vt) = self.start(g0, warm=False)
        if f > cur.f:
            return None
        self.first_steps = 0
        self.boost = 1.0
        self.rejected_at = None
        self.run.progress(f"klprox: no step size raises the ELBO (start gamma0 = {g0 / RESTART_FACTOR:g}); restarted "
                          f"cold with gamma0 = {self.gamma0:g}")
        return Cur(st, f, alpha, gamma, mt, vt, self.post.residuals(st, alpha, gamma, vt)), min(self.opts.beta,
                                                                                               self.beta_max)

    def warm(self):
        """``(state, first beta)`` of the ``warm_start`` option's starts, when their sizes fit this model."""
        v, out = self.view, []
        for w in self.opts.warm_start or ():
            mt = w.get("predictor_mean")
            fits = (w["x"].size == v.D and w["pseudo_precisions"].size == v.npat and w["alpha"].size == v.N
                    and (mt is None or mt.size == v.N))
            if w["hint"] and not fits:
                # CVXPY's warm_start=True after a change of the model's rows (a Parameter weight set to 0 removes its
                # row): a hint that does not apply, ignored as CVXPY's solvers ignore one; a cold start
                continue
            if w["x"].size != v.D or w["pseudo_precisions"].size != v.npat or w["alpha"].size != v.N:
                raise InvalidOptionError(f"option 'warm_start' has sizes (x {w['x'].size}, rows "
                                         f"{w['pseudo_precisions'].size}), this model has {v.D} variables and {v.N} "
                                         "rows")
            if np.any(w["pseudo_precisions"][v.eye() > 0] < 0):
                raise InvalidOptionError("option 'warm_start' holds negative pseudo-precisions")
            # the step size the previous run ended with (accepted there): the first one here (adaptive rule only)
            beta = self.opts.beta if self.opts.step_rule == "fixed" else min(w.get("beta", self.opts.beta),
                                                                             self.beta_max)
            if mt is not None and mt.size != v.N:
                raise InvalidOptionError(f"option 'warm_start' has {mt.size} predictor means, this model has {v.N} rows")
            out += [(st, beta) for st in self.post.warm(w["x"], w["pseudo_precisions"], w["alpha"], mt)]
        return out

    def state(self, st):
        """The evaluated state ``(st, neg_elbo, alpha, gamma, mt, vt, residuals)``."""
        f, alpha, gamma, mt, vt = self.evaluate(st)
        return Cur(st, f, alpha, gamma, mt, vt, self.post.residuals(st, alpha, gamma, vt))

    def advance(self, cur, beta, it):
        """One step from ``cur`` under the step rule: ``(new state or None, beta, status, message, rejected)``;
        a status ends the run (``converged`` when the ELBO is flat to rounding)."""
        opts, post = self.opts, self.post
        f, res = cur.f, cur.res
        fixed = opts.step_rule == "fixed"
        first, rejected = True, 0
        newton_dir = None
        if self.fp_newton:
            if self.fp_skip:
                self.fp_skip -= 1
            elif self._stiff(cur):
                new, rejected = self._fp_newton(cur)
                if new is not None:
                    return new, beta, None, "", rejected
        if self.anderson is not None and not self.first_steps:
            new, proposed = self._anderson(cur)
            if new is not None:
                return new, beta, None, "", 0
            rejected = int(proposed)
        while True:
            r = 1.0 / (1.0 + beta)
            res2 = None
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    if self.newton and self.natural:
                        if newton_dir is None:   # one Newton direction per iterate, shared by its trials
                            newton_dir = post.newton_direction(
                                cur.st, cur.alpha, self.view.mean_curvature(self.fams, cur.mt, cur.gamma))
                        st2 = post.step(cur.st, cur.alpha, cur.gamma, r, natural=True, mean_dir=newton_dir)
                    else:
                        st2 = post.step(cur.st, cur.alpha, cur.gamma, r, natural=self.natural)
                    f2, a2, g2, mt2, vt2 = self.evaluate(st2)
            except np.linalg.LinAlgError:
                f2 = math.nan
            if fixed:
                if not math.isfinite(f2):
                    return None, beta, "error", (f"the fixed step beta={beta:g} diverged at iteration {it} "
                                                 f"(-ELBO {f2}); use step_rule='adaptive'"), rejected
                break
            if math.isfinite(f2) and f2 <= f:
                res2 = post.residuals(st2, a2, g2, vt2)
                # the first step's ratio is not used for growth: the start's pseudo-precisions (gamma0) are a guess
                damped = self._damped(beta, max(res2) / max(max(res), 1e-300)) and self.accepted > 0
                if self.first_steps:
                    beta = self._first_done(beta, damped)
                elif first:  # grow only after a step accepted at once (no grow/shrink cycling); faster when damped
                    beta = self._grown(beta, opts.grow ** (1 + damped), it)
                break
            if math.isfinite(f2) and f2 - f <= ROUNDING * self.scale:
                # a change below the rounding of the sum: the stationarity residual decides
                res2 = post.residuals(st2, a2, g2, vt2)
                if max(res2) < max(res):
                    self._damped(beta, max(res2) / max(max(res), 1e-300))
                    beta = min(beta, self.beta_max)
                    break
            rejected += 1
            first = False
            self.rejected_at = (it, beta)
            self.boost = 1.0      # a rejected step: back to the default cap
            if self.first_steps:  # an optimistic first step (FIRST_STEPS) rejected: the option's beta from here
                self.first_steps = 0
                beta = min(self.start_beta, self.beta_max)
                continue
            if f2 - f <= ROUNDING * self.scale and max(res) <= FLAT_RESIDUAL:
                return None, beta, "converged", (f"the ELBO is flat to rounding (residuals {res[0]:.2e}, "
                                                 f"{res[1]:.2e})"), rejected
            beta = min(beta * opts.shrink, self.beta_max)
            if beta < BETA_MIN:
                ok = max(res) <= STALL_RESIDUAL
                return None, beta, "converged" if ok else "error", (
                    f"no step with beta >= {BETA_MIN:g} raises the ELBO (residuals {res[0]:.2e}, "
                    f"{res[1]:.2e}" + (": flat to rounding)" if ok else ")")), rejected
        if res2 is None:
            res2 = post.residuals(st2, a2, g2, vt2)
        self.accepted += 1
        return Cur(st2, f2, a2, g2, mt2, vt2, res2), beta, None, "", rejected

    def solve(self):
        opts, run, post = self.opts, self.run, self.post
        cur = self._prior_start()
        if cur is not None:                            # the start T(prior) (PRIOR_STEP)
            beta = self.beta_max
            if FIRST_STEPS > 1 and self.prior_near:    # T was the first optimistic step: the others follow
                self.first_steps, self.boost, beta = FIRST_STEPS - 1, BOOST_MAX, FIRST_BETA
        else:
            st, (f, alpha, gamma, mt, vt) = self.start()
            cur = Cur(st, f, alpha, gamma, mt, vt, post.residuals(st, alpha, gamma, vt))
            beta = self.start_beta
            if (FIRST_STEPS and self.natural and self.boostable and not self.start_warm
                    and "beta" not in self.opts.given and self._near_quadratic(cur)):
                self.first_steps, self.boost, beta = FIRST_STEPS, BOOST_MAX, FIRST_BETA
        rejected = 0
        status, msg = None, ""
        window = []                                    # max residual at the start of each SWITCH_WINDOW
        run.incumbent(post.mean(cur.st), objective=cur.f)
        crawl = 0                                      # accepted steps in a row that crawl (CRAWL_BETA)
        # softmax rows under the quadrature: a run whose steps are stuck below STALL_BETA is at the rule's accuracy or
        # beyond what it resolves; either way CRAWL_STEPS of them end it (wine, delta = 1000, warm-started from
        # delta = 1: 2000 steps of beta = 1.9e-6, each raising -ELBO by 4e-10 within its rounding)
        crawl_beta = STALL_BETA if self.resolve else CRAWL_BETA
        for it in run.iterations():
            if max(cur.res) <= opts.gtol:
                status, msg = "converged", f"stationarity residuals {cur.res[0]:.2e}, {cur.res[1]:.2e} <= gtol"
                break
            new, beta, status, msg, rej = self.advance(cur, beta, it)
            rejected += rej
            if status == "error" and (done := self._resolved(cur, it, True)):
                status, msg = "converged", done
                break
            if status == "error" and (again := self.restart(cur)) is not None:
                cur, beta = again
                status, msg = None, ""
                continue
            if status is not None:
                break
            flat = cur.f - new.f <= ROUNDING * self.scale
            crawl = crawl + 1 if beta < crawl_beta and flat else 0
            cur = new
            beta = self._maybe_switch(it, cur.res, window, beta)
            m = post.mean(cur.st) if run.callback_fn is not None else None
            run.incumbent(objective=cur.f)
            run.record(objective=cur.f, beta=beta, residual_mean=cur.res[0], residual_cov=cur.res[1])
            if run.callback_fn is not None and run.callback(m, cur.f):
                break
            stalled = crawl >= CRAWL_STEPS or flat and beta < STALL_BETA
            if flat and (done := self._resolved(cur, it, stalled)):
                status, msg = "converged", done
                break
            if crawl >= CRAWL_STEPS:
                ok = max(cur.res) <= STALL_RESIDUAL
                status = "converged" if ok else "error"
                msg = (f"only steps with beta < {crawl_beta:g} raise the ELBO, each by less than its rounding, for "
                       f"{CRAWL_STEPS} iterations (residuals {cur.res[0]:.2e}, {cur.res[1]:.2e}"
                       + (": flat to rounding; an ill-conditioned prior floors the residuals)" if ok else ")"))
                if self.resolve and self.resolution is not None and self.resolution[0] is cur.st:
                    msg += (f"; the softmax quadrature's own error of those gradients is {self.resolution[3]:.2e}, "
                            f"{self.resolution[4]:.2e} and of -ELBO {self.resolution[2]:.1e}: it does not resolve this "
                            "posterior (use softmax='bound' or a smaller prior variance)")
                break
        extra = {} if self.switched_at is None else {"mean_step_switched_at": self.switched_at}
        if self.switches:
            extra["mean_step_switches"] = list(self.switches)
        if self.anderson is not None:
            extra["anderson_steps"] = self.anderson.accepted
        if self.fp_newton:
            extra["newton_steps"] = self.fp_accepted
        return self.finish(cur, status, msg, rejected=rejected, beta=beta, prior_evaluations=self.prior_evaluations,
                           **extra)

    def _maybe_switch(self, it, res, window, beta):
        """mean_step='auto': switch to the natural mean step when (16) stalls (residuals recorded every SWITCH_WINDOW
        iterations), and back to (16) when the natural step stalls (every NATURAL_WINDOW iterations from the mode's
        start); ``window`` holds ``(iteration, largest residual)`` records of the current mean step. Returns the step
        size, capped by the new mean step's cap."""
        if not self.auto:
            return beta
        if self.natural:
            size, ratio = NATURAL_WINDOW, NATURAL_RATIO
            if window and it - window[-1][0] < size:
                return beta
        else:
            size, ratio = SWITCH_WINDOW, SWITCH_RATIO
            if (it + 1) % size:
                return beta
        window.append((it, max(res)))
        if len(window) < 2 or window[-1][1] <= ratio * window[-2][1]:
            return beta
        name = "the natural mean step" if self.natural else "the mean step (16)"
        self.natural = not self.natural
        self.boost = 1.0                               # a mean step starts from its default cap
        self.switches.append((it + 1, "natural" if self.natural else "paper"))
        if self.natural and self.switched_at is None:
            self.switched_at = it + 1
        self.run.progress(f"klprox: {name} stalls (residual {window[-2][1]:.2e} -> {window[-1][1]:.2e} over {size} "
                          f"iterations); {'natural' if self.natural else '(16)'} mean steps from iteration {it + 1}")
        window.clear()
        if self.natural:
            window.append((it, max(res)))
        return min(beta, self.beta_max)

    def _rich_terms(self, cur):
        """The likelihood part ``(value, magnitude, alpha, gamma)`` at ``cur`` with 1.5x the softmax nodes per
        dimension (the reference of the a-posteriori accuracy estimates)."""
        fams = dict(self.fams, softmax=SoftmaxFamily(max_points=160000, boost=1.5))
        return self.view.terms(fams, cur.mt, cur.vt)

    def _resolution(self, cur):
        """``(value error, mean error, covariance error)`` of the softmax quadrature at ``cur``, each the change with
        1.5x the nodes per dimension: of the likelihood part of -ELBO; of the natural gradient of the mean in the
        residual's norm, ``||A^T (alpha - alpha')||_V = sqrt(d^T A V A^T d)``, ``d = alpha - alpha'``; of the covariance
        part, ``sum_n ||Vt_n^1/2 (Gamma_n - Gamma'_n) Vt_n^1/2||_F`` (the covariance residual's norm, which is linear
        in gamma)."""
        lik, _, a2, g2 = self._rich_terms(cur)
        err = abs(lik - (cur.f - self.post.gauss_part(cur.st)))
        row = np.asarray(self.view.A.T @ (cur.alpha - a2)).ravel()[None, :]
        mean_err = float(np.sqrt(max(float(self.post.predict(cur.st, row)[1][0]), 0.0)))
        return err, mean_err, self.view.curvature_residual(cur.gamma, g2, cur.vt)

    def _resolved(self, cur, it, stalled=False):
        """A message when ``cur``'s residuals are at most RESOLVE times the quadrature's error of the gradients they
        are made of (the run is then stationary to the rule's accuracy), else None; ``stalled`` (STALL_BETA): the
        mean's residual may instead promise a gain below the value's error. The estimate is reused for
        RESOLUTION_EVERY iterations unless it says stop (or the run stalls): a stop is decided on an estimate at
        ``cur``."""
        if not self.resolve:
            return None
        old = self.resolution

        def within(r):
            # the mean's gradient E[p] is the exact derivative of the rule's value in m, and its error is small; the
            # covariance's (Price's E[hess l] / 2) is not the derivative of the rule's value in V. Where the latter is
            # inexact, the combined steps raise the rule's -ELBO before the mean's residual reaches its own error
            # (wine, sd 40: mean residual 7.5e-3 against 2.0e-3, then steps of beta ~4e-6 only, each raising -ELBO by
            # 1e-10): a stalled run stops when a full natural-gradient step in m would lower -ELBO by less than the
            # value's error (about res_m^2 / 2, the quadratic model with V^-1 as the Hessian). Not before a stall:
            # differences of the rule's values are finer than its error (iris, delta = 100: 2.4e-6 lower after 200
            # more iterations, with a value error of 1e-6, confirmed by an unpruned 200^2-node rule)
            mean = cur.res[0] <= RESOLVE * r[3] or stalled and 0.5 * cur.res[0] ** 2 <= r[2]
            return mean and cur.res[1] <= RESOLVE * r[4]

        if old is None or old[0] is not cur.st and (stalled or it - old[1] >= RESOLUTION_EVERY or within(old)):
            try:
                self.resolution = old = (cur.st, it) + self._resolution(cur)
            except np.linalg.LinAlgError:
                return None
        if old[0] is not cur.st or not within(old):
            return None
        return (f"stationary to the softmax quadrature's accuracy, not to gtol: residuals {cur.res[0]:.2e}, "
                f"{cur.res[1]:.2e} against the rule's own error of those gradients {old[3]:.2e}, {old[4]:.2e}; -ELBO "
                f"is exact to the quadrature's accuracy, about {old[2]:.1e} (the change with 1.5x the nodes)")

    def _softmax_accuracy(self, cur):
        """A-posteriori check of the softmax quadrature at the returned q: the likelihood part re-evaluated with
        1.5x the nodes per dimension; a warning when the two differ by more than 1e-9 (relative to -ELBO). The
        gradients' errors in the residuals' norms (:meth:`_resolution`) are returned too."""
        r = self.resolution
        if r is None or r[0] is not cur.st:
            try:
                r = (cur.st, None) + self._resolution(cur)
            except np.linalg.LinAlgError:
                r = (cur.st, None, abs(self._rich_terms(cur)[0] - (cur.f - self.post.gauss_part(cur.st))), math.nan,
                     math.nan)
        err = r[2]
        sd = max(float(np.sqrt(np.max(cur.vt[ps].reshape(-1, J, J).diagonal(axis1=1, axis2=2))))
                 for J, _, ps in self.view.groups)
        if err > SOFTMAX_INACCURATE * max(1.0, abs(cur.f)):
            warnings.warn(f"klprox: the softmax expectation is inaccurate at the returned posterior (largest predictor "
                          f"standard deviation {sd:.3g}; -ELBO changes by {err:.2e} with 1.5x the quadrature nodes): "
                          "the ELBO and the step rule are only this exact; a smaller prior variance (narrower posterior) "
                          "restores the 1e-10 accuracy (docs/klprox.md, section 2b)", RuntimeWarning, stacklevel=2)
        return {"softmax_quadrature_error": err, "softmax_gradient_error": (r[3], r[4]), "softmax_sd_max": sd}

    def finish(self, cur, status, msg, **extra):
        post, view, st = self.post, self.view, cur.st
        m = post.mean(st)
        info = {"neg_elbo": cur.f, "elbo": -cur.f, "rounding": ROUNDING * self.scale, "parameterization": post.name,
                "rejected_steps": 0, "algorithm": self.opts.algorithm,
                "pseudo_precisions": None if st.gt is None else st.gt.copy(), "alpha": cur.alpha.copy(),
                "predictor_mean": cur.mt.copy(), "predictor_var": cur.vt.copy(), "prior_mean": view.mu,
                # a partial of the posterior's method, not a closure: results (and fitted estimators) pickle
                "predict": functools.partial(post.predict, st),
                "covariance": post.covariance(st) if view.D <= self.opts.max_dense_covariance else None}
        info.update(extra)
        if view.groups and self.fams["softmax"].bound:
            info["softmax"] = "bound"            # the objective is an upper bound on -ELBO
        elif view.groups:
            info.update(self._softmax_accuracy(cur))
        if "rejected" in info:
            info["rejected_steps"] = info.pop("rejected")
        if not self.run.history:
            # stopped before the first record (the start already stationary: a conjugate Gaussian model is exact
            # after the prior step): one record, so the history holds the answer and verbose / tee=True print it
            self.run.record(force=True, objective=cur.f)
        if status is None and self.opts.step_rule == "fixed" and self.run.status != "converged":
            note = self._fixed_rise(cur.f)
            if note:   # stopped at max_iter or time_limit with an ELBO that fell under the constant step
                return self.run.finish(self.run.status or "iteration_limit", f"{self.run.message}; {note}", x=m,
                                       objective=cur.f, info=info)
        if status is None:
            return self.run.finish(x=m, objective=cur.f, info=info)
        return self.run.finish(status, msg, x=m, objective=cur.f, info=info)

    def _fixed_rise(self, f):
        """With ``step_rule='fixed'`` the ELBO can decrease (the constant step diverges, as the paper's beta = 1 on a1a
        at large delta and on housing with the Laplace likelihood): a note for the message when the returned -ELBO
        is above the lowest one recorded (beyond 1e-8 relative: not rounding), else ''."""
        seen = [(h["objective"], h["iteration"]) for h in self.run.history if h.get("objective") is not None
                and math.isfinite(h["objective"])]
        best, at = min(seen, default=(math.inf, None))
        if not f > best + 1e-8 * abs(best) + ROUNDING * self.scale:
            return ""
        return (f"the ELBO decreased under the fixed step beta={self.opts.beta:g}: the returned -ELBO {f:.10g} is above "
                f"the lowest reached, {best:.10g} at iteration {at} (constant steps can diverge; "
                "step_rule='adaptive', the default, accepts only steps that do not lower the ELBO)")
