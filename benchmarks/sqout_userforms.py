"""Squared hinges and log_normcdf written as users write them: one table of outcomes (docs/klprox.md §2d).

The models are those of tests/test_sqpos_userforms.py (SOLVED, FIXED, REFUSED). Each is solved cold by ipsa
(deterministic: full batch, exact Hessian, unit steps; and stochastic: batch_size=5, diagonal Hessian, 200 passes),
gop, majorize and klprox; a cell is the relative error of CVXPY's objective value at the loaded point against Clarabel
(scipy BFGS where Clarabel fails), ``ERR <exception>`` for a refusal, or the status when it is not a success. klprox's
cell is its −ELBO minus the Cholesky-VI baseline's (an ELBO is not the optimum's value).

    cd benchmarks && PYTHONPATH=..:. python sqout_userforms.py            # the branch
    cd benchmarks && PYTHONPATH=/path/to/other/checkout:. python sqout_userforms.py   # another varopt, same models
"""
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import cvxpy as cp
import test_sqpos_userforms as T

warnings.filterwarnings("ignore")
SOLVERS = [("ipsa", T.IPSA), ("ipsa b=5", {"batch_size": 5, "hessian": "diagonal", "passes": 200}),
           ("gop", {"time_limit": 60}), ("majorize", {}), ("klprox", {})]


def _cell(name, prob, ref, method, opts):
    try:
        r = T._solve(prob, method, **opts)
    except Exception as e:   # noqa: BLE001 — the table records every refusal
        return f"ERR {type(e).__name__}"
    if method == "klprox":
        from varopt.baselines.klprox import cholesky_vi
        from varopt.frontends.cvxpy_compile import compile_cvxpy
        from varopt.solvers.klprox.expectations import family_table
        from varopt.solvers.klprox.view import likelihood_view
        base = cholesky_vi(likelihood_view(compile_cvxpy(prob, native_atoms={"sqpos"})[0], family_table(100)))
        return f"{r.status[:4]} dELBO {r.info['neg_elbo'] - base['neg_elbo']:.0e}"
    if ref is None or prob.objective.value is None:
        return f"{r.status}"
    err = abs(prob.objective.value - ref) / max(1.0, abs(ref))
    bad = T._violation(prob) > 1e-8
    ok = r.status in ("converged", "optimal", "pass_limit")
    return f"{err:.0e}" + ("" if ok else f" {r.status}") + (" INFEASIBLE" if bad else "")


def _models():
    for name in sorted(T.SOLVED):
        prob, _, _ = T._build(name)
        yield "solved", name, prob
    for name in sorted(T.FIXED):
        w = cp.Variable(T.D)
        yield "fixed", name, cp.Problem(cp.Minimize(T.FIXED[name](w) + 0.5 * cp.sum_squares(w)))
    for name in sorted(T.REFUSED):
        obj, cons, _, _ = T.REFUSED[name]
        w = cp.Variable(T.D)
        yield "refused", name, cp.Problem(cp.Minimize(obj(w)), cons(w) if cons else [])


def main():
    import varopt
    print(f"varopt from {os.path.dirname(varopt.__file__)}; loadavg {os.getloadavg()}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    print("| group | model | Clarabel | " + " | ".join(s for s, _ in SOLVERS) + " |")
    print("|---|---|---|" + "---|" * len(SOLVERS))
    t0 = time.perf_counter()
    for group, name, prob in _models():
        try:
            ref = T._reference(name, prob)
            cref = f"{ref:.6g}"
        except Exception as e:   # noqa: BLE001
            ref, cref = None, f"ERR {type(e).__name__}"
        cells = [_cell(name, prob, ref, s.split()[0], o) for s, o in SOLVERS]
        print(f"| {group} | {name} | {cref} | " + " | ".join(cells) + " |", flush=True)
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
