"""QSGD stochastic quantization (Alistarh et al., 2017)."""

from __future__ import annotations

import torch

from hpcbench.compress._bits import float_input
from hpcbench.compress.base import Compressor, Context, Payload, as_flat, rounding_generator

__all__ = ["QSGDCompressor"]


class QSGDCompressor(Compressor):
    """Quantize ``x / ||x||_2`` to ``s`` levels with stochastic rounding.

    Alistarh et al., "QSGD: Communication-Efficient SGD via Gradient
    Quantization and Encoding" (NeurIPS 2017): element ``i`` becomes
    ``||x||_2 * sign(x_i) * l_i / s`` with ``l_i = floor(r_i) + Bernoulli(r_i -
    floor(r_i))``, ``r_i = s |x_i| / ||x||_2``, so ``E[decoded] = x`` (unbiased).
    Payload ``(norm float32 (1,), codes int8 (numel,))`` holding ``sign * l``
    (no Elias coding: one byte per element, ``s <= 127``).

    Parameters
    ----------
    levels : int, default 127
        Number of positive levels ``s``, in [1, 127].
    seed : int or None
        Seed of this rank's rounding generator (give each rank its own).
    """

    name = "qsgd"
    unbiased = True
    fixed_size = True
    kind = "quantized"
    seeded = True
    #: contractive only with levels > sqrt(d) (d = 4096 for the check's first layer)
    ef_options = {"levels": 127}

    def __init__(self, levels: int = 127, seed: int | None = None) -> None:
        super().__init__()
        if int(levels) != levels or not 1 <= levels <= 127:
            raise ValueError(f"levels must be an integer in [1, 127], got {levels!r}")
        self.levels = int(levels)
        self.generator = rounding_generator(seed)

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = float_input(as_flat(tensor))
        ctx = self._context(tensor, name)
        norm = flat.norm(2) if flat.numel() else flat.new_zeros(())
        if float(norm) == 0.0:
            return (norm.float().reshape(1), torch.zeros(ctx.numel, dtype=torch.int8)), ctx
        r = flat.abs() / norm * self.levels
        low = r.floor()
        level = low + (torch.rand(r.shape, generator=self.generator, dtype=r.dtype) < (r - low)).to(r.dtype)
        level.clamp_(max=self.levels)
        codes = (level * flat.sign()).to(torch.int8)
        return (norm.float().reshape(1), codes), ctx

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        norm, codes = payload
        work = torch.float64 if ctx.dtype == torch.float64 else torch.float32
        out = codes.to(work) * (norm.to(work) / self.levels)
        return out.to(ctx.dtype).reshape(ctx.shape)

    def __repr__(self) -> str:
        return f"QSGDCompressor(levels={self.levels})"
