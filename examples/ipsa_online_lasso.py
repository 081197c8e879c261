"""On-line L1-regularised least squares with ``ipsa`` (interior-point stochastic approximation, Carbonetto
2009, ch. 2): the data arrive in chunks and each chunk is seen once, one sample per step, as in §2.5.

The estimator ``L1LeastSquares`` minimises ``(1/2n)||y - Xw - b||^2 + alpha ||w||_1`` with ``w = w+ - w-``,
``w+/- >= 0`` (the split form; ``form='box'`` writes ``-u <= w <= u``); its iterates stay strictly inside the
constraints. After each chunk the script prints the error of the on-line estimate against the batch solution
(scikit-learn's ``Lasso`` on all data seen so far) and the support it recovers. The same problem can be
written in Pyomo or CVXPY and solved with ``SolverFactory('ipsa')`` / ``method='ipsa'`` (docs/ipsa.md).

Run: ``python examples/ipsa_online_lasso.py``.
"""
import numpy as np
from sklearn.linear_model import Lasso

from varopt.estimators import L1LeastSquares

rng = np.random.default_rng(0)
n, m = 6000, 40
w_true = np.zeros(m)
w_true[:6] = [2.0, -1.5, 1.0, -0.8, 0.6, 0.4]            # six relevant features of forty
X = rng.normal(size=(n, m))
y = X @ w_true + 0.5 * rng.normal(size=n)
alpha = 0.02

est = L1LeastSquares(alpha=alpha)
print(f"{'samples seen':>12s} {'max |w - w_lasso|':>18s} {'support (|w| > 0.05)':>22s}")
for start in range(0, n, 1500):
    est.partial_fit(X[start:start + 1500], y[start:start + 1500])      # one pass over the new chunk
    seen = start + 1500
    ref = Lasso(alpha=alpha, tol=1e-10, max_iter=100_000).fit(X[:seen], y[:seen])
    err = np.max(np.abs(est.coef_ - ref.coef_))
    support = np.flatnonzero(np.abs(est.coef_) > 0.05)
    print(f"{seen:12d} {err:18.4f} {str(support.tolist()):>22s}")
assert set(np.flatnonzero(np.abs(est.coef_) > 0.05)) == set(range(6)), "the support was not recovered"
assert err < 0.1, "the on-line estimate is far from the batch lasso"
