"""Fixed-threshold sparsification."""

from __future__ import annotations

import math

import numpy as np
import torch

from hpcbench.compress._sparse import SparseCompressor
from hpcbench.compress.base import Context, Payload, as_flat

__all__ = ["ThresholdCompressor"]


class ThresholdCompressor(SparseCompressor):
    """Keep every element with ``|x| >= threshold`` (Strom, 2015).

    The payload size depends on the values (``fixed_size = False``): between 0
    and ``numel`` pairs ``(indices, values)``.

    Parameters
    ----------
    threshold : float, default 1e-3
        Magnitude threshold, finite and >= 0.
    """

    name = "threshold"
    unbiased = False
    fixed_size = False
    approximates_topk = True
    ef_options = {"threshold": 0.01}

    def __init__(self, threshold: float = 1e-3) -> None:
        super().__init__()
        t = float(threshold)
        if not math.isfinite(t) or t < 0:
            raise ValueError(f"threshold must be finite and >= 0, got {threshold!r}")
        self.threshold = t

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        ctx = self._context(tensor, name)
        if flat.dtype in (torch.float16, torch.bfloat16):
            mask = (flat.abs() >= self.threshold).numpy()
        else:
            mask = np.abs(flat.numpy()) >= self.threshold
        return self._pack(flat, np.flatnonzero(mask), ctx)

    def __repr__(self) -> str:
        return f"ThresholdCompressor(threshold={self.threshold})"
