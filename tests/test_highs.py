"""Tests of the HiGHS layer (varopt/highs.py).

References: scipy.optimize.linprog(method='highs') for LPs, CVXPY + Clarabel (tight
tolerances) for QPs, and the KKT conditions of the returned primal/dual pair in the
layer's sign convention (Q x + c - A'y - z = 0, y >= 0 at lower bounds, <= 0 at upper).
Random instances are built feasible (around a known point x0) and bounded (c is made
dual feasible: c = Q w + A'y + z with sign-feasible y, z), from seeded numpy streams.
"""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from varopt.errors import InputDataError, InvalidOptionError, VaroptError
from varopt.highs import (HighsError, HighsModel, InfeasibleError, LPResult, UnboundedError,
                          kkt_residual, solve_lp, solve_qp)

INF = np.inf
N_LP = 200
N_QP = 200


# ----------------------------------------------------------------------------- generators
def _random_instance(rng, n_max=10, m_max=8, qp=False):
    """Feasible, bounded instance with mixed row types and column bound types."""
    n = int(rng.integers(1, n_max + 1))
    m = int(rng.integers(0, m_max + 1))
    dens = rng.uniform(0.3, 1.0)
    A = rng.normal(size=(m, n)) * (rng.random((m, n)) < dens)
    if rng.random() < 0.3:  # integer data gives degenerate vertices
        A = np.round(A * 2)
    x0 = rng.normal(size=n)
    # column bounds: 0 both finite, 1 lb only, 2 ub only, 3 free, 4 fixed
    ct = rng.choice(5, size=n, p=[0.4, 0.2, 0.15, 0.15, 0.1])
    lb = np.where(np.isin(ct, [0, 1]), x0 - rng.exponential(1.0, n) * (rng.random(n) < 0.8), -INF)
    ub = np.where(np.isin(ct, [0, 2]), x0 + rng.exponential(1.0, n) * (rng.random(n) < 0.8), INF)
    lb = np.where(ct == 4, x0, lb)
    ub = np.where(ct == 4, x0, ub)
    ax = A @ x0
    # row types: 0 <=, 1 >=, 2 ==, 3 ranged, 4 free
    rt = rng.choice(5, size=m, p=[0.3, 0.3, 0.15, 0.2, 0.05])
    s1 = rng.exponential(1.0, m) * (rng.random(m) < 0.7)
    s2 = rng.exponential(1.0, m) * (rng.random(m) < 0.7)
    rlo = np.where(np.isin(rt, [1, 3]), ax - s1, -INF)
    rhi = np.where(np.isin(rt, [0, 3]), ax + s2, INF)
    rlo = np.where(rt == 2, ax, rlo)
    rhi = np.where(rt == 2, ax, rhi)
    # dual-feasible cost so that the problem is bounded
    y = rng.normal(size=m) * (rng.random(m) < 0.6)
    y = np.where(np.isfinite(rlo), y, np.minimum(y, 0.0))
    y = np.where(np.isfinite(rhi), y, np.maximum(y, 0.0))
    z = rng.normal(size=n) * (rng.random(n) < 0.6)
    z = np.where(np.isfinite(lb), z, np.minimum(z, 0.0))
    z = np.where(np.isfinite(ub), z, np.maximum(z, 0.0))
    c = A.T @ y + z
    Q = None
    if qp:
        k = int(rng.integers(1, n + 1))  # k < n gives a singular Q
        B = rng.normal(size=(k, n))
        Q = B.T @ B
        c = c + Q @ rng.normal(size=n)
    return dict(c=c, A=A, row_lo=rlo, row_hi=rhi, lb=lb, ub=ub, Q=Q)


def _linprog_value(d):
    A, rlo, rhi = d["A"], d["row_lo"], d["row_hi"]
    eq = np.isfinite(rlo) & np.isfinite(rhi) & (rlo == rhi)
    up = np.isfinite(rhi) & ~eq
    dn = np.isfinite(rlo) & ~eq
    A_ub = np.vstack([A[up], -A[dn]])
    b_ub = np.concatenate([rhi[up], -rlo[dn]])
    bounds = [(None if not np.isfinite(l) else l, None if not np.isfinite(u) else u)
              for l, u in zip(d["lb"], d["ub"])]
    r = linprog(d["c"], A_ub=A_ub if A_ub.size else None, b_ub=b_ub if A_ub.size else None,
                A_eq=A[eq] if eq.any() else None, b_eq=rlo[eq] if eq.any() else None,
                bounds=bounds, method="highs")
    assert r.status == 0, r.message
    return r.fun


def _clarabel_value(d):
    import cvxpy as cp
    n = d["c"].size
    x = cp.Variable(n)
    A, rlo, rhi = d["A"], d["row_lo"], d["row_hi"]
    cons = []
    eq = np.isfinite(rlo) & np.isfinite(rhi) & (rlo == rhi)
    up = np.isfinite(rhi) & ~eq
    dn = np.isfinite(rlo) & ~eq
    if eq.any():
        cons.append(A[eq] @ x == rlo[eq])
    if up.any():
        cons.append(A[up] @ x <= rhi[up])
    if dn.any():
        cons.append(A[dn] @ x >= rlo[dn])
    fl, fu = np.isfinite(d["lb"]), np.isfinite(d["ub"])
    if fl.any():
        cons.append(x[np.flatnonzero(fl)] >= d["lb"][fl])
    if fu.any():
        cons.append(x[np.flatnonzero(fu)] <= d["ub"][fu])
    Q = d["Q"]
    w, V = np.linalg.eigh(Q)
    B = (V * np.sqrt(np.maximum(w, 0.0))).T  # Q = B'B exactly up to rounding
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(B @ x) + d["c"] @ x), cons)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11,
                   tol_ktratio=1e-9, max_iter=500)
    # "optimal_inaccurate" = stalled short of these very tight tolerances (still ~1e-9);
    # the layer's answers are additionally certified by their KKT residual in every test
    assert prob.status in ("optimal", "optimal_inaccurate"), prob.status
    return prob.value


