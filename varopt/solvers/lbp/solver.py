"""The ``lbp`` solver: damped loopy sum-product on a pairwise binary model (:mod:`.messages`,
``rho = 1``) and the Bethe estimate of log Z (Yedidia, Freeman & Weiss 2005).

Messages start at small random log-odds (``init='random'``): from exactly zero messages a
zero-field model stays at the symmetric (paramagnetic) fixed point, which below the critical
temperature is a saddle of the Bethe free energy with a far worse estimate (a 4 x 4
ferromagnet at T = 1e-3: log Z 11 too low); any perturbation leads to an ordered fixed point.

The Bethe estimate is neither a lower nor an upper bound in general, so no bound is reported;
``info['converged']`` says whether the messages reached ``tol``. On a tree (forest) the fixed
point is exact.
"""
from __future__ import annotations

from ...options import (
    Option,
    OptionSet,
    common_options,
    positive,
    progress_options,
    seed_option,
)
from ...registry import Solver, register_solver
from ..energy_result import beta_option, finish, log_potential
from .messages import Messages, run_messages


def message_options(damping=0.5, tol=1e-8, max_iter=1000):
    return common_options(max_iter=max_iter) + progress_options()[1:] + [
        beta_option(),
        Option("damping", damping, "weight of the old message in each update, in [0, 1)", float,
               lambda v: v is not None and 0.0 <= v < 1.0, "must lie in [0, 1)"),
        Option("tol", tol, "converged when no message (log-odds) changes by more than tol", float, positive,
               "must be positive"),
        Option("init", "random", "initial messages: 'random' (log-odds uniform in [-0.1, 0.1], which breaks the "
               "symmetry of zero-field models) or 'zero'", ("random", "zero")),
        seed_option("seed of the random initial messages"),
    ]


@register_solver
class LoopyBP(Solver):
    name = "lbp"
    summary = "loopy belief propagation (damped sum-product) for energy models: Bethe estimate of log Z, no bound"
    accepts_binary = True
    options = OptionSet(message_options())

    def _solve(self, program, opts, run):
        model = log_potential(program, opts, self.name)
        msgs = Messages(model)
        msgs.initialise(opts.init, opts.seed)
        converged, delta = run_messages(msgs, opts, run, self.name)
        val, mu, corr = msgs.objective()
        info = {"converged": converged, "max_change": delta}
        status = "converged" if converged else None
        msg = ("messages converged" if converged else
               f"messages did not converge (last change {delta:.3g}); the Bethe estimate is not reliable")
        return finish(run, program, opts, model, val, mu, corr, status=status, message=msg, info=info)
