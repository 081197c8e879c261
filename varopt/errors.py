"""Exceptions shared by every varopt layer."""


class VaroptError(Exception):
    """Base class of varopt errors."""


class ModelStructureError(VaroptError, ValueError):
    """A model contains a term varopt cannot recognise, or lacks a structure a solver needs.

    The message names the objective or constraint and the offending sub-expression.
    """


class InvalidOptionError(VaroptError, ValueError):
    """An unknown or invalid solver option. The message lists the valid options."""


class InputDataError(VaroptError, ValueError):
    """NaN, inf or otherwise invalid data at the package boundary; the message names the input."""


class SolverBugError(VaroptError, RuntimeError):
    """An internal invariant failed (e.g. a majorization step increased the objective)."""
