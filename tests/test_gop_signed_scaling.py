"""Signed factors in gop's scaling normalization (docs/gop.md §8e-s).

``min ||A - u v^T||^2`` with ``u``, ``v`` in boxes that contain 0 on both sides: the scaling
``(u, v) -> (c u, v / c)`` keeps every box for ``c`` in ``(0, 1]`` on one block and ``c >= 1`` on the
other up to the first bound, so some optimum has a variable of the normalized block at one of its bounds
(the side its sign points to); when the boxes are ``[-a, a]`` and nothing else holds the pair, the flip
``(u, v) -> (-u, -v)`` is a symmetry and only the upper bounds are needed.

References, independent of the detection: evaluation of the objective and the rows at random points
(scaled, flipped); the Eckart-Young value ``||A||^2 - sigma_1^2`` when the balanced SVD factors fit the
box (asserted); a grid over ``u`` with ``v`` in closed form (``clip(A^T u / |u|^2)``, exact because the
problem in ``v`` is separable and convex) and a Nelder-Mead polish of the best grid points. (SCIP 10 does
not certify even the 2 x 2 instances in 60 s, docs/gop.md §8e-s, so it is no reference here.)

The tree finds the optimum by local search from the root, and the reported bound is never above the
incumbent, so a split that misses every optimum can still end 'optimal' at the right value; the claims are
therefore also checked directly: the optimum of the reference, normalized as the claims say, lies in a root
box and satisfies every row.
"""
from types import SimpleNamespace

import numpy as np
import pyomo.environ as pyo
import pytest

import varopt  # noqa: F401
from varopt.frontends import compile_model
from varopt.program.scaling import flip_invariant, scaling_pairs

A_R1 = np.array([[2.0, -1.0, 0.5], [1.0, 0.3, -2.0], [-0.5, 1.5, 1.0]])  # benchmarks/gop_user_models.py


def _rank1(A, bu, bv, linear=None, cone=False):
    """``min ||A - u v^T||^2`` over ``u_i in bu[i]``, ``v_j in bv[j]`` (Pyomo); ``linear``: a term
    ``linear * u[0]`` in the objective; ``cone``: the row ``v[0] + v[1] >= 0``."""
    m = pyo.ConcreteModel()
    I, J = range(A.shape[0]), range(A.shape[1])
    m.u = pyo.Var(I, bounds=lambda m, i: tuple(bu[i]))
    m.v = pyo.Var(J, bounds=lambda m, j: tuple(bv[j]))
    obj = sum((A[i, j] - m.u[i] * m.v[j]) ** 2 for i in I for j in J)
    if linear:
        obj = obj + linear * m.u[0]
    m.obj = pyo.Objective(expr=obj)
    if cone:
        m.cone = pyo.Constraint(expr=m.v[0] + m.v[1] >= 0)
    return m


def _solve(m, time_limit=60):
    return pyo.SolverFactory("gop").solve(m, time_limit=time_limit).varopt_result


def _profile(A, bu, bv):
    """``U -> min_v ||A - u v^T||^2`` for each row ``u`` of ``U`` (``v`` clipped least squares, exact)."""
    lv, hv = np.array(bv, dtype=float).T

    def prof(U):
        U = np.atleast_2d(U)
        uu = np.einsum("ki,ki->k", U, U)
        V = np.clip((U @ A) / np.maximum(uu, 1e-300)[:, None], lv, hv)
        V[uu == 0] = 0
        R = A[None] - U[:, :, None] * V[:, None, :]
        return np.einsum("kij,kij->k", R, R)
    return prof


