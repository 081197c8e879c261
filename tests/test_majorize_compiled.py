"""Option ``backend`` of majorize (varopt/solvers/majorize/compiled_trial.py): the compiled quasi-Newton trial on a
dense metric, the new pairs' products and the log-sum-exp evaluation against the numpy path (the reference): direction
by direction on random states, value by value on random scores, and iterate by iterate on whole fits."""
import types

import numpy as np
import pytest

pytest.importorskip("numba", reason="the compiled trial needs numba (pip install 'varopt[fast]')")

from varopt import get_solver
from varopt.errors import InvalidOptionError
from varopt.formulations.logistic import logistic_program
from varopt.program import Program
from varopt.program.expression import Expression
from varopt.program.program import Constraint
from varopt.solvers.majorize import compiled_trial, reuse
from varopt.solvers.majorize.reuse_metric import DenseMetric
from varopt.solvers.majorize.step_qp import StepQP


def _state(rng, n, m_pairs, n_rows, memory):
    """A random trial state: bounds (some infinite, some active), rows, an SPD metric (sometimes nearly singular),
    pairs (some without positive curvature on part of the variables), ``x`` feasible, ``u``."""
    lb = np.where(rng.random(n) < 0.5, -rng.uniform(0.0, 1.0, n), -np.inf)
    ub = np.where(rng.random(n) < 0.5, rng.uniform(0.0, 1.0, n), np.inf)
    x = rng.uniform(-0.3, 0.3, n)
    at = rng.random(n)
    x = np.where((at < 0.2) & np.isfinite(lb), lb, x)
    x = np.where((at > 0.8) & np.isfinite(ub), ub, x)
    x = np.clip(x, lb, ub)
    A = rng.normal(size=(n_rows, n))
    Ax = A @ x
    lo = np.where(rng.random(n_rows) < 0.5, Ax - rng.uniform(0.0, 1.0, n_rows), -np.inf)
    hi = np.where(rng.random(n_rows) < 0.5, Ax + rng.uniform(0.0, 1.0, n_rows), np.inf)
    lo[:1] = Ax[:1]  # an active row
    model = types.SimpleNamespace(n=n, lb=lb, ub=ub, A=_Rows(A), lo=lo, hi=hi)
    R = rng.normal(size=(n, n))
    P = R @ R.T + rng.uniform(0.01, 1.0) * np.eye(n)
    if rng.random() < 0.2:
        P[:, 0] = P[0, :] = 0.0  # a flat direction: the range test or the proximal term decides
    u = rng.normal(size=n) * rng.choice([1.0, 1e-4])  # short steps: the full step often feasible
    sc = reuse.ScaledCurvature(100, "bound", memory, compiled_trial)
    sc.c = rng.uniform(0.1, 1.0)
    for _ in range(m_pairs):
        s = rng.normal(size=n)
        y = (R @ R.T + np.eye(n)) @ s
        if rng.random() < 0.3:
            y[: n // 2] = -5.0 * s[: n // 2]  # positive curvature on all variables, none on the first half
        sc.moved(s, y, None, None)
    return model, P, x, u, sc


class _Rows(np.ndarray):
    """A dense matrix with the ``shape``/``toarray`` of the program's sparse rows (what StepQP reads)."""

    def __new__(cls, a):
        return np.asarray(a).view(cls)

    def toarray(self):
        return np.asarray(self)


def _close(a, b, rel=1e-12):
    return np.abs(a - b).max(initial=0.0) <= rel * max(1.0, np.abs(b).max(initial=0.0))


@pytest.mark.parametrize("seed", range(12))
def test_compiled_direction_equals_the_numpy_direction(seed):
    """The kernels' direction, slope, guarantee and largest feasible factor against the numpy path's
    (``ScaledCurvature._direction``: free set, restricted metric and pairs, two-loop recursion, ratio test) to 1e-12
    relative, and the same decisions (no trial: every variable held, a flat direction), with and without
    constraints, 0 to 14 pairs in a ring of 10."""
    rng = np.random.default_rng(seed)
    checked = 0
    feasible_points = []
    for trial in range(40):
        n = int(rng.integers(2, 30))
        model, P, x, u, sc = _state(rng, n, int(rng.integers(0, 15)), int(rng.integers(0, 4)), 10)
        ref = DenseMetric(P)
        if not ref.ok:
            continue
        for qp in (None, StepQP(model, None)):
            if qp is not None:
                sc._bound_tol = (model, reuse.bound_tolerances(model.lb, model.ub))
            want = sc._direction(model, x, u, ref, qp)
            got = sc._compiled_direction(model, x, u, ref, qp)
            assert (want is None) == (got is None), (trial, qp)
            if want is None:
                continue
            D0, s0, g0, a0, m0, z0 = want
            D1, s1, g1, a1, m1, z1 = got
            assert _close(D1, D0) and m0 == m1 and z0 is None
            assert abs(s1 - s0) <= 1e-12 * abs(s0) and abs(g1 - g0) <= 1e-12 * abs(g0)
            if qp is None:
                assert a0 is None and a1 is None
            else:
                # the factor's point x + a D to 1e-12 (an active side: 0 against a rounding of G x divided by G D)
                assert a1 == a0 or abs(a1 - a0) * np.abs(D0).max() <= 1e-12 * max(1.0, np.abs(x).max())
                # the point x + D comes with the kernel's feasibility test when the full step is allowed
                if z1 is not None:
                    assert a1 >= 1.0 and np.array_equal(z1, x + D1) and qp.feasible(z1)
                    feasible_points.append(1)
                elif a1 >= 1.0:
                    assert not qp.feasible(x + D1)
            checked += 1
    assert checked >= 40 and feasible_points


def test_compiled_free_set_cache_follows_the_free_set_and_the_metric():
    """One ``ScaledCurvature`` through a sequence of trials whose free set changes, returns, and whose metric is
    replaced with the same free set: the kernels' cached ``P_FF`` factor is the one of the current free set and
    metric (each direction equal to the numpy path's)."""
    rng = np.random.default_rng(8)
    n = 12
    model, P, x, _, sc = _state(rng, n, 6, 1, 10)
    qp = StepQP(model, None)
    sc._bound_tol = (model, reuse.bound_tolerances(model.lb, model.ub))
    refs = [DenseMetric(P), DenseMetric(P + np.diag(rng.uniform(0.5, 2.0, n)))]
    us = [rng.normal(size=n) for _ in range(4)]
    seen = set()
    for ref_i, u_i in [(0, 0), (0, 0), (0, 1), (0, 0), (1, 0), (1, 0), (1, 2), (0, 2), (0, 3), (1, 3), (1, 1)]:
        ref, u = refs[ref_i], us[u_i]
        want = sc._direction(model, x, u, ref, qp)
        got = sc._compiled_direction(model, x, u, ref, qp)
        assert (want is None) == (got is None)
        if want is not None:
            assert _close(got[0], want[0])
            seen.add(reuse.free_set(x, u, model.lb, model.ub).tobytes())
    assert len(seen) >= 2


def test_pair_ring_holds_the_pairs_most_recent_first():
    """The kernels' ring buffer: slot ``(head - i) mod memory`` holds the ``i``-th pair of ``ScaledCurvature.pairs``
    (most recent first), with its ``1 / s^T y``, through wrap-around; pairs without curvature are not stored."""
    rng = np.random.default_rng(3)
    sc = reuse.ScaledCurvature(100, "bound", 4, compiled_trial)
    for k in range(11):
        s = rng.normal(size=6)
        y = -s if k == 5 else s * rng.uniform(0.5, 2.0, 6)
        sc.moved(s, y, None, None)
        S, Y, rho, head = sc._ring
        for i, (s_i, y_i, r_i) in enumerate(sc.pairs):
            sl = (head - i) % 4
            assert np.array_equal(S[sl], s_i) and np.array_equal(Y[sl], y_i) and rho[sl] == r_i


def test_compiled_pair_products_and_secant_scale():
    """``pair_products`` against numpy's products and the metric's solve, and the secant scale ``c`` of ``moved``
    with the kernels equal to the numpy path's to 1e-13."""
    rng = np.random.default_rng(4)
    for _ in range(20):
        n = int(rng.integers(1, 40))
        R = rng.normal(size=(n, n))
        ref = DenseMetric(R @ R.T + 0.1 * np.eye(n))
        s, y = rng.normal(size=n), rng.normal(size=n)
        sy, ss, yy, ypy = compiled_trial.pair_products(s, y, ref.cf)
        for a, b in ((sy, s @ y), (ss, s @ s), (yy, y @ y), (ypy, y @ ref.solve(y))):
            assert abs(a - b) <= 1e-13 * max(abs(b), np.abs(s).max() * np.abs(y).max(), 1e-300)
        y = s * rng.uniform(0.5, 2.0, n)  # positive curvature: a pair and a new scale
        scs = []
        for kernels in (None, compiled_trial):
            sc = reuse.ScaledCurvature(100, "bound", 5, kernels)
            sc.ref = ref
            sc.moved(s, y, None, None)
            scs.append(sc)
        assert len(scs[1].pairs) == 1 and abs(scs[1].c - scs[0].c) <= 1e-13 * scs[0].c


def _fits():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(150, 12))
    y = (X @ rng.normal(size=12) + rng.logistic(size=150) > 0).astype(int)
    prog = logistic_program(X, y, 0.5)
    n = prog.n
    row = np.zeros(n)
    row[3:8] = 1.0
    cons = [Constraint("sum", Expression(n, linear=row), -np.inf, 0.2)]
    lb = np.full(n, -np.inf)
    lb[:3] = 0.0
    box = np.full(n, 0.15)
    return {"unconstrained": prog,
            "bounds and a row": Program(prog.names, lb, np.full(n, np.inf), prog.objective, cons),
            "a box on every weight": Program(prog.names, -box, box, prog.objective, cons)}


