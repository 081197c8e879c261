"""Where the test suite's time goes: per-file and per-test totals from pytest's JUnit XML.

Usage (from the repository root; the README's test command plus a report file)::

    python -m pytest -q -n 2 --junitxml=before.xml
    python benchmarks/suite_times.py before.xml                 # top files and tests
    python benchmarks/suite_times.py before.xml after.xml       # the two runs side by side

The times are each test's own duration (set-up + call + tear-down) as the worker measured it, summed:
with ``-n 2`` the sum is about twice the wall time, and under load every number is inflated by about
the same factor, so compare runs by their ratios (docs/architecture.md, "Test-suite time").
Tests are grouped by file (the ``test_*`` part of the JUnit class name).
"""
import argparse
import collections
import xml.etree.ElementTree as ET


def load(path):
    """{(file, test id): (seconds, outcome)} with outcome 'passed', 'failed', 'skipped' or 'xfailed'."""
    tests = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        cls, name = tc.get("classname", ""), tc.get("name", "")
        file = next((part for part in cls.split(".") if part.startswith("test_")), cls)
        outcome = "passed"
        for child in tc:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                # pytest writes xfailed tests as <skipped type="pytest.xfail">
                outcome = "xfailed" if "xfail" in (child.get("type", "") + child.get("message", "")) else "skipped"
        tests[(file, f"{cls}::{name}")] = (float(tc.get("time") or 0.0), outcome)
    return tests


def per_file(tests):
    """{file: (seconds, number of tests)}."""
    out = collections.defaultdict(lambda: [0.0, 0])
    for (file, _), (t, _) in tests.items():
        out[file][0] += t
        out[file][1] += 1
    return {f: tuple(v) for f, v in out.items()}


def summary(tests):
    """One line: the summed time and the outcome counts."""
    counts = collections.Counter(o for _, o in tests.values())
    total = sum(t for t, _ in tests.values())
    return f"{total:.0f} s summed over {len(tests)} tests; " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("xml", nargs="+", help="one JUnit XML file, or two (before, after)")
    ap.add_argument("--top", type=int, default=20, help="how many files and tests to list")
    a = ap.parse_args(argv)
    runs = [load(p) for p in a.xml[:2]]
    for path, tests in zip(a.xml, runs):
        print(f"{path}: {summary(tests)}")
    files = [per_file(t) for t in runs]
    print(f"\n--- top {a.top} files (seconds, tests)" + ("; after, after/before" if len(runs) == 2 else ""))
    for f, (t, n) in sorted(files[0].items(), key=lambda kv: -kv[1][0])[:a.top]:
        line = f"{t:8.1f} {n:5d}  {f}"
        if len(runs) == 2:
            t2, n2 = files[1].get(f, (0.0, 0))
            line = f"{t:8.1f} {n:5d} | {t2:8.1f} {n2:5d} {t2 / t if t else float('nan'):6.2f}  {f}"
        print(line)
    print(f"\n--- top {a.top} tests")
    for (_, k), (t, o) in sorted(runs[0].items(), key=lambda kv: -kv[1][0])[:a.top]:
        after = f" | {runs[1][(_, k)][0]:7.1f}" if len(runs) == 2 and (_, k) in runs[1] else ""
        print(f"{t:7.1f}{after}  {k}" + ("" if o == "passed" else f"  ({o})"))
    if len(runs) == 2:
        gone = sorted(k for (_, k) in runs[0].keys() - runs[1].keys())
        new = sorted(k for (_, k) in runs[1].keys() - runs[0].keys())
        print(f"\nonly before: {len(gone)}; only after: {len(new)}")
        for k in gone[:50]:
            print("  -", k)
        for k in new[:50]:
            print("  +", k)


if __name__ == "__main__":
    main()
