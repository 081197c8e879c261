"""SCIP's bounds on a Bayesian-GMM Pyomo model, run once per test session for all the test modules
that compare with them: SCIP stops at its time limit on the K = 3 models (it does not certify them in
seconds), so every run costs the whole limit, and a second run of the same model and options gives
the tests nothing the first does not."""
import functools


@functools.lru_cache(maxsize=None)
def scip_bounds(x, K, family, prior_precision, variance, time_limit, gap=1e-9):
    """(lower bound, upper bound) SCIP proves on ``bgmm_pyomo(x, K, family, prior_precision, variance)``
    within ``time_limit`` seconds and relative gap ``gap``; ``x`` a tuple (the cache key)."""
    import pyomo.environ as pyo

    from varopt.formulations.bgmm import bgmm_pyomo

    s = pyo.SolverFactory("scip_direct").solve(bgmm_pyomo(x, K, family, prior_precision, variance),
                                               load_solutions=False,
                                               options={"limits/gap": gap, "limits/time": time_limit})
    return float(s.problem.lower_bound), float(s.problem.upper_bound)
