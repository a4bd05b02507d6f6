"""Nonblocking collectives: the :class:`Request` and the progress engine.

How progress is made
--------------------
Every algorithm is a generator that posts ``Isend``/``Irecv`` through the
transport and yields the requests it must wait for. A nonblocking call starts
the generator in the caller's thread (so the first messages leave at once) and
hands it to a single background *progress thread* per process. That thread
polls ``Test`` on the awaited requests of every outstanding operation, resumes
the generators whose requests have completed (they reduce and post the next
messages), and sleeps with exponential backoff (20 us to 0.5 ms) when nothing
moved, so it costs little CPU on oversubscribed nodes. When every awaited
request knows the earliest time it can complete without polling MPI (link-model
messages, :func:`~hpcbench.collectives._core.not_before`), it sleeps until the
earliest of those instead, so modelled wire time costs no polls.

Why a thread: MPICH only moves data (shared-memory copies, rendezvous
handshakes) inside MPI calls, and our algorithms need Python to reduce between
steps; with progress only inside ``test()`` nothing would happen while the
caller computes in a long ``torch.matmul``. The thread needs
``MPI_THREAD_MULTIPLE`` (mpi4py's default request); matmuls and large numpy
ufuncs release the GIL, so the thread runs concurrently with compute. Where the
MPI library provides less than ``MPI_THREAD_MULTIPLE``, or with the environment
variable ``HPCBENCH_PROGRESS=test``, the engine falls back to progress inside
``test()``/``wait()`` only.

A caller in ``wait()`` does not sleep until the thread is done: it takes the
request's lock and drives the generator itself, waiting like a blocking call
(:func:`~hpcbench.collectives._core.inline_backoff`), while the thread skips
that request. Handing the last steps of a small allreduce to another thread
and sleeping on an event cost a scheduler round trip per wake-up, a time
slice on a loaded node.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Sequence

from mpi4py import MPI

from hpcbench.collectives._core import inline_backoff, next_poll
from hpcbench.runtime.wait import Backoff

__all__ = ["Request", "progress_mode", "wake", "LAZY_BYTES", "HANDOFF_S", "HANDOFF_MAX_S",
           "WATCH_S"]

#: largest request (bytes) handed to a watching progress thread without waking it
LAZY_BYTES = 1 << 20
#: shortest tick of the watching progress thread (idle, or every request it holds driven
#: by a caller in ``wait()``), in seconds: how long a lazily handed-off request waits for
#: it while the thread has lately had such requests to take over
HANDOFF_S = 1e-3
#: longest tick, in seconds: reached while every tick finds nothing to take over (the
#: callers wait for their requests themselves); see :class:`_Engine`
HANDOFF_MAX_S = 16e-3
#: how long the idle progress thread keeps watching after its last request, in seconds
WATCH_S = 0.1


def progress_mode() -> str:
    """``"thread"`` (background progress thread) or ``"test"`` (progress in test/wait)."""
    if os.environ.get("HPCBENCH_PROGRESS", "").lower() == "test":
        return "test"
    return "thread" if MPI.Query_thread() == MPI.THREAD_MULTIPLE else "test"


def _never() -> bool:
    """:meth:`Request.wait`'s condition: only completion ends the wait."""
    return False


