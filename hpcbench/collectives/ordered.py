"""Several allreduces in one fixed order, each started once its buffer is marked ready.

The communication half of priority scheduling across the iteration barrier
(Peng et al., "A generic communication scheduler for distributed DNN
training acceleration" (ByteScheduler), SOSP 2019; Jayarajan et al.,
"Priority-based parameter propagation" (P3), MLSys 2019): gradient buckets
are produced by backward in one order (last layers first) but needed by the
next forward in the reverse order, so the runner decides which bucket goes
on the wire next. Every rank must start the same operations in the same
order, and readiness differs between ranks by a little jitter, so the order
is fixed before the step (:func:`hpcbench.train.priority.priority_order`
computes it from the profiled timeline) and this operation only enforces it:
bucket ``order[k + 1]`` starts once bucket ``order[k]`` is complete *and*
``order[k + 1]`` has been marked ready. One bucket is on the wire at a time
(ByteScheduler's credit of one partition; the ring keeps the link busy within
a bucket), so a higher-priority bucket never queues behind more than the one
in flight.

How it differs from ByteScheduler: ByteScheduler decides the order at run
time (the highest-priority ready tensor, agreed through its coordinator);
here the order is decided from the profile before the step, with no
negotiation message. The two agree when the run follows its profile, which an
emulated run does by construction.

The operation is one :class:`hpcbench.collectives.progress.Request` driven by
the progress thread: the next bucket starts the moment the previous one
completes, without waiting for the caller to poll.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np

from hpcbench.collectives.progress import Request, submit, wake

__all__ = ["OrderedAllreduce"]


class _Flag:
    """A request-like object the generator waits on until :meth:`OrderedAllreduce.mark_ready` sets it.

    Its :meth:`not_before` is infinite until then, so a progress thread with
    nothing else to poll sleeps on its condition (woken by
    :func:`hpcbench.collectives.progress.wake`) instead of polling with backoff.
    """

    __slots__ = ("ready",)

    def __init__(self) -> None:
        self.ready = False

    def test(self) -> bool:
        return self.ready

    def not_before(self, now: float) -> float | None:
        return None if self.ready else math.inf


class OrderedAllreduce:
    """Allreduce ``buffers`` in place, one after the other in ``order``, each once marked ready.

    Must be constructed by all ranks of the communicator with the same
    buffer sizes and the same ``order``.

    Parameters
    ----------
    buffers : sequence of numpy.ndarray or torch.Tensor
        1-D contiguous buffers (float32 gradients), reduced in place.
    order : sequence of int
        A permutation of ``range(len(buffers))``: the start order.
    op : {"sum", "avg", "max", "min"}
        Reduction (``"avg"``: the mean over ranks).
    algorithm : str
        hpcbench allreduce algorithm name or ``"auto"`` (chosen per buffer size).
    comm, transport :
        As :func:`hpcbench.collectives.iallreduce` (one of them).
    name : str
        Prefix of each operation's name (``f"{name}{i}"`` for buffer ``i``).
    clock : callable
        ``clock() -> float`` seconds for :attr:`started_at` / :attr:`completed_at`.
    weights : sequence of float, optional
        ``weighted_shards`` only: the shard weights (:func:`hpcbench.collectives.allreduce`).

    Attributes
    ----------
    started_at, completed_at : numpy.ndarray of float64, shape (n,)
        When each buffer's allreduce started and completed on ``clock``
        (NaN until then); written by whichever thread drives the operation.

    Raises
    ------
    ValueError
        If ``order`` is not a permutation of the buffer indices.
    """

    def __init__(self, buffers: Sequence, order: Sequence[int], *, op: str = "avg", algorithm: str = "auto",
                 comm=None, transport=None, name: str = "ordered",
                 clock: Callable[[], float] = time.monotonic, weights=None) -> None:
        n = len(buffers)
        order = [int(i) for i in order]
        if sorted(order) != list(range(n)):
            raise ValueError(f"order: must be a permutation of 0..{n - 1}, got {order!r}")
        self.buffers, self.order, self.clock = list(buffers), order, clock
        self._flags = [_Flag() for _ in range(n)]
        self._done = np.zeros(n, dtype=bool)
        self.started_at = np.full(n, np.nan)
        self.completed_at = np.full(n, np.nan)
        self._kw = dict(op=op, algorithm=algorithm, comm=comm, transport=transport, name=name, weights=weights)
        if algorithm == "auto":
            # "auto" may ask the communicator's host groups, a collective: here, on the caller's thread, and
            # once per communicator, never in the progress engine that starts the allreduces below
            from hpcbench.collectives.api import _resolve
            _resolve(comm, transport)[0].host_groups()
        self._request = submit(Request(self._run(), None, name,
                                       max([b.nbytes for b in self.buffers], default=0)))

    def _run(self):
        from hpcbench.collectives.api import _allreduce_gen

        kw = self._kw
        for i in self.order:
            flag = self._flags[i]
            while not flag.ready:
                yield [flag]
            self.started_at[i] = self.clock()
            buf = self.buffers[i]
            gen, _, _ = _allreduce_gen(buf, buf, kw["op"], kw["algorithm"], False, kw["comm"], kw["transport"],
                                       f"{kw['name']}{i}", None, weights=kw["weights"])
            yield from gen
            self.completed_at[i] = self.clock()
            self._done[i] = True

    def mark_ready(self, i: int) -> None:
        """Buffer ``i`` holds this rank's contribution; it may start when its turn comes."""
        self._flags[i].ready = True
        wake()

    def poll(self) -> None:
        """Advance without blocking (needed only in ``test`` progress mode, where no thread does)."""
        self._request.test()

    def done(self, i: int) -> bool:
        """True once buffer ``i`` holds the result (never blocks; advances in ``test`` progress mode)."""
        if not self._done[i]:
            self._request.test()
        return bool(self._done[i])

    def wait_one(self, i: int) -> None:
        """Sleep until buffer ``i`` holds the result (the buffers before it in ``order`` are then done too).

        Raises
        ------
        RuntimeError
            If buffer ``i`` was never marked ready while everything before it is done (it would wait forever).
        Exception
            Whatever the allreduce raised.
        """
        if self._done[i]:
            return
        if not self._flags[i].ready:
            raise RuntimeError(f"buffer {i}: waited for before mark_ready({i})")
        self._request.wait_until(lambda: self._done[i])
        if not self._done[i]:
            raise RuntimeError(f"buffer {i}: the ordered allreduce ended without it")

    def wait(self) -> None:
        """Sleep until every buffer holds its result (all must have been marked ready)."""
        missing = [i for i, f in enumerate(self._flags) if not f.ready]
        if missing:
            raise RuntimeError(f"buffers {missing}: waited for before mark_ready")
        self._request.wait()
