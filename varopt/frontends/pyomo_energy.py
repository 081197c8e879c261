"""Compile a Pyomo model over binary variables into an energy model (for solvers with
``accepts_binary``, e.g. ``exact``, ``meanfield``, ``lbp``, ``trw``, ``ais``).

The objective must be a polynomial of degree <= 2 in the binary variables: constants, linear
terms, products ``x[i]*x[j]`` (in any order; duplicates are summed), powers ``x[i]**k = x[i]``
(``k >= 1`` an integer, also of sums: ``(x[0] + x[1])**2`` is expanded), and spins written
``2*x[i] - 1``. Products are reduced with ``x^2 = x`` as they are formed, so a monomial of three
distinct variables raises :class:`~varopt.errors.ModelStructureError` naming the sub-expression,
as do ``exp``, ``log`` and every other function of variables. Constraints, and unfixed
variables that are not binary (continuous or general integer, used in the objective or merely
declared), are rejected naming the constraint or variable: the sample space of the energy model
is every unfixed variable of the model (a declared binary variable that the objective does not
use is a free spin and contributes ``ln 2`` to log Z). Fixed variables are constants, and so is
a binary or integer variable whose bounds admit one integer value (``x.setub(0)`` pins ``x`` at
0: the distribution is conditioned on it, as for ``x.fix(0)``); an integer variable whose bounds
admit exactly the values 0 and 1 (``domain=Integers, bounds=(0, 1)``) is a spin, and bounds that
admit no integer value raise :class:`~varopt.errors.InputDataError`.
"""
from __future__ import annotations


import numpy as np

from ..errors import InputDataError, ModelStructureError
from ..program import Expression, Program, QuadraticTerms
from ..program.energy import EnergyModel
from .pyomo_terms import _BadData, _expr_str, _Unsupported
from .pyomo_walk import _Leaves

_WHAT = ("energy models take a polynomial of degree <= 2 in binary variables: constants, linear terms, "
         "products x[i]*x[j] (x[i]**2 is x[i]), spins written 2*x[i] - 1")


def _pinned_value(v, solver_name):
    """None when the unfixed variable ``v`` is a spin (its bounds admit exactly the integers 0 and 1),
    else the one integer value its bounds admit (a constant, like a fixed variable). A continuous
    variable, or an integer one with another set of values, raises ``ModelStructureError``."""
    import math

    if v.is_integer():
        lb, ub = v.lb, v.ub
        lo = -math.inf if lb is None else math.ceil(float(lb) - 1e-9)
        hi = math.inf if ub is None else math.floor(float(ub) + 1e-9)
        if lo > hi:
            raise InputDataError(f"variable '{v.name}': no integer value lies within its bounds [{lb}, {ub}]")
        if lo == hi:
            return float(lo)
        if (lo, hi) == (0, 1):
            return None
    kind = "general integer" if v.is_integer() else "continuous"
    raise ModelStructureError(
        f"variable '{v.name}' is {kind} (domain {v.domain}, bounds {v.bounds}); solver '{solver_name}' "
        "needs an energy model over binary variables only (domain=Binary)")


def _mul(p, q, node):
    out = {}
    for a, ca in p.items():
        for b, cb in q.items():
            key = tuple(sorted(set(a) | set(b)))
            if len(key) > 2:
                raise _Unsupported(node, f"it has a term of order {len(key)} in the binary variables "
                                         "(products of at most two distinct variables are allowed)")
            out[key] = out.get(key, 0.0) + ca * cb
    return out


