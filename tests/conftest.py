"""Test configuration: make tests/ importable and register the test-only solver plugin."""
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# benchmarks/ holds the data loaders and independent references (SCIP, dense multistart) the tests use
sys.path.insert(1, str(HERE.parent / "benchmarks"))

import plugin_solver  # noqa: E402,F401  (registers 'vo_test_scipy' through the public registry)

# hypothesis draws the same examples on every run ('derandomized', the default here), so a red suite is
# reproducible and CI does not turn red on an example no earlier run drew; HYPOTHESIS_PROFILE=explore draws new
# examples (and replays the failures saved in .hypothesis/) when hunting for counterexamples
from hypothesis import settings as _hyp_settings  # noqa: E402

_hyp_settings.register_profile("derandomized", derandomize=True)
_hyp_settings.register_profile("explore", derandomize=False)
_hyp_settings.load_profile(__import__("os").environ.get("HYPOTHESIS_PROFILE", "derandomized"))

#: ../shared/data relative to the repository root
DATA = (HERE.parent / ".." / "shared" / "data").resolve()


def data_dir(name: str) -> Path:
    """Path of a shared data set, or skip the test with the reason when it is absent."""
    p = DATA / name
    if not p.is_dir():
        pytest.skip(f"shared data set {name!r} not found at {p} (the ../shared/data folder is absent)")
    return p


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True, scope="session")
def _gop_loaded_objective_evaluates():
    """Every Pyomo gop solve in the tests: the loaded point evaluates to the reported objective
    (tests/gop_checks.py)."""
    try:
        from varopt.frontends.pyomo_plugin import VaroptPyomoSolver
    except ImportError:  # pragma: no cover - Pyomo front-end absent
        yield
        return
    from gop_checks import wrap_solve
    mp = pytest.MonkeyPatch()
    mp.setattr(VaroptPyomoSolver, "solve", wrap_solve(VaroptPyomoSolver.solve))
    yield
    mp.undo()
