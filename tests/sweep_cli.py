"""Command line of the sweep case modules (``python tests/cvxpy_atom_cases.py [methods] [labels...]``): one line per
case with each method's outcome, time and detail against the case's reference."""
import sys
import time


def main(cases, reference, run):
    import varopt  # noqa: F401  (registers the methods)
    methods = sys.argv[1].split(",") if len(sys.argv) > 1 else ["gop", "majorize"]
    for label in sys.argv[2:] or list(cases):
        try:
            ref = reference(label)
        except Exception as exc:
            ref = f"ref failed: {exc}"
        cells = []
        for meth in methods:
            t0 = time.perf_counter()
            outc, det = run(label, meth, ref if not isinstance(ref, str) else None)
            cells.append(f"{meth}={outc} ({time.perf_counter() - t0:.2f}s) {det[:220]}")
        print(label, "|", " | ".join(cells), flush=True)
