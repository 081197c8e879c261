"""The inequality constraints of a program as one vector ``c(x) <= 0`` (thesis eq. 2.2).

Three blocks, each with its own cheap representation, in this order inside ``c``:

1. **bounds** ``lb_i - x_i <= 0`` and ``x_i - ub_i <= 0`` (finite sides only); Jacobian rows
   ``-e_i`` / ``+e_i``, so ``J^T diag(d) J`` is diagonal and costs O(n);
2. **linear rows** ``lo <= a^T x <= hi`` -> up to two rows ``lo - a^T x <= 0``, ``a^T x - hi <= 0``;
   stored as one sparse matrix ``G`` with ``c_lin = G x - h``;
3. **convex nonlinear constraints** ``body(x) <= hi`` (``body`` convex); Jacobian and Hessian
   from :class:`~varopt.program.expression.Expression`.

Slacks ``s = -c(x) > 0`` are what the solver keeps; ``J`` is the Jacobian of ``c``.

**Strictly interior as the user evaluates it** (:meth:`ConstraintSet.interior`): a slack of a
linear or nonlinear row counts as positive only above its rounding margin
(:mod:`varopt.program.rounding`): ``2 (t + 2) eps (|hi| + M(x))`` for a row of ``t`` terms of
magnitude ``M``, so that the user's own evaluation of the constraint in another order (Pyomo
``value()``, CVXPY ``.value``) also finds it strictly satisfied. Bound slacks ``x - lb`` are
exact in floating point and need no margin.
Equality constraints are rejected (the thesis, §2.1, leaves them out as well): eliminate
them in the model, or relax ``a^T x = b`` to ``b - eps <= a^T x <= b + eps``.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ...errors import ModelStructureError
from ...program import Expression, Program
from ...program.rounding import magnitude, n_terms, slack_margin


def row_components(G, n):
    """``(ncomp, labels)``: the connected components of the variables, two variables being linked when a row
    of ``G`` holds both; a component's label is the order of its smallest variable (scipy's numbering).
    Found on the chain of each row's consecutive nonzeros (``nnz - rows`` edges, the same components as the
    pattern of ``|G|^T |G| + I`` without forming that product)."""
    from scipy.sparse.csgraph import connected_components
    G = sp.csr_matrix(G)
    rid = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    link = np.flatnonzero(rid[1:] == rid[:-1])  # entry p and p + 1 in the same row
    a, b = G.indices[link], G.indices[link + 1]
    pairs = _matching_components(a, b, n)
    if pairs is not None:
        return pairs
    A = sp.csr_matrix((np.ones(link.size), (a, b)), shape=(n, n))
    return connected_components(A, directed=False)


def _matching_components(a, b, n):
    """The components of the links ``(a_k, b_k)`` when they pair each variable with at most one other
    (the L1 box form: each row on ``w_j``, ``u_j``), else None: the linked pairs and the single variables,
    labelled in the order of their smallest variable as scipy's ``connected_components`` labels them
    (int32), without its graph (about 0.3 ms of the box form's set-up on a1a)."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    loop = lo == hi  # a repeated column in a row links a variable to itself
    key = np.unique(lo[~loop].astype(np.int64) * n + hi[~loop])
    lo, hi = key // n, key % n
    if np.bincount(np.concatenate([lo, hi]), minlength=n).max(initial=0) > 1:
        return None
    rep = np.arange(n)
    rep[hi] = lo  # each variable's component by its smallest variable
    root = rep == np.arange(n)
    label = (np.cumsum(root) - 1).astype(np.int32)
    return int(root.sum()), label[rep]


def block_layout(lab, sizes):
    """The flat storage of a block-diagonal ``n x n`` matrix whose blocks are the components ``lab`` (sizes
    ``sizes``): ``(groups, local, flat_size)``, ``groups`` a list of ``(sz, idx, offset)`` per block size
    (``idx`` the ``(nc, sz)`` variables of its blocks, in label order, each block's ascending; block ``c``'s
    entry ``(i, j)`` at ``offset + c sz^2 + i sz + j``), ``local`` each variable's position in its block."""
    local = np.zeros(lab.size, dtype=np.int64)
    groups = []
    offset = 0
    for sz in np.unique(sizes):
        if sz == 1:
            idx = np.flatnonzero(sizes[lab] == 1)[:, None]
        else:
            # vectorized grouping: sort the variables of these components by label
            vs = np.flatnonzero(sizes[lab] == sz)
            vs = vs[np.argsort(lab[vs], kind="stable")]
            idx = vs.reshape(-1, sz)
        local[idx.ravel()] = np.tile(np.arange(sz), idx.shape[0])
        groups.append((int(sz), idx, offset))
        offset += idx.size * sz
    return groups, local, offset


def block_bases(groups, n):
    """``(base, bsz)`` per variable: the flat offset of its block and the block's size (entry ``(i, j)`` of a
    block at ``base[i] + local[i] bsz[i] + local[j]``, :func:`block_layout`)."""
    base, bsz = np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)
    for sz, idx, off in groups:
        base[idx] = off + np.arange(idx.shape[0])[:, None] * sz * sz
        bsz[idx] = sz
    return base, bsz


