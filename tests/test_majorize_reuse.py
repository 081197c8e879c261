"""Option bound_reuse (varopt/solvers/majorize/reuse.py): quasi-Newton trials on a reused bound, monotone by
value, with Algorithm 2's bound step as fallback. Checked against enumeration, L-BFGS and Algorithm 2 itself."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize as scipy_minimize

import varopt.solvers.majorize.reuse as reuse
from varopt import get_solver
from varopt.errors import InputDataError, InvalidOptionError
from varopt.estimators.crf import ChainCRF
from varopt.solvers.majorize import minimize
from varopt.solvers.majorize.bound import compute_bound

from majorize_checks import assert_same_pairs, restricted_reference
from test_crf import X, Y, _brute
from test_majorize_bound_oracle import _problem, _program


@pytest.mark.parametrize("metric", ["bound", "scalar"])
@pytest.mark.parametrize("k", [1, 3, 100])
def test_crf_reuse_is_monotone_by_enumeration_and_reaches_lbfgs(metric, k):
    iterates = []
    a = ChainCRF(lam=0.5, method="majorize", tol=1e-13, max_iter=300, bound_reuse=k, reuse_metric=metric,
                 callback=lambda th, J: iterates.append((th.copy(), J))).fit(X, Y)
    b = ChainCRF(lam=0.5, method="lbfgs", tol=1e-14, max_iter=2000).fit(X, Y)
    assert a.result_.status == "optimal"
    # every iterate's objective recomputed by enumerating all labellings: what was reported, and decreasing
    f = np.array([_brute(a, th) for th, _ in iterates])
    assert np.allclose(f, [J for _, J in iterates], rtol=1e-12, atol=0)
    f = np.concatenate([[_brute(a, np.zeros(a.d_))], f])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    assert abs(a.objective() - b.objective()) <= 1e-9 * abs(b.objective())
    ref = scipy_minimize(lambda th: a.oracle(th)[:2], b.theta_, jac=True, method="L-BFGS-B",
                         options={"ftol": 1e-16, "gtol": 1e-12, "maxiter": 5000}).x
    assert np.abs(a.theta_ - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())
    st = a.result_.info["bound_reuse"]
    assert st["accepted"] > 0 and st["bounds"] >= 1
    assert st["trials"] == st["accepted"] + st["rejected"]
    assert a.predict(X) == Y


def test_crf_line_reference_is_used_and_only_with_a_positive_definite_regularizer():
    """ChainCRF's default (scalar metric) takes its reference curvature along the gradient (no dense Sigma when
    every trial is accepted); with lam = 0 (a singular H) the dense reference and its range test stay."""
    a = ChainCRF(lam=0.5, method="majorize", tol=1e-13, max_iter=300).fit(X, Y)
    st = a.result_.info["bound_reuse"]
    assert st.get("line", 0) >= 1 and st["bounds"] >= st["line"]
    b = ChainCRF(lam=0.0, method="majorize", tol=1e-10, max_iter=30).fit(X, Y)
    assert b.result_.info["bound_reuse"].get("line", 0) == 0 and b.result_.info["bound_reuse"]["bounds"] >= 1
    f = np.array([h["objective"] for h in b.history_])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))


def test_crf_line_reference_with_rejections_falls_back_to_dense_bound_steps(monkeypatch):
    """A demanding acceptance test on the line reference: rejected trials take Algorithm 2's step on a fresh dense
    junction-tree Sigma (checked against its majorizer), accepted ones mix in; every iterate's objective, by
    enumeration, is the reported one and decreases, and the optimum is L-BFGS's."""
    monkeypatch.setattr(reuse, "ETA", 3.0)
    iterates = []
    a = ChainCRF(lam=0.5, method="majorize", tol=1e-13, max_iter=300, bound_reuse=3,
                 callback=lambda th, J: iterates.append((th.copy(), J))).fit(X, Y)
    st = a.result_.info["bound_reuse"]
    assert st["rejected"] > 0 and st["accepted"] > 0 and st["line"] >= 1 and st["bounds"] > st["line"]
    f = np.array([_brute(a, th) for th, _ in iterates])
    assert np.allclose(f, [J for _, J in iterates], rtol=1e-12, atol=0)
    f = np.concatenate([[_brute(a, np.zeros(a.d_))], f])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    b = ChainCRF(lam=0.5, method="lbfgs", tol=1e-14, max_iter=2000).fit(X, Y)
    assert a.result_.status == "optimal" and abs(a.objective() - b.objective()) <= 1e-9 * abs(b.objective())


def test_all_trials_rejected_is_algorithm_2(monkeypatch):
    """With an unattainable acceptance test every iteration falls back to the bound step on a fresh Sigma:
    the iterates are those of Algorithm 2 (bound_reuse=0) and each is checked against its majorizer."""
    sm, lam = _problem(seed=2)
    n = sm.A.shape[1]
    ref = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-12, max_iter=15)
    monkeypatch.setattr(reuse, "ETA", 1e30)
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-12, max_iter=15, bound_reuse=4)
    st = res.info["bound_reuse"]
    assert st["accepted"] == 0 and st["rejected"] == st["trials"] == res.iterations
    assert st["backtracks"] == reuse.BACKTRACK * st["trials"]
    assert st["bounds"] == res.iterations  # a fresh Sigma at every iterate
    fa = np.array([h["objective"] for h in ref.history])
    fb = np.array([h["objective"] for h in res.history])
    assert len(fa) == len(fb) and np.allclose(fa, fb, rtol=1e-12, atol=0)
    assert np.allclose(res.x, ref.x, rtol=0, atol=1e-12 * max(1.0, np.abs(ref.x).max()))


