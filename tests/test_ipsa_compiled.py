"""The compiled (numba) per-sample IPSA loop against the numpy reference path: iterate-by-iterate
equality on seeded problems for every covered case, automatic fallback for the rest, the option's
errors, the strict-interior promise and the oracle-error path on the compiled loop. The problems hold square atom
rows, log-sum-exp groups and squared hinges (``sqpos`` rows, the L2-SVM loss), each a row kind of the kernels."""
import math

import numpy as np
import pytest
import scipy.sparse as sp

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.errors import InvalidOptionError
from varopt.formulations.l1 import l1_least_squares_program, l1_logistic_program
from varopt.program import AtomGroup, Constraint, Expression, LseGroup, Program, QuadraticTerms
from varopt.solvers.ipsa import IpsaOracleError, fast

pytest.importorskip("numba")
S = varopt.get_solver("ipsa")
ITERS = 300


def _names(n):
    return [f"x{i}" for i in range(n)]


def ls_dense(form):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6)) * rng.gamma(2.0, size=6)
    return l1_least_squares_program(X, X @ rng.normal(size=6) + rng.normal(size=120), 0.3, form)


def logistic_sparse(form):
    rng = np.random.default_rng(1)
    X = sp.random(150, 12, density=0.25, random_state=2, format="csr")
    return l1_logistic_program(X, np.where(rng.random(150) < 0.4, -1.0, 1.0), 0.01, form)


def rows_and_bounds():
    """Square rows with both bounds on some variables, one-sided on others, a 3-variable range row
    (a 3x3 block: Gaussian elimination) and a 2-variable row."""
    rng = np.random.default_rng(3)
    n, N = 7, 90
    A = rng.normal(size=(N, n))
    e = Expression(n, linear=rng.normal(size=n) * 0.1,
                   atoms=[AtomGroup("square", np.full(N, 0.5 / N), sp.csr_matrix(A), rng.normal(size=N) * 3,
                                    label=np.arange(N))])
    lb = np.array([-1.0, -np.inf, 0.0, -2.0, -np.inf, -0.5, -np.inf])
    ub = np.array([1.0, 0.5, np.inf, np.inf, np.inf, 0.5, np.inf])
    cons = [Constraint("r3", Expression(n, linear=np.r_[0, 1.0, 2.0, -1.0, 0, 0, 0]), -1.0, 0.8),
            Constraint("r2", Expression(n, linear=np.r_[0, 0, 0, 0, 1.0, 0, 1.0]), -np.inf, 0.3)]
    return Program(_names(n), lb, ub, e, cons)


def multinomial():
    """Three-class softmax rows (log-sum-exp groups of 3 rows per sample) with bounds."""
    rng = np.random.default_rng(4)
    N, d, K = 80, 3, 3
    X = rng.normal(size=(N, d))
    lab = rng.integers(0, K, size=N)
    rows = sp.lil_matrix((N * K, d * K))
    for i in range(N):
        for k in range(K):
            rows[i * K + k, k * d:(k + 1) * d] = X[i]
    lin = np.zeros(d * K)
    for i in range(N):
        lin[lab[i] * d:(lab[i] + 1) * d] -= X[i] / N
    g = LseGroup(rows.tocsr(), np.zeros(N * K), np.repeat(np.arange(N), K), np.full(N, 1.0 / N), label=np.arange(N))
    return Program(_names(d * K), np.full(d * K, -2.0), np.full(d * K, 2.0), Expression(d * K, linear=lin, lse=[g]))


def mixed_bounds(with_bounds=True):
    """Square rows on bounds only, in no particular layout: both sides, upper only, lower only and
    free variables interleaved (the fused bounds kernel's general, indexed path); without bounds
    the unconstrained problem (m = 0)."""
    rng = np.random.default_rng(6)
    n, N = 6, 70
    A = rng.normal(size=(N, n))
    A[:, 2] *= 0.0  # a coordinate no sample touches
    e = Expression(n, linear=rng.normal(size=n) * 0.2,
                   atoms=[AtomGroup("square", np.full(N, 0.5 / N), sp.csr_matrix(A), rng.normal(size=N) * 2,
                                    label=np.arange(N))])
    if not with_bounds:
        return Program(_names(n), np.full(n, -np.inf), np.full(n, np.inf), e)
    lb = np.array([-np.inf, -0.3, -np.inf, 0.1, -1.0, -np.inf])
    ub = np.array([0.2, np.inf, np.inf, np.inf, 0.4, 0.05])
    return Program(_names(n), lb, ub, e)


def pair_rows():
    """Rows of one or two variables in blocks of at most two (the pairs kernel beyond the box form):
    a pair with a range row and a third row, one with a single row and a bound, a variable with a
    one-variable row, bounded and free variables without rows."""
    rng = np.random.default_rng(7)
    n, N = 7, 80
    e = _least_squares(rng, n, N)
    lb = np.array([-np.inf, -1.0, -np.inf, -0.4, -np.inf, 0.0, -np.inf])
    ub = np.array([np.inf, 2.0, np.inf, np.inf, 0.6, np.inf, np.inf])
    cons = [Constraint("p", Expression(n, linear=np.r_[1.0, -0.5, 0, 0, 0, 0, 0]), -0.7, 0.9),
            Constraint("p2", Expression(n, linear=np.r_[2.0, 1.0, 0, 0, 0, 0, 0]), -np.inf, 1.5),
            Constraint("q", Expression(n, linear=np.r_[0, 0, 0, 1.0, 0, 0, 3.0]), 0.1, np.inf),
            Constraint("one", Expression(n, linear=np.r_[0, 0, 0.5, 0, 0, 0, 0]), -np.inf, 0.4)]
    return Program(_names(n), lb, ub, e, cons)


def _least_squares(rng, n, N):
    """A random least-squares objective of ``n`` variables and ``N`` labelled samples, with a linear part."""
    A = rng.normal(size=(N, n))
    return Expression(n, linear=rng.normal(size=n) * 0.2,
                      atoms=[AtomGroup("square", np.full(N, 0.5 / N), sp.csr_matrix(A), rng.normal(size=N) * 2,
                                       label=np.arange(N))])


