"""Stress check: majorize against CVXPY + Clarabel on random log-sum-exp programs (Woodbury path).

Each instance: ``n`` in [60, 300) parameters, 2..11 partition functions of 1..5 configurations with
random features and base measures (about 20 % of the configurations get ``h = 0``), a random diagonal
ridge with 0..2 unpenalized coordinates and a random linear term. Some instances are unbounded below
(an unpenalized direction along which the objective decreases forever). Expected: majorize's optimum
within 1e-6 of Clarabel's on every bounded instance; on every instance Clarabel calls unbounded,
status ``unbounded`` (an affine direction without curvature) or ``error`` with "diverging iterates".
``--constrained`` adds ``x_j >= 0`` on three variables and one row ``sum_{j in S} x_j <= 0.5`` over five (the
constrained Woodbury step: the step QP's active set on the row-space operator, docs/majorize.md section 2).

Usage: ``python benchmarks/majorize_stress.py [--instances 40] [--seed 1000] [--constrained]``.
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np
import scipy.sparse as sp

import varopt.solvers.majorize  # noqa: F401
from varopt import get_solver
from varopt.program import Constraint, Program
from varopt.program.expression import Expression
from varopt.program.terms import LseGroup, QuadraticTerms


def instance(seed, constrained=False):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(60, 300))
    G = int(rng.integers(2, 12))
    sizes = rng.integers(1, 6, size=G)
    seg = np.repeat(np.arange(G), sizes)
    K = seg.size
    A = rng.normal(size=(K, n)) * rng.choice([0.1, 1, 5])
    b = rng.normal(size=K) * rng.choice([0.1, 1, 10])
    first = np.r_[0, np.cumsum(sizes)[:-1]]
    zero = rng.random(K) < 0.2
    zero[first] = False
    b[zero] = -np.inf
    coef = rng.random(G) + 0.5
    d = rng.random(n) * rng.choice([0.1, 1, 10]) + 0.05
    free = rng.choice(n, int(rng.integers(0, 3)), replace=False)
    d[free] = 0.0
    c = rng.normal(size=n) * 0.3
    c[free] = 0.0
    obj = Expression(n, linear=c, quadratic=QuadraticTerms(np.arange(n), np.arange(n), 0.5 * d, n),
                     lse=[LseGroup(A=sp.csr_matrix(A), b=b, seg=seg, coef=coef)])
    lb, cons, row = np.full(n, -np.inf), [], None
    if constrained:
        lb[rng.choice(n, 3, replace=False)] = 0.0
        row = np.zeros(n)
        row[rng.choice(n, 5, replace=False)] = 1.0
        cons = [Constraint("row", Expression(n, linear=row), -np.inf, 0.5)]
    prog = Program([f"x{i}" for i in range(n)], lb, np.full(n, np.inf), obj, cons)
    return prog, (A, b, seg, zero, coef, d, c, G, lb, row)


def clarabel(data):
    import cvxpy as cp
    A, b, seg, zero, coef, d, c, G, lb, row = data
    x = cp.Variable(A.shape[1])
    terms = [coef[g] * cp.log_sum_exp(A[(seg == g) & ~zero] @ x + b[(seg == g) & ~zero]) for g in range(G)]
    fin = np.flatnonzero(np.isfinite(lb))
    cons = ([x[fin] >= lb[fin]] if fin.size else []) + ([row @ x <= 0.5] if row is not None else [])
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum(cp.multiply(d, cp.square(x))) + c @ x + sum(terms)), cons)
    prob.solve(solver="CLARABEL")
    return prob.status, prob.value


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--constrained", action="store_true")
    a = ap.parse_args(argv)
    bad = bounded = unbounded = 0
    print(f"{'seed':>5s} {'n':>4s} {'Clarabel':>10s} {'majorize':>10s} {'it':>5s}  rel. difference / message")
    for k in range(a.instances):
        prog, data = instance(a.seed + k, a.constrained)
        status, value = clarabel(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = get_solver("majorize").solve(prog, tol=1e-12, max_iter=5000)
        if status == "unbounded":
            unbounded += 1
            ok = res.status == "unbounded" or (res.status == "error" and "diverging" in res.message)
            detail = res.message[:70]
        else:
            bounded += 1
            rel = (res.objective - value) / max(1.0, abs(value))
            ok = res.status == "optimal" and abs(rel) <= 1e-6
            detail = f"{rel:.2e} {res.info.get('step_solver')} {res.info.get('step_qp', '')}"
        bad += not ok
        print(f"{a.seed + k:5d} {prog.n:4d} {status:>10s} {res.status:>10s} {res.iterations:5d}  {detail}"
              + ("" if ok else "   <-- MISMATCH"))
    print(f"\n{bounded} bounded, {unbounded} unbounded instances; {bad} mismatches")
    return bad


if __name__ == "__main__":
    raise SystemExit(main())
