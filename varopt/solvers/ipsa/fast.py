"""The compiled IPSA loop at batch size 1 (option ``backend``), with the numpy path as reference.

:func:`select` decides, for one :class:`.IpsaRun`, whether the numba kernels cover the problem
(:func:`unsupported` names the first reason they do not); :class:`FastLoop` then replaces
:meth:`.IpsaRun.solve`: it takes the samples of the next chunk of iterations from the oracle's own
sampler (same random stream) and runs the chunk in compiled code, bounds-only problems in the
fused kernel of :mod:`.compiled_bounds`, rows of at most two variables in 1x1/2x2 blocks (the L1 box
form) in that of :mod:`.compiled_pairs`, other linear rows in :mod:`.compiled`. The kernel saves the
history records that fall inside the chunk (at most ``RECORDS``; handed to the run loop after the
call, time-stamped then); the rest of the run-loop work (limits, callback, incumbent) is done
between chunks. A chunk ends after ``CHUNK`` iterations or ``RECORDS`` records, at the iteration
cap, under a time limit on a multiple of 16 iterations about every ``TIME_SLICE`` seconds (the
numpy loop reads the clock every 16 iterations), where the user's callback is due (after every
iteration by default: it sees every iterate; option ``callback_every``), and when the kernel meets
an iteration the numpy path would reject (that iteration is replayed by :meth:`.IpsaRun.step`, which raises its usual error).

Covered: the program objective as a finite sum of ``square`` atom rows (least squares), squared
hinges ``max(u, 0)^2`` (``sqpos`` rows: the L2-SVM) or log-sum-exp groups (logistic, multinomial),
one row/group per sample, plus a linear term and a diagonal quadratic term (an L2 penalty), dense
or sparse data; bounds (the L1 split form), and linear rows whose reduced system is block
diagonal with blocks of at most 16 variables (rows with few nonzeros; the L1 box form
``-u <= w <= u`` and other variable pairs with equally many rows each run the kernel of
:mod:`.compiled_pairs`, in an order of variables and constraints of its own, permuted back after
each call); ``hessian`` ``identity``, ``bb`` or ``diagonal``; ``batch_size=1``.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ...core.backend import missing_numba, numba_available
from ...errors import InvalidOptionError
from ...oracles import FiniteSumOracle
from ...oracles.rows import _AtomRows, _LseRows
from ...program.atoms import ATOMS

HESSIANS = {"identity": 0, "bb": 1, "diagonal": 2}
#: the kernels' sample-row kinds (``ip[2]``, a run-time integer: one compiled signature per kernel): an atom row
#: whose atom is ``u^2`` (``AtomKernel.quadratic``), a log-sum-exp group, an atom row whose atom is ``max(u, 0)^2``
#: (``AtomKernel.squared_hinge``: the L2-SVM loss)
ROW_KINDS = {"quadratic": 0, "lse": 1, "squared_hinge": 2}
#: most iterations per kernel call; most history records per call (saved by the kernel)
CHUNK, RECORDS = 4096, 64
#: wall time aimed at per kernel call under a time limit (the clock is read between calls)
TIME_SLICE = 0.002


def unsupported(r) -> str | None:
    """Why the compiled kernel does not cover IpsaRun ``r`` (None when it does)."""
    opts, cons, oracle = r.opts, r.cons, r.oracle
    if opts.oracle is not None or not isinstance(oracle, FiniteSumOracle):
        return "a user or stream gradient oracle (only the program's own finite sum is compiled)"
    if opts.batch_size != 1 or not oracle.n_samples or oracle.n_samples < 2:
        return f"batch_size={opts.batch_size} (the compiled loop is for per-sample steps, batch_size=1)"
    if opts.hessian not in HESSIANS:
        return f"hessian={opts.hessian!r} (compiled: identity, bb, diagonal)"
    if cons.n_nl:
        return "nonlinear constraints"
    if r.system.mode not in ("diag", "blocks"):
        return "linear rows coupling more than 16 variables (general reduced system)"
    if oracle.Q is not None and q_diagonal(oracle.Q) is None:
        return ("a quadratic term coupling variables outside the sampled rows (compiled: a diagonal one, "
                "such as an L2 penalty)")
    if len(oracle.parts) != 1:
        return "more than one group of sampled rows"
    helper, ptr, _ = oracle.parts[0]
    if not oracle._unit[id(ptr)] or ptr.size != oracle.n_samples + 1:
        return "samples with more than one row"
    if isinstance(helper, _AtomRows):
        if not helper.simple or _atom_row_kind(helper.g.kind) is None:
            return f"atom rows of kind {helper.g.kind!r} (compiled: square, squared hinge, log-sum-exp)"
    elif not isinstance(helper, _LseRows) or helper.has_mult:
        return "log-sum-exp rows with variable multipliers"
    return None


def q_diagonal(Q):
    """The diagonal of the quadratic term's Hessian ``Q`` (``grad = lin + Q x`` outside the sampled rows) when
    ``Q`` is diagonal (every off-diagonal entry zero: an L2 penalty, per-coordinate weights), else None. The
    kernels compute ``Q x`` as ``0.0 + Q_jj x_j``, which is scipy's product when each row holds at most one
    stored entry, so a row with duplicate entries is also refused."""
    Q = Q.tocsr()
    if Q.shape[0] != Q.shape[1]:
        return None
    rows = np.repeat(np.arange(Q.shape[0]), np.diff(Q.indptr))
    on = Q.indices == rows
    if np.any(Q.data[~on] != 0) or np.any(np.bincount(rows[on], minlength=Q.shape[0]) > 1):
        return None
    return _f64(Q.diagonal())


def _atom_row_kind(kind):
    """The kernels' row kind (:data:`ROW_KINDS`) of atom rows of ``kind``, or None (not compiled)."""
    atom = ATOMS[kind]
    if atom.quadratic:
        return ROW_KINDS["quadratic"]
    if atom.squared_hinge:
        return ROW_KINDS["squared_hinge"]
    return None


