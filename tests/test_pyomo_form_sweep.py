"""The sweep over the Pyomo functions and modelling constructs a user may write (``tests/pyomo_form_cases.py``):
each model is solved by gop (and majorize where its docs say it applies) to SCIP's optimum (1e-6 relative, every
active constraint holding at the loaded point) or refused with a varopt error naming the function or construct.
Silently dropped components (SOS constraints of ``Piecewise``, GDP ``Disjunction``s) were found by this sweep. The
table is docs/atoms_coverage.md."""
import pytest

pyo = pytest.importorskip("pyomo.environ")

import varopt  # noqa: E402,F401
from pyomo_form_cases import CASES, reference, run  # noqa: E402

#: gop refuses these (by name); it solves every other case
GOP_REFUSED = {"sin:min", "cos:min", "tan:min", "asin:min", "acos:min", "atan:min", "sinh:min", "cosh:min",
               "tanh:min", "asinh:min", "acosh:min", "atanh:min", "ceil:min", "floor:min", "var_pow_var:min",
               "Expr_if:min", "Piecewise:min", "Disjunction:min", "Integer:min", "Binary:min"}
#: majorize solves these (linear and convex quadratic terms, abs, linear rows); it refuses every other case
MAJORIZE_OK = {"abs:min", "abs:row", "pow_int2:min", "pow_mutable_param:min", "quicksum:min", "sum_product:min",
               "LinearExpression:min", "Expression:min", "inequality:row", "tuple:row", "tuple_eq:row",
               "Constraint.Skip:row", "deactivated:row", "two_objectives:min", "fixed:min", "abs:row_in_box"}


def expected(label, method):
    if method == "gop":
        return "refused" if label in GOP_REFUSED else "ok"
    return "ok" if label in MAJORIZE_OK else "refused"


@pytest.fixture(scope="module")
def scip():
    if not pyo.SolverFactory("scip_direct").available(exception_flag=False):
        pytest.skip("SCIP (pyscipopt) is not installed: no reference values")
    return {}


@pytest.mark.parametrize("method", ["gop", "majorize"])
@pytest.mark.parametrize("label", [lb for lb in CASES if lb != "units:min"])
def test_pyomo_form_case(label, method, scip):
    if label not in scip:
        scip[label] = reference(label)
    out, detail = run(label, method, scip[label])
    assert out == expected(label, method), f"{label} with {method}: {out}: {detail}"


def test_units_on_variables():
    pytest.importorskip("pint", reason="Pyomo's units need pint")
    ref = reference("units:min")
    for method in ("gop", "majorize"):
        out, detail = run("units:min", method, ref)
        assert out == "ok", (method, detail)