def _grid_reference(A, bu, bv):
    """The brute-force optimum: a grid over ``u`` in its box (``v`` in closed form) and a Nelder-Mead polish of
    the ten best grid points (clipped to the box)."""
    from scipy.optimize import minimize

    lu, hu = np.array(bu, dtype=float).T
    prof = _profile(A, bu, bv)
    k = {2: 201, 3: 61, 4: 31}[A.shape[0]]
    U = np.stack(np.meshgrid(*[np.linspace(lu[i], hu[i], k) for i in range(A.shape[0])], indexing="ij"),
                 -1).reshape(-1, A.shape[0])
    vals = prof(U)
    b0 = int(np.argmin(vals))
    best, arg = float(vals[b0]), U[b0]
    for b in np.argsort(vals)[:10]:
        r = minimize(lambda u: float(prof(np.clip(u, lu, hu))[0]), U[b], method="Nelder-Mead",
                     options=dict(xatol=1e-12, fatol=1e-15, maxiter=4000))
        f = float(prof(np.clip(r.x, lu, hu))[0])
        if f < best:
            best, arg = f, np.clip(r.x, lu, hu)
    lv, hv = np.array(bv, dtype=float).T
    return best, arg, np.clip(A.T @ arg / max(arg @ arg, 1e-300), lv, hv)