def select(r):
    """The :class:`FastLoop` for ``r`` under option ``backend``, or None (numpy path)."""
    backend = r.opts.backend
    if backend == "numpy":
        r.backend_note = "numpy (backend='numpy')"
        return None
    have = numba_available()
    if backend == "numba" and not have:
        raise missing_numba()
    why = unsupported(r) if have else "numba is not installed"
    if why is not None:
        if backend == "numba":
            raise InvalidOptionError(f"backend='numba' does not cover this problem: {why}; "
                                     "backend='auto' falls back to the numpy path")
        r.backend_note = f"numpy ({why})"
        return None
    r.backend_note = "numba"
    drop_stale_caches()
    return FastLoop(r)


#: the files whose code or constants the kernels compile in: helpers inlined from kernel_steps.py and
#: compiled_bounds.py, iteration.MAX_BACKTRACKS, this module's HESSIANS
KERNEL_SOURCES = ("kernel_steps.py", "compiled.py", "compiled_bounds.py", "compiled_pairs.py", "iteration.py", "fast.py")
_stale_checked = False


def drop_stale_caches(force=False):
    """Delete numba's on-disk cache indexes of the ipsa kernels that are older than the newest of
    :data:`KERNEL_SOURCES`, once per process (before any kernel's first call in it).

    numba stamps a cached kernel with its *own* source file only; the kernels here compile in helpers and
    constants of the other files, so after an edit to one of those (an editable install, a checkout) the
    cache would load the old machine code and run it silently. Without its index numba compiles again and
    writes a new one. An installed release never changes its files, so this deletes nothing there."""
    global _stale_checked
    if _stale_checked and not force:
        return []
    _stale_checked = True
    from . import compiled, compiled_bounds, compiled_pairs, kernel_steps
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        newest = max(os.path.getmtime(os.path.join(here, f)) for f in KERNEL_SOURCES)
    except OSError:
        return []
    seen, dropped = set(), []
    for mod in (kernel_steps, compiled, compiled_bounds, compiled_pairs):
        for obj in list(vars(mod).values()):
            for d in (obj if isinstance(obj, tuple) else (obj,)):
                index = getattr(getattr(getattr(d, "_cache", None), "_cache_file", None), "_index_path", None)
                if not isinstance(index, str) or index in seen or d.overloads:
                    continue
                seen.add(index)
                try:
                    if os.path.getmtime(index) < newest:
                        os.remove(index)
                        dropped.append(index)
                except OSError:  # no index yet, or another process removed or rewrote it meanwhile
                    pass
    return dropped


