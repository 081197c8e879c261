"""The compiled program as Algorithm 2 sees it (Jebara & Choromanska 2012): the objective's pieces.

Internal objective (minimised)::

    f(theta) = k + c^T theta + 1/2 theta^T H theta                (linear, PSD quadratic, square atoms)
             + sum_{g: c_g > 0} c_g log sum_{k in g} exp(A_k theta + b_k)    (partition functions)
             + sum_{g: c_g < 0} c_g log sum_{k in g} exp(A_k theta + b_k)    (latent numerators, section 4)

over ``theta in Lambda`` (linear constraints and bounds). :class:`MajorizeModel` checks the
structure once and evaluates ``f`` and its gradient; the positive groups are the program's bound
oracle (Algorithm 1 on every partition function; the padded row-space form of :mod:`.groups` when
groups have at most 64 configurations), the negative ones get the Jensen tangent plane of
section 4 (their gradient is already in ``grad f``). It is one of the two models the Algorithm 2
loop of :mod:`.loop` runs over; the other wraps a user's bound oracle (:mod:`.bound_oracle`).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...errors import InputDataError, ModelStructureError
from ...core.checks import require_finite
from ...core.csr import take_rows
from ...program.atoms import ATOMS
from .groups import PaddedGroups
from . import recession as _recession  # (its functions looked up at the call: tests replace them)
from . import reuse_metric as _reuse_metric  # (its classes looked up at the call: tests replace them)
from .step import majorizer_step
from .structured import SMALL_N, KronHessian, StructuredSigma, choose_step_solver, kron_preconditioner_fits


_NO_GRAD = np.empty(0)  # the compiled evaluation's gradient buffer when none is wanted


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



def _group_starts(seg):
    """First row of every group of the sorted group ids ``seg``."""
    return np.flatnonzero(np.concatenate(([True], seg[1:] != seg[:-1])))




# --- atom kinds: the one place majorize asks about an atom's kind (ATOMS[kind].quadratic) ----------------------------------------------
def _check_atoms(program):
    """Only ``square`` atoms without multipliers and with nonnegative coefficients are accepted (they are
    part of the PSD quadratic ``H``); every other kind is not log-linear/quadratic."""
    obj, oname = program.objective, program.objective_name
    for a in obj.atoms:
        if not ATOMS[a.kind].quadratic:
            raise ModelStructureError(
                f"majorize: {oname!r} has a {a.kind!r} atom, terms {ATOMS[a.kind].text.format(u='u', v='v')} "
                f"({len(a)} row(s)); only log-sum-exp (partition function) terms, linear terms and convex quadratic "
                "regularizers are log-linear/quadratic; gop takes such terms")
        if (a.mult >= 0).any():
            r = int(np.flatnonzero(a.mult >= 0)[0])
            raise ModelStructureError(
                f"majorize: {oname!r} has a product w*g: variable {program.names[a.mult[r]]!r} times a square "
                "atom; products of variables are not supported")
        if (a.coef < 0).any():
            raise ModelStructureError(f"majorize: {oname!r} has a square atom with a negative coefficient "
                                      "(a concave quadratic); the majorizer would not be convex")
# --- end of atom kinds ------------------------------------------------------------------------------------------


def singleton_rows_to_bounds(A, lo, hi, lb, ub):
    """Rows ``lo_i <= a x_j <= hi_i`` with one nonzero become bounds on ``x_j`` (new arrays; the rest of ``A`` kept).

    Modelling layers write ``x[:5] >= 0`` as rows; as bounds the step QP fixes columns instead of holding rows,
    and quasi-Newton trials (option ``bound_reuse``) can move on the face of the active bounds. The feasible set
    is the same (``x_j >= lo_i / a`` for ``a > 0``, the bounds swapped for ``a < 0``)."""
    if A.shape[0] == 0:
        return A, lo, hi, lb, ub
    A = A if type(A) is sp.csr_matrix else sp.csr_matrix(A)
    if not A.data[:A.indptr[-1]].all():  # stored zeros do not count as a row's entries (a copy: A is the caller's)
        A = A.copy()
        A.eliminate_zeros()
    single = (A.indptr[1:] - A.indptr[:-1]) == 1
    if not single.any():
        return A, lo, hi, lb, ub
    rows = np.flatnonzero(single)
    j, a = A.indices[A.indptr[rows]], A.data[A.indptr[rows]]
    # a != 0 (stored zeros are gone) and an infinite side divides to an infinite one: no floating-point exception
    # (a NaN side stays NaN without one, and is dropped below)
    l1, h1 = lo[rows] / a, hi[rows] / a
    pos = a > 0
    lb, ub = np.array(lb, dtype=float), np.array(ub, dtype=float)
    # fmax/fmin skip a NaN side (the bounds themselves are never NaN: the model rejects them)
    if j.size == 1 or bool((j[1:] > j[:-1]).all()):
        # distinct variables (ascending: x[:5] >= 0): a gather and a scatter, not the slower unbuffered ufunc.at
        lb[j] = np.fmax(lb[j], np.where(pos, l1, h1))
        ub[j] = np.fmin(ub[j], np.where(pos, h1, l1))
    else:
        np.fmax.at(lb, j, np.where(pos, l1, h1))
        np.fmin.at(ub, j, np.where(pos, h1, l1))
    keep = ~single
    return take_rows(A, np.flatnonzero(keep)), lo[keep], hi[keep], lb, ub


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
        _check_atoms(program)
        for g in obj.lse:
            if (g.mult >= 0).any():
                r = int(np.flatnonzero(g.mult >= 0)[0])
                raise ModelStructureError(
                    f"majorize: {oname!r} has a product w*log-sum-exp: variable {program.names[g.mult[r]]!r} "
                    "multiplies a partition function; only constant coefficients are supported")
            require_finite(f"log-sum-exp features of {oname!r}", g.A)
            require_finite(f"log-sum-exp offsets (log base measure) of {oname!r}", g.b, allow_neginf=True)
            require_finite(f"log-sum-exp coefficients of {oname!r}", g.coef)
        require_finite(f"linear coefficients of {oname!r}", obj.linear)
        require_finite(f"quadratic coefficients of {oname!r}", obj.quadratic.v)
        q = obj.quadratic
        if (q.i.shape == q.j.shape and bool((q.i == q.j).all())
                and all(((a.A.indptr[1:] - a.A.indptr[:-1]) == 1).all() for a in obj.atoms)):
            # separable squares (ridge penalties, also as square atoms coef (a x_j + b)^2 of one variable each):
            # H is diagonal, 2 v + 2 coef a^2, no sparse algebra needed (as Expression.as_quadratic expands them)
            self.Hd = np.bincount(q.i, weights=2.0 * q.v, minlength=n) if q.v.size else np.zeros(n)
            self.c = np.array(obj.linear, dtype=float).ravel()
            self.k = float(obj.constant)
            for a in obj.atoms:
                j, av = a.A.indices, a.A.data
                self.Hd = self.Hd + np.bincount(j, weights=2.0 * a.coef * av * av, minlength=n)
                self.c = self.c + np.bincount(j, weights=2.0 * a.coef * av * a.b, minlength=n)
                self.k += float((a.coef * a.b * a.b).sum())
            require_finite(f"square atoms of {oname!r}", self.Hd, self.c)
            self._H = None  # built on first use (most solves never need the sparse form)
            self.H_diagonal = True
        else:
            from ...program.expression import Expression
            quad_only = Expression(n, obj.constant, obj.linear, obj.quadratic, atoms=list(obj.atoms))
            self._H, self.c, self.k = quad_only.as_quadratic()
            require_finite(f"square atoms of {oname!r}", self.H)
            offdiag = (self.H - sp.diags(self.H.diagonal())).count_nonzero() if self.H.nnz else 0
            self.H_diagonal = offdiag == 0
            self.Hd = self.H.diagonal() if self.H_diagonal else None
        if self.H_diagonal and (self.Hd < 0).any():
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
            if (g.coef > 0).all():  # every group a partition function (the common case): no selection
                pos.append((g, None))
                continue
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
        # (the padded groups evaluate the positive part themselves: its group starts only without them)
        self._pos_starts = None if self.pos is None or self.groups is not None else _group_starts(self.pos[2])
        self._neg_starts = None if self.neg is None else _group_starts(self.neg[2])
        # constraints
        for c in program.constraints:
            if not c.body.is_linear:
                raise ModelStructureError(
                    f"majorize: constraint {c.name!r} is nonlinear; Algorithm 2 needs a convex set Lambda given by "
                    "linear constraints and bounds (gop takes nonlinear constraints)")
        self.A, self.lo, self.hi, _ = program.linear_constraints()
        for nm, arr in (("constraint matrix", self.A), ("variable lower bounds", program.lb),
                        ("variable upper bounds", program.ub)):
            a = arr.data if sp.issparse(arr) else arr
            if np.isnan(a).any():
                raise InputDataError(f"{nm} contains NaN")
        self.A, self.lo, self.hi, self.lb, self.ub = singleton_rows_to_bounds(self.A, self.lo, self.hi,
                                                                              program.lb, program.ub)
        #: variables with a finite bound (the step solver's cost model asks for it at every choice)
        self.n_bounded = int(np.count_nonzero(np.isfinite(self.lb) | np.isfinite(self.ub)))
        self.constrained = self.A.shape[0] > 0 or self.n_bounded > 0
        self.convex = self.neg is None
        #: steps per solver (dense, woodbury, cg, lowrank) and the last step's CG iterations ("cg_last")
        self.step_stats = {}
        #: bounds the step QP's working set held last (set by the solver and .step_qp.StepQP; None: not known), for
        #: the constrained Woodbury step's predicted cost (.structured)
        self.working_set_hint = None

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
        if len(parts) == 1 and (parts[0][1] is None or parts[0][1].size == len(parts[0][0])):
            g = parts[0][0]  # one whole LseGroup: its arrays already have the merged layout
            return g.A, g.b, g.seg, g.coef
        As, bs, segs, coefs = [], [], [], []
        off = 0
        for g, sel in parts:
            if sel is None:  # (the whole group, :meth:`__init__`)
                sel = np.arange(len(g))
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
        if self._dense_kernel:
            # option backend (.compiled_trial): one call on dense features; bad scores go to the numpy path below
            grp = self.groups
            S = np.empty((grp.G, grp.c)) if scores is None else scores
            W = np.empty((grp.G, grp.c))
            g = np.empty(self.n) if want_grad else _NO_GRAD
            ok, v, mag = self.kernels.dense_value(x, self.Hd, self.c, self.k, grp._dense2, grp.logh, grp.coef, S,
                                                  scores is not None, W, want_grad, g)
            if ok:
                self.magnitude = mag
                return v, (g if want_grad else None), (S, W, None if scores is None else err)
        Hx = self.Hd * x if self.Hd is not None else self.H @ x
        k, cx, hx = self.k, float(self.c @ x), 0.5 * float(x @ Hx)
        v = k + cx + hx
        # the size of the parts that cancel in v (sum of log-partitions against the data term -c^T x): f's
        # rounding is relative to it, not to |f| (the loop's monotonicity checks use it)
        mag = abs(k) + abs(cx) + abs(hx)
        g = self.c + Hx if want_grad else None
        S = None
        if self.groups is not None:
            S = self.groups.scores(x) if scores is None else scores
            K = self.kernels
            if K is not None:
                W = np.empty(S.shape)
                ok, pv = K.lse_value_weights(S, self.groups.coef, W)
                if not ok:
                    pv, W = self.groups.value_weights(S)  # raises the numpy path's error
            else:
                pv, W = self.groups.value_weights(S)
            if want_grad:
                g = g + self.groups.gradient(W)
            v += pv
            mag += abs(pv)
            S = (S, W, None if scores is None else err)
        elif self.pos is not None:
            pv, pg = _lse_value_gradient(self.pos, self._pos_starts, x, want_grad)
            v += pv
            mag += abs(pv)
            if want_grad:
                g = g + pg
        if self.neg is not None:
            nv, ng = _lse_value_gradient(self.neg, self._neg_starts, x, want_grad)
            v += nv
            mag += abs(nv)
            if want_grad:
                g = g + ng
        self.magnitude = float(mag)
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
        if self._dense_kernel:
            g = np.empty(self.n)
            self.kernels.dense_gradient(x, self.Hd, self.c, self.groups._dense2, S[1], g)
            return g
        g = self.c + (self.Hd * x if self.Hd is not None else self.H @ x) + self.groups.gradient(S[1])
        if self.neg is not None:
            g = g + _lse_value_gradient(self.neg, self._neg_starts, x)[1]
        return np.asarray(g, dtype=float).ravel()

    # --- what the Algorithm 2 loop (loop.py) asks of a model ---------------------------------------------------
    def count_step(self, path):
        """Count a majorizer step solved by ``path`` (reported as ``res.info["step_solver"]``)."""
        self.step_stats[path] = self.step_stats.get(path, 0) + 1

    def step(self, x, u, S, opts, qp):
        """Algorithm 2 step 3 at ``x`` (see :func:`.step.majorizer_step`)."""
        return majorizer_step(self, x, u, opts, qp, S)

    #: (x, step solver, its matrix or operator) of the last Algorithm 2 step (set by .step.majorizer_step)
    last_bound = None
    #: the compiled kernels of option ``backend`` (:mod:`.compiled_trial`; set by :meth:`use_kernels`), None: numpy
    kernels = None
    #: ... and whether evaluations and gradients take their dense-feature kernels
    _dense_kernel = False

    def use_kernels(self, K):
        """Option ``backend``: the log-sum-exp of every evaluation by the kernels ``K`` when the groups have at most
        ``K.MAX_SCORES`` scores; whole evaluations and gradients when, besides, the program has at most ``K.MAX_N``
        variables (its loops over ``x`` pay there; on thousands of variables their sequential sums also round
        differently from BLAS's, which the monotonicity of the values at the rounding level notices), the features
        are dense padded rows without gathers, the quadratic part is diagonal and no log-sum-exp enters with a
        negative sign (the common GLM; the numpy path otherwise). ``K`` None: the numpy path."""
        grp = self.groups
        self.kernels = K if K is not None and grp is not None and grp.G * grp.c <= K.MAX_SCORES else None
        self._dense_kernel = bool(self.kernels is not None and self.n <= K.MAX_N and grp._dense2 is not None
                                  and grp._dense2_rows is None and grp._dense2.flags.c_contiguous
                                  and self.Hd is not None and self.neg is None)
        return self.kernels is not None

    def reuse_metric(self, x, S, opts, exact=True):
        """Option ``bound_reuse``'s reference metric at ``x`` (:mod:`.reuse_metric`): the dense ``H + Sigma + rho I``
        or the Kronecker approximation of the CG step, taken from the bound step just made at ``x`` when there
        was one; None when the step solver has neither (Woodbury, low-rank: no trials then).

        ``exact=False`` (the first iteration): only the Kronecker approximation, when the step would be CG or,
        with constraints, when the dense step would form a large class-template ``Sigma`` (``n > SMALL_N``);
        else None without computing anything."""
        DenseMetric, KronMetric = _reuse_metric.DenseMetric, _reuse_metric.KronMetric
        last = self.last_bound
        if last is not None and last[0] is x:
            path, obj = last[1], last[2]
        else:
            path, obj = choose_step_solver(self, opts, self.step_stats.get("cg_last")), None
            grp = self.groups
            if not exact:
                # the first metric: the objective's Hessian at x (trials need no bound; docs/majorize.md section 2)
                if grp is None or self.pos is None:
                    return None
                if S is None:
                    S = self.evaluate(x)[2]
                kron = (self.H_diagonal
                        and (path == "cg" or (self.constrained and self.n > SMALL_N and path == "dense"))
                        and kron_preconditioner_fits(grp))
                if kron:
                    # its Kronecker approximation (no factors T, one G x K GEMM)
                    met = KronMetric(KronHessian(grp, S[1], self.Hd + opts.ridge))
                elif path == "dense":
                    met = DenseMetric(self.add_H(grp.sigma(grp.factors(S[0], hessian=True)), opts.ridge), exact=False)
                else:
                    return None
                return met if met.ok else None
            if path not in ("dense", "cg"):
                return None
            T = None if grp is None else grp.factors(S[0] if S is not None else grp.scores(x))
            if path == "dense":
                obj = self.add_H(self.sigma_at(x, T), opts.ridge)
            elif T is not None and self.H_diagonal:
                obj = StructuredSigma(grp, T, self.Hd + opts.ridge)
        if obj is None:
            return None
        met = DenseMetric(obj) if path == "dense" else KronMetric(obj)
        return met if met.ok else None

    def sigma_at(self, x, T=None):
        """Dense ``sum_g c_g Sigma_g`` of Algorithm 1 at ``x`` (``T``: the padded groups' factors there)."""
        grp = self.groups
        if grp is not None:
            T = grp.factors(grp.scores(x)) if T is None else T
            if grp.dense_fits(grp.G, grp.c, grp.d) or grp.template is not None:
                return grp.sigma(T)
            from .step import gram
            return gram(grp.rows_sparse(T))
        from .bound import compute_bound
        from .step import gram
        if self.pos is None:
            return np.zeros((self.n, self.n))
        A, b, seg, coef = self.pos
        return gram(compute_bound(A, b, seg, x, coef).R)

    def recession(self, x):
        """A direction of strict decrease from every feasible point (:func:`.recession.recession_direction`:
        the infimum is not attained), or None. With a diagonal quadratic part, the weights at the converged ``x``
        usually prove there is none (:func:`.recession.attained_certificate`) without the LP. The certificate is for
        the objective without its constraints: no direction of strict decrease on all of R^n (every direction of
        recession a line of constancy) leaves none in the recession cone of the polyhedral feasible set either, and
        the minimum over it is attained (Rockafellar 1970, Theorem 27.3). Constrained models need it most: their LP
        cost 3-13 ms on solves of 4-5 ms (hepatitis, wine, breast cancer with the rows of majorize_constrained.py)
        and 1.1 s on digits. Cheaper exact tests come first where they apply: one free column (a binary model's
        intercept, :func:`.recession.one_column_attained`) and a multinomial's free class intercepts
        (:func:`.recession.class_intercepts_attained`), both O(nnz) and independent of ``x``."""
        if not self.convex or self.pos is None:
            return None
        if self.H_diagonal:
            free = np.flatnonzero(~(self.Hd > 0))
            if free.size == 0:
                return None      # curvature on every column: level sets bounded
            # the padded groups' dense features, when held, give the free columns as a slice (hepatitis: 42 of the
            # check's 130 us went to reading one column from the CSR arrays)
            dense = self.groups.dense_rows() if self.groups is not None else None
            j = int(free[0])
            if free.size == 1 and _recession.one_column_attained(*self.pos[:4], self.c, j,
                                                                 col=None if dense is None else dense[:, j]):
                return None
            AU = dense[:, free] if dense is not None else self._class_columns(free)
            if AU is not None and _recession.class_intercepts_attained(AU, self.pos[1], self.groups.c,
                                                                       self.pos[3], self.c[free]):
                return None      # (multinomial intercepts; wine: the certificate's dense algebra cost ~0.3 ms)
            if _recession.attained_certificate(*self.pos[:4], self.c, np.asarray(x, dtype=float), self.Hd > 0,
                                               dense=dense):
                return None
        return _recession.recession_direction(self, x=x)

    def _class_columns(self, free):
        """The free columns ``A[:, free]`` of the positive groups as a dense array, when they may be a multinomial's
        class intercepts (as many free columns as rows per group, every group that size, rows in group order), for
        :func:`.recession.class_intercepts_attained` on models without a dense feature copy; else None. digits
        (17,970 x 650, ten free intercepts): 1.7 ms for the columns + 1.1 ms for the test, where the dense
        certificate took 8 ms of a 60 ms solve."""
        if self.groups is None or free.size < 2 or free.size != self.groups.c:
            return None
        A, _, seg = self.pos[:3]
        G = int(seg[-1]) + 1
        if A.shape[0] != G * free.size or not np.array_equal(seg, np.repeat(np.arange(G), free.size)):
            return None
        return A[:, free].toarray() if sp.issparse(A) else np.asarray(A, dtype=float)[:, free]

    def final_value(self, x, f, S):
        """The exact ``f(x)`` when the last scores came by linearity (``f`` otherwise)."""
        return self.evaluate(x)[0] if S is not None and S[2] is not None else f
