"""Held-out sweep of klprox on user-written models (docs/klprox.md section 6e): each model of models.py against the
independent full-Gaussian VI of ref.py (or the exact conjugate posterior).

    cd benchmarks/klprox_heldout && OPENBLAS_NUM_THREADS=1 PYTHONPATH=../..:. python run.py [name prefixes ...]

Slow: the references take 0.1 s to 3 min per model (the softmax ones are tensor rules; SMNODES sets their nodes).
"""
import sys, time, warnings
import numpy as np
from models import MODELS
from ref import SoftmaxModel

def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(1e-300, np.max(np.abs(b))))

sel = sys.argv[1:] or list(MODELS)
for name in [n for n in MODELS if any(n.startswith(s) for s in sel)]:
    try:
        with warnings.catch_warnings(record=True) as wl:
            warnings.simplefilter("always")
            solve, ref = MODELS[name]()
            out = solve()
        if isinstance(ref, tuple):
            kind, X, Y, s2 = ref
            ref = SoftmaxModel(X, Y, s2, free=[1, 2] if kind == "softmax_ref0" else None, nodes=int(__import__("os").environ.get("SMNODES", 24)))
        t = time.perf_counter()
        if hasattr(ref, "exact"):
            mr, Vr = ref.exact
            fr = ref.nelbo(mr, Vr)
        else:
            mr, Vr, fr = ref.fit(m0=None)
        tr = time.perf_counter() - t
        f_at = ref.nelbo(out["m"], out["V"], adaptive=not isinstance(ref, SoftmaxModel) and ref.D < 40)
        rm, rc = ref.residual(out["m"], out["V"])
        rrm, rrc = ref.residual(mr, Vr)
        print(f"{name:42s} {out['status']:10s} t={out['time']:.3f}s ref={tr:.1f}s | mean {rel(out['m'], mr):.1e} cov {rel(out['V'], Vr):.1e} "
              f"nelbo {(out['nelbo']-fr)/abs(fr):+.1e} reeval {(out['nelbo']-f_at)/abs(f_at):+.1e} loaded {np.max(np.abs(out['loaded']-out['m'])):.0e} "
              f"res(solver q) {rm:.1e}/{rc:.1e} res(ref) {rrm:.1e}/{rrc:.1e} nelbo={out['nelbo']:.10g} pval-F(m) {out['pvalue']-ref.F(out['m']) if not isinstance(ref, SoftmaxModel) else 0:+.1e} warn={[str(w.message)[:60] for w in wl]}", flush=True)
    except Exception as e:
        print(f"{name:42s} EXC {type(e).__name__}: {str(e)[:300]}", flush=True)
