"""ipsa on active nonlinear rows written as users write them: epigraphs ``f(w) <= t`` with ``t`` minimised (CVXPY
and Pyomo), norm balls and exponential budgets that bind at the optimum (docs/ipsa.md, "Active nonlinear rows:
centring safeguard").

Each model is solved cold by ipsa under three settings and judged against CVXPY + Clarabel on the same model (the
Pyomo models have a CVXPY twin): ``det`` (full batch, exact Hessian, unit steps: a user with a small data set),
``{}`` (ipsa's defaults) and ``sto`` (batch_size=5, hessian='bfgs', 20 passes: sampled gradients, on the models whose
objective is a finite sum). Prints status, iterations, relative error and the largest violation of the user's
constraints (CVXPY's ``violation()`` / Pyomo's body value at the returned point). ``--guard off`` runs the paper's
centring rule alone (option ``centrality_guard=False``), for the before/after table.

    cd benchmarks && PYTHONPATH=..:. OPENBLAS_NUM_THREADS=1 python ipsa_epigraph_rows.py [--guard off] [--only det]
"""
import argparse
import time
import warnings

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo

import varopt  # noqa: F401  (registers ipsa with CVXPY and Pyomo)

N, D = 30, 4
DET = {"batch_size": 10 ** 9, "hessian": "exact", "step_power": 0, "max_iter": 300, "kkt_tol": 1e-10}
STO = {"batch_size": 5, "hessian": "bfgs", "passes": 20, "seed": 0}


def data():
    r = np.random.default_rng(0)
    X = r.standard_normal((N, D))
    y = np.sign(X @ r.standard_normal(D) + 0.5 * r.standard_normal(N))
    y[y == 0] = 1.0
    b = X @ np.array([1.0, -0.5, 0.25, 0.0]) + 0.3 * r.standard_normal(N)
    return X, y, b


X, y, B = data()
C = np.array([1.0, -2.0, 0.5, 1.5])


def cvx_models():
    """name -> (build() -> (problem, finite_sum_objective))."""
    def epi(f, reg=True):
        def build():
            w, t = cp.Variable(D), cp.Variable()
            obj = t + 0.5 * cp.sum_squares(w) if reg else t
            return cp.Problem(cp.Minimize(obj), [f(w) <= t]), False
        return build

    def m(w):
        return cp.multiply(y, X @ w)

    def epi_box():
        w, t = cp.Variable(D), cp.Variable()
        return cp.Problem(cp.Minimize(t), [cp.sum_squares(X @ w - B) <= t, w >= -1, w <= 1]), False

    def two_epi():
        w, t1, t2 = cp.Variable(D), cp.Variable(), cp.Variable()
        return cp.Problem(cp.Minimize(t1 + 2 * t2 + 0.1 * cp.sum_squares(w)),
                          [cp.sum_squares(cp.pos(1 - m(w))) <= t1, cp.sum(cp.exp(0.3 * (w - 1))) <= t2]), False

    def ball_lp():
        w = cp.Variable(D)
        return cp.Problem(cp.Minimize(C @ w), [cp.sum_squares(w) <= 1.0]), False

    def ls_ball():
        w = cp.Variable(D)
        return cp.Problem(cp.Minimize(cp.sum_squares(X @ w - 3 * B)), [cp.sum_squares(w) <= 0.5]), True

    def ls_expbudget():
        w = cp.Variable(D)
        return cp.Problem(cp.Minimize(cp.sum_squares(X @ w - 3 * B)), [cp.sum(cp.exp(w)) <= 4.5, w >= -3]), True

    def lasso_epi():
        w, t = cp.Variable(D), cp.Variable()
        return cp.Problem(cp.Minimize(t + 2.0 * cp.norm1(w)), [cp.sum_squares(X @ w - B) <= t]), False

    def logistic_budget():
        w = cp.Variable(D)
        return cp.Problem(cp.Minimize(cp.sum(cp.logistic(-m(w)))), [cp.sum_squares(w) <= 0.3]), True

    return {
        "epi_sumsq_pos": epi(lambda w: cp.sum_squares(cp.pos(1 - m(w)))),
        "epi_sum_exp": epi(lambda w: cp.sum(cp.exp(0.3 * (1 - m(w))))),
        "epi_sumsq": epi(lambda w: cp.sum_squares(1 - m(w))),
        "epi_log_sum_exp": epi(lambda w: cp.log_sum_exp(1 - m(w))),
        "epi_logistic": epi(lambda w: cp.sum(cp.logistic(-m(w)))),
        "epi_sumsq_noreg_box": epi_box,
        "two_epigraphs": two_epi,
        "lasso_epigraph": lasso_epi,
        "ball_lp": ball_lp,
        "ls_in_ball": ls_ball,
        "ls_exp_budget": ls_expbudget,
        "logistic_in_ball": logistic_budget,
    }


