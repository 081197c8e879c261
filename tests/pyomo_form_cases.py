"""One small natural Pyomo model per intrinsic function and modelling construct a user may write, for the sweep of
``tests/test_pyomo_form_sweep.py``.

``CASES`` maps a label ``form:use`` to ``(build, ref)``: ``build()`` returns a fresh ``ConcreteModel`` whose active
objective is ``m.o``; ``ref`` is ``"scip"`` (SCIP through ``scip_direct``, gap 1e-9), a number worked out by hand,
or None for forms that must be refused (the label's first part, or the text after ``~``, must be in the message).
"""
import pyomo.environ as pyo

C3 = [0.5, -1.0, 2.0]


def _m(lo=-2.0, hi=2.0, n=3):
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, n - 1)
    m.x = pyo.Var(m.I, bounds=(lo, hi), initialize=min(max(0.5, lo), hi))
    return m


def _min(m, e):
    m.o = pyo.Objective(expr=e, sense=pyo.minimize)
    return m


def _max(m, e):
    m.o = pyo.Objective(expr=e, sense=pyo.maximize)
    return m


def _sq(m):
    return sum((m.x[i] - C3[i]) ** 2 for i in m.I)


def _cases():
    out = {}

    def case(label, ref="scip"):
        def deco(f):
            out[label] = (f, ref)
            return f
        return deco

    # --- intrinsic functions -----------------------------------------------------------------------
    case("exp:min")(lambda: (lambda m: _min(m, sum(pyo.exp(m.x[i]) - abs(C3[i]) * m.x[i] for i in m.I)))(_m()))
    case("exp:row")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=pyo.exp(m.x[0]) + pyo.exp(m.x[1]) <= 3)),
                                        _min(m, -m.x[0] - 2 * m.x[1]))[1])(_m()))
    case("log:max")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=sum(m.x[i] for i in m.I) <= 3)),
                                        _max(m, sum(pyo.log(m.x[i]) for i in m.I)))[1])(_m(0.01, 5)))
    case("log10:max")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=sum(m.x[i] for i in m.I) <= 3)),
                                          _max(m, sum(pyo.log10(m.x[i]) for i in m.I)))[1])(_m(0.01, 5)))
    case("sqrt:max")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=sum(m.x[i] for i in m.I) <= 3)),
                                         _max(m, sum(pyo.sqrt(m.x[i]) for i in m.I)))[1])(_m(0, 5)))
    case("abs:min", 0.1 * sum(c * c for c in C3))(lambda: (lambda m: _min(m, sum(abs(m.x[i] - C3[i]) for i in m.I) + 0.1 * sum(m.x[i] ** 2 for i in m.I)))(_m()))
    case("abs:row", -sum(abs(c) for c in C3))(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(m.I, rule=lambda m, i: abs(m.x[i]) <= 1)),
                                        _min(m, sum(C3[i] * m.x[i] for i in m.I)))[1])(_m()))
    for f in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"):
        lo, hi = {"acosh": (1.5, 3.0), "asin": (-0.5, 0.5), "acos": (-0.5, 0.5), "atanh": (-0.5, 0.5),
                  "tan": (-1.0, 1.0)}.get(f, (-1.0, 1.0))
        out[f"{f}:min"] = ((lambda f, lo, hi: lambda: (lambda m: _min(m, getattr(pyo, f)(m.x[0]) + (m.x[0] - 0.3) ** 2))(
            _m(lo, hi, 1)))(f, lo, hi), None)
    case("ceil:min", None)(lambda: (lambda m: _min(m, pyo.ceil(m.x[0]) + m.x[0] ** 2))(_m(0.5, 3, 1)))
    case("floor:min", None)(lambda: (lambda m: _min(m, pyo.floor(m.x[0]) + m.x[0] ** 2))(_m(0.5, 3, 1)))
    # --- powers ------------------------------------------------------------------------------------------
    case("pow_int2:min")(lambda: (lambda m: _min(m, sum((m.x[i] - C3[i]) ** 2 for i in m.I)))(_m()))
    case("pow_float3:min")(lambda: (lambda m: _min(m, sum(m.x[i] ** 3.0 - C3[i] * m.x[i] for i in m.I)))(_m(0, 2)))
    case("pow_param:min")(lambda: (lambda m: (setattr(m, "p", pyo.Param(initialize=3, mutable=False)),
                                              _min(m, sum(m.x[i] ** m.p - C3[i] * m.x[i] for i in m.I)))[1])(_m(0, 2)))
    case("pow_mutable_param:min")(lambda: (lambda m: (setattr(m, "p", pyo.Param(initialize=2, mutable=True)),
                                                      _min(m, sum((m.x[i] - C3[i]) ** m.p for i in m.I)))[1])(_m()))
    case("pow_half:max")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=sum(m.x[i] for i in m.I) <= 3)),
                                             _max(m, sum(m.x[i] ** 0.5 for i in m.I)))[1])(_m(0, 5)))
    case("pow_neg1:min")(lambda: (lambda m: _min(m, sum(m.x[i] ** -1 + abs(C3[i]) * m.x[i] for i in m.I)))(_m(0.1, 5)))
    case("div_var:min")(lambda: (lambda m: _min(m, sum(1 / m.x[i] + abs(C3[i]) * m.x[i] for i in m.I)))(_m(0.1, 5)))
    case("const_pow_var:min")(lambda: (lambda m: _min(m, sum(2 ** m.x[i] - abs(C3[i]) * m.x[i] for i in m.I)))(_m()))
    case("var_pow_var:min", None)(lambda: (lambda m: _min(m, m.x[0] ** m.x[1]))(_m(0.5, 2, 2)))
    # --- Expr_if, sums, products ------------------------------------------------------------------------
    case("Expr_if:min", None)(lambda: (lambda m: _min(m, pyo.Expr_if(IF=m.x[0] >= 0, THEN=m.x[0], ELSE=-m.x[0])))(_m(-1, 1, 1)))
    case("quicksum:min")(lambda: (lambda m: _min(m, pyo.quicksum((m.x[i] - C3[i]) ** 2 for i in m.I)))(_m()))
    case("sum_product:min")(lambda: (lambda m: (setattr(m, "w", pyo.Param(m.I, initialize=dict(enumerate(C3)))),
                                                _min(m, pyo.sum_product(m.w, m.x) + pyo.quicksum(m.x[i] ** 2 for i in m.I)))[1])(_m()))
    case("prod:max")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=sum(m.x[i] for i in m.I) <= 3)),
                                         _max(m, pyo.prod(m.x[i] for i in m.I)))[1])(_m(0, 3)))
    case("LinearExpression:min")(lambda: (lambda m: _min(m, pyo.quicksum(m.x[i] ** 2 for i in m.I) + _linexpr(m)))(_m()))
    case("Expression:min")(lambda: (lambda m: (setattr(m, "r", pyo.Expression(m.I, rule=lambda m, i: m.x[i] - C3[i])),
                                               _min(m, sum(m.r[i] ** 2 for i in m.I)))[1])(_m()))
    # --- constraint forms -----------------------------------------------------------------------------
    case("inequality:row")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=pyo.inequality(-0.5, m.x[0] + m.x[1], 0.25))),
                                               _min(m, _sq(m)))[1])(_m()))
    case("tuple:row")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=(-0.5, m.x[0] + m.x[1], 0.25))),
                                          _min(m, _sq(m)))[1])(_m()))
    case("tuple_eq:row")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=(m.x[0] + m.x[2], 1.0))),
                                             _min(m, _sq(m)))[1])(_m()))
    case("Constraint.Skip:row")(lambda: (lambda m: (setattr(m, "c", pyo.Constraint(
        m.I, rule=lambda m, i: m.x[i] <= 0.25 if i != 1 else pyo.Constraint.Skip)), _min(m, _sq(m)))[1])(_m()))
    case("deactivated:row")(lambda: _deactivated())
    case("two_objectives:min")(lambda: _two_objectives())
    case("Block:min")(lambda: _blocks(indexed=False))
    case("indexed_Block:min")(lambda: _blocks(indexed=True))
    case("fixed:min")(lambda: (lambda m: (m.x[1].fix(0.7), _min(m, _sq(m)))[1])(_m()))
    case("units:min")(lambda: _units())
    case("Piecewise:min", None)(lambda: _piecewise())
    case("Disjunction:min", None)(lambda: _disjunction())
    case("Integer:min", None)(lambda: (lambda m: (m.x[0].domain == pyo.Reals, setattr(m, "z", pyo.Var(domain=pyo.Integers, bounds=(0, 3))),
                                                  _min(m, _sq(m) + (m.z - 1.4) ** 2))[2])(_m()))
    case("Binary:min", None)(lambda: (lambda m: (setattr(m, "z", pyo.Var(domain=pyo.Binary)),
                                                 _min(m, _sq(m) + (m.z - 0.4) ** 2))[1])(_m()))
    # --- each function in a row of a linear objective (bounded variables) ---------------------------------
    rows = {
        "log": lambda m: sum(pyo.log(m.x[i] + 2.5) for i in m.I) >= 1,
        "log10": lambda m: sum(pyo.log10(m.x[i] + 2.5) for i in m.I) >= 0.5,
        "sqrt": lambda m: sum(pyo.sqrt(m.x[i] + 2.5) for i in m.I) >= 4,
        "exp": lambda m: sum(pyo.exp(m.x[i]) for i in m.I) <= 3,
        "pow_int2": lambda m: sum((m.x[i] - C3[i]) ** 2 for i in m.I) <= 1,
        "pow_float3": lambda m: sum((m.x[i] + 2) ** 3.0 for i in m.I) <= 30,
        "div_var": lambda m: sum(1 / (m.x[i] + 2.5) for i in m.I) <= 2,
        "prod": lambda m: m.x[0] * m.x[1] >= 0.5,
        "abs": lambda m: sum(abs(m.x[i] - C3[i]) for i in m.I) <= 1,
        "quicksum": lambda m: pyo.quicksum(m.x[i] ** 2 for i in m.I) <= 2,
    }
    # SCIP through scip_direct does not take abs(): -C3 x with |d| <= 1 spent on x[1] (x[2] = 2 is at its bound)
    hand = {"abs": -sum(c * c for c in C3) - 1.0}
    for name, row in rows.items():
        out[f"{name}:row_in_box"] = ((lambda row: lambda: (lambda m: (setattr(m, "c", pyo.Constraint(expr=row(m))),
                                                                      _min(m, -sum(C3[i] * m.x[i] for i in m.I)))[1])(
            _m()))(row), hand.get(name, "scip"))
    return out


