"""Token features of one batch of equal-length sentences for :class:`.crf.ChainCRF`: dense or sparse.

A batch of ``B`` sentences of ``T`` tokens over ``F`` features is ``Phi`` (``B x T x F``). Dense, it costs
``B T F`` memory and every product ``B T F K`` flops; with a real vocabulary (CoNLL: a few features per token among
10^4-10^5) almost every entry is zero: 2,000 synthetic sentences of at most 20 tokens over 10,544 features took
2.5 GB. A batch larger than :data:`DENSE_ENTRIES` entries with at most :data:`DENSE_FRACTION` of them nonzero is
therefore kept as a CSR matrix of ``B T`` rows, and the products the oracle needs (scores ``Phi W^T``, the
feature-weighted sums ``sum_{b,t} mu_{btk} Phi_{btf}`` of the gradient and the gold features, the directions
``Phi_s V_k`` of the projected curvature) cost ``nnz K``; only the dense junction-tree ``Sigma`` (``(K F)^2`` anyway)
reads a dense copy of the batch, for that call. The choice is made once for all batches of a fit
(:func:`use_sparse`); small training sets stay dense (the numbers they always had).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: the batches of a fit with more entries (tokens x features) than this in all ...
DENSE_ENTRIES = 2 ** 22
#: ... and at most this fraction of them nonzero are stored sparse
DENSE_FRACTION = 0.25


def use_sparse(tokens, features, nnz) -> bool:
    """Whether the batches of a fit (``tokens`` in all, ``nnz`` stored features) are stored sparse."""
    entries = tokens * features
    return entries > DENSE_ENTRIES and nnz <= DENSE_FRACTION * entries


class FeatureBatch:
    """``Phi`` of one batch, from the per-sentence CSR matrices ``rows`` (each ``T x F``), stored dense or CSR
    (``sparse``, :func:`use_sparse`)."""

    def __init__(self, rows, sparse=False):
        B, (T, F) = len(rows), rows[0].shape
        self.shape = (B, T, F)
        if not sparse:
            self.dense, self.csr, self.csr_t = np.stack([r.toarray() for r in rows]), None, None
        else:
            self.dense = None
            self.csr = sp.vstack(rows, format="csr")            # (B T) x F
            self.csr_t = self.csr.T.tocsr()                     # F x (B T): the transposed products by rows

    @property
    def sparse(self) -> bool:
        return self.dense is None

    def scores(self, W) -> np.ndarray:
        """``(B, T, K)`` node scores ``Phi W^T`` (``W`` is ``K x F``)."""
        if self.dense is not None:
            return self.dense @ W.T
        B, T, _ = self.shape
        return np.asarray(self.csr @ W.T).reshape(B, T, W.shape[0])

    def weighted_sum(self, C) -> np.ndarray:
        """``(K, F)``: ``sum_{b,t} C[b, t, k] Phi[b, t, f]`` (``C`` of shape ``(B, T, K)``)."""
        if self.dense is not None:
            return np.einsum("btk,btf->kf", C, self.dense)
        B, T, _ = self.shape
        return np.asarray(self.csr_t @ C.reshape(B * T, -1)).T

    def directions(self, VW) -> np.ndarray:
        """``(B, T, K, m)``: ``sum_f Phi[b, t, f] VW[k, f, j]`` (``VW`` of shape ``(K, F, m)``)."""
        if self.dense is not None:
            return np.einsum("btf,kfj->btkj", self.dense, VW, optimize=True)
        B, T, F = self.shape
        K, _, m = VW.shape
        return np.asarray(self.csr @ VW.transpose(1, 0, 2).reshape(F, K * m)).reshape(B, T, K, m)

    def array(self) -> np.ndarray:
        """The dense ``(B, T, F)`` array (a fresh copy of a sparse batch: for the dense bound only)."""
        if self.dense is not None:
            return self.dense
        return self.csr.toarray().reshape(self.shape)
