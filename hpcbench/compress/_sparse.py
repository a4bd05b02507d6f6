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

    def _pack(self, flat: torch.Tensor, idx, ctx: Context,
              values: torch.Tensor | None = None) -> tuple[Payload, Context]:
        """Payload of the kept positions ``idx`` (distinct); ``values`` if given must be ``flat[idx]``."""
        if isinstance(idx, np.ndarray):
            idx = torch.from_numpy(idx)
        idx = idx.reshape(-1)
        if values is None:
            values = torch.index_select(flat, 0, idx.long()) if idx.numel() else flat.new_empty(0)
        return (idx.to(index_dtype(ctx.numel)).contiguous(), values.contiguous()), ctx

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        idx, values = payload
        out = torch.zeros(ctx.numel, dtype=ctx.dtype)
        if idx.numel():
            out[idx.long()] = values.to(ctx.dtype)
        return out.view(ctx.shape)

    def residual(self, acc: torch.Tensor, payload: Payload, ctx: Context) -> torch.Tensor:
        """``acc - decompress(payload)`` bitwise, in place, with one scatter of k elements.

        ``acc`` must be the tensor that was compressed (as
        :class:`~hpcbench.compress.memory.ErrorFeedback` passes it). Off the
        selection ``acc - 0 == acc`` is left as it is; on it ``values[i]`` *is*
        ``acc[i]`` (payload values are the kept elements unchanged), so
        ``acc[i] - values[i] == values[i] - values[i]`` (``+0`` for finite
        values, NaN for inf and NaN, as the dense subtraction gives), computed
        on the k values alone: no gather from the large tensor.
        """
        idx, values = payload
        flat = acc.contiguous().view(-1)
        if idx.numel():
            v = values.to(flat.dtype)
            flat.index_copy_(0, idx.long(), v - v)
        return flat.view(ctx.shape)
