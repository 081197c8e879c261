"""The ``majorize`` solver: Algorithm 2 of Jebara & Choromanska (NIPS 2012) on a compiled program.

Recognised objective (internal, minimised)::

    f(theta) = k + c^T theta + 1/2 theta^T H theta                (linear, PSD quadratic, square atoms)
             + sum_{g: c_g > 0} c_g log sum_{k in g} exp(A_k theta + b_k)    (partition functions)
             + sum_{g: c_g < 0} c_g log sum_{k in g} exp(A_k theta + b_k)    (latent numerators, section 4)

subject to linear constraints and bounds (``theta in Lambda``). Each iteration at ``theta~``:
Algorithm 1 bounds every positive term (``Sigma_g``), the Jensen bound of section 4 replaces every
negative one by its tangent plane, giving the majorizer

    m(D) = f(theta~) + u^T D + 1/2 D^T (H + sum_g c_g Sigma_g + rho I) D,   u = grad f(theta~),

and the step minimises ``m`` over ``theta~ + D in Lambda`` (Algorithm 2 step 3: a QP solved by
varopt.highs; without constraints the closed form ``D = -Sigma^{-1} u`` by Cholesky, or by
Woodbury when the bound is low rank, Algorithm 4). ``f(theta~ + D) <= m(D) <= m(0) = f(theta~)``
makes the iteration monotone; the solver checks both inequalities every iteration and raises
:class:`~varopt.errors.SolverBugError` when ``f`` exceeds the majorizer by more than 1e-12 relative.

Hot path: groups of at most 64 configurations use the padded row-space form of Algorithm 1
(:mod:`.groups`); with a diagonal regularizer and few bound rows the step is the matrix-free
row-space Woodbury solve of :meth:`.groups.PaddedGroups.woodbury_solve`, whose score images let
the next scores be combined instead of recomputed (docs/majorize.md section 2); unconstrained
problems add the monotone secant/subspace extrapolation of :mod:`.extrapolate` (option
``extrapolate``; beyond the paper).
"""
from __future__ import annotations

import math
import time

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack
import scipy.sparse as sp

from ...errors import InputDataError, InvalidOptionError, ModelStructureError, SolverBugError
from ...program.atoms import ATOMS
from ...options import Option, OptionSet, common_options, nonnegative, positive
from ...registry import Progress, Solver, register_solver
from ...result import Result
from .bound import compute_bound, min_norm_solve
from .extrapolate import MEMORY, secant_extrapolate
from .groups import PaddedGroups
from .lowrank import LowRankSigma, diagonal_dominance

#: relative slack allowed between f(theta_new) and the majorizer (rounding only)
MONO_TOL = 1e-12
#: scores computed by linearity are recomputed exactly every this many iterations
REFRESH = 16
#: largest change of the objective (relative to max(1, |f|)) that the rounding of scores computed by
#: linearity may cause; beyond it the scores are recomputed exactly (two such values enter the 1e-12
#: bound check)
LIN_TOL = 2.5e-13
#: gradient left outside the range of the bound's curvature (relative to the first gradient's norm)
#: that means an unbounded objective (the objective is affine along flat directions of the bound)
FLAT_TOL = 1e-6
#: ||theta|| beyond which the iterates count as diverging (IPOPT's diverging_iterates_tol)
DIVERGED = 1e20


def _finite(name, arr, allow_neginf=False):
    a = arr.data if sp.issparse(arr) else np.asarray(arr, dtype=float)
    if np.isfinite(a).all():
        return
    if not allow_neginf or np.isnan(a).any() or (a == np.inf).any():
        raise InputDataError(f"{name} contains NaN or inf")


_CTL = []


def _threadpool_controller():
    """One cached threadpoolctl controller (building it scans the loaded libraries: ~5 ms)."""
    if not _CTL:
        try:
            from threadpoolctl import ThreadpoolController
            _CTL.append(ThreadpoolController())
        except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
            _CTL.append(None)
    return _CTL[0]


