"""Which samples of a finite sum form the next batch: cyclic, permutation or uniform."""
from __future__ import annotations

import numpy as np


class Sampler:
    """Batches of sample indices: ``cyclic`` (in order, wrapping), ``permutation`` (a fresh
    random order every pass) or ``uniform`` (independent, with replacement)."""

    def __init__(self, N, batch_size, sampling, rng):
        self.N, self.b, self.mode, self.rng = N, min(batch_size, N), sampling, rng
        self.pos = 0
        self.order = np.arange(N) if sampling != "permutation" else rng.permutation(N)
        self.full = batch_size >= N
        self.all = np.arange(N)

    def next(self):
        if self.full:
            return self.all
        if self.mode == "uniform":
            return self.rng.integers(0, self.N, size=self.b)
        end = self.pos + self.b
        if end <= self.N:
            out = self.order[self.pos:end]
            self.pos = end if end < self.N else 0
            if self.pos == 0 and self.mode == "permutation":
                self.order = self.rng.permutation(self.N)
            return out
        head = self.order[self.pos:]
        if self.mode == "permutation":
            self.order = self.rng.permutation(self.N)
        rest = end - self.N
        self.pos = rest
        return np.concatenate([head, self.order[:rest]])
