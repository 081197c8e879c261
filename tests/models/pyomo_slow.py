"""min sum_i x_i y_i + c_i x_i with 18 products split across the blocks: plain GOP needs 2^18 relaxed
duals in its first iteration (long), after a feasible incumbent from its first primal problem."""
import pyomo.environ as pyo


def build(n=18):
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, n - 1)
    m.x = pyo.Var(m.I, bounds=(-1, 1))
    m.y = pyo.Var(m.I, bounds=(-1, 2))
    m.obj = pyo.Objective(expr=sum(m.x[i] * m.y[i] + (0.1 * i - 0.9) * m.x[i] for i in m.I))
    m.c = pyo.Constraint(expr=sum(m.x[i] + m.y[i] for i in m.I) <= 1)
    return m
