"""Regression: gop on a convex (no coupling) log-sum-exp problem returns promptly and matches Clarabel.

An earlier version hung inside HiGHS on this model despite ``time_limit``."""
import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")
import varopt  # noqa: E402,F401


def test_gop_convex_logistic_matches_clarabel():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = (rng.random(200) < 0.5) * 2 - 1
    w = cp.Variable(5, bounds=[-10, 10])
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w))) + cp.sum_squares(w)))
    v = prob.solve(method="gop", time_limit=20)
    res = prob.varopt_result
    assert res.status == "optimal" and res.lower_bound <= v + 1e-9
    ref = prob.solve(solver="CLARABEL")
    assert v == pytest.approx(ref, rel=1e-6)
