"""One small natural model per public CVXPY atom (``cvxpy.atoms``), for the sweep of ``tests/test_cvxpy_atom_sweep.py``.

``CASES`` maps a label ``atom:form`` to a builder returning a fresh ``cvxpy.Problem``; ``ref`` says how the reference
value is obtained: ``"clarabel"`` (a DCP problem solved by Clarabel), a number (the optimum worked out by hand), or
None for forms that must be refused. ``NOT_ATOMS`` lists the names in ``cvxpy.atoms`` that are not atoms a user
calls (constant lists, the classes behind functions with a case of their own).
"""
import numpy as np

import cvxpy as cp

C3 = np.array([0.5, -1.0, 2.0])
C4 = np.array([1.0, -0.5, 0.25, 2.0])
M23 = np.array([[1.0, 2.0, -1.0], [0.5, -1.5, 3.0]])
M22 = np.array([[2.0, 0.5], [0.5, 1.0]])
PSD3 = np.array([[2.0, 0.3, 0.0], [0.3, 1.5, -0.2], [0.0, -0.2, 1.0]])

# names in cvxpy.atoms that are not functions a user writes (lists of atom classes) or are the class behind a
# function whose case covers it (cp.sqrt builds a PowerApprox, cp.norm a PnormApprox, cp.sum a Sum, ...)
NOT_ATOMS = {
    "EXP_ATOMS": "list of atom classes", "GP_EXP_ATOMS": "list", "GP_NONPOS_ATOMS": "list", "NONPOS_ATOMS": "list",
    "POWCONE_ATOMS": "list", "POWCONE_ND_ATOMS": "list", "PSD_ATOMS": "list", "SOC_ATOMS": "list",
    "AddExpression": "x + y", "MulExpression": "matmul", "Sum": "sum", "Trace": "trace", "Prod": "prod",
    "QuadForm": "quad_form", "Power": "power", "PowerApprox": "power/sqrt", "Pnorm": "pnorm",
    "PnormApprox": "norm/pnorm", "GeoMean": "geo_mean", "GeoMeanApprox": "geo_mean", "MatrixFrac": "matrix_frac",
}


def _xexp_min():
    """``min_{0 <= x <= 3} sum_i x_i exp(x_i) - c_i x_i`` coordinatewise: ``x_i = 0`` where ``c_i <= 1``, else the root
    of ``(1 + x) exp(x) = c_i`` (bisection); CVXPY does not take ``xexp`` of a variable without ``nonneg=True``."""
    total = 0.0
    for c in C3[C3 > 1]:
        lo, hi = 0.0, 3.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if (1 + mid) * np.exp(mid) < c else (lo, mid)
        total += lo * np.exp(lo) - c * lo
    return total


_XEXP_MIN = _xexp_min()


#: the term name a message may use for an atom (the program's kind)
ALIASES = {"logistic": "log-sum-exp", "log_sum_exp": "log-sum-exp"}


def _x(n=3, **kw):
    return cp.Variable(n, name="x", **kw)


def _box(x, r=2.0):
    return [x <= r, x >= -r]


def P(obj, cons=()):
    return cp.Problem(obj, list(cons))


def _sq(e, c):
    return cp.sum_squares(e - c)