def _kkt(res, d):
    return kkt_residual(res, d["c"], d["A"], d["row_lo"], d["row_hi"], d["lb"], d["ub"], d["Q"])


# ----------------------------------------------------------------------------- sign convention
def test_native_sign_convention():
    """The 1-variable examples of the module docstring."""
    r = solve_lp([1.0], [[1.0]], [2.0], [INF])  # min x s.t. x >= 2 (row)
    assert r.status == "optimal" and r.x[0] == pytest.approx(2) and r.row_duals[0] == pytest.approx(1)
    r = solve_lp([1.0], lb=[2.0])  # same bound as a column bound
    assert r.col_duals[0] == pytest.approx(1)
    r = solve_lp([-1.0], [[1.0]], [-INF], [3.0])  # min -x s.t. x <= 3
    assert r.x[0] == pytest.approx(3) and r.row_duals[0] == pytest.approx(-1)
    r = solve_lp([-1.0], ub=[3.0])
    assert r.col_duals[0] == pytest.approx(-1)
    # QP: min x^2 + x  s.t. x >= 1  ->  x = 1, y = Q x + c = 3  (1/2 x'Qx with Q = 2)
    r = solve_qp([[2.0]], [1.0], [[1.0]], [1.0], None)
    assert r.x[0] == pytest.approx(1, abs=1e-12) and r.row_duals[0] == pytest.approx(3, abs=1e-10)
    r = solve_qp([[2.0]], [1.0])
    assert r.x[0] == pytest.approx(-0.5, abs=1e-12) and r.objective == pytest.approx(-0.25, abs=1e-12)
    # the dual is the derivative of the optimal value w.r.t. the active bound
    v = [solve_lp([1.0, 2.0], [[1.0, 1.0]], [b], None, lb=[0, 0]).objective for b in (3.0, 3.001)]
    y = solve_lp([1.0, 2.0], [[1.0, 1.0]], [3.0], None, lb=[0, 0]).row_duals[0]
    assert (v[1] - v[0]) / 0.001 == pytest.approx(y)


def _shift_active_bound(d, kind, i, side, t):
    d = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in d.items()}
    key = {("row", 1): "row_lo", ("row", -1): "row_hi", ("col", 1): "lb", ("col", -1): "ub"}[(kind, side)]
    eq = d["row_lo"][i] == d["row_hi"][i] if kind == "row" else d["lb"][i] == d["ub"][i]
    d[key][i] += t
    if eq:  # an equality moves both bounds
        other = {"row_lo": "row_hi", "row_hi": "row_lo", "lb": "ub", "ub": "lb"}[key]
        d[other][i] += t
    return d


@pytest.mark.parametrize("qp", [False, True])
def test_duals_are_derivatives_of_the_optimal_value(qp):
    """Sign convention, independently of HiGHS's: for an active bound b with multiplier y,
    d v*/d b = y whenever the one-sided finite differences agree (nondegenerate)."""
    rng = np.random.default_rng(99 + qp)
    checked = 0
    for t in range(60):
        d = _random_instance(rng, n_max=8, m_max=6, qp=qp)
        res = HighsModel(**d).solve()
        assert res.status == "optimal"
        h = 1e-5
        for kind, duals, act, lo, hi in (("row", res.row_duals, res.row_activity, d["row_lo"], d["row_hi"]),
                                         ("col", res.col_duals, res.x, d["lb"], d["ub"])):
            for i in np.flatnonzero(np.abs(duals) > 1e-3)[:2]:
                side = 1 if np.isfinite(lo[i]) and abs(act[i] - lo[i]) <= 1e-7 * max(1, abs(lo[i])) else -1
                vp = HighsModel(**_shift_active_bound(d, kind, i, side, h)).solve()
                vm = HighsModel(**_shift_active_bound(d, kind, i, side, -h)).solve()
                if vp.status != "optimal" or vm.status != "optimal":
                    continue
                fwd = (vp.objective - res.objective) / h
                bwd = (res.objective - vm.objective) / h
                if abs(fwd - bwd) > 1e-4 * max(1, abs(fwd)):
                    continue  # degenerate: a kink of v*(b)
                assert duals[i] == pytest.approx(0.5 * (fwd + bwd), rel=1e-3, abs=1e-3), (t, kind, i, side)
                if kind == "row" and lo[i] != hi[i]:
                    assert np.sign(duals[i]) == side  # >= 0 at a lower bound, <= 0 at an upper
                checked += 1
    assert checked >= 40


def test_const_in_objective():
    r = solve_qp(np.eye(2), [1.0, -1.0], const=5.0)
    assert r.objective == pytest.approx(5.0 - 1.0)


# ----------------------------------------------------------------------------- random LPs / QPs
def test_random_lps_match_linprog_and_kkt():
    rng = np.random.default_rng(20261122)
    for t in range(N_LP):
        d = _random_instance(rng)
        res = solve_lp(**d)
        assert res.status == "optimal", (t, res.message)
        ref = _linprog_value(d)
        assert abs(res.objective - ref) <= 1e-7 * max(1.0, abs(ref)), (t, res.objective, ref)
        assert _kkt(res, d) <= 1e-6, (t, kkt_residual(res, **{k: d[k] for k in d}, parts=True))
        assert np.allclose(res.row_activity, d["A"] @ res.x, atol=1e-7)


def test_random_qps_match_clarabel_and_kkt():
    rng = np.random.default_rng(7)
    for t in range(N_QP):
        d = _random_instance(rng, n_max=8, m_max=6, qp=True)
        res = solve_qp(d["Q"], d["c"], d["A"], d["row_lo"], d["row_hi"], d["lb"], d["ub"])
        assert res.status == "optimal", (t, res.message, res.info)
        ref = _clarabel_value(d)
        assert abs(res.objective - ref) <= 1e-7 * max(1.0, abs(ref)), (t, res.objective, ref, res.info)
        assert _kkt(res, d) <= 1e-6, (t, res.info)
        q = 0.5 * res.x @ d["Q"] @ res.x + d["c"] @ res.x
        assert q == pytest.approx(res.objective, abs=1e-9 * max(1, abs(q)))


