"""A CVXPY solve from a cold start, as a user's first call: every variable's value cleared, CVXPY's warnings (an
inaccurate-solution note from the plugin's status mapping) silenced; returns ``prob.varopt_result``."""
import warnings


def solve_fresh(prob, method, **opts):
    for v in prob.variables():
        v.value = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prob.solve(method=method, warm_start=False, **opts)
    return prob.varopt_result