def _woodbury_solve(Dg, R, u):
    """Solve ``(diag(Dg) + R^T R) x = u`` with ``Dg >= 0``, ``R`` (K x n), ``K << n`` (dense ``R``: groups
    too large for the padded row-space form of :meth:`.groups.PaddedGroups.woodbury_solve`).

    Coordinates with ``Dg > 0`` (a) use the Woodbury identity
    ``(Da + Ra^T Ra)^{-1} = Da^{-1} - Da^{-1} Ra^T (I + Ra Da^{-1} Ra^T)^{-1} Ra Da^{-1}``; the few with
    ``Dg = 0`` (b, e.g. unpenalized intercepts) are eliminated by their Schur complement, solved in the
    minimum-norm sense (a singular complement is a flat direction of the bound).
    """
    a = Dg > 0
    b = ~a
    Da, Ra = Dg[a], R[:, a]
    RaD = Ra / Da
    C = np.eye(R.shape[0]) + RaD @ Ra.T
    cf = sla.cho_factor(C, check_finite=False)

    def winv(V):
        DV = V / Da[:, None]
        return DV - RaD.T @ sla.cho_solve(cf, Ra @ DV, check_finite=False)
    x = np.zeros_like(u)
    if not np.any(b):
        x[a] = winv(u[a][:, None])[:, 0]
        return x
    Rb = R[:, b]
    X1 = winv(np.column_stack([u[a], Ra.T @ Rb]))
    xa0, Y = X1[:, 0], X1[:, 1:]
    RbRa = Rb.T @ Ra
    Sb = Rb.T @ Rb - RbRa @ Y
    rhs = u[b] - RbRa @ xa0
    xb = min_norm_solve(*np.linalg.eigh(0.5 * (Sb + Sb.T)), rhs)
    x[b] = xb
    x[a] = xa0 - Y @ xb
    return x


def _gram(R) -> np.ndarray:
    """Dense ``R^T R``: BLAS on a dense copy unless ``R`` is very sparse (sparse x sparse is slow when dense)."""
    if sp.issparse(R):
        K, d = R.shape
        if R.nnz > 0.02 * K * d and K * d <= 2e8:
            Rd = R.toarray()
            return Rd.T @ Rd
        return np.asarray((R.T @ R).toarray())
    return R.T @ R


def _lse_value_gradient(part, starts, x, want_grad=True):
    """``sum_g c_g log sum_{k in g} exp(A_k x + b_k)`` and its gradient for merged groups ``part``."""
    A, b, seg, coef = part
    s = A @ x + b
    mx = np.maximum.reduceat(s, starts)
    e = np.exp(s - mx[seg])
    tot = np.add.reduceat(e, starts)
    val = float(coef @ (mx + np.log(tot)))
    if not want_grad:
        return val, None
    return val, A.T @ (e * (coef / tot)[seg])


def _linear_scores(groups, S, img_step, images, limit):
    """``lin(a, b)`` for :func:`secant_extrapolate`: scores of ``x + a D + sum_j b_j s_j`` by linearity."""
    def lin(a, b):
        return groups.combine(S, [(a, img_step)] + list(zip(b, images)), limit)
    return lin


def _group_starts(seg):
    """First row of every group of the sorted group ids ``seg``."""
    return np.flatnonzero(np.concatenate(([True], seg[1:] != seg[:-1])))