def uniform_pairs():
    """Two variable pairs with three rows each (a range row and a one-variable row on the first, three
    two-variable rows on the second: sums of three terms), bounds on some variables, a free variable."""
    rng = np.random.default_rng(8)
    n, N = 5, 60
    e = _least_squares(rng, n, N)
    lb = np.array([-np.inf, -1.0, -0.3, -np.inf, -np.inf])
    ub = np.array([np.inf, 1.5, np.inf, np.inf, np.inf])
    cons = [Constraint("p", Expression(n, linear=np.r_[1.0, -0.5, 0, 0, 0]), -0.7, 0.9),
            Constraint("p1", Expression(n, linear=np.r_[0.8, 0, 0, 0, 0]), -np.inf, 1.2),
            Constraint("q1", Expression(n, linear=np.r_[0, 0, 2.0, 1.0, 0]), -np.inf, 1.5),
            Constraint("q2", Expression(n, linear=np.r_[0, 0, 1.0, -1.0, 0]), -1.0, np.inf),
            Constraint("q3", Expression(n, linear=np.r_[0, 0, -0.5, 3.0, 0]), -2.0, np.inf)]
    return Program(_names(n), lb, ub, e, cons)



def general_box_pairs():
    """Two rows on every variable pair (R = 2: the box form's fused direction loop) with general
    coefficients: a range row on the first pair (its two sides), a two-variable and a one-variable row
    on the second (a row missing a variable: c = 0), bounds on pair variables (their terms in
    J^T(1/s) and the block diagonal) and a bounded variable without rows."""
    rng = np.random.default_rng(9)
    n, N = 5, 70
    e = _least_squares(rng, n, N)
    lb = np.array([-np.inf, -1.0, -0.3, -np.inf, -np.inf])
    ub = np.array([np.inf, 2.0, np.inf, 0.8, 0.5])
    cons = [Constraint("p", Expression(n, linear=np.r_[1.5, -0.5, 0, 0, 0]), -0.7, 0.9),
            Constraint("q", Expression(n, linear=np.r_[0, 0, 2.0, 1.0, 0]), -np.inf, 1.5),
            Constraint("q1", Expression(n, linear=np.r_[0, 0, 0, 0.5, 0]), -1.0, np.inf)]
    return Program(_names(n), lb, ub, e, cons)

