"""The identity compressor (no compression): the dense baseline."""

from __future__ import annotations

import torch

from hpcbench.compress.base import Compressor, Context, Payload, as_flat

__all__ = ["NoneCompressor"]


class NoneCompressor(Compressor):
    """Send the tensor unchanged.

    The payload is ``(flat,)``: the flattened tensor, same dtype. ``decompress``
    returns it reshaped, so the round trip is exact (bitwise).
    """

    name = "none"
    unbiased = True
    fixed_size = True
    kind = "dense"

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        return (flat,), self._context(tensor, name)

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        return payload[0].to(ctx.dtype).reshape(ctx.shape)

    def residual(self, acc, payload, ctx):
        return torch.zeros_like(acc)
