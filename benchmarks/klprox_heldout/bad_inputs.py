"""Bad inputs and options for klprox (docs/klprox.md section 6e): each printed with the error it raises."""
import warnings

import cvxpy as cp
import numpy as np

import varopt  # noqa: F401  (registers the solvers)
rng = np.random.default_rng(1)
N, D = 30, 3
X = rng.normal(size=(N, D)); y = (rng.random(N) < .5).astype(float)
def base(Xd=X, yd=y, prior=None, w=None):
    w = cp.Variable(D, name="w") if w is None else w
    pr = cp.sum_squares(w) / 2 if prior is None else prior(w)
    return cp.Problem(cp.Minimize(cp.sum(cp.logistic(Xd @ w)) - yd @ (Xd @ w) + pr)), w
def tryit(label, f):
    try:
        with warnings.catch_warnings(record=True) as wl:
            warnings.simplefilter("always")
            r = f()
        print(f"[OK ] {label}: {r} warn={[str(x.message)[:100] for x in wl]}")
    except Exception as e:
        print(f"[ERR] {label}: {type(e).__name__}: {str(e)[:260]}")
def solve(p, **o):
    v = p.solve(method="klprox", **o); r = p.varopt_result
    return f"{v:.8g} {r.status} it={r.iterations if hasattr(r,'iterations') else ''}"
Xn = X.copy(); Xn[3, 1] = np.nan
tryit("NaN in X", lambda: solve(base(Xn)[0]))
yn = y.copy(); yn[4] = np.nan
tryit("NaN in y", lambda: solve(base(X, yn)[0]))
tryit("inf in X", lambda: solve(base(np.where(X > 2, np.inf, X))[0]))
Pbad = np.diag([1.0, -0.5, 1.0])
tryit("indefinite quad_form (psd_wrap)", lambda: solve(base(prior=lambda w: 0.5 * cp.quad_form(w, cp.psd_wrap(Pbad)))[0]))
Psing = np.diag([1.0, 0.0, 1.0])
tryit("singular PSD prior", lambda: solve(base(prior=lambda w: 0.5 * cp.quad_form(w, cp.psd_wrap(Psing)))[0]))
tryit("no prior", lambda: solve(base(prior=lambda w: 0)[0]))
tryit("prior on 2 of 3", lambda: solve(base(prior=lambda w: cp.sum_squares(w[:2]))[0]))
w = cp.Variable(D, name="w")
tryit("logistic of square", lambda: solve(cp.Problem(cp.Minimize(cp.sum(cp.logistic(cp.square(X @ w))) + cp.sum_squares(w)))))
tryit("exp of abs", lambda: solve(cp.Problem(cp.Minimize(cp.sum(cp.exp(cp.abs(X @ w))) + cp.sum_squares(w)))))
tryit("huber", lambda: solve(cp.Problem(cp.Minimize(cp.sum(cp.huber(y - X @ w)) + cp.sum_squares(w)))))
tryit("pos (hinge)", lambda: solve(cp.Problem(cp.Minimize(cp.sum(cp.pos(1 - X @ w)) + cp.sum_squares(w)))))
tryit("log_normcdf probit", lambda: solve(cp.Problem(cp.Minimize(-cp.sum(cp.log_normcdf(cp.multiply(2 * y - 1, X @ w))) + cp.sum_squares(w)))))
tryit("entr", lambda: solve(cp.Problem(cp.Minimize(-cp.sum(cp.entr(X @ w)) + cp.sum_squares(w)))))
tryit("sum_squares only (prior only)", lambda: solve(cp.Problem(cp.Minimize(cp.sum_squares(w) / 2))))
for o in [dict(beta=0), dict(beta=-1), dict(beta=np.nan), dict(max_iter=0), dict(max_iter=-5), dict(gtol=0), dict(gtol=-1),
          dict(quadrature_nodes=0), dict(quadrature_nodes=1), dict(quadrature_nodes=3), dict(quadrature_nodes=2.5), dict(gamma0=0), dict(gamma0=-1),
          dict(shrink=1), dict(shrink=0), dict(shrink=1.5), dict(grow=0.5), dict(grow=1.0), dict(beta_max=0.1), dict(beta_max=-1), dict(beta=5, beta_max=1),
          dict(history_every=0), dict(batch_size=0), dict(batch_size=-3), dict(step_decay=-1), dict(algorithm="foo"),
          dict(parameterization="foo"), dict(max_dense_covariance=-1), dict(softmax="foo"), dict(time_limit=0), dict(time_limit=-1),
          dict(callback=3), dict(warm_start=5), dict(warm_start={"x": [1, 2]}), dict(step_rule="foo"), dict(mean_step="foo"),
          dict(inner_max_iter=0), dict(sampling="foo"), dict(seed=-1), dict(average="yes"), dict(blas_threads=-1), dict(verbose="x"),
          dict(step_rule="fixed", beta=0.25), dict(algorithm="proximal-point")]:
    tryit(f"option {o}", lambda: solve(base()[0], **o))
wb = cp.Variable(D, nonneg=True, name="wb")
tryit("nonneg var", lambda: solve(base(w=wb)[0]))
wi = cp.Variable(D, integer=True, name="wi")
tryit("integer var", lambda: solve(base(w=wi)[0]))
p, w2 = base()
tryit("constraint", lambda: solve(cp.Problem(p.objective, [w2 >= -1])))
tryit("empty data", lambda: solve(base(np.zeros((0, D)), np.zeros(0))[0]))
tryit("objective constant +5", lambda: solve(cp.Problem(cp.Minimize(base()[0].objective.expr + 5))))
tryit("objective *2", lambda: solve(cp.Problem(cp.Minimize(2 * base()[0].objective.expr))))
tryit("objective *0.5 via param", lambda: solve(cp.Problem(cp.Minimize(cp.Parameter(value=0.5, nonneg=True) * base()[0].objective.expr))))
tryit("y=2 label (not binary)", lambda: solve(base(X, 2 * y)[0]))
tryit("y=-1/1 labels in 01 form", lambda: solve(base(X, 2 * y - 1)[0]))
