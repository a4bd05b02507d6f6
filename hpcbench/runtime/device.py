"""Which compute device a rank uses: ``device: cpu | cuda | auto``, one GPU per rank.

Every runner that computes with torch (training, pipeline stages) asks
:func:`select_device` once, collectively, before it builds a model. The GPU
of a rank is its *node-local* rank modulo the GPUs the process sees, as
Horovod's and KungFu's examples pin them (``torch.cuda.set_device(
hvd.local_rank())``): the node-local rank comes from a shared-memory split of
the communicator (``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``, the ranks
that share one host's memory), so ``mpirun -np 8`` on two 4-GPU hosts puts
ranks 0-3 on GPUs 0-3 of the first host and ranks 4-7 on GPUs 0-3 of the
second. More ranks than GPUs on a host share GPUs round robin (what NCCL
refuses; host-staged synchronisers run). ``auto`` is ``cuda`` where a GPU is
visible and ``cpu`` elsewhere; ``cuda`` without a visible GPU is an input
error naming the key.

Importing this module does not import torch; :func:`visible_gpus` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcbench.runtime.errors import InputError

__all__ = ["DEVICES", "DeviceKind", "Device", "CPU", "node_local", "visible_gpus", "pick_device", "select_device"]

#: the values of a ``device`` key
DEVICES = ("cpu", "cuda", "auto")
DeviceKind = Literal["cpu", "cuda", "auto"]


@dataclass(frozen=True)
class Device:
    """The device one rank computes on.

    Attributes
    ----------
    kind : {"cpu", "cuda"}
    index : int or None
        CUDA device ordinal among the visible GPUs (None on CPU).
    local_rank, local_size : int
        This rank's index among the ranks of its host, and their number.
    gpus : int
        GPUs visible to this process (0 on a CPU-only machine).
    """

    kind: str
    index: int | None = None
    local_rank: int = 0
    local_size: int = 1
    gpus: int = 0

    @property
    def is_cuda(self) -> bool:
        """Whether tensors live on a GPU."""
        return self.kind == "cuda"

    @property
    def torch(self) -> str:
        """The ``torch.device`` string: ``"cpu"`` or ``"cuda:INDEX"``."""
        return f"cuda:{self.index}" if self.is_cuda else "cpu"

    def shares_gpu(self) -> bool:
        """Whether another rank of this host is pinned to the same GPU (more ranks than GPUs)."""
        return self.is_cuda and self.local_size > self.gpus


#: the CPU, for one process (tests, tools)
CPU = Device("cpu")


def node_local(comm) -> tuple[int, int]:
    """``(local_rank, local_size)`` of this rank among the ranks of ``comm`` that share its host's memory.

    Collective over ``comm``: one ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``
    (freed before returning).
    """
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    try:
        return int(local.rank), int(local.size)
    finally:
        local.Free()


def visible_gpus() -> int:
    """CUDA devices this process sees (``torch.cuda.device_count()``; 0 without a CUDA build of torch)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def pick_device(requested: str, local_rank: int, local_size: int, gpus: int, key: str = "device") -> Device:
    """The device of the rank at ``local_rank`` of ``local_size`` on its host, seeing ``gpus`` GPUs.

    Parameters
    ----------
    requested : {"cpu", "cuda", "auto"}
        The config value.
    local_rank, local_size : int
        Node-local rank and ranks on the host (:func:`node_local`).
    gpus : int
        Visible GPUs (:func:`visible_gpus`).
    key : str
        The config key, for the message.

    Returns
    -------
    Device
        GPU ``local_rank % gpus`` for ``cuda`` (and ``auto`` with a GPU), else the CPU.

    Raises
    ------
    InputError
        ``requested`` is ``cuda`` and ``gpus`` is 0, or not one of :data:`DEVICES`.
    """
    if requested not in DEVICES:
        raise InputError(f"{key}: {requested!r} is not one of {', '.join(DEVICES)}")
    if requested == "cuda" and gpus < 1:
        raise InputError(f"{key}: 'cuda' asks for a GPU, but none is visible to this process (torch "
                         f"{_torch_build()}; CUDA_VISIBLE_DEVICES={_cuda_visible()!r}); use device: cpu or auto")
    if requested == "cpu" or gpus < 1:
        return Device("cpu", None, local_rank, local_size, gpus)
    return Device("cuda", local_rank % gpus, local_rank, local_size, gpus)


def select_device(comm, requested: str, key: str = "device", needed: bool = True) -> Device:
    """Choose and activate this rank's device (collective over ``comm``).

    ``comm`` None: one process on its own that never starts MPI (an analysis script redrawing a job),
    picked as local rank 0 of 1 with no agreement. Otherwise every rank takes part in the node-local split and in the agreement on
    errors; a rank that computes nothing with torch (``needed`` False: an
    emulated rank that does not profile) gets the CPU without importing
    torch. ``cpu`` imports nothing either; otherwise torch is imported, the
    GPU count read, and on CUDA ``torch.cuda.set_device`` makes the chosen
    GPU current.

    Raises
    ------
    InputError
        As :func:`pick_device`, on every rank when any rank raised it
        (:func:`hpcbench.runtime.agreement.agree`).
    """
    from hpcbench.runtime.agreement import agree

    local_rank, local_size = (0, 1) if comm is None else node_local(comm)
    dev, error = Device("cpu", None, local_rank, local_size, 0), None
    if needed:
        try:
            dev = pick_device(requested, local_rank, local_size, 0 if requested == "cpu" else visible_gpus(), key)
        except InputError as exc:
            error = str(exc)
    if comm is not None:
        error = agree(comm, error)
    if error:
        raise InputError(error)
    if dev.is_cuda:
        import torch

        torch.cuda.set_device(dev.index)
    return dev


def _torch_build() -> str:
    try:
        import torch
    except ImportError:
        return "not installed"
    return f"{torch.__version__}, CUDA {torch.version.cuda or 'none'}"


def _cuda_visible() -> str:
    import os

    return os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
