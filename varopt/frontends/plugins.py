"""Register a varopt :class:`~varopt.registry.Solver` with every front-end at once."""
import importlib


def register_everywhere(cls):
    for mod in ("pyomo_plugin", "cvxpy_plugin"):
        module = importlib.import_module(f"{__package__}.{mod}")
        module.register(cls)
