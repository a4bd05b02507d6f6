"""TernGrad ternary quantization (Wen et al., 2017)."""

from __future__ import annotations

import torch

from hpcbench.compress._bits import float_input, pack_2bit, unpack_2bit
from hpcbench.compress.base import Compressor, Context, Payload, as_flat, rounding_generator

__all__ = ["TernGradCompressor"]


class TernGradCompressor(Compressor):
    """Stochastic ternarization ``s * sign(x_i) * b_i``, ``b_i ~ Bernoulli(|x_i| / s)``.

    Wen et al., "TernGrad: Ternary Gradients to Reduce Communication in
    Distributed Deep Learning" (NeurIPS 2017), with ``s = max_i |x_i|``
    (per tensor, no gradient clipping), so ``E[decoded] = x`` (unbiased).
    Payload ``(scale float32 (1,), codes uint8 (ceil(numel / 4),))``: 2 bits
    per element.

    Parameters
    ----------
    seed : int or None
        Seed of this rank's rounding generator.
    """

    name = "terngrad"
    unbiased = True
    fixed_size = True
    kind = "quantized"
    seeded = True

    def __init__(self, seed: int | None = None) -> None:
        super().__init__()
        self.generator = rounding_generator(seed)

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = float_input(as_flat(tensor))
        ctx = self._context(tensor, name)
        scale = flat.abs().max() if flat.numel() else flat.new_zeros(())
        if float(scale) == 0.0:
            codes = torch.ones(ctx.numel, dtype=torch.uint8)
        else:
            b = torch.rand(flat.shape, generator=self.generator, dtype=flat.dtype) < flat.abs() / scale
            codes = (flat.sign() * b.to(flat.dtype) + 1).to(torch.uint8)
        return (scale.float().reshape(1), pack_2bit(codes)), ctx

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        scale, packed = payload
        work = torch.float64 if ctx.dtype == torch.float64 else torch.float32
        t = unpack_2bit(packed, ctx.numel).to(work) - 1
        return (t * scale.to(work)).to(ctx.dtype).reshape(ctx.shape)