def hinge_l1(form, sparse, fit_intercept, alpha=0.02):
    """An L1-penalised L2-SVM, squared-hinge rows ``(1/N') max(1 - y_i (x_i^T w + b), 0)^2`` (``sqpos`` atoms) in the
    L1 split or box form of :mod:`varopt.formulations.l1`, dense (the numpy path's dense copy of the rows) or sparse
    data. Features 0 and 1 are one column twice, so their variables stay bit-identical along a run (the same
    arithmetic on the same numbers, on both paths), and the last sample ``max(x_0 - x_1, 0)^2`` sits at ``u = 0``
    exactly at every iterate: its gradient is 0 and its ``g''`` the one-sided 0 (a ``2 [u >= 0]`` would move the
    running diagonal). The features are scaled so that samples cross the hinge within the first steps
    (:func:`test_hinge_cases_cross_the_hinge_and_sit_at_zero`)."""
    from varopt.formulations.l1 import _design, _penalty_and_constraints, variable_layout

    rng = np.random.default_rng(12 if sparse else 13)
    N, m = 90, 6
    X = rng.normal(size=(N, m)) * 3.0
    if sparse:
        X *= rng.random((N, m)) < 0.2
    X[:, 1] = X[:, 0]
    y = np.where(X @ rng.normal(size=m) + rng.normal(size=N) > 0, 1.0, -1.0)
    names, lb, ub = variable_layout(m, form, fit_intercept)
    D = _design(sp.csr_matrix(X) if sparse else X, form, fit_intercept)
    lin, cons = _penalty_and_constraints(m, form, alpha, len(names))
    zero = sp.csr_matrix((np.array([1.0, -1.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, len(names)))
    A = sp.vstack([sp.diags(-y) @ D, zero]).tocsr()
    b = np.r_[np.ones(N), 0.0]
    e = Expression(len(names), linear=lin,
                   atoms=[AtomGroup("sqpos", np.full(N + 1, 1.0 / (N + 1)), A, b, label=np.arange(N + 1))])
    return Program(names, lb, ub, e, cons)


def hinge_rows_and_bounds():
    """:func:`rows_and_bounds` (range rows, a 3x3 block: the general kernel) with squared-hinge rows: offsets of both
    signs, so samples start on both sides of the hinge."""
    P = rows_and_bounds()
    g = P.objective.atoms[0]
    e = Expression(P.n, linear=P.objective.linear, atoms=[AtomGroup("sqpos", g.coef, g.A, g.b, label=g.label)])
    return Program(P.names, P.lb, P.ub, e, P.constraints)


def hinge_mixed_bounds():
    """:func:`mixed_bounds` (interleaved lower/upper/two-sided/free bounds: the bounds kernel's indexed layout) with
    squared-hinge rows."""
    P = mixed_bounds()
    g = P.objective.atoms[0]
    e = Expression(P.n, linear=P.objective.linear, atoms=[AtomGroup("sqpos", g.coef, g.A, g.b, label=g.label)])
    return Program(P.names, P.lb, P.ub, e)


def with_l2(P, seed=0, zero=True):
    """``P`` plus a diagonal quadratic term outside the sampled rows, ``sum_j (d_j / 2) x_j^2`` (Hessian
    ``Q = diag(d)``; an L2 penalty with per-coordinate weights, of different sizes so that a weight read at the
    wrong coordinate shows), ``d_j = 0`` on the last coordinate (no stored entry: ``(Q x)_j = 0``) when ``zero``.
    The weights are large enough to move the iterates: against the run without them, the iterates differ by
    far more than the equality test's 1e-12 (:func:`test_l2_cases_are_moved_by_their_quadratic_term`)."""
    rng = np.random.default_rng(100 + seed)
    d = rng.uniform(0.05, 0.8, size=P.n)
    if zero:
        d[-1] = 0.0
    e = P.objective
    q = QuadraticTerms(np.arange(P.n), np.arange(P.n), 0.5 * d, P.n)
    return Program(P.names, P.lb, P.ub, Expression(P.n, linear=e.linear, quadratic=q, atoms=e.atoms, lse=e.lse),
                   P.constraints)


CASES = {"ls-split": lambda: ls_dense("split"), "ls-box": lambda: ls_dense("box"),
         "logistic-split": lambda: logistic_sparse("split"), "logistic-box": lambda: logistic_sparse("box"),
         "rows-bounds": rows_and_bounds, "multinomial": multinomial, "mixed-bounds": mixed_bounds,
         "unconstrained": lambda: mixed_bounds(False), "pair-rows": pair_rows, "uniform-pairs": uniform_pairs,
         "general-box-pairs": general_box_pairs,
         # squared hinges (sqpos rows, the kernels' row kind 2)
         "hinge-split-dense": lambda: hinge_l1("split", False, True),
         "hinge-split-sparse": lambda: hinge_l1("split", True, False),
         "hinge-box-dense": lambda: hinge_l1("box", False, False),
         "hinge-box-sparse": lambda: hinge_l1("box", True, True),
         "hinge-mixed-bounds": hinge_mixed_bounds, "hinge-rows-bounds": hinge_rows_and_bounds,
         # a diagonal quadratic term (an L2 penalty) beside the sampled rows: square, log-sum-exp and squared-hinge
         # rows; each kernel (bounds: split form and no constraints; pairs: box form; general rows); dense and
         # sparse rows
         "l2-ls-split": lambda: with_l2(ls_dense("split"), 0),
         "l2-logistic-split": lambda: with_l2(logistic_sparse("split"), 1),
         "l2-logistic-box": lambda: with_l2(logistic_sparse("box"), 2),
         "l2-multinomial": lambda: with_l2(multinomial(), 3, zero=False),
         "l2-unconstrained": lambda: with_l2(mixed_bounds(False), 4),
         "l2-hinge-split-dense": lambda: with_l2(hinge_l1("split", False, True), 5),
         "l2-hinge-box-sparse": lambda: with_l2(hinge_l1("box", True, True), 6),
         "l2-hinge-rows-bounds": lambda: with_l2(hinge_rows_and_bounds(), 7),
         "l2-rows-bounds": lambda: with_l2(rows_and_bounds(), 8)}
HINGE_CASES = sorted(c for c in CASES if c.startswith("hinge-"))
L2_CASES = sorted(c for c in CASES if c.startswith("l2-"))


def traced(P, backend, **kw):
    xs, zs = [], []

    def cb(it, x, z, s):
        xs.append(x.copy())
        zs.append(z.copy())

    r = S.solve(P, max_iter=ITERS, history_objective=False, callback=cb, backend=backend, seed=5, **kw)
    return r, np.array(xs), np.array(zs)


def assert_close(a, b, rtol=1e-12):
    assert a.shape == b.shape
    if not a.size:  # no constraints: no duals
        return
    err = np.abs(a - b) / np.maximum(1.0, np.abs(a))
    assert err.max() <= rtol, f"max relative difference {err.max():.3g}"


@pytest.mark.parametrize("hessian", ["identity", "bb", "diagonal"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_iterates_equal_numpy_iterates(case, hessian, monkeypatch):
    from varopt.solvers.ipsa.iteration import IpsaRun

    P = CASES[case]()
    rn, xn, zn = traced(P, "numpy", hessian=hessian)
    # every step taken by the kernel: a step it declines is replayed on the numpy path (IpsaRun.step), which
    # would hide a wrong kernel (a kernel compiled for another Hessian passed this test that way)
    replays = []
    step = IpsaRun.step
    monkeypatch.setattr(IpsaRun, "step", lambda self, *a, **k: replays.append(1) or step(self, *a, **k))
    rc, xc, zc = traced(P, "numba", hessian=hessian)
    monkeypatch.undo()
    assert not replays
    assert rn.info["backend"].startswith("numpy") and rc.info["backend"] == "numba"
    assert len(xn) == ITERS
    assert_close(xn, xc)
    assert_close(zn, zc)
    for key in ("backtracks", "boundary_limited_steps"):
        assert rn.info[key] == rc.info[key]
    assert rn.info["bb_beta"] == pytest.approx(rc.info["bb_beta"], rel=1e-12) if hessian == "bb" else True


@pytest.mark.parametrize("case", HINGE_CASES)
def test_hinge_cases_cross_the_hinge_and_sit_at_zero(case):
    """The squared-hinge cases reach what the equality test above must see: samples on both sides of the hinge
    during the run (``u = a^T x + b`` changes sign; the kernels' ``max(u, 0)`` and ``[u > 0]`` both matter), and in
    the L1 forms a sample at ``u = 0`` exactly at every iterate of both paths, visited by the cyclic order (the
    one-sided ``g''``). ``u`` evaluated here from the traced iterates with ``math.fsum`` (exact sums)."""
    P = CASES[case]()
    g = P.objective.atoms[0]
    A = g.A.toarray()
    for backend in ("numpy", "numba"):
        _, xs, _ = traced(P, backend, hessian="diagonal")
        U = np.array([[math.fsum(a * x) + b for a, b in zip(A, g.b)] for x in xs])
        crossing = (U > 0).any(axis=0) & (U < 0).any(axis=0)
        assert crossing.sum() >= 5 and np.sum(np.diff(np.sign(U), axis=0) != 0) >= 10
        if case.startswith(("hinge-split", "hinge-box")):
            assert np.all(U[:, -1] == 0.0) and len(xs) > 2 * A.shape[0]


@pytest.mark.parametrize("sampling", ["cyclic", "permutation", "uniform"])
@pytest.mark.parametrize("case, every", [("ls-box", 37), ("logistic-split", 37), ("rows-bounds", 37), ("uniform-pairs", 5),
                                         ("general-box-pairs", 5),
                                         ("ls-split", 3), ("rows-bounds", 2), ("hinge-split-sparse", 37),
                                         ("hinge-box-dense", 5), ("l2-logistic-box", 5), ("l2-hinge-split-dense", 37),
                                         ("l2-rows-bounds", 37)])
def test_chunked_runs_equal_numpy_runs(case, every, sampling):
    """Without a callback the compiled loop runs chunks of iterations and its kernel saves the
    history records (64 per call, so small ``history_every`` spans several calls): the end point,
    the history and the sampler's random stream must be those of the numpy path."""
    P = CASES[case]()
    kw = dict(passes=3.5, sampling=sampling, history_every=every, history_objective=True, seed=11,
              hessian="diagonal")
    rn = S.solve(P, backend="numpy", **kw)
    rc = S.solve(P, backend="numba", **kw)
    assert rc.info["backend"] == "numba" and rn.iterations == rc.iterations
    assert_close(rn.x, rc.x)
    assert_close(rn.info["z"], rc.info["z"])
    assert [h["iteration"] for h in rn.history] == [h["iteration"] for h in rc.history]
    for hn, hc in zip(rn.history, rc.history):
        for key in ("objective", "mu", "eta", "duality_measure", "step", "step_dual", "step_max", "ftb_primal",
                    "ftb_dual", "sigma", "passes"):
            assert hn[key] == pytest.approx(hc[key], rel=1e-10, abs=1e-300), key
        assert hn["backtracks"] == hc["backtracks"]
        assert hc["time"] >= 0


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_history_fields_follow_their_formulas(backend):
    """Every history entry's schedule fields from their formulas, evaluated here (both paths build them with
    the same batch code, so comparing the two paths alone would not see an error there): with batch 1 and no
    iteration offset the step counter k is the iteration, sigma_k = sigma (ks / (ks + k))^q, the largest step
    (k0 + k)^(-step_power), passes = iteration / N, duality measure = eta / m; the keys in their order."""
    P = CASES["logistic-split"]()
    opts = dict(k0=2.0, sigma=0.3, sigma_power=0.7, step_power=0.6)
    r = S.solve(P, backend=backend, max_iter=150, history_every=7, history_objective=True, **opts)
    N, m = 150, r.info["slack"].size
    assert r.info["n_samples"] == N
    hist = [h for h in r.history if h["iteration"] > 0]
    assert len(hist) >= 150 // 7
    for h in hist:
        k = h["iteration"]
        assert list(h)[:6] == ["iteration", "time", "lower", "upper", "objective", "mu"]
        assert h["sigma"] == pytest.approx(0.3 * (2.0 / (2.0 + k)) ** 0.7, rel=1e-14)
        assert h["step_max"] == pytest.approx((2.0 + k) ** -0.6, rel=1e-14)
        assert h["passes"] == pytest.approx(k / N, rel=1e-14)
        assert h["duality_measure"] == pytest.approx(h["eta"] / m, rel=1e-14)
        assert isinstance(h["backtracks"], int) and h["step"] <= h["step_max"] * (1 + 1e-12)


@pytest.mark.parametrize("case, kernel", [("ls-split", "run_bounds"), ("logistic-split", "run_bounds"),
                                          ("mixed-bounds", "run_bounds"), ("unconstrained", "run_bounds"),
                                          ("multinomial", "run_bounds"), ("ls-box", "run_pairs"),
                                          ("logistic-box", "run_pairs"), ("uniform-pairs", "run_pairs"),
                                          ("general-box-pairs", "run_pairs"), ("pair-rows", "run_chunk"),
                                          ("rows-bounds", "run_chunk"), ("hinge-split-dense", "run_bounds"),
                                          ("hinge-split-sparse", "run_bounds"), ("hinge-mixed-bounds", "run_bounds"),
                                          ("hinge-box-dense", "run_pairs"), ("hinge-box-sparse", "run_pairs"),
                                          ("hinge-rows-bounds", "run_chunk"), ("l2-ls-split", "run_bounds"),
                                          ("l2-logistic-split", "run_bounds"), ("l2-multinomial", "run_bounds"),
                                          ("l2-unconstrained", "run_bounds"), ("l2-hinge-split-dense", "run_bounds"),
                                          ("l2-logistic-box", "run_pairs"), ("l2-hinge-box-sparse", "run_pairs"),
                                          ("l2-hinge-rows-bounds", "run_chunk"), ("l2-rows-bounds", "run_chunk")])
@pytest.mark.parametrize("hessian", ["identity", "bb", "diagonal"])
def test_bounds_only_problems_run_the_fused_kernel(case, kernel, hessian):
    """The iterate-equality tests above cover the three kernels: bounds only (prefix layout of the L1
    split form, indexed layout, m = 0), variable pairs with the same number of rows each (box form),
    other linear rows (a row on a single variable, pairs with different numbers of rows, 3x3 blocks);
    the bounds-only and pairs kernels in their compilation for the run's Hessian."""
    from varopt.core.run import Run
    from varopt.solvers.ipsa.iteration import IpsaRun

    opts = S.options.validate(dict(backend="numba", max_iter=5, hessian=hessian))
    if kernel in ("run_bounds", "run_pairs"):  # compiled once per Hessian
        kernel = f"{kernel}_{hessian}"
    assert IpsaRun(CASES[case](), opts, Run("ipsa", opts)).fast.kernel.__name__ == kernel


@pytest.mark.parametrize("case, dense", [("hinge-split-dense", True), ("hinge-box-dense", True),
                                         ("hinge-split-sparse", False), ("hinge-box-sparse", False)])
def test_hinge_cases_take_the_numpy_paths_they_name(case, dense):
    """The numpy reference evaluates the rows from its dense copy (BLAS products) or from the CSR arrays, by
    density: the dense and sparse squared-hinge cases compare the kernels with both."""
    from varopt.oracles.rows import RowMatrix

    assert (RowMatrix(CASES[case]().objective.atoms[0].A).dense is not None) == dense


def test_time_limit_and_max_iter_stop_like_numpy():
    P = CASES["ls-split"]()
    r = S.solve(P, backend="numba", max_iter=123, history_objective=False)
    assert r.iterations == 123 and r.status == "iteration_limit"
    r = S.solve(P, backend="numba", passes=1e6, time_limit=0.2, history_objective=False)
    assert r.status == "time_limit" and r.iterations > 0 and r.iterations % 16 == 0


def _userish(x, rng):
    return x


@pytest.mark.parametrize("kw, reason", [
    (dict(batch_size=2), "batch_size=2"), (dict(hessian="bfgs"), "hessian='bfgs'"),
    (dict(hessian="exact"), "hessian='exact'"), (dict(oracle=lambda x, rng: x), "user or stream"),
])
def test_unsupported_cases_fall_back_to_numpy_and_numba_says_why(kw, reason):
    P = CASES["ls-split"]()
    r = S.solve(P, max_iter=20, history_objective=False, **kw)
    assert r.info["backend"].startswith("numpy") and reason in r.info["backend"]
    ref = S.solve(P, max_iter=20, history_objective=False, backend="numpy", **kw)
    assert np.array_equal(r.x, ref.x)
    with pytest.raises(InvalidOptionError, match=r"backend='numba' does not cover this problem"):
        S.solve(P, max_iter=20, backend="numba", **kw)


@pytest.mark.parametrize("case", L2_CASES)
def test_l2_cases_are_moved_by_their_quadratic_term(case):
    """The diagonal quadratic term of each L2 case changes the run far beyond the equality test's tolerance: a kernel
    that dropped it (or read it with the wrong weight) could not pass that test by a near miss."""
    P = CASES[case]()
    base = Program(P.names, P.lb, P.ub, Expression(P.n, linear=P.objective.linear, atoms=P.objective.atoms,
                                                   lse=P.objective.lse), P.constraints)
    assert fast.q_diagonal(P.objective.quadratic.hessian_matrix) is not None
    xq = S.solve(P, backend="numba", max_iter=ITERS, history_objective=False, seed=5).x
    x0 = S.solve(base, backend="numba", max_iter=ITERS, history_objective=False, seed=5).x
    assert np.max(np.abs(xq - x0) / np.maximum(1.0, np.abs(x0))) > 1e-4


def test_non_diagonal_quadratic_term_stays_on_numpy_and_says_why():
    """A quadratic term coupling two variables (``x_0 x_1``) is not compiled: backend='auto' runs the numpy path and
    names the reason, backend='numba' refuses; ``fast.q_diagonal`` takes a diagonal ``Q`` (also with a stored zero
    off the diagonal) and refuses a coupling entry or a row with two stored diagonal entries (scipy would sum them
    in its own order)."""
    P = CASES["l2-ls-split"]()
    q = P.objective.quadratic
    q2 = QuadraticTerms(np.r_[q.i, 0], np.r_[q.j, 1], np.r_[q.v, 0.05], P.n)
    P2 = Program(P.names, P.lb, P.ub, Expression(P.n, linear=P.objective.linear, quadratic=q2,
                                                 atoms=P.objective.atoms), P.constraints)
    r = S.solve(P2, max_iter=20, history_objective=False)
    assert r.info["backend"].startswith("numpy (a quadratic term coupling variables")
    ref = S.solve(P2, max_iter=20, history_objective=False, backend="numpy")
    assert np.array_equal(r.x, ref.x)
    with pytest.raises(InvalidOptionError, match="does not cover this problem: a quadratic term coupling"):
        S.solve(P2, max_iter=20, backend="numba")
    d = np.array([1.0, 0.0, 2.5])
    assert np.array_equal(fast.q_diagonal(sp.diags(d).tocsr()), d)
    stored_zero = sp.csr_matrix((np.array([1.0, 0.0, 2.5]), np.array([0, 2, 2]), np.array([0, 2, 2, 3])), shape=(3, 3))
    assert np.array_equal(fast.q_diagonal(stored_zero), d)
    assert fast.q_diagonal(sp.csr_matrix(np.array([[1.0, 0.1, 0], [0.1, 0, 0], [0, 0, 2.5]]))) is None
    dup = sp.csr_matrix((np.array([0.5, 0.5, 2.5]), np.array([0, 0, 2]), np.array([0, 2, 2, 3])), shape=(3, 3))
    assert not dup.has_canonical_format and fast.q_diagonal(dup) is None


@pytest.mark.parametrize("model", ["logistic", "l2svm"])
def test_l2_penalised_programs_run_compiled_at_batch_1(model):
    """The usual on-line models with an L2 penalty as programs with a quadratic term: the L2-regularised logistic
    regression of ``varopt.formulations.logistic.logistic_program`` (what ``varopt.estimators``' logistic
    regression solves), ``sum_i log(1 + exp(-y_i (x_i^T w + b))) + (lam/2) ||w||^2``, and the L2-SVM ``(1/N) sum_i
    max(1 - y_i (x_i^T w + b), 0)^2 + (lam/2) ||w||^2`` (``sqpos`` rows): at batch 1 they run the compiled loop (the
    numpy loop before), end where backend='numpy' ends, and near Clarabel's optimum of the same objective written
    in CVXPY. So do the CVXPY problems: CVXPY's ``sum_squares(w)`` comes in as ``square`` rows of single coordinates,
    which the finite sum takes as its quadratic term (before, a second group of sampled rows labelled ``0..m-1``:
    numpy loop)."""
    cp = pytest.importorskip("cvxpy")
    from varopt.formulations.logistic import logistic_program

    rng = np.random.default_rng(21)
    N, m, lam = 200, 5, 0.5
    X = rng.normal(size=(N, m))
    y = np.where(X @ rng.normal(size=m) + 0.5 * rng.normal(size=N) > 0, 1.0, -1.0)
    w, b = cp.Variable(m), cp.Variable()
    if model == "logistic":
        P = logistic_program(X, y, lam)
        obj = cp.sum(cp.logistic(-cp.multiply(y, X @ w + b))) + lam / 2 * cp.sum_squares(w)
    else:
        A = sp.csr_matrix(-y[:, None] * np.c_[X, np.ones(N)])
        e = Expression(m + 1, quadratic=QuadraticTerms(np.arange(m), np.arange(m), np.full(m, lam / 2), m + 1),
                       atoms=[AtomGroup("sqpos", np.full(N, 1.0 / N), A, np.ones(N), label=np.arange(N))])
        P = Program(_names(m + 1), np.full(m + 1, -np.inf), np.full(m + 1, np.inf), e)
        obj = cp.sum(cp.square(cp.pos(1 - cp.multiply(y, X @ w + b)))) / N + lam / 2 * cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(obj))
    ref = prob.solve(solver="CLARABEL")
    kw = dict(batch_size=1, passes=30, seed=0, hessian="diagonal", history_objective=False)
    rc, rn = S.solve(P, **kw), S.solve(P, backend="numpy", **kw)
    assert rc.info["backend"] == "numba" and rn.info["backend"].startswith("numpy")
    assert rc.iterations == rn.iterations == 30 * N
    np.testing.assert_allclose(rc.x, rn.x, rtol=0, atol=1e-10)
    assert abs(P.objective.value(rc.x) - P.objective.value(rn.x)) <= 1e-10 * abs(ref)
    # stochastic steps: about 1e-2 relative after 30 passes (measured 7.6e-3 logistic); the point is that the
    # penalty's gradient and curvature are those of the objective Clarabel solves
    assert abs(P.objective.value(rc.x) - ref) <= 1e-2 * abs(ref)
    # the CVXPY problem itself: its sum_squares(w) rows are a penalty group, which the finite sum takes as the
    # quadratic term (varopt.oracles.finite_sum._coordinate_squares), so it runs compiled too and ends where numpy ends
    ends = {}
    for backend in ("auto", "numpy"):
        prob.solve(method="ipsa", warm_start=False, backend=backend, **kw)
        ends[backend] = (prob.varopt_result.info["backend"], np.r_[w.value, b.value])
    assert ends["auto"][0] == "numba" and ends["numpy"][0].startswith("numpy")
    np.testing.assert_allclose(ends["auto"][1], ends["numpy"][1], rtol=0, atol=1e-10)
    assert abs(prob.value - ref) <= 2e-2 * abs(ref)   # (measured 1.1e-2 logistic: CVXPY's own row order and scaling)


def test_dense_coupling_row_and_nonsquare_atoms_fall_back():
    rng = np.random.default_rng(0)
    n, N = 20, 30
    e = Expression(n, atoms=[AtomGroup("square", np.full(N, 1.0 / N), sp.csr_matrix(rng.normal(size=(N, n))),
                                       rng.normal(size=N), label=np.arange(N))])
    P = Program(_names(n), np.full(n, -1.0), np.full(n, 1.0), e,
                [Constraint("sum", Expression(n, linear=np.ones(n)), -np.inf, 3.0)])
    r = S.solve(P, max_iter=10, history_objective=False)
    assert "coupling more than 16" in r.info["backend"]
    e2 = Expression(n, atoms=[AtomGroup("exp", np.full(N, 1.0 / N), sp.csr_matrix(rng.normal(size=(N, n)) * 0.1),
                                        np.zeros(N), label=np.arange(N))])
    r = S.solve(Program(_names(n), np.full(n, -1.0), np.full(n, 1.0), e2), max_iter=10, history_objective=False)
    assert "'exp'" in r.info["backend"]


def test_backend_option_is_validated(monkeypatch):
    P = CASES["ls-split"]()
    with pytest.raises(InvalidOptionError, match="backend"):
        S.solve(P, backend="cython")
    monkeypatch.setattr(fast, "numba_available", lambda: False)
    with pytest.raises(InvalidOptionError, match=r"pip install 'varopt\[fast\]'"):
        S.solve(P, backend="numba", max_iter=5)
    r = S.solve(P, max_iter=5, history_objective=False)
    assert r.info["backend"] == "numpy (numba is not installed)"


@pytest.mark.parametrize("seed", range(4))
def test_compiled_iterates_strictly_interior_by_independent_evaluation(seed):
    """Box-form L1 logistic with a strong penalty (many ``w_j = ±u_j`` active), long steps (``a_k = k^-1/2``,
    a thousand or more boundary-limited) and 3,000 steps: every
    iterate satisfies every row ``lo < a^T x < hi`` evaluated exactly (math.fsum) and the bounds."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 8))
    P = l1_logistic_program(X, np.where(X[:, 0] + rng.normal(size=60) > 0, 1.0, -1.0), 0.2, "box")
    rows = [(c.body.linear, c.lo, c.hi) for c in P.constraints]
    worst = [np.inf]

    def cb(it, x, z, s):
        assert np.all(z > 0)
        assert np.all(x > P.lb) and np.all(x < P.ub)
        for a, lo, hi in rows:
            v = math.fsum(a * x)
            worst[0] = min(worst[0], hi - v, v - lo)

    kw = dict(passes=50, k0=0.0, step_power=0.5, sigma=0.05, hessian="diagonal", seed=seed, history_objective=False)
    r = S.solve(P, callback=cb, backend="numba", **kw)
    assert r.info["backend"] == "numba" and r.iterations == 3000
    assert worst[0] > 0
    assert r.info["boundary_limited_steps"] > 100  # the boundary was actually approached
    # no end-point comparison with the numpy path here: at these long steps the iteration itself
    # amplifies a 1e-15 change of x0 to 1e-1 within 3,000 steps (numpy path against itself)


def test_oracle_error_is_raised_at_the_same_iteration_with_the_last_good_iterate():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4))
    X[17] *= 1e200  # sample 17's gradient overflows
    P = l1_least_squares_program(X, rng.normal(size=50), 0.1)
    errs = {}
    for b in ("numpy", "numba"):
        with pytest.raises(IpsaOracleError) as ei:
            S.solve(P, passes=2, backend=b, history_objective=False)
        errs[b] = ei.value
    assert errs["numpy"].iteration == errs["numba"].iteration == 18
    assert_close(errs["numpy"].x, errs["numba"].x)
    assert str(errs["numpy"]) == str(errs["numba"])


def _box_pairs_with_bound(lin):
    """``-u_j <= w_j <= u_j`` on two pairs (variables w0, u0, w1, u1: the box kernel's fused R = 2 loops)
    and the bound ``w1 >= 1``; square rows on the w's plus the linear term ``lin``."""
    rng = np.random.default_rng(10)
    n, N = 4, 20
    A = np.zeros((N, n))
    A[:, [0, 2]] = rng.normal(size=(N, 2))
    e = Expression(n, linear=np.asarray(lin, dtype=float),
                   atoms=[AtomGroup("square", np.full(N, 0.5 / N), sp.csr_matrix(A), rng.normal(size=N),
                                    label=np.arange(N))])
    cons = []
    for w, u in ((0, 1), (2, 3)):
        cons.append(Constraint(f"lo{w}", Expression(n, linear=np.eye(n)[w] + np.eye(n)[u]), 0.0, np.inf))
        cons.append(Constraint(f"hi{w}", Expression(n, linear=np.eye(n)[w] - np.eye(n)[u]), -np.inf, 0.0))
    return Program(_names(n), np.array([-np.inf, -np.inf, 1.0, -np.inf]), np.full(n, np.inf), e, cons)


@pytest.mark.parametrize("ulps", [1, 17])  # slack 1.5e-8, and 2.5e-7: within the margin 3.6e-7, not within half of it
def test_pair_kernel_margin_screen_with_rows_of_different_scales(ulps):
    """The box kernel screens the rows' rounding margins with one scalar bound when every row has the same
    factors (``+-1`` coefficients, ``h = 0``), with each row's own otherwise: here pair 0's rows have
    coefficients 1e-3 (a 1e-3 times smaller screen bound) and pair 1's are ``+-1``; from a point where
    ``w1`` is one ulp of 1e8 below ``u1 = 1e8`` (inside that row's margin) every trial point is rejected,
    as on the numpy path (a bound taken from pair 0's row for all rows would accept it)."""
    from varopt.core.run import Run
    from varopt.solvers.ipsa.iteration import IpsaRun

    rng = np.random.default_rng(11)
    n, N = 4, 20
    A = np.zeros((N, n))
    A[:, [0, 2]] = rng.normal(size=(N, 2))
    e = Expression(n, linear=np.array([0.0, 0.1, 0.0, 0.1]),
                   atoms=[AtomGroup("square", np.full(N, 0.5 / N), sp.csr_matrix(A), rng.normal(size=N),
                                    label=np.arange(N))])
    I = np.eye(n)
    cons = [Constraint("lo0", Expression(n, linear=1e-3 * (I[0] + I[1])), 0.0, np.inf),
            Constraint("hi0", Expression(n, linear=1e-3 * (I[0] - I[1])), -np.inf, 0.0),
            Constraint("lo1", Expression(n, linear=I[2] + I[3]), 0.0, np.inf),
            Constraint("hi1", Expression(n, linear=I[2] - I[3]), -np.inf, 0.0)]
    P = Program(_names(n), np.full(n, -np.inf), np.full(n, np.inf), e, cons)
    out = {}
    for backend in ("numpy", "numba"):
        opts = S.options.validate(dict(backend=backend, max_iter=1, history_objective=False))
        r = IpsaRun(P, opts, Run("ipsa", opts))
        r.x = np.array([0.5, 2.0, 1e8 - ulps * 2 ** -26, 1e8])
        r.s = r.cons.slack(r.x)
        r.z = np.minimum(1.0, 1.0 / r.s)
        if backend == "numpy":
            r.step(np.array([3]))
        else:
            assert r.fast.kernel.__name__ == "run_pairs_identity"
            assert r.fast.chunk(np.array([3]))[:2] == (1, False)
        out[backend] = (r.x, r.s, r.z, r.n_bt)
    assert out["numpy"][3] == out["numba"][3] > 0
    for a, b in zip(out["numpy"][:3], out["numba"][:3]):
        assert_close(a, b)


@pytest.mark.parametrize("x, backtracks", [
    # w1 one ulp above its bound 1, pushed down (lin): the fraction-to-boundary trial x - 0.995 ulp rounds onto
    # the bound (slack 0, rejected), half of it rounds back to x (accepted after one halving)
    ([0.5, 2.0, 1.0 + 2 ** -52, 3.0], 1),
    # and w0 one ulp of 1e8 below u0 = 1e8 (row w0 - u0 <= 0), or above -u0 (row w0 + u0 >= 0): slack 1.5e-8,
    # inside the row's rounding margin 8 eps 2e8 = 3.6e-7; the bound keeps the step ~1e-17, every trial
    # point fails the margin test and the step is abandoned after MAX_BACKTRACKS halvings
    ([1e8 - 2 ** -26, 1e8, 1.0 + 2 ** -52, 3.0], 61),
    # 17 ulps: slack 2.5e-7, inside the margin, not inside half of it (the box form's single screen bound)
    ([1e8 - 17 * 2 ** -26, 1e8, 1.0 + 2 ** -52, 3.0], 61),
    ([-1e8 + 2 ** -26, 1e8, 1.0 + 2 ** -52, 3.0], 61),
    # 30 and 40 ulps: slack 4.5e-7 and 6e-7, outside the margin but inside twice it, the kernel's first screen
    # (an upper bound of max|x|, up to 2 max|x|, in place of max|x|): flagged there, passed by the exact test
    # (accepted after the one halving of the first case)
    ([1e8 - 30 * 2 ** -26, 1e8, 1.0 + 2 ** -52, 3.0], 1),
    ([1e8 - 40 * 2 ** -26, 1e8, 1.0 + 2 ** -52, 3.0], 1)])
def test_pair_kernel_trial_rejections_equal_numpy(x, backtracks):
    """One step of the box kernel of :mod:`.compiled_pairs` from a point where the trial point of Fig. 2.1
    step 5 is rejected by a row's rounding margin or by a bound rounded onto its boundary: the backtracking
    and the new point equal the numpy path's (the iterate-equality tests above never reach these branches)."""
    from varopt.core.run import Run
    from varopt.solvers.ipsa.iteration import IpsaRun

    P = _box_pairs_with_bound([0.0, 0.1, 1e17, 0.1])
    out = {}
    for backend in ("numpy", "numba"):
        opts = S.options.validate(dict(backend=backend, max_iter=1, history_objective=False))
        r = IpsaRun(P, opts, Run("ipsa", opts))
        r.x = np.array(x)
        r.s = r.cons.slack(r.x)
        r.z = np.minimum(1.0, 1.0 / r.s)  # s z <= 1: the large slacks do not inflate mu
        if backend == "numpy":
            r.step(np.array([3]))
        else:
            assert r.fast.kernel.__name__ == "run_pairs_identity"
            assert r.fast.chunk(np.array([3]))[:2] == (1, False)
        out[backend] = (r.x, r.s, r.z, r.n_bt, r.stats["backtracks"])
    assert out["numpy"][3] == out["numba"][3] == out["numba"][4] == backtracks
    for a, b in zip(out["numpy"][:3], out["numba"][:3]):
        assert_close(a, b)
    assert np.all(out["numba"][1] > 0)


def test_compile_note_is_printed_exactly_when_numba_must_compile(monkeypatch, capsys):
    """``fast.needs_compile``: a dispatcher never called and without a disk cache must compile, not once called;
    a new dispatcher of a kernel numba has cached on disk need not. A verbose run prints its one-line note exactly
    when ``needs_compile`` says so (a cold compile takes seconds with no other progress line)."""
    import numba

    from varopt.solvers.ipsa import compiled_bounds

    P = CASES["ls-split"]()
    S.solve(P, backend="numba", max_iter=3)  # compiled or loaded here, and in numba's disk cache
    kernel = compiled_bounds.RUN_BOUNDS[fast.HESSIANS["identity"]]
    assert not fast.needs_compile(kernel)
    assert not fast.needs_compile(numba.njit(cache=True)(kernel.py_func))  # same function: its disk cache
    f = numba.njit(lambda a: a + 1)
    assert fast.needs_compile(f)
    f(1)
    assert not fast.needs_compile(f)
    note = ("ipsa: compiling the numba kernel run_bounds_identity (first use; numba caches it on disk for later "
            "solves)")
    for verbose, must in ((True, False), (True, True), (False, True)):
        monkeypatch.setattr(fast, "needs_compile", lambda k, must=must: must)
        r = S.solve(P, backend="numba", max_iter=40, verbose=verbose)
        err = capsys.readouterr().err.splitlines()
        assert [line for line in err if "compiling" in line] == ([note] if verbose and must else [])
        if verbose and must:  # before the lines of the iterations the kernel runs
            assert err.index(note) < len(err) - 1 and r.iterations == 40


def test_each_kernel_gets_one_argument_signature_for_these_problems():
    """The fused kernels take the samples' support and the permuted row indices in the rows' own index type
    (scipy's int32 here) instead of int64 for some: numba compiles a kernel once per argument signature, each a
    cold compile of seconds, so one signature per kernel serves all these problems (dense and sparse rows,
    square atoms and log-sum-exp groups, permuted pairs or not)."""
    from numba import typeof

    from varopt.core.run import Run
    from varopt.solvers.ipsa.iteration import IpsaRun

    opts = S.options.validate(dict(backend="numba", max_iter=5))
    sigs = {}
    for case in sorted(CASES):
        loop = IpsaRun(CASES[case](), opts, Run("ipsa", opts)).fast
        sigs.setdefault(loop.kernel.__name__, set()).add(tuple(str(typeof(a)) for a in (loop.lin, loop.qd,
                                                                                         *loop.static)))
    assert sorted(sigs) == ["run_bounds_identity", "run_chunk", "run_pairs_identity"]
    assert {name: len(s) for name, s in sigs.items()} == {name: 1 for name in sigs}


def test_stale_kernel_cache_indexes_are_dropped(tmp_path, monkeypatch):
    """numba stamps a cached kernel with its own file only; an index older than any of the kernel sources (an
    edit to kernel_steps.py, whose helpers the kernels compile in) must be deleted before a first call, a newer
    one kept, and one whose kernel is already loaded in the process left alone."""
    import os
    from types import SimpleNamespace
    from varopt.solvers.ipsa import fast, kernel_steps

    def fake(name, age, loaded=False, in_tuple=False):
        p = tmp_path / f"{name}.nbi"
        p.write_bytes(b"x")
        here = os.path.dirname(os.path.abspath(fast.__file__))
        newest = max(os.path.getmtime(os.path.join(here, f)) for f in fast.KERNEL_SOURCES)
        os.utime(p, (newest + age, newest + age))
        d = SimpleNamespace(_cache=SimpleNamespace(_cache_file=SimpleNamespace(_index_path=str(p))),
                            overloads={"sig": 1} if loaded else {})
        # a module attribute as a dispatcher, or inside a tuple as the per-Hessian kernels are held
        monkeypatch.setattr(kernel_steps, f"_fake_{name}", (d,) if in_tuple else d, raising=False)
        return p

    old, new, busy = fake("old", -100.0), fake("new", +100.0), fake("busy", -100.0, loaded=True)
    pair = fake("pair_old", -5.0, in_tuple=True)
    dropped = fast.drop_stale_caches(force=True)
    assert str(old) in dropped and not old.exists()
    assert str(pair) in dropped and not pair.exists()      # dispatchers held in tuples (per-Hessian kernels)
    assert new.exists() and busy.exists() and str(new) not in dropped and str(busy) not in dropped