def needs_compile(kernel) -> bool:
    """True when numba will compile ``kernel`` at its next call: no compiled copy in this process and none in
    numba's on-disk cache (``cache=True``; an index of another numba version or of an older source counts as
    none). False when unknown (numba's cache internals changed): the caller then says nothing."""
    if kernel.overloads:
        return False
    cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
    if cache_file is None:  # no on-disk cache
        return True
    try:
        return not cache_file._load_index()
    except Exception:  # noqa: BLE001  (numba private API: never let the note break a solve)
        return False


def _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


def _f64(a):
    return np.ascontiguousarray(a, dtype=np.float64)


def _csr(M):
    return _i64(M.indptr), _i64(M.indices), _f64(M.data)


def _index(a):
    """Index array as stored (int32 or int64: the kernel is compiled for either), no copy."""
    a = np.ascontiguousarray(a)
    return a if a.dtype in (np.int32, np.int64) else a.astype(np.int64)


class FastLoop:
    """Packs an :class:`.IpsaRun` into the kernel's arrays and runs its loop (module docstring)."""

    def __init__(self, r):
        self.r = r
        opts, cons, oracle, hess = r.opts, r.cons, r.oracle, r.hess
        helper, _, order = oracle.parts[0]
        self.order = _i64(order)
        lse = ROW_KINDS["lse"]
        kind = _atom_row_kind(helper.g.kind) if isinstance(helper, _AtomRows) else lse
        g = helper.g
        A = helper.A.csr
        lse_ptr = _i64(helper.ptr) if kind == lse else np.zeros(1, dtype=np.int64)
        self.rowdata = (_index(A.indptr), _index(A.indices), _f64(A.data), _f64(g.b), _f64(g.coef), lse_ptr)
        self.lin = _f64(oracle.lin)
        # the diagonal quadratic term (an L2 penalty) read by every kernel: empty when there is none, so each
        # kernel keeps one compiled signature
        self.qd = q_diagonal(oracle.Q) if oracle.Q is not None else np.zeros(0)
        self.fp = np.array([opts.k0, opts.step_power, opts.sigma, r.ks, opts.sigma_power, opts.mu_min,
                            opts.step_fraction, r.inv_m, oracle.n_samples / 1.0,
                            getattr(hess, "beta_min", 0.0), getattr(hess, "d_min", 0.0)], dtype=float)
        mode = 0 if r.system.mode == "diag" else 1
        self.ip = np.array([r.n, r.m, kind, int(cons.lower_only), cons.n_lb, cons.n_ub, cons.n_lin, mode,
                            HESSIANS[opts.hessian], int(opts.dual_step == "same")], dtype=np.int64)
        self.rec = np.empty((RECORDS, 8))
        self.rec_x = np.empty((RECORDS if opts.history_objective else 0, r.n))
        self.no_trace = (np.zeros((0, r.n)), np.zeros((0, r.m)))
        self.block = 16  # iterations per call under a time limit (adapted to the measured speed)
        self.perm = None  # (variables, constraints) in a kernel's own order, and the inverses
        pairs = None
        if mode == 1:
            from . import compiled_pairs
            pairs = compiled_pairs.pair_layout(cons, r.system)
        if (mode == 0 and cons.n_lin == 0) or pairs is not None:
            # bounds only (compiled_bounds) or rows of <= 2 variables in blocks of <= 2 (compiled_pairs):
            # the fused kernels, slacks of the bounds described per row
            from . import compiled_bounds
            lb_idx, ub_idx = _i64(cons.lb_idx), _i64(cons.ub_idx)
            A_ptr, A_idx = self.rowdata[:2]
            if kind != lse and A.has_canonical_format:  # each row's coordinates are distinct
                support = (A_ptr, A_idx)
            else:
                support = compiled_bounds.group_support(
                    A_ptr, A_idx, lse_ptr if kind == lse else np.arange(A.shape[0] + 1), r.n)
                # in the rows' index types: one compiled signature per kernel for both (a cold compile each)
                support = (support[0].astype(A_ptr.dtype, copy=False), support[1].astype(A_idx.dtype, copy=False))
            bounds = (np.concatenate([lb_idx, ub_idx]), np.concatenate([np.ones(cons.n_lb), -np.ones(cons.n_ub)]),
                      np.concatenate([_f64(cons.lb), _f64(cons.ub)]))
            if pairs is not None:  # the kernel works in its own order of variables and constraints
                px, pc, arrays = pairs
                self.perm = (px, pc, np.argsort(px), np.argsort(pc))
                # original variable index -> kernel's (none needed when the program's order is the kernel's:
                # the L1 box form's (w, u, intercept))
                if np.array_equal(px, np.arange(px.size)):
                    def to_k(a, dtype=np.int64):
                        return np.ascontiguousarray(a, dtype=dtype)
                else:
                    def to_k(a, dtype=np.int64, _ix=self.perm[2]):
                        return _ix[a].astype(dtype, copy=False)
                self.kernel = compiled_pairs.RUN_PAIRS[HESSIANS[opts.hessian]]  # compiled per Hessian
                self.lin = self.lin[px]
                self.qd = self.qd[px] if self.qd.size else self.qd
                # the sample rows' coordinates in their stored index type (as in the bounds kernel: one compiled
                # signature for both kernels' usual input, scipy's int32)
                self.static = (A_ptr, to_k(A_idx, A_idx.dtype), *self.rowdata[2:], support[0],
                               to_k(support[1], A_idx.dtype), to_k(bounds[0]),
                               *bounds[1:], *arrays)
                return
            self.kernel = compiled_bounds.RUN_BOUNDS[HESSIANS[opts.hessian]]  # compiled per Hessian
            prefix = bool(cons.n_ub == 0 and np.array_equal(lb_idx, np.arange(cons.n_lb)))
            self.static = (*self.rowdata, *support, *bounds, prefix)
            return
        from . import compiled
        self.kernel = compiled.run_chunk
        cons_arrays = (_i64(cons.lb_idx), _f64(cons.lb), _i64(cons.ub_idx), _f64(cons.ub), *_csr(cons.G),
                       _f64(cons.h), *_csr(cons.GT), _f64(cons.G_terms), _f64(cons.G_norm1))
        blocks = self._blocks(r.system, r.n) if mode == 1 else (
            np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), _i64(np.zeros(r.n)),
            np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self.static = (*self.rowdata, *cons_arrays, *blocks)

    @staticmethod
    def _blocks(system, n):
        ptr, vars_, offs = [0], [], []
        for sz, idx, off in system.groups:
            for k, row in enumerate(idx):
                vars_.extend(int(v) for v in row)
                ptr.append(len(vars_))
                offs.append(off + k * sz * sz)
        return (*_csr(system.T), _i64(system.diag_pos), _i64(ptr), _i64(vars_), _i64(offs))

    # --- samples ---------------------------------------------------------------------------
    def take(self, count):
        """The next ``count`` samples of the oracle's sampler (its state advanced as by ``count``
        calls of ``next_batch``)."""
        smp = self.r.oracle.sampler
        if smp.mode == "cyclic":
            pos = (smp.pos + np.arange(count)) % smp.N
            smp.pos = int((smp.pos + count) % smp.N)
            return smp.order[pos]
        return np.concatenate([smp.next() for _ in range(count)])

    # --- one chunk ---------------------------------------------------------------------------
    def chunk(self, samples, trace=None):
        """Run the kernel over ``samples`` from iteration ``r.it``; returns the number of iterations
        done, whether the next one must be replayed on the numpy path and the number of history
        records the kernel saved (in ``self.rec``, ``self.rec_x``). ``trace``: (x, z) arrays of
        shape (count, .)."""
        r = self.r
        hess = r.hess
        st = np.array([r.ap, r.ad, r.a_prim, r.a_dual, r.mu, getattr(hess, "beta", 1.0),
                       r.stats["sum_step_ratio"]])
        sti = np.array([r.k, r.n_bt, r.stats["backtracks"], r.stats["steps"], r.stats["boundary_limited"],
                        getattr(hess, "skipped", 0)], dtype=np.int64)
        Bvec = hess.B if r.opts.hessian == "identity" else (hess.D if r.opts.hessian == "diagonal"
                                                              else np.zeros(0))
        tx, tz = trace if trace is not None else self.no_trace
        if self.perm is None:
            x, s, z = r.x.copy(), r.s.copy(), r.z.copy()
        else:
            px, pc, ix, ic = self.perm
            x, s, z = r.x[px], r.s[pc], r.z[pc]
            Bvec = Bvec[px] if Bvec.size else Bvec
        done, code, nrec = self.kernel(self.fp, self.ip, st, sti, x, s, z, self.lin, self.qd, Bvec,
                                       self.order[samples], *self.static, r.it, r.run.history_every, self.rec, self.rec_x, tx, tz)
        if self.perm is not None:  # back to the program's order
            x, s, z = x[ix], s[ic], z[ic]
            if r.opts.hessian == "diagonal":
                hess.D = Bvec[ix]
            if nrec and self.rec_x.shape[0]:
                self.rec_x[:nrec] = self.rec_x[:nrec, ix]
            if tx.shape[0]:
                tx[:] = tx[:, ix]
                tz[:] = tz[:, ic]
        r.x, r.s, r.z = x, s, z
        r.ap, r.ad, r.a_prim, r.a_dual, r.mu, beta, r.stats["sum_step_ratio"] = st.tolist()
        (r.k, r.n_bt, r.stats["backtracks"], r.stats["steps"], r.stats["boundary_limited"],
         skipped) = sti.tolist()
        if r.opts.hessian == "bb":
            hess.beta, hess.skipped = beta, skipped
        return int(done), bool(code), int(nrec)

    def _flush(self, it0, nrec):
        """Hand the kernel's saved history records (iterations: the multiples of ``history_every``
        after ``it0``) to the run loop; their time stamps are those of the hand-over, at most one
        kernel call (<= RECORDS records) late."""
        if not nrec:
            return
        r, run = self.r, self.r.run
        every = run.history_every
        first = (it0 // every + 1) * every
        its = range(first, first + nrec * every, every)
        rec = self.rec[:nrec]
        # (k, mu, eta, ap, ad, a_prim, a_dual, n_bt) with k and n_bt as Python ints, as the numpy path has them
        rows = zip(rec[:, 0].astype(np.int64).tolist(), *rec[:, 1:7].T.tolist(), rec[:, 7].astype(np.int64).tolist())
        xs = self.rec_x[:nrec] if self.rec_x.shape[0] else [None] * nrec
        run.record_batch(list(zip(its, r.history_fields_batch(its, rows, xs, stamped=True))), stamped=True)
        r.it = run.iteration

    # --- the loop ----------------------------------------------------------------------------
    def _chunk_length(self):
        r, run = self.r, self.r.run
        it = r.it
        every = run.history_every
        length = min(CHUNK, RECORDS * every - it % every)
        if run.callback_fn is not None:  # end where the callback is due (option callback_every)
            length = min(length, r.opts.callback_every - it % r.opts.callback_every)
        if r.total is not None:
            length = min(length, r.total - it)
        if r.opts.time_limit is not None:  # end on a multiple of 16, where the numpy loop reads the clock
            length = min(length, self.block - (it & 15))
        return max(1, length)

    def solve(self):
        r = self.r
        run = r.run
        run.incumbent(r.x)
        r.record()
        if run.progress.verbose and needs_compile(self.kernel):
            # a cold compile takes 5-15 s (docs/ipsa.md, "Cold compile") with no other line meanwhile
            run.progress(f"ipsa: compiling the numba kernel {self.kernel.__name__} (first use; numba caches it "
                         "on disk for later solves)")
        while not r._stopped():
            count = self._chunk_length()
            samples = self.take(count)
            it0 = r.it
            t0 = time.perf_counter()
            done, replay, nrec = self.chunk(samples)
            if done and r.opts.time_limit is not None:
                per_it = (time.perf_counter() - t0) / done
                self.block = int(min(CHUNK, max(16, 16 * (TIME_SLICE / per_it // 16))))
            self._flush(it0, nrec)
            r.it = run.iteration = it0 + done
            if r.diverged():   # also before a replay: the numpy step would fail on a runaway iterate
                break
            if replay:
                self._rewind(count - done - 1)
                r.step(np.array([samples[done]]))  # raises the numpy path's error, or steps
                r.it = run.iteration = r.it + 1
                r.record()
            run.incumbent(r.x)
            if r.callback_due() and run.callback(r.x, r.z, r.s):
                break
        r.record(force=True)
        return r.result()

    def _rewind(self, unused):
        """Give back ``unused`` samples taken but not stepped (cyclic order; other samplers keep
        their stream position, as the numpy path would after an error)."""
        smp = self.r.oracle.sampler
        if unused and smp.mode == "cyclic":
            smp.pos = int((smp.pos - unused) % smp.N)
