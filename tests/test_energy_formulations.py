"""Ising formulations (array, Pyomo, CVXPY agree) and the Kaufman reference against transfer
matrices written here."""
import itertools
import math

import numpy as np
import pyomo.environ as pyo
import pytest
from scipy.special import logsumexp

import varopt
from varopt.formulations import ising
from varopt.formulations.kaufman import kaufman_log_partition, onsager_log_partition_per_site


def transfer_matrix_log_z(Kx, Ky, m, n):
    """log trace T^m, T the symmetric row-to-row transfer matrix of n-spin periodic rows."""
    S = np.array(list(itertools.product([-1, 1], repeat=n)), dtype=float)
    row = Kx * (S * np.roll(S, -1, axis=1)).sum(axis=1)
    T = 0.5 * row[:, None] + Ky * S @ S.T + 0.5 * row[None, :]
    top = T.max()
    ev = np.linalg.eigvalsh(np.exp(T - top))  # positive definite: a product of PD factors
    return m * top + logsumexp(m * np.log(ev))


TC = 2.0 / math.log(1.0 + math.sqrt(2.0))


@pytest.mark.parametrize("L", [4, 6, 8])
@pytest.mark.parametrize("T", [1.0, 2.0, TC, 2.5, 3.0, 5.0])
def test_kaufman_matches_transfer_matrix_isotropic(L, T):
    ref = transfer_matrix_log_z(1 / T, 1 / T, L, L)
    assert abs(kaufman_log_partition(1 / T, 1 / T, L, L) - ref) <= 1e-9 * abs(ref)


@pytest.mark.parametrize("L", [4, 6, 8])
@pytest.mark.parametrize("Kx,Ky", [(0.3, 0.7), (0.7, 0.3), (0.2, 0.35), (0.9, 1.3)])
def test_kaufman_matches_transfer_matrix_anisotropic(L, Kx, Ky):
    for m, n in ((L, L), (L + 2, L)):
        ref = transfer_matrix_log_z(Kx, Ky, m, n)
        assert abs(kaufman_log_partition(Kx, Ky, m, n) - ref) <= 1e-9 * abs(ref)
    # a swapped reading of the couplings would fail (deep in the ordered phase both are ~ the ground state)
    if max(Kx, Ky) < 0.8:
        assert abs(kaufman_log_partition(Ky, Kx, L + 2, L) - transfer_matrix_log_z(Kx, Ky, L + 2, L)) > 1e-6


def test_kaufman_extremes_and_onsager_limit():
    for T in (1e-3, 1e-2):  # ground states: 2mn K + ln 2
        assert abs(kaufman_log_partition(1 / T, 1 / T, 4, 4) - (32 / T + math.log(2))) <= 1e-12 * 32 / T
    K = 1e-4  # nearly free spins: mn ln 2 + 2 mn log cosh K + ...
    assert abs(kaufman_log_partition(K, K, 6, 6) - 36 * math.log(2) - 72 * math.log(math.cosh(K))) < 1e-9
    for T, modes in ((1.5, 2), (3.0, 1)):  # below T_c the two magnetised phases add ln 2 to log Z
        lim = onsager_log_partition_per_site(1 / T, 1 / T)
        assert abs((kaufman_log_partition(1 / T, 1 / T, 128, 128) - math.log(modes)) / 128 ** 2 - lim) < 1e-9
    with pytest.raises(ValueError):
        kaufman_log_partition(-1.0, 1.0, 4, 4)


def test_exact_solver_reaches_kaufman_on_a_torus_and_cylinder_transfer_matrix():
    for T in (1.0, TC, 3.0):
        e = ising.lattice(6, 6, T=T)
        r = varopt.get_solver("exact").solve(e.to_program())
        assert abs(r.info["log_partition"] - kaufman_log_partition(1 / T, 1 / T, 6, 6)) < 1e-10
    # cylinder: ring of W = 6 sites per row, 5 rows, open ends: transfer matrix with open product
    K = 0.4
    e = ising.lattice(5, 6, K, periodic="cylinder")
    S = np.array(list(itertools.product([-1, 1], repeat=6)), dtype=float)
    row = K * (S * np.roll(S, -1, axis=1)).sum(axis=1)
    V = K * S @ S.T
    v = row.copy()
    for _ in range(4):
        v = logsumexp(v[:, None] + V, axis=0) + row
    r = varopt.get_solver("exact").solve(e.to_program(), method="eliminate")
    assert abs(r.info["log_partition"] - logsumexp(v)) < 1e-10
    assert r.info["width"] <= 7


@pytest.mark.parametrize("name", ["lattice", "spin_glass", "grid", "complete", "rbm", "four_node"])
def test_three_versions_of_each_formulation_agree(name):
    rng = np.random.default_rng(0)
    e = {"lattice": lambda: ising.lattice(3, 4, (0.5, 0.3), rng.normal(size=12), periodic=True, T=2.0),
         "spin_glass": lambda: ising.spin_glass(3, 3, T=1.5, seed=1),
         "grid": lambda: ising.random_field_model("grid", 3, seed=2),
         "complete": lambda: ising.random_field_model("complete", 6, seed=3),
         "rbm": lambda: ising.rbm(rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=4)),
         "four_node": ising.four_node}[name]()
    ref = varopt.get_solver("exact").solve(e.to_program()).info["log_partition"]
    S = 2.0 * np.array(list(itertools.product([0, 1], repeat=e.n))) - 1
    assert abs(ref - logsumexp(-e.value(S))) < 1e-10
    m = ising.to_pyomo(e)
    r = pyo.SolverFactory("exact").solve(m).varopt_result
    assert abs(r.info["log_partition"] - ref) < 1e-10
    prob, _ = ising.to_cvxpy(e)
    assert abs(-prob.solve(method="exact") - ref) < 1e-10
    if name == "four_node":
        assert abs(ref - 3.3675) < 1e-4


