r"""GOP: certified global optimization of biconvex programs (Saddiki, Trapp & Flaherty 2017, §2.3; Floudas &
Visweswaran 1990, 1993; Floudas 2000, ch. 3).

Algorithm (Saddiki, Trapp & Flaherty 2017, §2.3 steps 0-5, as a best-first tree):

0. partition the variables (``x`` primal block, ``y`` relaxed-dual block, :mod:`.partition`),
   tighten the bounds (:mod:`.bounds`), pick ``y^1`` (``x0`` of the model or a seeded random
   point projected on the linear constraints of ``y``).
1. primal problem at ``y^k`` (:mod:`.primal`): upper bound ``UBD`` and multipliers
   ``lambda^k``; a feasibility problem when the primal is infeasible.
2.-3. the node whose relaxed-dual solution gave ``y^k`` is replaced by its children: one per
   combination ``B`` of bounds of the connected variables, each carrying the Lagrangian
   ``L_k`` linearised at ``x^k`` for ``B`` plus its qualifying constraints, together with the
   Lagrangians and qualifying constraints of all ancestors (this is exactly seed step 2: the
   earlier Lagrangians whose qualifying constraints hold in the region). Each child is a
   relaxed dual LP/QP (:mod:`.relaxed_dual`), solved serially or through an executor.
4. the open node with the lowest relaxed-dual value gives ``LBD`` and the next ``y^{k+1}``.
5. stop when ``UBD - LBD <= max(abs_gap, rel_gap |UBD|)``.

Improvement beyond the paper (option ``reduction``): node-wise search-space reduction of the
separable connected variables (docs/gop.md §6); presolve elimination of primal-block equalities
(option ``presolve``).
"""
from __future__ import annotations

import concurrent.futures as cf
import math

import numpy as np

from ...errors import InvalidOptionError, ModelStructureError, SolverBugError
from ...core.threads import SMALL_ORDER, blas_threads, option_threads
from ...options import Option, Options, OptionSet, common_options, nonnegative, start_options, thread_options
from ...registry import Solver, register_solver
from ...program.domains import with_atom_domains
from ...program.evaluable import evaluable_point
from ...program.scaling import scaling_pairs, with_scaling_rows
from ...program.symmetry import with_order_rows
from ...result import Result
from .lagrangian import primal_row_error
from .partition import Partition, analyze
from .clock import OutOfTime, check as check_clock, running, starting_point, timed_out
from .convex_direct import convex_form, solve_convex
from .epigraph import abs_epigraph
from .merged_atoms import merged_atom_rows
from .objective_rows import ge_rows_as_le, objective_rows
from ...program.eliminate import eliminate_equalities
from .relax import Lifted, NotRelaxable
from .search import GopSearch
from .stick import stick_breaking
from .symmetry import DETECT_SHARE, choose as choose_symmetry, orbits_for, symmetry_domain
from .tree import GopTree
from .unbounded import Unbounded, prove_unbounded


def _partition_domain(v):
    if isinstance(v, str):
        return (v,)
    if isinstance(v, (list, tuple, set, frozenset)):
        out = tuple(v)
        if not all(isinstance(s, str) for s in out):
            raise TypeError("partition must be a variable name or a list of names")
        return out
    raise TypeError("partition must be a variable name or a list of names")


def _executor_domain(v):
    if isinstance(v, cf.Executor) or (hasattr(v, "submit") and hasattr(v, "map")):
        return v
    raise TypeError("executor must be a concurrent.futures.Executor (e.g. ProcessPoolExecutor, "
                    "dask Client.get_executor()) or None")


#: share of the time left the equality elimination of GOP's loop may take (docs/gop.md §13m)
ELIM_SHARE = 0.3
#: share of the time left the scaling symmetry detection may take (docs/gop.md, "Time limits on larger models")
SCALING_SHARE = 0.2

