"""The import graph points one way: model -> compiled program -> solver -> result -> model.

Nothing under the solvers, oracles, program, core or LP/QP packages (nor the registry, options,
result and errors modules) imports Pyomo, CVXPY or a front-end; the registry knows solvers only.
Checked on the source (every import statement, including those inside functions)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "varopt"
CORE_PACKAGES = ("solvers", "oracles", "program", "core", "lpqp")
CORE_MODULES = ("registry.py", "options.py", "result.py", "errors.py", "highs.py")
FORBIDDEN = ("pyomo", "cvxpy", "varopt.frontends")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, module: str = None):
    """Absolute names of every module ``path`` (module ``module``) imports, relative imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = (module or _module_name(path)).split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out.append((mod, node.lineno))
            out += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
    return out


def core_files():
    files = [ROOT / m for m in CORE_MODULES if (ROOT / m).exists()]
    for pkg in CORE_PACKAGES:
        if (ROOT / pkg).is_dir():
            files += sorted((ROOT / pkg).rglob("*.py"))
    return files


def test_core_packages_exist():
    names = {p.name for p in ROOT.iterdir()}
    assert {"solvers", "oracles", "program", "core"} <= names


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_front_end_imports(path):
    bad = [(m, line) for m, line in imports_of(path)
           if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert not bad, f"{path.relative_to(ROOT.parent)} imports {bad}"


def test_the_checker_sees_relative_imports(tmp_path):
    # the check must be able to fail: a relative import of the front-ends is resolved and caught
    fake = tmp_path / "probe.py"
    fake.write_text("def f():\n    from ...frontends import compile_model\n")
    assert ("varopt.frontends", 2) in imports_of(fake, "varopt.solvers.ipsa.probe")


@pytest.mark.parametrize("order", ["varopt first", "libraries first", "solver module first", "one library each side"])
def test_registration_works_in_either_import_order(order):
    """``import varopt`` registers every solver with Pyomo and CVXPY whatever was imported before."""
    import subprocess
    import sys
    imports = {"varopt first": "import varopt\nimport cvxpy as cp\nimport pyomo.environ as pyo\n",
               "libraries first": "import cvxpy as cp\nimport pyomo.environ as pyo\nimport varopt\n",
               "solver module first": "import varopt.solvers.majorize\nimport cvxpy as cp\nimport pyomo.environ as pyo\n",
               "one library each side": "import pyomo.environ as pyo\nimport varopt\nimport cvxpy as cp\n"}
    code = imports[order] + (
        "names = varopt.registered_solvers()\n"
        "assert len(names) >= 8, names\n"
        "assert all(pyo.SolverFactory(n).available() for n in names)\n"
        "assert all(n in cp.Problem.REGISTERED_SOLVE_METHODS for n in names)\n"
        "x = cp.Variable(2)\n"
        "p = cp.Problem(cp.Minimize(cp.sum_squares(x - 1)), [x >= -3, x <= 3])\n"
        "p.solve(method='majorize')\n"
        "assert abs(p.value) < 1e-8, p.value\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_import_varopt_loads_neither_pyomo_nor_cvxpy():
    """``python -X importtime -c "import varopt"`` lists no Pyomo or CVXPY module (each costs ~1 s)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import varopt"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    mods = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if "|" in line]
    assert mods and not [m for m in mods if m.split(".")[0] in ("pyomo", "cvxpy")]