def pyomo_models():
    """name -> (build() -> Pyomo model, CVXPY twin problem)."""
    def epi_sq():
        mdl = pyo.ConcreteModel()
        mdl.w = pyo.Var(range(D), initialize=0.0)
        mdl.t = pyo.Var()
        mdl.obj = pyo.Objective(expr=mdl.t + 0.5 * sum(mdl.w[j] ** 2 for j in range(D)))
        mdl.epi = pyo.Constraint(expr=mdl.t >= sum(
            (1 - y[i] * sum(X[i, j] * mdl.w[j] for j in range(D))) ** 2 for i in range(N)))
        w, t = cp.Variable(D), cp.Variable()
        twin = cp.Problem(cp.Minimize(t + 0.5 * cp.sum_squares(w)), [cp.sum_squares(1 - cp.multiply(y, X @ w)) <= t])
        return mdl, twin

    def epi_exp():
        mdl = pyo.ConcreteModel()
        mdl.w = pyo.Var(range(D), initialize=0.0)
        mdl.t = pyo.Var()
        mdl.obj = pyo.Objective(expr=mdl.t + 0.5 * sum(mdl.w[j] ** 2 for j in range(D)))
        mdl.epi = pyo.Constraint(expr=sum(pyo.exp(0.3 * (1 - y[i] * sum(X[i, j] * mdl.w[j] for j in range(D))))
                                          for i in range(N)) <= mdl.t)
        w, t = cp.Variable(D), cp.Variable()
        twin = cp.Problem(cp.Minimize(t + 0.5 * cp.sum_squares(w)),
                          [cp.sum(cp.exp(0.3 * (1 - cp.multiply(y, X @ w)))) <= t])
        return mdl, twin

    def ball():
        mdl = pyo.ConcreteModel()
        mdl.w = pyo.Var(range(D), initialize=0.0)
        mdl.obj = pyo.Objective(expr=sum((sum(X[i, j] * mdl.w[j] for j in range(D)) - 3 * B[i]) ** 2
                                         for i in range(N)))
        mdl.ball = pyo.Constraint(expr=sum(mdl.w[j] ** 2 for j in range(D)) <= 0.5)
        w = cp.Variable(D)
        twin = cp.Problem(cp.Minimize(cp.sum_squares(X @ w - 3 * B)), [cp.sum_squares(w) <= 0.5])
        return mdl, twin

    return {"pyomo_epi_sumsq": epi_sq, "pyomo_epi_exp": epi_exp, "pyomo_ls_in_ball": ball}


def violation_cvx(prob):
    return max([float(np.max(np.atleast_1d(c.violation()))) for c in prob.constraints] + [0.0])


def run_cvx(name, build, setting, opts):
    prob, _ = build()
    ref = prob.solve(solver="CLARABEL")
    for v in prob.variables():
        v.value = None
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prob.solve(method="ipsa", warm_start=False, **opts)
        except Exception as e:  # noqa: BLE001 - reported in the table
            return name, setting, f"raised {type(e).__name__}", None, None, None, time.perf_counter() - t0
    r = prob.varopt_result
    err = abs(prob.objective.value - ref) / max(1.0, abs(ref))
    return name, setting, r.status, r.iterations, err, violation_cvx(prob), \
        time.perf_counter() - t0


def run_pyomo(name, build, setting, opts):
    mdl, twin = build()
    ref = twin.solve(solver="CLARABEL")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = pyo.SolverFactory("ipsa").solve(mdl, **opts)
        except Exception as e:  # noqa: BLE001
            return name, setting, f"raised {type(e).__name__}", None, None, None, time.perf_counter() - t0
    val = pyo.value(mdl.obj)
    viol = 0.0
    for c in mdl.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if c.has_ub():
            viol = max(viol, body - pyo.value(c.upper))
        if c.has_lb():
            viol = max(viol, pyo.value(c.lower) - body)
    status = str(res.solver.termination_condition)
    return name, setting, status, res.varopt_result.iterations, abs(val - ref) / max(1.0, abs(ref)), viol, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--guard", choices=("on", "off"), default="on")
    ap.add_argument("--only", default=None, help="det, defaults or sto")
    a = ap.parse_args()
    settings = {"det": DET, "defaults": {}, "sto": STO}
    extra = {} if a.guard == "on" else {"centrality_guard": False}
    print(f"{'model':24s} {'setting':9s} {'status':22s} {'nit':>5s} {'rel.err':>9s} {'viol':>9s} {'time':>6s}")
    rows = [(n, b, run_cvx) for n, b in cvx_models().items()] + [(n, b, run_pyomo) for n, b in pyomo_models().items()]
    for name, build, runner in rows:
        for setting, opts in settings.items():
            if a.only and setting != a.only:
                continue
            if setting == "sto" and runner is run_cvx and not build()[1]:
                continue  # no finite sum in the objective: the sampled run is the deterministic one
            if setting == "sto" and runner is run_pyomo and name != "pyomo_ls_in_ball":
                continue
            r = runner(name, build, setting, dict(opts, **extra))
            n, s, st, nit, err, viol, dt = r
            print(f"{n:24s} {s:9s} {st:22s} {nit if nit is not None else '':>5} "
                  f"{err if err is not None else float('nan'):9.2e} {viol if viol is not None else float('nan'):9.1e} "
                  f"{dt:6.2f}", flush=True)


if __name__ == "__main__":
    main()
