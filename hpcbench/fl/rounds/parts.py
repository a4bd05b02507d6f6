"""What a round driver is built from, and the parts of a run every driver shares (the executors' loop, the end)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hpcbench.fl.rounds.summary import Summary
from hpcbench.runtime.faults import fault_point

if TYPE_CHECKING:
    from hpcbench.fl.clock import VirtualClock
    from hpcbench.fl.contracts import Aggregator
    from hpcbench.fl.engines import ClientEngine
    from hpcbench.fl.executors.pool import ExecutorPool
    from hpcbench.fl.rounds.checkpointer import Checkpointer
    from hpcbench.fl.rounds.codecs import LinkCodecs
    from hpcbench.fl.rounds.evaluator import Evaluator
    from hpcbench.fl.rounds.recorder import RoundRecorder
    from hpcbench.fl.settings import FLSettings

__all__ = ["RoundParts", "finish", "restore", "run_executor"]


@dataclass
class RoundParts:
    """The parts of one federated run, built by the job (:func:`hpcbench.fl.job.build_rounds`) on every rank.

    Attributes
    ----------
    settings : hpcbench.fl.settings.FLSettings
    pool : hpcbench.fl.executors.pool.ExecutorPool
    engine : hpcbench.fl.engines.ClientEngine
        Trains this rank's client tasks.
    clock : hpcbench.fl.clock.VirtualClock
        Holds the selector, which rank 0 feeds back every step's outcome.
    aggregator : hpcbench.fl.contracts.Aggregator
    client_sizes : ndarray of shape (num_clients,), int64
    codecs : hpcbench.fl.rounds.codecs.LinkCodecs
    evaluator, checkpointer
        Rank 0's (None elsewhere).
    resume : dict or None
        Rank 0: the loaded checkpoint to continue from.
    resume_step : int
        The step it was taken after (every rank; 0: a new run).
    """

    settings: FLSettings
    pool: ExecutorPool
    engine: ClientEngine
    clock: VirtualClock
    aggregator: Aggregator
    client_sizes: np.ndarray
    codecs: LinkCodecs
    evaluator: Evaluator | None = None
    checkpointer: Checkpointer | None = None
    resume: dict | None = None
    resume_step: int = 0


def run_executor(parts: RoundParts) -> Summary:
    """An executor's whole run (ranks other than 0): serve each step's tasks until the last step or the stop."""
    t0 = time.perf_counter()
    parts.pool.listen()
    for step in range(parts.resume_step + 1, parts.settings.rounds.rounds + 1):
        fault_point(step)
        if not parts.pool.serve(step, parts.engine):
            break
    return finish(parts, Summary(), t0, None, None)


def restore(parts: RoundParts, recorder: RoundRecorder, summary: Summary, params: np.ndarray,
            t0: float) -> tuple[np.ndarray, bool, float]:
    """Rank 0, after opening its tables: continue from ``parts.resume`` when there is one.

    Returns the global parameters, whether the run had already stopped, and
    the start time moved back by the wall seconds already spent
    (:meth:`hpcbench.fl.rounds.checkpointer.Checkpointer.restore`); without a
    resume, ``params``, False and ``t0``.
    """
    if parts.resume is None:
        return params, False, t0
    params, stop, spent = parts.checkpointer.restore(parts.resume, parts.resume_step, recorder.results,
                                                     recorder.tables, summary)
    return params, stop, t0 - spent


def finish(parts: RoundParts, summary: Summary, t0: float, params, recorder: RoundRecorder | None) -> Summary:
    """Every rank, after its loop: rank 0 stops the executors, executors wait for the stop; the ranks table."""
    if parts.pool.rank == 0:
        parts.pool.stop()
    else:
        parts.pool.wait_stop()
    summary.wall_s = time.perf_counter() - t0
    summary.final_parameters = params if params is not None else summary.final_parameters
    rows = parts.pool.rank_rows(parts.engine.trained, parts.engine.train_wall_s)
    if parts.pool.rank == 0 and recorder is not None:
        recorder.ranks(rows)
    summary.clients_trained = parts.engine.trained
    return summary
