r"""GOP's tree mode: spatial branch-and-bound over the variables of the nonconvex terms.

Floudas (2000, ch. 3) embeds the primal / relaxed-dual iteration in a branch-and-bound tree
over the domains of the connected variables. This mode keeps the primal problems of GOP for the
upper bounds and uses, as node relaxation, the McCormick relaxation of the lifted program
(:mod:`.relax`), which shrinks to the program itself as the boxes shrink:

* **node**: a box ``[l, u]``; FBBT through the linear and nonlinear rows with the incumbent
  cutoff ``f <= UBD`` (:mod:`.tighten`); the relaxation LP (HiGHS) with tangent cuts added at
  its solution until the convex atoms are approximated to the gap tolerance. Its value is a
  lower bound of the program on the box (relax.py); infeasible LP => no feasible point.
  OBBT with the cutoff at depth <= 3 and deeper while it pays; after the LP, reduced-cost
  tightening with its duals (Ryoo & Sahinidis 1996; :mod:`.dualbt`) shrinks the box the children
  inherit (docs/gop.md §8d).
* **upper bounds**: the relaxation point's relaxed-dual block ``y`` fixes GOP's primal problem
  (convex in ``x``); the ``x`` found fixes the swapped primal problem (convex in ``y``); each
  point is checked against the original program before it becomes the incumbent.
* **branching**: the variable carrying the largest relaxation error (``|W_ij - z_i z_j|``,
  secant gaps, ``|P - z_w T|``) weighted by its relative width, preferring the connected
  variable of a product; split at the relaxation value pulled towards the middle so every split
  removes at least 10 % of the width.
* **selection**: best bound first; nodes with bound ``>= UBD - tol`` are pruned.

Validity: the children's boxes cover the parent's; a pruned node has no point better than
``UBD - tol``; the lower bound reported is the minimum over the open nodes and the pruned
ones, so ``status == "optimal"`` means ``UBD - LBD <= tol`` exactly as in the plain mode.
"""
from __future__ import annotations

import heapq
import itertools
import math

import numpy as np
import scipy.sparse as sp

from ...lpqp import HighsModel
from .convex_part import ConvexPart
from .local import LocalSearch
from .dualbt import reduced_cost_bounds, weak_dual_bound
from .oa_budget import atom_prices, atoms_to_cut
from .norm_cones import NormCones
from .objective_bounds import ObjectiveBounds
from .relax import Lifted, TangentPool, rows_to_csr
from .tighten import Tightener
from .unbounded import Unbounded


#: column bounds larger than this on their inner side are left out of the node LP (:meth:`GopTree._lp`)
_HIGHS_BIG = 1e18


def _split_unbounded(lo, hi, v):
    """A finite split point of an interval with an infinite end, beyond the relaxation value ``v``."""
    if math.isfinite(lo):
        return max(v, lo) + max(1.0, abs(v))
    if math.isfinite(hi):
        return min(v, hi) - max(1.0, abs(v))
    return v


