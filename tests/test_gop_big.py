"""gop on larger models (docs/gop.md §8f): the incumbent of the root's alternating minimisation against alternating
nonnegative least squares written here, the storage of the relaxed-dual node rows against the depth (tracemalloc,
never wall-clock), and the CSR node rows against the dense ones (the same iterates)."""
import numpy as np
import pyomo.environ as pyo
import pytest
from gop_instances.bilinear import fv1990
from gop_instances.multiconvex import alternating_nnls
from memory_peak import traced_peak

import varopt  # noqa: F401
from varopt.solvers.gop import local as LS
from varopt.solvers.gop import relaxed_dual as RD
from varopt.solvers.gop import search as S

from nmf_models import nmf_data, nmf_model


def test_root_descent_reaches_the_alternating_minimum(monkeypatch):
    """A factorization too large for the first node's SLSQP polish (here forced by ``max_polish_vars = 0``, as on a
    300-variable NMF): after one node the incumbent is the alternating minimum (best of three starts of alternating
    NNLS) to 1e-6, where the three alternation rounds of the node's local search stop far above it (docs/gop.md §8f:
    48-77 against 0.1274 on the 30 x 30 rank-5 NMF)."""
    monkeypatch.setattr(LS.LocalSearch, "max_polish_vars", 0)
    X = nmf_data(6, 5, 2, seed=4)
    ref = min(alternating_nnls(X, 2, s, rounds=3000, rtol=1e-14) for s in range(3))
    m = nmf_model(X, 2)
    res = pyo.SolverFactory("gop").solve(m, max_iter=1, bound_tightening=False)
    r = res.varopt_result
    assert r.upper_bound is not None and r.upper_bound <= ref * (1 + 1e-6) + 1e-12, (r.upper_bound, ref)
    assert pyo.value(m.obj) == pytest.approx(r.upper_bound, rel=1e-9)   # the loaded point evaluates to it
    assert r.lower_bound <= r.upper_bound


def test_root_descent_frees_the_auxiliary_columns():
    """The residuals of ``sum (X - W H)^2`` are auxiliary columns with equality rows: free in both half-steps of the
    descent (docs/gop.md §8f). With them in one block the other half-step is pinned and the alternation stops after
    a round."""
    from varopt.frontends.pyomo_compile import compile_pyomo
    from varopt.solvers.gop.partition import analyze
    from varopt.solvers.gop.relax import Lifted
    X = nmf_data(5, 4, 2, seed=2)
    prog, _ = compile_pyomo(nmf_model(X, 2))
    assert prog.aux, "the squares of bilinear residuals are compiled with auxiliary columns"
    part = analyze(prog, None)
    ls = LS.LocalSearch(prog, part, Lifted(prog))
    aux = set(range(prog.n_user, prog.n))
    bms = ls.descent_models()
    assert len(bms) == 2 and all(aux <= set(bm.xi.tolist()) for bm in bms)
    rng = np.random.default_rng(0)
    z0 = np.clip(rng.random(prog.n) * float(X.max()), prog.lb, prog.ub)
    found = ls.descend(z0, prog.lb.astype(float), prog.ub.astype(float), lambda: False)
    ref = min(alternating_nnls(X, 2, s, rounds=3000, rtol=1e-14) for s in range(3))
    assert found is not None and found[0] <= ref * (1 + 1e-5), (found, ref)


def _search_of(model, monkeypatch, **opts):
    kept = {}
    orig = S.GopSearch._run

    def run(self):
        kept["s"] = self
        return orig(self)

    monkeypatch.setattr(S.GopSearch, "_run", run)
    pyo.SolverFactory("gop").solve(model, mode="gop", **opts)
    monkeypatch.setattr(S.GopSearch, "_run", orig)
    return kept["s"]


def _bilinear():
    from gop_rd_models import MODELS
    return MODELS["bilinear"]()


