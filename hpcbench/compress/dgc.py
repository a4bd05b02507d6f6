"""Deep Gradient Compression's sampled-threshold top-k (Lin et al., 2018)."""

from __future__ import annotations

import math

import numpy as np
import torch

from hpcbench.compress._sparse import SparseCompressor, k_of
from hpcbench.compress.base import Context, Payload, as_flat, check_ratio, name_seed
from hpcbench.compress.thresholdv import abs_scores

__all__ = ["DGCCompressor"]


class DGCCompressor(SparseCompressor):
    """Top-k with a threshold estimated from a random sample.

    Lin et al., "Deep Gradient Compression" (ICLR 2018): take a random sample
    of about ``sample_ratio`` of the elements, set the threshold to the
    ``ceil(ratio * sample)``-th largest sampled magnitude, and select
    ``|x| >= threshold``. Refinement: if more than ``k`` pass, keep the exact
    top-k of those; if fewer than ``k * min_fill`` pass, lower the threshold by
    ``lower`` and select again (at most ``max_refine`` times). The payload has
    at most ``k`` pairs and may have fewer (``fixed_size = False``).

    Parameters
    ----------
    ratio : float, default 0.01
        Fraction of elements **kept**, in (0, 1].
    sample_ratio : float, default 0.01
        Fraction sampled to estimate the threshold, in (0, 1].
    min_fill, lower : float
        Refinement: retry with ``threshold * lower`` while fewer than
        ``min_fill * k`` are selected.
    max_refine : int, default 2
    seed : int, default 0
    """

    name = "dgc"
    unbiased = False
    fixed_size = False
    takes_ratio = True
    approximates_topk = True
    ef_options = {"ratio": 0.05}

    def __init__(self, ratio: float = 0.01, sample_ratio: float = 0.01, min_fill: float = 0.8,
                 lower: float = 0.8, max_refine: int = 2, seed: int = 0) -> None:
        super().__init__()
        self.ratio = check_ratio(ratio)
        if not 0 < sample_ratio <= 1:
            raise ValueError(f"sample_ratio must be in (0, 1], got {sample_ratio!r}")
        self.sample_ratio, self.min_fill, self.lower = float(sample_ratio), float(min_fill), float(lower)
        self.max_refine, self.seed = int(max_refine), int(seed)

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        ctx = self._context(tensor, name)
        n = ctx.numel
        k = k_of(n, self.ratio)
        if k == 0 or k >= n:
            return self._pack(flat, np.arange(k, dtype=np.int64), ctx)
        a = abs_scores(flat, None)
        ns = min(n, max(1, math.ceil(self.sample_ratio * n)))
        rng = np.random.default_rng(name_seed(name, ctx.step, self.seed))
        sample = a[rng.integers(0, n, size=ns)]
        ks = min(ns, max(1, math.ceil(self.ratio * ns)))
        thr = float(np.partition(sample, ns - ks)[ns - ks])
        for attempt in range(self.max_refine + 1):
            cand = np.flatnonzero(a >= thr)
            if cand.shape[0] >= self.min_fill * k or attempt == self.max_refine:
                break
            thr *= self.lower
        if cand.shape[0] > k:
            cs = a[cand]
            cand = cand[np.argpartition(cs, cand.shape[0] - k)[cand.shape[0] - k:]]
        return self._pack(flat, cand, ctx)

    def __repr__(self) -> str:
        return f"DGCCompressor(ratio={self.ratio}, sample_ratio={self.sample_ratio})"
