"""sasmc (Carbonetto 2009, ch. 3) against enumeration: the KL gradient (3.25) and its particle
estimates (3.26)/(3.30), the RB marginal (3.43), the safeguard derivatives (3.62)-(3.64), the
bound (3.45), unbiasedness of the annealed Zhat, strict interiors, the exact safeguard, seeds,
low temperature and bad inputs."""
import itertools
import math

import numpy as np
import pytest
from scipy.special import logsumexp

import varopt
from varopt.errors import InvalidOptionError, ModelStructureError
from varopt.formulations import ising
from varopt.oracles.smc import SMCOracle
from varopt.program.energy import EnergyModel
from varopt.solvers.sasmc import safeguard as sg
from varopt.solvers.sasmc import solver as sasmc_solver
from varopt.solvers.sasmc.family import build_family


def solve(name, energy, **kw):
    return varopt.get_solver(name).solve(energy.to_program(), **kw)


def exact(energy):
    return solve("exact", energy).info["log_partition"]


def all_states(n):
    return np.array(list(itertools.product([-1.0, 1.0], repeat=n)))


def with_fields(e, seed):
    rng = np.random.default_rng(seed)
    h = np.where(rng.random(e.n) < 0.5, rng.uniform(-0.5, 0.5, e.n), 0.0)
    return EnergyModel(e.h + h, e.i, e.j, e.w, e.const, e.names)


def oracle_for(model, family="edges", rb=None, N=8):
    ei, ej, fi, group, ts, _ = build_family(model, family)
    o = SMCOracle(model.n, ei, ej, fi, group, ts, N, rb)
    o.start(np.random.default_rng(0))
    return o, ts


def exact_stats(o, theta):
    """E[a], Var[a], c(theta) of the family by enumeration."""
    X = all_states(o.n)
    A = o.term_stats(X) @ o.G.toarray()
    lp = A @ theta
    c = logsumexp(lp)
    p = np.exp(lp - c)
    mu = p @ A
    return mu, (A - mu).T @ (p[:, None] * (A - mu)), c


MODELS = [with_fields(ising.lattice(2, 3, T=1.5, periodic=False), 1), ising.four_node(),
          with_fields(ising.random_field_model("complete", 5, seed=3), 4)]


@pytest.mark.parametrize("model", MODELS)
def test_kl_gradient_is_var_a_times_theta_minus_target_by_finite_differences(model):
    o, ts = oracle_for(model)
    theta = np.random.default_rng(1).uniform(-0.7, 0.7, ts.size)

    def F(t):  # (3.17): <E_t[a], t - t*> + c(t*) - c(t)
        mu, _, c = exact_stats(o, t)
        return mu @ (t - ts) + exact_stats(o, ts)[2] - c

    _, V, _ = exact_stats(o, theta)
    fd = np.array([(F(theta + 1e-6 * e) - F(theta - 1e-6 * e)) / 2e-6 for e in np.eye(ts.size)])
    assert np.allclose(fd, V @ (theta - ts), atol=1e-7)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("family", ["edges", "tied"])
def test_particle_gradient_with_exact_weights_is_the_exact_gradient(model, family):
    """(3.26) naive on all states and (3.30)-(3.33) RB on all A-states, weighted by the exact
    (marginal) probabilities, reproduce Var[a](theta - theta*) exactly."""
    for rb in (False, None):
        o, ts = oracle_for(model, family, rb)
        theta = np.random.default_rng(2).uniform(-0.6, 0.6, ts.size)
        _, V, c = exact_stats(o, theta)
        if o.rb:  # one particle per A-configuration; B spins arbitrary; exact marginal weights
            XA = all_states(o.A.size)
            X = np.ones((XA.shape[0], o.n))
            X[:, o.A] = XA
        else:
            X = all_states(o.n)
        o.X = X
        lf = o.log_f(X, theta)
        assert abs(logsumexp(lf) - c) < 1e-10  # the (marginal) density sums to Z
        W = np.exp(lf - c)
        assert np.allclose(o.gradient_at(theta, W), V @ (theta - ts), atol=1e-10)


def test_rb_marginal_needs_two_colouring():
    o, _ = oracle_for(MODELS[2])
    assert not o.rb
    with pytest.raises(ValueError):
        oracle_for(MODELS[2], rb=True)
    assert oracle_for(MODELS[0])[0].rb


def test_safeguard_derivatives_match_finite_differences():
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(3, 40))
        w = rng.dirichlet(np.ones(n) * rng.uniform(0.2, 3))
        d = rng.normal(size=n) * rng.uniform(0.1, 3)

        def S(a):
            return sg.sum_sq(w, d, a) - 1.0 / n

        S0, g1, g2 = sg.derivatives(w, d)
        h = 1e-4
        assert abs(S0 - S(0.0)) < 1e-14
        assert abs(g1 - (S(h) - S(-h)) / (2 * h)) < 1e-6 * max(1.0, abs(g1))
        assert abs(g2 - (S(h) - 2 * S(0.0) + S(-h)) / h ** 2) < 1e-6 * max(1.0, abs(g2)) + 1e-6