def test_node_row_storage_grows_linearly_with_depth(monkeypatch):
    """The rows of a node at depth D (the blocks of its D Lagrangians) and the relaxed dual solved on them: the traced
    peak grows about linearly with D (dense rows are D x D: 16 times the storage at 4 times the depth)."""
    s = _search_of(_bilinear(), monkeypatch, max_iter=3)
    k = len(s.lags) - 1
    c = s.lags[k]["conn"].size
    assert c >= 1
    rng = np.random.default_rng(0)
    blo, bub = s.xlb.copy(), s.xub.copy()

    def node(depth):
        path = tuple((k, rng.random(c) < 0.5) for _ in range(depth))
        s._rows_last = None
        A, lo, hi = s._node_rows(path, blo, bub)
        s.rd.solve_node(A, lo, hi, oa_tol=np.inf, feas_tol=np.inf, max_rounds=1)
        return A.shape

    node(50)   # warm: the first call allocates caches of its own
    peaks = {}
    for d in (400, 1600):
        shape, peaks[d] = traced_peak(node, d)
        assert shape[0] >= d
    dense_bytes = 8 * shape[0] * shape[1]
    assert peaks[1600] < 6 * peaks[400], peaks
    assert peaks[1600] < 0.25 * dense_bytes, (peaks, dense_bytes)


def test_sparse_node_rows_give_the_iterates_of_dense_ones(monkeypatch):
    """The CSR node rows (deep nodes, :func:`relaxed_dual.dense_rows`) against the dense ones (all nodes forced to
    one or the other): the same lower and upper bound and number of open nodes at every iteration. The block
    alternation is off (its share of the run time depends on the clock)."""
    monkeypatch.setattr(S.GopSearch, "alt_share", 0.0)
    hist = {}
    from varopt.core import run as RUN
    orig = RUN.Run.record
    for dense in (True, False):
        monkeypatch.setattr(RD, "DENSE_NODE_ENTRIES", 10 ** 12 if dense else 0)
        rec = []

        def record(self, force=False, _rec=rec, **f):
            _rec.append((f.get("lower"), f.get("upper"), f.get("n_open")))
            return orig(self, force, **f)

        monkeypatch.setattr(RUN.Run, "record", record)
        for name in ("fv", "bilinear"):
            m = fv1990() if name == "fv" else _bilinear()
            r = pyo.SolverFactory("gop").solve(m, mode="gop", max_iter=100).varopt_result
            rec.append((r.status, r.lower_bound, r.upper_bound))
        hist[dense] = rec
    a, b = hist[True], hist[False]
    assert len(a) == len(b) > 20
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            assert u == v or (isinstance(u, float) and v == pytest.approx(u, rel=1e-9, abs=1e-9)), (x, y)


def test_root_descent_without_time_limit_does_not_read_the_clock(monkeypatch):
    """Without a time limit the root descent's budget is a count of rounds (``GopTree.root_rounds``), not seconds:
    with a clock that runs 1 s per reading (a loaded machine) the same seed gives the same incumbent. A 10 s budget
    cut the descent after ten readings here, and a 20 x 20 rank-4 NMF gave 0.0627 instead of 0.0540 when the budget
    was 3 s."""
    import itertools

    from varopt.core import run as core_run
    monkeypatch.setattr(LS.LocalSearch, "max_polish_vars", 0)
    X = nmf_data(6, 5, 2, seed=4)

    def solve():
        m = nmf_model(X, 2)
        r = pyo.SolverFactory("gop").solve(m, max_iter=1, bound_tightening=False, seed=3).varopt_result
        return r.upper_bound, np.array([pyo.value(v) for v in m.component_data_objects(pyo.Var)])

    ub, z = solve()
    ticks = itertools.count()
    monkeypatch.setattr(core_run.Run, "elapsed", lambda self: float(next(ticks)))
    ub_slow, z_slow = solve()
    assert ub_slow == ub and np.array_equal(z_slow, z)
