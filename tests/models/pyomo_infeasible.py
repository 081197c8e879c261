import pyomo.environ as pyo


def build():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.y = pyo.Var(bounds=(0, 1))
    m.obj = pyo.Objective(expr=m.x * m.y)
    m.c = pyo.Constraint(expr=m.x + m.y >= 3)
    return m