def test_quadratic_root_is_the_upward_crossing():
    rng = np.random.default_rng(6)
    for _ in range(200):
        q1, q2, c = rng.normal(size=3)
        c = abs(c)
        a = sg.quadratic_root(q1, q2, c)
        model = lambda t: q1 * t + 0.5 * q2 * t * t  # noqa: E731
        if math.isinf(a):
            assert all(model(t) <= c + 1e-12 for t in np.linspace(0, 100, 2001))
        else:
            assert abs(model(a) - c) < 1e-9 * max(1, c)
            assert all(model(t) <= c + 1e-12 for t in np.linspace(0, a, 201))


BOUND_MODELS = [ising.lattice(4, 4, T=2.0), ising.lattice(4, 4, T=0.5), ising.spin_glass(4, 4, T=1.0, seed=1),
                ising.four_node(), with_fields(ising.lattice(3, 4, T=1.0, periodic=False), 2),
                ising.random_field_model("complete", 6, seed=2)]


@pytest.mark.parametrize("model", BOUND_MODELS)
def test_bound_below_exact_log_z_within_three_se(model):
    lz = exact(model)
    r = solve("sasmc", model, max_iter=60, particles=50, anneal_steps=20, seed=3)
    i = r.info
    assert i["log_partition_bound"] <= lz + 3 * i["log_partition_bound_se"]
    assert abs(i["log_partition"] - lz) <= 4 * i["log_partition_se"] + 0.02 * abs(lz)
    assert np.all(np.isfinite(i["theta"]))


def test_annealed_zhat_is_unbiased_on_a_4x4_torus():
    e = ising.lattice(4, 4, T=2.0)
    lz = exact(e)
    ratio = np.array([math.exp(solve("sasmc", e, max_iter=15, particles=16, anneal_steps=10, seed=s)
                               .info["log_partition"] - lz) for s in range(200)])
    se = ratio.std(ddof=1) / math.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) <= 3 * se, (ratio.mean(), se)


@pytest.mark.parametrize("safeguard", ["exact", "quadratic"])
def test_iterates_strictly_inside_and_exact_safeguard_holds(monkeypatch, safeguard):
    e = ising.lattice(4, 4, T=0.5)
    calls = []
    real = sg.safeguarded_step

    def spy(w, d, a_hat, beta, xi, method):
        out = real(w, d, a_hat, beta, xi, method)
        calls.append((w.copy(), d.copy(), beta, xi))
        return out

    monkeypatch.setattr(sasmc_solver, "safeguarded_step", spy)
    thetas = []
    r = solve("sasmc", e, max_iter=80, particles=40, safeguard=safeguard, seed=4,
              callback=lambda it, th: thetas.append(th) and False)
    ts = r.info["theta_star"]
    T = np.array(thetas)
    assert T.shape[0] == 80 and np.all(T > np.minimum(0, ts)) and np.all(T < np.maximum(0, ts))
    steps = r.info["steps"][:, 0]
    assert len(calls) == steps.size
    if safeguard == "exact":
        for (w, d, beta, xi), a in zip(calls, steps):
            n = w.size
            S0 = float(w @ w) - 1 / n
            Sa = sg.sum_sq(w, d, a) - 1 / n
            assert beta * Sa <= S0 + 1e-12 or xi * (Sa + 1 / n) <= 1 / n + 1e-12


def test_reproducible_and_finite_at_low_temperature():
    e = ising.lattice(6, 6, T=0.1)
    a = solve("sasmc", e, max_iter=40, particles=30, anneal_steps=20, seed=11)
    b = solve("sasmc", e, max_iter=40, particles=30, anneal_steps=20, seed=11)
    c = solve("sasmc", e, max_iter=40, particles=30, anneal_steps=20, seed=12)
    assert a.info["log_partition"] == b.info["log_partition"] and np.array_equal(a.info["theta"], b.info["theta"])
    assert a.info["log_partition"] != c.info["log_partition"]
    from varopt.formulations.kaufman import kaufman_log_partition
    lz = kaufman_log_partition(10.0, 10.0, 6, 6)
    for r in (a, c):
        assert math.isfinite(r.info["log_partition"]) and math.isfinite(r.info["log_partition_bound"])
        assert abs(r.info["log_partition"] - lz) < 0.05 * abs(lz)
        assert np.all(np.isfinite(list(r.info["marginals"].values())))


def test_families_tied_and_user_groups():
    e = ising.spin_glass(4, 4, T=1.0, seed=1)
    r = solve("sasmc", e, family="tied", max_iter=30, particles=30, seed=1)
    assert r.info["family_size"] == 2 and sorted(r.info["theta_star"]) == [-1.0, 1.0]
    p = e.to_program()
    groups = {(p.names[i], p.names[j]): ("pos" if w > 0 else "neg") for i, j, w in zip(e.i, e.j, e.w)}
    r2 = varopt.get_solver("sasmc").solve(p, family=groups, max_iter=30, particles=30, seed=1)
    assert r2.info["family_size"] == 2
    lz = exact(e)
    assert r2.info["log_partition_bound"] <= lz + 3 * r2.info["log_partition_bound_se"]


