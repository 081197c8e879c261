"""Typed, documented solver options, independent of Pyomo and CVXPY.

Each solver declares an :class:`OptionSet`; the Pyomo front-end turns it into a
``pyomo.common.config.ConfigDict`` and the CVXPY front-end and CLI validate keyword
arguments against it. Unknown names raise :class:`~varopt.errors.InvalidOptionError`
that names the option and lists the valid ones.

Options that several solvers share are declared once here, in groups, with one name per meaning:

==================  =========================================================================
group               options
==================  =========================================================================
limits              ``max_iter``, ``time_limit`` (seconds; ``None``: no limit)
progress            ``verbose``, ``callback(iteration, x, ...)``, ``history_every``
start               ``x0`` (starting point), ``seed`` (every random stream of the solve)
threads             ``blas_threads``: ``None`` automatic (the solver's rule), ``0`` leave the
                    BLAS library's setting unchanged, ``k >= 1`` at most ``k`` threads
tolerances          ``rel_gap`` / ``abs_gap`` (certified gap), ``ftol`` (relative change of the
                    objective), ``kkt_tol`` (relative KKT residual)
==================  =========================================================================

A renamed option keeps working through an :class:`Alias` (a ``DeprecationWarning`` names the new
option); ``tol`` is such an alias where its meaning differed between solvers.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from .errors import InvalidOptionError


@dataclass(frozen=True)
class Option:
    name: str
    default: Any
    doc: str
    #: a type (int, float, bool, str), a tuple of allowed strings, or a validating callable
    domain: Any = None
    #: optional extra check ``(value) -> bool`` with a message
    check: Callable = None
    check_msg: str = ""
    #: None is a valid value (it has a documented meaning such as "no limit"); by default only
    #: for options whose default is None
    nullable: bool = None
    #: a float option may be +-inf (a time limit); otherwise inf is refused like NaN: a tolerance,
    #: step size or scale of inf passes a "> 0" check and then stops a run at once or fails later,
    #: blaming something else
    allow_inf: bool = False

    def validate(self, value):
        if value is None:
            if self.nullable or (self.nullable is None and self.default is None):
                return None
            raise InvalidOptionError(f"option {self.name!r} cannot be None (default {self.default!r}): "
                                     f"{self.doc}")
        d = self.domain
        try:
            if isinstance(d, tuple):
                if value not in d:
                    raise InvalidOptionError(f"option {self.name!r} must be one of {list(d)}, got {value!r}")
            elif d is bool:
                if isinstance(value, str):
                    low = value.lower()
                    if low not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                        raise InvalidOptionError(f"option {self.name!r} must be a boolean, got {value!r}")
                    value = low in ("true", "1", "yes", "on")
                else:
                    value = bool(value)
            elif d in (int, float) and isinstance(value, (bool, np.bool_)):
                # bool is an int subclass: max_iter=True would silently be 1 iteration
                raise InvalidOptionError(f"option {self.name!r} must be a number, got the boolean {value!r}")
            elif d is int:
                if isinstance(value, float) and not value.is_integer():
                    raise InvalidOptionError(f"option {self.name!r} must be an integer, got {value!r}")
                value = int(value)
            elif d is float:
                value = float(value)
                if math.isnan(value):
                    raise InvalidOptionError(f"option {self.name!r} must not be NaN")
                if math.isinf(value) and not self.allow_inf:
                    raise InvalidOptionError(f"option {self.name!r} must be finite, got {value!r}")
            elif callable(d) and d not in (str,):
                value = d(value)
            elif d is str:
                value = str(value)
        except InvalidOptionError:
            raise
        except (TypeError, ValueError) as exc:
            raise InvalidOptionError(f"option {self.name!r}: invalid value {value!r} ({exc})") from None
        if self.check is not None and not self.check(value):
            raise InvalidOptionError(f"option {self.name!r}: {self.check_msg or 'invalid value'} (got {value!r})")
        return value


def positive(v):
    return v is None or v > 0


def nonnegative(v):
    return v is None or v >= 0


@dataclass(frozen=True)
class Alias:
    """A deprecated option name that still works: ``name`` is read as ``target``."""
    name: str
    target: str
    note: str = ""


class Options(SimpleNamespace):
    """Validated option values (attribute access); ``given`` holds the names the user set."""


class OptionSet:
    def __init__(self, options, aliases=()):
        self.options = {o.name: o for o in options}
        self.aliases = {a.name: a for a in aliases}

    def __iter__(self):
        return iter(self.options.values())

    def names(self):
        return list(self.options)

    def accepted(self):
        """Every name a user may pass (options and deprecated aliases)."""
        return list(self.options) + list(self.aliases)

    def canonical(self, values: dict) -> dict:
        """``values`` with deprecated aliases renamed (one ``DeprecationWarning`` each)."""
        if not any(k in self.aliases for k in values):
            return dict(values)
        out = {}
        for k, v in values.items():
            a = self.aliases.get(k)
            if a is None:
                out[k] = v
                continue
            if a.target in values:
                raise InvalidOptionError(f"options {k!r} and {a.target!r} are the same option; pass only "
                                         f"{a.target!r}")
            warnings.warn(f"option {k!r} is deprecated, use {a.target!r}{': ' + a.note if a.note else ''}",
                          DeprecationWarning, stacklevel=4)
            out[a.target] = v
        return out

    def validate(self, values: dict) -> Options:
        values = self.canonical(values)
        unknown = [k for k in values if k not in self.options]
        if unknown:
            raise InvalidOptionError(
                f"unknown option {unknown[0]!r}; valid options are: {', '.join(sorted(self.options))}")
        out = {name: o.default for name, o in self.options.items()}
        for k, v in values.items():
            out[k] = self.options[k].validate(v)
        opts = Options(**out)
        opts.given = tuple(values)
        return opts

    def doc(self) -> str:
        lines = [f"{o.name} (default {o.default!r}): {o.doc}" for o in self]
        lines += [f"{a.name}: deprecated alias of {a.target}{' (' + a.note + ')' if a.note else ''}"
                  for a in self.aliases.values()]
        return "\n".join(lines)


def _callable_or_none(v):
    if v is None or callable(v):
        return v
    raise InvalidOptionError("option 'callback' must be callable")


def _array_or_none(v):
    if v is None:
        return None
    import numpy as np
    a = np.asarray(v, dtype=float).ravel()
    if np.isnan(a).any() or np.isinf(a).any():
        raise InvalidOptionError("option 'x0' contains NaN or inf")
    return a


# --- shared option groups (names fixed by the issues; one meaning each) ----------------------
def limit_options(max_iter=1000, time_limit=None):
    return [
        Option("max_iter", max_iter, "maximum number of iterations (None: no limit)", int, positive,
               "must be positive", nullable=True),
        Option("time_limit", time_limit, "wall-clock limit in seconds (None or inf: no limit)", float, positive,
               "must be positive", allow_inf=True),
    ]


def progress_options(callback_doc="called as callback(iteration, x) after every iteration; returning True "
                                  "stops the run (status 'iteration_limit')"):
    return [
        Option("verbose", False, "print progress (iteration, bounds, gap) to stderr (to stdout from prob.solve and "
               "Pyomo solve, as their solvers print)", bool),
        Option("callback", None, callback_doc, _callable_or_none),
        Option("history_every", None, "record history every this many iterations (None: the solver's default)",
               int, positive, "must be positive"),
    ]


def seed_option(doc="seed of every random stream of the solve (results are reproducible from it)"):
    """``seed``: numpy's generators take non-negative integers only, so a negative seed is refused here
    by name (it used to surface mid-solve as numpy's bare ``expected non-negative integer``)."""
    return Option("seed", 0, doc, int, lambda v: v >= 0, "must be a non-negative integer")


def start_options(x0_doc="starting point (array of length n); default: the model's initial values",
                  seed_doc="seed of every random stream of the solve (results are reproducible from it)"):
    return [
        Option("x0", None, x0_doc, _array_or_none),
        seed_option(seed_doc),
    ]


def thread_options(auto_doc):
    return [Option("blas_threads", None, "BLAS threads during the solve: None automatic (" + auto_doc + "), "
                   "0 leave the library's setting unchanged, k >= 1 at most k threads", int, nonnegative,
                   "must be >= 0")]


def common_options(max_iter=1000, time_limit=None):
    """Limits and ``verbose``: what every solver accepts (plugins included)."""
    return limit_options(max_iter, time_limit) + progress_options()[:1]