@pytest.mark.parametrize("classes", [2, 4])
def test_compiled_all_trials_rejected_is_algorithm_2(monkeypatch, classes):
    """Compiled programs: with an unattainable acceptance test the first (Hessian) trial and every later one are
    rejected and the iterates are Algorithm 2's (bound_reuse=0), dense step (binary) and Kronecker/CG (4 classes)."""
    from varopt.formulations.logistic import logistic_program
    rng = np.random.default_rng(classes)
    X = rng.normal(size=(120, 5))
    y = np.argmax(X @ rng.normal(size=(5, classes)) + rng.gumbel(size=(120, classes)), axis=1)
    prog = logistic_program(X, y, 1.0)
    kw = dict(tol=1e-12, max_iter=12) | ({"step_solver": "cg"} if classes > 2 else {})
    ref = get_solver("majorize").solve(prog, bound_reuse=0, **kw)
    monkeypatch.setattr(reuse, "ETA", 1e30)
    res = get_solver("majorize").solve(prog, **kw)
    st = res.info["bound_reuse"]
    assert st["hessians"] == 1 and st["accepted"] == 0 and st["rejected"] == st["trials"] >= 1
    fa = np.array([h["objective"] for h in ref.history])
    fb = np.array([h["objective"] for h in res.history])
    assert len(fa) == len(fb) and np.allclose(fa, fb, rtol=1e-12, atol=0)


def test_some_trials_rejected_still_monotone_and_optimal(monkeypatch):
    """A demanding acceptance test (but not an impossible one): rejections and accepted trials mix."""
    sm, lam = _problem(seed=3, t=60, d=4)
    n = sm.A.shape[1]
    monkeypatch.setattr(reuse, "ETA", 2.0)
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-13, bound_reuse=5, reuse_metric="scalar")
    st = res.info["bound_reuse"]
    assert st["rejected"] > 0 and st["accepted"] > 0
    ref = scipy_minimize(lambda th: sm.value_grad(th, lam), np.zeros(n), jac=True, method="L-BFGS-B",
                         options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 5000})
    assert res.status == "optimal" and abs(res.objective - ref.fun) <= 1e-9 * abs(ref.fun)
    f = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    assert np.isclose(res.objective, sm.value_grad(res.x, lam)[0], rtol=1e-12)


@pytest.mark.parametrize("metric", ["bound", "scalar"])
def test_user_oracle_with_reuse_matches_program_path(metric):
    sm, lam = _problem()
    n = sm.A.shape[1]
    res = minimize(sm, np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-13, bound_reuse=3, reuse_metric=metric)
    prog = get_solver("majorize").solve(_program(sm, lam), tol=1e-13)
    assert res.status == "optimal"
    assert abs(res.objective - prog.objective) <= 1e-9 * abs(prog.objective)
    assert np.abs(res.x - prog.x).max() <= 1e-6 * max(1.0, np.abs(prog.x).max())
    f = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))


def test_user_oracle_with_curvature_along_uses_the_line_reference():
    """A user oracle that gives V^T Sigma V (here from its own dense Sigma): with the scalar metric and H = lam I the
    line reference is used, the run is monotone and reaches the program path's optimum; a negative u^T Sigma u is an
    error naming curvature_along; with a singular H the dense reference is kept."""
    sm, lam = _problem()
    n = sm.A.shape[1]

    class Along:
        def __init__(self, sign=1.0):
            self.sign = sign

        def partition_bound(self, theta, want_sigma):
            return sm.partition_bound(theta, want_sigma)

        def curvature_along(self, theta, V):
            return self.sign * float(V @ sm.partition_bound(theta, True)[2] @ V)
    res = minimize(Along(), np.zeros(n), quadratic=lam, linear=sm.gold, tol=1e-13, bound_reuse=3, reuse_metric="scalar")
    prog = get_solver("majorize").solve(_program(sm, lam), tol=1e-13)
    assert res.status == "optimal" and res.info["bound_reuse"]["line"] >= 1
    assert abs(res.objective - prog.objective) <= 1e-9 * abs(prog.objective)
    f = np.array([h["objective"] for h in res.history])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
    with pytest.raises(InputDataError, match="curvature_along"):
        minimize(Along(-1.0), np.zeros(n), quadratic=lam, linear=sm.gold, bound_reuse=3, reuse_metric="scalar")
    H = np.full(n, lam)
    H[0] = 0.0
    res = minimize(Along(), np.zeros(n), quadratic=H, linear=sm.gold, tol=1e-10, bound_reuse=3, reuse_metric="scalar")
    assert res.info["bound_reuse"].get("line", 0) == 0 and res.info["bound_reuse"]["bounds"] >= 1


