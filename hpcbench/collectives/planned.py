"""The request of a small nonblocking allreduce run by a tagged plan.

A :class:`~hpcbench.collectives.persistent.TaggedPlan` holds a schedule bound
to the call's buffers (views, reductions, MPI buffer specs). Driving it as a
generator behind a generic :class:`~hpcbench.collectives.progress.Request`
cost a generator resume, two request wrappers and a backoff object per step;
at 4 ranks on 2 cores every microsecond of a rank's Python is a microsecond
its peers wait for a core, and 1-8 KiB ``iallreduce().wait()`` took twice the
time of the same schedule run by a blocking plan (measured: ring 1 KiB
178 us against 91, load average 3.0). :class:`PlannedRequest` steps through
the plan itself on raw ``mpi4py`` requests, and a caller in :meth:`wait`
waits for each step as a blocking plan does
(:func:`~hpcbench.collectives.waiting.wait_mpi`); the progress thread drives
it through the same :meth:`_advance` as any request.
"""

from __future__ import annotations

from threading import Lock

from hpcbench.collectives.persistent import NO_CALL, cancel_receives, run_steps
from hpcbench.collectives.progress import Request
from hpcbench.collectives.waiting import wait_request

__all__ = ["PlannedRequest", "SlotRequest"]


class PlannedRequest(Request):
    """A :class:`~hpcbench.collectives.progress.Request` running one call of a tagged plan.

    Step ``k`` posts the receives that :func:`~hpcbench.collectives.persistent.post_points`
    places at it (``Irecv`` with the call's tag: its own, and the later ones whose
    buffers are free), then its send (``Isend``), and once its receive and its send
    completed runs its reductions and goes on to step ``k + 1``; after the last
    step it counts the sends on the transport and gives the plan back to its
    cache. The same messages, in the same order, and the same reduction calls
    as the generator path, so the same bits, and ranks on either path match.
    A reduction that raises does not stop the steps: the exception is raised
    by :meth:`wait` once every message has gone (as :meth:`Plan.run
    <hpcbench.collectives.persistent.Plan.run>`), and the plan is dropped.

    Parameters
    ----------
    plan : TaggedPlan
        The plan, taken out of ``cache`` for the run (a run that raises drops it).
    tag : int
        The call's tag (:meth:`hpcbench.collectives._core.Context.tag`).
    cache : PlanCache
        Where the plan goes back once the run is complete, under ``key``.
    key : tuple
        The plan's key in ``cache``.
    result : numpy.ndarray
        The call's ``out`` (returned by :meth:`wait`).
    name : str or None
        The call's name.
    """

    __slots__ = ("_plan", "_tag", "_k", "_recvs", "_send", "_cache", "_key")
    #: the progress thread must poll it: no lower bound on its completion is known
    polled = True

    def __init__(self, plan, tag: int, cache, key, result, name: str | None) -> None:
        super().__init__(None, result, name, plan.nbytes)
        self._plan = plan
        self._tag = tag
        self._k = 0
        self._recvs = [None] * plan.messages     # the receive request of every posted step
        self._send = None                        # the send of step _k once posted
        self._cache = cache
        self._key = key

    def _advance(self) -> bool:
        """Run completed steps and post the next ones; True if anything moved."""
        return self._steps(False, self._plan.messages)

    def _steps(self, block: bool, most: int) -> bool:
        """Run at most ``most`` steps from the current one; ``block``: wait for each step's
        messages (:func:`~hpcbench.collectives.waiting.wait_mpi`), else return at the
        first step whose messages are pending. True if anything moved."""
        if self._done:
            return False
        moved = False
        spin_s = None           # the spin budget, read at the first wait
        plan = self._plan
        steps, recvs = plan.steps, self._recvs
        k, end = self._k, min(self._k + most, len(plan.steps))
        try:
            while k < end:
                posted, sspec, dest, ops = steps[k]
                sq = self._send
                if sq is None:
                    comm, tag = plan.tr.comm, self._tag
                    for j, rspec, source in posted:
                        recvs[j] = comm.Irecv(rspec, source, tag)
                    sq = self._send = comm.Isend(sspec, dest, tag)
                    moved = True
                rq = recvs[k]
                if not (rq.Test() and sq.Test()):
                    if not block:
                        return moved
                    spin_s = wait_request(rq, spin_s, self.nbytes)
                    spin_s = wait_request(sq, spin_s, self.nbytes)
                self._reduce(ops)
                recvs[k] = self._send = None
                k = self._k = k + 1
                moved = True
            if k == len(steps):
                self._complete()
        except BaseException as exc:  # noqa: BLE001 - re-raised in wait()
            cancel_receives(recvs)      # posted ahead for later steps: no later message goes there
            self._finish(exc)
            moved = True
        return moved

    def _reduce(self, ops) -> None:
        """Run a step's ``(f, a, b, out)`` calls; the first exception is kept for :meth:`wait`
        (raised once every message has gone)."""
        try:
            for f, a, b, out in ops:
                f(a, b, out=out)
        except Exception as exc:  # noqa: BLE001 - raised once every message has gone
            self._exc = self._exc or exc

    def _complete(self) -> None:
        """After the last step: count the sends, give the plan back to its cache (or free
        it, if a reduction raised) and finish."""
        plan = self._plan
        plan.tr.count(plan.nbytes_sent, plan.messages)
        if self._exc is None:
            self._cache.keep(self._key, plan, NO_CALL)
        else:
            plan.free()
        self._finish(self._exc)

    def wait(self):
        """As :meth:`Request.wait`, running the remaining steps in one pass, each step's
        messages waited for as a blocking plan waits for them
        (:func:`~hpcbench.collectives.waiting.wait_mpi`)."""
        if not self._done:
            with self._lock:        # the progress thread leaves this request alone meanwhile
                self._steps(True, self._plan.messages)
        if self._exc is not None:
            raise self._exc
        return self.result

    def wait_until(self, ready) -> None:
        """As :meth:`Request.wait_until`, one step at a time, each waited for as in :meth:`wait`."""
        if not (self._done or ready()):
            with self._lock:
                while not (self._done or ready()):
                    self._steps(True, 1)
        if self._exc is not None:
            raise self._exc