class GopTree:
    name = "gop"
    #: nodes down to this depth get OBBT with the incumbent cutoff (a tighter box near the root
    #: pays over its whole subtree; deeper, FBBT alone is cheaper)
    obbt_depth = 3
    #: below obbt_depth, OBBT continues while one node's OBBT removes at least this much relative width
    #: (summed over the variables of the products)
    obbt_min_gain = 0.5
    #: skip the OBBT LPs that an earlier LP point of the same round shows cannot move a bound
    obbt_filter = True
    #: branching point: the relaxation value moved ``1 - branch_alpha`` of the way to the middle, at
    #: least ``branch_clamp`` of the width from both ends
    branch_alpha = 0.8
    branch_clamp = 0.1
    #: alternating minimisation before the root OBBT (:meth:`_root_heuristic`) on programs with at least this
    #: many product terms (or too many variables for SLSQP), within this share of the time left, or this many
    #: rounds in total without a time limit (a count, not seconds: the same seed gives the same incumbent on a
    #: loaded machine), from up to this many starts
    root_min_products = 400
    root_share = 0.75
    root_rounds = 300
    root_starts = 4
    #: share of the time left that the root OBBT may use under a time limit
    obbt_share = 0.5
    #: tangent-cut rounds of a node LP: at most ``cut_rounds``, and only while a round raises the value by at least
    #: ``cut_min_gain`` of its distance to the cutoff (:meth:`_cuts_pay`)
    cut_rounds = 12
    cut_min_gain = 0.01
    #: rounds whose only cuts are cone cuts (norm_cones.py) go on while they raise the bound at all, up to this
    #: many rounds in all: Kelley's cuts of a 20-dimensional cone gain little per round, and stopping them at
    #: cut_min_gain sent the 100 x 20 square-root lasso to 347 nodes (1,288 LPs, 7.5 s) instead of 9 (0.6 s)
    cone_rounds = 100
    #: the scheduled local searches (first 16 nodes, every 8th) end with an SLSQP polish on programs with at most
    #: this many variables (larger ones: at the first node only, and while no incumbent exists)
    polish_scheduled_vars = 100
    #: rows from the convex part of an indefinite quadratic objective (:mod:`.convex_part`)
    convex_part = True

    def __init__(self, program, part, opts, run, lifted=None):
        self.program, self.part, self.opts, self.run = program, part, opts, run
        lifted = lifted if lifted is not None else Lifted(program)
        # 2-norms in convex position: cones relaxed by gradient cuts, not their equality by McCormick (norm_cones.py);
        # the local search keeps the exact rows
        self.cones = NormCones.build(program)
        self.lf = lifted if self.cones is None else Lifted(self.cones.relaxed)
        self.tight = Tightener(self.lf)
        self.obounds = ObjectiveBounds(self.lf)
        self.conn = np.zeros(program.n, dtype=bool)
        self.conn[part.connected] = True
        self.local = LocalSearch(program, part, lifted)
        self.local.stop = self._out_of_time   # never true without a time limit
        self.pool = TangentPool(self.lf.nT)  # tangent cuts, valid everywhere
        # the convex part of an indefinite quadratic objective, kept whole (convex_part.py)
        self.cpart = ConvexPart.build(program, self.lf) if self.convex_part else None
        self.n_lp = 0
        self.n_lp_failed = 0
        self.n_unproved_infeasible = 0   # node LPs HiGHS called infeasible without a dual ray that proves it
        self.lp_timed_out = False   # a node LP stopped by the time left (its node closed with its parent's bound)
        self.n_rc_tightened = 0  # bounds moved by reduced-cost tightening
        self._last_lp = None
        self.n_widened = 0   # nodes bounded by their widened LP (_widened_bound)
        self._last_duals = None
        self._free_widths = None  # largest finite widths of variables unbounded at the root (_reference_widths)
        #: disjunctions that split the root box (:meth:`_root_boxes`), set by the solver
        self.root_split = None

    def _out_of_time(self):
        tl = self.run.time_limit
        return tl is not None and self.run.elapsed() >= tl

    def _limit_lp(self, hm, stop=math.inf):
        """Give the LP ``hm`` the time left (OBBT's LPs: one of them on a 300-variable NMF took 1.1 s, and the
        clock was checked only between them). An LP stopped by it has no optimal status and is skipped:
        the bounds already found stay valid."""
        tl = self.run.time_limit
        end = min(stop, tl if tl is not None else math.inf)
        if math.isfinite(end):
            hm.set_time_limit(max(1e-3, end - self.run.elapsed()))
        # an LP stopped by the iteration limit is a failed node LP (its parent's bound) or a skipped OBBT bound,
        # both valid
        hm.limit_simplex_iterations()

    # ------------------------------------------------------------------ tolerances
    def _tol(self, UB):
        o = self.opts
        t = o.rel_gap * max(abs(UB), 1e-10) if math.isfinite(UB) else 0.0
        return max(t, o.abs_gap or 0.0)

    # ------------------------------------------------------------------ setup
    def _product_vars(self):
        lf = self.lf
        v = set(lf.W.ravel().tolist()) | set(lf.Pw.tolist())
        return sorted(v)

    def _term_vars(self):
        """Every variable of a nonlinear term: products, atoms and atom multipliers."""
        lf = self.lf
        v = set(self._product_vars())
        for a in lf.atoms:
            v.update(a.idx.tolist())
        return sorted(v)

    def _initial_tangents(self, l, u):
        ul, uh = self.lf.u_intervals(l, u)
        for t in range(self.lf.nT):
            a, b = ul[t], uh[t]
            pts = [p for p in (a, b) if np.isfinite(p)]
            if len(pts) == 2:
                pts.append(0.5 * (a + b))
            if not pts:
                pts = [0.0, 1.0]
            for p in pts:
                self.pool.add(t, self.lf.tangent_at(t, p))
        if self.cpart is not None and not self.cpart.points and self.cpart._ok(l, u):
            self.cpart.add(0.5 * (l[self.cpart.idx] + u[self.cpart.idx]))
        if self.cones is not None and not self.cones.cuts:
            self.cones.initial_cuts()

    def _unbounded_message(self, l, u, need):
        program = self.program
        finite = np.isfinite(l) & np.isfinite(u)
        bad = [j for j in need if not finite[j]]
        what = "a product"
        if not bad:   # (x**4 is a square of the column q = x^2: x enters a convex term, not a product)
            bad = sorted({int(v) for a in self.lf.atoms for v in a.idx if not finite[v]})
            what = "a nonlinear term"
        # the program minimises; a maximised objective is unbounded *above* in the user's sense
        way = "above (the objective is maximised)" if program.maximize else "below"
        if not bad:
            return (f"GOP tree: the relaxation is unbounded {way}; the objective may be unbounded or a variable "
                    "of a convex term needs bounds")
        j = bad[0]
        nm = program.names[j]
        rows = [c.name for c in program.constraints if j in set(c.body.support().tolist())]
        tried = ", ".join(rows[:6]) + (", ..." if len(rows) > 6 else "") if rows else "none (no constraint contains it)"
        why = (f"it enters {what}, and neither its bounds nor the constraints bound it (bound tightening through "
               f"the rows {tried} left it in [{l[j]:g}, {u[j]:g}])")
        aux = next((a for a in program.aux if a.index == j), None)
        if aux is not None:
            # an auxiliary column (x/y, x**1.5) is the user's term: name it and the user's variables in it
            exprs = [aux.definition, aux.denominator] + (list(aux.rule.pieces) if aux.rule is not None else [])
            users = sorted({int(v) for e in exprs if e is not None for v in e.support() if v < program.n_user})
            free = [program.names[v] for v in users if not finite[v]] or [program.names[v] for v in users]
            if free:
                why = (f"it enters the term {aux.term}, whose auxiliary column {program.names[j]} neither the "
                       f"bounds nor the constraints bound (it was left in [{l[j]:g}, {u[j]:g}])")
                nm = free[0]
        # (a variable of a convex term only: the objective itself may be unbounded, as the generic message said)
        head = (f"GOP tree: the relaxation is unbounded {way}; the objective may be unbounded, or "
                if what == "a nonlinear term" and aux is None else "")
        # the incumbent cutoff bounds a product variable of a coercive objective (objective_bounds.py); when it
        # did not, the terms of other variables that are unbounded over their box are what kept it from doing so
        # (max x y - y^2 + log(z): z, not y, makes the objective unbounded): name them first
        others, products_only = self.obounds.objective_blockers(j, l, u)
        others = [v for v in others if v < program.n_user and v != j]
        if others and products_only:
            names = ", ".join(program.names[v] for v in others[:4])
            return (f"GOP needs finite bounds on {nm}: {why}; it multiplies {names}, unbounded too, and the cutoff of "
                    f"an incumbent bounds one factor of a product only when the other is bounded; declare bounds on "
                    f"{nm} or {names} (Pyomo: m.<var>.setlb(...) / setub(...); CVXPY: add <var> >= ... and "
                    "<var> <= ... constraints)")
        if others:
            names = ", ".join(program.names[v] for v in others[:4])
            cause = (f"the objective's terms in {names} are unbounded {way} over their bounds, so neither the "
                     f"objective nor the constraints bound {nm}: the objective may be unbounded; ")
            return (f"{cause}declare bounds on {names} (or on {nm}) (Pyomo: m.<var>.setlb(...) / setub(...); "
                    f"CVXPY: add <var> >= ... and <var> <= ... constraints). GOP needs finite bounds on {nm}: {why}")
        return (
            f"{head}GOP needs finite bounds on {nm}: {why}; declare bounds on {nm} (Pyomo: m.{nm}.setlb(...) / "
            f"setub(...); CVXPY: add {nm} >= ... and {nm} <= ... constraints)")

    # ------------------------------------------------------------------ relaxation LP
    def _lp(self, l, u, L, U, cutoff):
        lf = self.lf
        ul, uh = lf.u_intervals(l, u)
        A1, lo1, hi1 = rows_to_csr(lf.node_rows(L, U, ul, uh) + lf.domain_rows(), lf.N)
        # the pool's cuts filtered by the intervals the LP's own column bounds give u
        A2, lo2, hi2 = self.pool.block(*lf.u_intervals(L[:lf.n], U[:lf.n]), lf.N)
        A0 = lf.R[1:]
        lo0 = lf.lo[1:] - lf.const[1:]
        hi0 = lf.hi[1:] - lf.const[1:]
        parts = [A0, A1, A2]
        los, his = [lo0, lo1, lo2], [hi0, hi1, hi2]
        if self.cones is not None:
            A4, lo4, hi4 = self.cones.rows(lf.N)
            parts.append(A4)
            los.append(lo4)
            his.append(hi4)
        if self.cpart is not None:
            A3, lo3, hi3 = self.cpart.rows(l, u)
            parts.append(A3)
            los.append(lo3)
            his.append(hi3)
        if math.isfinite(cutoff):
            parts.append(lf.R[:1])
            los.append(np.array([-np.inf]))
            his.append(np.array([cutoff - lf.const[0]]))
        A = sp.vstack(parts, format="csr")
        c = np.asarray(lf.R[0].todense()).ravel()
        self._last_lp = (c, A, np.concatenate(los), np.concatenate(his))
        # a column bound beyond HiGHS's infinity (1e20) on its inner side is refused (passModel kError): exp(1.39 x)
        # over x in [41, 50], a box the incumbent cutoff gives, has T >= 4e24. Dropping such a bound only loosens
        # the relaxation (the rows still hold every point of the box)
        L = np.where(L > _HIGHS_BIG, -np.inf, L)
        U = np.where(U < -_HIGHS_BIG, np.inf, U)
        return HighsModel(c, A, np.concatenate(los), np.concatenate(his), L, U, const=float(lf.const[0]))

    def _solve_node(self, l, u, L, U, cutoff, oa_tol):
        """Relaxation value and point; adds tangent cuts until the atoms' errors weighted by their LP prices sum to at
        most ``oa_tol`` (:mod:`.oa_budget`: a chain of squares multiplies each atom's error in the bound) or the cuts
        stop paying (:meth:`_cuts_pay`).

        The cuts of a round are appended to the round's LP (``add_rows``), so HiGHS re-solves from the last
        basis (dual simplex on the new rows) instead of building and solving a fresh LP per round: on the polygon
        QCQPs of ``benchmarks/gop_qp.py`` (30 squares of coordinate differences) a node ran ~7 rounds of cold LPs
        (docs/gop.md §12e)."""
        lf = self.lf
        self._last_duals = None
        if self._out_of_time():
            # no time for an LP (building it alone takes 0.2-0.5 s on the largest programs of benchmarks/gop_instances):
            # the node keeps its parent's bound, as a node whose LP fails does
            return "failed", -math.inf, None
        hm = None
        prev = -math.inf
        cone_only = False   # the last round's cuts were all cone cuts
        for rnd in range(max(self.cut_rounds, self.cone_rounds if self.cones is not None else 0)):
            if rnd >= self.cut_rounds and not cone_only:
                break
            if rnd and self._out_of_time():
                break  # a looser outer approximation is still a valid bound
            self.run.heartbeat(f"it {self.run.iteration:>7d}  node relaxation: LP round {rnd + 1}, {self.n_lp} LPs")
            if hm is None:
                hm = self._lp(l, u, L, U, cutoff)
            self._limit_lp(hm)   # one root LP of a 300-variable NMF takes seconds: the time limit must hold
            r = hm.solve()
            self.n_lp += 1
            if r.status == "infeasible":
                outcome, r = self._infeasible_node(hm, L, U, r)
                if outcome is not None:
                    return outcome
            if r.status == "unbounded":
                return "unbounded", -math.inf, None
            if r.status != "optimal" and (self._out_of_time() or r.model_status == "Time limit reached"):
                # stopped by the time left (_limit_lp), not by the cutoff row: no second LP without it (HiGHS
                # counts the time since the model was built, so it can stop just before our clock's limit)
                self.n_lp_failed += 1
                self.lp_timed_out = True
                return "failed", -math.inf, None
            if r.status != "optimal" and math.isfinite(cutoff):
                # the cutoff row makes near-optimal boxes degenerate (HiGHS and its phase-1
                # disagree on feasibility): the bound without it is still valid
                cutoff = math.inf
                hm = self._lp(l, u, L, U, cutoff)
                self._limit_lp(hm)
                r = hm.solve()
                self.n_lp += 1
                if r.status == "infeasible":
                    outcome, r = self._infeasible_node(hm, L, U, r)
                    if outcome is not None:
                        return outcome
            if r.status != "optimal":
                # numerically hard LP: the node keeps its parent's bound, unexpanded
                self.n_lp_failed += 1
                return "failed", -math.inf, None
            Z = r.x
            # the node's bound is what HiGHS's multipliers prove, not its reported optimum (the OBBT rule, §13j):
            # over the gop tests the two differed 4 times, by 1e-9 to 4.5e-7 (docs/gop.md §13l)
            val = self._proved_value(self._last_lp[0], r, L, U, 1e-9 * max(1.0, abs(float(r.objective))),
                                     const=float(lf.const[0]))
            if rnd and not (val > prev if cone_only else self._cuts_pay(prev, val, cutoff)):
                break
            prev = val
            _, vT, _, uval, _ = lf.violations(Z)
            rows = []
            # the atoms whose errors, weighted by their LP prices, do not fit in oa_tol (oa_budget.py, §13j)
            c_lp, A_lp = self._last_lp[0], self._last_lp[1]
            price = atom_prices(c_lp, A_lp, r.row_duals, r.col_duals, lf.oT + np.arange(lf.nT))
            for t in atoms_to_cut(-vT, price, oa_tol):
                tg = lf.tangent_at(int(t), float(uval[t]))
                if self.pool.add(int(t), tg):
                    rows.append(tg[1])
            if self.cones is not None:
                n_atom_cuts = len(rows)
                rows += self.cones.add_violated(Z, oa_tol)
                cone_only = n_atom_cuts == 0 and len(rows) > 0 and (
                    self.cpart is None or self.cpart.violation(Z, l, u) <= oa_tol)
            A_new, lo_new, hi_new = rows_to_csr(rows, lf.N)
            if self.cpart is not None and self.cpart.violation(Z, l, u) > oa_tol:
                xk = Z[self.cpart.idx]
                self.cpart.add(xk)
                A3, lo3, hi3 = self.cpart.rows(l, u, [xk])
                A_new, lo_new, hi_new = (sp.vstack([A_new, A3], format="csr"), np.concatenate([lo_new, lo3]),
                                         np.concatenate([hi_new, hi3]))
            if not A_new.shape[0]:
                break
            if rnd + 1 < self.cut_rounds or (cone_only and rnd + 1 < self.cone_rounds):
                hm.add_rows(A_new, lo_new, hi_new, check=False)
                c, A, rlo, rhi = self._last_lp
                self._last_lp = (c, sp.vstack([A, A_new], format="csr"), np.concatenate([rlo, lo_new]),
                                 np.concatenate([rhi, hi_new]))
        self._last_duals = r.row_duals
        return "optimal", val, Z

    def _infeasible_node(self, hm, L, U, r):
        """``(outcome, r)`` for a node LP reported infeasible: ``outcome`` the node's return value when the ray proves
        it (``infeasible``) or nothing usable is left (``failed``, with the parent's bound), else None and the
        re-solve's optimal answer ``r`` (:meth:`_infeasibility_proved`)."""
        proved, r = self._infeasibility_proved(hm, L, U, r)
        if proved:
            return ("infeasible", math.inf, None), r
        if r.status != "optimal":
            widened = self._widened_bound(L, U)
            if widened is not None:
                return widened, r
            self.n_lp_failed += 1
            self.n_unproved_infeasible += 1
            return ("failed", -math.inf, None), r
        return None, r

    def _widened_bound(self, L, U):
        """The node's bound from its LP with every row widened by ``w (1 + |bound|)`` (``w`` = 1e-7, then 1e-5), for a
        node HiGHS calls infeasible without a proof: the widened LP is a relaxation of the node's, so its value, as
        its multipliers prove it (:meth:`_proved_value`), bounds the node from below. Such nodes are degenerate boxes
        infeasible by less than HiGHS's tolerance: on the pooling P-formulation RT2, ten of them (rays with
        ``D(y) = -1e-16``) kept the tree's bound at -4399.84 against the optimum -4391.83; widened by 1e-7 their value is
        -4391.826048, within the gap tolerance of the incumbent (docs/gop.md §13l). ``None`` when the widened LPs are
        not solved to optimality either."""
        c, A, lo, hi = self._last_lp
        mag = 1.0 + np.maximum(np.abs(np.where(np.isfinite(lo), lo, 0.0)), np.abs(np.where(np.isfinite(hi), hi, 0.0)))
        Lh = np.where(L > _HIGHS_BIG, -np.inf, L)
        Uh = np.where(U < -_HIGHS_BIG, np.inf, U)
        const = float(self.lf.const[0])
        for w in (1e-7, 1e-5):
            lo_w, hi_w = lo - w * mag, hi + w * mag
            hw = HighsModel(c, A, lo_w, hi_w, Lh, Uh, const=const)
            self._limit_lp(hw)
            r = hw.solve()
            self.n_lp += 1
            if r.status != "optimal":
                continue
            val = self._proved_value(c, r, L, U, 1e-9 * max(1.0, abs(float(r.objective))), const=const,
                                     rows=(lo_w, hi_w))
            self._last_duals = r.row_duals   # any multipliers are valid for the reduced-cost rule over the node's rows
            self.n_widened += 1
            return "optimal", val, r.x
        return None

    def _infeasibility_proved(self, hm, L, U, r):
        """Whether HiGHS's dual ray of the node LP just reported infeasible proves it (Farkas, as weak duality with
        cost 0: a ray ``y`` whose bound ``D(y)`` of :func:`.dualbt.weak_dual_bound` is positive). The status alone
        is not a proof: with a tangent of slope -1e8 and column values near 1e-6, HiGHS called a node infeasible that
        held the optimum (``max harmonic_mean(v) - v0/2``, ``v <= 1e6``), and the tree certified a wrong value
        (docs/gop.md §13i). A presolve answer has no ray: the LP is solved once more without presolve, and when that
        solve finds it feasible its answer replaces ``r`` (ex4_1_2 met such a presolve answer).

        Returns ``(proved, r)``: ``r`` the LP's answer to use when not proved (``r`` itself, or the re-solve's)."""
        c, A, lo, hi = self._last_lp
        has, ray = self._dual_ray(hm)
        if not has:
            if self._out_of_time():
                return False, r
            # the time left now, not the limit set before the first solve: that solve may have used all of it
            # (ex8_4_1: a phase-1 LP stalled for its whole 27.6 s, and this re-solve got another 27.6 s)
            self._limit_lp(hm)
            hm.set_options(presolve="off")
            try:
                again = hm.solve()
                self.n_lp += 1
                if again.status != "infeasible":
                    return False, again
                has, ray = self._dual_ray(hm)
            finally:
                hm.set_options(presolve="choose")
        if not has or ray.size != A.shape[0] or not np.all(np.isfinite(ray)):
            return False, r
        ray = ray / max(float(np.abs(ray).max(initial=0.0)), 1e-300)
        zero = np.zeros(A.shape[1])
        # D > 0 as computed, without the rounding allowance of a bound: terms that cancel to 1e-5 of their 1e11 sum
        # (ex4_1_2's tiny boxes) are beyond any proof in floating point, where the wrong answers this catches have
        # D clearly below 0 (-9e-5 of 1.3e-4 on the harmonic mean)
        return any(weak_dual_bound(zero, A, lo, hi, L, U, sgn * ray, rounding=0.0) > 0.0 for sgn in (1.0, -1.0)), r

    def _proved_value(self, c, r, L, U, margin, const=0.0, rows=None):
        """HiGHS's optimum of the LP just solved (``self._last_lp``'s rows, cost ``c``) when its multipliers prove it to
        within ``margin``, else what they prove: the weak-duality bound ``D(y)`` of :func:`.dualbt.weak_dual_bound`
        (Neumaier & Shcherbina 2004), valid for the exact LP whatever ``y`` is. So ``value - margin`` is a proved lower
        bound of the LP wherever ``D(y)`` is finite. HiGHS's optimum alone is not a proof: on a badly scaled OBBT LP (McCormick rows
        with coefficients of 5e7 next to 1) it returned ``max x = 2.07`` where ``x = 2.32`` was feasible, and the tree
        certified a wrong optimum (docs/gop.md §13j). ``const``: the constant of the LP's objective, in ``r.objective``
        and not in ``c``; ``rows``: the row bounds ``(lo, hi)`` of that LP when they are not ``self._last_lp``'s (the
        widened LP of :meth:`_widened_bound`). Where ``D(y)`` is infinite (a reduced cost against an infinite
        column bound: free columns) the reported optimum is kept, as before."""
        _, A, lo, hi = self._last_lp
        if rows is not None:
            lo, hi = rows
        Lh = np.where(L > _HIGHS_BIG, -np.inf, L)
        Uh = np.where(U < -_HIGHS_BIG, np.inf, U)
        D = weak_dual_bound(c, A, lo, hi, Lh, Uh, r.row_duals) + const
        obj = float(r.objective)
        return D if (math.isfinite(D) and D < obj - margin) else obj

    @staticmethod
    def _dual_ray(hm):
        """HiGHS's dual ray of the LP just reported infeasible, only when its simplex left one (``getDualRayExist``).
        Without one, ``getDualRay`` of HiGHS >= 1.8 computes it by solving the feasibility LP without presolve under
        whatever time limit the LP had: on MINLPLib ex8_4_1 one such call ran 695,220 simplex iterations (27.8 s)
        after the LP had used its time, and the run took 57.7 s under ``time_limit=30`` (docs/gop.md §13k). The
        caller re-solves without presolve itself, under the time left, which leaves a ray when the LP is
        infeasible."""
        if not hm.dual_ray_exists():
            return False, None
        try:
            _, has, ray = hm.highs.getDualRay()
        except Exception:   # a highspy without the call: no proof
            return False, None
        return bool(has), np.asarray(ray, dtype=float)

    def _cuts_pay(self, prev, val, cutoff):
        """Whether another round of tangent cuts is worth its LP: the last round raised the node's value by at
        least :attr:`cut_min_gain` of the distance to the cutoff (or, without an incumbent, of ``max(1, |val|)``).
        The cuts only tighten a bound that is valid after any round; a node far below the incumbent is branched
        on anyway, and one near it keeps cutting while the cuts move it."""
        gain = val - prev
        if math.isfinite(cutoff):
            return gain > self.cut_min_gain * max(cutoff - val, 1e-9 * max(1.0, abs(val)))
        return gain > self.cut_min_gain * 1e-2 * max(1.0, abs(val))

    def _cut_stalled_atoms(self, Z):
        """Tangents at ``Z`` of every atom it violates, for a node whose bound did not rise above its parent's.

        ``_solve_node`` stops cutting once each atom is within ``oa_tol`` of its convex ``g``, but the bound
        carries the sum of those errors times the atoms' weights: three ``9 x_i^2`` terms each 1e-6 below
        their tangents left the bound 1.5e-5 under the optimum, above the 1.25e-5 tolerance. Branching does
        not remove that error: a child's secant only bounds ``T`` from above and the tangents are the pool's,
        so the child containing ``Z`` returned ``Z`` again, node after node (MINLPLib ``st_cqpjk2``, a convex
        3-variable QP, stalled for the whole time limit). A tangent at ``Z`` is exact there, so the children's
        relaxations no longer contain it."""
        lf = self.lf
        _, vT, _, uval, g = lf.violations(Z)
        for t in np.flatnonzero(-vT > 1e-12 * np.maximum(1.0, np.abs(g))):
            self.pool.add(int(t), lf.tangent_at(int(t), float(uval[t])))
        if self.cones is not None:
            self.cones.add_violated(Z, 1e-12 * max(1.0, float(np.abs(Z[:lf.n]).max(initial=0.0))))

    # ------------------------------------------------------------------ branching
    def _reference_widths(self, width, l0, u0):
        """The width each variable's relative width is measured against: its root width where that is
        finite, else the largest finite width it has had at any node so far (FBBT/OBBT with the incumbent
        cutoff bound it). Scoring a variable unbounded at the root by 0 never branched it: MINLPLib
        ex7_3_5's ``x2``, bounded only through ``objvar <= UBD``, carried the largest error while the tree
        split ``x3`` to boxes 1e-9 wide (docs/gop.md §13d)."""
        w0 = u0 - l0
        seen = self._free_widths
        if seen is None or seen.shape != w0.shape:
            seen = self._free_widths = np.zeros_like(w0)
        free = ~np.isfinite(w0) & np.isfinite(width)
        seen[free] = np.maximum(seen[free], width[free])
        return np.where(np.isfinite(w0), w0, np.where(seen > 0, seen, np.inf))

    def _branch_var(self, Z, l, u, l0, u0, tol):
        lf = self.lf
        n = lf.n
        vW, vT, vP, _, _ = lf.violations(Z)
        width = u - l
        w0 = self._reference_widths(width, l0, u0)
        ok = np.isfinite(width) & np.isfinite(w0) & (w0 > 0)
        # an unbounded direction counts as full width
        rel = np.where(ok, width / np.where(ok, w0, 1.0), np.where(np.isfinite(width), 0.0, 1.0))
        score = np.zeros(n)
        with np.errstate(invalid="ignore"):
            # an infinite interval is open (inf > inf would call it closed, and an unbounded
            # variable of a violated product would never be branched on)
            open_ = ~np.isfinite(width) | (width > 1e-9 * np.maximum(1.0, np.abs(l) + np.abs(u)))
        for k, (i, j) in enumerate(lf.W):
            if vW[k] <= tol:
                continue
            # both factors: shrinking both makes the envelope error quadratic in the width
            # (McCormick's gap is at most (u_i - l_i)(u_j - l_j) / 4); the connected one wins ties
            for c in (i, j):
                if open_[c]:
                    score[c] += vW[k] * rel[c] * (1.0 + 1e-3 * self.conn[c])
        for t, a in enumerate(lf.atoms):
            if vT[t] > tol:
                for c, av in zip(a.idx.tolist(), a.val.tolist()):
                    if open_[c]:
                        score[c] += min(vT[t], 1e300) * abs(av) * rel[c]
        for k in range(lf.nP):
            if vP[k] > tol:
                w = lf.Pw[k]
                if open_[w]:
                    score[w] += vP[k] * rel[w]
                for c in lf.atoms[lf.PT[k]].idx.tolist():
                    if open_[c]:
                        score[c] += 0.5 * vP[k] * rel[c]
        if self.cones is not None:
            # a cone the cuts have not closed yet: its variables (splitting moves the next cuts' points)
            for c, v in zip(self.cones.cones, self.cones.violations(Z)):
                if v > tol:
                    for j in c.S.tolist():
                        if open_[j]:
                            score[j] += v * rel[j]
        if not np.any(score > 0):
            return None
        return int(np.argmax(score))

    # ------------------------------------------------------------------ main loop
    def solve(self):
        program, opts, run = self.program, self.opts, self.run
        l, u = program.lb.astype(float).copy(), program.ub.astype(float).copy()
        if np.any(l > u):
            return run.finish("infeasible", "a variable has lower bound > upper bound", lower=math.inf, upper=math.inf)
        l, u, L, U, infeas = self.tight.tighten(l, u)
        if not infeas and not (np.all(np.isfinite(l)) and np.all(np.isfinite(u))):
            # rows with a convex quadratic part in a free variable and a bounded rest (x^2 + x y <= 4, y in
            # [-1, 1]) bound it; FBBT, which bounds x y by the box, cannot (objective_bounds.py)
            bl, bu, infeas = self.obounds.tighten(l, u)
            if not infeas and (np.any(bl > l) or np.any(bu < u)):
                l, u, L, U, infeas = self.tight.tighten(bl, bu)
        if infeas:
            return run.finish("infeasible", "bound tightening proved the constraints infeasible",
                              lower=math.inf, upper=math.inf)
        need = self._product_vars()
        self._initial_tangents(l, u)
        #: the interval bound of the objective over the root box (before any LP): reported while no node LP has
        #: given a bound (a short time limit can stop the first one)
        self.root_lb = self.lf.objective_lower(L, U)
        UB, best = math.inf, None
        found = self._root_heuristic(l, u)
        if found is not None:
            UB, best = found
            run.incumbent(best, objective=UB, upper=UB)
            self._cone_cuts_at(best)
        if opts.bound_tightening:
            tl = run.time_limit
            # under a time limit the root OBBT gets a share of the time left: on a 300-variable NMF its ~600 LPs
            # of ~1 s each took all of it, and the first node's relaxation none
            stop = (run.elapsed() + self.obbt_share * max(0.0, tl - run.elapsed())
                    if (tl is not None and math.isfinite(tl)) else math.inf)
            l, u, L, U, infeas = self._obbt(l, u, L, U, need, math.inf, stop=stop, what="root bound tightening")
            if infeas:
                return run.finish("infeasible", "bound tightening over the relaxation proved infeasibility",
                                  lower=math.inf, upper=math.inf)
            self.root_lb = max(self.root_lb, self.lf.objective_lower(L, U))
        l0, u0 = l.copy(), u.copy()
        seq = itertools.count()
        heap = [(-math.inf, next(seq), cl, cu, L, U, 0) for cl, cu in self._root_boxes(l, u)]
        closed_lb = math.inf  # smallest bound of the nodes pruned by bound
        LB = -math.inf
        nodes = 0
        obbt_skip = obbt_wait = 0  # OBBT below obbt_depth: current back-off and nodes left to skip
        atom_obbt_done = False  # OBBT for the term variables after an unbounded relaxation (tried once)
        cutoff_bt_done = False  # bounds from the incumbent cutoff after an unbounded relaxation (tried once)
        ls_skip = ls_wait = 0  # the same back-off for local searches started only because Z is nearly feasible
        for _ in run.iterations():
            if not heap:
                break
            nlb, _, nl, nu, nL, nU, depth = heapq.heappop(heap)
            tol = self._tol(UB)
            if nlb >= UB - tol:
                closed_lb = min(closed_lb, nlb)
                heap.clear()
                break
            nodes += 1
            nl, nu, nL, nU, infeas = self.tight.tighten(nl, nu, cutoff=UB, colL=nL, colU=nU)
            if not infeas and depth and opts.bound_tightening and (depth <= self.obbt_depth or obbt_wait <= 0):
                # OBBT with the incumbent cutoff: always near the root, where a tighter box pays for
                # itself over the whole subtree; deeper while it keeps paying (a node whose OBBT cuts
                # less than `obbt_min_gain` of one variable's width in total lets the next 1, 2, 4 ... 32
                # nodes skip it; one that pays resets the wait)
                w_before = nu - nl
                nl, nu, nL, nU, infeas = self._obbt(nl, nu, nL, nU, need, UB, rounds=1)
                if depth > self.obbt_depth:
                    with np.errstate(divide="ignore", invalid="ignore"):
                        cut = np.where(np.isfinite(w_before) & (w_before > 0), 1.0 - (nu - nl) / w_before, 0.0)
                    gain = float(np.sum(np.clip(cut[need], 0.0, 1.0))) if need else 0.0
                    if infeas or gain >= self.obbt_min_gain:
                        obbt_skip, obbt_wait = 0, 0
                    else:
                        obbt_skip = min(32, max(1, 2 * obbt_skip))
                        obbt_wait = obbt_skip
            elif depth > self.obbt_depth:
                obbt_wait -= 1
            if not infeas:
                oa = max(0.25 * tol, 1e-9) if math.isfinite(UB) else 1e-6
                st, val, Z = self._solve_node(nl, nu, nL, nU, UB, oa)
                if st == "unbounded" and not atom_obbt_done:
                    # a secant (the upper envelope of a convex term with a negative sign, e.g. min -x1^2)
                    # needs finite bounds, which rows may give only jointly (x1 - 4 x2 >= -8 and
                    # x2 >= 3 x1 - 9 give x1 <= 4; FBBT, row by row, cannot; MINLPLib st_qpc-m0 was refused
                    # as unbounded): OBBT over the rows for the term variables still unbounded, once
                    atom_obbt_done = True
                    free = [j for j in self._term_vars() if not (np.isfinite(nl[j]) and np.isfinite(nu[j]))]
                    if free:
                        nl, nu, nL, nU, infeas = self._obbt(nl, nu, nL, nU, free, math.inf)
                        if infeas:
                            st = "infeasible"
                        else:
                            self._initial_tangents(nl, nu)
                            if depth == 0:  # bounds implied by the rows alone hold for the whole program
                                l0, u0 = nl.copy(), nu.copy()
                            st, val, Z = self._solve_node(nl, nu, nL, nU, UB, oa)
                if st == "unbounded" and not cutoff_bt_done:
                    # a product variable no row bounds: a feasible point, the local search from it, and the cut
                    # f <= UB through the separable lower estimate of f (objective_bounds.py) bound the variables
                    # of a coercive objective (0.1 ||x||^2 + x0 x1: SCIP solves it, the relaxation had no rows)
                    cutoff_bt_done = True
                    found = self._feasible_start(nl, nu, nL, nU, l0, u0)
                    if found is not None and found[0] < UB:
                        UB, best = found
                        run.incumbent(best, objective=UB, upper=UB)
                    if math.isfinite(UB):
                        bl, bu, empty = self.obounds.tighten(nl, nu, cutoff=UB)
                        # only a product variable made finite on both sides gives the LP its McCormick rows; a
                        # half-line (min x y - z: z >= -UB - 1) leaves it unbounded, and the incumbent of an
                        # unbounded model can sit at 1e15, a bound HiGHS refuses
                        fin = np.isfinite(bl) & np.isfinite(bu)
                        gained = [j for j in need if fin[j] and not (np.isfinite(nl[j]) and np.isfinite(nu[j]))]
                        if not empty and gained and np.all(np.abs(np.where(fin, np.maximum(
                                np.abs(bl), np.abs(bu)), 0.0)) < 1e12):
                            nl, nu, nL, nU, infeas = self.tight.tighten(bl, bu, cutoff=UB)
                            if infeas:   # (the incumbent lies in the box: rounding only)
                                nl, nu = bl, bu
                                nL, nU, _, _ = self.lf.column_bounds(nl, nu)
                            self._initial_tangents(nl, nu)
                            if depth == 0:   # every point better than the incumbent lies in this box
                                l0, u0 = nl.copy(), nu.copy()
                            oa = max(0.25 * self._tol(UB), 1e-9)
                            st, val, Z = self._solve_node(nl, nu, nL, nU, UB, oa)
                if st == "unbounded":
                    # children only add rows: an unbounded node LP is the root's. A feasible point lets
                    # the solver try to prove unboundedness (unbounded.py) before reporting the bounds
                    if best is None:
                        found = self._feasible_start(nl, nu, nL, nU, l0, u0)
                        if found is not None:
                            run.incumbent(found[1], objective=found[0], upper=found[0])
                    raise Unbounded(self._unbounded_message(nl, nu, need))
                if st == "failed":
                    # HiGHS could not solve this box's LP: split it anyway (the halves usually solve)
                    # and give them the parent's bound, or the interval bound of the objective over the box
                    # where that is higher. Tiny boxes around an optimum make degenerate LPs (MINLPLib st_e19
                    # with x1**4 lifted: "infeasible" contradicted by phase 1 on boxes 1e-8 wide, 7000 nodes
                    # at the parent's bound, 1.5e-6 under the incumbent); their interval bound, which needs
                    # no LP and shrinks with the box, closes them.
                    nlb = max(nlb, self.lf.objective_lower(nL, nU))
                    j = self._widest(nl, nu, l0, u0)
                    if nlb >= UB - self._tol(UB) or j is None or depth > 60:
                        closed_lb = min(closed_lb, nlb)
                    else:
                        mid = 0.5 * (nl[j] + nu[j]) if math.isfinite(nu[j] - nl[j]) else _split_unbounded(
                            nl[j], nu[j], 0.0)
                        for lo_j, hi_j in ((nl[j], mid), (mid, nu[j])):
                            cl, cu = nl.copy(), nu.copy()
                            cl[j], cu[j] = lo_j, hi_j
                            heapq.heappush(heap, (nlb, next(seq), cl, cu, nL, nU, depth + 1))
                if st == "optimal":
                    val = max(val - 1e-9 * max(1.0, abs(val)), nlb)
                    # the local search is the dearest step: at the first nodes, then every 8th, and
                    # wherever the relaxation point is already nearly feasible
                    # (a search started only because Z is nearly feasible that finds nothing lets the
                    # next 1, 2, 4 ... 32 such nodes skip it: on programs whose blocks carry only their
                    # own linear rows every relaxation point is feasible, and once the incumbent is
                    # optimal these searches are most of a node's cost)
                    found = None
                    scheduled = nodes <= 16 or nodes % 8 == 0
                    near = not scheduled and self.local.nearly_feasible(Z[:program.n])
                    if near and ls_wait > 0:
                        ls_wait -= 1
                        near = False
                    if (scheduled or near) and not (best is not None and self._out_of_time()):
                        # a relaxation point that is feasible with (nearly) the node's bound as its value
                        # closes the node: the search could gain at most 0.1 of the gap tolerance there
                        enough = val + 0.1 * self._tol(val)
                        # SLSQP from the relaxation point at every scheduled search of a small program: the block
                        # alternation stops at partial optima (a degenerate pentagon, 0.657, on the hexagon QCQP
                        # MINLPLib himmel16, whose optimum 0.866 SLSQP reaches from a node's point; docs/gop.md §12e)
                        polish = (nodes == 1 or (best is None and nodes % 32 == 0)
                                  or (scheduled and program.n <= self.polish_scheduled_vars))
                        found = self.local.improve(Z, l0, u0, polish=polish, cutoff=UB, enough=enough)
                        if near:
                            if found is not None and found[0] < UB - self._tol(UB):
                                ls_skip = ls_wait = 0
                            else:
                                ls_skip = min(32, max(1, 2 * ls_skip))
                                ls_wait = ls_skip
                    if found is not None and found[0] < UB:
                        UB, best = found
                        run.incumbent(best, objective=UB, upper=UB)
                        self._cone_cuts_at(best)
                    tol = self._tol(UB)
                    empty = False
                    if val < UB - tol and math.isfinite(UB):
                        nl, nu, nL, nU, empty = self._rc_tighten(nl, nu, nL, nU, UB)
                    if val >= UB - tol or empty:
                        closed_lb = min(closed_lb, val)
                    else:
                        j = self._branch_var(Z, nl, nu, l0, u0, 1e-9 * max(1.0, abs(val)))
                        if j is None:
                            # every relaxation error is below 1e-9 and yet the gap is open: a degenerate
                            # optimum where an error eps buys sqrt(eps) of objective (complementarity
                            # s * u == 0 at 1e-4 * 3e-4): the variables of the smallest errors still
                            # carry the gap, the widest variable may not enter it at all
                            j = self._branch_var(Z, nl, nu, l0, u0, 0.0)
                        if j is None:
                            j = self._widest(nl, nu, l0, u0)
                        if j is None:
                            closed_lb = min(closed_lb, val)  # cannot split further: keep its bound
                        else:
                            if val <= nlb:
                                self._cut_stalled_atoms(Z)
                            w = nu[j] - nl[j]
                            if not math.isfinite(w):
                                p = _split_unbounded(nl[j], nu[j], Z[j])
                            elif best is not None and nl[j] + 0.01 * w < best[j] < nu[j] - 0.01 * w:
                                # the incumbent on a face of both children: McCormick is exact along
                                # that face, so the bound near the incumbent closes fast
                                p = float(best[j])
                            else:
                                a = self.branch_alpha
                                p = a * Z[j] + (1.0 - a) * 0.5 * (nl[j] + nu[j])
                                p = min(max(p, nl[j] + self.branch_clamp * w), nu[j] - self.branch_clamp * w)
                            for lo_j, hi_j in ((nl[j], p), (p, nu[j])):
                                cl, cu = nl.copy(), nu.copy()
                                cl[j], cu[j] = lo_j, hi_j
                                heapq.heappush(heap, (val, next(seq), cl, cu, nL, nU, depth + 1))
            LB = self._reported_lb(min(heap[0][0] if heap else math.inf, closed_lb, UB), UB)
            run.incumbent(lower=LB)
            run.record(lower=LB, upper=UB, objective=UB if math.isfinite(UB) else None, n_open=len(heap),
                       n_subproblems=self.n_lp)
            if not heap or UB - LB <= self._tol(UB):
                break
            if run.limit_reached():
                break
        LB = self._reported_lb(min(heap[0][0] if heap else math.inf, closed_lb, UB), UB)
        info = dict(mode="tree", nodes=nodes, n_subproblems=self.n_lp, failed_relaxations=self.n_lp_failed,
                    reduced_cost_tightenings=self.n_rc_tightened, partition=self.part.describe(),
                    connected=[program.names[i] for i in self.part.connected])
        if self.n_unproved_infeasible:
            info["unproved_infeasible_nodes"] = self.n_unproved_infeasible
        if self.n_widened:
            info["widened_nodes"] = self.n_widened
        if not math.isfinite(UB):
            if not heap and run.status is None:
                if closed_lb == math.inf:
                    return run.finish("infeasible", "every node of the tree is infeasible", lower=math.inf,
                                      upper=math.inf, info=info)
                # some node was closed with its parent's bound, not proved empty (no time left for its LP, or an
                # LP HiGHS could not solve on a box that cannot be split): no point, and no proof that there is
                # none (a 1e-3 s time limit on a square-root lasso read 'infeasible')
                if self.lp_timed_out or not run.out_of_time():
                    self._stop_open(f"the tree ran out of nodes without a feasible point ({self.n_lp_failed} node "
                                    "relaxations could not be solved); the lower bound is valid", "error")
            return run.finish(x=None, objective=None, lower=LB, upper=None, info=info)
        if UB - LB <= self._tol(UB):
            run.stop("optimal")
        elif not heap and run.status is None:
            # every node was closed but some only with their parent's bound (relaxations HiGHS
            # could not solve, boxes too small to split): an honest open gap, not a certificate
            self._stop_open(f"the tree ran out of nodes with the gap open ({self.n_lp_failed} node relaxations "
                            "could not be solved); the point is feasible and the bounds are valid", "numerical")
        return run.finish(x=best, objective=UB, lower=LB, upper=UB, info=info)

    def _cone_cuts_at(self, z):
        """The cones' cuts at a new incumbent ``z`` (valid everywhere; :meth:`.NormCones.add_at`)."""
        if self.cones is not None:
            zz = np.zeros(self.lf.N)
            zz[:z.size] = z
            self.cones.add_at(zz)

    def _stop_open(self, message, status):
        """Stop a run whose nodes are all closed, some only with their parent's bound: at the time limit when a node
        LP was stopped by the time left (a 0.01 s limit on a square-root lasso read 'infeasible'), else
        ``status`` with ``message``."""
        if self.lp_timed_out:
            self.run.stop("time_limit", f"time_limit={self.run.time_limit:g} s reached")
        else:
            self.run.stop(status, message)

    def _reported_lb(self, LB, UB):
        """The tree's bound ``LB``, or where it is still ``-inf`` (a root box whose LP has not finished) the
        interval bound of the root box, :attr:`root_lb` (valid: every feasible point lies in that box), never
        above the incumbent ``UB``."""
        if LB == -math.inf and self.root_lb > -math.inf:
            return min(self.root_lb, UB)
        return LB

    def _root_start(self, l, u, rng, random=False):
        """The model's starting values where it gives them (not with ``random``), elsewhere a seeded uniform point of
        the box (near the finite bound of a half-open interval, near 0 on a free variable)."""
        z = np.array(self.program.x0, dtype=float) if (self.program.x0 is not None and not random) \
            else np.full(l.size, np.nan)
        miss = ~np.isfinite(z)
        if miss.any():
            lo, hi, r = l[miss], u[miss], rng.random(int(miss.sum()))
            flo, fhi = np.isfinite(lo), np.isfinite(hi)
            lo0, hi0 = np.where(flo, lo, 0.0), np.where(fhi, hi, 0.0)
            z[miss] = np.where(flo & fhi, lo0 + r * (hi0 - lo0), np.where(flo, lo0 + r, np.where(fhi, hi0 - r, r - 0.5)))
        return np.clip(z, l, u)

    def _feasible_start(self, l, u, L, U, l0, u0):
        """``(value, z)`` of the local search from a feasible point of the relaxation without cost, or None."""
        hm = self._lp(l, u, L, U, math.inf)
        hm.set_cost(np.zeros(self.lf.N))
        r0 = hm.solve()
        if r0.status != "optimal":
            return None
        return self.local.improve(r0.x, l0, u0)

    def _root_heuristic(self, l, u):
        """Alternating minimisation at the root, before OBBT: ``(value, z)`` of the best feasible point of
        :meth:`LocalSearch.descend` from the model's start (random where it gives none), or None.

        On models with hundreds of product variables the root OBBT (two LPs per variable, ~1 s each on a
        30 x 30 rank-5 NMF) and the first node's cut rounds took the whole of a 20 s time limit, and the
        three alternation rounds of the first node's local search stopped at 48-77 where alternating
        minimisation converges to 0.1274 (docs/gop.md §8f). The descent runs on programs with more variables than
        the first node's SLSQP polish takes (:attr:`LocalSearch.max_polish_vars`) or at least
        :attr:`root_min_products` product terms (smaller ones: that polish finds the same points sooner), within :attr:`root_share` of the time left (or
        :attr:`root_rounds` rounds in total without a time limit), from up to :attr:`root_starts` starts: the model's
        start, then seeded random points of the box (alternation on a random bilinear program ends at a partial
        optimum, a vertex, that depends on the start)."""
        lf = self.lf
        run = self.run
        tl = run.time_limit
        big = self.program.n > self.local.max_polish_vars or lf.nW + lf.nP >= self.root_min_products
        # the clock before the block models are built (seconds on thousands of terms)
        if not big or (tl is not None and run.elapsed() >= tl) or not self.local.descent_models():
            return None
        if tl is not None and math.isfinite(tl):
            stop = run.elapsed() + self.root_share * max(0.0, tl - run.elapsed())
            spent = exhausted = lambda: run.elapsed() >= stop
        else:
            # without a time limit a count of rounds: a clock budget (10 s before) cut the first descent of a
            # 20 x 20 rank-4 NMF at 10 s, so the incumbent, and all that follows, depended on the machine's load
            left = [self.root_rounds]

            def spent():  # descend asks once per round
                left[0] -= 1
                return left[0] < 0

            def exhausted():
                return left[0] <= 0
        rng = np.random.default_rng(self.opts.seed)
        best = None
        rounds = [0]

        def spent_shown():
            rounds[0] += 1
            run.heartbeat(f"root descent (alternating minimisation): start {k + 1}, round {rounds[0]}"
                          + (f", best {best[0]:.8g}" if best is not None else ""))
            return spent()
        for k in range(self.root_starts):
            # under a time limit also before the first start: its first round builds the descent's block models
            # and solves a primal problem before the clock is read (4 s on a 50 x 60 rank-5 factorisation)
            if (k or (tl is not None and math.isfinite(tl))) and exhausted():
                break
            z0 = self._root_start(l, u, rng) if k == 0 else self._root_start(l, u, rng, random=True)
            found = self.local.descend(z0, l, u, spent_shown)
            if found is None:
                break   # the alternation finds no feasible point from such starts on this model: no restarts
            if best is None or found[0] < best[0]:
                best = found
        return best

    def _root_boxes(self, l, u):
        """The root box, or its split by the disjunctions of ``root_split`` (bounded scaling pairs,
        docs/gop.md §8e: in each pair some variable ``v`` of the normalized block sits at its bound
        ``value``): one box per choice, with ``z_v`` fixed; a choice outside the (tightened) box holds
        no feasible point and is dropped."""
        if not self.root_split:
            return [(l, u)]
        out = []
        for choice in itertools.product(*self.root_split):
            cl, cu = l.copy(), u.copy()
            for v, val in choice:
                tol = 1e-6 * max(1.0, abs(val))  # OBBT bounds carry LP tolerances
                if not (cl[v] - tol <= val <= cu[v] + tol):
                    break
                cl[v] = cu[v] = val
            else:
                out.append((cl, cu))
        return out

    def _rc_tighten(self, l, u, L, U, UB):
        """Reduced-cost tightening of the node box with the last node LP's duals (:mod:`.dualbt`):
        every feasible point of the box with objective ``<= UB`` stays. Returns ``(l, u, L, U, empty)``."""
        if self._last_lp is None or self._last_duals is None:
            return l, u, L, U, False
        c, A, rlo, rhi = self._last_lp
        if A.shape[0] != len(self._last_duals):
            return l, u, L, U, False
        # objective = c^T Z + const <= UB, with a hair of slack for the rounding of UB itself
        cut = UB - float(self.lf.const[0]) + 1e-9 * max(1.0, abs(UB))
        out = reduced_cost_bounds(c, A, rlo, rhi, L, U, self._last_duals, cut)
        if out is None:
            return l, u, L, U, False
        L2, U2 = out
        tol = 1e-9 * np.maximum(1.0, np.abs(L2) + np.abs(U2))
        with np.errstate(invalid="ignore"):
            if np.any(L2 > U2 + tol):
                return l, u, L, U, True
        U2 = np.maximum(U2, L2)
        moved = int(np.count_nonzero(L2 > L) + np.count_nonzero(U2 < U))
        if not moved:
            return l, u, L, U, False
        self.n_rc_tightened += moved
        n = self.lf.n
        l, u = np.maximum(l, L2[:n]), np.minimum(u, U2[:n])
        u = np.maximum(u, l)
        L2[:n], U2[:n] = l, u
        return l, u, L2, U2, False

    def _widest(self, l, u, l0, u0):
        need = self._product_vars() + sorted({int(v) for a in self.lf.atoms for v in a.idx})
        if not need:
            return None
        need = np.array(sorted(set(need)))
        w = u[need] - l[need]
        # relative to the same reference widths as _branch_var (a variable unbounded at the root is measured
        # against the widest finite interval it has had, not scored 0)
        ref = self._reference_widths(u - l, l0, u0)[need]
        with np.errstate(invalid="ignore"):
            # an infinite interval first (inf / inf would be NaN, and inf > inf False)
            rel = np.where(np.isfinite(w), w / np.maximum(ref, 1e-300), np.inf)
        k = int(np.argmax(rel))
        if not math.isfinite(w[k]):
            return int(need[k])
        return int(need[k]) if w[k] > 1e-9 * max(1.0, abs(l[need[k]]) + abs(u[need[k]])) else None

    def _obbt(self, l, u, L, U, idx, cutoff, rounds=2, stop=math.inf, what="node bound tightening"):
        """Optimization-based bound tightening: min and max of each variable of ``idx`` over the node
        LP with the incumbent cutoff, ``rounds`` times while bounds move.

        Filtering (Gleixner, Berthold, Mueller & Weltge 2017, "Three enhancements for
        optimization-based bound tightening"): every LP solution of the round is a point of the same
        polytope, so a variable that already sits at its lower (upper) bound in one of them cannot be
        tightened there by its own LP, which is skipped. The bounds found are the same as without
        filtering; only LPs that cannot move a bound are saved. ``stop``: the run's clock at which it stops (the
        bounds found so far are kept). Progress lines (``what``, LPs done) at most once a second."""
        lf = self.lf
        run = self.run
        for rnd in range(rounds):
            if self._out_of_time() or run.elapsed() >= stop:
                break   # before building the LP (0.2-0.5 s on the largest programs of benchmarks/gop_instances)
            hm = self._lp(l, u, L, U, cutoff)
            changed = False
            seen_lo = np.full(lf.N, np.inf)  # smallest / largest value of each column over this round's LP points
            seen_hi = np.full(lf.N, -np.inf)
            for pos, j in enumerate(idx):
                if self._out_of_time() or self.run.elapsed() >= stop:
                    break
                for sgn in (1.0, -1.0):
                    s_ = seen_lo[j] if sgn > 0 else seen_hi[j]
                    if self.obbt_filter and math.isfinite(s_):
                        if sgn > 0 and s_ - 1e-9 * max(1.0, abs(s_)) <= l[j] + 1e-7 * max(
                                1.0, abs(l[j]) if np.isfinite(l[j]) else 1.0):
                            continue
                        if sgn < 0 and s_ + 1e-9 * max(1.0, abs(s_)) >= u[j] - 1e-7 * max(
                                1.0, abs(u[j]) if np.isfinite(u[j]) else 1.0):
                            continue
                    run.heartbeat((f"it {run.iteration:>7d}  " if run.iteration else "")
                                  + f"{what}: round {rnd + 1}, variable {pos + 1}/{len(idx)}, {self.n_lp} LPs")
                    c = np.zeros(lf.N)
                    c[j] = sgn
                    hm.set_cost(c)
                    hm.set_const(0.0)
                    self._limit_lp(hm, stop)
                    r = hm.solve()
                    self.n_lp += 1
                    if r.status == "infeasible":
                        proved, r = self._infeasibility_proved(hm, L, U, r)
                        if proved:
                            return l, u, L, U, True
                        self.n_unproved_infeasible += r.status != "optimal"
                    if r.status != "optimal":
                        continue
                    if r.x is not None:
                        np.minimum(seen_lo, r.x[:lf.N], out=seen_lo)
                        np.maximum(seen_hi, r.x[:lf.N], out=seen_hi)
                    m = 1e-9 * max(1.0, abs(r.objective))
                    v = sgn * self._proved_value(c, r, L, U, m)
                    if sgn > 0 and v - m > l[j] + 1e-7 * max(1.0, abs(l[j]) if np.isfinite(l[j]) else 1.0):
                        l[j] = v - m
                        changed = True
                    elif sgn < 0 and v + m < u[j] - 1e-7 * max(1.0, abs(u[j]) if np.isfinite(u[j]) else 1.0):
                        u[j] = v + m
                        changed = True
            if not changed:
                break
            l, u, L, U, infeas = self.tight.tighten(l, u, cutoff=cutoff, colL=L, colU=U)
            if infeas:
                return l, u, L, U, True
        return l, u, L, U, False
