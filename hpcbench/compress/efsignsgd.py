"""Scaled sign compression of EF-signSGD (Karimireddy et al., 2019)."""

from __future__ import annotations

import torch

from hpcbench.compress._bits import float_input, pack_bits
from hpcbench.compress.base import Context, Payload, as_flat
from hpcbench.compress.signsgd import SignSGDCompressor

__all__ = ["EFSignSGDCompressor"]


class EFSignSGDCompressor(SignSGDCompressor):
    """``(||x||_1 / d) * sign(x)``, the compressor of EF-signSGD.

    Karimireddy et al., "Error Feedback Fixes SignSGD and other Gradient
    Compression Schemes" (ICML 2019); ``d = numel``; ``sign(0) = +1``. Meant
    to be used with error feedback (:class:`hpcbench.compress.memory.ErrorFeedback`).
    Payload ``(scale float32 (1,), bits uint8 (ceil(numel / 8),))``.

    Learning rate (``lr_scale = 0.5``). The decoded update keeps the
    gradient's l1 mass but moves it all onto +-mean|x|: coordinates with
    small gradients get steps as large as the mean, which lets the digits
    check diverge at SGD's rate (23.6 % at x1.0, 97.6 % at x0.5; dense 97.3 %).
    """

    name = "efsignsgd"
    lr_scale = 0.5

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = float_input(as_flat(tensor))
        scale = (flat.abs().sum() / flat.numel()) if flat.numel() else flat.new_zeros(())
        return (scale.float().reshape(1), pack_bits(flat < 0)), self._context(tensor, name)

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        scale, packed = payload
        signs = self._signs(packed, ctx)
        return (signs * scale.to(signs.dtype)).to(ctx.dtype).reshape(ctx.shape)
