"""An expression of a compiled program: a sum of recognised term groups.

``f(x) = constant + linear . x + sum_k v_k x_i x_j + sum of atom rows + sum of log-sum-exp rows``

See :mod:`varopt.program.terms` for the catalogue. Values, gradients (dense ``(n,)``)
and Hessians (``scipy.sparse.csr_matrix`` ``(n, n)``) are sums over the few groups.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .atoms import ATOMS
from .terms import LseGroup, QuadraticTerms


class Expression:
    """``constant + linear . x + quadratic + atom rows + lse rows`` over ``n`` variables.

    The linear part is stored dense (a length-``n`` vector) or sparse (indices and values), as
    given: a constraint row of a large model touches a handful of variables, and a dense vector
    per row would cost ``8 n`` bytes each (10^4 rows over 5 10^4 variables: 4 GB).
    :attr:`linear` always reads as a dense vector; for a sparsely stored expression it is a
    fresh array on every access (writing into it does not change the expression), so code
    that walks many rows uses :meth:`linear_items` instead.
    """

    def __init__(self, n: int, constant: float = 0.0, linear=None, quadratic: QuadraticTerms = None,
                 atoms=None, lse=None):
        self.n = int(n)
        self.constant = float(constant)
        self._lin_idx = self._lin_val = None
        if linear is None:
            self._lin = np.zeros(self.n)
        elif isinstance(linear, tuple):
            idx, val = linear
            self._set_sparse(np.asarray(idx, dtype=np.int64).ravel(), np.asarray(val, dtype=float).ravel())
        elif sp.issparse(linear):
            row = sp.coo_matrix(linear.reshape(1, -1) if linear.shape[0] != 1 else linear)
            if row.shape[1] != self.n:
                raise ValueError("linear coefficient vector has the wrong length")
            self._set_sparse(row.col.astype(np.int64), row.data.astype(float))
        else:
            self._lin = np.asarray(linear, dtype=float).ravel()
            if self._lin.size != self.n:
                raise ValueError("linear coefficient vector has the wrong length")
        if quadratic is None:
            quadratic = QuadraticTerms(np.zeros(0, int), np.zeros(0, int), np.zeros(0), self.n)
        self.quadratic = quadratic
        self.atoms = [a for a in (atoms or []) if len(a)]
        self.lse = [g for g in (lse or []) if len(g)]

    @classmethod
    def from_sorted_row(cls, n: int, constant: float, idx, val, quadratic: QuadraticTerms, atoms=(), lse=()):
        """The expression :meth:`__init__` builds from ``linear=(idx, val)``, for a row the caller knows is valid:
        ``idx`` int64, strictly increasing, in ``[0, n)``; ``val`` float, nonzero, as long (a canonical csr row
        without stored zeros). Skips the per-row checks, sort and zero filter (~5 us a row: front ends emit rows by
        the thousand)."""
        e = cls.__new__(cls)
        e.n = int(n)
        e.constant = float(constant)
        e._lin, e._lin_idx, e._lin_val = None, idx, val
        e.quadratic = quadratic
        e.atoms = [a for a in atoms if len(a)]
        e.lse = [g for g in lse if len(g)]
        return e

    def _set_sparse(self, idx, val):
        if idx.size != val.size:
            raise ValueError("linear indices and values differ in length")
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise ValueError("linear index out of range")
        if idx.size > 1 and not (idx[1:] > idx[:-1]).all():  # sort and merge duplicates
            order = np.argsort(idx, kind="stable")
            idx, val = idx[order], val[order]
            idx, start = np.unique(idx, return_index=True)
            val = np.add.reduceat(val, start)
        keep = val != 0.0
        if not keep.all():
            idx, val = idx[keep], val[keep]
        self._lin = None
        self._lin_idx, self._lin_val = idx, val

    @property
    def linear(self) -> np.ndarray:
        """The dense linear coefficient vector (a fresh copy when stored sparse)."""
        if self._lin is not None:
            return self._lin
        out = np.zeros(self.n)
        out[self._lin_idx] = self._lin_val
        return out

    @linear.setter
    def linear(self, value):
        value = np.asarray(value, dtype=float).ravel()
        if value.size != self.n:
            raise ValueError("linear coefficient vector has the wrong length")
        self._lin, self._lin_idx, self._lin_val = value, None, None

    @property
    def is_sparse(self) -> bool:
        return self._lin is None

    def linear_items(self):
        """``(idx, val)``: the nonzero linear coefficients, whatever the storage."""
        if self._lin is None:
            return self._lin_idx, self._lin_val
        idx = np.flatnonzero(self._lin)
        return idx, self._lin[idx]

    @staticmethod
    def linear_rows(exprs, n):
        """The nonzero linear coefficients of ``exprs`` (length ``n`` each) as compressed rows
        ``(indptr, indices, values)``, row ``k`` being ``exprs[k].linear_items()``; the dense ones with one
        ``nonzero`` call (many small rows, e.g. the box form's 2 n constraints, without a call each)."""
        if exprs and all(e._lin is not None for e in exprs):
            D = np.stack([e._lin for e in exprs])
            rows, cols = np.nonzero(D)  # row-major: each row's columns ascending, as flatnonzero
            indptr = np.zeros(len(exprs) + 1, dtype=np.int64)
            np.cumsum(np.bincount(rows, minlength=len(exprs)), out=indptr[1:])
            return indptr, cols.astype(np.int64), D[rows, cols]
        if all(e._lin is None for e in exprs):  # sparse rows: their stored arrays, without a call each
            idx, val = [e._lin_idx for e in exprs], [e._lin_val for e in exprs]
        else:
            items = [e.linear_items() for e in exprs]
            idx, val = [i for i, _ in items], [v for _, v in items]
        indptr = np.zeros(len(exprs) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, idx), dtype=np.int64, count=len(idx)), out=indptr[1:])
        # one concatenation each (cast once to the common index / float type)
        return (indptr, np.concatenate([np.zeros(0, dtype=np.int64)] + idx).astype(np.int64, copy=False),
                np.concatenate([np.zeros(0)] + val).astype(float, copy=False))

    def _linear_dot(self, x) -> float:
        if self._lin is None:
            return float(self._lin_val @ x[self._lin_idx])
        return float(self._lin @ x)

    def __repr__(self):
        nl = len(self.linear_items()[0])
        return (f"Expression(n={self.n}, constant={self.constant}, {nl} linear, {len(self.quadratic)} quadratic, "
                f"{len(self.atoms)} atom groups, {len(self.lse)} lse groups)")

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
        val = self.constant + self._linear_dot(x) + self.quadratic.value(x)
        for g in self.groups():
            val += g.value(x)
        return val

    def gradient(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        grad = np.asarray(self.quadratic.gradient(x), dtype=float).ravel().copy()
        if self._lin is None:
            np.add.at(grad, self._lin_idx, self._lin_val)
        else:
            grad += self._lin
        for g in self.groups():
            grad = grad + g.gradient(x)
        return np.asarray(grad, dtype=float).ravel()

    def hessian(self, x, dense: bool = False, idx=None):
        """The Hessian at ``x``: a csr matrix, or a dense array when ``dense`` (formed without a
        sparse intermediate: the weighted Grams of :mod:`.gram`); ``idx`` (with ``dense``): only the
        principal submatrix on the variables ``idx`` (``H[idx][:, idx]``), formed from those
        columns (proximal Newton's working set)."""
        x = np.asarray(x, dtype=float)
        if idx is not None:
            if not dense:
                raise ValueError("Expression.hessian: a principal submatrix (idx) is returned dense only")
            idx = np.asarray(idx, dtype=np.int64)
        k = self.n if idx is None else idx.size
        if len(self.quadratic):
            H = self.quadratic.hessian_matrix
            if idx is not None:
                H = H[idx][:, idx]
            H = H.toarray() if dense else H
        else:  # (an empty n x n csr costs a millisecond to build)
            H = np.zeros((k, k)) if dense else sp.csr_matrix((self.n, self.n))
        for g in self.groups():
            H = H + g.hessian(x, dense, idx)
        return H if dense else sp.csr_matrix(H)

    def hessian_rank_bound(self) -> int:
        """An upper bound on the rank of the Hessian at every point: the variables of the quadratic
        terms plus each group's bound (``rank(A + B) <= rank A + rank B``), at most ``n``."""
        q = self.quadratic
        r = np.unique(np.concatenate([q.i, q.j])).size if len(q) else 0
        for g in self.groups():
            r += g.hessian_rank_bound()
        return int(min(r, self.n))

    # --- structure ------------------------------------------------------------------------
    def support(self) -> np.ndarray:
        """Indices of the variables this expression depends on."""
        return self._columns([self.linear_items()[0]])

    def nonlinear_support(self) -> np.ndarray:
        """Indices of the variables that enter other than linearly (products, squares, atoms, multipliers)."""
        return self._columns([])

    def _columns(self, cols) -> np.ndarray:
        cols = cols + [self.quadratic.i, self.quadratic.j]
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
        c = self.constant
        # a Python float (or int) checked directly; the dense linear part whole (its zeros are finite): the same
        # verdicts without forming arrays (a tenth of a small GP solve's set-up went to these checks)
        # the labels are formatted only on an error (``where`` may be a lazily printed Pyomo expression)
        if not (isinstance(c, (float, int)) and math.isfinite(c)):
            require_finite(lambda: f"{where}: constant", [c])
        require_finite(lambda: f"{where}: linear coefficients",
                       self._lin if self._lin is not None else self.linear_items()[1])
        require_finite(lambda: f"{where}: quadratic coefficients", self.quadratic.v)
        for g in self.groups():
            kind = getattr(g, "kind", "log-sum-exp")
            require_finite(lambda kind=kind: f"{where}: {kind} coefficients", g.coef)
            require_finite(lambda kind=kind: f"{where}: {kind} affine data", g.A, g.b)
            if getattr(g, "A2", None) is not None:
                require_finite(lambda kind=kind: f"{where}: {kind} second affine data", g.A2, g.b2)

    def scaled(self, k: float) -> "Expression":
        """``k e`` (new arrays where the signs change; ``e`` is left as it is): a row ``h >= lo`` as ``-h <= -lo``."""
        import dataclasses
        q = self.quadratic
        return Expression(self.n, k * self.constant, k * self.linear, QuadraticTerms(q.i, q.j, k * q.v, q.n),
                          [dataclasses.replace(g, coef=k * g.coef) for g in self.atoms],
                          [dataclasses.replace(g, coef=k * g.coef) for g in self.lse])

    def copy(self) -> "Expression":
        import copy
        return copy.deepcopy(self)
