"""Hypothesis properties of the Pyomo compiler (varopt.frontends.pyomo_compile).

Random small Pyomo models are built from every supported term (linear, bilinear, squares,
square of an affine map, exp, log, log10, x*log x, (lam u)*log(u) of an affine u, a variable times each atom kind,
quad_over_lin, weighted log-sum-exp, log(1 + exp), affine multipliers of several variables,
fixed variables and mutable Params). Hypothesis runs derandomized (seeded) so the suite is
reproducible.
The compiled objective and constraint values, gradients and Hessians must match Pyomo's own
evaluation (``value``) and its symbolic reverse-mode derivatives
(``pyomo.core.expr.calculus.derivatives.differentiate``; Hessians by differentiating the
symbolic gradient) to ``1e-9 * max(1, |ref|)``, and gradients must match central finite
differences of the compiled values.
"""
import math
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyomo.environ as pyo  # noqa: E402
from pyomo.core.expr.calculus.derivatives import Modes, differentiate  # noqa: E402

from varopt.frontends.pyomo_compile import compile_pyomo  # noqa: E402

NX = 4
LO, HI = 0.2, 3.0
KINDS = ("const", "lin", "bilinear", "sqaff", "exp", "log", "log10", "xlogx", "mult_sq", "mult_log",
         "mult_exp", "qol", "mult_qol", "lse", "log1pexp", "mult_lse", "fixed", "param", "mult_lin",
         "affmult", "affent")

coef = st.floats(-2.0, 2.0, allow_nan=False).filter(lambda v: abs(v) > 1e-3)
small = st.floats(-1.0, 1.0, allow_nan=False)
pos = st.floats(0.1, 1.0, allow_nan=False)
ix = st.integers(0, NX - 1)


@st.composite
def affine(draw, positive=False, nonconstant=False):
    """(a, b, i, j, d): a*x[i] + b*x[j] + d; positive on the box when ``positive``."""
    c = pos if positive else small
    a = draw(c)
    b, i, j = draw(c), draw(ix), draw(ix)
    if nonconstant and (a + 0.0 == 0.0 or (i == j and a + b == 0.0)):
        a, b = 0.5, 0.0  # a constant numerator over an affine map (c / y) is not a supported term
    return (a, b, i, j, draw(c))


@st.composite
def term(draw):
    kind = draw(st.sampled_from(KINDS))
    c = draw(coef)
    if kind in ("const", "lin"):
        par = (draw(ix),)
    elif kind == "bilinear":
        par = (draw(ix), draw(ix))
    elif kind in ("sqaff", "exp"):
        par = (draw(affine()),)
    elif kind in ("log", "log10"):
        par = (draw(affine(positive=True)),)
    elif kind == "xlogx":
        par = (draw(ix), draw(st.sampled_from(["vlogv", "logvv", "vlog2v"])))
    elif kind in ("mult_sq", "mult_exp", "mult_lin"):
        par = (draw(ix), draw(affine()))
    elif kind == "mult_log":
        par = (draw(ix), draw(affine(positive=True)))
    elif kind == "qol":
        par = (draw(affine(nonconstant=True)), draw(affine(positive=True)))
    elif kind == "mult_qol":
        par = (draw(ix), draw(affine(nonconstant=True)), draw(affine(positive=True)))
    elif kind == "lse":
        k = draw(st.integers(2, 3))
        par = (tuple(draw(affine()) for _ in range(k)), tuple(draw(pos) for _ in range(k)))
    elif kind == "log1pexp":
        par = (draw(affine()), draw(pos))
    elif kind == "mult_lse":
        par = (draw(ix), (draw(affine()), draw(affine())), (draw(pos), draw(pos)), draw(st.sampled_from([0.0, 1.0])))
    elif kind == "affmult":
        par = (draw(affine()), draw(affine()), draw(affine(positive=True)), draw(ix))
    elif kind == "affent":  # (lam u) * log(u): the entropy of an affine map, one xlogx row
        par = (draw(affine(positive=True)), draw(pos))
    else:  # fixed, param
        par = (draw(ix), draw(affine()))
    return (kind, c, par)


def _aff(m, p):
    a, b, i, j, d = p
    return a * m.x[i] + b * m.x[j] + d


