"""How a collective waits for a message: spin (yielding the core) as long as a sleep would
cost, or as long as the operation's bytes take to move, then sleep.

Why not a fixed short spin. A waiting rank that sleeps gives its core away;
on a loaded node (other jobs, or 64 ranks on 2 cores) it gets it back only
when the scheduler next picks it, often a whole time slice later: we measured
``time.sleep(20e-6)`` taking 0.8 ms on average on a busy 2-core node. A fixed
200 us spin followed by such sleeps made two ranks of a small allreduce
trade sleeps: the one that overslept answers late, so its peer's spin runs
out and it oversleeps too, and every step of the ring costs a time slice
(0.6-1.7 ms per 2-64 KiB allreduce where MPI's spinning ``Allreduce`` took
0.01-0.08 ms).

The policy here is the classic two-phase (spin-then-block) wait of Karlin,
Li, Manasse and Owicki (SOSP 1991, "Empirical studies of competitive
spinning for a shared-memory multiprocessor"): spin for as long as blocking
costs, then block; whatever the wait, it costs at most twice the best choice
made knowing the wait in advance. The cost of blocking is measured, not
assumed: every shortest sleep (the first of a wait) is timed and a moving
average of its wall duration, :data:`SLEEP_COST`, is the spin budget, at
least ``SPIN_MIN_S``. On an idle node a sleep costs ~60-80 us and ranks spin
about that long. Where a short sleep costs more than ``SPIN_MAX_S`` (0.5 ms)
the sleeper waited for a core: the node runs more threads than cores, and
there the sleep-cost part of the budget is only ``SPIN_MIN_S`` (at load
average 25-40 on the 2 cores, a budget growing with the sleep cost up to
2 ms made ring allreduce at ``-np 2`` take 22-30 ms at 1-64 KiB against
6-8.5 ms with the short spin). Waits longer than the budget sleep (growing
to ``max_s``), so a rank that waits long costs no CPU.

Large transfers. The competitive argument takes the wait as independent of
the waiter, and a large message breaks that: MPICH moves a shared-memory
message above its eager size by a rendezvous, and the receiver copies the
bytes (``process_vm_readv``) inside one of its own polls; the sender's
request completes only when it polls again and sees the receiver's
acknowledgement. A rank asleep while its segments are in flight stalls its
peer too. So a wait inside an operation of ``nbytes`` bytes spins at least
``nbytes /`` :data:`SPIN_RATE_BPS` (1 GB/s, at most
:data:`SPIN_BYTES_MAX_S`). Without it (``git bisect``: since the spin became
a time budget of 200 us, later the sleep cost, instead of 200 polls, each of
which could be a whole copy), ring allreduce at ``-np 2`` took 12-16 ms at
16 MiB against MPI's 5-8 ms; with it, 0.6-0.8x MPI's time
(docs/collectives.md).

Large operations on a shared node. Above :data:`LARGE_BYTES` (1 MiB, where
the persistent plans end and the pipelined generators run) the budget is
``nbytes /`` :data:`SPIN_LARGE_RATE_BPS` (100 MB/s), at most
:data:`SPIN_LARGE_MAX_S` (50 ms), instead of ``nbytes / 1 GB/s`` capped at
5 ms. A 4 MiB ring allreduce at ``-np 4`` on 2 cores takes 2.5-4 ms when the
node is otherwise idle, but 6-23 ms when one or two other processes want the
cores; its ranks then waited longer than 4 ms for a descheduled neighbour
(about 0.7 sleeps per call), slept, and woke a time slice later with the
ring's next segments waiting on them, while MPI's waits never sleep. At
64 MiB, ``-np 2``, about one wait per rank and call outlasted the 5 ms cap
(60 sleeps in 30 calls on 2 ranks). With the
larger budget those waits spin (yielding the core, below). Beside one busy
process at ``-np 4``, 16 MiB ring busbw went from 0.70-0.93x MPI's to
1.20-1.29x and 64 MiB from 1.28-1.39x to 1.49-1.62x; 4 MiB moved in some
sets and not in others. At ``-np 2`` on an idle node, 64 MiB went from
1.46-1.55x to 2.29-2.54x (docs/collectives.md, "Large messages at 4 ranks:
spinning through the transfer"). Waits of at most 1 MiB (the plans'
:func:`wait_mpi` included) keep the rule above.

Yielding. Every poll of the spin is followed by ``sched_yield``, as MPICH's
own waits do (``strace -c``: about 4,000 calls in 25 16 MiB
``MPI_Allreduce`` at ``-np 2``, 22,500 at ``-np 4`` on 2 cores). Where
nothing else is runnable on the core the call returns at once; where a peer
rank waits for the core (4 ranks on 2 cores), it runs now instead of after
the spinner's time slice or sleep. Measured at ``-np 4`` on 2 cores
(same process, interleaved): ring 1 KiB 6.3x -> 1.5x MPI's p50, 1 MiB 5.0x
-> 0.8x, 16 MiB 1.7x -> 0.7x; at ``-np 2`` no difference beyond noise.
"""

