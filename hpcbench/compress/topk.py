"""Exact top-k sparsification by magnitude."""

from __future__ import annotations

import torch

from hpcbench.compress._sparse import SparseCompressor, k_of
from hpcbench.compress.base import Context, Payload, as_flat, check_ratio

__all__ = ["TopKCompressor"]


class TopKCompressor(SparseCompressor):
    """Keep the ``k = ceil(compress_ratio * numel)`` largest-magnitude elements.

    The selection is ``torch.topk(tensor.abs().flatten(), k)`` (ties broken as
    torch does). Payload ``(indices int32/int64 of shape (k,), values of shape
    (k,) in the tensor's dtype)``. Biased; use with error feedback
    (Stich et al., 2018; Aji & Heafield, 2017).

    Parameters
    ----------
    compress_ratio : float, default 0.01
        Fraction of elements **kept**, in (0, 1].
    """

    name = "topk"
    unbiased = False
    fixed_size = True

    def __init__(self, compress_ratio: float = 0.01) -> None:
        super().__init__()
        self.compress_ratio = check_ratio(compress_ratio)

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        ctx = self._context(tensor, name)
        k = k_of(flat.numel(), self.compress_ratio)
        idx = torch.topk(flat.abs(), k, sorted=False).indices if k else flat.new_empty(0, dtype=torch.long)
        return self._pack(flat, idx, ctx)

    def __repr__(self) -> str:
        return f"TopKCompressor(compress_ratio={self.compress_ratio})"
