"""Process plumbing around HiGHS: the lazy ``highspy`` import and the stdout guard for its
native debug prints.
"""
from __future__ import annotations

import contextlib
import os
import sys




#: HiGHS 1.15 prints some postsolve debug lines ("HighsPostsolveStack::DuplicateColumn::undo
#: ...") with printf to stdout even with output_flag off; they would corrupt e.g. JSON on the
#: CLI's stdout. While HiGHS runs, file descriptor 1 is pointed at /dev/null (stderr is kept).
SILENCE_NATIVE_STDOUT = True
_LIBC = []
_DEVNULL = []  # [(pid, fd)]


@contextlib.contextmanager
def _native_stdout_silenced():
    if not SILENCE_NATIVE_STDOUT or os.name != "posix":
        yield
        return
    if not _LIBC:
        try:
            import ctypes
            _LIBC.append(ctypes.CDLL(None))
        except OSError:
            _LIBC.append(None)
    libc = _LIBC[0]
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1
        yield
        return
    if not _DEVNULL or _DEVNULL[0][0] != os.getpid():
        # one descriptor on /dev/null per process (opened once: a solve runs HiGHS thousands of times)
        _DEVNULL[:] = [(os.getpid(), os.open(os.devnull, os.O_WRONLY))]
    try:
        os.dup2(_DEVNULL[0][1], 1)
        yield
    finally:
        if libc is not None:
            libc.fflush(None)  # drop what HiGHS buffered before fd 1 is restored
        os.dup2(saved, 1)
        os.close(saved)


def new_highs(hp=None):
    """A ``highspy.Highs()`` made with stdout silenced: HiGHS 1.16 prints its banner ("Running
    HiGHS 1.16.0 ...") on stdout when the object is built, before ``output_flag`` can be set."""
    hp = hp or _highspy()
    with _native_stdout_silenced():
        return hp.Highs()


def _highspy():
    import highspy  # imported lazily so ``import varopt`` stays cheap
    return highspy
