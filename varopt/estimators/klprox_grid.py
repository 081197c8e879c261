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
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from ..core.threads import blas_threads, option_threads
from ..errors import InvalidOptionError
from ..registry import get_solver
from .base import accept_result


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
    r = solve_point(build, args, options, warm)
    return r.objective, warm_summary(r)


def _neighbours(idx):
    return [idx[:k] + (idx[k] - 1,) + idx[k + 1:] for k in range(len(idx)) if idx[k] > 0]


def _executor(n):
    # fork where there is one: workers start at once with varopt imported, and a user's script is not
    # re-imported (forkserver and spawn run the main module again, which needs an ``if __name__ == '__main__'``
    # guard); OpenBLAS, the BLAS here, resets its thread pool in the child
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context(method))


def grid_search(build, fixed, grids, options=None, n_jobs=None):
    """Solve ``build(*fixed, *point)`` at every point of the product of ``grids``.

    Returns ``(values, best, result)``: ``values`` the ``(point, -ELBO)`` pairs in row-major order, ``best``
    the point of the lowest ``-ELBO`` (the first in that order on ties) and ``result`` its klprox result.
    ``build`` must be a module-level function (it is sent to the worker processes)."""
    n = check_n_jobs(n_jobs)
    order = list(itertools.product(*(range(len(g)) for g in grids)))
    point = {idx: tuple(float(g[i]) for g, i in zip(grids, idx)) for idx in order}
    warm = {idx: [] for idx in order}            # filled with the neighbours' summaries before a point is solved
    done, results = {}, {}
    if n == 1 or len(order) == 1:
        for idx in order:
            r = solve_point(build, fixed + point[idx], options, [done[nb][1] for nb in _neighbours(idx)])
            done[idx] = (r.objective, warm_summary(r))
            if not results or r.objective < next(iter(results.values())).objective:
                results = {idx: r}                   # the best so far (the first on ties), with its full result
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
                running[ex.submit(_worker, build, fixed + point[idx], options, warm[idx])] = idx

            for idx in order:
                if waiting[idx] == 0:
                    submit(idx)
            while running:
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: order.index(running[f])):
                    idx = running.pop(fut)
                    done[idx] = fut.result()
                    for nxt in after[idx]:
                        waiting[nxt] -= 1
                        if waiting[nxt] == 0:
                            submit(nxt)
    values = [(point[idx], done[idx][0]) for idx in order]
    best = None
    for idx in order:
        if best is None or done[idx][0] < done[best][0]:
            best = idx
    if best in results:
        result = results[best]
    else:  # solved in a worker: once more here, from the same warm starts (the same run, the full result)
        result = solve_point(build, fixed + point[best], options, warm[best])
    return values, point[best], result
