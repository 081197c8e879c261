"""A test-only solver plugin registered through the public registry.

It minimises the compiled program with scipy's SLSQP (local, for smooth problems); it
exists to prove that a third-party solver is reachable from SolverFactory, from
``prob.solve(method=...)`` and from the CLI, with its options validated.
"""
import numpy as np
from scipy.optimize import minimize

import varopt
from varopt.options import Option, OptionSet, common_options, positive
from varopt.result import Result


@varopt.register_solver
class ScipyTestSolver(varopt.Solver):
    name = "vo_test_scipy"
    summary = "test-only plugin: local SLSQP on the compiled program"
    options = OptionSet(common_options(max_iter=500) + [
        Option("tol", 1e-10, "SLSQP tolerance", float, positive, "must be positive"),
    ])

    def _solve(self, program, opts):
        x0 = np.where(np.isnan(program.x0), 0.0, program.x0)
        x0 = np.clip(x0, program.lb, program.ub)
        x0 = np.where(np.isfinite(x0), x0, 0.0)
        cons = []
        for c in program.constraints:
            if c.lo == c.hi:
                cons.append({"type": "eq", "fun": (lambda x, c=c: c.body.value(x) - c.hi),
                             "jac": (lambda x, c=c: c.body.gradient(x))})
                continue
            if np.isfinite(c.hi):
                cons.append({"type": "ineq", "fun": (lambda x, c=c: c.hi - c.body.value(x)),
                             "jac": (lambda x, c=c: -c.body.gradient(x))})
            if np.isfinite(c.lo):
                cons.append({"type": "ineq", "fun": (lambda x, c=c: c.body.value(x) - c.lo),
                             "jac": (lambda x, c=c: c.body.gradient(x))})
        bounds = [(None if not np.isfinite(a) else a, None if not np.isfinite(b) else b)
                  for a, b in zip(program.lb, program.ub)]
        import time
        t0, history = time.perf_counter(), []

        def record(xk):
            history.append({"iteration": len(history) + 1, "time": time.perf_counter() - t0,
                            "objective": program.objective.value(xk), "lower": None, "upper": None})

        r = minimize(program.objective.value, x0, jac=program.objective.gradient, bounds=bounds,
                     constraints=cons, method="SLSQP", tol=opts.tol, options={"maxiter": opts.max_iter},
                     callback=record)
        status = "converged" if r.success else "iteration_limit"
        return Result(solver=self.name, status=status, x=r.x, objective=float(r.fun),
                      iterations=int(r.nit), message=str(r.message), history=history)
