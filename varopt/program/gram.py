r"""Weighted Gram matrices ``H = S^T M S`` of a fixed sparse ``S`` and a block-diagonal weight ``M``.

The Hessian of every term group of :mod:`varopt.program.terms` without multipliers is of this form
(docs/architecture.md, "Hessians of term groups", where the LSE block is derived): the rows ``s_k``
of ``S`` are the affine maps of the group and ``M`` couples only rows of the same block,

* an atom row ``c g(a^T x + b)``: ``M_kk = c g''(u_k)`` (blocks of one row);
* a two-argument atom ``c g(u, v)``: the block of rows ``(a_r, a2_r)`` is ``c [[g_uu, g_uv], [g_uv, g_vv]]``;
* a log-sum-exp ``c log sum_{k in g} exp(a_k^T x + b_k)``: ``M_g = c (diag(p) - p p^T)`` with ``p``
  the softmax of the group (``M_kl = c (p_k delta_kl - p_k p_l)``).

so ``H = sum_{k <= l in one block} M_kl (s_k s_l^T + [k != l] s_l s_k^T)``. Only ``M`` depends on
``x``. :class:`WeightedGram` is built once per group from ``S`` and the list of row pairs
``(k, l)``, ``k <= l``, of its blocks (pairs with an empty row are dropped: an empty row such as the
``exp(0)`` of ``log(1 + exp(z))`` contributes nothing), and evaluates ``H`` for new pair weights:

* **pattern** (sparse ``S``): every product ``S_ki S_lj`` that lands in the upper triangle
  ``i <= j`` is stored once, with its position in the fixed sparsity pattern of ``H``, as a sparse
  matrix ``P`` (upper entries x pairs), so one evaluation is ``P @ M`` over
  ``E = sum_pairs nnz_k nnz_l (/2 on diagonal pairs)`` entries (for ``l != k`` both orders
  ``s_k s_l^T + s_l s_k^T`` fold onto the same upper entries); built on the second evaluation, the
  first taking the sparse product;
* **dense**: ``H = S_u^T (M_u S_u)`` by BLAS over the used rows ``S_u`` (a dense copy made on the
  first dense evaluation), for a dense result;
* **product**: scipy's sparse ``S^T (W S)`` (``W`` the symmetric pair matrix) for a csr result when
  the pattern is not chosen, for infinite weights, or when neither of the others fits.

Both give the same matrix as the sparse product ``S^T M S`` (tests/test_gram.py, against that
formula and finite differences of the gradient).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: the pattern is used while its entry count ``E`` is at most this fraction of the dense product's
#: multiply-adds ``K n^2``. Measured on a1a (1605 x 119, 14 nonzeros a row, ``E / K n^2 = 0.007``):
#: building the pattern costs ~100 ns an entry, an evaluation ~1 ns an entry (one csr
#: matrix-vector product) against ~0.05 ns a dense multiply-add, so over the ~10 evaluations of a
#: Newton solve the pattern pays off below ``E ~ 0.005 K n^2`` (a1a: dense, 1.1 ms an evaluation)
PATTERN_FRACTION = 0.005
#: and at most this many entries (memory: about 100 bytes each while building)
PATTERN_MAX = 1_000_000
#: the dense mode forms ``n x n`` arrays and a dense copy of the used rows: up to these sizes
DENSE_MAX_N = 6000
DENSE_MAX_ENTRIES = 20_000_000


def _expand(ptr, rows):
    """``(pos, loc)``: the concatenated index ranges ``ptr[r]:ptr[r+1]`` of ``rows`` and the position
    of each in ``rows``."""
    lens = ptr[rows + 1] - ptr[rows]
    loc = np.repeat(np.arange(rows.size), lens)
    pos = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(ptr[rows], lens)
    return pos, loc


class WeightedGram:
    """``H(M) = S^T M S`` for a fixed csr ``S`` (``K x n``) and weights ``M`` on the row pairs
    ``(pk[q], pl[q])``, ``pk <= pl`` (module docstring)."""

    def __init__(self, S, pk, pl):
        S = sp.csr_matrix(S)
        S.sum_duplicates()
        self.n = n = S.shape[1]
        pk = np.asarray(pk, dtype=np.int64)
        pl = np.asarray(pl, dtype=np.int64)
        nnz = np.diff(S.indptr)
        keep = (nnz[pk] > 0) & (nnz[pl] > 0)
        self.n_pairs = pk.size
        self.keep = keep if not keep.all() else None
        pk, pl = pk[keep], pl[keep]
        self.diagonal = bool(np.all(pk == pl))
        used = np.unique(np.concatenate([pk, pl]))
        #: ``rank H <= rank_bound`` at every ``x`` (``H = S_u^T M_u S_u``, ``S_u`` has this many rows)
        self.rank_bound = int(used.size)
        entries = float(np.sum(nnz[pk].astype(float) * nnz[pl])) / (2.0 if self.diagonal else 1.0)
        dense_cost = float(used.size) * n * n
        dense_ok = n <= DENSE_MAX_N and (pk.size if self.diagonal else used.size) * n <= DENSE_MAX_ENTRIES
        if entries <= PATTERN_MAX and (not dense_ok or entries <= PATTERN_FRACTION * dense_cost):
            self.mode = "pattern"
        elif dense_ok:
            self.mode = "dense"
        else:
            self.mode = "product"  # neither fits: scipy's sparse product, per call
        self.S, self.pk, self.pl = S, pk, pl
        self.P = None  # pattern mode: built on the second evaluation (a one-shot use, e.g. the Hessian
        # of a sampled batch's rows, takes the sparse product: building costs ~100 evaluations)
        self.evaluations = 0
        if self.mode == "dense":
            self._used = used
            self._Su = None  # the dense rows, made on the first dense evaluation (csr results do not use them)
            if not self.diagonal:
                loc = np.searchsorted(used, np.concatenate([pk, pl]))
                self.lk, self.ll = loc[:pk.size], loc[pk.size:]
                self.off = self.lk != self.ll

    @property
    def Su(self):
        """Dense mode's used rows of ``S`` (one per pair when every block is one row)."""
        if self._Su is None:
            self._Su = (self.S[self.pk] if self.diagonal else self.S[self._used]).toarray()
        return self._Su

    # --- pattern mode ---------------------------------------------------------------------
    def _build_pattern(self, S, pk, pl):
        n = self.n
        ptr, ind, dat = S.indptr.astype(np.int64), S.indices.astype(np.int64), S.data  # indices sorted
        nk = ptr[pk + 1] - ptr[pk]
        parts = []
        # a diagonal pair s_k s_k^T: the upper triangle of its nonzeros' products, rows of one length
        # at a time (positions a <= b within the row: i <= j as the indices are sorted)
        diag = np.flatnonzero(pk == pl)
        for L in np.unique(nk[diag]):
            qs = diag[nk[diag] == L]
            ta, tb = np.triu_indices(int(L))
            base = ptr[pk[qs]][:, None]
            parts.append(((base + ta).ravel(), (base + tb).ravel(), np.repeat(qs, ta.size), 1.0))
        # an off-diagonal pair gives s_k s_l^T + s_l s_k^T: every product s_ki s_lj lands on the upper
        # entry (min(i, j), max(i, j)), on the diagonal i == j twice
        offd = np.flatnonzero(pk != pl)
        if offd.size:
            pos_k, loc = _expand(ptr, pk[offd])
            nl = (ptr[pl + 1] - ptr[pl])[offd]
            rep = np.repeat(nl, nk[offd])
            a_pos = np.repeat(pos_k, rep)
            qloc = np.repeat(loc, rep)
            b_pos = np.arange(a_pos.size) - np.repeat(np.cumsum(rep) - rep, rep) + ptr[pl[offd]][qloc]
            parts.append((a_pos, b_pos, offd[qloc], 2.0))
        if not parts:
            parts.append((np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 1.0))
        i = np.concatenate([ind[a] for a, _, _, _ in parts])
        j = np.concatenate([ind[b] for _, b, _, _ in parts])
        q = np.concatenate([qq for _, _, qq, _ in parts])
        prod = np.concatenate([dat[a] * dat[b] for a, b, _, _ in parts])
        twice = np.concatenate([np.full(a.size, f == 2.0) for a, _, _, f in parts])
        prod = np.where(twice & (i == j), 2.0 * prod, prod)
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        key = lo * n + hi
        if n * n <= max(4 * key.size, 1 << 22):  # mark the used entries (a sort costs 40x more)
            mark = np.zeros(n * n, dtype=bool)
            mark[key] = True
            ukey = np.flatnonzero(mark)
            upos = (np.cumsum(mark) - 1)[key]
        else:
            ukey, upos = np.unique(key, return_inverse=True)
        self.n_upper = ukey.size
        self.n_entries = q.size
        # upper entries = P @ M: one compiled sparse matrix-vector product per evaluation
        self.P = sp.csr_matrix((prod, (upos.ravel(), q)), shape=(ukey.size, pk.size))
        ui, uj = ukey // n, ukey % n
        # the full symmetric pattern: upper entries and the mirrors of the strictly upper ones
        strict = np.flatnonzero(ui != uj)
        rows = np.concatenate([ui, uj[strict]])
        cols = np.concatenate([uj, ui[strict]])
        src = np.concatenate([np.arange(ukey.size), strict])
        order = np.lexsort((cols, rows))
        self.full_src = src[order]
        self.indices = cols[order].astype(np.int32)
        self.indptr = np.searchsorted(rows[order], np.arange(n + 1)).astype(np.int32)
        self.ui, self.uj = ui, uj

    @property
    def entries(self) -> int:
        """Products per evaluation in pattern mode (0 otherwise)."""
        return int(self.n_entries) if self.P is not None else 0

    # --- evaluation -----------------------------------------------------------------------
    def __call__(self, M, dense: bool = False, idx=None):
        """``H`` for the pair weights ``M`` (one per pair given to the constructor): a csr matrix, or
        a dense array when ``dense``; with ``idx`` (dense only) the principal submatrix
        ``H[idx][:, idx] = S[:, idx]^T M S[:, idx]`` (in dense mode formed from those columns alone)."""
        if idx is not None:
            if not dense:
                raise ValueError("weighted Gram: a principal submatrix (idx) is returned dense only")
            return self._sub(np.asarray(M, dtype=float), np.asarray(idx, dtype=np.int64))
        M = np.asarray(M, dtype=float)
        if M.shape != (self.n_pairs,):
            raise ValueError(f"weighted Gram: {M.shape} weights for {self.n_pairs} row pairs")
        if self.keep is not None:
            M = M[self.keep]
        n = self.n
        self.evaluations += 1
        if self.mode == "pattern" and self.P is None and self.evaluations >= 2:
            self._build_pattern(self.S, self.pk, self.pl)
        if self.mode == "pattern" and self.P is not None:
            u = self.P @ M
            if dense:
                H = np.zeros((n, n))
                H[self.ui, self.uj] = u
                H[self.uj, self.ui] = u
                return H
            return sp.csr_matrix((u[self.full_src], self.indices, self.indptr), shape=(n, n))
        # a csr result comes from the sparse product in dense mode (converting a dense n x n array
        # costs more than the product); infinite weights too (inf * 0 would fill a dense H with NaN)
        if self.mode == "dense" and dense and np.isfinite(M).all():
            if self.diagonal:
                H = self.Su.T @ (M[:, None] * self.Su)
            else:
                K = self.Su.shape[0]
                off = self.off
                W = sp.csr_matrix((np.concatenate([M, M[off]]),
                                   (np.concatenate([self.lk, self.ll[off]]), np.concatenate([self.ll, self.lk[off]]))),
                                  shape=(K, K))
                H = self.Su.T @ (W @ self.Su)
            return H
        S, pk, pl = self.S, self.pk, self.pl
        K = S.shape[0]
        off = pk != pl
        W = sp.csr_matrix((np.concatenate([M, M[off]]), (np.concatenate([pk, pl[off]]), np.concatenate([pl, pk[off]]))),
                          shape=(K, K))
        H = sp.csr_matrix(S.T @ (W @ S))
        return H.toarray() if dense else H

    def _sub(self, M, idx):
        if M.shape != (self.n_pairs,):
            raise ValueError(f"weighted Gram: {M.shape} weights for {self.n_pairs} row pairs")
        if self.mode == "dense" and np.isfinite(M).all():
            if self.keep is not None:
                M = M[self.keep]
            Su = self.Su[:, idx]
            if self.diagonal:
                return Su.T @ (M[:, None] * Su)
            K = Su.shape[0]
            off = self.off
            W = sp.csr_matrix((np.concatenate([M, M[off]]),
                               (np.concatenate([self.lk, self.ll[off]]), np.concatenate([self.ll, self.lk[off]]))),
                              shape=(K, K))
            return Su.T @ (W @ Su)
        return self(M)[idx][:, idx].toarray()  # (no dense n x n intermediate)
