"""What the step loop and its hooks are given: the job's prepared setup, and one run's mutable context.

Nothing below the job receives the job: :class:`TrainSetup` holds the typed
pieces the job prepared once (communicators, transport, compute profile,
bucket plan, data, the link's alpha-beta pair, and :class:`RunSettings`, the
config keys the loop reads), and :class:`TrainContext` one synchroniser
entry's run over it. Everything that can change while a run trains (the
batch size of every worker, the learning rate, the active synchroniser) lives
in one place, :class:`BatchState` and the context's ``sync``, and every reader
(the data, the workers, the monitors' view, the report) asks it at each step,
so a change made by a policy is never read from a stale copy of the config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["RunSettings", "LinkCost", "TrainSetup", "BatchState", "StepInfo", "TrainContext"]


@dataclass(frozen=True)
class RunSettings:
    """The config keys of :class:`hpcbench.train.config.TrainConfig` that the loop, its hooks and workers read.

    Attributes
    ----------
    model : str
        Registered model name, or a user's ``package.module:callable``.
    model_options : dict
        The job's ``model_options`` (LEAF's CNN's width, a user factory's keys).
    seed : int
    compute : {"real", "emulated"}
    batch_size : int
        Samples per worker per step at the start of a run (the profile's batch).
    lr : float
        SGD learning rate at the start of a run.
    epoch_size : int or None
        Samples per epoch (None: the data has no epochs).
    warmup, iterations, batches_per_iter : int
        The measured plan (KungFu's recipe).
    monitors : tuple of str
    monitor_interval : int
    interleave_monitors : bool
    overlap : bool
    bucket_bytes : int
    progress : bool
    host_staging : bool
        Synchronisers get host copies of the buckets (:class:`hpcbench.sync.staged.HostStaged`).
    """

    model: str
    seed: int
    compute: str
    batch_size: int
    lr: float
    epoch_size: int | None
    warmup: int
    iterations: int
    batches_per_iter: int
    monitors: tuple
    monitor_interval: int
    interleave_monitors: bool
    overlap: bool
    bucket_bytes: int
    progress: bool = False
    host_staging: bool = False
    model_options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class LinkCost:
    """The links' alpha-beta pair (NaN where no single pair describes them: shared memory, a trace).

    Attributes
    ----------
    alpha_s : float
        Per-message latency (s).
    beta_s_per_byte : float
        Inverse bandwidth (s/B).
    modelled : bool
        Whether hpcbench's collectives run over the link model.
    ranks_per_host : tuple of int
        With the link modelled between hosts only (``link.scope: between_hosts``) on several hosts: the ranks of
        each host, and the summary's prediction takes the two-level model; () otherwise (one level).
    """

    alpha_s: float
    beta_s_per_byte: float
    modelled: bool
    ranks_per_host: tuple = ()


@dataclass(frozen=True)
class TrainSetup:
    """What the job prepared once, shared by every synchroniser entry's run.

    Attributes
    ----------
    comm : mpi4py.MPI.Comm
        The job's communicator (telemetry, agreement).
    sync_comm : mpi4py.MPI.Comm
        The synchronisers' communicator (a duplicate of ``comm``).
    transport : hpcbench.collectives.transport.Transport
    settings : RunSettings
    profile : hpcbench.train.steps.profile.ComputeProfile
    plan : hpcbench.train.synchronisation.buckets.BucketPlan
    bucket_need_s : ndarray of shape (n_buckets,)
    data : SyntheticImages or DigitsTask or None
        None on an emulated rank that never needs real inputs.
    dilation : hpcbench.runtime.dilation.TimeDilation
    link : LinkCost
    transport_on : callable or None
        ``transport_on(comm)``: a transport of the job's kind over another communicator (collective over it;
        an elastic resize builds one for the new worker set).
    device : hpcbench.runtime.device.Device
        This rank's device (models, buckets and batches live there).
    speed : float
        This rank's compute slowdown factor (emulated compute; 1: as profiled).
    """

    comm: Any
    sync_comm: Any
    transport: Any
    settings: RunSettings
    profile: Any
    plan: Any
    bucket_need_s: np.ndarray
    data: Any
    dilation: Any
    link: LinkCost
    transport_on: Any = None
    device: Any = None
    speed: float = 1.0

    #: link of the priority order's cost estimate where the link is not modelled (shared memory, or a
    #: time-varying trace): only the costs' ratios to each other and to the backward matter to the order
    NOMINAL_ALPHA_S, NOMINAL_BITS_PER_S = 5e-6, 10e9

    def bucket_order(self, sync, schedule: str):
        """Under ``schedule`` ``"priority"``, synchroniser ``sync``'s bucket start order (the same on every rank,
        from the broadcast profile and the synchroniser's cost model over the link,
        :func:`hpcbench.train.synchronisation.priority.priority_order`); None under FIFO or for a synchroniser that does not
        average gradients."""
        if schedule != "priority" or sync.averages != "gradients":
            return None
        from hpcbench.collectives.cost import link_beta
        from hpcbench.train.synchronisation.priority import priority_order

        alpha, beta = self.link.alpha_s, self.link.beta_s_per_byte
        if not (math.isfinite(alpha) and math.isfinite(beta)):
            alpha, beta = self.NOMINAL_ALPHA_S, link_beta(self.NOMINAL_BITS_PER_S)
        cost = [sync.message_time(sync.config, int(nb), self.comm.size, alpha, beta, self.link.ranks_per_host)
                for nb in self.plan.nbytes]
        return priority_order(self.plan.ready_times(self.profile.param_ready_s), cost, self.bucket_need_s)


@dataclass
class BatchState:
    """The one mutable place for what a policy may change between steps.

    Attributes
    ----------
    sizes : tuple of int
        Every worker's batch size, in rank order.
    lr : float
        Learning rate.
    rank : int
        This worker's index in ``sizes``.
    """

    sizes: tuple
    lr: float
    rank: int

    @property
    def local(self) -> int:
        """This worker's batch size."""
        return int(self.sizes[self.rank])

    @property
    def global_batch(self) -> int:
        """Samples per step over all workers."""
        return int(sum(self.sizes))


