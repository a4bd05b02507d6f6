"""The contract between the training runner and a gradient synchroniser.

Data-parallel SGD keeps one model replica per worker; after each worker's
backward pass the replicas must be brought back together. A synchroniser
does that in one of three ways (its :attr:`Synchroniser.averages`):

``"gradients"``
    The runner packs the gradients into flat float32 *buckets* (DDP's
    design, Li et al., "PyTorch Distributed", VLDB 2020) and calls
    :meth:`Synchroniser.start` on each bucket as soon as backward has
    produced all of its gradients, so communication overlaps the rest of
    backward; :meth:`Synchroniser.wait` leaves the mean over workers in the
    bucket.
``"models"``
    Decentralised model averaging (KungFu's SMA, AD-PSGD's pair averaging):
    :meth:`Synchroniser.start` is given a copy of the flat parameter vector
    at the start of a step, :meth:`Synchroniser.mix` combines it with the
    communicated result once backward is done; each worker then applies its
    own gradient.
``"wrapped"``
    A framework's own data-parallel wrapper (Horovod's
    ``DistributedOptimizer``, torch's ``DistributedDataParallel``) takes over
    the model and the optimizer (:meth:`Synchroniser.wrap`).

Synchronisers live in ``hpcbench/sync/NAME.py`` and are registered by one
line in :data:`hpcbench.sync.SYNCHRONISERS`. Each declares what it can do as
class attributes (the runner reads them, never a synchroniser's name) and its
options as its ``Config`` section (``sync: [{name: sma, alpha: 0.1}]``,
built through :func:`hpcbench.runtime.config.strategy_section`): a
synchroniser is built from its own section plus the few job facts its
constructor names (bucket size, seed), never from the whole job config.
"""

from __future__ import annotations

import math
from abc import ABC
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Optional

from pydantic import Field

from hpcbench.runtime.config import StrategyConfig

if TYPE_CHECKING:   # annotations only: an emulated rank runs synchronisers on numpy buffers, without torch
    import torch

__all__ = ["Synchroniser", "SyncConfig", "Unavailable", "allreduce_time"]


class Unavailable(RuntimeError):
    """The synchroniser cannot run here (a library is missing or cannot start); the message says why."""


class SyncConfig(StrategyConfig):
    """Keys of every synchroniser entry (``sync: [{name: NAME, ...}]``); a synchroniser with options of its own
    declares them in a subclass, its ``Config``."""

    schedule: Optional[Literal["fifo", "priority"]] = Field(
        None, description="bucket schedule of this entry (default: the job's schedule); ring:priority is short for "
                          "{name: ring, schedule: priority}")
    label: Optional[str] = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:+\-]+$",
                                 description="the entry's name in tables and output (default NAME, or "
                                             "NAME:SCHEDULE when a schedule is given)")

    def entry_label(self) -> str:
        """``label``, or ``NAME`` / ``NAME:SCHEDULE``."""
        name = getattr(self, "name", "")
        return self.label or (f"{name}:{self.schedule}" if self.schedule else name)


def allreduce_time(algorithm: str, nbytes: int, world_size: int, alpha_s: float, beta_s_per_byte: float,
                   ranks_per_host=()) -> float:
    """Alpha-beta seconds of one allreduce of ``nbytes`` per rank on ``world_size`` ranks (0 when ``world_size == 1`` or nothing
    is sent), :func:`hpcbench.collectives.cost.predict_allreduce`; with ``ranks_per_host`` of several hosts (summing to
    ``world_size``) the two-level model of a link modelled between hosts only, messages inside a host free
    (:func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`)."""
    if world_size == 1 or nbytes == 0:
        return 0.0
    hosts = tuple(int(k) for k in ranks_per_host)
    if len(hosts) > 1 and sum(hosts) == world_size:
        from hpcbench.collectives.linkcost import HostLinks, predict_allreduce_hosts

        return predict_allreduce_hosts(algorithm, int(nbytes), HostLinks(hosts, 0.0, 0.0, alpha_s, beta_s_per_byte))
    from hpcbench.collectives.cost import predict_allreduce

    return predict_allreduce(algorithm, int(nbytes), world_size, alpha_s, beta_s_per_byte)