def test_qp_on_box_cycling_instances_are_verified():
    """Degenerate box+row QPs on which HiGHS's active-set solver alone cycles or reports a
    singular PSD Hessian as non-convex (~5% of them); the layer must still be right."""
    import cvxpy as cp
    rng = np.random.default_rng(5)
    for t in range(60):
        n = int(rng.integers(2, 12)); m = int(rng.integers(0, 8)); k = int(rng.integers(1, n + 1))
        A = rng.integers(-2, 3, (m, n)).astype(float)
        B = rng.normal(size=(k, n)); c = rng.normal(size=n)
        res = solve_qp(B.T @ B, c, A, -1, 1, -1, 1)
        assert res.status == "optimal", (t, res.info)
        x = cp.Variable(n)
        cons = [x >= -1, x <= 1] + ([A @ x >= -1, A @ x <= 1] if m else [])
        p = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(B @ x) + c @ x), cons)
        p.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
        assert abs(res.objective - p.value) <= 1e-7 * max(1, abs(p.value)), (t, res.info)
        assert kkt_residual(res, c, A, -1, 1, -1, 1, B.T @ B) <= 1e-6


def test_larger_sparse_qp_matches_clarabel():
    rng = np.random.default_rng(21)
    n, m = 150, 80
    B = sp.random(60, n, density=0.05, random_state=1, format="csr")
    Q = (B.T @ B).toarray()
    A = sp.random(m, n, density=0.05, random_state=2, format="csr").toarray()
    x0 = rng.normal(size=n)
    d = dict(c=rng.normal(size=n), A=A, row_lo=A @ x0 - 1, row_hi=A @ x0 + rng.exponential(1, m),
             lb=x0 - 2, ub=x0 + 2, Q=Q)
    mdl = HighsModel(**d)
    res = mdl.solve()
    assert res.status == "optimal"
    ref = _clarabel_value(d)
    assert abs(res.objective - ref) <= 1e-7 * max(1, abs(ref))
    assert mdl.kkt_residual(res) == pytest.approx(_kkt(res, d)) and _kkt(res, d) <= 1e-6


def test_sparse_inputs_equal_dense():
    rng = np.random.default_rng(3)
    d = _random_instance(rng, n_max=30, m_max=20, qp=True)
    r1 = solve_qp(d["Q"], d["c"], d["A"], d["row_lo"], d["row_hi"], d["lb"], d["ub"])
    r2 = solve_qp(sp.csc_matrix(d["Q"]), d["c"], sp.csr_matrix(d["A"]), d["row_lo"], d["row_hi"], d["lb"], d["ub"])
    assert r1.objective == pytest.approx(r2.objective, rel=1e-10, abs=1e-10)


# ----------------------------------------------------------------------------- statuses
def test_infeasible_lp_and_qp():
    A = [[1.0, 1.0], [1.0, 1.0]]
    r = solve_lp([1.0, 1.0], A, [1.0, -INF], [INF, 0.0])
    assert r.status == "infeasible" and r.x is None
    with pytest.raises(InfeasibleError):
        r.raise_for_status()
    r = solve_qp(np.eye(2), [1.0, 1.0], A, [1.0, -INF], [INF, 0.0])
    assert r.status == "infeasible"
    r = solve_lp([0.0], lb=[1.0], ub=[0.0])  # crossed column bounds
    assert r.status == "infeasible"


def test_unbounded_lp_and_qp():
    r = solve_lp([0.0, -1.0], [[1.0, 1.0]], [1.0], [INF])
    assert r.status == "unbounded"
    with pytest.raises(UnboundedError):
        r.raise_for_status()
    # zero-curvature direction: min 1/2 x1^2 - x2, x2 free
    r = solve_qp(np.diag([1.0, 0.0]), [0.0, -1.0])
    assert r.status == "unbounded"
    # same but the direction is blocked by a row: bounded
    r = solve_qp(np.diag([1.0, 0.0]), [0.0, -1.0], [[1.0, 1.0]], [-INF], [2.0])
    assert r.status == "optimal" and r.objective == pytest.approx(-2.5)  # x1 = -1, x2 = 3


def test_unbounded_qps_that_highs_calls_optimal():
    """Rank-1 Q with free columns: HiGHS's QP solver answers "Optimal" for about half of
    these unbounded QPs; the layer must say "unbounded". Independent check: the Clarabel
    optimum over the box |x| <= R keeps decreasing linearly in R."""
    import cvxpy as cp
    rng = np.random.default_rng(0)
    lb = np.array([-INF, -INF, -INF, 0.7, -0.6])
    ub = np.array([-0.6, INF, INF, 2.5, -0.6])
    for t in range(12):
        b = rng.normal(size=5)
        c = rng.normal(size=5)
        r = solve_qp(np.outer(b, b), c, lb=lb, ub=ub)
        assert r.status == "unbounded", (t, r.info)
        vals = []
        for R in (1e2, 1e3):
            x = cp.Variable(5)
            p = cp.Problem(cp.Minimize(0.5 * cp.square(b @ x) + c @ x),
                           [x >= np.maximum(lb, -R), x <= np.minimum(ub, R)])
            p.solve(solver="CLARABEL")
            vals.append(p.value)
        assert vals[1] < 5 * vals[0] < 0, (t, vals)