def build_term(m, spec):
    kind, c, par = spec
    x = m.x
    if kind == "const":
        return c + 0 * x[par[0]]
    if kind == "lin":
        return c * x[par[0]]
    if kind == "bilinear":
        return c * x[par[0]] * x[par[1]]
    if kind == "sqaff":
        return c * _aff(m, par[0]) ** 2
    if kind == "exp":
        return c * pyo.exp(_aff(m, par[0]))
    if kind == "log":
        return c * pyo.log(_aff(m, par[0]))
    if kind == "log10":
        return c * pyo.log10(_aff(m, par[0]))
    if kind == "xlogx":
        v = x[par[0]]
        return c * {"vlogv": v * pyo.log(v), "logvv": pyo.log(v) * v, "vlog2v": v * pyo.log(2 * v)}[par[1]]
    if kind == "mult_sq":
        return c * x[par[0]] * _aff(m, par[1]) ** 2
    if kind == "mult_exp":
        return c * x[par[0]] * pyo.exp(_aff(m, par[1]))
    if kind == "mult_lin":
        return c * x[par[0]] * (_aff(m, par[1]) + pyo.exp(_aff(m, par[1])))
    if kind == "mult_log":
        return c * pyo.log(_aff(m, par[1])) * x[par[0]]
    if kind == "qol":
        return c * _aff(m, par[0]) ** 2 / _aff(m, par[1])
    if kind == "mult_qol":
        return c * x[par[0]] * _aff(m, par[1]) ** 2 / _aff(m, par[2])
    if kind == "lse":
        affs, ws = par
        return c * pyo.log(sum(w * pyo.exp(_aff(m, a)) for a, w in zip(affs, ws)))
    if kind == "log1pexp":
        a, c0 = par
        return c * pyo.log(c0 + pyo.exp(_aff(m, a)))
    if kind == "mult_lse":
        w, affs, ws, c0 = par
        return c * x[w] * pyo.log(c0 + sum(h * pyo.exp(_aff(m, a)) for a, h in zip(affs, ws)))
    if kind == "fixed":
        return c * m.z * x[par[0]] + m.z * _aff(m, par[1]) ** 2
    if kind == "param":
        return m.p * (x[par[0]] - m.p) ** 2 + c * m.p * pyo.exp(_aff(m, par[1]))
    if kind == "affmult":  # an affine multiplier of several variables times a sum of atoms
        a0, a1, a2, i = par
        return c * _aff(m, a0) * (pyo.exp(_aff(m, a1)) + pyo.log(_aff(m, a2)) + pyo.log(x[i]) + _aff(m, a1) ** 2
                                  + x[i])
    if kind == "affent":
        u, lam = par
        return c * (lam * _aff(m, u)) * pyo.log(_aff(m, u))
    raise AssertionError(kind)


@st.composite
def model_spec(draw):
    obj = draw(st.lists(term(), min_size=1, max_size=5))
    ncon = draw(st.integers(0, 2))
    cons = [(draw(st.lists(term(), min_size=1, max_size=3)), draw(st.sampled_from(["<=", ">=", "==", "range", "lhs"])))
            for _ in range(ncon)]
    sense = draw(st.sampled_from(["min", "max"]))
    return obj, cons, sense


def build_model(spec):
    obj, cons, sense = spec
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(NX), bounds=(LO, HI), initialize=1.0)
    m.z = pyo.Var(initialize=1.5)
    m.z.fix()
    m.p = pyo.Param(initialize=0.75, mutable=True)
    m.obj = pyo.Objective(expr=sum(build_term(m, t) for t in obj),
                          sense=pyo.maximize if sense == "max" else pyo.minimize)
    m.c = pyo.ConstraintList()
    for terms, kind in cons:
        body = sum(build_term(m, t) for t in terms)
        if kind == "<=":
            m.c.add(body <= 1.0)
        elif kind == ">=":
            m.c.add(body >= -1.0)
        elif kind == "==":
            m.c.add(body == 0.5)
        elif kind == "range":
            m.c.add(pyo.inequality(-1.0, body, 2.0))
        else:  # variables on both sides: body becomes lhs - rhs
            m.c.add(m.x[0] * m.x[1] + 1.0 <= body)
    return m


points = st.lists(st.floats(LO, HI, allow_nan=False), min_size=NX, max_size=NX)


def _pyomo_derivs(expr, wrt):
    """Gradient (reverse symbolic) and Hessian (numeric reverse mode of the symbolic gradient)."""
    n = len(wrt)
    grads = differentiate(expr, wrt_list=wrt, mode=Modes.reverse_symbolic)
    g = np.array([pyo.value(gi) for gi in grads], dtype=float)
    H = np.zeros((n, n))
    for i, gi in enumerate(grads):
        if type(gi) in (int, float) or not hasattr(gi, "is_expression_type") or not (
                gi.is_expression_type() or gi.is_variable_type()):
            continue
        H[i] = differentiate(gi, wrt_list=wrt, mode=Modes.reverse_numeric)
    return g, H


def _close(a, ref, rtol):
    a, ref = np.asarray(a, dtype=float), np.asarray(ref, dtype=float)
    return np.all(np.abs(a - ref) <= rtol * np.maximum(1.0, np.abs(ref)))


