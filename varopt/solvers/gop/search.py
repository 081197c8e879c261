"""The per-solve state of GOP: one :class:`GopSearch` per ``solve`` call holds the block model,
the relaxed-dual tree, the Lagrangians and the incumbent (the algorithm is described in
:mod:`.solver`). Nothing of a solve is kept on the registered solver.

At about 420 lines this module is over the ~400-line guide on purpose: it is one class whose
methods (node selection, primal, relaxed duals, cuts, reduction, bookkeeping) all read and
update the same search state; the pieces that do not need that state are already their own
modules (:mod:`.primal`, :mod:`.relaxed_dual`, :mod:`.cuts`, :mod:`.bounds`, :mod:`.lagrangian`).
"""
from __future__ import annotations

import heapq
import itertools
import math
import uuid
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError, SolverBugError
from ...lpqp.project import project
from .bounds import fbbt, obbt
from .clock import OutOfTime, current_time_limit, seconds_left
from .cuts import ConvexConstraints, ConvexPieces
from .expansion import Expansion, batches
from .lagrangian import BlockModel, restrict
from .local import swapped
from .primal import feasibility_primal, solve_primal
from .relax import interval_lower_bound
from .relaxed_dual import RDModel, _pad, dense_rows, solve_batch
from .symmetry import order_box
from .unbounded import Unbounded


class _Degenerate:
    """A primal problem without a strictly feasible point (treated as infeasible: the feasibility cut)."""
    status = "degenerate"


PrimalDegenerate = _Degenerate()


#: box-term coefficients of the node columns below this magnitude are rounded down (:meth:`GopSearch._box_terms`)
TINY_BOX_TERM = 1e-8


@dataclass(order=True)
class _Node:
    value: float
    seq: int
    path: tuple = field(compare=False, default=())  # ((lagrangian index, bound combination B), ...)
    blo: np.ndarray = field(compare=False, default=None)  # box of the primal block in this region
    bub: np.ndarray = field(compare=False, default=None)
    y: np.ndarray = field(compare=False, default=None)
    oa_gap: float = field(compare=False, default=0.0)
    refined: int = field(compare=False, default=0)