class _PolyWalker(_Leaves):
    """Pyomo expression -> ``{(): c, (i,): a_i, (i, j): q_ij}`` over walker indices (multilinear)."""

    def __init__(self, solver_name="this solver"):
        super().__init__()
        self.solver_name = solver_name
        self.pinned = {}   # id(VarData) -> the value its bounds pin it at, or None for a spin

    def pinned_value(self, v):
        if id(v) not in self.pinned:
            self.pinned[id(v)] = _pinned_value(v, self.solver_name)
        return self.pinned[id(v)]

    def _wrap(self, val):
        return {(): val}

    def walk(self, node):
        if type(node) in self.native:
            return self._const(node, node)
        if not node.is_expression_type():
            if node.is_variable_type():
                if not node.fixed and self.pinned_value(node) is not None:
                    return {(): self.pinned_value(node)}
                k = self._var_index(node)
                return self._const(node, node.value) if k is None else {(k,): 1.0}
            return self._eval(node)
        if node.is_named_expression_type():
            return self.walk(node.expr)
        if not node.is_potentially_variable():
            return self._eval(node)
        E = self.E
        if isinstance(node, E.SumExpression):
            acc = {}
            for a in node.args:
                for k, v in self.walk(a).items():
                    acc[k] = acc.get(k, 0.0) + v
            return acc
        if isinstance(node, E.NegationExpression):
            return {k: -v for k, v in self.walk(node.args[0]).items()}
        if isinstance(node, E.ProductExpression):
            return _mul(self.walk(node.args[0]), self.walk(node.args[1]), node)
        if isinstance(node, E.DivisionExpression):
            d = self.walk(node.args[1])
            if set(d) - {()}:
                raise _Unsupported(node, "division by an expression of variables is not a polynomial")
            if d.get((), 0.0) == 0.0:
                raise _BadData(node, "divides by zero")
            return {k: v / d[()] for k, v in self.walk(node.args[0]).items()}
        if isinstance(node, E.PowExpression):
            e = self.walk(node.args[1])
            p = e.get((), 0.0)
            if set(e) - {()} or p < 0 or p != int(p):
                raise _Unsupported(node, "only powers with a constant non-negative integer exponent are "
                                         "polynomials")
            b = self.walk(node.args[0])
            if p > 64:
                raise _Unsupported(node, "exponents above 64 are not expanded")
            out = {(): 1.0}
            for _ in range(int(p)):
                out = _mul(out, b, node)
            return out
        name = node.getname() if hasattr(node, "getname") else type(node).__name__
        raise _Unsupported(node, f"the function '{name}' of binary variables is not allowed")


def compile_pyomo_energy(model, solver_name="this solver"):
    """``(Program, PyomoMapping)`` of a Pyomo energy model; ``program.energy`` holds its spin form."""
    import pyomo.environ as pyo

    from .pyomo_compile import PyomoMapping, the_objective

    obj = the_objective(model)
    for c in model.component_data_objects(pyo.Constraint, active=True, descend_into=True):
        raise ModelStructureError(f"constraint '{c.name}': solver '{solver_name}' infers an energy model "
                                  "p(x) ∝ exp(-beta f(x)) over binary variables, which takes no constraints "
                                  "(deactivate it or encode it in the energy)")
    walker = _PolyWalker(solver_name)
    where = f"objective '{obj.name}'"
    try:
        poly = walker.walk(obj.expr)
    except _Unsupported as exc:
        raise ModelStructureError(f"{where}: unsupported term '{_expr_str(exc.node)}': {exc.reason}; "
                                  f"{_WHAT}") from None
    except _BadData as exc:
        raise InputDataError(f"{where}: the data '{_expr_str(exc.node)}' {exc.reason}") from None
    # the sample space: every unfixed variable of the model (declaration order), then strays
    vars_, seen = [], set()
    for v in model.component_data_objects(pyo.Var, active=True, descend_into=True):
        if not v.fixed and id(v) not in seen:
            seen.add(id(v))
            if walker.pinned_value(v) is None:
                vars_.append(v)
    vars_ += [v for v in walker.vars if id(v) not in seen]
    n = len(vars_)
    pos = {id(v): k for k, v in enumerate(vars_)}
    perm = np.array([pos[id(v)] for v in walker.vars], dtype=np.int64)
    lin = np.zeros(n)
    qi, qj, qv = [], [], []
    const = 0.0
    for key, c in poly.items():
        if len(key) == 0:
            const += c
        elif len(key) == 1:
            lin[perm[key[0]]] += c
        else:
            qi.append(perm[key[0]])
            qj.append(perm[key[1]])
            qv.append(c)
    names = [v.name for v in vars_]
    energy = EnergyModel.from_bits(const, lin, qi, qj, qv, names)
    maximize = obj.sense == pyo.maximize
    if maximize:
        energy = energy.scaled(-1.0)
    s = -1.0 if maximize else 1.0
    expr = Expression(n, s * const, s * lin, QuadraticTerms(np.array(qi, dtype=np.int64),
                                                            np.array(qj, dtype=np.int64), s * np.array(qv), n))
    x0 = np.array([np.nan if v.value is None else float(v.value) for v in vars_])
    program = Program(names, np.zeros(n), np.ones(n), expr, [], maximize=maximize, objective_name=obj.name,
                      x0=x0, binary=np.ones(n, dtype=bool), energy=energy)
    return program, PyomoMapping(model, vars_, obj, [], names)