OPTIONS = OptionSet(common_options(max_iter=100000) + start_options(
    seed_doc="seed of the random initial point of the relaxed-dual block (used when the model gives no starting "
             "values)")[1:] + [
    Option("rel_gap", 1e-6, "relative gap (UBD - LBD) / max(|UBD|, 1e-10) at which the optimum is certified",
           float, nonnegative, "must be >= 0"),
    Option("abs_gap", 1e-6, "absolute gap UBD - LBD at which the optimum is certified (None: relative only); when "
           "not given it equals rel_gap, so the certified gap is rel_gap max(1, |UBD|) (1e-6 by default, as in "
           "BARON and ANTIGONE: the LP relaxations are accurate to about 1e-7 of the objective's terms, so an "
           "optimum at 0 cannot be certified to 1e-9)",
           float, nonnegative, "must be >= 0", nullable=True),
    Option("partition", None, "variables of the primal (enumerated) block: names, or component names such as "
           "'mu' matching 'mu[0]', 'mu[1]', ...; None chooses the valid partition with the fewest connected "
           "variables", _partition_domain),
    Option("executor", None, "concurrent.futures.Executor used to solve the relaxed duals in parallel "
           "(ProcessPoolExecutor, dask Client.get_executor()); None solves them serially", _executor_domain),
    Option("bound_tightening", True, "tighten variable bounds by FBBT and OBBT (LPs with HiGHS) before solving",
           bool),
    Option("reduction", True, "search-space reduction (improvement beyond the paper, docs/gop.md §6): in every "
           "relaxed-dual region shrink the box of the separable connected variables to the side of the "
           "linearisation point selected by the qualifying constraint; False gives plain GOP", bool),
    Option("mode", "auto", "'gop': the primal / relaxed-dual iteration (Floudas & Visweswaran 1990); 'tree': "
           "spatial branch-and-bound with McCormick node relaxations and GOP primal problems for the upper bounds "
           "(Floudas 2000, ch. 3; McCormick 1976); 'auto': the iteration for programs with multiplied atom rows "
           "(ELBOs such as phi*log(pi)), the tree for the others and for lifted norms and nonlinear rows outside "
           "GOP's class; a program whose objective has no biconvex partition (concave or indefinite quadratics, "
           "odd cycles of products) is refused under 'auto' with the reason (a multiplied atom such as square(x) * y with y "
           "of both signs takes the tree, as Pyomo's lifted x**2 * y does), and certified by 'tree' when its "
           "McCormick relaxation covers every term (docs/gop.md §8, §8b); under 'auto' a program that is convex once its "
           "lifted norms and p-norms are read as cones is solved by one barrier solve with a Lagrangian-duality "
           "certificate instead (result.info['mode'] == 'convex'; docs/gop.md §13e)", str,
           lambda v: v in ("auto", "gop", "tree"), "must be 'auto', 'gop' or 'tree'"),
    Option("symmetry", "auto", "symmetry breaking (docs/gop.md §8c): 'auto' detects groups of variables whose "
           "exchange leaves the objective, the constraints and the bounds exactly invariant (mixture components) and "
           "orders one representative variable per group; 'off' adds nothing; a list of at least two groups of "
           "variable names declares the groups (the m-th names correspond; '*' matches one index, e.g. "
           "[['mu[0]', 'pi[0]', 'phi[*,0]'], ['mu[1]', 'pi[1]', 'phi[*,1]']]), checked exactly before use",
           symmetry_domain),
    Option("scaling", "auto", "scaling symmetry of bilinear factorizations (docs/gop.md §8e): 'auto' detects blocks "
           "X, Y that occur only in products x*y and in sign rows (NMF W[:, k], H[k, :]), so that x -> c x, "
           "y -> y / c leaves the program invariant, and adds a valid normalization row per pair (sum(x) == 1 "
           "when the scale is free; sum(x / U) >= 1 and, in the tree, a split of the root box on 'some x at its "
           "bound' when both blocks have finite bounds); 'off' adds nothing (symmetry='off' also turns it off); "
           "result.info['scaling'] lists the pairs, the rows and why", str, lambda v: v in ("auto", "off"),
           "must be 'auto' or 'off'"),
    Option("presolve", True, "eliminate linear equalities of the primal block by substitution (e.g. "
           "sum(pi) == 1): one connected variable fewer per equality; and substitute an objective variable by the equality "
           "that defines it (min objvar s.t. objvar == f(x), as MINLPLib writes models, is solved as min f(x); "
           "docs/gop.md §12c)", bool),
] + thread_options("1 thread: the interior-point primal problems factor small dense matrices, and "
                   "threads contending for shared cores made them 10x slower"))


def _resolve_partition(program, names):
    if names is None:
        return None
    idx = set()
    for nm in names:
        if nm in program.index:
            idx.add(program.index[nm])
            continue
        hits = [k for k, s in enumerate(program.names) if s.startswith(nm + "[") or s.startswith(nm + ".")]
        if not hits:
            raise InvalidOptionError(f"option 'partition': no variable named {nm!r} (variables: "
                                     f"{', '.join(program.names[:8])}{', ...' if program.n > 8 else ''})")
        idx.update(hits)
    return sorted(idx)


def _auto_threads(program):
    """The automatic ``blas_threads``: 1 thread, or unchanged (None) when the program's matrices are small
    enough for OpenBLAS to run them on one thread anyway (:data:`varopt.core.threads.SMALL_ORDER`)."""
    return None if program.n + len(program.constraints) <= SMALL_ORDER else 1