@pytest.mark.parametrize("case", ["unconstrained", "bounds and a row", "a box on every weight"])
def test_compiled_fit_follows_the_numpy_iterates(case):
    """Whole fits with ``backend='numba'`` and ``backend='numpy'``: the same number of iterations and trials, every
    iterate's objective to 1e-12 and point to 1e-9 relative (callback), the reported backend."""
    prog = _fits()[case]
    runs = {}
    for backend in ("numpy", "numba"):
        trace = []
        res = get_solver("majorize").solve(prog, tol=1e-12, max_iter=500, backend=backend,
                                           callback=lambda it, x, f, trace=trace: trace.append((x.copy(), f)) and False)
        assert res.status == "optimal" and res.info["backend"] == backend
        runs[backend] = (res, trace)
    (r0, t0), (r1, t1) = runs["numpy"], runs["numba"]
    assert len(t0) == len(t1) and r0.info["bound_reuse"] == r1.info["bound_reuse"]
    assert r1.info["bound_reuse"]["accepted"] >= 3
    for (x0, f0), (x1, f1) in zip(t0, t1):
        assert abs(f1 - f0) <= 1e-12 * abs(f0)
        assert _close(x1, x0, 1e-9)


def test_backend_option():
    """``backend='numba'`` without numba is refused with the install hint; ``'auto'`` then runs numpy; the numpy
    path is reported as such."""
    prog = _fits()["unconstrained"]
    saved = list(reuse._KERNELS)
    try:
        reuse._KERNELS[:] = [None]  # as if numba were not installed
        with pytest.raises(InvalidOptionError, match="needs the numba package"):
            get_solver("majorize").solve(prog, backend="numba")
        assert get_solver("majorize").solve(prog, backend="auto").info["backend"] == "numpy"
    finally:
        reuse._KERNELS[:] = saved
    # the default is numpy (a one-off small solve must not pay the kernels' load); 'auto' runs numba when installed
    assert get_solver("majorize").solve(prog).info["backend"] == "numpy"
    assert get_solver("majorize").solve(prog, backend="auto").info["backend"] == "numba"
    assert get_solver("majorize").solve(prog, backend="numpy").info["backend"] == "numpy"
    with pytest.raises(InvalidOptionError):
        get_solver("majorize").solve(prog, backend="fortran")
    # above the kernels' sizes (compiled_trial.MAX_N variables, MAX_SCORES scores) the numpy path runs
    rng = np.random.default_rng(2)
    X = rng.normal(size=(600, compiled_trial.MAX_N + 5))
    big = logistic_program(X, (X[:, 0] + rng.logistic(size=600) > 0).astype(int), 0.5)
    assert 2 * 600 > compiled_trial.MAX_SCORES
    assert get_solver("majorize").solve(big, max_iter=3, backend="auto").info["backend"] == "numpy"


