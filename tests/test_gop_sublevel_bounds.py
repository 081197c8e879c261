"""Bounds of an atom's argument from an upper bound of the atom (the sublevel set of a convex ``g``).

``sum(exp(v)) <= 3`` over a ``v`` without an upper bound ran the tree to its time limit without an incumbent (with
``v >= -4``) or was refused as unbounded (with ``v >= -1e6``): FBBT bounded ``T = exp(v) <= 3`` but not ``v``. The
tree's FBBT now maps an upper bound of every one-argument atom column back to its argument (``v <= log 3``).
References: Clarabel (the programs are convex), the kernels' own values for the intervals.
"""
import math

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varopt  # noqa: F401  (registers method='gop')
from varopt.program.atoms import ATOMS
from varopt.program.powers import power_kind

KINDS = ["exp", "neglog", "abs"] + [power_kind(p) for p in (3, 4, 1.5, 0.5, -1, -2.5)]


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), u=st.floats(-30, 30), slack=st.floats(0, 50))
def test_every_point_of_the_sublevel_set_is_inside_the_interval(kind, u, slack):
    """``g(u) <= th`` implies ``u`` in ``sublevel(th)``; the finite ends are where ``g`` reaches ``th`` (tight)."""
    k = ATOMS[kind]
    if not k.in_domain(np.array(u)) or (k.domain[0] == 0 and u == 0 and not k.domain[2]):
        return
    g = float(k.value(np.array(u)))
    if not math.isfinite(g):
        return
    th = g + slack
    iv = k.sublevel(th)
    assert iv is not None, (kind, th)
    lo, hi = iv
    assert lo <= u <= hi, (kind, u, th, iv)
    # tight: moved 1e-9 inwards, a finite end that is not the domain's own end is in the sublevel set
    for end, side in ((lo, 1.0), (hi, -1.0)):
        if math.isfinite(end) and end != k.domain[0] and hi - lo > 4e-9 * max(1.0, abs(end)):
            inner = end + side * 1e-9 * max(1.0, abs(end))
            assert float(k.value(np.array(inner))) <= th * (1 + 1e-12) + 1e-12, (kind, end, th)


def test_thresholds_below_the_infimum_give_no_interval():
    assert ATOMS["exp"].sublevel(0.0) is None and ATOMS["exp"].sublevel(math.inf) is None
    assert ATOMS["abs"].sublevel(-1.0) is None and ATOMS[power_kind(4)].sublevel(-1.0) is None
    assert ATOMS[power_kind(-1)].sublevel(0.0) is None and ATOMS[power_kind(0.5)].sublevel(0.5) == (0.0, math.inf)
    assert ATOMS["xlogx"].sublevel(1.0) is None  # no closed form: no bound, never a wrong one


def _clarabel(prob):
    return prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


@pytest.mark.parametrize("lower", [-4.0, -1e6])
def test_sum_of_exponentials_bounds_a_variable_without_an_upper_bound(lower):
    """Before: time limit without an incumbent (``v >= -4``), 'the relaxation is unbounded below' (``v >= -1e6``)."""
    c = np.array([1.0, -0.5, 2.0]) if lower == -4.0 else np.array([1.0, 0.5, 2.0])
    v = cp.Variable(3, name="v")
    prob = cp.Problem(cp.Minimize(-c @ v), [cp.sum(cp.exp(v)) <= 3, v >= lower])
    ref = _clarabel(prob)
    got = prob.solve(method="gop", time_limit=5)
    assert prob.status == "optimal", prob.status
    assert abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (got, ref)
    assert float(np.sum(np.exp(v.value))) <= 3 + 1e-6


def test_bilinear_objective_over_a_free_vector_under_a_sum_of_exponentials():
    """``max w.v`` with ``w`` in ``[0.1, 1]^3`` and ``v`` free: for fixed ``w`` the optimum is
    ``v_i = log(3 w_i / sum w)``, so the value is ``max_w sum_i w_i log(3 w_i / sum w)``, a convex function of ``w``
    maximised at a vertex of the box (enumerated here)."""
    import itertools
    v, w = cp.Variable(3, name="v"), cp.Variable(3, name="w")
    prob = cp.Problem(cp.Maximize(w @ v), [cp.sum(cp.exp(v)) <= 3, w >= 0.1, w <= 1])
    ref = max(sum(wi * math.log(3 * wi / sum(ws)) for wi in ws) for ws in itertools.product([0.1, 1.0], repeat=3))
    got = prob.solve(method="gop", time_limit=10)
    assert prob.status == "optimal", prob.status
    assert abs(got - ref) <= 1e-6 * max(1.0, abs(ref)), (got, ref)
