"""The time share of the block alternation of the GOP loop (``GopSearch._alternate``, an upper-bound heuristic) is
halved after every call that does not improve the incumbent, down to ``alt_share * alt_share_floor``, and restored
when the incumbent improves (docs/gop.md §3). Checked call by call on solves of the BGMM (minimal data) and a
bilinear program, with the alternation's rounds replaced by ones that never improve (so only the primal problems
improve the incumbent) and with the real rounds; the solves must still certify the optima of the reference."""
import numpy as np
import pyomo.environ as pyo
import pytest
from gop_rd_models import MODELS

import varopt  # noqa: F401
from varopt.solvers.gop import search as S


@pytest.mark.parametrize("name", ["bgmm_point", "bgmm_gaussian", "bilinear"])
@pytest.mark.parametrize("rounds", ["real", "never_improve"])
def test_alternation_share_halves_until_the_incumbent_improves(name, rounds, monkeypatch):
    calls = []
    orig_alt = S.GopSearch._alternate

    def alternate(self, z, val, UB=np.inf, rounds=100):
        n0 = self._alt_calls
        out = orig_alt(self, z, val, UB, rounds)
        calls.append((UB, self._alt_calls > n0, out[1], self._alt_share_now))
        return out

    monkeypatch.setattr(S.GopSearch, "_alternate", alternate)
    if rounds == "never_improve":
        monkeypatch.setattr(S.GopSearch, "_alternate_rounds", lambda self, z, val, rounds: (None, np.inf))
    res = pyo.SolverFactory("gop").solve(MODELS[name](), mode="gop", rel_gap=1e-6, time_limit=60)
    r = res.varopt_result
    assert r.status == "optimal", r.message
    full, low = S.GopSearch.alt_share, S.GopSearch.alt_share * S.GopSearch.alt_share_floor
    # the rule replayed from the incumbent values the calls were given and returned
    share, best, halved = full, np.inf, 0
    for UB, ran, value, got in calls:
        if UB < best:
            share, best = full, UB        # the incumbent improved since the last call
        if ran:
            if value < best:
                share, best = full, value
            else:
                halved += share > low
                share = max(0.5 * share, low)
        assert got == share, (UB, ran, value, got, share)
    assert sum(ran for _, ran, _, _ in calls) >= 1, calls
    if rounds == "never_improve" and name.startswith("bgmm"):
        assert halved >= 1, calls
    if name == "bgmm_point":
        # the optimum of the minimal data set (docs/gop.md §12: certified from 100/100 random starts)
        assert r.upper_bound == pytest.approx(68.62236947, rel=1e-6)
