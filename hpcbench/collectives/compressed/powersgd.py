"""PowerSGD communicator: drives the P and Q allreduces of a PowerSGD step."""

from __future__ import annotations

import torch

from hpcbench.collectives.compressed._engine import ring_allreduce
from hpcbench.collectives.transport import Transport
from hpcbench.compress.memory import Memory, NoMemory
from hpcbench.compress.powersgd import PowerSGDCompressor

__all__ = ["powersgd_gen"]


def powersgd_gen(tr: Transport, tag: int, acc: torch.Tensor, name: str,
                 compressor: PowerSGDCompressor, memory: Memory | None):
    """Generator: one PowerSGD step on ``acc`` (already error-compensated).

    ``P = M Q`` -> allreduce -> orthogonalise -> ``Q_local = M^T P_hat`` ->
    allreduce -> ``P_hat Q_sum^T``. Error feedback stores
    ``acc - P_hat Q_local^T`` (this rank's own contribution). Tensors that
    PowerSGD leaves dense are ring-allreduced as they are. Returns the flat
    sum over ranks.
    """
    memory = memory or NoMemory()
    payload, ctx = compressor.compress(acc, name)
    if ctx.extra["mode"] == "dense":
        memory.update(acc, name, compressor, payload, ctx)
        out = yield from ring_allreduce(tr, tag, payload[0])
        return out
    p_sum = yield from ring_allreduce(tr, tag, payload[0])
    p_hat = compressor.orthogonalize(p_sum, ctx)
    q_local = compressor.project(p_hat, ctx)
    memory.update(acc, name, compressor, (p_hat, q_local), ctx)
    q_sum = yield from ring_allreduce(tr, tag + 2, q_local)
    return compressor.finish(p_hat, q_sum, ctx).reshape(-1)