def test_reuse_options_are_validated():
    sm, lam = _problem()
    n = sm.A.shape[1]
    with pytest.raises(InvalidOptionError, match="bound_reuse"):
        minimize(sm, np.zeros(n), quadratic=lam, bound_reuse=-1)
    with pytest.raises(InvalidOptionError, match="bound_reuse"):
        minimize(sm, np.zeros(n), quadratic=lam, bound_reuse=1.5)
    with pytest.raises(InvalidOptionError, match="reuse_metric"):
        minimize(sm, np.zeros(n), quadratic=lam, bound_reuse=2, reuse_metric="newton")
    with pytest.raises(InvalidOptionError, match="reuse_metric.*bound_reuse"):
        minimize(sm, np.zeros(n), quadratic=lam, reuse_metric="scalar")
    with pytest.raises(InvalidOptionError, match="lowrank"):
        minimize(sm, np.zeros(n), quadratic=lam, bound_reuse=2, bound="lowrank")
    with pytest.raises(InvalidOptionError, match="bound_reuse"):
        get_solver("majorize").solve(_program(sm, lam), bound_reuse="always")
    with pytest.raises(InvalidOptionError, match="bound_reuse"):
        get_solver("majorize").solve(_program(sm, lam), bound_reuse=True)
    with pytest.raises(InvalidOptionError, match="reuse_metric.*bound_reuse"):
        get_solver("majorize").solve(_program(sm, lam), bound_reuse=0, reuse_metric="scalar")
    with pytest.raises(InvalidOptionError, match="lowrank"):
        get_solver("majorize").solve(_program(sm, lam), bound_reuse=3, bound="lowrank")
    with pytest.raises(InvalidOptionError, match="bound_reuse"):
        ChainCRF(lam=0.5, bound_reuse=-3).fit(X, Y)
    with pytest.raises(InvalidOptionError, match="reuse_metric"):
        ChainCRF(lam=0.5, reuse_metric="diag").fit(X, Y)
    for bad in (0, -2, 2.5, True):
        with pytest.raises(InvalidOptionError, match="reuse_pairs"):
            get_solver("majorize").solve(_program(sm, lam), reuse_pairs=bad)
        with pytest.raises(InvalidOptionError, match="memory"):
            ChainCRF(lam=0.5, memory=bad).fit(X, Y)
    with pytest.raises(InvalidOptionError, match="reuse_pairs.*bound_reuse"):
        get_solver("majorize").solve(_program(sm, lam), bound_reuse=0, reuse_pairs=5)


def test_reuse_pairs_is_the_memory_of_the_trials():
    """``reuse_pairs`` caps the L-BFGS pairs the trials use (most recent first), ChainCRF's ``memory`` reaches both
    majorize (``reuse_pairs``) and L-BFGS-B (``maxcor``: a different memory changes L-BFGS-B's iterates), and
    runs with 1 and 30 pairs reach the same optimum monotonically."""
    from varopt.solvers.majorize.reuse import ScaledCurvature
    rng = np.random.default_rng(3)
    sc = ScaledCurvature(5, "scalar", memory=3)
    moves = [(rng.normal(size=4), None) for _ in range(5)]
    for s, _ in moves:
        sc.moved(s, 2.0 * s, None, None)
    assert [id(p[0]) for p in sc.pairs] == [id(s) for s, _ in moves[::-1][:3]]
    sm, lam = _problem()
    got = {}
    for k in (1, 30):
        res = get_solver("majorize").solve(_program(sm, lam), tol=1e-13, bound_reuse=100, reuse_pairs=k)
        f = np.array([h["objective"] for h in res.history])
        assert res.status == "optimal" and np.all(np.diff(f) <= 1e-12 * np.abs(f[:-1]))
        got[k] = res.objective
    assert got[1] == pytest.approx(got[30], rel=1e-9)
    a = ChainCRF(lam=0.5, memory=4, tol=1e-12).fit(X, Y)
    assert a.result_.options["reuse_pairs"] == 4
    b3 = ChainCRF(lam=0.5, method="lbfgs", memory=1, tol=1e-14, max_iter=2000).fit(X, Y)
    b30 = ChainCRF(lam=0.5, method="lbfgs", memory=30, tol=1e-14, max_iter=2000).fit(X, Y)
    assert [h["objective"] for h in b3.history_] != [h["objective"] for h in b30.history_]
    assert b3.objective() == pytest.approx(b30.objective(), rel=1e-7)
    assert a.objective() == pytest.approx(b30.objective(), rel=1e-7)


def test_bad_problems_reported_as_without_reuse():
    """An objective affine along a flat direction of the bound is 'unbounded' at once, and one that decreases
    without bound while the bound never flattens ends with 'diverging iterates', with or without reuse."""
    def flat(theta, want_sigma):  # log Z = theta_0 + log(e^{theta_1} + e^{-theta_1})
        lz = theta[0] + np.logaddexp(theta[1], -theta[1])
        mu = np.array([1.0, np.tanh(theta[1])])
        return lz, mu, np.diag([0.0, 1.0]) if want_sigma else None

    A = sp.csr_matrix(np.array([[2.0], [0.0]]))

    def lse2(theta, want_sigma):  # log(1 + e^{2x}) by Algorithm 1: f = log(1 + e^{2x}) - 3x -> -inf
        bp = compute_bound(A, np.zeros(2), np.zeros(2, int), theta, want_mu=True)
        return float(bp.logz.sum()), bp.mu.sum(0), bp.sigma() if want_sigma else None
    for k in (0, 3):
        for metric in (["bound", "scalar"] if k else [None]):
            kw = dict(bound_reuse=k, **({"reuse_metric": metric} if metric else {}))
            res = minimize(flat, np.zeros(2), quadratic=[0.0, 1.0], linear=[0.0, 0.3], **kw)
            assert res.status == "unbounded" and res.iterations == 1 and res.objective == -np.inf
            res = minimize(lse2, np.zeros(1), linear=[-3.0], max_iter=100000, **kw)
            assert res.status == "error" and "diverging iterates" in res.message and res.objective < -1e19