def _linexpr(m):
    from pyomo.core.expr.numeric_expr import LinearExpression
    return LinearExpression([C3[0] * m.x[0], C3[1] * m.x[1], C3[2] * m.x[2]])


def _deactivated():
    m = _m()
    m.c = pyo.Constraint(expr=m.x[0] >= 1.5)
    m.d = pyo.Constraint(expr=pyo.sin(m.x[0]) >= 5)   # infeasible and outside the catalogue: ignored when inactive
    m.d.deactivate()
    return _min(m, _sq(m))


def _two_objectives():
    m = _m()
    m.other = pyo.Objective(expr=pyo.sin(m.x[0]))
    m.other.deactivate()
    return _min(m, _sq(m) + m.x[0])


def _blocks(indexed):
    m = pyo.ConcreteModel()
    if indexed:
        m.b = pyo.Block([0, 1], rule=lambda b, k: _fill(b, k))
        parts = [m.b[k] for k in (0, 1)]
    else:
        m.b = pyo.Block()
        _fill(m.b, 0)
        parts = [m.b]
    m.link = pyo.Constraint(expr=sum(p.y for p in parts) == 1)
    m.o = pyo.Objective(expr=sum(p.cost for p in parts))
    return m


def _fill(b, k):
    b.y = pyo.Var(bounds=(-3, 3))
    b.cost = pyo.Expression(expr=(b.y - C3[k]) ** 2 + pyo.exp(b.y))
    b.c = pyo.Constraint(expr=b.y >= -1)


