"""The ``meanfield`` solver: naive mean field for an energy model (Carbonetto 2009, §4.1, Fig. 4.1).

For the log-potential ``t(s) = const + h.s + sum_e w_e s_i s_j`` and a fully factorised
q(s) with means ``mu`` (q(s_i) = (1 + s_i mu_i)/2, eq. 4.8), Jensen's inequality gives

    log Z >= F(mu) = const + h.mu + sum_e w_e mu_i mu_j + sum_i H((1 + mu_i)/2)     (eq. 4.2, 4.9)

for *every* mu in [-1, 1]^n (H the binary entropy), so the value reported is a certified lower
bound whether or not the iteration converged. F is concave in each mu_i alone with maximiser
``tanh(h_i + sum_j J_ij mu_j)``; the damped coordinate step
``mu_i <- (1 - damping) tanh(h_i + sum_j J_ij mu_j) + damping mu_i`` therefore never decreases F.
Sites of one colour class (:mod:`varopt.oracles.colouring`) are not coupled, so a class is
updated at once; ``restarts`` random starts run side by side (rows of one array) and the best
bound is kept. ``info['mf_parameters']`` is theta = atanh(mu), the natural parameters of q, and
``info['mf_log_partition']`` = sum_i log(2 cosh theta_i) = c(theta) of the thesis (§4.3 reports
3.10 for its 4-node example; the bound F itself is 3.005 there, exact log Z 3.3675).
"""
from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from ...options import Option, OptionSet, common_options, positive, progress_options, start_options
from ...oracles.colouring import colour_classes
from ...registry import Solver, register_solver
from ..energy_result import beta_option, finish, log_potential


def mean_field_bound(model, M):
    """F(mu) for the rows of ``M`` (shape (R, n)): the lower bound on log Z of the module docstring."""
    M = np.clip(np.atleast_2d(M), -1.0, 1.0)
    p, q = (1.0 + M) / 2.0, (1.0 - M) / 2.0
    H = -(xlogy(p, p) + xlogy(q, q)).sum(axis=1)
    return model.const + M @ model.h + (M[:, model.i] * M[:, model.j]) @ model.w + H


def colour_blocks(model):
    """The colour classes of the coupling graph with their coupling columns (one sweep updates a class at once)."""
    J = model.J.tocsc()
    return [(c, J[:, c].tocsc()) for c in colour_classes(model.n, model.i, model.j)]


def sweep(model, M, blocks, damping=0.0) -> float:
    """One damped coordinate-ascent sweep over the rows (starts) of ``M``, in place; the largest change."""
    delta = 0.0
    for c, Jc in blocks:
        new = np.tanh(model.h[c] + (Jc.T @ M.T).T)
        if damping:
            new = (1.0 - damping) * new + damping * M[:, c]
        delta = max(delta, float(np.abs(new - M[:, c]).max()))
        M[:, c] = new
    return delta


def _damping_ok(v):
    return v is not None and 0.0 <= v < 1.0


@register_solver
class MeanField(Solver):
    name = "meanfield"
    summary = "naive mean field (damped coordinate ascent) for energy models: certified lower bound on log Z"
    accepts_binary = True
    options = OptionSet(common_options(max_iter=1000) + progress_options()[1:] + start_options()[1:] + [
        beta_option(),
        Option("damping", 0.0, "weight of the old mean in each coordinate step, in [0, 1)", float, _damping_ok,
               "must lie in [0, 1)"),
        Option("tol", 1e-10, "stop when no mean changes by more than tol in a sweep", float, positive,
               "must be positive"),
        Option("restarts", 4, "number of starts (the first from mu = 0, the others uniform in [-1, 1])", int,
               positive, "must be a positive integer"),
    ])

    def _solve(self, program, opts, run):
        model = log_potential(program, opts, self.name)
        n = model.n
        rng = np.random.default_rng(opts.seed)
        M = np.zeros((opts.restarts, n))
        if opts.restarts > 1:
            M[1:] = rng.uniform(-1.0, 1.0, size=(opts.restarts - 1, n))
        blocks = colour_blocks(model)
        converged = n == 0
        for _ in run.iterations():
            if converged:
                break
            delta = sweep(model, M, blocks, opts.damping)
            F = mean_field_bound(model, M)
            best = int(np.argmax(F))
            run.incumbent(objective=-F[best] / opts.beta)
            run.record(objective=-F[best] / opts.beta, upper=-F[best] / opts.beta)
            if run.callback(M[best].copy()):
                break
            if delta <= opts.tol:
                converged = True
                break
        F = mean_field_bound(model, M)
        best = int(np.argmax(F))
        mu = M[best]
        with np.errstate(divide="ignore"):
            theta = np.arctanh(np.clip(mu, -1.0, 1.0))
            c_theta = float(np.sum(np.log(2.0) - 0.5 * np.log1p(-mu * mu)))
        info = {"mf_parameters": theta, "mf_log_partition": c_theta, "restart_bounds": F,
                "converged": bool(converged)}
        status = "converged" if converged else None
        msg = "coordinate ascent converged" if converged else None
        return finish(run, program, opts, model, F[best], mu, mu[model.i] * mu[model.j], lower=F[best],
                      status=status, message=msg, info=info)