def _expression_is_convex(e: Expression) -> bool:
    ok = all(g.is_convex() for g in e.groups())
    if ok and len(e.quadratic):
        H = e.quadratic.hessian_matrix.toarray()
        ok = np.linalg.eigvalsh(H).min() >= -1e-10 * max(1.0, np.abs(H).max())
    return bool(ok)


def _offending_term(e: Expression) -> str:
    for g in e.groups():
        if not g.is_convex():
            kind = getattr(g, "kind", "log-sum-exp")
            if np.any(g.mult >= 0):
                return f"a product of a variable with a {kind} atom"
            return f"a {kind} term with a negative coefficient"
    return "an indefinite quadratic form"


class _Body:
    """A convex constraint body with cached derivatives: quadratic forms ``k + l^T x + x^T H x / 2``
    (quadratic terms and square atoms, :meth:`Expression.as_quadratic`) keep their constant Hessian (dense when n <= 1500), other bodies defer to the Expression."""

    def __init__(self, e: Expression):
        self.e = e
        # quadratic terms and multiplier-free square atoms expand to k + l^T x + x^T H x / 2
        self.quad = e.is_quadratic_form
        self.terms = n_terms(e)
        if self.quad:
            H, self.lin, self.k = e.as_quadratic()
            self.H = H.toarray() if e.n <= 1500 else sp.csr_matrix(H)
            self.absH = abs(self.H)
            self.terms += int(np.count_nonzero(self.H))

    def magnitude(self, x) -> float:
        """Rounding scale of :meth:`value` at x (:func:`varopt.program.rounding.magnitude`)."""
        if self.quad:
            ax = np.abs(x)
            return float(abs(self.k) + np.abs(self.lin) @ ax + 0.5 * ax @ (self.absH @ ax))
        return magnitude(self.e, x)

    def value(self, x):
        if self.quad:
            return float(self.k + self.lin @ x + 0.5 * x @ (self.H @ x))
        return self.e.value(x)

    def gradient(self, x):
        if self.quad:
            return self.lin + self.H @ x
        return self.e.gradient(x)

    def hessian_dense(self, x):
        if self.quad:
            return self.H if isinstance(self.H, np.ndarray) else self.H.toarray()
        return self.e.hessian(x).toarray()


