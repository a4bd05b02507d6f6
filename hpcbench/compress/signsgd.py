"""signSGD: one bit per element (Bernstein et al., 2018)."""

from __future__ import annotations

import torch

from hpcbench.compress._bits import pack_bits, unpack_bits
from hpcbench.compress.base import Compressor, Context, Payload, as_flat

__all__ = ["SignSGDCompressor"]


class SignSGDCompressor(Compressor):
    """Send ``sign(x)`` only: decoded values are +1 or -1 (``sign(0) = +1``).

    Bernstein et al., "signSGD: Compressed Optimisation for Non-Convex
    Problems" (ICML 2018). Summing the decoded signs of all ranks gives the
    majority vote's tally. Payload ``(bits uint8 (ceil(numel / 8),))``, bit
    set where ``x < 0``. Biased and scale-free: pair with a small learning rate.
    """

    name = "signsgd"
    unbiased = False
    fixed_size = True
    kind = "quantized"

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        return (pack_bits(flat < 0),), self._context(tensor, name)

    def _signs(self, packed: torch.Tensor, ctx: Context) -> torch.Tensor:
        neg = unpack_bits(packed, ctx.numel)
        work = torch.float64 if ctx.dtype == torch.float64 else torch.float32
        return 1.0 - 2.0 * neg.to(work)

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        return self._signs(payload[0], ctx).to(ctx.dtype).reshape(ctx.shape)