from __future__ import annotations

import os
import time

from hpcbench.runtime.wait import Backoff

__all__ = ["SleepCost", "SLEEP_COST", "TwoPhaseBackoff", "SPIN_MIN_S", "SPIN_MAX_S",
           "SPIN_RATE_BPS", "SPIN_BYTES_MAX_S", "LARGE_BYTES", "SPIN_LARGE_RATE_BPS",
           "SPIN_LARGE_MAX_S", "wait_mpi", "wait_request"]

#: shortest and longest spin budget of a wait, in seconds; a node where a short sleep costs
#: more than ``SPIN_MAX_S`` is oversubscribed, and waits there spin only ``SPIN_MIN_S``
SPIN_MIN_S, SPIN_MAX_S = 5e-5, 5e-4
#: a wait inside an operation of ``b`` bytes spins at least ``b / SPIN_RATE_BPS`` seconds (bytes/s:
#: the slowest copy-and-reduce rate of a shared-memory peer worth spinning for) ...
SPIN_RATE_BPS = 1e9
#: ... but at most this long, in seconds
SPIN_BYTES_MAX_S = 5e-3
#: above ``LARGE_BYTES`` bytes (where the persistent plans end and the pipelined generators
#: run) a wait spins ``b / SPIN_LARGE_RATE_BPS`` seconds, at most ``SPIN_LARGE_MAX_S``
#: (module docstring, "Large operations on a shared node")
LARGE_BYTES, SPIN_LARGE_RATE_BPS, SPIN_LARGE_MAX_S = 1 << 20, 1e8, 5e-2


class SleepCost:
    """Moving average of the wall time a short sleep really takes on this node.

    Parameters
    ----------
    initial_s : float
        Estimate before the first measurement, in seconds.
    weight : float
        Weight of each new measurement in the average, in (0, 1].

    Attributes
    ----------
    value_s : float
        Current estimate in seconds (thread-safe to read: one float).
    """

    def __init__(self, initial_s: float = 2e-4, weight: float = 0.25) -> None:
        if not initial_s > 0 or not 0 < weight <= 1:
            raise ValueError(f"SleepCost: need initial_s > 0 and 0 < weight <= 1, "
                             f"got {initial_s!r}, {weight!r}")
        self.value_s = initial_s
        self.weight = weight

    def sleep(self, seconds: float) -> float:
        """``time.sleep(seconds)``, timed; folds the wall duration into the estimate.

        Returns
        -------
        float
            The measured wall seconds.
        """
        t0 = time.perf_counter()
        time.sleep(seconds)
        took = time.perf_counter() - t0
        self.value_s += self.weight * (took - self.value_s)
        return took

    def spin_budget(self, nbytes: int = 0) -> float:
        """Seconds a waiter should spin before it sleeps.

        The estimate, at least :data:`SPIN_MIN_S`, while it is at most
        :data:`SPIN_MAX_S`; above that, :data:`SPIN_MIN_S`: a short sleep that
        costs more than half a millisecond waited for a core, the node runs
        more threads than cores, and spinning would delay the peer that the
        waiter waits for (measurements in the module docstring). A wait
        inside an operation of ``nbytes`` bytes spins at least ``nbytes /``
        :data:`SPIN_RATE_BPS`, up to :data:`SPIN_BYTES_MAX_S`: the waiter's
        polls are part of a large transfer (module docstring); above
        :data:`LARGE_BYTES`, ``nbytes /`` :data:`SPIN_LARGE_RATE_BPS`, up to
        :data:`SPIN_LARGE_MAX_S` (module docstring, "Large operations on a
        shared node").

        Parameters
        ----------
        nbytes : int
            Payload bytes of the operation waited in (0: unknown, or none).

        Returns
        -------
        float
            Seconds.
        """
        v = self.value_s
        base = SPIN_MIN_S if v > SPIN_MAX_S else max(v, SPIN_MIN_S)
        if nbytes > LARGE_BYTES:
            return max(base, min(nbytes / SPIN_LARGE_RATE_BPS, SPIN_LARGE_MAX_S))
        if nbytes > 0:
            return max(base, min(nbytes / SPIN_RATE_BPS, SPIN_BYTES_MAX_S))
        return base


#: the process-wide estimate shared by every wait of the collectives
SLEEP_COST = SleepCost()

#: ``sched_yield`` between the polls of a spin (module docstring); a no-op where the
#: platform has none
_yield = getattr(os, "sched_yield", lambda: None)


