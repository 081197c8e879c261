"""The per-solve run loop every solver shares: clock, limits, history, progress, callback,
incumbent and interrupts.

One :class:`Run` is made by :meth:`varopt.registry.Solver.solve` for each call and handed to
the solver's ``_solve(program, opts, run)``; all per-solve state lives on it (or on objects the
solver makes), never on the registered solver. A solver's main loop reads::

    for it in run.iterations():          # stops at max_iter / time_limit, sets run.status
        x = step(x)
        run.incumbent(x, objective=f(x))  # the best point so far (kept for interrupts)
        run.record(objective=f(x))        # history (thinned), progress line, callback
        if converged:
            return run.finish("optimal")
    return run.finish()                   # the limit status iterations() set

``KeyboardInterrupt`` anywhere in ``_solve`` is caught by ``Solver.solve`` and turned into
:meth:`Run.interrupted`: the incumbent with status ``interrupted`` and an honest message.
Values recorded here are in the program's (minimisation) sense; ``Solver.solve`` converts the
finished :class:`~varopt.result.Result` to the user's sense.
"""
from __future__ import annotations

import math
import contextvars
import sys
import time

import numpy as np

from ..result import Result


#: where progress lines go when a solve does not say: stderr, unless a front-end sets it (Pyomo's
#: ``tee=True`` or ``verbose=True`` and CVXPY's ``verbose=True`` print to stdout, as those libraries' solvers do)
PROGRESS_STREAM = contextvars.ContextVar("varopt_progress_stream", default=None)


class Progress:
    """Progress lines (stderr, or :data:`PROGRESS_STREAM`): always when ``verbose``; otherwise only
    on a terminal, after the run has taken 2 s, at most once every ``every_s`` seconds (long runs
    show life, short ones stay quiet)."""

    def __init__(self, verbose: bool, every_s: float = 1.0, stream=None):
        self.verbose = bool(verbose)
        self.stream = stream or PROGRESS_STREAM.get()
        out = stream or sys.stderr
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self.last = -1e9
        self.every = every_s

    @property
    def active(self) -> bool:
        """True when a line could be printed now (callers skip formatting otherwise)."""
        return self.verbose or (self.tty and time.perf_counter() - self.t0 > 2.0)

    def __call__(self, line: str, force: bool = False, heartbeat: bool = False):
        """Print ``line`` (see the class docstring). ``heartbeat``: a line that only shows life inside a
        long iteration (gop's relaxed duals done so far), at most once every ``every_s`` seconds even when
        ``verbose``: printed at every call it flooded the output (2^20 relaxed duals in batches of 64:
        2,500 lines in 15 s)."""
        now = time.perf_counter()
        if heartbeat and now - self.last < self.every:
            return
        if self.verbose or (self.tty and now - self.t0 > 2.0 and (force or now - self.last >= self.every)):
            print(line, file=self.stream or sys.stderr, flush=True)
            self.last = now


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.8g}"
    return str(v)