def _units():
    from pyomo.environ import units as u
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1], bounds=(0, 10), units=u.m)
    m.c = pyo.Constraint(expr=m.x[0] + m.x[1] >= 2 * u.m)
    m.o = pyo.Objective(expr=(m.x[0] - 1 * u.m) ** 2 + (m.x[1] - 3 * u.m) ** 2 + 2 * u.m * m.x[0])
    return m


def _piecewise():
    m = _m(0, 3, 1)
    m.y = pyo.Var()
    m.pw = pyo.Piecewise(m.y, m.x[0], pw_pts=[0, 1, 2, 3], f_rule=[0, 1, 4, 9], pw_constr_type="EQ")
    return _min(m, m.y - 2 * m.x[0])


def _disjunction():
    from pyomo.gdp import Disjunction
    m = _m(-2, 2, 1)
    m.d = Disjunction(expr=[[m.x[0] <= -1], [m.x[0] >= 1]])
    return _min(m, (m.x[0] - 0.2) ** 2)


CASES = _cases()


def form_of(label):
    return label.split(":")[0]


def reference(label):
    build, ref = CASES[label]
    if ref != "scip":
        return ref
    m = build()
    opt = pyo.SolverFactory("scip_direct")
    opt.options["limits/gap"] = 1e-9
    opt.options["numerics/feastol"] = 1e-9
    opt.solve(m)
    return pyo.value(m.o)