class TwoPhaseBackoff(Backoff):
    """A :class:`~hpcbench.runtime.wait.Backoff` that spins for the measured cost of a
    sleep, then sleeps from ``first_s`` doubling to ``max_s``.

    Parameters
    ----------
    first_s, max_s : float
        Sleep schedule after the spin, in seconds (``0 < first_s <= max_s``).
    cost : SleepCost, optional
        The estimate to read and update (default :data:`SLEEP_COST`).
    nbytes : int
        Payload bytes of the operation whose waits this schedules (its
        buffer); the spin budget grows with them (:meth:`SleepCost.spin_budget`).
    """

    __slots__ = ("_cost", "_spin_until", "nbytes")

    def __init__(self, first_s: float = 2e-5, max_s: float = 1e-3, cost: SleepCost | None = None,
                 nbytes: int = 0) -> None:
        self._cost = cost or SLEEP_COST
        self._spin_until = None
        self.nbytes = nbytes
        super().__init__(spin=0, first_s=first_s, max_s=max_s)

    def reset(self) -> None:
        """Start again: spin first, then the shortest sleep."""
        super().reset()
        self._spin_until = None

    def pause(self) -> None:
        """Within the spin budget of this wait, yield the core (``sched_yield``) and return;
        then sleep (timing the first sleep)."""
        now = time.perf_counter()
        if self._spin_until is None:
            self._spin_until = now + self._cost.spin_budget(self.nbytes)
        if now < self._spin_until:
            _yield()
            return
        if self._sleep_s == self.first_s:
            self._cost.sleep(self._sleep_s)
        else:
            time.sleep(self._sleep_s)
        self._sleep_s = min(self._sleep_s * 2.0, self.max_s)


def wait_mpi(reqs, first_s: float = 2e-5, max_s: float = 1e-3, cost: SleepCost | None = None,
             nbytes: int = 0) -> None:
    """Complete raw ``mpi4py.MPI.Request`` objects with the two-phase schedule, allocation-free
    while they complete during the spin.

    The waiting path of the persistent plans (:mod:`hpcbench.collectives.persistent`):
    each request is tested in turn (``Test`` on a completed request turns it
    into ``REQUEST_NULL``, or a persistent one inactive, which tests true
    again at no cost), with ``sched_yield`` between the tests for the spin budget of
    ``cost`` (:meth:`SleepCost.spin_budget`), then with sleeps from ``first_s``
    doubling to ``max_s``, the first of them timed into ``cost``; the schedule
    starts again for the next request once one completes. The policy of
    :class:`TwoPhaseBackoff` (reset on progress, as ``wait_inline``), without
    building one per call (a
    :class:`TwoPhaseBackoff` and the generic request wrappers cost more
    Python than a 1 KiB message takes on shared memory).

    Parameters
    ----------
    reqs : sequence of mpi4py.MPI.Request
        Pending or completed requests (any order; every one is completed on return).
    first_s, max_s : float
        Sleep schedule after the spin, in seconds.
    cost : SleepCost, optional
        The estimate to read and update (default :data:`SLEEP_COST`).
    nbytes : int
        Payload bytes of the operation the requests belong to (the spin
        budget grows with them, :meth:`SleepCost.spin_budget`).
    """
    spin_s = None
    for q in reqs:
        spin_s = wait_request(q, spin_s, nbytes, first_s, max_s, cost)


def wait_request(q, spin_s: float | None = None, nbytes: int = 0, first_s: float = 2e-5,
                 max_s: float = 1e-3, cost: SleepCost | None = None) -> float | None:
    """Complete one raw ``mpi4py.MPI.Request`` with the two-phase schedule of :func:`wait_mpi`,
    reading the spin budget only if the request is not complete at once, and returning it
    for the operation's next wait.

    A small persistent plan waits up to twice per step, 12 times per 1 KiB
    ring allreduce at 4 ranks: reading the budget (:meth:`SleepCost.spin_budget`,
    about 0.8 us of Python) once per operation instead of once per wait, and
    never where every message is there at the first polls (2 ranks on 2 idle
    cores), is part of what brought 1-8 KiB ``iallreduce().wait()`` at ``-np 4``
    from a median 3.2-3.7x to 2.5-2.9x MPI's p50 (docs/collectives.md,
    "Per-call overhead").

    Parameters
    ----------
    q : mpi4py.MPI.Request
        A pending or completed request (completed on return).
    spin_s : float or None
        The operation's spin budget in seconds, if an earlier wait of it has read it.
    nbytes : int
        Payload bytes of the operation (for :meth:`SleepCost.spin_budget`).
    first_s, max_s : float
        Sleep schedule after the spin, in seconds; the first sleep is timed into ``cost``.
    cost : SleepCost, optional
        The estimate to read and update (default :data:`SLEEP_COST`).

    Returns
    -------
    float or None
        ``spin_s``, read from ``cost`` here if it was None and the request had to be waited for.
    """
    if q.Test():
        return spin_s
    cost = cost or SLEEP_COST
    if spin_s is None:
        spin_s = cost.spin_budget(nbytes)
    spin_until = time.perf_counter() + spin_s
    sleep_s = first_s
    while not q.Test():
        if time.perf_counter() < spin_until:
            _yield()
            continue
        if sleep_s == first_s:
            cost.sleep(sleep_s)
        else:
            time.sleep(sleep_s)
        sleep_s = min(sleep_s * 2.0, max_s)
    return spin_s
