"""cmf's compiled block moves (option ``backend``, :mod:`varopt.solvers.cmf.compiled`) against the numpy reference
path: the same seed gives bit-identical estimates, marginals, c and theta sequences, particles and weights."""
import numpy as np
import pytest

import varopt
from varopt.errors import InvalidOptionError
from varopt.formulations import ising
from varopt.oracles.particles import Particles
from varopt.program.energy import EnergyModel
from varopt.solvers.cmf import solver as cmf_solver
from varopt.solvers.cmf.partition import bisection_schedule
from varopt.solvers.cmf.smc import coupling_matrix, move_along_path

pytest.importorskip("numba")
pytestmark = pytest.mark.filterwarnings("ignore:cmf. the .* replicates disagree")

KEYS = ("log_partition", "log_partition_smc", "log_partition_smc_se", "spin_means", "spin_correlations",
        "c_sequence", "visited_states_bound", "resamples", "final_ess")


def _both(e, **kw):
    out = {}
    for backend in ("numpy", "numba"):
        r = varopt.get_solver("cmf").solve(e.to_program(), backend=backend, **kw)
        assert r.info["backend"] == backend
        out[backend] = r
    return out["numpy"], out["numba"]


def _identical(a, b):
    for k in KEYS:
        assert np.array_equal(np.asarray(a.info[k]), np.asarray(b.info[k])), k
    assert len(a.info["theta_sequence"]) == len(b.info["theta_sequence"])
    for x, y in zip(a.info["theta_sequence"], b.info["theta_sequence"]):
        assert np.array_equal(x, y)


def _irregular():
    """Fields, a hub of degree 7, a triangle (odd cycle), a pendant path and an isolated vertex."""
    rng = np.random.default_rng(4)
    i = np.array([0, 0, 0, 0, 0, 0, 0, 1, 8, 9, 10])
    j = np.array([1, 2, 3, 4, 5, 6, 7, 2, 9, 10, 11])
    return EnergyModel(rng.uniform(-1, 1, 13), i, j, rng.choice([-0.8, 0.6], i.size))


@pytest.mark.parametrize("make", [
    lambda: ising.lattice(5, 5, 1.0, 0.1, True, 2.5),                 # torus, every site degree 4
    lambda: ising.random_field_model("complete", 9, seed=3),         # dense, frustrated
    _irregular,                                                      # mixed degrees, disconnected
])
def test_numba_bit_identical_to_numpy(make):
    a, b = _both(make(), particles=120, temper_steps=6, moves=3, seed=7)
    _identical(a, b)


def test_numba_bit_identical_other_options():
    e = ising.random_field_model("grid", 4, seed=2)
    sched = [[list(range(8)), list(range(8, 16))]]
    a, b = _both(e, particles=60, temper_steps=5, moves=2, seed=1, schedule=sched, edges="optimize",
                 resampling="multinomial", ess_threshold=1.0, replicates=2)
    _identical(a, b)


def test_move_along_path_same_particles_and_weights():
    """One refinement by both paths from the same particles and random stream: the same particles, log-weights
    and log Z increment, and the same state of the random stream afterwards (the same draws were taken)."""
    e = ising.lattice(4, 6, 1.0, 0.2, True, 2.0).scaled(-1.0)
    labels = bisection_schedule(e)[2]
    rng0 = np.random.default_rng(5)
    tp, tn = rng0.normal(size=e.n), rng0.normal(size=e.n)
    vp = np.where(labels[e.i] == labels[e.j], 0.0, rng0.normal(size=e.m))
    vn = np.where(labels[e.i] == labels[e.j], 0.0, e.w)
    X0 = rng0.choice([-1.0, 1.0], size=(40, e.n))
    out = []
    for compiled in (False, True):
        rng = np.random.default_rng(9)
        pop = Particles(40, rng)
        X, _ = move_along_path(X0.copy(), pop, labels, (tp, coupling_matrix(e, vp)), (tn, coupling_matrix(e, vn)),
                               8, 3, 0.7, rng, compiled=compiled)
        out.append((X, pop.logw, pop.log_z, pop.resamples, rng.random()))
    (Xa, la, za, ra, ua), (Xb, lb, zb, rb, ub) = out
    assert np.array_equal(Xa, Xb) and np.array_equal(la, lb) and za == zb and ra == rb and ua == ub
    assert ra > 0 and not np.array_equal(Xa, X0)  # the test moved and resampled particles


