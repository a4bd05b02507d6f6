"""Persistent plans: small blocking allreduces as precompiled MPI persistent requests.

A blocking allreduce of a few KiB on shared memory costs MPI 5-7 us; posting
each message through mpi4py (buffer parsing, a request object per message)
and slicing the blocks again on every call cost hpcbench's Python algorithms
2-5x that (docs/collectives.md, "Persistent plans"). A *plan* is done once
per (algorithm, op, dtype, count, buffer addresses) and replayed:

* an algorithm describes its messages and reductions as a :data:`Schedule`,
  a list of :class:`Step` over symbolic spans of ``src``, ``dst`` and a
  scratch array (:func:`hpcbench.collectives.algorithms.register_schedule`);
* :class:`Plan` turns the schedule into numpy views and MPI-4 persistent
  requests (``MPI_Recv_init`` / ``MPI_Send_init``, started with
  ``MPI_Start``; MPI 4.0 standard, section 3.9), so a call is, per step, a
  send's ``Start``, a two-phase wait (:func:`~hpcbench.collectives.waiting.wait_mpi`)
  and the ufunc calls; each receive is started as early as its buffer
  allows (:func:`post_points`), so a message that arrives before its step
  finds it posted;
* :class:`PlanCache` keeps the most recently used plans of a communicator.

Tags. Persistent requests fix their tag when built, so every plan uses the
communicator's one *blocking* tag (:attr:`hpcbench.collectives.tags.TagSpace.blocking`),
and so does every other unnamed blocking allreduce over the plain transport,
whichever path runs it (see :mod:`hpcbench.collectives.api`). That is MPI's
own rule for blocking collectives: they are matched by the order in which
every rank calls them, and the messages of one pair of ranks keep their
order on one tag (non-overtaking). Nonblocking and named operations keep
their own tags, so they never match a plan's messages.

Buffers. A plan is keyed by the memory addresses of ``src`` and ``dst`` and
views that memory without holding the arrays (it would otherwise keep every
array it ever reduced alive). It is only run when a call passes arrays at
exactly those addresses, with the same dtype and count, so the memory is the
caller's at that moment; a plan whose arrays were freed is never touched
again until it is evicted.

Settings. :data:`PLAN_MAX_BYTES` and the ring's ``SEGMENT_BYTES`` decide which
calls get a plan, and a cached plan keeps the schedule it was built with:
change them before the first allreduce, or call :func:`clear_plans` on every
rank after. (``auto``'s crossovers are no such setting: a call resolves
``auto`` before it looks a plan up.)
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
from mpi4py import MPI

from hpcbench.collectives.waiting import wait_request
from hpcbench.runtime.finalize import before_finalize

__all__ = ["Span", "Step", "Schedule", "post_points", "run_steps", "Plan", "TaggedPlan", "SlotPlan",
           "PlanCache",
           "sweep_freed", "clear_plans",
           "PLAN_MAX_BYTES", "PLANS_KEPT", "NO_CALL", "cancel_receives"]

#: largest buffer (bytes) a plan is built for; larger calls take the generic path
PLAN_MAX_BYTES = 1 << 20
#: plans kept per communicator (least recently used evicted first)
PLANS_KEPT = 16


class Span(NamedTuple):
    """Elements ``lo:hi`` of one of the call's arrays: ``"src"``, ``"dst"`` or ``"tmp"``
    (the plan's own scratch)."""

    buf: str
    lo: int
    hi: int


class Step(NamedTuple):
    """One step of a schedule: post the receive and the send, wait for both, then
    reduce, then finalize.

    Attributes
    ----------
    dest, source : int
        Ranks the step sends to and receives from.
    send, recv : Span
        What is sent and where the received elements go (same length on the two
        ranks of a message).
    reduce : tuple of three Span, or None
        ``(out, a, b)``: ``out = a (op) b``, operands in this order (the order
        fixes the result bits of non-commutative-in-rounding reductions).
    finalize : Span or None
        A fully reduced span that ``avg`` divides by the world size.
    """

    dest: int
    send: Span
    source: int
    recv: Span
    reduce: tuple | None = None
    finalize: Span | None = None


#: the steps of one rank's allreduce, in program order
Schedule = list


def _overlap(a: Span, b: Span) -> bool:
    """True when spans ``a`` and ``b`` may share memory (``src`` and ``dst`` are taken
    for one array: they are in place)."""
    same = a.buf == b.buf or (a.buf != "tmp" and b.buf != "tmp")
    return same and a.lo < b.hi and b.lo < a.hi


def post_points(schedule: Schedule) -> list[int]:
    """For every step, the step at whose start its receive can be posted.

    Step ``k``'s receive may be posted once every earlier step that touches its
    receive span (sends from it, receives into it, reduces from or into it,
    finalizes it) has completed, and not before the receive of step ``k - 1``
    (receives from one source on one tag match in posting order; MPI 4.0,
    section 3.5, non-overtaking). A receive posted before its message arrives
    is matched on arrival; one posted after it costs MPICH a trip through
    its unexpected-message queue (a request and one more copy). The ring out
    of place posts all ``n - 1`` receives of its reduce-scatter at step 0 (they
    go to distinct blocks of ``dst``) and all of its allgather at step
    ``n - 1``; schedules that reuse one scratch span (recursive doubling,
    Rabenseifner, the ring in place) post each at its own step.

    Parameters
    ----------
    schedule : Schedule
        One rank's steps.

    Returns
    -------
    list of int
        ``p[k] <= k``, non-decreasing.
    """
    points: list[int] = []
    for k, st in enumerate(schedule):
        p = points[-1] if points else 0
        for j in range(k - 1, p - 1, -1):
            if any(_overlap(st.recv, s) for s in _spans(schedule[j])):
                p = j + 1
                break
        points.append(p)
    return points


def cancel_receives(reqs) -> None:
    """Cancel the receives of ``reqs`` that are still pending (``MPI_Cancel``, then
    ``MPI_Wait``: MPI 4.0, section 3.8.4), so none of them takes a later message.

    Parameters
    ----------
    reqs : iterable of mpi4py.MPI.Request or None
        Receive requests: completed, inactive (persistent), null or None ones are skipped.
    """
    for q in reqs:
        if q is not None and not q.Test():
            q.Cancel()
            q.Wait()


def _view(arr: np.ndarray) -> np.ndarray:
    """A writable view of ``arr``'s memory that does not keep ``arr`` alive."""
    if arr.size == 0:
        return np.empty(0, dtype=arr.dtype)
    mem = MPI.buffer.fromaddress(MPI.buffer(arr).address, arr.nbytes)
    return np.frombuffer(mem, dtype=arr.dtype)


def _bind(schedule: Schedule, src: np.ndarray, dst: np.ndarray, ufunc, divisor: int,
          own_dst: bool) -> list[tuple]:
    """``(send view, dest, receive view, source, ops)`` of every step of ``schedule``
    over the memory of ``src`` and ``dst`` (:class:`Plan`); ``ops`` are
    ``(f, a, b, out)`` calls ``f(a, b, out=out)`` run after the step's messages."""
    dt = dst.dtype
    ntmp = max([s.hi for st in schedule for s in _spans(st) if s.buf == "tmp"], default=0)
    d = dst if own_dst else _view(dst)
    bufs = {"src": d if src is dst else _view(src), "dst": d,
            "tmp": np.empty(ntmp, dtype=dt)}       # kept alive by the views of the steps

    def v(s: Span) -> np.ndarray:
        return bufs[s.buf][s.lo:s.hi]

    div = (np.floor_divide if dt.kind == "i" else np.divide) if divisor > 1 else None
    steps = []
    for st in schedule:
        ops = []
        if st.reduce is not None:
            out, a, b = st.reduce
            ops.append((ufunc, v(a), v(b), v(out)))
        if st.finalize is not None and div is not None:
            f = v(st.finalize)
            ops.append((div, f, divisor, f))
        steps.append((v(st.send), st.dest, v(st.recv), st.source, tuple(ops)))
    return steps


class Plan:
    """A schedule bound to concrete buffers as persistent MPI requests.

    Parameters
    ----------
    tr : Transport
        The plain transport whose communicator carries the messages
        (:meth:`~hpcbench.collectives.transport.Transport.exchange_init`); every
        run adds its sends to the transport's counters.
    tag : int
        Tag of every message (the communicator's blocking tag).
    schedule : Schedule
        This rank's steps.
    src, dst : 1-D numpy arrays, same dtype and length
        The call's buffers; ``dst`` may be ``src``. Only their memory is
        used (see module docstring).
    ufunc : numpy ufunc
        ``np.add``, ``np.maximum`` or ``np.minimum``.
    divisor : int
        World size for ``avg`` (its finalize spans are divided by it), else 0.
    own_dst : bool
        The plan keeps ``dst`` (an array the caller made for it, read back
        after each run from :attr:`result`) instead of viewing its memory.

    Attributes
    ----------
    steps : tuple
        Per step ``(receives started at it, receive, send, ops)``: persistent
        requests (:func:`post_points`) and the ``(f, a, b, out)`` calls run once
        both of the step's messages completed.
    nbytes : int
        Bytes of ``dst`` (the waits' spin budget grows with them,
        :func:`~hpcbench.collectives.waiting.wait_mpi`).
    nbytes_sent, messages : int
        Payload bytes and messages this rank sends per run.
    result : numpy.ndarray or None
        ``dst`` when ``own_dst``, else None.
    """

    __slots__ = ("steps", "nbytes", "nbytes_sent", "messages", "result", "_tr", "_requests")

    def __init__(self, tr, tag: int, schedule: Schedule, src: np.ndarray, dst: np.ndarray,
                 ufunc, divisor: int = 0, own_dst: bool = False) -> None:
        self.result = dst if own_dst else None
        self.nbytes = dst.nbytes
        bound = _bind(schedule, src, dst, ufunc, divisor, own_dst)
        self.steps, self._requests = _persistent_steps(tr, tag, bound, post_points(schedule))
        self.nbytes_sent = sum(b[0].nbytes for b in bound)
        self.messages = len(bound)
        self._tr = tr

    def run(self) -> None:
        """Run the schedule once (blocking, in the calling thread) and count its sends.

        Step ``k`` starts the receives posted at it (:func:`post_points`), then
        its send, waits for its receive and its send, and runs its reductions.

        Raises
        ------
        Exception
            The first exception a reduction raised (e.g. ``FloatingPointError``
            under ``np.errstate(over="raise")``), once every step's messages
            have gone: a rank that stopped at the failing step would leave its
            later receives posted (:func:`post_points`), to be matched by its
            peers' next call, and its peers waiting for its later sends.
        """
        err = run_steps(self.steps, 0, len(self.steps), False, self.nbytes)
        self._tr.count(self.nbytes_sent, self.messages)
        if err is not None:
            raise err

    def free(self) -> None:
        """Free the persistent requests (the plan must not be running; a run that raised
        may have left receives of later steps posted: they are cancelled first, so no
        later message on the tag goes into this plan's buffers)."""
        _free_steps(self.steps, self._requests)
        self._requests = []
        self.steps = ()


def run_steps(steps: tuple, k: int, end: int, started: bool, nbytes: int) -> Exception | None:
    """Run steps ``k`` to ``end - 1`` of persistent steps (:attr:`Plan.steps`, or a
    :class:`SlotPlan`'s), blocking: start each step's receives posted at it and its
    send, wait for its receive and its send
    (:func:`~hpcbench.collectives.waiting.wait_request`, the spin budget read at
    most once), then run its reductions. The step loop of :meth:`Plan.run` and of
    :meth:`SlotRequest.wait <hpcbench.collectives.planned.SlotRequest.wait>`,
    written once and called once per run, not per step.

    Parameters
    ----------
    steps : tuple
        ``(receives started at it, receive, send, ops)`` per step.
    k, end : int
        First step and one past the last step to run.
    started : bool
        Step ``k``'s messages were already started (by a nonblocking pass).
    nbytes : int
        Payload bytes of the operation (its waits' spin budget).

    Returns
    -------
    Exception or None
        The first exception a reduction raised; the steps after it still ran, so
        every message has gone (see :meth:`Plan.run`).

    Raises
    ------
    mpi4py.MPI.Exception
        An MPI call failed.
    """
    spin_s = None
    err = None
    for posted, rq, sq, ops in steps[k:end]:
        if not started:
            for q in posted:
                q.Start()
            sq.Start()
        started = False
        if not rq.Test():
            spin_s = wait_request(rq, spin_s, nbytes)
        if not sq.Test():
            spin_s = wait_request(sq, spin_s, nbytes)
        for f, a, b, out in ops:
            try:
                f(a, b, out=out)
            except Exception as exc:  # noqa: BLE001 - returned once every message has gone
                err = err or exc
    return err


def _persistent_steps(tr, tag: int, bound: list[tuple], points: list[int]) -> tuple[tuple, list]:
    """The ``(receives started at it, receive, send, ops)`` of every step of ``bound``
    (:func:`_bind`) as persistent requests on ``tag``, receives placed at their
    ``points`` (:func:`post_points`); and the list of every request made."""
    pairs, reqs = [], []
    for sbuf, dest, rbuf, source, ops in bound:
        rq, sq = tr.exchange_init(sbuf, dest, rbuf, source, tag)
        reqs += (rq, sq)
        pairs.append((rq, sq, ops))
    posted: list[list] = [[] for _ in pairs]
    for k, p in enumerate(points):
        posted[p].append(pairs[k][0])
    return tuple((tuple(posted[k]), rq, sq, ops) for k, (rq, sq, ops) in enumerate(pairs)), reqs


def _free_steps(steps, reqs) -> None:
    """Cancel the receives of ``steps`` still pending, then free ``reqs``."""
    cancel_receives([rq for _, rq, _, _ in steps])
    for q in reqs:
        if q != MPI.REQUEST_NULL:
            q.Free()


class SlotPlan:
    """A schedule bound to concrete buffers once, with persistent requests per tag slot:
    the plan of unnamed nonblocking calls (:mod:`hpcbench.collectives.slots`).

    Outstanding nonblocking calls need distinct tags, and persistent requests fix
    theirs; the ``slots`` family of the tag space (:data:`~hpcbench.collectives.tags.SLOTS`
    tags) lets a call of a given slot replay requests built for that slot. The
    views, reductions and scratch are made once (:func:`_bind`) and shared by the
    slots' request sets, which are built on a slot's first use: a plan runs one
    call at a time (taken out of its cache meanwhile), so the sets never run at
    once and share the scratch. Per message a call costs ``MPI_Start`` instead
    of ``Irecv``/``Isend`` (1.1 us against 2.4 us in a one-process loop).

    Parameters
    ----------
    tr, schedule, src, dst, ufunc, divisor :
        As :class:`Plan` (the caller owns ``dst``).

    Attributes
    ----------
    tr : Transport
        The transport whose communicator carries the messages (and counts them).
    nbytes, nbytes_sent, messages :
        As :class:`Plan`.
    """

    __slots__ = ("tr", "nbytes", "nbytes_sent", "messages", "_bound", "_points", "_sets")

    def __init__(self, tr, schedule: Schedule, src: np.ndarray, dst: np.ndarray, ufunc,
                 divisor: int = 0) -> None:
        self.tr = tr
        self.nbytes = dst.nbytes
        self._bound = _bind(schedule, src, dst, ufunc, divisor, False)
        self._points = post_points(schedule)
        self.nbytes_sent = sum(b[0].nbytes for b in self._bound)
        self.messages = len(self._bound)
        self._sets: dict[int, tuple] = {}

    def requests(self, slot: int, tag: int) -> tuple:
        """The steps of slot ``slot`` (its tag ``tag``), as :attr:`Plan.steps`; built on first use."""
        s = self._sets.get(slot)
        if s is None:
            s = self._sets[slot] = _persistent_steps(self.tr, tag, self._bound, self._points)
        return s[0]

    def free(self) -> None:
        """Free every slot's requests (cancelling receives still posted, as :meth:`Plan.free`)."""
        sets, self._sets = self._sets, {}
        for steps, reqs in sets.values():
            _free_steps(steps, reqs)


#: what a finished run of a :class:`TaggedPlan` gives :meth:`PlanCache.keep` for the call
#: (nothing is found by identity in a cache of tagged plans)
NO_CALL = (None,) * 6


class TaggedPlan:
    """A schedule bound to concrete buffers for nonblocking calls: the views, reductions
    and MPI buffer specs of every step made once, the messages posted per call with
    the call's own tag.

    The plan of *named* nonblocking calls (unnamed ones run a :class:`SlotPlan`):
    their tags hash the name and a count, so each call has its own, and
    persistent requests, which fix their tag, cannot be replayed; such a call
    posts ``Irecv``/``Isend`` per step. What it saves against the generator is the rest (buffer wrapping,
    slicing, block offsets, request wrappers: 1 KiB ``iallreduce().wait()``
    at 2 ranks took 37 us through the generator). A call runs it through a
    :class:`~hpcbench.collectives.planned.PlannedRequest`.

    Parameters
    ----------
    tr, schedule, src, dst, ufunc, divisor :
        As :class:`Plan` (the caller owns ``dst``).

    Attributes
    ----------
    steps : tuple
        Per step ``(receives posted at it, send spec, dest, ops)``: the receives
        as ``(step, receive spec, source)`` (:func:`post_points`), the MPI buffer
        specs of :meth:`~hpcbench.collectives.transport.Transport.buffer_spec`,
        and the ``(f, a, b, out)`` calls run once the step's receive and send
        completed.
    tr : Transport
        The transport whose communicator carries the messages (and counts them).
    nbytes, nbytes_sent, messages :
        As :class:`Plan`.
    """

    __slots__ = ("steps", "nbytes", "nbytes_sent", "messages", "tr")

    def __init__(self, tr, schedule: Schedule, src: np.ndarray, dst: np.ndarray, ufunc,
                 divisor: int = 0) -> None:
        self.nbytes = dst.nbytes
        self.nbytes_sent = 0
        bound = _bind(schedule, src, dst, ufunc, divisor, False)
        posted: list[list] = [[] for _ in bound]
        for k, p in enumerate(post_points(schedule)):
            posted[p].append((k, tr.buffer_spec(bound[k][2]), bound[k][3]))
        steps = []
        for k, (sbuf, dest, _, _, ops) in enumerate(bound):
            self.nbytes_sent += sbuf.nbytes
            steps.append((tuple(posted[k]), tr.buffer_spec(sbuf), dest, ops))
        self.steps = tuple(steps)
        self.messages = len(steps)
        self.tr = tr

    def free(self) -> None:
        """Nothing to free (no persistent requests); for :class:`PlanCache`."""


def _spans(st: Step):
    yield st.send
    yield st.recv
    if st.reduce is not None:
        yield from st.reduce
    if st.finalize is not None:
        yield st.finalize


_CACHES: "weakref.WeakSet[PlanCache]" = weakref.WeakSet()


class PlanCache:
    """The plans of one communicator: the last one used, then the others least
    recently used first.

    A plan is in exactly one place, the :attr:`last` slot or the table, and
    is taken out of it while it runs, so two threads never start the same
    requests. The :attr:`last` slot also remembers the call's arrays, so a
    call repeated on the same arrays finds its plan by identity, without
    reading addresses or hashing a key; that holds a reference to those two
    arrays (one call's worth of memory) until another call takes the slot.

    Persistent requests keep their communicator alive: MPICH defers freeing a
    communicator, and deleting its attributes, until its persistent requests
    are freed. So a cache whose communicator the program has freed (its
    ``mpi4py`` object is then ``COMM_NULL``) is cleared when any cache next
    builds a plan (:func:`sweep_freed`), and every cache at ``MPI_Finalize``.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The communicator of the plans.
    kept : int
        How many plans to keep besides the last one (default :data:`PLANS_KEPT`).

    Attributes
    ----------
    last : tuple or None
        ``(x, out, op, algorithm, deterministic, dtype, key, plan)`` of the
        last call, or None while its plan runs or before the first call.
    """

    def __init__(self, comm, kept: int = PLANS_KEPT) -> None:
        self.comm = comm
        self.kept = kept
        self.last: tuple | None = None
        self._plans: OrderedDict = OrderedDict()
        _CACHES.add(self)

    def take(self, key) -> Plan | None:
        """Remove and return the plan of ``key``, or None."""
        last = self.last
        if last is not None and last[6] == key:
            self.last = None
            return last[7]
        return self._plans.pop(key, None)

    def keep(self, key, plan: Plan, call: tuple) -> None:
        """Make ``plan`` the :attr:`last` one, for ``call`` = ``(x, out, op, algorithm,
        deterministic, dtype)``; the previous last goes to the table, whose oldest plans
        beyond :attr:`kept` are evicted (and freed)."""
        prev, self.last = self.last, (*call, key, plan)
        if prev is not None:
            old = self._plans.pop(prev[6], None)
            if old is not None and old is not prev[7]:
                old.free()          # two plans of one key (calls outstanding at once): one is kept
            self._plans[prev[6]] = prev[7]
            while len(self._plans) > self.kept:
                _, old = self._plans.popitem(last=False)
                old.free()

    def clear(self) -> None:
        """Free every plan."""
        last, self.last = self.last, None
        if last is not None:
            last[7].free()
        while self._plans:
            _, old = self._plans.popitem()
            old.free()

    def __len__(self) -> int:
        return len(self._plans) + (self.last is not None)


def sweep_freed() -> None:
    """Clear the caches of communicators that the program has freed."""
    for cache in list(_CACHES):
        if len(cache) and cache.comm == MPI.COMM_NULL:
            cache.clear()


@before_finalize
def clear_plans() -> None:
    """Free every plan of every communicator (run before MPI finalizes: MPICH warns
    about live persistent requests)."""
    for cache in list(_CACHES):
        cache.clear()