@register_solver
class GopSolver(Solver):
    name = "gop"
    summary = "certified global optimization of biconvex programs (primal / relaxed-dual GOP; Floudas & Visweswaran 1990, Saddiki et al. 2017)"
    options = OPTIONS

    # ------------------------------------------------------------------ setup
    def _solve(self, program, opts, run) -> Result:
        if "abs_gap" not in getattr(opts, "given", ()):
            # the certificate UBD - LBD <= rel_gap max(1, |UBD|): a tighter rel_gap tightens it near 0 too
            # (on a copy: a validated options object may be passed to several solves)
            given = getattr(opts, "given", ())
            opts = Options(**{**vars(opts), "abs_gap": opts.rel_gap})
            opts.given = given
        # the primal's warm starts carry over between the primal problems of one solve, not between solves (a
        # solve's iterates do not depend on what the process solved before)
        from .primal import reset_warm_starts
        reset_warm_starts(None if run.time_limit is None
                          else (lambda: run.elapsed() >= run.time_limit))
        with blas_threads(option_threads(opts.blas_threads, _auto_threads(program))), running(run):
            try:
                return self._solve_program(program, opts, run)
            except OutOfTime as exc:
                # stopped in the presolve, before the search had a point of the reduced program: the user's
                # starting point when feasible, the interval bound over the user's box (docs/gop.md, "Time
                # limits on larger models")
                run.x = run.objective = None
                return timed_out(run, program, str(exc).split("during ")[-1])
            finally:
                # the run's deadline must not outlive the run: the primal functions called on their own after a
                # time-limited solve stopped at once (a test of the interior point after one, in the same process)
                reset_warm_starts(None)

    def _solve_program(self, program, opts, run) -> Result:
        program.check_finite()
        user = program
        # min objvar s.t. objvar == f(x) (MINLPLib's form): objvar substituted by f(x) (exact) where that puts the
        # program in GOP's class (a convex QP written so: one primal problem instead of a tree that relaxes the
        # equality's products one by one); the tree keeps the row (on MINLPLib's concave QPs st_fp7a/b the tree
        # over the substituted objective took 2.5x the nodes of the tree over the row)
        rewrite = opts.presolve and opts.mode != "tree"
        checked = {}   # id -> (program, partition or its error) of the class checks: no partition is computed twice

        def in_class(p):
            try:
                checked[id(p)] = (p, analyze(p, _resolve_partition(p, opts.partition)))
                return True
            except ModelStructureError as exc:
                checked[id(p)] = (p, exc)
                return False
        # 18.3 x log x - 17.3 x log x as the one convex row x log x, where only that puts the program in GOP's class
        merged = merged_atom_rows(program) if rewrite else None
        if merged is not None and (in_class(program) or not in_class(merged)):
            merged = None
        if merged is not None:
            program = merged
        flipped = ge_rows_as_le(program) if rewrite else None
        # h(z) >= lo rows with squares or atoms as -h(z) <= -lo, where only that puts the program in GOP's class
        if flipped is not None and (in_class(program) or not in_class(flipped)):
            flipped = None
        if flipped is not None:
            program = flipped
        defn = objective_rows(program) if rewrite else None
        if defn is not None and not in_class(defn.program):
            defn = None
        if defn is not None:
            program = defn.program
        epi = abs_epigraph(program)  # |u| rows -> t >= |u| (exact for convex uses; others rejected)
        if epi is not None:
            program = epi[0]
        # cp.entr(p) over a free p: the primal problems must stay where p >= 0 (they met NaN objectives)
        program = with_atom_domains(program)
        xpart = _resolve_partition(program, opts.partition)
        mode, lifted = opts.mode, None
        try:
            known = checked.get(id(program))
            if known is not None and known[0] is program and isinstance(known[1], ModelStructureError):
                raise known[1]
            part = known[1] if known is not None and known[0] is program else analyze(program, xpart)
            outside = None
        except ModelStructureError as exc:
            # outside GOP's class (the defining row t^2 == e of a lifted norm, a concave square, an odd
            # cycle of products): the tree still certifies it when the McCormick relaxation covers every
            # term (docs/gop.md §8b). The partition's error is kept for mode='gop' and an explicit partition;
            # under mode='auto' also for a non-biconvex objective or product (issue 11's bad-input rule: the
            # user learns that the model is outside the class), where mode='tree' is the user's explicit
            # choice; 'auto' falls back to the tree only for lifted terms (norms) and nonlinear constraints
            if mode == "gop" or xpart is not None:
                raise
            # (the user's rows: a nonlinear objective the user wrote as a row, objvar == f(x), was substituted)
            rows = user.constraints if defn is not None else program.constraints
            if mode == "auto" and not (user.aux or any(not c.body.is_linear for c in rows)
                                       or getattr(exc, "tree_ok", False)):
                if type(exc) is not ModelStructureError:
                    raise
                raise ModelStructureError(
                    f"{exc}. The model is not biconvex, so GOP's primal / relaxed-dual iteration does not apply; "
                    "mode='tree' certifies it by spatial branch-and-bound over the McCormick relaxation "
                    "when that covers every term") from None
            part, outside = Partition(x=np.arange(program.n), y=np.zeros(0, dtype=np.int64),
                                      connected=np.zeros(0, dtype=np.int64), names=list(program.names),
                                      notes=[f"not biconvex ({exc}); tree without primal problems"]), exc
        direct, convex_note, tried = None, None, False
        # the presolve's phases below take seconds on programs of thousands of terms (a 50 x 60 rank-5
        # factorisation: the partition, the convexity test, the scaling and symmetry detection 1-2 s each); the
        # clock is read between them (docs/gop.md, "Time limits on larger models")
        check_clock(run, "the partition")
        if mode != "gop":
            try:
                lifted = Lifted(program)
            except NotRelaxable as e:
                # a convex program the tree cannot relax (log-sum-exp or two-argument atoms in its rows): the direct
                # convex path before refusing (docs/gop.md §13e)
                if mode == "auto" and xpart is None and (
                        outside is not None or primal_row_error(program, _primal_mask(program.n, part)) is not None):
                    direct, convex_note = _solve_direct(program, opts, run, _completion(user, epi),
                                                        user.aux if epi is not None else None)
                    tried = True
                if direct is not None:
                    pass
                elif outside is not None:
                    # the tree is what takes such programs; say why it cannot (the partition's error alone sent the
                    # user to an auxiliary row of a norm they wrote next to a term the tree does not relax)
                    raise ModelStructureError(f"{outside}; the spatial tree (mode='tree'), which certifies such "
                                              f"programs, does not cover {e}{_also(convex_note)}") from None
                elif mode == "tree":
                    raise InvalidOptionError(f"option mode='tree': the McCormick relaxation does not cover {e}; "
                                             f"use mode='gop'") from None
                row_err = None if direct is not None else primal_row_error(program, _primal_mask(program.n, part))
                if row_err is not None:
                    # neither method applies (sum(logistic(x)) <= 2): say both reasons, not only the iteration's
                    # "nonlinear in the primal block" about a convex row the user expects a convex solver to take
                    raise ModelStructureError(f"{row_err}; the spatial tree (mode='tree'), which takes nonlinear "
                                              f"constraints, does not cover {e}{_also(convex_note)}") from None
            # auto: the iteration where it is strong (ELBOs with multiplied atom rows; convex
            # programs, which are one primal problem when no variable is connected)
            # (not for rows GOP's primal problems cannot take: a convex ``x**2 + y**2 <= 2`` with no connected
            # variable is in GOP's class but dualised in the Lagrangian, which is linear in the primal block)
            # (multiplied atom rows that pair one multiplier with one atom, as in a relative entropy
            # sum_i x_i log(x_i / y_i) over separate variables, go to the tree: docs/gop.md §8j)
            iteration_strong = lifted is None or (lifted.nP and not _paired_products(lifted)) \
                or part.connected.size == 0
            if mode == "auto" and outside is None and iteration_strong \
                    and (lifted is None or primal_row_error(program, _primal_mask(program.n, part)) is None):
                lifted = None
        # a convex program in lifted form (norms, p-norms, convex nonlinear rows) that 'auto' would send to the
        # tree: one interior-point solve with a duality certificate instead (docs/gop.md §13e); the tree when it
        # is not recognised as convex or the solve does not reach its tolerances
        # (also a program without connected variables whose nonlinear rows GOP's iteration would outer-approximate
        # in its relaxed duals, which need bounds: log_sum_exp(x) <= 1 over a free x)
        check_clock(run, "the relaxation's lifted form")
        if not tried and mode == "auto" and xpart is None and (
                lifted is not None or (outside is None and part.connected.size == 0 and part.y.size
                                       and any(not c.body.is_linear for c in program.constraints))):
            direct, convex_note = _solve_direct(program, opts, run, _completion(user, epi),
                                                user.aux if epi is not None else None)
        # the program the convex path sees (the reductions below change it): its fallback when GOP's iteration meets
        # an unbounded subproblem it cannot settle
        direct_program, direct_complete = program, _completion(user, epi)
        # scaling symmetries first: the permutation symmetries below are then those of the normalized
        # program, so both breakings hold together (docs/gop.md §8e)
        scal_info, split = None, None
        if direct is None:
            check_clock(run, "the convexity test")
        if opts.scaling == "auto" and opts.symmetry != "off" and direct is None:
            base = program
            # a share of the time left (no clock without a time limit): its flip checks evaluate every row at six
            # points per pair (4 s on a 50 x 60 rank-5 factorisation at load 7); stopped, no pair is used
            scal_end = run.phase_end(SCALING_SHARE)
            scal_stop = None if math.isinf(scal_end) else (lambda: run.elapsed() >= scal_end)
            program, scal_info, split = _normalize_scaling(base, products=lifted is not None, stop=scal_stop)
            if scal_info is not None and scal_info["rows"]:
                if outside is None:
                    try:
                        part = analyze(program, part.x.tolist())
                    except ModelStructureError:
                        # the RLT rows (products of the row with the other block) may leave the user's
                        # biconvex partition; the normalization row alone never does (it is linear)
                        program, scal_info, split = _normalize_scaling(base, products=False)
                        part = analyze(program, part.x.tolist())
                if lifted is not None:
                    lifted = Lifted(program)
                else:
                    split = None
                run.progress("gop: scaling symmetry " + "; ".join(scal_info["pairs"]) + "; rows "
                             + "; ".join(scal_info["rows"]) + (f"; {scal_info['split']}" if split else ""))
            elif scal_info is not None and scal_info.get("disjunctions"):
                # signed factors only (docs/gop.md §8e-s): no row, the disjunction is used by the tree's root split
                if lifted is None:
                    split = None
                if split is not None:
                    run.progress("gop: scaling symmetry " + "; ".join(scal_info["pairs"]) + "; "
                                 + "; ".join(scal_info["disjunctions"]) + f"; {scal_info['split']}")
            if split is None and scal_info is not None:
                scal_info.pop("split", None)
                if scal_info.get("disjunctions"):
                    scal_info["disjunctions"] = [d + " [not used: no root split (plain GOP, or more than "
                                                 f"{MAX_SPLIT_BOXES} boxes)]" for d in scal_info["disjunctions"]]
        sym_info, order_names = None, None
        if direct is None:
            check_clock(run, "the scaling symmetry detection")
        # a program without connected variables is solved as one convex primal problem: nothing to break
        sym_end, sym_cut = run.phase_end(DETECT_SHARE), []

        def sym_stop():
            run.heartbeat("presolve: symmetry detection")   # seconds on a 1,200-column NMF under load
            if run.elapsed() >= sym_end:
                sym_cut.append(True)
                return True
            return False
        orbits = orbits_for(program, opts.symmetry, stop=sym_stop) \
            if direct is None and (part.connected.size or opts.symmetry not in ("auto", "off")) else []
        if split and orbits:
            # the root split is no row of the program: a permutation symmetry keeps the split's set only when it
            # permutes the disjunctions among themselves (docs/gop.md §8e-s); other orbits are not broken
            kept = [o for o in orbits if all(_keeps_split(p, split) for p in o.perms)]
            if len(kept) < len(orbits):
                run.progress(f"gop: {len(orbits) - len(kept)} symmetry orbit(s) move the scaling split's "
                             "variables elsewhere: not broken")
            orbits = kept
        sym_note = None
        if sym_cut:
            sym_note = (f"symmetry detection stopped at {run.elapsed():.3g} s (its share {DETECT_SHARE:g} of the "
                        f"time limit); {len(orbits)} orbit(s) verified by then")
            run.progress("gop: " + sym_note)
        if orbits:
            how, reps = choose_symmetry(program, part, orbits, tree=lifted is not None, box_ok=opts.reduction)
            names = [program.names[int(v)] for v in reps] if reps is not None else []
            sym_info = {"groups": [o.describe(program.names) for o in orbits], "breaking": how, "ordered": names}
            if how == "rows":
                program = with_order_rows(program, reps)
                if outside is None:  # a program outside GOP's class keeps its tree-only partition
                    part = analyze(program, part.x.tolist())
                if lifted is not None:
                    lifted = Lifted(program)
            elif how == "box":
                order_names = names
            run.progress(f"gop: {sym_info['groups'][0]}; "
                         + (f"ordering {' <= '.join(names)} ({'node boxes' if how == 'box' else 'rows'})"
                            if how else "no representative usable for symmetry breaking"))
        stick = None
        if opts.presolve and opts.reduction and lifted is None:
            # mixture weights of K >= 3 components: separable stick-breaking coordinates (§2b)
            stick = stick_breaking(program, part)
            if stick is not None:
                base = program
                program = stick.program
                keep = [program.index[base.names[i]] for i in part.x if base.names[i] in program.index]
                part = analyze(program, keep + stick.svars.tolist())
        elim = None
        # not without relaxed-dual variables (a convex program, one primal problem): elimination only serves the
        # relaxed duals, and its substitutions fill the Hessian (50 rows of a 1,000-column projection: 7 s to
        # eliminate, then 15 s in HiGHS's QP on the filled Hessian; Clarabel 0.3 s)
        if opts.presolve and lifted is None and part.y.size:
            # a share of the time left (no clock without a time limit): on the pooling programs foulds3-5 in the
            # pq form with mode='gop' the 50 eliminations took 1.0-1.6 s, past time_limit=0.5 (docs/gop.md §13m)
            elim_end = run.phase_end(ELIM_SHARE)
            elim = eliminate_equalities(program, set(part.x.tolist()),
                                        stop=None if math.isinf(elim_end) else (lambda: run.elapsed() >= elim_end))
        if elim is not None:
            orig = program
            program = elim.program
            keep = [program.index[orig.names[i]] for i in part.x if orig.names[i] in program.index]
            part = analyze(program, keep)
        proof = None
        try:
            if direct is None:
                check_clock(run, "the presolve")
            if direct is not None:
                res = direct
            elif lifted is not None:
                search = GopTree(program, part, opts, run, lifted)
                search.local.complete = _completion(user, epi)
                search.root_split = split
            else:
                search = GopSearch(program, part, opts, run)
                search.accept = None if stick is None else (
                    stick.accept if elim is None else (lambda z: stick.accept(elim.expand(z))))
                search.order = None if order_names is None else np.array(
                    [program.index[nm] for nm in order_names], dtype=np.int64)
            if direct is None:
                res = search.solve()
                if res.status == "time_limit" and res.x is None:
                    # no point from the search in the time given: the model's start, or 0 or the box's midpoint,
                    # when feasible (checked), so the user gets a point where the model evaluates
                    res = _with_start(res, program)
        except KeyboardInterrupt:
            # the incumbent is a point of the reduced program: it is mapped back below like a finished run's
            res = run.interrupted()
        except OutOfTime as exc:
            # a one-shot LP or a setup step of the search stopped by the time limit: the run's incumbent (a point
            # of the reduced program, mapped back below) or the program's feasible start, and a valid bound
            res = timed_out(run, program, str(exc).split("during ")[-1])
        except Unbounded as exc:
            proof = prove_unbounded(program, part, run.x, exc)
            run.x = None
            if proof is None and mode == "auto" and xpart is None and convex_note is None and not tried:
                # no affine ray (an objective or a row curved along every ray: min -y + exp(z) s.t. y + z <= 0), or
                # no ray at all (a relaxed dual unbounded for lack of bounds on a bounded convex program): a convex
                # program is settled by the convex path, with its recession-function rays (docs/gop.md §13e)
                direct, convex_note = _solve_direct(direct_program, opts, run, direct_complete,
                                                    user.aux if epi is not None else None)
                if direct is not None:
                    proof, res = None, direct
                    program, elim, stick, scal_info, sym_info = direct_program, None, None, None, None
            if proof is None and direct is None:
                raise
        if direct is None and proof is not None:
            # the ray's points have no finite optimum: no point is loaded, bounds are -inf
            z, d = proof
            extra = {}
            if defn is not None and list(program.names) == list(user.names):
                # the certificate is one of the reduced program: each objective variable follows its definition
                # along the ray (the user's rows hold along it only so)
                z, d, curved = defn.complete_ray(z, d)
                program = user
                extra["objective_rows"] = defn.describe(user)
                if curved:
                    extra["unbounded_ray_note"] = (
                        f"{', '.join(user.names[t] for t in curved)} follow(s) their defining rows along the ray, "
                        "which are not affine along it: the certificate is z + s d with those variables at "
                        "their definitions")
            ray = {program.names[j]: float(d[j]) for j in np.flatnonzero(d)}
            # in the user's sense: a maximised objective increases along the ray (the program minimises its negative)
            way = "increases" if user.maximize else "decreases"
            return run.finish("unbounded", f"the objective {way} without bound along a feasible ray "
                              f"(from a feasible point, moving {', '.join(list(ray)[:6])}); see "
                              "result.info['unbounded_ray']", x=None, objective=-math.inf, lower=-math.inf,
                              upper=-math.inf, info=dict(partition=part.describe(), unbounded_ray=ray,
                                                         unbounded_from=z, **extra))
        if convex_note is not None:
            res.info["convex_path"] = convex_note
        if outside is not None and direct is None:
            # the partition's named reason, for the user who expected GOP's primal/relaxed-dual iteration
            res.info["not_biconvex"] = f"{outside}; certified by the spatial tree (McCormick relaxation) instead"
        if scal_info is not None:
            res.info["scaling"] = scal_info
        if sym_info is not None:
            if getattr(search, "order_note", None):
                sym_info["note"] = search.order_note
            res.info["symmetry"] = sym_info
        if sym_note is not None:
            res.info.setdefault("symmetry", {})["detection"] = sym_note
        if elim is not None:
            if res.x is not None:
                res.x = elim.expand(res.x)
            res.info["eliminated"] = [f"{v} (by {c})" for v, c in elim.eliminated]
            program = orig
        if stick is not None:
            if res.x is not None:
                res.x = stick.expand(res.x)
            res.info["stick_breaking"] = stick.describe()
            program = base
        if epi is not None:
            if res.x is not None:
                res.x = np.asarray(res.x, dtype=float)[:epi[1]]
            program = user
        if defn is not None:
            if res.x is not None:
                # each objective variable at its definition (the reduced program fixed it at 0)
                res.x = defn.complete(res.x)
                f = float(user.objective.value(res.x))
                if res.objective is not None and math.isfinite(f):
                    res.objective = f
                    if res.upper_bound is not None and f < res.upper_bound:
                        res.upper_bound = f
            res.info["objective_rows"] = defn.describe(user)
            program = user
        if flipped is not None:
            res.info["rows_as_le"] = [c.name for c, d in zip(user.constraints, flipped.constraints) if c is not d]
            program = user
        if res.x is not None:
            if program.aux:
                # lifted squares/norms: auxiliary columns exactly at their definition, so the reported
                # objective is the user's model at the loaded point
                res.x = program.complete_aux(res.x)
                res.objective = float(program.objective.value(res.x))
            _load_evaluable(program, res, opts)
        return res