class Synchroniser(ABC):
    """Brings the model replicas of data-parallel workers together, once per step.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The workers' communicator (collective construction).
    transport : hpcbench.collectives.transport.Transport or None
        How bytes move for hpcbench's own collectives (a link model, or None
        for MPI point-to-point on ``comm``).
    config : SyncConfig, optional
        Its own section (an instance of its ``Config``); default: the defaults.
    bucket_bytes : int, keyword-only
        Gradient bucket capacity in bytes (DDP's ``bucket_cap_mb``, Horovod's fusion threshold).
    seed : int, keyword-only
        Seed shared by all ranks (pair matchings, compressor rounding).
    device : hpcbench.runtime.device.Device, keyword-only, optional
        This rank's device (default: the CPU). Synchronisers that average
        ``"gradients"`` or ``"models"`` only ever see host buffers (on a GPU
        the runner stages them, :class:`hpcbench.sync.staged.HostStaged`);
        ``"wrapped"`` ones get the model on this device.

    Raises
    ------
    Unavailable
        The backend cannot run in this process (e.g. Horovod not installed).
    """

    #: its config section (options of its own, beside :class:`SyncConfig`'s)
    Config: ClassVar[type[SyncConfig]] = SyncConfig
    #: registry name
    name: ClassVar[str] = ""
    #: ``"gradients"``, ``"models"`` or ``"wrapped"`` (see the module docstring)
    averages: ClassVar[str] = "gradients"
    #: whether :meth:`start` accepts buffers of any content (an emulated run's gradients of
    #: the real sizes); False for wrappers that need the real model
    emulates: ClassVar[bool] = True
    #: the name of its alpha-beta cost model, or None (no model): by default an allreduce algorithm whose
    #: model (``hpcbench.collectives.cost.predict_allreduce``) times :meth:`message_time`; a synchroniser
    #: with another model (``pair``) names it and overrides :meth:`message_time`
    cost_model: ClassVar[str | None] = None
    #: whether the bytes go through ``transport`` (so a modelled link applies to them)
    uses_transport: ClassVar[bool] = True
    #: whether :meth:`start_ordered` is available (``schedule: priority``)
    schedulable: ClassVar[bool] = False
    #: ``"wrapped"``: whether :meth:`wrap` hands ``on_bucket`` each local gradient bucket (so the
    #: local gradient norm is measured)
    sees_local_buckets: ClassVar[bool] = False
    #: whether :meth:`use_algorithm` can switch its allreduce algorithm between steps (its ``algorithm``)
    switches_algorithm: ClassVar[bool] = False

    def __init__(self, comm, transport=None, config: SyncConfig | None = None, *, bucket_bytes: int = 25 << 20,
                 seed: int = 0, device=None) -> None:
        from hpcbench.runtime.device import CPU

        self.comm = comm
        self.transport = transport
        self.config = config if config is not None else self.Config()
        self.bucket_bytes, self.seed = int(bucket_bytes), int(seed)
        self.device = device if device is not None else CPU

    @classmethod
    def message_time(cls, config: SyncConfig, nbytes: int, world_size: int, alpha_s: float, beta_s_per_byte: float,
                     ranks_per_host=()) -> float:
        """Alpha-beta seconds of one synchronisation of ``nbytes`` per rank on ``world_size`` ranks (NaN: no model).

        Parameters
        ----------
        config : SyncConfig
            The entry's section (a synchroniser whose algorithm is an option reads it).
        nbytes : int
            Bytes per rank (a bucket, or the model).
        world_size : int
            Ranks of the synchronising communicator (the active workers).
        alpha_s, beta_s_per_byte : float
            Link latency (s) and inverse bandwidth (s/B).
        ranks_per_host : tuple of int, optional
            The hosts of a link modelled between hosts only (``link.scope: between_hosts``), when there are
            several: the two-level model prices the allreduce (:func:`allreduce_time`); () for one level.
        """
        if cls.cost_model is None:
            return math.nan
        return allreduce_time(cls.cost_model, nbytes, world_size, alpha_s, beta_s_per_byte, ranks_per_host)

    # -- "gradients" and "models" ------------------------------------------------------------
    def start(self, flat: torch.Tensor, index: int) -> Any:
        """Start reducing ``flat`` (1-D float32 tensor or numpy array, contiguous) in place; returns a handle.

        ``index`` numbers the buffers of one step (bucket 0, 1, ...); every
        rank starts the same buffers in the same order.
        """
        raise NotImplementedError(f"{self.name}: averages {self.averages}, has no start()")

    def test(self, handle: Any) -> bool:
        """Advance the operation (never blocks); True once it is complete."""
        return True

    def wait(self, handle: Any) -> Any:
        """Complete the operation, sleeping; ``flat`` then holds the mean over workers
        (``"gradients"``) or what :meth:`mix` needs (``"models"``). Returns None, or with a
        :meth:`sparse_optimizer` the sparse sum over ranks (``flat`` unchanged)."""

    def start_ordered(self, flats, order, clock):
        """Reduce every bucket of a step in the fixed ``order``, each once marked ready (``schedulable`` only).

        Parameters
        ----------
        flats : sequence of 1-D float32 tensors or numpy arrays
            The step's buckets.
        order : sequence of int
            Start order, the same on every rank
            (:func:`hpcbench.train.synchronisation.priority.priority_order`).
        clock : callable
            ``clock() -> float`` seconds for the start and completion times.

        Returns
        -------
        hpcbench.collectives.ordered.OrderedAllreduce
            ``mark_ready(i)``, ``done(i)``, ``wait_one(i)``, ``wait()``,
            ``started_at``, ``completed_at``; buckets hold the mean over workers
            once done.
        """
        raise NotImplementedError(f"{self.name}: no ordered start (schedule: priority)")

    # -- "models" ------------------------------------------------------------------------------
    def mix(self, params: torch.Tensor, communicated: torch.Tensor, step: int) -> None:
        """Write the averaged model into ``params`` (1-D float32) from the completed buffer."""
        raise NotImplementedError

    def mix_memory_s(self, profile) -> float:
        """What :meth:`mix` costs on the profiled device, from its memory passes over the model.

        Parameters
        ----------
        profile : hpcbench.train.steps.profile.ComputeProfile
            Its ``copy_s``, ``scale_s`` and ``axpy_s`` (seconds per pass over
            the flat model).

        Returns
        -------
        float
            Seconds; the emulated worker sleeps them after :meth:`wait`,
            where the real worker mixes (:mod:`hpcbench.train.steps.emulated`).
            0 for a synchroniser that averages gradients or is wrapped (it
            mixes nothing).

        Raises
        ------
        NotImplementedError
            A ``"models"`` synchroniser that does not say what its mix costs.
        """
        if self.averages != "models":
            return 0.0
        raise NotImplementedError(f"{self.name}: averages models, has no mix_memory_s()")

    # -- "wrapped" -----------------------------------------------------------------------------
    def wrap(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
             on_bucket: Callable[[torch.Tensor], None]):
        """Hand the model and optimizer to the framework; returns ``(model, optimizer)``.

        ``on_bucket(flat)`` is called with each local gradient bucket before it
        is reduced, where the framework allows it (for the local gradient norm).
        """
        raise NotImplementedError

    def use_algorithm(self, algorithm) -> None:
        """Reduce with allreduce algorithm ``algorithm`` (a registered name, ``"auto"``, or a mapping of the
        name and its options) from the next start on (``switches_algorithm`` only; every rank switches before
        the same step).

        Raises
        ------
        ValueError
            It cannot switch, or the name is not registered.
        """
        raise ValueError(f"{self.name}: cannot switch its allreduce algorithm")

    @classmethod
    def adjusts_ratio(cls, config: SyncConfig) -> bool:
        """Whether an entry of section ``config`` can change the fraction of gradient elements it sends between
        steps (:meth:`use_ratio`)."""
        return False

    def use_ratio(self, ratio: float) -> None:
        """Send the fraction ``ratio`` of the gradient's elements from the next start on (:meth:`adjusts_ratio`
        only; every rank changes before the same step).

        Raises
        ------
        ValueError
            It cannot change it, or ``ratio`` is not in (0, 1].
        """
        raise ValueError(f"{self.name}: cannot change the fraction of the gradient it sends")

    @property
    def staleness(self) -> int:
        """Steps by which the replica's parameters may lag its gradients (0: every step's update is applied
        before the next forward; 1: StellaTrain's pipeline, see :class:`hpcbench.sync.compressed.CompressedSync`)."""
        return 0

    def sparse_optimizer(self, lr: float):
        """The CPU sparse optimizer that applies this synchroniser's sparse results, or None (the runner's dense
        torch optimizer applies the reduced buckets).

        With one, :meth:`wait` returns each bucket's sparse sum over ranks (an object with ``parts`` and
        ``numel``, :func:`hpcbench.optim.coalesce`) and leaves the bucket as it was.
        """
        return None

    @property
    def ratio(self) -> float:
        """Fraction of the gradient's elements sent (1: uncompressed; the telemetry's ``ratio``)."""
        return 1.0

    def close(self) -> None:
        """Release what :meth:`__init__` started (collective)."""

    @classmethod
    def describe(cls) -> str:
        """First line of the class docstring."""
        return (cls.__doc__ or "").strip().splitlines()[0]
