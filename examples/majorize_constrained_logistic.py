"""Constrained L2-logistic regression with ``majorize`` (Jebara & Choromanska 2012): each step minimizes
Jebara's quadratic bound on the log-partition functions, a QP. The model is written in CVXPY with
linear constraints, solved by name, and checked against CVXPY + Clarabel on the same problem object.

Run: ``python examples/majorize_constrained_logistic.py``.
"""
import time

import cvxpy as cp
import numpy as np
from sklearn.datasets import load_breast_cancer

import varopt  # noqa: F401  (registers the solvers)

X, y = load_breast_cancer(return_X_y=True)
X = (X - X.mean(0)) / X.std(0)
n, d = X.shape
theta, b = cp.Variable(d), cp.Variable()
z = X @ theta + b
objective = cp.sum(cp.logistic(z)) - y @ z + 0.5 * cp.sum_squares(theta)
constraints = [theta[:5] >= 0, cp.sum(theta[5:10]) <= 0.5, cp.abs(theta[10:]) <= 0.4]
prob = cp.Problem(cp.Minimize(objective), constraints)

t = time.perf_counter()
value = prob.solve(method="majorize", tol=1e-10)
t_maj = time.perf_counter() - t
r = prob.varopt_result
theta_maj = theta.value.copy()
violation = max(float(np.max(c.violation())) for c in constraints)     # CVXPY's own evaluation at the loaded point
print(f"majorize: {r.status}, {r.iterations} iterations, objective {value:.10f}, {t_maj * 1e3:.1f} ms, "
      f"largest constraint violation {violation:.1e}")
print(f"  monotone: every iterate's objective <= the previous one: "
      f"{all(b['objective'] <= a['objective'] + 1e-12 * abs(a['objective']) for a, b in zip(r.history, r.history[1:]))}")

t = time.perf_counter()
prob.solve(solver="CLARABEL")
t_cl = time.perf_counter() - t
print(f"Clarabel: {prob.status}, objective {prob.value:.10f}, {t_cl * 1e3:.1f} ms")
print(f"objective difference {value - prob.value:.1e} (relative {(value - prob.value) / abs(prob.value):.1e}); "
      f"largest weight difference {np.max(np.abs(theta_maj - theta.value)):.1e}")
assert violation <= 1e-9 and value - prob.value <= 1e-7 * abs(prob.value), "majorize disagrees with Clarabel"
