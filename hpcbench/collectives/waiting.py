"""How a collective waits for a message: spin as long as a sleep would cost, then sleep.

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
the sleeper waited for a core: the node runs more threads than cores, the
peer a rank waits for may need the core the spinner holds, and the
competitive argument (which takes the wait as independent of the waiter)
fails; there waits spin only ``SPIN_MIN_S`` and then sleep, so the peer runs.
Before, the budget grew with the sleep cost up to 2 ms, exactly where
spinning hurts most: at load average 25-40 on the 2 cores, ring allreduce at
``-np 2`` took 22-30 ms (p50) at 1-64 KiB against 6-8.5 ms with the short
spin, and at ``-np 8`` 58 and 279 ms at 1 and 64 KiB against 18 and 64 ms
(``MPI_Allreduce``, which spins, 7-27 ms). Waits longer than the budget
sleep (growing to ``max_s``), so an oversubscribed rank that waits long
costs no CPU. The spin does not call ``sched_yield``:
on a node shared with other jobs a yield hands the core to another process
for its whole time slice, which costs as much as the sleep it was to avoid.
"""

from __future__ import annotations

import time

from hpcbench.runtime.wait import Backoff

__all__ = ["SleepCost", "SLEEP_COST", "TwoPhaseBackoff", "SPIN_MIN_S", "SPIN_MAX_S",
           "wait_mpi"]

#: shortest and longest spin budget of a wait, in seconds; a node where a short sleep costs
#: more than ``SPIN_MAX_S`` is oversubscribed, and waits there spin only ``SPIN_MIN_S``
SPIN_MIN_S, SPIN_MAX_S = 5e-5, 5e-4


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

    def spin_budget(self) -> float:
        """Seconds a waiter should spin before it sleeps.

        The estimate, at least :data:`SPIN_MIN_S`, while it is at most
        :data:`SPIN_MAX_S`; above that, :data:`SPIN_MIN_S`: a short sleep that
        costs more than half a millisecond waited for a core, the node runs
        more threads than cores, and spinning would delay the peer that the
        waiter waits for (measurements in the module docstring).
        """
        v = self.value_s
        return SPIN_MIN_S if v > SPIN_MAX_S else max(v, SPIN_MIN_S)


#: the process-wide estimate shared by every wait of the collectives
SLEEP_COST = SleepCost()


class TwoPhaseBackoff(Backoff):
    """A :class:`~hpcbench.runtime.wait.Backoff` that spins for the measured cost of a
    sleep, then sleeps from ``first_s`` doubling to ``max_s``.

    Parameters
    ----------
    first_s, max_s : float
        Sleep schedule after the spin, in seconds (``0 < first_s <= max_s``).
    cost : SleepCost, optional
        The estimate to read and update (default :data:`SLEEP_COST`).
    """

    __slots__ = ("_cost", "_spin_until")

    def __init__(self, first_s: float = 2e-5, max_s: float = 1e-3, cost: SleepCost | None = None) -> None:
        self._cost = cost or SLEEP_COST
        self._spin_until = None
        super().__init__(spin=0, first_s=first_s, max_s=max_s)

    def reset(self) -> None:
        """Start again: spin first, then the shortest sleep."""
        super().reset()
        self._spin_until = None

    def pause(self) -> None:
        """Return at once within the spin budget of this wait; then sleep (timing the first sleep)."""
        now = time.perf_counter()
        if self._spin_until is None:
            self._spin_until = now + self._cost.spin_budget()
        if now < self._spin_until:
            return
        if self._sleep_s == self.first_s:
            self._cost.sleep(self._sleep_s)
        else:
            time.sleep(self._sleep_s)
        self._sleep_s = min(self._sleep_s * 2.0, self.max_s)


def wait_mpi(reqs, first_s: float = 2e-5, max_s: float = 1e-3, cost: SleepCost | None = None) -> None:
    """Complete raw ``mpi4py.MPI.Request`` objects with the two-phase schedule, allocation-free
    while they complete during the spin.

    The waiting path of the persistent plans (:mod:`hpcbench.collectives.persistent`):
    each request is tested in turn (``Test`` on a completed request turns it
    into ``REQUEST_NULL``, or a persistent one inactive, which tests true
    again at no cost), back to back for the spin budget of
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
    """
    for q in reqs:
        if q.Test():
            continue
        cost = cost or SLEEP_COST
        spin_until = time.perf_counter() + cost.spin_budget()
        sleep_s = first_s
        while not q.Test():
            if time.perf_counter() < spin_until:
                continue
            if sleep_s == first_s:
                cost.sleep(sleep_s)
            else:
                time.sleep(sleep_s)
            sleep_s = min(sleep_s * 2.0, max_s)
