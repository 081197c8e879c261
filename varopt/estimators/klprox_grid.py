r"""Hyperparameter grids of the klprox estimators: warm starts from solved neighbours, serially or in processes.

A grid ``g_1 x ... x g_d`` (e.g. ``log_ell x log_sf x log_noise`` of a GP) is solved point by point; point
``(i_1, ..., i_d)`` is warm-started (the solver's ``warm_start`` option) from its neighbours one step back in
each direction, ``(.., i_k - 1, ..)``, which are solved before it in row-major order. For a GP the warm start
carries each neighbour's Gaussian sites (pseudo-observations and pseudo-precisions per data point), which keep
their meaning under a new kernel (docs/klprox.md, section 3), and its last step size.

``n_jobs`` > 1 solves points whose neighbours are all solved in worker processes (a point waits for its own
neighbours only, so up to one anti-diagonal ``i_1 + ... + i_d = const`` runs at once). Every point gets the
same warm starts as in the serial order, so every value is the serial run's (the solver is deterministic
and runs its factorizations on 1 BLAS thread); the selected point is solved once more in this process for
its full result (the workers return the arrays a warm start needs, not the result with its closures).

The grid's points are solved to ``GRID_GTOL`` (stationarity residuals 1e-4: -ELBO within about ``res^2 / 2`` ~ 1e-8
of its optimum, far below the differences the selection compares), and the selected point is then continued from its
own solution to the solver's ``gtol`` (1e-8 by default): the tail from 1e-4 to 1e-8, 30-50 % of a point's iterations,
is paid once instead of at every point (docs/klprox.md, section 7, "GP estimators at N = 500-4000").

Progress: ``progress(line)`` (the estimators' ``verbose``) is called after every point with its value, iterations,
time and an estimate of the time left; a grid whose first point predicts more than ``LONG_GRID_SECONDS`` warns once
(:class:`LongGridWarning`) with that estimate and what shortens it.
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from ..core.threads import blas_threads, option_threads
from ..errors import InvalidOptionError
from ..registry import get_solver
from .base import accept_result


#: the stationarity residuals the points of a grid are solved to (the selected point then to the solver's gtol)
GRID_GTOL = 1e-4
#: a grid whose first point predicts a longer fit warns once (LongGridWarning)
LONG_GRID_SECONDS = 60.0


class LongGridWarning(UserWarning):
    """A hyperparameter grid predicted to take long (its first point's time times the points left)."""


def check_n_jobs(n_jobs):
    """The number of processes for ``n_jobs`` (scikit-learn's convention: None = 1, -1 = all cores,
    -2 = all but one, ...)."""
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
        raise InvalidOptionError(f"n_jobs must be None or a nonzero integer, got {n_jobs!r}")
    cpus = os.cpu_count() or 1
    return max(1, n_jobs if n_jobs > 0 else cpus + 1 + n_jobs)


def warm_summary(r):
    """What a warm start reads from a klprox result (plain arrays: they pickle)."""
    i = r.info
    return {"x": r.x, "pseudo_precisions": i["pseudo_precisions"], "alpha": i["alpha"],
            "predictor_mean": i["predictor_mean"], "beta": i.get("beta")}


def solve_point(build, args, options, warm):
    """Solve the program ``build(*args)``; ``warm``: the neighbours' summaries (a user's own ``warm_start`` in
    ``options`` takes precedence). Raises when the solver fails (:func:`accept_run`)."""
    opts = dict(options or {})
    if warm:
        opts.setdefault("warm_start", warm)
    # the model's own factorizations (a GP kernel's Cholesky factor) on the solver's BLAS threads (1 by default):
    # a 135 x 135 Cholesky on 2 contended OpenBLAS threads took 0.14 s, 1400 times its single-thread time, and
    # 60 % of a 6 x 6 GP classification grid on the loaded machine
    with blas_threads(option_threads(opts.get("blas_threads"), 1)):
        program = build(*args)
    return accept_run(get_solver("klprox").solve(program, **opts), opts, f" at grid point {args[-3:]}")


def accept_run(r, opts, where=""):
    """``r`` when it converged or stopped at a limit (:func:`.base.accept_result`; a stochastic run, ``batch_size``,
    ends after its max_iter steps by design: no warning); RuntimeError otherwise."""
    stochastic = opts.get("batch_size") is not None and r.status == "iteration_limit"
    return accept_result(r, "klprox", where, "the posterior is the last iterate", warn=not stochastic)


def _worker(build, args, options, warm):
    t = time.perf_counter()
    r = solve_point(build, args, options, warm)
    return r.objective, warm_summary(r), r.iterations, time.perf_counter() - t


def _neighbours(idx):
    return [idx[:k] + (idx[k] - 1,) + idx[k + 1:] for k in range(len(idx)) if idx[k] > 0]


def _executor(n):
    # fork where there is one: workers start at once with varopt imported, and a user's script is not
    # re-imported (forkserver and spawn run the main module again, which needs an ``if __name__ == '__main__'``
    # guard); OpenBLAS, the BLAS here, resets its thread pool in the child
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context(method))


def _coarse_options(options, n_points):
    """``(options of the grid's points, whether the selected point is continued)``: the points to GRID_GTOL when the
    grid has more than one point and the user's ``gtol`` (1e-8 by default) is finer; stochastic runs (``batch_size``,
    which stop at max_iter) as given."""
    opts = dict(options or {})
    gtol = opts.get("gtol", 1e-8)
    if n_points < 2 or opts.get("batch_size") is not None or not (isinstance(gtol, (int, float)) and gtol < GRID_GTOL):
        return opts, False
    opts["gtol"] = GRID_GTOL
    return opts, True


