"""Ising models, spin glasses and Boltzmann machines, as arrays, Pyomo models and CVXPY problems.

Every builder returns the **energy** ``E(s)`` as an :class:`~varopt.program.energy.EnergyModel`
over spins ``s = 2x - 1`` with the temperature folded in, so that

    p(s) ∝ exp(-E(s)),   E(s) = -(sum_i h_i s_i + sum_{(i,j)} J_ij s_i s_j) / T

and every energy solver is run with its default ``beta = 1``. :func:`to_pyomo` and
:func:`to_cvxpy` write the same energy as a user would: binary variables ``x`` and the objective
``minimize E(2x - 1)``; ``energy.to_program()`` gives the compiled program directly. Variables
are numbered row by row on lattices (``x[r*W + c]``), visible before hidden units in an RBM.

* :func:`lattice` — L x W lattice, periodic (torus), ``'cylinder'`` (periodic along rows of W
  sites) or open, couplings ``J`` (scalar, or ``(J_row, J_col)``) and fields ``h``;
* :func:`spin_glass` — the Edwards-Anderson ±J glass on a lattice (Carbonetto 2009, §3.4.3);
* :func:`random_field_model` — fields U[-field, field], couplings ±coupling on an open grid or
  a complete graph (Carbonetto 2009, §4.4: 12 x 12 grid and 26 nodes, ±1/2);
* :func:`rbm` — restricted Boltzmann machine ``E(v, h) = -b.v - c.h - v^T W h`` over bits
  (Smolensky 1986; Hinton 2002);
* :func:`four_node` — the 4-node example of Carbonetto 2009, §4.3 (exact log Z = 3.3675);
* :func:`from_uai` — a binary pairwise file of the UAI inference competitions (``MARKOV``/``BAYES``).
"""
from __future__ import annotations

import numpy as np

from ..program.energy import EnergyModel


def _lattice_edges(L, W, periodic):
    idx = np.arange(L * W).reshape(L, W)
    wrap_rows = periodic is True or periodic == "cylinder"   # ring of the W sites of a row
    wrap_cols = periodic is True
    ri, rj = idx[:, :-1].ravel(), idx[:, 1:].ravel()
    if wrap_rows and W > 2:
        ri, rj = np.r_[ri, idx[:, -1]], np.r_[rj, idx[:, 0]]
    elif wrap_rows and W == 2:
        ri, rj = np.r_[ri, idx[:, 1]], np.r_[rj, idx[:, 0]]  # two bonds between the pair (summed)
    ci, cj = idx[:-1, :].ravel(), idx[1:, :].ravel()
    if wrap_cols and L >= 2:
        ci, cj = np.r_[ci, idx[-1, :]], np.r_[cj, idx[0, :]]
    return (ri, rj), (ci, cj)


def lattice(L, W, J=1.0, h=0.0, periodic=True, T=1.0):
    """Energy of the L x W Ising model at temperature ``T`` (module docstring)."""
    if periodic not in (True, False, "cylinder"):
        raise ValueError("periodic must be True (torus), False (open) or 'cylinder'")
    if not T > 0:
        raise ValueError("the temperature T must be positive")
    (ri, rj), (ci, cj) = _lattice_edges(int(L), int(W), periodic)
    shape_error = ValueError(f"J must be a scalar or a pair (J_row, J_col) of scalars or arrays with one entry per "
                             f"bond of the rows ({ri.size}) and of the columns ({ci.size}); got {J!r}")
    if isinstance(J, (tuple, list)) or np.ndim(J) > 0:
        # a tuple is tested before np.ndim: (J_row scalar, J_col array) is ragged and np.ndim raised on it
        if len(J) != 2:
            raise shape_error
        Jr, Jc = J
    else:
        Jr = Jc = J
    i, j = np.r_[ri, ci], np.r_[rj, cj]
    try:
        w = np.r_[np.broadcast_to(np.asarray(Jr, dtype=float), ri.shape),
                  np.broadcast_to(np.asarray(Jc, dtype=float), ci.shape)]
    except (TypeError, ValueError):
        # a string, None-filled or ragged J failed inside numpy with a message that did not name J
        raise shape_error from None
    if not np.all(np.isfinite(w)):
        raise ValueError(f"J contains NaN or inf (got {J!r})")
    hv = np.broadcast_to(np.asarray(h, dtype=float), (L * W,)).ravel() if np.ndim(h) <= 1 else \
        np.asarray(h, dtype=float).ravel()
    return EnergyModel(-hv / T, i, j, -w / T, names=[f"x[{k}]" for k in range(L * W)])