# --- compiled programs (bound_reuse='auto', the solver's default) -------------------------------------------------
def _trace(prog, **opts):
    xs = []
    res = get_solver("majorize").solve(prog, callback=lambda it, x, f: xs.append(np.array(x)) and False, **opts)
    return res, xs


def _monotone_by_independent_evaluation(prog, res, xs):
    """Every iterate's objective, recomputed from the program's own expression (not the solver's model),
    is the reported one and never increases."""
    f = np.array([prog.objective.value(x) for x in xs])
    rep = np.array([h["objective"] for h in res.history[1:len(xs) + 1]])
    assert np.allclose(f, rep, rtol=1e-11, atol=1e-11)
    assert np.all(np.diff(f) <= 1e-12 * np.maximum(1.0, np.abs(f[:-1])))


def _lbfgs_opt(prog):
    from varopt.solvers.majorize.model import MajorizeModel
    ref = scipy_minimize(MajorizeModel(prog).value_and_gradient, np.zeros(prog.n), jac=True, method="L-BFGS-B",
                         options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 20000})
    return ref.fun


@pytest.mark.parametrize("C", [2, 4])
def test_compiled_default_reuse_is_monotone_and_reaches_the_optimum(C):
    """Binary and multinomial logistic regression (dense step): the default trials are accepted, every iterate
    decreases the independently evaluated objective, and the optimum is Algorithm 2's and L-BFGS's."""
    from varopt.formulations.logistic import logistic_program
    rng = np.random.default_rng(C)
    X = rng.normal(size=(120, 6))
    y = np.argmax(X @ rng.normal(size=(6, C)) + rng.gumbel(size=(120, C)), axis=1)
    prog = logistic_program(X, y, 2.0)
    res, xs = _trace(prog, tol=1e-13)
    st = res.info["bound_reuse"]
    assert res.status == "optimal" and st["k"] == 100 and st["accepted"] >= 2
    _monotone_by_independent_evaluation(prog, res, xs)
    alg2 = get_solver("majorize").solve(prog, tol=1e-13, bound_reuse=0)
    assert "bound_reuse" not in alg2.info
    fl = _lbfgs_opt(prog)
    assert abs(res.objective - alg2.objective) <= 1e-10 * abs(alg2.objective)
    assert res.objective <= fl + 1e-10 * abs(fl)
    for k in (1, 3):  # a bound at most k moves old
        rk, xk = _trace(prog, tol=1e-13, bound_reuse=k, reuse_metric="scalar")
        _monotone_by_independent_evaluation(prog, rk, xk)
        assert abs(rk.objective - alg2.objective) <= 1e-10 * abs(alg2.objective)
    off = get_solver("majorize").solve(prog, tol=1e-13, extrapolate=False)
    assert "bound_reuse" not in off.info  # extrapolate=False runs Algorithm 2 exactly


def test_kronecker_metric_on_the_cg_path():
    """Class-template features on the CG step: trials use the Kronecker approximation Pbar of the bound
    (precondition_matvec is its inverse's inverse), stay monotone and reach L-BFGS's optimum."""
    from varopt.formulations.logistic import logistic_program
    from varopt.solvers.majorize.model import MajorizeModel
    from varopt.solvers.majorize.reuse_metric import KronMetric
    from varopt.solvers.majorize.structured import StructuredSigma
    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, 8))
    y = np.argmax(2 * X @ rng.normal(size=(8, 5)) + rng.gumbel(size=(150, 5)), axis=1)
    prog = logistic_program(X, y, 1.5)
    model = MajorizeModel(prog)
    grp = model.groups
    th = rng.normal(size=prog.n) * 0.3
    met = KronMetric(StructuredSigma(grp, grp.factors(grp.scores(th)), model.Hd))
    assert met.ok
    v = rng.normal(size=prog.n)
    diff = met.solve(met.op.precondition_matvec(v)) - v
    cm = np.asarray(grp.template[1])
    diff[cm[:, -1]] -= diff[cm[:, -1]].mean()  # up to the flat common intercept shift (only eps/delta act there)
    assert np.abs(diff).max() <= 1e-8 * np.abs(v).max()
    assert np.abs(met.op.precondition_matvec(v) - met.op.matvec(v)).max() > 1e-3  # Pbar is not the bound
    res, xs = _trace(prog, tol=1e-13, step_solver="cg", bound_reuse=100)
    assert res.status == "optimal" and res.info["bound_reuse"]["accepted"] >= 2
    _monotone_by_independent_evaluation(prog, res, xs)
    fl = _lbfgs_opt(prog)
    assert abs(res.objective - fl) <= 1e-9 * abs(fl)


