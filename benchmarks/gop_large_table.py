"""Table of ``gop_time_limits.py ... large`` runs (before / after side by side) with the references of
``gop_large_references.py``: wall time of the whole solve call, overrun = wall - limit, the solver's own clock,
status, whether the loaded point is feasible by the user's own evaluation (violation <= 1e-6) and whether the
reported bound is on the right side of SCIP's best value (lower <= value when minimising, upper >= value when
maximising; '-' without a SCIP value).

    python benchmarks/gop_large_table.py BEFORE.jsonl AFTER.jsonl REFS.jsonl
"""
import json
import sys


def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            out[(d["name"], float(d["tl"]))] = d
    return out


def cell(d, ref):
    if d is None:
        return "-", "-"
    wall = d.get("wall")
    st = d["status"][:12]
    feas = "no point" if d.get("viol") is None else ("feasible" if d["viol"] <= 1e-6 else f"viol {d['viol']:.1e}")
    ok = "-"
    if ref is not None and ref.get("value") is not None:
        v = ref["value"]
        if ref.get("maximize"):
            ok = "ok" if d.get("upper") is not None and d["upper"] >= v - 1e-6 * max(1, abs(v)) else "WRONG"
        else:
            ok = "ok" if d.get("lower") is not None and d["lower"] <= v + 1e-6 * max(1, abs(v)) else "WRONG"
    inc = d.get("user_obj")
    return (f"{wall:.2f} ({wall - d['tl']:+.2f}), clock {d['run']:.2f}" if wall is not None and d.get("run") is not None
            else "-"), f"{st}, {feas}, bound {ok}, inc {inc:.6g}" if inc is not None else f"{st}, {feas}, bound {ok}"


def main():
    before, after = load(sys.argv[1]), load(sys.argv[2])
    refs = {}
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as f:
            for line in f:
                d = json.loads(line)
                refs[d["name"]] = d
    print("| model | limit s | before: wall (overrun), clock | before: status, point, bound | after: wall (overrun), "
          "clock | after: status, point, bound | load |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(set(before) | set(after), key=lambda k: (k[1], k[0])):
        b, a = before.get(key), after.get(key)
        ref = refs.get(key[0])
        bw, bs = cell(b, ref)
        aw, as_ = cell(a, ref)
        load_ = "/".join(f"{x['load']:.1f}" for x in (b, a) if x is not None)
        print(f"| {key[0]} | {key[1]:g} | {bw} | {bs} | {aw} | {as_} | {load_} |")
    if refs:
        print()
        print("| model | SCIP reference (model) | status | value | bound | time s |")
        print("|---|---|---|---|---|---|")
        for nm, d in refs.items():
            print(f"| {nm} | {d['reference']} | {d['status']} | {d['value']} | "
                  f"{d['lower'] if not d.get('maximize') else d['upper']} | {d['time']:.1f} |")


if __name__ == "__main__":
    main()
