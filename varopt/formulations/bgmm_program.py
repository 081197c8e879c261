r"""The Bayesian GMM negative ELBO built as a compiled program straight from the data arrays.

:func:`bgmm_program` returns the same :class:`~varopt.program.program.Program` that compiling
:func:`~varopt.formulations.bgmm.bgmm_pyomo` gives (same variable names, objective, constraints,
bounds and starting point), without writing a Pyomo or CVXPY model first. For N = 10^5 points
the Pyomo model takes seconds to write and its compilation a per-term walk over ~10^6 expression
nodes; here every term group is one vectorised array. Solve it with
``varopt.get_solver('gop').solve(program)`` and read the named variables from ``result.x``
(``program.index['mu[0]']``).

Terms (the objective of :mod:`varopt.formulations.bgmm`, ``tau = 1/variance`` when known)::

    known variance:   sum_ik tau/2 phi_ik (m_k - x_i)^2      square rows with multiplier phi_ik
                      sum_ik tau/2 phi_ik v_k                bilinear terms       (gaussian)
    learned variance: sum_ik phi_ik (x_i^2/2 tau - x_i eta_k) bilinear terms
                      sum_ik 1/2 phi_ik eta_k^2 / tau         quad_over_lin rows with multiplier phi_ik
    both:             sum_ik -phi_ik log pi_k + phi_ik log phi_ik   neglog rows with multiplier, xlogx rows

plus the prior terms and constants listed in :func:`~varopt.formulations.bgmm.bgmm_pyomo`.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ..program.expression import Expression
from ..program.program import Constraint, Program
from ..program.terms import AtomGroup, QuadraticTerms
from .bgmm import _builder_inputs, _symmetry_mode, symmetry_anchors
from .bgmm_elbo import LOG2PI


class _Layout:
    """Variable names, bounds and starting values, in the order the Pyomo builder declares them."""

    def __init__(self):
        self.names, self.lb, self.ub, self.x0, self.at = [], [], [], [], {}

    def add(self, name, shape, box, start):
        lo, hi = (-np.inf if box[0] is None else box[0]), (np.inf if box[1] is None else box[1])
        start = np.asarray(start, dtype=float).reshape(shape)
        first = len(self.names)
        for idx in np.ndindex(*shape):
            label = name if not shape else f"{name}[{','.join(str(i) for i in idx)}]"
            self.names.append(label)
            self.lb.append(lo)
            self.ub.append(hi)
            self.x0.append(float(start[idx]))
        self.at[name] = first + np.arange(int(np.prod(shape, dtype=int))).reshape(shape)
        return self.at[name]


def _rows(cols, n):
    """``csr`` with a single 1 per row at ``cols`` (the affine map ``u_r = x[cols[r]]``)."""
    cols = np.asarray(cols, dtype=np.int64).ravel()
    return sp.csr_matrix((np.ones(cols.size), (np.arange(cols.size), cols)), shape=(cols.size, n))


def bgmm_program(x, K: int, family: str = "point", prior_precision: float = 1.0, variance=1.0,
                 bounds: bool = True, pi_min: float = 1e-6, init: dict | None = None,
                 symmetry_breaking: bool = False) -> Program:
    """The negative-ELBO program of :func:`~varopt.formulations.bgmm.bgmm_pyomo` (same arguments),
    built from the arrays (linear in N, no modelling library)."""
    xv, K, lam, N, learned, bnd, start = _builder_inputs(x, K, family, prior_precision, variance, pi_min, init)
    lay = _Layout()
    phi = lay.add("phi", (N, K), (0.0, 1.0), start["phi"])
    pi = lay.add("pi", (K,), (float(pi_min), 1.0), start["pi"])
    pos_floor = 1e-12

    def box(name, domain):
        return bnd[name] if bounds else domain

    if not learned:
        mu = lay.add("mu", (K,), box("mu", (None, None)), start["mu"])
        if family == "gaussian":
            v = lay.add("v", (K,), box("v", (pos_floor, None)), start["v"])
    else:
        tau = lay.add("tau", (), box("tau", (pos_floor, None)), start["tau"])
        eta = lay.add("eta", (K,), box("eta", (None, None)), start["eta"])
        if family == "gaussian":
            w = lay.add("w", (K,), box("w", (pos_floor, None)), start["w"])
    n = len(lay.names)

    ph = phi.ravel()  # row-major (i, k), the order of the Pyomo sums
    xk = np.repeat(xv, K)
    kk = np.tile(np.arange(K), N)
    lin = np.zeros(n)
    qi, qj, qv = [], [], []
    atoms = [AtomGroup("xlogx", np.ones(ph.size), _rows(ph, n), np.zeros(ph.size)),
             AtomGroup("neglog", np.ones(ph.size), _rows(pi[kk], n), np.zeros(ph.size), ph)]
    neglog_single = []  # (coef, variable) of -c log(var) terms without multiplier
    if not learned:
        t = 1.0 / float(variance)
        atoms.append(AtomGroup("square", np.full(ph.size, 0.5 * t), _rows(mu[kk], n), -xk, ph))
        qi.append(mu), qj.append(mu), qv.append(np.full(K, 0.5 * lam))
        const = 0.5 * N * (LOG2PI - math.log(t)) + 0.5 * K * (LOG2PI - math.log(lam))
        if family == "gaussian":
            qi.append(ph), qj.append(v[kk]), qv.append(np.full(ph.size, 0.5 * t))
            lin[v] += 0.5 * lam
            neglog_single += [(0.5, int(j)) for j in v]
            const -= 0.5 * K * (LOG2PI + 1.0)
    else:
        tt = int(tau)
        qi.append(ph), qj.append(np.full(ph.size, tt)), qv.append(0.5 * xk ** 2)
        qi.append(ph), qj.append(eta[kk]), qv.append(-xk)
        atoms.append(AtomGroup("quad_over_lin", np.full(ph.size, 0.5), _rows(eta[kk], n), np.zeros(ph.size), ph,
                               _rows(np.full(ph.size, tt), n), np.zeros(ph.size)))
        atoms.append(AtomGroup("quad_over_lin", np.full(K, 0.5 * lam), _rows(eta, n), np.zeros(K), None,
                               _rows(np.full(K, tt), n), np.zeros(K)))
        const = 0.5 * N * LOG2PI + 0.5 * K * (LOG2PI - math.log(lam))
        if family == "gaussian":
            qi.append(ph), qj.append(w[kk]), qv.append(np.full(ph.size, 0.5))
            lin[w] += 0.5 * lam
            neglog_single += [(0.5, int(j)) for j in w] + [(0.5 * N, tt)]
            const -= 0.5 * K * (LOG2PI + 1.0)
        else:
            neglog_single.append((0.5 * (N + K), tt))
    if neglog_single:
        c, j = zip(*neglog_single)
        atoms.append(AtomGroup("neglog", np.array(c), _rows(j, n), np.zeros(len(j))))
    quad = QuadraticTerms(np.concatenate(qi), np.concatenate(qj), np.concatenate(qv), n)
    objective = Expression(n, const, lin, quad, atoms)

    cons = [Constraint(f"simplex_phi[{i}]", Expression(n, 0.0, (phi[i], np.ones(K))), 1.0, 1.0) for i in range(N)]
    cons.append(Constraint("simplex_pi", Expression(n, 0.0, (pi, np.ones(K))), 1.0, 1.0))
    mode = _symmetry_mode(symmetry_breaking)
    if mode == "mu" and K > 1:
        loc = eta if learned else mu
        cons += [Constraint(f"order_mu[{k}]", Expression(n, 0.0, ([loc[k], loc[k + 1]], [1.0, -1.0])), -np.inf, 0.0)
                 for k in range(K - 1)]
    elif mode == "phi" and K > 1:
        a = symmetry_anchors(xv, K)
        cons += [Constraint(f"break_sym[{j},{k}]", Expression(n, 0.0, ([phi[a[j], k], phi[a[j], j]], [1.0, -1.0])),
                            -np.inf, 0.0) for j in range(K - 1) for k in range(j + 1, K)]
    program = Program(lay.names, lay.lb, lay.ub, objective, cons, objective_name="neg_elbo", x0=lay.x0)
    program.check_finite()
    return program