@pytest.mark.parametrize("c", [1, 2, 3, 5])
def test_compiled_log_sum_exp_equals_the_numpy_values_and_weights(c):
    """``lse_value_weights`` against ``PaddedGroups.value_weights`` on random scores with ``-inf`` padding, large and
    tiny magnitudes, and weights ``c_g``: the value and the weights to 1e-13 relative."""
    from varopt.solvers.majorize.groups import PaddedGroups
    rng = np.random.default_rng(c)
    for _ in range(30):
        G = int(rng.integers(1, 300))
        S = rng.normal(scale=rng.choice([1e-3, 1.0, 30.0, 700.0]), size=(G, c))
        if c > 1:
            S[rng.random((G, c)) < 0.2] = -np.inf
            S[:, 0] = np.where(np.isneginf(S).all(axis=1), 0.0, S[:, 0])  # every group keeps a configuration
        grp = types.SimpleNamespace(c=c, coef=rng.uniform(0.1, 3.0, G))
        v0, W0 = PaddedGroups.value_weights(grp, S)
        W1 = np.empty(S.shape)
        ok, v1 = compiled_trial.lse_value_weights(S, grp.coef, W1)
        assert ok and abs(v1 - v0) <= 1e-13 * max(1.0, abs(v0))
        assert np.abs(W1 - W0).max() <= 1e-13 * np.abs(W0).max()


