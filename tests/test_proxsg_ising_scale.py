"""Sparse Ising learning at the sizes users bring (p in the hundreds): memory and the work per
iteration of the Gibbs oracle, warnings on degenerate data. Counts and traced memory, no wall-clock
assertions (shared machine)."""
import numpy as np

from varopt.oracles.ising import IsingGibbsOracle

from memory_peak import traced_peak


def _theta(n, density, seed=0):
    rng = np.random.default_rng(seed)
    q = n * (n - 1) // 2
    return np.r_[rng.normal(0, 0.1, n), rng.normal(0, 0.1, q) * (rng.random(q) < density)]


def test_gibbs_moments_from_the_gram_not_the_feature_matrix():
    """The chains' average of phi = (x, x_i x_j) equals the features' mean bitwise (sums of +-1 are
    exact) and needs O(n^2) memory: the S x (n + n(n-1)/2) feature matrix (27 MB here) is not formed."""
    n, S = 150, 300
    o = IsingGibbsOracle(n, n_chains=S, n_sweeps=1)
    theta = _theta(n, 0.3)
    X = o.sample(theta, 7)
    want = np.clip(o.statistics(X).mean(axis=0), -1.0, 1.0)
    got, peak = traced_peak(o.estimate, theta, 7)
    assert np.array_equal(got, want)
    features = S * o.n_params * 8
    assert peak < features / 4, (peak, features)


def test_exact_log_likelihood_of_many_rows_without_the_feature_matrix():
    from varopt.oracles.ising import IsingExactOracle
    n, T = 10, 20000
    rng = np.random.default_rng(1)
    X = np.where(rng.random((T, n)) < 0.5, 1.0, -1.0)
    o = IsingExactOracle(n)
    theta = _theta(n, 0.5, seed=2)
    o.log_partition(theta)                         # enumeration cached outside the traced call
    want = float(np.mean(o.statistics(X) @ theta)) - o.log_partition(theta)
    got, peak = traced_peak(o.log_likelihood, theta, X)
    assert abs(got - want) <= 1e-12 * max(1.0, abs(want))
    assert peak < T * o.n_params * 8 / 4, peak


def test_fit_passes_over_the_data_once(monkeypatch):
    """The moments (an O(N p^2) Gram of the data: 1 s at N = 1e5, p = 500 on one core) are computed once
    per fit (they were computed twice, once unused)."""
    import varopt.estimators.sparse_ising as est
    import varopt.formulations.sparse_ising as form
    calls = []
    real = form.moments

    def counted(S, *a, **k):
        calls.append(S.shape)
        return real(S, *a, **k)
    monkeypatch.setattr(form, "moments", counted)
    monkeypatch.setattr(est, "moments", counted, raising=False)
    rng = np.random.default_rng(0)
    X = np.where(rng.random((300, 25)) < 0.5, 1.0, -1.0)
    est.SparseIsing(max_iter=2).fit(X)
    assert calls == [(300, 25)]


def test_identical_and_opposite_columns_warn_by_name():
    import warnings

    import pytest

    from varopt.estimators import SparseIsing
    from varopt.formulations.sparse_ising import IdenticalColumnsWarning
    rng = np.random.default_rng(3)
    X = np.where(rng.random((400, 24)) < 0.5, 1.0, -1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # ordinary data: no warning
        SparseIsing(max_iter=2).fit(X)
    Xd = np.c_[X, X[:, 4], -X[:, 7]]
    with pytest.warns(IdenticalColumnsWarning, match=r"columns 4 and 24 are equal in every sample \(2 such pairs\)"):
        m = SparseIsing(max_iter=5).fit(Xd)
    assert np.isfinite(m.coef_).all()
    with pytest.warns(IdenticalColumnsWarning, match="columns 7 and 24 are opposite"):
        SparseIsing(max_iter=2).fit(np.c_[X, -X[:, 7]])


def test_verbose_progress_of_a_sampled_fit_shows_samples_step_and_support(capsys):
    """A sampled fit has no objective value: its progress lines show what changes (S_k, eta_k, the
    iterate's nonzeros); they showed only the iteration and the time."""
    from varopt.estimators import SparseIsing
    rng = np.random.default_rng(0)
    X = np.where(rng.random((200, 22)) < 0.5, 1.0, -1.0)
    SparseIsing(max_iter=3, samples=10, solver_options={"verbose": True}).fit(X)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("proxsg it")]
    assert len(lines) == 3
    assert all(" samples " in ln and " step " in ln and " nonzeros " in ln for ln in lines), lines
    assert " samples 10 " in lines[0] and " samples 17 " in lines[1]     # log schedule: ceil(10 (1 + log 2))


def test_history_carries_the_support_size_with_or_without_progress_lines():
    """``nonzeros`` is in the history of every iteration whether or not verbose is on (it was recorded only
    while progress lines were shown), and equals the support of that iteration's last iterate."""
    from varopt.estimators import SparseIsing
    rng = np.random.default_rng(0)
    X = np.where(rng.random((200, 22)) < 0.5, 1.0, -1.0)
    hist = {}
    for verbose in (False, True):
        est = SparseIsing(max_iter=3, samples=10, variant="FL", solver_options={"verbose": verbose}).fit(X)
        hist[verbose] = [h["nonzeros"] for h in est.result_.history]
    assert hist[False] == hist[True] and len(hist[False]) == 3
    assert hist[False][-1] == int(np.count_nonzero(np.triu(est.coef_, 1)))