@pytest.mark.parametrize("c", [2, 3, 5])
def test_hessian_factors_give_the_softmax_covariance(c):
    """``factors(S, hessian=True)``: ``T_g^T T_g = diag(W_g) - W_g W_g^T / c_g`` (the Hessian of ``c_g log Z_g`` in score
    space, brute force) for groups of unequal sizes (padding), huge score gaps and ties; the dense first metric of a
    binary logistic program equals central differences of its gradient."""
    from varopt.solvers.majorize.groups import PaddedGroups
    rng = np.random.default_rng(c)
    sizes = rng.integers(1, c + 1, size=40)
    sizes[0] = c
    seg = np.repeat(np.arange(sizes.size), sizes)
    K = seg.size
    A = sp.csr_matrix(rng.normal(size=(K, 4)))
    b = rng.normal(size=K) * 3
    b[:3] = [40.0, -40.0, 0.0]  # huge score gaps
    coef = rng.uniform(0.5, 2.0, size=sizes.size)
    grp = PaddedGroups(A, b, seg, coef)
    S = grp.scores(rng.normal(size=4))
    _, W = grp.value_weights(S)
    T = grp.factors(S, hessian=True)
    for g in range(grp.G):
        want = np.diag(W[g]) - np.outer(W[g], W[g]) / coef[g]
        assert np.abs(T[g].T @ T[g] - want).max() <= 1e-13 * max(1.0, coef[g])


def test_dense_hessian_first_metric_of_a_binary_program():
    from varopt.formulations.logistic import logistic_program
    from varopt.solvers.majorize.model import MajorizeModel
    from varopt import get_solver
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 5))
    y = (X @ rng.normal(size=5) + rng.logistic(size=80) > 0).astype(int)
    prog = logistic_program(X, y, 1.0)
    model = MajorizeModel(prog)
    x = rng.normal(size=prog.n) * 0.5
    _, _, S = model.evaluate(x)
    opts = get_solver("majorize").options.validate({})
    met = model.reuse_metric(x, S, opts, exact=False)
    assert met is not None and met.kind == "dense" and not met.exact
    for _ in range(3):
        v = rng.normal(size=prog.n)
        fd = (model.gradient(x + 1e-5 * v) - model.gradient(x - 1e-5 * v)) / 2e-5
        assert np.abs(met.P @ v - fd).max() <= 1e-6 * np.abs(fd).max()


def test_kronecker_hessian_first_metric():
    """The first metric of the Kronecker path approximates the objective's Hessian: at theta = 0 every sample has the
    same softmax weights, so I (x) B + Mbar (x) C is the Hessian exactly (checked against central differences of the
    gradient, off the regularization), and its Mbar is sum_g w_g (diag(W_g) - W_g W_g^T / c_g) by brute force at a
    random point; trials starting from it stay monotone and reach L-BFGS's optimum."""
    from varopt.formulations.logistic import logistic_program
    from varopt.solvers.majorize.model import MajorizeModel
    from varopt.solvers.majorize.reuse_metric import KronMetric
    from varopt.solvers.majorize.structured import KronHessian, _kron_cache
    rng = np.random.default_rng(11)
    X = rng.normal(size=(120, 6))
    y = np.argmax(X @ rng.normal(size=(6, 4)) + rng.gumbel(size=(120, 4)), axis=1)
    prog = logistic_program(X, y, 2.0)
    model = MajorizeModel(prog)
    grp = model.groups
    x0 = np.zeros(prog.n)
    _, _, S = model.evaluate(x0)
    met = KronMetric(KronHessian(grp, S[1], model.Hd))
    assert met.ok
    for _ in range(3):
        v = rng.normal(size=prog.n)
        h = 1e-5
        fd = (model.gradient(x0 + h * v) - model.gradient(x0 - h * v)) / (2 * h)
        Pv = met.op.precondition_matvec(v, regularized=False)
        assert np.abs(Pv - fd).max() <= 1e-6 * np.abs(fd).max()
    th = rng.normal(size=prog.n) * 0.5
    _, _, S = model.evaluate(th)
    op = KronHessian(grp, S[1], model.Hd)
    w = _kron_cache(grp)["w"]
    W = S[1][:, grp.template[0]]
    brute = sum(w[g] * (np.diag(W[g]) - np.outer(W[g], W[g]) / grp.coef[g]) for g in range(grp.G))
    assert np.abs(op._mbar(w) - brute).max() <= 1e-12 * np.abs(brute).max()
    res, xs = _trace(prog, tol=1e-13, step_solver="cg", bound_reuse=100)
    assert res.status == "optimal" and res.info["bound_reuse"]["accepted"] >= 2
    _monotone_by_independent_evaluation(prog, res, xs)
    fl = _lbfgs_opt(prog)
    assert abs(res.objective - fl) <= 1e-9 * abs(fl)


def _feasible(prog, x, tol=1e-9):
    """Independent feasibility check on the program's original rows and bounds (numpy on its data)."""
    A, lo, hi, _ = prog.linear_constraints()
    ax = A @ x
    sc = lambda v: tol * np.maximum(1.0, np.abs(v))  # noqa: E731
    with np.errstate(invalid="ignore"):
        return bool(np.all(x >= prog.lb - sc(prog.lb)) and np.all(x <= prog.ub + sc(prog.ub))
                    and np.all(ax >= lo - sc(lo)) and np.all(ax <= hi + sc(hi)))


