r"""Relaxed dual subproblems (Saddiki, Trapp & Flaherty 2017, eq. (21); Floudas 2000, §3.3).

A node of the GOP tree is a region of ``y`` cut out by the qualifying constraints of its
ancestors. Its relaxed dual is the LP/QP over the columns ``[y, eta, t]``

.. math::

    \min_{y \in Y}\ \tfrac12 y^T Q_{yy} y + \textstyle\sum_r \eta_r + t \\
    \text{s.t.}\ t \ge const_{k,B} + a_{k,B}^T y
      \quad\text{(Lagrangian of every ancestor iteration } k \text{ with its bound combination } B)\\
    \qquad g^k_i(y) \ge 0 \ (B_i = \text{lower}),\quad g^k_i(y) \le 0 \ (B_i = \text{upper})
      \quad\text{(qualifying constraints)}\\
    \qquad \eta_r \ge \text{tangent cuts of } c_r g_r \ (\text{module } cuts),\quad y\text{-only constraints}

Feasibility cuts (from an infeasible primal) enter as ``0 >= const + a^T y`` instead. With
separable connected variables the optimality rows are split (docs/gop.md §6b): columns ``t_p``
(after ``t``, cost 1) with ``t_p >= D_p(xbar_p, y) + g_p(y)(x^B_p - xbar_p)`` per variable, ``t`` the rest.
Each qualifying constraint of a node is written with a node column ``s_j = sigma_j g_j(y) >= 0`` (after the base
columns; ``sigma_j = -1`` for an upper bound choice) and each box term ``g_j(y)(x^B_j - xbar_j)`` as
``sigma_j (x^B_j - xbar_j) s_j``: the same LP (substitute ``s``), but a node change rewrites one entry per box term
(docs/gop.md §7, "node columns").

Everything a subproblem needs is a plain numpy/scipy payload, so batches of nodes can be
solved in other processes (``concurrent.futures`` or dask); each batch builds one
:class:`~varopt.lpqp.HighsModel` and re-solves it warm for every node (rows of the previous
node deleted, rows of the next added).
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import scipy.sparse as sp

from ...errors import SolverBugError
from ...lpqp import HighsModel
from .unbounded import Unbounded


#: largest ratio of the base rows' absolute nonzeros for which the relaxed-dual LPs run unscaled
UNSCALED_RANGE = 1e4


def _coefficient_range(A):
    """``max |a| / min |a|`` over the nonzeros of ``A`` (1 for an empty matrix)."""
    a = np.abs(sp.csr_matrix(A).data)
    a = a[a > 0]
    return float(a.max() / a.min()) if a.size else 1.0


class RDModel:
    """A persistent relaxed-dual model: base rows (y-constraints, cuts) + per-node rows."""

    def __init__(self, base):
        self.base = base
        self.pieces = base["pieces"]
        self.ycons = base["ycons"]
        # columns [y, eta, t, t_1..t_m]: the t_p of the split (per-variable) Lagrangian rows
        # (docs/gop.md §6b) come after t, so every cut row of width pieces.ncol is padded
        self.nsplit = int(base.get("nsplit", 0))
        self.tcol = self.pieces.ncol - 1
        ncol = self.pieces.ncol + self.nsplit
        self.ncol = ncol
        self.ny = self.pieces.ny
        c = np.zeros(ncol)
        c[self.ny:] = 1.0
        Q = None
        if self.pieces.Q is not None:
            Q = sp.block_diag([self.pieces.Q, sp.csr_matrix((ncol - self.ny, ncol - self.ny))], format="csr")
        A = _pad(base["A"], ncol)
        rng = _coefficient_range(A)
        self.scaled = rng > UNSCALED_RANGE  # HiGHS's scaling on (docs/gop.md §7)
        self.hm = HighsModel(c, A, base["lo"], base["hi"], base["lb"], base["ub"], Q=Q,
                             options={"presolve": "off", "threads": 1,
                                      "primal_feasibility_tolerance": 1e-9,
                                      "dual_feasibility_tolerance": 1e-9,
                                      # devex pricing: cheaper iterations than steepest edge on these
                                      # small warm-started LPs (measured on the BGMM relaxed duals)
                                      "simplex_dual_edge_weight_strategy": 1,
                                      # no scaling: every node changes coefficients, and HiGHS re-scales the whole
                                      # LP after a change; unscaled, the warm dual simplex also needed ~25 % fewer
                                      # iterations on the K = 3 BGMM relaxed duals (docs/gop.md §7). Only for base
                                      # rows whose nonzeros span at most UNSCALED_RANGE: badly scaled programs keep
                                      # HiGHS's scaling, which their tolerances need
                                      **({"simplex_scale_strategy": 0} if rng <= UNSCALED_RANGE else {})})
        self.m_base = A.shape[0]
        # columns from ncol on are the node columns s_j = +-g_j(y) >= 0 of the qualifying constraints (docs/gop.md
        # §7, "node columns"): added when a node needs more than the LP has, never deleted; a column no node row
        # uses (cost 0, no entry, bounds [0, inf)) changes no LP value
        self.col_lb = np.asarray(base["lb"], dtype=float)
        self.col_ub = np.asarray(base["ub"], dtype=float)
        self.ylb = self.col_lb[:self.ny]
        self.yub = self.col_ub[:self.ny]
        self.c = c
        # row bounds of the base rows (positions 0 .. m_base), kept beside HiGHS's for the dual bound check
        self.base_lo = np.asarray(base["lo"], dtype=float).copy()
        self.base_hi = np.asarray(base["hi"], dtype=float).copy()
        # the multipliers of the last LPs (most recent first), for the dual bound check of later nodes (_dual_bound)
        self.duals = []
        self.rays = []            # Farkas certificates of the last infeasible LPs (_ray_proves_infeasible)
        self.n_duals = 4
        self._base_A = None       # the base rows as a csr matrix, read from HiGHS when a ray needs them
        self.n_ray_fathomed = 0
        self._keep_duals = True
        self.n_dual_fathomed = 0
        self.new_cuts = []  # (A, lo, hi) added while solving, to report to the master
        # cut management: base rows from index n_perm on are cuts; drop the ones that stayed
        # inactive for ``max_age`` node solves (they can be re-generated when violated again)
        self.n_perm = int(base.get("n_perm", self.m_base))
        self.last_active = np.zeros(self.m_base, dtype=np.int64)
        self.n_solves = 0
        self._cutoff = np.inf
        self.max_age = int(base.get("max_age", 40))
        # the last node's rows stay in the LP after its solve (positions m_base ..): the next node of the same
        # size is written over them, so their basis statuses carry over (siblings in the Gray-code order differ
        # in one qualifying constraint and the box corner, docs/gop.md §7); deleting and re-adding them made
        # every node's dual simplex re-enter the active node rows (~70 iterations a node on the K = 3 BGMM)
        self.node_rows = None     # (CSR rows, lo, hi) of the rows at m_base .. m_base + k, or None
        self._defining = (None, None, None)   # (node rows, their rows defining the node columns, coefficients)
        #: ``time.perf_counter()`` at which the run's time limit runs out (inf: none); the clock is
        #: CLOCK_MONOTONIC, shared by the executor's worker processes on the machine
        self.deadline = np.inf

    def _limit_lp(self):
        """Give the next LP the time left before :attr:`deadline` and a simplex iteration limit far above what
        these warm LPs take (docs/gop.md §13m: they had neither, so one LP could run past the time limit; the
        tree's LPs got both in §13k). An LP stopped by either is a failed round: the node keeps its last
        round's value or its parent's bound, both valid."""
        hm = self.hm
        if np.isfinite(self.deadline):
            hm.set_time_limit(max(1e-3, self.deadline - time.perf_counter()))
        hm.limit_simplex_iterations()

    def _ensure_cols(self, width):
        """Add node columns (cost 0, bounds ``[0, inf)``, no entries) until the LP has ``width`` columns."""
        extra = width - self.hm.num_cols
        if extra > 0:
            self.hm.add_cols(np.zeros(extra), np.zeros(extra), np.full(extra, np.inf))
            self.col_lb = np.concatenate([self.col_lb, np.zeros(extra)])
            self.col_ub = np.concatenate([self.col_ub, np.full(extra, np.inf)])
            self.c = np.concatenate([self.c, np.zeros(extra)])

    def _drop_node_rows(self):
        """Delete the rows a previous node left in the LP (the model holds base rows only afterwards)."""
        if self.node_rows is not None:
            k = self.node_rows[0].shape[0]
            self.hm.delete_rows(np.arange(self.m_base, self.m_base + k))
            self.node_rows = None

    def _set_node_rows(self, A, lo, hi):
        """Make rows ``m_base ..`` of the LP the node rows ``lo <= A z <= hi`` (``A`` dense, or CSR without explicit
        zeros and with sorted indices, :func:`dense_rows`): written over the previous node's rows where there are as many (only the entries and bounds that
        differ are changed, in row-major order), else deleted and added."""
        D, k = A, A.shape[0]
        dense = not sp.issparse(D)
        if not np.all(np.isfinite(D if dense else D.data)):
            raise SolverBugError("a relaxed-dual node row has a non-finite coefficient")
        prev = self.node_rows
        if prev is None or prev[0].shape != D.shape:
            self._drop_node_rows()
            if k:
                self._ensure_cols(D.shape[1])
                if dense:
                    r, c = np.nonzero(D)
                    R = sp.csr_matrix((D[r, c], c, np.searchsorted(r, np.arange(k + 1))), shape=(k, self.hm.num_cols))
                else:
                    R = sp.csr_matrix((D.data, D.indices, D.indptr), shape=(k, self.hm.num_cols))
                self.hm.add_rows(R, np.asarray(lo, dtype=float), np.asarray(hi, dtype=float), check=False)
                self.node_rows = (D, np.array(lo, dtype=float), np.array(hi, dtype=float))
            return
        P, plo, phi = prev
        rows, cols = np.nonzero(D != P) if dense else _changed_entries(D, P)
        if rows.size:
            self.hm.set_coefficients(self.m_base + rows, cols, D[rows, cols] if dense else _entries(D, rows, cols),
                                     check=False)
        lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        ch = np.flatnonzero((lo != plo) | (hi != phi))
        if ch.size:
            self.hm.set_row_bounds(self.m_base + ch, lo[ch], hi[ch], check=False)
        self.node_rows = (D, lo.copy(), hi.copy())

    def add_base_rows(self, A, lo, hi):
        if A.shape[0] == 0:
            return
        self._drop_node_rows()
        A = _pad(A, self.hm.num_cols)
        if self.hm.num_rows != self.m_base:
            raise SolverBugError("base rows added while node rows are present")
        self.hm.add_rows(A, lo, hi)
        self.m_base += A.shape[0]
        self._extend_base_bounds(lo, hi)
        self.last_active = np.concatenate([self.last_active, np.full(A.shape[0], self.n_solves)])

    def data(self):
        """Current base model as a payload for other processes (no node rows may be present)."""
        self._drop_node_rows()
        d = self.hm.data()
        n = self.ncol   # without the node columns
        return dict(A=d["A"][:, :n], lo=d["row_lo"], hi=d["row_hi"], lb=d["lb"][:n], ub=d["ub"][:n], pieces=self.pieces,
                    ycons=self.ycons, n_perm=self.n_perm, max_age=self.max_age, nsplit=self.nsplit)

    def _age_cuts(self):
        old = np.flatnonzero(self.n_solves - self.last_active[self.n_perm:] > self.max_age) + self.n_perm
        if old.size > 0.2 * max(1, self.m_base - self.n_perm):
            self._drop_node_rows()
            self.hm.delete_rows(old)
            keep = np.ones(self.m_base, dtype=bool)
            keep[old] = False
            self.last_active = self.last_active[keep]
            self.base_lo, self.base_hi = self.base_lo[keep], self.base_hi[keep]
            self.duals, self.rays, self._base_A = [], [], None
            self.m_base -= old.size

    def _extend_base_bounds(self, lo, hi):
        self.base_lo = np.concatenate([self.base_lo, np.asarray(lo, dtype=float)])
        self.base_hi = np.concatenate([self.base_hi, np.asarray(hi, dtype=float)])
        # other base rows: the multipliers of the earlier LPs do not cover them
        self.duals, self.rays, self._base_A = [], [], None

    def _keep_dual(self, res):
        """Keep the multipliers of the LP just solved (base rows + the node rows in ``self.node_rows``) with the
        part of the dual bound that the next node shares: the base rows' term ``sum_i pi_i b_i``."""
        pi, r = res.row_duals, res.col_duals
        k = self.node_rows[0].shape[0] if self.node_rows is not None else -1
        if not self._keep_duals or pi is None or r is None or k < 0 or pi.size != self.m_base + k \
                or self.hm._L is not None:
            return
        base = _row_term(pi[:self.m_base], self.base_lo, self.base_hi)
        if not np.isfinite(base):
            return
        d = dict(pi=pi[self.m_base:].copy(), r=np.asarray(r, dtype=float).copy(), base=base, A=self.node_rows[0])
        self.duals = [d] + self.duals[:self.n_duals - 1]

    def _keep_ray(self):
        r"""After an infeasible LP (base rows + the node rows in ``self.node_rows``): keep HiGHS's dual ray ``rho``
        (scaled to ``max |rho_i| = 1``, the sign that certifies) when it proves the infeasibility by Farkas' lemma,

        .. math::  F(\rho) = \textstyle\sum_i \rho_i b_i(\rho_i) + \sum_j \min_{z_j \in [l_j, u_j]} (-A^T \rho)_j z_j > 0

        (``F <= 0`` for every ``rho`` when a point with ``lo <= A z <= hi``, ``l <= z <= u`` exists). Kept with the
        base rows' parts, so that :meth:`_ray_proves_infeasible` re-evaluates ``F`` on other node rows."""
        k = self.node_rows[0].shape[0] if self.node_rows is not None else -1
        if not self._keep_duals or k < 0:
            return
        # only a ray the simplex left: getDualRay would otherwise solve a feasibility LP outside the time limit
        # (tree.GopTree._dual_ray, docs/gop.md §13k)
        if not self.hm.dual_ray_exists():
            return
        _, has, ray = self.hm.highs.getDualRay()
        ray = np.asarray(ray, dtype=float)
        if not has or ray.size != self.m_base + k or not np.all(np.isfinite(ray)) or not np.any(ray):
            return
        if self._base_A is None:
            self._base_A = self.hm.data()["A"][:self.m_base, :self.ncol]   # no entries in the node columns
        ray = ray / np.abs(ray).max()
        for rho in (ray, -ray):
            base = _row_term(rho[:self.m_base], self.base_lo, self.base_hi)
            if not np.isfinite(base):
                continue
            d = dict(rho=rho[self.m_base:].copy(), s=self._base_A.T @ rho[:self.m_base], base=base)
            if self._farkas(d, *self.node_rows) > 1e-6:
                self.rays = [d] + self.rays[:self.n_duals - 1]
                return

    def _farkas(self, d, A, lo, hi):
        """``F(rho)`` of :meth:`_keep_ray` for the node rows ``lo <= A z <= hi``."""
        rho = d["rho"]
        v = _tmatvec(A, rho)
        v[:self.ncol] += d["s"]
        w = A.shape[1]
        rho, r = self._level_node_cols(rho, -v, A, lo, hi)
        return d["base"] + _row_term(rho, lo, hi) + _row_term(r, self.col_lb[:w], self.col_ub[:w])

    def _level_node_cols(self, pi, r, A, lo, hi):
        r"""Multipliers ``pi'`` of the node rows and reduced costs ``r' = c - A^T pi'`` with no node column's reduced
        cost below 0. The node columns ``s_j >= 0`` (from column ``ncol`` on) are defined, in order, by the node rows
        with ``lo == hi`` (``G1_j y - sigma_j s_j = -g0_j``, the only node row with ``s_j`` and an equality: any
        multiplier of it serves weak duality). A node column with ``r_j < 0`` (a sibling with the other sign
        ``sigma_j`` or box end) would make the bound ``-inf``; shifting its defining row's multiplier by
        ``r_j / A_{ij}`` makes ``r_j = 0`` and moves the term onto ``y`` (bounded) and the row's constant: the bound of
        the relaxed dual with the qualifying constraint left out, as the multiplier 0 of an inactive qualifying row
        gave before the node columns (docs/gop.md §7)."""
        if self._defining[0] is not A:
            # once per node (the checks try up to n_duals multipliers and rays on the same rows)
            ns = A.shape[1] - self.ncol
            eq = np.flatnonzero(lo == hi)
            ok = ns > 0 and eq.size == ns
            self._defining = (A, eq if ok else None, A[eq, self.ncol:].diagonal().copy() if ok else None)
        _, eq, a = self._defining
        if eq is None:
            return pi, r
        rj = r[self.ncol:]
        fix = (rj < 0) & (a != 0)
        if not fix.any():
            return pi, r
        step = rj[fix] / a[fix]
        pi = pi.copy()
        pi[eq[fix]] += step
        return pi, r - _tmatvec(A[eq[fix]], step)

    def _ray_proves_infeasible(self, A, lo, hi):
        """True when a kept ray certifies that the node LP (base rows + ``lo <= A z <= hi``) is infeasible, with a
        margin of 1e-6 (the ray is scaled to max 1) over the tolerance-sized terms :func:`_row_term` counts as 0."""
        return any(self._farkas(d, A, lo, hi) > 1e-6 for d in self.rays if d["rho"].size == A.shape[0])

    def _dual_bound(self, A, lo, hi, stop=np.inf):
        r"""A lower bound on the LP of a node with the rows ``lo <= A z <= hi`` from the multipliers ``pi`` of the
        last LP solved (a sibling, as many node rows, the same base rows), by weak LP duality:

        .. math::  \min_{z \in [l, u]} c^T z \ \text{s.t.}\ lo \le A z \le hi \quad\ge\quad
                   \textstyle\sum_i \pi_i b_i(\pi_i) + \sum_j \min_{z_j \in [l_j, u_j]} (c - A^T \pi)_j z_j

        for any ``pi`` (``b_i = lo_i`` where ``pi_i > 0``, ``hi_i`` where ``pi_i < 0``; a term with an infinite bound
        makes the bound ``-inf``). Only the node rows differ from the last LP, so ``c - A^T pi`` is HiGHS's reduced
        cost minus ``(A - A_last)^T pi_node``. Multipliers and reduced costs within HiGHS's dual feasibility
        tolerance (1e-9) of 0 count as 0 against an infinite bound (as in HiGHS's own ``objective_bound`` test).
        Node columns past ``A``'s width have no entry in either LP (cost 0, reduced cost 0): their term is 0.
        The multipliers of the last ``n_duals`` LPs (of these base rows and as many node rows) are tried, most
        recent first, until one bound reaches ``stop``; returns the largest (``-inf`` when none is usable)."""
        best = -np.inf
        for d in self.duals:
            if d["A"].shape != A.shape:
                continue
            pi, w = d["pi"], A.shape[1]
            r = d["r"][:w] - _tmatvec(A - d["A"], pi)
            pi, r = self._level_node_cols(pi, r, A, lo, hi)
            best = max(best, d["base"] + _row_term(pi, lo, hi) + _row_term(r, self.col_lb[:w], self.col_ub[:w]))
            if best >= stop:
                break
        return best

    def _set_cutoff(self, cutoff):
        if cutoff != self._cutoff:
            self.hm.set_options(objective_bound=float(cutoff))
            self._cutoff = cutoff

    def solve_node(self, A, lo, hi, oa_tol, feas_tol=1e-9, max_rounds=30, cutoff=np.inf):
        """Solve one node; returns dict(status, value, y). Cuts found are kept (base rows).

        ``cutoff`` (the incumbent ``UBD``): a node whose LP value is proved ``>= cutoff`` is
        fathomed early, with status ``"cutoff"`` and value ``cutoff``. The dual simplex stops
        when its dual objective, a lower bound on the LP value, passes ``cutoff`` (HiGHS option
        ``objective_bound``); the outer-approximation rounds stop as soon as the LP value (itself a
        lower bound on the relaxed dual) reaches it.

        A node whose path has no optimality row (only feasibility cuts, column ``t`` free in no
        row) has no finite bound: it is solved for feasibility with ``t`` fixed at 0 and gets the
        value ``-inf``.
        """
        hm = self.hm
        # dense or CSR by size (dense_rows); the executor's workers receive CSR
        A = _node_csr(A) if not dense_rows(A.shape) else (A.toarray() if sp.issparse(A) else np.asarray(A, dtype=float))
        k = A.shape[0]
        tcol = self.tcol
        no_opt = k == 0 or not np.any(A[:, tcol] if isinstance(A, np.ndarray) else A.data[A.indices == tcol])
        self._set_cutoff(np.inf if no_opt else cutoff)
        if no_opt:
            tcols = list(range(tcol, self.ncol))
            hm.set_col_bounds(tcols, 0.0, 0.0)
            self._keep_duals = False   # multipliers of an LP with other column bounds
            try:
                out = self._solve(A, lo, hi, oa_tol, feas_tol, max_rounds)
            finally:
                hm.set_col_bounds(tcols, None, None)
                self._keep_duals = True
            if out["status"] == "optimal":
                out["value"] = -np.inf
            return out
        if self.rays and self._ray_proves_infeasible(A, lo, hi):
            self.n_ray_fathomed += 1
            return dict(status="infeasible", value=np.inf, y=None)
        thr = cutoff + 1e-7 * max(1.0, abs(cutoff))
        if np.isfinite(cutoff) and self._dual_bound(A, lo, hi, thr) >= thr:
            # the last LP's multipliers already prove the node's LP value >= the incumbent: fathomed without an LP
            # solve (the margin covers the tolerance-sized terms _dual_bound counts as 0)
            self.n_dual_fathomed += 1
            return dict(status="cutoff", value=float(cutoff), y=None)
        return self._solve(A, lo, hi, oa_tol, feas_tol, max_rounds)

    def _solve(self, A, lo, hi, oa_tol, feas_tol, max_rounds):
        hm = self.hm
        self._set_node_rows(A, lo, hi)
        out = None
        last = None  # (value, y, oa gap) of the last round whose y met the y-constraints
        n_cut_rows, cut_lo, cut_hi = 0, [], []
        res = None
        try:
            for _ in range(max_rounds):
                if time.perf_counter() >= self.deadline:
                    # out of time before this round: the previous round bounds the node, else its parent
                    out = (dict(status="optimal", value=last[0], y=last[1], oa_gap=last[2]) if last is not None
                           else dict(status="failed", value=-np.inf, y=None, message="time limit reached"))
                    break
                self._limit_lp()
                res = hm.solve()
                self.n_solves += 1
                if res.status == "error" and np.isfinite(self._cutoff) and \
                        res.model_status != "Bound on objective reached":
                    # HiGHS can stop with "Unknown" when the objective bound is set: solve without it
                    cut = self._cutoff
                    self._set_cutoff(np.inf)
                    self._limit_lp()
                    res = hm.solve()
                    self._set_cutoff(cut)
                if res.status == "infeasible":
                    out = dict(status="infeasible", value=np.inf, y=None)
                    break
                if res.model_status == "Bound on objective reached":
                    # the dual simplex proved the LP value >= cutoff (>= the incumbent): fathomed
                    out = dict(status="cutoff", value=float(self._cutoff), y=None)
                    break
                if res.status == "unbounded":
                    raise Unbounded(
                        "a GOP relaxed dual is unbounded: declare finite bounds on the relaxed-dual variables "
                        "(or on the variables their convex terms depend on)")
                if res.status != "optimal":
                    # numerical failure (HiGHS and the fallbacks): an earlier round of this node, with
                    # fewer cuts, is a relaxation and its value still bounds the node; without one the
                    # caller keeps the parent's bound ("failed")
                    out = (dict(status="optimal", value=last[0], y=last[1], oa_gap=last[2]) if last is not None
                           else dict(status="failed", value=-np.inf, y=None, message=res.message))
                    break
                x = res.x
                if res.row_duals is not None:
                    act = np.flatnonzero(np.abs(res.row_duals[:self.m_base]) > 1e-12)
                    self.last_active[act] = self.n_solves
                # LP solutions may leave the bounds by ~1e-12 (outside the domain of x log x)
                y = np.clip(x[:self.ny], self.ylb, self.yub)
                eta = x[self.ny:self.ny + self.pieces.n_eta]
                viol = self.pieces.values(y) - eta if self.pieces.n_eta else np.zeros(0)
                cviol = self.ycons.violations(y) if len(self.ycons) else np.zeros(0)
                viol = np.where(np.isnan(viol), np.inf, viol)
                # the LP meets each cut only up to its feasibility tolerance (1e-9)
                viol = np.where(viol > 2e-9, viol, 0.0)
                gap = float(np.sum(np.maximum(viol, 0.0)))
                bad_c = np.flatnonzero(cviol > feas_tol)
                if bad_c.size == 0:
                    last = (float(res.objective), y.copy(), gap)
                if (gap <= oa_tol or res.objective >= self._cutoff) and bad_c.size == 0:
                    out = dict(status="optimal", value=float(res.objective), y=y.copy(), oa_gap=gap)
                    break
                rows_A, rows_lo, rows_hi = [], [], []
                if gap > oa_tol:
                    # the largest violations first, until the rest is below half the tolerance
                    order = np.argsort(-viol)
                    rest = gap - np.cumsum(np.maximum(viol[order], 0.0))
                    cnt = int(np.searchsorted(-rest, -0.5 * oa_tol)) + 1
                    sel = np.sort(order[:max(1, cnt)])
                    sel = sel[viol[sel] > 1e-13]
                    Ac, loc = self.pieces.cuts(y, sel)
                    rows_A.append(Ac)
                    rows_lo.append(loc)
                    rows_hi.append(np.full(loc.size, np.inf))
                if bad_c.size:
                    Ac, hic = self.ycons.cuts(y, bad_c)
                    rows_A.append(Ac)
                    rows_lo.append(np.full(hic.size, -np.inf))
                    rows_hi.append(hic)
                Acut = _pad(sp.vstack(rows_A, format="csr"), self.ncol)
                lcut, hcut = np.concatenate(rows_lo), np.concatenate(rows_hi)
                hm.add_rows(_pad(Acut, hm.num_cols), lcut, hcut)
                n_cut_rows += Acut.shape[0]
                cut_lo.append(lcut)
                cut_hi.append(hcut)
                self.last_active = np.concatenate([self.last_active, np.full(Acut.shape[0], self.n_solves)])
                self.new_cuts.append((Acut, lcut, hcut))
            else:
                out = dict(status="optimal", value=float(res.objective), y=y.copy(), oa_gap=gap)
        finally:
            if n_cut_rows:
                # the cuts follow the node rows: they become base rows once the node rows are gone
                self._drop_node_rows()
                self.m_base += n_cut_rows
                self._extend_base_bounds(np.concatenate(cut_lo), np.concatenate(cut_hi))
        if n_cut_rows == 0 and res is not None and out is not None and out["status"] in ("optimal", "cutoff"):
            # (after an infeasible LP the multipliers kept before stay: they hold for any node of these base rows)
            self._keep_dual(res)
        elif n_cut_rows == 0 and out is not None and out["status"] == "infeasible":
            self._keep_ray()
        self._age_cuts()
        return out

    def take_new_cuts(self):
        cuts, self.new_cuts = self.new_cuts, []
        return cuts


