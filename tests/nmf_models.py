"""Small nonnegative matrix factorizations as users write them in Pyomo (shared by the gop tests)."""
import numpy as np
import pyomo.environ as pyo


def nmf_data(p, q, r, seed=0):
    """A ``p x q`` nonnegative matrix of rank ``r`` plus 5 % noise (seeded)."""
    rng = np.random.default_rng(seed)
    return rng.random((p, r)) @ rng.random((r, q)) + 0.05 * rng.random((p, q))


def nmf_model(X, r):
    """``min ||X - W H||_F^2`` over ``0 <= W, H <= max X`` (rank ``r``)."""
    p, q = X.shape
    ub = float(X.max())
    m = pyo.ConcreteModel()
    m.W = pyo.Var(range(p), range(r), bounds=(0, ub))
    m.H = pyo.Var(range(r), range(q), bounds=(0, ub))
    m.obj = pyo.Objective(expr=sum((X[i, j] - sum(m.W[i, k] * m.H[k, j] for k in range(r))) ** 2
                                   for i in range(p) for j in range(q)))
    return m
