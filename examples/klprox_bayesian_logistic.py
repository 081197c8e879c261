"""Bayesian logistic regression with ``klprox`` (Khan, Baque, Fleuret & Fua 2015): a full Gaussian posterior
for a model written as a negative log joint, in CVXPY and in Pyomo, and the scikit-learn style estimators.

    -log p(w, y) = sum_n log(1 + exp(-s_n x_n'w)) + |w|^2 / (2 delta)        (s_n = +-1)

``klprox`` returns the posterior mean as the variables' values, the covariance in
``result.info['covariance']`` and the negative ELBO as the objective. Both front ends give the same posterior;
the script checks that, and compares the estimator's test log-loss with scikit-learn's MAP estimate.

Run: ``python examples/klprox_bayesian_logistic.py``.
"""
import numpy as np
import cvxpy as cp
import pyomo.environ as pyo
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import varopt  # noqa: F401  (registers the solvers)
from varopt.estimators import BayesianLogisticRegression, GPClassifier
from varopt.estimators.klprox import log_loss_bits

X, y = load_breast_cancer(return_X_y=True)
Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=0, stratify=y)
scaler = StandardScaler().fit(Xtr)
Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
A, s, delta = Xtr[:, :8], 2.0 * ytr - 1.0, 1.0        # eight features keep the printout short

# CVXPY
w = cp.Variable(A.shape[1])
prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(s, A @ w))) + cp.sum_squares(w) / (2 * delta)))
neg_elbo = prob.solve(method="klprox")     # the return value is the -ELBO; prob.value is the model at the mean
res = prob.varopt_result
mean_cvx, cov_cvx = w.value.copy(), res.info["covariance"]
print(f"CVXPY: {res.status} in {res.iterations} iterations, -ELBO {neg_elbo:.6f}")

# Pyomo, the same model
m = pyo.ConcreteModel()
m.J = pyo.RangeSet(0, A.shape[1] - 1)
m.w = pyo.Var(m.J, initialize=0.0)
m.nlj = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-s[n] * sum(A[n, j] * m.w[j] for j in m.J)))
                               for n in range(A.shape[0])) + sum(m.w[j] ** 2 for j in m.J) / (2 * delta))
out = pyo.SolverFactory("klprox").solve(m)
mean_pyo = np.array([pyo.value(m.w[j]) for j in m.J])
cov_pyo = out.varopt_result.info["covariance"]
print(f"Pyomo: {out.solver.termination_condition}, -ELBO {out.varopt_result.objective:.6f}")

print("\n  weight   mean     sd")
for j in range(A.shape[1]):
    print(f"  w[{j}] {mean_cvx[j]:8.4f} {np.sqrt(cov_cvx[j, j]):7.4f}")
d_mean = np.max(np.abs(mean_cvx - mean_pyo))
d_cov = np.max(np.abs(cov_cvx - cov_pyo))
assert abs(out.varopt_result.objective - neg_elbo) <= 1e-9 * abs(neg_elbo), "the two front ends disagree"
print(f"\nCVXPY vs Pyomo: largest difference of the means {d_mean:.1e}, of the covariances {d_cov:.1e}")
assert d_mean < 1e-6 and d_cov < 1e-6, "the two front ends disagree"

# Estimators: all 30 features, the prior variance chosen by the ELBO over a grid
est = BayesianLogisticRegression(prior_var=[0.1, 0.3, 1.0, 3.0, 10.0]).fit(Xtr, ytr)
gpc = GPClassifier().fit(Xtr, ytr)                    # length scale and signal scale: an ELBO-selected grid
mapf = LogisticRegression(C=1.0, max_iter=1000).fit(Xtr, ytr)


def bits(p):
    return log_loss_bits(p[np.arange(yte.size), yte])


print(f"\ntest log-loss (bits; 1 = coin flipping), {yte.size} test rows")
print(f"  BayesianLogisticRegression (prior_var_ {est.prior_var_:g}) {bits(est.predict_proba(Xte)):.4f}")
print(f"  GPClassifier (log_ell_ {gpc.log_ell_:.2f}, log_sf_ {gpc.log_sf_:.2f})     {bits(gpc.predict_proba(Xte)):.4f}")
print(f"  scikit-learn LogisticRegression (MAP, C = 1)        {bits(mapf.predict_proba(Xte)):.4f}")