def _with_start(res, program):
    """``res`` with :func:`.clock.starting_point` of ``program`` as its point and upper bound when one is feasible."""
    start = starting_point(program)
    if start is not None:
        res.x, res.objective = start
        res.upper_bound = start[1] if res.upper_bound is None else min(res.upper_bound, start[1])
        if res.lower_bound is not None and res.lower_bound > res.objective:
            res.lower_bound = res.objective
        res.info["loaded_point"] = "the time limit came before the search found a point: a feasible start"
    return res


def _also(note):
    """``note`` (why the direct convex path did not apply) as the tail of an error message."""
    return "" if note is None else f" ({note})"


def _solve_direct(program, opts, run, complete, aux=None):
    """``(Result, note)`` of :func:`.convex_direct.solve_convex` when ``program`` is a convex program in lifted form
    and the interior-point method reaches its tolerances, else ``(None, why)`` (the tree then runs, and ``why``
    goes to ``result.info['convex_path']``)."""
    form, why = convex_form(program, aux)
    if form is None:
        return None, None if why is None else f"not solved as a convex program: {why}"
    try:
        out = solve_convex(program, form, opts, run, complete, aux)
    except (ModelStructureError, SolverBugError, np.linalg.LinAlgError) as exc:
        out = (None, str(exc))
    if out[0] is None:
        run.progress(f"gop: convex path abandoned ({out[1]}); spatial tree")
        return None, f"convex path abandoned: {out[1]}; solved by the tree"
    status, z, lower, upper, info = out
    info["convex_form"] = form.notes
    if status == "unbounded":
        ray = [nm for nm in info["unbounded_ray"] if nm in program.index and program.index[nm] < program.n_user]
        way = "increases" if program.maximize else "decreases"
        return run.finish("unbounded", f"the objective {way} without bound along a feasible ray of the convex "
                          f"program (from a feasible point, moving {', '.join(list(ray)[:6])}); see "
                          "result.info['unbounded_ray']",
                          x=None, objective=-math.inf, lower=-math.inf, upper=-math.inf, info=info), None
    if status == "infeasible":
        return run.finish("infeasible", f"the convex program is infeasible ({info.get('reason', '')})",
                          lower=math.inf, upper=math.inf, info=info), None
    gap = upper - lower
    tol = max(opts.abs_gap or 0.0, opts.rel_gap * max(abs(upper), 1e-10))
    run.stop("optimal" if gap <= tol else "converged",
             "certified by Lagrangian duality at the interior-point solution" if gap <= tol else
             f"the duality gap {gap:.3g} is above the tolerance {tol:.3g}")
    return run.finish(x=z, objective=upper, lower=lower, upper=upper, info=info), None


