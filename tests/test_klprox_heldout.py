"""klprox checked from the outside, as a held-out reviewer would (branch klheld, issue 16).

Each test reproduces a failure found with a user-written model (scratch sweep of 35 models against an independent
full-Gaussian VI, docs/klprox.md section 6e) and checks the fixed behaviour against an independent computation.
"""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sps

import varopt  # noqa: F401  (registers the solvers)
from varopt.errors import InputDataError


def _logistic(N, D, seed=0):
    """Bayesian logistic regression written as a user writes it; N < D takes the dual parameterization (19)."""
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(N, D)), (rng.random(N) < 0.5).astype(float)
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ (X @ w) + cp.sum_squares(w) / 2))
    prob.solve(method="klprox")
    return prob.varopt_result, w, X


@pytest.mark.parametrize("N, D", [(40, 3), (5, 12)], ids=["full", "dual"])
def test_predict_checks_new_rows(N, D):
    """``info['predict'](A_new, b_new)`` with the wrong number of columns failed inside LAPACK ("LAPACK dtrtrs:
    illegal value in argument 9", and a line printed to stderr by the Fortran library) or, in the dual form, with a
    numpy shape error; an offset of the wrong length broadcast silently or failed the same way; a NaN row returned
    NaN. Now each is an ``InputDataError`` naming the argument and the expected shape (or the first bad index)."""
    r, w, X = _logistic(N, D)
    pred = r.info["predict"]
    assert r.info["parameterization"] == ("full" if N > D else "dual")
    with pytest.raises(InputDataError, match=rf"A_new.*{D} columns.*got 2"):
        pred(X[:3, :2])
    with pytest.raises(InputDataError, match=rf"A_new.*{D} columns.*got {D + 1}"):
        pred(sps.csr_matrix(np.ones((2, D + 1))))
    with pytest.raises(InputDataError, match=r"b_new.*3 rows.*2"):
        pred(X[:3], np.ones(2))
    bad = X[:3].copy()
    bad[1, 0] = np.nan
    with pytest.raises(InputDataError, match=r"A_new.*NaN.*\(1, 0\)"):
        pred(bad)
    with pytest.raises(InputDataError, match=r"b_new.*inf"):
        pred(X[:3], np.array([0.0, np.inf, 1.0]))
    # valid calls still work and agree with the posterior: a row vector, a 2-D block, sparse rows, a scalar offset
    V = r.info["covariance"]
    mt, vt = pred(X[0])
    assert np.allclose(mt, X[0] @ w.value, rtol=1e-12, atol=1e-12) and np.allclose(vt, X[0] @ V @ X[0], rtol=1e-10)
    mt, vt = pred(sps.csr_matrix(X[:3]), 2.0)
    assert np.allclose(mt, X[:3] @ w.value + 2.0, rtol=1e-12, atol=1e-12)
    assert np.allclose(vt, np.einsum("ij,jk,ik->i", X[:3], V, X[:3]), rtol=1e-10)
    mt, vt = pred(X[:3], np.arange(3.0))
    assert np.allclose(mt, X[:3] @ w.value + np.arange(3.0), rtol=1e-12, atol=1e-12)
