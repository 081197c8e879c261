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


def test_the_examples_extra_installs_what_the_examples_import():
    """A fresh ``pip install -e '.[plot]'`` has no scikit-learn, which three examples import: the README points
    to the ``examples`` extra, so it must cover every third-party import of every script."""
    import ast
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = {_dist_name(r) for r in project["dependencies"] + project["optional-dependencies"]["examples"]}
    module_dist = {"sklearn": "scikit-learn", "pyomo": "pyomo", "cvxpy": "cvxpy", "numpy": "numpy", "scipy": "scipy",
                   "matplotlib": "matplotlib", "highspy": "highspy"}
    for name in EXAMPLES:
        tree = ast.parse((ROOT / "examples" / name).read_text())
        mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                 and n.level == 0}
        third = mods - set(sys.stdlib_module_names) - {"varopt"}
        unknown = third - set(module_dist)
        assert not unknown, f"{name} imports {sorted(unknown)}: add them to the 'examples' extra and this map"
        missing = {module_dist[m] for m in third} - installed
        assert not missing, f"{name} needs {sorted(missing)}, which pip install -e '.[examples]' does not install"


def _dist_name(requirement):
    import re
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def test_gop_demo_plot_without_matplotlib_stops_before_solving(tmp_path):
    """``--plot`` without matplotlib was a ModuleNotFoundError after the solves; now an argparse error at once."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoMatplotlib:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'matplotlib':\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, _NoMatplotlib())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "gop_demo.py"), "--plot", "b.png"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "--plot needs matplotlib" in out.stderr and "GOP" not in out.stdout
