"""The ``exact`` solver: exact log Z, marginals and pair correlations of an energy model.

Enumeration for fewer than 17 variables (and, meeting in the middle, for dense models of up
to 28 whose elimination width is too large), variable elimination in log space along the
least-width order of several heuristics otherwise (:mod:`.elimination`, :mod:`.order`). Both
bounds are set (``lower_bound == upper_bound``, the free energy); a model whose best order is
wider than ``max_width`` raises :class:`~varopt.errors.ModelStructureError` giving the width.
"""
from __future__ import annotations

from ...errors import ModelStructureError
from ...options import Option, OptionSet, common_options, positive
from ...registry import Solver, register_solver
from ..energy_result import beta_option, finish, log_potential
from .elimination import exact_log_partition


class _Stop(Exception):
    pass


@register_solver
class Exact(Solver):
    name = "exact"
    summary = ("exact log-partition function and marginals of an energy model over binary variables "
               "(enumeration; variable elimination in log space)")
    accepts_binary = True
    options = OptionSet(common_options(max_iter=1) + [
        beta_option(),
        Option("method", "auto", "'enumerate' (all 2^n states), 'eliminate' (variable elimination) or 'auto' "
               "(enumeration below 17 variables)", ("auto", "enumerate", "eliminate")),
        Option("max_width", 22, "largest induced width accepted by variable elimination (tables of "
               "2^(width+1) entries)", int, positive, "must be a positive integer"),
        Option("marginals", True, "compute marginals and pair correlations (a second, downward pass)", bool),
    ])

    def _solve(self, program, opts, run):
        model = log_potential(program, opts, self.name)
        run.iteration = 1

        def check():
            if opts.time_limit is not None and run.elapsed() >= opts.time_limit:
                run.stop("time_limit", f"time_limit={opts.time_limit:g} s reached before elimination finished")
                raise _Stop

        try:
            lz, means, corr, info = exact_log_partition(model, opts.method, opts.marginals, opts.max_width,
                                                        check=check)
        except OverflowError as exc:
            if isinstance(exc.args[0], str):
                raise ModelStructureError(f"solver 'exact': {exc.args[0]} is not possible; use method='eliminate'"
                                          ) from None
            if exc.args[0] is None:
                raise ModelStructureError(
                    f"solver 'exact': every elimination order tried (min-degree, min-fill below 400 variables, "
                    f"the model's order and its reverse, a breadth-first sweep) has width > max_width="
                    f"{opts.max_width} (each was abandoned once wider); raise max_width if memory allows "
                    f"(tables of 2^(width+1) entries), or use an approximate solver (meanfield, lbp, trw, ais)"
                ) from None
            raise ModelStructureError(
                f"solver 'exact': the best elimination order found has width {exc.args[0]} > max_width="
                f"{opts.max_width} (tables of 2^{exc.args[0] + 1} entries); raise max_width if memory allows, "
                "or use an approximate solver (meanfield, lbp, trw, ais)") from None
        except _Stop:
            return run.finish(message=run.message)
        info.pop("order", None)
        msg = "exact" if "marginals_skipped" not in info else "exact log Z; marginals skipped: " + \
            info["marginals_skipped"]
        run.record(force=True, objective=-lz / opts.beta)
        return finish(run, program, opts, model, lz, means, corr, lower=lz, upper=lz, status="optimal",
                      message=msg, info=info)
