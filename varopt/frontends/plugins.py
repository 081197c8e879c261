"""Subscribe the Pyomo and CVXPY adapters to the solver registry.

After :func:`install`, every solver registered (before or after) is reachable as
``SolverFactory(name)`` and ``prob.solve(method=name)``. The arrow points from the front-ends to
the registry: the registry never imports a front-end.

Each adapter subscribes when its library is imported (:mod:`.hooks`): ``import varopt`` imports
neither Pyomo nor CVXPY, and a program that imports either one, before or after varopt, finds
every solver registered.
"""
_installed = False


def install():
    global _installed
    if _installed:
        return
    from ..registry import subscribe
    from .hooks import when_imported

    _installed = True

    def _pyomo(_module):
        from . import pyomo_plugin
        subscribe(pyomo_plugin.register)

    def _cvxpy(_module):
        from . import cvxpy_plugin
        subscribe(cvxpy_plugin.register)

    # pyomo.opt holds SolverFactory (pyomo.environ imports it); cvxpy's package defines Problem
    when_imported("pyomo.opt", _pyomo)
    when_imported("cvxpy", _cvxpy)
