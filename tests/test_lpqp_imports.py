"""The LP/QP code and the BLAS-thread helper import no modelling front-end."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "varopt"
FORBIDDEN = ("pyomo", "cvxpy", "varopt.frontends")


def _imports(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                pkg = path.relative_to(ROOT.parent).with_suffix("").parts[:-node.level]
                yield ".".join(pkg + ((node.module,) if node.module else ()))
            else:
                yield node.module


def _modules():
    files = [ROOT / "highs.py", ROOT / "core" / "threads.py"]
    files += sorted((ROOT / "lpqp").glob("*.py")) if (ROOT / "lpqp").is_dir() else []
    return [f for f in files if f.exists()]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_frontend_imports(path):
    bad = [m for m in _imports(path)
           if any(m == f or m.startswith(f + ".") or m.endswith(".frontends") for f in FORBIDDEN)]
    assert not bad, f"{path.name} imports {bad}"


def test_blas_threads_none_and_zero_are_noops():
    from varopt.core.threads import blas_threads
    with blas_threads(None), blas_threads(0), blas_threads(1):
        pass
    with pytest.raises(ValueError, match="n must be"):
        blas_threads(-1)