def test_unbounded_or_infeasible_is_resolved():
    """PDLP answers kUnboundedOrInfeasible; the phase-1 check must decide."""
    c = [-1.0, 0.0, 0.0]
    A = [[-1, 1, 1], [0, 1, 1]]
    r = solve_lp(c, A, [-INF, 1], [1, INF], [0, 0, 0], [INF, 1, 1], options={"solver": "pdlp", "presolve": "off"})
    assert r.model_status == "Primal infeasible or unbounded" and r.status == "unbounded"
    r = solve_lp([-1.0, 1, 1], [[-1, 1, 1], [0, 1, -1], [0, 1, -1]], [-INF, 3, -INF], [1, INF, 2],
                 [0, 0, 0], options={"solver": "pdlp", "presolve": "off"})
    assert r.model_status == "Primal infeasible or unbounded" and r.status == "infeasible"


def _random_integer_rows(rng, n, m):
    """Small integer ``A (m x n)``, cost ``c`` and row bounds, each side infinite half of the time."""
    A = rng.integers(-2, 3, (m, n)).astype(float)
    c = rng.integers(-2, 3, n).astype(float)
    rl = np.where(rng.random(m) < 0.5, -INF, rng.integers(-2, 3, m)).astype(float)
    rh = np.where(rng.random(m) < 0.5, INF, rng.integers(-2, 3, m)).astype(float)
    return A, c, rl, rh


def test_random_small_lp_statuses_agree_with_linprog():
    rng = np.random.default_rng(11)
    seen = set()
    for t in range(150):
        n = int(rng.integers(1, 5)); m = int(rng.integers(0, 4))
        A, c, rl, rh = _random_integer_rows(rng, n, m)
        lb = np.where(rng.random(n) < 0.5, -INF, rng.integers(-2, 3, n))
        ub = np.where(rng.random(n) < 0.5, INF, rng.integers(-2, 3, n))
        r = solve_lp(c, A, rl, rh, lb, ub)
        # linprog has no ranged rows: split them
        A_ub = np.vstack([A[np.isfinite(rh)], -A[np.isfinite(rl)]])
        b_ub = np.concatenate([rh[np.isfinite(rh)], -rl[np.isfinite(rl)]])
        bad_bounds = (lb > ub).any()
        if bad_bounds:
            assert r.status == "infeasible"
            continue
        ref = linprog(c, A_ub=A_ub if A_ub.size else None, b_ub=b_ub if A_ub.size else None,
                      bounds=[(None if not np.isfinite(l) else l, None if not np.isfinite(u) else u)
                              for l, u in zip(lb, ub)], method="highs", options={"presolve": False})
        # (scipy 1.17's bundled HiGHS presolve calls e.g. seed 11 instance 35, which is
        # unbounded, "infeasible"; without presolve its simplex decides correctly)
        want = {0: "optimal", 2: "infeasible", 3: "unbounded"}[ref.status]
        assert r.status == want, t
        seen.add(want)
        if want == "optimal":
            assert r.objective == pytest.approx(ref.fun, abs=1e-9)
            assert kkt_residual(r, c, A, rl, rh, lb, ub) <= 1e-9
    assert seen == {"optimal", "infeasible", "unbounded"}


def test_random_small_qp_statuses_are_certified():
    """QP statuses against CVXPY+Clarabel on small integer QPs (PSD Q of rank 1)."""
    import cvxpy as cp
    rng = np.random.default_rng(12)
    seen = set()
    for t in range(40):
        n = int(rng.integers(2, 5)); m = int(rng.integers(1, 4))
        A, c, rl, rh = _random_integer_rows(rng, n, m)
        lb = np.where(rng.random(n) < 0.6, 0.0, -INF)
        b = rng.integers(-1, 2, n).astype(float)
        Q = np.outer(b, b) + np.diag((rng.random(n) < 0.3).astype(float))
        r = solve_qp(Q, c, A, rl, rh, lb)
        x = cp.Variable(n)
        cons = [x[np.flatnonzero(np.isfinite(lb))] >= 0] if np.isfinite(lb).any() else []
        if np.isfinite(rh).any():
            cons.append(A[np.isfinite(rh)] @ x <= rh[np.isfinite(rh)])
        if np.isfinite(rl).any():
            cons.append(A[np.isfinite(rl)] @ x >= rl[np.isfinite(rl)])
        p = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, cp.psd_wrap(Q)) + c @ x), cons)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "_inaccurate" infeasibility certificates
            p.solve(solver="CLARABEL")
        want = p.status.replace("_inaccurate", "")
        assert r.status == want, (t, r.info, p.status)
        seen.add(want)
        if want == "optimal":
            assert r.objective == pytest.approx(p.value, abs=1e-6 * max(1, abs(p.value)))
    assert seen == {"optimal", "infeasible", "unbounded"}


def test_time_limit_gives_error_status():
    rng = np.random.default_rng(0)
    d = _random_instance(rng, n_max=40, m_max=30)
    r = solve_lp(**d, time_limit=0.0)
    assert r.status == "error"
    with pytest.raises(HighsError):
        r.raise_for_status()
    d = _random_instance(rng, n_max=40, m_max=30, qp=True)
    r = solve_qp(d["Q"], d["c"], d["A"], d["row_lo"], d["row_hi"], d["lb"], d["ub"], time_limit=0.0)
    assert r.status == "error" and "time limit" in r.message.lower()
    mdl = HighsModel(**d, time_limit=0.0)
    mdl.set_time_limit(None)
    assert mdl.solve().status == "optimal"


# ----------------------------------------------------------------------------- warm re-solves
def _cold(d):
    return HighsModel(**d).solve()


def _mid_lp(seed, n=40, m=30):
    rng = np.random.default_rng(seed)
    while True:
        d = _random_instance(rng, n_max=n, m_max=m)
        if d["c"].size >= 10 and d["A"].shape[0] >= 5:
            return rng, d


