"""The check applied to every Pyomo gop solve of the test suite (installed by conftest.py):
after a solve that loaded a point, ``pyo.value(model.obj)`` evaluates (no ``math domain error``
at ``phi*log(phi)``, ``log(x)``) and equals the reported objective within the gap tolerance."""
import math

#: number of solves checked (tests assert the check runs)
CHECKED = {"count": 0}


def check_loaded_objective(model, results):
    """Raise AssertionError when the loaded point does not evaluate to the reported objective."""
    import pyomo.environ as pyo

    res = getattr(results, "varopt_result", None)
    if res is None or not getattr(results, "varopt_loaded", False) or res.objective is None:
        return
    objs = list(model.component_data_objects(pyo.Objective, active=True))
    if len(objs) != 1:
        return
    try:
        val = pyo.value(objs[0])
    except (ValueError, ZeroDivisionError, OverflowError) as exc:  # math domain error and friends
        raise AssertionError(f"gop loaded a point at which the model's objective does not evaluate: {exc!r}") from exc
    rel = res.options.get("rel_gap", 1e-6)
    ab = res.options.get("abs_gap", 1e-9) or 0.0
    tol = max(ab, rel * max(abs(res.objective), 1e-10)) + 1e-9 * max(1.0, abs(res.objective))
    assert math.isfinite(val) and abs(val - res.objective) <= tol, (
        f"pyo.value(model.obj) = {val!r} differs from the reported objective {res.objective!r} by "
        f"{abs(val - res.objective):.3g} > {tol:.3g}")
    CHECKED["count"] += 1


def wrap_solve(solve):
    def checked_solve(self, model, **kwds):
        results = solve(self, model, **kwds)
        if self.name == "gop":
            check_loaded_objective(model, results)
        return results
    checked_solve.__wrapped__ = solve
    checked_solve.gop_checked = True
    return checked_solve
