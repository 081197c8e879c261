"""The complete ```python blocks of README.md and docs/*.md run as written.

A block is complete when every name it reads is bound in the block (imports, assignments, definitions) or is a
builtin; blocks that elide their data (``X``, ``y``, ``program``) are left to the reader. Each complete block is
executed in a fresh namespace, in this process (the imports are already paid for), its prints swallowed.
"""

import ast
import builtins
import contextlib
import io
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# blocks that run too long for the unit suite (the limit is 2 s per test on the shared machine)
SLOW = {"docs/sasmc.md:6": "sasmc on the 12 x 12 lattice at T = 0.1: ~4 s"}


def _blocks():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"```python\n(.*?)```", text, re.S):
            yield f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}", m.group(1)


def _unbound_names(source):
    tree = ast.parse(source)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


BLOCKS = list(_blocks())
COMPLETE = [(where, src) for where, src in BLOCKS if not _unbound_names(src)]


def test_the_blocks_are_found_and_the_complete_ones_recognised():
    assert len(BLOCKS) >= 12
    # the README's Pyomo and CVXPY examples and the energy example are complete; the highs.md block elides its data
    wheres = {w.split(":")[0] for w, _ in COMPLETE}
    assert {"README.md", "docs/energy.md", "docs/gop_bgmm.md", "docs/cmf.md"} <= wheres
    assert "docs/highs.md" not in wheres
    assert _unbound_names("import numpy as np\nx = np.ones(2)\nprint(x, y)") == {"y"}


@pytest.mark.parametrize("where,source", COMPLETE, ids=[w for w, _ in COMPLETE])
def test_complete_doc_block_runs(where, source):
    if where in SLOW:
        pytest.skip(SLOW[where])
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(source, where, "exec"), {"__name__": "__doc_snippet__"})