def spin_glass(L, W, T=1.0, periodic=True, seed=0):
    """Edwards-Anderson ±J spin glass: couplings ±1 with probability 1/2 each, at temperature T."""
    rng = np.random.default_rng(seed)
    (ri, rj), (ci, cj) = _lattice_edges(int(L), int(W), periodic)
    return lattice(L, W, (rng.choice([-1.0, 1.0], ri.size), rng.choice([-1.0, 1.0], ci.size)), 0.0,
                   periodic, T)


def random_field_model(graph="grid", size=12, field=1.0, coupling=0.5, seed=0):
    """Fields U[-field, field] and couplings ±coupling (log-potential parameters, T = 1) on an open
    ``size x size`` grid (``graph='grid'``) or the complete graph on ``size`` nodes (``'complete'``)."""
    rng = np.random.default_rng(seed)
    if graph == "grid":
        (ri, rj), (ci, cj) = _lattice_edges(size, size, False)
        i, j, n = np.r_[ri, ci], np.r_[rj, cj], size * size
    elif graph == "complete":
        n = size
        i, j = np.triu_indices(n, 1)
    else:
        raise ValueError("graph must be 'grid' or 'complete'")
    h = rng.uniform(-field, field, n)
    w = rng.choice([-coupling, coupling], i.size)
    return EnergyModel(-h, i, j, -w, names=[f"x[{k}]" for k in range(n)])


def rbm(W, b, c, T=1.0):
    """RBM energy over bits ``(v, h)``: ``E = -(b.v + c.h + v^T W h) / T`` (visible first)."""
    W = np.asarray(W, dtype=float)
    nv, nh = W.shape
    b, c = np.asarray(b, dtype=float).ravel(), np.asarray(c, dtype=float).ravel()
    if b.size != nv or c.size != nh:
        raise ValueError(f"b must have {nv} entries and c {nh}")
    I, K = np.meshgrid(np.arange(nv), nv + np.arange(nh), indexing="ij")
    names = [f"x[{k}]" for k in range(nv + nh)]
    return EnergyModel.from_bits(0.0, -np.r_[b, c] / T, I.ravel(), K.ravel(), -W.ravel() / T, names)


def four_node():
    """Carbonetto 2009, §4.3: theta* = (0.4, 0.3, -0.5, -0.2), theta_13 = theta_24 = theta_34 = 1/2,
    theta_12 = -1/2 (log-potential parameters; nodes 1..4 are x[0..3])."""
    theta = np.array([0.4, 0.3, -0.5, -0.2])
    return EnergyModel(-theta, [0, 1, 2, 0], [2, 3, 3, 1], [-0.5, -0.5, -0.5, 0.5],
                       names=[f"x[{k}]" for k in range(4)])


def _name_indices(names):
    """The integers ``v`` of names ``x[v]`` (distinct), or None: a model read from a UAI file with evidence
    keeps its file indices, and its Pyomo variables should carry them too."""
    import re
    idx = [re.fullmatch(r"x\[(\d+)\]", nm) for nm in names]
    if not all(idx):
        return None
    idx = [int(g.group(1)) for g in idx]
    return idx if len(set(idx)) == len(idx) else None


def from_uai(source, evidence=None):
    """Energy of a binary pairwise UAI competition file (:meth:`EnergyModel.from_uai`; p ∝ exp(-E))."""
    return EnergyModel.from_uai(source, evidence)


def to_pyomo(energy):
    """Pyomo model: ``x = Var(index, domain=Binary)``, ``minimize E(2x - 1)`` written in spins; the index is
    ``range(n)``, or the integers ``v`` when every variable is named ``x[v]`` (a UAI model under evidence
    keeps its file indices)."""
    import pyomo.environ as pyo

    m = pyo.ConcreteModel()
    idx = _name_indices(energy.names) or list(range(energy.n))
    m.x = pyo.Var(idx, domain=pyo.Binary)
    s = {k: 2 * m.x[v] - 1 for k, v in enumerate(idx)}
    m.energy = pyo.Objective(expr=energy.const
                             + sum(float(energy.h[k]) * s[k] for k in range(energy.n) if energy.h[k])
                             + sum(float(w) * s[a] * s[b] for a, b, w in
                                   zip(energy.i.tolist(), energy.j.tolist(), energy.w.tolist())),
                             sense=pyo.minimize)
    return m


def to_cvxpy(energy):
    """CVXPY problem: ``x = Variable(n, boolean=True)``, ``Minimize(E(2x - 1))``; returns ``(prob, x)``."""
    import cvxpy as cp

    x = cp.Variable(energy.n, boolean=True, name="x")
    s = 2 * x - 1
    f = energy.const + energy.h @ s
    if energy.m:
        f = f + cp.sum(cp.multiply(energy.w, cp.multiply(s[energy.i], s[energy.j])))
    return cp.Problem(cp.Minimize(f)), x
