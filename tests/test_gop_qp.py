"""gop's tree on nonconvex QPs and QCQPs: the convex part of an indefinite objective kept whole, the warm cut
loop and the scheduled SLSQP polish (docs/gop.md §12e). Each test fails without the change it checks."""
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varopt  # noqa: F401
from varopt.frontends.pyomo_compile import compile_pyomo
from varopt.solvers.gop import tree as tree_mod
from varopt.solvers.gop.convex_part import ConvexPart
from varopt.solvers.gop.relax import Lifted

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from gop_qp import boxqp_data, build_boxqp, build_polygon


def _boxqp_brute(n, density, seed):
    """The optimum of a BoxQP by enumeration: every local minimizer of ``min 1/2 x'Qx + c'x`` on ``[0, 1]^n``
    has each coordinate at a bound or at a stationary point of its free subproblem; for each choice of the
    free set solve the linear system and keep the feasible points."""
    Q, c = boxqp_data(n, density, seed)
    best = math.inf
    for mask in itertools.product((0, 1, 2), repeat=n):   # 0: at 0, 1: at 1, 2: free
        x = np.array([1.0 if m == 1 else 0.0 for m in mask])
        F = [i for i, m in enumerate(mask) if m == 2]
        if F:
            B = [i for i in range(n) if i not in F]
            rhs = -(c[F] + Q[np.ix_(F, B)] @ x[B])
            try:
                xf = np.linalg.solve(Q[np.ix_(F, F)], rhs)
            except np.linalg.LinAlgError:
                continue
            if np.any(xf < -1e-12) or np.any(xf > 1 + 1e-12):
                continue
            x[F] = xf
        best = min(best, 0.5 * x @ Q @ x + c @ x)
    return best


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), shrink=st.floats(0.0, 0.95))
def test_convex_part_rows_hold_at_every_lift(seed, shrink):
    """Every point of a box satisfies the convex-part rows of that box at its exact lift, for cut points
    anywhere (the node LP stays a relaxation). Fails when the secant is replaced by the tangent of ``x_i^2``
    or the margin on ``lambda_min`` is dropped the wrong way (D too small makes ``M`` indefinite)."""
    rng = np.random.default_rng(seed)
    n = 5
    m = build_boxqp(n, 75, seed % 1000 + 1)
    m.obj.deactivate()
    # an objective with a constant, a linear part on every variable and a square atom
    m.obj2 = pyo.Objective(expr=m.obj.expr + 3.0 + (m.x[0] - 2 * m.x[1] + 0.5) ** 2 - 4 * m.x[2] * m.x[3])
    prog, _ = compile_pyomo(m)
    lf = Lifted(prog)
    cp_ = ConvexPart.build(prog, lf)
    assert cp_ is not None
    lo = rng.uniform(-2, 1, prog.n)
    hi = lo + rng.uniform(0.0, 3.0, prog.n) * (1 - shrink)
    pts = [rng.uniform(-3, 3, cp_.idx.size) for _ in range(4)]
    A, rlo, _ = cp_.rows(lo, hi, pts)
    assert A.shape[0] == 4
    for _ in range(30):
        z = rng.uniform(lo, hi)
        Z = lf.lift(z)
        assert abs((lf.R[0] @ Z)[0] + lf.const[0] - prog.objective.value(z)) <= 1e-9 * (1 + abs(prog.objective.value(z)))
        act = A @ Z
        assert np.all(act >= rlo - 1e-9 * (1 + np.abs(rlo) + np.abs(act))), (act - rlo).min()


def test_convex_part_is_built_only_for_indefinite_quadratic_objectives():
    def prog_of(expr_fn):
        m = pyo.ConcreteModel()
        m.x = pyo.Var(range(3), bounds=(0, 1))
        m.obj = pyo.Objective(expr=expr_fn(m))
        return compile_pyomo(m)[0]
    convex = prog_of(lambda m: m.x[0] ** 2 + m.x[1] ** 2 + m.x[0] * m.x[1])
    indefinite = prog_of(lambda m: m.x[0] * m.x[1] - m.x[2] ** 2)
    linear = prog_of(lambda m: m.x[0] + m.x[1])
    assert ConvexPart.build(convex, Lifted(convex)) is None
    assert ConvexPart.build(linear, Lifted(linear)) is None
    cp_ = ConvexPart.build(indefinite, Lifted(indefinite))
    assert cp_ is not None and np.linalg.eigvalsh(cp_.M)[0] >= 0


