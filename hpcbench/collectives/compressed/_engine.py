"""Progress engine and ring primitives of the compressed collectives.

Each algorithm is a generator that posts messages through a
:class:`~hpcbench.collectives.transport.Transport` and yields the list of
requests it must wait for; its return value is the result. A
:class:`CompressedRequest` drives one generator: progress happens inside
``test()`` and ``wait()`` (no thread), and ``wait()`` sleeps with backoff.
"""

from __future__ import annotations

from typing import Generator, Sequence

import numpy as np
import torch
from mpi4py import MPI

from hpcbench.collectives._core import context_for
from hpcbench.collectives.transport import Transport
from hpcbench.runtime.wait import Backoff

__all__ = ["CompressedRequest", "next_tag", "get_transport", "ring_allgatherv", "ring_allreduce",
           "pack", "unpack", "run", "aligned"]


def get_transport(transport: Transport | None, comm: MPI.Comm | None) -> Transport:
    """``transport`` if given, else a direct :class:`Transport` on ``comm`` (default COMM_WORLD)."""
    if transport is not None:
        return transport
    return Transport(comm if comm is not None else MPI.COMM_WORLD)


def next_tag(tr: Transport) -> int:
    """Base tag of the next compressed collective on ``tr`` (same sequence on every rank).

    Taken from the compressed range of the communicator's shared tag space
    (:class:`hpcbench.collectives.tags.TagSpace`), disjoint from the dense
    collectives' tags and bounded by ``MPI.TAG_UB``. Counted per communicator,
    so transports built on the same communicator never reuse a live tag.
    Every rank must start compressed collectives on one communicator in the
    same order; each call owns ``COMPRESSED_STRIDE`` (8) consecutive tags.
    """
    return context_for(tr.comm).tags.block()


class CompressedRequest:
    """Handle of an outstanding compressed collective (``test()``, ``wait()``).

    Attributes
    ----------
    result : torch.Tensor or None
        The reduced tensor, once complete.
    """

    def __init__(self, gen: Generator) -> None:
        self._gen = gen
        self._pending: Sequence = []
        self._done = False
        self.result = None
        self._advance()

    def _advance(self) -> None:
        while not self._done:
            for q in self._pending:
                if not q.test():
                    return
            try:
                self._pending = next(self._gen)
            except StopIteration as stop:
                self.result = stop.value
                self._done = True

    def test(self) -> bool:
        """Make progress; True once complete (never blocks on the network)."""
        self._advance()
        return self._done

    def wait(self, backoff: Backoff | None = None):
        """Complete the operation, sleeping between polls; returns :attr:`result`."""
        backoff = backoff or Backoff(spin=16, max_s=5e-4)
        while not self.test():
            backoff.pause()
        return self.result


def run(gen: Generator):
    """Drive ``gen`` to completion (blocking form); returns its value."""
    return CompressedRequest(gen).wait()


def _u8(a) -> np.ndarray:
    """Raw bytes of a contiguous tensor or array as a flat uint8 numpy array."""
    if isinstance(a, torch.Tensor):
        a = a.contiguous()
        return a.view(torch.uint8).reshape(-1).numpy() if a.numel() else np.zeros(0, np.uint8)
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape(-1)


def aligned(n: int) -> int:
    """``n`` rounded up to a multiple of 8 (payload parts start 8-byte aligned)."""
    return (n + 7) // 8 * 8


def pack(payload: Sequence[torch.Tensor]) -> tuple[np.ndarray, list[int]]:
    """Payload tensors -> one uint8 buffer (each part 8-byte aligned) and the parts' byte sizes."""
    sizes = [t.numel() * t.element_size() for t in payload]
    if len(payload) == 1:
        return _u8(payload[0]), sizes
    buf = np.zeros(sum(aligned(s) for s in sizes), np.uint8)
    off = 0
    for t, s in zip(payload, sizes):
        buf[off:off + s] = _u8(t)
        off += aligned(s)
    return buf, sizes