#: node rows with at most this many entries (rows x columns) are dense (:func:`dense_rows`)
DENSE_NODE_ENTRIES = 100_000


def dense_rows(shape):
    """Whether node rows of this shape are held dense: up to :data:`DENSE_NODE_ENTRIES` entries (800 kB), where the
    dense products of the dual checks are faster than sparse ones (scipy's per-call cost made the K = 3 BGMM of the
    tests 30-80 % slower with CSR rows throughout); CSR beyond, where a dense matrix grows with the square of the
    depth of the node."""
    return shape[0] * shape[1] <= DENSE_NODE_ENTRIES


def _tmatvec(A, v):
    """``v @ A`` for dense ``A`` (the arithmetic of the dense rows), ``A.T @ v`` for sparse ``A``."""
    return v @ A if isinstance(A, np.ndarray) else A.T @ v


def _node_csr(A):
    """Node rows as CSR without explicit zeros and with sorted indices (the form :meth:`RDModel._set_node_rows`
    compares and writes); a dense array is converted."""
    if sp.issparse(A) and A.format == "csr" and A.has_sorted_indices and (A.data != 0).all():
        return A
    A = sp.csr_matrix(A, dtype=float, copy=True)
    A.eliminate_zeros()
    A.sort_indices()
    return A


def _changed_entries(D, P):
    """``(rows, cols)`` of the entries where the CSR matrices ``D`` and ``P`` (same shape) differ, row-major."""
    E = (D != P).tocoo()
    order = np.lexsort((E.col, E.row))
    return E.row[order].astype(np.int64), E.col[order].astype(np.int64)


