r"""The one HiGHS layer of varopt: LP and convex QP (sub)problems.

Every LP/QP subproblem in varopt goes through this module; nothing else imports
``highspy``.

Problem form
------------
.. math::

    \min_x\ \tfrac12 x^\top Q x + c^\top x + \text{const}
    \quad\text{s.t.}\quad r^{lo} \le A x \le r^{hi},\qquad l \le x \le u,

with ``Q`` symmetric positive semidefinite (given FULL and symmetric, dense or scipy
sparse; the layer hands HiGHS its lower triangle, and HiGHS's own objective is
``c^T x + 1/2 x^T Q x`` so no factor is changed), ``A`` dense or scipy sparse (m x n),
and ``-inf``/``+inf`` allowed in every bound. There is no sense flag: to maximise
``g(x)`` minimise ``-g(x)`` and negate the objective and the duals yourself.

Dual sign convention (the only one used in varopt)
--------------------------------------------------
Lagrangian :math:`L(x, y, z) = f(x) - y^\top A x - z^\top x`, so at an optimum

.. math::  Q x + c - A^\top y - z = 0,

``y_i >= 0`` when row ``i`` sits at its lower bound, ``y_i <= 0`` when it sits at its
upper bound, ``y_i = 0`` when it is inactive (either sign for an equality row); the
same for the reduced costs ``z_j`` and the column bounds. Equivalently ``y_i`` is the
derivative of the optimal value with respect to the active bound of row ``i``
(raising an active lower bound by ``t`` raises the optimal value by ``y_i t``).
HiGHS's native convention for a minimisation (checked empirically with highspy 1.15,
and re-checked by ``tests/test_highs.py::test_native_sign_convention``) is exactly this
one, so the layer does not transform the duals.

Worked example: ``min x s.t. x >= 2`` (as a row) gives ``x = 2``, ``y = 1``
(``c - y = 0``); as a column bound instead, ``z = 1``. ``min -x s.t. x <= 3`` gives
``y = -1``.

Statuses
--------
``LPResult.status`` is one of ``"optimal"``, ``"infeasible"``, ``"unbounded"``,
``"error"`` (time/iteration limits, numerical trouble; ``message`` and
``model_status`` say which). HiGHS's ``kUnboundedOrInfeasible`` (presolve found dual
infeasibility without deciding primal feasibility) is resolved by a phase-1 solve (the
same constraints, zero objective, presolve off, on a separate HiGHS instance so the warm
basis of the model is untouched): feasible -> ``"unbounded"``, infeasible ->
``"infeasible"``. ``solve()`` never raises for these; ``LPResult.raise_for_status()``
raises :class:`InfeasibleError` / :class:`UnboundedError` / :class:`HighsError`.

Warm starts
-----------
:class:`HighsModel` builds the HiGHS model once; ``set_cost``, ``set_col_bounds``,
``set_row_bounds``, ``add_rows``, ``delete_rows``, ``set_coefficient``, ``add_cols``
modify it in place and the next ``solve()`` starts from the previous simplex basis
(HiGHS skips presolve when it holds a valid basis). Row indices are positional, as in
HiGHS: ``delete_rows`` shifts the rows after the deleted ones down and returns the map
``old index -> new index`` (``-1`` for deleted rows). QPs are hot-started
(``qp_allow_hot_start``, with the solution and basis of the last verified solve of the same
size); retries after a failed attempt start cold.

LP reliability
--------------
HiGHS 1.15's presolve wrongly calls some tiny degenerate LPs "infeasible" (found by the
random status tests). Every "infeasible"/"unbounded" LP answer reached with presolve (cold
solves; warm solves skip presolve and the simplex answer comes with a ray) is therefore
confirmed by a phase-1 LP (presolve off); on a contradiction the model is re-solved without
presolve. Set ``model.verify_status = False`` to skip this (one extra LP solve per such answer).

QP accuracy and reliability
---------------------------
HiGHS's active-set QP solver (the only QP solver in HiGHS 1.15) (i) adds
``qp_regularization_value * I`` (1e-7) to ``Q``, perturbing ``x`` and the duals at the 1e-7
level, (ii) cycles on some small degenerate QPs, (iii) sometimes calls a singular PSD ``Q``
"non-convex", (iv) sometimes returns "optimal" for a point that is not (KKT residual
O(1)) or with NaN in ``x``, and (v) calls about half of some unbounded QPs (rank-1 ``Q``,
free columns) "optimal" and some bounded ones "unbounded"; (ii)-(iv) hit ~5-10% of random
2..12-variable box-constrained QPs. The layer therefore:

1. *polishes* every QP answer: with the active set ``W`` read off the solution (bounds hit
   within a tolerance with a dual of the right sign) it solves the equality-constrained KKT
   system ``[Q_FF -A_WF'; A_WF 0][x_F; y_W] = [-c_F - Q_FC l_C; b_W - A_WC l_C]`` (columns
   ``C`` fixed at their active bound; least squares when singular) and keeps the polished
   point if its :func:`kkt_residual` is smaller;
2. accepts an "optimal" answer only if ``kkt_residual <= 1e-8 * scale`` (scale = 1 + the
   largest term of the stationarity equation), otherwise retries HiGHS with presolve off
   and regularisation 1e-5, then 1e-3, and finally solves the QP with Clarabel (interior
   point, tolerances 1e-10) followed by the same polish. ``res.info`` records the
   ``attempts``, the ``kkt`` residual and whether the point was ``polished``; an answer that
   stays above the threshold is flagged ``info["unverified"]`` (status "error" if 1000x above);
3. confirms "infeasible" by a phase-1 LP and "unbounded" by the LP
   ``min c'd s.t. Q d = 0, d in the recession cone, -1 <= d <= 1`` having a negative value
   (for convex Q the QP is unbounded iff it is feasible and such a d exists); when no
   attempt verifies optimality, that LP is also run and a direction found gives "unbounded".

With ``Q`` PSD a point with zero KKT residual is a global minimiser, so the KKT residual
is the certificate. ``Q`` is checked for PSD when the model is built (n <= 800, or any n
when diagonally dominant) and when HiGHS calls it non-convex.

HiGHS 1.15 printf's some postsolve debug lines to stdout even with ``output_flag`` off, so
file descriptor 1 points at /dev/null while HiGHS runs (``SILENCE_NATIVE_STDOUT``).

Single-threaded BLAS is used (threadpoolctl, when installed) for the dense PSD check and
the small dense least-squares solves of the polish: a multi-threaded OpenBLAS on the loaded
test machine made a 200 x 200 Cholesky take 0.2 s instead of 0.2 ms.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .errors import InputDataError, InvalidOptionError, VaroptError
from .core.threads import blas_threads

__all__ = ["HighsModel", "LPResult", "solve_lp", "solve_qp", "kkt_residual",
           "InfeasibleError", "UnboundedError", "HighsError", "STATUSES"]

STATUSES = ("optimal", "infeasible", "unbounded", "error")

INF = float("inf")


class InfeasibleError(VaroptError):
    """The LP/QP has no feasible point."""


class UnboundedError(VaroptError):
    """The LP/QP is feasible but its objective is unbounded below."""


class HighsError(VaroptError, RuntimeError):
    """HiGHS stopped without a decision (time/iteration limit, numerical failure)."""



#: HiGHS 1.15 prints some postsolve debug lines ("HighsPostsolveStack::DuplicateColumn::undo
#: ...") with printf to stdout even with output_flag off; they would corrupt e.g. JSON on the
#: CLI's stdout. While HiGHS runs, file descriptor 1 is pointed at /dev/null (stderr is kept).
SILENCE_NATIVE_STDOUT = True
_LIBC = []


@contextlib.contextmanager
def _native_stdout_silenced():
    if not SILENCE_NATIVE_STDOUT or os.name != "posix":
        yield
        return
    if not _LIBC:
        try:
            import ctypes
            _LIBC.append(ctypes.CDLL(None))
        except OSError:
            _LIBC.append(None)
    libc = _LIBC[0]
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        if libc is not None:
            libc.fflush(None)  # drop what HiGHS buffered before fd 1 is restored
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _highspy():
    import highspy  # imported lazily so ``import varopt`` stays cheap
    return highspy


# --------------------------------------------------------------------------- results
@dataclass
class LPResult:
    """Solution of one LP/QP solve in the sign convention of the module docstring.

    ``x``, ``row_duals`` (y), ``col_duals`` (z) and ``row_activity`` (A x) are numpy
    arrays when ``status == "optimal"``; they are ``None`` for "infeasible"/"unbounded", and
    for "error" they hold HiGHS's last point when it has one. ``objective`` includes
    ``const``. ``info`` holds QP diagnostics (``attempts``, ``kkt``, ``polished``,
    ``fallback``, ``unverified``).
    """
    status: str
    x: np.ndarray = None
    objective: float = None
    row_duals: np.ndarray = None
    col_duals: np.ndarray = None
    row_activity: np.ndarray = None
    iterations: int = 0
    message: str = ""
    model_status: str = ""  #: HiGHS's model status string, for diagnostics
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown LP status {self.status!r}; valid: {STATUSES}")

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    def raise_for_status(self) -> "LPResult":
        """Return ``self`` if optimal, else raise the matching :class:`VaroptError` subclass."""
        if self.status == "optimal":
            return self
        if self.status == "infeasible":
            raise InfeasibleError(f"LP/QP is infeasible ({self.message})")
        if self.status == "unbounded":
            raise UnboundedError(f"LP/QP is unbounded below ({self.message})")
        raise HighsError(f"HiGHS failed: {self.message}")


# --------------------------------------------------------------------------- validation
def _vector(name, v, n, default, *, allow_pinf=False, allow_ninf=False):
    """Return ``v`` as a float array of length ``n`` (scalars broadcast, None -> default)."""
    if v is None:
        return np.full(n, default, dtype=float)
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError) as e:
        raise InputDataError(f"{name}: cannot convert to a float array ({e})") from None
    if a.ndim == 0:
        a = np.full(n, float(a))
    a = a.reshape(-1) if a.ndim == 2 and 1 in a.shape else a
    if a.ndim != 1 or a.shape[0] != n:
        raise InputDataError(f"{name}: expected shape ({n},), got {np.shape(v)}")
    if np.isnan(a).any():
        raise InputDataError(f"{name}: contains NaN at index {int(np.flatnonzero(np.isnan(a))[0])}")
    if not allow_pinf and (a == INF).any():
        raise InputDataError(f"{name}: contains +inf at index {int(np.flatnonzero(a == INF)[0])}")
    if not allow_ninf and (a == -INF).any():
        raise InputDataError(f"{name}: contains -inf at index {int(np.flatnonzero(a == -INF)[0])}")
    return np.ascontiguousarray(a, dtype=float)


def _matrix(name, A, n, fmt="csc", m=None):
    """Return ``A`` as a scipy sparse matrix (``fmt``) with ``n`` columns, finite entries."""
    if sp.issparse(A):
        M = A.asformat(fmt).astype(float, copy=True)
    else:
        try:
            D = np.asarray(A, dtype=float)
        except (TypeError, ValueError) as e:
            raise InputDataError(f"{name}: cannot convert to a float matrix ({e})") from None
        if D.ndim == 1 and m is None:
            D = D.reshape(1, -1)
        if D.ndim != 2:
            raise InputDataError(f"{name}: expected a 2-D matrix, got shape {D.shape}")
        if np.isnan(D).any() or np.isinf(D).any():
            raise InputDataError(f"{name}: contains NaN or inf")
        M = sp.csc_matrix(D) if fmt == "csc" else sp.csr_matrix(D)
    if M.shape[1] != n or (m is not None and M.shape[0] != m):
        want = f"({m if m is not None else 'm'}, {n})"
        raise InputDataError(f"{name}: expected shape {want}, got {M.shape}")
    if M.nnz and not np.isfinite(M.data).all():
        raise InputDataError(f"{name}: contains NaN or inf")
    M.sum_duplicates()
    M.eliminate_zeros()
    M.sort_indices()
    return M


def _bounds(name_lo, name_hi, lo, hi, n):
    lo = _vector(name_lo, lo, n, -INF, allow_ninf=True)
    hi = _vector(name_hi, hi, n, INF, allow_pinf=True)
    return lo, hi


def _index(name, idx, size):
    a = np.atleast_1d(np.asarray(idx))
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InputDataError(f"{name}: expected integer indices, got {idx!r}")
    a = a.astype(np.int64)
    if a.size and (a.min() < -size or a.max() >= size):
        raise InputDataError(f"{name}: index out of range for size {size}")
    a = np.where(a < 0, a + size, a)
    if np.unique(a).size != a.size:
        raise InputDataError(f"{name}: duplicate indices")
    return a


#: Q is checked for PSD at model build (Gershgorin, else a dense Cholesky of Q + delta I)
#: up to this size; larger non-diagonally-dominant Q are checked only when HiGHS calls them
#: non-convex (see ``_min_eig``)
_PSD_CHECK_DENSE_N = 800


def _is_psd(M, scale):
    """True if ``M`` (symmetric, sparse) is PSD up to ``1e-9 * scale``, or too big to check."""
    n = M.shape[0]
    d = M.diagonal()
    off = np.asarray(abs(M).sum(axis=1)).ravel() - np.abs(d)
    if (d >= off).all():  # diagonally dominant with d >= 0 (Gershgorin)
        return True
    if n > _PSD_CHECK_DENSE_N:
        return True
    import scipy.linalg as sla
    try:
        with blas_threads(1):
            sla.cholesky(M.toarray() + 1e-9 * scale * np.eye(n), lower=True, check_finite=False)
        return True
    except sla.LinAlgError:
        return _min_eig(M) >= -1e-9 * scale


def _min_eig(Q):
    """Smallest eigenvalue of the symmetric sparse ``Q`` (dense for n <= 2000, else Lanczos)."""
    n = Q.shape[0]
    if n <= 2000:
        with blas_threads(1):
            return float(np.linalg.eigvalsh(Q.toarray())[0])
    import scipy.sparse.linalg as spla
    try:
        return float(spla.eigsh(Q.tocsc().astype(float), k=1, which="SA", tol=1e-8,
                                return_eigenvectors=False, maxiter=20 * n)[0])
    except spla.ArpackNoConvergence:
        return 0.0


def _hessian_lower(Q, n, name="Q"):
    """Validate a full symmetric PSD-looking ``Q`` and return its lower triangle (csc) or None."""
    if Q is None:
        return None
    M = _matrix(name, Q, n, fmt="csc", m=n)
    if M.nnz == 0:
        return None
    asym = abs(M - M.T)
    scale = max(1.0, float(abs(M).max()))
    if asym.nnz and float(asym.max()) > 1e-10 * scale:
        raise InputDataError(f"{name}: not symmetric (max |Q - Q^T| = {float(asym.max()):.3g}); "
                             "pass the full symmetric matrix of 1/2 x'Qx")
    M = ((M + M.T) * 0.5).tocsc()
    d = M.diagonal()
    if (d < -1e-12 * scale).any():
        j = int(np.argmin(d))
        raise InputDataError(f"{name}: not positive semidefinite (Q[{j},{j}] = {d[j]:.3g} < 0)")
    if not _is_psd(M, scale):
        lam = _min_eig(M)
        raise InputDataError(f"{name}: not positive semidefinite (smallest eigenvalue {lam:.3g})")
    L = sp.tril(M, format="csc")
    L.sum_duplicates()
    L.eliminate_zeros()
    L.sort_indices()
    return L


# --------------------------------------------------------------------------- model
_DEFAULT_OPTIONS = {
    "output_flag": False,
    "log_to_console": False,
    "random_seed": 0,
}

#: retries of HiGHS's active-set QP solver when it stops without a decision (it can
#: report a singular PSD Hessian as "Non-convex" (model status "Not Set") and it can
#: cycle on small degenerate QPs, ~5% of random 2..12-variable instances in testing)
_QP_RETRIES = ({"qp_regularization_value": 1e-5, "presolve": "off", "qp_allow_hot_start": False},
               {"qp_regularization_value": 1e-3, "presolve": "off", "qp_allow_hot_start": False})
#: model statuses that are a user limit, not a failure (no retry)
_LIMIT_STATUSES = ("Time limit reached", "Iteration limit reached", "Bound on objective reached",
                   "Target for objective reached", "Solution limit reached", "Interrupted by user",
                   "Memory limit reached")

#: an "optimal" QP answer is accepted when kkt_residual <= _KKT_ACCEPT * _kkt_scale
_KKT_ACCEPT = 1e-8


class HighsModel:
    r"""A persistent HiGHS LP/QP ``min 1/2 x'Qx + c'x + const s.t. row_lo <= A x <= row_hi, lb <= x <= ub``.

    Built once (``passModel`` with column-wise ``A``, ``passHessian`` with the lower
    triangle of ``Q``); modifications keep HiGHS's basis so re-solves are warm. See the
    module docstring for the dual sign convention and the statuses.

    ``options``: dict of HiGHS option names -> values (validated by HiGHS; an unknown
    name or bad value raises :class:`InvalidOptionError`). ``time_limit`` (seconds) is a
    shortcut for the HiGHS option of that name.
    """

    def __init__(self, c, A=None, row_lo=None, row_hi=None, lb=None, ub=None, Q=None,
                 const=0.0, options=None, time_limit=None):
        hp = _highspy()
        c = _vector("c", c, np.size(c), 0.0)
        n = c.shape[0]
        if A is None:
            m = 0
            for nm, v in (("row_lo", row_lo), ("row_hi", row_hi)):
                if v is not None and np.size(v) != 0:
                    raise InputDataError(f"{nm}: given without A")
            Acsc = sp.csc_matrix((0, n))
        else:
            Acsc = _matrix("A", A, n, fmt="csc")
            m = Acsc.shape[0]
        rlo, rhi = _bounds("row_lo", "row_hi", row_lo, row_hi, m)
        clo, chi = _bounds("lb", "ub", lb, ub, n)
        const = float(const)
        if not np.isfinite(const):
            raise InputDataError("const: must be finite")
        L = _hessian_lower(Q, n)

        self._hp = hp
        self._h = hp.Highs()
        self._n, self._m = n, m
        self._const = const
        self._L = L
        self._user_options = {}
        self._set_options(dict(_DEFAULT_OPTIONS))
        self._user_options = {}
        user = dict(options or {})
        if time_limit is not None:
            user["time_limit"] = float(time_limit)
        self._set_options(user)
        #: confirm "infeasible"/"unbounded" answers with a phase-1 LP (see ``_solve_lp``)
        self.verify_status = True
        self._qp_start = None  # (n, m, HighsSolution, HighsBasis) of the last verified QP solve

        lp = hp.HighsLp()
        lp.num_col_ = n
        lp.num_row_ = m
        lp.col_cost_ = c
        lp.col_lower_ = clo
        lp.col_upper_ = chi
        lp.row_lower_ = rlo
        lp.row_upper_ = rhi
        lp.a_matrix_.format_ = hp.MatrixFormat.kColwise
        lp.a_matrix_.num_col_ = n
        lp.a_matrix_.num_row_ = m
        lp.a_matrix_.start_ = Acsc.indptr.astype(np.int32)
        lp.a_matrix_.index_ = Acsc.indices.astype(np.int32)
        lp.a_matrix_.value_ = Acsc.data.astype(float)
        st = self._h.passModel(lp)
        if st == hp.HighsStatus.kError:
            raise InputDataError("HiGHS rejected the model (passModel returned kError)")
        if L is not None:
            self._pass_hessian(L)

    # ------------------------------------------------------------------ options
    def _set_options(self, opts):
        hp = self._hp
        for name, val in opts.items():
            if not isinstance(name, str):
                raise InvalidOptionError(f"HiGHS option names are strings, got {name!r}")
            st, _typ = self._h.getOptionType(name)
            if st != hp.HighsStatus.kOk:
                raise InvalidOptionError(f"unknown HiGHS option {name!r} (see HiGHS's option list)")
            if isinstance(val, (np.floating, np.integer, np.bool_)):
                val = val.item()
            if name == "threads":
                if isinstance(val, bool) or not isinstance(val, int) or val < 0:
                    raise InvalidOptionError(f"invalid value {val!r} for HiGHS option 'threads'")
                # HiGHS's task scheduler is process-global and fixed at first use: a model asking
                # for a different count than the first one fails (model status "Not Set"), and
                # only 0 ("use the existing scheduler") always works. The simplex and the QP
                # solver are serial anyway, so the request is recorded but 0 is passed.
                self._user_options[name] = val
                self._h.setOptionValue("threads", 0)
                continue
            if self._h.setOptionValue(name, val) != hp.HighsStatus.kOk:
                raise InvalidOptionError(f"invalid value {val!r} for HiGHS option {name!r}")
            self._user_options[name] = val

    def _get_option(self, name):
        out = self._h.getOptionValue(name)
        return out[1] if isinstance(out, tuple) else out

    def set_options(self, **opts):
        """Set HiGHS options by name (validated)."""
        self._set_options(opts)

    def set_time_limit(self, seconds):
        """Wall-clock limit per ``solve()`` (``None``/inf: none); reaching it gives status "error"."""
        self._set_options({"time_limit": INF if seconds is None else float(seconds)})

    # ------------------------------------------------------------------ sizes
    @property
    def num_cols(self) -> int:
        return self._n

    @property
    def num_rows(self) -> int:
        return self._m

    @property
    def const(self) -> float:
        return self._const

    @property
    def highs(self):
        """The underlying ``highspy.Highs`` (for diagnostics only; do not modify it)."""
        return self._h

    # ------------------------------------------------------------------ modifications
    def _pass_hessian(self, L):
        hp = self._hp
        hs = hp.HighsHessian()
        hs.dim_ = self._n
        hs.format_ = hp.HessianFormat.kTriangular
        if L is None:
            hs.start_ = np.zeros(self._n + 1, dtype=np.int32)
            hs.index_ = np.zeros(0, dtype=np.int32)
            hs.value_ = np.zeros(0)
        else:
            hs.start_ = L.indptr.astype(np.int32)
            hs.index_ = L.indices.astype(np.int32)
            hs.value_ = L.data.astype(float)
        if self._h.passHessian(hs) == hp.HighsStatus.kError:
            raise InputDataError("Q: HiGHS rejected the Hessian")
        self._L = L

    def set_hessian(self, Q):
        """Replace ``Q`` (full symmetric PSD; ``None`` or all-zero makes the model an LP)."""
        self._pass_hessian(_hessian_lower(Q, self._n))

    def set_const(self, const):
        const = float(const)
        if not np.isfinite(const):
            raise InputDataError("const: must be finite")
        self._const = const

    def set_cost(self, c, idx=None):
        """Set the linear cost: all of it (``idx=None``) or ``c[k]`` for column ``idx[k]``."""
        if idx is None:
            idx = np.arange(self._n)
            c = _vector("c", c, self._n, 0.0)
        else:
            idx = _index("idx", idx, self._n)
            c = _vector("c", c, idx.size, 0.0)
        if idx.size == 0:
            return
        o = np.argsort(idx, kind="stable")
        self._check(self._h.changeColsCost(idx.size, idx[o].astype(np.int32), c[o]), "changeColsCost")

    def set_col_bounds(self, idx, lb, ub):
        """Set ``lb <= x[idx] <= ub`` (scalars broadcast; ``None`` means -inf / +inf)."""
        self._change_bounds(idx, lb, ub, self._n, ("lb", "ub"), "changeColsBounds")

    def set_row_bounds(self, idx, lo, hi):
        """Set ``lo <= (A x)[idx] <= hi`` (scalars broadcast; ``None`` means -inf / +inf)."""
        self._change_bounds(idx, lo, hi, self._m, ("row_lo", "row_hi"), "changeRowsBounds")

    def _change_bounds(self, idx, lo, hi, size, names, method):
        """Validated, index-sorted call of HiGHS's ``changeColsBounds`` / ``changeRowsBounds``."""
        idx = _index("idx", idx, size)
        lo, hi = _bounds(names[0], names[1], lo, hi, idx.size)
        if idx.size == 0:
            return
        o = np.argsort(idx, kind="stable")
        self._check(getattr(self._h, method)(idx.size, idx[o].astype(np.int32), lo[o], hi[o]), method)

    def set_coefficient(self, row, col, val):
        """Set ``A[row, col] = val`` (0 removes the entry)."""
        row = int(_index("row", row, self._m)[0])
        col = int(_index("col", col, self._n)[0])
        val = float(val)
        if not np.isfinite(val):
            raise InputDataError("val: must be finite")
        self._check(self._h.changeCoeff(row, col, val), "changeCoeff")

    def add_rows(self, A_new, lo=None, hi=None) -> np.ndarray:
        """Append rows ``lo <= A_new x <= hi``; return their (positional) row indices."""
        R = _matrix("A_new", A_new, self._n, fmt="csr")
        k = R.shape[0]
        lo, hi = _bounds("lo", "hi", lo, hi, k)
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        self._check(self._h.addRows(k, lo, hi, R.nnz, R.indptr[:-1].astype(np.int32),
                                    R.indices.astype(np.int32), R.data.astype(float)), "addRows")
        out = np.arange(self._m, self._m + k, dtype=np.int64)
        self._m += k
        return out

    def delete_rows(self, idx) -> np.ndarray:
        """Delete rows ``idx``; later rows shift down. Returns ``new_index[old] `` (-1 if deleted)."""
        idx = np.sort(_index("idx", idx, self._m))
        keep = np.ones(self._m, dtype=bool)
        keep[idx] = False
        newpos = np.full(self._m, -1, dtype=np.int64)
        newpos[keep] = np.arange(int(keep.sum()))
        if idx.size:
            self._check(self._h.deleteRows(idx.size, idx.astype(np.int32)), "deleteRows")
            self._m -= idx.size
        return newpos

    def add_cols(self, c, lb=None, ub=None, A_cols=None) -> np.ndarray:
        """Append columns with costs ``c``, bounds and constraint columns ``A_cols`` (m x k).

        Returns the new column indices. With a Hessian present the new columns get zero
        curvature (Q is padded with zeros).
        """
        k = int(np.size(c))
        c = _vector("c", c, k, 0.0)
        lo, hi = _bounds("lb", "ub", lb, ub, k)
        if A_cols is None:
            C = sp.csc_matrix((self._m, k))
        else:
            C = _matrix("A_cols", A_cols, k, fmt="csc", m=self._m)
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        self._check(self._h.addCols(k, c, lo, hi, C.nnz, C.indptr[:-1].astype(np.int32),
                                    C.indices.astype(np.int32), C.data.astype(float)), "addCols")
        out = np.arange(self._n, self._n + k, dtype=np.int64)
        self._n += k
        if self._L is not None:
            L = sp.csc_matrix((self._L.data, self._L.indices, self._L.indptr), shape=(self._n, self._n - k))
            L = sp.hstack([L, sp.csc_matrix((self._n, k))], format="csc")
            self._pass_hessian(L)
        return out

    def _check(self, st, what):
        if st == self._hp.HighsStatus.kError:
            raise InputDataError(f"HiGHS {what} returned kError (bad indices or data)")

    # ------------------------------------------------------------------ data access
    def data(self):
        """Current model as ``dict(c, A (csr), row_lo, row_hi, lb, ub, Q (csr or None), const)``."""
        lp = self._h.getLp()
        n, m = self._n, self._m
        am = lp.a_matrix_
        start = np.asarray(am.start_, dtype=np.int64)
        index = np.asarray(am.index_, dtype=np.int64)
        value = np.asarray(am.value_, dtype=float)
        if am.format_ == self._hp.MatrixFormat.kColwise:
            A = sp.csc_matrix((value, index, start), shape=(m, n)).tocsr()
        else:
            A = sp.csr_matrix((value, index, start), shape=(m, n))
        Q = None
        if self._L is not None:
            Q = (self._L + sp.tril(self._L, -1).T).tocsr()
        return dict(c=np.array(lp.col_cost_, dtype=float), A=A,
                    row_lo=np.array(lp.row_lower_, dtype=float), row_hi=np.array(lp.row_upper_, dtype=float),
                    lb=np.array(lp.col_lower_, dtype=float), ub=np.array(lp.col_upper_, dtype=float),
                    Q=Q, const=self._const)

    def kkt_residual(self, res, parts=False):
        """:func:`kkt_residual` of ``res`` against this model's current data."""
        d = self.data()
        return kkt_residual(res, d["c"], d["A"], d["row_lo"], d["row_hi"], d["lb"], d["ub"], d["Q"],
                            parts=parts)

    # ------------------------------------------------------------------ solve
    def solve(self) -> LPResult:
        """Solve (warm if a basis is held) and return an :class:`LPResult`; never raises for
        infeasible/unbounded/limit outcomes."""
        if self._L is not None:
            return self._solve_qp()
        return self._solve_lp()

    def _solve_lp(self):
        """LP solve; "infeasible"/"unbounded" answers are confirmed by a phase-1 LP.

        HiGHS 1.15's presolve calls some tiny degenerate feasible LPs "infeasible" (seen
        in tests/test_highs.py's random integer LPs, e.g. an unbounded LP with a free
        column); when phase-1 contradicts the answer the model is re-solved with presolve
        off (simplex only), which was correct in every case tested.
        """
        res = self._solve_once()
        if res.status == "error" and res.model_status not in _LIMIT_STATUSES:
            # e.g. "Unknown" after a warm start from a modified basis: retry cold, then
            # without presolve
            first = res.model_status
            for pres in (self._get_option("presolve"), "off"):
                res2 = self._solve_cold_with("presolve", pres)
                res2.iterations += res.iterations
                res = res2
                if res.status != "error" or res.model_status in _LIMIT_STATUSES:
                    break
            res.message += f"; HiGHS first stopped with {first!r}, re-solved cold"
            if res.status == "error" and res.model_status not in _LIMIT_STATUSES:
                res = self._lp_fallbacks(res)
        if not self.verify_status or res.status not in ("infeasible", "unbounded") \
                or res.model_status == "Primal infeasible or unbounded":
            return res
        if self._h.getModelPresolveStatus() == self._hp.HighsPresolveStatus.kNotPresolved:
            return res  # the simplex decided (warm solves skip presolve): it has a ray
        feas, it = self._phase1()
        res.iterations += it
        if feas is None or (res.status == "infeasible") == (feas is False):
            return res
        first = res.model_status
        res = self._solve_cold_with("presolve", "off")
        res.iterations += it
        res.message += f"; HiGHS first said {first!r}, contradicted by phase-1, re-solved without presolve"
        if (res.status == "infeasible" and feas) or (res.status == "unbounded" and not feas):
            res.status = "error"
        return res

    def _solve_cold_with(self, name, value):
        """One cold solve with HiGHS option ``name`` temporarily set to ``value``."""
        saved = self._get_option(name)
        try:
            self._h.setOptionValue(name, value)
            self._h.clearSolver()
            return self._solve_once()
        finally:
            self._h.setOptionValue(name, saved)

    def _lp_fallbacks(self, res):
        """Last resorts when the simplex keeps stopping with "Unknown" (seen on warm-started, highly
        degenerate GOP relaxed duals): HiGHS's interior point with crossover, then Clarabel."""
        first = res.message
        res2 = self._solve_cold_with("solver", "ipm")
        self._h.clearSolver()  # the next warm solve must not start from the IPM's state
        res2.iterations += res.iterations
        if res2.status != "error" or res2.model_status in _LIMIT_STATUSES:
            res2.message += f"; after: {first}; solved by HiGHS IPM"
            return res2
        cl = _clarabel_solve(self.data())
        if cl is None:
            return res2
        cl.message += f"; after: {first}; HiGHS IPM: {res2.model_status}; solved by Clarabel"
        return cl

    def _solve_qp(self):
        """Convex QP, verified (see "QP reliability" in the module docstring).

        Attempts: HiGHS's active-set solver with its default regularisation, then with
        larger ones, then Clarabel; every "optimal" answer is polished and accepted only
        if its KKT residual is <= ``_KKT_ACCEPT * scale``; every "infeasible" answer is
        confirmed by a phase-1 LP and every "unbounded" one by a recession-direction LP.
        """
        if "qp_iteration_limit" not in self._user_options:
            # cycling shows up as hitting this limit; legitimate runs need O(n + m) iterations
            self._h.setOptionValue("qp_iteration_limit", int(20 * (self._n + self._m) + 1000))
        hot = self._user_options.get("qp_allow_hot_start", True)
        self._h.setOptionValue("qp_allow_hot_start", bool(hot))
        if hot and self._qp_start is not None and self._qp_start[:2] == (self._n, self._m):
            # warm start the active-set solver from the last verified solve (HiGHS drops it
            # on model changes); a wrong answer from it is caught by the checks below
            self._h.setSolution(self._qp_start[2])
            self._h.setBasis(self._qp_start[3])
        d = self.data()
        tries, iters, best, psd_checked = [], 0, None, False
        saved = {k: self._get_option(k) for k in ("qp_regularization_value", "presolve", "time_limit",
                                                  "qp_allow_hot_start")}
        t_end = time.perf_counter() + saved["time_limit"]  # the limit covers all attempts
        try:
            for extra in ({},) + _QP_RETRIES + ("clarabel",):
                remaining = t_end - time.perf_counter()
                if remaining <= 0:
                    if best is None:
                        best = LPResult("error", message="time limit reached", model_status="Time limit reached")
                    break
                if extra == "clarabel":
                    res = _clarabel_solve(d, remaining)
                    if res is None:
                        break
                    tries.append("clarabel: " + res.model_status)
                else:
                    for k, v in extra.items():
                        self._h.setOptionValue(k, v)
                    if extra:
                        self._h.clearSolver()  # retries start cold
                    if np.isfinite(remaining):
                        self._h.setOptionValue("time_limit", float(remaining))
                    res = self._solve_once()
                    tries.append(res.model_status)
                iters += res.iterations
                if res.model_status == "Time limit reached":
                    if best is None or best.status != "optimal":
                        best = res
                    break
                if res.model_status == "Not Set" and self._n > _PSD_CHECK_DENSE_N and not psd_checked:
                    # HiGHS calls Q non-convex: it is sometimes wrong for singular PSD Q
                    psd_checked = True
                    lam = _min_eig(d["Q"])
                    if lam < -1e-9 * max(1.0, float(abs(d["Q"]).max())):
                        best = LPResult("error", message=f"Q is not positive semidefinite (smallest "
                                        f"eigenvalue {lam:.3g})", model_status="Non-convex")
                        break
                if res.status == "optimal":
                    if extra != "clarabel":
                        start = (self._n, self._m, self._h.getSolution(), self._h.getBasis())
                    self._polish(res, d)
                    kkt = res.info["kkt"]
                    if best is None or best.status != "optimal" or kkt < best.info["kkt"]:
                        best = res
                    if kkt <= _KKT_ACCEPT * _kkt_scale(res, d):
                        self._qp_start = start if extra != "clarabel" else None
                        break
                elif res.status == "infeasible":
                    feas, it = self._phase1()
                    iters += it
                    if feas is False:
                        best = res
                        break
                elif res.status == "unbounded":
                    unb, it = self._recession_check(d)
                    iters += it
                    if unb:
                        best = res
                        break
                elif best is None:
                    best = res
        finally:
            for k, v in saved.items():
                self._h.setOptionValue(k, v)
        if best is None:
            best = LPResult("error", message="no QP attempt produced a result")
        unverified = best.status == "error" or (
            best.status == "optimal" and best.info["kkt"] > _KKT_ACCEPT * _kkt_scale(best, d))
        if unverified and best.model_status != "Time limit reached":
            # HiGHS calls some unbounded QPs "optimal" (KKT residual O(1)) and Clarabel then
            # stalls: look for a certificate of unboundedness before giving up
            unb, it = self._recession_check(d)
            iters += it
            tries.append("recession check: " + ("unbounded" if unb else "no direction"))
            if unb:
                best = LPResult("unbounded", message="no attempt verified optimality; an LP found a "
                                "recession direction d (Q d = 0, c'd < 0)", model_status="Unbounded")
        if best.status == "optimal" and best.info["kkt"] > _KKT_ACCEPT * _kkt_scale(best, d):
            best.info["unverified"] = True
            best.message += f"; KKT residual {best.info['kkt']:.3g} above the acceptance threshold"
            if best.info["kkt"] > 1e3 * _KKT_ACCEPT * _kkt_scale(best, d):
                best.status = "error"
        best.iterations = iters
        best.info["attempts"] = tries
        if len(tries) > 1:
            best.info["fallback"] = tries[-1]
        return best

    def _recession_check(self, d):
        """Certify unboundedness of the convex QP: phase-1 feasible and
        ``min c'd s.t. Q d = 0, d in the recession cone of the constraints, -1 <= d <= 1 < 0``."""
        feas, it = self._phase1()
        if feas is not True:
            return False, it
        A, Q, c = d["A"], d["Q"], d["c"]
        n = c.size
        rlo = np.where(np.isfinite(d["row_lo"]), 0.0, -INF)
        rhi = np.where(np.isfinite(d["row_hi"]), 0.0, INF)
        clo = np.where(np.isfinite(d["lb"]), 0.0, -1.0)
        chi = np.where(np.isfinite(d["ub"]), 0.0, 1.0)
        M = sp.vstack([A, Q], format="csr") if Q is not None else A
        lo = np.concatenate([rlo, np.zeros(n)]) if Q is not None else rlo
        hi = np.concatenate([rhi, np.zeros(n)]) if Q is not None else rhi
        r = HighsModel(c, M, lo, hi, clo, chi, options={"presolve": "off"}).solve()
        thr = -1e-9 * max(1.0, float(np.abs(c).max()) if n else 1.0)
        return bool(r.status == "optimal" and r.objective < thr), it + r.iterations

    def _solve_once(self):
        hp = self._hp
        h = self._h
        MS = hp.HighsModelStatus
        with _native_stdout_silenced():
            h.run()
        ms = h.getModelStatus()
        iters = self._iterations()
        msg = h.modelStatusToString(ms)
        if ms == MS.kModelEmpty:
            return self._empty_result(msg)
        if ms == MS.kOptimal:
            return self._collect("optimal", iters, msg, ms)
        if ms == MS.kInfeasible:
            return LPResult("infeasible", iterations=iters, message=msg, model_status=msg)
        if ms == MS.kUnbounded:
            return LPResult("unbounded", iterations=iters, message=msg, model_status=msg)
        if ms == MS.kUnboundedOrInfeasible:
            feas, it2 = self._phase1()
            if feas is True:
                return LPResult("unbounded", iterations=iters + it2, model_status=msg,
                                message=msg + "; phase-1 found a feasible point -> unbounded")
            if feas is False:
                return LPResult("infeasible", iterations=iters + it2, model_status=msg,
                                message=msg + "; phase-1 proved infeasibility")
            return LPResult("error", iterations=iters + it2, model_status=msg,
                            message=msg + "; phase-1 could not decide feasibility")
        res = self._collect("error", iters, msg, ms)
        res.message = f"HiGHS stopped: {msg}"
        return res

    def _iterations(self):
        info = self._h.getInfo()
        tot = 0
        for k in ("simplex_iteration_count", "ipm_iteration_count", "crossover_iteration_count",
                  "qp_iteration_count", "pdlp_iteration_count"):
            v = getattr(info, k, 0)
            tot += max(0, int(v))
        return tot

    def _collect(self, status, iters, msg, ms):
        sol = self._h.getSolution()
        if not sol.value_valid:
            return LPResult(status, iterations=iters, message=msg, model_status=msg)
        x = np.array(sol.col_value, dtype=float)
        act = np.array(sol.row_value, dtype=float)
        y = np.array(sol.row_dual, dtype=float) if sol.dual_valid else None
        z = np.array(sol.col_dual, dtype=float) if sol.dual_valid else None
        obj = float(self._h.getInfo().objective_function_value) + self._const
        finite = all(v is None or np.isfinite(v).all() for v in (x, act, y, z)) and np.isfinite(obj)
        if status == "optimal" and not finite:
            # seen from HiGHS 1.15's QP solver: "Optimal" with NaN in x
            return LPResult("error", x=x, objective=obj, row_duals=y, col_duals=z, row_activity=act,
                            iterations=iters, message=f"HiGHS said {msg!r} but returned non-finite values",
                            model_status="Non-finite solution")
        return LPResult(status, x=x, objective=obj, row_duals=y, col_duals=z, row_activity=act,
                        iterations=iters, message=msg, model_status=msg)

    def _empty_result(self, msg):
        # no columns: the rows are 0 <= ... constraints on the empty sum
        lp = self._h.getLp()
        rlo = np.array(lp.row_lower_, dtype=float)
        rhi = np.array(lp.row_upper_, dtype=float)
        if (rlo > 0).any() or (rhi < 0).any():
            return LPResult("infeasible", iterations=0, message="empty model with a row excluding 0",
                            model_status=msg)
        m = rlo.size
        return LPResult("optimal", x=np.zeros(0), objective=self._const, row_duals=np.zeros(m),
                        col_duals=np.zeros(0), row_activity=np.zeros(m), iterations=0,
                        message=msg, model_status=msg)

    def _phase1(self):
        """Decide feasibility of the current constraints: (True/False/None, iterations)."""
        hp = self._hp
        lp = self._h.getLp()
        lp.col_cost_ = np.zeros(self._n)
        lp.offset_ = 0.0
        g = hp.Highs()
        for k, v in _DEFAULT_OPTIONS.items():
            g.setOptionValue(k, v)
        g.setOptionValue("presolve", "off")
        g.setOptionValue("solver", "simplex")
        tl = self._get_option("time_limit")
        g.setOptionValue("time_limit", tl)
        g.passModel(lp)
        with _native_stdout_silenced():
            g.run()
        ms = g.getModelStatus()
        info = g.getInfo()
        it = max(0, int(info.simplex_iteration_count))
        if ms == hp.HighsModelStatus.kOptimal:
            return True, it
        if ms == hp.HighsModelStatus.kInfeasible:
            return False, it
        return None, it

    # ------------------------------------------------------------------ QP polish
    def _polish(self, res, d=None):
        """Re-solve the KKT system on the active set (see "QP accuracy"); keep it if better.
        Stores the final KKT residual in ``res.info["kkt"]``."""
        if res.x is None or res.row_duals is None:
            return
        d = self.data() if d is None else d
        args = (d["c"], d["A"], d["row_lo"], d["row_hi"], d["lb"], d["ub"], d["Q"])
        best = kkt_residual(res, *args)
        if not np.isfinite(best):
            best = INF
        res.info["kkt_before_polish"] = best
        res.info["polished"] = False
        for tol in (1e-9, 1e-7, 1e-5, 1e-3):
            if best <= 1e-13 * _kkt_scale(res, d):
                break
            try:
                cands = _polish_kkt(res, d, tol)
            except (np.linalg.LinAlgError, ValueError, RuntimeError):
                continue
            for cand in cands:
                r = kkt_residual(cand, *args)
                if r < best:
                    best = r
                    res.x, res.row_duals, res.col_duals = cand.x, cand.row_duals, cand.col_duals
                    res.row_activity, res.objective = cand.row_activity, cand.objective
                    res.info["polished"] = True
        res.info["kkt"] = best


