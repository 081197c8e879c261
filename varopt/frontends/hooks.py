"""Post-import hooks: run a callback when a module has been imported (now, if it already is).

``import varopt`` must not import Pyomo or CVXPY (each costs about a second). The adapters
register the solvers with ``SolverFactory`` and ``cvxpy.Problem.register_solve`` at the moment
the user's program imports that library, before or after ``import varopt``: a finder at the front
of ``sys.meta_path`` sees the import of the watched module, lets the regular finders locate it,
and wraps its loader so the callbacks run right after the module body has executed.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading

_callbacks: dict = {}
_lock = threading.RLock()


def when_imported(name: str, callback) -> None:
    """Call ``callback(module)`` once ``name`` is imported (immediately if it already is)."""
    with _lock:
        mod = sys.modules.get(name)
        if mod is not None and not getattr(getattr(mod, "__spec__", None), "_initializing", False):
            callback(mod)
            return
        _callbacks.setdefault(name, []).append(callback)
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())


def _fire(name, module):
    with _lock:
        cbs = _callbacks.pop(name, [])
    for cb in cbs:
        cb(module)


class _Loader(importlib.abc.Loader):
    def __init__(self, name, loader):
        self.name, self.loader = name, loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _fire(self.name, module)

    def __getattr__(self, attr):  # get_resource_reader, is_package, ... of the wrapped loader
        return getattr(self.loader, attr)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(fullname, spec.loader)
                return spec
        return None
