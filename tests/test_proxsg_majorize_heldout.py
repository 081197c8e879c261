"""Held-out review of ``proxsg`` and ``majorize`` (2026-11-26; docs/proxsg.md and docs/majorize.md, "Held-out
review"): models written the way users write them, on scikit-learn's bundled data and seeded synthetic data, each
checked against an independent reference (CVXPY + Clarabel on the same problem, scikit-learn, brute-force
enumeration of an Ising or CRF log-partition), and the bugs the review found.

Bugs found (each test below failed before its fix):

* ``proxsg`` reported ``converged`` (Pyomo ``locallyOptimal``, CVXPY ``optimal_inaccurate``) with the objective NaN
  and the variables at ~1e156 when the smooth part was unbounded below along the iterates (a concave term): the
  backtracking ends at ``L > 1e300`` with a step of ~1e-300, and the prox-gradient residual test then passed.
* ``SparseIsing`` (exact gradients) and ``ChainCRF`` stopped at ``max_iter`` without scikit-learn's
  ``ConvergenceWarning`` (``MajorizeLogisticRegression`` warns).
* ``proxsg`` started where the smooth part overflows (``sum(exp(A @ x))`` at ``x = 400``) printed LAPACK's
  "On entry to DLASCL parameter number 4 had an illegal value" (the Lipschitz estimate's eigenvalue of an inf
  Hessian) before its own error.
* ``logistic_program(X, y, lam, classes=...)`` (varopt.formulations.logistic) mapped labels by
  ``np.searchsorted(classes, y)``: a label outside ``classes`` became a neighbouring class without a word (y in {0, 1}
  with ``classes=[-1, 1]``: every sample class 1, the fit w = 0), unsorted classes gave garbage, repeated classes an
  empty class.
* ``proxsg``'s penalty value was NaN at a far start (``|x| ~ 1e300``): ``l2 @ (x * x)`` is ``0 * inf`` for the
  variables without an elastic-net term, so a run from there reported a NaN objective.
* ``majorize``'s convergence left the message empty (Pyomo's ``results.solver.message``, the CLI's ``message``), where
  docs/conventions.md says it tells why the solver stopped.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

cp = pytest.importorskip("cvxpy")
pyo = pytest.importorskip("pyomo.environ")
sklearn = pytest.importorskip("sklearn")

from scipy.special import logsumexp
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

import varopt


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X)[:, :10], y


def _concave_data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((50, 4)), rng.choice([-1, 1], 50)


# --- bugs ---------------------------------------------------------------------------------------------------------

def test_proxsg_diverging_iterates_are_not_reported_converged_pyomo():
    """L1 logistic loss minus ||w||^2 (unbounded below), written in Pyomo, started at w = 0.1: the iterates run off.
    Before: 'ok / locallyOptimal', objective NaN, w ~ 1e156 loaded. Now: status 'numerical' (Pyomo warning / other),
    the last iterate with a finite objective loaded, and a message that names the cause."""
    X, y = _concave_data()
    m = pyo.ConcreteModel()
    m.w = pyo.Var(range(4), initialize=0.1)
    m.o = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-float(y[i]) * sum(float(X[i, j]) * m.w[j] for j in range(4))))
                                 for i in range(50)) / 50
                        - sum(m.w[j] ** 2 for j in range(4)) + 0.1 * sum(abs(m.w[j]) for j in range(4)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the overflow that ends the run
        r = pyo.SolverFactory("proxsg").solve(m)
    assert r.varopt_result.status == "numerical"
    assert r.solver.termination_condition != pyo.TerminationCondition.locallyOptimal
    assert "convex" in r.solver.message
    # the loaded point: finite, and its objective (recomputed in numpy: Pyomo's exp overflows there) is the reported
    # one; Pyomo's math.exp cannot evaluate log(1 + exp(.)) that far out, which is why it is recomputed here
    w = np.array([pyo.value(m.w[j]) for j in range(4)])
    f = np.logaddexp(0, -y * (X @ w)).mean() - w @ w + 0.1 * np.abs(w).sum()
    assert np.isfinite(w).all() and np.isfinite(f)
    assert r.varopt_result.objective == pytest.approx(f, rel=1e-9)


@pytest.mark.parametrize("variant", ["PA", "PB"])
def test_proxsg_diverging_iterates_are_not_reported_converged_cvxpy(variant):
    X, y = _concave_data()
    w = cp.Variable(4)
    w.value = np.full(4, 0.1)    # the model's values are proxsg's start
    prob = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-cp.multiply(y, X @ w))) / 50 - cp.sum_squares(w)
                                  + 0.1 * cp.norm1(w)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        val = prob.solve(method="proxsg", variant=variant)
    assert prob.varopt_result.status == "numerical"
    assert prob.status == "user_limit"
    assert np.isfinite(val) and np.isfinite(prob.value)
    assert val == pytest.approx(prob.value, rel=1e-9)


def test_proxsg_start_where_the_objective_overflows_is_named_without_lapack_noise(capfd):
    from varopt.errors import InputDataError
    A = np.random.default_rng(0).standard_normal((20, 3))
    x = cp.Variable(3)
    x.value = np.full(3, 400.0)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(A @ x)) / 20 + 0.1 * cp.norm1(x)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(InputDataError, match="NaN or inf"):
            prob.solve(method="proxsg")
    out, err = capfd.readouterr()
    assert "DLASCL" not in out + err                    # OpenBLAS's xerbla prints on stdout
    x.value = np.zeros(3)                              # from a sane start: Clarabel's optimum
    val = prob.solve(method="proxsg")
    assert val == pytest.approx(prob.solve(solver="CLARABEL"), rel=1e-7)


def test_proxsg_penalty_value_is_finite_far_out():
    from varopt.solvers.proxsg.penalty import SeparablePenalty
    pen = SeparablePenalty([0.1, 0.0, 0.2], [0.0, 0.0, 1.0], [0.0, 0.0, 0.5], [-np.inf] * 3, [np.inf] * 3)
    x = np.array([1e300, -1e300, 3.0])
    assert pen.value(x) == pytest.approx(0.1 * 1e300 + 0.2 * 2.0 + 0.5 * 9.0, rel=1e-15)
    x = np.array([-2.0, 5.0, 3.0])                          # the definition, term by term
    assert pen.value(x) == pytest.approx(0.1 * 2.0 + 0.2 * 2.0 + 0.5 * 9.0, rel=1e-15)


def test_sparse_ising_warns_at_its_iteration_limit_with_exact_gradients():
    from varopt.estimators import SparseIsing
    X = np.random.default_rng(0).choice([-1, 1], size=(200, 6))
    with pytest.warns(ConvergenceWarning, match="SparseIsing"):
        est = SparseIsing(rho=0.05, max_iter=2).fit(X)
    assert est.result_.status == "iteration_limit"
    # sampled gradients: the iteration budget is the normal end of an FB run, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        SparseIsing(rho=0.05, gradient="gibbs", max_iter=5).fit(X)
        SparseIsing(rho=0.05).fit(X)                   # converged: no warning either


@pytest.mark.parametrize("method", ["majorize", "lbfgs"])
def test_chain_crf_warns_at_its_iteration_limit(method):
    from varopt.estimators.crf import ChainCRF
    X = [["a", "b"], ["b"], ["a", "a", "b"]]
    Y = [["X", "Y"], ["Y"], ["X", "Y", "Y"]]
    with pytest.warns(ConvergenceWarning, match="ChainCRF"):
        ChainCRF(max_iter=2, method=method).fit(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ChainCRF(method=method).fit(X, Y)


def test_logistic_program_checks_labels_against_classes():
    from varopt.errors import InputDataError
    from varopt.formulations.logistic import logistic_program
    X, y = load_iris(return_X_y=True)
    yb = (y == 2).astype(int)
    solve = varopt.get_solver("majorize").solve
    with pytest.raises(InputDataError, match=r"y\[0\] = 0 is not one of classes \[-1, 1\]"):
        logistic_program(X, yb, 0.1, classes=[-1, 1])
    with pytest.raises(InputDataError, match="not one of classes"):
        logistic_program(X, y, 0.1, classes=[0, 1])           # label 2 is not a class
    with pytest.raises(InputDataError, match="repeated"):
        logistic_program(X, yb, 0.1, classes=[0, 0, 1])
    from varopt.formulations.latent_likelihood import (  # the same mapping (section 3)
        fit_em,
        latent_program,
    )
    with pytest.raises(InputDataError, match="not one of classes"):
        latent_program(X[:, :2], y, 2, 0.1, classes=np.array([0, 1]))
    with pytest.raises(InputDataError, match="not one of classes"):
        fit_em(X[:, :2], y, 2, classes=np.array([0, 1]))
    # classes in another order: the same fit with the roles swapped (block k is classes[k])
    a = solve(logistic_program(X, yb, 0.1)).x
    b = solve(logistic_program(X, yb, 0.1, classes=[1, 0])).x
    assert np.abs(a + b).max() < 1e-6
    # a class without samples is allowed (scikit-learn's labels=): its weights are only regularized
    r = solve(logistic_program(X, y, 0.1, False, classes=[0, 1, 2, 3]))
    assert r.status == "optimal"
    # ... but its intercept is not: b[3] -> -inf lowers every sample's loss, so no minimizer exists and the
    # attainment check says so (docs/majorize.md, "Separable data"; before it this was 'optimal' at b[3] ~ -20)
    prog = logistic_program(X, y, 0.1, classes=[0, 1, 2, 3])
    r = solve(prog)
    assert r.status == "numerical" and "not attained" in r.message
    v = r.info["attainment"]["direction"]
    bv = v[[prog.names.index(f"b[{k}]") for k in range(4)]]   # up to the common intercept shift (constancy)
    assert np.ptp(bv[:3]) < 1e-9 and bv[3] < bv[0] - 0.5 and np.abs(v[:16]).max() == 0   # W pinned by the ridge


def test_majorize_says_why_it_stopped():
    X, y = load_iris(return_X_y=True)
    m = pyo.ConcreteModel()
    m.w = pyo.Var(range(4))
    z = [sum(float(X[i, j]) * m.w[j] for j in range(4)) for i in range(150)]
    s = [1.0 if y[i] == 2 else -1.0 for i in range(150)]
    m.o = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(-s[i] * z[i])) for i in range(150)) / 150
                        + 0.01 * sum(m.w[j] ** 2 for j in range(4)))
    r = pyo.SolverFactory("majorize").solve(m)
    pyo.assert_optimal_termination(r)
    assert "tol=1e-08" in r.solver.message and "tol=1e-08" in r.varopt_result.message


# --- user forms against independent references (all agreed) ----------------------------------------------------------

def _clarabel(prob, *vars_):
    v = prob.solve(solver="CLARABEL")
    return v, [x.value.copy() for x in vars_]


@pytest.mark.parametrize("form", ["pm_multiply", "01_logistic_minus_yz", "mean_sum_abs", "no_intercept"])
def test_proxsg_l1_logistic_user_forms_match_clarabel(cancer, form):
    X, y01 = cancer
    n, d = X.shape
    ypm, lam = 2 * y01 - 1, 0.02
    w, b = cp.Variable(d), cp.Variable()
    z = X @ w + b
    if form == "pm_multiply":
        f = cp.sum(cp.logistic(-cp.multiply(ypm, z))) / n + lam * cp.norm1(w)
    elif form == "01_logistic_minus_yz":
        f = cp.sum(cp.logistic(z) - cp.multiply(y01, z)) / n + lam * cp.norm1(w)
    elif form == "mean_sum_abs":
        f = cp.mean(cp.logistic(-cp.multiply(ypm, z))) + lam * cp.sum(cp.abs(w))
    else:
        f = cp.sum(cp.logistic(-cp.multiply(ypm, X @ w))) / n + lam * cp.norm1(w)
    prob = cp.Problem(cp.Minimize(f))
    val = prob.solve(method="proxsg", variant="PN")
    assert prob.varopt_result.status == "converged"
    wv = w.value.copy()
    assert val == pytest.approx(prob.value, rel=1e-12)     # reported objective = CVXPY's evaluation
    ref, (wc,) = _clarabel(prob, w)
    assert val == pytest.approx(ref, rel=1e-7)
    assert np.abs(wv - wc).max() < 1e-4
    assert set(np.flatnonzero(np.abs(wv) > 1e-6)) == set(np.flatnonzero(np.abs(wc) > 1e-6))


def test_proxsg_pyomo_l1_logistic_matches_sklearn_saga(cancer):
    from sklearn.linear_model import LogisticRegression
    X, y = cancer
    X, y = X[:200, :6], y[:200]
    n, d = X.shape
    lam = 0.03
    m = pyo.ConcreteModel()
    m.w = pyo.Var(range(d))
    m.b = pyo.Var()
    z = [sum(float(X[i, j]) * m.w[j] for j in range(d)) + m.b for i in range(n)]
    m.o = pyo.Objective(expr=sum(pyo.log(1 + pyo.exp(z[i])) - float(y[i]) * z[i] for i in range(n)) / n
                        + lam * sum(abs(m.w[j]) for j in range(d)))
    r = pyo.SolverFactory("proxsg").solve(m, variant="PN")
    pyo.assert_optimal_termination(r)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # scikit-learn 1.8 deprecates penalty='l1' in favour of l1_ratio
        sk = LogisticRegression(penalty="l1", C=1.0 / (n * lam), solver="saga", tol=1e-12,
                                max_iter=100000).fit(X, y)
    wv = np.array([pyo.value(m.w[j]) for j in range(d)])
    assert np.abs(wv - sk.coef_[0]).max() < 1e-5
    assert abs(pyo.value(m.b) - sk.intercept_[0]) < 1e-5
    assert r.varopt_result.objective == pytest.approx(pyo.value(m.o), rel=1e-12)


def _ising_states(p):
    return np.array(list(itertools.product([-1, 1], repeat=p)), float)


def test_sparse_ising_matches_brute_force_enumeration():
    """SparseIsing (exact, PN) and the user's CVXPY model with log Z as an explicit log_sum_exp over all 2^p states,
    solved by proxsg, against Clarabel on that model and the negative log-likelihood recomputed by enumeration."""
    from varopt.estimators import SparseIsing
    p, n, rho = 6, 300, 0.05
    rng = np.random.default_rng(1)
    S = _ising_states(p)
    J0 = np.diag(rng.choice([-1, 1], p - 1) * 0.6, 1)
    e = S @ rng.uniform(-0.3, 0.3, p) + np.einsum("ti,ij,tj->t", S, J0, S)
    pr = np.exp(e - e.max())
    X = S[rng.choice(len(S), n, p=pr / pr.sum())]
    a, c = np.triu_indices(p, 1)
    F = np.hstack([S, S[:, a] * S[:, c]])
    mhat = np.r_[X.mean(0), (X[:, a] * X[:, c]).mean(0)]
    b, J = cp.Variable(p), cp.Variable(len(a))
    theta = cp.hstack([b, J])
    prob = cp.Problem(cp.Minimize(cp.log_sum_exp(F @ theta) - mhat @ theta + rho * cp.norm1(J)))

    def nll(th):
        return logsumexp(F @ th) - mhat @ th + rho * np.abs(th[p:]).sum()

    val = prob.solve(method="proxsg", variant="PN")
    th_user = np.r_[b.value, J.value]
    ref, (bc, Jc) = _clarabel(prob, b, J)
    est = SparseIsing(rho=rho).fit(X)
    for th in (th_user, est.theta_):
        assert nll(th) == pytest.approx(ref, rel=1e-8)
        assert np.abs(th - np.r_[bc, Jc]).max() < 1e-4
    assert val == pytest.approx(nll(th_user), rel=1e-12)
    assert est.score(X) == pytest.approx(mhat @ est.theta_ - logsumexp(F @ est.theta_), rel=1e-12)
    x = X[3]
    assert x @ est.coef_ @ x == pytest.approx(est.theta_[p:] @ (x[a] * x[c]), rel=1e-12)


def test_majorize_logistic_regression_matches_newton_cg(cancer):
    """MajorizeLogisticRegression on raw (unscaled) features, string labels, against scikit-learn's newton-cg (its
    lbfgs stops with |grad| ~ 1e-3 here, majorize at ~1e-9): the objective C sum loss + |w|^2/2 recomputed."""
    from sklearn.linear_model import LogisticRegression

    from varopt.estimators import MajorizeLogisticRegression
    X, y = load_breast_cancer(return_X_y=True)
    labels = np.where(y == 1, "benign", "malignant")
    m = MajorizeLogisticRegression(C=1.0, tol=1e-12).fit(X, labels)
    sk = LogisticRegression(C=1.0, tol=1e-14, solver="newton-cg", max_iter=1000).fit(X, labels)

    def f(w, c):
        s = 2 * (labels == m.classes_[1]) - 1
        return np.logaddexp(0, -s * (X @ w + c)).sum() + 0.5 * w @ w

    assert f(m.coef_[0], m.intercept_[0]) == pytest.approx(f(sk.coef_[0], sk.intercept_[0]), rel=1e-10)
    assert np.abs(m.predict_proba(X) - sk.predict_proba(X)).max() < 1e-5
    assert list(m.classes_) == list(sk.classes_)


@pytest.mark.parametrize("cons", ["none", "rows_sum_zero", "box", "nonneg"])
def test_majorize_multinomial_log_sum_exp_rows_match_clarabel(cons):
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    n, d = X.shape
    K, lam = 3, 0.05
    W, c = cp.Variable((d, K), nonneg=cons == "nonneg"), cp.Variable(K)
    Z = X @ W + np.ones((n, 1)) @ cp.reshape(c, (1, K), order="C")
    loss = cp.sum(cp.log_sum_exp(Z, axis=1)) - cp.sum(cp.multiply(np.eye(K)[y], Z))
    constraints = {"none": [], "rows_sum_zero": [cp.sum(W, axis=1) == 0],
                   "box": [W <= 0.5, W >= -0.5], "nonneg": []}[cons]
    prob = cp.Problem(cp.Minimize(loss / n + lam / 2 * cp.sum_squares(W)), constraints)
    val = prob.solve(method="majorize", tol=1e-12)
    assert prob.status == "optimal"
    Wv = W.value.copy()
    assert val == pytest.approx(prob.value, rel=1e-12)
    assert max([float(np.max(k.violation())) for k in prob.constraints] + [0.0]) < 1e-9
    ref, (Wc,) = _clarabel(prob, W)
    assert val == pytest.approx(ref, rel=1e-7)
    assert np.abs(Wv - Wc).max() < 1e-4


def test_chain_crf_objective_matches_brute_force_enumeration():
    """ChainCRF with user templates on a toy corpus: the fitted objective recomputed by enumerating every tag
    sequence, and the same optimum as the estimator's L-BFGS path."""
    from varopt.estimators.crf import ChainCRF
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "mat", "dog", "ran", "a"]
    tag = {"the": "D", "a": "D", "cat": "N", "mat": "N", "dog": "N", "sat": "V", "ran": "V", "on": "P"}
    X, Y = [], []
    for _ in range(25):
        sent = [str(w) for w in rng.choice(words, int(rng.integers(1, 5)))]
        X.append(sent)
        Y.append([tag[w] if rng.random() > 0.15 else str(rng.choice(list("DNVP"))) for w in sent])
    tpl = [lambda toks, t: ["w=" + toks[t]], lambda toks, t: ["bias"]]
    lam = 0.1
    crf = ChainCRF(templates=tpl, lam=lam, tol=1e-12, max_iter=2000).fit(X, Y)
    assert crf.result_.status == "optimal"
    K, F = crf.K_, crf.F_
    W, Tr = crf.theta_[:K * F].reshape(K, F), crf.theta_[K * F:].reshape(K, K)
    total = 0.0
    for sent, tags in zip(X, Y):
        phi = np.zeros((len(sent), F))
        for t, w in enumerate(sent):
            for f in ("w=" + w, "bias"):
                phi[t, crf.vocab_[f]] += 1
        S = phi @ W.T

        def score(ys, S=S):
            return sum(S[t, ys[t]] for t in range(len(ys))) + sum(Tr[ys[t - 1], ys[t]] for t in range(1, len(ys)))
        total += logsumexp([score(ys) for ys in itertools.product(range(K), repeat=len(sent))]) \
            - score([crf.label_index_[g] for g in tags])
    J = total + lam / 2 * crf.theta_ @ crf.theta_
    assert J == pytest.approx(crf.objective(), rel=1e-12)
    ref = ChainCRF(templates=tpl, lam=lam, method="lbfgs", tol=1e-14, max_iter=5000).fit(X, Y)
    assert J <= ref.objective() + 1e-9 * abs(J)
    assert J == pytest.approx(ref.objective(), rel=1e-9)