def _kkt_scale(res, d):
    """Scale of the KKT residual: 1 + the largest term of the stationarity equation."""
    Q, A, c = d["Q"], d["A"], d["c"]
    s = 1.0 + float(np.abs(c).max(initial=0.0))
    if res.x is not None and Q is not None:
        s = max(s, 1.0 + float(np.abs(Q @ res.x).max(initial=0.0)))
    if res.row_duals is not None and A.shape[0]:
        s = max(s, 1.0 + float(np.abs(A.T @ res.row_duals).max(initial=0.0)))
    return s


def _active_sets(res, d, tol):
    """Active rows/columns as (index, bound value, side): at a bound within ``tol``
    (relative) with a dual of the right sign, or with a clearly nonzero dual. ``side`` is
    +1 for a lower bound, -1 for an upper bound, 0 for an equality (lo == hi)."""
    x, act, y, z = res.x, res.row_activity, res.row_duals, res.col_duals
    rlo, rhi, lb, ub = d["row_lo"], d["row_hi"], d["lb"], d["ub"]

    def pick(v, lo, hi, dual):
        with np.errstate(invalid="ignore"):
            near_lo = np.isfinite(lo) & (np.abs(v - lo) <= tol * np.maximum(1.0, np.abs(lo)))
            near_hi = np.isfinite(hi) & (np.abs(v - hi) <= tol * np.maximum(1.0, np.abs(hi)))
        big = 1e3 * tol
        at_lo = np.isfinite(lo) & ((near_lo & (dual >= -tol)) | (dual > big))
        at_hi = np.isfinite(hi) & ~at_lo & ((near_hi & (dual <= tol)) | (dual < -big))
        idx = np.flatnonzero(at_lo | at_hi)
        val = np.where(at_lo, lo, hi)[idx]
        side = np.where(at_lo, 1, -1)[idx]
        side[lo[idx] == hi[idx]] = 0
        return idx, val, side

    return pick(act, rlo, rhi, y) + pick(x, lb, ub, z)


