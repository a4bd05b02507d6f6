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
    set where ``x < 0``. Biased and scale-free.

    Learning rate (``lr_scale = 0.3``). Decoded values are +-1 whatever the
    gradient's scale, so the step size is in parameter units and must be
    tuned for signSGD itself, as Bernstein et al. do (their signSGD/Signum
    rates are tuned apart from SGD's). With error feedback the sent signs
    are a sigma-delta modulation of the compensated gradient: the residual
    stays within ``1 + |g|`` per element, so the signs' running mean is the
    gradient and each step adds a +-lr dither per element. A small rate
    makes the mean's progress too slow, a large one the dither too big. On
    the digits check (2 ranks, 600 steps, SGD lr 0.1, momentum 0.9) the
    multipliers 0.003 / 0.01 / 0.03 / 0.1 / 0.3 / 1 reached 41 / 83 / 92 /
    96 / 97.1 / 95.1 % test accuracy (dense: 97.3 %).
    """

    name = "signsgd"
    unbiased = False
    fixed_size = True
    kind = "quantized"
    lr_scale = 0.3

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        return (pack_bits(flat < 0),), self._context(tensor, name)

    def _signs(self, packed: torch.Tensor, ctx: Context) -> torch.Tensor:
        neg = unpack_bits(packed, ctx.numel)
        work = torch.float64 if ctx.dtype == torch.float64 else torch.float32
        return 1.0 - 2.0 * neg.to(work)

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        return self._signs(payload[0], ctx).to(ctx.dtype).reshape(ctx.shape)
