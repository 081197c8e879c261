"""The same model as pyomo_small.py, in CVXPY (matrix-free naming: x, y[0], y[1])."""
import cvxpy as cp


def build():
    x = cp.Variable(name="x")
    y = cp.Variable(2, name="y")
    obj = cp.square(x - 1) + cp.square(y[0] + 2) + cp.square(y[1] - 0.5)
    return cp.Problem(cp.Minimize(obj), [x + y[0] >= 0, x <= 10, x >= -10, y <= 10, y >= -10])
