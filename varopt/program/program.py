"""The compiled program: the canonical, numpy/scipy-only form every solver consumes.

::

    minimize    sign * f(x)          (sign = +1; a maximisation is stored negated)
    subject to  lo_c <= g_c(x) <= hi_c   for every constraint c
                lb <= x <= ub

``f`` and every ``g_c`` are :class:`~varopt.program.expression.Expression` objects.
A front-end (Pyomo or CVXPY) builds it; nothing here imports either library.

Sign convention for the sense: ``objective`` is *always minimised*. When the user
maximised, ``maximize`` is True, ``objective = -user_objective``, and
:meth:`user_value` converts back (a lower bound of the internal problem becomes an
upper bound in the user's sense).
"""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..core.csr import csr_raw
from ..errors import InputDataError, ModelStructureError
from .atoms import ATOMS
from .expression import Expression


@dataclass
class Constraint:
    """``lo <= body(x) <= hi``; equality when ``lo == hi``; ``-inf``/``inf`` for one side."""

    name: str
    body: Expression
    lo: float = -np.inf
    hi: float = np.inf

    @property
    def sense(self) -> str:
        if self.lo == self.hi:
            return "=="
        if np.isfinite(self.lo) and np.isfinite(self.hi):
            return "range"
        return "<=" if np.isfinite(self.hi) else ">="


