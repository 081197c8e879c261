"""A 3-spin energy model over binary variables, as a user writes it (for the energy solvers on the CLI)."""
import pyomo.environ as pyo

H = (0.3, -0.2, 0.5)
W = {(0, 1): 0.4, (1, 2): -0.7, (0, 2): 0.25}


def build():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), domain=pyo.Binary)
    s = [2 * m.x[i] - 1 for i in range(3)]
    m.f = pyo.Objective(expr=-(sum(H[i] * s[i] for i in range(3)) + sum(w * s[i] * s[j] for (i, j), w in W.items())))
    return m