def test_pyomo_front_end_gets_marginals():
    import pyomo.environ as pyo
    m = ising.to_pyomo(ising.four_node())
    m.marginal = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    res = pyo.SolverFactory("sasmc").solve(m, seed=0, max_iter=50)
    ex = solve("exact", ising.four_node()).info["marginals"]
    got = res.varopt_marginals
    assert max(abs(got[k] - ex[k]) for k in ex) < 0.1


@pytest.mark.parametrize("kw, match", [
    ({"safeguard_beta": 1.0}, "safeguard_beta"), ({"safeguard_beta": 0.0}, "safeguard_beta"),
    ({"safeguard_xi": 1.0}, "safeguard_xi"), ({"safeguard_xi": -0.1}, "safeguard_xi"),
    ({"family": "nodes"}, "family"), ({"family": [0, 1]}, "family"), ({"particles": 1}, "particles"),
    ({"ess_threshold": 0.0}, "ess_threshold"), ({"beta": -1.0}, "beta"), ({"damping": 1.0}, "damping"),
    ({"step_power": 0.0}, "step_power"), ({"anneal_steps": -1}, "anneal_steps"),
    ({"safeguard": "cubic"}, "safeguard"), ({"resampling": "residual"}, "resampling")])
def test_bad_options(kw, match):
    with pytest.raises(InvalidOptionError, match=match):
        solve("sasmc", ising.four_node(), **kw)


def test_family_not_containing_the_target():
    e = ising.spin_glass(4, 4, T=1.0, seed=1)
    with pytest.raises(InvalidOptionError, match="does not contain the target"):
        solve("sasmc", e, family=[0] * e.m)
    p = e.to_program()
    with pytest.raises(InvalidOptionError, match="has no group"):
        varopt.get_solver("sasmc").solve(p, family={(p.names[0], p.names[1]): 0})
    with pytest.raises(InvalidOptionError, match="rao_blackwell"):
        solve("sasmc", ising.random_field_model("complete", 5), rao_blackwell="on")


def test_bad_models():
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), domain=pyo.Binary)
    m.y = pyo.Var()
    m.f = pyo.Objective(expr=m.x[0] * m.x[1] + m.y)
    with pytest.raises((ModelStructureError, Exception), match="y"):
        pyo.SolverFactory("sasmc").solve(m)
    with pytest.raises(Exception, match="NaN|inf"):
        EnergyModel([0.0, float("nan")])


def test_no_terms_is_uniform():
    e = EnergyModel(np.zeros(3), const=1.5)
    r = solve("sasmc", e)
    assert abs(r.info["log_partition"] - (-1.5 + 3 * math.log(2))) < 1e-12  # p ∝ exp(-q)


def test_ipsa_step_cap_hook_caps_the_step():
    e = EnergyModel([0.3, -0.2], [0], [1], [0.4])
    ei, ej, fi, group, ts, labels = build_family(e, "edges")
    seen = []
    o = SMCOracle(2, ei, ej, fi, group, ts, 10)
    p = sasmc_solver._theta_program(labels, ts, "none")
    r = varopt.get_solver("ipsa").solve(p, oracle=o, max_iter=5, x0=np.zeros(ts.size), history_objective=False,
                                        step_cap=lambda x, dx, a: seen.append(a) or 1e-3, history_every=1)
    assert len(seen) == 5 and all(h["step"] <= 1e-3 for h in r.history[1:])
    with pytest.raises(InvalidOptionError, match="step_cap"):
        varopt.get_solver("ipsa").solve(p, oracle=o, step_cap=3)


def test_negligible_coefficients_do_not_break_the_barrier():
    """Couplings and fields below 1e-100 (here 1e-300 and 1e-200: an underflowed weight) are left out
    of the family: ipsa's barrier on [0, theta*] overflowed there ('a dual variable left z > 0').
    log Z and the marginals are those of enumeration; the coupled pair keeps its correlation."""
    m = EnergyModel([1e-200, 0.0, 0.4], [0, 1], [1, 2], [1e-300, -0.6])
    S = np.array(list(itertools.product([-1.0, 1.0], repeat=3)))
    t = -m.value(S)
    lz = logsumexp(t)
    marg = np.exp(t - lz) @ ((S + 1) / 2)
    r = varopt.get_solver("sasmc").solve(m.to_program(), seed=0, particles=200)
    assert r.status == "converged"
    assert r.info["negligible_terms"] == 2
    assert abs(r.info["log_partition"] - lz) <= 5 * r.info["log_partition_se"] + 1e-9
    got = np.array([r.info["marginals"][k] for k in m.names])
    assert np.abs(got - marg).max() <= 0.05
    assert (m.names[0], m.names[1]) in r.info["correlations"]