def test_compiled_evaluation_reports_bad_scores_as_the_numpy_path():
    """Scores that are NaN, ``+inf``, or ``-inf`` on a whole group are refused by the kernel and reported by the numpy
    path's error; a finite point evaluates to the numpy value."""
    from varopt.errors import InputDataError
    from varopt.solvers.majorize.model import MajorizeModel
    prog = _fits()["unconstrained"]
    model = MajorizeModel(prog)
    x = np.random.default_rng(0).normal(size=prog.n)
    f0 = model.evaluate(x)[0]
    assert model.use_kernels(compiled_trial) and model._dense_kernel
    assert abs(model.evaluate(x)[0] - f0) <= 1e-13 * abs(f0)
    for bad, msg in ((np.nan, "NaN or \\+inf"), (np.inf, "NaN or \\+inf"), (-np.inf, "identically zero")):
        S = model.groups.scores(x)
        S[3, :] = bad
        for kernels in (None, compiled_trial):
            model.use_kernels(kernels)
            with pytest.raises(InputDataError, match=msg):
                model.evaluate(x, scores=S, err=np.zeros_like(S))
    # a point whose scores overflow: the kernel's whole evaluation refuses, the numpy path reports it
    model.use_kernels(compiled_trial)
    with pytest.raises(InputDataError, match="NaN or \\+inf"):
        model.evaluate(np.full(prog.n, np.nan))
    with pytest.raises(InputDataError, match="NaN or \\+inf"):
        model.evaluate(np.full(prog.n, 1e308))


@pytest.mark.parametrize("case", ["unconstrained", "bounds and a row"])
def test_compiled_dense_evaluation_and_gradient_equal_the_numpy_path(case):
    """The dense-feature kernels of ``MajorizeModel.evaluate`` and ``gradient_at`` against the numpy path at random
    points (and with log base measures): value, magnitude, scores and weights to 1e-13 relative, the gradient to
    1e-12 of its scale."""
    from varopt.solvers.majorize.model import MajorizeModel
    prog = _fits()[case]
    ref, fast = MajorizeModel(prog), MajorizeModel(prog)
    assert fast.use_kernels(compiled_trial) and fast._dense_kernel
    rng = np.random.default_rng(1)
    for scale, offsets in ((0.0, False), (0.1, False), (1.0, False), (30.0, False), (1.0, True)):
        if offsets:  # log base measures log h (0 in logistic regression), one configuration per group impossible
            logh = rng.normal(size=ref.groups.logh.shape)
            logh[rng.random(logh.shape[0]) < 0.3, 1] = -np.inf
            ref.groups.logh[:] = logh
            fast.groups.logh[:] = logh
        x = rng.normal(scale=scale, size=prog.n)
        f0, _, S0 = ref.evaluate(x)
        f1, _, S1 = fast.evaluate(x)
        assert abs(f1 - f0) <= 1e-13 * max(1.0, ref.magnitude)
        assert abs(fast.magnitude - ref.magnitude) <= 1e-13 * ref.magnitude
        np.testing.assert_allclose(S1[0], S0[0], rtol=1e-13, atol=1e-13 * np.abs(S0[0]).max())
        np.testing.assert_allclose(S1[1], S0[1], rtol=1e-12, atol=1e-14)
        g0, g1 = ref.gradient_at(x, S0), fast.gradient_at(x, S1)
        assert np.abs(g1 - g0).max() <= 1e-12 * max(1.0, np.abs(g0).max())
        g_full = ref.evaluate(x, want_grad=True)[1]
        np.testing.assert_allclose(g1, g_full, rtol=0, atol=1e-12 * max(1.0, np.abs(g0).max()))


def test_compiled_feasibility_test_of_the_full_step():
    """The kernel's feasibility test of ``x + D`` is its own (not implied by the ratio test): with ratio-test sides
    that never block and feasibility sides that ``x + D`` violates (an overestimated ratio test, as rounding can make
    one), the point is reported infeasible; with the sides met, feasible, and the point is ``x + D``."""
    n = 3
    P = np.eye(n)
    ref = DenseMetric(P)
    u = np.array([1.0, -2.0, 0.5])
    x = np.zeros(n)
    G = np.vstack([np.eye(n), -np.eye(n)])
    g = np.full(2 * n, -1e300)  # the ratio test: no side approached closely
    r, z = np.empty(n), np.empty(n)
    for g_tol, want in ((np.full(2 * n, -10.0), True), (np.r_[-10.0, -10.0, -0.4, -10.0, -10.0, -10.0], False)):
        out = compiled_trial.qn_direction(u, x, (np.empty(0),) * 4, np.ones(n, bool), True, np.arange(n), ref.cf,
                                          ref.P, np.empty((1, 0)), np.empty((1, 0)), np.empty(1), 0, 0, 1.0, 1e-6,
                                          G, g, g_tol, r, z)
        code, _, _, factor, feasible = out
        assert code == compiled_trial.OK and factor >= 1.0 and feasible is want
        assert np.allclose(z, -u, rtol=1e-12)  # D = -P^{-1} u / c with P = I, c = 1
