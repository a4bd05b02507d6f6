"""Quantized allreduce: allgather opaque payloads, decode every rank's, sum."""

from __future__ import annotations

import torch

from hpcbench.collectives.compressed._engine import (aligned, allgather_sizes, pack, ring_allgatherv,
                                                     unpack)
from hpcbench.collectives.transport import Transport

__all__ = ["quantized_allgather_gen"]


def quantized_allgather_gen(tr: Transport, tag: int, payload, ctx, compressor):
    """Generator: ``sum_r compressor.decompress(payload_r, ctx)`` (summed in rank order).

    The payloads travel packed into one byte buffer per rank through a ring
    allgather (sizes exchanged first unless ``compressor.fixed_size``).
    Returns a flat tensor of ``ctx.numel`` elements in ``ctx.dtype``.
    """
    buf, sizes = pack(payload)
    if compressor.fixed_size or tr.world_size == 1:
        all_sizes = [sizes] * tr.world_size
    else:
        all_sizes = yield from allgather_sizes(tr, tag + 2, sizes)
    nbytes = [sum(aligned(s) for s in ss) if len(ss) > 1 else ss[0] for ss in all_sizes]
    blocks = yield from ring_allgatherv(tr, tag, buf, nbytes)
    work = torch.float64 if ctx.dtype == torch.float64 else torch.float32
    out = torch.zeros(ctx.numel, dtype=work)
    for b, ss in zip(blocks, all_sizes):
        out += compressor.decompress(unpack(b, ss, payload), ctx).reshape(-1).to(work)
    return out.to(ctx.dtype)
