"""Every script in examples/ runs to the end in a fresh interpreter (each one checks its own results against an
independent reference: Clarabel, exact enumeration, scikit-learn's Lasso, the other front end, and exits
non-zero when they disagree), ``gop_demo.py`` (the README's first command) included."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))


def test_examples_are_collected():
    assert len(EXAMPLES) >= 5 and "gop_demo.py" in EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / name)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{name} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    assert out.stdout.strip(), f"{name} printed nothing"
