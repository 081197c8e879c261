"""Built-in solvers; importing this package registers them."""
import importlib

for _name in ("gop", "ipsa", "majorize", "klprox"):
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as exc:  # a solver package not written yet
        if exc.name != f"{__name__}.{_name}":
            raise
