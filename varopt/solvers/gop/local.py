r"""Upper bounds for GOP's tree mode: local searches from a relaxation point.

1. **Block alternation.** For fixed ``y`` the program is convex in ``x`` (GOP's primal problem,
   :mod:`.primal`); for fixed ``x`` it is convex in ``y`` (the same problem with the blocks
   swapped, when the partition allows it). Up to three alternations from the relaxation point.
2. **Joint polish.** SLSQP (Kraft 1988, through SciPy) on the whole program from the best point
   found, which moves both blocks at once where the alternation stalls at a partial optimum
   (pooling problems: fixing qualities makes the flows an LP and vice versa).

Every point is checked against the original program before it is returned: bounds, a finite
objective, and every row feasible as :meth:`LocalSearch.violation` measures it.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.optimize import minimize

from ...errors import ModelStructureError, SolverBugError
from .lagrangian import BlockModel
from .partition import Partition
from .primal import solve_primal


def _never():
    return False


def swapped(part):
    """The partition with the blocks exchanged (only the primal views of it are used)."""
    return Partition(x=part.y, y=part.x, connected=np.zeros(0, dtype=np.int64), names=part.names)


def snap(z, lb, ub, rel=1e-2):
    """``z`` with every coordinate within ``rel * max(1, |bound|, finite width)`` of a bound moved onto
    it; ``None`` when nothing moves."""
    width = np.where(np.isfinite(ub - lb), ub - lb, 0.0)
    out = z.copy()
    for b in (lb, ub):
        fin = np.isfinite(b)
        bb = np.where(fin, b, 0.0)
        tol = rel * np.maximum(np.maximum(1.0, np.abs(bb)), width)
        near = fin & (np.abs(z - bb) <= tol) & (z != bb)
        out[near] = bb[near]
    return out if np.any(out != z) else None


class LocalSearch:
    #: SLSQP is dense (O(n^3) per step): only for programs up to this many variables
    max_polish_vars = 300

    def __init__(self, program, part, lifted):
        self.program, self.lifted = program, lifted
        self._cache = None
        self._bms = None
        #: ``z -> z'`` with auxiliary columns (lifted products, norms, abs epigraphs) recomputed from the
        #: user's variables; a candidate is checked at ``z'`` first (exact definitions, no objective
        #: bought by the tolerance on their rows), then as it is
        self.complete = None
        self._cons = None
        self.rescues = 0
        self._fixed_bms = {}  # fixed-variable mask -> BlockModel (None: not convex in the free ones)
        self._part = part
        self._descent_bms = None
        #: the run's deadline check (the tree sets it under a time limit): asked between the primal problems of
        #: the alternations and before the polish, which end early, with the points found, once it says True.
        #: Never a clock without a time limit (the searches then count rounds only)
        self.stop = _never

    @property
    def bms(self):
        """GOP's block models of the program and of its swapped partition (those that exist), built at the first
        use: 2-3 s on a 50 x 60 rank-5 factorisation, which a run stopped by its time limit before the first
        local search never needs."""
        if self._bms is None:
            out = []
            for p in (self._part, swapped(self._part)):
                if self.stop():
                    return out   # the time limit came: what was built, not kept (a later call builds all)
                try:  # a program outside GOP's class (lifted norms) has no primal problems: SLSQP only
                    out.append(BlockModel(self.program, p))
                except ModelStructureError:
                    pass
            self._bms = out
        return self._bms

    def violation(self, z, own=True):
        """Largest row violation relative to ``max(1, |side|, 0.01 sum_k |term_k|)``; ``inf`` outside
        the bounds or the domain. A point is feasible when it is <= 1e-6 (SCIP's default ``feastol``).
        ``own=False`` leaves out the last rule below (a violation above a millionth of the row's own
        terms is ``inf``): the measure :meth:`_repair` reduces, since LP noise on a row of tiny terms
        (``0.5 * 3e-9 <= 0``) is exactly what it projects away.

        SCIP measures rows against ``max(1, |side|)`` (Achterberg 2007); rows whose terms cancel
        get a hundredth of their terms' size besides, the rounding an LP solution carries on them;
        and a violation above ``1e-8 + 1e-6 sum_k |term_k|`` is never rounding. Each part stops a
        point that would buy objective: Hock & Schittkowski 106 has rows of
        1e6-sized terms summing to 0, where 0.1 of violation bought 3e-3 of objective; a
        complementarity row ``x4 * x8 == 0`` at ``4e-4 * 1e-3`` (ex9_2_2 of Floudas et al. 1999)
        bought 4e-3.
        """
        program, lf = self.program, self.lifted
        if np.any(z < program.lb) or np.any(z > program.ub):
            return math.inf
        with np.errstate(over="ignore", invalid="ignore"):
            # a point far out on an unbounded box (the zero-cost LP point of an unbounded root) can
            # overflow its products: such a point is rejected below, not warned about
            Z = lf.lift(z)
            v = lf.R @ Z + lf.const
        if not np.all(np.isfinite(v)):
            return math.inf
        size = abs(lf.R) @ np.abs(Z) + np.abs(lf.const)
        with np.errstate(invalid="ignore"):
            viol = np.maximum(np.maximum(lf.lo - v, v - lf.hi), 0.0)[1:]
            side = np.where(v[1:] < lf.lo[1:], np.abs(lf.lo[1:]), np.abs(lf.hi[1:]))
        side = np.where(np.isfinite(side), side, 0.0)
        scale = np.maximum(np.maximum(1.0, side), 1e-2 * size[1:])
        # and never more than a millionth of the row's own terms (+1e-12): a violation comparable to
        # the terms themselves is not rounding (a floor of 1e-8 let ex9_2_2's ``x4 * x8 == 0`` at
        # 5e-5 * 1.5e-4 buy 5e-6 of relative objective; candidates are snapped onto the bounds they
        # touch to 1e-9 first, so LP noise at a bound is not counted here)
        own = np.where(viol > 1e-12 + 1e-6 * size[1:], np.inf, 0.0) if own else 0.0
        return float(np.max(viol / scale + own, initial=0.0))

    def value(self, z):
        """The objective at ``z`` when ``z`` is feasible for the program (:meth:`violation`), else None."""
        if self.violation(z) > 1e-6:
            return None
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowing value is rejected, not warned
            val = self.program.objective.value(z)
        if not math.isfinite(val):
            return None
        return float(val)

    def checked(self, z):
        """``(value, point)`` of ``z`` or of its completion (the better feasible one), or ``(None, z)``.

        ``z`` is first snapped onto the bounds it touches to 1e-9 (LP noise). A point within the row
        tolerance but not exactly on its rows is then projected onto them (:meth:`_repair`; the
        completion's auxiliary columns are recomputed after the projection, which moved them only to
        first order), so the tolerance does not buy objective below the exact optimum."""
        zs = snap(z, self.program.lb, self.program.ub, rel=1e-9)
        if zs is not None:
            z = zs
        small = self.program.n <= self.max_polish_vars
        if self.complete is not None:
            zc = self.complete(z)
            if small:
                zc = self.complete(self._repair(zc, self.program.lb, self.program.ub))
            vc = self.value(zc)
            if vc is not None:
                return vc, zc
        if small:
            z = self._repair(z, self.program.lb, self.program.ub)
        return self.value(z), z

    def nearly_feasible(self, z):
        return self.program.max_violation(z) <= 1e-4 * max(1.0, float(np.abs(z).max(initial=0)))

    def improve(self, Z, lb, ub, polish=True, cutoff=math.inf, enough=-math.inf):
        """Best ``(value, z)`` found from the relaxation point ``Z`` (its first ``n`` entries), or None.
        ``enough``: a feasible relaxation point with a value at most this (the node's lower bound plus a small
        part of the gap tolerance) is returned at once: no point of the node can be better by more than that."""
        z = np.clip(Z[:self.program.n], lb, ub)
        best = []
        v, zc = self.checked(z)
        if v is not None:
            best.append((v, zc.copy()))
            if v <= enough:
                return v, zc
        cur = self._alternate(z, lb, ub, best)
        if best and self.stop():
            return min(best, key=lambda t: t[0])
        zs = snap(z, lb, ub)
        if not (best and min(t[0] for t in best) < cutoff):
            # a relaxation point with a product factor at 2e-4 instead of its bound 0 fixes the other
            # factor to 0 in the primal problem (complementarity rows s * u == 0): the point snapped
            # onto the bounds it nearly touches starts a fix-and-solve
            self._fix_and_solve(z if zs is None else zs, lb, ub, best)
        start = min(best, key=lambda t: t[0])[1] if best else cur
        # a point that improves the incumbent is worth polishing (it is rare, and the polish moves
        # degenerate points such as near-complementary ones onto the exact optimum); so is a nearly
        # feasible one that would improve it (a bounded number of times per solve)
        improving = bool(best) and min(t[0] for t in best) < cutoff
        if not best and self.rescues < 20 and self.violation(cur) <= 1e-3:
            f = self.program.objective.value(cur)
            if math.isfinite(f) and f < cutoff:
                self.rescues += 1
                improving = True
        polish = (polish or improving) and not (best and self.stop())
        if polish and self.program.n <= self.max_polish_vars:
            zp = self._slsqp(start, lb, ub)
            if zp is not None:
                v, zc = self.checked(zp)
                if v is not None:
                    best.append((v, zc))
        return min(best, key=lambda t: t[0]) if best else None

    def _fix_and_solve(self, zs, lb, ub, best):
        """Fix the variables of ``zs`` that sit on a bound, and for every product with neither factor on a
        bound the factor nearer to one (relative to its width) onto it; every product then has a fixed
        factor and the rest is convex (GOP's primal problem with the fixed variables as its ``y`` block): solve it
        for the free ones. Both blocks move at once, which the alternation cannot do when each block
        alone is determined by equality rows (complementarity ``s * u == 0`` with linear rows)."""
        lf = self.lifted
        zs = zs.copy()
        fixed = (zs == lb) | (zs == ub)
        if lf.nW:
            # a product with both factors off their bounds: the factor nearer (relative to its width)
            # to a bound goes onto it (complementarity rows: the pair's smaller side becomes 0)
            for i, j in lf.W.tolist():
                if fixed[i] or fixed[j]:
                    continue
                best_k, best_d, best_b = None, math.inf, None
                for k in (i, j):
                    w = ub[k] - lb[k] if math.isfinite(ub[k] - lb[k]) else max(1.0, abs(zs[k]))
                    for b in (lb[k], ub[k]):
                        if math.isfinite(b) and abs(zs[k] - b) / max(w, 1e-12) < best_d:
                            best_k, best_d, best_b = k, abs(zs[k] - b) / max(w, 1e-12), b
                if best_k is None:
                    return
                zs[best_k] = best_b
                fixed[best_k] = True
        if fixed.all() or not fixed.any():
            return
        if lf.nP and not np.all(fixed[lf.Pw]):
            return
        key = fixed.tobytes()
        bm = self._fixed_bms.get(key, False)
        if bm is False:
            part = Partition(x=np.flatnonzero(~fixed), y=np.flatnonzero(fixed),
                             connected=np.zeros(0, dtype=np.int64), names=self.program.names)
            try:
                bm = BlockModel(self.program, part)
            except ModelStructureError:
                bm = None
            if len(self._fixed_bms) < 64:
                self._fixed_bms[key] = bm
        if bm is not None:
            self._primal_point(bm, zs, lb, ub, best)

    def _primal_point(self, bm, z, lb, ub, best):
        """``z`` with ``bm``'s ``x`` block replaced by its primal solution for ``z``'s ``y`` (None when the primal
        problem fails); the point, when feasible, is appended to ``best``."""
        try:
            pr = solve_primal(bm, z[bm.yi], lb[bm.xi], ub[bm.xi])
        except (ModelStructureError, SolverBugError, np.linalg.LinAlgError, ValueError):
            return None
        if pr.status != "optimal":
            return None
        znew = z.copy()
        znew[bm.xi] = pr.x
        v, zc = self.checked(znew)
        if v is not None:
            best.append((v, zc.copy()))
        return znew

    def _alternate(self, z, lb, ub, best):
        """Up to three block alternations from ``z``; feasible points are appended to ``best``."""
        cur = z
        for _ in range(3):
            moved = False
            for bm in self.bms:
                if best and self.stop():
                    return cur
                znew = self._primal_point(bm, cur, lb, ub, best)
                if znew is None:
                    continue
                if np.max(np.abs(znew - cur), initial=0) > 1e-9:
                    moved = True
                cur = znew
            if not moved:
                break
        return cur

    def descent_models(self):
        """The two block models of :meth:`descend`: the auxiliary columns (a lifted square ``r = x - w h`` of a
        residual, defined by an equality row) are free in both half-steps, the user's variables alternate between
        the blocks. With them in one block only, the other half-step meets ``r`` fixed: its rows ``r = x - w h``
        then pin ``h`` and the alternation stops after one round (0.89 on a 30 x 30 rank-5 NMF). Falls back to
        :attr:`bms` when a block is not convex that way."""
        if self._descent_bms is None:
            program, part = self.program, self._part
            aux = np.arange(program.n_user, program.n, dtype=np.int64)
            if not aux.size:
                bms = self.bms
                if self._bms is None:
                    return []   # stopped by the time limit while building them
                self._descent_bms = bms
            else:
                # the descent's own models first; :attr:`bms` (two more block models: 3 s each on a 50 x 60 rank-5
                # factorisation) only when one of them fails
                out = []
                for a, b in ((part.x, part.y), (part.y, part.x)):
                    if self.stop():
                        return []   # out of time (not cached): no descent
                    p = Partition(x=np.union1d(a, aux), y=np.setdiff1d(b, aux),
                                  connected=np.zeros(0, dtype=np.int64), names=program.names)
                    try:
                        out.append(BlockModel(program, p))
                    except ModelStructureError:
                        out = self.bms
                        if self._bms is None:
                            return []
                        break
                self._descent_bms = out
        return self._descent_bms

    def descend(self, z, lb, ub, out_of_time, rtol=1e-10, patience=5):
        """Alternating minimisation from ``z`` with extrapolation: best feasible ``(value, z)`` or None.

        A round solves GOP's primal problem for the first block of :meth:`descent_models` with the second block
        fixed, then the second block for that first one; both are convex, so a plain round never increases the
        objective. Plain rounds converge linearly and slowly on factorizations (a 30 x 30 rank-5 NMF: 0.1316
        after 40 rounds, 0.12737 after 180, the limit 0.1273709), so every round starts from the second block
        moved along its last step, ``y_e = y_k + beta (y_k - y_{k-1})`` clipped to the box, the heuristic
        extrapolation with restarts of Ang & Gillis (2019, "Accelerating nonnegative matrix factorization
        algorithms using extrapolation", Algorithm 2): ``beta`` grows by 5 % after a round that lowers the
        objective (its cap by 1 %) and a round that does not is discarded, the cap set to the ``beta`` that
        failed and ``beta`` divided by 1.5. Every point kept is a block optimum of a feasible start and is
        checked on the program (:meth:`checked`). Stops when ``patience`` rounds in a row lower the objective by
        less than ``rtol max(1, |f|)`` in total, at ``out_of_time()`` (asked once per round: a budget of rounds
        or seconds), or between two half-steps when :attr:`stop` says the run's time is up."""
        bms = self.descent_models()
        if len(bms) != 2 or self.stop():
            return None
        b1, b2 = bms
        y2 = b1.yi          # the second block: fixed in the first half-step
        best = []

        def round_from(zs):
            pts = []
            z1 = self._primal_point(b1, zs, lb, ub, pts)
            if z1 is None:
                return None, math.inf
            if (pts or best) and self.stop():
                # out of time between the half-steps: keep the checked point, end the descent
                best.extend(pts)
                return None, math.inf
            z2 = self._primal_point(b2, z1, lb, ub, pts)
            if z2 is None or not pts:   # pts holds only points checked feasible (_primal_point)
                return None, math.inf
            best.extend(pts)
            return pts[-1][1], pts[-1][0]

        cur, f = round_from(np.clip(z, lb, ub))
        if cur is None:
            return min(best, key=lambda t: t[0]) if best else None
        prev_y = None
        beta, beta_max, slow, f_ref = 0.5, 1.0, 0, f
        while not out_of_time():
            if prev_y is not None and beta > 0:
                ze = cur.copy()
                ze[y2] = np.clip(cur[y2] + beta * (cur[y2] - prev_y), lb[y2], ub[y2])
                nxt, fn = round_from(ze)
                if nxt is not None and fn < f:
                    beta, beta_max = min(beta_max, 1.05 * beta), min(1.0, 1.01 * beta_max)
                else:
                    beta_max, beta = beta, beta / 1.5
                    nxt, fn = round_from(cur)
            else:
                nxt, fn = round_from(cur)
            if nxt is None or not fn <= f:
                break
            prev_y, cur, f = cur[y2].copy(), nxt, fn
            if f_ref - f <= rtol * max(1.0, abs(f)):
                slow += 1
                if slow >= patience:
                    break
            else:
                slow, f_ref = 0, f
        return min(best, key=lambda t: t[0]) if best else None

    # ------------------------------------------------------------------ SLSQP polish
    def _evaluate(self, z):
        """Values and Jacobian of all expressions through the lifted form (one sparse product)."""
        key = z.tobytes()
        if self._cache is None or self._cache[0] != key:
            v, J = self.lifted.jacobian(z)
            self._cache = (key, v, J.toarray())
        return self._cache[1], self._cache[2]

    def _constraints(self):
        if self._cons is None:
            lo, hi = self.lifted.lo, self.lifted.hi
            eq = np.flatnonzero(lo == hi)
            up = np.flatnonzero((lo != hi) & np.isfinite(hi))
            dn = np.flatnonzero((lo != hi) & np.isfinite(lo))
            cons = []
            if eq.size:
                cons.append({"type": "eq", "fun": lambda z: self._evaluate(z)[0][eq] - lo[eq],
                             "jac": lambda z: self._evaluate(z)[1][eq]})
            if up.size:
                cons.append({"type": "ineq", "fun": lambda z: hi[up] - self._evaluate(z)[0][up],
                             "jac": lambda z: -self._evaluate(z)[1][up]})
            if dn.size:
                cons.append({"type": "ineq", "fun": lambda z: self._evaluate(z)[0][dn] - lo[dn],
                             "jac": lambda z: self._evaluate(z)[1][dn]})
            self._cons = cons
        return self._cons

    def _repair(self, z, lb, ub, steps=3):
        """Gauss-Newton projection of a nearly feasible point onto its equality and violated rows.

        Relaxation and SLSQP points end with row violations up to about 1e-6, which :meth:`violation`
        accepts (SCIP's ``feastol``) but which can buy objective: on the DMCP Markov-chain example
        (stationarity rows ``P x == x``) a McCormick point with a 7.7e-7 violation bought 2.8e-6 of
        relative objective, below the exact optimum.
        Each step solves ``J_A dz = -r_A`` in the least-norm sense over the variables strictly inside
        their bounds (``A``: equality rows and violated inequality rows; ``r``: their violations), so
        the violation falls quadratically near a regular point. The repaired point replaces ``z``
        only when its violation (:meth:`violation`) ends below 1e-9.
        """
        lo, hi = self.lifted.lo[1:], self.lifted.hi[1:]
        if self.violation(z) <= 1e-12:
            return z
        best, vbest = z, self.violation(z, own=False)
        if not math.isfinite(vbest):
            return z
        cur = z
        # the side each row has been pushed onto: a row stays in A once violated, so two nearly active rows
        # (ex4_1_9: both active at the optimum) are projected onto together instead of in turns
        side = np.where(lo == hi, lo, np.nan)
        with np.errstate(all="ignore"):
            for _ in range(steps):
                v, J = self._evaluate(cur)
                v, J = v[1:], J[1:]
                side = np.where(np.isnan(side) & (v < lo), lo, np.where(np.isnan(side) & (v > hi), hi, side))
                act = ~np.isnan(side)
                r = np.where(act, v - np.where(act, side, 0.0), 0.0)
                free = (cur > lb) & (cur < ub)
                if not act.any() or not free.any():
                    break
                try:
                    dz = np.linalg.lstsq(J[act][:, free], -r[act], rcond=None)[0]
                except np.linalg.LinAlgError:
                    break
                nxt = cur.copy()
                nxt[free] += dz
                nxt = np.clip(nxt, lb, ub)
                vn = self.violation(nxt, own=False)
                if not math.isfinite(vn):
                    break
                # a step may push a nearly active row that was not in A over its side (ex4_1_9: both rows active at
                # the optimum, one 3e-6 inside): that row is in A at the next step, so keep going from there
                cur = nxt
                if not vn < vbest:
                    continue
                best, vbest = nxt, vn
                if vbest <= 1e-12:
                    break
        # only an exact projection replaces z: a partial one (clipped at bounds, slow) can turn a rejected
        # point into an accepted one that still buys objective (ex3_1_1: 1.2e-5 -> 9e-7, 4e-7 below the
        # published optimum)
        return best if vbest <= 1e-9 else z

    def _slsqp(self, z0, lb, ub):
        bounds = [(lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None) for lo, hi in zip(lb, ub)]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            # a local polish: its failures (domain errors at trial points, iteration limits) are
            # harmless because every point is re-checked on the program
            warnings.simplefilter("ignore")
            try:
                r = minimize(lambda z: self._evaluate(z)[0][0], z0, jac=lambda z: self._evaluate(z)[1][0],
                             bounds=bounds, constraints=self._constraints(), method="SLSQP",
                             options={"maxiter": 60, "ftol": 1e-12})
            except (ValueError, np.linalg.LinAlgError):
                return None
        if not np.all(np.isfinite(r.x)):
            return None
        return np.clip(r.x, lb, ub)