def unpack(buf: np.ndarray, sizes: Sequence[int], like: Sequence[torch.Tensor]) -> tuple:
    """Inverse of :func:`pack`, taking dtypes from ``like`` (this rank's own payload)."""
    out, off = [], 0
    for s, t in zip(sizes, like):
        part = torch.from_numpy(buf[off:off + s]) if s else torch.zeros(0, dtype=torch.uint8)
        out.append(part.view(t.dtype))
        off += aligned(s) if len(sizes) > 1 else s
    return tuple(out)


def ring_allgatherv(tr: Transport, tag: int, mine: np.ndarray, nbytes: Sequence[int],
                    during_first_step=None, on_receive=None):
    """Generator: ring allgather of variable-size byte blocks with known sizes.

    ``P - 1`` steps; at step ``s`` rank ``r`` forwards block ``r - s`` to
    ``r + 1`` and receives block ``r - s - 1`` from ``r - 1``. Returns the list
    of every rank's block (uint8 arrays, own block is ``mine``).
    ``during_first_step``, if given, is called exactly once: as soon as the
    first step's messages are posted (work that overlaps their time on the
    wire), or at once at ``P == 1``, where nothing is sent. ``on_receive(i, block)``, if given, is called once for each
    received block (read-only), as soon as the next step's messages are
    posted, so that decoding block ``i`` overlaps the next step on the wire
    (the last block's call follows the last step).
    """
    P, r = tr.world_size, tr.rank
    blocks = [mine if i == r else np.empty(int(nbytes[i]), np.uint8) for i in range(P)]
    right, left = (r + 1) % P, (r - 1) % P
    if P == 1 and during_first_step is not None:
        during_first_step()
    arrived = None
    for s in range(P - 1):
        send_i, recv_i = (r - s) % P, (r - s - 1) % P
        reqs = [tr.irecv(blocks[recv_i], left, tag), tr.isend(blocks[send_i], right, tag)]
        if s == 0 and during_first_step is not None:
            during_first_step()
        if arrived is not None and on_receive is not None:
            on_receive(arrived, blocks[arrived])
        arrived = recv_i
        yield reqs
    if arrived is not None and on_receive is not None:
        on_receive(arrived, blocks[arrived])
    return blocks


def allgather_sizes(tr: Transport, tag: int, sizes: Sequence[int]):
    """Generator: every rank's list of part sizes (fixed count of int64 each)."""
    mine = np.asarray(sizes, dtype=np.int64)
    blocks = yield from ring_allgatherv(tr, tag, mine.view(np.uint8), [mine.nbytes] * tr.world_size)
    return [b.view(np.int64).tolist() for b in blocks]


def ring_allreduce(tr: Transport, tag: int, x: torch.Tensor):
    """Generator: ring allreduce (sum) of a flat tensor; returns a new tensor.

    Reduce-scatter then allgather over ``P`` near-equal segments; each rank
    sends ``2 (P - 1) / P`` of the data.
    """
    P, r = tr.world_size, tr.rank
    out = x.detach().clone().contiguous().view(-1)
    if P == 1 or out.numel() == 0:
        return out
    a = out.numpy() if out.dtype not in (torch.bfloat16,) else None
    if a is None:
        raise TypeError("ring_allreduce: bfloat16 sums are not supported; cast first")
    bounds = np.linspace(0, a.shape[0], P + 1).astype(np.int64)
    seg = [a[bounds[i]:bounds[i + 1]] for i in range(P)]
    tmp = np.empty(max(s.shape[0] for s in seg), a.dtype)
    right, left = (r + 1) % P, (r - 1) % P
    for s in range(P - 1):
        send_i, recv_i = (r - s) % P, (r - s - 1) % P
        rbuf = tmp[:seg[recv_i].shape[0]]
        yield [tr.irecv(rbuf, left, tag), tr.isend(seg[send_i], right, tag)]
        seg[recv_i] += rbuf
    for s in range(P - 1):
        send_i, recv_i = (r + 1 - s) % P, (r - s) % P
        yield [tr.irecv(seg[recv_i], left, tag + 1), tr.isend(seg[send_i], right, tag + 1)]
    return out