def _solve_kkt(K, rhs):
    """Solve the (possibly singular but consistent) KKT system ``K s = rhs``: sparse LU,
    falling back to least squares (dense SVD when small, LSMR otherwise) when singular."""
    import scipy.sparse.linalg as spla
    k = rhs.size
    tol = 1e-10 * max(1.0, float(np.abs(rhs).max(initial=0.0)))
    try:
        with np.errstate(all="ignore"):
            sol = spla.splu(K.tocsc()).solve(rhs)
        if np.isfinite(sol).all() and float(np.abs(K @ sol - rhs).max(initial=0.0)) <= tol:
            return sol
    except RuntimeError:  # exactly singular
        pass
    if k <= 800:
        with blas_threads(1):
            sol, *_ = np.linalg.lstsq(K.toarray(), rhs, rcond=None)
        return sol
    return spla.lsmr(K, rhs, atol=1e-15, btol=1e-15, maxiter=20 * k)[0]


def _polish_kkt(res, d, tol, max_iter=12):
    """KKT points on the active set read off ``res`` and on shrunken sets.

    Solves  [Q_FF  -A_WF'; A_WF  0] [x_F; y_W] = [-c_F - Q_FC l_C; b_W - A_WC l_C]
    where C are the columns fixed at an active bound l_C, F the others and W the active
    rows; then z = Q x + c - A'y on C, 0 on F. Weakly active constraints (zero dual at the
    HiGHS point) can get a multiplier of the wrong sign; they are dropped from the set, and
    constraints the new point violates are added, as in a primal-dual active-set method
    (at most ``max_iter`` systems, stopping on a repeated set). Returns the candidates.
    """
    ri, rv, rs, ci, cv, cs = _active_sets(res, d, tol)
    rlo, rhi, lb, ub = d["row_lo"], d["row_hi"], d["lb"], d["ub"]
    out, seen = [], set()
    for _ in range(max_iter):
        key = (ri.tobytes(), rs.tobytes(), ci.tobytes(), cs.tobytes())
        if key in seen:  # the set update cycles
            break
        seen.add(key)
        cand = _kkt_point(res.x, res.row_duals, d, ri, rv, ci, cv)
        if cand is None:
            break
        out.append(cand)
        sc = _kkt_scale(cand, d)
        eps = 1e-12 * sc
        yw, zw = cand.row_duals[ri], cand.col_duals[ci]
        bad_r = ((rs > 0) & (yw < -eps)) | ((rs < 0) & (yw > eps))
        bad_c = ((cs > 0) & (zw < -eps)) | ((cs < 0) & (zw > eps))
        if bad_r.any() or bad_c.any():
            # weakly active constraints with a wrong-sign multiplier: release them
            ri, rv, rs = ri[~bad_r], rv[~bad_r], rs[~bad_r]
            ci, cv, cs = ci[~bad_c], cv[~bad_c], cs[~bad_c]
            continue
        # multipliers fine: fix the constraints the new point violates at the violated bound
        ptol = 1e-9 * sc
        add = False
        for v, lo, hi, which in ((cand.row_activity, rlo, rhi, "r"), (cand.x, lb, ub, "c")):
            idx_in = ri if which == "r" else ci
            with np.errstate(invalid="ignore"):
                low = np.flatnonzero(v < lo - ptol)
                high = np.flatnonzero(v > hi + ptol)
            low = np.setdiff1d(low, idx_in)
            high = np.setdiff1d(high, idx_in)
            if low.size + high.size == 0:
                continue
            add = True
            new_i = np.concatenate([low, high])
            new_v = np.concatenate([lo[low], hi[high]])
            new_s = np.concatenate([np.ones(low.size, int), -np.ones(high.size, int)])
            o = np.argsort(np.concatenate([idx_in, new_i]), kind="stable")
            if which == "r":
                ri, rv, rs = (np.concatenate([ri, new_i])[o], np.concatenate([rv, new_v])[o],
                              np.concatenate([rs, new_s])[o])
            else:
                ci, cv, cs = (np.concatenate([ci, new_i])[o], np.concatenate([cv, new_v])[o],
                              np.concatenate([cs, new_s])[o])
        if not add:
            break
    return out


