"""Subscribe the Pyomo and CVXPY adapters to the solver registry.

After :func:`install`, every solver registered (before or after) is reachable as
``SolverFactory(name)`` and ``prob.solve(method=name)``. The arrow points from the front-ends to
the registry: the registry never imports a front-end.
"""
_installed = False


def install():
    global _installed
    if _installed:
        return
    from ..registry import subscribe
    from . import cvxpy_plugin, pyomo_plugin

    _installed = True
    subscribe(pyomo_plugin.register)
    subscribe(cvxpy_plugin.register)
