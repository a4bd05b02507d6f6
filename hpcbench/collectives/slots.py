"""Tag slots of unnamed nonblocking allreduces: which slot a call takes, and which earlier
call it waits for.

A small nonblocking allreduce posting ``Irecv``/``Isend`` per step cost
twice the time of the same schedule run from persistent requests at 4 ranks
on 2 cores (1 KiB ring ``iallreduce().wait()``: 340-740 us against 290-530
us with persistent requests, docs/collectives.md). Persistent requests fix
their tag, and outstanding nonblocking operations need distinct tags, so
unnamed calls take their tags from a small family
(:attr:`hpcbench.collectives.tags.TagSpace.slots`, :data:`~hpcbench.collectives.tags.SLOTS`
tags) and a :class:`~hpcbench.collectives.persistent.SlotPlan` keeps one
request set per slot.

Which slot. The ``k``-th call on a communicator takes slot ``k % SLOTS``.
Every rank starts its unnamed calls in the same order (the rule for unnamed
operations, :mod:`hpcbench.collectives.api`), so every rank gives a call the
same slot. A rule such as "the first free slot" would not do: a slot is free
on a rank when that rank's earlier call in it completed, which happens at
different times on different ranks.

A busy slot. When call ``k`` starts while call ``k - SLOTS`` (the slot's
previous holder) is still outstanding on this rank, call ``k`` posts nothing
until that one has completed here: two outstanding calls on one tag could
match each other's messages (each call posts later receives ahead,
:func:`~hpcbench.collectives.persistent.post_points`). Falling back to
another tag instead would not do either: whether the slot is still busy
differs between ranks. Waiting is local: the earlier call needs nothing of
call ``k`` to complete, and the progress thread, or a caller waiting for
call ``k``, drives it first. So at most :data:`SLOTS` unnamed small
allreduces move at once; more wait their turn.
"""

from __future__ import annotations

from hpcbench.collectives.tags import SLOTS

__all__ = ["SlotPool"]


class SlotPool:
    """The slot counter and the slots' last holders, on one communicator.

    Attributes
    ----------
    started : int
        Calls given a slot so far.
    """

    __slots__ = ("started", "tags", "_holders")

    def __init__(self, tags) -> None:
        self.started = 0
        self.tags = tags
        self._holders: list = [None] * SLOTS

    def take(self, request_class, plan, *args) -> object:
        """Give the next call its slot: ``request_class(plan, slot, tags[slot], previous,
        *args)`` builds the call's request (``previous`` is the slot's last holder while
        it is still outstanding on this rank, else None; ``tags`` is the slot tag family
        given at construction), which becomes the slot's holder; returns it."""
        slot = self.started % SLOTS
        self.started += 1
        prev = self._holders[slot]
        if prev is not None and prev._done:
            prev = None
        req = self._holders[slot] = request_class(plan, slot, self.tags[slot], prev, *args)
        return req
