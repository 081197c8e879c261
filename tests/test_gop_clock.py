"""gop's long phases and the clock (docs/gop.md §8g): the symmetry detection and the root bound tightening stop at
the run's deadline, the root bound tightening shows progress lines, the lower bound stays finite and valid when the
first node LP is cut off, and a run without a time limit does not depend on the clock. No timed assertions: the
clock is replaced by a fake one (``Run.elapsed`` or the ``time`` the run module reads) and LPs are counted."""
import itertools
import math
import types

import numpy as np
import pyomo.environ as pyo
import pytest
from gop_instances import get
from gop_rd_models import MODELS

import varopt  # noqa: F401
from varopt.errors import ModelStructureError
from varopt.core import run as RUN
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.lpqp.model import HighsModel
from varopt.program import symmetry as SYM
from varopt.solvers.gop import tree as TREE

from nmf_models import nmf_data, nmf_model


def _nmf(p=6, q=5, r=2, seed=4):
    return nmf_model(nmf_data(p, q, r, seed=seed), r)


def _loaded_value(m):
    return pyo.value(next(m.component_data_objects(pyo.Objective, active=True)))


def test_symmetry_detection_stops_at_the_first_true_and_keeps_only_verified_orbits():
    """``detect_orbits(stop=...)`` returns at the first ``stop()`` that says True, whatever the step it is in (the
    graph, the keys, a refinement round, an exact check), with orbits that are all exact symmetries."""
    prog, _ = compile_pyomo(_nmf(4, 4, 3))
    full = SYM.detect_orbits(prog)
    assert full, "the rank-3 factorization has interchangeable components"
    calls = itertools.count()
    SYM.detect_orbits(prog, stop=lambda: next(calls) < 0)
    total = next(calls)
    assert total > 20
    for k in sorted({1, 2, 5, total // 4, total // 2, total - 2}):
        asked = []

        def stop(k=k, asked=asked):
            asked.append(len(asked) + 1 >= k)
            return asked[-1]
        out = SYM.detect_orbits(prog, stop=stop)
        assert asked.count(True) == 1 and asked[-1], (k, len(asked))   # nothing after the first True
        for orb in out:
            for p in orb.perms:
                assert SYM.is_symmetry(prog, p)
            assert orb.rep_sets()
    assert len(SYM.detect_orbits(prog, stop=lambda: False)) == len(full)


def test_a_deadline_inside_symmetry_detection_stops_it(monkeypatch):
    """The clock passes the detection's share of the time limit (``DETECT_SHARE``, 2 s of 10 s) during the first
    refinement: the detection stops there (one refinement instead of 1 + 2 per verified swap) and the rest of the
    solve goes on (the fake clock stays at 2.5 s; ``max_iter`` ends it), with a valid bound and a loaded point
    that Pyomo evaluates to the reported value."""
    clock = [0.0]
    monkeypatch.setattr(RUN.Run, "elapsed", lambda self: clock[0])
    refines = []
    orig = SYM._Graph.refine

    def refine(self, *a, **k):
        refines.append(1)
        clock[0] = 2.5
        return orig(self, *a, **k)

    monkeypatch.setattr(SYM._Graph, "refine", refine)
    m = _nmf(4, 4, 3)
    r = pyo.SolverFactory("gop").solve(m, time_limit=10.0, max_iter=2).varopt_result
    assert len(refines) == 1
    assert "stopped" in r.info["symmetry"]["detection"]
    assert r.status == "iteration_limit"
    assert r.lower_bound is not None and 0.0 <= r.lower_bound <= r.upper_bound   # a sum of squares
    assert _loaded_value(m) == pytest.approx(r.upper_bound, rel=1e-9)
    # the whole detection makes more refinements (the test above is the deadline's doing)
    refines.clear()
    clock[0] = 0.0
    monkeypatch.setattr(SYM._Graph, "refine", lambda self, *a, **k: (refines.append(1), orig(self, *a, **k))[1])
    pyo.SolverFactory("gop").solve(_nmf(4, 4, 3), time_limit=10.0, max_iter=1)
    assert len(refines) >= 3


def _count_lps(monkeypatch, clock=None, step=0.0):
    """Count HighsModel.solve calls (and advance the fake ``clock`` by ``step`` per LP)."""
    n = [0]
    orig = HighsModel.solve

    def solve(self, *a, **k):
        n[0] += 1
        if clock is not None:
            clock[0] += step
        return orig(self, *a, **k)

    monkeypatch.setattr(HighsModel, "solve", solve)
    return n


def test_a_deadline_inside_the_root_obbt_stops_it(monkeypatch):
    """Every LP takes one second of a fake clock; the root OBBT may use half of the time left (``obbt_share``) of
    a 10 s limit: it stops after ~5 LPs (of the 2 per product variable it has), and the run after ~10."""
    clock = [0.0]
    monkeypatch.setattr(RUN.Run, "elapsed", lambda self: clock[0])
    n = _count_lps(monkeypatch, clock, 1.0)
    in_obbt = []
    orig = TREE.GopTree._obbt

    def obbt(self, *a, **k):
        n0 = n[0]
        out = orig(self, *a, **k)
        in_obbt.append(n[0] - n0)
        return out

    monkeypatch.setattr(TREE.GopTree, "_obbt", obbt)
    m = _nmf()
    r = pyo.SolverFactory("gop").solve(m, time_limit=10.0, mode="tree", symmetry="off").varopt_result
    assert in_obbt and in_obbt[0] <= 6, in_obbt
    assert n[0] <= 12, n[0]
    assert r.status == "time_limit"
    assert r.lower_bound is not None and r.lower_bound <= r.upper_bound
    # without the limit the same OBBT solves many more LPs (the bound above is the deadline's doing)
    monkeypatch.setattr(RUN.Run, "elapsed", lambda self: 0.0)
    in_obbt.clear()
    pyo.SolverFactory("gop").solve(_nmf(), max_iter=1, mode="tree", symmetry="off")
    assert in_obbt[0] > 12, in_obbt


def test_root_obbt_prints_progress_lines(monkeypatch, capsys):
    """No time limit, ``max_iter=1``, verbose: the root OBBT (dozens of LPs here, ~600 LPs and minutes on a
    300-variable NMF) shows progress lines. The run module's clock advances 0.05 s per reading, so the lines' rate
    (at most one a second) does not depend on the machine; the result is that of the real clock (nothing of a run
    without a time limit reads the clock)."""
    ref = pyo.SolverFactory("gop").solve(_nmf(), max_iter=1, mode="tree").varopt_result
    ticks = itertools.count()
    monkeypatch.setattr(RUN, "time", types.SimpleNamespace(perf_counter=lambda: 0.05 * next(ticks)))
    r = pyo.SolverFactory("gop").solve(_nmf(), max_iter=1, mode="tree", verbose=True).varopt_result
    err = capsys.readouterr().out.splitlines()   # Pyomo verbose prints on stdout, as tee does
    lines = [ln for ln in err if "root bound tightening" in ln]
    assert len(lines) >= 2, err[:20]
    assert all(ln.startswith("gop root bound tightening: round") for ln in lines), lines[:3]
    assert (r.lower_bound, r.upper_bound, r.iterations) == (ref.lower_bound, ref.upper_bound, ref.iterations)


@pytest.mark.parametrize("name", ["nmf_sq", "markov", "st_e01", "haverly1_pq", "st_bpaf1a", "fv1990", "ex5_2_4"])
def test_lower_bound_is_finite_and_valid_when_the_first_lp_is_cut_off(name, monkeypatch):
    """The first node LP is cut off (the tree: every node LP fails, as one stopped by its time limit does; GOP's
    loop: the time limit is reached before the first relaxed dual returns): the bound reported is the interval
    bound of the root box instead of ``-inf``, finite, at most the optimum (SCIP's, ``scip_direct``, when
    available; the collection's certified optimum otherwise). Both modes where the program is in their class."""
    inst = get(name)
    opt = inst.optimum if inst.sense == "min" else -inst.optimum
    from gop_instances.scip import scip_available, solve_scip
    if scip_available():
        s = solve_scip(inst.build(), time_limit=30.0)
        if s["status"] == "optimal":
            opt = s["value"] if inst.sense == "min" else -s["value"]
    # the tree: an LP stopped by its time limit has no optimal status, and the node "fails"
    monkeypatch.setattr(TREE.GopTree, "_solve_node", lambda self, *a, **k: ("failed", -math.inf, None))
    # GOP's loop: the time limit is reached before the first relaxed dual returns
    from varopt.solvers.gop import search as S
    monkeypatch.setattr(S.GopSearch, "_solve_nodes", lambda self, rows, *a, **k: [])
    monkeypatch.setattr(S.Expansion, "tick", lambda self, n: (self.run.stop("time_limit", "cut"), True)[1])
    ran = []
    for mode in ("tree", "gop"):
        m = inst.build()
        try:
            r = pyo.SolverFactory("gop").solve(m, max_iter=2, mode=mode).varopt_result
        except ModelStructureError:   # markov: a norm's defining row is outside GOP's class
            assert mode == "gop" and name == "markov"
            continue
        ran.append(mode)
        lo = r.lower_bound if inst.sense == "min" else -r.upper_bound
        assert lo is not None and math.isfinite(lo), (mode, r.lower_bound, r.upper_bound)
        assert lo <= opt + 1e-6 * max(1.0, abs(opt)), (mode, lo, opt)
    assert ran == (["tree"] if name == "markov" else ["tree", "gop"])


def test_gop_mode_gives_the_same_result_under_a_perturbed_clock(monkeypatch):
    """mode='gop' without a time limit: the block alternation's budget counts work, not seconds, so a clock that
    runs 1 s per reading (a loaded machine) gives the same iterates and point (with the clock share before, the
    alternation ran once instead of 3 times here)."""
    calls = []
    from varopt.solvers.gop import search as S
    orig = S.GopSearch._alternate_rounds

    def rounds(self, *a):
        calls.append(1)
        return orig(self, *a)

    monkeypatch.setattr(S.GopSearch, "_alternate_rounds", rounds)

    def solve():
        calls.clear()
        m = MODELS["bgmm_gaussian"]()
        r = pyo.SolverFactory("gop").solve(m, mode="gop", rel_gap=1e-3).varopt_result
        x = np.array([pyo.value(v) for v in m.component_data_objects(pyo.Var)])
        return (r.status, r.lower_bound, r.upper_bound, r.iterations, r.info["n_subproblems"], len(calls)), x

    a, xa = solve()
    ticks = itertools.count()
    monkeypatch.setattr(RUN.Run, "elapsed", lambda self: float(next(ticks)))
    b, xb = solve()
    assert a == b and np.array_equal(xa, xb), (a, b)
    assert a[0] == "optimal" and a[-1] >= 2


def test_gop_mode_root_children_whose_relaxed_duals_all_fail(monkeypatch):
    """mode='gop': when every relaxed dual of the root's children fails (LP solver failures), the children are
    re-queued with their parent's bound and y; the root's y is the initial one (it was None, and the next primal
    problem crashed). The run then goes on to the same certified optimum, with the failures counted."""
    from varopt.solvers.gop import search as S
    ref = pyo.SolverFactory("gop").solve(MODELS["bgmm_gaussian"](), mode="gop", rel_gap=1e-3).varopt_result
    orig = S.GopSearch._solve_nodes
    n = [0]

    def first_batch_fails(self, rows, *a, **k):
        n[0] += 1
        out = orig(self, rows, *a, **k)
        return [dict(r, status="failed") for r in out] if n[0] == 1 else out

    monkeypatch.setattr(S.GopSearch, "_solve_nodes", first_batch_fails)
    r = pyo.SolverFactory("gop").solve(MODELS["bgmm_gaussian"](), mode="gop", rel_gap=1e-3).varopt_result
    assert r.status == "optimal" and r.info["failed_relaxations"] >= 1
    assert abs(r.upper_bound - ref.upper_bound) <= 1e-3 * max(1.0, abs(ref.upper_bound))
