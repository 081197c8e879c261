"""klprox variants (mean steps, fixed beta, forced parameterization, proximal point, minibatches) on models of
models.py against the reference (docs/klprox.md section 6e)."""
import numpy as np, cvxpy as cp, warnings, time
import models

def rel(a, b): return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
opts_list = [dict(), dict(mean_step="paper"), dict(mean_step="natural"), dict(step_rule="fixed", beta=0.25), dict(parameterization="dual"),
             dict(parameterization="full"), dict(algorithm="proximal-point"), dict(gamma0=1.0), dict(beta=0.01), dict(batch_size=10, max_iter=3000)]
for name in ["m04_logistic_fullprec_quadform", "m10_poisson_cvx_linnerud", "m13_laplace_robust_diabetes", "m08_sparse_X_NltD_logistic", "m19_poisson_NltD", "m25_gp_laplace_regression_quadform", "m31_gaussian_full_noise_cov"]:
    solve, ref = models.MODELS[name]()
    if hasattr(ref, "exact"):
        mr, Vr = ref.exact; fr = ref.nelbo(mr, Vr)
    else:
        mr, Vr, fr = ref.fit()
    prob = None
    # get the cvxpy problem object from the closure
    cl = solve.__closure__
    for c in cl:
        if isinstance(c.cell_contents, cp.Problem): prob = c.cell_contents
    var = prob.variables()
    for o in opts_list:
        try:
            with warnings.catch_warnings(record=True) as wl:
                warnings.simplefilter("always")
                t = time.perf_counter(); v = prob.solve(method="klprox", **o); t = time.perf_counter() - t
            r = prob.varopt_result
            x = r.x; V = r.info["covariance"]     # these models declare w before b: result.names is the reference's order
            f_at = ref.nelbo(np.asarray(x), np.asarray(V))
            print(f"{name[:30]:30s} {str(o):45s} {r.status:16s} it={r.iterations:5d} t={t:.3f} mean {rel(x, mr):.1e} cov {rel(V, Vr):.1e} nelbo {(v - fr)/abs(fr):+.1e} reeval {(v - f_at)/abs(f_at):+.1e} {[str(w.message)[:50] for w in wl]}")
        except Exception as e:
            print(f"{name[:30]:30s} {str(o):45s} ERR {type(e).__name__}: {str(e)[:150]}")
