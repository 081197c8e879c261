"""Finite-sum samples of CVXPY objectives written term by term (a Python loop over data points), as Pyomo users and
many CVXPY users write them: each term is one sample, as each entry of the vectorized sum is
(``varopt/frontends/cvxpy_nodes._label_terms``). Before, every scalar term carried label 0, so the loop was one sample
and ``batch_size`` silently took the whole sum at every step (ipsa ran 3 full-gradient iterations for
``passes=3``)."""
from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")

import varopt  # noqa: E402,F401
from varopt.frontends.cvxpy_compile import compile_cvxpy  # noqa: E402
from varopt.oracles import FiniteSumOracle  # noqa: E402

RNG = np.random.default_rng(3)
N, D = 12, 3
X = RNG.standard_normal((N, D))
Y = np.sign(X @ np.array([1.0, -1.0, 0.5]) + 0.3 * RNG.standard_normal(N))

LOOPS = {
    "squares": (lambda w: sum(cp.square(X[i] @ w - Y[i]) for i in range(N)),
                lambda w: cp.sum_squares(X @ w - Y)),
    "logistic": (lambda w: cp.sum([cp.logistic(-Y[i] * (X[i] @ w)) for i in range(N)]),
                 lambda w: cp.sum(cp.logistic(-cp.multiply(Y, X @ w)))),
    "probit": (lambda w: -sum(cp.log_normcdf(Y[i] * (X[i] @ w)) for i in range(N)),
               lambda w: -cp.sum(cp.log_normcdf(cp.multiply(Y, X @ w)))),
    "squared_hinge": (lambda w: sum(cp.square(cp.pos(1 - Y[i] * (X[i] @ w))) for i in range(N)),
                      lambda w: cp.sum(cp.square(cp.pos(1 - cp.multiply(Y, X @ w))))),
    "softmax": (lambda w: sum(cp.log_sum_exp(cp.hstack([0, X[i] @ w, -(X[i] @ w)])) for i in range(N)),
                lambda w: cp.sum(cp.log_sum_exp(cp.hstack([np.zeros((N, 1)), cp.reshape(X @ w, (N, 1), order="F"),
                                                           -cp.reshape(X @ w, (N, 1), order="F")]), axis=1))),
}


def _oracle(objective, scale=1.0):
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(scale * objective(w) + 0.5 * cp.sum_squares(w)))
    P = compile_cvxpy(prob, native_atoms={"sqpos"})[0]
    return P, FiniteSumOracle(P.objective)


@pytest.mark.parametrize("name", sorted(LOOPS))
@pytest.mark.parametrize("scale", [1.0, 1.0 / N])
def test_a_loop_of_terms_has_one_sample_per_term_like_the_vectorized_sum(name, scale):
    loop, vec = LOOPS[name]
    P, orc = _oracle(loop, scale)
    Pv, orcv = _oracle(vec, scale)
    assert orc.n_samples == orcv.n_samples == N
    # the same function, and each sample's gradient equal to the vectorized sample's (the samples are the data points)
    x = RNG.standard_normal(D)
    assert np.isclose(P.objective.value(x), Pv.objective.value(x), rtol=1e-12)
    orc.start(np.random.default_rng(0), 1, "cyclic")
    orcv.start(np.random.default_rng(0), 1, "cyclic")
    for i in range(N):
        B = np.array([i])
        np.testing.assert_allclose(orc.gradient(x, B), orcv.gradient(x, B), rtol=1e-10, atol=1e-12)


def test_ipsa_batches_sample_the_terms_of_a_loop():
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(sum(cp.square(X[i] @ w - Y[i]) for i in range(N))))
    prob.solve(method="ipsa", batch_size=3, passes=2, backend="numpy", warm_start=False)
    assert prob.solver_stats.num_iters == 2 * N // 3, prob.solver_stats.num_iters   # 4 batches a pass, not 1


def test_a_vectorized_sum_beside_a_penalty_and_reused_terms_keep_their_labels():
    """A term with several labels (the vectorized data term) leaves the sum as traced: its labels are the data
    points, the abs rows of the penalty keep theirs. A scalar term used twice (memoized node) is relabelled in a copy:
    its other use is unchanged."""
    w = cp.Variable(D)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(Y, X @ w))) + cp.sum(cp.abs(w))))
    P = compile_cvxpy(prob)[0]
    labels = {g.kind if hasattr(g, "kind") else "lse": np.asarray(g.label) for g in list(P.objective.atoms)
              + list(P.objective.lse)}
    assert sorted(np.unique(labels["lse"]).tolist()) == list(range(N))
    t0 = cp.logistic(-Y[0] * (X[0] @ w))
    t1 = cp.logistic(-Y[1] * (X[1] @ w))
    prob = cp.Problem(cp.Minimize(t0 + t1), [t0 + 0 <= 5])
    P = compile_cvxpy(prob)[0]
    assert sorted(np.concatenate([np.asarray(g.label) for g in P.objective.lse]).tolist()) == [0, 1]
    orc = FiniteSumOracle(P.objective)
    assert orc.n_samples == 2