def run(label, method, ref):
    """``(outcome, detail)`` as :func:`cvxpy_atom_cases.run`: ``ok``, ``refused`` (a varopt error naming the form),
    ``bounds``, ``unclear``, ``wrong``, ``crash``."""
    from varopt.errors import VaroptError
    build, _ = CASES[label]
    form = form_of(label)
    name = {"pow_param": "**", "pow_mutable_param": "**", "var_pow_var": "**", "Expr_if": "Expr_if",
            "Integer": "Integers", "Binary": "Binary", "Disjunction": "Disjunct", "Piecewise": "Piecewise"}.get(form, form)
    try:
        m = build()
    except Exception as exc:  # the model cannot be built here (units need pint)
        return "n/a", f"{type(exc).__name__}: {exc}"
    try:
        res = pyo.SolverFactory(method).solve(m)
    except VaroptError as exc:
        msg = str(exc)
        if name.lower() in msg.lower():
            return "refused", msg
        if "gop takes" in msg or "use gop" in msg:
            return "refused", msg
        if "bounds" in msg:
            return "bounds", msg
        return "unclear", msg
    except Exception as exc:
        return "crash", f"{type(exc).__name__}: {exc}"
    tc = str(res.solver.termination_condition)
    val = pyo.value(m.o)
    if ref is None:
        return "wrong", f"accepted a form that must be refused: {tc} {val}"
    if tc not in ("optimal", "locallyOptimal"):
        return "wrong", f"termination {tc}, value {val}, reference {ref}"
    if abs(val - ref) > 1e-6 * max(1.0, abs(ref)):
        return "wrong", f"value {val!r} != reference {ref!r}"
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if (c.has_lb() and body < pyo.value(c.lower) - 1e-6) or (c.has_ub() and body > pyo.value(c.upper) + 1e-6):
            return "wrong", f"constraint {c.name} violated at the loaded point: {body}"
    return "ok", f"{val:.8g}"


if __name__ == "__main__":
    from sweep_cli import main
    main(CASES, reference, run)