@pytest.mark.parametrize("seed", range(4))
def test_constrained_trials_stay_feasible_and_reach_algorithm_2s_optimum(seed):
    """Random bound rows written as rows (x_j >= l, -x_j >= ..., scaled), bounds and a dense row, some active at
    the optimum: every iterate of the default (face-restricted trials) is feasible by an independent check,
    the objective decreases, and the optimum equals Algorithm 2's (bound_reuse=0) and Clarabel's."""
    from varopt.formulations.logistic import logistic_program
    from varopt.program import Program
    from varopt.program.expression import Expression
    from varopt.program.program import Constraint
    rng = np.random.default_rng(seed)
    t, d, C = 100, 5, 3
    X = rng.normal(size=(t, d))
    y = np.argmax(2 * X @ rng.normal(size=(d, C)) + rng.gumbel(size=(t, C)), axis=1)
    prog = logistic_program(X, y, 0.5)
    n = prog.n
    cons = []
    for j in rng.choice(n, size=4, replace=False):  # singleton rows: a x_j >= 0.05 a or <= (sign of a random)
        a = rng.choice([-2.0, 0.5, 3.0])
        e = np.zeros(n)
        e[j] = a
        cons.append(Constraint(f"b{j}", Expression(n, linear=e), 0.05 * a if a > 0 else -np.inf,
                               0.05 * a if a < 0 else np.inf))
    cons.append(Constraint("sum", Expression(n, linear=rng.normal(size=n)), -np.inf, 0.1))
    lb = np.full(n, -np.inf)
    ub = np.full(n, np.inf)
    ub[rng.choice(n, size=2, replace=False)] = -0.02
    cprog = Program(prog.names, lb, ub, prog.objective, cons)
    res, xs = _trace(cprog, tol=1e-13, max_iter=2000)
    assert res.status == "optimal" and res.info["bound_reuse"]["k"] == 100
    assert res.info["bound_reuse"]["trials"] >= 1
    assert all(_feasible(cprog, x) for x in xs)
    _monotone_by_independent_evaluation(cprog, res, xs)
    alg2 = get_solver("majorize").solve(cprog, tol=1e-13, max_iter=2000, bound_reuse=0)
    assert abs(res.objective - alg2.objective) <= 1e-9 * abs(alg2.objective)
    cp = pytest.importorskip("cvxpy")
    A, lo, hi, _ = cprog.linear_constraints()
    th = cp.Variable(n)
    Xa = np.hstack([X, np.ones((t, 1))])
    W = cp.reshape(th[:C * d], (C, d), order="C")
    S = X @ W.T + cp.reshape(th[C * d:], (1, C), order="C")
    obj = cp.sum(cp.log_sum_exp(S, axis=1)) - cp.sum(cp.multiply(np.eye(C)[y], S)) + 0.25 * cp.sum_squares(th[:C * d])
    Ad = A.toarray()
    rows = [Ad[i] @ th >= lo[i] for i in range(len(lo)) if np.isfinite(lo[i])]
    rows += [Ad[i] @ th <= hi[i] for i in range(len(hi)) if np.isfinite(hi[i])]
    rows += [th[j] <= ub[j] for j in np.flatnonzero(np.isfinite(ub))]
    ref = cp.Problem(cp.Minimize(obj), rows)
    ref.solve(solver="CLARABEL")
    assert Xa.shape[1] == d + 1
    assert abs(ref.value - cprog.objective.value(res.x)) <= 1e-6 * abs(ref.value)


def test_singleton_rows_become_bounds_with_the_same_feasible_set():
    from varopt.solvers.majorize.model import singleton_rows_to_bounds
    rng = np.random.default_rng(0)
    n = 4
    A = sp.csr_matrix(np.array([[2.0, 0, 0, 0], [0, -0.5, 0, 0], [1.0, 1.0, 0, 0], [0, 0, 0, 3.0], [0, 0, 0, 0]]))
    lo = np.array([1.0, -np.inf, -1.0, -3.0, -1.0])
    hi = np.array([np.inf, 0.25, 1.0, 6.0, 1.0])
    lb, ub = np.full(n, -5.0), np.array([5.0, 5.0, 5.0, 1.5])
    A2, lo2, hi2, lb2, ub2 = singleton_rows_to_bounds(A, lo, hi, lb, ub)
    assert A2.shape[0] == 2 and np.array_equal(lb, np.full(n, -5.0))  # inputs untouched
    for _ in range(2000):
        x = rng.uniform(-6, 6, size=n)
        a = np.all(A @ x >= lo) and np.all(A @ x <= hi) and np.all(x >= lb) and np.all(x <= ub)
        b = np.all(A2 @ x >= lo2) and np.all(A2 @ x <= hi2) and np.all(x >= lb2) and np.all(x <= ub2)
        assert a == b


