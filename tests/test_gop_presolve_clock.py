"""gop's time limit in the presolve and the one-shot LPs (docs/gop.md, "Time limits on larger models").

The model: a disjoint bilinear program ``min x^T Q y + c.x + d.y`` over ``x`` in a box with one row and ``y`` in
``[0, 1]^n``. For fixed ``y`` it is an LP in ``x``, and it is concave-free in ``y`` separately, so its optimum is at
a vertex ``y`` of the unit cube: the brute force below solves one LP in ``x`` per vertex (2^n of them) with
SciPy's HiGHS, independently of gop. Test doubles slow down or stop HiGHS as a large model would (LPs that take
their time, an LP stopped by its time limit); no timed assertion is tighter than the limit plus 0.5 s."""
import itertools
import time

import numpy as np
import pyomo.environ as pyo
import pytest
from scipy.optimize import linprog

import varopt  # noqa: F401  (registers gop)
import varopt.lpqp.model as lpmodel
import varopt.lpqp.solve as lpsolve
import varopt.solvers.gop.bounds as gbounds
from varopt.lpqp.result import LPResult
from varopt.program.scaling import scaling_pairs
from varopt.solvers.gop.convexity import block_psd

N = 8


def _data(seed=3, n=N):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(n, n)).round(2)
    c, d = rng.normal(size=n).round(2), rng.normal(size=n).round(2)
    a = rng.uniform(0.5, 1.5, n).round(2)
    return Q, c, d, a


def _model(n=N):
    Q, c, d, a = _data(n=n)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), bounds=(0, 2))
    m.y = pyo.Var(range(n), bounds=(0, 1))
    m.obj = pyo.Objective(expr=sum(Q[i, j] * m.x[i] * m.y[j] for i in range(n) for j in range(n))
                          + sum(c[i] * m.x[i] + d[i] * m.y[i] for i in range(n)))
    m.row = pyo.Constraint(expr=sum(a[i] * m.x[i] for i in range(n)) <= n / 2)
    m.rowy = pyo.Constraint(expr=sum(m.y[i] for i in range(n)) >= 1)
    return m


def _brute_force(n=N):
    """The optimum over the vertices y of the unit cube with sum(y) >= 1 (an LP in x for each)."""
    Q, c, d, a = _data(n=n)
    best = np.inf
    for y in itertools.product((0.0, 1.0), repeat=n):
        y = np.array(y)
        if y.sum() < 1:
            continue
        r = linprog(Q @ y + c, A_ub=a[None, :], b_ub=[n / 2], bounds=[(0, 2)] * n, method="highs")
        assert r.status == 0
        best = min(best, r.fun + d @ y)
    return best


OPT = None


def _optimum():
    global OPT
    if OPT is None:
        OPT = _brute_force()
    return OPT


def _check_point(m):
    """The user's own evaluation: every variable set, inside its bounds, every row satisfied; the objective."""
    for v in m.component_data_objects(pyo.Var):
        assert v.value is not None
        assert v.lb - 1e-7 <= v.value <= v.ub + 1e-7
    for con in m.component_data_objects(pyo.Constraint, active=True):
        b = pyo.value(con.body)
        assert con.lower is None or b >= pyo.value(con.lower) - 1e-6
        assert con.upper is None or b <= pyo.value(con.upper) + 1e-6
    return pyo.value(m.obj)


def test_brute_force_matches_gop_without_a_limit():
    # the reference itself, against gop's certificate (both independent ways agree)
    m = _model()
    res = pyo.SolverFactory("gop").solve(m, mode="gop").varopt_result
    assert res.status == "optimal"
    assert res.lower_bound <= _optimum() + 1e-6 * max(1, abs(_optimum()))
    assert abs(_check_point(m) - _optimum()) <= 1e-5 * max(1, abs(_optimum()))


def test_obbt_stops_at_the_deadline_and_keeps_a_valid_bound(monkeypatch):
    """GOP's presolve OBBT (2 LPs per connected variable) with LPs of 0.15 s each: 2.4 s of LPs in all. Under
    ``time_limit=0.5`` the solve returns within the limit + 0.5 s, status time_limit, a feasible loaded point and a
    lower bound not above the brute-force optimum (before: every LP ran, 2.4 s)."""
    calls = []

    class SlowLP(lpmodel.HighsModel):
        def solve(self):
            calls.append(1)
            time.sleep(0.15)
            return super().solve()
    monkeypatch.setattr(gbounds, "HighsModel", SlowLP)
    m = _model()
    t0 = time.perf_counter()
    res = pyo.SolverFactory("gop").solve(m, mode="gop", time_limit=0.5).varopt_result
    wall = time.perf_counter() - t0
    assert wall <= 0.5 + 0.5, (wall, len(calls))
    assert res.status == "time_limit"
    assert len(calls) < 2 * N
    assert res.lower_bound is not None and res.lower_bound <= _optimum() + 1e-9
    if res.upper_bound is not None and np.isfinite(res.upper_bound):
        f = _check_point(m)
        assert f >= _optimum() - 1e-6 and abs(f - res.upper_bound) <= 1e-6 * max(1, abs(f))