class ConstraintSet:
    """``c(x) <= 0`` assembled from a :class:`Program` (see module docstring)."""

    def __init__(self, program: Program):
        n = program.n
        self.n = n
        lb, ub = program.lb, program.ub
        if np.any(np.isnan(lb)) or np.any(np.isnan(ub)):
            raise ModelStructureError("variable bounds contain NaN")
        fixed = np.flatnonzero(lb == ub)
        if fixed.size:
            raise ModelStructureError(
                f"variable {program.names[fixed[0]]!r} is fixed (lb == ub): ipsa needs a strict interior; "
                "substitute fixed variables in the model")
        if np.any(lb > ub):
            k = int(np.flatnonzero(lb > ub)[0])
            raise ModelStructureError(f"variable {program.names[k]!r} has lb > ub: no feasible point")
        self.lb_idx = np.flatnonzero(np.isfinite(lb))
        self.ub_idx = np.flatnonzero(np.isfinite(ub))
        self.lb = lb[self.lb_idx].copy()
        self.ub = ub[self.ub_idx].copy()

        src, sign, h, names = [], [], [], []  # row r: sign[r] * (linear body src[r]) <= h[r]
        self.nonlinear = []  # list of (name, Expression, hi)
        linear = []
        cs = program.constraints
        bodies = [c.body for c in cs]
        if all(not b.quadratic and not b.atoms and not b.lse for b in bodies):  # linear rows only: as arrays
            rows = self._linear_rows_arrays(cs, bodies)
            if rows is not None:
                src, sign, h, names = rows
                linear, cs = bodies, ()
        for c in cs:
            body = c.body
            if c.lo == c.hi:
                raise ModelStructureError(
                    f"constraint {c.name!r} is a nonlinear equality: ipsa eliminates linear equalities, but the "
                    "interior-point iteration needs inequality constraints c(x) <= 0 with a strict interior "
                    "(Carbonetto 2009, §2.1); relax it to a range lo <= body <= hi or reformulate it")
            if not body.quadratic and not body.atoms and not body.lse:  # body.is_linear, inlined (one call per row)
                hi, lo = c.hi, c.lo
                if math.isfinite(hi):
                    src.append(len(linear))
                    sign.append(1.0)
                    h.append(hi - body.constant)
                    names.append(f"{c.name} (<= {hi:g})")
                if math.isfinite(lo):
                    src.append(len(linear))
                    sign.append(-1.0)
                    h.append(-(lo - body.constant))
                    names.append(f"{c.name} (>= {lo:g})")
                linear.append(body)
                continue
            if np.isfinite(c.lo):
                neg = body.scaled(-1.0)
                if np.isfinite(c.hi) or not _expression_is_convex(neg):
                    raise ModelStructureError(
                        f"constraint {c.name!r}: a lower bound on a nonlinear body that is not concave gives a "
                        "non-convex constraint c(x) = lo - body(x) <= 0 (ipsa requires convex c)")
                # lo <= body with a concave body (log(x) >= 0.5, sum(entr(x)) >= 1): -body <= -lo, convex
                self.nonlinear.append((c.name, _Body(neg), -float(c.lo)))
                continue
            if not _expression_is_convex(body):
                raise ModelStructureError(
                    f"constraint {c.name!r} is not convex: its body contains {_offending_term(body)}; "
                    "ipsa requires convex c(x) <= 0")
            if np.isfinite(c.hi):
                self.nonlinear.append((c.name, _Body(body), float(c.hi)))
        if len(src):
            # rows stay sparse for large models; a row of a body's coefficients (or their negatives: exact)
            a_ptr, a_idx, a_val = Expression.linear_rows(linear, n)
            src = np.asarray(src, dtype=np.int64)
            sign = np.asarray(sign, dtype=float)
            cnt = a_ptr[src + 1] - a_ptr[src]
            indptr = np.zeros(src.size + 1, dtype=np.int64)
            np.cumsum(cnt, out=indptr[1:])
            take = np.arange(indptr[-1]) + np.repeat(a_ptr[src] - indptr[:-1], cnt)
            self.G = sp.csr_matrix((a_val[take] * np.repeat(sign, cnt), a_idx[take], indptr),
                                   shape=(src.size, n))
            self.h = np.asarray(h, dtype=float)
            # only which rows are all zeros matters (a sum of squares is 0 in any order exactly when each is)
            norms = np.bincount(np.repeat(np.arange(src.size), cnt), weights=self.G.data * self.G.data,
                                minlength=src.size)
            if np.any(norms == 0):
                k = int(np.flatnonzero(norms == 0)[0])
                if self.h[k] <= 0:
                    raise ModelStructureError(f"linear constraint {names[k]} has no variables and no strict interior")
                # a constant row with positive slack is always satisfied: drop it
            keep = norms > 0
            if not keep.all():
                self.G, self.h = self.G[keep], self.h[keep]
                names = [nm for nm, k in zip(names, keep) if k]
            self.row_names = names
        else:
            self.G = sp.csr_matrix((0, n))
            self.h = np.zeros(0)
            self.row_names = []
        self._GT = self._absG = self._blocks = None  # made on first use (the numpy path's products; the compiled pair kernels need neither)
        self.G_terms = np.diff(self.G.indptr) + 1
        # ||G_r||_1 summed in each row's order from 0 (as absG.sum(axis=1), scipy's sparse product, sums it)
        self.G_norm1 = np.bincount(np.repeat(np.arange(self.G.shape[0]), np.diff(self.G.indptr)),
                                   weights=np.abs(self.G.data), minlength=self.G.shape[0])
        self.n_lb, self.n_ub, self.n_lin, self.n_nl = self.lb_idx.size, self.ub_idx.size, self.G.shape[0], len(self.nonlinear)
        self.m = self.n_lb + self.n_ub + self.n_lin + self.n_nl
        o = np.cumsum([0, self.n_lb, self.n_ub, self.n_lin, self.n_nl])
        self.sl_lb, self.sl_ub, self.sl_lin, self.sl_nl = (slice(o[0], o[1]), slice(o[1], o[2]),
                                                           slice(o[2], o[3]), slice(o[3], o[4]))
        # x >= lb on every variable and nothing else (the L1 split form 2.61): J = -I
        self.lower_only = (self.n_lb == n and self.m == n)
        self.names = ([f"lower bound of {program.names[i]}" for i in self.lb_idx]
                      + [f"upper bound of {program.names[i]}" for i in self.ub_idx]
                      + self.row_names + [f"{nm} (<= {hi:g})" for nm, _, hi in self.nonlinear])

    @property
    def GT(self):
        """``G^T`` (CSR)."""
        if self._GT is None:
            self._GT = self.G.T.tocsr()
        return self._GT

    @property
    def absG(self):
        """``|G|`` entrywise (CSR)."""
        if self._absG is None:
            self._absG = abs(self.G)
        return self._absG

    @staticmethod
    def _linear_rows_arrays(cs, bodies):
        """``(src, sign, h, names)`` of the loop in ``__init__`` for constraints that are all linear, built as
        arrays (the same rows, in the same order: per constraint its ``<= hi`` row, then its ``>= lo`` row, the
        finite ones; the same ``h``); None when some constraint is an equality (the loop raises its error)."""
        k = len(cs)
        lo = np.fromiter((c.lo for c in cs), dtype=float, count=k)
        hi = np.fromiter((c.hi for c in cs), dtype=float, count=k)
        if np.any(lo == hi):
            return None
        const = np.fromiter((b.constant for b in bodies), dtype=float, count=k)
        take = np.column_stack([np.isfinite(hi), np.isfinite(lo)]).ravel()  # (hi row, lo row) per constraint
        src = np.repeat(np.arange(k), 2)[take]
        sign = np.tile([1.0, -1.0], k)[take]
        h = np.column_stack([hi - const, -(lo - const)]).ravel()[take]
        fmt = {}  # one formatting per distinct nonzero side value (0.0 == -0.0 print apart)

        def name(c, upper):
            v = c.hi if upper else c.lo
            text = fmt.get(v) if v else None
            if text is None:
                text = fmt[v] = f"{v:g}"
            return f"{c.name} (<= {text})" if upper else f"{c.name} (>= {text})"

        names = [name(cs[i], up) for i, up in zip(src.tolist(), (sign > 0).tolist())]
        return src, sign, h, names

    def blocks(self):
        """The :func:`block_layout` of the components (:func:`row_components`) of the linear rows ``G``: the
        blocks of ``G^T diag(d) G + diagonal`` (made once: the start's centring and :class:`.ReducedSystem`
        both use it)."""
        if self._blocks is None:
            ncomp, lab = row_components(self.G, self.n)
            self._blocks = block_layout(lab, np.bincount(lab, minlength=ncomp))
        return self._blocks

    # --- values -------------------------------------------------------------------------
    def slack(self, x) -> np.ndarray:
        """``s = -c(x)`` (positive exactly when x is strictly feasible)."""
        if self.lower_only:
            return x - self.lb
        s = np.empty(self.m)
        s[self.sl_lb] = x[self.lb_idx] - self.lb
        s[self.sl_ub] = self.ub - x[self.ub_idx]
        if self.n_lin:
            s[self.sl_lin] = self.h - self.G @ x
        for k, (_, body, hi) in enumerate(self.nonlinear):
            s[self.sl_nl.start + k] = hi - body.value(x)
        return s

    def interior(self, x, s) -> bool:
        """True when every slack ``s = slack(x)`` is positive beyond its rounding margin (module
        docstring)."""
        if not s.size:
            return True
        if not s.min() > 0:
            return False
        if self.n_lin:
            sl = s[self.sl_lin]
            # cheap screen with ||G_r||_1 max|x| >= |G_r| |x|; exact margins only for the rows it flags
            xinf = float(np.abs(x).max(initial=0.0))
            hl = np.abs(self.h)
            close = np.flatnonzero(sl <= slack_margin(self.G_terms, hl + self.G_norm1 * xinf))
            if close.size:
                scale = hl[close] + self.absG[close] @ np.abs(x)
                if np.any(sl[close] <= slack_margin(self.G_terms[close], scale)):
                    return False
        for k, (_, body, hi) in enumerate(self.nonlinear):
            i = self.sl_nl.start + k
            if s[i] <= slack_margin(body.terms, abs(hi) + body.magnitude(x)):
                return False
        return True

    def slack_nonlinear(self, x) -> np.ndarray:
        return np.array([hi - body.value(x) for _, body, hi in self.nonlinear])

    # --- Jacobian products ------------------------------------------------------------------
    def nonlinear_jacobian(self, x) -> np.ndarray:
        """Dense ``(n_nl, n)`` Jacobian of the nonlinear block of ``c``."""
        if not self.n_nl:
            return np.zeros((0, self.n))
        return np.vstack([body.gradient(x) for _, body, _ in self.nonlinear])

    def J_dot(self, dx, Jnl=None) -> np.ndarray:
        """``J dx`` for the whole of ``c``."""
        if self.lower_only:
            return -dx
        out = np.empty(self.m)
        out[self.sl_lb] = -dx[self.lb_idx]
        out[self.sl_ub] = dx[self.ub_idx]
        if self.n_lin:
            out[self.sl_lin] = self.G @ dx
        if self.n_nl:
            out[self.sl_nl] = Jnl @ dx
        return out

    def JT_dot(self, v, Jnl=None) -> np.ndarray:
        """``J^T v``."""
        if self.lower_only:
            return -v
        out = np.zeros(self.n)
        out[self.lb_idx] -= v[self.sl_lb]  # indices are unique (flatnonzero), so no np.add.at needed
        out[self.ub_idx] += v[self.sl_ub]
        if self.n_lin:
            out += self.GT @ v[self.sl_lin]
        if self.n_nl:
            out += Jnl.T @ v[self.sl_nl]
        return out

    def bound_diagonal(self, d) -> np.ndarray:
        """Diagonal of ``J_b^T diag(d_b) J_b`` for the bound block (length n)."""
        if self.lower_only:
            return d
        out = np.zeros(self.n)
        out[self.lb_idx] += d[self.sl_lb]
        out[self.ub_idx] += d[self.sl_ub]
        return out

    def nonlinear_hessian(self, x, z_nl) -> np.ndarray:
        """``sum_j z_j Hess c_j(x)`` over the nonlinear block (dense n x n)."""
        H = np.zeros((self.n, self.n))
        for zj, (_, body, _) in zip(z_nl, self.nonlinear):
            H += zj * body.hessian_dense(x)
        return H

    def max_primal_step(self, inv_s, Jdx, frac: float) -> float:
        """Largest ``a`` keeping the linear part (bounds + rows) strictly feasible: ``frac`` times the
        distance to the boundary along ``dx`` (eqs. 2.68-2.69 for the L1 box form); ``inv_s = 1/s``."""
        mlin = self.m - self.n_nl
        if mlin == 0:
            return np.inf
        rmax = float((Jdx[:mlin] * inv_s[:mlin]).max())  # = 1 / (distance to the nearest boundary)
        return frac / rmax if rmax > 0 else np.inf
