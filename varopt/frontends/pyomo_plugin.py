"""Placeholder: replaced by the Pyomo front-end (SolverFactory registration)."""


def register(cls):
    pass