def test_constrained_infeasible_and_unbounded_reported_with_reuse():
    """Bad inputs with the default (trials on): an infeasible pair of singleton rows is 'infeasible', a feasible
    direction of no curvature with negative slope is 'unbounded' (as with bound_reuse=0)."""
    from varopt.program import Program
    from varopt.program.expression import Expression
    from varopt.program.program import Constraint
    from varopt.program.terms import LseGroup, QuadraticTerms
    A = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 0.0]]))
    obj = Expression(2, quadratic=QuadraticTerms(np.array([1]), np.array([1]), np.array([0.5]), 2),
                     linear=np.array([-1.0, 0.0]),
                     lse=[LseGroup(A=sp.csr_matrix(np.array([[0.0, 1.0], [0.0, -1.0]])), b=np.zeros(2),
                                   seg=np.zeros(2, int), coef=np.ones(1))])
    c1 = Constraint("a", Expression(2, linear=np.array([1.0, 0.0])), 1.0, np.inf)
    c2 = Constraint("b", Expression(2, linear=np.array([-2.0, 0.0])), 0.0, np.inf)
    for k in ("auto", 0):
        res = get_solver("majorize").solve(Program(["x", "y"], np.full(2, -np.inf), np.full(2, np.inf), obj,
                                                   [c1, c2]), bound_reuse=k)
        assert res.status == "infeasible"
        res = get_solver("majorize").solve(Program(["x", "y"], np.full(2, -np.inf), np.full(2, np.inf), obj,
                                                   [c1]), bound_reuse=k)
        assert res.status == "unbounded" and res.objective == -np.inf
    del A


def test_constrained_kronecker_trials_feasible_and_optimal():
    """A wide multinomial (n > 256, class templates) with bound rows and an inactive row: the trials use the
    Kronecker metric restricted to the free variables (bordered system; checked against the dense Pbar_FF),
    every iterate is feasible by an independent check and the optimum is Algorithm 2's."""
    from varopt.formulations.logistic import logistic_program
    from varopt.program import Program
    from varopt.program.expression import Expression
    from varopt.program.program import Constraint
    from varopt.solvers.majorize.model import MajorizeModel
    from varopt.solvers.majorize.reuse_metric import KronMetric
    from varopt.solvers.majorize.structured import StructuredSigma
    rng = np.random.default_rng(11)
    t, d, C = 200, 29, 10
    X = rng.normal(size=(t, d))
    y = np.argmax(2 * X @ rng.normal(size=(d, C)) + rng.gumbel(size=(t, C)), axis=1)
    prog = logistic_program(X, y, 1.0)
    n = prog.n
    assert n > 256
    cons = [Constraint(f"p{j}", Expression(n, linear=np.eye(n)[j]), 0.0, np.inf) for j in range(6)]
    cons.append(Constraint("sum", Expression(n, linear=np.r_[np.zeros(6), np.ones(6), np.zeros(n - 12)]), -np.inf, 5.0))
    cprog = Program(prog.names, np.full(n, -np.inf), np.full(n, np.inf), prog.objective, cons)
    res, xs = _trace(cprog, tol=1e-12, max_iter=3000)
    st = res.info["bound_reuse"]
    assert res.status == "optimal" and st["accepted"] >= 3
    assert all(_feasible(cprog, x) for x in xs)
    _monotone_by_independent_evaluation(cprog, res, xs)
    alg2 = get_solver("majorize").solve(cprog, tol=1e-12, max_iter=3000, bound_reuse=0)
    assert abs(res.objective - alg2.objective) <= 1e-9 * abs(alg2.objective)
    assert cprog.max_violation(res.x) <= 1e-9
    # the restricted Kronecker solve equals the dense Pbar_FF solve
    model = MajorizeModel(prog)
    grp = model.groups
    met = KronMetric(StructuredSigma(grp, grp.factors(grp.scores(rng.normal(size=n) * 0.2)), model.Hd))
    Pbar = np.column_stack([met.op.precondition_matvec(e) for e in np.eye(n)])
    F = np.ones(n, bool)
    F[[0, 3, 7, 40]] = False
    sub = met.restricted(F)
    v = rng.normal(size=F.sum())
    w = sub.solve(v)
    # backward error (Pbar is nearly singular along the common intercept shift, so w is large there)
    PF = Pbar[np.ix_(F, F)]
    scale = np.linalg.norm(PF, 2) * np.linalg.norm(w)
    assert np.linalg.norm(PF @ w - v) <= 1e-12 * scale
    # the range test uses Pbar without its regularization (delta, eps): flat directions stay flat
    P0 = np.column_stack([met.op.precondition_matvec(e, regularized=False) for e in np.eye(n)])
    assert abs(sub.residual(w, v) - np.linalg.norm(P0[np.ix_(F, F)] @ w - v)) <= 1e-12 * scale


