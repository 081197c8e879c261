"""The GOP primal's Newton path (``primal._interior_newton``): where the minimiser is strictly inside the
inequalities it must return the same point and multipliers as the interior-point iterations, and both must agree
with CVXPY+Clarabel on the same convex problem; where a bound binds it must hand over to the interior point."""
import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp

from varopt.program.expression import Expression
from varopt.program.terms import AtomGroup, QuadraticTerms
from varopt.solvers.gop import primal as PR


def _problem(rng, n, m_eq, tight):
    """min sum x log x + c'x + 1/2 |B x|^2  s.t. E x = e (rows), lo <= A x <= hi, 1e-6 <= x <= ub."""
    B = rng.normal(size=(n, n)) * 0.3
    c = rng.normal(size=n) * (3.0 if tight else 0.5)
    E = np.abs(rng.normal(size=(m_eq, n))) + 0.1
    x0 = rng.uniform(0.2, 0.55 if tight else 1.0, n)
    e = E @ x0
    A = rng.normal(size=(2, n))
    lo, hi = A @ x0 - 2.0, A @ x0 + 2.0
    ub = np.full(n, 5.0 if not tight else 0.6)
    Q = B.T @ B
    ii, jj = np.nonzero(np.triu(Q))
    vals = np.where(ii == jj, 0.5 * Q[ii, jj], Q[ii, jj])
    f = Expression(n, 0.0, c, QuadraticTerms(ii, jj, vals, n), [AtomGroup("xlogx", np.ones(n), sp.identity(n), np.zeros(n))])
    rows = sp.csr_matrix(np.vstack([E, A]))
    rlo, rhi = np.concatenate([e, lo]), np.concatenate([e, hi])
    return f, rows, rlo, rhi, np.full(n, 1e-6), ub, (B, c, E, e, A, lo, hi, ub)


def _clarabel(data, n):
    B, c, E, e, A, lo, hi, ub = data
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(-cp.sum(cp.entr(x)) + c @ x + 0.5 * cp.sum_squares(B @ x)),
                      [E @ x == e, A @ x >= lo, A @ x <= hi, x >= 1e-6, x <= ub])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return x.value, prob.value


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("tight", [False, True])
def test_newton_and_interior_point_agree_with_clarabel(seed, tight, monkeypatch):
    rng = np.random.default_rng(seed)
    n, m_eq = 6, 1 + seed % 2
    f, rows, rlo, rhi, xlb, xub, data = _problem(rng, n, m_eq, tight)
    calls = []
    orig = PR._interior_newton

    def spy(*a, **k):
        out = orig(*a, **k)
        calls.append(out is not None)
        return out

    PR._pdip._last_x = None
    monkeypatch.setattr(PR, "_interior_newton", spy)
    r_new = PR._pdip(f, rows, rlo, rhi, xlb, xub)
    monkeypatch.setattr(PR, "_interior_newton", lambda *a, **k: None)
    PR._pdip._last_x = None
    r_ipm = PR._pdip(f, rows, rlo, rhi, xlb, xub)
    xc, vc = _clarabel(data, n)
    fv = lambda x: float(np.sum(x * np.log(x)) + data[1] @ x + 0.5 * np.sum((data[0] @ x) ** 2))
    for r in (r_new, r_ipm):
        assert r.status == "optimal"
        assert abs(fv(r.x) - vc) <= 1e-7 * max(1.0, abs(vc))
        assert np.max(np.abs(r.x - xc)) <= 1e-4
    assert np.max(np.abs(r_new.x - r_ipm.x)) <= 1e-6
    assert np.max(np.abs(r_new.lam - r_ipm.lam)) <= 1e-5 * max(1.0, np.abs(r_ipm.lam).max())
    if not tight:
        assert calls and calls[-1] and r_new.path.startswith("newton")   # interior minimiser: Newton's point
    binds = np.any(r_ipm.x >= xub - 1e-7)
    if binds:
        assert r_new.path.startswith("pdip")                            # a bound binds: the interior point