def _entries(D, rows, cols):
    return np.asarray(D[rows, cols], dtype=float).ravel()


def _row_term(pi, lo, hi, tol=1e-9):
    """``sum_i pi_i b_i`` with ``b_i = lo_i`` for ``pi_i > 0``, ``hi_i`` for ``pi_i < 0``; ``-inf`` when that side is
    infinite and ``|pi_i| > tol`` (tolerance-sized multipliers against an infinite side count as 0). Used for the
    rows (multipliers, row bounds) and the columns (reduced costs, column bounds) of :meth:`RDModel._dual_bound`."""
    b = np.where(pi > 0, lo, hi)
    # an infinite side meets a multiplier of the sign that selects it, so a product is -inf or 0 * inf (nan)
    v = float(pi @ np.where(np.isinf(b) & (np.abs(pi) <= tol), 0.0, b))
    return v if v == v else -np.inf


def _pad(A, ncol):
    """``A`` (csr) widened to ``ncol`` columns with zeros (the split columns come last)."""
    A = sp.csr_matrix(A)
    if A.shape[1] == ncol:
        return A
    return sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.shape[0], ncol))


_LOCAL = threading.local()  # per worker process / thread: the persistent relaxed-dual models


def solve_batch(payload):
    """Worker entry point for a batch of nodes; picklable in and out (numpy/scipy objects only).

    ``payload = dict(key, base, log_start, log, nodes, oa_tol, cutoff)``: ``key`` names the solve;
    ``base`` is the initial relaxed-dual model (:meth:`RDModel.data`); ``log`` the cut blocks
    ``(origin, A, lo, hi)`` the master has collected, numbered from ``log_start``; ``nodes`` are
    ``(A, lo, hi)`` triples. The worker keeps its :class:`RDModel` between batches of the same
    solve (warm HiGHS basis, its own cuts) and adds the master's cut blocks it has not seen (the
    other workers' cuts are not shared: they lie in other regions and only lengthen the LP, which
    measured slower). Cuts are valid tangents wherever they come from, so a worker that misses
    some is only less tight, never wrong.

    Returns ``(results, new_cuts, token, seen)``: ``token`` identifies this worker, ``seen`` the
    log position it has applied.
    """
    key = payload["key"]
    token = f"{os.getpid()}-{threading.get_ident()}"
    cache = getattr(_LOCAL, "models", None)
    st = cache.get(key) if cache is not None else None
    log_start, log = payload["log_start"], payload["log"]
    if st is None or st[1] < log_start:
        st = [RDModel(payload["base"]), log_start]
        _LOCAL.models = {key: st}  # one solve per worker at a time: drop older models
    model, seen = st
    for i in range(seen, log_start + len(log)):
        origin, A, lo, hi = log[i - log_start]
        if origin == "master":
            model.add_base_rows(A, lo, hi)
    st[1] = log_start + len(log)
    oa_tol, cutoff = payload["oa_tol"], payload["cutoff"]
    model.deadline = payload.get("deadline", np.inf)
    results = [model.solve_node(A, lo, hi, oa_tol, cutoff=cutoff) for (A, lo, hi) in payload["nodes"]]
    return results, model.take_new_cuts(), token, st[1]