@dataclass(frozen=True)
class StepInfo:
    """One step of a run's plan, decided when the step is about to start.

    Attributes
    ----------
    step : int
        Step of this run, from 0.
    iteration : int
        Measured iteration (-1: warm-up).
    variant : str
        Monitor variant (``"none"``, a monitor name, or names joined by ``+``).
    last : bool
        The last step of its iteration (or of the warm-up).
    """

    step: int
    iteration: int
    variant: str
    last: bool


@dataclass
class TrainContext:
    """One synchroniser entry's run: the typed context the step loop and its hooks share.

    Attributes
    ----------
    setup : TrainSetup
    label : str
        The entry's label (the ``sync`` column of the tables).
    sync : hpcbench.sync.Synchroniser
        The active synchroniser.
    schedule : {"fifo", "priority"}
    order : sequence of int or None
        The priority schedule's bucket order (None: FIFO).
    state : BatchState
    worker : Worker or EmulatedWorker or None
        The replica (built by the loop).
    info : StepInfo or None
        The current step (None before the first).
    samples : int
        Samples trained by all workers so far in this run (the data stream's position).
    monitors_due : list
        Monitors observing the current step (chosen by the monitor hook).
    plan : object or None
        The run's plan (``variants``, ``total_steps`` where it knows them).
    elastic : hpcbench.train.adaptation.elastic.ElasticRun or None
        The run's elastic worker set (None: every rank works throughout).
    epochs_started : int
        The last epoch whose ``before_epoch`` hooks ran (-1: none yet).
    last_agreement : tuple of float
        Seconds in the policies' calls and in their agreement at the last exchange.
    upcoming : StepInfo or None
        The step about to start while the decisions due before it are applied.
    """

    setup: TrainSetup
    label: str
    sync: Any
    schedule: str
    order: Any
    state: BatchState
    worker: Any = None
    info: StepInfo | None = None
    samples: int = 0
    monitors_due: list = field(default_factory=list)
    plan: Any = None
    elastic: Any = None
    epochs_started: int = -1
    last_agreement: tuple = (0.0, 0.0)
    upcoming: StepInfo | None = None

    @property
    def comm(self):
        """The job's communicator."""
        return self.setup.comm

    @property
    def step(self) -> int:
        """The current step (0 before the first)."""
        return self.info.step if self.info is not None else 0

    @property
    def epoch(self) -> int:
        """The epoch of the next sample to train (0 when the data has no epochs)."""
        n = self.setup.settings.epoch_size
        return self.samples // n if n else 0

    def evaluate(self) -> float:
        """Held-out accuracy of this rank's replica (NaN without a real model or labels), as the next forward
        will use it (:meth:`hpcbench.train.steps.worker.Worker.settle`: a staleness-1 step stays in flight)."""
        worker = self.worker
        if worker is None or worker.model is None:
            return float("nan")
        worker.settle()
        return self.setup.data.accuracy(worker.model)
