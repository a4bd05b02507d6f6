"""The keys of a federated job that its parts read, as frozen typed settings built once from the config.

The job (:mod:`hpcbench.fl.job`) builds :class:`FLSettings` from the
validated :class:`hpcbench.fl.config.FLConfig` with :func:`hpcbench.fl.config.fl_settings`
(the config knows the settings; the settings never import the config);
the virtual clock, the client-training engines, the executor pool and the
round drivers take the part they read, never the config itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hpcbench.fl.training_result import decayed_learning_rate


__all__ = ["ClockSettings", "FedBuffSettings", "FLSettings", "LocalTraining", "RoundSettings"]


@dataclass(frozen=True)
class LocalTraining:
    """How every client trains locally: steps, minibatch, SGD and the learning-rate schedule.

    Attributes
    ----------
    seed : int
        Seeds each client's shuffles with its stream and id.
    local_steps, batch_size : int
        Local SGD steps per client task and their minibatch size.
    learning_rate, momentum : float
        Client SGD's initial learning rate and momentum.
    decay_factor, decay_round, min_learning_rate
        FedScale's step decay (:func:`hpcbench.fl.training_result.decayed_learning_rate`).
    """

    seed: int
    local_steps: int
    batch_size: int
    learning_rate: float
    momentum: float
    decay_factor: float
    decay_round: int
    min_learning_rate: float

    def learning_rate_of(self, round_: int) -> float:
        """Client learning rate of ``round_`` (from 1): FedScale's step decay of :attr:`learning_rate`."""
        return decayed_learning_rate(self.learning_rate, round_, self.decay_factor, self.decay_round,
                                     self.min_learning_rate)


@dataclass(frozen=True)
class ClockSettings:
    """The keys the virtual clock (:class:`hpcbench.fl.clock.VirtualClock`) reads.

    ``compute_scale`` is ``traces.compute_scale`` (the job may pass the clock
    a FLOPs-scaled factor instead).
    """

    seed: int
    participants: int
    overcommitment: float
    local_steps: int
    batch_size: int
    dropouts: bool
    compute_scale: float

    @property
    def selected(self) -> int:
        """Clients selected per round: ``ceil(participants * overcommitment)``."""
        return math.ceil(self.participants * self.overcommitment)


@dataclass(frozen=True)
class FedBuffSettings:
    """FedBuff's settings (``asynchronous``), with the config's defaults resolved."""

    concurrency: int
    buffer_size: int
    max_staleness: int
    arrival_interval_s: float


@dataclass(frozen=True)
class RoundSettings:
    """What a round driver reads: how many rounds, what a round aggregates, evaluation and checkpoints.

    Attributes
    ----------
    mode : str
        The ``ROUND_DRIVERS`` name (``sync``, ``async``).
    rounds : int
        Rounds (server updates in async mode).
    participants : int
        Clients aggregated per synchronous round.
    selected : int
        Clients selected per synchronous round (``ceil(participants * overcommitment)``).
    eval_interval : int
        Rounds between evaluations; the last round is always evaluated.
    target_accuracy : float
    stop_at_target : bool
    checkpoint_interval : int
        Rounds between checkpoints (0: none).
    executor_concurrency : str or int
        ``cores``, ``all`` or a number of executors per node per round.
    summed_weighting : str or None
        ``client_updates: summed``: how executors weight their clients' updates in their sums
        (``examples`` or ``uniform``, the aggregator's ``weighting``); None for ``rows``, where every
        update travels to the aggregator.
    """

    mode: str
    rounds: int
    participants: int
    selected: int
    eval_interval: int
    target_accuracy: float
    stop_at_target: bool
    checkpoint_interval: int
    executor_concurrency: str | int
    summed_weighting: str | None = None


@dataclass(frozen=True)
class FLSettings:
    """Every part's settings of one federated job.

    Attributes
    ----------
    local : LocalTraining
    clock : ClockSettings
    rounds : RoundSettings
    fedbuff : FedBuffSettings
    engine : str
        The ``ENGINES`` name that trains clients (``client_training`` resolved).
    engine_chosen : bool
        Whether ``client_training: auto`` chose it.
    """

    local: LocalTraining
    clock: ClockSettings
    rounds: RoundSettings
    fedbuff: FedBuffSettings
    engine: str
    engine_chosen: bool
