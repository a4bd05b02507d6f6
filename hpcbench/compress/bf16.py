"""bfloat16 casting compressor."""

from __future__ import annotations

import torch

from hpcbench.compress.fp16 import FP16Compressor

__all__ = ["BF16Compressor"]


class BF16Compressor(FP16Compressor):
    """Cast to ``torch.bfloat16`` on the wire (2 bytes per element).

    Keeps float32's exponent range (no overflow) with an 8-bit significand;
    round-to-nearest-even, hence biased.
    """

    name = "bf16"
    wire_dtype = torch.bfloat16
