"""A bound-constrained Pyomo model for the run-loop test solver: min (x-1)^2 + 25 (y-0.3)^2 + 4xy on [-2, 2]^2 (ill-conditioned)."""
import pyomo.environ as pyo


def build():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-2, 2), initialize=0.0)
    m.y = pyo.Var(bounds=(-2, 2), initialize=0.0)
    m.obj = pyo.Objective(expr=(m.x - 1) ** 2 + 25 * (m.y - 0.3) ** 2 + 4 * m.x * m.y)
    return m