def _compile_at(spec, pt):
    """The compiled program at the user's point ``pt``. Terms that are not convex where they stand (a maximised
    ``u**2/v``, docs/gop.md §13) are compiled with auxiliary columns; ``x`` then carries them, recomputed from the
    user's variables, and every defining row must vanish there."""
    m = build_model(spec)
    prog, mp = compile_pyomo(m)
    idx = [int(v.index()) if v.index() is not None else None for v in mp.vars]
    x = np.array([pt[i] for i in idx], dtype=float)
    mp.load(x)
    if prog.aux:
        x = prog.complete_aux(x)
        defs = [c for c in prog.constraints if c.name.startswith("_aux_")]
        assert len(defs) == len(prog.aux)
        for c in defs:
            assert c.lo == c.hi == 0.0
            assert abs(c.body.value(x)) <= 1e-9 * max(1.0, np.abs(x).max() ** 2), c.name
    return m, prog, mp, x


def _user_rows(prog):
    return [c for c in prog.constraints if not c.name.startswith("_aux_")]


def _check_expression(compiled, pyomo_expr, sign, wrt, x):
    ref_v = sign * pyo.value(pyomo_expr)
    g_ref, H_ref = _pyomo_derivs(pyomo_expr, wrt)
    v = compiled.value(x)
    g = compiled.gradient(x)
    H = compiled.hessian(x).toarray()
    assert _close(v, ref_v, 1e-9), (v, ref_v)
    assert _close(g, sign * g_ref, 1e-9), (g, sign * g_ref)
    assert _close(H, sign * H_ref, 1e-9), (H, sign * H_ref)
    assert np.allclose(H, H.T, rtol=0, atol=1e-12 * max(1.0, np.abs(H).max()))


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=model_spec(), pt=points)
def test_objective_matches_pyomo(spec, pt):
    m, prog, mp, x = _compile_at(spec, pt)
    assert prog.maximize == (spec[2] == "max")
    assert all(v.name == nm for v, nm in zip(mp.vars, prog.names))
    assert "z" not in prog.names  # fixed variables are constants
    # the program variables are the x[i] that appear, in index order
    idx = [v.index() for v in mp.vars]
    assert idx == sorted(idx)
    sign = -1.0 if prog.maximize else 1.0
    if prog.aux:  # derivatives in the lifted columns are not Pyomo's; the values must agree
        assert _close(sign * prog.objective.value(x), pyo.value(m.obj.expr), 1e-9)
    else:
        _check_expression(prog.objective, m.obj.expr, sign, mp.vars, x)
    assert _close(prog.user_value(prog.objective.value(x)), pyo.value(m.obj), 1e-9)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=model_spec().filter(lambda s: len(s[1]) > 0), pt=points)
def test_constraints_match_pyomo(spec, pt):
    m, prog, mp, x = _compile_at(spec, pt)
    cons = list(m.c.values())
    assert [c.name for c in _user_rows(prog)] == [c.name for c in cons]
    for pc, c in zip(_user_rows(prog), cons):
        assert pc.lo == (-math.inf if c.lb is None else c.lb)
        assert pc.hi == (math.inf if c.ub is None else c.ub)
        if prog.aux:
            assert _close(pc.body.value(x), pyo.value(c.body), 1e-9)
        else:
            _check_expression(pc.body, c.body, 1.0, mp.vars, x)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=model_spec(), pt=points)
def test_gradients_match_finite_differences(spec, pt):
    m, prog, mp, x = _compile_at(spec, pt)
    exprs = [prog.objective] + [c.body for c in prog.constraints]
    for e in exprs:
        g = e.gradient(x)
        fd = np.empty_like(g)
        for k in range(x.size):
            h = 1e-6 * max(1.0, abs(x[k]))
            xp, xm = x.copy(), x.copy()
            xp[k] += h
            xm[k] -= h
            fd[k] = (e.value(xp) - e.value(xm)) / (2 * h)
        fscale = max(1.0, abs(e.value(x)))
        assert np.all(np.abs(g - fd) <= 1e-5 * np.maximum(1.0, np.abs(g)) + 1e-8 * fscale), (g, fd)
        # and the Hessian matches central differences of the gradient
        H = e.hessian(x).toarray()
        for k in range(x.size):
            h = 1e-6 * max(1.0, abs(x[k]))
            xp, xm = x.copy(), x.copy()
            xp[k] += h
            xm[k] -= h
            col = (e.gradient(xp) - e.gradient(xm)) / (2 * h)
            gscale = max(1.0, np.abs(g).max())
            assert np.all(np.abs(H[:, k] - col) <= 1e-5 * np.maximum(1.0, np.abs(col)) + 1e-8 * gscale), (H[:, k], col)