class _StoppedLP(lpmodel.HighsModel):
    """A one-shot LP that runs out of its time: it honours the limit it is given (at most 1.5 s without one, as
    a large LP would take) and reports HiGHS's "Time limit reached"."""
    seen = None   # the time limits given, set by the test

    def solve(self):
        tl = self._get_option("time_limit")
        type(self).seen.append(tl)
        time.sleep(min(1.5, tl if np.isfinite(tl) else 1.5))
        return LPResult("error", message="time limit", model_status="Time limit reached")


def test_a_one_shot_lp_stopped_by_its_limit_gives_time_limit_not_an_error(monkeypatch):
    """GOP's primal problem here is an LP (``y`` fixed) solved once by HiGHS; when HiGHS stops on the time limit
    the solve ends with status time_limit within the limit + 0.5 s (before: no limit was given, and the
    non-optimal status raised "HiGHS failed on the GOP primal problem"), and its bound stays valid."""
    _StoppedLP.seen = []
    monkeypatch.setattr(lpsolve, "HighsModel", _StoppedLP)
    m = _model()
    t0 = time.perf_counter()
    res = pyo.SolverFactory("gop").solve(m, mode="gop", time_limit=1.0).varopt_result
    wall = time.perf_counter() - t0
    assert _StoppedLP.seen, "the double was not reached: the primal problem took another path"
    assert all(np.isfinite(tl) and tl <= 1.0 for tl in _StoppedLP.seen)
    assert res.status == "time_limit"
    assert wall <= 1.0 + 0.5
    assert res.lower_bound is not None and res.lower_bound <= _optimum() + 1e-9
    if res.upper_bound is not None and np.isfinite(res.upper_bound):
        f = _check_point(m)
        assert f >= _optimum() - 1e-6


def test_a_presolve_step_past_the_limit_returns_a_feasible_start(monkeypatch):
    """A presolve step that takes longer than the whole limit (here the scaling detection, slowed down as on a
    50 x 60 factorisation): the solve returns time_limit right after it with the model's feasible starting point
    loaded and the interval bound of the objective (valid), not after the rest of the presolve and the search."""
    import varopt.solvers.gop.solver as gsolver
    real = gsolver.scaling_pairs

    def slow(program, stop=None):
        time.sleep(0.6)
        return real(program) if stop is None else real(program, stop=stop)
    monkeypatch.setattr(gsolver, "scaling_pairs", slow)
    m = _model()
    for v in m.x.values():
        v.value = 0.0
    for v in m.y.values():
        v.value = 1.0
    t0 = time.perf_counter()
    res = pyo.SolverFactory("gop").solve(m, mode="tree", time_limit=0.3).varopt_result
    wall = time.perf_counter() - t0
    assert res.status == "time_limit"
    assert wall <= 0.6 + 0.5
    assert res.lower_bound is not None and np.isfinite(res.lower_bound) and res.lower_bound <= _optimum() + 1e-9
    assert res.upper_bound is not None, "no point loaded"
    f = _check_point(m)
    assert abs(f - res.upper_bound) <= 1e-9 * max(1, abs(f)) and f >= _optimum() - 1e-9


def test_scaling_detection_stopped_returns_no_pair():
    from varopt.frontends import compile_model
    rng = np.random.default_rng(0)
    X = rng.random((4, 5))
    m = pyo.ConcreteModel()
    m.W = pyo.Var(range(4), range(2), bounds=(0, 2))
    m.H = pyo.Var(range(2), range(5), bounds=(0, 2))
    m.obj = pyo.Objective(expr=sum((X[i, j] - sum(m.W[i, k] * m.H[k, j] for k in range(2))) ** 2
                                   for i in range(4) for j in range(5)))
    pr = compile_model(m)[0]
    assert scaling_pairs(pr)            # NMF: one pair per rank
    assert scaling_pairs(pr, stop=lambda: True) == []


@pytest.mark.parametrize("seed", range(8))
def test_block_psd_per_component_equals_the_whole_eigendecomposition(seed):
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    blocks = []
    for k in range(5):
        s = int(rng.integers(1, 5))
        B = rng.normal(size=(s, s))
        B = B @ B.T
        if s > 1 and rng.random() < 0.25:
            # indefinite with a positive diagonal: only an eigenvalue test rejects it
            B = B + 3.0 * np.abs(B).max() * (np.ones((s, s)) - np.eye(s))
        blocks.append(B)
    S = sp.block_diag(blocks).toarray()
    p = rng.permutation(S.shape[0])
    S = S[np.ix_(p, p)]
    whole = bool(np.linalg.eigvalsh(S).min() >= -1e-9 * max(1.0, np.abs(S).max()))
    assert block_psd(sp.csr_matrix(S), range(S.shape[0])) == whole
    VERDICTS.add(whole)


VERDICTS = set()


def test_block_psd_cases_cover_both_verdicts():
    assert VERDICTS == {True, False}
