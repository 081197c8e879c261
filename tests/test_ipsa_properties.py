"""Hypothesis properties of IPSA: every iterate strictly feasible (c(x) < 0, z > 0) for bounds,
general linear rows and a convex nonlinear constraint ||x||^2 <= r, over many seeds; finite-sum
gradient estimates average to the exact gradient."""
import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.program import AtomGroup, Constraint, Expression, Program, QuadraticTerms
from varopt.solvers.ipsa import FiniteSumOracle

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(seed, n, kind):
    rng = np.random.default_rng(seed)
    N = 15
    A = rng.normal(size=(N, n))
    y = rng.normal(size=N) * 3
    e = Expression(n, linear=rng.normal(size=n),
                   atoms=[AtomGroup("square", rng.uniform(0.1, 1.0, size=N), sp.csr_matrix(A), -y)])
    lb = np.where(rng.random(n) < 0.7, rng.uniform(-2, 0, size=n), -np.inf)
    ub = np.where(rng.random(n) < 0.5, rng.uniform(0.5, 2, size=n), np.inf)
    cons = []
    if kind in ("rows", "all"):
        for k in range(3):
            a = rng.normal(size=n)
            a[rng.random(n) < 0.3] = 0.0
            if not a.any():
                a[0] = 1.0
            mid = a @ np.clip(np.zeros(n), lb, ub)
            lo = mid - rng.uniform(0.05, 1.0) if rng.random() < 0.7 else -np.inf
            hi = mid + rng.uniform(0.05, 1.0)
            cons.append(Constraint(f"row{k}", Expression(n, linear=a), lo, hi))
    if kind in ("ball", "all"):
        idx = np.arange(n)
        ball = Expression(n, quadratic=QuadraticTerms(idx, idx, np.ones(n), n))
        cons.append(Constraint("ball", ball, -np.inf, rng.uniform(0.3, 3.0)))
    return Program([f"x{i}" for i in range(n)], lb, ub, e, cons)


def check_strict(P):
    worst = {"slack": np.inf, "z": np.inf}

    def cb(it, x, z, s):
        assert np.all(x > P.lb) and np.all(x < P.ub)
        for c in P.constraints:
            v = c.body.value(x)
            assert c.lo < v < c.hi, (it, c.name, v, c.lo, c.hi)
        assert np.all(s > 0) and np.all(z > 0)
        worst["slack"] = min(worst["slack"], float(s.min()) if s.size else np.inf)
        worst["z"] = min(worst["z"], float(z.min()) if z.size else np.inf)

    return cb, worst


@SETTINGS
@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 6),
       kind=st.sampled_from(["bounds", "rows", "ball", "all"]),
       hessian=st.sampled_from(["identity", "bb", "bfgs", "diagonal"]),
       sampling=st.sampled_from(["cyclic", "uniform", "permutation"]),
       batch=st.integers(1, 4), k0=st.sampled_from([0.0, 1.0, 50.0]),
       dual_step=st.sampled_from(["same", "separate"]))
def test_every_iterate_strictly_feasible(seed, n, kind, hessian, sampling, batch, k0, dual_step):
    P = build(seed, n, kind)
    cb, worst = check_strict(P)
    r = varopt.get_solver("ipsa").solve(P, passes=3, batch_size=batch, hessian=hessian, sampling=sampling,
                                        k0=k0, seed=seed, dual_step=dual_step, callback=cb,
                                        history_objective=False)
    assert r.iterations > 0
    assert np.all(np.isfinite(r.x))


@SETTINGS
@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 5), kind=st.sampled_from(["bounds", "rows", "ball", "all"]),
       noise=st.floats(0.0, 5.0))
def test_noisy_user_oracle_keeps_iterates_interior(seed, n, kind, noise):
    P = build(seed, n, kind)
    cb, _ = check_strict(P)

    def grad(x, rng):
        # a large, heavy-tailed noise: the step rule alone must keep the iterates inside
        return P.objective.gradient(x) + noise * rng.standard_t(2, size=x.size)

    varopt.get_solver("ipsa").solve(P, oracle=grad, max_iter=60, k0=0.0, seed=seed, callback=cb,
                                    history_objective=False)


@SETTINGS
@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 5), batch=st.integers(1, 5))
def test_finite_sum_estimates_average_to_exact_gradient(seed, n, batch):
    P = build(seed, n, "bounds")
    orc = FiniteSumOracle(P.objective)
    rng = np.random.default_rng(seed)
    orc.start(rng, batch, "permutation")
    x = rng.normal(size=n)
    # a whole number of passes of permutation batches covers every sample equally often
    N = orc.n_samples
    reps = N * batch  # lcm-ish: N*batch samples = batch passes
    gs = [orc.gradient(x, orc.next_batch()) for _ in range(reps // batch)]
    np.testing.assert_allclose(np.mean(gs, axis=0), P.objective.gradient(x), rtol=1e-9, atol=1e-9)
