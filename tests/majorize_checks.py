"""Shared checks of majorize's tests: the reference restriction of L-BFGS pairs to a free set, and a small
constrained logistic fit."""
import numpy as np


def restricted_reference(pairs, F):
    """The pairs ``(s, y, 1 / s^T y)`` restricted to the free variables ``F`` afresh (those without positive curvature
    on ``F`` dropped): what ``reuse._restricted_pairs`` must return whatever it cached."""
    out = []
    for s, y, _ in pairs:
        sf, yf = s[F], y[F]
        sy = float(sf @ yf)
        if sy > 1e-12 * float(np.sqrt((sf @ sf) * (yf @ yf))):
            out.append((sf, yf, 1.0 / sy))
    return out


def assert_same_pairs(a, b):
    """Two lists of restricted pairs equal bit for bit."""
    assert len(a) == len(b)
    for (s1, y1, r1), (s2, y2, r2) in zip(a, b):
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_array_equal(y1, y2)
        assert r1 == r2


def small_constrained_logistic(seed=30):
    """A logistic fit on 80 x 12 random data (``logistic_program``, lambda 0.05) with ``theta[:4] >= 0`` and the row
    ``sum(theta[6:10]) <= 0.3`` whose trials meet bounds and the row: ``(prog, lb, ub, row)`` for a test to add its
    own bounds and rows to before building the :class:`~varopt.program.Program`."""
    from varopt.formulations.logistic import logistic_program
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((80, 12))
    y = (X @ rng.standard_normal(12) + 0.5 * rng.standard_normal(80) > 0).astype(int)
    prog = logistic_program(X, y, 0.05)
    n = prog.n
    lb, ub = np.full(n, -np.inf), np.full(n, np.inf)
    lb[:4] = 0.0
    row = np.zeros(n)
    row[6:10] = 1.0
    return prog, lb, ub, row
