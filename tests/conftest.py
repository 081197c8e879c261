"""Test configuration: make tests/ importable and register the test-only solver plugin."""
import os
import sys
from pathlib import Path

# Under pytest-xdist (the README's `-n 2`) every worker is a process of its own: one BLAS thread each, so two
# workers on two cores do not run four threads (set before numpy is first imported, below)
if "PYTEST_XDIST_WORKER" in os.environ:
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

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
_hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "derandomized"))

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


# --- numba kernels compiled in the background (tests/numba_warm.py) -------------------------------------------
_WARM = {}


def pytest_collection_finish(session):
    """Start tests/numba_warm.py when the session runs ipsa's kernels (files named *ipsa*, *l1*, *estimators*)
    and numba's cache may be cold; not in an xdist worker, not when VAROPT_TEST_NO_NUMBA_WARM is set."""
    import importlib.util
    import os
    import re
    import subprocess
    import tempfile

    from numba_warm import DISABLE

    if (session.config.option.collectonly or os.environ.get(DISABLE) or os.environ.get("PYTEST_XDIST_WORKER")
            or importlib.util.find_spec("numba") is None):
        return
    if not any(re.search(r"ipsa|l1|estimators", item.path.name) for item in session.items):
        return
    log = tempfile.TemporaryFile()
    _WARM["log"] = log
    _WARM["proc"] = subprocess.Popen([sys.executable, str(HERE / "numba_warm.py")], stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def pytest_sessionfinish(session):
    """Stop the warm-up if it still runs (a test compiles what it misses)."""
    proc = _WARM.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
        _WARM["killed"] = True


def pytest_terminal_summary(terminalreporter):
    """Say so when the warm-up failed (the kernels were then compiled in the test process)."""
    proc = _WARM.pop("proc", None)
    if proc is None:
        return
    log = _WARM.pop("log")
    if not _WARM.pop("killed", False) and proc.returncode != 0:
        log.seek(0)
        tail = log.read().decode(errors="replace").strip().splitlines()[-5:]
        terminalreporter.write_line(f"numba warm-up (tests/numba_warm.py) failed with exit code {proc.returncode}; "
                                    "the kernels were compiled in the test process: " + " | ".join(tail))
    log.close()
