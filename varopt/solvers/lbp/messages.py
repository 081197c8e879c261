"""Reweighted sum-product on pairwise binary models, vectorized over directed edges.

Model: log-potential ``t(s) = const + h.s + sum_e w_e s_i s_j`` (spins). With edge weights
``rho_e`` (``rho = 1``: loopy belief propagation, Pearl 1988; ``rho`` edge appearance
probabilities of spanning trees: tree-reweighted BP, Wainwright, Jaakkola & Willsky 2005),
a message from ``t`` to ``s`` is ``m_{t->s}(x_s) ∝ exp(u_{t->s} x_s)`` and the update is

    m_{t->s}(x_s) ∝ sum_{x_t} exp(w_st x_s x_t / rho_st + h_t x_t) prod_{v in N(t)} m_{v->t}(x_t)^rho_vt / m_{s->t}(x_t)

i.e. with the cavity field ``c_{t->s} = h_t + sum_{v in N(t)} rho_vt u_{v->t} - u_{s->t}``

    u_{t->s} = f(c_{t->s}, w_st / rho_st),   f(c, K) = (log cosh(c + K) - log cosh(c - K)) / 2
                                                     (= atanh(tanh K tanh c), finite for all c, K).

All directed edges are updated at once (flooding), with damping
``u <- damping u_old + (1 - damping) u_new``.

Pseudo-marginals: node ``tau_i ∝ exp(H_i s_i)``, ``H_i = h_i + sum_v rho_vi u_{v->i}``; edge
``tau_ij ∝ exp(a s_i + b s_j + K s_i s_j)`` with the cavities ``a = c_{i->j}``, ``b = c_{j->i}``,
``K = w_ij / rho_ij``. The variational objective evaluated at them is

    B(tau) = const + h.mu + sum_e w_e E_tau[s_i s_j] + sum_i H(tau_i) - sum_e rho_e I_e(tau_e),

``I_e`` the mutual information of the edge table. At a fixed point it is the Bethe estimate
of log Z (``rho = 1``; Yedidia, Freeman & Weiss 2005) or the TRW upper bound (``rho`` in the
spanning-tree polytope; the fixed point maximises the concave B over the local polytope).
"""
from __future__ import annotations

import numpy as np

_LOG2 = float(np.log(2.0))


def logcosh(y):
    a = np.abs(y)
    return a + np.log1p(np.exp(-2.0 * a)) - _LOG2


def message_fn(c, K):
    return 0.5 * (logcosh(c + K) - logcosh(c - K))


class Messages:
    """Directed-edge arrays of one model and edge weights ``rho`` (see module docstring)."""

    def __init__(self, model, rho=None):
        self.model = model
        n, m = model.n, model.m
        self.rho = np.ones(m) if rho is None else np.asarray(rho, dtype=float)
        self.src = np.concatenate([model.i, model.j])
        self.dst = np.concatenate([model.j, model.i])
        self.rev = np.concatenate([np.arange(m, 2 * m), np.arange(m)])
        self.rho_d = np.concatenate([self.rho, self.rho])
        self.K_d = np.concatenate([model.w, model.w]) / self.rho_d
        self.u = np.zeros(2 * m)
        self.n = n

    def initialise(self, init="zero", seed=0):
        """Initial log-odds: zero, or uniform in [-0.1, 0.1] from ``default_rng(seed)``."""
        if init == "random":
            self.u = np.random.default_rng(seed).uniform(-0.1, 0.1, self.u.size)
        else:
            self.u = np.zeros(self.u.size)

    def fields(self, u=None):
        u = self.u if u is None else u
        return self.model.h + np.bincount(self.dst, weights=self.rho_d * u, minlength=self.n)

    def cavities(self, u=None):
        u = self.u if u is None else u
        return self.fields(u)[self.src] - u[self.rev]

    def step(self, damping=0.0):
        """One flooding update; returns the largest change of a message."""
        new = message_fn(self.cavities(), self.K_d)
        if damping:
            new = damping * self.u + (1.0 - damping) * new
        delta = float(np.abs(new - self.u).max()) if new.size else 0.0
        self.u = new
        return delta

    def beliefs(self):
        """``(E[s] per node, E[s_i s_j] per edge, the edge log-tables (m, 2, 2))`` of tau."""
        m = self.model.m
        H = self.fields()
        cav = self.cavities()
        a, b = cav[:m], cav[m:]
        K = self.K_d[:m]
        sv = np.array([-1.0, 1.0])
        L = a[:, None, None] * sv[None, :, None] + b[:, None, None] * sv[None, None, :] \
            + K[:, None, None] * (sv[:, None] * sv[None, :])[None]
        Lmax = L.reshape(m, 4).max(axis=1) if m else np.zeros(0)
        L = L - (Lmax + np.log(np.exp(L.reshape(m, 4) - Lmax[:, None]).sum(axis=1)))[:, None, None]
        P = np.exp(L)
        corr = P[:, 0, 0] + P[:, 1, 1] - P[:, 0, 1] - P[:, 1, 0]
        return np.tanh(H), corr, L

    def objective(self):
        """``(B(tau), E[s], E[s_i s_j])`` (module docstring)."""
        model = self.model
        mu, corr, L = self.beliefs()
        p, q = (1.0 + mu) / 2.0, (1.0 - mu) / 2.0
        Hn = -(_xlogx(p) + _xlogx(q))
        P = np.exp(L)
        He = -(P * L).sum(axis=(1, 2))
        pe_i, pe_j = P.sum(axis=2), P.sum(axis=1)  # the edge table's own marginals
        I = -(_xlogx(pe_i).sum(axis=1) + _xlogx(pe_j).sum(axis=1)) - He
        val = model.const + model.h @ mu + model.w @ corr + Hn.sum() - self.rho @ I
        return float(val), mu, corr


def _xlogx(p):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)


def run_messages(msgs, opts, run, label):
    """Iterate :meth:`Messages.step` under the run loop until the largest change is <= ``opts.tol``;
    returns ``(converged, last change)``."""
    delta = np.inf
    if msgs.model.m == 0:
        return True, 0.0
    for _ in run.iterations():
        delta = msgs.step(opts.damping)
        if run.due() or run.progress.active:
            run.record(**{"change": delta})
        if run.callback(msgs.u.copy()):
            break
        if not np.isfinite(delta):
            run.stop("error", f"{label}: messages became non-finite")
            break
        if delta <= opts.tol:
            return True, delta
    return False, delta
