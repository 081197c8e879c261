"""Typed, documented solver options, independent of Pyomo and CVXPY.

Each solver declares an :class:`OptionSet`; the Pyomo front-end turns it into a
``pyomo.common.config.ConfigDict`` and the CVXPY front-end and CLI validate keyword
arguments against it. Unknown names raise :class:`~varopt.errors.InvalidOptionError`
that names the option and lists the valid ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

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

    def validate(self, value):
        if value is None:
            return None
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
            elif d is int:
                if isinstance(value, float) and not value.is_integer():
                    raise InvalidOptionError(f"option {self.name!r} must be an integer, got {value!r}")
                value = int(value)
            elif d is float:
                value = float(value)
                if math.isnan(value):
                    raise InvalidOptionError(f"option {self.name!r} must not be NaN")
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


class OptionSet:
    def __init__(self, options):
        self.options = {o.name: o for o in options}

    def __iter__(self):
        return iter(self.options.values())

    def names(self):
        return list(self.options)

    def validate(self, values: dict) -> SimpleNamespace:
        unknown = [k for k in values if k not in self.options]
        if unknown:
            raise InvalidOptionError(
                f"unknown option {unknown[0]!r}; valid options are: {', '.join(sorted(self.options))}")
        out = {name: o.default for name, o in self.options.items()}
        for k, v in values.items():
            out[k] = self.options[k].validate(v)
        return SimpleNamespace(**out)

    def doc(self) -> str:
        return "\n".join(f"{o.name} (default {o.default!r}): {o.doc}" for o in self)


# Options every solver shares (names fixed by the issues).
def common_options(max_iter=1000, time_limit=None):
    return [
        Option("max_iter", max_iter, "maximum number of iterations", int, positive, "must be positive"),
        Option("time_limit", time_limit, "wall-clock limit in seconds (None: no limit)", float, positive,
               "must be positive"),
        Option("verbose", False, "print progress (iteration, bounds, gap) to stderr", bool),
    ]
