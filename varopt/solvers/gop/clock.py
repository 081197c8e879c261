"""The run's time limit in gop's presolve and one-shot LPs (docs/gop.md, "Time limits on larger models").

The deadline is the run's own (:class:`varopt.core.run.Run`: ``run.time_limit`` on ``run.elapsed()``, shared with the
tree, phase 1 and the relaxed duals); this module only adds

* :class:`OutOfTime`: raised by a presolve step or a one-shot LP (GOP's HiGHS primal problem, the recession and
  unbounded-ray LPs, the convex path's phase 1) that the time limit stopped; the solver catches it and returns
  status ``time_limit`` with what it has (:func:`timed_out`), never a "failed" error or a verdict the LP did not
  reach;
* :func:`seconds_left` / :func:`limit_lp`: the time left for one LP (HiGHS's own ``time_limit``), from the run;
* :func:`timed_out`: the result of a run stopped before the search gave a bound: the run's incumbent, else the
  model's starting point when it satisfies every row (the user's values, checked, never invented), and the
  interval bound of the objective over the tightened box (valid for every point of the box, no LP).
"""
from __future__ import annotations

import contextlib
import contextvars
import math

import numpy as np

from ...errors import ModelStructureError
from ...lpqp import solve_lp
from ...lpqp.settings import _LIMIT_STATUSES

#: the run of the gop solve under way in this thread (set by the solver around its work): the one-shot LPs of the
#: modules below it read its deadline here instead of each taking a ``run`` argument through five call layers
_RUN = contextvars.ContextVar("varopt_gop_run", default=None)


@contextlib.contextmanager
def running(run):
    """Make ``run`` the deadline of :func:`timed_lp` inside the ``with`` block."""
    token = _RUN.set(run)
    try:
        yield
    finally:
        _RUN.reset(token)


class OutOfTime(Exception):
    """The run's ``time_limit`` came inside a step that has no valid partial answer of its own."""


def seconds_left(run):
    """Seconds before ``run``'s time limit (None without one)."""
    tl = getattr(run, "time_limit", None)
    if tl is None or not math.isfinite(tl):
        return None
    return tl - run.elapsed()


def check(run, phase: str):
    """Raise :class:`OutOfTime` when ``run``'s time limit has passed (between presolve phases)."""
    left = seconds_left(run)
    if left is not None and left <= 0.0:
        raise OutOfTime(f"time_limit={run.time_limit:g} s reached during {phase}")


def lp_time_limit(left):
    """HiGHS's ``time_limit`` for an LP given ``left`` seconds (None: no limit); at least 1 ms (0 is refused)."""
    return None if left is None else max(1e-3, float(left))


def stopped_by_limit(res) -> bool:
    """True when an LP result was stopped by a limit (time, iterations) rather than decided."""
    return res.status != "optimal" and res.model_status in _LIMIT_STATUSES


def current_time_limit():
    """HiGHS's ``time_limit`` for an LP of the current run (:func:`running`): the time left, None without one."""
    return lp_time_limit(seconds_left(_RUN.get()))


def timed_lp(c, A=None, row_lo=None, row_hi=None, lb=None, ub=None, **kw):
    """:func:`varopt.lpqp.solve_lp` with the time left before the current run's limit (:func:`running`; none
    outside a run or without a limit). Raises :class:`OutOfTime` when no time is left or HiGHS stops on the time
    limit: a caller that reads a non-optimal status as "no ray" or "failed" would otherwise give a wrong
    verdict or a confusing error (GOP's primal problem, the recession and unbounded-ray LPs, phase 1)."""
    run = _RUN.get()
    left = seconds_left(run)
    if left is not None and left <= 0:
        raise OutOfTime("time limit reached during a one-shot LP")
    res = solve_lp(c, A, row_lo, row_hi, lb, ub, time_limit=lp_time_limit(left), **kw)
    if left is not None and res.status not in ("optimal", "infeasible", "unbounded") and (
            res.model_status == "Time limit reached" or seconds_left(run) <= 0):
        raise OutOfTime("time limit reached during a one-shot LP")
    return res


def limit_lp(hm, run, stop=math.inf):
    """Give the HiGHS model ``hm`` the time left before ``run``'s limit or ``stop`` (a ``run.elapsed()`` clock),
    whichever is first; nothing without either."""
    left = seconds_left(run)
    end = min(stop, math.inf if left is None else run.elapsed() + left)
    if math.isfinite(end):
        hm.set_time_limit(max(1e-3, end - run.elapsed()))


def starting_point(program):
    """``(x, f)``: the first of the program's starting values, 0 clipped to the box and the box's midpoint (where
    finite) that satisfies the bounds and every row, or None. Each is checked, none is invented: a 50 x 60
    factorisation without starting values stopped in its presolve still returns a feasible point."""
    lb, ub = np.asarray(program.lb, dtype=float), np.asarray(program.ub, dtype=float)
    with np.errstate(all="ignore"):
        mid = np.where(np.isfinite(lb) & np.isfinite(ub), 0.5 * (lb + ub), np.clip(0.0, lb, ub))
    for z in (getattr(program, "x0", None), np.clip(np.zeros(program.n), lb, ub), mid):
        if z is not None:
            out = _feasible(program, z)
            if out is not None:
                return out
    return None


def _feasible(program, x0, tol=1e-7):
    """``(x, f)`` when ``x0`` (every variable given) satisfies the bounds and every row to ``tol`` relative."""
    x0 = np.array(x0, dtype=float)
    if getattr(program, "aux", None) and x0.shape == (program.n,):
        # lifted columns (CVXPY's squares, norms) have no user value: recomputed from the user's variables
        n_user = program.n_user
        if np.all(np.isfinite(x0[:n_user])):
            x0[n_user:] = 0.0
            with np.errstate(all="ignore"):
                x0 = program.complete_aux(x0)
    if x0.shape != (program.n,) or not np.all(np.isfinite(x0)):
        return None
    if np.any(x0 < program.lb - tol * np.maximum(1.0, np.abs(program.lb))) \
            or np.any(x0 > program.ub + tol * np.maximum(1.0, np.abs(program.ub))):
        return None
    try:
        with np.errstate(all="ignore"):
            for c in program.constraints:
                v = float(c.body.value(x0))
                s = tol * max(1.0, abs(v))
                if not math.isfinite(v) or v < c.lo - s or v > c.hi + s:
                    return None
            f = float(program.objective.value(x0))
    except (ValueError, ArithmeticError):
        return None
    return (x0.copy(), f) if math.isfinite(f) else None


def timed_out(run, program, why: str, lb=None, ub=None):
    """The result of a run stopped by its time limit before the search finished (``why``: where). The incumbent is
    the run's, else the program's starting point when it is feasible; the lower bound the run's, else the interval
    bound of the objective over ``[lb, ub]`` (default: the program's box), else ``-inf``."""
    from .relax import interval_lower_bound
    x, f = run.x, run.objective
    if x is None:
        start = starting_point(program)
        if start is not None:
            x, f = start
    lower = run.lower
    if lower is None or not math.isfinite(lower):
        try:
            lower = interval_lower_bound(program, program.lb if lb is None else lb, program.ub if ub is None else ub)
        except (ModelStructureError, ValueError):
            lower = -math.inf   # a program the relaxation does not take: no bound, still a time_limit result
    if f is not None and lower > f:
        lower = f
    shown = "no feasible point yet" if x is None else "the best point so far is returned"
    return run.finish("time_limit", f"time_limit={run.time_limit:g} s reached ({why}); {shown}", x=x, objective=f,
                      lower=lower, upper=math.inf if f is None else f)
