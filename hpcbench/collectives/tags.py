"""MPI tag allocation: one tag space per communicator, split into disjoint families.

Two families of collectives post point-to-point messages on the same
communicator and must never match each other's messages:

``dense``
    :mod:`hpcbench.collectives.api` and :mod:`hpcbench.collectives.averaging`.
    One tag per operation, a CRC-32 hash of the operation's name and of how
    many operations of that name this rank has started (ranks may start
    differently named operations in different orders and still agree).
``slots``
    :data:`SLOTS` tags for unnamed nonblocking allreduces of small numpy
    buffers (:mod:`hpcbench.collectives.slots`): the ``k``-th such call of a
    rank takes slot ``k % SLOTS``, so every rank agrees, and a slot's
    persistent requests are built once.
``blocking``
    One tag, shared by every unnamed blocking allreduce over the plain
    transport (:mod:`hpcbench.collectives.persistent`): those are matched
    by call order, as MPI's own blocking collectives, so their persistent
    requests can be built once.
``compressed``
    :mod:`hpcbench.collectives.compressed`. A block of consecutive tags per
    operation, handed out in call order (every rank starts compressed
    collectives in the same order).

The tags ``0 .. tag_ub`` (``tag_ub`` is the communicator's ``MPI.TAG_UB``,
at least 32767 by the MPI standard) are cut into fixed ranges, one per family,
from ``tag_ub`` alone, so every rank computes the same ranges. Tag 0 is left
to user point-to-point code. Each family only ever returns tags inside its own
range (checked on every allocation), so two families can never share a tag;
inside the ``dense`` family two outstanding operations may still collide
through the hash, with probability about ``k**2 / (2 * len(range))`` for
``k`` outstanding operations.
"""

from __future__ import annotations

import threading
import zlib

__all__ = ["MIN_TAG_UB", "COMPRESSED_STRIDE", "SLOTS", "TagSpace"]

#: the smallest ``MPI.TAG_UB`` the MPI standard allows
MIN_TAG_UB = 32767
#: tags owned by one compressed collective (its base tag and the next ones)
COMPRESSED_STRIDE = 8
#: tags of the ``slots`` family (nonblocking allreduces outstanding at once before the next waits
#: for a slot, :mod:`hpcbench.collectives.slots`)
SLOTS = 8


class TagSpace:
    """Disjoint tag ranges per family on one communicator, and the allocators.

    Parameters
    ----------
    tag_ub : int
        The communicator's ``MPI.TAG_UB`` (largest valid tag), >= 32767.

    Attributes
    ----------
    dense : range
        Tags of the dense collectives: ``[1, split - 1 - SLOTS)``, three quarters of the space
        less the slots.
    slots : range
        The :data:`SLOTS` tags ``[split - 1 - SLOTS, split - 1)``.
    blocking : int
        The tag of unnamed blocking allreduces, ``split - 1``.
    compressed : range
        Tags of the compressed collectives: ``[split, tag_ub]``, a multiple of
        :data:`COMPRESSED_STRIDE` long.

    Raises
    ------
    ValueError
        If ``tag_ub`` is below :data:`MIN_TAG_UB`.
    """

    def __init__(self, tag_ub: int) -> None:
        tag_ub = int(tag_ub)
        if tag_ub < MIN_TAG_UB:
            raise ValueError(f"tag_ub: MPI guarantees at least {MIN_TAG_UB}, got {tag_ub}")
        self.tag_ub = tag_ub
        blocks = (tag_ub + 1) // 4 // COMPRESSED_STRIDE
        split = tag_ub + 1 - blocks * COMPRESSED_STRIDE
        self.dense = range(1, split - 1 - SLOTS)
        self.slots = range(split - 1 - SLOTS, split - 1)
        self.blocking = split - 1
        self._dense_start, self._dense_len = 1, split - 2 - SLOTS     # of `dense`, read per call
        self.compressed = range(split, tag_ub + 1)
        self._blocks = blocks
        self._named: dict[str, int] = {}
        self._next_block = 0
        self._lock = threading.Lock()

    def named(self, name: str | None) -> int:
        """Dense-family tag of the next operation called ``name`` (``None``: unnamed).

        ``dense.start + crc32(f"{name}#{k}") % len(dense)``, where ``k`` counts the
        operations of that name this rank started before; all ranks start the
        operations of one name in the same order, so they derive the same tag.
        """
        key = "" if name is None else str(name)
        with self._lock:
            k = self._named.get(key, 0)
            self._named[key] = k + 1
        return self._dense_start + zlib.crc32(f"{key}#{k}".encode()) % self._dense_len

    def block(self) -> int:
        """Base tag of the next compressed collective, which owns
        ``base .. base + COMPRESSED_STRIDE - 1`` (all inside :attr:`compressed`).

        Blocks are handed out in call order and wrap around after
        ``len(compressed) // COMPRESSED_STRIDE`` calls (at least 1024), so at
        most that many compressed collectives may be outstanding at once.
        """
        with self._lock:
            s = self._next_block
            self._next_block = (s + 1) % self._blocks
        base = self.compressed.start + s * COMPRESSED_STRIDE
        assert base in self.compressed and base + COMPRESSED_STRIDE - 1 in self.compressed
        return base

    def family(self, tag: int) -> str | None:
        """``"dense"``, ``"slots"``, ``"blocking"``, ``"compressed"`` or None (tag 0 / out of range):
        who owns ``tag``."""
        if tag in self.dense:
            return "dense"
        if tag in self.slots:
            return "slots"
        if tag == self.blocking:
            return "blocking"
        if tag in self.compressed:
            return "compressed"
        return None