class MajorizeModel:
    """The program split into the pieces Algorithm 2 needs (checked once)."""

    #: groups with at most this many configurations use the padded row-space bound (groups.py)
    PADDED_MAX_ROWS = 64

    def __init__(self, program):
        obj = program.objective
        oname = program.objective_name
        n = program.n
        self.program = program
        self.n = n
        for a in obj.atoms:
            if not ATOMS[a.kind].quadratic:
                raise ModelStructureError(
                    f"majorize: {oname!r} has a {a.kind!r} atom ({len(a)} row(s)); only log-sum-exp (partition "
                    "function) terms, linear terms and convex quadratic regularizers are log-linear/quadratic")
            if np.any(a.mult >= 0):
                r = int(np.flatnonzero(a.mult >= 0)[0])
                raise ModelStructureError(
                    f"majorize: {oname!r} has a product w*g: variable {program.names[a.mult[r]]!r} times a square "
                    "atom; products of variables are not supported")
            if np.any(a.coef < 0):
                raise ModelStructureError(f"majorize: {oname!r} has a square atom with a negative coefficient "
                                          "(a concave quadratic); the majorizer would not be convex")
        for g in obj.lse:
            if np.any(g.mult >= 0):
                r = int(np.flatnonzero(g.mult >= 0)[0])
                raise ModelStructureError(
                    f"majorize: {oname!r} has a product w*log-sum-exp: variable {program.names[g.mult[r]]!r} "
                    "multiplies a partition function; only constant coefficients are supported")
            _finite(f"log-sum-exp features of {oname!r}", g.A)
            _finite(f"log-sum-exp offsets (log base measure) of {oname!r}", g.b, allow_neginf=True)
            _finite(f"log-sum-exp coefficients of {oname!r}", g.coef)
        _finite(f"linear coefficients of {oname!r}", obj.linear)
        _finite(f"quadratic coefficients of {oname!r}", obj.quadratic.v)
        q = obj.quadratic
        if not obj.atoms and np.array_equal(q.i, q.j):
            # separable squares (ridge penalties): H is the diagonal 2 v, no sparse algebra needed
            self.Hd = np.bincount(q.i, weights=2.0 * q.v, minlength=n) if q.v.size else np.zeros(n)
            self._H = None  # built on first use (most solves never need the sparse form)
            self.c, self.k = np.asarray(obj.linear, dtype=float).ravel(), float(obj.constant)
            self.H_diagonal = True
        else:
            from ...program.expression import Expression
            quad_only = Expression(n, obj.constant, obj.linear, obj.quadratic, atoms=list(obj.atoms))
            self._H, self.c, self.k = quad_only.as_quadratic()
            _finite(f"square atoms of {oname!r}", self.H)
            offdiag = (self.H - sp.diags(self.H.diagonal())).count_nonzero() if self.H.nnz else 0
            self.H_diagonal = offdiag == 0
            self.Hd = self.H.diagonal() if self.H_diagonal else None
        if self.H_diagonal and np.any(self.Hd < 0):
            raise ModelStructureError(
                f"majorize: the quadratic part of {oname!r} has a negative diagonal (a concave square); "
                "the majorizer of a nonconvex quadratic is not a QP")
        if not self.H_diagonal and self.H.nnz:
            Hd = self.H.toarray() if n <= 3000 else None
            if Hd is not None:
                ev = np.linalg.eigvalsh(Hd).min()
                if ev < -1e-10 * max(1.0, np.abs(Hd).max()):
                    raise ModelStructureError(
                        f"majorize: the quadratic part of {oname!r} is not positive semidefinite (min eigenvalue "
                        f"{ev:.3g}); the majorizer of a nonconvex quadratic is not a QP")
        # split the log-sum-exp groups by coefficient sign
        pos, neg = [], []
        for g in obj.lse:
            sgn = np.sign(g.coef)
            for want, store in ((1, pos), (-1, neg)):
                sel = np.flatnonzero(sgn == want)
                if sel.size:
                    store.append((g, sel))
        self.pos = self._merge(pos)
        self.neg = self._merge(neg)
        # padded row-space form of Algorithm 1 (groups.py) unless groups are large or very unequal
        self.groups = None
        if self.pos is not None:
            A, _, seg, _ = self.pos
            cmax = int(np.bincount(seg).max())
            G = int(seg[-1]) + 1
            if cmax <= self.PADDED_MAX_ROWS and G * cmax <= 4 * A.shape[0]:
                self.groups = PaddedGroups(*self.pos)
        self._pos_starts = None if self.pos is None else _group_starts(self.pos[2])
        self._neg_starts = None if self.neg is None else _group_starts(self.neg[2])
        # constraints
        for c in program.constraints:
            if not c.body.is_linear:
                raise ModelStructureError(
                    f"majorize: constraint {c.name!r} is nonlinear; Algorithm 2 needs a convex set Lambda given by "
                    "linear constraints and bounds")
        self.A, self.lo, self.hi, _ = program.linear_constraints()
        for nm, arr in (("constraint matrix", self.A), ("variable lower bounds", program.lb),
                        ("variable upper bounds", program.ub)):
            a = arr.data if sp.issparse(arr) else arr
            if np.any(np.isnan(a)):
                raise InputDataError(f"{nm} contains NaN")
        self.lb, self.ub = program.lb, program.ub
        self.constrained = self.A.shape[0] > 0 or np.any(np.isfinite(self.lb)) or np.any(np.isfinite(self.ub))
        self.convex = self.neg is None

    @property
    def H(self):
        """The quadratic part as a sparse matrix."""
        if self._H is None:
            n = self.n
            self._H = sp.csr_matrix((self.Hd, np.arange(n), np.arange(n + 1)), shape=(n, n))
        return self._H

    @staticmethod
    def _merge(parts):
        """One (A, b, seg, coef) for the selected groups of several LseGroups."""
        if not parts:
            return None
        if len(parts) == 1 and parts[0][1].size == len(parts[0][0]):
            g = parts[0][0]  # one whole LseGroup: its arrays already have the merged layout
            return g.A, g.b, g.seg, g.coef
        As, bs, segs, coefs = [], [], [], []
        off = 0
        for g, sel in parts:
            rows = np.concatenate([np.arange(g.starts[s], g.starts[s + 1] if s + 1 < len(g.starts) else g.seg.size)
                                   for s in sel]) if sel.size != len(g) else np.arange(g.seg.size)
            As.append(g.A[rows])
            bs.append(g.b[rows])
            _, inv = np.unique(g.seg[rows], return_inverse=True)
            segs.append(inv + off)
            coefs.append(g.coef[sel])
            off += sel.size
        return (sp.vstack(As).tocsr(), np.concatenate(bs), np.concatenate(segs), np.concatenate(coefs))

    # --- evaluation -------------------------------------------------------------------------------------------
    def evaluate(self, x, want_grad=False, scores=None, err=None):
        """``(f(x), grad f(x) or None, cache)``; ``cache = (scores, weights, err)`` holds the padded scores
        reused by the bound.

        ``scores``: the padded scores at ``x`` when the caller has them (scores are affine in ``x``:
        a combination of known images saves the feature product), ``err`` a bound on their rounding
        (None: computed here, exact up to the usual rounding)."""
        x = np.asarray(x, dtype=float)
        Hx = self.Hd * x if self.Hd is not None else self.H @ x
        v = self.k + float(self.c @ x) + 0.5 * float(x @ Hx)
        g = self.c + Hx if want_grad else None
        S = None
        if self.groups is not None:
            S = self.groups.scores(x) if scores is None else scores
            pv, W = self.groups.value_weights(S)
            if want_grad:
                g = g + self.groups.gradient(W)
            v += pv
            S = (S, W, None if scores is None else err)
        elif self.pos is not None:
            pv, pg = _lse_value_gradient(self.pos, self._pos_starts, x, want_grad)
            v += pv
            if want_grad:
                g = g + pg
        if self.neg is not None:
            nv, ng = _lse_value_gradient(self.neg, self._neg_starts, x, want_grad)
            v += nv
            if want_grad:
                g = g + ng
        return v, (None if g is None else np.asarray(g, dtype=float).ravel()), S

    def value(self, x):
        """``f(x)`` from the cached pieces (same math as ``program.objective.value``)."""
        return self.evaluate(x)[0]

    def gradient(self, x):
        return self.evaluate(x, want_grad=True)[1]

    def value_and_gradient(self, x):
        """The oracle handed to L-BFGS-B in the benchmarks (identical code for every method)."""
        v, g, _ = self.evaluate(x, want_grad=True)
        return v, g

    def add_H(self, Q, ridge=0.0):
        """``Q += H + ridge I`` in place (dense ``Q``); ``Q`` is returned."""
        if self.Hd is not None:
            Q.flat[::self.n + 1] += self.Hd + ridge if ridge else self.Hd
            return Q
        if getattr(self, "_H_dense", None) is None:
            self._H_dense = self.H.toarray()
        Q += self._H_dense
        if ridge:
            Q.flat[::self.n + 1] += ridge
        return Q

    def gradient_at(self, x, S):
        """``grad f(x)`` reusing the padded scores and weights ``S`` computed by :meth:`evaluate` at ``x``."""
        if S is None or self.groups is None:
            return self.gradient(x)
        g = self.c + (self.Hd * x if self.Hd is not None else self.H @ x) + self.groups.gradient(S[1])
        if self.neg is not None:
            g = g + _lse_value_gradient(self.neg, self._neg_starts, x)[1]
        return np.asarray(g, dtype=float).ravel()


