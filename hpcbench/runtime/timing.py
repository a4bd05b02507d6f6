"""The one timing harness of the benchmarks: line ranks up, time, reduce over ranks.

Every benchmark measures a step the same way (OSU / nccl-tests style):

1. **line up** the ranks: a sleeping barrier (:func:`hpcbench.runtime.wait.sleep_barrier`;
   ranks arrive without burning the CPU the others need) and, by default,
   ``MPI_Barrier`` to line up the exits too: a rank still waking from its
   sleep would otherwise start up to a timer tick (~50-200 us) late, and that
   skew, not the step, would be timed;
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
           "iteration_times"]


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


def iteration_times(comm, fn: Callable[[], object], iters: int, warmup: int) -> np.ndarray:
    """Seconds of each of ``iters`` timed calls of ``fn`` after ``warmup`` untimed ones.

    Each timed call starts with the ranks lined up (:func:`line_up`); the
    result is, per iteration, the slowest rank's time (collective).

    Returns
    -------
    numpy.ndarray of float64, shape (iters,)
        Seconds, max over ranks.
    """
    for _ in range(warmup):
        fn()
    local = np.array([timed(comm, fn).wall_s for _ in range(iters)], dtype=np.float64)
    return max_over_ranks(comm, local)
