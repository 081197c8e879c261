"""Compile a CVXPY problem over boolean variables into an energy model (for solvers with
``accepts_binary``).

The objective must be a polynomial of degree <= 2 in the boolean variables, written with the
usual affine atoms, products of two affine expressions (``cp.multiply(x[I], x[J])``, ``x[0]*x[1]``,
``x @ Q @ x`` through ``cp.quad_form``), ``cp.square``/``cp.power(., 2)``/``cp.sum_squares`` of
affine expressions (expanded with ``x^2 = x``), spins written ``2*x - 1``. The tracer of the
continuous front-end (:mod:`.cvxpy_compile`) does the tracing, so everything it vectorizes works
here; what it compiles to a non-polynomial atom (``exp``, ``log``, ``entr``, ``log_sum_exp``, ...)
is rejected here naming the CVXPY sub-expression. Every variable must be ``boolean=True`` (all
entries) without bounds (``nonneg=True`` is harmless); constraints are rejected naming the constraint.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelStructureError
from ..program import Program
from ..program.energy import EnergyModel
from .cvxpy_atoms import _Tracer
from .cvxpy_compile import CvxpyMapping, _to_expressions, layout_variable
from .cvxpy_nodes import _shape, _size

#: CVXPY atoms that compile to non-polynomial terms
_NONPOLY = {"exp", "log", "log1p", "entr", "rel_entr", "kl_div", "log_sum_exp", "logistic", "quad_over_lin"}


def _first_nonpoly(tracer, expr):
    if not tracer.has_vars(expr):
        return None
    name = type(expr).__name__
    if name in _NONPOLY and not (name == "quad_over_lin" and not tracer.has_vars(expr.args[1])):
        return expr
    for a in getattr(expr, "args", ()):
        found = _first_nonpoly(tracer, a)
        if found is not None:
            return found
    return None


def _all_boolean(var):
    b = getattr(var, "attributes", {}).get("boolean")
    if b is True:
        return True
    idx = getattr(var, "boolean_idx", None)
    return b is not None and b is not False and idx is not None and len(idx) and \
        np.asarray(idx[0]).size == _size(_shape(var))


def compile_cvxpy_energy(problem, solver_name="this solver"):
    """``(Program, CvxpyMapping)`` of a CVXPY energy model; ``program.energy`` holds its spin form."""
    import cvxpy as cp

    for k, con in enumerate(problem.constraints):
        raise ModelStructureError(f"constraint {k} ({con}): solver '{solver_name}' infers an energy model "
                                  "p(x) ∝ exp(-beta f(x)) over boolean variables, which takes no constraints")
    variables = problem.variables()
    offsets, names, var_cols, x0s, used, off = [], [], {}, [], set(), 0
    for var in variables:
        attrs = getattr(var, "attributes", {})
        if not _all_boolean(var):
            kind = "integer" if attrs.get("integer") else "continuous"
            raise ModelStructureError(
                f"variable `{var.name()}` is {kind}; solver '{solver_name}' needs an energy model over "
                "boolean variables only (cp.Variable(..., boolean=True))")
        if attrs.get("bounds") is not None or attrs.get("nonpos") or attrs.get("neg") or attrs.get("pos"):
            # a bound that pins an entry would condition the distribution; silently ignoring it (as before)
            # gave the log Z of the free model
            raise ModelStructureError(
                f"variable `{var.name()}` has bounds; solver '{solver_name}' takes boolean variables without "
                "bounds (substitute a pinned entry's value in the objective, or use the Pyomo front-end, where "
                "bounds that pin a binary condition the distribution)")
        m, vnames, cols, x0 = layout_variable(var, off, used)
        names += vnames
        var_cols[id(var)] = cols
        x0s.append(x0)
        offsets.append(off)
        off += m
    n = off
    tracer = _Tracer(var_cols, n)
    obj = problem.objective
    maximize = isinstance(obj, cp.Maximize)
    tracer.where = "objective"
    bad = _first_nonpoly(tracer, obj.args[0])
    if bad is not None:
        raise ModelStructureError(f"objective: unsupported term `{bad}`: the function "
                                  f"'{type(bad).__name__}' of boolean variables is not a polynomial; energy "
                                  "models take constants, linear terms and products of two variables")
    z = tracer.trace(obj.args[0])
    if z.m != 1:
        raise ModelStructureError(f"objective: `{obj.args[0]}` is not scalar (shape {z.shape})")
    expr = _to_expressions(z.scale(-1.0) if maximize else z, n)[0]
    if any((np.asarray(g.mult) >= 0).any() for g in expr.atoms):
        raise ModelStructureError(f"objective: `{obj.args[0]}` has a variable times a square, a term of "
                                  "order 3 in the boolean variables; energy models take products of at most "
                                  "two variables")
    energy = EnergyModel.from_expression(expr, names, "objective")
    program = Program(names, np.zeros(n), np.ones(n), expr, [], maximize=maximize,
                      x0=np.concatenate(x0s) if x0s else np.zeros(0), binary=np.ones(n, dtype=bool),
                      energy=energy)
    return program, CvxpyMapping(variables, offsets, names)