def test_warm_set_cost_and_bounds_equal_cold():
    rng, d = _mid_lp(1)
    mdl = HighsModel(**d)
    assert mdl.solve().status == "optimal"
    n, m = d["c"].size, d["A"].shape[0]
    for step in range(12):
        kind = step % 4
        if kind == 0:  # full cost change (kept dual feasible via the box)
            d["c"] = d["c"] + 0.3 * rng.normal(size=n) * np.isfinite(d["lb"]) * np.isfinite(d["ub"])
            mdl.set_cost(d["c"])
        elif kind == 1:  # partial cost change
            idx = rng.choice(n, size=3, replace=False)
            new = d["c"][idx] + 0.1 * rng.normal(size=3) * (np.isfinite(d["lb"][idx]) & np.isfinite(d["ub"][idx]))
            d["c"][idx] = new
            mdl.set_cost(new, idx)
        elif kind == 2:  # widen some column bounds
            idx = rng.choice(n, size=2, replace=False)
            d["lb"][idx] -= 0.5
            d["ub"][idx] += 0.5
            mdl.set_col_bounds(idx, d["lb"][idx], d["ub"][idx])
        else:  # widen some row bounds
            idx = rng.choice(m, size=2, replace=False)
            d["row_lo"][idx] -= 0.5
            d["row_hi"][idx] += 0.5
            mdl.set_row_bounds(idx, d["row_lo"][idx], d["row_hi"][idx])
        warm, cold = mdl.solve(), _cold(d)
        assert warm.status == cold.status == "optimal"
        assert warm.objective == pytest.approx(cold.objective, rel=1e-9, abs=1e-9)
        assert warm.objective == pytest.approx(_linprog_value(d), rel=1e-8, abs=1e-8)
        assert _kkt(warm, d) <= 1e-7


def test_warm_add_and_delete_rows_equal_cold():
    rng, d = _mid_lp(2)
    n = d["c"].size
    mdl = HighsModel(**d)
    x = mdl.solve().x
    # add cuts through the current optimum (still feasible: contain a shifted copy of x0)
    G = rng.normal(size=(4, n))
    lo = np.full(4, -INF)
    hi = G @ x - 0.05
    rows = mdl.add_rows(sp.csr_matrix(G), lo, hi)
    assert list(rows) == list(range(d["A"].shape[0], d["A"].shape[0] + 4))
    d2 = dict(d, A=np.vstack([d["A"], G]), row_lo=np.concatenate([d["row_lo"], lo]),
              row_hi=np.concatenate([d["row_hi"], hi]))
    warm, cold = mdl.solve(), _cold(d2)
    assert warm.status == cold.status
    if cold.status == "optimal":
        assert warm.objective == pytest.approx(cold.objective, rel=1e-9, abs=1e-9)
        assert warm.objective >= HighsModel(**d).solve().objective - 1e-9
        assert _kkt(warm, d2) <= 1e-7
    # delete two original rows and one added row
    dele = np.array([1, 3, rows[2]])
    newpos = mdl.delete_rows(dele)
    keep = np.setdiff1d(np.arange(d2["A"].shape[0]), dele)
    assert (newpos[dele] == -1).all() and (newpos[keep] == np.arange(keep.size)).all()
    assert mdl.num_rows == keep.size
    d3 = dict(d2, A=d2["A"][keep], row_lo=d2["row_lo"][keep], row_hi=d2["row_hi"][keep])
    warm, cold = mdl.solve(), _cold(d3)
    assert warm.status == cold.status
    if cold.status == "optimal":
        assert warm.objective == pytest.approx(cold.objective, rel=1e-9, abs=1e-9)
        assert _kkt(warm, d3) <= 1e-7
    back = mdl.data()
    assert np.allclose(back["A"].toarray(), d3["A"]) and np.array_equal(back["row_hi"], d3["row_hi"])


@pytest.mark.parametrize("qp", [False, True])
def test_random_modification_sequences_equal_cold(qp):
    """Random interleavings of every modification; after each, warm == cold (status and value)."""
    rng = np.random.default_rng(31 + qp)
    d = _random_instance(rng, n_max=12, m_max=8, qp=qp)
    while d["c"].size < 4:
        d = _random_instance(rng, n_max=12, m_max=8, qp=qp)
    d = dict(d, A=np.asarray(d["A"], float))
    mdl = HighsModel(**d)
    mdl.solve()
    n = d["c"].size
    for step in range(40):
        m = d["A"].shape[0]
        op = rng.choice(["cost", "col", "row", "add", "del", "coef"])
        if op == "cost":
            idx = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
            v = rng.normal(size=idx.size)
            d["c"][idx] = v
            mdl.set_cost(v, idx)
        elif op == "col":
            idx = rng.choice(n, size=int(rng.integers(1, 3)), replace=False)
            lo = -rng.exponential(2.0, idx.size)
            hi = lo + rng.exponential(3.0, idx.size)
            d["lb"][idx], d["ub"][idx] = lo, hi
            mdl.set_col_bounds(idx, lo, hi)
        elif op == "row" and m:
            idx = rng.choice(m, size=1)
            lo, hi = -rng.exponential(2.0), rng.exponential(2.0)
            d["row_lo"][idx], d["row_hi"][idx] = lo, hi
            mdl.set_row_bounds(idx, lo, hi)
        elif op == "add":
            G = rng.normal(size=(2, n)) * (rng.random((2, n)) < 0.6)
            lo, hi = np.array([-INF, -1.0]), np.array([2.0, INF])
            rows = mdl.add_rows(G, lo, hi)
            assert list(rows) == [m, m + 1]
            d["A"] = np.vstack([d["A"], G])
            d["row_lo"] = np.concatenate([d["row_lo"], lo])
            d["row_hi"] = np.concatenate([d["row_hi"], hi])
        elif op == "del" and m:
            idx = rng.choice(m, size=int(rng.integers(1, min(m, 3) + 1)), replace=False)
            newpos = mdl.delete_rows(idx)
            keep = np.setdiff1d(np.arange(m), idx)
            assert (newpos[keep] == np.arange(keep.size)).all()
            d["A"], d["row_lo"], d["row_hi"] = d["A"][keep], d["row_lo"][keep], d["row_hi"][keep]
        elif op == "coef" and m:
            i, j, v = int(rng.integers(m)), int(rng.integers(n)), float(rng.normal())
            d["A"][i, j] = v
            mdl.set_coefficient(i, j, v)
        warm, cold = mdl.solve(), HighsModel(**d).solve()
        assert warm.status == cold.status, (step, op, warm.message, cold.message)
        if cold.status == "optimal":
            assert warm.objective == pytest.approx(cold.objective, rel=1e-8, abs=1e-8), (step, op)
            assert _kkt(warm, d) <= 1e-6
        back = mdl.data()
        assert np.allclose(back["A"].toarray(), d["A"]) and np.array_equal(back["row_lo"], d["row_lo"])
        assert np.array_equal(back["c"], d["c"]) and np.array_equal(back["ub"], d["ub"])


