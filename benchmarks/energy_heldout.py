"""Held-out review of the energy solvers (docs/energy.md, "Held-out review (2026-11-26)"): user-written models in
Pyomo and CVXPY, each solved by every energy method and compared with an enumeration of the *user's own function*
on 0/1 integers (no varopt code in the reference). Prints one markdown row per case and front-end: the error of
log Z per method (`exact`: max(|Δ log Z|, max |Δ marginal|); `meanfield`: bound − log Z, must be ≤ 0; `lbp`:
Bethe − log Z; `trw`: certified upper − log Z, must be ≥ 0, "n.c." when not converged (no bound); `ais`, `sasmc`,
`cmf`: error/SE, "bnd" when cmf reports its certified lower bound without SE (error then ≤ 0); and the
largest marginal error of cmf), and the total time.

Run: ``OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/energy_heldout.py [case ...]``
"""
import itertools
import math
import sys
import time

import cvxpy as cp
import numpy as np
import pyomo.environ as pyo

import varopt  # noqa: F401  (registers the solvers)


def brute(f, n, sense="min", beta=1.0, fixed=None):
    """(ln Z, {i: P(x_i = 1)}) evaluating ``f`` on every 0/1 list (``fixed`` entries held)."""
    fixed = fixed or {}
    free = [i for i in range(n) if i not in fixed]
    logw, states = [], []
    for bits in itertools.product((0, 1), repeat=len(free)):
        x = [0] * n
        for k, v in fixed.items():
            x[k] = v
        for k, b in zip(free, bits):
            x[k] = b
        logw.append((-beta if sense == "min" else beta) * float(f(x)))
        states.append(list(x))
    logw, S = np.array(logw), np.array(states)
    m = logw.max()
    p = np.exp(logw - m)
    lz = m + math.log(p.sum())
    p /= p.sum()
    return lz, {i: float(p @ S[:, i]) for i in free}


def spins(x, n):
    return [2 * x[i] - 1 for i in range(n)]


def make_ising(n, h, edges):
    """f(x) = -(sum h_i s_i + sum J s_i s_j), the docs' form."""
    def f(x):
        s = spins(x, n)
        e = 0
        for i in range(n):
            if h[i] != 0:
                e = e + h[i] * s[i]
        for (i, j, J) in edges:
            e = e + J * s[i] * s[j]
        return -e
    return f


rng = np.random.default_rng(2026)
CASES = {}

# 1: docs 4-node example
CASES["docs4"] = dict(n=4, f=lambda x: -((0.4*(2*x[0]-1) + 0.3*(2*x[1]-1) - 0.5*(2*x[2]-1) - 0.2*(2*x[3]-1)
                      + 0.5*(2*x[0]-1)*(2*x[2]-1) + 0.5*(2*x[1]-1)*(2*x[3]-1) + 0.5*(2*x[2]-1)*(2*x[3]-1)
                      - 0.5*(2*x[0]-1)*(2*x[1]-1))), tree=False)
# 2: chain of 7, mixed strong couplings
CASES["chain7_strong"] = dict(n=7, f=make_ising(7, [0.3, -1.2, 0, 0.8, -0.4, 2.5, 0],
                               [(0, 1, 2.5), (1, 2, -3.0), (2, 3, 0.7), (3, 4, -2.2), (4, 5, 4.0), (5, 6, -0.1)]), tree=True)
# 3: tree in bit form (x*x products), strong
def tree_bits(x):
    return (1.5 * x[0] - 2 * x[1] + 0.5 * x[3] - 3 * x[6] + 4 * x[0] * x[1] - 5 * x[0] * x[2]
            + 2.5 * x[1] * x[3] + x[4] * x[1] - 6 * x[2] * x[5] + 3 * x[2] * x[6] + 0.7 * x[7] * x[6] + 12.0)
CASES["tree8_bits"] = dict(n=8, f=tree_bits, tree=True)
# 4: frustrated cycle 5
CASES["cycle5_frustrated"] = dict(n=5, f=make_ising(5, [0.1, 0, -0.2, 0, 0.3],
                                  [(0, 1, 2), (1, 2, 2), (2, 3, 2), (3, 4, 2), (4, 0, -2)]), tree=False)
# 5: complete K7, random +-, strong
e7 = [(i, j, float(rng.choice([-1, 1]) * rng.uniform(0.5, 2.5))) for i in range(7) for j in range(i + 1, 7)]
CASES["K7_glass"] = dict(n=7, f=make_ising(7, list(rng.normal(0, 1, 7)), e7), tree=False)
# 6: isolated nodes: x[4] unused, x[3] field only
CASES["isolated"] = dict(n=5, f=lambda x: -(2*x[0]-1)*(2*x[1]-1)*2.0 + 0.7*x[3] - 0.3*x[2], tree=True)
# 7: maximize (sense), 3x3 grid
g = []
for r in range(3):
    for c in range(3):
        k = 3 * r + c
        if c < 2: g.append((k, k + 1, float(rng.normal(0, 1.5))))
        if r < 2: g.append((k, k + 3, float(rng.normal(0, 1.5))))
