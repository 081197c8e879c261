"""klprox on softmax rows: Anderson-extrapolated steps, the softmax rule evaluated in blocks of rows, and the dense
block Gram ``A^T G A`` (docs/klprox.md, sections 2b and 4)."""
from __future__ import annotations

import numpy as np
import pytest
from klprox_checks import logistic_program
from scipy.special import softmax

import varopt  # noqa: F401  (registers the solvers)
from varopt.formulations.bayes_glm import design, glm_program
from varopt.registry import get_solver
from varopt.solvers.klprox import expectations as EX
from varopt.solvers.klprox import family_table, likelihood_view
from varopt.solvers.klprox import solver as KS
from varopt.solvers.klprox.posterior import FullGaussian

S = get_solver("klprox")


def _softmax_program(prior_var, N=60, p=3, K=3, seed=2, scale=2.0):
    """Labels drawn from a random softmax model on standard normal features; prior ``N(0, prior_var I)``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, p))
    U = design(X) @ (scale * rng.normal(size=(p + 1, K)))
    y = np.array([rng.choice(K, p=q) for q in softmax(U, axis=1)]).astype(float)
    return glm_program(X, y, "multinomial", prior_var=prior_var)


def _solve(prog, memory, monkeypatch, **opts):
    with monkeypatch.context() as mp:
        mp.setattr(KS, "ANDERSON_MEMORY", memory)
        return S.solve(prog, **opts)


# --- Anderson-extrapolated steps -----------------------------------------------------------------------------------
@pytest.mark.parametrize("prior_var", [3.0, 10.0])
def test_anderson_steps_reach_the_same_optimum_in_fewer_steps_with_a_monotone_elbo(prior_var, monkeypatch):
    """Against the plain steps (memory 0) on the same model: the same -ELBO to 1e-12 relative and the same mean and
    covariance to 1e-6, at most 60 % of the iterations, every accepted step within the rounding of a monotone ELBO
    (at prior_var = 10 a proposal is rejected: its -ELBO rose, the plain step was taken)."""
    prog = _softmax_program(prior_var)
    plain = _solve(prog, 0, monkeypatch)
    fast = S.solve(prog)
    assert plain.status == fast.status == "converged"
    assert "anderson_steps" not in plain.info and fast.info["anderson_steps"] > 0
    assert abs(fast.objective - plain.objective) <= 1e-12 * abs(plain.objective)
    assert np.max(np.abs(fast.x - plain.x)) < 1e-6
    assert np.max(np.abs(fast.info["covariance"] - plain.info["covariance"])) < 1e-6
    assert len(fast.history) <= 0.6 * len(plain.history)
    h = np.array([e["objective"] for e in fast.history])
    assert np.all(np.diff(h) <= fast.info["rounding"])
    if prior_var == 10.0:
        assert fast.info["rejected_steps"] >= 1     # the test above then covers a rejected proposal


def test_anderson_steps_only_on_softmax_rows_under_the_quadrature(monkeypatch):
    """Logistic rows, Boehning's bound (its Newton mean step) and the paper's mean step keep their trajectories bit for
    bit: the same history with the memory 0 and 5."""
    cases = [(logistic_program(2.0, N=120, D=5), {}),
             (_softmax_program(3.0), {"softmax": "bound"}),
             (_softmax_program(3.0), {"mean_step": "paper"})]
    for prog, opts in cases:
        a = _solve(prog, 0, monkeypatch, **opts)
        b = _solve(prog, 5, monkeypatch, **opts)
        assert "anderson_steps" not in b.info
        assert [e["objective"] for e in a.history] == [e["objective"] for e in b.history]
        assert np.array_equal(a.x, b.x)


def test_anderson_proposal_extrapolates_a_linear_fixed_point_map():
    """On an affine map ``T(x) = M x + c`` (contraction M), two pairs give the exact fixed point in one dimension and
    the Anderson proposal from the last pairs is the fixed point when the memory spans the space."""
    from types import SimpleNamespace

    from varopt.solvers.klprox.anderson import AndersonSteps
    rng = np.random.default_rng(0)
    n = 4
    Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
    M = Q @ np.diag([0.95, 0.9, 0.5, -0.3]) @ Q.T
    c = rng.normal(size=n)
    fixed = np.linalg.solve(np.eye(n) - M, c)

    class Affine:      # a stand-in posterior: the state is x = (m, gt) with m = x[:2], gt = x[2:]
        def step(self, st, alpha, gamma, r, natural):
            y = M @ np.concatenate([st.m, st.gt]) + c
            return SimpleNamespace(m=y[:2], gt=y[2:])

        def state_of(self, m, gt):
            return SimpleNamespace(m=m, gt=gt)

    acc = AndersonSteps(Affine(), memory=n)
    x = rng.normal(size=n)
    out = None
    for _ in range(n + 1):
        cur = SimpleNamespace(st=SimpleNamespace(m=x[:2], gt=x[2:]), alpha=None, gamma=None)
        out = acc.propose(cur)
        x = M @ x + c                   # the plain (undamped) iteration supplies the next pair
    got = np.concatenate([out.m, out.gt])
    assert np.max(np.abs(got - fixed)) < 1e-10 * np.max(np.abs(fixed))
    acc.reset()
    assert acc.propose(SimpleNamespace(st=SimpleNamespace(m=x[:2], gt=x[2:]), alpha=None, gamma=None)) is None


# --- the softmax rule in blocks of rows ----------------------------------------------------------------------------
@pytest.mark.parametrize("J", [2, 3])
def test_softmax_rule_in_blocks_equals_every_row_alone(J, monkeypatch):
    """Rows of every node grade (sd from 0.1 to 3), evaluated together in blocks of one row, of a few rows, and all at
    once, equal each row evaluated alone to 1e-14 relative (value and both gradients)."""
    rng = np.random.default_rng(J)
    G = 24
    mt = rng.normal(scale=2.0, size=(G, J))
    sds = np.linspace(0.1, 3.0 if J == 2 else 1.4, G)
    Vt = np.empty((G, J, J))
    for g, sd in enumerate(sds):
        Q = np.linalg.qr(rng.normal(size=(J, J)))[0]
        Vt[g] = Q @ np.diag((sd * np.concatenate([[1.0], rng.uniform(0.3, 1.0, J - 1)])) ** 2) @ Q.T
    fam = EX.SoftmaxFamily()
    alone = [np.concatenate([a.ravel() for a in fam.expect_group(mt[g:g + 1], Vt[g:g + 1])]) for g in range(G)]
    for chunk in (1, 3 * 2912 * J, 1 << 40):
        monkeypatch.setattr(EX, "SOFTMAX_CHUNK", chunk)
        E, d1, d2 = fam.expect_group(mt, Vt)
        for g in range(G):
            got = np.concatenate([E[g:g + 1], d1[g].ravel(), d2[g].ravel()])
            assert np.max(np.abs(got - alone[g]) / np.maximum(np.abs(alone[g]), 1e-3)) < 1e-14


def test_softmax_node_counts_follow_the_table_at_its_bounds():
    """The vectorised node counts equal ``nodes_for`` per group, at the table's bounds and beside them, also with the
    1.5x boost of the accuracy check and a lowered ``max_points``."""
    bounds = [b for b, _ in EX.SOFTMAX_NODES]
    sd = np.array([0.0, 1e-300] + [v for b in bounds for v in (np.nextafter(b, 0), b, np.nextafter(b, 9))] + [7.0])
    for fam in (EX.SoftmaxFamily(), EX.SoftmaxFamily(boost=1.5, max_points=160000), EX.SoftmaxFamily(max_points=900)):
        for J in (1, 2, 3):
            assert fam._node_counts(sd, J).tolist() == [fam.nodes_for(v, J) for v in sd]
    fam = EX.SoftmaxFamily()
    assert fam._node_counts(np.array([0.5, 0.5000001, 2.0, 2.0000001]), 1).tolist() == [16, 32, 100, 128]


# --- the block Gram ------------------------------------------------------------------------------------------------
def test_block_gram_equals_the_sparse_product():
    """``A^T G A`` of the dense block product against the sparse block-diagonal matrix, for pattern values that are not
    symmetric within a block (a transposed block would show), J = 2 and 3."""
    for K in (3, 4):
        prog = _softmax_program(1.0, N=20, K=K, seed=K)
        view = likelihood_view(prog, family_table())
        post = FullGaussian(view)
        assert isinstance(post.A, np.ndarray)
        g = np.random.default_rng(K).normal(size=view.npat)
        ref = post.A.T @ (view.curvature_matrix(g) @ post.A)
        got = post._AtGA(g)
        assert np.max(np.abs(got - ref)) <= 1e-14 * np.max(np.abs(ref))
