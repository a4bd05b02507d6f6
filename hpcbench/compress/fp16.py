"""Half-precision (IEEE binary16) casting compressor."""

from __future__ import annotations

import torch

from hpcbench.compress.base import Compressor, Context, Payload, as_flat

__all__ = ["FP16Compressor"]


class FP16Compressor(Compressor):
    """Cast to ``torch.float16`` on the wire (2 bytes per element).

    Deterministic round-to-nearest-even, hence biased; values beyond the
    float16 range (|x| > 65504) become ``inf``. A float16 input travels
    unchanged (exact round trip).
    """

    name = "fp16"
    unbiased = False
    fixed_size = True
    kind = "quantized"
    wire_dtype = torch.float16

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        return (flat.to(self.wire_dtype).contiguous(),), self._context(tensor, name)

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        return payload[0].to(ctx.dtype).reshape(ctx.shape)