def test_mean_field_start_skips_the_zero_couplings(monkeypatch):
    import varopt.oracles.ising as ising
    seen = []
    real = ising.mean_field

    def spy(h, Jm, *a, **k):
        seen.append(Jm.nnz)
        return real(h, Jm, *a, **k)
    monkeypatch.setattr(ising, "mean_field", spy)
    n = 60
    theta = _theta(n, 0.2, seed=4)
    o = IsingGibbsOracle(n, n_chains=5, n_sweeps=1)
    got = o.estimate(theta, 3)
    assert seen == [2 * np.count_nonzero(theta[n:])]
    h, J = o.split(theta)
    full = o.coupling_matrix(J)                 # with the explicit zeros: the same magnetisations, bitwise
    nz = full.copy()
    nz.eliminate_zeros()
    assert full.nnz == n * (n - 1) and np.array_equal(real(h, full), real(h, nz))
    assert np.isfinite(got).all()


def test_estimator_input_check_makes_no_copy_of_the_data():
    """The magnitude check of every estimator's input (squares overflow) took ``abs`` of the whole array: a
    temporary as large as the data (400 MB at N = 1e5, p = 500)."""
    import pytest

    from varopt.errors import InputDataError
    from varopt.estimators.base import check_magnitude
    X = np.where(np.random.default_rng(0).random((2000, 500)) < 0.5, 1.0, -1.0)
    X[3, 7] = -5.0
    _, peak = traced_peak(check_magnitude, "X", X)
    assert peak < X.nbytes / 8, peak
    with pytest.raises(InputDataError, match="magnitude up to 1e"):
        check_magnitude("X", np.r_[1.0, -1e200])


def test_sparse_01_moments_without_densifying():
    """Sparse 0/1 data: the moments from sparse counts equal the dense path's bitwise, in less memory than
    one dense copy (the dense path made two: 906 MB traced for a 29 MB matrix of 1e5 x 500); the
    constant-column error and the other values' errors are the dense path's."""
    import pytest
    import scipy.sparse as sps

    from varopt.errors import InputDataError
    from varopt.estimators import SparseIsing
    from varopt.formulations.sparse_ising import check_spins, moments, spin_moments
    X = sps.random(4000, 120, density=0.05, format="lil", random_state=1)
    X[X.nonzero()] = 1.0
    X[0, :] = 1.0                                   # no constant column
    X = X.tocsr()
    X[0, 5] = 0.0                                   # an explicit stored zero is a -1 spin
    assert X.nnz == X.count_nonzero() + 1
    (mu, s), peak = traced_peak(spin_moments, X)
    mu_d, s_d = moments(check_spins(X.toarray()))
    assert np.array_equal(mu, mu_d) and np.array_equal(s, s_d)
    assert peak < X.shape[0] * X.shape[1] * 8 / 2, peak
    Xs = X[:300]
    a = SparseIsing(max_iter=3).fit(Xs)
    assert np.array_equal(a.theta_, SparseIsing(max_iter=3).fit(Xs.toarray()).theta_)
    small = SparseIsing(max_iter=3).fit(Xs[:, :12])
    assert small.score(Xs[:, :12]) == small.score(Xs[:, :12].toarray())
    Z = X.tolil()
    Z[:, 7] = 0.0
    with pytest.raises(InputDataError, match="column 7 is constant"):
        spin_moments(Z.tocsr())
    Y = X.copy()
    Y.data[3] = -1.0                                # a -1 beside the implicit zeros
    with pytest.raises(InputDataError, match="both 0 and -1 occur"):
        spin_moments(Y)


def test_dense_data_moments_without_a_spin_copy():
    """Dense 0/1 and -1/+1 data: the moments equal those of the check_spins copy bitwise, with no N x p float
    copy (the copy, and np.unique's sorted one, were 1.4x the data's memory at 1e5 x 500)."""
    import pytest

    from varopt.errors import InputDataError
    from varopt.formulations.sparse_ising import IdenticalColumnsWarning, check_spins, moments, spin_moments
    rng = np.random.default_rng(5)
    B = (rng.random((3000, 80)) < 0.3).astype(float)
    for X in (B, 2.0 * B - 1.0):
        (mu, s), peak = traced_peak(spin_moments, X)
        mu_d, s_d = moments(check_spins(X))
        assert np.array_equal(mu, mu_d) and np.array_equal(s, s_d)
        assert peak < X.nbytes / 2, peak
    with pytest.warns(IdenticalColumnsWarning, match="columns 3 and 80 are opposite"):
        spin_moments(np.c_[B, 1.0 - B[:, 3]])
    B[:, 9] = 1.0
    with pytest.raises(InputDataError, match=r"column 9 is constant \(\+1 in every sample\)"):
        spin_moments(B)
    assert spin_moments(B, penalize_bias=True)[0][9] == 1.0
