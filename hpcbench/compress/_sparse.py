"""Shared pieces of the sparsifying compressors: ``(indices, values)`` payloads."""

from __future__ import annotations

import numpy as np
import torch

from hpcbench.compress.base import Compressor, Context, Payload

__all__ = ["SparseCompressor", "index_dtype", "k_of"]


def index_dtype(numel: int) -> torch.dtype:
    """int32 indices when they fit (half the wire bytes), else int64."""
    return torch.int32 if numel < 2 ** 31 else torch.int64


def k_of(numel: int, ratio: float) -> int:
    """Number of kept elements: ``ceil(ratio * numel)`` clipped to ``[min(1, numel), numel]``."""
    if numel == 0:
        return 0
    return int(min(numel, max(1, int(np.ceil(ratio * numel - 1e-9)))))


class SparseCompressor(Compressor):
    """Base of compressors whose payload is ``(indices, values)``.

    ``indices`` are distinct positions in the flattened tensor (int32 when the
    tensor has fewer than 2**31 elements, else int64); ``values`` are the kept
    elements, in the tensor's dtype, unchanged.
    """

    kind = "sparse"

    def _pack(self, flat: torch.Tensor, idx, ctx: Context) -> tuple[Payload, Context]:
        if isinstance(idx, np.ndarray):
            idx = torch.from_numpy(idx)
        idx = idx.reshape(-1)
        values = flat[idx.long()] if idx.numel() else flat.new_empty(0)
        return (idx.to(index_dtype(ctx.numel)).contiguous(), values.contiguous()), ctx

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        idx, values = payload
        out = torch.zeros(ctx.numel, dtype=ctx.dtype)
        if idx.numel():
            out[idx.long()] = values.to(ctx.dtype)
        return out.view(ctx.shape)

    def residual(self, acc: torch.Tensor, payload: Payload, ctx: Context) -> torch.Tensor:
        """``acc - decompress(payload)`` bitwise, without a dense decoded tensor.

        Off the selection ``acc - 0 == acc``; on it ``acc[i] - values[i]`` is
        computed exactly as the dense subtraction would.
        """
        idx, values = payload
        flat = acc.contiguous().view(-1)
        if idx.numel():
            li = idx.long()
            flat[li] = flat[li] - values.to(flat.dtype)
        return flat.view(ctx.shape)
