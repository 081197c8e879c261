"""CVXPY tracer, part 5: squared hinges ``max(u, 0)^2`` as ``sqpos`` atom rows, for solvers that take the atom.

A solver lists ``"sqpos"`` in :attr:`~varopt.registry.Solver.native_atoms` (ipsa, klprox) when it needs every term to
be a function of one affine predictor: the epigraph form of ``pos(u)`` (a column ``t >= u``, ``t >= 0`` and the row
``t^2``; :mod:`varopt.program.epigraph_lift`) breaks that. For such a solver a square of a hinge of an affine ``u``,

* ``square(pos(u))``, ``power(pos(u), 2)``, ``pos(u)**2``, ``square(maximum(u, 0))``, ``maximum(0, u)**2``;
* ``square(neg(u))`` (CVXPY's ``neg(u) = -minimum(u, 0) = pos(-u)``), ``square(-pos(u))``;
* ``square(c * pos(u))`` with a constant ``c`` (scalar or elementwise; ``(c t)^2 = c^2 t^2``), also ``pos(u) / c``;
* a hinge seen through a map that selects, reorders or stacks entries: ``pos(u)[idx]`` (slices, integer and boolean
  index arrays), ``reshape``/``vec``, ``.T``, ``hstack``/``vstack`` of hinges (since branch ``sqout``);
* ``sum_squares(h)``, ``quad_over_lin(h, y)`` (constant ``y > 0``) and ``norm(h, 2)**2`` of such an ``h``, with their
  axis;

is one ``sqpos`` row per entry, ``w max(u, 0)^2`` with the weight ``w`` (``c^2``, ``1/y``). Sums, nonnegative or
negative scalings and reshapes around it are the tracer's linear maps (CVXPY's ``log_normcdf(x)`` is
``-sum(maximum(A (b 1^T - 1 x^T), 0)**2, axis=0)`` reshaped: seven rows per entry of ``x``, weights ``1`` and
coefficients ``-1``). Anything else (a non-affine ``u``, ``maximum(u, 0.5)``, ``square(pos(u) - 1)``) keeps the
epigraph form, which the position check then judges as before. Solvers without the atom never reach this module:
their programs are exactly those compiled before it existed.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputDataError
from .cvxpy_nodes import _broadcast_matrix, _Rows

#: CVXPY classes of a hinge and of its mirror (older CVXPY versions have ``pos``/``neg`` atoms of their own)
_MAX_NAMES = ("maximum",)
_POS_NAMES = ("pos",)
_NEG_NAMES = ("neg",)
_MIN_NAMES = ("minimum",)
#: CVXPY maps that select, reorder or stack entries: a hinge seen through them is a hinge of the mapped argument
_SELECTIONS = ("index", "special_index", "reshape", "transpose", "Hstack", "Vstack", "Concatenate", "Promote")


class _HingeTracer:
    """The ``sqpos`` recognition; mixed into the complete tracer (it provides :meth:`trace`, :meth:`atom_node`,
    :meth:`has_vars`, :meth:`const_value`)."""

    #: atom kinds the solver takes natively (set by the compiler: :func:`~.cvxpy_compile.compile_cvxpy`)
    native_atoms = frozenset()

    def _zero_constant(self, e) -> bool:
        if self.has_vars(e):
            return False
        try:
            return bool(np.all(np.asarray(self.const_value(e), dtype=float) == 0.0))
        except (InputDataError, TypeError, ValueError):   # a Parameter without value: not a hinge (the general path
            # names the problem)
            return False

    def hinge_parts(self, arg):
        """``(u, sign, scale)`` when ``arg`` is a hinge of an affine ``u`` (``arg = scale * max(sign * u, 0)``
        entrywise up to the sign of ``scale``, which the square removes), else None. ``scale`` is a constant array
        broadcastable to ``arg``'s shape (or 1.0)."""
        if "sqpos" not in self.native_atoms:
            return None
        name = type(arg).__name__
        if name in _MAX_NAMES and len(arg.args) == 2:
            a, b = arg.args
            u = a if self._zero_constant(b) else (b if self._zero_constant(a) else None)
            return (u, 1.0, 1.0) if u is not None and u.is_affine() else None
        return self._other_hinge(arg, name)

    def _other_hinge(self, arg, name):
        if name in _POS_NAMES:
            u = arg.args[0]
            return (u, 1.0, 1.0) if u.is_affine() else None
        if name in _NEG_NAMES:
            u = arg.args[0]
            return (u, -1.0, 1.0) if u.is_affine() else None
        if name == "NegExpression":
            inner = arg.args[0]
            if type(inner).__name__ in _MIN_NAMES and len(inner.args) == 2:
                a, b = inner.args
                u = a if self._zero_constant(b) else (b if self._zero_constant(a) else None)
                # -min(u, 0) = max(-u, 0)
                return (u, -1.0, 1.0) if u is not None and u.is_affine() else None
            return self.hinge_parts(inner)   # (-h)^2 = h^2
        if name in ("multiply", "MulExpression") and len(arg.args) == 2:
            a, b = arg.args
            const, other = (a, b) if not self.has_vars(a) else ((b, a) if not self.has_vars(b) else (None, None))
            # multiply is elementwise (a constant of any broadcastable shape); a matrix product (@, or * with a
            # matrix) mixes entries: only a scalar constant is a scaling there
            if const is None or (name == "MulExpression" and const.size != 1):
                return None
            parts = self.hinge_parts(other)
            if parts is None:
                return None
            c = np.asarray(self.const_value(const), dtype=float)
            if name == "MulExpression":
                c = c.reshape(())
            return parts[0], parts[1], parts[2] * c
        if name == "DivExpression" and len(arg.args) == 2 and not self.has_vars(arg.args[1]):
            # pos(u) / c = (1/c) pos(u) for a constant c (scalar or elementwise), e.g. sum_squares(pos(u) / sqrt(2))
            parts = self.hinge_parts(arg.args[0])
            if parts is None:
                return None
            c = np.asarray(self.const_value(arg.args[1]), dtype=float)
            return (parts[0], parts[1], parts[2] / c) if np.all(c != 0) else None
        if name in _SELECTIONS:
            return self._selected_hinge(arg)
        return None

    def _selected_hinge(self, arg):
        """A hinge seen through a map that only selects, reorders or stacks entries (``pos(u)[idx]``, ``reshape``,
        ``vec``, ``.T``, ``hstack``/``vstack`` of hinges): ``max(., 0)`` is elementwise, so ``S(c * max(s u, 0)) =
        S(c) * max(S(s u), 0)`` for such an ``S``; the new argument is ``S`` applied (as a CVXPY expression) to the signed
        arguments, and the scale ``S`` applied to the scales."""
        kids = [self.hinge_parts(a) for a in arg.args]
        if not kids or any(k is None for k in kids):
            return None
        us = [u if sign > 0 else -u for (u, sign, _) in kids]
        scales = [scale for (_, _, scale) in kids]
        if all(np.ndim(c) == 0 for c in scales) and len({float(c) for c in scales}) == 1:
            scale = float(scales[0])
        else:
            # the same selection applied to the scales, each broadcast to its argument's shape
            import cvxpy as cp
            scale = np.asarray(arg.copy([cp.Constant(np.broadcast_to(np.asarray(c, dtype=float), a.shape).copy())
                                         for c, a in zip(scales, arg.args)]).value, dtype=float)
        u = arg.copy(us)
        return (u, 1.0, scale) if u.is_affine() else None

    def sqpos_node(self, arg, shape, weight=1.0):
        """The node of ``weight * arg**2`` (shape ``shape``, the shape of ``arg``) as ``sqpos`` rows when ``arg`` is a
        hinge of an affine argument (:meth:`hinge_parts`), else None."""
        parts = self.hinge_parts(arg)
        if parts is None:
            return None
        u, sign, scale = parts
        z = self.trace(u)
        label = _log_normcdf_labels(u, z.shape)
        if not z.is_affine:   # (CVXPY's is_affine() held: a guard, not a path)
            return None
        shape = tuple(shape)
        if z.shape != shape:
            z = z.apply(_broadcast_matrix(z.shape, shape), shape)
        if sign < 0:
            z = z.scale(-1.0)
        w = np.asarray(scale, dtype=float)
        w = w * w * weight
        if w.ndim:
            w = np.broadcast_to(w, shape).ravel(order="F")   # the nodes' entries are in F order
        node = self.atom_node("sqpos", z, w if w.ndim else float(w), shape)
        if label is not None and z.shape == shape:
            rows, W = node.rows[0]
            node.rows[0] = (_Rows("sqpos", rows.A, rows.b, None, None, None, label), W)
        return node