h9 = list(rng.normal(0, 0.8, 9))
CASES["grid3x3_max"] = dict(n=9, f=lambda x: -make_ising(9, h9, g)(x), sense="max", tree=False)
# 8: Potts 3 nodes x 3 states via one-hot with quadratic penalty (user-written)
def potts(x):
    X = [[x[3 * a + k] for k in range(3)] for a in range(3)]
    e = 0
    for (a, b, J) in [(0, 1, 1.5), (1, 2, -2.0), (0, 2, 0.8)]:
        for k in range(3):
            e = e - J * X[a][k] * X[b][k]
    for a in range(3):
        e = e + 1.2 * X[a][2] - 0.3 * X[a][0]
        e = e + 8.0 * (X[a][0] + X[a][1] + X[a][2] - 1) ** 2
    return e
CASES["potts3_penalty"] = dict(n=9, f=potts, tree=False)
# 9: low temperature (beta=5), ferromagnet 4-cycle zero field (two modes)
CASES["ferro4_beta5"] = dict(n=4, f=make_ising(4, [0, 0, 0, 0], [(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 0, 1)]),
                             beta=5.0, tree=False)
# 10: huge coupling (|J| = 30) on a tree
CASES["tree_J30"] = dict(n=4, f=make_ising(4, [0.5, 0, -0.5, 0], [(0, 1, 30), (1, 2, -30), (1, 3, 0.2)]), tree=True)
# 11: fixed variable (x[2] fixed to 1) on a 5-cycle
CASES["fixed_var"] = dict(n=5, f=make_ising(5, [0.2, -0.1, 0.4, 0, 1.0], [(0, 1, 1), (1, 2, -1.5), (2, 3, 1), (3, 4, 0.5), (4, 0, -1)]),
                          fixed={2: 1}, tree=False)
# 12: 12-spin random sparse graph
e12 = []
for i in range(12):
    for j in range(i + 1, 12):
        if rng.random() < 0.25:
            e12.append((i, j, float(rng.normal(0, 1.2))))
CASES["rand12"] = dict(n=12, f=make_ising(12, list(rng.normal(0, 0.5, 12)), e12), tree=False)
# 13: 2 components: a triangle and a chain, plus squares of affine (x0 + x1 - 1)**2
CASES["components_square"] = dict(n=6, f=lambda x: (x[0] + x[1] - 1) ** 2 * 2 + 1.5 * x[1] * x[2] - 2 * x[0] * x[2]
                                 + (x[3] - x[4]) ** 2 - x[4] * x[5] * 3 + 0.2 * x[5], tree=False)


SOLVERS = [("exact", {}), ("meanfield", {}), ("lbp", {}), ("trw", {}), ("ais", {"seed": 1}), ("sasmc", {"seed": 1}),
           ("cmf", {"seed": 1})]


def pyomo_solve(c, solver, opts):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(c["n"]), domain=pyo.Binary)
    for k, v in c.get("fixed", {}).items():
        m.x[k].fix(v)
    m.f = pyo.Objective(expr=c["f"](m.x), sense=pyo.maximize if c.get("sense") == "max" else pyo.minimize)
    res = pyo.SolverFactory(solver).solve(m, **opts)
    return res.varopt_result, (lambda i: res.varopt_marginals[f"x[{i}]"])


def cvxpy_solve(c, solver, opts):
    x = cp.Variable(c["n"], boolean=True, name="x")
    xs = [x[i] for i in range(c["n"])]
    for k, v in c.get("fixed", {}).items():   # the entry stays a free (unused) spin: + ln 2, marginal 1/2
        xs[k] = v
    obj = c["f"](xs)
    prob = cp.Problem(cp.Maximize(obj) if c.get("sense") == "max" else cp.Minimize(obj))
    prob.solve(method=solver, **opts)
    mv = np.asarray(prob.varopt_marginals["x"], dtype=float)
    return prob.varopt_result, (lambda i: float(mv[i]))


def row(name, form, c):
    beta = c.get("beta", 1.0)
    fixed = c.get("fixed", {}) if form == "pyomo" else {}
    f = c["f"]
    if form == "cvxpy" and c.get("fixed"):
        f = (lambda g, fx: (lambda x: g([fx.get(k, v) for k, v in enumerate(x)])))(c["f"], c["fixed"])
    lz, marg = brute(f, c["n"], c.get("sense", "min"), beta, fixed)
    cells, t0 = [], time.perf_counter()
    for solver, opts in SOLVERS:
        r, mk = (pyomo_solve if form == "pyomo" else cvxpy_solve)(c, solver, dict(opts, beta=beta))
        v = r.info["log_partition"]
        merr = max(abs(mk(i) - p) for i, p in marg.items())
        se = r.info.get("log_partition_se")
        if solver == "exact":
            cells.append(f"{max(abs(v - lz), merr):.0e}")
        elif solver == "trw":
            up = r.info.get("log_partition_upper")
            cells.append("n.c." if up is None else f"{up - lz:+.2g}")
        elif solver in ("meanfield", "lbp"):
            cells.append(f"{v - lz:+.2g}")
        elif se:
            cells.append(f"{(v - lz) / se:+.1f}")
        else:
            cells.append(f"bnd {v - lz:+.1g}" if r.info.get("log_partition_is_bound") else f"{v - lz:+.1g} (SE 0)")
        if solver == "cmf":
            cells.append(f"{merr:.1g}")
    return f"| {name} | {form} | {lz:.4f} | " + " | ".join(cells) + f" | {time.perf_counter() - t0:.1f} |"


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    which = sys.argv[1:] or list(CASES)
    print("| case | form | log Z | exact | meanfield | lbp | trw (upper) | ais z | sasmc z | cmf z | cmf marg. | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in which:
        for form in ("pyomo", "cvxpy"):
            print(row(name, form, CASES[name]), flush=True)