def test_convex_part_raises_the_root_bound_of_a_dense_boxqp():
    """A 20-variable BoxQP at 75 % density (Vandenbussche & Nemhauser's recipe, seed 2): after one node the
    bound with the convex-part rows is far above the McCormick bound (-945.75 at the root without OBBT), and
    never above the optimum -544.5 (SCIP 10, gap 1e-9). Fails with ``convex_part = False``."""
    def first_node_bound(flag):
        old = tree_mod.GopTree.convex_part
        tree_mod.GopTree.convex_part = flag
        try:
            r = pyo.SolverFactory("gop").solve(build_boxqp(20, 75, 2), mode="tree", max_iter=1,
                                               load_solutions=False).varopt_result
        finally:
            tree_mod.GopTree.convex_part = old
        return r.lower_bound, r.upper_bound
    lb_on, ub_on = first_node_bound(True)
    lb_off, _ = first_node_bound(False)
    assert lb_on <= -544.5 + 1e-6 * 544.5 and ub_on >= -544.5 - 1e-6 * 544.5
    assert lb_on > lb_off + 100.0, (lb_on, lb_off)


@pytest.mark.parametrize("seed", [1, 2])
def test_small_boxqp_certified_at_the_enumerated_optimum(seed):
    """BoxQPs with 7 variables at 75 % density, certified by the tree against the enumeration of the KKT
    candidates (3^7 free sets)."""
    opt = _boxqp_brute(7, 75, seed)
    r = pyo.SolverFactory("gop").solve(build_boxqp(7, 75, seed), mode="tree", time_limit=20).varopt_result
    assert r.status == "optimal"
    tol = 1e-6 * max(1.0, abs(opt))
    assert abs(r.upper_bound - opt) <= tol and r.lower_bound <= opt + tol


def test_warm_cut_rounds_append_rows_to_one_lp(monkeypatch):
    """The tangent-cut rounds of a node re-solve one LP with rows appended (one ``_lp`` build per node
    relaxation), and the rows kept for reduced-cost tightening match the LP's duals. Fails when every round
    builds a new LP."""
    built = []
    orig = tree_mod.GopTree._lp

    def counting(self, *a, **k):
        built.append(1)
        return orig(self, *a, **k)
    calls = []
    orig_solve = tree_mod.GopTree._solve_node

    def solve_counting(self, *a, **k):
        n0 = len(built)
        out = orig_solve(self, *a, **k)
        calls.append(len(built) - n0)
        if out[0] == "optimal":
            assert self._last_lp[1].shape[0] == len(self._last_duals)
        return out
    monkeypatch.setattr(tree_mod.GopTree, "_lp", counting)
    monkeypatch.setattr(tree_mod.GopTree, "_solve_node", solve_counting)
    r = pyo.SolverFactory("gop").solve(build_polygon(5, False), mode="tree", max_iter=6,
                                       load_solutions=False).varopt_result
    assert r.lower_bound >= 0.6571638 - 1e-6
    assert calls and max(calls) == 1, calls


def test_scheduled_polish_finds_the_hexagon_optimum():
    """The hexagon QCQP of MINLPLib himmel16 (Himmelblau's statement, the areas through auxiliary rows): within
    16 nodes the incumbent is SCIP's optimum sqrt(3)/2 = 0.8660254 (a unit triangle traversed twice, which the
    shoelace sum counts twice). The block alternation alone stopped at a degenerate pentagon, 0.6571639, for
    the whole of a 30 s limit. Fails with ``polish_scheduled_vars = 0``."""
    r = pyo.SolverFactory("gop").solve(build_polygon(6, True), mode="tree", max_iter=16,
                                       load_solutions=False).varopt_result
    # maximisation: the incumbent is the lower bound of the user's objective
    assert r.lower_bound >= math.sqrt(3) / 2 - 1e-7, r.lower_bound
    assert r.upper_bound >= math.sqrt(3) / 2 - 1e-7
