"""A test-only solver written against the shared core (:mod:`varopt.core.run`): projected gradient
descent with Armijo backtracking on the box ``lb <= x <= ub``. It keeps no loop bookkeeping of its
own: limits, history, progress, callback, Ctrl-C and the Pyomo, CVXPY and CLI entry points all come
from the core and the registry."""
import numpy as np

import varopt
from varopt.errors import ModelStructureError
from varopt.options import Option, OptionSet, common_options, positive, progress_options


@varopt.register_solver
class ProjectedGradient(varopt.Solver):
    name = "vo_test_pgd"
    summary = "test-only plugin: projected gradient descent on a box, on the shared run loop"
    options = OptionSet(common_options(max_iter=500) + progress_options()[1:] + [
        Option("gtol", 1e-9, "stop when a step moves x by less than gtol", float, positive, "must be positive")])

    def _solve(self, program, opts, run):
        if program.constraints:
            raise ModelStructureError("vo_test_pgd handles variable bounds only")
        f, grad, lb, ub = program.objective.value, program.objective.gradient, program.lb, program.ub
        x = np.clip(np.nan_to_num(program.x0), lb, ub)
        fx, t = f(x), 1.0
        for _ in run.iterations():
            g = grad(x)
            while True:  # Armijo backtracking along the projection arc
                x_new = np.clip(x - t * g, lb, ub)
                f_new = f(x_new)
                if f_new <= fx - 1e-4 * g @ (x - x_new) or t < 1e-14:
                    break
                t *= 0.5
            step = float(np.linalg.norm(x_new - x))
            x, fx, t = x_new, f_new, 2.0 * t
            run.incumbent(x, objective=fx)
            run.record(objective=fx, step=step)
            if run.callback(x):
                break
            if step <= opts.gtol:
                return run.finish("converged", "step below gtol")
        return run.finish()
