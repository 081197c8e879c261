"""A Bayesian logistic regression written as a user would for ``klprox``: -log p(y, w) in CVXPY."""
import cvxpy as cp
import numpy as np


def build():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = (rng.random(20) < 0.5).astype(float)
    w = cp.Variable(2, name="w")
    return cp.Problem(cp.Minimize(cp.sum(cp.logistic(X @ w)) - y @ (X @ w) + cp.sum_squares(w) / 2))
