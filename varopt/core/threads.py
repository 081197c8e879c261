"""Limit the number of BLAS/LAPACK threads for a block of code.

Small dense factorizations (KKT solves, PSD checks, Cholesky of a few hundred rows) run
faster single-threaded: a multi-threaded OpenBLAS on a loaded machine made a 200x200
Cholesky take 0.2 s, and ipsa's length-n dot products were 15x slower at n = 20000.
``blas_threads(n)`` is the one helper for that.

Semantics of ``n``: a positive integer caps BLAS at ``n`` threads inside the block;
``None`` or ``0`` leaves the thread count unchanged (a no-op). When threadpoolctl is not
installed the context is a no-op too (the limit is only a speed matter, never correctness).

The solvers' shared option ``blas_threads`` (:func:`varopt.options.thread_options`) means:
``None`` automatic (the solver's rule, :func:`option_threads`), ``0`` leave the library's
setting unchanged, ``k >= 1`` at most ``k`` threads.
"""
import contextlib

_CONTROLLER = []

#: OpenBLAS runs matrices up to this order on one thread whatever its setting (measured on this 2-core machine:
#: equal times for 1 and 2 threads up to order 64, 200x slower at 96 with 2 threads under load), so limiting the
#: threads below it only costs the controller's first build, a scan of every loaded library (~8 ms, a third of
#: the first solve of a 10-variable gop model)
SMALL_ORDER = 64


def _controller():
    """One cached threadpoolctl controller (building it scans the loaded libraries: ~5 ms)."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
            _CONTROLLER.append(ThreadpoolController())
        except ImportError:  # optional: only a speed matter
            _CONTROLLER.append(None)
    return _CONTROLLER[0]


def blas_threads(n=1):
    """Context manager capping BLAS at ``n`` threads; ``n`` of ``None`` or ``0`` changes nothing."""
    if n is None or n == 0:
        return contextlib.nullcontext()
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"blas_threads: n must be None or an integer >= 0, got {n!r}")
    ctl = _controller()
    if ctl is None or all(lc.num_threads <= n for lc in ctl.lib_controllers if lc.user_api == "blas"):
        # nothing to limit (e.g. OPENBLAS_NUM_THREADS=1): entering ctl.limit costs ~15 us, a tenth
        # of the smallest solves' first iteration
        return contextlib.nullcontext()
    return ctl.limit(limits=n, user_api="blas")


def one_thread_above(order):
    """``blas_threads(1)`` for matrices above :data:`SMALL_ORDER`, a no-op for smaller ones."""
    return blas_threads(1 if order > SMALL_ORDER else None)


def option_threads(option, auto):
    """The cap for a solver's ``blas_threads`` option value: ``auto`` (the solver's automatic rule,
    an int or None) when the option is None, else the option (0: unchanged)."""
    return auto if option is None else option
