"""Shared option groups: one name per meaning across the solvers, deprecated spellings still work."""
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import varopt
from varopt.core.threads import blas_threads, option_threads
from varopt.errors import InvalidOptionError
from varopt.program import AtomGroup, Expression, LseGroup, Program

SHARED = ("max_iter", "time_limit", "verbose")


@pytest.mark.parametrize("name", ["gop", "ipsa", "majorize"])
def test_every_solver_has_the_shared_groups(name):
    names = set(varopt.get_solver(name).options.names())
    assert set(SHARED) <= names and names & {"x0", "seed"}  # gop starts from the model's values or a seed


def test_one_meaning_per_name():
    """``tol`` is majorize's relative objective change only; ipsa's KKT tolerance is ``kkt_tol``;
    ``blas_threads`` has the same values (None auto, 0 unchanged, k at most k) wherever it exists."""
    ipsa, maj = varopt.get_solver("ipsa").options, varopt.get_solver("majorize").options
    assert "kkt_tol" in ipsa.names() and "tol" not in ipsa.names() and "tol" in maj.names()
    for s in (ipsa, maj):
        assert s.options["blas_threads"].default is None
        assert "0 leave the library's setting unchanged" in s.options["blas_threads"].doc
    assert option_threads(None, auto=1) == 1 and option_threads(0, auto=1) == 0 and option_threads(3, auto=1) == 3
    with blas_threads(None), blas_threads(0), blas_threads(1):  # None and 0: no-ops
        pass
    with pytest.raises(ValueError, match="n must be"):
        blas_threads(-2)


def _ridge_lse(n=3):
    """``0.5 ||x||^2 + log sum_k exp(a_k^T x)`` with minimiser found by both ipsa and majorize."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(4, n))
    sq = AtomGroup("square", np.full(n, 0.5), sp.identity(n, format="csr"), np.zeros(n))
    lse = LseGroup(sp.csr_matrix(A), np.zeros(4), np.zeros(4), [1.0])
    return Program([f"x{i}" for i in range(n)], [-10.0] * n, [10.0] * n,
                   Expression(n, 0.0, None, None, [sq], lse=[lse]))


def test_deprecated_ipsa_tol_is_kkt_tol():
    p = _ridge_lse()
    with pytest.warns(DeprecationWarning, match="kkt_tol"):
        old = varopt.get_solver("ipsa").solve(p, tol=1e-6, max_iter=300, batch_size=10**6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = varopt.get_solver("ipsa").solve(p, kkt_tol=1e-6, max_iter=300, batch_size=10**6)
    assert np.array_equal(old.x, new.x) and old.iterations == new.iterations
    with pytest.raises(InvalidOptionError, match="tol"):
        varopt.get_solver("ipsa").solve(p, tol=1e-6, kkt_tol=1e-6)


def test_deprecated_majorize_blas_threads_zero_still_means_automatic():
    p = _ridge_lse()
    with pytest.warns(DeprecationWarning, match="blas_threads=0"):
        old = varopt.get_solver("majorize").solve(p, blas_threads=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = varopt.get_solver("majorize").solve(p)
    assert np.array_equal(old.x, new.x)


@pytest.mark.parametrize("name", ["klprox", "majorize", "gop", "ipsa"])
def test_a_boolean_is_not_a_number(name):
    """``max_iter=True`` was accepted as 1 iteration (bool is an int subclass) and ``time_limit=True`` as 1 s;
    numeric options refuse booleans with a message naming the option."""
    opts = varopt.get_solver(name).options
    for key in ("max_iter", "time_limit"):
        with pytest.raises(InvalidOptionError, match=f"option '{key}' must be a number"):
            opts.validate({key: True})
        with pytest.raises(InvalidOptionError, match=f"option '{key}' must be a number"):
            opts.validate({key: np.False_})
    assert opts.validate({"max_iter": 5, "time_limit": 2}).max_iter == 5


def test_float_options_refuse_inf_except_time_limit():
    """Every float option of every solver refuses +-inf with a message naming it (``gtol=inf`` once reported
    "converged" after one step; ``gamma0=inf`` blamed the data), as NaN; ``time_limit=inf`` means no limit."""
    from varopt.registry import registered_solvers
    checked = 0
    for name in registered_solvers():
        opts = varopt.get_solver(name).options
        for o in opts:
            if o.domain is not float:
                continue
            for bad in (math.inf, -math.inf, math.nan):
                if o.name == "time_limit" and not math.isnan(bad):   # the one option where inf means something
                    continue
                with pytest.raises(InvalidOptionError, match=f"option '{o.name}'"):
                    opts.validate({o.name: bad})
            checked += 1
        assert opts.validate({"time_limit": math.inf}).time_limit == math.inf
    assert checked >= 20


def test_small_matrices_leave_blas_alone(monkeypatch):
    """OpenBLAS runs matrices up to order SMALL_ORDER on one thread anyway: below it no thread controller is
    built (its first build scans every loaded library, a third of a tiny gop solve); above it BLAS is capped."""
    from varopt.core import threads
    from varopt.solvers.gop import solver as gop_solver
    built = []

    def controller():
        built.append(1)
        return None                      # as without threadpoolctl: the cap becomes a no-op

    monkeypatch.setattr(threads, "_controller", controller)
    with threads.one_thread_above(threads.SMALL_ORDER):
        pass
    assert not built
    with threads.one_thread_above(threads.SMALL_ORDER + 1):
        pass
    assert built == [1]
    seen = []
    monkeypatch.setattr(gop_solver, "blas_threads", lambda n: seen.append(n) or threads.blas_threads(None))
    small = _ridge_lse(3)
    big = _ridge_lse(threads.SMALL_ORDER + 1)
    assert gop_solver._auto_threads(small) is None and gop_solver._auto_threads(big) == 1
    varopt.get_solver("gop").solve(small)
    varopt.get_solver("gop").solve(small, blas_threads=2)
    assert seen == [None, 2]


@pytest.mark.parametrize("name", ["gop", "ipsa", "proxsg", "klprox", "meanfield", "lbp", "trw", "ais", "sasmc", "cmf"])
def test_a_negative_seed_is_refused_by_name(name):
    """numpy's generators take non-negative seeds only: ``seed=-1`` used to reach them mid-solve and fail
    with numpy's bare ``ValueError: expected non-negative integer`` (ipsa, proxsg and the energy solvers)."""
    opts = varopt.get_solver(name).options
    assert opts.validate({"seed": 7}).seed == 7
    with pytest.raises(InvalidOptionError, match="option 'seed': must be a non-negative integer"):
        opts.validate({"seed": -1})