class GopSearch:
    name = "gop"
    #: program indices z_{r_1} <= ... <= z_{r_K} ordered in the node boxes (docs/gop.md §8c), or None
    order = None
    #: extra check of an incumbent on the user's program (a presolve that relaxes it, §2b), or None
    accept = None
    #: per-variable (split) Lagrangian rows for the separable connected variables (docs/gop.md §6b)
    split_rows = True
    #: weight of the node box's midpoint in the branching point (docs/gop.md §6, "branching point")
    mid_weight = 0.5
    #: cap of the block alternation's share of the run's work (upper bounds only, :meth:`_alternate`)
    alt_share = 0.1
    #: the work is counted, not timed (a clock share made a run without a time limit depend on the machine's load):
    #: one unit per relaxed dual, ``primal_cost`` units per primal problem of the loop, ``round_cost`` units per round
    #: of the alternation (a swapped primal problem and a primal one). Measured on the BGMMs of the tests (minimal
    #: data, point and gaussian) and a small bilinear program: a relaxed dual 0.2-1.8 ms, a primal problem of the loop
    #: 2-8 ms, a round of the alternation 30-90 ms
    primal_cost = 4
    round_cost = 50
    #: rounds one alternation call may always use (more once the run is long: alt_share of its work); this replaced
    #: 0.1 s of the clock (0.5 s made the 1 s minimal-data demo spend half its time here)
    alt_min_rounds = 2
    #: the share is halved after every call that does not improve the incumbent, down to this fraction of
    #: ``alt_share``, and restored when the incumbent improves (docs/gop.md §3)
    alt_share_floor = 1 / 16

    def __init__(self, program, part, opts, run):
        self.program, self.part, self.opts, self.run = program, part, opts, run
        self.order_note = None
        self._swapped = None
        self._alt_calls, self._alt_work = 0, 0
        #: work of the main loop so far (relaxed duals + primal_cost per primal problem), set by :meth:`_run`
        self._main_work = 0
        self._alt_share_now, self._alt_ub = self.alt_share, math.inf

    def solve(self):
        program, part, opts = self.program, self.part, self.opts
        lb, ub = program.lb.copy(), program.ub.copy()
        A, lo, hi, _ = program.linear_constraints()
        if np.any(lb > ub):
            return self._infeasible(program, "a variable has lower bound > upper bound")
        if opts.bound_tightening:
            lb, ub, infeas = fbbt(A, lo, hi, lb, ub)
            if not infeas:
                need = [j for j in part.connected if not (np.isfinite(lb[j]) and np.isfinite(ub[j]))]
                need += [j for j in part.connected if j not in need]
                # under a time limit: stops at the deadline with the bounds tightened so far (docs/gop.md, "Time
                # limits on larger models")
                lb, ub, infeas = obbt(A, lo, hi, lb, ub, sorted(set(need)), run=self.run)
            if infeas:
                return self._infeasible(program, "bound tightening over the linear constraints proved infeasibility")
        for j in part.connected:
            if not (np.isfinite(lb[j]) and np.isfinite(ub[j])):
                left = seconds_left(self.run)
                if opts.bound_tightening and left is not None and left <= 0:
                    # the time limit stopped OBBT before it bounded this variable: not the model's fault
                    raise OutOfTime("time limit reached during the bound tightening")
                nm = program.names[j]
                raise ModelStructureError(
                    f"GOP needs finite bounds on the connected variable {nm} (it multiplies relaxed-dual variables; "
                    f"the relaxed duals set it at its bounds, Saddiki, Trapp & Flaherty 2017, eq. (16)); declare bounds on {nm} "
                    f"(Pyomo: m.{nm}.setlb(...) / m.{nm}.setub(...); CVXPY: add {nm} >= ... and {nm} <= ... "
                    f"constraints or Variable(bounds=...))")
        self.bm = BlockModel(program, part)
        bm = self.bm
        self.lb, self.ub = lb, ub
        self.xlb, self.xub = lb[bm.xi].copy(), ub[bm.xi].copy()
        self.ylb, self.yub = lb[bm.yi].copy(), ub[bm.yi].copy()
        self.branchable = self._branchable()
        # separable connected variables get their own epigraph column t_p (docs/gop.md §6b)
        self.split = self.branchable if (self.split_rows and self.opts.reduction) else np.zeros(0, dtype=np.int64)
        self._build_rd_base()
        return self._run()

    def _infeasible(self, program, msg):
        return self.run.finish("infeasible", msg, lower=math.inf, upper=math.inf)

    def _build_rd_base(self):
        bm, program = self.bm, self.program
        yi, xi = bm.yi, bm.xi
        e_y = restrict(bm.obj_yy, yi, xi, np.zeros(xi.size))
        self.pieces = ConvexPieces(e_y, bm.ny, self.ylb, self.yub)
        ncol = self.pieces.ncol
        self.ncol = ncol + self.split.size  # [y, eta, t, t_1..t_m]
        self.tcol = ncol - 1
        rows, los, his, nl_exprs, nl_his = [], [], [], [], []
        for k in bm.y_cons:
            c = program.constraints[k]
            ey = restrict(c.body, yi, xi, np.zeros(xi.size))
            if ey.is_linear:
                rows.append(np.concatenate([ey.linear, np.zeros(self.ncol - bm.ny)]))
                los.append(c.lo - ey.constant)
                his.append(c.hi - ey.constant)
            else:
                nl_exprs.append(ey)
                nl_his.append(c.hi)
        self.ycons = ConvexConstraints(nl_exprs, nl_his, ncol)
        A0 = sp.csr_matrix(np.vstack(rows)) if rows else sp.csr_matrix((0, self.ncol))
        lo0, hi0 = np.array(los, dtype=float), np.array(his, dtype=float)
        # initial tangent cuts spread over the range of every atom argument
        Ac, lc = self.pieces.cuts_at_u([0.0, 0.02, 0.1, 0.3, 0.6, 1.0])
        self.base_blocks = [(A0, lo0, hi0), (Ac, lc, np.full(lc.size, np.inf))]
        lbc = np.concatenate([self.ylb, self.pieces.eta_lb, np.full(1 + self.split.size, -np.inf)])
        ubc = np.concatenate([self.yub, np.full(self.pieces.n_eta, np.inf), np.full(1 + self.split.size, np.inf)])
        self.col_lb, self.col_ub = lbc, ubc
        self.rd = RDModel(self._base_payload())
        self.rd.deadline = self._deadline()
        self._payload_cache = None
        # executor state: cut blocks collected from all solvers (origin, A, lo, hi), the log
        # position each worker has applied, and a key naming this solve in the workers
        self._key = uuid.uuid4().hex
        self._cut_log, self._log_start, self._seen = [], 0, {}

    def _base_payload(self):
        blocks = [_pad(b[0], self.ncol) for b in self.base_blocks]
        A = sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, self.ncol))
        return dict(A=A, lo=np.concatenate([b[1] for b in self.base_blocks]),
                    hi=np.concatenate([b[2] for b in self.base_blocks]), lb=self.col_lb, ub=self.col_ub,
                    pieces=self.pieces, ycons=self.ycons, n_perm=self.base_blocks[0][0].shape[0],
                    nsplit=self.split.size)

    def _add_cuts(self, cuts):
        for A, lo, hi in cuts:
            self.rd.add_base_rows(A, lo, hi)

    # ------------------------------------------------------------------ initial point
    def _initial_y(self):
        program, bm = self.program, self.bm
        y0 = program.x0[bm.yi].copy()
        rng = np.random.default_rng(self.opts.seed)
        miss = ~np.isfinite(y0)
        if miss.any():
            lo, hi = self.ylb[miss], self.yub[miss]
            r = rng.random(miss.sum())
            flo, fhi = np.isfinite(lo), np.isfinite(hi)
            lo0, hi0 = np.where(flo, lo, 0.0), np.where(fhi, hi, 0.0)  # no inf - inf below
            guess = np.where(flo & fhi, lo0 + r * (hi0 - lo0),
                             np.where(flo, lo0 + r, np.where(fhi, hi0 - r, r - 0.5)))
            y0[miss] = guess
        y0 = np.clip(y0, self.ylb, self.yub)
        # l1 projection onto the linear constraints of y alone
        A0, lo0, hi0 = self.base_blocks[0]
        ny = bm.ny
        if A0.shape[0]:
            # the time left (stopped by it: y0 unprojected; the primal problem at it is checked anyway)
            r = project(y0, A0[:, :ny], lo0, hi0, self.ylb, self.yub, norm="l1", time_limit=current_time_limit())
            if r.status == "infeasible":
                return None
            if r.status == "optimal":
                y0 = np.clip(r.x, self.ylb, self.yub)
        return y0

    # ------------------------------------------------------------------ tolerances
    def _tol(self, UB):
        o = self.opts
        t = o.rel_gap * max(abs(UB), 1e-10) if math.isfinite(UB) else 0.0
        return max(t, o.abs_gap or 0.0)

    def _contradiction(self, UB, bound):
        """The message when ``bound``, the smallest bound of the closed and open regions (which cover the space),
        lies above the incumbent ``UB`` by more than rounding: a region's Lagrangian bound is then not valid, so no
        bound of this run is (a primal problem stopped far out along an unbounded direction whose gradient only
        looked like rounding: ``max sum(log x)`` over an unbounded set). None when they are consistent."""
        if not (math.isfinite(UB) and math.isfinite(bound)):
            return None
        if bound <= UB + 10.0 * self._tol(UB) + 1e-7 * max(1.0, abs(UB)):
            return None
        return (f"GOP: the relaxed-dual bound {bound:.10g} exceeds the incumbent {UB:.10g} (of the minimisation GOP "
                "solves), so the Lagrangian bounds are not valid and the run certifies nothing; the primal problems "
                "may have stopped far out along an unbounded direction (the model may be unbounded: check for "
                "variables that need bounds)")

    def _cutoff(self, UB):
        """The value from which a relaxed dual is fathomed: half the gap tolerance below the incumbent ``UB``. A node
        proved ``>= UB - tol/2`` can lower the certified bound by at most ``tol/2``, so it is dropped and the run keeps
        the smallest such cutoff as a floor of the lower bound (``floor`` in :meth:`_run`; docs/gop.md §7)."""
        return UB - 0.5 * self._tol(UB) if math.isfinite(UB) else math.inf

    def _oa_tol(self, UB, LB):
        t = self._tol(UB) if math.isfinite(UB) else self.opts.rel_gap * max(1.0, abs(LB) if math.isfinite(LB) else 1.0)
        gap = (UB - LB) if (math.isfinite(UB) and math.isfinite(LB)) else math.inf
        # half the gap tolerance at the end; a tenth of the current gap (capped) before: a looser
        # approximation only delays pruning, tighter ones cost cut rounds (docs/gop.md §7)
        return 0.5 * max(t, min(0.1 * gap, 1e-2 * max(1.0, abs(UB)) if math.isfinite(UB) else 1.0), 1e-11)

    # ------------------------------------------------------------------ children
    def _branchable(self):
        """Connected x variables whose optimal value for fixed y lies on the side of x^k given by
        the sign of the qualifying constraint (see docs/gop.md, "search-space reduction"):
        separable in the objective (no product with another x variable, no atom shared with one)
        and absent from the dualised constraints. Local x indices."""
        bm, program = self.bm, self.program
        is_x = bm.is_x
        bad = set()
        for k in bm.dual_cons:
            bad.update(program.constraints[k].body.support().tolist())
        e = program.objective
        q = e.quadratic
        for a, b in zip(q.i.tolist(), q.j.tolist()):
            if a != b and is_x[a] and is_x[b]:
                bad.update((a, b))
        for g in e.groups():
            if hasattr(g, "starts"):
                for r in range(len(g)):
                    lo = g.starts[r]
                    hi = g.starts[r + 1] if r + 1 < len(g.starts) else g.seg.size
                    vs = [v for v in np.unique(g.A[lo:hi].indices).tolist() if is_x[v]]
                    if len(vs) > 1:
                        bad.update(vs)
            else:
                M = g.A if g.A2 is None else (abs(g.A) + abs(g.A2))
                M = sp.csr_matrix(M)[:, bm.xi]
                cnt = np.diff(M.indptr)
                for r in np.flatnonzero(cnt > 1):
                    bad.update(bm.xi[M[r].indices].tolist())
        return np.array([i for i in bm.conn_local if bm.xi[i] not in bad], dtype=np.int64)

    def _feasible(self, z):
        viol = self.program.max_violation(z)
        scale = max(1.0, float(np.abs(z).max(initial=0)))
        if viol > 1e-7 * scale:
            return False
        if viol > 1e-7 and not self._rows_within_their_scale(z):
            return False
        return self.accept is None or self.accept(z)

    def _rows_within_their_scale(self, z):
        """Every bound and row violated by at most 1e-7 max(1, |z_j| over its own variables).

        The tolerance scaled by the largest coordinate let a variable outside a row loosen that row: in the
        MINLPLib form ``objvar == f(x)`` objvar carries the objective (376 in a rewrite of ``st_e17``), so a
        point 9.3e-6 outside a row of variables about 8 was accepted and its objective, 1.15e-6 relatively under
        the optimum, was certified."""
        p = self.program
        az = np.abs(z)
        tol = 1e-7 * np.maximum(1.0, az)
        if np.any(p.lb - z > tol) or np.any(z - p.ub > tol):
            return False
        for c in p.constraints:
            g = c.body.value(z)
            v = max(c.lo - g, g - c.hi, 0.0)
            if v > 1e-7:
                sup = c.body.support()
                if v > 1e-7 * max(1.0, float(az[sup].max(initial=0.0))):
                    return False
        return True

    def _alternate(self, z, val, UB=math.inf, rounds=100):
        """Block alternation from a primal point (upper bounds only): ``y`` for fixed ``x`` (the convex
        problem with the blocks swapped), then ``x`` for that ``y``; ``(z, value)`` of the best feasible
        point that improves ``val``, or ``(None, inf)``. ``UB``: the incumbent value; the share of the run's work
        the calls may use is halved after a call that does not improve it and restored when it improves."""
        if self.bm.ny == 0:
            # the primal problem is the whole program (convex: no relaxed-dual block): its solution cannot be
            # improved by alternating, and the swapped problems re-solved it twice (a 2,000-row pinball LP in CVXPY:
            # 0.6 s of a 2.0 s solve)
            return None, math.inf
        if UB < self._alt_ub:
            self._alt_share_now = self.alt_share   # a new incumbent: its basin is worth descending
        self._alt_ub = min(self._alt_ub, UB)
        if self._swapped is None:
            try:
                self._swapped = BlockModel(self.program, swapped(self.part))
            except ModelStructureError:
                self._swapped = False
        if self._swapped is False:
            return None, math.inf
        # a heuristic for upper bounds only: its share of the run's work is capped (it solved ~170
        # swapped primal problems, 45 % of a 120 s K = 3 BGMM run, finding the incumbent once), and
        # it stops at the time limit
        if self._alt_calls and self._alt_work > self._alt_share_now * (self._main_work + self._alt_work):
            return None, math.inf
        self._alt_calls += 1
        out = (None, math.inf)
        try:
            out = self._alternate_rounds(z, val, rounds)
            return out
        finally:
            if out[1] < self._alt_ub:
                self._alt_ub, self._alt_share_now = out[1], self.alt_share
            else:
                # most later calls from points near the incumbent re-descend to it (on the K = 3 BGMM every call
                # after the incumbent was found did): less time for the next ones
                self._alt_share_now = max(0.5 * self._alt_share_now, self.alt_share * self.alt_share_floor)

    def _alternate_rounds(self, z, val, rounds):
        bm, sw, run = self.bm, self._swapped, self.run
        best, bval, cur = None, val, z.copy()
        w0 = self._main_work + self._alt_work
        cap = max(self.alt_min_rounds, self._alt_share_now * w0 / self.round_cost)
        for r in range(rounds):
            # the time limit, and this call's own share of the work (a first call from a poor point may need many
            # rounds; the lower bound must not wait for it)
            if (run.time_limit is not None and run.elapsed() >= run.time_limit) or r > cap:
                break
            try:
                self._alt_work += self.round_cost
                py = solve_primal(sw, cur[sw.yi], self.lb[sw.xi], self.ub[sw.xi])
                if py.status != "optimal":
                    break
                cur[sw.xi] = py.x
                px = solve_primal(bm, cur[bm.yi], self.xlb, self.xub)
                if px.status != "optimal":
                    break
            except (SolverBugError, np.linalg.LinAlgError, ValueError):
                break
            cur[bm.xi] = px.x
            v = self.program.objective.value(cur)
            if not (math.isfinite(v) and v < bval - 1e-12 * max(1.0, abs(bval))):
                break
            if self._feasible(cur):
                best, bval = cur.copy(), float(v)
        return best, (bval if best is not None else math.inf)

    def _order_chain(self):
        """Local x indices of the ordered representatives when they are all branchable (the box
        ordering needs the search-space reduction, docs/gop.md §8c), else None (with a note)."""
        if self.order is None:
            return None
        loc = {int(g): i for i, g in enumerate(self.bm.xi)}
        chain = [loc.get(int(v)) for v in self.order]
        if None in chain or not self.opts.reduction or not np.isin(chain, self.branchable).all():
            self.order_note = ("the ordered variables are not all branchable (search-space reduction off, or a "
                               "variable in a dualised constraint): no symmetry breaking applied")
            return None
        return np.array(chain, dtype=np.int64)

    def _split_parts(self, xk):
        """``(Dc, Da)``: rows ``p`` hold the constant and ``y``-coefficients of
        ``D_p(xk_p, y) = e(xk, y) - e(xk with x_p at its root lower bound, y)`` for the split variables
        (``e`` the objective without ``f_yy``; separable, so ``D_p`` depends on ``x_p`` and ``y`` only,
        docs/gop.md §6b)."""
        bm = self.bm
        e0 = restrict(bm.obj_r, bm.yi, bm.xi, xk)
        m = self.split.size
        Dc, Da = np.zeros(m), np.zeros((m, bm.ny))
        for p, i in enumerate(self.split.tolist()):
            xr = xk.copy()
            xr[i] = self.xlb[i]
            er = restrict(bm.obj_r, bm.yi, bm.xi, xr)
            Dc[p] = e0.constant - er.constant
            Da[p] = e0.linear - er.linear
        return Dc, Da

    def _new_lagrangian(self, lag):
        """Store Lagrangian data; returns its index. lag = (const, a, g0, G1, xk, feas)."""
        const, a, g0, G1, xk, feas = lag
        bm = self.bm
        conn = np.array([i for i in bm.conn_local if np.any(G1[i] != 0)], dtype=np.int64)
        split = self.split.size and not feas
        # split variables: their tangent terms go to their own rows with the node box (§6b)
        nonconn = np.setdiff1d(np.arange(bm.nx), np.union1d(conn, self.split) if split else conn)
        dlo, dhi = self.xlb - xk, self.xub - xk
        gnc = g0[nonconn]
        with np.errstate(invalid="ignore"):
            clo = np.where(gnc == 0, 0.0, gnc * dlo[nonconn])
            chi = np.where(gnc == 0, 0.0, gnc * dhi[nonconn])
        # a gradient at rounding level along an unbounded side is the primal solver's residual, not a direction of
        # descent; it still costs its first-order error |g| max(1, |x^k|) (the convex path's margin, docs/gop.md
        # §13e): dropping it certified max sum(log x) over an unbounded set as optimal where the solver stopped at
        # x ~ 1e8 with |g| ~ 1e-8
        tiny = 1e-7 * max(1.0, float(np.abs(g0).max(initial=0)))
        noise = -np.abs(gnc) * np.maximum(1.0, np.abs(xk[nonconn]))
        clo = np.where(np.isinf(clo) & (np.abs(gnc) <= tiny), noise, clo)
        chi = np.where(np.isinf(chi) & (np.abs(gnc) <= tiny), noise, chi)
        base_const = const + float(np.sum(np.minimum(clo, chi)))
        if not np.isfinite(base_const):
            # the user's model, not an invariant: min sum(exp(x)) + x over a free x (unbounded below) gets here; an
            # Unbounded lets the solver look for a certificate ray and otherwise names the missing bounds
            bad = [self.program.names[bm.xi[int(j)]] for j in nonconn[~np.isfinite(np.minimum(clo, chi))]][:5]
            raise Unbounded(f"GOP: the Lagrangian is unbounded below in the primal variable(s) {', '.join(bad)}, "
                            "which have no finite bounds (the model may be unbounded); declare bounds on them")
        ny, ncol = bm.ny, self.ncol
        c = conn.size
        Q = np.zeros((c, ncol))
        Q[:, :ny] = G1[conn]
        # use: the connected variables whose box term is in the Lagrangian row (all of them without split rows)
        L = dict(const=base_const, a=a, g0c=g0[conn], G1c=G1[conn], xkc=xk[conn], conn=conn,
                 feas=feas, qrows=sp.csr_matrix(Q), split=False, use=np.arange(c))
        if split:
            Dc, Da = self._split_parts(xk)
            pos = {int(i): q for q, i in enumerate(conn.tolist())}
            cpos = np.array([pos.get(int(i), -1) for i in self.split], dtype=np.int64)
            cq, other = np.flatnonzero(cpos >= 0), np.flatnonzero(cpos < 0)
            var = self.split[other]
            # the index sets of the split rows, for the vectorised row build of _node_rows
            rows = dict(rows=np.arange(self.split.size), conn=cq, cpos=cpos[cq], other=other, var=var,
                        g=g0[var].copy(), xb=xk[var].copy())
            L.update(split=True, const=base_const - float(Dc.sum()), a=a - Da.sum(axis=0), Dc=Dc, Da=Da,
                     split_rows=rows, rest=~np.isin(conn, self.split), use=np.flatnonzero(~np.isin(conn, self.split)))
        self.lags.append(L)
        return len(self.lags) - 1

    def _node_rows(self, path, blo, bub):
        """All rows of a node over the columns ``[y, eta, t, t_p, s]`` (:meth:`_node_rows_full`), as a CSR matrix with
        the row bounds: for every (k, B) on its path, the Lagrangian row, the rows defining its node columns
        ``s_j = sigma_j g^k_j(y) >= 0`` (the qualifying constraints) and the split rows. A sibling of the last node built
        (the same ancestors, the same new Lagrangian) starts from that node's blocks: an ancestor's block is copied and
        rewritten only where its node-column entries use a box end of a variable whose box differs
        (:meth:`_update_ancestor_rows`), the last block is built anew. The rows are the same numbers as
        :meth:`_node_rows_full` gives (the same operations per entry)."""
        last = self._rows_last
        if (last is None or len(path) != len(last[0]) or not path or path[-1][0] != last[0][-1][0]
                or any(a is not b for a, b in zip(path[:-1], last[0][:-1]))):
            blocks = [self._block(k, B, blo, bub) for k, B in path]
        else:
            _, lblo, lbub, prev = last
            changed = (blo != lblo) | (bub != lbub)
            blocks = [self._update_ancestor_rows(blk, k, B, blo, bub, changed) for blk, (k, B) in
                      zip(prev[:-1], path[:-1])]
            blocks.append(self._block(*path[-1], blo, bub))
        self._rows_last = (path, blo, bub, blocks)
        return self._assemble(blocks)

    def _block(self, k, B, blo, bub):
        """The block of rows of ``(k, B)`` for the box ``[blo, bub]``: ``[M, lo, hi, coo]`` with ``M`` over the columns
        ``[y, eta, t, t_p]`` and then the block's own node columns (its place among the node's columns is set by
        :meth:`_assemble`); ``coo`` = (rows, columns, values) of its nonzeros, filled in by :meth:`_assemble` when it
        first needs them. A block is not changed once built (:meth:`_update_ancestor_rows` copies it)."""
        T = self._row_template(k)
        c = self.lags[k]["conn"].size
        M = np.zeros((T[0].shape[0], self.ncol + c))
        M[:, :self.ncol] = T[0]
        lo = T[1].copy()
        self._fill_block(M, lo, 0, self.ncol, k, B, blo, bub)
        return [M, lo, T[2], None]

    def _assemble(self, blocks):
        """``(A, lo, hi)`` of a node from its blocks: the blocks' rows stacked, each block's node columns placed after
        the base columns and those of the blocks above it. ``A`` is dense while it is small
        (:func:`.relaxed_dual.dense_rows`: the relaxed-dual model's arithmetic on it is then that of a dense matrix,
        the fastest at the depths of the BGMMs), CSR beyond, so that the storage grows with the nonzeros, linearly in
        the depth: a dense matrix is depth x depth (350 Lagrangians deep on Haverly's pooling problem in the Floudas
        form, 700 x 356 per copy, with up to six copies alive and one per child of a batch)."""
        if not blocks:
            return np.zeros((0, self.ncol)), np.zeros(0), np.zeros(0)
        nrow = sum(b[0].shape[0] for b in blocks)
        ncol = self.ncol + sum(b[0].shape[1] - self.ncol for b in blocks)
        lo, hi = np.concatenate([b[1] for b in blocks]), np.concatenate([b[2] for b in blocks])
        if dense_rows((nrow, ncol)):
            A = np.zeros((nrow, ncol))
            r0, col = 0, self.ncol
            for M, _, _, _ in blocks:
                nb, c = M.shape[0], M.shape[1] - self.ncol
                A[r0:r0 + nb, :self.ncol] = M[:, :self.ncol]
                A[r0:r0 + nb, col:col + c] = M[:, self.ncol:]
                r0, col = r0 + nb, col + c
            return A, lo, hi
        rows, cols, vals = [], [], []
        r0, col = 0, self.ncol
        for b in blocks:
            M = b[0]
            if b[3] is None:
                rr, cc = np.nonzero(M)
                b[3] = (rr, cc, M[rr, cc])
            r, c, v = b[3]
            rows.append(r + r0)
            cols.append(np.where(c < self.ncol, c, c + (col - self.ncol)))
            vals.append(v)
            r0 += M.shape[0]
            col += M.shape[1] - self.ncol
        r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
        indptr = np.zeros(r0 + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=r0), out=indptr[1:])
        A = sp.csr_matrix((v, c, indptr), shape=(r0, col))
        A.has_sorted_indices = True   # row-major within each block, base columns before the block's node columns
        return A, lo, hi

    def _update_ancestor_rows(self, blk, k, B, blo, bub, changed):
        """The block ``blk`` of ``(k, B)`` (:meth:`_block`) for the box ``[blo, bub]``: itself when no entry uses the
        box of a variable with ``changed`` set, else a copy with those entries (the node-column entries of its
        Lagrangian row and split rows; the bound of a split row of a variable not connected in ``k``) rewritten as
        :meth:`_fill_block` computes them."""
        L = self.lags[k]
        conn = L["conn"]
        c = conn.size
        hit = changed[conn]
        if L["split"]:
            s = L["split_rows"]
            hit_cq = hit[s["cpos"]]
            hit_nc = changed[s["var"]]
            row0 = L["use"].size and hit[L["use"]].any()
            if not (hit_cq.any() or hit_nc.any() or row0):
                return blk
        elif not hit.any():
            return blk
        else:
            row0 = True
        M, lo = blk[0].copy(), blk[1].copy()
        col = self.ncol
        e = self._box_terms(L, B, blo, bub)
        if row0:
            self._lagrangian_row(M, 0, col, L, e)
        if L["split"]:
            self._split_rows(M, lo, 1 + c, col, L, e, blo, bub, hit_cq, hit_nc)
        return [M, lo, blk[2], None]

    @staticmethod
    def _box_terms(L, B, blo, bub):
        """``sigma_j (x^B_j - xbar_j)`` for the connected variables of ``L``: the box term ``g_j(y)(x^B_j - xbar_j)``
        of a row is this times the node column ``s_j = sigma_j g_j(y)`` (``sigma_j = -1`` for ``B_j`` upper, else 1)."""
        conn = L["conn"]
        e = np.where(B, -1.0, 1.0) * (np.where(B, bub[conn], blo[conn]) - L["xkc"])
        tiny = np.abs(e) < TINY_BOX_TERM
        if tiny.any():
            # HiGHS drops matrix entries of magnitude <= 1e-9 (small_matrix_value), which would drop the term e_j s_j
            # whatever its sign: round a tiny e_j down instead (to 0 when positive, to -TINY_BOX_TERM when
            # negative). Every row holding e_j s_j bounds a Lagrangian from below by it (t >= .. + e_j s_j, or
            # 0 >= .. + e_j s_j) and s_j >= 0, so a smaller e_j only weakens the row: the bound stays valid
            e = np.where(tiny, np.where(e < 0, -TINY_BOX_TERM, 0.0), e)
        return e

    @staticmethod
    def _lagrangian_row(M, r, col, L, e):
        """The node-column entries of the Lagrangian row ``r`` of ``L`` (the box terms of its connected variables
        without split rows; ``e`` from :meth:`_box_terms`)."""
        use = L["use"]
        if use.size:
            M[r, col + use] = e[use] if L["feas"] else -e[use]

    def _fill_block(self, M, lo, r, col, k, B, blo, bub):
        """Fill in the block of ``(k, B)`` at row ``r`` (holding its template; node columns from ``col``) for the box
        ``[blo, bub]``; returns ``(row, column)`` after the block."""
        L = self.lags[k]
        c = L["conn"].size
        e = self._box_terms(L, B, blo, bub)
        self._lagrangian_row(M, r, col, L, e)
        if c:
            # the qualifying rows g_j(y) - sigma_j s_j = 0, i.e. G1_j y - sigma_j s_j = -g0_j (bounds in the template)
            j = np.arange(c)
            M[r + 1 + j, col + j] = np.where(B, 1.0, -1.0)
        r += 1 + c
        if L["split"]:
            self._split_rows(M, lo, r, col, L, e, blo, bub)
            r += self.split.size
        return r, col + c

    def _split_rows(self, M, lo, r0, col, L, e, blo, bub, conn_sel=None, other_sel=None):
        """The box-dependent entries of the split rows of ``L`` from row ``r0``: ``t_p >= D_p(xbar_p, y) + g_p(y)
        (x^B_p - xbar_p)`` with the node box (docs/gop.md §6b), whose box term is ``e_q s_q`` (node column ``col + q``
        of the variable's qualifying constraint ``q``), all split variables at once; ``conn_sel`` / ``other_sel``
        (boolean masks over the connected / not connected split variables) restrict the rewrite to those rows
        (:meth:`_update_ancestor_rows`)."""
        s = L["split_rows"]
        cq, q = s["conn"], s["cpos"]
        if conn_sel is not None:
            cq, q = cq[conn_sel], q[conn_sel]
        if cq.size:
            M[r0 + cq, col + q] = -e[q]
        nc, g, xb, i = s["other"], s["g"], s["xb"], s["var"]
        if other_sel is not None:
            nc, g, xb, i = nc[other_sel], g[other_sel], xb[other_sel], i[other_sel]
        if nc.size:  # not connected in this Lagrangian: its gradient is constant in y
            with np.errstate(invalid="ignore"):
                off = np.where(g != 0, np.minimum(g * (blo[i] - xb), g * (bub[i] - xb)), 0.0)
            lo[r0 + nc] = L["Dc"][nc] + off

    def _node_rows_full(self, path, blo, bub):
        """All rows of a node: each Lagrangian's block from its template (:meth:`_row_template`: the entries of the
        columns ``[y, eta, t, t_p]`` and the row bounds that depend neither on ``B`` nor on the box), its node columns
        after the base columns, filled in by :meth:`_fill_block`. The relaxed dual is the LP of docs/gop.md §5/§6b with
        every qualifying constraint ``sigma_j g_j(y) >= 0`` written as the node column ``s_j = sigma_j g_j(y) >= 0``
        and every box term ``g_j(y)(x^B_j - xbar_j)`` as ``sigma_j (x^B_j - xbar_j) s_j`` (§7, "node columns"): a node
        change then rewrites one entry per box term instead of a dense row of ``y`` coefficients. Built from scratch
        (no reuse of the last node's blocks); :meth:`_node_rows` gives the same rows."""
        return self._assemble([self._block(k, B, blo, bub) for k, B in path])

    def _row_template(self, k):
        """``(M, lo, hi)``: the block of rows Lagrangian ``k`` adds to a node over the columns ``[y, eta, t, t_p]``, with
        every entry that depends neither on the bound combination ``B`` nor on the node box (all of them but the split
        rows' bounds of variables not connected in ``k``: the box terms sit in the node columns, :meth:`_fill_block`).
        Built once per Lagrangian."""
        L = self.lags[k]
        T = L.get("template")
        if T is not None:
            return T
        ny, tcol, ms = self.bm.ny, self.tcol, self.split.size
        c = L["conn"].size
        nb = 1 + c + (ms if L["split"] else 0)
        M = np.zeros((nb, self.ncol))
        lo, hi = np.full(nb, -np.inf), np.full(nb, np.inf)
        if L["feas"]:
            M[0, :ny] = L["a"]
            hi[0] = -L["const"]
        else:
            M[0, :ny] = -L["a"]
            M[0, tcol] = 1.0
            lo[0] = L["const"]
        M[1:1 + c, :ny] = L["G1c"]
        lo[1:1 + c] = hi[1:1 + c] = -L["g0c"]
        if L["split"]:
            ar = L["split_rows"]["rows"]
            M[1 + c + ar, tcol + 1 + ar] = 1.0
            M[1 + c + ar, :ny] = -L["Da"]
            cq = L["split_rows"]["conn"]
            lo[1 + c + cq] = L["Dc"][cq]
        L["template"] = T = (M, lo, hi)
        return T

    def _children(self, node, k):
        """(path, box lo, box hi) of the children of ``node`` for the new Lagrangian ``k``, generated
        lazily (2^c of them: nothing proportional to 2^c is allocated up front, :mod:`.expansion`)."""
        L = self.lags[k]
        conn = L["conn"]
        c = conn.size
        br = np.isin(conn, self.branchable) if self.opts.reduction else np.zeros(c, dtype=bool)
        xk = L["xkc"]
        # x_i(y) lies between the box end selected by B and x^k (docs/gop.md): the two boxes of every branchable
        # connected variable, computed once (each variable is connected once, so the children's boxes combine them)
        jb = np.flatnonzero(br)
        ib = conn[jb]
        lo_up = np.minimum(np.maximum(node.blo[ib], xk[jb]), node.bub[ib])    # B_j = 1: x_i >= x^k_i
        hi_dn = np.maximum(np.minimum(node.bub[ib], xk[jb]), node.blo[ib])    # B_j = 0: x_i <= x^k_i
        shifts = (c - 1 - np.arange(c)).astype(np.int64)
        for g in range(1 << c):
            # Gray-code order: consecutive children differ in one qualifying constraint, so the
            # warm-started LP of the next child starts close to its optimum
            gc = g ^ (g >> 1)
            B = (((np.int64(gc) >> shifts) & 1).astype(bool) if c < 63
                 else np.array([(gc >> (c - 1 - j)) & 1 for j in range(c)], dtype=bool))
            blo, bub = node.blo.copy(), node.bub.copy()
            Bb = B[jb]
            blo[ib] = np.where(Bb, lo_up, blo[ib])
            bub[ib] = np.where(Bb, bub[ib], hi_dn)
            if self.chain is not None and not order_box(self.chain, blo, bub):
                # no ordered point in the box: the symmetric image of the optimum lies elsewhere (§8c)
                self.n_sym_pruned += 1
                yield None
                continue
            yield node.path + ((k, B),), blo, bub

    def _deadline(self):
        """``time.perf_counter()`` at which the run's time limit runs out (inf without one)."""
        tl = self.run.time_limit
        return self.run.t0 + tl if tl is not None else np.inf

    def _solve_nodes(self, node_rows, oa_tol, cutoff=np.inf):
        """node_rows: list of full (A, lo, hi) for each node -> list of result dicts.

        With an executor the nodes go out in one contiguous chunk per worker (neighbours in the
        Gray-code order share most rows, so the worker's warm LP stays close); workers keep their
        relaxed-dual model between iterations and receive only the cut blocks they have not seen
        (:func:`.relaxed_dual.solve_batch`)."""
        ex = self.opts.executor
        if ex is None or len(node_rows) == 1:
            res = [self.rd.solve_node(A, lo, hi, oa_tol, cutoff=cutoff) for (A, lo, hi) in node_rows]
            self._log_cuts("master", self.rd.take_new_cuts())
            return res
        nw = getattr(ex, "_max_workers", None) or 2
        nchunk = min(len(node_rows), max(2, nw))
        bounds = np.linspace(0, len(node_rows), nchunk + 1).round().astype(int)
        # sparse rows on the wire (the dense node rows of a wide block are mostly zeros)
        chunks = [[(sp.csr_matrix(A), lo, hi) for A, lo, hi in node_rows[bounds[i]:bounds[i + 1]]]
                  for i in range(nchunk)]
        if self._payload_cache is None:
            self._payload_cache = self.rd.data()  # the base model before any cut: sent with every batch
        # log entries every known worker has applied need not be sent again (unknown workers
        # start from the whole log)
        start = min(self._seen.values()) if len(self._seen) >= nw else 0
        start = max(start, self._log_start)
        log = self._cut_log[start - self._log_start:]
        payloads = [dict(key=self._key, base=self._payload_cache, log_start=start, log=log, nodes=ch,
                         oa_tol=oa_tol, cutoff=cutoff, deadline=self._deadline()) for ch in chunks]
        outs = list(ex.map(solve_batch, payloads))
        results = []
        for res, cuts, token, seen in outs:
            results.extend(res)
            self._seen[token] = seen
            self._add_cuts(cuts)
        return results

    def _log_cuts(self, origin, cuts):
        if self.opts.executor is None:
            return
        self._cut_log.extend((origin, A, lo, hi) for A, lo, hi in cuts)

    # ------------------------------------------------------------------ main loop
    def _run(self):
        opts, bm, program = self.opts, self.bm, self.program
        run = self.run
        UB, LB = math.inf, -math.inf
        # the smallest cutoff (or value) at which a relaxed dual below the incumbent was fathomed: a bound on the
        # regions dropped that way (_cutoff), so the lower bound never exceeds it
        floor = math.inf
        # the smallest bound of any region closed so far, also above the incumbent: the closed and open regions
        # cover the space, so their smallest bound above the incumbent contradicts it (_contradiction)
        closed = math.inf
        best_z, run_best = None, math.inf
        heap = []
        seq = itertools.count()
        n_sub = 0
        y = self._initial_y()
        if y is None:
            return self._infeasible(program, "the linear constraints of the relaxed-dual block are infeasible")
        # root: the whole of Y; its y serves a child whose relaxed dual fails (pushed with its parent's y)
        node = _Node(-math.inf, next(seq), (), self.xlb.copy(), self.xub.copy(), y)
        self.lags = []
        self._rows_last = None   # (path, blo, bub, blocks) of the last node built by _node_rows
        self.chain, self.n_sym_pruned, self.n_failed = self._order_chain(), 0, 0
        if self.chain is not None and not order_box(self.chain, node.blo, node.bub):
            raise SolverBugError("GOP: the symmetry ordering left the root box empty")
        self.alpha = getattr(self, "alpha_override", 0.05)
        self.n_primal_infeasible = 0
        self.n_primal_degenerate = 0
        for it in run.iterations():
            # ---- step 1: primal at y
            try:
                pr = solve_primal(bm, y, self.xlb, self.xub)
            except ModelStructureError:
                if not math.isfinite(UB):
                    raise   # the model's own primal problem has no strict interior: the user's to fix (message)
                # a primal problem without a strict interior at a y the relaxed duals chose, after primal problems
                # that had one (MINLPLib ex6_1_4 in mode='gop': three equalities in two x at that y, their one point
                # on a bound, 1.4 s into the run). The feasibility problem's cut holds for every feasible (x, y)
                # whatever y is, so it replaces the primal's cut here; only this y's upper bound is lost
                pr = PrimalDegenerate
            feas = False
            if pr.status == "optimal":
                z = np.zeros(program.n)
                z[bm.xi], z[bm.yi] = pr.x, y
                val = program.objective.value(z)
                if math.isnan(val):
                    raise SolverBugError("GOP: the objective is NaN at a primal solution")
                if self._feasible(z) and val < UB:
                    UB, best_z = float(val), z
                if val < UB + 1e-2 * abs(UB) or not math.isfinite(UB):
                    self._main_work = n_sub + self.primal_cost * (it + self.n_primal_infeasible)
                    zl, vl = self._alternate(z, val, UB)
                    if zl is not None and vl < UB:
                        UB, best_z = vl, zl
                if best_z is not None and UB < run_best:
                    run_best = UB
                    run.incumbent(best_z, objective=UB, upper=UB)
            else:
                self.n_primal_infeasible += 1
                self.n_primal_degenerate += pr is PrimalDegenerate
                pr = feasibility_primal(bm, y, self.xlb, self.xub)
                feas = True
            if run.out_of_time():
                # the primal problem used the time left: the Lagrangian and the node's relaxed duals would run past
                # the limit (0.3-0.5 s on foulds5 in the pq form, docs/gop.md §13m). LB, taken while this node was
                # on the heap, stays valid; the primal's point is already the incumbent if it is one
                break
            xbar = pr.x.copy()
            if opts.reduction and self.branchable.size:
                # linearise the branchable variables at a point in the middle part of the node box so
                # that every split shrinks the box geometrically (docs/gop.md, "branching point")
                br = self.branchable
                w = node.bub[br] - node.blo[br]
                mid = 0.5 * (node.blo[br] + node.bub[br])
                xbar[br] = (1.0 - self.mid_weight) * xbar[br] + self.mid_weight * mid
                xbar[br] = np.clip(xbar[br], node.blo[br] + self.alpha * w, node.bub[br] - self.alpha * w)
            const, a, g0, G1 = bm.lagrangian(xbar, y, pr.lam, feasibility=feas)
            k = self._new_lagrangian((const, a, g0, G1, xbar, feas))
            # ---- steps 2-3: children of the selected node
            # children get a loose outer approximation (one LP each, cuts only for large errors);
            # the node selected next is refined to the tight tolerance before it is expanded
            ot = self._oa_tol(UB, node.value)
            oa_tol = max(ot, 0.25 * (UB - node.value)) if (math.isfinite(UB) and math.isfinite(node.value)) else max(ot, 1.0)
            exp = Expansion(run, self.lags[k]["conn"].size, [program.names[bm.xi[i]] for i in self.lags[k]["conn"]])
            n_batch = 0
            for kids in batches(self._children(node, k), opts.executor):
                n_all = len(kids)
                kids = [c for c in kids if c is not None]
                full = [self._node_rows(path, blo, bub) for (path, blo, bub) in kids]
                cut = self._cutoff(UB)
                results = self._solve_nodes(full, oa_tol, cut) if full else []
                n_sub += len(results)
                n_batch += len(results)
                for ((path, blo, bub), r) in zip(kids, results):
                    if r["status"] == "failed":
                        # the LP solvers failed: the parent's value bounds the child's region, and any y
                        # serves for the next primal problem and Lagrangian
                        self.n_failed += 1
                        if node.value < UB:
                            heapq.heappush(heap, _Node(node.value, next(seq), path, blo, bub, node.y, 0.0, 1))
                        continue
                    if r["status"] == "cutoff":
                        floor = min(floor, r["value"])   # the LP value is proved >= the cutoff
                        closed = min(closed, r["value"])
                        continue
                    if r["status"] != "optimal":
                        continue  # infeasible region: fathomed
                    v = max(r["value"], node.value)  # children only add constraints
                    if v >= cut:
                        floor = min(floor, v) if v < UB else floor
                        closed = min(closed, v)
                        continue
                    heapq.heappush(heap, _Node(v, next(seq), path, blo, bub, r["y"], r.get("oa_gap", 0.0)))
                if exp.tick(n_all) and exp.done < exp.total:
                    # out of time inside the expansion: the parent stays open (its value bounds its
                    # whole region), so the lower bound below stays valid
                    heapq.heappush(heap, node)
                    break
            # ---- step 4: lowest relaxed dual
            while True:
                # nodes pushed before the incumbent improved may lie above it: the bound is the smaller
                LB = min(heap[0].value, UB, floor) if heap else min(UB if math.isfinite(UB) else math.inf, floor)
                tol = self._tol(UB)
                if not heap or UB - LB <= tol:
                    break
                top = heap[0]
                ot = self._oa_tol(UB, LB)
                if top.oa_gap > ot and top.oa_gap > 1e-12 and top.refined < 1:
                    # refine a node whose outer approximation was loose before expanding it
                    heapq.heappop(heap)
                    cut = self._cutoff(UB)
                    rr = self._solve_nodes([self._node_rows(top.path, top.blo, top.bub)], ot, cut)[0]
                    n_sub += 1
                    top.refined += 1
                    if rr["status"] == "failed":
                        self.n_failed += 1
                        heapq.heappush(heap, top)  # unchanged: its value still bounds its region
                    elif rr["status"] == "cutoff":
                        floor = min(floor, rr["value"])
                        closed = min(closed, rr["value"])
                    elif rr["status"] == "optimal":
                        v = max(rr["value"], top.value)
                        if v >= cut:
                            floor = min(floor, v) if v < UB else floor
                            closed = min(closed, v)
                        else:
                            top.value, top.y, top.oa_gap = v, rr["y"], rr.get("oa_gap", 0.0)
                            top.seq = next(seq)
                            heapq.heappush(heap, top)
                    continue
                break
            run.incumbent(lower=LB)
            run.record(lower=LB, upper=UB, objective=UB if math.isfinite(UB) else None,
                       n_subproblems=n_batch, n_open=len(heap))
            if run.status == "time_limit":
                break
            if not heap or UB - LB <= self._tol(UB):
                bad = self._contradiction(UB, min(closed, heap[0].value if heap else math.inf))
                if bad is not None:
                    run.stop("numerical", bad)
                    LB = -math.inf
                elif math.isfinite(UB):
                    run.stop("optimal")
                    LB = min(LB, UB)
                else:
                    run.stop("infeasible", "every relaxed-dual region is infeasible")
                break
            if run.limit_reached():
                break
            node = heapq.heappop(heap)
            y = node.y
        info = dict(partition=self.part.describe(), connected=[program.names[i] for i in self.part.connected],
                    primal_block=[program.names[i] for i in self.part.x], n_subproblems=n_sub,
                    infeasible_primals=self.n_primal_infeasible)
        if self.n_primal_degenerate:
            info["degenerate_primals"] = self.n_primal_degenerate   # counted in infeasible_primals too
        if self.chain is not None:
            info["symmetry_pruned_regions"] = self.n_sym_pruned
        if self.n_failed:
            info["failed_relaxations"] = self.n_failed
        if run.status == "infeasible":
            return run.finish(lower=math.inf, upper=math.inf, info=info)
        if LB == -math.inf:
            # stopped before a relaxed dual bounded the root (a short time limit): the interval bound of the
            # objective over the tightened box, which needs no LP, is still a valid bound
            LB = min(interval_lower_bound(program, self.lb, self.ub), UB)
        return run.finish(x=best_z, objective=UB if math.isfinite(UB) else None, lower=LB,
                          upper=UB if math.isfinite(UB) else None, info=info)