def _kkt_point(x0, y0, d, ri, rv, ci, cv):
    A, Q, c = d["A"], d["Q"], d["c"]
    n = c.size
    free = np.ones(n, dtype=bool)
    free[ci] = False
    fi = np.flatnonzero(free)
    x = x0.copy()
    x[ci] = cv
    Qc = Q.tocsc()
    Qff = Qc[fi][:, fi]
    AW = A[ri]
    AWF = AW[:, fi]
    rhs_top = -(c[fi] + (Qc[fi][:, ci] @ cv if ci.size else 0.0))
    rhs_bot = rv - (AW[:, ci] @ cv if (ri.size and ci.size) else 0.0)
    K = sp.bmat([[Qff, -AWF.T], [AWF, None]], format="csc") if ri.size else sp.csc_matrix(Qff)
    rhs = np.concatenate([rhs_top, rhs_bot])
    # solve for the correction to the solver's (x, y): when the system is singular (Q_FF
    # singular, or degenerate active rows) the minimum-norm correction keeps x near the
    # solver's point instead of jumping along the null space through inactive constraints,
    # and keeps y near the solver's sign-feasible multipliers
    base = np.concatenate([x[fi], y0[ri]])
    sol = base + _solve_kkt(K, rhs - K @ base) if base.size else base  # empty: every column fixed
    if not np.isfinite(sol).all():
        return None
    x[fi] = sol[:fi.size]
    y = np.zeros(A.shape[0])
    y[ri] = sol[fi.size:]
    g = Q @ x + c - A.T @ y
    z = np.zeros(n)
    z[ci] = g[ci]
    obj = 0.5 * float(x @ (Q @ x)) + float(c @ x) + d["const"]
    return LPResult("optimal", x=x, objective=obj, row_duals=y, col_duals=z, row_activity=A @ x)