class SlotRequest(PlannedRequest):
    """A :class:`PlannedRequest` whose messages are a slot's persistent requests
    (:class:`~hpcbench.collectives.persistent.SlotPlan`, :mod:`hpcbench.collectives.slots`).

    The same steps, messages, order and reductions as :class:`PlannedRequest`
    (so the same bits), each message started with ``MPI_Start``; nothing is
    started until ``previous``, the slot's earlier call, has completed on this
    rank (driven meanwhile by the progress thread, by :meth:`test` in test
    mode, or first thing in :meth:`wait`). A run that raises frees the plan's
    requests, cancelling receives posted ahead.

    Parameters
    ----------
    plan : SlotPlan
        The plan, taken out of ``cache`` for the run.
    slot, tag : int
        The call's slot and its tag.
    previous : Request or None
        The slot's previous holder, if still outstanding here.
    cache, key, result, name :
        As :class:`PlannedRequest`.
    keep : object
        Held until the request is freed: a contiguous copy of a non-contiguous input.
    """

    __slots__ = ("_psteps", "_started", "_prev", "_keep")

    def __init__(self, plan, slot: int, tag: int, previous, cache, key, result, name: str | None,
                 keep=None) -> None:
        # Every attribute of Request and PlannedRequest is set here, without their
        # __init__s: this runs once per call, and at 4 ranks on 2 cores each
        # microsecond of it costs about two of the call's time (docs/collectives.md,
        # "Per-call overhead"). _recvs and _send stay None: slots start persistent requests.
        self.name = name
        self.result = result
        self.nbytes = plan.nbytes
        self._gen = None
        self._pending = ()
        self._done = False
        self._exc = None
        self._lock = Lock()
        self._plan = plan
        self._tag = tag
        self._k = 0
        self._recvs = self._send = None
        self._cache = cache
        self._key = key
        self._psteps = plan.requests(slot, tag)
        self._started = False
        self._prev = previous
        self._keep = keep

    def _steps(self, block: bool, most: int) -> bool:
        """As :meth:`PlannedRequest._steps`, after the slot's previous call has completed."""
        if self._done:
            return False
        prev = self._prev
        if prev is not None:
            if not prev._done:
                if not block:
                    prev._try_advance()
                    if not prev._done:
                        return False
                else:
                    try:
                        prev.wait()         # drives it; its error is its caller's
                    except Exception:  # noqa: BLE001 - raised again by its own wait()
                        pass
            self._prev = None
        if block:
            return self._run_blocking(most)
        moved = False
        steps = self._psteps
        k, end = self._k, min(self._k + most, len(steps))
        try:
            while k < end:
                posted, rq, sq, ops = steps[k]
                if not self._started:
                    for q in posted:
                        q.Start()
                    sq.Start()
                    self._started = moved = True
                if not (rq.Test() and sq.Test()):
                    return moved
                self._reduce(ops)
                self._started = False
                k = self._k = k + 1
                moved = True
            if k == len(steps):
                self._complete()
        except BaseException as exc:  # noqa: BLE001 - re-raised in wait()
            self._plan.free()           # cancels the receives posted ahead
            self._finish(exc)
            moved = True
        return moved

    def _run_blocking(self, most: int) -> bool:
        """The blocking form of :meth:`_steps` (a caller in :meth:`wait` holds the lock):
        up to ``most`` steps, each waited for as :meth:`Plan.run
        <hpcbench.collectives.persistent.Plan.run>` waits
        (:func:`~hpcbench.collectives.persistent.run_steps`); True (something moved)."""
        steps = self._psteps
        end = min(self._k + most, len(steps))
        try:
            err = run_steps(steps, self._k, end, self._started, self.nbytes)
            self._exc = self._exc or err
            self._k, self._started = end, False
            if end == len(steps):
                self._complete()
        except BaseException as exc:  # noqa: BLE001 - re-raised in wait()
            self._plan.free()           # cancels the receives posted ahead
            self._finish(exc)
        return True
