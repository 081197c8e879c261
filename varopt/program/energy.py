"""Energy models: quadratic functions of binary variables, in +-1 spins.

An :class:`EnergyModel` is the function of spins ``s in {-1, +1}^n``

    q(s) = const + sum_i h_i s_i + sum_{e=(i,j), i<j} w_e s_i s_j
         = const + h^T s + (1/2) s^T J s,          J symmetric, zero diagonal,

with the couplings kept once per unordered pair (duplicates summed, zeros dropped).

**Two uses, one type.** ``program.energy`` is the *objective* of a compiled binary program in
spins: the internal (minimised) objective ``g(x)`` of the 0/1 variables equals ``q(2x - 1)``.
A solver turns it into the *log-potential* of the Boltzmann distribution

    p(x) ∝ exp(-beta g(x)),     log p~(s) = -beta q(s)     (:meth:`scaled`),

which reads p ∝ exp(-beta f) for a user's minimisation of f and exp(+beta f) for a
maximisation (the program stores ``g = -f`` then). ``log Z = log sum_s exp(log p~(s))``
includes the constant.

**0/1 to spins** (exact): with ``x_i = (1 + s_i)/2``,

    l_i x_i        = l_i/2 + (l_i/2) s_i
    q_ij x_i x_j   = q_ij/4 (1 + s_i + s_j + s_i s_j)        (i != j)
    q_ii x_i x_i   = q_ii x_i                                  (x^2 = x for bits)

so every coefficient is a sum of the user's coefficients times powers of two (the constant
is summed with ``math.fsum``). Nothing here imports Pyomo or CVXPY.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, ModelStructureError
from .atoms import ATOMS


def _indices(a, name):
    """Edge endpoints as int64; a non-integer value (1.5, NaN) is an error, not truncated."""
    a = np.asarray(a).ravel()
    if a.size and not np.issubdtype(a.dtype, np.integer):
        f = np.asarray(a, dtype=float)
        bad = ~np.isfinite(f) | (f != np.round(f))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InputDataError(f"energy model: edge endpoint {name}[{k}] = {float(f[k])!r} is not an integer index")
        a = f
    return a.astype(np.int64)


class EnergyModel:
    """``q(s) = const + h.s + sum_e w_e s_i s_j`` over spins (see the module docstring)."""

    def __init__(self, h, i=(), j=(), w=(), const=0.0, names=None):
        self.h = np.array(h, dtype=float).ravel()
        n = self.n = self.h.size
        i, j = _indices(i, "i"), _indices(j, "j")
        w = np.asarray(w, dtype=float).ravel()
        if not (i.size == j.size == w.size):
            raise ValueError("edge arrays i, j, w must have the same length")
        if i.size and (min(i.min(), j.min()) < 0 or max(i.max(), j.max()) >= n):
            raise ValueError(f"edge endpoints must lie in 0..{n - 1}")
        if (i == j).any():
            raise ValueError("a coupling of a spin with itself is a constant (s_i^2 = 1); add it to const")
        const = float(const)
        for name, a in (("fields h", self.h), ("couplings w", w), ("constant", np.array([const]))):
            if not np.isfinite(a).all():
                raise InputDataError(f"energy model: {name} contain NaN or inf")
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        M = sp.coo_matrix((w, (lo, hi)), shape=(n, n)).tocsr()
        M.sum_duplicates()
        M.eliminate_zeros()
        M = M.tocoo()
        order = np.lexsort((M.col, M.row))
        self.i = M.row[order].astype(np.int64)
        self.j = M.col[order].astype(np.int64)
        self.w = M.data[order].astype(float)
        self.const = const
        self.names = [f"s[{k}]" for k in range(n)] if names is None else list(names)
        if len(self.names) != n:
            raise ValueError("names must have one entry per spin")
        self._J = None

    # --- views --------------------------------------------------------------------------
    @property
    def m(self) -> int:
        """Number of couplings (edges)."""
        return self.w.size

    @property
    def J(self) -> sp.csr_matrix:
        """Symmetric coupling matrix (zero diagonal), ``q = const + h.s + s^T J s / 2``."""
        if self._J is None:
            n = self.n
            self._J = sp.csr_matrix((np.concatenate([self.w, self.w]),
                                     (np.concatenate([self.i, self.j]), np.concatenate([self.j, self.i]))),
                                    shape=(n, n))
        return self._J

    def scaled(self, c: float) -> "EnergyModel":
        """``c * q`` (e.g. the log-potential ``-beta q``)."""
        return EnergyModel(c * self.h, self.i, self.j, c * self.w, c * self.const, self.names)

    def value(self, S) -> np.ndarray:
        """``q(s)`` for spins ``S`` of shape ``(..., n)``."""
        S = np.asarray(S, dtype=float)
        return self.const + S @ self.h + (S[..., self.i] * S[..., self.j]) @ self.w

    def components(self):
        """Connected components: ``(count, label per spin)``."""
        from scipy.sparse.csgraph import connected_components
        return connected_components(self.J, directed=False)

    def subset(self, idx) -> "EnergyModel":
        """The model restricted to the spins ``idx`` (edges inside; constant dropped)."""
        idx = np.asarray(idx, dtype=np.int64)
        pos = np.full(self.n, -1, dtype=np.int64)
        pos[idx] = np.arange(idx.size)
        keep = (pos[self.i] >= 0) & (pos[self.j] >= 0)
        return EnergyModel(self.h[idx], pos[self.i[keep]], pos[self.j[keep]], self.w[keep], 0.0,
                           [self.names[k] for k in idx])

    def __repr__(self):
        return f"EnergyModel(n={self.n}, couplings={self.m}, const={self.const:g})"

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_matrix(cls, h, J, const=0.0, names=None) -> "EnergyModel":
        """``q(s) = const + h.s + s^T J s / 2`` from a symmetric coupling matrix ``J`` (dense array or
        scipy sparse; the convention of :attr:`J`, so ``w_e = J_ij`` for ``i < j``). The diagonal is a
        constant (``s_i^2 = 1``) and is added to ``const``; a non-symmetric ``J`` is an error (its two
        triangles would have to be summed or one dropped: say which by passing ``(J + J.T)/2``)."""
        h = np.asarray(h, dtype=float).ravel()
        M = sp.coo_matrix(J, dtype=float) if sp.issparse(J) else sp.coo_matrix(np.asarray(J, dtype=float))
        n = h.size
        if M.shape != (n, n):
            raise InputDataError(f"energy model: J has shape {M.shape}, expected ({n}, {n}) for {n} fields")
        if not np.isfinite(M.data).all():
            raise InputDataError("energy model: couplings J contain NaN or inf")
        D = (M - M.T).tocoo()
        if D.nnz and np.abs(D.data).max() > 1e-12 * max(1.0, np.abs(M.data).max()):
            k = int(np.argmax(np.abs(D.data)))
            raise InputDataError(f"energy model: J is not symmetric (J[{D.row[k]}, {D.col[k]}] differs from its "
                                 "transpose); pass (J + J.T) / 2 for q = h.s + s^T J s / 2")
        diag = M.row == M.col
        up = M.row < M.col
        c = math.fsum([float(const)] + list(0.5 * M.data[diag]))
        return cls(h, M.row[up], M.col[up], M.data[up], c, names)

    @classmethod
    def from_uai(cls, source, evidence=None) -> "EnergyModel":
        """The energy ``E(x) = -sum_f ln phi_f(x_f)`` of a ``MARKOV`` or ``BAYES`` file of the UAI inference
        competitions (a path, or the file's text), conditioned on ``evidence`` (a ``.uai.evid`` path or
        text, or ``{variable: value}``), so that ``p(x) ∝ exp(-E)`` at ``beta = 1`` and the energy solvers'
        ``log_partition`` is ``ln Z`` (UAI PR answers are ``log10 Z = ln Z / ln 10``). The unobserved
        variables must be binary and every factor, once conditioned, span at most two of them
        (:class:`ModelStructureError` otherwise); zero or negative entries raise :class:`InputDataError`.
        Variables keep their file index in the names ``x[v]``. See :mod:`varopt.program.uai`."""
        from .uai import energy_from_uai
        return energy_from_uai(source, evidence)

    @classmethod
    def from_bits(cls, const, lin, qi=(), qj=(), qv=(), names=None) -> "EnergyModel":
        """The spin form of ``f(x) = const + lin.x + sum_k qv_k x_{qi_k} x_{qj_k}`` over bits
        (``x_i x_i = x_i``; duplicate pairs, in either order, are summed)."""
        lin = np.array(lin, dtype=float).ravel()
        n = lin.size
        qi = np.asarray(qi, dtype=np.int64).ravel()
        qj = np.asarray(qj, dtype=np.int64).ravel()
        qv = np.asarray(qv, dtype=float).ravel()
        for name, a in (("linear coefficients", lin), ("quadratic coefficients", qv)):
            if not np.isfinite(a).all():
                raise InputDataError(f"energy model: {name} contain NaN or inf")
        diag = qi == qj
        lin = lin.copy()
        np.add.at(lin, qi[diag], qv[diag])
        qi, qj, qv = qi[~diag], qj[~diag], qv[~diag]
        h = lin / 2.0
        np.add.at(h, qi, qv / 4.0)
        np.add.at(h, qj, qv / 4.0)
        c = math.fsum([float(const)] + list(lin / 2.0) + list(qv / 4.0))
        return cls(h, qi, qj, qv / 4.0, c, names)

    def to_bits(self):
        """``(const, lin, i, j, q)`` with ``q(2x - 1) = const + lin.x + sum q_e x_i x_j``."""
        lin = 2.0 * self.h.copy()
        np.add.at(lin, self.i, -2.0 * self.w)
        np.add.at(lin, self.j, -2.0 * self.w)
        c = math.fsum([self.const] + list(-self.h) + list(self.w))
        return c, lin, self.i.copy(), self.j.copy(), 4.0 * self.w

    @classmethod
    def from_expression(cls, expr, names=None, where="objective") -> "EnergyModel":
        """The spin form of a program :class:`~varopt.program.Expression` over bits made of a
        constant, linear and quadratic terms and multiplier-free squares of affine rows
        (``(a.x + b)^2`` is expanded); anything else raises :class:`ModelStructureError`."""
        const, lin = expr.constant, expr.linear.copy()
        qi, qj, qv = [expr.quadratic.i], [expr.quadratic.j], [expr.quadratic.v]
        consts = [const]
        for g in expr.atoms:
            if not ATOMS[g.kind].quadratic or (np.asarray(g.mult) >= 0).any():
                raise ModelStructureError(
                    f"{where}: a term of kind '{g.kind}' is not a polynomial of degree <= 2 in binary "
                    "variables; energy models take constants, linear terms and products x[i]*x[j]")
            A = sp.csr_matrix(g.A)
            coef, b = np.asarray(g.coef, dtype=float), np.asarray(g.b, dtype=float)
            for r in range(A.shape[0]):  # (a.x + b)^2 = sum a_k a_l x_k x_l + 2 b a.x + b^2
                cols, a = A.indices[A.indptr[r]:A.indptr[r + 1]], A.data[A.indptr[r]:A.indptr[r + 1]]
                K, L = np.meshgrid(cols, cols, indexing="ij")
                qi.append(K.ravel())
                qj.append(L.ravel())
                qv.append(coef[r] * np.outer(a, a).ravel())
                np.add.at(lin, cols, 2.0 * coef[r] * b[r] * a)
                consts.append(coef[r] * b[r] ** 2)
        if expr.lse:
            raise ModelStructureError(f"{where}: a log-sum-exp term is not a polynomial of degree <= 2 in "
                                      "binary variables")
        return cls.from_bits(math.fsum(consts), lin, np.concatenate(qi), np.concatenate(qj),
                             np.concatenate(qv), names)

    def to_program(self, maximize=False):
        """A binary :class:`~varopt.program.Program` whose internal objective is ``q(2x - 1)`` (the
        user's objective ``-q`` when ``maximize``), variables named ``self.names``."""
        from .expression import Expression
        from .program import Program
        from .terms import QuadraticTerms
        c, lin, i, j, q = self.to_bits()
        n = self.n
        expr = Expression(n, c, lin, QuadraticTerms(i, j, q, n))
        prog = Program(list(self.names), np.zeros(n), np.ones(n), expr, [], maximize=maximize,
                       binary=np.ones(n, dtype=bool), energy=self)
        return prog


def energy_of(program, solver_name="this solver") -> EnergyModel:
    """The :class:`EnergyModel` of a binary program (``program.energy``, or built from its
    objective when the program was made by hand). Raises :class:`ModelStructureError` naming
    the offending constraint or variable."""
    if program.constraints:
        raise ModelStructureError(
            f"constraint '{program.constraints[0].name}': solver '{solver_name}' infers energy models over "
            "binary variables, which take no constraints")
    if program.energy is not None:
        return program.energy
    binary = program.binary if program.binary is not None else np.zeros(program.n, dtype=bool)
    if not binary.all():
        k = int(np.flatnonzero(~binary)[0])
        raise ModelStructureError(
            f"variable '{program.names[k]}' is not binary; solver '{solver_name}' needs an energy model over "
            "binary variables only (Pyomo domain=Binary, CVXPY boolean=True)")
    return EnergyModel.from_expression(program.objective, program.names,
                                       f"objective '{program.objective_name}'")


def spin_states(n: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows ``start .. stop - 1`` of the ``2^n`` spin configurations, as floats in ``{-1, +1}``.

    Row ``k`` is the binary expansion of ``k`` with bit ``i`` giving spin ``i`` (spin 0 fastest), the one
    enumeration order of every exact sum over states (oracles, the exact solver, the formulations)."""
    stop = (1 << n) if stop is None else stop
    idx = np.arange(start, stop, dtype=np.int64)
    return ((idx[:, None] >> np.arange(n, dtype=np.int64)) & 1) * 2.0 - 1.0