def test_native_debug_prints_do_not_reach_stdout(capfd, monkeypatch):
    """HiGHS 1.15 printf's postsolve debug lines to stdout in this sequence (seed 1009, QP)."""
    import varopt.lpqp.process as vh  # where the flag is read
    real = np.random.default_rng
    monkeypatch.setattr(np.random, "default_rng", lambda seed: real(1009))
    monkeypatch.setattr(vh, "SILENCE_NATIVE_STDOUT", False)
    test_random_modification_sequences_equal_cold(True)
    out, _err = capfd.readouterr()
    if "HighsPostsolveStack" not in out:
        pytest.skip("this HiGHS build does not print the postsolve debug lines")
    monkeypatch.setattr(vh, "SILENCE_NATIVE_STDOUT", True)
    test_random_modification_sequences_equal_cold(True)
    out, _err = capfd.readouterr()
    assert "HighsPostsolveStack" not in out


def test_warm_resolve_uses_fewer_iterations():
    rng, d = _mid_lp(4, n=80, m=60)
    mdl = HighsModel(**d)
    first = mdl.solve()
    again = mdl.solve()  # nothing changed: the held basis is optimal
    assert again.iterations == 0 and again.objective == pytest.approx(first.objective)


def test_set_coefficient_and_add_cols():
    rng, d = _mid_lp(5)
    mdl = HighsModel(**d)
    mdl.solve()
    d["A"][0, 0] = 0.7
    mdl.set_coefficient(0, 0, 0.7)
    w = mdl.solve()
    c = _cold(d)
    assert w.status == c.status
    if c.status == "optimal":
        assert w.objective == pytest.approx(c.objective, rel=1e-9, abs=1e-9)
    m = d["A"].shape[0]
    col = rng.normal(size=(m, 2))
    idx = mdl.add_cols([1.0, 2.0], [0.0, 0.0], [1.0, 1.0], col)
    assert list(idx) == [d["c"].size, d["c"].size + 1]
    d2 = dict(d, c=np.concatenate([d["c"], [1.0, 2.0]]), A=np.hstack([d["A"], col]),
              lb=np.concatenate([d["lb"], [0, 0]]), ub=np.concatenate([d["ub"], [1, 1]]))
    w, c = mdl.solve(), _cold(d2)
    assert w.status == c.status
    if c.status == "optimal":
        assert w.objective == pytest.approx(c.objective, rel=1e-9, abs=1e-9)


def test_qp_warm_changes_and_set_hessian():
    rng = np.random.default_rng(8)
    d = _random_instance(rng, n_max=12, m_max=8, qp=True)
    while d["c"].size < 4:
        d = _random_instance(rng, n_max=12, m_max=8, qp=True)
    mdl = HighsModel(**d)
    assert mdl.solve().status == "optimal"
    n = d["c"].size
    d["c"] = d["c"] + d["Q"] @ rng.normal(size=n)  # stays bounded (range of Q)
    mdl.set_cost(d["c"])
    w = mdl.solve()
    assert w.objective == pytest.approx(_clarabel_value(d), abs=1e-7 * max(1, abs(w.objective)))
    B = rng.normal(size=(n, n))
    d["Q"] = B.T @ B
    mdl.set_hessian(d["Q"])
    w = mdl.solve()
    assert w.objective == pytest.approx(_clarabel_value(d), abs=1e-7 * max(1, abs(w.objective)))
    assert _kkt(w, d) <= 1e-6
    # removing the Hessian makes it an LP again
    mdl.set_hessian(None)
    w = mdl.solve()
    d_lp = dict(d, Q=None)
    c = _cold(d_lp)
    assert w.status == c.status
    if c.status == "optimal":
        assert w.objective == pytest.approx(c.objective, rel=1e-9, abs=1e-9)