def _fmt(x):
    return f"{x / 60:.1f} min" if x >= 60 else f"{x:.0f} s" if x >= 10 else f"{x:.2g} s"


class _Progress:
    """The per-point line (``progress``) and the long-grid warning of :func:`grid_search`."""

    def __init__(self, progress, names, n_points, n_jobs, label):
        self.progress, self.names, self.n, self.jobs, self.label = progress, names, n_points, n_jobs, label
        self.t0, self.count, self.warned = time.perf_counter(), 0, False

    def point(self, p, value, iterations, seconds):
        self.count += 1
        elapsed = time.perf_counter() - self.t0
        left = elapsed / self.count * (self.n - self.count)
        if self.count == 1 and self.n > 1 and not self.warned:
            guess = seconds * (self.n - 1) / self.jobs
            if guess > LONG_GRID_SECONDS:
                self.warned = True
                warnings.warn(f"{self.label}: the hyperparameter grid has {self.n} points and its first took "
                              f"{_fmt(seconds)}: the fit may take about {_fmt(guess + seconds)} more (warm starts "
                              "usually make the later points cheaper). Numbers instead of lists (or 'auto') fit one "
                              "point, shorter lists fewer, and n_jobs spreads the points over processes; verbose=True "
                              "prints a line per point", LongGridWarning, stacklevel=5)   # the user's fit(...)
        if self.progress is not None:
            at = ", ".join(f"{k}={v:.3g}" for k, v in zip(self.names, p))
            self.progress(f"{self.label}: grid point {self.count}/{self.n} ({at}): -ELBO {value:.10g}, "
                          f"{iterations} iterations, {_fmt(seconds)}; elapsed {_fmt(elapsed)}"
                          + (f", about {_fmt(left)} left" if self.count < self.n else ""))


def grid_search(build, fixed, grids, options=None, n_jobs=None, progress=None, names=None, label="grid"):
    """Solve ``build(*fixed, *point)`` at every point of the product of ``grids``.

    Returns ``(values, best, result)``: ``values`` the ``(point, -ELBO)`` pairs in row-major order, ``best``
    the point of the lowest ``-ELBO`` (the first in that order on ties) and ``result`` its klprox result, continued
    to the solver's ``gtol`` from the grid's solution (GRID_GTOL; its value in ``values`` is the continued one).
    ``build`` must be a module-level function (it is sent to the worker processes). ``progress``: called with a line
    per solved point (``names``: the hyperparameters' names, ``label``: the line's prefix)."""
    n = check_n_jobs(n_jobs)
    order = list(itertools.product(*(range(len(g)) for g in grids)))
    point = {idx: tuple(float(g[i]) for g, i in zip(grids, idx)) for idx in order}
    warm = {idx: [] for idx in order}            # filled with the neighbours' summaries before a point is solved
    done = {}
    coarse, refine = _coarse_options(options, len(order))
    report = _Progress(progress, names or [f"x{k}" for k in range(len(grids))], len(order), n, label)
    best_r = None                                # (serial, no refinement) the best point's full result
    if n == 1 or len(order) == 1:
        for idx in order:
            t = time.perf_counter()
            r = solve_point(build, fixed + point[idx], coarse, [done[nb][1] for nb in _neighbours(idx)])
            done[idx] = (r.objective, warm_summary(r))
            report.point(point[idx], r.objective, r.iterations, time.perf_counter() - t)
            if best_r is None or r.objective < best_r[1].objective:
                best_r = (idx, r)                    # the best so far (the first on ties), with its full result
    else:
        waiting = {idx: len(_neighbours(idx)) for idx in order}
        after = {idx: [] for idx in order}
        for idx in order:
            for nb in _neighbours(idx):
                after[nb].append(idx)
        with _executor(n) as ex:
            running = {}

            def submit(idx):
                warm[idx] = [done[nb][1] for nb in _neighbours(idx)]
                running[ex.submit(_worker, build, fixed + point[idx], coarse, warm[idx])] = idx

            for idx in order:
                if waiting[idx] == 0:
                    submit(idx)
            while running:
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: order.index(running[f])):
                    idx = running.pop(fut)
                    obj, summary, iters, secs = fut.result()
                    done[idx] = (obj, summary)
                    report.point(point[idx], obj, iters, secs)
                    for nxt in after[idx]:
                        waiting[nxt] -= 1
                        if waiting[nxt] == 0:
                            submit(nxt)
    best = None
    for idx in order:
        if best is None or done[idx][0] < done[best][0]:
            best = idx
    if refine:
        # the selected point continued from its own solution (its sites: under the same prior, the solution itself)
        # to the solver's gtol; serially and in processes from the same summary, so the same run
        result = solve_point(build, fixed + point[best], options, [done[best][1]])
        done[best] = (result.objective, done[best][1])
        if progress is not None:
            progress(f"{label}: selected {', '.join(f'{k}={v:.3g}' for k, v in zip(report.names, point[best]))}, "
                     f"continued to gtol in {result.iterations} iterations: -ELBO {result.objective:.10g}")
    elif best_r is not None and best_r[0] == best:
        result = best_r[1]
    else:  # solved in a worker: once more here, from the same warm starts (the same run, the full result)
        result = solve_point(build, fixed + point[best], coarse, warm[best])
    values = [(point[idx], done[idx][0]) for idx in order]
    return values, point[best], result