#: at most this many root boxes from the disjunctions of bounded scaling pairs (a product over the pairs)
MAX_SPLIT_BOXES = 64


def _normalize_scaling(program, products=False, stop=None):
    """``(program', info, split)``: ``program`` with the normalization row of every scaling pair
    (:mod:`varopt.program.scaling`; docs/gop.md §8e), the description for ``result.info['scaling']``
    and the root split of the tree (a list of ``[(v, value), ...]`` disjunctions, one per bounded pair,
    or None when there is none or the product of their sizes exceeds :data:`MAX_SPLIT_BOXES`)."""
    pairs = scaling_pairs(program, stop=stop)
    if not pairs:
        return program, None, None
    names = program.names
    used = [pr for pr in pairs if pr.kind in ("==", ">=")]
    signed = [pr for pr in pairs if pr.kind == "split"]
    info = {"pairs": [pr.describe(names) for pr in pairs],
            "rows": [f"{pr.row_text(names)} ({pr.reason})" for pr in used],
            "skipped": [f"{pr.describe(names)}: {pr.reason}" for pr in pairs if pr.kind is None]}
    if signed:
        # signed factors (docs/gop.md §8e-s): a disjunction for the root split, no row
        info["disjunctions"] = [f"{pr.split_text(names)} ({pr.reason})" for pr in signed]
    if not info["skipped"]:
        del info["skipped"]
    split = [pr.split for pr in pairs if pr.kind is not None and pr.split]
    boxes = math.prod(len(d) for d in split) if split else 0
    if split and boxes <= MAX_SPLIT_BOXES:
        info["split"] = (f"root box split into {boxes} boxes: in each pair some variable of the normalized "
                         "block at its bound")
    else:
        split = None
    if used:
        program = with_scaling_rows(program, pairs, products=products)
        if products:
            info["rows"].append("each row times each variable of the partner block (implied rows; they bound the "
                                "partner block through the products in the relaxation)")
    return program, info, split