def _cases():
    out = {}

    def case(label, ref="clarabel"):
        def deco(f):
            out[label] = (f, ref)
            return f
        return deco

    # --- elementwise convex / concave ----------------------------------------------------------
    case("abs:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.abs(x - C3))), [cp.sum(x) == 1]))(_x()))
    case("abs:row")(lambda: (lambda x: P(cp.Minimize(C3 @ x), [cp.abs(x) <= 1]))(_x()))
    case("exp:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.exp(x)) - np.abs(C3) @ x)))(_x()))
    case("exp:row")(lambda: (lambda x: P(cp.Minimize(-cp.sum(x)), [cp.exp(x) <= 2]))(_x()))
    case("log:max")(lambda: (lambda x: P(cp.Maximize(cp.sum(cp.log(x))), [cp.sum(x) <= 3]))(_x()))
    case("log:row")(lambda: (lambda x: P(cp.Minimize(cp.sum(x)), [cp.log(x) >= 0.5]))(_x()))
    case("log1p:max")(lambda: (lambda x: P(cp.Maximize(cp.sum(cp.log1p(x))), [cp.sum(x) <= 3]))(_x()))
    case("entr:max")(lambda: (lambda x: P(cp.Maximize(cp.sum(cp.entr(x))), [cp.sum(x) == 1, C3 @ x >= 0.6]))(_x()))
    case("entr:row")(lambda: (lambda x: P(cp.Minimize(C3 @ x), [cp.sum(cp.entr(x)) >= 0.5, cp.sum(x) == 1]))(_x()))
    case("sqrt:max")(lambda: (lambda x: P(cp.Maximize(cp.sum(cp.sqrt(x))), [cp.sum(x) <= 3]))(_x()))
    case("sqrt:row")(lambda: (lambda x: P(cp.Minimize(cp.sum(x)), [cp.sqrt(x) >= 0.5]))(_x()))
    case("square:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.square(x - C3)))))(_x()))
    case("square:row")(lambda: (lambda x: P(cp.Minimize(C3 @ x), [cp.square(x) <= 1]))(_x()))
    case("power:3")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.power(x, 3)) - C3 @ x), [x >= 0]))(_x()))
    case("power:0.5")(lambda: (lambda x: P(cp.Maximize(cp.sum(cp.power(x, 0.5))), [cp.sum(x) <= 3]))(_x()))
    case("power:-1")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.power(x, -1)) + cp.sum(x))))(_x()))
    case("power:row")(lambda: (lambda x: P(cp.Minimize(-cp.sum(x)), [cp.power(x, 4) <= 1]))(_x()))
    case("inv_pos:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.inv_pos(x)) + np.abs(C4[:3]) @ x + 2)))(_x()))
    case("inv_pos:row")(lambda: (lambda x: P(cp.Minimize(cp.sum(x)), [cp.inv_pos(x) <= 2]))(_x()))
    case("pos:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.pos(x - C3)) + cp.sum_squares(x))))(_x()))
    case("neg:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.neg(x - C3)) + cp.sum_squares(x))))(_x()))
    case("huber:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.huber(x - C3, 0.5))), [cp.sum(x) == 0]))(_x()))
    case("logistic:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.logistic(x)) + cp.sum_squares(x - C3))))(_x()))
    case("xexp:min", _XEXP_MIN)(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.xexp(x)) - C3 @ x), [x >= 0]))(_x()))
    case("kl_div:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.kl_div(x, np.array([0.2, 0.3, 0.5])))),
                                            [C3 @ x == 0.8]))(_x()))
    case("rel_entr:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.rel_entr(x, np.array([0.2, 0.3, 0.5])))),
                                              [cp.sum(x) == 1, C3 @ x >= 0.8]))(_x()))
    case("loggamma:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.loggamma(x)) - cp.sum(x)), _box(x, 5)))(_x()))
    case("log_normcdf:max")(lambda: (lambda x: P(cp.Maximize(cp.sum(cp.log_normcdf(x)) - cp.sum_squares(x))))(_x()))
    case("scalene:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.scalene(x - C3, 1, 3)) + cp.sum_squares(x))))(_x()))

    # --- reductions and norms ---------------------------------------------------------------------
    case("sum:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(x) + cp.sum_squares(x))))(_x()))
    case("mean:min")(lambda: (lambda x: P(cp.Minimize(cp.square(cp.mean(x) - 1) + cp.sum_squares(x - C3))))(_x()))
    case("sum_squares:min")(lambda: (lambda x: P(cp.Minimize(cp.sum_squares(M23 @ x - C3[:2])), [cp.sum(x) == 1]))(_x()))
    case("sum_squares:row", -np.sqrt(C3 @ C3))(lambda: (lambda x: P(cp.Minimize(C3 @ x), [cp.sum_squares(x) <= 1]))(_x()))
    case("norm:2")(lambda: (lambda x: P(cp.Minimize(cp.norm(M23 @ x - C3[:2], 2) + cp.sum(x)), _box(x)))(_x()))
    case("norm:row")(lambda: (lambda x: P(cp.Minimize(C3 @ x), [cp.norm(x, 2) <= 1]))(_x()))
    case("norm:fro")(lambda: (lambda X: P(cp.Minimize(cp.norm(X - M23, "fro") + cp.sum(X)), _box(X)))(
        cp.Variable((2, 3), name="X")))
    case("norm1:min")(lambda: (lambda x: P(cp.Minimize(cp.norm1(x - C3) + cp.sum_squares(x))))(_x()))
    case("norm2:min")(lambda: (lambda x: P(cp.Minimize(cp.norm2(x - C3) + cp.sum(x)), _box(x)))(_x()))
    case("norm_inf:min")(lambda: (lambda x: P(cp.Minimize(cp.norm_inf(x - C3) + 0.1 * cp.sum(x))))(_x()))
    case("pnorm:3")(lambda: (lambda x: P(cp.Minimize(cp.pnorm(x - C3, 3)), [cp.sum(x) == 0, x >= -3, x <= 3]))(_x()))
    case("mixed_norm:min")(lambda: (lambda X: P(cp.Minimize(cp.mixed_norm(X - M23, 2, 1))))(cp.Variable((2, 3), name="X")))
    case("max:min")(lambda: (lambda x: P(cp.Minimize(cp.max(x - C3) + cp.sum_squares(x))))(_x()))
    case("max:row")(lambda: (lambda x: P(cp.Minimize(-C3 @ x), [cp.max(x) <= 1, x >= -1]))(_x()))
    case("min:max")(lambda: (lambda x: P(cp.Maximize(cp.min(x - C3) - cp.sum_squares(x))))(_x()))
    case("maximum:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.maximum(x, C3, 0)) + cp.sum_squares(x))))(_x()))
    case("minimum:max")(lambda: (lambda x: P(cp.Maximize(cp.sum(cp.minimum(x, C3)) - cp.sum_squares(x))))(_x()))
    case("sum_largest:min")(lambda: (lambda x: P(cp.Minimize(cp.sum_largest(x - C3, 2) + cp.sum_squares(x))))(_x()))
    case("sum_smallest:max")(lambda: (lambda x: P(cp.Maximize(cp.sum_smallest(x - C3, 2) - cp.sum_squares(x))))(_x()))
    case("cvar:min")(lambda: (lambda x: P(cp.Minimize(cp.cvar(x - C3, 0.5) + cp.sum_squares(x))))(_x()))
    case("ptp:min")(lambda: (lambda x: P(cp.Minimize(cp.ptp(x - C3) + cp.sum_squares(x))))(_x()))
    case("cummax:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.cummax(x - C3)) + cp.sum_squares(x))))(_x()))
    case("dotsort:min")(lambda: (lambda x: P(cp.Minimize(cp.dotsort(x - C3, np.array([2.0, 1.0])) + cp.sum_squares(x))))(_x()))
    case("tv:min")(lambda: (lambda x: P(cp.Minimize(cp.tv(x) + cp.sum_squares(x - C3))))(_x()))
    case("log_sum_exp:min")(lambda: (lambda x: P(cp.Minimize(cp.log_sum_exp(x) - C3 @ x / 4), _box(x)))(_x()))
    case("log_sum_exp:row")(lambda: (lambda x: P(cp.Minimize(-cp.sum(x)), [cp.log_sum_exp(x) <= 1]))(_x()))
    case("geo_mean:max")(lambda: (lambda x: P(cp.Maximize(cp.geo_mean(x)), [C3 @ x <= 1, x <= 2]))(_x()))
    case("harmonic_mean:max")(lambda: (lambda x: P(cp.Maximize(cp.harmonic_mean(x)), [cp.sum(x) <= 3]))(_x()))
    case("inv_prod:min")(lambda: (lambda x: P(cp.Minimize(cp.inv_prod(x) + cp.sum(x))))(_x()))
    case("prod:max", 1.0)(lambda: (lambda x: P(cp.Maximize(cp.prod(x)), [cp.sum(x) <= 3, x >= 0]))(_x()))
    case("std:min")(lambda: (lambda x: P(cp.Minimize(cp.std(x) + cp.sum_squares(x - C3))))(_x()))
    case("var:min")(lambda: (lambda x: P(cp.Minimize(cp.var(x) + cp.sum_squares(x - C3))))(_x()))
    case("quad_form:min")(lambda: (lambda x: P(cp.Minimize(cp.quad_form(x, PSD3) - C3 @ x)))(_x()))
    case("quad_over_lin:min")(lambda: (lambda x, y: P(cp.Minimize(cp.quad_over_lin(x - C3, y) + y), [y <= 3]))(
        _x(), cp.Variable(name="y")))
    case("matrix_frac:min")(lambda: (lambda x: P(cp.Minimize(cp.matrix_frac(x, PSD3) - C3 @ x)))(_x()))
    case("perspective:min")(lambda: (lambda x, s: P(cp.Minimize(cp.perspective(cp.square(x), s) - x + s), [s <= 1, s >= 0.1]))(
        cp.Variable(name="x"), cp.Variable(name="s", nonneg=True)))
    case("vdot:min")(lambda: (lambda x: P(cp.Minimize(cp.vdot(C3, x) + cp.sum_squares(x))))(_x()))
    case("scalar_product:min")(lambda: (lambda x: P(cp.Minimize(cp.scalar_product(C3, x) + cp.sum_squares(x))))(_x()))

    # --- affine / structural atoms ----------------------------------------------------------------------
    X = lambda: cp.Variable((2, 3), name="X")  # noqa: E731
    case("matmul:const")(lambda: (lambda x: P(cp.Minimize(_sq(cp.matmul(M23, x), C3[:2]) + 0.1 * cp.sum_squares(x))))(_x()))
    case("multiply:const")(lambda: (lambda x: P(cp.Minimize(cp.sum_squares(cp.multiply(C3, x) - 1))))(_x()))
    case("cumsum:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.cumsum(x), C3))))(_x()))
    case("diff:min")(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.abs(cp.diff(x))) + _sq(x, C3))))(_x()))
    case("conv:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.conv(np.array([1.0, 0.5]), x), C4))))(_x()))
    case("convolve:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.convolve(np.array([1.0, 0.5]), x), C4))))(_x()))
    case("kron:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.kron(np.eye(2), X), 1.0))))(cp.Variable((1, 2), name="X")))
    case("outer:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.outer(x, C3[:2]), M23.T))))(_x()))
    case("trace:min")(lambda: (lambda X: P(cp.Minimize(cp.trace(X) + cp.sum_squares(X - M22))))(cp.Variable((2, 2), name="X")))
    case("vec:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.vec(X, order="F"), np.arange(6.0)))))(X()))
    case("reshape:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.reshape(X, (3, 2), order="C"), M23.T))))(X()))
    case("transpose:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.transpose(X), M23.T))))(X()))
    case("hstack:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.hstack([x, x[:1]]), C4))))(_x()))
    case("vstack:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.vstack([X, X[:1]]), np.ones((3, 3))))))(X()))
    case("bmat:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.bmat([[X, np.zeros((2, 1))], [np.ones((1, 3)), np.ones((1, 1))]]),
                                                          np.ones((3, 4))))))(X()))
    case("concatenate:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.concatenate([x, x[:1]]), C4))))(_x()))
    case("stack:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.stack([x, 2 * x]), np.ones((2, 3))))))(_x()))
    case("diag:vec")(lambda: (lambda x: P(cp.Minimize(_sq(cp.diag(x), np.eye(3)) + cp.sum(x))))(_x()))
    case("diag:mat")(lambda: (lambda X: P(cp.Minimize(_sq(cp.diag(X), C3[:2]))))(cp.Variable((2, 2), name="X")))
    case("upper_tri:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.upper_tri(X), C3) + cp.sum_squares(X))))(cp.Variable((3, 3), name="X")))
    case("vec_to_upper_tri:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.vec_to_upper_tri(x, strict=True), PSD3))))(_x()))
    case("promote:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.promote(x, (3,)), C3))))(cp.Variable(name="x")))
    case("broadcast_to:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.broadcast_to(x, (2, 3)), M23))))(_x()))
    case("squeeze:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.squeeze(X), C3))))(cp.Variable((1, 3), name="X")))
    case("deep_flatten:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.deep_flatten(X), np.arange(6.0)))))(X()))
    case("moveaxis:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.moveaxis(X, 0, 1), M23.T))))(X()))
    case("swapaxes:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.swapaxes(X, 0, 1), M23.T))))(X()))
    case("permute_dims:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.permute_dims(X, (1, 0)), M23.T))))(X()))
    case("einsum:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.einsum("ij,j->i", M23, x), C3[:2]) + 0.1 * cp.sum_squares(x))))(_x()))
    case("partial_trace:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.partial_trace(X, (2, 2), 1), M22))))(cp.Variable((4, 4), name="X")))
    case("partial_transpose:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.partial_transpose(X, (2, 2), 1), np.eye(4)) + cp.sum(X))))(cp.Variable((4, 4), name="X")))
    case("conj:min")(lambda: (lambda x: P(cp.Minimize(_sq(cp.conj(x), C3))))(_x()))
    case("real:min", 0.0)(lambda: (lambda x: P(cp.Minimize(_sq(cp.real(x), C3))))(_x()))
    case("imag:min", 0.0)(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.imag(x)) + _sq(x, C3))))(_x()))
    case("psd_wrap:min")(lambda: (lambda x: P(cp.Minimize(cp.quad_form(x, cp.psd_wrap(PSD3)) - C3 @ x)))(_x()))
    case("symmetric_wrap:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.symmetric_wrap(X), PSD3))))(cp.Variable((3, 3), name="X")))
    case("hermitian_wrap:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.hermitian_wrap(X), PSD3))))(cp.Variable((3, 3), name="X")))
    case("skew_symmetric_wrap:min")(lambda: (lambda X: P(cp.Minimize(_sq(cp.skew_symmetric_wrap(X), 0.0))))(cp.Variable((3, 3), name="X")))
    case("cumprod:min", None)(lambda: (lambda x: P(cp.Minimize(_sq(cp.cumprod(x), C3))))(_x()))
    case("length:min", None)(lambda: (lambda x: P(cp.Minimize(cp.length(x)), [x[0] == 1]))(_x()))
    case("sign:min", None)(lambda: (lambda x: P(cp.Minimize(cp.sum(x)), [cp.sign(x) >= 0, x <= 1]))(_x()))
    case("ceil:min", None)(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.ceil(x))), [x >= 0.5, x <= 3]))(_x()))
    case("floor:max", None)(lambda: (lambda x: P(cp.Maximize(cp.sum(cp.floor(x))), [x >= 0.5, x <= 3]))(_x()))
    case("dist_ratio:min", None)(lambda: (lambda x: P(cp.Minimize(cp.dist_ratio(x, np.zeros(3), np.ones(3))), _box(x)))(_x()))

    # --- matrix atoms (semidefinite cones): refused ----------------------------------------------------
    S = lambda: (lambda Z: (Z + Z.T) / 2)(cp.Variable((2, 2), name="S"))  # noqa: E731
    for name, build in {
        "lambda_max": lambda: P(cp.Minimize(cp.lambda_max((lambda s: s)(S()) + M22))),
        "lambda_min": lambda: (lambda s: P(cp.Maximize(cp.lambda_min(s)), [cp.trace(s) <= 1]))(S()),
        "lambda_sum_largest": lambda: (lambda s: P(cp.Minimize(cp.lambda_sum_largest(s, 1)), [cp.trace(s) == 1]))(S()),
        "lambda_sum_smallest": lambda: (lambda s: P(cp.Maximize(cp.lambda_sum_smallest(s, 1)), [cp.trace(s) <= 1]))(S()),
        "log_det": lambda: (lambda s: P(cp.Maximize(cp.log_det(s)), [cp.trace(s) <= 2]))(S()),
        "normNuc": lambda: P(cp.Minimize(cp.normNuc(cp.Variable((2, 2), name="Z") - M22))),
        "sigma_max": lambda: P(cp.Minimize(cp.sigma_max(cp.Variable((2, 2), name="Z") - M22))),
        "tr_inv": lambda: (lambda s: P(cp.Minimize(cp.tr_inv(s)), [cp.trace(s) <= 2]))(S()),
        "condition_number": lambda: (lambda s: P(cp.Minimize(cp.condition_number(s)), [s >> 0.1 * np.eye(2)]))(S()),
        "gen_lambda_max": lambda: (lambda s: P(cp.Minimize(cp.gen_lambda_max(s, np.eye(2))), [cp.trace(s) == 1]))(S()),
        "von_neumann_entr": lambda: (lambda s: P(cp.Maximize(cp.von_neumann_entr(cp.hermitian_wrap(s))),
                                                 [cp.trace(s) == 1]))(S()),
        "quantum_rel_entr": lambda: (lambda s: P(cp.Minimize(cp.quantum_rel_entr(cp.hermitian_wrap(s), np.eye(2) / 2)),
                                                 [cp.trace(s) == 1]))(S()),
        "quantum_cond_entr": lambda: (lambda s: P(cp.Maximize(cp.quantum_cond_entr(cp.hermitian_wrap(cp.kron(s, np.eye(2) / 2)),
                                                                                   (2, 2))), [cp.trace(s) == 1]))(S()),
    }.items():
        out[f"{name}:matrix"] = (build, None)

    # --- DGP-only atoms: refused ----------------------------------------------------------------------
    pos = lambda: cp.Variable(2, name="p", pos=True)  # noqa: E731
    for name, build in {
        "diff_pos": lambda: (lambda p: P(cp.Minimize(cp.sum(cp.diff_pos(p[0], p[1]))), [p[1] <= 1, p[0] >= 2]))(pos()),
        "one_minus_pos": lambda: (lambda p: P(cp.Maximize(cp.sum(cp.one_minus_pos(p))), [p >= 0.1]))(pos()),
        "pf_eigenvalue": lambda: (lambda Z: P(cp.Minimize(cp.pf_eigenvalue(Z)), [Z >= 0.1]))(cp.Variable((2, 2), name="Z", pos=True)),
        "eye_minus_inv": lambda: (lambda Z: P(cp.Minimize(cp.sum(cp.eye_minus_inv(Z))), [Z <= 0.1]))(cp.Variable((2, 2), name="Z", pos=True)),
        "resolvent": lambda: (lambda Z: P(cp.Minimize(cp.sum(cp.resolvent(Z, 2.0))), [Z <= 0.1]))(cp.Variable((2, 2), name="Z", pos=True)),
        "gmatmul": lambda: (lambda p: P(cp.Minimize(cp.sum(cp.gmatmul(np.eye(2), p))), [p >= 1]))(pos()),
    }.items():
        out[f"{name}:dgp"] = (build, None)
    # --- variable attributes and CVXPY's transformation flags ------------------------------------------
    V = lambda **kw: cp.Variable(3, name="v", **kw)  # noqa: E731
    case("nonneg:attr")(lambda: P(cp.Minimize(_sq(V(nonneg=True), C3))))
    case("nonpos:attr")(lambda: P(cp.Minimize(_sq(V(nonpos=True), C3))))
    case("pos:attr")(lambda: P(cp.Minimize(_sq(V(pos=True), C3))))
    case("bounds:attr")(lambda: P(cp.Minimize(_sq(V(bounds=[np.array([-1.0, -0.5, 0.0]), 1.0]), C3))))
    for attr in ("boolean", "integer", "complex"):
        out[f"{attr}:attr"] = ((lambda a: lambda: P(cp.Minimize(_sq(V(**{a: True}), C3))))(attr), None)
    for attr in ("symmetric", "PSD", "diag"):
        out[f"{attr}:attr"] = ((lambda a: lambda: P(cp.Minimize(_sq(cp.Variable((2, 2), name="W", **{a: True}),
                                                                      np.eye(2)))))(attr), None)
    out["gp:flag"] = (lambda: (lambda a, b: P(cp.Minimize(a * b + 1 / a), [a * b <= 4, a >= 0.5]))(
        cp.Variable(pos=True, name="a"), cp.Variable(pos=True, name="b")), None, {"gp": True})
    out["qcp:flag"] = (lambda: (lambda a: P(cp.Minimize(cp.ceil(a)), [a >= 0.5]))(cp.Variable(name="a")), None,
                       {"qcp": True})
    out["qcp=False:flag"] = (lambda: P(cp.Minimize(_sq(V(), C3))), "clarabel", {"qcp": False, "gp": False})
    # a convex row whose relaxation needs bounds on the variables: refused without them, solved with them
    case("log_sum_exp:row_boxed")(lambda: (lambda x: P(cp.Minimize(-cp.sum(x)), [cp.log_sum_exp(x) <= 1] + _box(x, 5)))(_x()))
    case("xexp:min_boxed", _XEXP_MIN)(lambda: (lambda x: P(cp.Minimize(cp.sum(cp.xexp(x)) - C3 @ x), [x >= 0, x <= 3]))(_x()))
    case("cummax:axis1")(lambda: (lambda X: P(cp.Minimize(cp.sum(cp.cummax(X - M23, axis=1)) + cp.sum_squares(X))))(X()))
    case("dotsort:signed_w")(lambda: (lambda x: P(cp.Minimize(cp.dotsort(x - C3, np.array([2.0, -1.0, 0.5])) + cp.sum_squares(x))))(_x()))
    case("dotsort:row")(lambda: (lambda x: P(cp.Minimize(-C3 @ x), [cp.dotsort(x, np.array([2.0, 1.0])) <= 1, x >= -1]))(_x()))
    case("dotsort:maximised", None)(lambda: (lambda x: P(cp.Maximize(cp.dotsort(x, np.array([2.0, 1.0]))), [cp.abs(x) <= 1]))(_x()))
    case("inv_prod:row")(lambda: (lambda x: P(cp.Minimize(cp.sum(x)), [cp.inv_prod(x) <= 8, x <= 4]))(_x()))
    case("power:geo_mean")(lambda: (lambda x: P(cp.Maximize(cp.power(cp.geo_mean(x), 0.5)), [C3 @ x <= 1, x <= 2]))(_x()))
    # --- each convex atom in a <= row and each concave one in a >= row (a box on x, as users bound their
    # variables); objective linear ---------------------------------------------------------------------
    W2 = np.array([0.2, 0.3, 0.5])
    rows = {
        "log1p": lambda x: cp.sum(cp.log1p(x)) >= 1, "huber": lambda x: cp.sum(cp.huber(x - C3, 0.5)) <= 2,
        "logistic": lambda x: cp.sum(cp.logistic(x)) <= 2, "kl_div": lambda x: cp.sum(cp.kl_div(x, W2)) <= 0.1,
        "rel_entr": lambda x: cp.sum(cp.rel_entr(x, W2)) <= 0.1, "norm1": lambda x: cp.norm1(x - C3) <= 1,
        "norm_inf": lambda x: cp.norm_inf(x - C3) <= 0.5, "pnorm": lambda x: cp.pnorm(x, 3) <= 1,
        "geo_mean": lambda x: cp.geo_mean(x) >= 0.5, "harmonic_mean": lambda x: cp.harmonic_mean(x) >= 0.5,
        "quad_form": lambda x: cp.quad_form(x, PSD3) <= 1, "matrix_frac": lambda x: cp.matrix_frac(x, PSD3) <= 1,
        "min": lambda x: cp.min(x) >= -0.5, "sum_largest": lambda x: cp.sum_largest(x, 2) <= 1,
        "sum_smallest": lambda x: cp.sum_smallest(x, 2) >= -1, "cvar": lambda x: cp.cvar(x, 0.5) <= 1,
        "ptp": lambda x: cp.ptp(x) <= 1, "tv": lambda x: cp.tv(x) <= 1, "std": lambda x: cp.std(x) <= 0.5,
        "var": lambda x: cp.var(x) <= 0.25, "cummax": lambda x: cp.sum(cp.cummax(x)) <= 1,
        "dotsort": lambda x: cp.dotsort(x, np.array([3.0, 1.0])) <= 1, "log_normcdf": lambda x: cp.sum(cp.log_normcdf(x)) >= -2,
        "loggamma": lambda x: cp.sum(cp.loggamma(x + 2.5)) <= 1, "scalene": lambda x: cp.sum(cp.scalene(x, 1, 2)) <= 2,
        "pos": lambda x: cp.sum(cp.pos(x - C3)) <= 0.5, "neg": lambda x: cp.sum(cp.neg(x)) <= 0.5,
        "maximum": lambda x: cp.sum(cp.maximum(x, 0.5 * x)) <= 1, "minimum": lambda x: cp.sum(cp.minimum(x, C3)) >= -1,
        "mixed_norm": lambda x: cp.mixed_norm(cp.reshape(x, (3, 1), order="F"), 2, 1) <= 1,
        "norm2": lambda x: cp.norm2(x - C3) <= 2, "quad_over_lin": lambda x: cp.quad_over_lin(x, 2.0) <= 1,
        "inv_prod": lambda x: cp.inv_prod(x + 2.5) <= 0.2, "entr": lambda x: cp.sum(cp.entr(x + 2.5)) >= 1,
        "sqrt": lambda x: cp.sum(cp.sqrt(x + 2.5)) >= 4, "log_sum_exp": lambda x: cp.log_sum_exp(x) <= 1,
        "max": lambda x: cp.max(x) <= 1,
    }
    for name, row in rows.items():
        out[f"{name}:row_in_box"] = ((lambda row: lambda: (lambda x: P(cp.Minimize(-(C4[:3] @ x)), [row(x)] + _box(x)))(
            _x()))(row), "clarabel")
    # --- matrix variables in nonlinear atoms, with axes; Parameters inside atoms -------------------------
    Xv = lambda: cp.Variable((2, 3), name="X")  # noqa: E731
    mat = {
        "exp": lambda X: cp.Minimize(cp.sum(cp.exp(X)) - cp.sum(cp.multiply(np.abs(M23), X))),
        "log_sum_exp": lambda X: cp.Minimize(cp.sum(cp.log_sum_exp(X, axis=1)) - cp.sum(cp.multiply(M23, X)) / 4
                                             + cp.sum_squares(X)),
        "norm": lambda X: cp.Minimize(cp.sum(cp.norm(X - M23, 2, axis=0)) + 0.1 * cp.sum(X)),
        "huber": lambda X: cp.Minimize(cp.sum(cp.huber(X - M23, 0.5))),
        "max": lambda X: cp.Minimize(cp.sum(cp.max(X - M23, axis=0)) + cp.sum_squares(X)),
        "sum_squares": lambda X: cp.Minimize(cp.sum_squares(X @ np.ones(3) - np.array([1.0, 2.0]))
                                             + 0.1 * cp.sum_squares(X)),
        "entr": lambda X: cp.Maximize(cp.sum(cp.entr(X)) + cp.sum(cp.multiply(M23, X))),
        "square": lambda X: cp.Minimize(cp.sum(cp.square(X.T - M23.T))),
        "abs": lambda X: cp.Minimize(cp.sum(cp.abs(X - M23)) + cp.sum_squares(X) / 10),
    }
    for name, obj in mat.items():
        out[f"{name}:matrix_var"] = ((lambda obj: lambda: (lambda X: P(obj(X), [X >= -3, X <= 3]))(Xv()))(obj), "clarabel")
    par = cp.Parameter  # a value set at build time, as a user sets it before solving
    case("quad_form:parameter")(lambda: (lambda x, Pm: P(cp.Minimize(cp.quad_form(x, Pm) - C3 @ x)))(
        _x(), par((3, 3), value=PSD3, PSD=True)))
    case("huber:parameter")(lambda: (lambda x, Mp: P(cp.Minimize(cp.sum(cp.huber(x - C3, Mp)))))(
        _x(), par(nonneg=True, value=0.3)))
    case("sum_largest:parameter_data")(lambda: (lambda x, a: P(cp.Minimize(cp.sum_largest(x - a, 2) + cp.sum_squares(x))))(
        _x(), par(3, value=C3)))
    case("power:parameter_data")(lambda: (lambda x, a: P(cp.Minimize(cp.sum(cp.power(x, 3)) - a @ x), [x >= 0]))(
        _x(), par(3, value=np.abs(C3))))
    return {k: v if len(v) == 3 else (*v, {}) for k, v in out.items()}


CASES = _cases()


def atom_of(label):
    return label.split(":")[0]


def public_atoms():
    """The names in ``cvxpy.atoms`` a user may call (functions and atom classes, not modules)."""
    import inspect

    import cvxpy.atoms as atoms
    return sorted(n for n in dir(atoms) if not n.startswith("_") and not inspect.ismodule(getattr(atoms, n)))


def reference(label):
    """The reference optimum of case ``label`` (Clarabel, or the hand-worked value); None for refused forms."""
    build, ref, _ = CASES[label]
    if ref != "clarabel":
        return ref
    prob = build()
    val = prob.solve(solver="CLARABEL", tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)
    if prob.status != "optimal":
        val = prob.solve(solver="CLARABEL")
    assert prob.status == "optimal", (label, prob.status)
    return val


def run(label, method, ref, **options):
    """``(outcome, detail)`` of solving case ``label`` with varopt's ``method``: ``ok`` (equal to ``ref`` to 1e-6
    relative, CVXPY's value at the loaded point agrees, every constraint holds to 1e-6), ``refused`` (a varopt error
    whose message names the atom), ``wrong``, ``unclear`` (a varopt error not naming the atom) or ``crash``."""
    from varopt.errors import VaroptError
    build, _, flags = CASES[label]
    atom = atom_of(label)
    try:
        prob = build()
    except Exception as exc:  # the model cannot be built in this CVXPY
        return "n/a", f"{type(exc).__name__}: {exc}"
    try:
        val = prob.solve(method=method, **flags, **options)
    except VaroptError as exc:
        msg = str(exc)
        if atom in msg or atom.lower() in msg.lower() or ALIASES.get(atom, "\0") in msg:
            return "refused", msg
        if "gop takes" in msg or "use gop" in msg:  # majorize: names the term or row and the solver that takes it
            return "refused", msg
        if "bounds" in msg:     # a relaxation that needs finite bounds, naming the variables or the block
            return "bounds", msg
        return "unclear", msg
    except Exception as exc:
        return "crash", f"{type(exc).__name__}: {exc}"
    if ref is None:
        return "wrong", f"accepted a form that must be refused: {prob.status} {val}"
    if prob.status not in ("optimal", "optimal_inaccurate") or val is None:
        return "wrong", f"status {prob.status}, value {val}, reference {ref}"
    tol = 1e-6 * max(1.0, abs(ref))
    if abs(val - ref) > tol:
        return "wrong", f"value {val!r} != reference {ref!r}"
    if prob.value is None or abs(prob.value - val) > 1e-6 * max(1.0, abs(val)):
        return "wrong", f"CVXPY's value at the loaded point {prob.value!r} != reported {val!r}"
    bad = [str(c) for c in prob.constraints if c.violation() is not None and np.max(c.violation()) > 1e-6]
    if bad:
        return "wrong", f"constraints violated at the loaded point: {bad}"
    return "ok", f"{val:.8g}"


if __name__ == "__main__":
    from sweep_cli import main
    main(CASES, reference, run)