@dataclass
class Program:
    names: list
    lb: np.ndarray
    ub: np.ndarray
    objective: Expression
    constraints: list = field(default_factory=list)
    maximize: bool = False
    objective_name: str = "objective"
    #: optional starting values (NaN where the model gave none)
    x0: np.ndarray = None
    #: True for binary (0/1) variables; None when every variable is continuous
    binary: np.ndarray = None
    #: the :class:`~varopt.program.energy.EnergyModel` (spin form of the objective) of a binary
    #: program, set by the front-ends for solvers that accept binary variables
    energy: object = None
    #: :class:`~varopt.program.lifting.AuxVariable` columns (the last ``len(aux)`` columns) that the
    #: front-end added for squares, abs and norms of bilinear expressions; never loaded into a model
    aux: list = field(default_factory=list)

    def __post_init__(self):
        n = len(self.names)
        if [a.index for a in self.aux] != list(range(n - len(self.aux), n)):
            raise ValueError("auxiliary columns must be the last columns, in order")
        self.lb = np.asarray(self.lb, dtype=float).ravel()
        self.ub = np.asarray(self.ub, dtype=float).ravel()
        if self.lb.size != n or self.ub.size != n:
            raise ValueError("bounds have the wrong length")
        self.x0 = np.full(n, np.nan) if self.x0 is None else np.asarray(self.x0, dtype=float).ravel()
        self.index = dict(zip(self.names, range(n)))
        if self.binary is not None:
            self.binary = np.asarray(self.binary, dtype=bool).ravel()

    @property
    def objective_label(self) -> str:
        """``objective NAME`` for messages; ``objective`` when the model gave no name (CVXPY), not "objective
        objective"."""
        return "objective" if self.objective_name == "objective" else f"objective {self.objective_name}"

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def n_user(self) -> int:
        """Number of the user's variables (the first columns; the others are auxiliary)."""
        return len(self.names) - len(self.aux)

    def complete_aux(self, x) -> np.ndarray:
        """``x`` with every auxiliary column recomputed exactly from the user's variables."""
        from .lifting import complete
        return complete(self.aux, x, self.n_user) if self.aux else np.asarray(x, dtype=float)

    def require_no_aux(self, solver: str, epigraph_ok: bool = False, hint: str = None):
        """Raise :class:`~varopt.errors.ModelStructureError` naming the first lifted term (a square
        root, or a square, abs or norm of products of variables; with ``epigraph_ok=False`` also a max, norm_inf,
        huber, ... written as epigraph columns with inequality rows) for a solver that cannot handle its
        defining rows. Epigraph columns are linear rows (a quadratic ``s^2`` for huber): a solver that takes
        linear constraints and convex quadratics passes ``epigraph_ok=True``. ``hint``: the solver's own sentence in
        place of the pointer to gop (and majorize) (klprox: such a term is a likelihood without a Gaussian expectation,
        and its users want a posterior, not the point an optimizer returns)."""
        for a in self.aux:
            if a.kind != "epigraph":
                break
            if not epigraph_ok:
                raise ModelStructureError(
                    f"{solver} does not support the term '{a.term}': max, maximum, pos, norm_inf, sum_largest, "
                    "huber, cummax and dotsort (and their concave mirrors min, minimum, neg, sum_smallest) are "
                    "compiled as epigraph columns with inequality rows, which this solver does not take; "
                    + (hint or "use gop (or majorize, which takes them)"))
        else:
            return
        if self.aux:
            raise ModelStructureError(
                f"{solver} does not support the term '{a.term}': a square root, a division by a variable, a "
                "geometric or harmonic mean, a p-norm other than 1, 2, inf, or a square, abs, norm, power, exp or log "
                "of a non-affine argument (products or powers of variables), is compiled with auxiliary variables and "
                "equality rows that only gop handles; " + (hint or "use gop, or rewrite the term"))

    # --- sense ----------------------------------------------------------------------------
    @property
    def sign(self) -> float:
        """+1 when the user minimised, -1 when they maximised."""
        return -1.0 if self.maximize else 1.0

    def user_value(self, internal_value):
        """Objective value in the user's sense from a value of the internal (minimised) one."""
        return None if internal_value is None else self.sign * internal_value

    def user_bounds(self, internal_lower, internal_upper):
        """(lower, upper) in the user's sense from bounds on the internal minimisation."""
        if self.maximize:
            return (None if internal_upper is None else -internal_upper,
                    None if internal_lower is None else -internal_lower)
        return internal_lower, internal_upper

    # --- constraint views ---------------------------------------------------------------------
    def linear_constraints(self):
        """(A csr, lo, hi, idx): the linear constraints as rows ``lo <= A x + 0 <= hi``.

        Constants of the bodies are moved to the sides; ``idx`` indexes ``self.constraints``.
        """
        A, const, lo, hi, _ = self._linear_rows()  # the rows max_violation evaluates: assembled once
        if not A.shape[0]:
            return sp.csr_matrix((0, self.n)), np.zeros(0), np.zeros(0), []
        idx = [k for k, c in enumerate(self.constraints) if c.body.is_linear]
        return A, lo - const, hi - const, idx

    def fold_bound_rows(self) -> "Program":
        """This program with every linear constraint on one variable, ``lo <= a x_j + c <= hi`` (a
        CVXPY ``x <= 0.8`` on a vector, a Pyomo ``Constraint(expr=x[0] >= 1)``), intersected into the
        bounds of ``x_j`` and dropped; the other constraints are kept in order. The result may have
        ``lb > ub`` (no feasible value), which the caller reports."""
        lb, ub, keep = self.lb.copy(), self.ub.copy(), []
        for c in self.constraints:
            idx, val = c.body.linear_items() if c.body.is_linear else ((), ())
            if len(idx) != 1 or val[0] == 0:
                keep.append(c)
                continue
            j, a = int(idx[0]), float(val[0])
            lo, hi = (c.lo - c.body.constant) / a, (c.hi - c.body.constant) / a
            if a < 0:
                lo, hi = hi, lo
            lb[j], ub[j] = max(lb[j], lo), min(ub[j], hi)
        if len(keep) == len(self.constraints):
            return self
        return dataclasses.replace(self, lb=lb, ub=ub, constraints=keep)

    def without_constant_constraints(self):
        """``(program, violated)``: this program without its constraints whose body is a constant (every variable
        of the row fixed: a Pyomo ``z.fix()``, a CVXPY row of Parameters), and the first of them that fails, as
        ``(name, value, lo, hi)``, or None. A constant row that holds says nothing about the variables; one that
        fails (by more than 1e-9 of its scale, the tolerance of a program without free variables) makes the
        program infeasible, whatever the solver."""
        A, const, lo, hi, _ = self._linear_rows()
        empty = np.diff(A.indptr) == 0
        if not empty.any():
            return self, None
        lin = [c for c in self.constraints if c.body.is_linear]
        violated = None
        for k in np.flatnonzero(empty).tolist():
            scale = 1e-9 * max(1.0, abs(const[k]))
            if const[k] < lo[k] - scale or const[k] > hi[k] + scale:
                violated = (lin[k].name, float(const[k]), float(lo[k]), float(hi[k]))
                break
        drop = {id(lin[k]) for k in np.flatnonzero(empty).tolist()}
        return dataclasses.replace(self, constraints=[c for c in self.constraints if id(c) not in drop]), violated

    def split_abs_rows(self) -> "Program":
        """This program with every constraint ``c |a^T x + b| + l^T x + k <= hi`` (one ``abs`` row with
        ``c > 0`` and no multiplier, otherwise linear; a CVXPY ``cp.abs(w) <= u``, a Pyomo
        ``abs(w[j]) <= u[j]``: the box form ``-u <= w <= u``) replaced by its two linear rows
        ``+-c (a^T x + b) + l^T x + k <= hi``, which define the same set."""
        if not any(con.body.atoms for con in self.constraints):
            return self  # no atom rows (one pass without the per-row tests below)
        out, changed = [], False
        for con in self.constraints:
            e = con.body
            g = e.atoms[0] if len(e.atoms) == 1 else None
            if (g is None or not ATOMS[g.kind].max_of_pm_u or len(g) != 1 or g.coef[0] <= 0 or g.mult[0] >= 0
                    or len(e.quadratic) or e.lse or np.isfinite(con.lo)):
                out.append(con)
                continue
            changed = True
            # sparse rows (a dense length-n row per constraint cost O(rows x n): 1.7 s for |theta| <= u on 9236
            # parameters); Expression sums duplicate indices and drops zeros
            row = sp.csr_matrix(g.A)
            aidx, aval = row.indices.astype(np.int64), row.data * g.coef[0]
            idx, val = e.linear_items()
            idx = np.concatenate((np.asarray(idx, dtype=np.int64), aidx))
            for sign, tag in ((1.0, "+"), (-1.0, "-")):
                vals = np.concatenate((np.asarray(val, dtype=float), sign * aval))
                out.append(Constraint(f"{con.name} ({tag})", Expression(self.n, e.constant + sign * g.coef[0] * g.b[0],
                                                                        (idx, vals)), -np.inf, con.hi))
        return dataclasses.replace(self, constraints=out) if changed else self

    def nonlinear_constraints(self):
        return [c for c in self.constraints if not c.body.is_linear]

    def constraint_values(self, x) -> np.ndarray:
        return np.array([c.body.value(x) for c in self.constraints])

    def constraint_jacobian(self, x) -> sp.csr_matrix:
        """Rows ``grad g_c(x)``, sparse: linear rows from their stored nonzeros, others from their gradient."""
        if not self.constraints:
            return sp.csr_matrix((0, self.n))
        cols, vals = [], []
        for c in self.constraints:
            if c.body.is_linear:
                j, v = c.body.linear_items()
            else:
                g = c.body.gradient(x)
                j = np.flatnonzero(g)
                v = g[j]
            cols.append(np.asarray(j, dtype=np.int64))
            vals.append(v)
        indptr = np.concatenate([[0], np.cumsum([j.size for j in cols])])
        return sp.csr_matrix((np.concatenate(vals), np.concatenate(cols), indptr),
                             shape=(len(self.constraints), self.n))

    def max_violation(self, x) -> float:
        """Largest violation of bounds and constraints at x (0 when feasible). The linear constraints are
        evaluated as one sparse product (:meth:`_linear_rows`), the others one by one."""
        x = np.asarray(x, dtype=float)
        v = [np.maximum(self.lb - x, 0.0).max(initial=0.0), np.maximum(x - self.ub, 0.0).max(initial=0.0)]
        A, const, lo, hi, nonlinear = self._linear_rows()
        if A.shape[0]:
            g = A @ x + const
            with np.errstate(invalid="ignore"):   # inf - inf on an infinite side: no violation there
                v.append(np.maximum(np.maximum(lo - g, g - hi), 0.0).max())
        for c in nonlinear:
            g = c.body.value(x)
            v.append(max(c.lo - g, g - c.hi, 0.0))
        return float(max(v))

    def _linear_rows(self):
        """``(A, const, lo, hi, nonlinear)``: the linear constraints as rows ``lo <= A x + const <= hi`` (csr; the
        sides as the constraints state them) and the list of the other constraints; built once per constraint
        list (kept with the list itself, so a new or extended list is seen; ``A`` is shared by every caller and
        never changed). The csr is assembled from each row's nonzeros (never a dense m x n stack); the rows are
        valid by construction (Expression keeps its indices sorted, distinct and in range), so scipy's format checks
        are skipped."""
        cached = self.__dict__.get("_linear_cache")
        if cached is None or cached[0] is not self.constraints or cached[1] != len(self.constraints):
            lin = [c for c in self.constraints if c.body.is_linear]
            indptr, indices, data = Expression.linear_rows([c.body for c in lin], self.n)
            A = csr_raw(data, indices, indptr, (len(lin), self.n))
            rows = (A, np.array([c.body.constant for c in lin]), np.array([c.lo for c in lin], dtype=float),
                    np.array([c.hi for c in lin], dtype=float), [c for c in self.constraints if not c.body.is_linear])
            cached = (self.constraints, len(self.constraints), rows)
            self._linear_cache = cached
        return cached[2]

    # --- structure queries --------------------------------------------------------------------
    def interactions(self, include_constraints: bool = True) -> set:
        """Pairs (i, j), i < j, of variables multiplied together anywhere in the program."""
        pairs = set(self.objective.interactions())
        if include_constraints:
            for c in self.constraints:
                pairs |= c.body.interactions()
        return pairs

    def lse_groups(self):
        """Log-sum-exp groups of the objective (partition functions), in order."""
        return list(self.objective.lse)

    def separable_rows(self):
        """Per-sample pieces of the objective: ``[(group, row_count)]`` of atom and lse groups.

        A finite-sum solver samples these rows; the remaining linear and quadratic part is
        treated as deterministic. Rows may carry a ``label`` (e.g. the data index) that
        groups several rows into one sample.
        """
        return [(g, len(g)) for g in self.objective.groups()]

    def is_convex(self) -> bool:
        """A sufficient check: every objective group convex and every constraint convex."""
        def convex_expr(e: Expression, sign: float) -> bool:
            if sign < 0:
                if not e.is_linear:
                    return False
                return True
            ok = all(g.is_convex() for g in e.groups())
            if len(e.quadratic):
                H = e.quadratic.hessian_matrix.toarray()
                ok = ok and np.linalg.eigvalsh(H).min() >= -1e-10 * max(1.0, np.abs(H).max())
            return ok

        if not convex_expr(self.objective, 1.0):
            return False
        for c in self.constraints:
            if c.lo == c.hi and not c.body.is_linear:
                return False
            if np.isfinite(c.hi) and not convex_expr(c.body, 1.0):
                return False
            if np.isfinite(c.lo) and not convex_expr(c.body, -1.0):
                return False
        return True

    def require_smooth(self, solver: str, alternatives: str = "", epigraph_ok: bool = False, hint: str = None):
        """Raise :class:`~varopt.errors.ModelStructureError` naming the first nonsmooth atom row
        (``abs``) for a solver that needs derivatives of every term (and any auxiliary column,
        :meth:`require_no_aux`, with its ``hint``)."""
        self.require_no_aux(solver, epigraph_ok, hint)
        # the part's name is formatted only for the message (programs have constraints by the thousand)
        for c, e in [(None, self.objective)] + [(c, c.body) for c in self.constraints if c.body.atoms]:
            for g in e.atoms:
                if not ATOMS[g.kind].smooth:
                    where = self.objective_label if c is None else f"constraint {c.name}"
                    raise ModelStructureError(
                        f"{where}: {solver} needs smooth terms and {ATOMS[g.kind].text.format(u='...')} is not "
                        f"differentiable at 0" + (f"; {alternatives}" if alternatives else ""))

    def check_finite(self):
        """Raise :class:`~varopt.errors.InputDataError` naming the objective, constraint or variable
        whose data holds NaN or inf (bounds may be infinite, not NaN)."""
        self.objective.check_finite(self.objective_label)
        # linear rows in one vectorised pass (10^5 rows: a per-row check costs seconds); a row
        # is looked at by itself only to name it
        lin = [c for c in self.constraints if c.body.is_linear]
        if lin:
            data = np.concatenate([c.body.linear_items()[1] for c in lin]
                                  + [np.array([c.body.constant for c in lin])])
            sides = np.array([(c.lo, c.hi) for c in lin])
            if np.isfinite(data).all() and not np.isnan(sides).any():
                lin = set(map(id, lin))
            else:
                lin = set()
        for c in self.constraints:
            if id(c) in lin:
                continue
            c.body.check_finite(f"constraint {c.name}")
            if np.isnan(c.lo) or np.isnan(c.hi):
                raise InputDataError(f"constraint {c.name}: NaN bound")
        bad = np.isnan(self.lb) | np.isnan(self.ub)
        if bad.any():
            raise InputDataError(f"variable {self.names[int(np.flatnonzero(bad)[0])]}: NaN bound")

    def check_point(self, x, name: str = "x") -> np.ndarray:
        x = np.asarray(x, dtype=float).ravel()
        if x.size != self.n:
            raise ValueError(f"{name} has length {x.size}, the program has {self.n} variables")
        return x
