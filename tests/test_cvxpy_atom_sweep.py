"""The sweep over CVXPY's public atoms (``tests/cvxpy_atom_cases.py``): every atom ``cvxpy.atoms`` exports has a
small natural model, and each model is either solved by gop (and majorize where its docs say it applies) to
Clarabel's optimum (1e-6 relative, CVXPY's value at the loaded point agreeing, every constraint holding at the
loaded ``.value``) or refused with a varopt error naming the atom. A new CVXPY atom fails
``test_every_public_atom_has_a_case`` until a case (and its expected outcome) is added. The table is
docs/atoms_coverage.md."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402,F401
from cvxpy_atom_cases import CASES, NOT_ATOMS, atom_of, public_atoms, reference, run  # noqa: E402

#: gop's outcome where it is not ``ok``: ``refused`` (a varopt error naming the atom or attribute) or ``bounds``
#: (a relaxation that needs finite bounds, saying so)
GOP_NOT_OK = {
    "prod:max": "refused", "perspective:min": "refused", "cumprod:min": "refused", "length:min": "refused",
    "sign:min": "refused", "ceil:min": "refused", "floor:max": "refused", "dist_ratio:min": "refused",
    "dotsort:maximised": "refused", "xexp:min": "bounds",
    # (logistic:row_in_box, a sum of log-sum-exp groups in a row, was refused: neither GOP's primal nor the tree's
    # relaxation takes it; log_sum_exp:row over a free x needed bounds; the direct convex path of docs/gop.md §13e
    # solves both)
    **{label: "refused" for label in CASES if label.split(":")[1] in ("matrix", "dgp", "flag", "attr")},
}
GOP_NOT_OK.update({f"{a}:attr": "ok" for a in ("nonneg", "nonpos", "pos", "bounds")})
GOP_NOT_OK["qcp=False:flag"] = "ok"

#: majorize solves the log-linear/quadratic forms (docs/majorize.md): these labels; every other case is refused
MAJORIZE_OK = {
    "abs:min", "abs:row", "square:min", "pos:min", "neg:min", "huber:min", "logistic:min", "log_normcdf:max", "scalene:min",
    "sum:min", "mean:min", "sum_squares:min", "norm1:min", "norm_inf:min", "max:min", "max:row", "min:max",
    "maximum:min", "minimum:max", "sum_largest:min", "sum_smallest:max", "cvar:min", "ptp:min", "cummax:min",
    "cummax:axis1", "dotsort:min", "dotsort:signed_w", "dotsort:row", "tv:min", "log_sum_exp:min", "var:min",
    "quad_form:min", "matrix_frac:min", "vdot:min", "scalar_product:min", "real:min", "imag:min",
    "nonneg:attr", "nonpos:attr", "pos:attr", "bounds:attr", "qcp=False:flag",
} | {f"{a}:row_in_box" for a in ("norm1", "norm_inf", "min", "max", "sum_largest", "sum_smallest", "cvar", "ptp", "tv",
                                 "cummax", "dotsort", "scalene", "pos", "neg", "maximum", "minimum")} \
  | {f"{a}:matrix_var" for a in ("log_sum_exp", "huber", "max", "sum_squares", "square", "abs")} \
  | {"quad_form:parameter", "huber:parameter", "sum_largest:parameter_data"} | {label for label in CASES if label.split(":")[1] in ("const", "vec", "mat") or (
    label.endswith(":min") and atom_of(label) in (
        "cumsum", "diff", "conv", "convolve", "kron", "outer", "trace", "vec", "reshape", "transpose", "hstack",
        "vstack", "bmat", "concatenate", "stack", "upper_tri", "vec_to_upper_tri", "promote", "broadcast_to",
        "squeeze", "deep_flatten", "moveaxis", "swapaxes", "permute_dims", "einsum", "partial_trace",
        "partial_transpose", "conj", "psd_wrap", "symmetric_wrap", "hermitian_wrap", "skew_symmetric_wrap"))}


def expected(label, method):
    if method == "gop":
        return GOP_NOT_OK.get(label, "ok")
    return "ok" if label in MAJORIZE_OK else "refused"


def test_every_public_atom_has_a_case():
    covered = {atom_of(label) for label in CASES}
    missing = [name for name in public_atoms() if name not in covered and name not in NOT_ATOMS]
    assert not missing, f"CVXPY atoms without a case in tests/cvxpy_atom_cases.py: {missing}"


@pytest.fixture(scope="module")
def references():
    return {}


@pytest.mark.parametrize("method", ["gop", "majorize"])
@pytest.mark.parametrize("label", list(CASES))
def test_atom_case(label, method, references):
    if label not in references:
        references[label] = reference(label)
    out, detail = run(label, method, references[label])
    assert out == expected(label, method), f"{label} with {method}: {out}: {detail}"


def test_parameters_changed_between_solves():
    """A Parameter's new value is read at every solve (no stale compiled data): three values, each equal to
    Clarabel's solve of the same problem."""
    x = cp.Variable(3, name="x")
    a = cp.Parameter(3, name="a")
    lam = cp.Parameter(nonneg=True, name="lam")
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - a) + lam * cp.norm1(x)), [cp.sum(x) <= 2])
    for v, lv in ((np.array([0.5, -1.0, 2.0]), 1.0), (np.array([1.0, -2.0, 4.0]), 0.1), (np.array([-0.5, 1.0, -2.0]), 3.0)):
        a.value, lam.value = v, lv
        ref = prob.solve(solver="CLARABEL")
        for method in ("gop", "majorize"):
            got = prob.solve(method=method)
            assert abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (method, v, lv, got, ref)
