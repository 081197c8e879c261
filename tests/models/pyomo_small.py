"""A small convex Pyomo model for CLI tests: min (x-1)^2 + (y[1]+2)^2 + (y[2]-0.5)^2 s.t. x + y[1] >= 0."""
import pyomo.environ as pyo


def build():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-10, 10), initialize=0.0)
    m.y = pyo.Var([1, 2], bounds=(-10, 10), initialize=0.0)
    m.obj = pyo.Objective(expr=(m.x - 1) ** 2 + (m.y[1] + 2) ** 2 + (m.y[2] - 0.5) ** 2)
    m.c = pyo.Constraint(expr=m.x + m.y[1] >= 0)
    return m