class Run:
    """State of one solve (see the module docstring).

    ``max_iter``, ``time_limit``, ``verbose``, ``callback`` and ``history_every`` are read from
    ``opts`` when it has them (``None`` disables a limit). ``callback(iteration, x, *extra)``
    returning ``True`` stops the run with status ``iteration_limit`` and the message "stopped by
    callback".
    """

    def __init__(self, solver: str, opts=None):
        g = (lambda k, d=None: getattr(opts, k, d)) if opts is not None else (lambda k, d=None: d)
        self.solver = solver
        self.t0 = time.perf_counter()
        self.max_iter = g("max_iter")
        self.time_limit = g("time_limit")
        self.callback_fn = g("callback")
        self.progress = Progress(g("verbose", False))
        #: record every this many iterations (option ``history_every``; solvers may set a default)
        self.history_every = int(g("history_every") or 1)
        self.history: list = []
        self.iteration = 0
        self.status: str = None
        self.message: str = ""
        self.x = None
        self.objective = None
        self.lower = None
        self.upper = None
        self.info: dict = {}
        #: True when the user maximised: the program (and every value the solver records) is the
        #: internal minimisation, and the progress lines show the user's sense (set by Solver.solve)
        self.maximize = False
        #: history keys shown on progress lines (a solver adds its own: proxsg's sample size and step,
        #: the only changing numbers of a sampled run, which has no objective value to show)
        self.progress_keys = ("objective", "lower", "upper", "gap")

    # --- clock and limits -----------------------------------------------------------------
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def limit_reached(self, iteration: int = None) -> bool:
        """True (and ``status``/``message`` set) when ``iteration`` (default: the current one) has
        reached ``max_iter`` or the clock ``time_limit``."""
        it = self.iteration if iteration is None else iteration
        if self.max_iter is not None and it >= self.max_iter:
            self.stop("iteration_limit", f"max_iter={self.max_iter} reached")
            return True
        if self.time_limit is not None and self.elapsed() >= self.time_limit:
            self.stop("time_limit", f"time_limit={self.time_limit:g} s reached")
            return True
        return False

    def out_of_time(self) -> bool:
        """True (and ``status`` ``time_limit`` set) when the clock has reached ``time_limit``: the check
        for long iterations, which stop inside the iteration (``max_iter`` counts whole iterations
        and is checked between them only)."""
        if self.time_limit is not None and self.elapsed() >= self.time_limit:
            self.stop("time_limit", f"time_limit={self.time_limit:g} s reached")
            return True
        return False

    def phase_end(self, share: float = 1.0) -> float:
        """The clock (:meth:`elapsed`) at which a phase allowed ``share`` of the time left stops: ``inf`` without
        ``time_limit`` (a phase then stops on a count of its own work, never on seconds, so that a run without a
        time limit is a function of the program, the options and the seed)."""
        if self.time_limit is None or not math.isfinite(self.time_limit):
            return math.inf
        now = self.elapsed()
        return now + share * max(0.0, self.time_limit - now)

    def heartbeat(self, text: str):
        """A progress line from inside a long phase (``"<solver> <text>  t <elapsed>s"``), at most one a second:
        shows life where no iteration ends for a long time (gop's root bound tightening: ~600 LPs, minutes). Not
        in the first second of a run (short runs stay as they were)."""
        if self.progress.active and self.elapsed() >= self.progress.every:
            self.progress(f"{self.solver} {text}  t {self.elapsed():.3g}s", heartbeat=True)

    def iterations(self, start: int = 0):
        """Yield ``start + 1, start + 2, ...`` until :meth:`stop` is called or, checked after each
        iteration (so the first one always runs), a limit is reached."""
        self.iteration = start
        while self.status is None:
            self.iteration += 1
            yield self.iteration
            if self.status is None:
                self.limit_reached()

    def stop(self, status: str, message: str = ""):
        if self.status is None:
            self.status, self.message = status, message

    # --- incumbent, history, progress, callback -------------------------------------------
    def incumbent(self, x=None, objective=None, lower=None, upper=None):
        """Remember the best point so far and the bounds (kept by reference: pass a fresh array)."""
        if x is not None:
            self.x = x
        if objective is not None:
            self.objective = objective
        if lower is not None:
            self.lower = lower
        if upper is not None:
            self.upper = upper

    def due(self) -> bool:
        """True when :meth:`record` would record this iteration (skip costly fields otherwise)."""
        return self.iteration % self.history_every == 0

    def record(self, force: bool = False, **fields) -> dict:
        """Append a history entry (every ``history_every`` iterations, or when ``force``) and
        print a progress line. ``fields`` usually holds ``objective``, ``lower``, ``upper``."""
        it = self.iteration
        if not force and not self.due():
            return None
        if self.history and self.history[-1]["iteration"] == it:
            self.history[-1].update(fields)
            return self.history[-1]
        h = {"iteration": it, "time": self.elapsed(), "lower": None, "upper": None, "objective": None}
        h.update(fields)
        self.history.append(h)
        if self.progress.active:
            user = dict(h)
            if self.maximize:  # a lower bound of the minimisation is an upper bound of the user's max
                user["lower"], user["upper"] = (None if h["upper"] is None else -h["upper"],
                                                None if h["lower"] is None else -h["lower"])
                user["objective"] = None if h["objective"] is None else -h["objective"]
            shown = " ".join(f"{k} {_fmt(v)}" for k, v in user.items()
                             if k in self.progress_keys and v is not None)
            self.progress(f"{self.solver} it {it:>7d}  {shown}  t {h['time']:.3g}s", force=force)
        return h

    #: the keys a history entry starts with, before the solver's fields
    HEAD = ("iteration", "time", "lower", "upper")

    def record_batch(self, entries, stamped=False) -> None:
        """Append the history entries ``(iteration, fields)`` (increasing iterations, each one
        :meth:`record` would record) at once, time-stamped now: a compiled loop hands over the records
        its kernel saved. Same entries as :meth:`record` one by one, which this falls back to when
        progress lines are printed. ``stamped``: each ``fields`` is already the whole entry, a fresh dict
        starting with the keys of :attr:`HEAD` (``lower``, ``upper`` None) then ``objective``, appended as
        it is with its time set (one dict per record instead of two; ipsa's compiled loop)."""
        if not entries:
            return
        head = self.HEAD
        if self.progress.active:
            for it, fields in entries:
                self.iteration = it
                self.record(**({k: v for k, v in fields.items() if k not in head} if stamped else fields))
            return
        t = self.elapsed()
        hist = self.history
        for it, fields in entries:
            if hist and hist[-1]["iteration"] == it:
                hist[-1].update({k: v for k, v in fields.items() if k not in head} if stamped else fields)
                continue
            if stamped:
                fields["time"] = t
                hist.append(fields)
            else:
                hist.append({"iteration": it, "time": t, "lower": None, "upper": None, "objective": None, **fields})
        self.iteration = entries[-1][0]

    def callback(self, x, *extra) -> bool:
        """Call the user's callback; a ``True`` answer stops the run."""
        if self.callback_fn is not None and self.callback_fn(self.iteration, x, *extra):
            self.stop("iteration_limit", "stopped by callback")
            return True
        return False

    # --- results -------------------------------------------------------------------------------
    def finish(self, status: str = None, message: str = None, *, x=None, objective=None,
               lower=None, upper=None, info: dict = None) -> Result:
        """The :class:`Result` of the run: the incumbent unless given, the status set by a limit or
        :meth:`stop` unless given (``converged`` when neither)."""
        if status is not None:
            self.status, self.message = status, (message if message is not None else "")
        elif message is not None:
            self.message = message
        self.incumbent(x, objective, lower, upper)
        if self.info or info:
            self.info = {**self.info, **(info or {})}
        return Result(solver=self.solver, status=self.status or "converged", x=self.x,
                      objective=self.objective, lower_bound=self.lower, upper_bound=self.upper,
                      iterations=self.iteration, history=self.history, message=self.message, info=self.info)

    def interrupted(self) -> Result:
        """The incumbent after ``KeyboardInterrupt``: status ``interrupted``, no optimality claim."""
        shown = "no point yet" if self.x is None else f"objective {_fmt(self.objective)}"
        self.status = "interrupted"
        self.message = (f"interrupted by the user after {self.iteration} iterations "
                        f"({self.elapsed():.3g} s); the best point so far is returned ({shown})")
        if not self.history or self.history[-1]["iteration"] != self.iteration:
            self.record(force=True, objective=self.objective, lower=self.lower, upper=self.upper)
        lo = self.lower if (self.lower is not None and math.isfinite(self.lower)) else None
        return Result(solver=self.solver, status="interrupted", x=self.x, objective=self.objective,
                      lower_bound=lo, upper_bound=self.upper, iterations=self.iteration,
                      history=self.history, message=self.message, info=self.info)