def _clarabel_solve(d, time_limit=INF):
    """Fallback convex QP solve with Clarabel (interior point) in the layer's sign convention.

    Clarabel solves ``min 1/2 x'Px + q'x s.t. G x + s = h, s in K`` with stationarity
    ``P x + q + G' w = 0`` and ``w in K*``; rows ``a x <= hi`` become ``a x + s = hi``
    (y = -w), rows ``a x >= lo`` become ``-a x + s = -lo`` (y = +w), equalities go to the
    zero cone (y = -w). Returns None when clarabel is not importable."""
    try:
        import clarabel
    except ImportError:
        return None
    A, Q, c = d["A"], d["Q"], d["c"]
    n = c.size
    I = sp.identity(n, format="csr")

    def add(M, lo, hi, target):
        """Row blocks (matrix, rhs, target, index, sign y = sign * w, cone kind) of lo <= M x <= hi."""
        eq = np.isfinite(lo) & np.isfinite(hi) & (lo == hi)
        up = np.isfinite(hi) & ~eq
        dn = np.isfinite(lo) & ~eq
        return [(M[np.flatnonzero(eq)], hi[eq], target, np.flatnonzero(eq), -1.0, "eq"),
                (M[np.flatnonzero(up)], hi[up], target, np.flatnonzero(up), -1.0, "ineq"),
                (-M[np.flatnonzero(dn)], -lo[dn], target, np.flatnonzero(dn), 1.0, "ineq")]
    parts = add(A.tocsr(), d["row_lo"], d["row_hi"], "row") + add(I, d["lb"], d["ub"], "col")
    eqs = [p for p in parts if p[5] == "eq"]
    ins = [p for p in parts if p[5] == "ineq"]
    ordered = eqs + ins
    G = sp.vstack([p[0] for p in ordered] + [sp.csr_matrix((0, n))], format="csc")
    h = np.concatenate([p[1] for p in ordered] + [np.zeros(0)])
    neq = sum(p[0].shape[0] for p in eqs)
    nin = G.shape[0] - neq
    cones = []
    if neq:
        cones.append(clarabel.ZeroConeT(neq))
    if nin:
        cones.append(clarabel.NonnegativeConeT(nin))
    P = sp.triu(Q if Q is not None else sp.csc_matrix((n, n)), format="csc")
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.tol_gap_abs = st.tol_gap_rel = st.tol_feas = 1e-10
    st.tol_ktratio = 1e-8
    st.max_iter = 500
    if np.isfinite(time_limit):
        st.time_limit = float(time_limit)
    sol = clarabel.DefaultSolver(P, c, G, h, cones, st).solve()
    status = str(sol.status)
    if "PrimalInfeasible" in status:
        return LPResult("infeasible", message=f"clarabel: {status}", model_status=status)
    if "DualInfeasible" in status:
        return LPResult("unbounded", message=f"clarabel: {status}", model_status=status)
    if "Solved" not in status:
        ms = "Time limit reached" if "MaxTime" in status else status
        return LPResult("error", message=f"clarabel: {status}", model_status=ms)
    x = np.array(sol.x, dtype=float)
    w = np.array(sol.z, dtype=float)
    y = np.zeros(A.shape[0])
    z = np.zeros(n)
    pos = 0
    for M, _h, target, idx, sgn, _k in ordered:
        k = M.shape[0]
        (y if target == "row" else z)[idx] += sgn * w[pos:pos + k]
        pos += k
    obj = 0.5 * float(x @ (Q @ x)) + float(c @ x) + d["const"] if Q is not None else float(c @ x) + d["const"]
    return LPResult("optimal", x=x, objective=obj, row_duals=y, col_duals=z, row_activity=A @ x,
                    message=f"clarabel: {status}", model_status=status)