def test_rbm_matches_its_bit_energy_and_is_bipartite():
    rng = np.random.default_rng(4)
    W, b, c = rng.normal(size=(3, 2)), rng.normal(size=3), rng.normal(size=2)
    e = ising.rbm(W, b, c, T=0.5)
    X = np.array(list(itertools.product([0, 1], repeat=5)), dtype=float)
    E = -(X[:, :3] @ b + X[:, 3:] @ c + np.einsum("si,ij,sj->s", X[:, :3], W, X[:, 3:])) / 0.5
    assert np.abs(e.value(2 * X - 1) - E).max() < 1e-12
    from varopt.oracles import colour_classes
    assert len(colour_classes(e.n, e.i, e.j)) == 2


def test_non_integer_edge_endpoints_and_bad_coupling_shapes_are_named():
    """Endpoints 1.5 (or NaN) were truncated to 1 silently; a per-bond J of the wrong shape failed with
    'too many values to unpack'."""
    from varopt.errors import InputDataError
    from varopt.program.energy import EnergyModel
    with pytest.raises(InputDataError, match=r"j\[0\] = 1.5 is not an integer"):
        EnergyModel([0.0, 0.0, 0.0], [0.0], [1.5], [1.0])
    with pytest.raises(InputDataError, match=r"i\[1\] = nan"):
        EnergyModel([0.0, 0.0, 0.0], [0, np.nan], [1, 2], [1.0, 1.0])
    e = EnergyModel([0.0, 0.0, 0.0], [0.0, 1.0], np.array([1, 2], dtype=np.int32), [1.0, 2.0])  # integral floats
    assert e.i.tolist() == [0, 1] and e.j.tolist() == [1, 2]
    with pytest.raises(ValueError, match=r"J must be a scalar or a pair"):
        ising.lattice(3, 3, J=np.ones(5))
    rows, cols = np.arange(1.0, 10.0), -np.arange(1.0, 10.0)   # a per-bond pair still works
    lat = ising.lattice(3, 3, J=(rows, cols))
    assert lat.m == 18
    # a scalar row coupling with per-bond columns (ragged for np.ndim, which raised on it)
    mixed = ising.lattice(3, 3, J=(0.5, cols))
    assert np.array_equal(mixed.w, ising.lattice(3, 3, J=(np.full(9, 0.5), cols)).w)
    for bad in ("a", None, np.nan, (1.0, [1.0, 2.0])):   # each names J (numpy's own message did not)
        with pytest.raises(ValueError, match=r"^J "):
            ising.lattice(3, 3, J=bad)


def test_energy_model_from_a_dense_or_sparse_coupling_matrix():
    """q(s) = const + h.s + s^T J s / 2 from a symmetric J (dense, scipy sparse matrix or array, e.g. a
    networkx adjacency): the values at every state match the formula; the diagonal is a constant; a
    non-symmetric J is refused."""
    import scipy.sparse as sps
    from varopt.errors import InputDataError
    from varopt.program.energy import EnergyModel
    rng = np.random.default_rng(0)
    n = 5
    A = rng.normal(size=(n, n))
    J = (A + A.T) / 2
    h = rng.normal(size=n)
    S = np.array(list(itertools.product([-1.0, 1.0], repeat=n)))
    q = 0.3 + S @ h + 0.5 * np.einsum("si,ij,sj->s", S, J, S)
    for JJ in (J, sps.csr_matrix(J), sps.csr_array(J)):
        e = EnergyModel.from_matrix(h, JJ, const=0.3)
        assert np.abs(e.value(S) - q).max() < 1e-12
        assert np.allclose(e.J.toarray(), J - np.diag(np.diag(J)))
    with pytest.raises(InputDataError, match="not symmetric"):
        EnergyModel.from_matrix(h, A)
    with pytest.raises(InputDataError, match=r"shape \(4, 4\)"):
        EnergyModel.from_matrix(h, J[:4, :4])
    with pytest.raises(InputDataError, match="NaN or inf"):
        EnergyModel.from_matrix(h, np.where(np.eye(n) > 0, np.nan, J))


def test_kaufman_nearly_free_spins_against_enumeration():
    """Couplings 1e-12 .. 1e-3 on small tori against the sum over all 2^(mn) states: the dual coupling
    -1/2 log tanh Ky was computed as log1p(-2 / (e^2Ky + 1)), which cancels for small Ky (4e-4 off at 1e-12)."""
    for m, n in ((2, 3), (3, 4)):
        idx = np.arange(m * n).reshape(m, n)
        S = np.array(list(itertools.product([-1.0, 1.0], repeat=m * n)))
        row = sum(S[:, idx[i, j]] * S[:, idx[i, (j + 1) % n]] for i in range(m) for j in range(n))
        col = sum(S[:, idx[i, j]] * S[:, idx[(i + 1) % m, j]] for i in range(m) for j in range(n))
        for Kx, Ky in ((1e-12, 1e-12), (1e-8, 3e-8), (1e-3, 2e-3)):
            e = Kx * row + Ky * col
            ref = float(e.max() + np.log(np.exp(e - e.max()).sum()))
            assert abs(kaufman_log_partition(Kx, Ky, m, n) - ref) <= 1e-12 * ref, (m, n, Kx, Ky)