def _keeps_split(p, split):
    """True when the permutation ``p`` (variable ``v`` renamed ``p[v]``) maps every disjunction of ``split`` (a set
    of ``(v, value)``) onto one of them. Then, since ``p`` keeps bounds and values, it maps the set of points
    satisfying one term of every disjunction onto itself, and ordering rows (§8c) may be added to the split."""
    sets = {frozenset((int(v), float(val)) for v, val in d) for d in split}
    return all(frozenset((int(p[v]), float(val)) for v, val in d) in sets for d in split)


def _completion(user, epi):
    """``z -> z'`` with the front-end's auxiliary columns and the abs epigraph columns at their exact
    definitions (``q = Q(x)``, ``t = sqrt(e)``, ``t = |u|``), or None when there are none."""
    if not user.aux and epi is None:
        return None

    def complete(z):
        z = np.array(z, dtype=float)
        n = user.n
        if user.aux:
            with np.errstate(all="ignore"):
                z[:n] = user.complete_aux(z[:n])
        if epi is not None:
            z[n:] = np.maximum(np.abs(epi[2] @ z[:n] + epi[3]), z[n:] * 0.0)
        return z
    return complete


def _load_evaluable(program, res, opts):
    """Return a point at which the user's model evaluates (``phi > 0`` where the model has
    ``phi*log(phi)``), within the gap tolerance of the certified value (docs/gop.md §10b)."""
    f0 = program.objective.value(res.x)
    tol = max(opts.abs_gap or 0.0, opts.rel_gap * max(abs(f0), 1e-10))
    z, note = evaluable_point(program, res.x, tol)
    if note is not None:
        res.info["loaded_point"] = note
    if z is not res.x:
        res.x = z
        res.objective = float(program.objective.value(z))


def _paired_products(lifted) -> bool:
    """True when every multiplied atom column ``P = w T`` pairs its own atom with its own multiplier: no atom has two
    multipliers and no multiplier two atoms (``sum_i x_i log y_i``). An ELBO's ``phi_ik log pi_k`` shares each
    ``log pi_k`` among all ``phi_ik`` and each ``phi_ik`` also multiplies a square (Saddiki, Trapp & Flaherty 2017):
    the relaxed duals over the few connected ``pi``, ``mu`` are strong there and McCormick envelopes of every
    ``phi_ik T`` are not; with one-to-one pairs the tree's envelopes close pair by pair (docs/gop.md §8j)."""
    n = lifted.nP
    return bool(n) and len(set(lifted.PT.tolist())) == n and len(set(lifted.Pw.tolist())) == n


def _primal_mask(n, part):
    is_x = np.zeros(n, dtype=bool)
    is_x[part.x] = True
    return is_x