@register_solver
class MajorizeSolver(Solver):
    name = "majorize"
    summary = "Quadratic bound majorization of log-partition objectives (Jebara & Choromanska 2012)"
    options = OptionSet(common_options(max_iter=1000) + [
        Option("tol", 1e-8, "stop when the relative objective change and its extrapolated remainder "
               "(df * rate / (1 - rate), linear convergence) are <= tol and the relative parameter change is <= sqrt(tol)", float, positive, "must be positive"),
        Option("bound", "full", "curvature of the bound: 'full' (Algorithm 1 Sigma, exact) or 'lowrank' "
               "(Algorithm 4, V^T S V + D with diagonal absorption)", ("full", "lowrank")),
        Option("rank", 8, "rank k of the low-rank bound (bound='lowrank')", int, positive, "must be positive"),
        Option("ridge", 0.0, "proximal term rho/2 ||theta - theta~||^2 added to the majorizer (keeps it a "
               "majorizer; use when the bound is singular, e.g. no regularization)", float, nonnegative,
               "must be >= 0"),
        Option("extrapolate", True, "after each majorization step D, try a secant-Newton point in the plane of D "
               "and the previous step, then secant points x + a D (a > 1), keeping one only if it lowers f "
               "(monotone; unconstrained problems; beyond the paper). False runs Algorithm 2 exactly", bool),
        Option("check_bound", True, "check f(theta_new) <= majorizer every iteration (SolverBugError otherwise)",
               bool),
        Option("blas_threads", 0, "BLAS threads during the solve (0: 1 thread when n <= 2000, else the library "
               "default; oversubscribed threads are very slow on a busy machine for small matrices)", int,
               nonnegative, "must be >= 0"),
        Option("x0", None, "starting point (array of length n); default: the program's x0 or 0",
               lambda v: np.asarray(v, dtype=float).ravel()),
    ])

    def _solve(self, program, opts) -> Result:
        threads = opts.blas_threads or (1 if program.n <= 2000 else None)
        ctl = _threadpool_controller()
        if ctl is None or threads is None:
            return self._solve_inner(program, opts)
        with ctl.limit(limits=threads, user_api="blas"):
            return self._solve_inner(program, opts)

    def _solve_inner(self, program, opts) -> Result:
        t0 = time.perf_counter()
        model = MajorizeModel(program)
        n = program.n
        prog = Progress(opts.verbose)
        x = program.x0.copy() if opts.x0 is None else np.array(opts.x0, dtype=float)
        if x.size != n:
            raise InvalidOptionError(f"option 'x0' has length {x.size}, the program has {n} variables")
        x = np.where(np.isnan(x), 0.0, x)
        if not np.all(np.isfinite(x)):
            raise InputDataError("starting point x0 contains inf")
        qp = None
        if model.constrained:
            from ... import highs  # the one HiGHS layer
            qp = highs
            x = np.clip(x, model.lb, model.ub)
            if program.max_violation(x) > 1e-9:
                res = qp.solve_lp(-x, A=model.A if model.A.shape[0] else None,
                                  row_lo=model.lo if model.A.shape[0] else None,
                                  row_hi=model.hi if model.A.shape[0] else None,
                                  lb=model.lb, ub=model.ub, Q=sp.identity(n, format="csr"),
                                  const=0.5 * float(x @ x))
                if res.status == "infeasible":
                    return Result(self.name, "infeasible", message="the linear constraints and bounds are infeasible")
                if res.status != "optimal":
                    return Result(self.name, "error", message=f"projection of x0 onto the constraints: {res.status}")
                x = np.asarray(res.x, dtype=float)
        f, _, S = model.evaluate(x)
        if not np.isfinite(f):
            raise InputDataError(f"the objective is not finite at the starting point ({f})")
        history = [dict(iteration=0, time=time.perf_counter() - t0, lower=None, upper=f, objective=f, step=0.0)]
        status, message = "iteration_limit", ""
        it = 0
        prev_rel_f = 0.0
        extrapolate = opts.extrapolate and not model.constrained
        u_next = None
        prev = []  # (step, gradient change) of recent iterations, most recent first: the subspace trial
        images = []  # their score images (F step, rounding bound), when the steps come with images
        grp = model.groups
        for it in range(1, opts.max_iter + 1):
            u = model.gradient_at(x, S) if u_next is None else u_next
            u_next = None
            step, mval, info, FD = self._step(model, x, u, opts, qp, S)
            if step is None:
                status = info
                message = ("the majorizer QP is unbounded below over the constraints: along a feasible direction "
                           "where the bound has no curvature the objective decreases without bound"
                           if info == "unbounded" else f"QP subproblem failed ({info})")
                break
            if it == 1:
                u_scale = max(1.0, math.sqrt(float(u @ u)))
            flat = info.pop("flat", 0.0)
            if flat > FLAT_TOL * u_scale and flat > 1e-3 * math.sqrt(float(u @ u)):
                # u has a component along which the bound's curvature vanishes: there every log Z_g and
                # the quadratic part are affine, so f is affine (concave with latent terms) with nonzero slope
                status = "unbounded"
                message = (f"the objective is unbounded below: along a direction where the bound has no curvature "
                           f"it is affine{'' if model.convex else ' or concave'} with slope {flat:.3g}")
                break
            if mval > 0:
                # an inexact QP answer worse than D = 0: the majorizer says theta~ is optimal
                step, mval, FD = np.zeros(n), 0.0, None
            x_new = x + step
            # scores by linearity save a feature product when their rounding bound moves f by less than
            # LIN_TOL (it does not when the image cancels, e.g. a tiny ridge); exact every REFRESH iterations
            lin = FD is not None and S is not None and it % REFRESH != 0
            limit = LIN_TOL * max(1.0, abs(f))
            sc = grp.combine(S, [(1.0, FD)], limit) if lin else None
            f_new, _, S_new = (model.evaluate(x_new) if sc is None else
                               model.evaluate(x_new, scores=sc[0], err=sc[1]))
            scale = max(1.0, abs(f))
            if opts.check_bound and f_new > f + mval + MONO_TOL * scale:
                raise SolverBugError(
                    f"majorize: the objective {f_new!r} exceeds its majorizer {f + mval!r} at iteration {it} "
                    f"(relative violation {(f_new - f - mval) / scale:.3g}); the bound is not an upper bound")
            if f_new > f + MONO_TOL * scale:
                raise SolverBugError(f"majorize: the objective increased from {f!r} to {f_new!r} at iteration {it}")
            if extrapolate and mval < 0:
                img = grp.image(S, S_new) if FD is not None else None
                lin_fn = (_linear_scores(grp, S, img, images, limit)
                          if lin and img is not None and len(images) == len(prev) else None)

                def trial(z, sc=None):
                    return model.evaluate(z, want_grad=True, scores=None if sc is None else sc[0],
                                          err=None if sc is None else sc[1])
                S_plain = S_new
                x_new, f_new, u_next, S_new, alpha = secant_extrapolate(
                    trial, x, u, step, x_new, f_new, model.gradient_at(x_new, S_new), S_new, prev=prev, lin=lin_fn)
                step = x_new - x
                prev = [(step, u_next - u)] + prev[:MEMORY - 1]
                if img is not None:
                    images = [img if S_new is S_plain else grp.image(S, S_new)] + images[:MEMORY - 1]
                else:
                    images = []  # lengths differ from prev's until realigned: no linear trial meanwhile
                info = dict(info, alpha=alpha)
            rel_f = abs(f - f_new) / scale
            # linear convergence: the remaining decrease is about df * rate / (1 - rate)
            rate = min(rel_f / prev_rel_f, 0.999) if prev_rel_f > 0 else 0.0
            prev_rel_f = rel_f
            rest = rel_f * rate / (1.0 - rate)
            rel_x = math.sqrt(float(step @ step)) / max(1.0, math.sqrt(float(x @ x)))
            x, f, S = x_new, f_new, S_new
            now = time.perf_counter() - t0
            history.append(dict(iteration=it, time=now, lower=None, upper=f, objective=f, step=rel_x,
                                majorizer_decrease=-mval, **info))
            if opts.verbose:
                prog(f"majorize it {it:5d}  f {f:.12g}  rel df {rel_f:.3g}  rel dx {rel_x:.3g}  t {now:.3g}s")
            if not float(x @ x) <= DIVERGED * DIVERGED:
                # monotone decrease with ||theta|| -> inf (IPOPT's "diverging iterates" rule): f is unbounded
                # below or its infimum is not attained (e.g. separable data without regularization)
                status = "error"
                message = (f"diverging iterates: ||theta|| > {DIVERGED:g} while the objective decreased from "
                           f"{history[0]['objective']:.6g} to {f:.6g}; the objective is unbounded below or its "
                           "infimum is not attained (add regularization or bounds)")
                break
            if rel_f <= opts.tol and rest <= opts.tol and rel_x <= np.sqrt(opts.tol):
                status = "optimal" if model.convex else "converged"
                break
            if opts.time_limit is not None and now >= opts.time_limit:
                status = "time_limit"
                break
        if S is not None and S[2] is not None:
            f = model.evaluate(x)[0]  # the final scores came by linearity: report the exact value
        if status == "unbounded":
            f = -np.inf  # x is the last iterate; the infimum is -inf
        res = Result(self.name, status, x=x, objective=f, upper_bound=f, iterations=it, history=history,
                     message=message)
        res.info = {"bound": opts.bound, "constrained": bool(model.constrained), "convex": bool(model.convex)}
        return res

    # --- one majorization step ----------------------------------------------------------------------------------
    def _step(self, model, x, u, opts, qp, S=None):
        """Minimise the majorizer ``m(D) = u^T D + 1/2 D^T Sigma D`` over the feasible set.

        Returns ``(D, m(D), info, FD)``; ``FD`` is the padded score image of ``D`` when it came for free
        (row-space Woodbury), else None.

        ``S`` are the padded scores at ``x`` (from :meth:`MajorizeModel.evaluate`) when the padded
        row-space bound applies."""
        n = model.n
        ridge = opts.ridge
        info = {}
        R = None
        grp = model.groups
        T = None
        if grp is not None:
            T = grp.factors(S[0] if S is not None else grp.scores(x))
        woodbury = (not model.constrained and model.pos is not None and model.H_diagonal and opts.bound == "full")
        if T is not None and woodbury and T.shape[0] * T.shape[1] < n // 2:
            # exact Woodbury: Sigma = diag(Dg) + R^T R with few rows (d >> rows, e.g. SRBCT), matrix-free in
            # the row space of R (the dense K x d matrix R costs more than the rest of the iteration)
            Dg = model.Hd + ridge
            x_sol, qv, Fx, Fx_err, info["flat"] = grp.woodbury_solve(T, Dg, u)
            return -x_sol, float(-u @ x_sol + 0.5 * qv), info, (-Fx, Fx_err)
        if T is not None and (opts.bound == "lowrank" or (not grp.dense_fits(grp.G, grp.c, grp.d)
                                                          and grp.template is None)):
            R = grp.rows(T) if grp.dense_fits(grp.G, grp.c, grp.d) else grp.rows_sparse(T)
        elif T is None and model.pos is not None:
            A, b, seg, coef = model.pos
            R = compute_bound(A, b, seg, x, coef).R
        if opts.bound == "lowrank":
            D0 = diagonal_dominance(model.H) + ridge
            L = LowRankSigma(n, opts.rank, D0)
            if R is not None:
                L.add_rows(R)
            if not model.constrained:
                try:
                    step = -L.solve(u)
                except np.linalg.LinAlgError:
                    # singular diagonal: add the smallest proximal term that makes it invertible
                    L.D = L.D + 1e-8 * max(1.0, float(np.max(L.D, initial=0.0)))
                    step = -L.solve(u)
                Ls = L.matvec(step)
                info["flat"] = float(np.linalg.norm(Ls + u))
                return step, float(u @ step + 0.5 * step @ Ls), info, None
            Q = L.dense()
        else:
            if woodbury and R is not None and R.shape[0] < n // 2:
                # exact Woodbury without the padded form (large groups)
                Dg = model.Hd + ridge
                Rd = R.toarray() if sp.issparse(R) else R
                step = -_woodbury_solve(Dg, Rd, u)
                Sstep = Dg * step + Rd.T @ (Rd @ step)
                info["flat"] = float(np.linalg.norm(Sstep + u))
                return step, float(u @ step + 0.5 * step @ Sstep), info, None
            if T is not None and R is None:
                Q = grp.sigma(T)  # fresh arrays: H is added in place
            elif R is not None:
                Q = _gram(R)
            else:
                Q = np.zeros((n, n))
            Q = model.add_H(Q, ridge)
        if not model.constrained:
            step = self._psd_solve(Q, -u)
            Qs = Q @ step
            r = Qs + u
            info["flat"] = math.sqrt(float(r @ r))
            return step, float(u @ step + 0.5 * step @ Qs), info, None
        # Algorithm 2 step 3 as a QP in D = theta - theta~
        Qs = sp.csr_matrix(0.5 * (Q + Q.T))
        m = model.A.shape[0]
        Ax = model.A @ x if m else None
        res = qp.solve_lp(u, A=model.A if m else None, row_lo=(model.lo - Ax) if m else None,
                          row_hi=(model.hi - Ax) if m else None, lb=model.lb - x, ub=model.ub - x, Q=Qs)
        if res.status != "optimal":
            return None, None, res.status if res.status in ("infeasible", "unbounded") else "error", None
        step = np.asarray(res.x, dtype=float)
        # keep theta inside the box despite QP tolerances
        step = np.clip(x + step, model.lb, model.ub) - x
        return step, float(u @ step + 0.5 * step @ (Q @ step)), info, None

    @staticmethod
    def _psd_solve(Q, rhs):
        """Minimiser of ``1/2 D^T Q D - rhs^T D`` for PSD ``Q``: Cholesky, or the minimum-norm solution
        ``Q^+ rhs`` when ``Q`` is singular (flat directions of the bound, e.g. shifting every class
        intercept of a softmax). The majorizer value ``-1/2 rhs^T Q^+ rhs <= 0`` keeps the step monotone."""
        # a relative 1e-10 proximal term keeps the majorizer a majorizer and lets Cholesky factor a
        # singular bound (flat directions, e.g. a softmax's common intercept shift, get almost no
        # step since rhs is orthogonal to them)
        n = Q.shape[0]
        eps = 1e-10 * max(float(np.abs(Q.diagonal()).max(initial=0.0)), 1e-300)
        Qe = Q.copy()
        Qe.flat[::n + 1] += eps
        # LAPACK potrf/potrs directly: scipy's cho_factor/cho_solve wrappers cost more than the
        # factorization itself on the small systems of most models
        cf, info = lapack.dpotrf(Qe, lower=False, clean=False, overwrite_a=True)
        if info == 0:
            sol, info = lapack.dpotrs(cf, rhs)
            if info == 0 and np.all(np.isfinite(sol)):
                return sol
        lam, U = np.linalg.eigh(0.5 * (Q + Q.T))
        if lam[-1] < 0 or not np.all(np.isfinite(lam)):
            raise SolverBugError("majorize: the bound curvature is not positive semidefinite")
        return min_norm_solve(lam, U, rhs)
