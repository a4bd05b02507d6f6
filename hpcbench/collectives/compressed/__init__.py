"""Compressed collectives: sparse, quantized and low-rank (PowerSGD) allreduce.

``compressed_allreduce(tensor, name, compressor, memory)`` returns the **sum**
over ranks of each rank's decompressed contribution (divide by the world size
for a mean); ``icompressed_allreduce`` is the nonblocking form, returning a
request with ``test()`` and ``wait()``. Bytes move only through a
:class:`~hpcbench.collectives.transport.Transport` (pass a
:class:`~hpcbench.collectives.linkmodel.LinkTransport` to model a network).

Which communicator runs is chosen by ``compressor.kind`` (the compressor's
communication pattern) in the registry :data:`COMMUNICATORS`; an unknown
pattern raises ``ValueError``:

``dense``          ring allreduce of the tensor (``none``)
``sparse``         allgather of ``(indices, values)`` + scatter-add
                   (``algorithm="allgather"``, default) or sparse ring
                   reduce-scatter/allgather (``algorithm="ring"``)
``shared_sparse``  ring allreduce of the values only (``randomk``)
``quantized``      allgather of payloads, decode each, sum in rank order
``lowrank``        PowerSGD's P then Q allreduce

A new pattern is one generator function and one line in :data:`COMMUNICATORS`.

For the sparse kinds ``output="sparse"`` returns a
:class:`~hpcbench.collectives.compressed.sparse_sum.SparseSum` instead of a
dense tensor (no pass over the whole tensor; ``to_dense()`` gives bitwise the
dense result). ``profile=`` takes a
:class:`~hpcbench.collectives.compressed.profile.PhaseProfile` that receives
the wall and CPU time of the encode and decode phases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generator

import torch
from mpi4py import MPI

from hpcbench.collectives.compressed._engine import (CompressedRequest, get_transport, next_tag,
                                                     ring_allreduce)
from hpcbench.collectives.compressed.powersgd import powersgd_gen
from hpcbench.collectives.compressed.profile import PhaseProfile
from hpcbench.collectives.compressed.quantized import quantized_allgather_gen
from hpcbench.collectives.compressed.sparse import (shared_sparse_gen, sparse_allgather_gen,
                                                    sparse_ring_gen)
from hpcbench.collectives.compressed.sparse_sum import SparseSum
from hpcbench.collectives.transport import Transport
from hpcbench.compress.base import Compressor
from hpcbench.compress.memory import Memory, NoMemory
from hpcbench.runtime.registry import Registry

__all__ = ["compressed_allreduce", "icompressed_allreduce", "dense_allreduce", "idense_allreduce",
           "CompressedRequest", "ALGORITHMS", "OUTPUTS", "SparseSum", "PhaseProfile", "Communicator",
           "COMMUNICATORS", "communicator_for"]

ALGORITHMS = ("auto", "allgather", "ring")
OUTPUTS = ("dense", "sparse")


def _encode(tensor, name, compressor, memory, profile):
    """Error feedback + compression (timed as ``encode``); returns payload, ctx, the memory update."""
    stamp = PhaseProfile.start()
    acc, payload, ctx = memory.compress(tensor, name, compressor)
    if profile is not None:
        profile.stop("encode", stamp)

    def update_memory():
        t0 = PhaseProfile.start()
        memory.update(acc, name, compressor, payload, ctx)
        if profile is not None:
            profile.stop("encode", t0)

    return payload, ctx, update_memory


def _dense(tr, tag, tensor, name, compressor, memory, algorithm, out, output, profile):
    payload, ctx, update_memory = _encode(tensor, name, compressor, memory, profile)
    update_memory()
    return (yield from ring_allreduce(tr, tag, payload[0].to(ctx.dtype)))


def _sparse(tr, tag, tensor, name, compressor, memory, algorithm, out, output, profile):
    payload, ctx, update_memory = _encode(tensor, name, compressor, memory, profile)
    if algorithm != "ring":
        # the residual update overlaps the first block's time on the wire
        return (yield from sparse_allgather_gen(tr, tag, payload, ctx, compressor.fixed_size, out,
                                                output, profile, on_posted=update_memory))
    update_memory()   # every residual update leaves the payload tensors intact
    return (yield from sparse_ring_gen(tr, tag, payload, ctx, output))


def _shared_sparse(tr, tag, tensor, name, compressor, memory, algorithm, out, output, profile):
    payload, ctx, update_memory = _encode(tensor, name, compressor, memory, profile)
    update_memory()
    return (yield from shared_sparse_gen(tr, tag, payload, ctx, compressor, output))


def _quantized(tr, tag, tensor, name, compressor, memory, algorithm, out, output, profile):
    payload, ctx, update_memory = _encode(tensor, name, compressor, memory, profile)
    update_memory()
    return (yield from quantized_allgather_gen(tr, tag, payload, ctx, compressor))


def _lowrank(tr, tag, tensor, name, compressor, memory, algorithm, out, output, profile):
    acc = memory.compensate(tensor, name)
    return (yield from powersgd_gen(tr, tag, acc, name, compressor, memory))


@dataclass(frozen=True)
class Communicator:
    """How payloads of one communication pattern move and combine.

    Attributes
    ----------
    run : callable
        Generator function ``run(tr, tag, tensor, name, compressor, memory,
        algorithm, out, output, profile)`` that encodes (with error
        feedback), communicates and returns the sum over ranks (flat tensor,
        or :class:`SparseSum` when ``output="sparse"``).
    sparse_output : bool
        Whether it can return a :class:`SparseSum` (``output="sparse"``).
    """

    run: Callable[..., Generator]
    sparse_output: bool = False


#: communication pattern (``Compressor.kind``) -> communicator
COMMUNICATORS: Registry[Communicator] = Registry("communication pattern", {
    "dense": Communicator(_dense),
    "sparse": Communicator(_sparse, sparse_output=True),
    "shared_sparse": Communicator(_shared_sparse, sparse_output=True),
    "quantized": Communicator(_quantized),
    "lowrank": Communicator(_lowrank),
})


def communicator_for(compressor: Compressor) -> Communicator:
    """The communicator of ``compressor.kind``.

    Raises
    ------
    ValueError
        If no communicator is registered for that pattern (the message lists the known ones).
    """
    try:
        return COMMUNICATORS[compressor.kind]
    except KeyError:
        raise ValueError(f"compressor {compressor.name!r} has communication pattern "
                         f"{compressor.kind!r}; no communicator for it (known: "
                         f"{', '.join(COMMUNICATORS)})") from None


def _gen(tensor, name, compressor, memory, tr, tag, algorithm, out=None, output="dense",
         profile=None):
    result = yield from communicator_for(compressor).run(tr, tag, tensor, name, compressor, memory,
                                                         algorithm, out, output, profile)
    if output != "sparse":
        result = result.view(tensor.shape)
    if output == "sparse" or out is None or result.data_ptr() == out.data_ptr():
        return result
    out.copy_(result)
    return out


def icompressed_allreduce(tensor: torch.Tensor, name: str, compressor: Compressor,
                          memory: Memory | None = None, transport: Transport | None = None,
                          comm: MPI.Comm | None = None, algorithm: str = "auto",
                          out: torch.Tensor | None = None, output: str = "dense",
                          profile: PhaseProfile | None = None) -> CompressedRequest:
    """Start a compressed allreduce (sum); returns a request whose ``wait()`` gives the result.

    Parameters
    ----------
    tensor : torch.Tensor
        This rank's contribution, any shape, floating dtype (same shape on all ranks).
    name : str
        Tensor name: key of the compressor's and the memory's per-tensor state.
    compressor : Compressor
        From :func:`hpcbench.compress.create`.
    memory : Memory, optional
        Error feedback (:class:`~hpcbench.compress.memory.ErrorFeedback`); none if omitted.
    transport : Transport, optional
        How bytes move; default a direct transport on ``comm``.
    comm : mpi4py.MPI.Comm, optional
        Used when ``transport`` is omitted (default ``COMM_WORLD``).
    algorithm : {"auto", "allgather", "ring"}
        Sparse communicator choice (``auto`` = ``allgather``); ignored for other kinds.
    out : torch.Tensor, optional
        Where to write the result (same shape and dtype as ``tensor``); only
        with ``output="dense"``.
    output : {"dense", "sparse"}
        ``"sparse"`` (sparse kinds only: topk, threshold, thresholdv, dgc,
        randomk) returns a :class:`SparseSum` of the per-rank ``(indices,
        values)`` in rank order instead of scatter-adding them into a dense
        tensor; ``result.to_dense()`` is bitwise the ``"dense"`` result.
    profile : PhaseProfile, optional
        Accumulates wall and thread-CPU seconds of the ``encode`` phase (error
        feedback, compression, residual update; not recorded for PowerSGD,
        whose compression is interleaved with its two allreduces) and, for the
        sparse allgather, ``decode``.

    Returns
    -------
    CompressedRequest
        ``wait()`` returns a tensor of ``tensor``'s shape and dtype holding
        ``sum over ranks of decompress(compress(tensor + e))`` (for PowerSGD,
        ``P_hat Q_sum^T``), or that sum as a :class:`SparseSum`.

    Raises
    ------
    ValueError
        Unknown ``algorithm`` or ``output``; ``output="sparse"`` with a
        non-sparse compressor or with ``out``; ``out`` of the wrong shape/dtype.
    TypeError
        If ``compressor`` is not a :class:`Compressor`.

    Notes
    -----
    All ranks must start compressed collectives on one transport in the same
    order. Progress is made inside ``test()``/``wait()``.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if not isinstance(compressor, Compressor):
        raise TypeError(f"compressor must be a Compressor, got {type(compressor).__name__}")
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    communicator = communicator_for(compressor)
    if output == "sparse" and not communicator.sparse_output:
        sparse = tuple(k for k, c in COMMUNICATORS.items() if c.sparse_output)
        raise ValueError(f"output='sparse' needs a sparse compressor (kind in {sparse}), "
                         f"{compressor.name!r} has kind {compressor.kind!r}")
    if output == "sparse" and out is not None:
        raise ValueError("out is only used with output='dense'")
    tr = get_transport(transport, comm)
    if out is not None and (out.shape != tensor.shape or out.dtype != tensor.dtype):
        raise ValueError("out must have the shape and dtype of tensor")
    return CompressedRequest(_gen(tensor, name, compressor, memory or NoMemory(), tr, next_tag(tr),
                                  algorithm, out, output, profile))


