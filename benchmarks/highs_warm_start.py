"""Warm re-solve vs cold build+solve with the HiGHS layer (varopt/highs.py).

For sparse random LPs  min c'x  s.t.  A x <= b,  0 <= x <= 10  (feasible around x0,
bounded by the box), each repetition perturbs the problem and times

  cold : HighsModel(modified data).solve()      (build + presolve + simplex from scratch)
  warm : model.set_cost / set_col_bounds / set_row_bounds / add_rows + model.solve()
         on the model that holds the previous optimal basis,

and checks both give the same optimal value (relative 1e-9). Prints median times, the
ratio cold/warm and the median simplex iterations. A small convex QP row is included
(HiGHS's active-set QP, plus the layer's polish/verification).

Usage: python benchmarks/highs_warm_start.py [--reps 5] [--sizes 200x400,1000x2000]
Timings on a shared machine are noisy; medians over --reps repetitions.
"""
import argparse
import time

import numpy as np
import scipy.sparse as sp

from varopt.highs import HighsModel


def make_lp(m, n, seed):
    rng = np.random.default_rng(seed)
    nnz_per_row = min(n, 8)
    rows = np.repeat(np.arange(m), nnz_per_row)
    cols = np.concatenate([rng.choice(n, nnz_per_row, replace=False) for _ in range(m)])
    A = sp.csr_matrix((rng.normal(size=rows.size), (rows, cols)), shape=(m, n))
    x0 = rng.uniform(0, 10, n)
    b = A @ x0 + rng.exponential(1.0, m)
    c = rng.normal(size=n)
    return dict(c=c, A=A, row_lo=np.full(m, -np.inf), row_hi=b, lb=np.zeros(n), ub=np.full(n, 10.0)), x0


def perturb(kind, d, rng, x0):
    """Return (modified data, function applying the same change to a model)."""
    d = dict(d)
    n = d["c"].size
    m = d["A"].shape[0]
    if kind == "cost":
        c = d["c"] + 0.1 * rng.normal(size=n)
        d["c"] = c
        return d, lambda mdl: mdl.set_cost(c)
    if kind == "col bounds":
        idx = rng.choice(n, max(1, n // 20), replace=False)
        ub = d["ub"].copy()
        ub[idx] = np.maximum(x0[idx], rng.uniform(2, 8, idx.size))
        d["ub"] = ub
        return d, lambda mdl: mdl.set_col_bounds(idx, d["lb"][idx], ub[idx])
    if kind == "row bounds":
        idx = rng.choice(m, max(1, m // 20), replace=False)
        hi = d["row_hi"].copy()
        # move the bounds of 5% of the rows, keeping x0 feasible
        hi[idx] = (d["A"][idx] @ x0) + rng.uniform(0.01, 2.0, idx.size)
        d["row_hi"] = hi
        return d, lambda mdl: mdl.set_row_bounds(idx, d["row_lo"][idx], hi[idx])
    if kind == "add 5 rows":
        G = sp.random(5, n, density=min(1.0, 20 / n), random_state=int(rng.integers(1 << 30)), format="csr")
        hi = G @ x0 + rng.uniform(0.01, 1.0, 5)
        d["A"] = sp.vstack([d["A"], G], format="csr")
        d["row_lo"] = np.concatenate([d["row_lo"], np.full(5, -np.inf)])
        d["row_hi"] = np.concatenate([d["row_hi"], hi])
        return d, lambda mdl: mdl.add_rows(G, np.full(5, -np.inf), hi)
    raise ValueError(kind)


def bench(d, x0, kind, reps, seed):
    rng = np.random.default_rng(seed)
    t_cold, t_warm, it_cold, it_warm = [], [], [], []
    mdl = HighsModel(**d)
    base = mdl.solve()
    assert base.status == "optimal"
    cur = d
    for _ in range(reps):
        cur, apply = perturb(kind, cur, rng, x0)
        t0 = time.perf_counter()
        cold = HighsModel(**cur).solve()
        t_cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        apply(mdl)
        warm = mdl.solve()
        t_warm.append(time.perf_counter() - t0)
        assert cold.status == warm.status == "optimal", (cold.status, warm.status)
        assert abs(cold.objective - warm.objective) <= 1e-9 * max(1.0, abs(cold.objective)), \
            (cold.objective, warm.objective)
        it_cold.append(cold.iterations)
        it_warm.append(warm.iterations)
    return np.median(t_cold), np.median(t_warm), np.median(it_cold), np.median(it_warm)


def make_qp(m, n, seed):
    d, x0 = make_lp(m, n, seed)
    B = sp.random(n // 2, n, density=min(1.0, 5 / n), random_state=seed, format="csr")
    d["Q"] = (B.T @ B + 1e-2 * sp.identity(n)).tocsr()
    return d, x0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default="200x400,1000x2000")
    ap.add_argument("--qp-size", default="100x200", help="m x n of the QP row ('' to skip)")
    args = ap.parse_args()
    print(f"{'problem':<18}{'change':<13}{'cold [ms]':>11}{'warm [ms]':>11}{'cold/warm':>11}"
          f"{'iters cold':>12}{'iters warm':>12}")
    rows = []
    for s in args.sizes.split(","):
        m, n = map(int, s.split("x"))
        d, x0 = make_lp(m, n, seed=m + n)
        for kind in ("cost", "col bounds", "row bounds", "add 5 rows"):
            rows.append((f"LP {m}x{n}", kind) + bench(d, x0, kind, args.reps, seed=1))
    if args.qp_size:
        m, n = map(int, args.qp_size.split("x"))
        d, x0 = make_qp(m, n, seed=3)
        for kind in ("cost", "col bounds"):
            rows.append((f"QP {m}x{n}", kind) + bench(d, x0, kind, args.reps, seed=2))
    for name, kind, tc, tw, ic, iw in rows:
        print(f"{name:<18}{kind:<13}{1e3 * tc:>11.2f}{1e3 * tw:>11.2f}{tc / tw:>11.1f}{ic:>12.0f}{iw:>12.0f}")


if __name__ == "__main__":
    main()
