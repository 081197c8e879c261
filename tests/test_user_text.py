"""User-visible text cites papers by authors and year, never a local file name or a machine path.

Scans what a user reads: README.md, docs/*.md, examples/, benchmarks/, and every string (docstrings, option docs,
error messages, CLI output) in varopt/. The patterns are the ones that leaked before: file names of the
local paper copies (``004_61f5....txt``), "seed 004"-style references to them, their index file, and
absolute paths of the development machine.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

LEAKS = re.compile(
    r"\b\d{3}_[0-9a-f]{16}\b"          # a local paper copy's file name
    r"|\bseeds? 00\d\b"                 # "seed 004": the local copy instead of the authors
    r"|\bseed(?:'s)? (?:eqs?\.|§|section|table|formulas?|paper)"   # "seed eq. (17)", "seed §3"
    r"|\bNOTES\.md\b"
    r"|(?<![\w.])/(?:work|tmp)/",       # absolute paths of the development machine
    re.IGNORECASE,
)


def _user_files():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").glob("*.md"))
    yield from sorted((ROOT / "examples").glob("*.py"))
    yield from sorted((ROOT / "benchmarks").glob("*.py"))   # their headers and tables are read too
    yield from sorted(p for p in (ROOT / "varopt").rglob("*.py") if "__pycache__" not in p.parts)


def test_the_pattern_catches_the_known_leaks():
    for bad in ("(seed `000_9d8fec931dcf5def.txt`)", "as used in seed 004 (", "NOTES.md's closed form",
                "PYTHONPATH=/work/main", "open('/tmp/x')",
                "(seed eqs. (3), (9))", "point mass (seed §3)", "The seed's formulas"):
        assert LEAKS.search(bad), bad
    for fine in ("seed=0", "seeds 0-9", "random seed 1000", "tests/test_gop.py", "x/tmp/", "seed (default 0): seed of the random", "seeded from HiGHS's answer"):
        assert not LEAKS.search(fine), fine


@pytest.mark.parametrize("path", list(_user_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_local_file_names_or_machine_paths(path):
    hits = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if LEAKS.search(line)]
    assert not hits, "cite the paper by authors and year instead:\n" + "\n".join(hits)


def test_public_estimators_have_their_own_docstrings():
    """Without one, help() showed scikit-learn's BaseEstimator example (an ``is_fitted_`` attribute varopt never
    sets) for BayesianPoissonRegression, and nothing for SparseIsing."""
    import varopt.estimators as est
    missing = [n for n in est.__all__ if not getattr(est, n).__doc__]
    assert not missing, f"estimators without a docstring: {missing}"