def compressed_allreduce(tensor: torch.Tensor, name: str, compressor: Compressor,
                         memory: Memory | None = None, transport: Transport | None = None,
                         comm: MPI.Comm | None = None, algorithm: str = "auto",
                         out: torch.Tensor | None = None, output: str = "dense",
                         profile: PhaseProfile | None = None) -> torch.Tensor | SparseSum:
    """Blocking form of :func:`icompressed_allreduce`; returns the summed tensor (or SparseSum)."""
    return icompressed_allreduce(tensor, name, compressor, memory, transport, comm, algorithm,
                                 out, output, profile).wait()


def idense_allreduce(tensor: torch.Tensor, transport: Transport | None = None,
                     comm: MPI.Comm | None = None) -> CompressedRequest:
    """Nonblocking uncompressed ring allreduce (sum) over the same engine (baseline)."""
    tr = get_transport(transport, comm)

    def gen():
        out = yield from ring_allreduce(tr, next_tag_value, tensor.reshape(-1))
        return out.view(tensor.shape)

    next_tag_value = next_tag(tr)
    return CompressedRequest(gen())


def dense_allreduce(tensor: torch.Tensor, transport: Transport | None = None,
                    comm: MPI.Comm | None = None) -> torch.Tensor:
    """Blocking uncompressed ring allreduce (sum)."""
    return idense_allreduce(tensor, transport, comm).wait()