class Request:
    """Handle of an outstanding nonblocking collective.

    Attributes
    ----------
    name : str or None
        The name given to the call.
    result : array or tensor
        The output object (valid once complete).
    nbytes : int
        Payload bytes of the operation (its buffer): a caller in :meth:`wait`
        spins longer before it sleeps for larger ones
        (:func:`~hpcbench.collectives._core.inline_backoff`).
    """

    __slots__ = ("name", "result", "nbytes", "_gen", "_pending", "_done", "_exc", "_lock")
    #: True for requests whose progress needs MPI polls but that keep no awaited
    #: :class:`~hpcbench.collectives.transport.P2PRequest` in ``_pending``
    #: (:class:`hpcbench.collectives.planned.PlannedRequest`): the progress thread never
    #: sleeps till a link model's next arrival while one is active
    polled = False

    def __init__(self, gen, result: Any, name: str | None, nbytes: int = 0) -> None:
        self.name = name
        self.result = result
        self.nbytes = nbytes
        self._gen = gen
        self._pending: list = []
        self._done = False
        self._exc: BaseException | None = None
        #: held by the thread advancing the generator (the progress thread, or a caller in wait())
        self._lock = threading.Lock()

    # -- driven by exactly one thread at a time ---------------------------------
    def _advance(self) -> bool:
        """Resume the generator as far as possible; True if anything moved."""
        moved = False
        while not self._done:
            for q in self._pending:
                if not q.test():
                    return moved
            try:
                self._pending = next(self._gen)
            except StopIteration:
                self._finish(None)
            except BaseException as exc:  # noqa: BLE001 - re-raised in wait()
                self._finish(exc)
            moved = True
        return moved

    def _finish(self, exc) -> None:
        self._exc = exc
        self._pending = []
        self._gen = None
        self._done = True

    # -- public ------------------------------------------------------------------
    def test(self) -> bool:
        """True once the operation has completed (never blocks).

        In ``"test"`` progress mode this also advances the operation.
        """
        if self._done:
            return True
        if _ENGINE.mode == "test":
            self._advance()
        return self._done

    def wait(self):
        """Block (sleeping) until complete and return the result.

        Raises
        ------
        Exception
            Whatever the operation raised while it progressed.
        """
        self.wait_until(_never)
        return self.result

    def wait_until(self, ready) -> None:
        """Drive and wait as :meth:`wait`, but return once ``ready()`` is true (or the request is done).

        For composite operations that complete in parts
        (:class:`hpcbench.collectives.ordered.OrderedAllreduce`): the caller
        waits for one part while the rest stays with the progress thread.

        Parameters
        ----------
        ready : callable
            ``ready() -> bool``, cheap (called after every advance).

        Raises
        ------
        Exception
            Whatever the operation raised while it progressed.
        """
        if not (self._done or ready()):
            bo = None               # built only if the first pass leaves something to wait for
            with self._lock:        # the progress thread leaves this request alone meanwhile
                while not (self._done or ready()):
                    if self._advance():
                        if bo is not None:
                            bo.reset()
                    elif not ready():
                        if bo is None:
                            bo = inline_backoff(self.nbytes)
                        bo.pause()
        if self._exc is not None:
            raise self._exc

    def _try_advance(self) -> bool:
        """Advance unless another thread is advancing this request; True if anything moved.

        A caller in :meth:`wait` holds the lock and drives its request itself
        (waiting with the two-phase schedule of
        :func:`~hpcbench.collectives._core.inline_backoff`) instead of sleeping
        until the progress thread completes it: a wake-up through another
        thread costs a trip through the scheduler, a time slice on a loaded node.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._advance()
        finally:
            self._lock.release()

    @staticmethod
    def waitall(requests: Sequence["Request"]) -> list:
        """Wait for every request (in any completion order); their results in order."""
        return [r.wait() for r in requests]

    @staticmethod
    def testall(requests: Sequence["Request"]) -> bool:
        """True when every request has completed."""
        return all([r.test() for r in requests])

    def __repr__(self) -> str:
        return f"<Request name={self.name!r} done={self._done}>"


class _Engine:
    """One background progress thread per process (started on first use).

    Hand-off. A request is started in the caller's thread, then given to the
    thread. Waking the thread costs a trip through the scheduler (measured:
    ``iallreduce(...).wait()`` of 1 KiB at 2 ranks, 64 us with the wake-up
    per call, 37 us without), wasted when the caller waits at once and drives
    the request itself. So while the thread is idle and *watching* (for
    :data:`WATCH_S` after its last request) a request of at most
    :data:`LAZY_BYTES` is queued without a wake-up, and the thread takes it
    at its next tick if the caller has not completed it by then; larger
    requests and submissions to a thread asleep for good wake it at once.

    The tick adapts. Each tick takes the GIL and a core: at 4 ranks on 2 cores
    a 1 ms tick made 1-8 KiB ring ``iallreduce().wait()`` take 2.9-4.2x MPI's
    ``Allreduce`` against 2.7-3.1x with the thread ticking every 50 ms
    (interleaved; docs/collectives.md, "Per-call overhead"): a thread woken while
    its rank's caller spins holds the GIL, or the core, the caller needs next. So a
    tick that finds nothing to take over (no submission, or only requests that
    their callers completed, or are driving in ``wait()``) doubles the next one,
    up to :data:`HANDOFF_MAX_S`; a tick that finds a request nobody drives
    (its caller computes between ``iallreduce`` and ``wait``) sets it back to
    :data:`HANDOFF_S`. A program that overlaps small requests with compute thus
    keeps the 1 ms hand-off, and one that waits at once stops paying for
    ticks; the first overlapped request after a run of immediate waits may wait
    up to :data:`HANDOFF_MAX_S` for the thread (its first messages left at
    submission, and ``test()``/``wait()`` drive it meanwhile).
    """

    def __init__(self) -> None:
        self.mode = progress_mode()
        self._cv = threading.Condition()
        self._new: list[Request] = []
        self._watching = False
        self._thread: threading.Thread | None = None
        #: the current tick, :data:`HANDOFF_S` to :data:`HANDOFF_MAX_S` (read and written
        #: by the progress thread only)
        self.tick_s = HANDOFF_S

    def submit(self, req: Request) -> None:
        """Start ``req`` in the caller's thread, then leave it to the progress thread."""
        req._advance()
        if req._done or self.mode != "thread":
            return
        with self._cv:
            self._new.append(req)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hpcbench-progress",
                                                daemon=True)
                self._thread.start()
            if not (self._watching and req.nbytes <= LAZY_BYTES):
                self._cv.notify()

    def _idle(self) -> None:
        """Wait for submissions with no request held: tick every :attr:`tick_s` (doubling
        while ticks find nothing) while watching, then sleep until notified (called with
        ``_cv`` held)."""
        self._watching = True
        until = time.monotonic() + WATCH_S
        while not self._new:
            left = until - time.monotonic()
            if left > 0:
                self._cv.wait(min(self.tick_s, left))
                if not self._new:
                    self.tick_s = min(2.0 * self.tick_s, HANDOFF_MAX_S)
            else:
                self._watching = False
                self._cv.wait()
        self._watching = False

    def _take_new(self) -> list[Request]:
        """The submissions not yet completed (called with ``_cv`` held), and the tick's
        adaptation: back to :data:`HANDOFF_S` when one of them is driven by nobody,
        else doubled (class docstring)."""
        fresh = [r for r in self._new if not r._done]
        if self._new:
            if any(not r._lock.locked() for r in fresh):
                self.tick_s = HANDOFF_S
            else:
                self.tick_s = min(2.0 * self.tick_s, HANDOFF_MAX_S)
            self._new.clear()
        return fresh

    def _run(self) -> None:
        active: list[Request] = []
        bo = Backoff(spin=0, first_s=2e-5, max_s=5e-4)
        while True:
            with self._cv:
                if not active and not self._new:
                    self._idle()
                active.extend(self._take_new())
            moved = False
            held = 0
            for req in active:
                if req._lock.locked():
                    held += 1                           # a caller in wait() drives it
                elif req._try_advance():
                    moved = True
            done = [r for r in active if r._done]      # also those finished by a caller in wait()
            if moved or done:
                if done:
                    active = [r for r in active if not r._done]
                bo.reset()
            elif held == len(active):
                # every request is driven by its waiting caller: stay off the GIL (each
                # wake-up here would take it from them), watching for submissions, until
                # the next tick
                with self._cv:
                    if not self._new:
                        self._watching = True
                        self._cv.wait(self.tick_s)
                        self._watching = False
            else:
                wake = _earliest_wake(active)
                if wake is None:
                    bo.pause()
                else:
                    # every awaited message is on a modelled link and cannot complete
                    # before `wake` (its bytes are there and only modelled wire time is
                    # left, or it has not even been sent): sleep till then, or until a
                    # new submission comes
                    delay = wake - time.monotonic()
                    if delay > 0:
                        with self._cv:
                            if not self._new:
                                self._cv.wait(min(delay, 0.05))


def wake() -> None:
    """Wake the progress thread now (something it waits on without a known time, like
    :meth:`hpcbench.collectives.ordered.OrderedAllreduce.mark_ready`, has happened)."""
    with _ENGINE._cv:
        _ENGINE._cv.notify()


def _earliest_wake(active: list[Request]) -> float | None:
    """Earliest time any awaited request can complete, or None when any of them needs MPI
    polling (see :func:`~hpcbench.collectives._core.not_before`)."""
    wake = None
    now = time.monotonic()
    for req in active:
        if req.polled:
            return None
        if not req._lock.acquire(blocking=False):
            return None             # a caller in wait() is driving it: keep polling
        try:
            for q in req._pending:
                if q.test():
                    return None     # something can move now
                t = next_poll(q, now)
                if t is None:
                    return None
                if wake is None or t < wake:
                    wake = t
        finally:
            req._lock.release()
    return wake


_ENGINE = _Engine()


def submit(req: Request) -> Request:
    """Start a request and hand it to the progress engine; returns it."""
    _ENGINE.submit(req)
    return req
