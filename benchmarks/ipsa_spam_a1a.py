"""On-line spam-filter-style run (thesis §2.5.8, Table 2.1) on a1a (UCI Adult, LIBSVM).

The examples of ``a1a`` then ``a1a.t`` (32,561 in all, 123 binary features) are read lazily
from disk line by line and streamed once, in order, into IPSA through
``varopt.solvers.ipsa.StreamOracle``. L1-regularised logistic regression in the split form
(2.61): variables ``w+, w- >= 0`` and a free intercept; the program holds the bounds and the
penalty ``alpha 1^T (w+ + w-)`` (added exactly, ``oracle_adds_objective=True``); the stream gives
the per-example gradient (2.75) and Hessian diagonal ``p(1-p) a_ij^2`` (running diagonal, §2.5.8).
Before each update the current model scores the example (on-line evaluation); positives
("spam" = income > 50K, label +1) are flagged when ``p >= threshold`` (0.98 as in Table 2.1,
and 0.5). Steps ``a_i = 1/(k0 + i)`` with ``k0 = 1`` as in the thesis (and k0 = 50).
alpha = lambda / N with lambda = 1.5 (the thesis' value).

Anchor: scikit-learn ``SGDClassifier(loss='log_loss', penalty='l1')`` run on-line in the same
order (``predict_proba`` then ``partial_fit`` on each example).
Usage: python benchmarks/ipsa_spam_a1a.py
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

import varopt
import varopt.solvers.ipsa  # noqa: F401
from varopt.program import Expression, Program
from varopt.solvers.ipsa import StreamOracle

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "a1a"
M = 123


def stream_examples(files):
    """Yield (feature indices (0-based), values, label +-1) one example at a time, read from disk."""
    for f in files:
        with open(f) as fh:
            for line in fh:
                tok = line.split()
                if not tok:
                    continue
                idx = np.array([int(t.split(":")[0]) - 1 for t in tok[1:]], dtype=np.int64)
                val = np.array([float(t.split(":")[1]) for t in tok[1:]])
                yield idx, val, float(tok[0])


class OnlineLogistic:
    """Per-example gradient / Hessian diagonal of log(1 + exp(-y (a^T w + b))) in (w+, w-, b)."""

    def __init__(self):
        self.scores = []
        self.labels = []
        self._last = None

    def _p(self, x, ex):
        idx, val, _ = ex
        t = val @ (x[idx] - x[M + idx]) + x[2 * M]
        return 1.0 / (1.0 + np.exp(-t))

    def grad(self, x, ex):
        idx, val, y = ex
        p = self._p(x, ex)
        if ex is not self._last:  # first evaluation on this example = the on-line prediction
            self.scores.append(p)
            self.labels.append(y)
            self._last = ex
        r = p - (1.0 if y > 0 else 0.0)
        g = np.zeros(2 * M + 1)
        g[idx] = r * val
        g[M + idx] = -r * val
        g[2 * M] = r
        return g

    def hess_diag(self, x, ex):
        idx, val, _ = ex
        p = self._p(x, ex)
        h = np.zeros(2 * M + 1)
        h[idx] = p * (1 - p) * val * val
        h[M + idx] = h[idx]
        h[2 * M] = p * (1 - p)
        return h


def contingency(scores, labels, thr):
    pred = np.asarray(scores) >= thr
    true = np.asarray(labels) > 0
    t = np.array([[np.sum(~pred & ~true), np.sum(~pred & true)], [np.sum(pred & ~true), np.sum(pred & true)]])
    return t


def print_table(name, t):
    N = t.sum()
    print(f"  {name}")
    print(f"  {'':>18s} {'true not spam':>16s} {'true spam':>16s}")
    for r, lab in enumerate(("pred. not spam", "pred. spam")):
        print(f"  {lab:>18s} " + " ".join(f"{t[r, c]:>7d} ({100 * t[r, c] / N:5.2f}%)" for c in range(2)))
    print(f"  mistakes {t[0, 1] + t[1, 0]} ({100 * (t[0, 1] + t[1, 0]) / N:.2f}%)")


def run_ipsa(files, N, lam=1.5, k0=1.0, hessian="diagonal"):
    alpha = lam / N
    names = [f"wp[{j}]" for j in range(M)] + [f"wm[{j}]" for j in range(M)] + ["b"]
    lb = np.r_[np.zeros(2 * M), -np.inf]
    pen = np.r_[np.full(2 * M, alpha), 0.0]
    P = Program(names, lb, np.full(2 * M + 1, np.inf), Expression(2 * M + 1, linear=pen))
    ol = OnlineLogistic()
    orc = StreamOracle(stream_examples(files), ol.grad, ol.hess_diag, n_total=N)
    t = time.perf_counter()
    res = varopt.get_solver("ipsa").solve(P, oracle=orc, oracle_adds_objective=True, k0=k0, hessian=hessian,
                                          history_objective=False)
    dt = time.perf_counter() - t
    w = res.x[:M] - res.x[M:2 * M]
    return ol, res, dt, w


def run_sgd(files, alpha):
    from sklearn.linear_model import SGDClassifier

    clf = SGDClassifier(loss="log_loss", penalty="l1", alpha=alpha, random_state=0)
    scores, labels = [], []
    t = time.perf_counter()
    first = True
    for idx, val, y in stream_examples(files):
        a = np.zeros((1, M))
        a[0, idx] = val
        scores.append(0.5 if first else float(clf.predict_proba(a)[0, 1]))
        labels.append(y)
        clf.partial_fit(a, [y], classes=[-1.0, 1.0])
        first = False
    return scores, labels, time.perf_counter() - t, clf


def main():
    warnings.simplefilter("ignore")
    files = [DATA / "a1a", DATA / "a1a.t"]
    if not all(f.exists() for f in files):
        print(f"a1a not found under {DATA}: skipped")
        return
    N = sum(1 for _ in stream_examples(files))
    print(f"on-line stream: {N} examples (a1a + a1a.t), {M} features, in file order; lambda = 1.5, alpha = lambda/N")
    results = {}
    for k0, hess in ((1.0, "diagonal"), (50.0, "diagonal"), (1.0, "identity")):
        ol, res, dt, w = run_ipsa(files, N, k0=k0, hessian=hess)
        results[(k0, hess)] = (ol, dt, w)
        print(f"\nIPSA k0={k0:g} hessian={hess}: {res.iterations} steps ({res.message}), {dt:.1f} s "
              f"({N / dt:.0f} examples/s incl. parsing), {np.sum(np.abs(w) < 1e-3)} of {M} |w_j| < 1e-3")
        for thr in (0.98, 0.5):
            print_table(f"threshold p >= {thr}", contingency(ol.scores, ol.labels, thr))
    s, lab, dt, clf = run_sgd(files, 1.5 / N)
    print(f"\nscikit-learn SGDClassifier(log_loss, l1) on-line (predict_proba, partial_fit): {dt:.1f} s "
          f"({N / dt:.0f} examples/s), {np.sum(clf.coef_ == 0)} of {M} w_j = 0")
    for thr in (0.98, 0.5):
        print_table(f"threshold p >= {thr}", contingency(s, lab, thr))
    print("\nsummary (on-line mistakes, threshold 0.5 / 0.98):")
    for (k0, hess), (ol, dt, w) in results.items():
        m5 = contingency(ol.scores, ol.labels, 0.5)
        m98 = contingency(ol.scores, ol.labels, 0.98)
        print(f"  IPSA k0={k0:g} {hess:<9s} {m5[0, 1] + m5[1, 0]:6d} / {m98[0, 1] + m98[1, 0]:6d}")
    m5, m98 = contingency(s, lab, 0.5), contingency(s, lab, 0.98)
    print(f"  sklearn SGD (l1)       {m5[0, 1] + m5[1, 0]:6d} / {m98[0, 1] + m98[1, 0]:6d}")


if __name__ == "__main__":
    main()