def _draw(seed, m, n):
    """A random signed instance: entries of A in [-2, 2], boxes [-a, b] with a, b drawn from {0.5, 1, 2, 3}
    (mostly asymmetric)."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(-2, 2, (m, n))
    side = [0.5, 1.0, 2.0, 3.0]
    bu = [(-float(rng.choice(side)), float(rng.choice(side))) for _ in range(m)]
    bv = [(-float(rng.choice(side)), float(rng.choice(side))) for _ in range(n)]
    return A, bu, bv


def _eckart_young(A, a):
    """``||A||^2 - sigma_1^2``, asserted to be attained in ``[-a, a]`` boxes by the balanced SVD factors."""
    U, s, Vt = np.linalg.svd(A)
    u, v = np.sqrt(s[0]) * U[:, 0], np.sqrt(s[0]) * Vt[0]
    assert np.abs(u).max() <= a and np.abs(v).max() <= a
    return float((A ** 2).sum() - s[0] ** 2)


# ------------------------------------------------------------------------------------ detection


def test_symmetric_boxes_give_a_split_on_the_upper_bounds_and_a_verified_flip():
    pr = compile_model(_rank1(A_R1, [(-2, 2)] * 3, [(-2, 2)] * 3))[0]
    (pair,) = scaling_pairs(pr)
    names = {pr.names[v] for v in pair.S}
    assert names in ({"u[0]", "u[1]", "u[2]"}, {"v[0]", "v[1]", "v[2]"})
    assert pair.kind == "split" and pair.flip
    assert sorted(val for _, val in pair.split) == [2.0, 2.0, 2.0]
    # the flip and the scalings are invariances, evaluated (not taken from the detection)
    rng = np.random.default_rng(0)
    X, Y = np.asarray(pair.X), np.asarray(pair.Y)
    for _ in range(10):
        z = pr.complete_aux(rng.uniform(-2, 2, pr.n))
        c = float(np.exp(rng.normal()))
        for sx, sy in ((-1.0, -1.0), (c, 1.0 / c)):
            z2 = z.copy()
            z2[X] *= sx
            z2[Y] *= sy
            z2 = pr.complete_aux(z2)
            assert pr.objective.value(z2) == pytest.approx(pr.objective.value(z), rel=1e-9)


def test_asymmetric_boxes_split_on_both_sides_without_the_flip():
    """u in [-1, 3]: the split needs z_v = 3 and z_v = -1 (a point whose largest rho_v is on the negative side
    cannot be scaled onto the positive bound); no flip (the box [-1, 3] is not symmetric)."""
    pr = compile_model(_rank1(A_R1[:, :2], [(-1, 3)] * 3, [(-2, 2)] * 2))[0]
    (pair,) = scaling_pairs(pr)
    assert pair.kind == "split" and not pair.flip
    got = sorted((pr.names[v], val) for v, val in pair.split)
    if pr.names[pair.S[0]].startswith("u"):
        assert got == sorted([(f"u[{i}]", s) for i in range(3) for s in (-1.0, 3.0)])
    else:
        assert got == sorted([(f"v[{j}]", s) for j in range(2) for s in (-2.0, 2.0)])


def test_a_conical_row_on_the_pair_keeps_both_sides():
    """v[0] + v[1] >= 0 is scaling-invariant (c > 0) but the flip turns it into <= 0: no flip."""
    pr = compile_model(_rank1(A_R1, [(-2, 2)] * 3, [(-2, 2)] * 3, cone=True))[0]
    (pair,) = scaling_pairs(pr)
    assert pair.kind == "split" and not pair.flip
    assert {pr.names[v] for v in pair.S} == {"u[0]", "u[1]", "u[2]"}   # v has a conical row of its own
    assert sorted(val for _, val in pair.split) == [-2.0] * 3 + [2.0] * 3


def test_a_linear_term_in_u_gives_no_pair_and_the_flip_check_refuses_it():
    """0.7 u[0]: neither the scaling nor the flip is a symmetry. The detection finds no pair, and the evaluation
    guard of the flip (used before the split is halved) says it is no symmetry."""
    m = _rank1(A_R1, [(-2, 2)] * 3, [(-2, 2)] * 3, linear=0.7)
    pr = compile_model(m)[0]
    assert scaling_pairs(pr) == []
    u = [pr.index[f"u[{i}]"] for i in range(3)]
    v = [pr.index[f"v[{j}]"] for j in range(3)]
    assert not flip_invariant(pr, u, v)
    pr0 = compile_model(_rank1(A_R1, [(-2, 2)] * 3, [(-2, 2)] * 3))[0]
    assert flip_invariant(pr0, u, v)
    assert not flip_invariant(compile_model(_rank1(A_R1, [(-2, 2)] * 3, [(-2, 2)] * 3, cone=True))[0], u, v)


def test_sign_constrained_pairs_unchanged():
    """NMF boxes [0, U]: the one-sided row of docs/gop.md §8e as before, no disjunction."""
    m = _rank1(np.abs(A_R1), [(0, 3)] * 3, [(0, 3)] * 3)
    (pair,) = scaling_pairs(compile_model(m)[0])
    assert pair.kind == ">=" and not pair.flip and len(pair.split) == 3


@pytest.mark.parametrize("seed", range(4))
def test_every_feasible_point_has_an_image_in_a_root_box(seed):
    """Claim 3 (and 4 for symmetric boxes), by evaluation: for random feasible points, the image scaled by
    c = 1 / max_v rho_v(z) over the normalized block (then flipped when the pair's flip is used and the bound
    reached is the lower one) is feasible, has the same objective and lies in one of the root boxes."""
    from varopt.solvers.gop.solver import _normalize_scaling
    from varopt.solvers.gop.tree import GopTree

    rng = np.random.default_rng(seed)
    A, bu, bv = _draw(seed, 3, 2)
    if seed >= 2:                         # symmetric boxes: the flip halves the split (not with the cone)
        bu, bv = [(-2, 2)] * 3, [(-1, 1)] * 2
    cone = seed == 3                      # v[0] + v[1] >= 0: no flip
    pr = compile_model(_rank1(A, bu, bv, cone=cone))[0]
    pr2, info, split = _normalize_scaling(pr, products=True)
    (pair,) = scaling_pairs(pr)
    assert pair.flip == (seed == 2) and split is not None
    boxes = GopTree._root_boxes(SimpleNamespace(root_split=split), pr.lb.copy(), pr.ub.copy())
    assert len(boxes) == len(pair.split)
    # with the flip one box per variable of S (its upper bound), else one per nonzero side
    sides = (pr.ub[pair.S] > 0).sum() + (0 if pair.flip else (pr.lb[pair.S] < 0).sum())
    assert len(pair.split) == sides
    S, T = np.asarray(pair.S), np.asarray(pair.T)
    lo, hi = pr.lb[:5], pr.ub[:5]
    hit, _ = set(), 0
    while len(hit) < len(boxes) or _ < 300:
        _ += 1
        z = pr.complete_aux(rng.uniform(lo, hi))
        if not all(con.lo - 1e-12 <= con.body.value(z) <= con.hi + 1e-12 for con in pr.constraints):
            continue
        rho = np.where(z[S] > 0, z[S] / pr.ub[S], np.where(z[S] < 0, z[S] / pr.lb[S], 0.0))
        c = 1.0 / rho.max()
        z2 = z.copy()
        z2[S] *= c
        z2[T] /= c
        if pair.flip and z2[S[np.argmax(rho)]] < 0:
            z2[S] *= -1
            z2[T] *= -1
        z2 = pr.complete_aux(z2)
        assert np.all(z2[:5] >= lo - 1e-12) and np.all(z2[:5] <= hi + 1e-12)
        assert pr2.objective.value(z2) == pytest.approx(pr.objective.value(z), rel=1e-9)
        for con in pr2.constraints:
            assert con.lo - 1e-9 <= con.body.value(z2) <= con.hi + 1e-9, con.name
        inside = [k for k, (l, u) in enumerate(boxes)
                  if np.all(z2[:5] >= l[:5] - 1e-9) and np.all(z2[:5] <= u[:5] + 1e-9)]
        assert inside, (z[:5], z2[:5])
        hit.update(inside)
        assert _ < 20000, "no feasible point reaches some root box"
    assert hit == set(range(len(boxes)))


# ------------------------------------------------------------------------------------ certified values


def test_benchmark_signed_rank1_certified_at_the_eckart_young_value():
    """The user-model benchmark's signed rank-1 factorization on [-2, 2]^3 x [-2, 2]^3 (30 s limit with a bound of
    3.7-5.2 before): certified at ||A||^2 - sigma_1^2, the scaled SVD factors fitting the box."""
    f = _eckart_young(A_R1, 2.0)
    r = _solve(_rank1(A_R1, [(-2, 2)] * 3, [(-2, 2)] * 3), time_limit=120)
    assert r.lower_bound <= f + 1e-6 * f
    assert r.status == "optimal" and r.upper_bound == pytest.approx(f, rel=1e-6), (r.status, r.lower_bound)
    assert "u[0] == 2 or u[1] == 2 or u[2] == 2" in r.info["scaling"]["disjunctions"][0]
    assert "split" in r.info["scaling"]


def _assert_optimum_in_a_root_box(model, u, v, ref):
    """Claims 3-4 at the reference optimum ``(u, v)``: scaled by ``c = 1 / max_v rho_v`` on the normalized block
    (flipped when the flip is used and the bound reached is the lower one), it keeps the objective, satisfies every
    row and lies in a root box."""
    from varopt.solvers.gop.solver import _normalize_scaling
    from varopt.solvers.gop.tree import GopTree

    pr = compile_model(model)[0]
    _, _, split = _normalize_scaling(pr, products=True)
    (pair,) = scaling_pairs(pr)
    boxes = GopTree._root_boxes(SimpleNamespace(root_split=split), pr.lb.copy(), pr.ub.copy())
    z = np.zeros(pr.n)
    z[[pr.index[f"u[{i}]"] for i in range(len(u))]] = u
    z[[pr.index[f"v[{j}]"] for j in range(len(v))]] = v
    z = pr.complete_aux(z)
    assert pr.objective.value(z) == pytest.approx(ref, rel=1e-9, abs=1e-12)
    S, T = np.asarray(pair.S), np.asarray(pair.T)
    rho = np.where(z[S] > 0, z[S] / pr.ub[S], np.where(z[S] < 0, z[S] / pr.lb[S], 0.0))
    z2 = z.copy()
    z2[S] /= rho.max()
    z2[T] *= rho.max()
    if pair.flip and z2[S[np.argmax(rho)]] < 0:
        z2[S] *= -1
        z2[T] *= -1
    z2 = pr.complete_aux(z2)
    assert pr.objective.value(z2) == pytest.approx(ref, rel=1e-9, abs=1e-12)
    for con in pr.constraints:
        assert con.lo - 1e-9 <= con.body.value(z2) <= con.hi + 1e-9, con.name
    assert any(np.all(z2 >= l - 1e-9) and np.all(z2 <= u_ + 1e-9) for l, u_ in boxes), "no root box holds the optimum"


CASES = [(seed, m, n) for seed in (0, 1, 3) for (m, n) in ((2, 2), (3, 2), (3, 3), (4, 3))]


@pytest.mark.parametrize("seed,m,n", CASES)
def test_random_signed_rank1_certified_at_the_grid_reference(seed, m, n):
    """Random signed instances 2 x 2 ... 4 x 3 with asymmetric boxes: gop's bound never above the brute-force
    reference, and the certified value within its gap of it."""
    A, bu, bv = _draw(seed, m, n)
    ref, u, v = _grid_reference(A, bu, bv)
    model = _rank1(A, bu, bv)
    _assert_optimum_in_a_root_box(model, u, v, ref)
    r = _solve(model)
    tol = 1e-6 * max(1.0, abs(ref))
    assert r.lower_bound <= ref + tol, (r.lower_bound, ref)
    assert r.status == "optimal", (r.status, r.lower_bound, r.upper_bound, ref)
    assert r.upper_bound == pytest.approx(ref, rel=2e-6, abs=2e-6)
    assert r.info["scaling"]["disjunctions"]


def test_conical_row_instance_certified_at_the_grid_reference():
    """With v[0] + v[1] >= 0 the flip is no symmetry; halving the split anyway misses the optimum of this
    instance (its best factors have u at -2 and v with a positive sum)."""
    A = -np.outer([2.0, 0.5, -1.0], [1.0, 0.8])
    A = A + np.array([[0.1, -0.2], [0.3, 0.1], [-0.2, 0.2]])
    bu, bv = [(-2, 2)] * 3, [(-2, 2)] * 2
    m = _rank1(A, bu, bv, cone=True)

    # reference: the grid of _grid_reference with v restricted to v0 + v1 >= 0 (projected least squares over the
    # polytope by a fine grid over v instead: 2 variables)
    g = np.linspace(-2, 2, 401)
    V = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    V = V[V.sum(1) >= 0]
    prof = _profile(A.T, bv, bu)            # roles swapped: v on the grid, u in closed form
    vals = prof(V)
    from scipy.optimize import minimize

    def pen(v):
        v = np.clip(v, -2, 2)
        if v.sum() < 0:
            v = v - v.sum() / 2
        return float(prof(v)[0])
    ref = min(float(vals.min()), *(minimize(pen, V[b], method="Nelder-Mead",
                                            options=dict(xatol=1e-12, fatol=1e-15)).fun
                                   for b in np.argsort(vals)[:5]))
    vb = V[int(np.argmin(vals))]
    ub_ = np.clip(A @ vb / (vb @ vb), -2, 2)
    _assert_optimum_in_a_root_box(m, ub_, vb, float(vals.min()))
    r = _solve(m)
    tol = 1e-6 * max(1.0, ref)
    assert r.lower_bound <= ref + tol, (r.lower_bound, ref)
    assert r.status == "optimal" and r.upper_bound == pytest.approx(ref, rel=2e-6, abs=2e-6)


def test_options_off_add_nothing():
    for kw in ({"scaling": "off"}, {"symmetry": "off"}):
        r = pyo.SolverFactory("gop").solve(_rank1(A_R1[:2, :2], [(-2, 2)] * 2, [(-2, 2)] * 2),
                                           time_limit=2, **kw).varopt_result
        assert "scaling" not in r.info


def test_orbits_kept_only_when_they_permute_the_split():
    """A permutation symmetry keeps the split's set only when it maps each disjunction onto one of them
    (docs/gop.md §8e-s): exchanging u[0] and u[1] (both in the split, same value) does; exchanging u and v
    (the split is on u only) does not; nor does a swap of variables with different split values."""
    from varopt.solvers.gop.solver import _keeps_split

    split = [[(0, 2.0), (1, 2.0), (2, 2.0)]]
    ident = np.arange(6)
    assert _keeps_split(ident, split)
    assert _keeps_split(np.array([1, 0, 2, 3, 4, 5]), split)
    assert not _keeps_split(np.array([3, 4, 5, 0, 1, 2]), split)
    assert not _keeps_split(np.array([1, 0, 2, 3, 4, 5]), [[(0, 2.0), (1, 3.0), (2, 2.0)]])
    # two pairs whose disjunctions are exchanged (rank-2 NMF's column swap)
    two = [[(0, 1.0), (1, 1.0)], [(2, 1.0), (3, 1.0)]]
    assert _keeps_split(np.array([2, 3, 0, 1]), two)