# ----------------------------------------------------------------------------- validation
def test_input_validation_names_the_argument():
    with pytest.raises(InputDataError, match="c"):
        solve_lp([1.0, np.nan])
    with pytest.raises(InputDataError, match="A"):
        solve_lp([1.0, 1.0], [[1.0, np.nan]], [0.0], [1.0])
    with pytest.raises(InputDataError, match="A"):
        solve_lp([1.0, 1.0], [[1.0, 1.0, 1.0]], [0.0], [1.0])
    with pytest.raises(InputDataError, match="row_lo"):
        solve_lp([1.0], [[1.0]], [np.nan], [1.0])
    with pytest.raises(InputDataError, match="row_hi"):
        solve_lp([1.0], [[1.0]], [0.0], [1.0, 2.0])
    with pytest.raises(InputDataError, match="lb"):
        solve_lp([1.0], lb=[INF])
    with pytest.raises(InputDataError, match="ub"):
        solve_lp([1.0], ub=[np.nan])
    with pytest.raises(InputDataError, match="Q"):
        solve_qp([[1.0, 2.0], [0.0, 1.0]], [0.0, 0.0])  # not symmetric
    with pytest.raises(InputDataError, match="Q"):
        solve_qp([[-1.0]], [0.0])
    with pytest.raises(InputDataError, match="Q"):
        solve_qp(np.eye(3), [0.0, 0.0])
    with pytest.raises(InputDataError, match="semidefinite"):  # positive diagonal, indefinite
        solve_qp(sp.block_diag([[[1.0, 2.0], [2.0, 1.0]], sp.identity(50)]), np.ones(52), lb=-1, ub=1)
    with pytest.raises(InputDataError, match="const"):
        solve_lp([1.0], const=np.inf)
    with pytest.raises(InvalidOptionError, match="no_such_option"):
        solve_lp([1.0], options={"no_such_option": 1})
    with pytest.raises(InvalidOptionError):
        solve_lp([1.0], options={"presolve": "maybe"})
    with pytest.raises(InvalidOptionError, match="threads"):
        solve_lp([1.0], options={"threads": -1})
    # HiGHS's scheduler is process-global: differing thread requests must not break solves
    for th in (1, 2, 0, 1):
        assert solve_lp([1.0], lb=0, options={"threads": th, "presolve": "off"}).status == "optimal"
    mdl = HighsModel([1.0, 2.0], lb=0)
    with pytest.raises(InputDataError):
        mdl.set_col_bounds([0, 0], 0, 1)  # duplicate
    with pytest.raises(InputDataError):
        mdl.set_col_bounds([5], 0, 1)
    with pytest.raises(InputDataError, match="c"):
        mdl.set_cost([np.nan, 1.0])
    assert issubclass(InfeasibleError, VaroptError) and issubclass(UnboundedError, VaroptError)
    assert LPResult("optimal").raise_for_status().status == "optimal"


@pytest.mark.parametrize("fail_calls, solver", [(3, "HiGHS IPM"), (99, "Clarabel")])
def test_lp_fallbacks_when_simplex_keeps_stopping(monkeypatch, fail_calls, solver):
    """HiGHS 'Unknown' on the first solve and both cold retries -> IPM; IPM failing too -> Clarabel."""
    from varopt import highs as H
    c = np.array([1.0, 2.0])
    A = sp.csr_matrix(np.array([[1.0, 1.0]]))
    m = H.HighsModel(c, A, np.array([1.0]), np.array([np.inf]), np.zeros(2), np.full(2, 10.0))
    real = H.HighsModel._solve_once
    calls = {"n": 0}

    def flaky(self):
        calls["n"] += 1
        if calls["n"] <= fail_calls:
            return H.LPResult("error", message="HiGHS stopped: Unknown", model_status="Unknown")
        return real(self)
    monkeypatch.setattr(H.HighsModel, "_solve_once", flaky)
    res = m.solve()
    assert res.status == "optimal" and solver in res.message
    assert np.allclose(res.x, [1.0, 0.0], atol=1e-7) and abs(res.objective - 1.0) < 1e-7


@pytest.mark.parametrize("norm", ["l2", "l1"])
def test_project_onto_polyhedron_matches_clarabel(norm):
    """lpqp.project: the nearest point of {lo <= A z <= hi, lb <= z <= ub}, checked with CVXPY+Clarabel."""
    import cvxpy as cp
    from varopt.lpqp import project
    rng = np.random.default_rng(5)
    for _ in range(5):
        n, m = 6, 4
        A = rng.normal(size=(m, n))
        z0 = rng.uniform(-1, 1, n)
        lo, hi = A @ z0 - rng.uniform(0, 0.5, m), A @ z0 + rng.uniform(0, 0.5, m)
        lb, ub = np.full(n, -1.0), np.full(n, 1.0)
        x = 3.0 * rng.normal(size=n)
        res = project(x, sp.csr_matrix(A), lo, hi, lb, ub, norm=norm)
        z = cp.Variable(n)
        dist = cp.sum_squares(z - x) / 2 if norm == "l2" else cp.norm1(z - x)
        ref = cp.Problem(cp.Minimize(dist), [A @ z >= lo, A @ z <= hi, z >= lb, z <= ub])
        ref.solve(solver=cp.CLARABEL)
        assert res.status == "optimal" and res.x.shape == (n,)
        got = 0.5 * np.sum((res.x - x) ** 2) if norm == "l2" else np.abs(res.x - x).sum()
        assert got == pytest.approx(ref.value, rel=1e-6, abs=1e-8)
        assert np.all(A @ res.x >= lo - 1e-8) and np.all(A @ res.x <= hi + 1e-8)
    empty = project(np.zeros(2), sp.csr_matrix([[1.0, 0.0]]), [2.0], [3.0], [-1, -1], [1, 1], norm=norm)
    assert empty.status == "infeasible"
    with pytest.raises(ValueError, match="norm"):
        project(np.zeros(2), norm="linf")


def test_highs_writes_nothing_on_stdout(capfd):
    """HiGHS >= 1.16 prints a banner when a Highs object is built; varopt's stdout (CLI JSON,
    Pyomo tee) must stay clean."""
    from varopt.lpqp import HighsModel
    HighsModel(np.array([1.0, 2.0]), lb=np.zeros(2), ub=np.ones(2)).solve()
    assert capfd.readouterr().out == ""