def _log_normcdf_labels(u, shape):
    """The sample labels of CVXPY's ``log_normcdf(x)`` pieces, or None for any other hinge argument.

    ``log_normcdf`` builds ``u = A @ (b @ 1^T - 1 @ reshape(x, (1, size), 'F'))`` (shape ``(7, size)``; column ``j``
    holds the seven pieces of entry ``j`` of ``x``). The tracer's rule labels a row by the first-axis index of its
    argument entry, which here is the piece ``k``: the finite-sum samples (ipsa's and klprox's ``batch_size``) would be
    the seven pieces across all data. The label of column ``j`` is instead the first-axis index of entry ``j`` of
    ``x`` (F order), as for any other elementwise atom of ``x``."""
    if type(u).__name__ != "MulExpression" or len(shape) != 2 or len(u.args) != 2:
        return None
    diff = u.args[1]
    if type(diff).__name__ != "AddExpression" or len(diff.args) != 2:
        return None
    neg = diff.args[1]
    if type(neg).__name__ != "NegExpression" or type(neg.args[0]).__name__ != "MulExpression":
        return None
    flat = neg.args[0].args[1]
    if type(flat).__name__ != "reshape" or tuple(flat.shape) != (1, shape[1]):
        return None
    x_shape = tuple(flat.args[0].shape)
    col = np.arange(shape[0] * shape[1], dtype=np.int64) // shape[0]    # F order over (7, size): entry e in column e // 7
    return col % x_shape[0] if x_shape else np.zeros(col.size, dtype=np.int64)
