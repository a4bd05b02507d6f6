"""StellaTrain's cache-aware block variant of threshold-v (16-float blocks)."""

from __future__ import annotations

import math

import numpy as np
import torch

from hpcbench.compress._sparse import index_dtype
from hpcbench.compress.base import Compressor, Context, Payload, as_flat, check_ratio
from hpcbench.compress.thresholdv import AdaptiveThreshold

__all__ = ["BlockThresholdCompressor"]


class BlockThresholdCompressor(Compressor):
    """Select whole blocks of ``block`` consecutive elements by their L1 norm.

    StellaTrain's *thresholdv16*: the flattened tensor (zero-padded to a
    multiple of ``block``) is cut into blocks of 16 floats (one 64-byte cache
    line), each scored by its L1 norm; exactly ``kb = ceil(k / block)`` blocks
    are kept with the step-adapted threshold of :class:`AdaptiveThreshold`.
    Payload ``(block_indices int32/int64 (kb,), values (kb * block,))``; the
    wire carries one index per 16 values.

    Parameters
    ----------
    ratio : float, default 0.01
        Fraction of elements **kept**, in (0, 1] (rounded up to whole blocks).
    block : int, default 16
        Elements per block, >= 1.
    """

    name = "blockthreshold"
    unbiased = False
    fixed_size = True
    kind = "quantized"
    takes_ratio = True
    approximates_topk = True
    ef_options = {"ratio": 0.05}

    def __init__(self, ratio: float = 0.01, block: int = 16, decrease: float = 0.01,
                 margin: float = 0.02, trim: str = "topk") -> None:
        super().__init__()
        self.ratio = check_ratio(ratio)
        if int(block) != block or block < 1:
            raise ValueError(f"block must be an integer >= 1, got {block!r}")
        self.block = int(block)
        self.selector = AdaptiveThreshold(decrease=decrease, margin=margin, trim=trim)

    def _blocks(self, numel: int) -> tuple[int, int]:
        nb = -(-numel // self.block)
        kb = 0 if numel == 0 else min(nb, max(1, math.ceil(self.ratio * numel / self.block - 1e-9)))
        return nb, kb

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        ctx = self._context(tensor, name)
        nb, kb = self._blocks(ctx.numel)
        padded_n = nb * self.block
        x = flat if flat.dtype in (torch.float32, torch.float64) else flat.float()
        if padded_n != ctx.numel:
            x = torch.cat([x, x.new_zeros(padded_n - ctx.numel)])
        xb = x.numpy().reshape(nb, self.block)
        scores = np.abs(xb).sum(axis=1)
        bidx = self.selector.select(scores, kb, name)
        values = torch.from_numpy(xb[bidx].reshape(-1)).to(ctx.dtype)
        return (torch.from_numpy(bidx).to(index_dtype(nb)), values.contiguous()), ctx

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        bidx, values = payload
        nb, _ = self._blocks(ctx.numel)
        out = torch.zeros(nb, self.block, dtype=ctx.dtype)
        if bidx.numel():
            out[bidx.long()] = values.to(ctx.dtype).view(-1, self.block)
        return out.view(-1)[:ctx.numel].reshape(ctx.shape)

    def residual(self, acc, payload, ctx):
        bidx, values = payload
        nb, _ = self._blocks(ctx.numel)
        flat = acc.contiguous().view(-1)
        if not bidx.numel():
            return flat.view(ctx.shape)
        pos = (bidx.long().view(-1, 1) * self.block + torch.arange(self.block)).view(-1)
        keep = pos < ctx.numel
        pos, vals = pos[keep], values.to(flat.dtype)[keep]
        flat[pos] = flat[pos] - vals
        return flat.view(ctx.shape)

    def __repr__(self) -> str:
        return f"BlockThresholdCompressor(ratio={self.ratio}, block={self.block})"