def test_backend_option_validated(monkeypatch):
    e = ising.four_node()
    with pytest.raises(InvalidOptionError, match="backend"):
        varopt.get_solver("cmf").solve(e.to_program(), backend="fortran")
    monkeypatch.setattr(cmf_solver, "numba_available", lambda: False)
    with pytest.raises(InvalidOptionError, match="numba"):
        varopt.get_solver("cmf").solve(e.to_program(), backend="numba", particles=20)
    r = varopt.get_solver("cmf").solve(e.to_program(), particles=20, temper_steps=2, seed=0)
    assert r.info["backend"] == "numpy"  # 'auto' without numba: the reference path


def test_different_patterns_fall_back_to_the_reference():
    """Coupling matrices with different stored patterns (a user's, zeros dropped) run the numpy path: same result."""
    e = ising.lattice(3, 4, 1.0, 0.3, True, 2.0).scaled(-1.0)
    labels = bisection_schedule(e)[1]
    Jp = coupling_matrix(e, np.where(labels[e.i] == labels[e.j], 0.0, e.w))
    Jn = coupling_matrix(e, np.where(labels[e.i] == labels[e.j], 0.0, 0.5 * e.w))
    Jn.eliminate_zeros()
    out = []
    for compiled in (False, True):
        rng = np.random.default_rng(2)
        pop = Particles(30, rng)
        X, _ = move_along_path(np.ones((30, e.n)), pop, labels, (e.h, Jp), (0.5 * e.h, Jn), 4, 2, 0.5, rng,
                               compiled=compiled)
        out.append((X, pop.log_z))
    assert np.array_equal(out[0][0], out[1][0]) and out[0][1] == out[1][1]


def test_auto_checks_the_kernels_formulas(monkeypatch):
    from varopt.solvers.cmf import compiled
    assert compiled.matches_scipy()  # on this platform the kernels' expit/log_expit are scipy's, bit for bit
    monkeypatch.setattr(compiled, "matches_scipy", lambda: False)
    r = varopt.get_solver("cmf").solve(ising.four_node().to_program(), particles=20, temper_steps=2, seed=0)
    assert r.info["backend"] == "numpy"


@pytest.mark.parametrize("make", [lambda: ising.lattice(4, 5, 1.0, 0.2, True, 2.0), _irregular])
def test_site_tables_give_the_per_particle_log_conditionals(make):
    """step_terms' per-block sums from the pattern tables (every site, maxdeg = 10) equal, bit for bit, those
    computed per particle (no site, maxdeg = -1): the tables index the same numbers."""
    from varopt.solvers.cmf.compiled import site_tables, step_terms
    e = make()
    rng = np.random.default_rng(3)
    C = coupling_matrix(e, e.w * rng.uniform(0.5, 1.5, e.m)).tocsc()
    C.sort_indices()
    indptr, indices = C.indptr.astype(np.int64), C.indices.astype(np.int64)
    dp, dn = C.data.copy(), C.data * rng.normal(size=C.data.size)
    tp, tn = rng.normal(size=e.n), rng.normal(size=e.n)
    labels = bisection_schedule(e)[2].astype(np.int64)
    N, nb = 50, int(labels.max()) + 1
    XT = rng.choice([-1.0, 1.0], size=(e.n, N))
    out = []
    for maxdeg in (-1, 10):
        T0, T1 = np.empty((e.n, 1 << 11)), np.empty((e.n, 1 << 11))
        site_tables(indptr, indices, dp, dn, tp, tn, 0.3, maxdeg, T0)
        Yp, Yn, PB, L = np.empty((e.n, N)), np.empty((e.n, N)), np.empty((nb, N)), np.empty((e.n, N))
        step_terms(XT, indptr, indices, dp, dn, tp, tn, 0.3, 0.4, labels, Yp, Yn, PB, L,
                   np.ones((e.n, N), dtype=np.uint8), maxdeg, T0, T1)
        out.append(PB)
    assert np.array_equal(out[0], out[1]) and np.abs(out[0]).max() > 0
