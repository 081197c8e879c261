"""Interior-point stochastic approximation (IPSA), Carbonetto (2009) ch. 2, Fig. 2.1.

For ``min f(x) s.t. c(x) <= 0`` (convex ``c``, Slater's condition) with noisy gradients
``g_k ~ grad f(x_k)``, iteration ``k`` does:

1. maximum step ``a_k = 1/(k0 + k)^step_power`` and centring ``sigma_k = sigma (k0'/(k0'+k))^sigma_power``
   with ``k0' = max(k0, 1)``;
2. barrier ``mu_k = max(mu_min, sigma_k eta_k / m)`` with duality measure ``eta_k = -c(x)^T z`` (2.13, 2.18);
   with nonlinear rows, ``mu_k = max(that, mu_{k-1})`` after a step the backtracking cut or that left a
   nonlinear row off-centre (``s_i z_i < mu_{k-1}/2``; option ``centrality_guard``, :meth:`.IpsaRun._off_centre`);
3. gradient observation ``g_k`` from the oracle (:mod:`.oracles`);
4. primal-dual direction from the reduced system (2.20)-(2.21) with ``g_k`` in place of
   ``grad f`` and a Hessian approximation ``B`` (:mod:`.hessian`, :mod:`.direction`);
5. step ``a = min(a_k, 0.995 * max step to z >= 0, 0.995 * max step to the linear boundary)``,
   halved until the constraints hold strictly (``c(x + a dx) < 0``) by more than the rounding
   margin of each row (:meth:`.ConstraintSet.interior`: the user's own evaluation of the
   constraint in another order must agree); with
   ``dual_step='separate'`` the primal and dual variables get their own fractions to the boundary;
6-7. ``x <- x + a dx``, ``z <- z + a dz``.

Every iterate is strictly feasible: ``c(x) < 0`` and ``z > 0``, also when the user re-evaluates
their own constraint expressions in another order.

This module registers the solver and declares its options; one solve is an
:class:`.iteration.IpsaRun` (all per-solve state) on the shared run loop.
"""
from __future__ import annotations

import dataclasses

import math


import numpy as np

from ...errors import InputDataError, InvalidOptionError
from ...core.threads import blas_threads, option_threads
from ...options import (Alias, Option, Options, OptionSet, limit_options, nonnegative, positive, progress_options,
                        start_options, thread_options)
from ...program import Program
from ...program.abs_lift import lift_abs_sums
from ...program.eliminate import eliminate_equalities
from ...program.domains import with_atom_domains
from ...core.run import Run
from ...registry import PREDICTOR_ATOMS, Solver, register_solver
from ...result import Result
from ...oracles import Oracle
from .start import InfeasibleStart
from .iteration import IpsaOracleError, IpsaRun  # noqa: F401  (IpsaOracleError: public import path)


def _oracle_domain(v):
    if v is None or isinstance(v, Oracle) or callable(v) or callable(getattr(v, "gradient", None)):
        return v
    raise InvalidOptionError("option 'oracle' must be a callable gradient(x, rng), an object with a "
                             "gradient(x, rng) method, or a varopt.solvers.ipsa.StreamOracle")


def _callable_cap(v):
    if v is None or callable(v):
        return v
    raise InvalidOptionError("option 'step_cap' must be a callable cap(x, dx, a_max) -> float")


def _float_or_array(v):
    a = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise InvalidOptionError("z0 must be positive and finite")
    return float(a) if a.ndim == 0 else a


