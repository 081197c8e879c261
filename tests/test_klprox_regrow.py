"""klprox's adaptive step rule after a rejected trial step (``REGROW_WINDOW``, docs/klprox.md section 4): for a few
iterations the step size does not grow back to the rejected one, which ends the grow-reject-shrink cycles of
problems whose steps pass at beta and fail at 2 beta; the same optimum, the ELBO never decreasing."""
import numpy as np
import pytest
from scipy.special import expit

import varopt  # noqa: F401  (registers the solvers)
from varopt.formulations.bayes_glm import gp_program
from varopt.registry import get_solver
from varopt.solvers.klprox import solver as KS

S = get_solver("klprox")


def _cycling_gp(seed=0, N=40):
    # GP classification with a large signal variance (log sf = 6): its natural steps pass at beta and fail at 2 beta
    # for long stretches (about 90 rejected trials in 240 iterations without the rule)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    y = (rng.uniform(size=N) < expit(2 * X[:, 0] - X[:, 1])).astype(float)
    return gp_program(X, y, "logistic", -1.0, 6.0)[0]


def _trials(monkeypatch, p):
    """``(result, [(iteration, first trial beta, rejected trials)])`` of one solve."""
    log = []
    advance = KS.KLProx.advance

    def logged(self, cur, beta, it):
        out = advance(self, cur, beta, it)
        log.append((it, beta, out[4]))
        return out
    monkeypatch.setattr(KS.KLProx, "advance", logged)
    return S.solve(p), log


@pytest.mark.parametrize("seed", [0, 1])
def test_no_regrowth_to_a_rejected_step_size_within_the_window(monkeypatch, seed):
    r, log = _trials(monkeypatch, _cycling_gp(seed))
    assert r.status == "converged"
    shrink, window = 0.5, KS.REGROW_WINDOW
    assert window >= 1
    first = dict((it, b) for it, b, _ in log)
    checked = 0
    for it, beta, rej in log:
        if rej:
            last_rejected = beta * shrink ** (rej - 1)
            for later in range(it + 1, it + window + 1):
                if later in first:
                    assert first[later] < last_rejected, (it, later, first[later], last_rejected)
                    checked += 1
    assert checked > 20


@pytest.mark.parametrize("seed", [0, 1])
def test_fewer_rejected_trials_same_optimum_monotone_elbo(monkeypatch, seed):
    p = _cycling_gp(seed)
    r = S.solve(p)
    monkeypatch.setattr(KS, "REGROW_WINDOW", 0)          # the rule before: grow after every step accepted at once
    old = S.solve(p)
    assert r.status == "converged" and old.status == "converged"
    assert r.info["rejected_steps"] <= 0.5 * old.info["rejected_steps"]
    assert r.iterations + r.info["rejected_steps"] < old.iterations + old.info["rejected_steps"]
    assert abs(r.objective - old.objective) <= 1e-9 * abs(old.objective)
    f = np.array([h["objective"] for h in r.history])
    assert np.all(np.diff(f) <= r.info["rounding"])