def test_set_coefficients_batches_equal_cold():
    """``set_coefficients`` (several entries, repeated rows and columns, zeros that remove entries) keeps the
    model equal to one built cold from the changed data, warm solve for warm solve."""
    rng, d = _mid_lp(6)
    d = dict(d, A=np.asarray(d["A"], float))
    mdl = HighsModel(**d)
    mdl.solve()
    m, n = d["A"].shape
    for step in range(25):
        k = int(rng.integers(1, 3 * n))
        rows = rng.integers(0, min(m, 3), size=k)        # a few rows, hit many times
        cols = rng.integers(0, n, size=k)
        flat = np.unique(rows * n + cols)                 # one value per entry
        rows, cols = flat // n, flat % n
        vals = np.where(rng.random(rows.size) < 0.3, 0.0, rng.normal(size=rows.size))
        d["A"][rows, cols] = vals
        mdl.set_coefficients(rows, cols, vals)
        warm, cold = mdl.solve(), HighsModel(**d).solve()
        assert warm.status == cold.status, (step, warm.message, cold.message)
        if cold.status == "optimal":
            assert warm.objective == pytest.approx(cold.objective, rel=1e-8, abs=1e-8), step
        assert np.allclose(mdl.data()["A"].toarray(), d["A"])
    with pytest.raises(InputDataError, match="rows"):
        mdl.set_coefficients([m], [0], [1.0])
    with pytest.raises(InputDataError, match="cols"):
        mdl.set_coefficients([0], [-1], [1.0])
    with pytest.raises(InputDataError, match="finite"):
        mdl.set_coefficients([0], [0], [np.nan])
    with pytest.raises(InputDataError, match="sizes"):
        mdl.set_coefficients([0, 1], [0], [1.0])


def test_large_cold_qp_goes_to_clarabel_first_and_is_verified():
    """A projection onto 1,000 rows t >= X w - y, t >= 0 (1,050 columns): HiGHS's active set cycled to its iteration
    limit three times (23 s) before the Clarabel fallback solved it in 0.09 s. A cold QP with >= 1,500 columns + rows
    now starts with Clarabel; the answer is polished and KKT-verified like any other, and equals an independent
    CVXPY+Clarabel solve. A warm re-solve of the same model keeps HiGHS first."""
    import cvxpy as cp
    from varopt.lpqp import project
    rng = np.random.default_rng(0)
    N, D = 1000, 50
    X = rng.standard_normal((N, D))
    y = X @ rng.standard_normal(D) + rng.standard_t(2, N)
    A = sp.hstack([-sp.csr_matrix(X), sp.identity(N)], format="csr")
    lb = np.concatenate([np.full(D, -np.inf), np.zeros(N)])
    res = project(np.zeros(D + N), A, -y, np.full(N, np.inf), lb, np.full(D + N, np.inf))
    assert res.status == "optimal" and res.info["attempts"][0].startswith("clarabel")
    assert res.info["kkt"] <= 1e-8 and not res.info.get("unverified")
    z = cp.Variable(D + N)
    ref = cp.Problem(cp.Minimize(cp.sum_squares(z) / 2), [A @ z >= -y, z[D:] >= 0]).solve(solver=cp.CLARABEL)
    assert res.objective == pytest.approx(ref, rel=1e-7)
    assert np.all(A @ res.x >= -y - 1e-8) and np.all(res.x[D:] >= -1e-12)


def test_qp_iteration_limit_skips_the_other_highs_attempts(monkeypatch):
    """HiGHS stopping at the layer's own iteration limit (cycling) goes straight to Clarabel: the two regularised
    HiGHS retries cycled as well (3 x 7.7 s on the projection above)."""
    from varopt import highs as H
    real = H.HighsModel._solve_once
    calls = {"n": 0}

    def cycling(self):
        calls["n"] += 1
        if self._L is not None:
            return H.LPResult("error", message="HiGHS stopped: Iteration limit reached",
                              model_status="Iteration limit reached")
        return real(self)
    monkeypatch.setattr(H.HighsModel, "_solve_once", cycling)
    Q = np.array([[2.0, 0.5], [0.5, 1.0]])
    res = solve_qp(Q, np.array([-1.0, -1.0]), lb=np.full(2, -5.0), ub=np.full(2, 5.0))
    assert res.status == "optimal" and res.info["attempts"] == ["Iteration limit reached", "clarabel: Solved"]
    assert np.allclose(res.x, np.linalg.solve(Q, [1.0, 1.0]), atol=1e-8) and calls["n"] == 1
    # a user's own qp_iteration_limit is theirs: the retries run
    calls["n"] = 0
    res = solve_qp(Q, np.array([-1.0, -1.0]), lb=np.full(2, -5.0), ub=np.full(2, 5.0),
                   options={"qp_iteration_limit": 50})
    assert res.status == "optimal" and calls["n"] == 3


def test_cold_qp_with_dense_equality_rows_goes_to_clarabel_first():
    """A projection onto 150 dense equality rows in 300 columns (450 columns + rows, under the size rule): HiGHS's
    active set took 0.33 s against Clarabel's 0.03 s, and 12 s on 500 rows in 900 columns (Clarabel 0.33 s;
    benchmarks/lpqp_equality_qps.py). A cold QP whose equality rows hold >= 30,000 nonzeros starts with Clarabel,
    polished and verified the same way; the optimum equals an independent CVXPY+Clarabel solve. Inequality rows of the
    same size keep HiGHS first (it was as fast as Clarabel on them)."""
    import cvxpy as cp
    rng = np.random.default_rng(4)
    n, m = 300, 150
    A = rng.standard_normal((m, n)) / np.sqrt(n)
    e = A @ rng.uniform(-1, 1, n)
    c = 3 * rng.standard_normal(n)
    res = solve_qp(sp.identity(n, format="csr") * 2.0, c, sp.csr_matrix(A), e, e, np.full(n, -3.0), np.full(n, 3.0))
    assert res.status == "optimal" and res.info["attempts"][0].startswith("clarabel"), res.info["attempts"]
    assert res.info["kkt"] <= 1e-8 and not res.info.get("unverified")
    z = cp.Variable(n)
    ref = cp.Problem(cp.Minimize(cp.sum_squares(z) + c @ z), [A @ z == e, z >= -3, z <= 3]).solve(solver=cp.CLARABEL)
    assert res.objective == pytest.approx(ref, rel=1e-8)
    assert np.abs(A @ res.x - e).max() <= 1e-8
    res = solve_qp(sp.identity(n, format="csr") * 2.0, c, sp.csr_matrix(A), np.full(m, -np.inf), e + 0.1)
    assert res.status == "optimal" and not res.info["attempts"][0].startswith("clarabel"), res.info["attempts"]