OPTIONS = OptionSet(limit_options(max_iter=None) + progress_options(
    callback_doc="called as callback(iteration, x, z, slack) after every iteration (monitoring, tests); returning "
                 "True stops the run (status 'converged' is NOT claimed: status 'iteration_limit')") + start_options(
    x0_doc="strictly feasible starting point (default: automatic, see start.py)",
    seed_doc="seed of the sampling / user-oracle random stream") + thread_options(
    "1 thread: the per-step vectors are small") + [
    Option("passes", None, "number of passes over the terms of a finite sum (one pass = N/batch_size "
           "iterations); default when no stopping rule is given: 10 passes (finite sums), 1000 "
           "iterations otherwise", float, positive, "must be positive"),
    Option("batch_size", 1, "samples per gradient estimate (>= N: exact full gradient)", int, positive,
           "must be positive"),
    Option("k0", 50.0, "step-size offset: maximum step a_k = 1/(k0 + k)^step_power", float, nonnegative,
           "must be >= 0"),
    Option("step_power", 1.0, "step-size exponent (1: harmonic, Robbins-Monro; 0: constant a_k = 1, "
           "the deterministic interior-point method)", float, lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    Option("sampling", "cyclic", "order of the samples of a finite sum", ("cyclic", "uniform", "permutation")),
    Option("hessian", "identity", "Hessian approximation B in (2.20): identity, bb (damped Barzilai-Borwein "
           "2.45), bfgs (damped BFGS §2.4.2), diagonal (running diagonal §2.5.8), exact (Hessian of the "
           "sampled objective)", ("identity", "bb", "bfgs", "diagonal", "exact")),
    Option("oracle", None, "gradient oracle replacing the program objective's gradient: gradient(x, rng) "
           "callable/object, or a StreamOracle", _oracle_domain),
    Option("oracle_adds_objective", False, "add the exact gradient of the program objective to the oracle's "
           "(e.g. a stream of losses plus the L1 penalty written in the model)", bool),
    Option("sigma", 0.5, "initial centring parameter sigma_0 in mu = sigma_k eta / m (2.18)", float,
           lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    Option("sigma_power", 1.0, "centring schedule sigma_k = sigma_0 (k0'/(k0'+k))^sigma_power -> 0, "
           "k0' = max(k0, 1)", float,
           nonnegative, "must be >= 0"),
    Option("centrality_guard", True, "with nonlinear rows: keep the barrier parameter mu (no decrease) after a "
           "step that the backtracking cut or that left a nonlinear row's s_i z_i below mu/2, so that an active "
           "curved row (an epigraph f(x) <= t) does not jam at its boundary; False: the rule (2.18) alone", bool),
    Option("mu_min", 1e-9, "floor of the barrier parameter", float, nonnegative, "must be >= 0"),
    Option("z0", 1.0, "initial dual variables (positive scalar or array of length m)", _float_or_array),
    Option("iteration_offset", 0, "start the step-size counter at k = offset + 1 (warm restarts)", int,
           nonnegative, "must be >= 0"),
    Option("dual_step", "same", "same: one step length for x and z (Fig. 2.1); separate: primal and dual "
           "fractions to the boundary apart", ("same", "separate")),
    Option("step_fraction", 0.995, "fraction of the distance to the boundary (Fig. 2.1 step 5)", float,
           lambda v: 0 < v < 1, "must be in (0, 1)"),
    Option("kkt_tol", 1e-9, "with exact gradients: stop when the KKT residual and eta/m are below kkt_tol "
           "(relative)", float, nonnegative, "must be >= 0"),
    Option("bfgs_gamma", 0.8, "damping factor gamma of the damped BFGS update (2.51)", float,
           lambda v: 0 < v < 1, "must be in (0, 1)"),
    Option("diag_min", 1e-6, "floor of the running diagonal Hessian", float, positive, "must be positive"),
    Option("backend", "auto", "per-sample loop: numba (compiled kernel for batch_size=1 on finite sums of "
           "least-squares or log-sum-exp rows with bounds / block-diagonal linear rows and identity, bb or "
           "diagonal Hessians; needs pip install 'varopt[fast]'), numpy (the reference path), auto (numba "
           "when installed and the problem is covered, else numpy; result.info['backend'] says which ran)",
           ("auto", "numpy", "numba")),
    Option("callback_every", 1, "call the callback after every this many iterations only (e.g. once per pass, "
           "N/batch_size: a convergence test on the whole objective); the compiled loop runs uninterrupted between "
           "calls (with a callback after every iteration it returns to Python at each step)", int, positive,
           "must be positive"),
    Option("history_objective", True, "evaluate the full objective at history records", bool),
    Option("step_cap", None, "optional hook cap(x, dx, a_max) -> float: the maximum step a_k is replaced by "
           "min(a_k, cap) before the fraction-to-boundary rule (e.g. the variance safeguard of sasmc)",
           _callable_cap),
], aliases=[Alias("tol", "kkt_tol", "ipsa's tolerance is a relative KKT residual")])

#: the refusal of a hinge's epigraph names the squares of hinges ipsa does take (sqpos rows, docs/ipsa.md)
EPIGRAPH_HINT = ("a square of a hinge of an affine u (cp.square(cp.pos(u)), cp.sum_squares(cp.pos(u)), "
                 "cp.maximum(u, 0)**2, cp.log_normcdf(u)) is taken as such; for the others use gop (or majorize, "
                 "which takes them)")


@register_solver
class IpsaSolver(Solver):
    name = "ipsa"
    summary = "interior-point stochastic approximation for constrained problems with noisy gradients (Carbonetto 2009)"
    options = OPTIONS
    checks_second_order = True
    #: square(pos(u)) as one sqpos row of an affine u (ipsa needs every term of one affine map; docs/ipsa.md)
    native_atoms = PREDICTOR_ATOMS

    def second_order_skip(self, opts):
        return None if opts.oracle is None else "the gradient came from a user oracle, not from the program"

    def _solve(self, program: Program, opts, run: Run) -> Result:
        # a row whose variables are all fixed is a constant: it has no interior to keep (it was refused as 'no strict
        # interior', an equality as 'nonlinear'); dropped when it holds, else the program is infeasible
        program, violated = program.without_constant_constraints()
        if violated is not None:
            return _constant_row_infeasible(violated, run)
        program = program.split_abs_rows()   # |w| <= u is the box form -u <= w <= u: two linear rows
        # norm1(w) <= t and an L1 penalty lam * norm1(w): rows -s <= w <= s on new columns s (the box form (2.64)
        # of Carbonetto 2009); a user oracle that replaces the objective cannot price the penalty's s: not lifted
        lift = lift_abs_sums(program, objective=opts.oracle is None or bool(opts.oracle_adds_objective))
        if lift is not None:
            return _solve_lifted(self, program, lift, opts, run)
        program.require_smooth("ipsa", "write |u| as u = u_plus - u_minus with u_plus, u_minus >= 0 (the split form of Carbonetto 2009, §2.5), or use proxsg",
                               hint=EPIGRAPH_HINT)
        program = with_atom_domains(program)  # -log x over a free x: the iterates must stay where x > 0
        elim = eliminate_equalities(_pinned_as_equalities(program), max_elim=program.n, min_support=1)
        if elim is None:
            return run_ipsa(program, opts, run)
        # the same for the rows that depend on the equalities eliminated (2 a^T x = 2 e after a^T x = e): constants
        # now (refused as 'a nonlinear equality' before)
        elim.program, violated = elim.program.without_constant_constraints()
        if violated is not None:
            return _constant_row_infeasible(violated, run)
        return _solve_reduced(program, elim, opts, run)


def _solve_lifted(solver, program: Program, lift, opts, run: Run) -> Result:
    """IPSA on ``lift.program`` (:mod:`varopt.program.abs_lift`: each ``|e_r|`` of a sum of absolute values in a
    constraint or of an L1 penalty becomes a column ``s_r`` with rows ``-s_r <= e_r <= s_r``). The lifted program
    is ``x = [I 0] (x, s)`` in the user's variables, so a user oracle is served through that map (gradient 0 in
    ``s``), ``x0`` is completed by ``s = |e(x0)| + delta`` (strictly inside the new rows, :func:`_lifted_start`), and the callback, step cap
    and result see the user's ``n`` variables."""
    import scipy.sparse as sp

    from ...oracles import AffineOracle
    from .iteration import _oracle_for
    n, N = program.n, lift.program.n
    # the model's values (a re-solve's previous point) give s = |e(x)|, on the new rows' boundary; ipsa uses a start
    # only when strictly feasible (.start), so s = |e(x)| + delta with the largest delta in 1, 1/2, ... that keeps
    # every row strict (an L1 ball sum s <= t the point nearly fills allows only a small one); else ipsa's own start
    lift.program.x0 = _lifted_start(lift.program, lift.program.x0, n)
    o = Options(**vars(opts))
    o.given = getattr(opts, "given", ())
    if opts.oracle is not None:
        o.oracle = AffineOracle(_oracle_for(program, opts), sp.eye(n, N, format="csr"), np.zeros(n))
    if opts.x0 is not None:
        x0 = np.asarray(opts.x0, dtype=float).ravel()
        if x0.size != n:
            raise InputDataError(f"x0 has length {x0.size}, the program has {n} variables")
        # the same strict s as for the model's values; an x0 outside its own rows keeps s = |e(x0)|, and ipsa's
        # start names the row it violates
        z = lift.extend(x0)
        o.x0 = _lifted_start(lift.program, z, n)
        if not np.all(np.isfinite(o.x0)):
            o.x0 = z
    if opts.callback is not None:
        o.callback = lambda it, x, *extra: opts.callback(it, np.asarray(x)[:n], *extra)
        run.callback_fn = o.callback  # the run read the user's callback from opts when it was made
    if opts.step_cap is not None:
        o.step_cap = lambda x, dx, a_max: opts.step_cap(np.asarray(x)[:n], np.asarray(dx)[:n], a_max)
    res = solver._solve(lift.program, o, run)
    if res.x is not None:
        res.x = lift.restrict(res.x)
        if res.objective is not None and np.isfinite(res.objective):
            res.objective = float(program.objective.value(res.x))
    res.info["lifted_abs_columns"] = N - n
    return res


def _lifted_start(lifted: Program, z, n: int) -> np.ndarray:
    """``(x, |e(x)| + delta)`` from ``z = (x, |e(x)|)``, strictly inside every row of ``lifted`` for the largest
    ``delta = 2^-k`` (k < 40), or NaN in the new columns when ``x`` has NaN or no such ``delta`` exists."""
    x0 = np.array(z, dtype=float)
    if not np.all(np.isfinite(x0[:n])):
        x0[n:] = np.nan
        return x0
    base = x0[n:].copy()
    for k in range(40):
        x0[n:] = base + 0.5 ** k
        if all(c.lo < c.body.value(x0) < c.hi for c in lifted.constraints):
            return x0
    x0[n:] = np.nan
    return x0


def _constant_row_infeasible(violated, run: Run) -> Result:
    name, value, lo, hi = violated
    return run.finish("infeasible", f"constraint {name!r} has no free variable and its constant value {value:g} "
                      f"is outside [{lo:g}, {hi:g}]", lower=math.inf, upper=math.inf)


def _pinned_as_equalities(program: Program) -> Program:
    """``program`` with each variable whose bounds pin it (``lb == ub``, e.g. a Pyomo
    ``Var(bounds=(2, 2))``) given the equality ``x_v == lb_v``, which the elimination substitutes
    like any other equality (a pinned variable has no strict interior, as an equality has none)."""
    pinned = np.flatnonzero(program.lb == program.ub)
    if pinned.size == 0:
        return program
    from ...program.expression import Expression
    from ...program.program import Constraint
    extra = []
    for v in pinned:
        a = np.zeros(program.n)
        a[v] = 1.0
        extra.append(Constraint(f"bounds of {program.names[v]} (lb == ub)", Expression(program.n, 0.0, a),
                                float(program.lb[v]), float(program.lb[v])))
    return dataclasses.replace(program, constraints=list(program.constraints) + extra)


def _solve_reduced(program: Program, elim, opts, run: Run) -> Result:
    """IPSA on the program with its linear equalities eliminated, ``x = T z + t``
    (:mod:`varopt.program.eliminate`): an equality has no strict interior, the reduced inequalities
    do. The user's oracle, start, callback and step cap are mapped through ``x = T z + t``; the
    result is expanded back to every variable (``info['eliminated']`` names the equalities)."""
    from ...oracles import AffineOracle
    from .iteration import _oracle_for
    T, t = elim.T, elim.t
    red = elim.program
    o = Options(**vars(opts))
    o.given = getattr(opts, "given", ())
    if opts.oracle is not None:
        o.oracle = AffineOracle(_oracle_for(program, opts), T, t)
    if opts.x0 is not None:
        x0 = np.asarray(opts.x0, dtype=float).ravel()
        if x0.size != program.n:
            raise InputDataError(f"x0 has length {x0.size}, the program has {program.n} variables")
        pos = {nm: i for i, nm in enumerate(program.names)}
        o.x0 = x0[[pos[nm] for nm in red.names]]
    if opts.callback is not None:
        o.callback = lambda it, z, *extra: opts.callback(it, elim.expand(z), *extra)
        run.callback_fn = o.callback  # the run read the user's callback from opts when it was made
    if opts.step_cap is not None:
        o.step_cap = lambda z, dz, a_max: opts.step_cap(elim.expand(z), np.asarray(T @ dz).ravel(), a_max)
    res = run_ipsa(red, o, run)
    if res.x is not None:
        res.x = elim.expand(res.x)
    res.info["eliminated"] = [f"{v} (by {c})" for v, c in elim.eliminated]
    return res


def run_ipsa(program: Program, opts, run: Run = None) -> Result:
    """Run IPSA; BLAS is limited to ``opts.blas_threads`` threads for the run (the per-step
    vectors are small, and multithreaded BLAS on length-n dot products costs far more in thread
    wake-ups than it saves: measured 15x slower on a loaded 2-core machine at n = 20000)."""
    run = run or Run("ipsa", opts)
    with blas_threads(option_threads(opts.blas_threads, auto=1)):
        try:
            ipsa = IpsaRun(program, opts, run)
        except InfeasibleStart as exc:
            return run.finish("infeasible", str(exc), lower=math.inf, upper=math.inf)
        return ipsa.solve()
