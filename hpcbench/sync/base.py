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

Synchronisers live in ``hpcbench/sync/NAME.py`` and are registered by their
module in :data:`hpcbench.sync._MODULES`.
"""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar

if TYPE_CHECKING:   # annotations only: an emulated rank runs synchronisers on numpy buffers, without torch
    import torch

__all__ = ["Synchroniser", "SyncOptions", "Unavailable"]


class Unavailable(RuntimeError):
    """The synchroniser cannot run here (a library is missing or cannot start); the message says why."""


@dataclass(frozen=True)
class SyncOptions:
    """Settings every synchroniser may read.

    Attributes
    ----------
    algorithm : str
        hpcbench allreduce algorithm (``hpcbench.collectives`` registry name or
        ``"auto"``) for synchronisers that need one but are not named after one
        (``sma``).
    compressor : str
        Compressor name (:mod:`hpcbench.compress` registry) for ``compressed``.
    compress_ratio : float
        Fraction kept by sparsifying compressors.
    alpha : float
        SMA mixing weight (KungFu's 0.1).
    bucket_bytes : int
        Gradient bucket size in bytes (DDP's ``bucket_cap_mb`` for ``ddp``).
    seed : int
        Seed shared by all ranks (pair matchings, compressor rounding).
    """

    algorithm: str = "auto"
    compressor: str = "none"
    compress_ratio: float = 0.01
    alpha: float = 0.1
    bucket_bytes: int = 25 << 20
    seed: int = 0


class Synchroniser(ABC):
    """Brings the model replicas of data-parallel workers together, once per step.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The workers' communicator (collective construction).
    transport : hpcbench.collectives.transport.Transport or None
        How bytes move for hpcbench's own collectives (a link model, or None
        for MPI point-to-point on ``comm``).
    options : SyncOptions

    Raises
    ------
    Unavailable
        The backend cannot run in this process (e.g. Horovod not installed).
    """

    #: registry name
    name: ClassVar[str] = ""
    #: ``"gradients"``, ``"models"`` or ``"wrapped"`` (see the module docstring)
    averages: ClassVar[str] = "gradients"
    #: whether :meth:`start` accepts buffers of any content (an emulated run's gradients of
    #: the real sizes); False for wrappers that need the real model
    emulates: ClassVar[bool] = True
    #: the alpha-beta model of one call on ``nbytes`` per rank, ``p`` ranks: an
    #: allreduce algorithm's name (``hpcbench.collectives.cost.predict_allreduce``),
    #: ``"pair"`` for one exchange with one peer, or None (no model)
    cost_model: ClassVar[str | None] = None
    #: whether the bytes go through ``transport`` (so a modelled link applies to them)
    uses_transport: ClassVar[bool] = True
    #: whether :meth:`start_ordered` is available (``schedule: priority``)
    schedulable: ClassVar[bool] = False

    def __init__(self, comm, transport=None, options: SyncOptions = SyncOptions()) -> None:
        self.comm = comm
        self.transport = transport
        self.options = options

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

    def wait(self, handle: Any) -> None:
        """Complete the operation, sleeping; ``flat`` then holds the mean over workers
        (``"gradients"``) or what :meth:`mix` needs (``"models"``)."""

    def start_ordered(self, flats, order, clock):
        """Reduce every bucket of a step in the fixed ``order``, each once marked ready (``schedulable`` only).

        Parameters
        ----------
        flats : sequence of 1-D float32 tensors or numpy arrays
            The step's buckets.
        order : sequence of int
            Start order, the same on every rank
            (:func:`hpcbench.train.priority.priority_order`).
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

    # -- "wrapped" -----------------------------------------------------------------------------
    def wrap(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
             on_bucket: Callable[[torch.Tensor], None]):
        """Hand the model and optimizer to the framework; returns ``(model, optimizer)``.

        ``on_bucket(flat)`` is called with each local gradient bucket before it
        is reduced, where the framework allows it (for the local gradient norm).
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release what :meth:`__init__` started (collective)."""

    @classmethod
    def describe(cls) -> str:
        """First line of the class docstring."""
        return (cls.__doc__ or "").strip().splitlines()[0]
