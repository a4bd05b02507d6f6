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

from hpcbench.collectives.persistent import NO_CALL
from hpcbench.collectives.progress import Request
from hpcbench.collectives.waiting import wait_mpi

__all__ = ["PlannedRequest"]


class PlannedRequest(Request):
    """A :class:`~hpcbench.collectives.progress.Request` running one call of a tagged plan.

    Step ``k`` posts its receive and its send (``Irecv``, ``Isend`` with the
    call's tag), and once both completed runs its reductions and posts step
    ``k + 1``; after the last step it counts the sends on the transport and
    gives the plan back to its cache. The same messages, in the same order,
    and the same reduction calls as the generator path, so the same bits, and
    ranks on either path match.

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

    __slots__ = ("_plan", "_tag", "_k", "_reqs", "_cache", "_key")
    #: the progress thread must poll it: no lower bound on its completion is known
    polled = True

    def __init__(self, plan, tag: int, cache, key, result, name: str | None) -> None:
        super().__init__(None, result, name, plan.nbytes)
        self._plan = plan
        self._tag = tag
        self._k = 0
        self._reqs = None
        self._cache = cache
        self._key = key

    def _advance(self) -> bool:
        """Run completed steps and post the next ones; True if anything moved."""
        moved = False
        plan = self._plan
        try:
            while not self._done:
                k, reqs = self._k, self._reqs
                if reqs is not None:
                    for q in reqs:
                        if not q.Test():
                            return moved
                    for f, a, b, out in plan.steps[k][5]:
                        f(a, b, out=out)
                    k = self._k = k + 1
                    self._reqs = None
                if k == len(plan.steps):
                    plan.tr.count(plan.nbytes_sent, plan.messages)
                    self._cache.keep(self._key, plan, NO_CALL)
                    self._finish(None)
                else:
                    sspec, dest, rspec, source, _, _ = plan.steps[k]
                    comm = plan.tr.comm
                    self._reqs = (comm.Irecv(rspec, source, self._tag),
                                  comm.Isend(sspec, dest, self._tag))
                moved = True
        except BaseException as exc:  # noqa: BLE001 - re-raised in wait()
            self._finish(exc)
            moved = True
        return moved

    def wait_until(self, ready) -> None:
        """As :meth:`Request.wait_until`; each step's messages are waited for as a
        blocking plan waits for them (:func:`~hpcbench.collectives.waiting.wait_mpi`)."""
        if not (self._done or ready()):
            with self._lock:        # the progress thread leaves this request alone meanwhile
                nbytes = self.nbytes
                while not (self._done or ready()):
                    reqs = self._reqs
                    if reqs is not None:
                        wait_mpi(reqs, nbytes=nbytes)
                    self._advance()
        if self._exc is not None:
            raise self._exc
