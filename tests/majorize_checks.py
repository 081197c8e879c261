"""Shared checks of majorize's tests: the reference restriction of L-BFGS pairs to a free set."""
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
