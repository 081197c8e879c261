"""The peak memory a call allocates, traced by ``tracemalloc``: the tests of work at the sizes users bring check
memory (and statuses), never wall-clock time on this shared machine."""
import tracemalloc


def traced_peak(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), peak bytes allocated during the call)``."""
    tracemalloc.start()
    try:
        out = fn(*args, **kwargs)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
