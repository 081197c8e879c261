"""The persistent HiGHS model: build once, modify in place, re-solve warm. The LP and QP
solve paths are the mixins of :mod:`.lp_path` and :mod:`.qp_ladder`.
"""
from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from ..errors import InputDataError, InvalidOptionError
from .errors import INF
from .process import _highspy, _native_stdout_silenced, new_highs
from .result import LPResult
from .checks import _bounds, _index, _matrix, _vector
from .psd import _hessian_lower
from .settings import _DEFAULT_OPTIONS
from .certificate import kkt_residual
from .lp_path import LPSolving
from .qp_ladder import QPSolving


class HighsModel(LPSolving, QPSolving):
    r"""A persistent HiGHS LP/QP ``min 1/2 x'Qx + c'x + const s.t. row_lo <= A x <= row_hi, lb <= x <= ub``.

    Built once (``passModel`` with column-wise ``A``, ``passHessian`` with the lower
    triangle of ``Q``); modifications keep HiGHS's basis so re-solves are warm. See the
    docstring of :mod:`varopt.lpqp` for the dual sign convention and the statuses.

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
        self._h = new_highs(hp)
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

    def limit_simplex_iterations(self, per_entry=50, floor=20_000):
        """A simplex iteration limit of ``max(floor, per_entry (rows + cols))`` per ``solve()``: far above what warm
        re-solves take (100-700 on MINLPLib ex8_4_1's 583 x 53 tree LPs), below the 200,000-700,000 iterations
        HiGHS stalled there for the whole time left (docs/gop.md §13k). Reaching it gives status "error"."""
        self.set_options(simplex_iteration_limit=int(max(floor, per_entry * (self.num_rows + self.num_cols))))

    def dual_ray_exists(self):
        """Whether the simplex left a dual ray for the LP just reported infeasible (``getDualRayExist``). Without
        one, ``getDualRay`` of HiGHS >= 1.8 solves a feasibility LP to compute it, outside any time limit (27.8 s
        on ex8_4_1, docs/gop.md §13k). A highspy without the call reports only stored rays: True."""
        try:
            _, exists = self._h.getDualRayExist()
        except AttributeError:
            return True
        except Exception:
            return False
        return bool(exists)

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

    def set_row_bounds(self, idx, lo, hi, check=True):
        """Set ``lo <= (A x)[idx] <= hi`` (scalars broadcast; ``None`` means -inf / +inf). ``check=False``: ``idx``
        sorted distinct integer indices, ``lo``/``hi`` float arrays of its length (callers inside varopt that built
        them), passed to HiGHS without validation."""
        if not check:
            if len(idx):
                self._check(self._h.changeRowsBounds(len(idx), idx.astype(np.int32), lo, hi), "changeRowsBounds")
            return
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

    def set_coefficients(self, rows, cols, vals, check=True):
        """Set ``A[rows[i], cols[i]] = vals[i]`` for every ``i`` (0 removes the entry). The basis is kept, so
        the next solve starts from it (a warm start when the changes are small). ``check=False`` skips the
        validation of indices and values (callers inside varopt that built them; HiGHS still rejects bad indices)."""
        if not check:
            for st in set(map(self._h.changeCoeff, rows.tolist(), cols.tolist(), vals.tolist())):
                self._check(st, "changeCoeff")
            return
        rows, cols = np.atleast_1d(np.asarray(rows)), np.atleast_1d(np.asarray(cols))
        for name, a, size in (("rows", rows, self._m), ("cols", cols, self._n)):
            if a.ndim != 1 or (a.size and (not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() >= size)):
                raise InputDataError(f"{name}: expected integer indices in [0, {size})")
        vals = np.asarray(vals, dtype=float).ravel()
        if not (rows.size == cols.size == vals.size):
            raise InputDataError(f"rows, cols, vals: sizes {rows.size}, {cols.size}, {vals.size} differ")
        if not np.all(np.isfinite(vals)):
            raise InputDataError("vals: must be finite")
        change = self._h.changeCoeff
        status = {change(r, c, v) for r, c, v in zip(rows.tolist(), cols.tolist(), vals.tolist())}
        for st in status:
            self._check(st, "changeCoeff")

    def add_rows(self, A_new, lo=None, hi=None, check=True) -> np.ndarray:
        """Append rows ``lo <= A_new x <= hi``; return their (positional) row indices. ``check=False``: ``A_new``
        is a csr matrix of the right width with finite entries and ``lo``, ``hi`` float arrays (callers inside
        varopt that built them), not validated again."""
        if check:
            R = _matrix("A_new", A_new, self._n, fmt="csr")
            k = R.shape[0]
            lo, hi = _bounds("lo", "hi", lo, hi, k)
        else:
            R, k = A_new, A_new.shape[0]
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
