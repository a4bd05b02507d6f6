"""The one timing harness of the benchmarks: line ranks up, time, reduce over ranks.

Every benchmark measures a step the same way (OSU / nccl-tests style):

1. **line up** the ranks: a sleeping barrier (:func:`hpcbench.runtime.wait.sleep_barrier`;
   ranks arrive without burning the CPU the others need) and, by default,
   ``MPI_Barrier`` to line up the exits too: a rank still waking from its
   sleep would otherwise start up to a timer tick (~50-200 us) late, and that
   skew, not the step, would be timed (:func:`iteration_times`, for calls
   short enough to repeat many times, lines up once per block of calls and
   makes one untimed call after it: a call right after a sleep is slower);
2. **time** the step on each rank (``time.perf_counter`` wall seconds and,
   outside the wall interval, ``time.thread_time`` CPU seconds);
3. **reduce** over ranks: a step lasts as long as its slowest rank
   (:func:`max_over_ranks`); other statistics take their own reducer
   (:func:`reduce_over_ranks`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

__all__ = ["Timed", "line_up", "timed", "max_over_ranks", "min_over_ranks", "reduce_over_ranks",
           "iteration_times", "LINEUP_BLOCK"]


@dataclass(frozen=True)
class Timed:
    """One rank's measurement of one step.

    Attributes
    ----------
    wall_s : float
        Wall seconds of the step on this rank.
    cpu_s : float
        CPU seconds of the calling thread during the step.
    """

    wall_s: float
    cpu_s: float


def line_up(comm, exits: bool = True) -> None:
    """Sleeping barrier, then (``exits``) ``MPI_Barrier`` so that every rank leaves together."""
    from hpcbench.runtime.wait import sleep_barrier

    sleep_barrier(comm)
    if exits:
        comm.Barrier()


def timed(comm, fn: Callable[[], object], exits: bool = True) -> Timed:
    """Line the ranks up (:func:`line_up`), then time ``fn()`` on this rank (collective)."""
    line_up(comm, exits)
    c0, t0 = time.thread_time(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return Timed(wall, time.thread_time() - c0)


def _reduce(comm, values, op) -> np.ndarray:
    mine = np.asarray(values, dtype=np.float64)
    out = np.empty_like(mine)
    comm.Allreduce(mine, out, op=op)
    return out


def max_over_ranks(comm, values) -> np.ndarray:
    """Element-wise maximum over ranks of ``values`` (float64, any shape; collective)."""
    from mpi4py import MPI

    return _reduce(comm, values, MPI.MAX)


def min_over_ranks(comm, values) -> np.ndarray:
    """Element-wise minimum over ranks of ``values`` (float64, any shape; collective)."""
    from mpi4py import MPI

    return _reduce(comm, values, MPI.MIN)


def reduce_over_ranks(comm, row: Sequence[float],
                      reducers: Sequence[Callable[[list], float]]) -> list[float]:
    """Statistic ``i`` of every rank's ``row`` reduced with ``reducers[i]`` (collective).

    For statistics that need different reductions (the slowest rank's wall
    time, the mean CPU time); one ``allgather`` of the rows.
    """
    rows = comm.allgather(tuple(row))
    return [red([r[i] for r in rows]) for i, red in enumerate(reducers)]


#: timed calls of :func:`iteration_times` per sleeping line-up
LINEUP_BLOCK = 10


def iteration_times(comm, fn: Callable[[], object], iters: int, warmup: int,
                    block: int = LINEUP_BLOCK) -> np.ndarray:
    """Seconds of each of ``iters`` timed calls of ``fn`` after ``warmup`` untimed ones.

    OSU style: every timed call follows an ``MPI_Barrier``. Every ``block``
    timed calls the ranks first line up in the sleeping barrier
    (:func:`line_up`; a rank that waits there long costs no CPU) and make one
    untimed call: the first call after a sleep finds the caches and the core
    cold (measured at 1 KiB, 2 ranks: MPI's ``Allreduce`` 14.1 us right after
    the line-up against 8.2 us in a plain barrier-and-call loop, and 8.4 us
    after one untimed call), so timing it would measure the line-up, not the
    collective. The result is, per iteration, the slowest rank's time
    (collective).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        Every rank calls this with the same ``iters``, ``warmup`` and ``block``.
    fn : callable
        ``fn()`` runs the operation once (collective over ``comm``).
    iters, warmup : int
        Timed calls (>= 1) and untimed calls before them (>= 0).
    block : int
        Timed calls per sleeping line-up (>= 1).

    Returns
    -------
    numpy.ndarray of float64, shape (iters,)
        Seconds, max over ranks.
    """
    for _ in range(warmup):
        fn()
    local = np.empty(iters, dtype=np.float64)
    clock = time.perf_counter
    for i in range(iters):
        if i % block == 0:
            line_up(comm)
            fn()
        comm.Barrier()
        t0 = clock()
        fn()
        local[i] = clock() - t0
    return max_over_ranks(comm, local)
