"""An expression of a compiled program: a sum of recognised term groups.

``f(x) = constant + linear . x + sum_k v_k x_i x_j + sum of atom rows + sum of log-sum-exp rows``

See :mod:`varopt.program.terms` for the catalogue. Values, gradients (dense ``(n,)``)
and Hessians (``scipy.sparse.csr_matrix`` ``(n, n)``) are sums over the few groups.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .atoms import ATOMS
from .terms import LseGroup, QuadraticTerms


@dataclass
class Expression:
    n: int
    constant: float = 0.0
    linear: np.ndarray = None
    quadratic: QuadraticTerms = None
    atoms: list = field(default_factory=list)  # list[AtomGroup], at most one per kind is typical
    lse: list = field(default_factory=list)  # list[LseGroup]

    def __post_init__(self):
        self.constant = float(self.constant)
        self.linear = np.zeros(self.n) if self.linear is None else np.asarray(self.linear, dtype=float).ravel()
        if self.linear.size != self.n:
            raise ValueError("linear coefficient vector has the wrong length")
        if self.quadratic is None:
            self.quadratic = QuadraticTerms(np.zeros(0, int), np.zeros(0, int), np.zeros(0), self.n)
        self.atoms = [a for a in self.atoms if len(a)]
        self.lse = [g for g in self.lse if len(g)]

    # --- classification ---------------------------------------------------------------
    @property
    def is_linear(self) -> bool:
        return len(self.quadratic) == 0 and not self.atoms and not self.lse

    @property
    def is_quadratic(self) -> bool:
        """Linear plus quadratic terms only (an LP/QP objective or row)."""
        return not self.atoms and not self.lse

    def groups(self):
        yield from self.atoms
        yield from self.lse

    def atom_groups(self, kind: str):
        return [a for a in self.atoms if a.kind == kind]

    # --- evaluation ---------------------------------------------------------------------
    def value(self, x) -> float:
        x = np.asarray(x, dtype=float)
        val = self.constant + float(self.linear @ x) + self.quadratic.value(x)
        for g in self.groups():
            val += g.value(x)
        return val

    def gradient(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        grad = self.linear + self.quadratic.gradient(x)
        for g in self.groups():
            grad = grad + g.gradient(x)
        return np.asarray(grad, dtype=float).ravel()

    def hessian(self, x) -> sp.csr_matrix:
        x = np.asarray(x, dtype=float)
        H = self.quadratic.hessian_matrix
        for g in self.groups():
            H = H + g.hessian(x)
        return sp.csr_matrix(H)

    # --- structure ------------------------------------------------------------------------
    def support(self) -> np.ndarray:
        """Indices of the variables this expression depends on."""
        cols = [np.flatnonzero(self.linear), self.quadratic.i, self.quadratic.j]
        for g in self.groups():
            cols.append(g.A.indices)
            cols.append(g.mult[g.mult >= 0])
            if getattr(g, "A2", None) is not None:
                cols.append(g.A2.indices)
        return np.unique(np.concatenate([np.asarray(c, dtype=np.int64) for c in cols]))

    def interactions(self) -> set:
        """Pairs ``(i, j)``, ``i < j``, of distinct variables that multiply each other.

        Bilinear products, and for a row ``w * g(u)`` the multiplier with every variable
        of ``u``. Nonlinear atoms of several variables (e.g. ``exp(x + y)``) are *not*
        products and are reported by :meth:`nonseparable_atoms` instead.
        """
        pairs = set()
        q = self.quadratic
        for a, b in zip(q.i.tolist(), q.j.tolist()):
            if a != b:
                pairs.add((min(a, b), max(a, b)))
        for g in self.groups():
            rows = np.flatnonzero(g.mult >= 0)
            if rows.size == 0:
                continue
            if isinstance(g, LseGroup):
                for r in rows.tolist():
                    lo, hi = g.starts[r], (g.starts[r + 1] if r + 1 < len(g.starts) else g.seg.size)
                    vs = np.unique(g.A[lo:hi].indices)
                    w = int(g.mult[r])
                    pairs.update((min(w, v), max(w, v)) for v in vs.tolist() if v != w)
            else:
                for r in rows.tolist():
                    vs = g.A[r].indices.tolist()
                    if g.A2 is not None:
                        vs += g.A2[r].indices.tolist()
                    w = int(g.mult[r])
                    pairs.update((min(w, v), max(w, v)) for v in vs if v != w)
        return pairs

    @property
    def is_quadratic_form(self) -> bool:
        """Linear, quadratic and multiplier-free quadratic (``square``) atoms only: expandable to a QP form."""
        return not self.lse and all(ATOMS[a.kind].quadratic and np.all(a.mult < 0) for a in self.atoms)

    def as_quadratic(self):
        """Return ``(H, c, k)`` with ``f(x) = x^T H x / 2 + c^T x + k`` (``H`` csr, symmetric).

        Square atoms ``coef (a^T x + b)^2`` are expanded. Raises ``ValueError`` when the
        expression has other nonlinear terms (check :attr:`is_quadratic_form` first).
        """
        if not self.is_quadratic_form:
            raise ValueError("expression is not a quadratic form")
        H = self.quadratic.hessian_matrix
        c = self.linear.copy()
        k = self.constant
        for a in self.atoms:
            D = sp.diags(2.0 * a.coef)
            H = H + a.A.T @ D @ a.A
            c = c + a.A.T @ (2.0 * a.coef * a.b)
            k += float(np.sum(a.coef * a.b * a.b))
        return sp.csr_matrix(H), np.asarray(c, dtype=float).ravel(), float(k)

    def check_finite(self, where: str):
        """Raise :class:`~varopt.errors.InputDataError` naming ``where`` and the offending part when
        a coefficient is NaN or inf."""
        from ..core.checks import require_finite
        require_finite(f"{where}: constant", [self.constant])
        require_finite(f"{where}: linear coefficients", self.linear)
        require_finite(f"{where}: quadratic coefficients", self.quadratic.v)
        for g in self.groups():
            kind = getattr(g, "kind", "log-sum-exp")
            require_finite(f"{where}: {kind} coefficients", g.coef)
            require_finite(f"{where}: {kind} affine data", g.A, g.b)
            if getattr(g, "A2", None) is not None:
                require_finite(f"{where}: {kind} second affine data", g.A2, g.b2)

    def copy(self) -> "Expression":
        import copy
        return copy.deepcopy(self)
