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
at its first ``beta``, ``beta`` grows (``grow``) up to ``beta_max``. As ``beta -> 0`` the step is a small natural-
gradient step (Theorem 1 of the paper: length ``beta/(1 + beta)``), so a non-stationary point
always has an accepted ``beta``. Near the optimum the ELBO changes by less than the rounding of its
sum (``1e-14`` times the magnitudes added up, ``info['rounding']``): such a step is accepted when it
lowers the stationarity residual, and a rejected one at small residuals ends the run as converged. ``step_rule='fixed'`` runs the paper's constant ``beta``.
"""
from __future__ import annotations

import math

import numpy as np

from ...core.threads import blas_threads, option_threads
from ...errors import InputDataError, InvalidOptionError
from ...options import Option, OptionSet, common_options, nonnegative, positive, progress_options, thread_options
from ...registry import Solver, register_solver
from .expectations import family_table
from .posterior import DualGaussian, FullGaussian
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


def _warm(v):
    """Validate the ``warm_start`` option: a Result (its ``x`` and ``info``) or a dict of arrays."""
    if v is None:
        return None
    d = dict(v.info, x=v.x) if hasattr(v, "info") and hasattr(v, "x") else v
    try:
        out = {k: np.asarray(d[k], dtype=float).ravel() for k in ("x", "pseudo_precisions", "alpha")}
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidOptionError("option 'warm_start' must be a klprox Result or a dict with arrays 'x', "
                                 f"'pseudo_precisions' and 'alpha' ({exc})") from None
    if not all(np.all(np.isfinite(a)) for a in out.values()) or np.any(out["pseudo_precisions"] < 0):
        raise InvalidOptionError("option 'warm_start' holds NaN/inf or negative pseudo-precisions")
    return out


@register_solver
class KLProxSolver(Solver):
    name = "klprox"
    summary = ("KL-proximal variational inference: Gaussian posterior N(m, V) of a Gaussian prior times "
               "likelihoods of linear predictors (Khan, Baque, Fleuret & Fua 2015)")
    options = OptionSet(common_options(max_iter=2000) + [
        Option("beta", 1.0, "step size beta > 0 of the proximal steps (16)-(19) (r = 1/(1 + beta)): the first "
               "step of the adaptive rule, or the constant step of step_rule='fixed' (the paper uses 0.25 for "
               "logistic and 1 for Laplace likelihoods)", float, positive, "must be positive"),
        Option("step_rule", "adaptive", "'adaptive': accept a step only when the exactly computed ELBO does not "
               "decrease, else shrink beta; grow beta after success. 'fixed': constant beta (may diverge)",
               ("adaptive", "fixed")),
        Option("mean_step", "paper", "'paper': the mean update (16), m+ = m + (1-r) [P + r A^T diag(gt) A]^-1 g; "
               "'natural': the natural-parameter (natural-gradient) form m+ = m + (1-r) V+ g, preconditioned by the "
               "new precision including the likelihood curvature (Newton-like as beta grows)", ("paper", "natural")),
        Option("grow", 2.0, "factor applied to beta after an accepted step (adaptive rule)", float,
               lambda v: v >= 1, "must be >= 1"),
        Option("shrink", 0.5, "factor applied to beta after a rejected step (adaptive rule)", float,
               lambda v: 0 < v < 1, "must be in (0, 1)"),
        Option("beta_max", 1.0, "largest step size of the adaptive rule (beta = 1 is the natural-gradient step of length 1/2, Newton-like for likelihood-dominated directions; larger steps overshoot there)", float, positive, "must be positive"),
        Option("gtol", 1e-8, "stop when the natural-gradient residuals of the mean (sqrt(g^T V g)) and of the "
               "covariance (sum_n |gamma_n - gt_n| vt_n) are both <= gtol", float, positive, "must be positive"),
        Option("parameterization", "auto", "'full': N(m, V) with a D x D precision factor (updates (16)-(17)); "
               "'dual': the N-dimensional predictor space of update (19) (N < D, e.g. Gaussian processes); "
               "'auto': dual when there are fewer likelihood terms than variables", ("auto", "full", "dual")),
        Option("quadrature_nodes", 100, "Gauss-Hermite nodes of the logistic expectation for predictor variances "
               "<= 2 (larger variances use a graded Gauss-Legendre rule)", int, lambda v: v >= 20,
               "must be >= 20"),
        Option("gamma0", 1e-3, "initial pseudo-precision of every likelihood term (V0^-1 = P + gamma0 A^T A)",
               float, nonnegative, "must be >= 0"),
        Option("warm_start", None, "start from a previous klprox solution of a model with the same rows (e.g. the "
               "previous value of a hyperparameter sweep): its Result, or a dict with 'x', 'pseudo_precisions' and "
               "'alpha'; used when its -ELBO here is below the default starts'", _warm),
        Option("max_dense_covariance", 5000, "return info['covariance'] as a dense array when D is at most this "
               "(info['predict'] and the factor are always returned)", int, nonnegative, "must be >= 0"),
    ] + progress_options("called as callback(iteration, m, neg_elbo) after every iteration; returning True "
                         "stops the run")[1:]
      + thread_options("1 thread: the dense factorizations here are small, and threads contending for shared "
                       "cores made them 30 times slower"))

    def _solve(self, program, opts, run):
        program.require_no_aux("klprox")
        fams = family_table(opts.quadrature_nodes)
        with blas_threads(option_threads(opts.blas_threads, 1)):
            view = likelihood_view(program, fams)
            kind = opts.parameterization
            if kind == "auto":
                kind = "dual" if view.N < view.D else "full"
            post = (DualGaussian if kind == "dual" else FullGaussian)(view)
            return KLProx(view, post, fams, opts, run).solve()


class KLProx:
    """One solve: the proximal iterations with the step rule, over one posterior parameterization."""

    def __init__(self, view, post, fams, opts, run):
        self.view, self.post, self.fams, self.opts, self.run = view, post, fams, opts, run
        self.natural = opts.mean_step == "natural"

    def evaluate(self, st):
        """``(neg_elbo, alpha, gamma, mt, vt)`` at the posterior state ``st``; ``self.scale`` is the sum of
        the magnitudes added up (the rounding level of ``neg_elbo`` is ``eps * scale``)."""
        v = self.view
        mt, vt = self.post.predictors(st)
        vt = np.maximum(vt, 1e-300)
        alpha, gamma = np.empty(v.N), np.empty(v.N)
        lik, mag = float(v.lin @ mt), float(np.abs(v.lin) @ np.abs(mt))
        for kind, sl in v.blocks:
            E, d1, d2 = self.fams[kind].expect(mt[sl], vt[sl])
            cf = v.coef[sl]
            lik += float(cf @ E)
            mag += float(cf @ np.abs(E))
            alpha[sl], gamma[sl] = cf * d1 + v.lin[sl], 2.0 * cf * d2
        gp = self.post.gauss_part(st)
        self.scale = mag + self.post.magnitude + 1.0
        return gp + lik, alpha, gamma, mt, vt

    def start(self):
        """The better of two starts (mean at the Gaussian part's mean ``mu``, which includes linear
        likelihood terms such as ``-y f``, or at 0), with ``V0^-1 = P + gamma0 A^T A``; ``gamma0`` is
        raised while ``-ELBO`` is not finite (e.g. ``exp`` of a wide prior predictor overflows)."""
        g0 = self.opts.gamma0
        for _ in range(12):
            best = None
            with np.errstate(over="ignore", invalid="ignore"):
                for st in [self.post.start(g0, at_mu) for at_mu in (True, False)] + self.warm():
                    ev = self.evaluate(st)
                    if math.isfinite(ev[0]) and (best is None or ev[0] < best[1][0]):
                        best = (st, ev)
            if best is not None:
                return best
            g0 = max(10.0 * g0, 1.0) * 10.0
        raise InputDataError("klprox: -ELBO is not finite at any starting point: a likelihood term overflows "
                             "(e.g. exp of a large predictor); rescale the data")

    def warm(self):
        """The state of the ``warm_start`` option, when its sizes fit this model."""
        w = self.opts.warm_start
        if w is None:
            return []
        v = self.view
        if w["x"].size != v.D or w["pseudo_precisions"].size != v.N or w["alpha"].size != v.N:
            raise InvalidOptionError(f"option 'warm_start' has sizes (x {w['x'].size}, rows "
                                     f"{w['pseudo_precisions'].size}), this model has {v.D} variables and {v.N} rows")
        return [self.post.warm(w["x"], w["pseudo_precisions"], w["alpha"])]

    def solve(self):
        opts, run, post = self.opts, self.run, self.post
        st, (f, alpha, gamma, mt, vt) = self.start()
        beta = opts.beta
        fixed = opts.step_rule == "fixed"
        rejected = 0
        res = post.residuals(st, alpha, gamma, vt)
        status, msg = None, ""
        run.incumbent(post.mean(st), objective=f)
        for it in run.iterations():
            if max(res) <= opts.gtol:
                status, msg = "converged", f"stationarity residuals {res[0]:.2e}, {res[1]:.2e} <= gtol"
                break
            first = True
            while True:
                r = 1.0 / (1.0 + beta)
                try:
                    with np.errstate(over="ignore", invalid="ignore"):
                        st2 = post.step(st, alpha, gamma, r, natural=self.natural)
                        f2, a2, g2, mt2, vt2 = self.evaluate(st2)
                except np.linalg.LinAlgError:
                    f2 = math.nan
                if fixed:
                    if not math.isfinite(f2):
                        status = "error"
                        msg = (f"the fixed step beta={beta:g} diverged at iteration {it} (-ELBO {f2}); "
                               "use step_rule='adaptive'")
                    break
                if math.isfinite(f2) and f2 <= f:
                    if first:  # grow only after a step accepted at once (no grow/shrink cycling)
                        beta = min(beta * opts.grow, opts.beta_max)
                    break
                if math.isfinite(f2) and f2 - f <= ROUNDING * self.scale:
                    # a change below the rounding of the sum: the stationarity residual decides
                    res2 = post.residuals(st2, a2, g2, vt2)
                    if max(res2) < max(res):
                        break
                rejected += 1
                first = False
                if f2 - f <= ROUNDING * self.scale and max(res) <= FLAT_RESIDUAL:
                    status, msg = "converged", (f"the ELBO is flat to rounding (residuals {res[0]:.2e}, "
                                                f"{res[1]:.2e})")
                    break
                beta *= opts.shrink
                if beta < BETA_MIN:
                    ok = max(res) <= STALL_RESIDUAL
                    status = "converged" if ok else "error"
                    msg = (f"no step with beta >= {BETA_MIN:g} raises the ELBO (residuals {res[0]:.2e}, "
                           f"{res[1]:.2e}" + (": flat to rounding)" if ok else ")"))
                    break
            if status is not None:
                break
            st, f, alpha, gamma, mt, vt = st2, f2, a2, g2, mt2, vt2
            res = post.residuals(st, alpha, gamma, vt)
            m = post.mean(st) if run.callback_fn is not None else None
            run.incumbent(objective=f)
            run.record(objective=f, beta=beta, residual_mean=res[0], residual_cov=res[1])
            if run.callback_fn is not None and run.callback(m, f):
                break
        return self._finish(st, f, alpha, vt, mt, status, msg, rejected, beta)

    def _finish(self, st, f, alpha, vt, mt, status, msg, rejected, beta):
        post, view = self.post, self.view
        m = post.mean(st)
        info = {"neg_elbo": f, "elbo": -f, "rounding": ROUNDING * self.scale, "parameterization": post.name, "beta": beta, "rejected_steps": rejected,
                "pseudo_precisions": st.gt.copy(), "alpha": alpha.copy(), "predictor_mean": mt.copy(),
                "predictor_var": vt.copy(), "prior_mean": view.mu,
                "predict": lambda A_new, b_new=0.0: post.predict(st, A_new, b_new),
                "covariance": post.covariance(st) if view.D <= self.opts.max_dense_covariance else None}
        if status is None:
            return self.run.finish(x=m, objective=f, info=info)
        return self.run.finish(status, msg, x=m, objective=f, info=info)