def test_unbounded_along_the_flat_intercept_shift_on_the_kronecker_path():
    """A linear term along the common intercept shift (flat for the bound and the ridge): 'unbounded' at once
    on the CG path with trials on the Kronecker metric too (its range test uses Pbar without its
    regularization), as with Algorithm 2 — not 'diverging iterates' after many accepted trials."""
    from varopt.formulations.logistic import logistic_program
    from varopt.program import Program
    from varopt.program.expression import Expression
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 6))
    y = np.arange(80) % 4
    prog = logistic_program(X, y, 1.0)
    obj = prog.objective
    lin = np.array(obj.linear, dtype=float)
    lin[-4:] += 0.3
    bad = Program(prog.names, prog.lb, prog.ub,
                  Expression(prog.n, obj.constant, lin, obj.quadratic, atoms=list(obj.atoms), lse=list(obj.lse)), [])
    for kw in (dict(step_solver="cg"), dict(step_solver="cg", bound_reuse=0), dict(), dict(bound_reuse=0)):
        res = get_solver("majorize").solve(bad, max_iter=2000, **kw)
        assert res.status == "unbounded" and res.objective == -np.inf and res.iterations == 1, (kw, res.message)
    res = get_solver("majorize").solve(prog, step_solver="cg", tol=1e-12)
    assert res.status == "optimal" and res.info["bound_reuse"]["accepted"] >= 2  # the test does not reject all


def test_restricted_pairs_cache_matches_a_fresh_restriction():
    """The L-BFGS pairs restricted to a free set are cached by pair across trials; with the free set or the
    pairs changed (a new pair in front, the oldest dropped, a pair without curvature on F) the answer is the
    fresh restriction's."""
    from varopt.solvers.majorize.reuse import _restricted_pairs
    rng = np.random.default_rng(5)
    n = 9

    pairs = []
    cache = {}
    F = np.ones(n, bool)
    F[[1, 4]] = False
    for k in range(25):
        s = rng.standard_normal(n)
        y = s * rng.uniform(0.5, 2.0, n)
        if k % 7 == 3:
            y = -s  # no positive curvature: dropped on every free set
        pairs = [(s, y, 1.0 / float(s @ y))] + pairs[:4]
        if k % 5 == 4:  # the free set changes: a new cache, as ScaledCurvature.trial keeps one per free set
            F = rng.random(n) < 0.7
            cache = {}
        assert_same_pairs(_restricted_pairs(pairs, F, cache), restricted_reference(pairs, F))
        assert_same_pairs(_restricted_pairs(pairs, F, cache), restricted_reference(pairs, F))  # all from the cache
        assert len(cache) <= 2 * len(pairs)


def test_an_overestimated_ratio_test_costs_few_feasibility_tests(monkeypatch):
    """When the ratio test overestimates the feasible step (here: it ignores every row and bound), the trial is
    shrunk until feasible in a few tests (the shrink grows tenfold per failure; a fixed 1e-9 shrink needed ~1e9),
    and the solve still ends feasible at Algorithm 2's optimum."""
    from varopt.solvers.majorize import step_qp
    calls = []
    real = step_qp.StepQP.feasible

    def counted(self, x):
        calls.append(1)
        if len(calls) > 20000:
            raise AssertionError("the shrink loop does not end")
        return real(self, x)
    monkeypatch.setattr(step_qp.StepQP, "max_factor", lambda self, x, step: 1.0)
    monkeypatch.setattr(step_qp.StepQP, "feasible", counted)
    from varopt.formulations.logistic import logistic_program
    from varopt.program import Program
    from varopt.program.expression import Expression
    from varopt.program.program import Constraint
    rng = np.random.default_rng(5)
    X = rng.normal(size=(80, 4))
    y = (X @ rng.normal(size=4) + rng.logistic(size=80) > 0).astype(int)
    prog = logistic_program(X, y, 0.5)
    n = prog.n
    cons = [Constraint("sum", Expression(n, linear=np.ones(n)), -np.inf, -0.5)]
    cprog = Program(prog.names, np.full(n, -np.inf), np.full(n, 0.3), prog.objective, cons)
    res, xs = _trace(cprog, tol=1e-12, max_iter=2000)
    assert res.status == "optimal" and all(_feasible(cprog, x) for x in xs)
    st = res.info["bound_reuse"]
    assert calls and st["trials"] + st.get("blocked", 0) >= 1     # the shrink loop ran
    alg2 = get_solver("majorize").solve(cprog, tol=1e-12, max_iter=2000, bound_reuse=0)
    assert abs(res.objective - alg2.objective) <= 1e-9 * abs(alg2.objective)


def test_two_loop_equals_the_bfgs_inverse_update():
    """``two_loop`` (inner products from ``S Y^T``) against the inverse BFGS matrix built by its recursive update
    ``H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T`` from the oldest pair to the newest, with ``H_0`` a
    scalar and an SPD matrix, for 0 to 12 pairs."""
    from varopt.solvers.majorize.reuse import two_loop
    rng = np.random.default_rng(7)
    n = 9
    A = rng.normal(size=(n, n))
    H0 = np.linalg.inv(A @ A.T + n * np.eye(n))
    for m in range(13):
        pairs = []
        for _ in range(m):
            s = rng.normal(size=n)
            y = (A @ A.T + np.diag(rng.uniform(1, 3, n))) @ s  # s^T y > 0
            pairs = [(s, y, 1.0 / float(s @ y))] + pairs
        u = rng.normal(size=n)
        for h0, H in ((lambda q: 0.7 * q, 0.7 * np.eye(n)), (lambda q: H0 @ q, H0)):
            for s, y, rho in reversed(pairs):
                V = np.eye(n) - rho * np.outer(y, s)
                H = V.T @ H @ V + rho * np.outer(s, s)
            assert np.allclose(two_loop(pairs, u, h0), H @ u, rtol=1e-10, atol=1e-12)