# --------------------------------------------------------------------------- functions
def solve_lp(c, A=None, row_lo=None, row_hi=None, lb=None, ub=None, Q=None, const=0.0,
             options=None, time_limit=None) -> LPResult:
    """One-shot ``min 1/2 x'Qx + c'x + const s.t. row_lo <= A x <= row_hi, lb <= x <= ub``."""
    return HighsModel(c, A, row_lo, row_hi, lb, ub, Q=Q, const=const, options=options,
                      time_limit=time_limit).solve()


def solve_qp(Q, c, A=None, row_lo=None, row_hi=None, lb=None, ub=None, const=0.0,
             options=None, time_limit=None) -> LPResult:
    """One-shot convex QP; same as :func:`solve_lp` with ``Q`` first."""
    return HighsModel(c, A, row_lo, row_hi, lb, ub, Q=Q, const=const, options=options,
                      time_limit=time_limit).solve()


def kkt_residual(res, c, A=None, row_lo=None, row_hi=None, lb=None, ub=None, Q=None, *, parts=False):
    """Max KKT violation of ``res`` for the problem data (absolute, infinity norm).

    Components (sign convention of the module docstring):
    ``stationarity = ||Q x + c - A'y - z||_inf``;
    ``primal = max violation of row_lo <= A x <= row_hi and lb <= x <= ub`` (A x recomputed from x);
    ``dual_sign = max of y_i > 0 on rows without a finite lower bound, y_i < 0 on rows without
    a finite upper bound`` (same for z and the columns);
    ``complementarity = max of y_i^+ (a_i x - lo_i)`` and ``y_i^- (hi_i - a_i x)`` (finite bounds).
    Returns the max of these, or the dict of components if ``parts``.
    """
    if res.x is None or res.row_duals is None or res.col_duals is None:
        raise ValueError(f"kkt_residual needs x and duals (status {res.status!r})")
    x = np.asarray(res.x, dtype=float)
    n = x.size
    c = np.asarray(c, dtype=float).reshape(-1)
    A = sp.csr_matrix((0, n)) if A is None else sp.csr_matrix(A)
    m = A.shape[0]
    rlo = np.full(m, -INF) if row_lo is None else np.broadcast_to(np.asarray(row_lo, float), (m,))
    rhi = np.full(m, INF) if row_hi is None else np.broadcast_to(np.asarray(row_hi, float), (m,))
    lo = np.full(n, -INF) if lb is None else np.broadcast_to(np.asarray(lb, float), (n,))
    hi = np.full(n, INF) if ub is None else np.broadcast_to(np.asarray(ub, float), (n,))
    y = np.asarray(res.row_duals, dtype=float)
    z = np.asarray(res.col_duals, dtype=float)
    ax = A @ x
    g = c - A.T @ y - z
    if Q is not None:
        g = g + (sp.csr_matrix(Q) @ x if sp.issparse(Q) else np.asarray(Q, float) @ x)

    def viol(v, l, h):
        with np.errstate(invalid="ignore"):
            return np.maximum(0.0, np.maximum(l - v, v - h)) if v.size else np.zeros(0)

    def sign(d, l, h):
        return np.where(np.isfinite(l), 0.0, np.maximum(d, 0.0)) + np.where(np.isfinite(h), 0.0, np.maximum(-d, 0.0))

    def comp(d, v, l, h):
        with np.errstate(invalid="ignore"):
            a = np.where(np.isfinite(l) & (d > 0), d * np.abs(v - l), 0.0)
            b = np.where(np.isfinite(h) & (d < 0), -d * np.abs(h - v), 0.0)
        return np.maximum(a, b)

    def mx(a):
        return float(np.max(a)) if np.size(a) else 0.0

    out = dict(
        stationarity=mx(np.abs(g)),
        primal=max(mx(viol(ax, rlo, rhi)), mx(viol(x, lo, hi))),
        dual_sign=max(mx(sign(y, rlo, rhi)), mx(sign(z, lo, hi))),
        complementarity=max(mx(comp(y, ax, rlo, rhi)), mx(comp(z, x, lo, hi))),
    )
    return out if parts else max(out.values())
