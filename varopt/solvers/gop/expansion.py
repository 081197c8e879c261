"""Expanding one GOP node in batches: limits inside an iteration, progress and a size warning.

One iteration of GOP replaces the selected node by ``2^c`` children (``c`` connected variables
of the new Lagrangian, docs/gop.md §5). For ``c = 18`` that is 262,144 relaxed duals: the run
loop's limits, checked between iterations, would be honoured only after the whole expansion.
So the children are generated lazily (:meth:`.search.GopSearch._children` is a generator: no
memory proportional to ``2^c`` up front) and solved in batches; after every batch the clock is
checked (:meth:`varopt.core.run.Run.out_of_time`). When the time is up the expansion stops and the
parent goes back to the open nodes: its relaxed-dual value is a valid bound on its whole region
(the children only add constraints), so the lower bound stays valid with part of the children
solved.
"""
from __future__ import annotations

import itertools
import warnings

#: warn (once per solve) when one iteration means more relaxed duals than this
WARN_SUBPROBLEMS = 4096
#: relaxed duals per batch between two clock checks (serial; times the workers with an executor)
BATCH = 64


class ManySubproblemsWarning(UserWarning):
    """One GOP iteration solves very many relaxed duals (2^connected)."""


def batches(children, executor=None):
    """Lists of at most ``BATCH`` (times the number of workers) children from the generator."""
    size = BATCH * max(1, int(getattr(executor, "_max_workers", None) or 1)) if executor is not None else BATCH
    it = iter(children)
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk


class Expansion:
    """Bookkeeping of one node expansion: the size warning, progress lines and the clock."""

    def __init__(self, run, n_connected: int, names):
        self.run = run
        self.total = 1 << int(n_connected)
        self.done = 0
        self.big = self.total > WARN_SUBPROBLEMS
        if self.big and not getattr(run, "_gop_warned_size", False):
            run._gop_warned_size = True
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            msg = (f"gop: one iteration solves 2^{n_connected} = {self.total:,} relaxed duals ({n_connected} "
                   f"connected variables: {shown}); expect long iterations. Fewer connected variables "
                   f"(option partition, tighter bounds, eliminating variables) shorten them; time_limit is "
                   f"checked every {BATCH} relaxed duals")
            warnings.warn(msg, ManySubproblemsWarning, stacklevel=6)
            run.progress(msg, force=True)

    def tick(self, n: int) -> bool:
        """Count ``n`` solved children; True when the time limit is reached (status set on the run)."""
        self.done += n
        if self.big and self.run.progress.active:
            self.run.progress(f"gop it {self.run.iteration:>7d}  relaxed duals {self.done:,}/{self.total:,}  "
                              f"t {self.run.elapsed():.3g}s", heartbeat=True)
        return self.run.out_of_time()
