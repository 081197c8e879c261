"""What the energy-model solvers (``exact``, ``meanfield``, ``lbp``, ``trw``, ``ais``) share:
the ``beta`` option and the result convention (docs/energy.md).

Result convention. The model is p(x) ∝ exp(-beta g(x)) with ``g`` the program's (minimised)
objective, i.e. exp(-beta f) for a user's minimisation of ``f`` and exp(+beta f) for a
maximisation. Internally the objective value is the free energy ``-log Z / beta`` (a soft-min of
``g``); :meth:`varopt.registry.Solver.solve` turns it into the user's sense: ``-log Z/beta`` for a
minimisation, ``+log Z/beta`` for a maximisation. A certified lower bound ``L <= log Z`` is an
upper bound ``-L/beta`` of the internal objective, and so on. ``info`` holds

* ``log_partition`` (log Z), ``log_partition_lower`` / ``log_partition_upper`` when certified;
* ``marginals``: ``{variable name: P(x = 1)}`` (= E[x]);
* ``correlations``: ``{(name_i, name_j): E[x_i x_j]}`` on the coupled pairs, when the method
  gives them; ``spin_means`` (E[s], s = 2x - 1) and ``spin_correlations`` (E[s_i s_j] per pair of
  ``edges``) as arrays;
* ``log_partition_se`` for random methods.

``Result.x`` stays ``None``: a marginal is not a state, so the front-ends leave the user's
binary variables untouched (they publish the marginals by name instead).
"""
from __future__ import annotations

import math

import numpy as np

from ..options import Option
from ..program.energy import energy_of


def beta_option():
    return Option("beta", 1.0, "inverse temperature: p(x) ∝ exp(-beta f(x)) for a minimisation, "
                  "exp(+beta f(x)) for a maximisation", float,
                  lambda v: v is not None and v > 0 and math.isfinite(v), "must be positive and finite")


def fraction_option(name, default, doc):
    return Option(name, default, doc, float, lambda v: v is not None and 0.0 < v <= 1.0, "must lie in (0, 1]")


def log_potential(program, opts, solver_name):
    """The log-potential ``-beta q(s)`` (an :class:`~varopt.program.energy.EnergyModel`)."""
    return energy_of(program, solver_name).scaled(-opts.beta)


def finish(run, program, opts, model, log_z, means=None, corr=None, *, lower=None, upper=None, se=None,
           status=None, message=None, info=None):
    """The run's :class:`~varopt.result.Result` in the convention of the module docstring.

    ``model`` is the log-potential, ``means`` E[s], ``corr`` E[s_i s_j] on ``model``'s edges,
    ``lower``/``upper`` certified bounds on log Z (None when not certified)."""
    beta = opts.beta
    names = program.names
    if model.n == 0:
        # every variable fixed: log Z is the constant log-potential, known exactly whatever the method, and the
        # result is the constant's (docs/conventions.md: "optimal", as every solver answers a constant model)
        log_z = lower = upper = model.const
        status, message = "optimal", "no free variable: log Z is the constant log-potential"
    out = {"log_partition": float(log_z), "beta": beta}
    if lower is not None:
        out["log_partition_lower"] = float(lower)
    if upper is not None:
        out["log_partition_upper"] = float(upper)
    if se is not None:
        out["log_partition_se"] = float(se)
    if means is not None:
        means = np.clip(np.asarray(means, dtype=float), -1.0, 1.0)
        out["spin_means"] = means
        out["marginals"] = {nm: float((1.0 + m) / 2.0) for nm, m in zip(names, means)}
    edges = [(names[i], names[j]) for i, j in zip(model.i.tolist(), model.j.tolist())]
    out["edges"] = edges
    if corr is not None and means is not None:
        corr = np.clip(np.asarray(corr, dtype=float), -1.0, 1.0)
        out["spin_correlations"] = corr
        exx = (1.0 + means[model.i] + means[model.j] + corr) / 4.0
        out["correlations"] = {e: float(v) for e, v in zip(edges, exx)}
    out.update(info or {})
    internal_lower = None if upper is None else -upper / beta
    internal_upper = None if lower is None else -lower / beta
    return run.finish(status, message, x=None, objective=-float(log_z) / beta, lower=internal_lower,
                      upper=internal_upper, info=out)
